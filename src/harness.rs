//! The test harness behind `vramtest::main!()`: lists tests the way libtest does (so
//! `cargo test` and `cargo nextest run` both drive it), runs each test in a child
//! process of its own, and judges the child's measurement against the snapshot.

use crate::env::{self, Update};
use crate::judge::{self, Write};
use crate::probe::heap;
use crate::step::{Device, Step};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use vramtest_model::config::DeviceSetting;
use vramtest_model::report::{Change, Config, Details, REPORT_SCHEMA, Status, TestReport};
use vramtest_model::snapshot::{self, Info};
use vramtest_model::{Body, DeviceClass, HumanBytes, Limit, Movement, Policy, Profile, Snapshot};

/// A `#[vramtest]` function, registered by the attribute.
#[doc(hidden)]
pub struct TestDef {
    pub name: &'static str,
    pub module: &'static str,
    pub file: &'static str,
    pub line: u32,
    pub func: fn(&mut Step) -> crate::Result<()>,
    pub options: Options,
}

/// The attribute's options, checked at compile time.
#[doc(hidden)]
pub struct Options {
    pub iterations: Option<u32>,
    /// `Some(reason)` (possibly empty) when the test is ignored.
    pub ignore: Option<&'static str>,
    /// `(key, limit)` pairs: `tolerance`, `peak`, `leak` or a category.
    pub limits: &'static [(&'static str, &'static str)],
    pub budget: Option<u64>,
    /// Device classes the test supports (`cpu`, `cuda`); empty means all.
    pub devices: &'static [&'static str],
}

inventory::collect!(TestDef);

/// The test target this harness runs in.
#[derive(Debug, Clone)]
struct Target {
    manifest_dir: PathBuf,
    name: String,
}

/// The default iterations of `t.iterations()`.
pub const DEFAULT_ITERATIONS: u32 = 3;

/// The whole `main` of a vramtest target.
#[doc(hidden)]
pub fn main(manifest_dir: &'static str, crate_name: &'static str) -> ExitCode {
    // The compile-time crate directory, not the run-time CARGO_MANIFEST_DIR: that one is
    // inherited by every process a test run starts, so it may name another crate.
    let manifest_dir = PathBuf::from(manifest_dir);
    let target = Target {
        manifest_dir,
        name: crate_name.to_owned(),
    };
    if let Ok(test) = std::env::var(env::CHILD_TEST) {
        return child(&test);
    }
    match parent(target) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn test_name(def: &TestDef) -> String {
    // `module_path!()` starts with the crate; names are relative to it.
    match def.module.split_once("::") {
        Some((_, rest)) => format!("{rest}::{}", def.name),
        None => def.name.to_owned(),
    }
}

fn registered() -> Vec<(String, &'static TestDef)> {
    let mut tests: Vec<_> = inventory::iter::<TestDef>
        .into_iter()
        .map(|d| (test_name(d), d))
        .collect();
    tests.sort_by(|a, b| a.0.cmp(&b.0));
    tests
}

/// Everything a trial needs, shared between trials.
struct Run {
    target: Target,
    device: Result<Device, String>,
    update: Update,
    check: bool,
    strict: bool,
    config: Config,
    nocapture: bool,
    timeout: Option<std::time::Duration>,
    report_dir: Option<PathBuf>,
    references: Option<PathBuf>,
}

fn parent(target: Target) -> Result<ExitCode, String> {
    let mut args = Arguments::from_args();
    let tests = registered();
    if args.list {
        // Listing must be fast and side-effect free (nextest lists every binary).
        let trials = tests
            .iter()
            .map(|(name, def)| {
                Trial::test(name.clone(), || Ok(())).with_ignored_flag(def.options.ignore.is_some())
            })
            .collect();
        return Ok(libtest_mimic::run(&args, trials).exit_code());
    }
    // `cargo vramtest` passes its reading of the metadata tables; under plain `cargo
    // test` the harness reads the same tables itself.
    let (config, configured_device) = match env::config()? {
        Some(config) => (config, None),
        None => {
            let settings = crate::settings::from_manifests(&target.manifest_dir)?;
            (settings.to_harness(), settings.device)
        }
    };
    let choice = env::device()?
        .or(configured_device)
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
        config,
        nocapture: args.nocapture,
        timeout: env::timeout()?,
        report_dir: env::report_dir(),
        references: env::references_file(),
    });
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

