//! What the benches share: how many rounds, timing a command, the median.

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
