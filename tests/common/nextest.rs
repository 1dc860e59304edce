//! Whether the end-to-end tests that drive the harness through `cargo nextest` can run,
//! shared by the test crates of `vramtest` and `cargo-vramtest` (included by both with
//! `#[path]`).

use std::process::Command;

/// Whether `cargo nextest` runs here. Where it does not, the caller skips its test
/// and this says why, on stderr; with `VRAMTEST_REQUIRE_NEXTEST=1` (as `.ci/run`
/// sets it) a missing nextest fails instead, so CI never skips silently.
pub fn has_nextest() -> bool {
    let found = Command::new(env!("CARGO"))
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let hint = "cargo-nextest is not installed (hint: cargo install cargo-nextest --locked)";
        assert!(
            std::env::var_os("VRAMTEST_REQUIRE_NEXTEST").is_none(),
            "{hint}; VRAMTEST_REQUIRE_NEXTEST is set"
        );
        eprintln!("skipped: {hint}");
    }
    found
}
