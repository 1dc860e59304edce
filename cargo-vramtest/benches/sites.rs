//! What call sites cost, on a copy of `fixtures/candle-mlp` (`mlp_adamw`, already
//! built): a plain run of the test with call sites off (`VRAMTEST_SITES=0`, what a
//! passing run costs: no capture), against `cargo vramtest show mlp_adamw --sites` (the
//! measurement, then a re-run that plans and a re-run that captures and symbolizes).
//! Alternating rounds; the difference of the medians is the re-runs' cost.
//!
//! `cargo bench -p cargo-vramtest --bench sites` (set `VRAMTEST_BENCH_ROUNDS` for more
//! rounds).

#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code)] // each bench uses part of what the benches share
mod support;

use common::Fixture;
use support::{median, rounds, time};

fn main() {
    let rounds = rounds();
    let f = Fixture::candle_mlp("bench-sites");
    let ran = f.run(&["vram::mlp_adamw"], &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(ran.code, 0, "{}", ran.text());

    let plain = || f.command(&["vram::mlp_adamw"], &[("VRAMTEST_SITES", "0")]);
    let sites = || f.command(&["show", "vram::mlp_adamw", "--sites"], &[]);
    // Warm both paths once (cargo's fingerprints, the page cache).
    time(plain());
    let (_, shown) = time(sites());
    let traces = shown
        .lines()
        .find_map(|l| l.strip_suffix(" stack traces captured for the blocks alive at the peaks"))
        .unwrap_or_else(|| panic!("no planned capture in:\n{shown}"));

    let mut a_times = Vec::new();
    let mut b_times = Vec::new();
    for round in 1..=rounds {
        let (a, _) = time(plain());
        let (b, _) = time(sites());
        println!(
            "round {round}: plain run {:>6.3}s   show --sites {:>6.3}s",
            a.as_secs_f64(),
            b.as_secs_f64()
        );
        a_times.push(a);
        b_times.push(b);
    }
    let (a, b) = (median(&mut a_times), median(&mut b_times));
    println!(
        "median of {rounds}: plain run {:.3}s, show --sites {:.3}s: the re-runs cost {:.3}s ({:.2}× the plain run); {traces} stack traces captured",
        a.as_secs_f64(),
        b.as_secs_f64(),
        b.as_secs_f64() - a.as_secs_f64(),
        b.as_secs_f64() / a.as_secs_f64()
    );
}
