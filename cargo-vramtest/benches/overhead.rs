//! What `cargo vramtest` costs over `cargo test`: both run the same, already built
//! `vram` target of a copy of `fixtures/candle-mlp` (two tests, passing against fresh
//! snapshots), alternately, several rounds; the ratio of the median wall times is the
//! overhead.
//!
//! `cargo bench -p cargo-vramtest` (set `VRAMTEST_BENCH_ROUNDS` for more rounds).

#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code)] // each bench uses part of what the benches share
mod support;

use common::Fixture;
use support::{median, rounds, time};

/// The target ratio of `cargo vramtest` to `cargo test`.
const TARGET: f64 = 1.15;

fn main() {
    let rounds = rounds();
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
        let (a, _) = time(cargo_test());
        let (b, _) = time(vramtest());
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
