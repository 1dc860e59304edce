//! `cargo vramtest measure TEST --at ..`: one point of a test's sweep over named axes,
//! measured once (the harness's `VRAMTEST_MEASURE_AT`: one process, no call sites,
//! nothing judged against the snapshot, nothing written) and set against what the
//! committed snapshot's sweep predicts there, as `show TEST --at` does. The point is
//! checked against the snapshot's axes before anything is built. A sweep with
//! categorical axes (levers) is measured at one combination of levels, which `--at`
//! names in full (`--at layers=6,seq=48,precision=bf16,checkpointing=blocks`), and set
//! against that combination's own fit.

use super::show::package_settings;
use super::{find_tests, package_env, run_device, user_env};
use crate::case::TestCase;
use crate::cli::{ExecArgs, FilterArgs, MeasureArgs, MessageFormat};
use crate::discover::Workspace;
use crate::error::{Error, Result};
use crate::output::measure::{PointCheck, human, json};
use crate::progress::Progress;
use crate::runner::Devices;
use crate::snapshots::{self, SnapshotFile};
use crate::{device, discover, runner};
use vramtest_model::axes::Point;
use vramtest_model::env::{HarnessEnv, SitesWhen, Update};
use vramtest_model::levers::{LeverAxes, LeverVariant, show_variant};
use vramtest_model::report::{Status, TestReport};
use vramtest_model::sweep::Estimate;

pub fn execute(args: &MeasureArgs) -> Result<u8> {
    let user = user_env()?;
    let ws = discover::discover(&args.selection, args.build.cargo_flags())?;
    let files = snapshots::scan(&ws)?;
    let chosen = snapshots::find(&files, &args.test, false).map_err(|message| {
        Error::Selection {
            message: format!(
                "{message} in {} (measure predicts from the committed snapshot of a sweep over named axes)",
                ws.root.display()
            ),
        }
    })?;
    // Every snapshot of the test (one per device class) predicts the point, or the
    // error names the axis or the level: before anything is built or run.
    let predictions = chosen
        .iter()
        .map(|file| {
            let (at, levels, estimate) = predict(&ws, file, &args.at)?;
            Ok((*file, at, levels, estimate))
        })
        .collect::<Result<Vec<_>>>()?;
    let (file, at, levels, _) = &predictions[0];
    let report = measure(&ws, args, &user, file, at, levels)?;
    let body = match (&report.measured_at, report.status, &report.body) {
        (Some(_), Status::Passed, Some(body)) => body,
        (_, Status::Failed, _) => {
            anstream::eprintln!("{}", failure(&report));
            return Ok(1);
        }
        (_, Status::Ignored, _) => {
            return Err(Error::NotMeasured {
                test: name_of(file),
                message: format!("it does not run here: {}", report.message),
            });
        }
        _ => {
            return Err(Error::NotMeasured {
                test: name_of(file),
                message: "its harness ran it as a test instead (hint: build the tests with the vramtest release of this cargo-vramtest)".into(),
            });
        }
    };
    // The snapshot of the device class it was measured on, else the first one.
    let measured_on = body.device_class.as_str();
    let (file, _, levels, estimate) = predictions
        .iter()
        .find(|(f, ..)| f.class == measured_on)
        .unwrap_or(&predictions[0]);
    if file.class != measured_on {
        anstream::eprintln!(
            "note: measured on {measured_on}; the prediction comes from the {} snapshot",
            file.class
        );
    }
    // The pool model of a CPU run, set beside a CPU snapshot's prediction of it only (a
    // CUDA snapshot's pool figures are the device's own).
    let pool = (report.details.as_ref())
        .and_then(|d| d.predicted_pool)
        .filter(|_| file.class == measured_on);
    let comparison = PointCheck::new(body, estimate).with_pool(pool, estimate);
    match args.message_format {
        MessageFormat::Json => {
            let mut v = json(&comparison);
            if !levels.is_empty() {
                v["variant"] = serde_json::json!(levels);
            }
            println!("{v}");
        }
        MessageFormat::Human => {
            let mut name = name_of(file);
            if !levels.is_empty() {
                name = format!("{name} [{}]", show_variant(levels));
            }
            print!("{}", human(&name, &comparison));
        }
    }
    Ok(comparison.exit_code())
}

