//! A 256-point sweep (4 axes × 4 values, the grid's cap) of a trivial step, built as
//! `cargo test` builds it, against the same sweep with `vramtest-model` and its
//! big-integer crates optimized (`[profile.dev.package.*] opt-level = 3`, the lines
//! users once had to paste). The target is 1.5×: the fit needs no optimization in the
//! user's test profile.
//!
//! The step is `fixtures/vec-model`'s kind: plain `Vec<f32>`s whose sizes are products
//! of the axes, so each point costs a process start and little else, and the fit is a
//! large share of the sweep. Both builds run the sweep in alternating rounds with
//! `--test-threads` jobs (`VRAMTEST_BENCH_JOBS`, else 2, CI's cores).
//!
//! `cargo bench -p cargo-vramtest --bench sweep256` (set `VRAMTEST_BENCH_ROUNDS` for
//! more rounds; 3 unless set).

#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code)]
mod support;

use common::Fixture;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TARGET_RATIO: f64 = 1.5;

/// The packages the old README asked users to optimize in their dev profile.
const OPTIMIZED: [&str; 4] = [
    "vramtest-model",
    "num-bigint",
    "num-rational",
    "num-integer",
];

/// The sweep: 4⁴ points, every figure a polynomial of the axes.
const STEP: &str = r#"
use vramtest::{Step, vramtest};

#[vramtest(axes(batch = [1, 2, 3, 4], seq = [4, 8, 12, 16], layers = [1, 2, 3, 4], heads = [1, 2, 3, 4]))]
fn grid256(t: &mut Step) -> vramtest::Result<()> {
    let (batch, seq, layers, heads) = (t.axis("batch"), t.axis("seq"), t.axis("layers"), t.axis("heads"));
    let weights: Vec<Vec<f32>> = t.params(|| (0..layers).map(|_| vec![0.01f32; 256]).collect());
    for _ in t.iterations() {
        let x = t.inputs(|| vec![1.0f32; batch * seq * 16]);
        let kept = t.forward(|| {
            weights
                .iter()
                .map(|w| {
                    let scores = vec![w[0]; batch * heads * seq * seq];
                    x.iter().map(|v| v * scores[0]).collect::<Vec<f32>>()
                })
                .collect::<Vec<_>>()
        });
        let grads = t.backward(|| {
            drop(kept);
            weights.iter().map(|w| w.iter().map(|v| v * 0.5).collect::<Vec<f32>>()).collect::<Vec<_>>()
        });
        drop(grads);
        drop(x);
    }
    Ok(())
}

vramtest::main!();
"#;

fn main() {
    let jobs: usize = std::env::var("VRAMTEST_BENCH_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let rounds = std::env::var("VRAMTEST_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let f = Fixture::copy(
        &common::repo().join("fixtures").join("vec-model"),
        "bench-sweep256",
    );
    std::fs::write(f.dir.join("tests").join("grid256.rs"), STEP).unwrap();
    let manifest = f.dir.join("Cargo.toml");
    let mut toml = std::fs::read_to_string(&manifest).unwrap();
    toml.push_str("\n[[test]]\nname = \"grid256\"\nharness = false\n");
    std::fs::write(&manifest, toml).unwrap();

    let keep = tempfile::tempdir().unwrap();
    let plain = build(&f, &[], &keep.path().join("plain"));
    let config: Vec<String> = OPTIMIZED
        .iter()
        .map(|p| format!("profile.dev.package.{p}.opt-level=3"))
        .collect();
    let optimized = build(&f, &config, &keep.path().join("optimized"));

    let (mut plain_walls, mut optimized_walls) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (p, p_fit) = sweep(&f, &plain, jobs);
        let (o, o_fit) = sweep(&f, &optimized, jobs);
        println!(
            "round {round}: plain {:.2} s (fit {p_fit:.2} s), optimized {:.2} s (fit {o_fit:.2} s), {:.2}×",
            p.as_secs_f64(),
            o.as_secs_f64(),
            p.as_secs_f64() / o.as_secs_f64()
        );
        plain_walls.push(p);
        optimized_walls.push(o);
    }
    let (p, o) = (
        support::median(&mut plain_walls),
        support::median(&mut optimized_walls),
    );
    let ratio = p.as_secs_f64() / o.as_secs_f64();
    println!(
        "256-point sweep, {jobs} jobs: plain {:.2} s, optimized {:.2} s, median ratio {ratio:.2}×; target ≤ {TARGET_RATIO}×: {}",
        p.as_secs_f64(),
        o.as_secs_f64(),
        if ratio <= TARGET_RATIO {
            "met"
        } else {
            "MISSED"
        }
    );
}

/// Builds the grid256 test with `--config` settings; a copy of its executable at
/// `keep` (the two builds share one target directory).
fn build(f: &Fixture, config: &[String], keep: &Path) -> PathBuf {
    let args = [
        "test",
        "--no-run",
        "--test",
        "grid256",
        "--message-format=json",
    ];
    let mut cmd = f.cargo(&args);
    for c in config {
        cmd.args(["--config", c]);
    }
    let exe = support::test_executable(cmd, "grid256");
    std::fs::copy(&exe, keep).unwrap();
    keep.to_path_buf()
}

/// One whole sweep (fresh snapshot each time); its wall time and the fit's.
fn sweep(f: &Fixture, exe: &Path, jobs: usize) -> (Duration, f64) {
    let reports = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = Command::new(exe)
        .args(["grid256", "--exact", "--test-threads"])
        .arg(jobs.to_string())
        .current_dir(&f.dir)
        .env("VRAMTEST_REPORT_DIR", reports.path())
        .env("VRAMTEST_UPDATE", "always")
        .output()
        .unwrap();
    let wall = started.elapsed();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::read_dir(reports.path())
        .unwrap()
        .flatten()
        .next()
        .expect("the run writes a report");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(file.path()).unwrap()).unwrap();
    let fit = report["details"]["fit_millis"].as_f64().unwrap_or(0.0) / 1000.0;
    (wall, fit)
}
