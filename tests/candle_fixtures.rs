//! The candle fixtures, measured on the CPU heap and checked against the analytic
//! formulas practitioners use (never against numbers copied from a run).

mod common;

use common::{assert_close, baseline_here, fixture_binary, run_one};
use vramtest_model::report::Status;
use vramtest_model::{Category, Movement, Subject};

const F32: u64 = 4;
// The MLP of fixtures/candle-mlp: 784 → 512 → 10, batch 64.
const INPUT: u64 = 784;
const HIDDEN: u64 = 512;
const CLASSES: u64 = 10;
const BATCH: u64 = 64;

fn mlp_parameter_bytes() -> u64 {
    (INPUT * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES) * F32
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn mlp_parameters_are_the_weights_and_biases() {
    let (_, r) = run_one("candle-mlp", "mlp_adamw", &[]);
    let body = r.body.expect("measured");
    assert_close(
        "parameters",
        body.category_peaks[Category::Parameters],
        mlp_parameter_bytes(),
        2.0,
    );
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn adamw_keeps_two_moments_per_parameter() {
    let (_, r) = run_one("candle-mlp", "mlp_adamw", &[]);
    let body = r.body.expect("measured");
    assert_close(
        "optimizer_state",
        body.category_peaks[Category::OptimizerState],
        2 * mlp_parameter_bytes(),
        2.0,
    );
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn sgd_keeps_no_optimizer_state() {
    let (_, r) = run_one("candle-mlp", "mlp_sgd", &[]);
    let body = r.body.expect("measured");
    let state = body.category_peaks[Category::OptimizerState];
    // A handle per variable, nothing per parameter.
    assert!(
        state <= 1024,
        "SGD optimizer_state is {state} B, expected (about) 0"
    );
    assert_close(
        "parameters",
        body.category_peaks[Category::Parameters],
        mlp_parameter_bytes(),
        2.0,
    );
}

/// What candle's gradient store keeps for the batch `x` of the first matmul: its
/// gradient, the zeros it was added to and the matmul result it was computed from (each
/// `B × 784` f32), and the incoming `B × 512` gradient that result still refers to.
fn mlp_input_gradient_bytes(batch: u64) -> u64 {
    3 * batch * INPUT * F32 + batch * HIDDEN * F32
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn gradients_are_one_per_parameter_plus_what_candle_keeps_for_the_batch() {
    // gemm's packing buffer, grown in the first backward and kept for the life of the
    // process, is workspace: it is not in these figures.
    for test in ["mlp_adamw", "mlp_sgd"] {
        let (_, r) = run_one("candle-mlp", test, &[]);
        let body = r.body.expect("measured");
        assert_close(
            &format!("{test} gradients"),
            body.category_peaks[Category::Gradients],
            mlp_parameter_bytes() + mlp_input_gradient_bytes(BATCH),
            2.0,
        );
        assert!(body.category_peaks[Category::Workspace] > 0);
    }
    // Dropping the batch's gradient leaves exactly one gradient per parameter.
    let (_, r) = run_one(
        "candle-mlp",
        "mlp_adamw",
        &[("CANDLE_MLP_GRADS", "parameters")],
    );
    let body = r.body.expect("measured");
    assert_close(
        "gradients without the batch's",
        body.category_peaks[Category::Gradients],
        mlp_parameter_bytes(),
        2.0,
    );
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn strict_mode_fails_a_changed_batch() {
    // Judged against this machine's own measurement: strict mode fails on any
    // difference, and gemm's workspace differs between CPUs.
    let (dir, exe) = fixture_binary("candle-mlp");
    let baseline = baseline_here(&dir, &exe, "mlp_sgd", &[]);
    let here = ("CARGO_MANIFEST_DIR", baseline.path().to_str().unwrap());
    let (run, r) = run_one(
        "candle-mlp",
        "mlp_sgd",
        &[here, ("VRAMTEST_STRICT", "1"), ("CANDLE_MLP_BATCH", "65")],
    );
    assert_eq!(r.status, Status::Regressed, "{}", run.text());
    assert!(!run.output.status.success());
    assert!(
        run.text().contains("any change fails (strict)"),
        "{}",
        run.text()
    );
    // The same batch passes under strict: the figures are deterministic.
    let (run, r) = run_one("candle-mlp", "mlp_sgd", &[here, ("VRAMTEST_STRICT", "1")]);
    assert_eq!(r.status, Status::Passed, "{}", run.text());
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn inputs_are_the_batch() {
    let (_, r) = run_one("candle-mlp", "mlp_adamw", &[]);
    let body = r.body.expect("measured");
    let images = BATCH * INPUT * F32;
    let labels = BATCH * 4; // u32
    assert_close(
        "inputs",
        body.category_peaks[Category::Inputs],
        images + labels,
        2.0,
    );
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn activations_double_when_the_batch_doubles() {
    let (_, small) = run_one("candle-mlp", "mlp_adamw", &[]);
    let (_, large) = run_one("candle-mlp", "mlp_adamw", &[("CANDLE_MLP_BATCH", "128")]);
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
        small.category_peaks[Category::Parameters],
        1.0,
    );
}

/// fc1's weight, `784 × 512` f32: the model's largest tensor.
const FC1_WEIGHT_BYTES: u64 = INPUT * HIDDEN * F32;

/// The most tensors of one parameter's shape alive at once in candle-nn 0.11.1's
/// `AdamW::step` (the update of one parameter `θ` with gradient `g` and moments `m`,
/// `v`). `m`, `v` and `θ` are `Var`s, so every op on them is recorded for backprop and
/// its result keeps its inputs alive; `g` is detached, so ops on it alone are not.
/// At the last line of the update (`θ·(1 − lr·λ) − (m̂ / (√v̂ + ε))·lr`) these are alive:
/// 1–3. `m·β1`, `g·(1 − β1)` and their sum `m'` (which keeps both);
/// 4–6. `v·β2`, `g²·(1 − β2)` and their sum `v'` (`g²` itself is freed: the scaled
///      copy of an unrecorded tensor does not keep it);
/// 7–8. `m̂ = m'·scale_m`, `v̂ = v'·scale_v`;
/// 9. `θ·(1 − lr·λ)`;
/// 10–12. `√v̂`, `√v̂ + ε` and the quotient `m̂ / (√v̂ + ε)` (which keeps the others);
/// 13–14. the quotient times `lr`, and the new `θ`.
const ADAMW_TENSORS_PER_PARAMETER: u64 = 14;

/// `mlp_adamw`'s temporaries peak in AdamW's step on fc1's weight: 14 tensors of the
/// weight's shape, each its data and its host-side header (256 B for a 2-D tensor), so
/// `14 × fc1's weight + 3.5 KiB`, exactly, at any batch (the optimizer never sees it).
#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn adamw_temporaries_are_fourteen_copies_of_the_largest_weight() {
    let expected =
        ADAMW_TENSORS_PER_PARAMETER * (FC1_WEIGHT_BYTES + common::candle_tensor_header_bytes(2));
    assert_eq!(expected, 14 * FC1_WEIGHT_BYTES + 3584);
    for batch in ["64", "128"] {
        let (run, r) = run_one("candle-mlp", "mlp_adamw", &[("CANDLE_MLP_BATCH", batch)]);
        let body = r.body.unwrap_or_else(|| panic!("{}", run.text()));
        assert_eq!(
            body.category_peaks[Category::Temporaries],
            expected,
            "batch {batch}"
        );
    }
}

/// No tensor of either candle fixture outlives its iteration: what `workspace` holds is
/// candle's and rayon's thread-pool bookkeeping (barriers, a work-stealing deque
/// block), under 4 KiB and the same at twice the batch, where a kept tensor of the
/// batch would grow. (gemm's packing buffers, which do outlive it, are CPU-only
/// memory, measured apart.)
#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn workspace_is_bookkeeping_only() {
    const BOUND: u64 = 4 << 10;
    for (fixture, test, var, twice) in [
        ("candle-mlp", "mlp_adamw", "CANDLE_MLP_BATCH", "128"),
        ("candle-conv", "conv_stem", "CANDLE_CONV_BATCH", "8"),
    ] {
        let (_, small) = run_one(fixture, test, &[]);
        let small = small.body.expect("measured").category_peaks[Category::Workspace];
        let (_, large) = run_one(fixture, test, &[(var, twice)]);
        let large = large.body.expect("measured").category_peaks[Category::Workspace];
        assert!(small < BOUND, "{fixture}: workspace {small} B");
        assert_eq!(large, small, "{fixture}: workspace grew with the batch");
    }
}

/// `mlp_adamw`'s peak is AdamW's step on fc1's weight in the first iteration, and its
/// figure is the sum of what is alive then, each term from the model's dimensions: the
/// parameters and AdamW's two moments; the gradients (one per parameter, and what
/// candle keeps for the batch); the batch; forward's hidden-layer activations (the
/// matmul, the bias added, the ReLU: `B × 512` f32 each); and the 14 temporaries.
/// What the formula leaves out is small: the logits-sized tensors (`B × 10` f32, a
/// few KiB), the host-side headers of the ~100 tensors alive (256 B each) and the
/// `VarMap`'s names: under 64 KiB, while a `B × 512` f32 tensor is 128 KiB.
#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn mlp_adamw_peaks_in_adamw_on_the_largest_weight() {
    const SLACK: u64 = 64 << 10;
    let (run, r) = run_one("candle-mlp", "mlp_adamw", &[]);
    let body = r.body.unwrap_or_else(|| panic!("{}", run.text()));
    assert_eq!(body.peak_phase, Some(vramtest_model::Phase::OptimizerStep));
    assert_eq!(body.peak_iteration, Some(0));
    let parameters = mlp_parameter_bytes();
    let expected = parameters
        + 2 * parameters
        + parameters
        + mlp_input_gradient_bytes(BATCH)
        + BATCH * INPUT * F32
        + BATCH * 4
        + 3 * BATCH * HIDDEN * F32
        + ADAMW_TENSORS_PER_PARAMETER * FC1_WEIGHT_BYTES;
    assert!(
        (expected..expected + SLACK).contains(&body.peak_bytes),
        "peak {} B, expected {expected} B + at most {SLACK} B",
        body.peak_bytes
    );
    assert_eq!(body.at_peak.total(), body.peak_bytes);
}

/// `B × 64 × H_out × W_out × 4` with `H_out = (H + 2P − K) / S + 1` (for a
/// `[64, 3, 224, 224]` batch: 205,520,896 B, 196 MiB). Checked against what the
/// product measured for the fixture's 64 × 64 images in
/// `conv_stem_activation_is_its_output_feature_map`.
fn conv_stem_output_bytes(batch: u64, side: u64) -> u64 {
    let out = conv_stem_output_side(side);
    batch * 64 * out * out * F32
}

/// The stem's output side: `(H + 2P − K) / S + 1` with P = 3, K = 7, S = 2.
fn conv_stem_output_side(side: u64) -> u64 {
    (side + 2 * 3 - 7) / 2 + 1
}

/// The stem's weights: `64 × 3 × 7 × 7` f32, no bias.
const CONV_WEIGHT_BYTES: u64 = 64 * 3 * 7 * 7 * F32;

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn conv_gradients_are_the_weights_plus_what_candle_keeps_for_the_images() {
    let batch = 4;
    let images = batch * 3 * 64 * 64 * F32;
    // The images' gradient keeps alive the zeros it was added to, the transposed
    // convolution result it was computed from, and the feature map's gradient.
    let kept = 3 * images + conv_stem_output_bytes(batch, 64);
    let (_, r) = run_one("candle-conv", "conv_stem", &[]);
    let body = r.body.expect("measured");
    assert_close(
        "parameters",
        body.category_peaks[Category::Parameters],
        CONV_WEIGHT_BYTES,
        2.5,
    );
    assert_close(
        "gradients",
        body.category_peaks[Category::Gradients],
        CONV_WEIGHT_BYTES + kept,
        2.0,
    );
    let (_, r) = run_one(
        "candle-conv",
        "conv_stem",
        &[("CANDLE_CONV_GRADS", "parameters")],
    );
    let body = r.body.expect("measured");
    assert_close(
        "gradients without the images'",
        body.category_peaks[Category::Gradients],
        CONV_WEIGHT_BYTES,
        2.0,
    );
    assert_close(
        "gradients / parameters",
        body.category_peaks[Category::Gradients],
        body.category_peaks[Category::Parameters],
        2.0,
    );
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn conv_stem_activation_is_its_output_feature_map() {
    for batch in [4u64, 8] {
        let (_, r) = run_one(
            "candle-conv",
            "conv_stem",
            &[("CANDLE_CONV_BATCH", &batch.to_string())],
        );
        let body = r.body.expect("measured");
        assert_close(
            &format!("activations at batch {batch}"),
            body.category_peaks[Category::Activations],
            conv_stem_output_bytes(batch, 64),
            1.0,
        );
        assert_close(
            &format!("inputs at batch {batch}"),
            body.category_peaks[Category::Inputs],
            batch * 3 * 64 * 64 * F32,
            1.0,
        );
    }
}

/// The CPU threads the measured process runs with (the harness's default: README,
/// "The same figures on every machine").
const HARNESS_THREADS: u64 = 2;

/// What `conv_stem` holds at its peak, from the stem's dimensions and candle 0.11.1's
/// CPU kernels, data bytes only (the host-side headers of the tensors alive, their
/// shapes and layouts, a few KiB, are left out).
///
/// The peak comes in backward, in the kernel's gradient: candle computes it as the
/// convolution `x.transpose(0, 1).conv2d(dy.transpose(0, 1), padding 3, stride 1,
/// dilation 2)`, whose input is 3 "images" of B channels (`x`'s bytes), whose kernel is
/// `dy` (64 × B × 32 × 32, the feature map's bytes) and whose output is 3 × 64 × 8 × 8.
/// Its tiled im2col copies the input to channels-last (`X`) and the kernel to a flat
/// matrix (`F`), allocates the output, then builds one im2col tile per image (8 × 8 = 64
/// output pixels: a `B·32·32 × 64` f32 matrix, the pixels' coordinates and the
/// `64 × 64` f32 product), as many at once as there are threads: rayon's two workers
/// each take an image's tile as the loop starts, and each tile takes milliseconds, so
/// their tiles overlap (`the_users_thread_count_does_not_change_the_snapshot` runs
/// `conv_stem` four times and requires the same body byte for byte each time).
/// gemm's packing buffers are CPU-only memory, in none of these.
///
/// Alive beside it (`F` = the feature map `B × 64 × 32 × 32` f32, `X` = the images):
/// - temporaries: `y²`, kept by the loss's graph; and what `dy`, the feature map's
///   gradient, keeps: candle detaches the incoming gradient, but `y · g` mixes it with
///   `y`, which is in the graph, so `dy = zeros + 2·(y · g)` keeps the zeros, `2·y·g`,
///   `y · g` and `g` (the gradient of `y²`): 5 `F`;
/// - gradients: `dy` itself (`F`), and the images' gradient with the transposed
///   convolution and the zeros it was added to (3 `X`);
/// - the weights, the feature map (activations) and the images (inputs).
struct ConvStemPeak {
    temporaries: u64,
    peak: u64,
}

fn conv_stem_peak(batch: u64) -> ConvStemPeak {
    let side = 64;
    let feature_map = conv_stem_output_bytes(batch, side);
    let images = batch * 3 * side * side * F32;
    let out = conv_stem_output_side(side);
    // The kernel gradient's convolution: output side S + 2P − D·(O − 1), D = 2.
    let grad_side = side + 2 * 3 - 2 * (out - 1);
    let pixels = grad_side * grad_side;
    assert!(
        pixels <= 512,
        "one im2col tile per image (candle's TILE_SIZE is 512)"
    );
    let tile = batch * out * out * pixels * F32 + pixels * 16 + 64 * pixels * F32;
    let tiles_at_once = HARNESS_THREADS.min(3);
    let kernel_gradient = images + feature_map + 3 * 64 * pixels * F32 + tiles_at_once * tile;
    let temporaries = 5 * feature_map + kernel_gradient;
    let gradients = feature_map + 3 * images;
    ConvStemPeak {
        temporaries,
        peak: CONV_WEIGHT_BYTES + gradients + feature_map + images + temporaries,
    }
}

/// `conv_stem`'s temporaries and peak against [`conv_stem_peak`], at two batches: each
/// at least the formula's data bytes and at most a few KiB of tensor headers above it
/// (at batch 4 the formula is 8,669,184 B of temporaries in an 11,590,400 B peak).
#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn conv_stem_peaks_in_the_kernel_gradients_convolution() {
    const HEADERS: u64 = 4 << 10;
    for batch in [4u64, 8] {
        let (run, r) = run_one(
            "candle-conv",
            "conv_stem",
            &[("CANDLE_CONV_BATCH", &batch.to_string())],
        );
        let body = r.body.unwrap_or_else(|| panic!("{}", run.text()));
        let expected = conv_stem_peak(batch);
        assert_eq!(body.peak_phase, Some(vramtest_model::Phase::Backward));
        let temporaries = body.at_peak[Category::Temporaries];
        assert!(
            (expected.temporaries..expected.temporaries + HEADERS).contains(&temporaries),
            "batch {batch}: temporaries at the peak {temporaries} B, expected {} B + at most {HEADERS} B",
            expected.temporaries
        );
        assert_eq!(body.category_peaks[Category::Temporaries], temporaries);
        assert!(
            (expected.peak..expected.peak + 2 * HEADERS).contains(&body.peak_bytes),
            "batch {batch}: peak {} B, expected {} B + at most {} B",
            body.peak_bytes,
            expected.peak,
            2 * HEADERS
        );
    }
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn the_committed_snapshots_pass() {
    for (fixture, test) in [
        ("candle-mlp", "mlp_adamw"),
        ("candle-mlp", "mlp_sgd"),
        ("candle-conv", "conv_stem"),
    ] {
        let (run, r) = run_one(fixture, test, &[("CI", "true")]);
        assert_eq!(
            r.status,
            Status::Passed,
            "{fixture}/{test}:\n{}",
            run.text()
        );
        assert!(run.output.status.success());
    }
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn bloated_activations_fail_and_name_the_category() {
    for (fixture, test, var) in [
        ("candle-mlp", "mlp_adamw", "CANDLE_MLP_BLOAT"),
        ("candle-conv", "conv_stem", "CANDLE_CONV_BLOAT"),
    ] {
        let (run, r) = run_one(fixture, test, &[(var, "activations")]);
        assert_eq!(r.status, Status::Regressed, "{}", run.text());
        assert!(!run.output.status.success());
        let text = run.text();
        assert!(
            text.contains("memory regression in") && text.contains("activations: "),
            "{text}"
        );
        assert!(
            r.changes
                .iter()
                .any(|c| c.subject == Subject::Category(Category::Activations)
                    && c.movement == Movement::Regressed),
            "{:?}",
            r.changes
        );
        // The unified diff of the two bodies follows the message.
        assert!(
            text.contains("@@") && text.contains("+    \"activations\""),
            "{text}"
        );
    }
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn bloated_optimizer_state_fails_and_names_the_category() {
    for (fixture, test, var) in [
        ("candle-mlp", "mlp_adamw", "CANDLE_MLP_BLOAT"),
        ("candle-conv", "conv_stem", "CANDLE_CONV_BLOAT"),
    ] {
        let (run, r) = run_one(fixture, test, &[(var, "optimizer_state")]);
        assert_eq!(r.status, Status::Regressed, "{}", run.text());
        let grown = r
            .changes
            .iter()
            .find(|c| c.subject == Subject::Category(Category::OptimizerState))
            .unwrap_or_else(|| panic!("{:?}", r.changes));
        assert_eq!(grown.movement, Movement::Regressed);
        assert!(run.text().contains("optimizer_state: "), "{}", run.text());
    }
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn two_runs_give_identical_bodies() {
    let (_, a) = run_one("candle-mlp", "mlp_adamw", &[]);
    let (_, b) = run_one("candle-mlp", "mlp_adamw", &[]);
    assert_eq!(a.body.unwrap().to_text(), b.body.unwrap().to_text());
}

/// A step that keeps an extra 1 MiB cache alive (filled in the first forward pass,
/// kept by the process) fails on the default limits, with `workspace` and the peak
/// grown by exactly the cache and nothing else moved: the fixtures carry no slack.
#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn a_kept_1_mib_cache_fails_on_workspace_and_the_peak_alone() {
    const CACHE: u64 = 1 << 20; // 256 Ki f32 values
    let (_, before) = run_one("candle-mlp", "mlp_adamw", &[]);
    let (run, r) = run_one(
        "candle-mlp",
        "mlp_adamw",
        &[("CANDLE_MLP_BLOAT", "workspace")],
    );
    assert_eq!(r.status, Status::Regressed, "{}", run.text());
    let regressed: Vec<Subject> = r
        .changes
        .iter()
        .filter(|c| c.movement == Movement::Regressed)
        .map(|c| c.subject)
        .collect();
    assert_eq!(
        regressed,
        [Subject::Category(Category::Workspace), Subject::Peak],
        "{}",
        run.text()
    );
    let (old, new) = (before.body.unwrap(), r.body.unwrap());
    assert_eq!(
        new.category_peaks[Category::Workspace] - old.category_peaks[Category::Workspace],
        CACHE
    );
    for c in Category::ALL
        .into_iter()
        .filter(|&c| c != Category::Workspace)
    {
        assert_eq!(new.category_peaks[c], old.category_peaks[c], "{c}");
    }
}

/// The thread count in the user's environment does not reach the measured process:
/// the snapshot body is the same byte for byte under 1, 4 and 8 threads.
#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn the_users_thread_count_does_not_change_the_snapshot() {
    for (fixture, test) in [("candle-mlp", "mlp_adamw"), ("candle-conv", "conv_stem")] {
        let (_, plain) = run_one(fixture, test, &[]);
        let plain = plain.body.expect("measured").to_text();
        for n in ["1", "4", "8"] {
            let (run, r) = run_one(
                fixture,
                test,
                &[("RAYON_NUM_THREADS", n), ("CANDLE_NUM_THREADS", n)],
            );
            assert_eq!(
                r.status,
                Status::Passed,
                "{fixture} at {n} threads: {}",
                run.text()
            );
            assert_eq!(
                r.body.expect("measured").to_text(),
                plain,
                "{fixture} at {n} threads"
            );
        }
    }
}

/// gemm's packing buffers are measured apart: a step that multiplies matrices has
/// CPU-only memory, and a tensor exactly the size of a slab stays where it belongs.
#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn matmuls_have_cpu_only_memory_kept_apart() {
    for (fixture, test) in [("candle-mlp", "mlp_sgd"), ("candle-conv", "conv_stem")] {
        let (run, r) = run_one(fixture, test, &[]);
        let body = r.body.expect("measured");
        let cpu_only = body.cpu_only.expect("a CPU body has the figure");
        assert!(
            cpu_only > 0,
            "{fixture}: no CPU-only memory: {}",
            run.text()
        );
        assert_eq!(body.at_peak.total(), body.peak_bytes, "{fixture}");
    }
}

/// The CUDA prediction replays the device memory only: for `mlp_sgd` the predicted
/// allocated peak is within 2% of the device peak (the gated peak of the CPU run). The
/// difference is the pool's 256 B alignment of small host blocks (shapes, strides).
#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test candle_fixtures -- --ignored"]
fn the_cuda_prediction_is_the_device_peak_aligned() {
    let (_, r) = run_one("candle-mlp", "mlp_sgd", &[]);
    let body = r.body.expect("measured");
    let predicted = r
        .details
        .and_then(|d| d.predicted_pool)
        .expect("a CPU run predicts the pool");
    assert!(predicted.allocated_bytes >= body.peak_bytes);
    assert_close(
        "predicted allocated",
        predicted.allocated_bytes,
        body.peak_bytes,
        2.0,
    );
}
