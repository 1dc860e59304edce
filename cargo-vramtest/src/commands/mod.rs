//! One module per subcommand, each with its `execute` (`accept` holds `accept` and
//! `reject`); here, what several of them share: the environment handed to the tests,
//! the device a run measures on and finding the tests to run. `run` and `merge` hand
//! their reports to [`crate::output::sinks`], which also writes `show --svg`'s file.

pub mod accept;
pub mod list;
pub mod measure;
pub mod merge;
pub mod review;
pub mod run;
pub mod show;

use crate::case::TestCase;
use crate::cli::{BuildArgs, ExecArgs, FilterArgs};
use crate::discover::Workspace;
use crate::error::{Error, Result};
use crate::filter;
use crate::output::sinks::write_file;
use crate::progress::Progress;
use crate::{build, runner};
use std::path::Path;
use vramtest_model::env::HarnessEnv;
use vramtest_model::settings::DeviceSetting;

/// cargo's `--color` for its messages on our stderr.
fn cargo_color() -> &'static str {
    match anstream::AutoStream::choice(&std::io::stderr()) {
        anstream::ColorChoice::Never => "never",
        _ => "always",
    }
}

/// The environment the user set (`VRAMTEST_*`, `INSTA_UPDATE`, `CI`), read and checked
/// before anything is built: a value outside its set is an error here, not in every
/// test (the harness reads it with the same code).
fn user_env() -> Result<HarnessEnv> {
    HarnessEnv::from_env().map_err(|e| Error::Environment {
        message: e.to_string(),
    })
}

/// The environment each package's tests get: the user's, with the settings read from
/// its metadata, the command line's `--check`, `--strict` and `--device`, and the
/// device decided for it ([`HarnessEnv::device_for`]: `--device`, else
/// `VRAMTEST_DEVICE`, else the package's `device`, else `auto`).
fn package_env(ws: &Workspace, exec: &ExecArgs, user: &HarnessEnv) -> runner::PackageEnv {
    ws.packages
        .iter()
        .map(|p| {
            let mut env = HarnessEnv {
                settings: Some(p.settings.clone()),
                device: exec.device.or(user.device),
                check: user.check || exec.check,
                strict: user.strict || exec.strict,
                // Only `measure` measures a point: every other command judges.
                measure_at: None,
                measure_levels: Default::default(),
                ..user.clone()
            };
            env.device = Some(env.device_for(&p.settings));
            (p.name.clone(), env)
        })
        .collect()
}

/// The device the run measures on, for the pre-flight check and the default of `-j`:
/// the CPU when every package measures on it, CUDA when one asks for it, else `auto`.
fn run_device(env: &runner::PackageEnv) -> DeviceSetting {
    let devices: Vec<Option<DeviceSetting>> = env.values().map(|e| e.device).collect();
    if devices.iter().all(|d| *d == Some(DeviceSetting::Cpu)) {
        DeviceSetting::Cpu
    } else if devices.contains(&Some(DeviceSetting::Cuda)) {
        DeviceSetting::Cuda
    } else {
        DeviceSetting::Auto
    }
}

/// Builds and lists the tests of `ws`, then applies the filters and the partition.
/// Returns each test to run with its shard.
fn find_tests(
    ws: &Workspace,
    build: &BuildArgs,
    filter_args: &FilterArgs,
    env: &runner::PackageEnv,
) -> Result<Vec<(TestCase, Option<u64>)>> {
    let progress = Progress::new();
    let binaries = build::build(ws, &build.test_flags(), cargo_color(), &progress)?;
    let all = runner::list(&binaries, env)?;
    check_shared_snapshots(&all)?;
    let names: Vec<filter::TestName<'_>> = all.iter().map(TestCase::test_name).collect();
    if let Some(typo) = filter::unmatched(&names, &filter_args.filters, filter_args.exact).first() {
        return Err(Error::NoMatch {
            filter: (*typo).to_owned(),
            among: format!("the tests of {}", ws.root.display()),
            closest: filter::closest(&names, typo),
        });
    }
    let cases: Vec<TestCase> = all
        .iter()
        .filter(|c| c.matches(&filter_args.filters, filter_args.exact))
        .cloned()
        .collect();
    let cases = crate::case::choose_ignored(cases, filter_args.run_ignored);
    let Some(partition) = filter_args.partition else {
        return Ok(cases.into_iter().map(|c| (c, None)).collect());
    };
    Ok(partition
        .this_shard(cases)
        .into_iter()
        .map(|(c, s)| (c, Some(s)))
        .collect())
}

