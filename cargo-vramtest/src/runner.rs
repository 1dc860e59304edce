//! Lists the tests of each built binary and runs them: every test in a process of its
//! own (`<bin> <name> --exact`, which itself measures in a child process), up to `-j`
//! at once (on GPUs, one per device, each process pinned to its own), in the package's
//! directory like `cargo test`. A test that panics, aborts
//! or segfaults fails with its output; the others still run.

use crate::case::{Binary, Outcome, TestCase};
use crate::error::{Error, Result};
use crate::progress::Progress;
use anstream::adapter::strip_str;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use vramtest_model::HumanBytes;
use vramtest_model::report::{Status, TestReport};

/// Environment variables for the tests of each package (`VRAMTEST_*`).
pub type PackageEnv = BTreeMap<String, Vec<(String, String)>>;

/// The names in libtest's `--list --format terse` output (`<name>: test` lines).
pub fn parse_terse(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_owned)
        .collect()
}

/// Lists the tests of each binary (`--list --format terse`, then with `--ignored`),
/// sorted by binary then name.
pub fn list(binaries: &[Binary], env: &PackageEnv) -> Result<Vec<TestCase>> {
    let mut cases = Vec::new();
    for binary in binaries {
        let binary = Arc::new(binary.clone());
        let all = parse_terse(&list_output(&binary, env, false)?);
        let ignored = parse_terse(&list_output(&binary, env, true)?);
        let mut names = all;
        names.sort();
        names.dedup();
        cases.extend(names.into_iter().map(|name| TestCase {
            ignored: ignored.contains(&name),
            binary: Arc::clone(&binary),
            name,
        }));
    }
    cases.sort_by(|a, b| (a.binary.id(), &a.name).cmp(&(b.binary.id(), &b.name)));
    Ok(cases)
}

