//! Running several tests of one binary in one process, where nothing pins a test to a
//! device: `<bin> --exact --skip <each other test> --test-threads N`. The binary's
//! harness still measures each test in a child process of its own and writes one
//! report per test into the report pipe only this process holds; what a process start
//! per test cost (a few milliseconds each) is paid once per binary.
//!
//! A test keeps the batch's verdict only where a process of its own would have given
//! the same: exactly one report names it and either the report fails, the process
//! passed, or the process failed (libtest's exit code 101) while libtest's line for
//! this test says `ok` or `ignored`. Any other test (no report, an unreadable one, two
//! reports, the process killed by a signal) is run again alone, as [`super::execute`]
//! runs it, so what it shows is exactly what a run of its own shows.

use super::command::PackageEnv;
use super::execute::{self, Found};
use super::list::{list_output, parse_terse};
use crate::case::{Outcome, TestCase};
use crate::error::{Error, Result};
use crate::progress::Live;
use std::process::Output;
use std::time::{Duration, Instant};
use vramtest_model::report::TestReport;

/// Each line of a report pipe, with when it arrived.
type Lines = Vec<(Instant, Vec<u8>)>;

/// What runs in one process: the indices of its tests in the run's list (all of one
/// binary), and how many of them may run at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unit {
    pub(super) cases: Vec<usize>,
    pub(super) threads: usize,
}

/// The processes a run needs: one per test where slots are pinned to a device (or
/// batches cannot carry reports), else one per binary. `slots` tests run at once in
/// all: a binary's process runs its share of them (at least one) at once.
pub(super) fn plan(cases: &[TestCase], slots: &[Option<String>]) -> Vec<Unit> {
    let pinned = slots.iter().any(Option::is_some);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        match groups.last_mut() {
            Some(group)
                if cfg!(unix) && !pinned && cases[group[0]].binary.path == case.binary.path =>
            {
                group.push(i);
            }
            _ => groups.push(vec![i]),
        }
    }
    let share = (slots.len() / groups.len().max(1)).max(1);
    groups
        .into_iter()
        .map(|cases| Unit {
            threads: share.min(cases.len()),
            cases,
        })
        .collect()
}

/// Runs `unit`'s tests (several of one binary) in one process; a test the batch cannot
/// vouch for runs again alone (`alone`, given its index). Returns each test's outcome
/// with its index. `Err`: a harness wrote a report this cargo-vramtest cannot read.
pub(super) fn run(
    cases: &[TestCase],
    unit: &Unit,
    env: &PackageEnv,
    live: &Live,
    alone: impl Fn(usize) -> Result<Outcome>,
) -> Vec<(usize, Result<Outcome>)> {
    let vouched = match launch(cases, unit, env, live) {
        Ok(vouched) => vouched,
        Err(e) => return vec![(unit.cases[0], Err(e))],
    };
    unit.cases
        .iter()
        .zip(vouched)
        .map(|(&i, outcome)| match outcome {
            Some(outcome) => (i, Ok(outcome)),
            None => (i, alone(i)),
        })
        .collect()
}

