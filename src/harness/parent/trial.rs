//! One test as a libtest trial, a pipeline of steps that each return a value
//! ([`super::outcome`]): measure (a child process per point of a sweep, the points from
//! [`super::grid`], up to `-j` at once), fit the sweep, judge against the snapshot (decide, find call sites where wanted), record the files
//! the decision asks for; then the report is built once from what they returned
//! ([`super::report`]), written, and turned into libtest's verdict.

use super::axial;
use super::checkout::{HarnessTarget, display_path, relative_source};
use super::decide;
use super::files::{self, Outputs};
use super::grid;
use super::outcome::{
    Judged, MeasuredPoint, MeasuredTest, Recorded, SnapshotVerdict, Steps, TrialEnd, Unjudged,
    Unmeasured,
};
use super::report::{self, Head};
use super::site_reruns;
use super::spawn::{Spawner, output_section};
use crate::harness::protocol::{ChildResult, RunPoint};
use crate::harness::registry::TestDef;
use crate::step::Device;
use libtest_mimic::{Completion, Failed};
use vramtest_model::env::{SitesWhen, Update};
use vramtest_model::pool::{CudaPool, PredictedPoint, Prediction};
use vramtest_model::progress::{PointProgress, PointState};
use vramtest_model::report::{Status, TestReport};
use vramtest_model::settings::Settings;
use vramtest_model::snapshot;
use vramtest_model::sweep::{GridRun, Sweep};
use vramtest_model::{Body, DeviceClass, HumanBytes, Policy, Snapshot};

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