/// `package::target::test (cpu)`.
fn name_of(file: &SnapshotFile) -> String {
    format!(
        "{}::{}::{} ({})",
        file.package, file.target, file.test, file.class
    )
}

/// The point and levels `--at` names, and what the committed snapshot `file`'s sweep
/// predicts there (the fit of that combination of levels). `--at` must name every
/// axis, categorical ones included: a bad `--at` is an error of the selection; one the
/// sweep cannot predict names the snapshot and the axis (one left out, one unknown),
/// or says it holds no such sweep.
fn predict(
    ws: &Workspace,
    file: &SnapshotFile,
    text: &str,
) -> Result<(Point, LeverVariant, Estimate)> {
    let fail = |message: String| Error::Prediction {
        snapshot: file.path.clone(),
        message,
    };
    let parsed = vramtest_model::snapshot::read(&file.path)?
        .ok_or_else(|| fail("the file is gone (removed since it was listed)".into()))?;
    let name = name_of(file);
    let sweep = parsed.body.sweep().ok_or_else(|| {
        fail(format!(
            "{name} holds no sweep, so there is no prediction to measure against (hint: `#[vramtest(axes(seq = [16, 32, 48], ..))]` with `t.axis(\"seq\")`)"
        ))
    })?;
    let levers = LeverAxes::new(sweep.levels.clone()).map_err(|e| fail(format!("{name}: {e}")))?;
    let (at, levels) = levers.parse_at(text).map_err(|e| Error::Selection {
        message: format!("--at: {e}"),
    })?;
    if let Some((axis, all)) = sweep.levels.iter().find(|(a, _)| !levels.contains_key(*a)) {
        return Err(Error::Selection {
            message: format!(
                "--at: no level for the categorical axis `{axis}` (its levels: {}; measure runs one combination of levels)",
                all.join(", ")
            ),
        });
    }
    let fitted = sweep
        .variant(&levels)
        .ok_or_else(|| fail(format!("{name}: no fit of {}", show_variant(&levels))))?;
    let granule = package_settings(ws, &file.package).cuda_pool().granularity;
    let estimate = fitted
        .estimate(&at, granule)
        .map_err(|e| fail(format!("{name}: {e}")))?;
    Ok((at, levels, estimate))
}

/// Builds the test of `file` and has its harness measure it at `at` and `levels`, in
/// check mode with nothing to write and no call sites. Returns its report.
fn measure(
    ws: &Workspace,
    args: &MeasureArgs,
    user: &HarnessEnv,
    file: &SnapshotFile,
    at: &Point,
    levels: &LeverVariant,
) -> Result<TestReport> {
    let exec = ExecArgs {
        device: args.device,
        check: true,
        ..ExecArgs::default()
    };
    let mut env = package_env(ws, &exec, user);
    for package in env.values_mut() {
        package.measure_at = Some(at.clone());
        package.measure_levels = levels.clone();
        package.update = Some(Update::No);
        package.sites = SitesWhen::Off;
    }
    let gpus = device::preflight(run_device(&env))?;
    let filter = FilterArgs {
        filters: vec![format!("{}::{}::{}", file.package, file.target, file.test)],
        exact: true,
        ..FilterArgs::default()
    };
    let cases: Vec<TestCase> = find_tests(ws, &args.build, &filter, &env)?
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    let count = cases.len();
    let [case] = <[TestCase; 1]>::try_from(cases).map_err(|_| Error::Selection {
        message: format!(
            "{} names {count} tests of the build, and measure runs one",
            name_of(file)
        ),
    })?;
    let slot = match gpus {
        0 => None,
        n => Devices::gpus(n, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref())
            .slots(Some(1))
            .into_iter()
            .next()
            .flatten(),
    };
    let outcomes = runner::run(std::slice::from_ref(&case), &env, &[slot], &Progress::new())?;
    let outcome = outcomes
        .into_iter()
        .next()
        .expect("one outcome per test case");
    Ok(outcome.report)
}

/// A measurement that failed: the harness's message and the step's output.
fn failure(report: &TestReport) -> String {
    let mut text = format!(
        "error: {}::{} was not measured: {}",
        report.target,
        report.test,
        report.message.trim_end()
    );
    if let Some(output) = report.output.as_deref().filter(|o| !o.trim().is_empty()) {
        text += "\n---- output ----\n";
        text += output.trim_end();
    }
    text
}
