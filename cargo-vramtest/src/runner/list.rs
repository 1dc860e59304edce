//! Listing: the tests of each built binary, as libtest lists them
//! (`--list --format terse`), and the command a test binary runs under, set up as
//! `cargo test` sets it up.

use crate::case::{Binary, TestCase};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use vramtest_model::env::HarnessEnv;

/// The environment for the tests of each package, by package name.
pub type PackageEnv = BTreeMap<String, HarnessEnv>;

/// The names in libtest's `--list --format terse` output (`<name>: test` lines).
pub fn parse_terse(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_owned)
        .collect()
}

/// Lists the tests of each binary (`--list --format terse`, then with `--ignored`),
/// sorted by binary then name.
pub fn list(binaries: &[Binary], env: &PackageEnv) -> Result<Vec<TestCase>> {
    let mut cases = Vec::new();
    for binary in binaries {
        let binary = Arc::new(binary.clone());
        let all = parse_terse(&list_output(&binary, env, false)?);
        let ignored = parse_terse(&list_output(&binary, env, true)?);
        let mut names = all;
        names.sort();
        names.dedup();
        cases.extend(names.into_iter().map(|name| TestCase {
            ignored: ignored.contains(&name),
            include_ignored: false,
            binary: Arc::clone(&binary),
            name,
        }));
    }
    cases.sort_by(|a, b| (a.binary.id(), &a.name).cmp(&(b.binary.id(), &b.name)));
    Ok(cases)
}

pub(super) fn list_output(binary: &Binary, env: &PackageEnv, ignored: bool) -> Result<String> {
    let mut cmd = command(binary, &harness_env(env, binary));
    cmd.args(["--list", "--format", "terse"]);
    if ignored {
        cmd.arg("--ignored");
    }
    let out = cmd.output().map_err(|e| Error::List {
        binary: binary.path.clone(),
        message: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(Error::List {
            binary: binary.path.clone(),
            message: format!(
                "{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What the tests of `binary`'s package get.
pub(super) fn harness_env(env: &PackageEnv, binary: &Binary) -> HarnessEnv {
    env.get(&binary.package).cloned().unwrap_or_default()
}

/// A command for a test binary, set up as `cargo test` would run it, with `env`.
pub(super) fn command(binary: &Binary, env: &HarnessEnv) -> Command {
    let mut cmd = Command::new(&binary.path);
    cmd.current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env("CARGO_PKG_NAME", &binary.package)
        .env("CARGO_PKG_VERSION", &binary.package_version)
        .stdin(Stdio::null());
    cmd.envs(env.to_vars());
    if env.measure_at.is_none() {
        // A point the user's shell sets is `measure`'s to hand down, never a run's.
        cmd.env_remove(vramtest_model::env::MEASURE_AT);
    }
    // Dynamic libraries of the build (a `dylib` dependency) next to the binary.
    if let Some(deps) = binary.path.parent() {
        let var = dylib_path_var();
        let mut paths = vec![deps.to_path_buf()];
        if let Some(profile) = deps.parent() {
            paths.push(profile.to_path_buf());
        }
        paths.extend(std::env::var_os(var).iter().flat_map(std::env::split_paths));
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env(var, joined);
        }
    }
    cmd
}

fn dylib_path_var() -> &'static str {
    if cfg!(windows) {
        "PATH"
    } else if cfg!(target_os = "macos") {
        "DYLD_FALLBACK_LIBRARY_PATH"
    } else {
        "LD_LIBRARY_PATH"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libtests_terse_list() {
        let text = "mlp_adamw: test\nnested::mlp_sgd: test\nbench_x: benchmark\n\n";
        assert_eq!(parse_terse(text), ["mlp_adamw", "nested::mlp_sgd"]);
        assert!(parse_terse("").is_empty());
    }
}
