//! A batch sweep through the harness, on fixtures/vec-model's `axes` target
//! (`batch_like`, batch 1, 2 and 4): recorded as a sweep over the one axis `batch`,
//! and a snapshot in the older shape (a line per figure, as earlier versions wrote it)
//! passes unchanged on disk with one note, until a result is accepted.

mod common;

use common::{copy_fixture, run};
use serde_json::{Value, json};
use vramtest_model::axes::Point;
use vramtest_model::report::Status;
use vramtest_model::{Category, snapshot};

// fixtures/vec-model/tests/axes.rs at seq 8 and one layer, in bytes.
const HIDDEN: u64 = 16;
const F32: u64 = 4;
const SEQ: u64 = 8;

fn at(batch: u64) -> Point {
    [("batch".to_owned(), batch)].into()
}

/// The snapshot text with its `scaling` replaced by `scaling`, the rest as it was.
fn with_scaling(text: &str, scaling: Value) -> String {
    let header_end = text.match_indices("---\n").nth(1).unwrap().0 + "---\n".len();
    let mut body: Value = serde_json::from_str(&text[header_end..]).unwrap();
    body["scaling"] = scaling;
    format!(
        "{}{}\n",
        &text[..header_end],
        serde_json::to_string_pretty(&body).unwrap()
    )
}

#[test]
fn a_batch_sweep_is_one_axis_and_its_older_snapshot_passes_migrated() {
    let dir = copy_fixture("vec-model");
    let exe = common::build_test_target(&dir, "axes");
    let one = ["batch_like", "--exact", "--include-ignored"];
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(r.status("batch_like"), Status::New, "{}", r.text());
    let snap = dir.join("tests/snapshots/axes__batch_like@cpu.snap");
    let text = std::fs::read_to_string(&snap).unwrap();
    assert!(text.contains("\"scaling\": {\n    \"axes\""), "{text}");
    let sweep = snapshot::parse(&text).unwrap().body.scaling.unwrap();
    assert_eq!(sweep.axes["batch"], vec![1, 2, 4]);
    // Inputs and activations are batch × seq × HIDDEN f32: predicted at any batch.
    let e = sweep.estimate(&at(1000), 1).unwrap();
    assert_eq!(
        e.category_bytes[&Category::Inputs],
        1000 * SEQ * HIDDEN * F32
    );

    // What an earlier version wrote for the same measurements: a line per figure
    // through batch 1 and 2, which batch 4 lies on.
    let line = |bytes: &dyn Fn(u64) -> u64| {
        let per = bytes(2) as i64 - bytes(1) as i64;
        assert_eq!(bytes(4) as i64, bytes(1) as i64 + 3 * per, "a line");
        json!({"fixed_bytes": bytes(1) as i64 - per, "bytes_per_sample": per})
    };
    let figures = |b: u64| sweep.estimate(&at(b), 1).unwrap();
    let mut category_peaks = serde_json::Map::new();
    for c in Category::ALL {
        category_peaks.insert(c.as_str().into(), line(&|b| figures(b).category_bytes[&c]));
    }
    let older = with_scaling(
        &text,
        json!({
            "batch": [1, 2, 4],
            "peak": line(&|b| figures(b).peak_bytes),
            "category_peaks": category_peaks,
        }),
    );
    std::fs::write(&snap, &older).unwrap();

    // CI: it passes, says so once, and the file stays as it was.
    let r = run(&dir, &exe, &one, &[("CI", "true")]);
    assert_eq!(r.status("batch_like"), Status::Passed, "{}", r.text());
    let message = &r.report("batch_like").message;
    assert_eq!(message.matches("older scaling").count(), 1, "{message}");
    assert_eq!(std::fs::read_to_string(&snap).unwrap(), older);

    // Accepted, the snapshot is written in the new shape.
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(r.status("batch_like"), Status::Passed, "{}", r.text());
    assert!(r.report("batch_like").message.contains("older scaling"));
    let rewritten = std::fs::read_to_string(&snap).unwrap();
    assert!(
        rewritten.contains("\"scaling\": {\n    \"axes\""),
        "{rewritten}"
    );
    assert!(
        !snapshot::parse(&rewritten)
            .unwrap()
            .body
            .scaling
            .unwrap()
            .migrated
    );
}
