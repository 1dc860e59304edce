//! The parent side of a run: settings and device, then one libtest trial per test,
//! each measured in a child process and judged against its snapshot.

mod axial;
pub(super) mod checkout;
mod decide;
mod device;
mod files;
mod grid;
mod list;
mod measure_point;
mod message;
mod outcome;
mod report;
mod site_reruns;
mod spawn;
mod trial;

use crate::harness::registry::{self, DEFAULT_ITERATIONS};
use checkout::HarnessTarget;
use files::Outputs;
use libtest_mimic::{Arguments, Trial};
use outcome::{TrialEnd, Unmeasured};
use spawn::Spawner;
use std::process::ExitCode;
use std::sync::Arc;
use trial::{RunContext, SnapshotMode};
use vramtest_model::env::HarnessEnv;

/// A usage or configuration error that ends a run before any test runs (exit code 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// Tests whose snapshot files would be one.
    #[error("{}", shared_lines(.0))]
    SharedFiles(Vec<vramtest_model::snapshot::SharedFile>),
    #[error(transparent)]
    Env(#[from] vramtest_model::env::EnvError),
    #[error(transparent)]
    Manifest(#[from] crate::manifests::ManifestError),
    #[error(transparent)]
    Device(#[from] vramtest_model::device::CudaUnavailable),
    #[error(transparent)]
    ReportPipe(#[from] crate::harness::fd::FdError),
}

/// Each pair on a line of its own, each line an error.
fn shared_lines(shared: &[vramtest_model::snapshot::SharedFile]) -> String {
    let lines: Vec<String> = shared.iter().map(ToString::to_string).collect();
    lines.join("\nerror: ")
}

/// Runs the tests of this binary as libtest does (`--list`, filters, `--ignored`):
/// each in a child process, judged against its snapshot. `Err` is a usage or
/// configuration error (exit code 2).
pub(crate) fn run(target: HarnessTarget) -> Result<ExitCode, RunError> {
    let mut args = Arguments::from_args();
    let tests = registry::registered();
    // Two tests of one file would overwrite each other's snapshot and be judged
    // against each other's figures: an error before anything is listed or run.
    let shared = vramtest_model::snapshot::shared_files(
        tests
            .iter()
            .map(|(name, _)| (target.name.as_str(), name.as_str())),
    );
    if !shared.is_empty() {
        return Err(RunError::SharedFiles(shared));
    }
    if args.list {
        return Ok(list::list(&args, &tests));
    }
    let notes: Vec<String> = checkout::reuse_note(&target.built_in, &target.manifest_dir)
        .into_iter()
        .collect();
    for note in &notes {
        eprintln!("note: {note}");
    }
    let env = HarnessEnv::from_env()?;
    files::set_started_by(env.started_by);
    files::stop_if_orphaned();
    let settings = crate::manifests::of_run(&env, &target.manifest_dir)?;
    // `cargo vramtest` hands its settings down; plain `cargo test` does not.
    let device = device::select(env.device_for(&settings), env.settings.is_some())?;
    if matches!(device, crate::step::Device::Cuda(_)) && args.test_threads.is_none() {
        // Tests that share one GPU would see each other in its memory figures.
        args.test_threads = Some(1);
    }
    let context = Arc::new(RunContext {
        target,
        device,
        mode: SnapshotMode {
            update: env.update(),
            check: env.check,
            strict: env.strict,
        },
        sites: env.sites,
        spawner: Spawner {
            nocapture: args.nocapture,
            timeout: env.timeout,
            sites_timeout: env.sites_timeout(),
            iterations: settings.iterations.unwrap_or(DEFAULT_ITERATIONS),
            jobs: args.test_threads.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
            }),
        },
        outputs: Outputs {
            reports: files::Reports::of(&env)?,
            references: env.references,
            inert: vramtest_model::workflow::github_actions() && env.settings.is_none(),
        },
        settings,
        notes,
    });
    if let Some(at) = env.measure_at {
        return Ok(measure_point::run(
            &args,
            tests,
            context,
            at,
            env.measure_levels,
        ));
    }
    report_ignored(&args, &tests, &context);
    let trials = tests
        .into_iter()
        .map(|(name, def)| {
            let context = Arc::clone(&context);
            Trial::ignorable_test(name.clone(), move || context.trial(&name, def))
                .with_ignored_flag(def.options.ignore.is_some())
        })
        .collect();
    Ok(libtest_mimic::run(&args, trials).exit_code())
}

/// A test its attribute ignores, run by name, still leaves a report: `cargo vramtest`
/// shows why it was ignored.
fn report_ignored(
    args: &Arguments,
    tests: &[(String, &'static registry::TestDef)],
    context: &RunContext,
) {
    let Some(reports) = &context.outputs.reports else {
        return;
    };
    for (name, def) in tests {
        let Some(reason) = def.options.ignore else {
            continue;
        };
        let trial = Trial::test(name.clone(), || Ok(())).with_ignored_flag(true);
        if args.is_ignored(&trial) && !args.is_filtered_out(&trial) {
            let skipped = TrialEnd::Unmeasured(Unmeasured::Skipped(reason.to_owned()));
            let report = report::build(&context.head(name, def, None), &skipped);
            reports.write(&report);
        }
    }
}
