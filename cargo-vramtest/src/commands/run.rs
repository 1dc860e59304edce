//! `cargo vramtest [run]`: builds and runs the tests, prints the table (or JSON lines)
//! and writes the reports asked for.

use super::{append_file, find_tests, package_env, run_device, user_env, write_file};
use crate::case::TestCase;
use crate::cli::{MessageFormat, RunArgs};
use crate::discover::{self, Workspace};
use crate::error::{Error, Result};
use crate::output::{self, Results, Summary};
use crate::progress::Progress;
use crate::runner::Devices;
use crate::{device, recorded, runner};
use std::path::Path;
use std::time::Instant;

/// The exit code of a run whose report (`--junit`, `--markdown`, `--html`, the job summary)
/// could not be written, whatever the verdict: CI must not take a missing report for
/// a pass.
const REPORT_NOT_WRITTEN: u8 = 2;

pub fn execute(args: &RunArgs) -> Result<u8> {
    let user = user_env()?;
    let ws = discover::discover(&args.selection, args.build.cargo_flags())?;
    let env = package_env(&ws, &args.exec, &user);
    let gpus = device::preflight(run_device(&env))?;
    let cases: Vec<TestCase> = find_tests(&ws, &args.build, &args.filter, &env)?
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    if cases.is_empty() {
        anstream::eprintln!("warning: no test to run");
    }
    let devices = match gpus {
        0 => Devices::Cpu,
        n => Devices::gpus(n, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()),
    };
    let slots = devices.slots(args.exec.jobs.map(usize::from));
    let progress = Progress::new();
    let start = Instant::now();
    let outcomes = runner::run(&cases, &env, &slots, &progress)?;
    let results = Results {
        outcomes: &outcomes,
        duration: start.elapsed(),
    };
    let summary = Summary::of(&outcomes);
    match args.report.message_format {
        MessageFormat::Human => {
            anstream::print!("{}", output::table::render_for_terminal(results, &summary))
        }
        MessageFormat::Json => {
            let info = output::json::RunInfo::run(args.filter.partition.map(|p| p.to_string()));
            print!("{}", output::json::render(results, &summary, &info));
        }
    }
    // A report that cannot be written does not hide the verdict: the table and the
    // annotations still print, then the failures to write, and the run exits 2.
    let unwritten = write_reports(args, &ws, results, &summary);
    for e in &unwritten {
        let red = anstyle::Style::new()
            .fg_color(Some(anstyle::AnsiColor::Red.into()))
            .bold();
        anstream::eprintln!("{red}error{red:#}: {e}");
    }
    if unwritten.is_empty() {
        Ok(summary.exit_code)
    } else {
        Ok(REPORT_NOT_WRITTEN.max(summary.exit_code))
    }
}

/// Writes the reports asked for (`--junit`, `--markdown`, `--html`) and, under GitHub
/// Actions, prints the annotations and appends to the job summary. Returns the reports
/// that could not be written.
fn write_reports(
    args: &RunArgs,
    ws: &Workspace,
    results: Results<'_>,
    summary: &Summary,
) -> Vec<Error> {
    let mut unwritten = Vec::new();
    if let Some(path) = &args.report.junit {
        unwritten.extend(write_file(path, &output::junit::render(results)).err());
    }
    let markdown = output::markdown::render(results, summary);
    if let Some(path) = &args.report.markdown {
        unwritten.extend(write_file(path, &markdown).err());
    }
    if let Some(path) = &args.report.html {
        let title = format!("cargo vramtest: {}", ws.root.display());
        let page = output::html::render(results, &title, |o| {
            // Only a test measured in this run: an older timeline would mislead.
            o.report.body.as_ref()?;
            let snap = o
                .case
                .binary
                .package_dir
                .join(o.report.snapshot.as_deref()?);
            recorded::timeline(&ws.target_dir, &snap)
        });
        unwritten.extend(write_file(path, &page).err());
    }
    if output::github::active() {
        let base = output::github::base(&ws.root);
        for line in output::github::annotations(results, &base) {
            // stdout is for JSON lines in json mode; the runner reads both streams.
            match args.report.message_format {
                MessageFormat::Human => println!("{line}"),
                MessageFormat::Json => eprintln!("{line}"),
            }
        }
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
            unwritten.extend(append_file(Path::new(&path), &markdown).err());
        }
    }
    unwritten
}