fn list_output(binary: &Binary, env: &PackageEnv, ignored: bool) -> Result<String> {
    let mut cmd = command(binary, env);
    cmd.args(["--list", "--format", "terse"]);
    if ignored {
        cmd.arg("--ignored");
    }
    let out = cmd.output().map_err(|e| Error::List {
        binary: binary.path.clone(),
        message: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(Error::List {
            binary: binary.path.clone(),
            message: format!(
                "{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A command for a test binary, set up as `cargo test` would run it.
fn command(binary: &Binary, env: &PackageEnv) -> Command {
    let mut cmd = Command::new(&binary.path);
    cmd.current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env("CARGO_PKG_NAME", &binary.package)
        .env("CARGO_PKG_VERSION", &binary.package_version)
        .stdin(Stdio::null());
    if let Some(vars) = env.get(&binary.package) {
        cmd.envs(vars.iter().map(|(k, v)| (k, v)));
    }
    // Dynamic libraries of the build (a `dylib` dependency) next to the binary.
    if let Some(deps) = binary.path.parent() {
        let var = dylib_path_var();
        let mut paths = vec![deps.to_path_buf()];
        if let Some(profile) = deps.parent() {
            paths.push(profile.to_path_buf());
        }
        paths.extend(std::env::var_os(var).iter().flat_map(std::env::split_paths));
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env(var, joined);
        }
    }
    cmd
}

fn dylib_path_var() -> &'static str {
    if cfg!(windows) {
        "PATH"
    } else if cfg!(target_os = "macos") {
        "DYLD_FALLBACK_LIBRARY_PATH"
    } else {
        "LD_LIBRARY_PATH"
    }
}

/// What the tests of a run hold while they run: nothing on the CPU, or a GPU each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    Cpu,
    /// The GPUs, each as its process is pinned to it (`CUDA_VISIBLE_DEVICES=<id>`).
    Gpus(Vec<String>),
}

impl Devices {
    /// The `count` GPUs the driver shows this process. Without `CUDA_VISIBLE_DEVICES`
    /// they are `0`..`count`; with it (`visible`, "2,5"), its first `count` entries, as
    /// written (an index, a UUID, a MIG id): the driver applies the variable in each test
    /// process again, so an entry must never be renumbered.
    pub fn gpus(count: usize, visible: Option<&str>) -> Devices {
        let ids = match visible {
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .take(count)
                .map(str::to_owned)
                .collect(),
            None => (0..count).map(|i| i.to_string()).collect(),
        };
        Devices::Gpus(ids)
    }

    /// One slot per test that may run at once, `jobs` at most (`-j`): on the CPU `jobs`
    /// slots (default: every core), none pinned; on GPUs one per device, pinned to it
    /// (tests that share a GPU would see each other's memory). Never empty.
    pub fn slots(&self, jobs: Option<usize>) -> Vec<Option<String>> {
        let slots: Vec<Option<String>> = match self {
            Devices::Cpu => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                vec![None; jobs.unwrap_or(cores)]
            }
            Devices::Gpus(ids) => ids
                .iter()
                .take(jobs.unwrap_or(usize::MAX))
                .cloned()
                .map(Some)
                .collect(),
        };
        if slots.is_empty() { vec![None] } else { slots }
    }
}

/// Runs the tests, one at a time in each slot ([`Devices::slots`]): a test of a pinned
/// slot sees only its GPU. Results come back in the order of `cases`.
pub fn run(
    cases: &[TestCase],
    env: &PackageEnv,
    slots: &[Option<String>],
    progress: &Progress,
) -> Result<Vec<Outcome>> {
    let scratch = ScratchDir::new()?;
    let to_run = cases.iter().filter(|c| !c.ignored).count() as u64;
    progress.start(to_run, "Running");
    let mut outcomes: Vec<Option<Outcome>> = vec![None; cases.len()];
    let mut said = BTreeSet::new();
    schedule(
        cases,
        slots,
        // An ignored test runs too: the harness skips it at once and leaves a report
        // that says why.
        |i, case, slot| {
            let dir = scratch.path.join(i.to_string());
            run_one(case, env, &dir, slot.as_deref())
        },
        |i, outcome| {
            for line in unsaid_notes(&mut said, &outcome.report) {
                anstream::eprintln!("{line}");
            }
            if !outcome.case.ignored {
                progress.inc();
                progress.log(progress_line(&outcome));
            }
            progress.set_message(outcome.case.full_name());
            outcomes[i] = Some(outcome);
        },
    );
    progress.finish();
    Ok(outcomes.into_iter().flatten().collect())
}

/// Runs `work` on every item, one worker per slot: each worker takes the next item no
/// one has taken and runs it with its own slot, then the next, so two items never hold
/// one slot at once and at most `slots.len()` run together. `done` gets each result
/// with its item's index, on the calling thread, as they come.
pub fn schedule<T: Sync, S: Sync, R: Send>(
    items: &[T],
    slots: &[S],
    work: impl Fn(usize, &T, &S) -> R + Sync,
    mut done: impl FnMut(usize, R),
) {
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        for slot in slots.iter().take(items.len()) {
            let tx = tx.clone();
            let (next, work) = (&next, &work);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(item) = items.get(i) else { break };
                    if tx.send((i, work(i, item, slot))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, result) in rx {
            done(i, result);
        }
    });
}

/// The harness's notes about the run itself (a test binary built in another checkout)
/// that the run has not shown yet, as `note: …` lines: each is shown once per run.
fn unsaid_notes(said: &mut BTreeSet<String>, report: &TestReport) -> Vec<String> {
    report
        .notes
        .iter()
        .filter(|note| said.insert((*note).clone()))
        .map(|note| format!("note: {note}"))
        .collect()
}

/// `    PASS [  1.23s] candle-mlp::vram::mlp_adamw  33.51 MiB`
fn progress_line(o: &Outcome) -> String {
    let style = crate::output::status_style(o.report.status, o.fails());
    let peak = o
        .report
        .body
        .as_ref()
        .map(|b| HumanBytes(b.peak_bytes).to_string())
        .unwrap_or_default();
    format!(
        "{style}{:>14}{style:#} [{:>7.2}s] {}  {peak}",
        crate::output::status_label(&o.report),
        o.duration.as_secs_f64(),
        o.case.full_name()
    )
}

/// Runs one test in a process of its own; `gpu` pins it to that GPU.
fn run_one(case: &TestCase, env: &PackageEnv, dir: &Path, gpu: Option<&str>) -> Outcome {
    let start = Instant::now();
    let result = std::fs::create_dir_all(dir)
        .and_then(|()| {
            let mut cmd = command(&case.binary, env);
            if let Some(id) = gpu {
                cmd.env("CUDA_VISIBLE_DEVICES", id);
            }
            cmd.arg(&case.name)
                .arg("--exact")
                .env("VRAMTEST_REPORT_DIR", dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output()
        })
        .map_err(|e| format!("cannot run {}: {e}", case.binary.path.display()));
    let duration = start.elapsed();
    let report = match result {
        Ok(out) => reconcile(case, &Exit::of(&out), find_report(dir)),
        Err(message) => synthetic(case, Status::Failed, message, None),
    };
    Outcome {
        case: case.clone(),
        report,
        duration,
    }
}

/// How a test's process ended.
#[derive(Debug, Clone)]
pub struct Exit {
    pub success: bool,
    /// `exit status: 101`, `signal: 6 (SIGABRT)`.
    pub status: String,
    /// stdout then stderr, without color.
    pub output: String,
}

impl Exit {
    fn of(out: &Output) -> Exit {
        let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
        output += &String::from_utf8_lossy(&out.stderr);
        Exit {
            success: out.status.success(),
            status: out.status.to_string(),
            output: strip_str(&output).to_string(),
        }
    }
}

/// What the harness left in the report directory.
#[derive(Debug, Clone)]
pub enum Found {
    /// No report: the process crashed before the harness judged, or it is not a
    /// vramtest harness at all.
    Nothing,
    Report(Box<TestReport>),
    /// A report file that cannot be read or parsed.
    Unreadable {
        path: PathBuf,
        error: String,
    },
}

/// The report the harness wrote in `dir` (the first `.json` file by name; one test
/// runs, so there is one).
fn find_report(dir: &Path) -> Found {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            return Found::Unreadable {
                path: dir.to_owned(),
                error: e.to_string(),
            };
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let Some(path) = paths.into_iter().next() else {
        return Found::Nothing;
    };
    match std::fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(report) => Found::Report(Box::new(report)),
            Err(e) => Found::Unreadable {
                path,
                error: e.to_string(),
            },
        },
        Err(e) => Found::Unreadable {
            path,
            error: e.to_string(),
        },
    }
}