fn select_device(choice: DeviceSetting) -> Result<Device, String> {
    match choice {
        DeviceSetting::Cpu => Ok(Device::Cpu),
        DeviceSetting::Cuda => crate::cuda::first_device(),
        DeviceSetting::Auto => Ok(crate::cuda::first_device().unwrap_or(Device::Cpu)),
    }
}

fn class_of(device: Device) -> DeviceClass {
    match device {
        Device::Cpu => DeviceClass::Cpu,
        Device::Cuda(_) => DeviceClass::Cuda,
    }
}

/// What a child process reports back.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ChildResult {
    Measured { profile: Box<Profile>, info: Info },
    Failed { message: String },
    Ignored { reason: String },
}

impl Run {
    fn trial(&self, name: &str, def: &TestDef) -> Result<Completion, Failed> {
        let mut report = TestReport {
            schema: REPORT_SCHEMA,
            target: self.target.name.clone(),
            test: name.to_owned(),
            source: relative_source(&self.target.manifest_dir, def.file),
            line: def.line,
            device_class: self.device.as_ref().ok().map(|d| class_of(*d)),
            status: Status::Failed,
            body: None,
            old_peak_bytes: None,
            changes: Vec::new(),
            message: String::new(),
            diff: None,
            snapshot: None,
            written: None,
            output: None,
            details: None,
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
            write_report(dir, &report);
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
        let (result, output) = self.spawn_child(name, device).map_err(|e| {
            report.message = e.clone();
            Failed::from(e)
        })?;
        let (profile, info) = match result {
            Some(ChildResult::Measured { profile, info }) => (profile, info),
            Some(ChildResult::Ignored { reason }) => {
                report.status = Status::Ignored;
                report.message = reason.clone();
                return Ok(Completion::ignored_with(reason));
            }
            Some(ChildResult::Failed { message }) => {
                report.message = format!("{name} failed: {message}");
                report.output = Some(output.clone());
                return Err(failure(&report.message, &output));
            }
            None => {
                report.message = format!("{name} crashed before reporting a result");
                report.output = Some(output.clone());
                return Err(failure(&report.message, &output));
            }
        };
        report.details = Some(Details {
            baseline_bytes: profile.baseline_bytes,
            allocations: profile.allocations,
            reserved_peak_bytes: profile.reserved_peak_bytes,
            leak_sites: profile.leak_sites.clone(),
        });
        self.judge(name, def, &profile, info, report)
            .map(|()| Completion::Completed)
            .map_err(Failed::from)
    }

    /// Runs the test in a fresh process: a clean heap, a clean CUDA context, and a
    /// crash that takes down only itself.
    fn spawn_child(
        &self,
        name: &str,
        device: Device,
    ) -> Result<(Option<ChildResult>, String), String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find the test binary: {e}"))?;
        let result_path = std::env::temp_dir().join(format!(
            "vramtest-{}-{}.json",
            std::process::id(),
            name.replace("::", "__")
        ));
        let _ = std::fs::remove_file(&result_path);
        let mut cmd = Command::new(exe);
        cmd.env(env::CHILD_TEST, name)
            .env(env::CHILD_RESULT, &result_path)
            .env(env::CHILD_DEVICE, device.to_string())
            .env(
                env::CONFIG,
                serde_json::to_string(&self.config).expect("configs serialize"),
            )
            .stdin(Stdio::null());
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            // Per-thread buffers (gemm packing) scale with the thread count: pin it so
            // figures do not depend on the machine's cores.
            cmd.env("RAYON_NUM_THREADS", "2");
        }
        let (output, timed_out) = run_process(cmd, !self.nocapture, self.timeout)?;
        if timed_out {
            let _ = std::fs::remove_file(&result_path);
            return Err(format!(
                "{name} timed out after {:.0?} (VRAMTEST_TIMEOUT) and was killed{}",
                self.timeout.unwrap_or_default(),
                if output.trim().is_empty() {
                    String::new()
                } else {
                    format!("\n---- output ----\n{}", output.trim())
                }
            ));
        }
        let result = match std::fs::read(&result_path) {
            Ok(bytes) => {
                let _ = std::fs::remove_file(&result_path);
                Some(serde_json::from_slice(&bytes).map_err(|e| {
                    format!(
                        "the test's result file {} is unreadable: {e}",
                        result_path.display()
                    )
                })?)
            }
            // No file: the child died before it could write one.
            Err(_) => None,
        };
        Ok((result, output))
    }

    fn policy(&self, def: &TestDef) -> Result<Policy, String> {
        let mut policy = Policy::default();
        policy
            .set_all(self.config.limits.iter().map(|(k, l)| (k.as_str(), *l)))
            .map_err(|e| e.to_string())?;
        policy.budget = self.config.budget;
        let options = def
            .options
            .limits
            .iter()
            .map(|(key, text)| Ok((*key, text.parse::<Limit>().map_err(|e| e.to_string())?)))
            .collect::<Result<Vec<_>, String>>()?;
        policy.set_all(options).map_err(|e| e.to_string())?;
        if def.options.budget.is_some() {
            policy.budget = def.options.budget;
        }
        policy.strict = self.strict;
        Ok(policy)
    }

    fn judge(
        &self,
        name: &str,
        def: &TestDef,
        profile: &Profile,
        info: Info,
        report: &mut TestReport,
    ) -> Result<(), String> {
        let class = report.device_class.expect("set for measured tests");
        let body = Body::from_profile(profile, class);
        let snap_path =
            snapshot::path_for(&self.target.manifest_dir, &self.target.name, name, class);
        let pending = snapshot::pending_path(&snap_path);
        report.snapshot = Some(snap_path.clone());
        report.body = Some(body.clone());
        if let Some(refs) = &self.references {
            append_reference(refs, &snap_path);
        }
        let old = match snapshot::read(&snap_path) {
            Ok(old) => old,
            Err(e) => {
                report.status = Status::SnapshotError;
                report.message = format!("invalid snapshot: {e}");
                return Err(report.message.clone());
            }
        };
        report.old_peak_bytes = old.as_ref().map(|o| o.body.peak_bytes);
        let policy = self.policy(def)?;
        let decision = judge::decide(
            old.as_ref().map(|o| &o.body),
            &body,
            &policy,
            self.update,
            self.check,
        );
        report.status = decision.status;

        let snapshot = Snapshot {
            source: report.source.clone(),
            test: name.to_owned(),
            info,
            body: body.clone(),
        };
        let written = match decision.write {
            Some(Write::Snapshot) => Some(snap_path.clone()),
            Some(Write::Pending) => Some(pending.clone()),
            None => None,
        };
        if let Some(path) = &written {
            snapshot::write_atomic(path, &snapshot.to_text()).map_err(|e| {
                report.status = Status::Failed;
                report.message = format!("cannot write the snapshot: {e}");
                report.message.clone()
            })?;
            if decision.write == Some(Write::Snapshot) {
                let _ = std::fs::remove_file(&pending);
            }
        } else if decision.remove_pending {
            let _ = std::fs::remove_file(&pending);
        }
        report.written = written.clone();

        let shown = |p: &Path| display_path(&self.target.manifest_dir, p);
        let mut lines = Vec::new();
        let headline = match decision.status {
            Status::Passed | Status::Improved | Status::New => None,
            Status::Regressed => Some(format!("memory regression in {name} ({class})")),
            Status::Missing => Some(format!(
                "{name} ({class}) has no snapshot {} (check mode, as on CI, never writes one)",
                shown(&snap_path)
            )),
            _ => None,
        };
        if let Some((peak, budget)) = decision.over_budget {
            lines.push(format!(
                "peak {} is over the budget of {}",
                HumanBytes(peak),
                HumanBytes(budget)
            ));
        }
        if let Some(why) = decision
            .comparison
            .as_ref()
            .and_then(|c| c.incomparable.clone())
        {
            lines.push(why);
        }
        if decision.comparison.is_none()
            && let Some(line) = vramtest_model::policy::leak_message(&body, &policy)
        {
            lines.push(line);
        }
        if let Some(cmp) = &decision.comparison {
            for f in &cmp.findings {
                report.changes.push(Change {
                    subject: f.subject,
                    old: f.old,
                    new: f.new,
                    limit: String::from(f.limit),
                    movement: f.movement,
                    message: f.to_string(),
                });
                if f.movement != Movement::Within {
                    lines.push(f.to_string());
                }
            }
        }
        if profile.leak_bytes_per_iteration > 0 {
            for site in &profile.leak_sites {
                lines.push(format!(
                    "leak: {} per iteration kept alive in {} (allocated in phase {})",
                    HumanBytes(site.bytes_per_iteration),
                    site.category,
                    site.phase
                        .map_or("outside any phase".into(), |p| p.to_string())
                ));
            }
        }
        if let Some(path) = &written {
            let what = if decision.write == Some(Write::Snapshot) {
                "snapshot written"
            } else {
                "pending result written"
            };
            lines.push(format!("{what}: {}", shown(path)));
            if body.leak_bytes_per_iteration > 0 {
                lines.push(format!(
                    "note: it records a leak of {} per iteration",
                    HumanBytes(body.leak_bytes_per_iteration)
                ));
            }
        }
        lines.extend(profile.hints());
        if decision.status == Status::New && decision.write == Some(Write::Pending) {
            lines.insert(
                0,
                format!(
                    "{name} ({class}) has no snapshot yet; peak {}",
                    HumanBytes(body.peak_bytes)
                ),
            );
        }
        let hint = match decision.status {
            Status::Regressed | Status::Improved | Status::New
                if decision.write == Some(Write::Pending) =>
            {
                Some(
                    "hint: review with `cargo vramtest review` (or `cargo insta review`); accept with `cargo vramtest accept`, or rerun with VRAMTEST_UPDATE=always",
                )
            }
            Status::Missing => Some(
                "hint: run the tests locally and commit the accepted .snap file (`cargo vramtest accept`)",
            ),
            _ => None,
        };
        if let (Some(old), true) = (&old, decision.status == Status::Regressed) {
            let diff = vramtest_model::policy::body_diff(
                &old.body,
                &body,
                &format!("old: {}", shown(&snap_path)),
                &format!("new: {name} ({class})"),
            );
            report.diff = Some(diff);
        }
        let mut message = headline
            .into_iter()
            .chain(lines)
            .collect::<Vec<_>>()
            .join("\n  ");
        if let Some(h) = hint {
            message += &format!("\n{h}");
        }
        report.message = message.clone();
        if report.fails() {
            let mut text = message;
            if let Some(diff) = &report.diff {
                text += "\n\n";
                text += diff;
            }
            return Err(text);
        }
        if !message.is_empty() {
            // Passing with something to say (improved, new snapshot written).
            println!("{name}: {message}");
        }
        Ok(())
    }
}

