//! Two checkouts of one crate sharing a target directory (a second worktree for
//! reviewing pull requests): cargo reuses the test binary built in one checkout for a
//! run in the other, and each checkout's snapshots must stay in that checkout.
//!
//! Checkout B writes its snapshots first; checkout A, whose files are dated earlier
//! than that build, is then tested with the binary built in B. A's results go to A (pending, as it has no
//! snapshots), B's files are untouched, and the harness says which binary it runs.

mod common;

use common::{Fixture, repo};
use std::path::Path;

/// Checkouts A and B of `fixtures/vec-model`, one version for both, and B's snapshots
/// written by `cargo test` in B.
///
/// cargo reuses B's test binary in A only if A's sources are older than that build.
/// Copying A first leaves that to the file system's clock and to the load (and it did
/// not hold under load): A's files are dated a day back instead, so the scenario does
/// not depend on when things ran.
fn two_checkouts(scenario: &str) -> (Fixture, Fixture) {
    let src = repo().join("fixtures").join("vec-model");
    let version = format!("0.1.0-e2e-{scenario}");
    let a = Fixture::copy_as(&src, &format!("{scenario}-a"), &version);
    let b = Fixture::copy_as(&src, &format!("{scenario}-b"), &version);
    let day_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(24 * 3600);
    date_files(&a.dir, day_ago);
    // The story is about the `vram` target's four measured tests.
    a.drop_test_target("cpu_only");
    b.drop_test_target("cpu_only");
    let out = b
        .cargo(&["test", "--test", "vram"])
        .env("VRAMTEST_UPDATE", "always")
        .env("VRAMTEST_DEVICE", "cpu")
        .output()
        .expect("cargo runs");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo test in B failed:\n{text}");
    assert_eq!(b.snapshot_files(), measured_snapshots(""), "{text}");
    (a, b)
}

/// Sets the modification time of every file under `dir` to `when`.
fn date_files(dir: &Path, when: std::time::SystemTime) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            date_files(&entry.path(), when);
        } else {
            let file = std::fs::File::open(entry.path()).unwrap();
            file.set_modified(when).unwrap();
        }
    }
}

/// The snapshot files of vec-model's four measured tests, with `suffix`.
fn measured_snapshots(suffix: &str) -> Vec<String> {
    [
        "vram__fails_on_demand@cpu.snap",
        "vram__leaky_history@cpu.snap",
        "vram__linear_adam@cpu.snap",
        "vram__tagged__explicit_tag@cpu.snap",
    ]
    .iter()
    .map(|n| format!("{n}{suffix}"))
    .collect()
}

fn texts(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// A's results are pending in A; B is as B left it.
fn assert_each_checkout_keeps_its_snapshots(
    a: &Fixture,
    b_before: &[(String, String)],
    b: &Fixture,
    text: &str,
) {
    assert_eq!(
        a.snapshot_files(),
        measured_snapshots(".new"),
        "A's results are not in A:\n{text}"
    );
    assert_eq!(
        texts(&b.snapshots()),
        b_before,
        "a run in A changed B's snapshots:\n{text}"
    );
}

fn note(a: &Fixture, b: &Fixture) -> String {
    format!(
        "test binary built in {}, testing {}",
        b.dir.display(),
        a.dir.display()
    )
}

#[test]
fn cargo_test_in_another_checkout_tests_that_checkout() {
    let (a, b) = two_checkouts("checkout-test");
    let b_before = texts(&b.snapshots());
    let out = a
        .cargo(&["test", "--test", "vram"])
        .env("VRAMTEST_DEVICE", "cpu")
        .output()
        .expect("cargo runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The scenario needs cargo to reuse B's binary; the note says it did, once.
    assert_eq!(text.matches(&note(&a, &b)).count(), 1, "{text}");
    assert!(!out.status.success(), "new results fail the run:\n{text}");
    assert_each_checkout_keeps_its_snapshots(&a, &b_before, &b, &text);
}

#[test]
fn cargo_nextest_in_another_checkout_tests_that_checkout() {
    if !common::nextest::has_nextest() {
        return;
    }
    let (a, b) = two_checkouts("checkout-nextest");
    let b_before = texts(&b.snapshots());
    let out = a
        .cargo(&["nextest", "run", "--test", "vram", "--no-fail-fast"])
        .env("VRAMTEST_DEVICE", "cpu")
        .output()
        .expect("cargo runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&note(&a, &b)), "{text}");
    assert!(!out.status.success(), "new results fail the run:\n{text}");
    assert_each_checkout_keeps_its_snapshots(&a, &b_before, &b, &text);
}

#[test]
fn cargo_vramtest_in_another_checkout_tests_that_checkout() {
    let (a, b) = two_checkouts("checkout-vramtest");
    let b_before = texts(&b.snapshots());
    let ran = a.run(&["--device", "cpu"], &[]);
    assert_ne!(ran.code, 0, "new results fail the run:\n{}", ran.text());
    assert_each_checkout_keeps_its_snapshots(&a, &b_before, &b, &ran.text());
    // The reuse is visible here too: the harness's note, once for the whole run.
    assert_eq!(
        ran.stderr.matches(&note(&a, &b)).count(),
        1,
        "{}",
        ran.text()
    );
}
