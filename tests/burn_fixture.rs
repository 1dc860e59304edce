//! The burn fixture (burn 0.22, Flex CPU backend with autodiff; it needs Rust 1.95),
//! measured on the CPU heap and checked against the model's arithmetic.
//!
//! Building burn takes longer than the rest of the suite's fixtures together, so every
//! test that builds it is ignored by `cargo test --workspace` and run on its own:
//! `cargo test -p vramtest --test burn_fixture -- --ignored` (a step of `.ci/run`).

mod common;

use common::{assert_close, run_one};
use vramtest_model::Category;
use vramtest_model::report::Status;

const F32: u64 = 4;
// The MLP of fixtures/burn-mlp: 256 → 1024 → 1024 → 32, batch 64.
const INPUT: u64 = 256;
const HIDDEN: u64 = 1024;
const CLASSES: u64 = 32;

/// Σ weights and biases × 4 B (5,382,272 B), checked against what the product
/// measured: the parameters' peak below, and the bytes and count of the call site that
/// creates them in `call_sites_find_where_burn_creates_the_parameters`.
fn parameter_bytes() -> u64 {
    (INPUT * HIDDEN + HIDDEN + HIDDEN * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES) * F32
}

#[test]
#[ignore = "slow, builds burn: cargo test -p vramtest --test burn_fixture -- --ignored"]
fn adam_parameters_moments_and_gradients_match_the_weights() {
    let (run, r) = run_one("burn-mlp", "mlp_adam", &[]);
    let body = r.body.unwrap_or_else(|| panic!("{}", run.text()));
    let peaks = body.category_peaks;
    assert_close(
        "parameters",
        peaks[Category::Parameters],
        parameter_bytes(),
        2.0,
    );
    // Adam: a first and a second moment per parameter, created in the first step.
    assert_close(
        "optimizer_state",
        peaks[Category::OptimizerState],
        2 * parameter_bytes(),
        2.0,
    );
    assert_close(
        "gradients",
        peaks[Category::Gradients],
        parameter_bytes(),
        2.0,
    );
    assert!(
        run.text().lines().all(|l| !l.contains("lazily")),
        "no lazy-parameter hint once they are touched in t.params:\n{}",
        run.text()
    );
}

#[test]
#[ignore = "slow, builds burn: cargo test -p vramtest --test burn_fixture -- --ignored"]
fn sgd_keeps_no_optimizer_state() {
    let (_, r) = run_one("burn-mlp", "mlp_sgd", &[]);
    let body = r.body.expect("measured");
    let state = body.category_peaks[Category::OptimizerState];
    // Bookkeeping per parameter, nothing per weight.
    assert!(
        state < 64 * 1024,
        "SGD optimizer_state is {state} B, expected (about) 0"
    );
    assert_close(
        "parameters",
        body.category_peaks[Category::Parameters],
        parameter_bytes(),
        2.0,
    );
    assert_close(
        "gradients",
        body.category_peaks[Category::Gradients],
        parameter_bytes(),
        2.0,
    );
}

#[test]
#[ignore = "slow, builds burn: cargo test -p vramtest --test burn_fixture -- --ignored"]
fn activations_double_when_the_batch_doubles() {
    let (_, small) = run_one("burn-mlp", "mlp_sgd", &[]);
    let (_, large) = run_one("burn-mlp", "mlp_sgd", &[("BURN_MLP_BATCH", "128")]);
    let (small, large) = (small.body.unwrap(), large.body.unwrap());
    let ratio = large.category_peaks[Category::Activations] as f64
        / small.category_peaks[Category::Activations] as f64;
    assert!(
        (1.8..=2.2).contains(&ratio),
        "activations grew {ratio:.3}× for 2× the batch"
    );
    assert_close(
        "parameters at batch 128",
        large.category_peaks[Category::Parameters],
        parameter_bytes(),
        2.0,
    );
}

#[test]
#[ignore = "slow, builds burn: cargo test -p vramtest --test burn_fixture -- --ignored"]
fn lazily_created_parameters_get_a_hint() {
    // Without touching the parameters in t.params, burn creates them in the first
    // forward pass: they live on in workspace, and vramtest says why and what to do.
    let (run, r) = run_one("burn-mlp", "mlp_adam_lazy_parameters", &[]);
    let body = r.body.expect("measured");
    assert!(
        body.category_peaks[Category::Parameters] < parameter_bytes() / 100,
        "{:?}",
        body.category_peaks
    );
    assert!(body.category_peaks[Category::Workspace] >= parameter_bytes());
    assert!(
        r.message.contains("initialize parameters lazily")
            && r.message
                .contains("Touch every parameter inside `t.params`"),
        "{}",
        r.message
    );
    assert!(
        run.text().contains("initialize parameters lazily"),
        "{}",
        run.text()
    );
}

