//! Batch sweeps of the candle MLP (`fixtures/candle-mlp/tests/sweep.rs`, batch 32, 64
//! and 128): the fitted per-sample costs against the arithmetic of one sample, the
//! optimizer state against its formula, the largest batch within a budget against the
//! fit by hand, and a per-sample regression that names its category.

mod common;

use common::{Run, baseline_here, build_test_target, candle_tensor_header_bytes, repo_root, run};
use std::path::PathBuf;
use std::sync::OnceLock;
use vramtest_model::explain::ratios;
use vramtest_model::fit::Scaling;
use vramtest_model::report::{Status, TestReport};
use vramtest_model::{Body, Category};

const F32: u64 = 4;
const INPUT: u64 = 784;
const HIDDEN: u64 = 512;
const CLASSES: u64 = 10;
/// One sample of the batch: 784 f32 features and a u32 label.
const INPUT_BYTES_PER_SAMPLE: u64 = INPUT * F32 + 4;

fn sweep_binary() -> (PathBuf, PathBuf) {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = repo_root().join("fixtures").join("candle-mlp");
    let exe = BUILT.get_or_init(|| build_test_target(&dir, "sweep"));
    (dir, exe.clone())
}

fn run_sweep(test: &str, envs: &[(&str, &str)]) -> (Run, TestReport) {
    let (dir, exe) = sweep_binary();
    let r = run(&dir, &exe, &[test, "--exact"], envs);
    let report = r.report(test).clone();
    (r, report)
}

fn measured(test: &str) -> (Body, Scaling) {
    let (r, report) = run_sweep(test, &[("CI", "true")]);
    assert_eq!(report.status, Status::Passed, "{}", r.text());
    let body = report.body.expect("measured");
    let scaling = body
        .batch_scaling()
        .cloned()
        .expect("a sweep has a scaling key");
    (body, scaling)
}

fn within(what: &str, measured: i64, expected: u64, percent: f64) {
    let diff = (measured as f64 - expected as f64).abs() / expected as f64 * 100.0;
    assert!(
        diff <= percent,
        "{what}: {measured} B against {expected} B (±{percent}%), off by {diff:.2}%"
    );
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_sweep -- --ignored"]
fn per_sample_costs_are_the_bytes_of_one_sample() {
    let (body, s) = measured("mlp_adamw_sweep");
    assert_eq!(s.batch, vec![32, 64, 128]);
    let per = |c: Category| s.category_peaks[&c].bytes_per_sample;
    within(
        "inputs per sample",
        per(Category::Inputs),
        INPUT_BYTES_PER_SAMPLE,
        2.0,
    );
    assert_eq!(
        per(Category::Parameters),
        0,
        "parameters do not grow with the batch"
    );
    assert_eq!(per(Category::OptimizerState), 0);
    let weights = (INPUT * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES) * F32;
    within(
        "parameters fixed",
        s.category_peaks[&Category::Parameters].fixed_bytes,
        weights,
        2.0,
    );
    // candle keeps a gradient for the input batch: 3 × 784 f32 and the hidden layer's
    // 512 f32 per sample (see tests/candle_fixtures.rs).
    within(
        "gradients per sample",
        per(Category::Gradients),
        3 * INPUT * F32 + HIDDEN * F32,
        2.0,
    );
    // The snapshot's own figures are the first batch size's: the batch's data, and the
    // host-side headers of its two tensors (`x`, two dimensions; `y`, one).
    assert_eq!(
        body.category_peaks[Category::Inputs],
        32 * INPUT_BYTES_PER_SAMPLE + candle_tensor_header_bytes(2) + candle_tensor_header_bytes(1)
    );
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_sweep -- --ignored"]
fn optimizer_state_reads_as_its_formula() {
    for (test, multiple, meaning) in [
        ("mlp_adamw_sweep", 2.0, "Adam-like"),
        ("mlp_sgd_sweep", 0.0, "SGD without momentum"),
    ] {
        let (body, _) = measured(test);
        let r = ratios(&body.category_peaks);
        let opt = r
            .iter()
            .find(|r| r.category == Category::OptimizerState)
            .unwrap();
        assert!((opt.multiple - multiple).abs() < 0.01, "{test}: {opt}");
        assert!(opt.meaning.contains(meaning), "{test}: {opt}");
        assert!(!opt.drift, "{test}: {opt}");
    }
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_sweep -- --ignored"]
fn the_largest_batch_within_the_budget_follows_the_fit() {
    let (_, s) = measured("mlp_sgd_sweep");
    let budget: u64 = 64 << 20; // the test's `budget = "64MiB"`
    let within = s.within_budget.expect("a budget is set");
    assert_eq!(within.budget_bytes, budget);
    if s.peak.bytes_per_sample <= 0 {
        // gemm's packing buffers (workspace) are sized from the CPU's caches and can
        // shrink as the batch grows by as much as the activations grow: a peak that
        // does not grow with the batch fits at any batch.
        assert!(s.peak.at(1) <= i128::from(budget), "{}", s.peak);
        assert_eq!(within.largest_batch, None, "{}", s.peak);
        return;
    }
    // By hand: (budget − fixed) / per-sample, rounded down.
    let (fixed, per) = (s.peak.fixed_bytes as u64, s.peak.bytes_per_sample as u64);
    let by_hand = (budget - fixed) / per;
    assert_eq!(within.largest_batch, Some(by_hand));
    // And the fitted peak at that batch fits, one more sample does not.
    assert!(fixed + per * by_hand <= budget);
    assert!(fixed + per * (by_hand + 1) > budget);
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_sweep -- --ignored"]
fn a_wider_hidden_layer_per_sample_fails_naming_activations_per_sample() {
    let (dir, exe) = sweep_binary();
    let baseline = baseline_here(&dir, &exe, "mlp_adamw_sweep", &[]);
    let manifest_dir = baseline.path().to_str().unwrap();
    let (r, report) = run_sweep(
        "mlp_adamw_sweep",
        &[
            ("CARGO_MANIFEST_DIR", manifest_dir),
            ("CANDLE_MLP_BLOAT", "activations"),
        ],
    );
    assert_eq!(report.status, Status::Regressed, "{}", r.text());
    let text = r.text();
    let line = text
        .lines()
        .find(|l| l.contains("activations per sample:"))
        .unwrap_or_else(|| panic!("no per-sample line:\n{text}"));
    assert!(line.contains("over the limit"), "{line}");
    assert!(
        text.contains("peak per sample:") && text.contains("largest batch within"),
        "what it does to the largest batch:\n{text}"
    );
}