/// Runs a child to its end, or kills it after `timeout`; returns its output (when
/// captured) and whether it timed out. Output is drained while waiting, so a chatty
/// child never blocks on a full pipe.
fn run_process(
    mut cmd: Command,
    capture: bool,
    timeout: Option<std::time::Duration>,
) -> Result<(String, bool), String> {
    use std::io::Read;
    use wait_timeout::ChildExt;
    if capture {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the test: {e}"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let wait = |child: &mut std::process::Child| match timeout {
        Some(t) => child.wait_timeout(t),
        None => child.wait().map(Some),
    };
    let status = wait(&mut child).map_err(|e| format!("cannot wait for the test: {e}"))?;
    let timed_out = status.is_none();
    if timed_out {
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut text = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
    text += &String::from_utf8_lossy(&err.join().unwrap_or_default());
    match status {
        Some(s) if !capture => text = format!("(output shown above; exit status: {s})"),
        Some(s) if !s.success() => text += &format!("\n(exit status: {s})"),
        _ => {}
    }
    Ok((text, timed_out))
}

fn failure(message: &str, output: &str) -> Failed {
    let output = output.trim();
    if output.is_empty() {
        Failed::from(message)
    } else {
        Failed::from(format!("{message}\n---- output ----\n{output}"))
    }
}

fn write_report(dir: &Path, report: &TestReport) {
    let file = dir.join(format!(
        "{}__{}.json",
        report.target,
        report.test.replace("::", "__")
    ));
    let text = serde_json::to_string(report).expect("reports serialize");
    if let Err(e) = snapshot::write_atomic(&file, &text) {
        eprintln!("warning: cannot write the report: {e}");
    }
}

fn append_reference(refs: &Path, snap: &Path) {
    use std::io::Write as _;
    // One `write_all` of a whole line on an append-mode file: parallel trials and
    // processes do not interleave their lines.
    let line = format!("{}\n", snap.display());
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(refs)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!(
            "warning: cannot record {} in {}: {e}",
            snap.display(),
            refs.display()
        );
    }
}

