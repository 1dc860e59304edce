//! One test as a libtest trial: measured in a child process per batch size, judged
//! against its snapshot, the verdict written and reported.

use super::checkout::{Target, display_path, relative_source};
use super::decide::{self, Write};
use super::files::{self, Outputs};
use super::grid;
use super::message::{self, Facts};
use super::site_reruns;
use super::spawn::{Spawner, output_section};
use crate::harness::protocol::{ChildResult, RunPoint};
use crate::harness::registry::TestDef;
use crate::step::Device;
use libtest_mimic::{Completion, Failed};
use vramtest_chart::Timeline;
use vramtest_model::env::{SitesWhen, Update};
use vramtest_model::fit::{SweepFit, SweepPoint, fit_sweep};
use vramtest_model::pool::{CudaPool, PoolPeaks, PredictedPoint, Prediction};
use vramtest_model::report::{Details, Status, TestReport};
use vramtest_model::settings::Settings;
use vramtest_model::snapshot::{self, Info, SweepScaling};
use vramtest_model::{Body, DeviceClass, Limit, LimitKey, Policy, Profile, Snapshot};

/// What the snapshots may be: written, compared, failed on any change.
#[derive(Debug, Clone, Copy)]
pub(super) struct SnapshotMode {
    /// `VRAMTEST_UPDATE` / `INSTA_UPDATE`.
    pub(super) update: Update,
    /// CI or `--check`: a missing snapshot fails.
    pub(super) check: bool,
    /// `--strict`: any difference fails.
    pub(super) strict: bool,
}

/// What every trial of a run shares.
pub(super) struct Trials {
    pub(super) target: Target,
    /// The device tests measure on, or why there is none.
    pub(super) device: Result<Device, String>,
    /// The workspace's and the package's settings, merged.
    pub(super) settings: Settings,
    pub(super) mode: SnapshotMode,
    /// When call sites are captured (`VRAMTEST_SITES`).
    pub(super) sites: SitesWhen,
    pub(super) spawner: Spawner,
    pub(super) outputs: Outputs,
    /// What the harness says about the run (a binary built in another checkout).
    pub(super) notes: Vec<String>,
}

/// One measurement: a batch size's profile, what the device reported, its timeline,
/// the pool model's peaks.
struct Measurement {
    point: RunPoint,
    /// The child process's wall time.
    wall: std::time::Duration,
    profile: Box<Profile>,
    info: Info,
    timeline: Option<Box<Timeline>>,
    pool: Option<PoolPeaks>,
}

/// How a test's measurement ended, when it did not measure.
enum Unmeasured {
    Ignored(String),
    Failed(Failed),
}

impl Trials {
    /// The report every test of this run starts from.
    pub(super) fn report(&self, name: &str, def: &TestDef, status: Status) -> TestReport {
        TestReport {
            source: relative_source(&self.target, def.file),
            line: def.line,
            notes: self.notes.clone(),
            ..TestReport::new(&self.target.name, name, status)
        }
    }