/// What every trial of a run shares: the target, the device, the settings and the
/// run's switches.
pub(super) struct RunContext {
    pub(super) target: HarnessTarget,
    /// The device tests measure on (a run without one ends before its tests).
    pub(super) device: Device,
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

impl RunContext {
    /// What every report of `name` says about the test itself; `class` is the device
    /// it ran on, if any.
    pub(super) fn head<'a>(
        &'a self,
        name: &'a str,
        def: &TestDef,
        class: Option<DeviceClass>,
    ) -> Head<'a> {
        Head {
            target: &self.target.name,
            test: name,
            source: relative_source(&self.target, def.file),
            line: def.line,
            class,
            notes: &self.notes,
            manifest_dir: &self.target.manifest_dir,
        }
    }

    /// Runs one test: measures, judges and records it, then writes its report.
    pub(super) fn trial(&self, name: &str, def: &TestDef) -> Result<Completion, Failed> {
        let class = Some(self.device.class());
        let outcome = match self.skip_reason(def, class) {
            Some(reason) => TrialEnd::Unmeasured(Unmeasured::Skipped(reason)),
            None => self.run(name, def, self.device),
        };
        let report = report::build(&self.head(name, def, class), &outcome);
        if let Some(reports) = &self.outputs.reports {
            reports.write(&report);
        }
        completion(&report, self.outputs.inert)
    }

    /// Why the test does not run here: a device it does not support.
    pub(super) fn skip_reason(&self, def: &TestDef, class: Option<DeviceClass>) -> Option<String> {
        match class {
            Some(class)
                if !def.options.devices.is_empty()
                    && !def.options.devices.contains(&class.as_str()) =>
            {
                Some(format!("runs on {} only", def.options.devices.join(", ")))
            }
            _ => None,
        }
    }

    /// The pipeline of a test that runs here: measure every point, fit, judge, record.
    fn run(&self, name: &str, def: &TestDef, device: Device) -> TrialEnd {
        let mut measured = match self
            .measure(name, def, device)
            .and_then(|points| self.fit(name, def, device, points))
        {
            Ok(measured) => measured,
            Err(unmeasured) => return TrialEnd::Unmeasured(unmeasured),
        };
        let judged = self.judge(name, def, &measured, device.class());
        let axial_notes = std::mem::take(&mut measured.notes);
        measured.notes = fit_notes(name, &measured, &judged);
        for note in &axial_notes {
            eprintln!("note: {note}");
        }
        measured.notes.extend(axial_notes);
        measured.notes.extend(gradient_notes(name, &judged));
        let recorded = self.record(&measured, &judged);
        TrialEnd::Measured(Box::new(Steps {
            measured,
            judged,
            recorded,
        }))
    }

    /// Measures the test in a child process per point (one for a test without a
    /// sweep), up to `-j` at once; the first point that failed, in the points' order,
    /// fails the test.
    fn measure(
        &self,
        name: &str,
        def: &TestDef,
        device: Device,
    ) -> Result<Vec<MeasuredPoint>, Unmeasured> {
        let points = grid::points(def).map_err(|e| Unmeasured::Failed {
            message: format!("{name}: {e}"),
            output: None,
        })?;
        let total = points.len() as u32;
        let (measured, unread) = self.measure_points(name, def, device, points, total)?;
        match unread.unwrap_or_default().as_slice() {
            [] => Ok(measured),
            axes => Err(Unmeasured::Failed {
                message: unread_axes_message(name, def, axes),
                output: None,
            }),
        }
    }

    /// Measures `points` in a child process each, up to `-j` at once, their progress
    /// said out of `total`; with the axes no point read (`None`: no point measured).
    fn measure_points(
        &self,
        name: &str,
        def: &TestDef,
        device: Device,
        points: Vec<RunPoint>,
        total: u32,
    ) -> Result<(Vec<MeasuredPoint>, Option<Vec<String>>), Unmeasured> {
        let runs = vramtest_model::parallel::map(&points, self.spawner.jobs, |point| {
            let say = |state| self.point_progress(name, def, point, total, state);
            say(PointState::Started);
            let started = std::time::Instant::now();
            let run = self.spawner.measure(name, def, device, point);
            say(PointState::Ended);
            (run, started.elapsed())
        });
        let mut measured = Vec::with_capacity(points.len());
        // The axes no point read so far (all of them before the first point).
        let mut unread: Option<Vec<String>> = None;
        for (point, (run, wall)) in points.into_iter().zip(runs) {
            let label = grid::label(name, def, &point);
            let ended = run.map_err(|e| Unmeasured::Failed {
                message: e.to_string(),
                output: None,
            })?;
            let message = match (ended.result, ended.unclean) {
                (
                    Some(ChildResult::Measured {
                        profile,
                        info,
                        timeline,
                        pool,
                        unread_axes,
                        cpu_micros,
                        device_bytes,
                        ..
                    }),
                    None,
                ) => {
                    unread = Some(match unread {
                        None => unread_axes,
                        Some(before) => before
                            .into_iter()
                            .filter(|a| unread_axes.contains(a))
                            .collect(),
                    });
                    measured.push(MeasuredPoint {
                        point,
                        wall,
                        profile,
                        info: *info,
                        timeline,
                        pool,
                        cpu_micros,
                        device_bytes,
                    });
                    continue;
                }
                (Some(ChildResult::Ignored { reason }), None) => {
                    return Err(Unmeasured::Skipped(reason));
                }
                (Some(result), Some(how)) => unclean_end(&label, &result, &how),
                (Some(ChildResult::Failed { message }), None) => {
                    format!("{label} failed: {message}")
                }
                (None, Some(how)) => format!("{label} crashed before reporting a result ({how})"),
                (None, None) => format!(
                    "{label} ended before reporting a result (exit status: 0): the step ended its own process"
                ),
            };
            return Err(Unmeasured::Failed {
                message,
                output: Some(ended.output),
            });
        }
        Ok((measured, unread))
    }

    /// Tells `cargo vramtest` (through the report pipe) that a point starts or ended.
    fn point_progress(
        &self,
        name: &str,
        def: &TestDef,
        point: &RunPoint,
        total: u32,
        state: PointState,
    ) {
        if let Some(reports) = &self.outputs.reports {
            reports.progress(&PointProgress {
                test: name.to_owned(),
                point: grid::point_name(def, point),
                total,
                state,
            });
        }
    }

    /// The measurement of a test: the sweep's fit over its points (over named axes, or
    /// a batch sweep's one axis `batch`, with its target), their GPU prediction and
    /// timings; the first point is the one judged.
    fn fit(
        &self,
        name: &str,
        def: &TestDef,
        device: Device,
        mut points: Vec<MeasuredPoint>,
    ) -> Result<MeasuredTest, Unmeasured> {
        let failed = |e: String| Unmeasured::Failed {
            message: format!("{name}: {e}"),
            output: None,
        };
        let point_millis: Vec<u64> = match points.len() {
            1 => Vec::new(),
            _ => points.iter().map(|p| p.wall.as_millis() as u64).collect(),
        };
        let mut runs: Vec<_> = points.iter().map(run_of).collect();
        let fitting = std::time::Instant::now();
        let granule = self.settings.cuda_pool().granularity;
        let mut sweep = grid::fit(def, &runs, granule).map_err(|e| failed(e.to_string()))?;
        let mut fit_time = fitting.elapsed();
        let mut notes = Vec::new();
        if let Some(grid_only) = sweep.take() {
            let with_axial =
                self.axial(name, def, device, grid_only, &points, &mut runs, &mut notes)?;
            fit_time += with_axial.1;
            sweep = Some(with_axial.0);
        }
        if let Some(sweep) = &mut sweep {
            let times: Vec<_> = points
                .iter()
                .map(|p| (p.point.levels.clone(), p.cpu_micros))
                .collect();
            grid::set_cpu_time_ratios(sweep, &times);
        }
        let fit_millis = sweep.is_some().then_some(fit_time.as_millis() as u64);
        let regimes = sweep
            .as_ref()
            .map(|s| grid::regimes(def, &runs, s))
            .unwrap_or_default();
        if !def.options.axes.is_empty() {
            // The pool model's batch lines read a batch sweep; a grid keeps its first
            // point's replay, and its own fits of the allocated and reserved peaks.
            points.truncate(1);
        }
        let prediction = prediction(&points, self.settings.cuda_pool());
        Ok(MeasuredTest {
            first: points.swap_remove(0),
            sweep,
            prediction,
            point_millis,
            fit_millis,
            regimes,
            // The axial points' notes; the fit's are said once judged (the committed
            // snapshot tells which are news).
            notes,
        })
    }

    /// `sweep` (the grid's fit) with its axial points ([`axial`]) measured and fitted
    /// in: the points of each combination of levels with a target, within the axial
    /// budget, their runs added to `runs`, the notes on them to `notes`; and the time
    /// the second fit took. `sweep` as it is when there are none.
    #[allow(clippy::too_many_arguments)]
    fn axial(
        &self,
        name: &str,
        def: &TestDef,
        device: Device,
        sweep: Sweep,
        grid_points: &[MeasuredPoint],
        runs: &mut Vec<(Vec<(String, String)>, GridRun)>,
        notes: &mut Vec<String>,
    ) -> Result<(Sweep, std::time::Duration), Unmeasured> {
        let failed = |e: String| Unmeasured::Failed {
            message: format!("{name}: {e}"),
            output: None,
        };
        let anew = self.mode.update == Update::Always;
        // On a device, its memory bounds a point (the least any grid point saw).
        let device_bytes = grid_points.iter().filter_map(|p| p.device_bytes).min();
        let bounds = axial::bounds(def, &self.settings, anew, device_bytes);
        let old = self.old_sweep(name);
        let (planned, said) = axial::plan(name, def, &sweep, &bounds, runs, old.as_ref());
        notes.extend(said);
        let total = (grid_points.len() + planned.len()) as u32;
        // Each point on its own: one that fails (a size the model cannot take, memory
        // it cannot get) is left out and said; the grid's verdict stands.
        let outcomes = vramtest_model::parallel::map(&planned, self.spawner.jobs, |p| {
            self.measure_points(name, def, device, vec![p.point.clone()], total)
        });
        let mut measured = Vec::with_capacity(planned.len());
        let mut kept = Vec::with_capacity(planned.len());
        for (plan, outcome) in planned.into_iter().zip(outcomes) {
            match outcome {
                Ok((points, _)) => {
                    measured.extend(points);
                    kept.push(plan);
                }
                Err(Unmeasured::Failed { message, .. }) => {
                    notes.push(axial::failed_note(name, &plan, &message));
                }
                Err(skipped) => return Err(skipped),
            }
        }
        let planned = kept;
        if planned.is_empty() {
            return Ok((sweep, std::time::Duration::ZERO));
        }
        let axial_runs: Vec<_> = measured.iter().map(run_of).collect();
        runs.extend(axial_runs.iter().cloned());
        let fitting = std::time::Instant::now();
        let granule = self.settings.cuda_pool().granularity;
        let mut refit = grid::fit(def, runs, granule)
            .map_err(|e| failed(e.to_string()))?
            .expect("a sweep fitted once fits again");
        let fit_time = fitting.elapsed();
        for (plan, (_, run)) in planned.iter().zip(&axial_runs) {
            let record = axial::record(&plan.choice, run);
            let label = grid::combination_label(name, &plan.variant);
            if let Some(grid) = sweep.variant(&plan.variant) {
                notes.extend(axial::miss_note(&label, grid, &record));
            }
            if let Some(own) = refit.variant_mut(&plan.variant) {
                own.axial.push(record);
            }
        }
        let cost = |p: &MeasuredPoint| (p.cpu_micros, p.wall);
        let spent: Vec<_> = measured.iter().map(cost).collect();
        let grid: Vec<_> = grid_points.iter().map(cost).collect();
        notes.extend(axial::cost_note(name, &spent, &grid));
        Ok((refit, fit_time))
    }

    /// The sweep of the committed snapshot of `name` on this run's device, when one
    /// reads (an unreadable one is the judgement's to report).
    fn old_sweep(&self, name: &str) -> Option<Sweep> {
        let class = self.device.class();
        let path = snapshot::path_for(&self.target.manifest_dir, &self.target.name, name, class);
        let old = snapshot::read(&path).ok()??;
        old.body.sweep().cloned()
    }

    /// The limits for `def`: the settings (workspace, package) refined by the test's
    /// attribute (read when it was compiled), key by key and category by category.
    fn policy(&self, def: &TestDef) -> Policy {
        let attribute = Settings {
            budget: def.options.budget,
            limits: def.options.limits.iter().copied().collect(),
            ..Settings::default()
        };
        let mut policy = self.settings.clone().overridden_by(&attribute).policy();
        policy.strict = self.mode.strict;
        policy
    }

    /// Judges a measurement against its snapshot: reads it, decides (see
    /// [`decide`]), finds call sites where they are wanted. Writes nothing.
    fn judge(
        &self,
        name: &str,
        def: &TestDef,
        measured: &MeasuredTest,
        class: DeviceClass,
    ) -> Judged {
        let policy = self.policy(def);
        let point = &measured.first;
        let mut body = Body::from_profile(&point.profile, class);
        body.scaling = measured.sweep.clone();
        let path = snapshot::path_for(&self.target.manifest_dir, &self.target.name, name, class);
        let mut new = Snapshot {
            source: relative_source(&self.target, def.file),
            test: name.to_owned(),
            info: point.info.clone(),
            body,
        };
        let verdict = match snapshot::read(&path) {
            Ok(Some(old)) if old.test().is_some_and(|t| t != name) => Err(Unjudged::Shared {
                path: display_path(&self.target.manifest_dir, &path),
                holder: old.test().unwrap_or_default().to_owned(),
                test: name.to_owned(),
            }),
            Ok(old) => Ok(self.verdict(name, def, &point.point, old, &mut new, policy)),
            Err(e) => Err(Unjudged::Invalid(e)),
        };
        Judged { path, new, verdict }
    }

    /// The verdict on `new` against the committed snapshot `old`; the call sites
    /// found go into `new`'s `info`.
    fn verdict(
        &self,
        name: &str,
        def: &TestDef,
        point: &RunPoint,
        old: Option<snapshot::Parsed>,
        new: &mut Snapshot,
        policy: Policy,
    ) -> SnapshotVerdict {
        let class = new.body.device_class;
        // A snapshot of an earlier schema was read through its migration steps: said,
        // and written in today's schema when the run writes the file.
        for step in old.iter().flat_map(|o| &o.migrated) {
            eprintln!("note: {name}: the snapshot predates this version's format: {step}");
        }
        let machine = new.info.machine.as_ref();
        let mut notes: Vec<String> = old
            .as_ref()
            .and_then(|o| machine_note(o.machine(), machine))
            .into_iter()
            .chain(tensors_note(name, &new.body))
            .collect();
        // On the snapshot's own machine CPU-only memory is compared: a tensor hidden in
        // blocks aligned like gemm's slabs cannot grow unseen there.
        let same_machine = old
            .as_ref()
            .and_then(|o| o.machine())
            .is_some_and(|o| Some(o) == machine);
        let policy = if same_machine {
            policy.on_the_snapshots_machine()
        } else {
            policy
        };
        let (update, check) = (self.mode.update, self.mode.check);
        let decision = decide::decide(
            old.as_ref().map(|o| &o.body),
            &new.body,
            &policy,
            update,
            check,
        );
        // A first result written (no snapshot yet): its call sites are recorded with it,
        // so its first regression names what grew against them.
        let first = old.is_none() && decision.write.is_some();
        let sites = self.sites(name, def, point, class, decision.status, first);
        if let Some(Ok(found)) = &sites {
            new.info.sites = found.for_snapshot();
        }
        let decision = decide::record_new_sites(
            decision,
            update,
            old.as_ref().map(|o| (&o.body, o.sites())),
            &new.body,
            &new.info.sites,
        );
        notes.dedup();
        SnapshotVerdict {
            old,
            policy,
            decision,
            sites,
            notes,
        }
    }

    /// Call sites, when this run wants them for a result of `status` (`first`: the
    /// test's first result, to be written): CPU only.
    fn sites(
        &self,
        name: &str,
        def: &TestDef,
        point: &RunPoint,
        class: DeviceClass,
        status: Status,
        first: bool,
    ) -> Option<Result<vramtest_model::sites::Sites, site_reruns::NoSites>> {
        let wanted = match self.sites {
            SitesWhen::Always => true,
            SitesWhen::OnRegression => status == Status::Regressed || first,
            SitesWhen::Off => false,
        };
        (wanted && class == DeviceClass::Cpu)
            .then(|| site_reruns::collect(&self.spawner, name, def, point))
    }

    /// Writes what the judgement asks for: the snapshot or its pending result (a stale
    /// pending result cleared), the snapshot's entry in insta's references file, then
    /// the timeline and prediction kept for `cargo vramtest` (found by the snapshot's
    /// path, once it is written).
    fn record(&self, measured: &MeasuredTest, judged: &Judged) -> Recorded {
        if let Some(refs) = &self.outputs.references {
            files::append_reference(refs, &judged.path);
        }
        let recorded = match &judged.verdict {
            Ok(verdict) => self.write(verdict, judged),
            Err(_) => Recorded::nothing(),
        };
        if let Some(timeline) = &measured.first.timeline {
            files::keep_timeline(timeline, &judged.path);
        }
        if let Some(prediction) = &measured.prediction {
            files::keep_prediction(prediction, &judged.path);
        }
        recorded
    }

    /// Writes the snapshot or pending result the verdict asks for, and clears a
    /// pending result it makes stale.
    fn write(&self, verdict: &SnapshotVerdict, judged: &Judged) -> Recorded {
        let decision = &verdict.decision;
        let written = files::write_result(decision, &judged.path, &judged.new);
        if written.is_err() {
            return Recorded {
                written,
                kept: None,
            };
        }
        let pending = snapshot::pending_path(&judged.path);
        let kept = (decision.write == Some(decide::Write::Snapshot) || decision.remove_pending)
            .then(|| {
                let shown = display_path(&self.target.manifest_dir, &pending);
                files::clear_pending(&pending, &judged.new.body, &shown)
            })
            .flatten();
        Recorded { written, kept }
    }
}

