//! One module per subcommand, each with its `execute` (`accept` holds `accept` and
//! `reject`); here, what several of them share: the environment handed to the tests,
//! the device a run measures on, finding the tests to run, and writing files.

pub mod accept;
pub mod list;
pub mod merge;
pub mod review;
pub mod run;
pub mod show;

use crate::case::TestCase;
use crate::cli::{BuildArgs, ExecArgs, FilterArgs};
use crate::discover::Workspace;
use crate::error::{Error, Result};
use crate::filter;
use crate::progress::Progress;
use crate::{build, runner};
use std::path::Path;
use vramtest_model::env;
use vramtest_model::settings::DeviceSetting;

/// cargo's `--color` for its messages on our stderr.
fn cargo_color() -> &'static str {
    match anstream::AutoStream::choice(&std::io::stderr()) {
        anstream::ColorChoice::Never => "never",
        _ => "always",
    }
}

/// Rejects an environment switch with a value outside its set (`VRAMTEST_UPDATE`,
/// `INSTA_UPDATE`, `VRAMTEST_DEVICE`, `VRAMTEST_CONFIG`) before anything is built:
/// the harness would reject it in every test, or worse, read it differently.
fn validate_env() -> Result<()> {
    env::validate().map_err(|message| Error::Environment { message })
}

/// `VRAMTEST_DEVICE`, once [`validate_env`] has accepted it.
fn env_device() -> Option<DeviceSetting> {
    env::device().ok().flatten()
}

/// The `VRAMTEST_*` variables for each package's tests.
fn package_env(ws: &Workspace, exec: &ExecArgs) -> runner::PackageEnv {
    let inherited_device = env_device().is_some();
    ws.packages
        .iter()
        .map(|p| {
            let mut vars = vec![(env::CONFIG.to_owned(), p.settings.to_json().to_string())];
            if exec.check || env::is_ci() {
                vars.push(("VRAMTEST_CHECK".into(), "1".into()));
            }
            if exec.strict {
                vars.push(("VRAMTEST_STRICT".into(), "1".into()));
            }
            let device = exec
                .device
                .or(p.settings.device.filter(|_| !inherited_device));
            if let Some(d) = device {
                vars.push(("VRAMTEST_DEVICE".into(), d.as_str().into()));
            }
            (p.name.clone(), vars)
        })
        .collect()
}

/// The device the run measures on, for the default of `-j`.
fn run_device(ws: &Workspace, exec: &ExecArgs) -> DeviceSetting {
    if let Some(d) = exec.device {
        return d;
    }
    if let Some(d) = env_device() {
        return d;
    }
    let devices: Vec<Option<DeviceSetting>> =
        ws.packages.iter().map(|p| p.settings.device).collect();
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
    let Some(partition) = filter_args.partition else {
        return Ok(cases.into_iter().map(|c| (c, None)).collect());
    };
    Ok(partition
        .this_shard(cases)
        .into_iter()
        .map(|(c, s)| (c, Some(s)))
        .collect())
}

/// Writes `text` to a report file, creating its directory; atomically (a temporary
/// file renamed over the target), so a reader never sees half a report.
fn write_file(path: &Path, text: &str) -> Result<()> {
    use vramtest_model::snapshot::{FileError, write_atomic};
    write_atomic(path, text).map_err(|e| match e {
        FileError::Io { source, .. } => Error::Report {
            path: path.to_owned(),
            source,
        },
        other => Error::Snapshot(other),
    })
}

/// Appends `text` and a newline to a report file (the job summary).
fn append_file(path: &Path, text: &str) -> Result<()> {
    use std::io::Write as _;
    let report = |source| Error::Report {
        path: path.to_owned(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(report)?;
    writeln!(f, "{text}").map_err(report)
}
