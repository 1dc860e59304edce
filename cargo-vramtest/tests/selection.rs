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
