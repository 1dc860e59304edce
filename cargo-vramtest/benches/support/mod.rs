//! What the benches share: how many rounds, timing a command, the median.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Rounds to run: `VRAMTEST_BENCH_ROUNDS`, else 5.
pub fn rounds() -> usize {
    std::env::var("VRAMTEST_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

/// Runs a command to completion; panics unless it passes. Returns its stdout too.
pub fn time(mut cmd: Command) -> (Duration, String) {
    let start = Instant::now();
    let out = cmd.output().expect("the command runs");
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (elapsed, stdout)
}

pub fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Runs `cmd`, a `cargo test --no-run --test TARGET --message-format=json`, and
/// returns the test executable cargo reports for `target`; panics unless it builds.
pub fn test_executable(mut cmd: Command, target: &str) -> PathBuf {
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == target)
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .expect("cargo reports the test executable")
}
