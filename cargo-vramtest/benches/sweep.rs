//! What a sweep over named axes costs beside its points: the wall time of one sweep
//! against (Σ of its points' process wall times) ÷ jobs. The target is 1.2×: running
//! the grid in parallel, fitting it and predicting its target add at most a fifth.
//!
//! The sweep is `fixtures/candle-transformer`'s `decoder` (`VRAMTEST_BENCH_SWEEP=
//! vec-model` takes vec-model's `transformer_like` instead, `=levels` the candle
//! fixture's sweep with levels, `levers`: bf16 and block checkpointing, every
//! combination's grid), run as `cargo test` runs
//! it, with `--test-threads` jobs (`VRAMTEST_BENCH_JOBS`, else 2, CI's cores). Each
//! point's wall time and the fit's come from the harness's JSON report
//! (`details.point_millis`, `details.fit_millis`).
//!
//! `cargo bench -p cargo-vramtest --bench sweep` (set `VRAMTEST_BENCH_ROUNDS` for more
//! rounds).

#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code)]
mod support;

use common::Fixture;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use support::rounds;

const TARGET_RATIO: f64 = 1.2;

fn main() {
    let (fixture, target, test) = match std::env::var("VRAMTEST_BENCH_SWEEP").as_deref() {
        Ok("vec-model") => ("vec-model", "axes", "transformer_like"),
        Ok("levels") => ("candle-transformer", "vram", "levers"),
        _ => ("candle-transformer", "vram", "decoder"),
    };
    let jobs: usize = std::env::var("VRAMTEST_BENCH_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let f = Fixture::copy(
        &common::repo().join("fixtures").join(fixture),
        "bench-sweep",
    );
    let exe = build(&f, target);
    let reports = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for round in 0..rounds() {
        let started = std::time::Instant::now();
        let out = Command::new(&exe)
            .args([test, "--exact", "--include-ignored", "--test-threads"])
            .arg(jobs.to_string())
            .current_dir(&f.dir)
            .env("VRAMTEST_REPORT_DIR", reports.path())
            .env("VRAMTEST_UPDATE", "always")
            .output()
            .unwrap();
        let wall = started.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report = report(reports.path());
        let details = &report["details"];
        let points: Vec<f64> = details["point_millis"]
            .as_array()
            .expect("a sweep reports its points")
            .iter()
            .map(|v| v.as_f64().unwrap() / 1000.0)
            .collect();
        let fit = details["fit_millis"].as_f64().unwrap_or(0.0) / 1000.0;
        let ideal = points.iter().sum::<f64>() / jobs as f64;
        rows.push((wall / ideal, wall, ideal, fit, points.len()));
        println!(
            "round {round}: {} points, wall {wall:.2} s, Σ points ÷ {jobs} = {ideal:.2} s, fit {fit:.2} s, ratio {:.2}×",
            points.len(),
            wall / ideal
        );
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (ratio, wall, ideal, fit, n) = rows[rows.len() / 2];
    println!(
        "sweep of {fixture} ({n} points, {jobs} jobs): median ratio {ratio:.2}× (wall {wall:.2} s, Σ ÷ jobs {ideal:.2} s, fit {fit:.2} s); target ≤ {TARGET_RATIO}×: {}",
        if ratio <= TARGET_RATIO {
            "met"
        } else {
            "MISSED"
        }
    );
}

/// Builds the fixture's test target; its executable.
fn build(f: &Fixture, target: &str) -> PathBuf {
    let args = [
        "test",
        "--no-run",
        "--test",
        target,
        "--message-format=json",
    ];
    support::test_executable(f.cargo(&args), target)
}

/// The one report the run wrote.
fn report(dir: &std::path::Path) -> Value {
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "one report");
    let text = std::fs::read_to_string(files.remove(0).path()).unwrap();
    serde_json::from_str(&text).unwrap()
}
