//! A report that cannot be written, on a copy of `tests/fixtures/abort-crate`: the
//! verdict table and the GitHub annotations still print, the other reports are still
//! written, and the run exits 2 naming the file.

mod common;

use common::{Fixture, assert_code};

#[test]
fn an_unwritable_report_does_not_hide_the_verdict() {
    let f = Fixture::abort_crate("unwritable");
    // A path under a file: no directory can be made there.
    let junit = f.dir.join("Cargo.toml").join("junit.xml");
    let markdown = f.dir.join("out").join("report.md");
    // A directory cannot be appended to.
    let summary = f.dir.join("tests");
    let ran = f.run(
        &[
            "panics",
            "--junit",
            junit.to_str().unwrap(),
            "--markdown",
            markdown.to_str().unwrap(),
        ],
        &[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()),
        ],
    );
    assert_code(&ran, 2);
    assert!(ran.stdout.contains("1 test: 1 failed"), "{}", ran.text());
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("::error file=tests/vram.rs,")
                && l.contains("abort-crate%3A%3Avram%3A%3Apanics")),
        "{}",
        ran.text()
    );
    for path in [&junit, &summary] {
        assert!(
            ran.stderr.contains(&format!(
                "error: cannot write the report {}: ",
                path.display()
            )),
            "{}",
            ran.text()
        );
    }
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(md.contains("abort-crate::vram::panics"), "{md}");

    // A passing run with an unwritable report exits 2 as well.
    let ran = f.run(
        &["passes", "--junit", junit.to_str().unwrap()],
        &[("VRAMTEST_UPDATE", "always")],
    );
    assert_code(&ran, 2);
    assert!(ran.stdout.contains("1 test: 1 new"), "{}", ran.text());
}
