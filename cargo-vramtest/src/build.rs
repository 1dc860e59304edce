//! Builds the selected test targets with `cargo test --no-run` and finds their
//! executables in cargo's JSON messages. cargo's own messages (warnings, errors, the
//! `Compiling` lines) reach the user as cargo printed them.

use crate::case::Binary;
use crate::discover::{Package, Workspace, cargo};
use crate::error::{Error, Result};
use crate::progress::Progress;
use cargo_metadata::{Message, TargetKind};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// The arguments of `cargo test --no-run` for these packages, ending with `flags`
/// (features, profile, `--locked`, …).
pub fn cargo_args(ws: &Workspace, flags: &[String], color: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
        "--color",
        color,
        "--manifest-path",
    ]
    .map(String::from)
    .into();
    args.push(ws.manifest.display().to_string());
    for p in &ws.packages {
        args.push("--package".into());
        args.push(format!("{}@{}", p.name, p.version));
    }
    // The library's tests by `--lib` (cargo's name for them), the others by `--test`.
    if ws.packages.iter().any(|p| p.lib.is_some()) {
        args.push("--lib".into());
    }
    let targets: std::collections::BTreeSet<&String> = ws
        .packages
        .iter()
        .flat_map(|p| p.targets.iter().filter(|t| p.lib.as_ref() != Some(*t)))
        .collect();
    for t in targets {
        args.push("--test".into());
        args.push(t.clone());
    }
    args.extend(flags.iter().cloned());
    args
}

/// Builds the workspace's vramtest targets with cargo's `flags`; returns one executable
/// per target, in package then target order.
pub fn build(
    ws: &Workspace,
    flags: &[String],
    color: &str,
    progress: &Progress,
) -> Result<Vec<Binary>> {
    let args = cargo_args(ws, flags, color);
    let mut cmd = Command::new(cargo());
    cmd.args(&args)
        .current_dir(&ws.root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    // On a terminal cargo's lines go above our spinner; elsewhere they pass through.
    cmd.stderr(if progress.is_bar() {
        Stdio::piped()
    } else {
        Stdio::inherit()
    });
    progress.spin("Building test targets");
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        program: "cargo test --no-run".into(),
        source,
    })?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take();
    let mut binaries = Vec::new();
    std::thread::scope(|s| {
        if let Some(stderr) = stderr {
            s.spawn(|| {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    progress.println(line);
                }
            });
        }
        for message in Message::parse_stream(BufReader::new(stdout)).flatten() {
            if let Message::CompilerArtifact(artifact) = message {
                progress.set_message(format!("Building: {}", artifact.target.name));
                let Some(exe) = artifact.executable else {
                    continue;
                };
                // A test target, or a library built for its tests (`--lib`).
                let lib_tests = artifact.profile.test && artifact.target.is_lib();
                if !artifact.target.kind.contains(&TargetKind::Test) && !lib_tests {
                    continue;
                }
                if let Some(pkg) = owner(
                    &ws.packages,
                    &artifact.package_id.repr,
                    &artifact.target.name,
                ) {
                    binaries.push(Binary {
                        package: pkg.name.clone(),
                        target: artifact.target.name.clone(),
                        path: exe.into_std_path_buf(),
                        package_dir: pkg.dir.clone(),
                        package_version: pkg.version.clone(),
                    });
                }
            }
        }
    });
    let status = child.wait().map_err(|source| Error::Spawn {
        program: "cargo test --no-run".into(),
        source,
    })?;
    progress.finish();
    if !status.success() {
        return Err(Error::Build);
    }
    binaries.sort_by(|a, b| (&a.package, &a.target).cmp(&(&b.package, &b.target)));
    binaries.dedup_by(|a, b| a.package == b.package && a.target == b.target);
    Ok(binaries)
}

/// The selected package that owns an artifact, when the artifact is one of its
/// vramtest targets.
fn owner<'a>(packages: &'a [Package], package_id: &str, target: &str) -> Option<&'a Package> {
    packages
        .iter()
        .find(|p| p.id == package_id && p.targets.iter().any(|t| t == target))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_model::settings::Settings;

    fn ws() -> Workspace {
        let pkg = |name: &str, targets: &[&str]| Package {
            name: name.into(),
            id: format!("path+file:///w/{name}#0.1.0"),
            version: "0.1.0".into(),
            dir: format!("/w/{name}").into(),
            targets: targets.iter().map(|t| t.to_string()).collect(),
            lib: None,
            settings: Settings::default(),
        };
        Workspace {
            root: "/w".into(),
            manifest: "/w/Cargo.toml".into(),
            packages: vec![pkg("a", &["vram"]), pkg("b", &["vram", "mem"])],
            target_dir: "/w/target".into(),
        }
    }

    #[test]
    fn builds_only_our_targets_with_the_flags_given() {
        let flags: Vec<String> = ["--features", "x,y,z", "--no-default-features", "--release"]
            .map(String::from)
            .into();
        let args = cargo_args(&ws(), &flags, "never").join(" ");
        assert_eq!(
            args,
            "test --no-run --message-format=json-render-diagnostics --color never \
             --manifest-path /w/Cargo.toml --package a@0.1.0 --package b@0.1.0 \
             --test mem --test vram --features x,y,z --no-default-features --release"
        );
    }

    #[test]
    fn finds_the_owner_of_an_artifact() {
        let ws = ws();
        let owner = |id, t| owner(&ws.packages, id, t).map(|p| p.name.as_str());
        assert_eq!(owner("path+file:///w/b#0.1.0", "mem"), Some("b"));
        assert_eq!(owner("path+file:///w/a#0.1.0", "vram"), Some("a"));
        assert_eq!(owner("path+file:///w/a#0.1.0", "mem"), None);
        assert_eq!(owner("registry+https://x#c@1.0.0", "vram"), None);
    }
}
