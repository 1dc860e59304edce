//! The parent side of a run: settings and device, then one libtest trial per test,
//! each measured in a child process and judged against its snapshot.

use super::child::ChildResult;
use super::spawn::ResultDir;
use super::{Target, TestDef, checkout, list, verdict};
use crate::env::{self, Update};
use crate::step::Device;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use vramtest_model::DeviceClass;
use vramtest_model::config::{DeviceSetting, Settings};
use vramtest_model::fit::{SweepPoint, fit_sweep};
use vramtest_model::report::{Details, Status, TestReport};

/// Everything a trial needs, shared between trials.
pub(super) struct Run {
    pub(super) target: Target,
    pub(super) device: Result<Device, String>,
    pub(super) update: Update,
    pub(super) check: bool,
    pub(super) strict: bool,
    /// The workspace's and the package's settings, merged.
    pub(super) settings: Settings,
    pub(super) nocapture: bool,
    /// When call sites are captured (`VRAMTEST_SITES`).
    pub(super) sites: env::Sites,
    pub(super) timeout: Option<std::time::Duration>,
    pub(super) report_dir: Option<PathBuf>,
    pub(super) references: Option<PathBuf>,
    /// Where the children write their results.
    pub(super) results: ResultDir,
}

pub(super) fn run(target: Target) -> Result<ExitCode, String> {
    let mut args = Arguments::from_args();
    let tests = list::registered();
    if args.list {
        return Ok(list::list(&args, &tests));
    }
    if let Some(note) = checkout::reuse_note(&target.built_in, &target.manifest_dir) {
        eprintln!("{note}");
    }
    // `cargo vramtest` passes its reading of the metadata tables; under plain `cargo
    // test` the harness reads the same tables itself, with the same parser. From here
    // on both are one `Settings`, judged the same way.
    let settings = match env::config()? {
        Some(config) => {
            Settings::from_harness(&config).map_err(|e| format!("{}: {e}", env::CONFIG))?
        }
        None => crate::settings::from_manifests(&target.manifest_dir)?,
    };
    let choice = env::device()?
        .or(settings.device)
        .unwrap_or(DeviceSetting::Auto);
    let device = select_device(choice);
    if matches!(device, Ok(Device::Cuda(_))) && args.test_threads.is_none() {
        // Tests that share one GPU would see each other in its memory figures.
        args.test_threads = Some(1);
    }
    let run = Arc::new(Run {
        target,
        device,
        update: env::update()?,
        check: env::check(),
        strict: env::strict(),
        settings,
        nocapture: args.nocapture,
        sites: env::sites()?,
        timeout: env::timeout()?,
        report_dir: env::report_dir(),
        references: env::references_file(),
        results: ResultDir::new()?,
    });
    if let Some(dir) = &run.report_dir {
        // A test its attribute ignores, run by name, still leaves a report: `cargo
        // vramtest` shows why it was ignored.
        for (name, def) in &tests {
            let Some(reason) = def.options.ignore else {
                continue;
            };
            let trial = Trial::test(name.clone(), || Ok(())).with_ignored_flag(true);
            if args.is_ignored(&trial) && !args.is_filtered_out(&trial) {
                verdict::write_report(dir, &ignored_report(&run.target, name, def, reason));
            }
        }
    }
    let trials = tests
        .into_iter()
        .map(|(name, def)| {
            let run = Arc::clone(&run);
            Trial::ignorable_test(name.clone(), move || run.trial(&name, def))
                .with_ignored_flag(def.options.ignore.is_some())
        })
        .collect();
    Ok(libtest_mimic::run(&args, trials).exit_code())
}

/// The report of a test its attribute ignores: the reason, nothing measured.
fn ignored_report(target: &Target, name: &str, def: &TestDef, reason: &str) -> TestReport {
    let mut report = TestReport {
        source: verdict::relative_source(target, def.file),
        line: def.line,
        ..TestReport::new(&target.name, name, Status::Ignored)
    };
    report.ignore(reason);
    report
}

fn select_device(choice: DeviceSetting) -> Result<Device, String> {
    match choice {
        DeviceSetting::Cpu => Ok(Device::Cpu),
        DeviceSetting::Cuda => Ok(crate::cuda::require_device()),
        DeviceSetting::Auto => Ok(crate::cuda::auto_device()),
    }
}

pub(super) fn class_of(device: Device) -> DeviceClass {
    match device {
        Device::Cpu => DeviceClass::Cpu,
        Device::Cuda(_) => DeviceClass::Cuda,
    }
}