/// A test's result from how its process ended and the report it left. A report is
/// trusted only as far as the exit status agrees: a process that failed while its
/// report says the run should pass (passed, improved, ignored, a `.snap` written) fails,
/// with its output. A report that fails the run already explains the exit status (a
/// pending new result exits unsuccessfully too, like insta).
pub fn reconcile(case: &TestCase, exit: &Exit, found: Found) -> TestReport {
    let output = || Some(exit.output.clone());
    match found {
        // A harness that gives no reason for an ignored test.
        Found::Nothing if case.ignored && exit.success => {
            let mut report = TestReport::new(&case.binary.target, &case.name, Status::Ignored);
            report.ignore("");
            report
        }
        Found::Nothing => synthetic(
            case,
            Status::Failed,
            format!(
                "{} ended ({}) without a report",
                case.full_name(),
                exit.status
            ),
            output(),
        ),
        Found::Unreadable { path, error } => synthetic(
            case,
            Status::Failed,
            format!(
                "{} ended ({}) with an unreadable report {}: {error}",
                case.full_name(),
                exit.status,
                path.display()
            ),
            output(),
        ),
        Found::Report(report) if exit.success || report.fails() => *report,
        Found::Report(mut report) => {
            let mut message = format!(
                "the test process of {} failed ({}) although its report says `{}`",
                case.full_name(),
                exit.status,
                report.status.as_str()
            );
            if !report.message.trim().is_empty() {
                message += "\n  ";
                message += report.message.trim_end();
            }
            report.status = Status::Failed;
            report.message = message;
            report.output = output();
            *report
        }
    }
}

fn synthetic(
    case: &TestCase,
    status: Status,
    message: String,
    output: Option<String>,
) -> TestReport {
    TestReport {
        message,
        output,
        ..TestReport::new(&case.binary.target, &case.name, status)
    }
}