/// A measured point as the fit reads it, with its combination of levels.
fn run_of(p: &MeasuredPoint) -> (Vec<(String, String)>, GridRun) {
    let run = grid::grid_run(&p.point, &p.profile, p.pool.as_ref().map(|r| r.peaks));
    (p.point.levels.clone(), run)
}

/// The notes on a sweep's flagged figures whose flags the committed snapshot does not
/// already record (new or changed ones), and on the combinations of levels recorded for
/// the first time that save no memory ([`vramtest_model::sweep::saving_notes`]),
/// printed here and kept for the report.
fn fit_notes(name: &str, measured: &MeasuredTest, judged: &Judged) -> Vec<String> {
    let Some(sweep) = &measured.sweep else {
        return Vec::new();
    };
    let old = judged
        .verdict
        .as_ref()
        .ok()
        .and_then(|v| v.old.as_ref())
        .and_then(|o| o.body.sweep());
    let mut notes = grid::flagged_notes(name, sweep, old);
    notes.extend(axial::new_points_note(name, sweep, old));
    notes.extend(axial::without_notes(name, sweep, old));
    notes.extend(grid::regime_notes(name, sweep, old, &measured.regimes));
    if let Some(target) = &sweep.target
        && let Ok(Some(m)) = sweep.peak_move(&target.at)
    {
        notes.push(format!(
            "{name}: target ({}): {m}: the grid's peak phase is not the target's, whose predicted peak is {}'s",
            vramtest_model::sweep::show_point(&target.at),
            m.to
        ));
    }
    notes.extend(
        vramtest_model::sweep::saving_notes(sweep, old)
            .into_iter()
            .map(|n| format!("{name}: {n}")),
    );
    for note in &notes {
        eprintln!("note: {note}");
    }
    notes
}