/// Two tests of one package, in one target or in two, whose snapshot files would be
/// one (`vram__x` with `y`, and `vram` with `x::y`): an error before anything runs.
fn check_shared_snapshots(all: &[TestCase]) -> Result<()> {
    let mut packages: Vec<&Path> = all.iter().map(|c| c.binary.package_dir.as_path()).collect();
    packages.sort();
    packages.dedup();
    for package_dir in packages {
        let tests = all
            .iter()
            .filter(|c| c.binary.package_dir == package_dir)
            .map(|c| (c.binary.target.as_str(), c.name.as_str()));
        let shared = vramtest_model::snapshot::shared_files(tests);
        if !shared.is_empty() {
            return Err(Error::SharedSnapshot {
                package_dir: package_dir.to_owned(),
                shared,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::Package;
    use std::collections::HashMap;
    use std::ffi::OsString;
    use vramtest_model::settings::Settings;

    /// A workspace of packages, each with the `device` its metadata sets.
    fn ws(devices: &[Option<DeviceSetting>]) -> Workspace {
        let packages = devices
            .iter()
            .enumerate()
            .map(|(i, device)| Package {
                name: format!("p{i}"),
                id: format!("path+file:///w/p{i}#0.1.0"),
                version: "0.1.0".into(),
                dir: format!("/w/p{i}").into(),
                targets: vec!["vram".into()],
                lib: None,
                settings: Settings {
                    device: *device,
                    iterations: Some(i as u32 + 1),
                    ..Settings::default()
                },
            })
            .collect();
        Workspace {
            root: "/w".into(),
            manifest: "/w/Cargo.toml".into(),
            packages,
            target_dir: "/w/target".into(),
        }
    }

    /// What the harness of `package` reads back from the variables it is handed.
    fn harness_reads(env: &runner::PackageEnv, package: &str) -> HarnessEnv {
        let vars: HashMap<&str, OsString> = env[package].to_vars().into_iter().collect();
        HarnessEnv::from_lookup(|name| vars.get(name).cloned()).unwrap()
    }

    #[test]
    fn each_package_gets_its_settings_and_the_device_decided_for_it() {
        use DeviceSetting::{Auto, Cpu, Cuda};
        let ws = ws(&[Some(Cpu), Some(Cuda), None]);
        // (command line, user's VRAMTEST_DEVICE, each package's device, the run's)
        let table = [
            (None, None, [Cpu, Cuda, Auto], Cuda),
            (None, Some(Cpu), [Cpu, Cpu, Cpu], Cpu),
            (Some(Auto), Some(Cpu), [Auto, Auto, Auto], Auto),
            (Some(Cpu), None, [Cpu, Cpu, Cpu], Cpu),
        ];
        for (flag, user_device, expected, run) in table {
            let exec = ExecArgs {
                device: flag,
                strict: true,
                ..ExecArgs::default()
            };
            let user = HarnessEnv {
                device: user_device,
                ..HarnessEnv::default()
            };
            let env = package_env(&ws, &exec, &user);
            assert_eq!(env.len(), ws.packages.len());
            for (package, device) in ws.packages.iter().zip(expected) {
                let read = harness_reads(&env, &package.name);
                assert_eq!(read, env[&package.name], "{}", package.name);
                assert_eq!(read.settings.as_ref(), Some(&package.settings));
                assert!(read.strict && !read.check);
                // The harness decides the same device with the same function.
                assert_eq!(
                    read.device_for(&package.settings),
                    device,
                    "{flag:?} {user_device:?}"
                );
            }
            assert_eq!(run_device(&env), run, "{flag:?} {user_device:?}");
        }
    }

    #[test]
    fn the_users_check_mode_and_updates_reach_the_harness() {
        let user = HarnessEnv::from_lookup(|name| match name {
            "CI" => Some("true".into()),
            "INSTA_UPDATE" => Some("new".into()),
            _ => None,
        })
        .unwrap();
        let env = package_env(&ws(&[None]), &ExecArgs::default(), &user);
        let read = harness_reads(&env, "p0");
        assert!(read.check);
        assert_eq!(read.update(), vramtest_model::env::Update::New);
    }
}
