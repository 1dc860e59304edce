//! `cargo vramtest show TEST --at .. --levers` and `--fit-on SIZE` end to end on
//! fixtures/vec-model's sweep over named axes (a model of plain `Vec`s whose figures
//! are written out below): the lever table as text and JSON, its projections against
//! the fixture's formulas, what fits a size or by how much it misses, and the errors
//! (exit 2, nothing written).

mod common;

use common::assert_code;
use common::vec_model::*;
use serde_json::Value;

const SEQ: u64 = 4096;
const LAYERS: u64 = 32;

fn at(batch: u64) -> String {
    format!("layers={LAYERS},seq={SEQ},batch={batch}")
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not a count of bytes: {v}"))
}

/// What the device must hold for a row: the reserved bytes where known, else the peak.
fn device(row: &Value) -> u64 {
    row["reserved_bytes"]
        .as_u64()
        .unwrap_or_else(|| u(&row["peak_bytes"]))
}

/// Every row of a table, measured then projected.
fn rows(table: &Value) -> Vec<&Value> {
    let measured = table["levers"].as_array().unwrap();
    let projected = table["projections"].as_array().unwrap();
    measured.iter().chain(projected).collect()
}

fn projections<'a>(table: &'a Value, lever: &str) -> Vec<&'a Value> {
    table["projections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["projection"]["lever"] == lever)
        .collect()
}

/// The table's rows: each saving is the baseline's peak less the row's, and each
/// `fits` says whether the device bytes and the allowance fit the size.
fn check_rows(table: &Value, allowance: u64) {
    let base = u(&table["levers"][0]["peak_bytes"]);
    for row in rows(table) {
        let peak = u(&row["peak_bytes"]);
        assert_eq!(
            row["saving_bytes"].as_i64().unwrap(),
            base as i64 - peak as i64,
            "{row}"
        );
        for (size, fits) in row["fits"].as_object().unwrap() {
            let memory = size.trim_end_matches("GiB").parse::<u64>().unwrap() << 30;
            assert_eq!(
                fits.as_bool(),
                Some(device(row) + allowance <= memory),
                "{size}"
            );
        }
    }
}