/// The gradient check's causes of a first result (no snapshot yet), kept as notes so
/// `cargo vramtest` says them whatever the verdict (a failure's message says them too).
fn gradient_notes(name: &str, judged: &Judged) -> Vec<String> {
    match &judged.verdict {
        Ok(v) if v.old.is_none() => judged
            .new
            .info
            .gradient_check
            .iter()
            .map(|f| format!("{name}: {}", f.line()))
            .collect(),
        _ => Vec::new(),
    }
}

/// libtest's verdict on a report: a failure with its text (the message, the child's
/// output, the diff) when the report fails the run; else a pass, whose message (an
/// improvement, a snapshot written) is printed. Both with workflow commands stopped
/// when `inert` ([`Outputs::inert`]).
fn completion(report: &TestReport, inert: bool) -> Result<Completion, Failed> {
    let shown = |text: String| {
        if inert {
            vramtest_model::workflow::inert(&text)
        } else {
            text
        }
    };
    if report.status == Status::Ignored {
        return Ok(Completion::ignored_with(
            report.ignore_reason.clone().unwrap_or_default(),
        ));
    }
    if report.fails() {
        let mut text = report.message.clone();
        if let Some(output) = &report.output {
            text += &output_section(output);
        }
        if let Some(diff) = &report.diff {
            text += "\n\n";
            text += diff;
        }
        return Err(Failed::from(shown(text)));
    }
    if !report.message.is_empty() {
        print!(
            "{}",
            shown(format!("{}: {}\n", report.test, report.message))
        );
    }
    Ok(Completion::Completed)
}

