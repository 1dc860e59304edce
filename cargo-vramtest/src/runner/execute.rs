//! Running one test: its binary in a process of its own (`<bin> <name> --exact`, which
//! itself measures in a child process), in the package's directory like `cargo test`,
//! and its result read back from the report its harness wrote. A test that panics,
//! aborts or segfaults fails with its output.

use super::command::{PackageEnv, command, harness_env};
use crate::case::{Outcome, TestCase};
use crate::error::{Error, Result};
use crate::progress::Live;
use anstream::adapter::strip_str;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Instant;
use vramtest_model::env::HarnessEnv;
use vramtest_model::progress::PointProgress;
use vramtest_model::report::{Status, TestReport, UnknownSchema, check_schema};

/// Runs one test in a process of its own; `gpu` pins it to that GPU. On Unix its
/// harness writes the report into a pipe only that process holds; elsewhere into
/// `dir`. `Err`: its harness wrote a report of a schema this cargo-vramtest does not
/// read.
pub(super) fn run_one(
    case: &TestCase,
    env: &PackageEnv,
    dir: &Path,
    gpu: Option<&str>,
    live: &Live,
) -> Result<Outcome> {
    let start = Instant::now();
    let result = launch(case, harness_env(env, &case.binary), dir, gpu, live)
        .map_err(|e| format!("cannot run {}: {e}", case.binary.path.display()));
    let duration = start.elapsed();
    let report = match result {
        Ok((out, found)) => {
            let found = found.map_err(|(report, error)| Error::ReportSchema {
                binary: case.binary.path.clone(),
                report,
                error,
            })?;
            reconcile(case, &Exit::of(&out), found)
        }
        Err(message) => synthetic(case, Status::Failed, message, None),
    };
    Ok(Outcome {
        case: case.clone(),
        report,
        duration,
    })
}

/// What a report's source held: the report, or (`Err`) a report of another schema and
/// where it came from.
pub(super) type FoundReport = std::result::Result<Found, (String, UnknownSchema)>;

/// The test's command: its binary, run on the test alone, output captured.
fn test_command(case: &TestCase, env: &HarnessEnv, gpu: Option<&str>) -> std::process::Command {
    let mut cmd = command(&case.binary, env);
    if let Some(id) = gpu {
        cmd.env("CUDA_VISIBLE_DEVICES", id);
    }
    cmd.arg(&case.name)
        .arg("--exact")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if case.include_ignored {
        cmd.arg("--include-ignored");
    }
    cmd
}

/// Runs the test with a report pipe handed down to its harness alone: no test's
/// process, and no other harness started meanwhile, can write a report in its name.
#[cfg(unix)]
fn launch(
    case: &TestCase,
    env: HarnessEnv,
    _dir: &Path,
    gpu: Option<&str>,
    live: &Live,
) -> std::io::Result<(Output, FoundReport)> {
    let (child, reader) = super::command::spawn_reporting(env, |env| test_command(case, env, gpu))?;
    let reading = read_pipe(reader, case.binary.id(), live.clone());
    let out = child.wait_with_output()?;
    let bytes: Vec<u8> = reading
        .join()
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(_, line)| line)
        .collect();
    Ok((out, parse_report(&bytes, "its report pipe")))
}

/// Reads a report pipe on a thread of its own until the harness closes it: each
/// point's progress goes to `live` as it comes (for the binary `binary_id`); every
/// other line is returned with when it arrived.
#[cfg(unix)]
pub(super) fn read_pipe(
    reader: std::io::PipeReader,
    binary_id: String,
    live: Live,
) -> std::thread::JoinHandle<Vec<(Instant, Vec<u8>)>> {
    use std::io::BufRead as _;
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut reader = std::io::BufReader::new(reader);
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => match PointProgress::from_line(&line) {
                    Some(progress) => live.point(&binary_id, progress),
                    None => lines.push((Instant::now(), line)),
                },
            }
        }
        lines
    })
}

/// Runs the test with `dir` as its harness's report directory.
#[cfg(not(unix))]
fn launch(
    case: &TestCase,
    env: HarnessEnv,
    dir: &Path,
    gpu: Option<&str>,
    _live: &Live,
) -> std::io::Result<(Output, FoundReport)> {
    std::fs::create_dir_all(dir)?;
    let env = HarnessEnv {
        report_dir: Some(dir.to_owned()),
        ..env
    };
    let out = test_command(case, &env, gpu).output()?;
    Ok((out, find_report(dir)))
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
    /// A report that cannot be read or parsed, and where it came from (its file, or
    /// the report pipe).
    Unreadable {
        path: String,
        error: String,
    },
}