/// The batch's process: each test's outcome where the batch vouches for it (in the
/// order of `unit.cases`), `None` where the test must run alone.
fn launch(
    cases: &[TestCase],
    unit: &Unit,
    env: &PackageEnv,
    live: &Live,
) -> Result<Vec<Option<Outcome>>> {
    let first = &cases[unit.cases[0]];
    let binary = &first.binary;
    let none = || vec![None; unit.cases.len()];
    // Every test the binary lists and the batch does not run is skipped by name.
    let Ok(listed) = list_output(binary, env, false) else {
        return Ok(none());
    };
    let chosen: Vec<&str> = unit.cases.iter().map(|&i| cases[i].name.as_str()).collect();
    let skipped: Vec<String> = parse_terse(&listed)
        .into_iter()
        .filter(|name| !chosen.contains(&name.as_str()))
        .collect();
    let start = Instant::now();
    let include_ignored = unit.cases.iter().any(|&i| cases[i].include_ignored);
    let Ok((out, lines)) = spawn(first, env, &skipped, unit.threads, include_ignored, live) else {
        return Ok(none());
    };
    let mut reports: Vec<(Instant, TestReport)> = Vec::new();
    for (at, line) in &lines {
        match execute::parse_report(line, "its report pipe") {
            Ok(Found::Report(report)) if report.target == binary.target => {
                reports.push((*at, *report));
            }
            Ok(Found::Nothing) => {}
            // A line no test can be given: none of this batch's verdicts is vouched for.
            Ok(_) => return Ok(none()),
            Err((report, error)) => {
                return Err(Error::ReportSchema {
                    binary: binary.path.clone(),
                    report,
                    error,
                });
            }
        }
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let arrivals: Vec<Instant> = reports.iter().map(|(at, _)| *at).collect();
    Ok(unit
        .cases
        .iter()
        .map(|&i| {
            let case = &cases[i];
            let mut mine = reports.iter().filter(|(_, r)| r.test == case.name);
            let (Some((at, report)), None) = (mine.next(), mine.next()) else {
                return None;
            };
            let vouched = report.fails()
                || out.status.success()
                || (out.status.code() == Some(101) && libtest_passed(&stdout, &case.name));
            vouched.then(|| Outcome {
                case: case.clone(),
                report: report.clone(),
                duration: duration(start, &arrivals, *at, unit.threads),
            })
        })
        .collect())
}

/// Whether libtest's line for `name` in `stdout` (`test <name> ... ok`, the name padded
/// to the longest) says it passed or was ignored. Only the lines before libtest's
/// `failures:` section count: what a failing test printed comes after every test's own.
fn libtest_passed(stdout: &str, name: &str) -> bool {
    stdout
        .lines()
        .take_while(|line| *line != "failures:" && !line.starts_with("test result:"))
        .find_map(|line| {
            let rest = line.strip_prefix("test ")?.strip_prefix(name)?;
            rest.trim_start_matches(' ').strip_prefix("... ")
        })
        .is_some_and(|result| result == "ok" || result.starts_with("ignored"))
}

/// A test's wall time in a batch of `threads` at once: from when a thread was free for
/// it (the batch's start, or the report `threads` places before its own) to its report.
fn duration(start: Instant, arrivals: &[Instant], at: Instant, threads: usize) -> Duration {
    let place = arrivals.iter().filter(|a| **a < at).count();
    let began = place
        .checked_sub(threads)
        .map_or(start, |before| arrivals[before]);
    at.saturating_duration_since(began)
}

/// Runs the binary on every test but `skipped`, `threads` at once, with a report pipe
/// handed down to its harness alone; returns how it ended and each line of the pipe
/// with when it arrived.
#[cfg(unix)]
fn spawn(
    case: &TestCase,
    env: &PackageEnv,
    skipped: &[String],
    threads: usize,
    include_ignored: bool,
    live: &Live,
) -> std::io::Result<(Output, Lines)> {
    use super::command::{command, harness_env, spawn_reporting};
    use std::process::Stdio;
    let (child, reader) = spawn_reporting(harness_env(env, &case.binary), |env| {
        let mut cmd = command(&case.binary, env);
        cmd.arg("--exact")
            .arg("--test-threads")
            .arg(threads.to_string());
        for name in skipped {
            cmd.arg("--skip").arg(name);
        }
        if include_ignored {
            cmd.arg("--include-ignored");
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    })?;
    let reading = execute::read_pipe(reader, case.binary.id(), live.clone());
    let out = child.wait_with_output()?;
    Ok((out, reading.join().unwrap_or_default()))
}

/// No pipe carries reports here: every test runs alone.
#[cfg(not(unix))]
fn spawn(
    _case: &TestCase,
    _env: &PackageEnv,
    _skipped: &[String],
    _threads: usize,
    _include_ignored: bool,
    _live: &Live,
) -> std::io::Result<(Output, Lines)> {
    Err(std::io::Error::other("no report pipe"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::tests::case;

    /// `names`, the first `in_a` in binary `/a`, the rest in `/b`.
    fn cases(names: &[&str], in_a: usize) -> Vec<TestCase> {
        names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut c = case(name);
                if i >= in_a {
                    let mut b = (*c.binary).clone();
                    b.path = "/b".into();
                    c.binary = std::sync::Arc::new(b);
                }
                c
            })
            .collect()
    }

    fn unit(cases: &[usize], threads: usize) -> Unit {
        Unit {
            cases: cases.to_vec(),
            threads,
        }
    }

    #[cfg(unix)]
    #[test]
    fn one_process_per_binary_sharing_the_slots_and_one_per_test_where_pinned() {
        let all = cases(&["a1", "a2", "a3", "b1"], 3);
        let cpu = |n: usize| vec![None; n];
        assert_eq!(plan(&all, &cpu(2)), [unit(&[0, 1, 2], 1), unit(&[3], 1)]);
        assert_eq!(plan(&all, &cpu(4)), [unit(&[0, 1, 2], 2), unit(&[3], 1)]);
        assert_eq!(plan(&all, &cpu(1)), [unit(&[0, 1, 2], 1), unit(&[3], 1)]);
        let one = cases(&["a1", "a2", "a3"], 3);
        assert_eq!(plan(&one, &cpu(8)), [unit(&[0, 1, 2], 3)]);
        let gpus = vec![Some("0".to_owned()), Some("1".to_owned())];
        assert_eq!(
            plan(&all, &gpus),
            [unit(&[0], 1), unit(&[1], 1), unit(&[2], 1), unit(&[3], 1)]
        );
        assert!(plan(&[], &cpu(2)).is_empty());
    }

    #[test]
    fn libtests_own_line_says_whether_a_test_passed() {
        let stdout = "\nrunning 3 tests\ntest a      ... ok\ntest ab     ... FAILED\n\
                      test slow   ... ignored, too slow\n\nfailures:\n\n---- ab stdout ----\n\
                      test b ... ok\ntest ab ... ok\n";
        assert!(libtest_passed(stdout, "a"));
        assert!(libtest_passed(stdout, "slow"));
        // Its own line counts: a forged one in a failure's output does not.
        assert!(!libtest_passed(stdout, "ab"));
        // A test libtest never ran, with a forged line.
        assert!(!libtest_passed(stdout, "b"));
        assert!(!libtest_passed(stdout, "c"));
    }

    #[test]
    fn a_tests_time_starts_when_a_thread_was_free_for_it() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let arrivals = [at(10), at(12), at(30), at(31)];
        let ms = |d: Duration| d.as_millis();
        // One thread: from the report before.
        assert_eq!(ms(duration(start, &arrivals, at(10), 1)), 10);
        assert_eq!(ms(duration(start, &arrivals, at(30), 1)), 18);
        // Two threads: from the report two places before.
        assert_eq!(ms(duration(start, &arrivals, at(12), 2)), 12);
        assert_eq!(ms(duration(start, &arrivals, at(30), 2)), 20);
        assert_eq!(ms(duration(start, &arrivals, at(31), 2)), 19);
    }

    /// A stand-in for a test binary of the tests `t1` and `t2`: it lists them, runs as a
    /// batch with `batch` (a shell snippet), and run alone on `t2` reports `t2` passed.
    /// Every command line it gets is logged in `<script>.log`.
    #[cfg(unix)]
    fn fake_binary(dir: &std::path::Path, batch: &str) -> Vec<TestCase> {
        use vramtest_model::report::Status;
        let report = |name: &str| {
            serde_json::to_string(&TestReport::new("vram", name, Status::Passed)).unwrap()
        };
        let path = dir.join("vram-0123");
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> \"$0.log\"\ncase \"$1\" in\n\
             --list) printf 't1: test\\nt2: test\\n' ;;\n\
             --exact) {batch} ;;\n\
             t2) echo '{}' >\"/dev/fd/$VRAMTEST_REPORT_FD\" ;;\n\
             esac\n",
            report("t2")
        )
        .replace("T1", &report("t1"));
        crate::executable::write_executable(&path, &script);
        ["t1", "t2"]
            .iter()
            .map(|name| {
                let mut c = case(name);
                c.binary = std::sync::Arc::new(crate::case::Binary {
                    path: path.clone(),
                    package_dir: dir.to_owned(),
                    ..(*c.binary).clone()
                });
                c
            })
            .collect()
    }

    /// Runs the fake binary's two tests as one batch; returns their statuses and the
    /// command lines it got.
    #[cfg(unix)]
    fn run_fake(batch: &str) -> (Vec<String>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let cases = fake_binary(dir.path(), batch);
        let env = PackageEnv::new();
        let alone = |i: usize| {
            execute::run_one(
                &cases[i],
                &env,
                std::path::Path::new(""),
                None,
                &Live::none(),
            )
        };
        let outcomes = run(&cases, &unit(&[0, 1], 1), &env, &Live::none(), alone);
        let statuses = outcomes
            .into_iter()
            .enumerate()
            .map(|(k, (i, o))| {
                assert_eq!(k, i);
                let o = o.unwrap();
                format!("{} {}", o.case.name, o.report.status.as_str())
            })
            .collect();
        let log = std::fs::read_to_string(dir.path().join("vram-0123.log")).unwrap();
        (statuses, log.lines().map(str::to_owned).collect())
    }

    #[cfg(unix)]
    #[test]
    fn a_test_the_batch_has_no_report_for_runs_alone() {
        let (statuses, calls) =
            run_fake("echo 'T1' >\"/dev/fd/$VRAMTEST_REPORT_FD\"; echo 'test t1 ... ok'");
        assert_eq!(statuses, ["t1 passed", "t2 passed"]);
        assert_eq!(
            calls,
            [
                "--list --format terse",
                "--exact --test-threads 1",
                "t2 --exact"
            ]
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_passing_report_the_process_does_not_vouch_for_runs_alone() {
        // The process failed and libtest's line says t1 failed: t1 runs alone (and
        // there it writes no report); t2's report is not its own line's either.
        let (statuses, calls) = run_fake(
            "echo 'T1' >\"/dev/fd/$VRAMTEST_REPORT_FD\"; echo 'test t1 ... FAILED'; exit 101",
        );
        assert_eq!(statuses, ["t1 failed", "t2 passed"]);
        assert_eq!(
            calls,
            [
                "--list --format terse",
                "--exact --test-threads 1",
                "t1 --exact",
                "t2 --exact"
            ]
        );
        // A crash: nothing in the batch is vouched for.
        let (statuses, calls) = run_fake("echo 'T1' >\"/dev/fd/$VRAMTEST_REPORT_FD\"; kill -9 $$");
        assert_eq!(statuses, ["t1 failed", "t2 passed"]);
        assert_eq!(calls.len(), 4, "{calls:?}");
    }
}
