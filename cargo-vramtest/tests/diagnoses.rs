//! Diagnoses a user can act on, end to end on copies of `fixtures/vec-model`: the
//! gradient check names its cause and fix when a snapshot is first written, in a
//! failure, and in `show --message-format json`; the default limits catch a small
//! model's optimizer switch.

mod common;

use common::{Fixture, assert_code};
use serde_json::Value;
use vramtest_model::HumanBytes;

/// The fixture's weights (`fixtures/vec-model/src/lib.rs`: `PARAMS` f32s).
const PARAMS: u64 = 4096;
/// Its batch: `BATCH` rows of `PARAMS` f32s.
const BATCH: u64 = 16;

/// The one JSON object `show ARGS --message-format json` printed.
fn show_json(f: &Fixture, args: &[&str]) -> Value {
    let mut all = vec!["show"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--message-format", "json"]);
    let ran = f.run(&all, &[]);
    assert_code(&ran, 0);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one object: {}", ran.text());
    serde_json::from_str(lines[0]).unwrap()
}

#[test]
fn the_gradient_check_names_a_gradient_of_no_parameter_with_its_fix() {
    let f = Fixture::vec_model("diagnoses-gradients");
    let input_gradient = BATCH * PARAMS * 4;
    let said = format!(
        "gradient check: gradients_of_non_parameters: {} of gradients match no parameter's size (gradient blocks of {} × 1); fix: remove the gradients of tensors that are no parameter",
        HumanBytes(input_gradient),
        HumanBytes(input_gradient)
    );
    // Without the input's gradient: one gradient per weight, nothing to say.
    let clean = f.run(&["linear_adam"], &[("VRAMTEST_UPDATE", "always")]);
    assert_code(&clean, 0);
    assert!(!clean.text().contains("gradient check"), "{}", clean.text());
    let v = show_json(&f, &["linear_adam"]);
    assert_eq!(v["checks"][0]["category"], "gradients", "{v}");
    assert_eq!(v["checks"][0]["cause"], Value::Null, "{v}");
    assert_eq!(
        v["category_peaks"]["parameters"],
        v["category_peaks"]["gradients"]
    );
    assert!(v["phases"].as_array().is_some_and(|p| p.len() >= 5), "{v}");

    // With it: a failure (gradients grew), which names the cause and its fix.
    let env = [("VEC_MODEL_INPUT_GRADIENT", "1")];
    let failed = f.run(&["linear_adam"], &env);
    assert_code(&failed, 1);
    assert!(failed.stdout.contains(&said), "{}", failed.text());

    // A first result says it too, and keeps it for `show`.
    std::fs::remove_dir_all(f.snapshots()).unwrap();
    let first = f.run(&["linear_adam"], &[env[0], ("VRAMTEST_UPDATE", "always")]);
    assert_code(&first, 0);
    assert!(first.stderr.contains(&said), "{}", first.text());
    let v = show_json(&f, &["linear_adam"]);
    let check = &v["checks"][0];
    assert_eq!(check["cause"], "gradients_of_non_parameters", "{v}");
    assert_eq!(check["causes"][0]["bytes"], input_gradient, "{v}");
    assert!(
        check["fix"]
            .as_str()
            .is_some_and(|s| s.contains("grads.remove(&tensor)")),
        "{v}"
    );
    // The figures: the gradients hold the weights' and the input's.
    let params = v["category_peaks"]["parameters"].as_u64().unwrap();
    assert_eq!(
        v["category_peaks"]["gradients"].as_u64().unwrap(),
        params + input_gradient,
        "{v}"
    );
    let text = f.run(&["show", "linear_adam"], &[]);
    assert_code(&text, 0);
    assert!(
        text.stdout
            .contains("\ngradient check\n  gradients_of_non_parameters: "),
        "{}",
        text.text()
    );
}

#[test]
fn a_small_model_s_optimizer_switch_fails_under_the_default_limits() {
    let f = Fixture::vec_model("diagnoses-optimizer");
    // Accepted with SGD with momentum: one buffer per weight.
    let before = f.run(
        &["linear_adam"],
        &[
            ("VEC_MODEL_OPTIMIZER", "momentum"),
            ("VRAMTEST_UPDATE", "always"),
        ],
    );
    assert_code(&before, 0);
    // Switched to Adam: two. The model is small: 16 KiB more, under the old floor of
    // 64 KiB, but +100% of the category.
    let after = f.run(&["linear_adam"], &[("VRAMTEST_UPDATE", "no")]);
    assert_code(&after, 1);
    let weights = PARAMS * 4;
    // Named under the phase that allocated it: Adam's moments are made in
    // `optimizer_init`.
    let line = format!(
        "optimizer_state: {} → {} (+{}, +100.0%), over the limit +1%; allocated more in optimizer_init (set-up)",
        HumanBytes(weights),
        HumanBytes(2 * weights),
        HumanBytes(weights)
    );
    assert!(after.stdout.contains(&line), "{}", after.text());
}
