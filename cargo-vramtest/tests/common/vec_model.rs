//! `fixtures/vec-model`'s sweep over named axes (`tests/axes.rs`, `transformer_like`):
//! its figures computed from the fixture's code, and a copy with the sweep recorded.
//! The tests of `show --at`, `--levers` and `measure` compare the tool's answers with
//! these formulas.

use super::{Fixture, Ran, assert_code};
use serde_json::Value;

/// The fixture's hidden size.
pub const HIDDEN: u64 = 16;
/// Bytes of an `f32`.
pub const F32: u64 = 4;
/// Bytes of a `Vec` header.
pub const VEC_HEADER: u64 = 24;
/// One layer's weight: `HIDDEN × HIDDEN` floats and its `Vec`.
pub const WEIGHT: u64 = HIDDEN * HIDDEN * F32 + VEC_HEADER;

/// Each category at (batch, seq, layers) with `kept` activations per layer (1, or 2
/// with `VEC_MODEL_EXTRA_ACTIVATION`), from the fixture's code.
pub fn expected(b: u64, s: u64, l: u64, kept: u64) -> [(&'static str, u64); 8] {
    let activation = b * s * HIDDEN * F32;
    [
        ("parameters", l * WEIGHT),
        ("gradients", l * WEIGHT),
        ("optimizer_state", 2 * l * WEIGHT),
        // Room for two `Vec` headers per layer whatever is kept.
        ("activations", kept * l * activation + 2 * l * VEC_HEADER),
        ("inputs", activation),
        ("temporaries", b * s * s * F32),
        ("workspace", 0),
        ("untracked", 0),
    ]
}

/// The forward pass's peak: everything but the gradients, which are not alive yet.
pub fn forward_peak(b: u64, s: u64, l: u64, kept: u64) -> u64 {
    expected(b, s, l, kept)
        .iter()
        .filter(|(c, _)| *c != "gradients")
        .map(|(_, v)| v)
        .sum()
}

/// A copy of vec-model named `name` with `transformer_like`'s sweep recorded as its
/// committed snapshot (18 points: batch 1-2, seq 4-12, layers 1-3).
pub fn recorded(name: &str) -> Fixture {
    recorded_test(name, "transformer_like")
}

/// A copy of vec-model named `name` with the (ignored) sweep `test` of its `axes`
/// target recorded as its committed snapshot.
pub fn recorded_test(name: &str, test: &str) -> Fixture {
    let f = Fixture::vec_model(name);
    let out = f
        .cargo(&[
            "test",
            "--test",
            "axes",
            "--",
            "--include-ignored",
            "--exact",
            test,
        ])
        .env("VRAMTEST_UPDATE", "always")
        .output()
        .unwrap();
    assert_code(&Ran::from(out), 0);
    f
}

/// The one JSON object a run printed.
pub fn one_object(ran: &Ran) -> Value {
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one object: {}", ran.text());
    serde_json::from_str(lines[0]).unwrap()
}

/// `show transformer_like ARGS`, which must exit 0.
fn show(f: &Fixture, args: &[&str]) -> Ran {
    let mut all = vec!["show", "transformer_like"];
    all.extend_from_slice(args);
    let ran = f.run(&all, &[]);
    assert_code(&ran, 0);
    ran
}

/// `show transformer_like --message-format json ARGS`: its one object.
pub fn show_json(f: &Fixture, args: &[&str]) -> Value {
    let mut all = vec!["--message-format", "json"];
    all.extend_from_slice(args);
    one_object(&show(f, &all))
}

/// `show transformer_like ARGS` as a terminal shows it: its standard output.
pub fn show_text(f: &Fixture, args: &[&str]) -> String {
    show(f, args).stdout
}