/// The GPU prediction of a CPU run: every batch size's pool peaks (none when a
/// point has none, as on a CUDA device).
fn prediction(points: &[MeasuredPoint], pool: CudaPool) -> Option<Prediction> {
    let points = points
        .iter()
        .map(|m| {
            m.pool.as_ref().map(|replay| PredictedPoint {
                batch: m.point.batch as u64,
                replay: replay.clone(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Prediction { pool, points })
}

/// A note when the snapshot was recorded on another machine (CPU, instruction set,
/// caches or threads) than this run: CPU-only memory differs between them and is not
/// compared (on the snapshot's own machine it is), the gated figures are. Never a
/// failure; shown once per run (by the plain harness too).
fn machine_note(
    old: Option<&snapshot::CpuFingerprint>,
    new: Option<&snapshot::CpuFingerprint>,
) -> Option<String> {
    let (old, new) = (old?, new?);
    if old == new {
        return None;
    }
    let note = format!(
        "snapshots recorded on {old}; this run on {new}: CPU-only memory (gemm's packing buffers) differs between machines and is compared only on the snapshot's own, every gated figure is"
    );
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.contains(&note) {
        eprintln!("note: {note}");
        said.push(note.clone());
    }
    Some(note)
}

/// A warning when `body`'s CPU-only memory is larger than its tensor categories
/// together: tensors aligned to 128 B or more (faer, aligned-vec) are counted as
/// CPU-only, which only the snapshot's machine compares. Never a failure; shown by the
/// plain harness too.
fn tensors_note(name: &str, body: &Body) -> Option<String> {
    let (cpu_only, tensors) = body.cpu_only_over_tensors()?;
    let note = format!(
        "warning: {name}: CPU-only memory ({}) is larger than the tensor categories together ({}): blocks aligned to 128 B or more count as CPU-only (gemm's packing slabs), and a library that aligns its tensors so (faer, aligned-vec) hides them there, compared only on the snapshot's own machine; a small model beside gemm's slabs is no cause for concern",
        HumanBytes(cpu_only),
        HumanBytes(tensors)
    );
    eprintln!("{note}");
    Some(note)
}

/// A child that wrote its result and then did not end cleanly (an `atexit` handler
/// that aborts, a forked copy that returned from the step): it fails, whatever it
/// measured, and the figures it wrote are shown.
fn unclean_end(label: &str, result: &ChildResult, how: &str) -> String {
    let what = match result {
        ChildResult::Measured { profile, .. } => {
            let at_peak: Vec<String> = profile
                .at_peak
                .iter()
                .filter(|&(_, b)| b > 0)
                .map(|(c, b)| format!("{c} {}", HumanBytes(b)))
                .collect();
            format!(
                "; it had measured a peak of {} ({})",
                HumanBytes(profile.peak_bytes),
                at_peak.join(", ")
            )
        }
        ChildResult::Failed { message } => format!("; it had failed: {message}"),
        ChildResult::Ignored { reason } => format!("; it had skipped itself: {reason}"),
    };
    format!(
        "{label} wrote its result, then its process ended with {how}: a verdict needs a clean exit{what}"
    )
}

/// A sweep whose step never read some of its axes measured the same step at each of
/// their values: its fit would be a constant in them, and a prediction at any value a
/// silent guess.
fn unread_axes_message(name: &str, def: &TestDef, axes: &[String]) -> String {
    let categorical = |a: &str| def.options.levels.iter().any(|(k, _)| *k == a);
    let reads: Vec<String> = axes
        .iter()
        .map(|a| match categorical(a) {
            true => format!("t.variant(\"{a}\")"),
            false => format!("t.axis(\"{a}\")"),
        })
        .collect();
    format!(
        "{name}: no point of the sweep read the axis {} ({}): every value measured the same step (hint: read it in the step, or remove it from axes(..))",
        axes.iter()
            .map(|a| format!("`{a}`"))
            .collect::<Vec<_>>()
            .join(", "),
        reads.join(", ")
    )
}
