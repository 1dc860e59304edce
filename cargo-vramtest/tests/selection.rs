//! Naming tests, on a copy of `tests/fixtures/abort-crate`: the name the table prints
//! (`package::target::test`), `target::test` and the bare name select the same test in
//! every command; a filter that matches nothing is an error with the closest names.

mod common;

use common::{Fixture, assert_code};

#[test]
fn the_name_the_table_prints_works_in_every_command() {
    let f = Fixture::abort_crate("names");
    let full = "abort-crate::vram::passes";

    let ran = f.run(&["list", full], &[]);
    assert_code(&ran, 0);
    assert!(ran.stdout.ends_with("1 test\n"), "{}", ran.text());

    // No snapshot yet: a pending result, for this test only.
    let ran = f.run(&[full], &[]);
    assert_code(&ran, 1);
    assert!(ran.stdout.contains("1 test: 1 new"), "{}", ran.text());
    assert_eq!(f.snapshot_files(), ["vram__passes@cpu.snap.new"]);

    let ran = f.run(&["review", full], &[]);
    assert_code(&ran, 1);
    assert!(
        ran.stdout
            .contains("Reviewing [1/1] abort-crate::vram::passes (cpu)"),
        "{}",
        ran.text()
    );
    let ran = f.run(&["show", "--pending", full], &[]);
    assert_code(&ran, 0);
    let ran = f.run(&["accept", full], &[]);
    assert_code(&ran, 0);
    assert!(
        ran.stdout
            .contains("accepted abort-crate::vram::passes (cpu)"),
        "{}",
        ran.text()
    );
    assert_eq!(f.snapshot_files(), ["vram__passes@cpu.snap"]);

    // The three names, whole (--exact), in run and show.
    for name in [full, "vram::passes", "passes"] {
        let ran = f.run(&["--exact", name], &[]);
        assert_code(&ran, 0);
        assert!(
            ran.stdout.contains("1 test: 1 passed"),
            "{name}: {}",
            ran.text()
        );
        let ran = f.run(&["show", name], &[]);
        assert_code(&ran, 0);
        assert!(
            ran.stdout.contains("vram__passes@cpu.snap"),
            "{name}: {}",
            ran.text()
        );
    }
    // Nothing is pending for a test that has a snapshot: said, and not an error.
    let ran = f.run(&["reject", full], &[]);
    assert_code(&ran, 0);
    assert!(ran.stdout.contains("no pending results"), "{}", ran.text());
}

#[test]
fn a_filter_that_matches_nothing_is_an_error() {
    let f = Fixture::abort_crate("typo");
    for args in [&["pases"][..], &["list", "pases"], &["--exact", "pass"]] {
        let ran = f.run(args, &[]);
        assert_code(&ran, 2);
        let filter = args.last().unwrap();
        assert!(
            ran.stderr.contains(&format!(
                "error: no test matches `{filter}` in the tests of"
            )),
            "{}",
            ran.text()
        );
        assert!(
            ran.stderr
                .contains("did you mean abort-crate::vram::passes"),
            "{}",
            ran.text()
        );
        assert!(!ran.stdout.contains("TEST"), "nothing ran: {}", ran.text());
    }
    // One filter of two with a typo fails too: a typo must not go unnoticed.
    let ran = f.run(&["list", "passes", "pnaics"], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr
            .contains("did you mean abort-crate::vram::panics"),
        "{}",
        ran.text()
    );
    // The snapshot commands look among the snapshot files.
    for cmd in ["accept", "reject", "review"] {
        let ran = f.run(&[cmd, "pases"], &[]);
        assert_code(&ran, 2);
        assert!(
            ran.stderr
                .contains("no test matches `pases` in the snapshot files of"),
            "{cmd}: {}",
            ran.text()
        );
    }
}

/// `--run-ignored`, as nextest spells it, on a copy of `fixtures/vec-model` (its `vram`
/// target has one ignored test, `ignored_step`; copies start without snapshots): by
/// default the test is reported ignored and nothing is written; `only` runs the
/// ignored tests alone, `all` with the rest; `list` lists what would run.
#[test]
fn run_ignored_chooses_the_ignored_tests_as_nextest_does() {
    let f = Fixture::vec_model("run-ignored");
    let ran = f.run(&["vram::ignored_step", "vram::linear_adam"], &[]);
    assert_code(&ran, 1);
    assert!(
        ran.stdout.contains("2 tests: 1 new, 1 ignored"),
        "{}",
        ran.text()
    );
    assert_eq!(f.snapshot_files(), ["vram__linear_adam@cpu.snap.new"]);

    let ran = f.run(&["list", "vram::", "--run-ignored", "only"], &[]);
    assert_code(&ran, 0);
    assert!(ran.stdout.contains("ignored_step  vram"), "{}", ran.text());
    assert!(ran.stdout.ends_with("1 test\n"), "{}", ran.text());

    // `only`: the ignored test alone, measured like any other.
    let ran = f.run(&["vram::", "--run-ignored", "only"], &[]);
    assert_code(&ran, 1);
    assert!(ran.stdout.contains("1 test: 1 new"), "{}", ran.text());
    assert!(
        ran.stdout.contains("vec-model::vram::ignored_step"),
        "{}",
        ran.text()
    );
    assert_eq!(
        f.snapshot_files(),
        [
            "vram__ignored_step@cpu.snap.new",
            "vram__linear_adam@cpu.snap.new"
        ]
    );

    // `all`: with the rest (run alone, and batched with another test of its binary).
    for filters in [
        &["vram::ignored_step"][..],
        &["vram::ignored_step", "vram::linear_adam"],
    ] {
        let mut args = filters.to_vec();
        args.extend(["--run-ignored", "all", "--message-format", "json"]);
        let ran = f.run(&args, &[]);
        assert_code(&ran, 1);
        let statuses: Vec<String> = ran
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["type"] == "test")
            .map(|v| format!("{} {}", v["name"].as_str().unwrap_or("?"), v["status"]))
            .collect();
        assert!(
            statuses
                .iter()
                .any(|s| s.contains("ignored_step") && s.ends_with("\"new\"")),
            "{statuses:?}\n{}",
            ran.text()
        );
        assert!(
            !statuses.iter().any(|s| s.ends_with("\"ignored\"")),
            "{statuses:?}"
        );
    }

    let ran = f.run(&["--run-ignored", "some"], &[]);
    assert_code(&ran, 2);
    assert!(ran.stderr.contains("--run-ignored"), "{}", ran.text());
}