impl Run {
    fn trial(&self, name: &str, def: &TestDef) -> Result<Completion, Failed> {
        let mut report = TestReport {
            source: verdict::relative_source(&self.target, def.file),
            line: def.line,
            device_class: self.device.as_ref().ok().map(|d| class_of(*d)),
            ..TestReport::new(&self.target.name, name, Status::Failed)
        };
        let skip = match (&self.device, report.device_class) {
            (Err(reason), _) => Some(reason.clone()),
            (Ok(_), Some(class))
                if !def.options.devices.is_empty()
                    && !def.options.devices.contains(&class.as_str()) =>
            {
                Some(format!("runs on {} only", def.options.devices.join(", ")))
            }
            _ => None,
        };
        let outcome = match (skip, &self.device) {
            (Some(reason), _) => {
                report.status = Status::Ignored;
                report.message = reason.clone();
                Ok(Completion::ignored_with(reason))
            }
            (None, Ok(device)) => self.measure_and_judge(name, def, *device, &mut report),
            (None, Err(_)) => unreachable!("no device is a skip"),
        };
        if let Err(failed) = &outcome {
            // Whatever went wrong after the verdict (a snapshot that could not be
            // written, a bad limit) fails the test in the report too.
            // (A new result left pending fails the run but keeps its status.)
            if !report.status.is_failure() && report.status != Status::New {
                report.status = Status::Failed;
            }
            if report.message.is_empty() {
                report.message = failed.message().unwrap_or("failed").to_owned();
            }
        }
        if let Some(dir) = &self.report_dir {
            verdict::write_report(dir, &report);
        }
        outcome
    }

    fn measure_and_judge(
        &self,
        name: &str,
        def: &TestDef,
        device: Device,
        report: &mut TestReport,
    ) -> Result<Completion, Failed> {
        // A sweep runs once per batch size, each in a process of its own.
        let sweep = !def.options.batch.is_empty();
        let sizes: &[usize] = if sweep { def.options.batch } else { &[1] };
        let mut measured = Vec::with_capacity(sizes.len());
        for &batch in sizes {
            let label = if sweep {
                format!("{name} (batch {batch})")
            } else {
                name.to_owned()
            };
            let (result, output) = self.spawn_child(name, def, device, batch).map_err(|e| {
                report.message = e.clone();
                Failed::from(e)
            })?;
            match result {
                Some(ChildResult::Measured {
                    profile,
                    info,
                    timeline,
                    ..
                }) => measured.push((batch, profile, info, timeline)),
                Some(ChildResult::Ignored { reason }) => {
                    report.status = Status::Ignored;
                    report.message = reason.clone();
                    return Ok(Completion::ignored_with(reason));
                }
                Some(ChildResult::Failed { message }) => {
                    report.message = format!("{label} failed: {message}");
                    report.output = Some(output.clone());
                    return Err(verdict::failure(&report.message, &output));
                }
                None => {
                    report.message = format!("{label} crashed before reporting a result");
                    report.output = Some(output.clone());
                    return Err(verdict::failure(&report.message, &output));
                }
            }
        }
        let fit = if sweep {
            let points: Vec<SweepPoint> = measured
                .iter()
                .map(|(batch, profile, _, _)| SweepPoint {
                    batch: *batch as u64,
                    peak_bytes: profile.peak_bytes,
                    category_peaks: profile.category_peaks,
                })
                .collect();
            let fit = fit_sweep(&points).map_err(|e| {
                report.message = format!("{name}: {e}");
                Failed::from(report.message.clone())
            })?;
            Some(fit)
        } else {
            None
        };
        let (batch, profile, info, timeline) = measured.swap_remove(0);
        report.details = Some(Details {
            baseline_bytes: profile.baseline_bytes,
            allocations: profile.allocations,
            reserved_peak_bytes: profile.reserved_peak_bytes,
            leak_sites: profile.leak_sites.clone(),
        });
        let measured = verdict::Measured {
            batch,
            profile: &profile,
            info,
            fit: fit.as_ref(),
        };
        let verdict = self.judge(name, def, measured, report);
        if let (Some(timeline), Some(snap)) = (timeline, &report.snapshot) {
            super::timeline::keep(&timeline, snap);
        }
        verdict
            .map(|()| Completion::Completed)
            .map_err(Failed::from)
    }
}
