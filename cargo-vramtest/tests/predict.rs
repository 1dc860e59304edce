//! `cargo vramtest show TEST --at ..` end to end on fixtures/vec-model's sweep over
//! named axes (a model of plain `Vec`s whose figures are written out below): every
//! category at a configuration far outside the grid, `--solve`, the ZeRO projection,
//! the JSON object, and the errors (exit 2, nothing written).

mod common;

use common::assert_code;
use common::vec_model::*;

#[test]
fn show_at_predicts_solves_projects_and_refuses_bad_input() {
    let f = recorded("predict");
    // 4× the batch, 341× the sequence, 10× the layers of the grid's largest point.
    let (b, s, l) = (8, 4096, 32);
    let v = show_json(&f, &["--at", "layers=32,seq=4096,batch=8"]);
    assert_eq!(
        v["at"],
        serde_json::json!({"batch": 8, "layers": 32, "seq": 4096})
    );
    let categories = v["category_bytes"].as_object().unwrap();
    assert_eq!(categories.len(), 8);
    for (c, bytes) in expected(b, s, l, 1) {
        assert_eq!(categories[c], bytes, "{c}");
    }
    assert_eq!(v["peak_bytes"], forward_peak(b, s, l, 1));
    assert_eq!(v["peak_phase"], "forward");
    let allocated = v["allocated_bytes"].as_u64().unwrap();
    let reserved = v["reserved_bytes"].as_u64().unwrap();
    assert!(allocated >= forward_peak(b, s, l, 1) && reserved >= allocated);
    let fits = v["fits"].as_object().unwrap();
    assert_eq!(fits.len(), 6, "{fits:?}");
    let allowance = v["allowance_bytes"].as_u64().unwrap();
    for (size, holds) in fits {
        let memory = size.trim_end_matches("GiB").parse::<u64>().unwrap() << 30;
        assert_eq!(
            holds.as_bool(),
            Some(reserved + allowance <= memory),
            "{size}"
        );
    }
    assert_eq!(v["loo_error"]["activations"], 0.0);
    assert_eq!(
        v["terms"]["activations"],
        "64 B × batch·seq·layers + 48 B × layers"
    );
    assert_eq!(v["terms"]["temporaries"], "4 B × batch·seq²");
    // Every figure of the Vec model is a polynomial the grid checks: none interpolates.
    assert_eq!(v["interpolated"], serde_json::json!({}));

    // The largest batch per memory size: it fits there, one more does not.
    let solved = show_json(&f, &["--at", "layers=32,seq=4096", "--solve", "batch"]);
    let largest = solved["fits"]["24GiB"]
        .as_u64()
        .expect("some batch fits 24 GiB");
    assert!(forward_peak(largest, s, l, 1) + allowance <= 24 << 30);
    for (batch, fits) in [(largest, true), (largest + 1, false)] {
        let at = format!("layers=32,seq=4096,batch={batch}");
        let v = show_json(&f, &["--at", &at]);
        assert_eq!(v["fits"]["24GiB"], fits, "batch {batch}");
    }

    // ZeRO-3 on 8 ranks: the model states in eighths, one layer's weights gathered.
    let z = show_json(
        &f,
        &[
            "--at",
            "layers=32,seq=4096,batch=8",
            "--ranks",
            "8",
            "--shard",
            "zero3",
        ],
    );
    assert_eq!(z["projection"]["shard"], "zero3");
    assert_eq!(z["projection"]["gathered_bytes"], WEIGHT);
    assert_eq!(z["category_bytes"]["parameters"], (l * WEIGHT).div_ceil(8));
    assert_eq!(
        z["category_bytes"]["optimizer_state"],
        (2 * l * WEIGHT).div_ceil(8)
    );
    assert_eq!(
        z["category_bytes"]["activations"],
        categories["activations"]
    );
    let saved = (l * WEIGHT - (l * WEIGHT).div_ceil(8)) * 2
        + (2 * l * WEIGHT - (2 * l * WEIGHT).div_ceil(8));
    assert_eq!(
        z["peak_bytes"].as_u64().unwrap(),
        forward_peak(b, s, l, 1) - saved + WEIGHT
    );

    // The human table names every category and the verdict per size.
    let text = show_text(&f, &["--at", "layers=32,seq=4096,batch=8"]);
    // The book's "Predicting the full size" shows this output: it includes the golden.
    insta::assert_snapshot!("show_at_table", text);
    assert!(
        (text.lines())
            .any(|l| l.trim_start().starts_with("temporaries ") && l.contains(" 512.00 MiB ")),
        "{text}"
    );
    assert!(text.contains("H100, A100 80GB"), "{text}");

    // Bad input: exit 2, a message naming the axis, nothing written.
    let before = f.snapshot_files();
    for (args, needle) in [
        (
            vec!["--at", "layers=32,seq=4096"],
            "no value for axis `batch`",
        ),
        (
            vec!["--at", "layers=32,seq=4096,batch=8,heads=4"],
            "unknown axis `heads`",
        ),
        (
            vec!["--at", "layers=32,seq=4k,batch=8"],
            "axis `seq`: `4k` is not a positive integer",
        ),
        (
            vec!["--at", "layers=32,seq=0,batch=8"],
            "axis `seq`: the value must be at least 1",
        ),
        (
            vec!["--at", "seq=8", "--solve", "heads"],
            "unknown axis `heads`",
        ),
        (
            vec!["--at", "layers=1,seq=8,batch=1", "--shard", "zero3"],
            "--ranks",
        ),
    ] {
        let mut all = vec!["show", "transformer_like"];
        all.extend(args);
        let ran = f.run(&all, &[]);
        assert_code(&ran, 2);
        assert!(ran.stderr.contains(needle), "{needle}: {}", ran.text());
    }
    assert_eq!(f.snapshot_files(), before, "nothing written");
    // A test without named axes (its committed snapshot).
    f.add_committed_snapshot("vec-model", "vram__linear_adam@cpu.snap");
    let before = f.snapshot_files();
    let ran = f.run(&["show", "linear_adam", "--at", "batch=8"], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr.contains("holds no sweep, so --at"),
        "{}",
        ran.text()
    );
    assert_eq!(f.snapshot_files(), before);
}