#[test]
fn levers_and_fit_on_project_from_the_sweep_and_refuse_bad_input() {
    let f = recorded("levers");
    let (l, s) = (LAYERS, SEQ);
    // The allowance and each batch's reserved bytes, by `show --at`.
    let plain = show_json(&f, &["--at", &at(8)]);
    let allowance = u(&plain["allowance_bytes"]);

    // The table at batch 8, with ZeRO on 8 ranks.
    let t = show_json(&f, &["--at", &at(8), "--levers", "--ranks", "8"]);
    let keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["at", "levers", "projections"]);
    assert_eq!(
        t["at"],
        serde_json::json!({"batch": 8, "layers": 32, "seq": 4096})
    );
    let measured = t["levers"].as_array().unwrap();
    assert_eq!(measured.len(), 1, "the baseline alone: {t}");
    let base = &measured[0];
    for field in [
        "variant",
        "category_bytes",
        "peak_bytes",
        "allocated_bytes",
        "reserved_bytes",
        "saving_bytes",
        "saving_percent",
        "category_saving_bytes",
        "category_saving_percent",
        "time_ratio",
        "fits",
    ] {
        assert!(base.get(field).is_some(), "no `{field}` in {base}");
    }
    assert_eq!(base["variant"], serde_json::json!({}));
    assert!(base.get("projection").is_none());
    assert_eq!(base["time_ratio"], 1.0);
    for (c, bytes) in expected(8, s, l, 1) {
        assert_eq!(base["category_bytes"][c], bytes, "{c}");
    }
    assert_eq!(u(&base["peak_bytes"]), forward_peak(8, s, l, 1));
    assert_eq!(base["reserved_bytes"], plain["reserved_bytes"]);
    check_rows(&t, allowance);

    // 8-bit moments: the optimizer state in quarters, the peak less the difference.
    let [eight] = projections(&t, "eight_bit_moments")[..] else {
        panic!("one 8-bit row: {t}")
    };
    let state = 2 * l * WEIGHT;
    assert_eq!(
        eight["category_bytes"]["optimizer_state"],
        state.div_ceil(4)
    );
    assert_eq!(
        u(&eight["peak_bytes"]),
        forward_peak(8, s, l, 1) - (state - state.div_ceil(4))
    );
    // ZeRO: each stage shards its categories among the 8 ranks.
    let zero = projections(&t, "zero");
    let stages: Vec<&str> = zero
        .iter()
        .map(|r| r["projection"]["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["zero1", "zero2", "zero3"]);
    let zero3 = zero[2];
    assert_eq!(zero3["projection"]["ranks"], 8);
    assert_eq!(
        zero3["category_bytes"]["parameters"],
        (l * WEIGHT).div_ceil(8)
    );
    assert_eq!(zero3["projection"]["gathered_bytes"], WEIGHT);
    // The whole batch of 8 fits every size: no accumulation.
    assert!(projections(&t, "accumulation").is_empty(), "{t}");

    // At batch 256 the scores (4 B × batch·seq²: 16 GiB) outgrow 16 GiB: accumulation.
    let big = 256;
    let t = show_json(&f, &["--at", &at(big), "--levers"]);
    check_rows(&t, allowance);
    let accumulation = projections(&t, "accumulation");
    assert!(!accumulation.is_empty(), "{t}");
    // What a micro-batch `b` needs: its reserved bytes (by `show --at`), the
    // accumulator of the gradients and the allowance.
    let need = |b: u64| {
        let v = show_json(&f, &["--at", &at(b)]);
        u(&v["reserved_bytes"]) + l * WEIGHT + allowance
    };
    for row in accumulation {
        let p = &row["projection"];
        let (steps, b, memory) = (u(&p["steps"]), u(&p["micro_batch"]), u(&p["memory_bytes"]));
        assert_eq!(u(&p["effective_batch"]), big);
        assert_eq!(steps * b, big);
        assert!(steps > 1);
        assert_eq!(u(&row["peak_bytes"]), forward_peak(b, s, l, 1) + l * WEIGHT);
        assert!(need(b) <= memory, "{row}");
        // The next larger divisor of B does not fit (B itself, whole, does not either).
        let larger = (b + 1..=big).find(|d| big % d == 0).unwrap();
        let whole = u(&show_json(&f, &["--at", &at(larger)])["reserved_bytes"]);
        let larger_need = if larger == big {
            whole + allowance
        } else {
            need(larger)
        };
        assert!(larger_need > memory, "{row}");
        assert!(
            p["formula"]
                .as_str()
                .unwrap()
                .contains(&format!("{steps} × {b}"))
        );
    }

    // The human table: the plain line, the projected rows, the time labelled CPU time.
    let ran = f.run(
        &["show", "transformer_like", "--at", &at(big), "--levers"],
        &[],
    );
    assert_code(&ran, 0);
    for needle in [
        "no categorical axes in this test's sweep: the table holds its measured baseline and the projections",
        "baseline ",
        "8-bit optimizer moments  projected",
        "CPU TIME",
        "projected rows (computed from the measured figures, not measured)",
    ] {
        assert!(ran.stdout.contains(needle), "{needle}: {}", ran.text());
    }
    for line in ran.stdout.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }

    // --fit-on a size that fits: the baseline first (time 1, no lever).
    let fit = show_json(&f, &["--at", &at(8), "--fit-on", "24GiB"]);
    assert_eq!(u(&fit["memory_bytes"]), 24 << 30);
    assert_eq!(u(&fit["allowance_bytes"]), allowance);
    assert_eq!(fit["closest"], Value::Null);
    let fitting = fit["fitting"].as_array().unwrap();
    assert_eq!(fitting[0]["variant"], serde_json::json!({}));
    assert!(fitting[0].get("projection").is_none());
    let table = show_json(&f, &["--at", &at(8), "--levers"]);
    let expected_fitting = rows(&table)
        .into_iter()
        .filter(|r| device(r) + allowance <= 24 << 30)
        .count();
    assert_eq!(fitting.len(), expected_fitting);

    // --fit-on a size nothing fits (less than the allowance): the closest and its miss.
    let memory: u64 = 256 << 20;
    let miss = show_json(&f, &["--at", &at(8), "--fit-on", "256MiB"]);
    assert_eq!(miss["fitting"], serde_json::json!([]));
    let best = rows(&table)
        .into_iter()
        .map(|r| device(r) + allowance)
        .min()
        .unwrap();
    assert_eq!(u(&miss["closest"]["missing_bytes"]), best - memory);
    assert_eq!(device(&miss["closest"]["row"]) + allowance, best);
    let ran = f.run(
        &[
            "show",
            "transformer_like",
            "--at",
            &at(8),
            "--fit-on",
            "256MiB",
        ],
        &[],
    );
    assert_code(&ran, 0);
    assert!(
        ran.stdout.contains("nothing fits 256.00 MiB: the closest"),
        "{}",
        ran.text()
    );

    // Bad input: exit 2, a message naming what is wrong, nothing written or printed.
    let name = "vram__linear_adam@cpu.snap";
    let committed = common::repo()
        .join("fixtures/vec-model/tests/snapshots")
        .join(name);
    std::fs::copy(committed, f.snapshots().join(name)).unwrap();
    let before = f.snapshot_files();
    let good = at(8);
    for (args, needle) in [
        (vec!["transformer_like", "--levers"], "--at"),
        (vec!["transformer_like", "--fit-on", "24GiB"], "--at"),
        (
            vec!["transformer_like", "--at", &good, "--fit-on", "24 gigs"],
            "--fit-on: invalid byte size `24 gigs`",
        ),
        (
            vec![
                "transformer_like",
                "--at",
                "layers=32,seq=4096,batch=8,heads=4",
                "--levers",
            ],
            "unknown axis `heads`",
        ),
        (
            vec![
                "transformer_like",
                "--at",
                "layers=32,seq=4k,batch=8",
                "--levers",
            ],
            "axis `seq`: `4k` is not a positive integer",
        ),
        (
            vec!["linear_adam", "--at", "batch=8", "--levers"],
            "holds no sweep",
        ),
        (
            vec!["linear_adam", "--at", "batch=8", "--fit-on", "24GiB"],
            "holds no sweep",
        ),
    ] {
        let mut all = vec!["show"];
        all.extend(args);
        let ran = f.run(&all, &[]);
        assert_code(&ran, 2);
        assert!(ran.stderr.contains(needle), "{needle}: {}", ran.text());
        assert_eq!(ran.stdout, "", "nothing printed: {}", ran.text());
    }
    assert_eq!(f.snapshot_files(), before, "nothing written");
}