/// `file!()` of the test, relative to its crate (`tests/vram.rs`). rustc gives paths
/// relative to the workspace root, or absolute; the longest suffix that exists under
/// the crate is it.
fn relative_source(manifest_dir: &Path, file: &str) -> String {
    let path = Path::new(file);
    if let Ok(rel) = path.strip_prefix(manifest_dir) {
        return rel.to_string_lossy().replace('\\', "/");
    }
    let parts: Vec<_> = path.components().collect();
    for start in 0..parts.len() {
        let suffix: PathBuf = parts[start..].iter().collect();
        if manifest_dir.join(&suffix).is_file() {
            return suffix.to_string_lossy().replace('\\', "/");
        }
    }
    file.replace('\\', "/")
}

/// A path relative to the crate, for messages.
fn display_path(manifest_dir: &Path, p: &Path) -> String {
    p.strip_prefix(manifest_dir)
        .unwrap_or(p)
        .display()
        .to_string()
}

/// Runs one test in this (child) process and writes its result.
fn child(test: &str) -> ExitCode {
    let result = run_child(test);
    let Ok(path) = std::env::var(env::CHILD_RESULT) else {
        eprintln!(
            "error: {} is set without {}",
            env::CHILD_TEST,
            env::CHILD_RESULT
        );
        return ExitCode::from(2);
    };
    let text = serde_json::to_vec(&result).expect("results serialize");
    if let Err(e) = std::fs::write(&path, text) {
        eprintln!("error: cannot write the result to {path}: {e}");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

fn run_child(test: &str) -> ChildResult {
    let Some((_, def)) = registered().into_iter().find(|(n, _)| n == test) else {
        return ChildResult::Failed {
            message: format!("no test named `{test}` in this binary"),
        };
    };
    let device = match std::env::var(env::CHILD_DEVICE).as_deref() {
        Ok("cpu") | Err(_) => Device::Cpu,
        Ok(other) => match other.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
            Some(n) => Device::Cuda(n),
            None => {
                return ChildResult::Failed {
                    message: format!("unknown device `{other}`"),
                };
            }
        },
    };
    let iterations = def
        .options
        .iterations
        .or(env::config().ok().flatten().and_then(|c| c.iterations))
        .unwrap_or(DEFAULT_ITERATIONS);
    match device {
        Device::Cpu => measure_cpu(def, iterations),
        Device::Cuda(n) => crate::cuda::measure(def, n, iterations),
    }
}

fn measure_cpu(def: &TestDef, iterations: u32) -> ChildResult {
    if !heap::installed() {
        return ChildResult::Failed {
            message: "the counting allocator is not installed (hint: end the test file with `vramtest::main!();`, which installs it)".into(),
        };
    }
    let mut step = Step::new(Device::Cpu, iterations);
    let outcome = run_body(def, &mut step, heap::start);
    let events = heap::stop();
    match outcome {
        Ok(baseline) => {
            let mut profile = vramtest_model::ledger::profile(&events);
            profile.baseline_bytes = baseline;
            ChildResult::Measured {
                info: Info {
                    device: "cpu".into(),
                    fidelity: profile.fidelity.to_string(),
                    tool: format!("vramtest {}", env!("CARGO_PKG_VERSION")),
                    driver: None,
                    cuda: None,
                },
                profile: Box::new(profile),
            }
        }
        Err(message) => ChildResult::Failed { message },
    }
}

/// Starts the probe with `start`, runs the test body, and turns an error or a panic
/// into a message. Returns what `start` returned.
pub(crate) fn run_body<S>(
    def: &TestDef,
    step: &mut Step,
    start: impl FnOnce() -> S,
) -> Result<S, String> {
    let started = start();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (def.func)(step)));
    match outcome {
        Ok(Ok(())) => Ok(started),
        Ok(Err(e)) => Err(format!("returned an error: {e}")),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".into());
            Err(format!("panicked: {msg}"))
        }
    }
}
