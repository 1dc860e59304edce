//! What `cargo vramtest merge` costs: 3 shards × 1,000 test reports, merged into the
//! table (JSON lines), JUnit, markdown and HTML reports at once.
//!
//! The reports are real ones: a copy of `fixtures/vec-model` runs once (one of its
//! four tests failing on purpose, so a quarter of the reports carry a failure), and
//! its test lines are dealt out, renamed, into three shard files of 1,000 each, each
//! with its summary line. The merge must see all 3,000 tests.
//!
//! `cargo bench -p cargo-vramtest --bench merge` (set `VRAMTEST_BENCH_ROUNDS` for more
//! rounds).

#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code)] // `time` asserts success; a merge with failing tests exits 1.
mod support;

use common::Fixture;
use serde_json::Value;
use std::process::Command;
use support::{median, rounds};

/// The target: a merge of 3 × 1,000 reports under a second.
const TARGET_SECS: f64 = 1.0;
const SHARDS: usize = 3;
const PER_SHARD: usize = 1_000;

fn main() {
    let f = Fixture::vec_model("bench-merge");
    // Snapshots, then a run whose reports carry figures, old bodies and a failure.
    assert_eq!(f.run(&[], &[("VRAMTEST_UPDATE", "always")]).code, 0);
    let ran = f.run(
        &["--message-format", "json"],
        &[("VEC_MODEL_FAIL", "error")],
    );
    assert_eq!(ran.code, 1, "{}", ran.text());
    let lines: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (tests, summary) = lines.split_at(lines.len() - 1);
    let tests: Vec<&Value> = tests.iter().filter(|t| t["status"] != "ignored").collect();

    let dir = f.dir.join("shards");
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    let mut bytes = 0;
    for shard in 1..=SHARDS {
        let mut text = String::new();
        for i in 0..PER_SHARD {
            let mut t = tests[i % tests.len()].clone();
            let test = format!("{}_{shard}_{i:04}", t["test"].as_str().unwrap());
            t["name"] = format!("{}::{test}", t["binary_id"].as_str().unwrap()).into();
            t["test"] = test.into();
            text += &serde_json::to_string(&t).unwrap();
            text.push('\n');
        }
        let mut s = summary[0].clone();
        s["tests"] = PER_SHARD.into();
        s["partition"] = format!("hash:{shard}/{SHARDS}").into();
        text += &serde_json::to_string(&s).unwrap();
        text.push('\n');
        bytes += text.len();
        let path = dir.join(format!("shard-{shard}.jsonl"));
        std::fs::write(&path, text).unwrap();
        files.push(path);
    }
    println!(
        "{SHARDS} shards × {PER_SHARD} reports: {:.1} MiB of JSON lines",
        bytes as f64 / (1 << 20) as f64
    );

    let out = f.dir.join("out");
    let merge = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-vramtest"));
        cmd.args(["vramtest", "merge", "--message-format", "json"])
            .args(&files)
            .arg("--junit")
            .arg(out.join("j.xml"))
            .arg("--markdown")
            .arg(out.join("m.md"))
            .arg("--html")
            .arg(out.join("r.html"))
            .env_remove("GITHUB_ACTIONS");
        cmd
    };
    // Warm the page cache once, and check what the merge saw.
    let first = merge().output().unwrap();
    assert_eq!(first.status.code(), Some(1), "a quarter of the tests fail");
    let stdout = String::from_utf8(first.stdout).unwrap();
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["tests"], SHARDS * PER_SHARD, "{last}");

    let mut samples = Vec::new();
    for round in 1..=rounds() {
        let start = std::time::Instant::now();
        let out = merge().output().unwrap();
        let elapsed = start.elapsed();
        assert_eq!(out.status.code(), Some(1));
        println!("round {round}: {:.3}s", elapsed.as_secs_f64());
        samples.push(elapsed);
    }
    let m = median(&mut samples).as_secs_f64();
    println!(
        "median of {}: merge of {SHARDS} × {PER_SHARD} reports (table as JSON, JUnit, markdown, HTML) {m:.3}s (target < {TARGET_SECS}s) {}",
        samples.len(),
        if m < TARGET_SECS { "ok" } else { "OVER TARGET" }
    );
}