#[test]
#[ignore = "slow, builds burn: cargo test -p vramtest --test burn_fixture -- --ignored"]
fn the_committed_burn_snapshots_pass() {
    for test in ["mlp_adam", "mlp_sgd", "mlp_adam_lazy_parameters"] {
        let (run, r) = run_one("burn-mlp", test, &[("CI", "true")]);
        assert_eq!(r.status, Status::Passed, "{test}:\n{}", run.text());
        assert!(run.output.status.success());
    }
}

/// The call sites of the memory at the peak, from a re-run on the CPU.
fn sites_of(test: &str, envs: &[(&str, &str)]) -> (common::Run, vramtest_model::sites::Sites) {
    let (run, r) = run_one("burn-mlp", test, envs);
    let sites = r
        .sites
        .unwrap_or_else(|| panic!("no call sites:\n{}", run.text()));
    (run, sites)
}
/// The line of the fixture's `src/lib.rs` that contains `needle` (exactly one).
fn line_of(needle: &str) -> usize {
    let file = common::repo_root().join("fixtures/burn-mlp/src/lib.rs");
    common::source::line_containing(&file, needle)
}

#[test]
#[ignore = "slow, builds burn: cargo test -p vramtest --test burn_fixture -- --ignored"]
fn call_sites_find_where_burn_creates_the_parameters() {
    let (run, sites) = sites_of("mlp_adam", &[("VRAMTEST_SITES", "always")]);
    // burn creates a parameter on first use: in `touch_parameters`, `param.val()`.
    let touch = line_of("let _ = param.val();");
    let top = &sites.of(Category::Parameters)[0];
    assert_eq!(
        top.key.location.as_deref(),
        Some(format!("src/lib.rs:{touch}").as_str()),
        "{top:?}\n{}",
        run.text()
    );
    // Every weight and bias there, and nothing else there.
    assert_eq!(top.bytes, parameter_bytes(), "{top:?}");
    assert_eq!(top.count, 6, "three weights and three biases: {top:?}");
}

#[test]
#[ignore = "slow, builds burn: cargo test -p vramtest --test burn_fixture -- --ignored"]
fn a_burn_regression_names_where_activations_grew() {
    // Twice the batch of the committed snapshot: activations grow.
    let (run, r) = run_one("burn-mlp", "mlp_adam", &[("BURN_MLP_BATCH", "128")]);
    assert_eq!(r.status, Status::Regressed, "{}", run.text());
    let sites = r
        .sites
        .unwrap_or_else(|| panic!("no call sites:\n{}", run.text()));
    assert!(
        r.message
            .contains("where activations grew (call sites at its peak):"),
        "{}",
        r.message
    );
    // The committed snapshot keeps no sites: the failure lists them by size, the
    // forward pass's lines in the fixture first.
    let forward = [
        line_of("let x = self.activation.forward(self.fc1.forward(x));"),
        line_of("let x = self.activation.forward(self.fc2.forward(x));"),
    ];
    let top = &sites.at_own_peak(Category::Activations)[0];
    let location = top.key.location.clone().unwrap_or_default();
    assert!(
        forward
            .iter()
            .any(|l| location == format!("src/lib.rs:{l}")),
        "{top:?} is not on a hidden layer's line {forward:?}"
    );
    // A hidden layer's output at batch 128: 128 × 1024 f32 per block.
    assert_eq!(top.bytes % (128 * HIDDEN * F32), 0, "{top:?}");
}

/// The user's thread counts (1, 4, 8) do not reach the measured process: the body is
/// the same byte for byte, and gemm's buffers are CPU-only memory, kept apart.
#[test]
#[ignore = "slow, builds burn: cargo test -p vramtest --test burn_fixture -- --ignored"]
fn the_users_thread_count_does_not_change_the_snapshot() {
    let (_, plain) = run_one("burn-mlp", "mlp_adam", &[]);
    let plain = plain.body.expect("measured");
    assert!(
        plain.cpu_only.is_some_and(|b| b > 0),
        "matmuls pack: {plain:?}"
    );
    for n in ["1", "4", "8"] {
        let (run, r) = run_one(
            "burn-mlp",
            "mlp_adam",
            &[("RAYON_NUM_THREADS", n), ("CANDLE_NUM_THREADS", n)],
        );
        assert_eq!(r.status, Status::Passed, "at {n} threads: {}", run.text());
        assert_eq!(
            r.body.expect("measured").to_text(),
            plain.to_text(),
            "at {n} threads"
        );
    }
}
