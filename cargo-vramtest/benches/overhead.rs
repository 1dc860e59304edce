//! What `cargo vramtest` costs over `cargo test`: both run the same, already built
//! `vram` target of a copy of `fixtures/candle-mlp` (two tests, passing against fresh
//! snapshots), alternately, several rounds; the ratio of the median wall times is the
//! overhead (target: at most 1.15×).
//!
//! `cargo bench -p cargo-vramtest` (set `VRAMTEST_BENCH_ROUNDS` for more rounds).

#[path = "../tests/common/mod.rs"]
mod common;

use common::Fixture;
use std::process::Command;
use std::time::{Duration, Instant};

/// The target ratio of `cargo vramtest` to `cargo test`.
const TARGET: f64 = 1.15;

fn main() {
    let rounds: usize = std::env::var("VRAMTEST_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let f = Fixture::candle_mlp("bench");
    // Build, and write the snapshots both runs compare with.
    let ran = f.run(&[], &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(ran.code, 0, "{}", ran.text());

    let cargo_test = || f.cargo(&["test", "--test", "vram"]);
    let vramtest = || f.command(&[], &[]);

    // Warm both paths once (cargo's fingerprints, the page cache).
    time(cargo_test());
    time(vramtest());

    let mut plain = Vec::new();
    let mut ours = Vec::new();
    for round in 1..=rounds {
        let a = time(cargo_test());
        let b = time(vramtest());
        println!(
            "round {round}: cargo test {:>6.3}s   cargo vramtest {:>6.3}s   ({:.3}×)",
            a.as_secs_f64(),
            b.as_secs_f64(),
            b.as_secs_f64() / a.as_secs_f64()
        );
        plain.push(a);
        ours.push(b);
    }
    let (a, b) = (median(&mut plain), median(&mut ours));
    let ratio = b.as_secs_f64() / a.as_secs_f64();
    println!(
        "median of {rounds}: cargo test {:.3}s, cargo vramtest {:.3}s: {ratio:.3}× (target ≤ {TARGET}×) {}",
        a.as_secs_f64(),
        b.as_secs_f64(),
        if ratio <= TARGET { "ok" } else { "OVER TARGET" }
    );
}

/// Runs a command to completion; panics unless it passes.
fn time(mut cmd: Command) -> Duration {
    let start = Instant::now();
    let out = cmd.output().expect("the command runs");
    let elapsed = start.elapsed();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}