    /// Runs one test: measures, judges and reports it.
    pub(super) fn trial(&self, name: &str, def: &TestDef) -> Result<Completion, Failed> {
        let mut report = self.report(name, def, Status::Failed);
        report.device_class = self.device.as_ref().ok().map(|d| d.class());
        let outcome = match (self.skip_reason(def, report.device_class), &self.device) {
            (Some(reason), _) => {
                report.ignore(&reason);
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
        if let Some(dir) = &self.outputs.report_dir {
            files::write_report(dir, &report);
        }
        outcome
    }

    /// Why the test does not run here: no device, or a device it does not support.
    fn skip_reason(&self, def: &TestDef, class: Option<DeviceClass>) -> Option<String> {
        match (&self.device, class) {
            (Err(reason), _) => Some(reason.clone()),
            (Ok(_), Some(class))
                if !def.options.devices.is_empty()
                    && !def.options.devices.contains(&class.as_str()) =>
            {
                Some(format!("runs on {} only", def.options.devices.join(", ")))
            }
            _ => None,
        }
    }

    fn measure_and_judge(
        &self,
        name: &str,
        def: &TestDef,
        device: Device,
        report: &mut TestReport,
    ) -> Result<Completion, Failed> {
        let mut measured = match self.measure(name, def, device, report) {
            Ok(measured) => measured,
            Err(Unmeasured::Ignored(reason)) => {
                report.ignore(&reason);
                return Ok(Completion::ignored_with(reason));
            }
            Err(Unmeasured::Failed(failed)) => return Err(failed),
        };
        let fit = if def.options.batch.is_empty() {
            None
        } else {
            Some(fit(&measured).map_err(|e| {
                report.message = format!("{name}: {e}");
                Failed::from(report.message.clone())
            })?)
        };
        let runs: Vec<_> = measured
            .iter()
            .map(|m| grid::grid_run(&m.point, &m.profile, m.pool))
            .collect();
        let point_millis: Vec<u64> = match measured.len() {
            1 => Vec::new(),
            _ => measured.iter().map(|m| m.wall.as_millis() as u64).collect(),
        };
        let fitting = std::time::Instant::now();
        let axes = grid::fit(def, &runs, self.settings.cuda_pool().granularity).map_err(|e| {
            report.message = format!("{name}: {e}");
            Failed::from(report.message.clone())
        })?;
        let fit_millis = axes.is_some().then(|| fitting.elapsed().as_millis() as u64);
        if axes.is_some() {
            // The pool model's batch lines read a batch sweep; a grid keeps its first
            // point's replay, and its own fits of the allocated and reserved peaks.
            measured.truncate(1);
        }
        let prediction = prediction(&measured, self.settings.cuda_pool());
        let first = measured.swap_remove(0);
        report.details = Some(Details {
            baseline_bytes: first.profile.baseline_bytes,
            allocations: first.profile.allocations,
            reserved_peak_bytes: first.profile.reserved_peak_bytes,
            leak_sites: first.profile.leak_sites.clone(),
            predicted_pool: first.pool,
            point_millis,
            fit_millis,
        });
        let scaling = match (&fit, axes) {
            (Some(fit), _) => Some(SweepScaling::Batch(fit.scaling.clone())),
            (None, Some(axes)) => Some(SweepScaling::Axes(axes)),
            (None, None) => None,
        };
        let verdict = self.judge(name, def, &first, fit.as_ref(), scaling, report);
        if let (Some(timeline), Some(snap)) = (&first.timeline, &report.snapshot) {
            files::keep_timeline(timeline, snap);
        }
        if let (Some(prediction), Some(snap)) = (&prediction, &report.snapshot) {
            files::keep_prediction(prediction, snap);
        }
        verdict
            .map(|()| Completion::Completed)
            .map_err(Failed::from)
    }

    /// Measures the test in a child process per point (one for a test without a
    /// sweep), up to `-j` at once; the first point that failed, in the points' order,
    /// fails the test.
    fn measure(
        &self,
        name: &str,
        def: &TestDef,
        device: Device,
        report: &mut TestReport,
    ) -> Result<Vec<Measurement>, Unmeasured> {
        let points = grid::points(def);
        let runs = grid::run_all(&points, self.spawner.jobs, |point| {
            let started = std::time::Instant::now();
            let run = self.spawner.measure(name, def, device, point);
            (run, started.elapsed())
        });
        let mut measured = Vec::with_capacity(points.len());
        for (point, (run, wall)) in points.into_iter().zip(runs) {
            let label = grid::label(name, def, &point);
            let (result, output) = run.map_err(|e| {
                report.message = e.clone();
                Unmeasured::Failed(Failed::from(e))
            })?;
            let failure = match result {
                Some(ChildResult::Measured {
                    profile,
                    info,
                    timeline,
                    pool,
                    ..
                }) => {
                    measured.push(Measurement {
                        point,
                        wall,
                        profile,
                        info: *info,
                        timeline,
                        pool,
                    });
                    continue;
                }
                Some(ChildResult::Ignored { reason }) => return Err(Unmeasured::Ignored(reason)),
                Some(ChildResult::Failed { message }) => format!("{label} failed: {message}"),
                None => format!("{label} crashed before reporting a result"),
            };
            report.output = Some(output.clone());
            report.message = failure;
            let text = format!("{}{}", report.message, output_section(&output));
            return Err(Unmeasured::Failed(Failed::from(text)));
        }
        Ok(measured)
    }

    /// The limits for `def`: the settings (workspace, package) refined by the test's
    /// attribute, key by key and category by category.
    fn policy(&self, def: &TestDef) -> Result<Policy, String> {
        let mut attribute = Settings {
            budget: def.options.budget,
            ..Settings::default()
        };
        for (key, text) in def.options.limits {
            let key = key.parse::<LimitKey>().map_err(|e| e.to_string())?;
            let limit = text.parse::<Limit>().map_err(|e| e.to_string())?;
            attribute.limits.insert(key, limit);
        }
        let mut policy = self.settings.clone().overridden_by(&attribute).policy();
        policy.strict = self.mode.strict;
        Ok(policy)
    }

    /// Judges a measurement against its snapshot: decides, finds call sites where they
    /// are wanted, writes what the decision says, and fills in the report. `Err` is the
    /// failure's text.
    fn judge(
        &self,
        name: &str,
        def: &TestDef,
        measured: &Measurement,
        fit: Option<&SweepFit>,
        scaling: Option<SweepScaling>,
        report: &mut TestReport,
    ) -> Result<(), String> {
        let class = report.device_class.expect("set for measured tests");
        let policy = self.policy(def)?;
        let mut body = Body::from_profile(&measured.profile, class);
        body.scaling = scaling.map(|s| match s {
            SweepScaling::Batch(b) => SweepScaling::Batch(b.with_budget(policy.budget)),
            axes => axes,
        });
        let snap_path =
            snapshot::path_for(&self.target.manifest_dir, &self.target.name, name, class);
        report.snapshot = Some(snap_path.clone());
        report.body = Some(body.clone());
        if let Some(refs) = &self.outputs.references {
            files::append_reference(refs, &snap_path);
        }
        let old = snapshot::read(&snap_path).map_err(|e| {
            report.status = Status::SnapshotError;
            report.message = format!("invalid snapshot: {e}");
            report.message.clone()
        })?;
        report.old_peak_bytes = old.as_ref().map(|o| o.body.peak_bytes);
        if let Some(note) = old
            .as_ref()
            .and_then(|o| machine_note(&o.header, measured.info.machine.as_ref()))
        {
            report.notes.push(note);
        }
        let mut decision = decide::decide(
            old.as_ref().map(|o| &o.body),
            &body,
            &policy,
            self.mode.update,
            self.mode.check,
        );
        report.status = decision.status;
        let sites = self.sites(name, def, &measured.point, class, decision.status);
        let mut info = measured.info.clone();
        match &sites {
            Some(Ok(found)) => {
                info.sites = found.for_snapshot();
                report.sites = Some(found.clone());
            }
            Some(Err(e)) => report.sites_error = Some(e.clone()),
            None => {}
        }
        // `VRAMTEST_UPDATE=always` with call sites on also records new sites in a
        // snapshot whose figures did not change (its `info` only).
        if decision.write.is_none()
            && decision.status == Status::Passed
            && self.mode.update == Update::Always
            && !info.sites.is_empty()
            && old
                .as_ref()
                .is_some_and(|o| o.body == body && Info::sites_in_header(&o.header) != info.sites)
        {
            decision.write = Some(Write::Snapshot);
        }
        let snapshot = Snapshot {
            source: report.source.clone(),
            test: name.to_owned(),
            info,
            body,
        };
        let written = files::write_result(&decision, &snap_path, &snapshot).map_err(|e| {
            report.status = Status::Failed;
            report.message = e;
            report.message.clone()
        })?;
        let shown = |p: &std::path::Path| display_path(&self.target.manifest_dir, p);
        let pending = snapshot::pending_path(&snap_path);
        let kept = if decision.write == Some(Write::Snapshot) || decision.remove_pending {
            files::clear_pending(&pending, &snapshot.body, &shown(&pending))
        } else {
            None
        };
        report.written = written.as_ref().map(|w| w.path.clone());
        let message = message::compose(&Facts {
            name,
            class,
            decision: &decision,
            policy: &policy,
            body: &snapshot.body,
            profile: &measured.profile,
            fit,
            old: old.as_ref(),
            sites: sites.as_ref(),
            snapshot: shown(&snap_path),
            written: written.map(|w| (shown(&w.path), w.replaced)),
            kept,
        });
        finish(name, report, message)
    }

    /// Call sites, when this run wants them for a result of `status`: CPU only.
    fn sites(
        &self,
        name: &str,
        def: &TestDef,
        point: &RunPoint,
        class: DeviceClass,
        status: Status,
    ) -> Option<Result<vramtest_model::sites::Sites, String>> {
        let wanted = match self.sites {
            SitesWhen::Always => true,
            SitesWhen::OnRegression => status == Status::Regressed,
            SitesWhen::Off => false,
        };
        (wanted && class == DeviceClass::Cpu)
            .then(|| site_reruns::collect(&self.spawner, name, def, point))
    }
}

/// A sweep's fit over its measurements.
fn fit(measured: &[Measurement]) -> Result<SweepFit, String> {
    let points: Vec<SweepPoint> = measured
        .iter()
        .map(|m| SweepPoint {
            batch: m.point.batch as u64,
            peak_bytes: m.profile.peak_bytes,
            category_peaks: m.profile.category_peaks,
        })
        .collect();
    fit_sweep(&points).map_err(|e| e.to_string())
}

/// The GPU prediction of a CPU run: every batch size's pool peaks (none when a
/// measurement has none, as on a CUDA device).
fn prediction(measured: &[Measurement], pool: CudaPool) -> Option<Prediction> {
    let points = measured
        .iter()
        .map(|m| {
            m.pool.map(|peaks| PredictedPoint {
                batch: m.point.batch as u64,
                peaks,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Prediction { pool, points })
}

/// Puts the message in the report: `Err` with the failure's text (and diff) when the
/// report fails the run; else prints a passing test's message, if it has one.
/// A note when the snapshot was recorded on another machine (CPU, instruction set,
/// caches or threads) than this run: CPU-only memory differs between them, the gated
/// figures do not. Never a failure; shown once per run (by the plain harness too).
fn machine_note(old_header: &str, new: Option<&snapshot::CpuFingerprint>) -> Option<String> {
    let old = snapshot::CpuFingerprint::in_header(old_header)?;
    let new = new?;
    if old == *new {
        return None;
    }
    let note = format!(
        "snapshots recorded on {old}; this run on {new}: CPU-only memory (gemm's packing buffers) differs between machines and is not compared, every gated figure is"
    );
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.contains(&note) {
        eprintln!("note: {note}");
        said.push(note.clone());
    }
    Some(note)
}

fn finish(name: &str, report: &mut TestReport, message: message::Message) -> Result<(), String> {
    report.message = message.text;
    report.changes = message.changes;
    report.diff = message.diff;
    if report.fails() {
        let mut text = report.message.clone();
        if let Some(diff) = &report.diff {
            text += "\n\n";
            text += diff;
        }
        return Err(text);
    }
    if !report.message.is_empty() {
        // Passing with something to say (improved, new snapshot written).
        println!("{name}: {}", report.message);
    }
    Ok(())
}