/// A temporary directory for the reports, removed when dropped.
struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    fn new() -> Result<ScratchDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("cargo-vramtest-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(Error::io(&path))?;
        Ok(ScratchDir { path })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use test_case::test_case;

    #[test]
    fn the_harness_notes_about_the_run_are_shown_once() {
        let note = "test binary built in /a/x, testing /b/x";
        let mut first = report(Status::Passed, None);
        first.notes = vec![note.into()];
        let mut said = BTreeSet::new();
        assert_eq!(
            unsaid_notes(&mut said, &first),
            ["note: test binary built in /a/x, testing /b/x"]
        );
        assert!(unsaid_notes(&mut said, &first.clone()).is_empty());
        assert!(unsaid_notes(&mut said, &report(Status::Passed, None)).is_empty());
    }

    #[test_case(3, None, &["0", "1", "2"]; "all devices by index")]
    #[test_case(2, Some("2,5"), &["2", "5"]; "the entries the user listed")]
    #[test_case(1, Some("5,2,x"), &["5"]; "as many as the driver sees")]
    #[test_case(2, Some(" GPU-8f2a, MIG-1 "), &["GPU-8f2a", "MIG-1"]; "uuids as written")]
    fn gpus_are_named_as_the_driver_takes_them(count: usize, visible: Option<&str>, ids: &[&str]) {
        let ids = ids.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(Devices::gpus(count, visible), Devices::Gpus(ids));
    }

    #[test]
    fn one_slot_per_gpu_pinned_and_jobs_only_lower_it() {
        let gpus = Devices::gpus(3, None);
        let pinned = |ids: &[&str]| -> Vec<Option<String>> {
            ids.iter().map(|s| Some((*s).to_owned())).collect()
        };
        assert_eq!(gpus.slots(None), pinned(&["0", "1", "2"]));
        assert_eq!(gpus.slots(Some(2)), pinned(&["0", "1"]));
        assert_eq!(gpus.slots(Some(8)), pinned(&["0", "1", "2"]));
        assert_eq!(Devices::Cpu.slots(Some(5)), vec![None; 5]);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(Devices::Cpu.slots(None), vec![None; cores]);
        assert_eq!(Devices::Gpus(Vec::new()).slots(None), [None]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// With M items and N slots: every item runs once, two items never hold one slot
        /// at once, and at most N run together.
        #[test]
        fn no_two_items_ever_share_a_slot(
            items in proptest::collection::vec(0u64..300, 0..24),
            n in 1usize..6,
        ) {
            use std::sync::Mutex;
            let slots: Vec<usize> = (0..n).collect();
            let busy = Mutex::new(vec![false; n]);
            let running = AtomicUsize::new(0);
            let most = AtomicUsize::new(0);
            let mut seen = vec![0; items.len()];
            schedule(
                &items,
                &slots,
                |i, micros, slot| {
                    let clash = std::mem::replace(&mut busy.lock().unwrap()[*slot], true);
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_micros(*micros));
                    running.fetch_sub(1, Ordering::SeqCst);
                    busy.lock().unwrap()[*slot] = false;
                    (i, clash)
                },
                |i, (j, clash)| {
                    assert_eq!(i, j);
                    assert!(!clash, "item {i} took a slot in use");
                    seen[i] += 1;
                },
            );
            proptest::prop_assert!(seen.iter().all(|&k| k == 1), "{seen:?}");
            proptest::prop_assert!(most.load(Ordering::SeqCst) <= n);
        }
    }

    #[test]
    fn parses_libtests_terse_list() {
        let text = "mlp_adamw: test\nnested::mlp_sgd: test\nbench_x: benchmark\n\n";
        assert_eq!(parse_terse(text), ["mlp_adamw", "nested::mlp_sgd"]);
        assert!(parse_terse("").is_empty());
    }

    use crate::case::tests::case;

    fn report(status: Status, written: Option<&str>) -> TestReport {
        let mut r = synthetic(&case("t"), status, String::new(), None);
        r.written = written.map(PathBuf::from);
        r
    }

    #[test_case(Status::Passed, None, false)]
    #[test_case(Status::Improved, Some("s/x.snap.new"), false)]
    #[test_case(Status::New, Some("s/x.snap"), false; "new snapshot written")]
    #[test_case(Status::New, Some("s/x.snap.new"), true; "new result pending review")]
    #[test_case(Status::Regressed, None, true)]
    #[test_case(Status::Missing, None, true)]
    #[test_case(Status::Failed, None, true)]
    #[test_case(Status::SnapshotError, None, true)]
    #[test_case(Status::Ignored, None, false)]
    fn what_fails(status: Status, written: Option<&str>, expected: bool) {
        assert_eq!(report(status, written).fails(), expected);
    }

    fn exit(success: bool) -> Exit {
        Exit {
            success,
            status: if success {
                "exit status: 0"
            } else {
                "exit status: 101"
            }
            .into(),
            output: "thread 'main' panicked at writing the snapshot".into(),
        }
    }

    fn found(status: Status, written: Option<&str>) -> Found {
        let mut r = report(status, written);
        r.message = "peak 1.00 KiB".into();
        Found::Report(Box::new(r))
    }

    #[test_case(Status::Passed, None; "passed")]
    #[test_case(Status::Improved, None; "improved")]
    #[test_case(Status::New, Some("s/x.snap"); "new snapshot written")]
    #[test_case(Status::New, None; "new, nothing written")]
    #[test_case(Status::Ignored, None; "ignored")]
    fn a_failed_process_fails_a_passing_report(status: Status, written: Option<&str>) {
        let r = reconcile(&case("t"), &exit(false), found(status, written));
        assert_eq!(r.status, Status::Failed);
        assert!(
            r.message.contains("failed (exit status: 101)"),
            "{}",
            r.message
        );
        assert!(
            r.message.contains(&format!("`{}`", status.as_str())),
            "{}",
            r.message
        );
        assert!(r.message.ends_with("\n  peak 1.00 KiB"), "{}", r.message);
        assert_eq!(
            r.output.as_deref(),
            Some("thread 'main' panicked at writing the snapshot")
        );
        assert!(r.fails());
    }

    #[test_case(Status::Regressed, None; "regressed")]
    #[test_case(Status::Missing, None; "missing")]
    #[test_case(Status::SnapshotError, None; "snapshot error")]
    #[test_case(Status::New, Some("s/x.snap.new"); "new result pending review")]
    fn a_failing_report_explains_the_exit_status(status: Status, written: Option<&str>) {
        let r = reconcile(&case("t"), &exit(false), found(status, written));
        assert_eq!(r.status, status);
        assert_eq!(r.message, "peak 1.00 KiB");
        assert_eq!(r.output, None);
    }

    #[test_case(Status::Passed; "passed")]
    #[test_case(Status::Regressed; "regressed")]
    fn a_successful_process_keeps_its_report(status: Status) {
        let r = reconcile(&case("t"), &exit(true), found(status, None));
        assert_eq!(r.status, status);
        assert_eq!(r.message, "peak 1.00 KiB");
    }

    #[test]
    fn an_ignored_test_says_why_when_its_report_does() {
        let mut slow = case("slow");
        slow.ignored = true;
        let mut r = report(Status::Ignored, None);
        r.ignore("too slow for CI");
        let got = reconcile(&slow, &exit(true), Found::Report(Box::new(r)));
        assert_eq!(got.status, Status::Ignored);
        assert_eq!(got.ignore_reason.as_deref(), Some("too slow for CI"));
        assert_eq!(got.message, "too slow for CI");
        assert!(!got.fails());
        // A harness that writes no report for it: plainly ignored, not a crash.
        let got = reconcile(&slow, &exit(true), Found::Nothing);
        assert_eq!(
            (got.status, got.message.as_str(), got.ignore_reason),
            (Status::Ignored, "ignored", None)
        );
        // A test that is not ignored and leaves no report still fails.
        let got = reconcile(&case("t"), &exit(true), Found::Nothing);
        assert_eq!(got.status, Status::Failed);
    }

    #[test]
    fn no_report_or_an_unreadable_one_fails_naming_it() {
        let r = reconcile(&case("t"), &exit(false), Found::Nothing);
        assert_eq!(r.status, Status::Failed);
        assert_eq!(
            r.message,
            "pkg::vram::t ended (exit status: 101) without a report"
        );
        assert!(r.output.is_some());

        let dir = std::env::temp_dir().join(format!("cargo-vramtest-run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(matches!(find_report(&dir), Found::Nothing));
        let path = dir.join("vram__t.json");
        std::fs::write(&path, "{\"schema\": 1,").unwrap();
        let found = find_report(&dir);
        assert!(
            matches!(&found, Found::Unreadable { path: p, .. } if *p == path),
            "{found:?}"
        );
        let r = reconcile(&case("t"), &exit(true), found);
        assert_eq!(r.status, Status::Failed);
        assert!(
            r.message.starts_with(&format!(
                "pkg::vram::t ended (exit status: 0) with an unreadable report {}: EOF while parsing",
                path.display()
            )),
            "{}",
            r.message
        );
        assert!(!r.message.contains("without a report"), "{}", r.message);

        let good = report(Status::Passed, None);
        std::fs::write(&path, serde_json::to_string(&good).unwrap()).unwrap();
        assert!(matches!(find_report(&dir), Found::Report(r) if *r == good));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
