//! Listing: the tests of each built binary, as libtest lists them
//! (`--list --format terse`).

use super::command::{PackageEnv, command, harness_env};
use crate::case::{Binary, TestCase};
use crate::error::{Error, Result};
use std::sync::Arc;

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
