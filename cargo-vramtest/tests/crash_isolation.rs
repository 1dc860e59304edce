//! Crash isolation, on a copy of `tests/fixtures/abort-crate`: a test that aborts and
//! one that panics fail with their output while the others still run; an ignored test
//! is reported as ignored; the plain libtest target is never run.

mod common;

use common::{Fixture, Ran, assert_code};
use serde_json::Value;

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn an_aborting_test_fails_alone() {
    let f = Fixture::abort_crate("crash");
    let ran = f.run(
        &["--message-format", "json", "-j", "2"],
        &[("VRAMTEST_UPDATE", "always")],
    );
    assert_code(&ran, 1);
    let lines = json_lines(&ran.stdout);
    let tests: Vec<&Value> = lines.iter().filter(|l| l["type"] == "test").collect();
    let by_name = |n: &str| {
        *tests
            .iter()
            .find(|t| t["test"] == n)
            .unwrap_or_else(|| panic!("no {n} in {}", ran.text()))
    };
    assert_eq!(tests.len(), 4, "{}", ran.text());

    let aborts = by_name("aborts");
    assert_eq!(aborts["status"], "failed");
    assert_eq!(aborts["fails"], true);
    assert!(
        aborts["message"].as_str().unwrap().contains("crashed"),
        "{aborts}"
    );
    let output = aborts["output"].as_str().unwrap();
    assert!(
        output.contains("SIGABRT") || output.contains("signal"),
        "{output}"
    );

    let panics = by_name("panics");
    assert_eq!(panics["status"], "failed");
    assert!(
        panics["message"]
            .as_str()
            .unwrap()
            .contains("the model exploded"),
        "{panics}"
    );

    // The passing test ran and wrote its snapshot (VRAMTEST_UPDATE=always).
    let passes = by_name("passes");
    assert_eq!(passes["status"], "new");
    assert_eq!(passes["fails"], false);
    assert!(passes["body"]["peak_bytes"].as_u64().unwrap() >= 4096 * 4);
    assert_eq!(f.snapshot_files(), ["vram__passes@cpu.snap"]);

    // An ignored test says why (its attribute's reason).
    let ignored = by_name("ignored");
    assert_eq!(ignored["status"], "ignored");
    assert_eq!(ignored["message"], "too slow for CI", "{ignored}");
    assert_eq!(ignored["fails"], false);
    assert!(!ran.stdout.contains("never_run_by_cargo_vramtest"));

    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["failing"], 2);
    assert_eq!(summary["exit_code"], 1);

    // The human report shows each failure with its output.
    let ran = f.run(&[], &[]);
    assert_code(&ran, 1);
    assert!(
        ran.stdout
            .contains("──── abort-crate::vram::aborts: failed ────"),
        "{}",
        ran.text()
    );
    assert!(ran.stdout.contains("---- output ----"), "{}", ran.text());
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("abort-crate::vram::ignored")
                && l.ends_with("ignored: too slow for CI")),
        "{}",
        ran.text()
    );
    assert!(
        ran.stdout
            .contains("4 tests: 1 passed, 2 failed, 1 ignored"),
        "{}",
        ran.text()
    );
}

/// Every CI marker the tool knows is CI on its own, whatever `CI` says: even asked to
/// write (`VRAMTEST_UPDATE=always`), neither runner writes a snapshot and a missing one
/// fails.
#[test]
fn every_ci_marker_is_check_mode_under_both_runners() {
    let f = Fixture::abort_crate("ci-markers");
    let always = ("VRAMTEST_UPDATE", "always");
    for envs in [
        &[("GITHUB_ACTIONS", "true"), always][..],
        &[("GITHUB_ACTIONS", "true"), ("CI", "false"), always],
        &[("TF_BUILD", "True"), ("CI", "0"), always],
    ] {
        let ran = f.run(&["passes"], envs);
        assert_code(&ran, 1);
        assert!(ran.stdout.contains("missing"), "{envs:?}: {}", ran.text());
        assert!(
            f.snapshot_files().is_empty(),
            "{envs:?}: {:?}",
            f.snapshot_files()
        );

        let mut cargo = f.cargo(&["test", "--test", "vram", "--", "passes", "--exact"]);
        let ran = Ran::from(cargo.envs(envs.iter().copied()).output().unwrap());
        assert_ne!(ran.code, 0, "{envs:?}: {}", ran.text());
        assert!(
            ran.stdout.contains("has no snapshot") && ran.stdout.contains("check mode"),
            "{envs:?}: {}",
            ran.text()
        );
        assert!(
            f.snapshot_files().is_empty(),
            "{envs:?}: {:?}",
            f.snapshot_files()
        );
    }
}

#[test]
fn check_mode_writes_nothing_and_fails_a_missing_snapshot() {
    let f = Fixture::abort_crate("check");
    for (args, envs) in [
        (&["passes", "--check"][..], &[][..]),
        (&["passes"][..], &[("CI", "true")][..]),
    ] {
        let ran = f.run(args, envs);
        assert_code(&ran, 1);
        assert!(ran.stdout.contains("missing"), "{}", ran.text());
        assert!(f.snapshot_files().is_empty(), "{:?}", f.snapshot_files());
    }
    // `--strict` and `--device cpu` reach the harness; a plain run then passes.
    let ran = f.run(
        &["passes", "--device", "cpu", "--strict"],
        &[("VRAMTEST_UPDATE", "always")],
    );
    assert_code(&ran, 0);
    let ran = f.run(&["passes", "--device", "cpu", "--strict", "--check"], &[]);
    assert_code(&ran, 0);
    assert!(ran.stdout.contains("1 test: 1 passed"), "{}", ran.text());
}