/// The report the harness wrote in `dir` (the first `.json` file by name; one test
/// runs, so there is one). `Err`: a report of a schema this release does not read,
/// with its file.
#[cfg_attr(unix, allow(dead_code))]
fn find_report(dir: &Path) -> FoundReport {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            return Ok(Found::Unreadable {
                path: dir.display().to_string(),
                error: e.to_string(),
            });
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let Some(path) = paths.into_iter().next() else {
        return Ok(Found::Nothing);
    };
    match std::fs::read(&path) {
        Ok(bytes) => parse_report(&bytes, &path.display().to_string()),
        Err(e) => Ok(Found::Unreadable {
            path: path.display().to_string(),
            error: e.to_string(),
        }),
    }
}

/// The report in `bytes` (read from `source`): nothing, or one JSON report (a pipe
/// holds one per line; one test runs, so the first is taken).
pub(super) fn parse_report(bytes: &[u8], source: &str) -> FoundReport {
    let unreadable = |error: String| {
        Ok(Found::Unreadable {
            path: source.to_owned(),
            error,
        })
    };
    let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<serde_json::Value>();
    let value = match values.next() {
        None => return Ok(Found::Nothing),
        Some(Ok(value)) => value,
        Some(Err(e)) => return unreadable(e.to_string()),
    };
    if let Err(e) = check_schema(&value) {
        return Err((source.to_owned(), e));
    }
    match serde_json::from_value(value) {
        Ok(report) => Ok(Found::Report(Box::new(report))),
        Err(e) => unreadable(e.to_string()),
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
                path
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::tests::case;
    use test_case::test_case;

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
        assert!(matches!(find_report(&dir), Ok(Found::Nothing)));
        let path = dir.join("vram__t.json");
        std::fs::write(&path, "{\"schema\": 1,").unwrap();
        let found = find_report(&dir).unwrap();
        assert!(
            matches!(&found, Found::Unreadable { path: p, .. } if *p == path.display().to_string()),
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
        assert!(matches!(find_report(&dir), Ok(Found::Report(r)) if *r == good));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_report_of_another_schema_is_an_error_naming_the_file_and_both_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vram__t.json");
        let mut other = serde_json::to_value(report(Status::Passed, None)).unwrap();
        other["schema"] = 7.into();
        std::fs::write(&path, other.to_string()).unwrap();
        let (file, e) = find_report(dir.path()).unwrap_err();
        assert_eq!((file, e.found), (path.display().to_string(), Some(7)));
    }

    /// A stand-in for a test binary: a script whose harness writes `report` into the
    /// pipe `VRAMTEST_REPORT_FD` names (through `/dev/fd`: `sh` redirects only
    /// descriptors below 10 by number, and tests running alongside hold many).
    #[cfg(unix)]
    fn fake_binary(dir: &Path, report: &str) -> TestCase {
        let path = dir.join("vram-0123");
        let script =
            format!("#!/bin/sh\ncat >\"/dev/fd/$VRAMTEST_REPORT_FD\" <<'EOF'\n{report}\nEOF\n");
        crate::executable::write_executable(&path, &script);
        let mut t = case("t");
        t.binary = std::sync::Arc::new(crate::case::Binary {
            path,
            package_dir: dir.to_owned(),
            ..(*t.binary).clone()
        });
        t
    }

    /// The fake binaries are written and run while other tests start processes: a
    /// written program must never be refused as "Text file busy". 200 rounds beside
    /// four threads that start processes without pause (when this process writes the
    /// file itself, about 1 round in 40 is refused).
    #[cfg(unix)]
    #[test]
    fn a_program_written_while_other_threads_start_processes_runs() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let spawners: Vec<_> = (0..4)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _ = std::process::Command::new("true").status();
                    }
                })
            })
            .collect();
        let refused: Vec<String> = (0..200)
            .filter_map(|i| {
                let path = dir.path().join(format!("p{i}"));
                crate::executable::write_executable(&path, "#!/bin/sh\nexit 0\n");
                let ran = std::process::Command::new(&path).status();
                ran.err().map(|e| format!("round {i}: {e}"))
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        spawners.into_iter().for_each(|s| s.join().unwrap());
        assert!(refused.is_empty(), "{refused:#?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_harness_of_another_report_schema_stops_the_run_with_exit_code_2() {
        let dir = tempfile::tempdir().unwrap();
        let mut other = serde_json::to_value(report(Status::Passed, None)).unwrap();
        other["schema"] = 7.into();
        let t = fake_binary(dir.path(), &other.to_string());
        let reports = dir.path().join("reports");
        let e = run_one(&t, &PackageEnv::new(), &reports, None, &Live::none()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: its harness wrote a test report of schema 7, and this release reads \
                 schema 1 only ({}) (hint: build the tests with the vramtest release of \
                 this cargo-vramtest)",
                t.binary.path.display(),
                "its report pipe"
            )
        );
        // The same binary with a report of this schema: its outcome.
        let t = fake_binary(
            dir.path(),
            &serde_json::to_string(&report(Status::Passed, None)).unwrap(),
        );
        let outcome = run_one(&t, &PackageEnv::new(), &reports, None, &Live::none()).unwrap();
        assert_eq!(outcome.report, report(Status::Passed, None));
    }
}
