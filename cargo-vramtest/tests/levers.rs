//! `cargo vramtest show TEST --at .. --levers` and `--fit-on SIZE` end to end on
//! fixtures/vec-model's sweep over named axes (a model of plain `Vec`s whose figures
//! are written out below): the lever table as text and JSON, its projections against
//! the fixture's formulas, what fits a size or by how much it misses, and the errors
//! (exit 2, nothing written).

mod common;

use common::assert_code;
use common::vec_model::*;
use serde_json::Value;
use std::collections::BTreeMap;
use vramtest_model::axes::Point;
use vramtest_model::settings::Settings;
use vramtest_model::sweep::Sweep;

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

    // ZeRO-1 on 8 ranks: the sharded category's formula says so, and the checks
    // against the practitioners' formulas read the whole step, as without `--ranks`.
    let zero1 = show_json(&f, &["--at", &at(8), "--ranks", "8", "--shard", "zero1"]);
    let state = zero1["terms"]["optimizer_state"].as_str().unwrap();
    assert!(
        state.starts_with("⌈(") && state.ends_with(") ÷ 8⌉"),
        "{state}"
    );
    assert_eq!(
        zero1["terms"]["parameters"], plain["terms"]["parameters"],
        "not sharded by zero1"
    );
    assert_eq!(zero1["checks"], plain["checks"], "{zero1}");
    assert_eq!(
        u(&zero1["category_bytes"]["optimizer_state"]),
        (2 * LAYERS * WEIGHT).div_ceil(8)
    );

    // ZeRO-3 on one rank: every layer is whole already, nothing is gathered.
    let one = show_json(&f, &["--at", &at(8), "--ranks", "1", "--shard", "zero3"]);
    assert_eq!(one["projection"]["gathered_bytes"], Value::Null, "{one}");
    assert_eq!(one["peak_bytes"], plain["peak_bytes"], "{one}");
    let text = show_text(&f, &["--at", &at(8), "--ranks", "1", "--shard", "zero3"]);
    assert!(
        text.contains("projected per GPU for 1 rank, zero3"),
        "{text}"
    );

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
    let text = show_text(&f, &["--at", &at(big), "--levers"]);
    for needle in [
        "no categorical axes in this test's sweep: the table holds its measured baseline and the projections",
        "baseline ",
        "8-bit optimizer moments  projected",
        "CPU TIME",
        "projected rows (computed from the measured figures, not measured)",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    for line in text.lines() {
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
    // No micro-batch fits either: the smallest one, batch 1 with its accumulator,
    // competes too, and is the closest.
    let best = rows(&table)
        .into_iter()
        .map(|r| device(r) + allowance)
        .min()
        .unwrap()
        .min(need(1));
    assert_eq!(best, need(1));
    assert_eq!(u(&miss["closest"]["missing_bytes"]), best - memory);
    assert_eq!(device(&miss["closest"]["row"]) + allowance, best);
    assert_eq!(miss["closest"]["row"]["projection"]["micro_batch"], 1);
    assert_eq!(miss["closest"]["row"]["projection"]["steps"], 8);
    let text = show_text(&f, &["--at", &at(8), "--fit-on", "256MiB"]);
    assert!(
        text.contains("nothing fits 256.00 MiB: the closest"),
        "{text}"
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
            vec!["transformer_like", "--at", &good, "--fit-on", "24"],
            "--fit-on: `24` has no unit",
        ),
        (
            vec!["transformer_like", "--at", &good, "--fit-on", "0GiB"],
            "--fit-on: `0GiB` is zero bytes",
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

/// The numeric point `kept_levels`' target names.
const KEPT_AT: &str = "layers=32,seq=512,batch=8";

/// A copy of vec-model named `name` with `kept_levels`' sweep recorded (36 points:
/// 18 at each level of `kept`), and the sweep as its snapshot keeps it.
fn kept_levels(name: &str) -> (common::Fixture, Sweep) {
    let f = recorded_test(name, "kept_levels");
    let path = f.snapshots().join("axes__kept_levels@cpu.snap");
    let parsed = vramtest_model::snapshot::read(&path).unwrap().unwrap();
    let sweep = parsed.body.sweep().cloned().expect("a sweep");
    (f, sweep)
}

/// `show kept_levels ARGS` and the objects it printed, one a line.
fn show_kept(f: &common::Fixture, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["show", "kept_levels", "--message-format", "json"];
    all.extend_from_slice(args);
    let ran = f.run(&all, &[]);
    assert_code(&ran, 0);
    ran.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The keys of a JSON object, in order.
fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

/// The activations kept per layer at a level of `kept`.
fn kept_of(variant: &Value) -> u64 {
    match variant["kept"].as_str() {
        Some("one") => 1,
        Some("two") => 2,
        other => panic!("unknown level {other:?}"),
    }
}

fn variant_of(v: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(v["variant"].clone()).unwrap()
}

/// The figures `row` shows against the sweep's own prediction for its combination,
/// computed here from the snapshot: each category, the peak, allocated and reserved.
fn check_against_estimate(row: &Value, sweep: &Sweep, at: &Point, granule: u64) {
    let own = sweep
        .variant(&variant_of(row))
        .expect("a measured combination");
    let e = own.estimate(at, granule).unwrap();
    for (c, bytes) in &e.category_bytes {
        assert_eq!(row["category_bytes"][c.as_str()], *bytes, "{c}: {row}");
    }
    assert_eq!(u(&row["peak_bytes"]), e.peak_bytes, "{row}");
    assert_eq!(row["allocated_bytes"].as_u64(), e.allocated_bytes, "{row}");
    assert_eq!(row["reserved_bytes"].as_u64(), e.reserved_bytes, "{row}");
}

#[test]
fn each_level_is_a_measured_row_and_show_at_predicts_every_level() {
    let (f, sweep) = kept_levels("levers-levels");
    // Plain `show` names the levels, says its figures are the baseline's, and points
    // to `--levers`.
    let ran = f.run(&["show", "kept_levels"], &[]);
    assert_code(&ran, 0);
    for needle in [
        "with levels (kept = [\"one\", \"two\"]), each combination fitted on its own: `--at .. --levers` compares them",
        "(the baseline's)",
    ] {
        assert!(ran.stdout.contains(needle), "{needle}: {}", ran.text());
    }
    // An `--at` that fixes the baseline's level keeps the baseline alone, and says so.
    let ran = f.run(
        &[
            "show",
            "kept_levels",
            "--at",
            &format!("{KEPT_AT},kept=one"),
            "--levers",
        ],
        &[],
    );
    assert_code(&ran, 0);
    assert!(
        ran.stdout
            .contains("measured: the baseline kept=one alone, predicted from its own fit"),
        "{}",
        ran.text()
    );
    let (b, s, l) = (8, 512, 32);
    let at: Point = [("batch", b), ("layers", l), ("seq", s)]
        .map(|(k, v)| (k.to_owned(), v))
        .into();
    let granule = Settings::default().cuda_pool().granularity;
    // The snapshot keeps the level `two`'s CPU time over the baseline's.
    assert_eq!(sweep.variants.len(), 1);
    let two_ratio = sweep.variants[0]
        .cpu_time_ratio
        .get()
        .expect("the CPU time ratio is recorded");
    assert!(two_ratio > 0.0, "{two_ratio}");

    // --levers: one measured row per level, each the sweep's own prediction of it.
    let [t] = &show_kept(&f, &["--at", KEPT_AT, "--levers", "--ranks", "8"])[..] else {
        panic!("one object")
    };
    assert_eq!(keys(t), ["at", "levers", "projections"]);
    assert_eq!(
        t["at"],
        serde_json::json!({"batch": 8, "layers": 32, "seq": 512})
    );
    let measured = t["levers"].as_array().unwrap();
    let levels: Vec<&str> = measured
        .iter()
        .map(|r| r["variant"]["kept"].as_str().unwrap())
        .collect();
    assert_eq!(levels, ["one", "two"]);
    let base = u(&measured[0]["peak_bytes"]);
    let mut row_keys = vec![
        "allocated_bytes",
        "category_bytes",
        "category_saving_bytes",
        "category_saving_percent",
        "fits",
        "flagged",
        "impossible",
        "peak_bytes",
        "reserved_bytes",
        "saving_bytes",
        "saving_percent",
        "time_ratio",
        "variant",
    ];
    row_keys.sort();
    let allowance =
        u(&show_kept(&f, &["--at", &format!("{KEPT_AT},kept=one")])[0]["allowance_bytes"]);
    for row in measured {
        let mut k = keys(row);
        k.sort();
        assert_eq!(k, row_keys, "{row}");
        check_against_estimate(row, &sweep, &at, granule);
        // And against the fixture's own formulas.
        let kept = kept_of(&row["variant"]);
        for (c, bytes) in expected(b, s, l, kept) {
            assert_eq!(row["category_bytes"][c], bytes, "{c} at kept={kept}");
        }
        assert_eq!(u(&row["peak_bytes"]), forward_peak(b, s, l, kept));
        assert_eq!(
            row["saving_bytes"].as_i64().unwrap(),
            base as i64 - u(&row["peak_bytes"]) as i64
        );
    }
    // Keeping a second activation per layer costs its bytes: a negative saving.
    let activation = b * s * HIDDEN * F32;
    assert_eq!(measured[1]["saving_bytes"], -((l * activation) as i64));
    assert_eq!(measured[0]["time_ratio"], 1.0);
    assert_eq!(measured[1]["time_ratio"].as_f64(), Some(two_ratio));
    check_rows(t, allowance);
    // Each level's projections, keeping its time ratio.
    for row in measured {
        let of_level: Vec<&Value> = t["projections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["variant"] == row["variant"])
            .collect();
        let mut levers: Vec<&str> = of_level
            .iter()
            .map(|p| p["projection"]["lever"].as_str().unwrap())
            .collect();
        levers.dedup();
        assert_eq!(levers, ["eight_bit_moments", "zero"], "{row}");
        for p in of_level {
            assert_eq!(p["time_ratio"], row["time_ratio"]);
        }
    }

    // The table for a terminal: the levels, the baseline named, CPU time labelled.
    let ran = f.run(&["show", "kept_levels", "--at", KEPT_AT, "--levers"], &[]);
    assert_code(&ran, 0);
    for needle in [
        "measured: 2 combinations of levels, each predicted from its own fit, against the baseline",
        "kept=one (baseline)",
        "kept=two",
        "CPU TIME",
        &format!("{two_ratio:.2}×"),
    ] {
        assert!(ran.stdout.contains(needle), "{needle}: {}", ran.text());
    }
    assert!(
        !ran.stdout.contains("no categorical axes"),
        "{}",
        ran.text()
    );

    // `show --at` naming a level: that combination's object, as without levels.
    let [two] = &show_kept(&f, &["--at", &format!("{KEPT_AT},kept=two")])[..] else {
        panic!("one object")
    };
    assert_eq!(two["variant"], serde_json::json!({"kept": "two"}));
    assert_eq!(two["at"], t["at"]);
    check_against_estimate(two, &sweep, &at, granule);
    for key in [
        "category_bytes",
        "loo_error",
        "terms",
        "fits",
        "allowance_bytes",
    ] {
        assert!(two.get(key).is_some(), "{key}: {two}");
    }
    // Leaving the level out: every combination, each naming its own.
    let every = show_kept(&f, &["--at", KEPT_AT]);
    let named: Vec<&Value> = every.iter().map(|o| &o["variant"]).collect();
    assert_eq!(
        named,
        [
            &serde_json::json!({"kept": "one"}),
            &serde_json::json!({"kept": "two"})
        ]
    );
    for o in &every {
        check_against_estimate(o, &sweep, &at, granule);
    }
    assert_eq!(&every[1], two);
    let ran = f.run(&["show", "kept_levels", "--at", KEPT_AT], &[]);
    assert_code(&ran, 0);
    assert!(
        ran.stdout
            .contains(" with kept=one (the baseline), predicted from its own fit over")
    );
    assert!(
        ran.stdout
            .contains(" with kept=two, predicted from its own fit over")
    );
    // --solve batch: each level's own largest batch per memory size.
    let solved = show_kept(&f, &["--at", "layers=32,seq=512", "--solve", "batch"]);
    assert_eq!(solved.len(), 2);
    let mut point = at.clone();
    point.remove("batch");
    for o in &solved {
        let own = sweep.variant(&variant_of(o)).unwrap();
        for (size, largest) in o["fits"].as_object().unwrap() {
            let memory = size.trim_end_matches("GiB").parse::<u64>().unwrap() << 30;
            let mut filled = point.clone();
            filled.insert("batch".to_owned(), 1);
            let expected = own
                .solve(&filled, "batch", memory, allowance, granule)
                .unwrap();
            assert_eq!(largest.as_u64(), expected, "{size}: {o}");
        }
    }
    assert_ne!(solved[0]["fits"], solved[1]["fits"], "the levels differ");

    // --fit-on a size the baseline fits and the level `two` does not: the measured
    // `two` is left out, and the rows come cheapest first.
    let device_of = |r: &Value| device(r) + allowance;
    let memory = device_of(&measured[0]);
    assert!(device_of(&measured[1]) > memory);
    let [fit] = &show_kept(&f, &["--at", KEPT_AT, "--fit-on", &format!("{memory}B")])[..] else {
        panic!("one object")
    };
    let fitting = fit["fitting"].as_array().unwrap();
    for r in fitting {
        assert!(device_of(r) <= memory, "{r}");
    }
    // Every row of the table that fits is there (the answer may add accumulation
    // rows for this size).
    let all = show_kept(&f, &["--at", KEPT_AT, "--levers"]);
    for r in rows(&all[0]).into_iter().filter(|r| device_of(r) <= memory) {
        assert!(fitting.contains(r), "{r}");
    }
    assert!(
        fitting
            .iter()
            .any(|r| r["variant"]["kept"] == "one" && r.get("projection").is_none())
    );
    assert!(
        !fitting
            .iter()
            .any(|r| r["variant"]["kept"] == "two" && r.get("projection").is_none())
    );
    let ratios: Vec<f64> = fitting
        .iter()
        .map(|r| r["time_ratio"].as_f64().unwrap())
        .collect();
    assert!(ratios.windows(2).all(|w| w[0] <= w[1]), "{ratios:?}");
    // Nothing fits: the closest and by how much it misses.
    let [miss] = &show_kept(&f, &["--at", KEPT_AT, "--fit-on", "256MiB"])[..] else {
        panic!("one object")
    };
    // The smallest micro-batch of the baseline (batch 1 and an accumulator of the
    // gradients) misses by the least.
    let one = &show_kept(&f, &["--at", "layers=32,seq=512,batch=1,kept=one"])[0];
    let smallest = u(&one["reserved_bytes"]) + 32 * WEIGHT + allowance;
    let best = rows(&all[0])
        .into_iter()
        .map(device_of)
        .min()
        .unwrap()
        .min(smallest);
    assert_eq!(u(&miss["closest"]["missing_bytes"]), best - (256 << 20));
    assert_eq!(miss["closest"]["row"]["variant"]["kept"], "one");
    assert_eq!(miss["closest"]["row"]["projection"]["micro_batch"], 1);
    doubt_travels(&f);

    // Bad input: exit 2, the axis and its levels named, nothing printed or written.
    let before = f.snapshot_files();
    let unknown = format!("{KEPT_AT},kept=three");
    let twice = format!("{KEPT_AT},kept=one,kept=two");
    for (args, needle) in [
        (
            vec!["--at", &unknown],
            "axis `kept` has no level `three` (its levels: one, two)",
        ),
        (
            vec!["--at", &unknown, "--levers"],
            "axis `kept` has no level `three` (its levels: one, two)",
        ),
        (
            vec!["--at", &unknown, "--fit-on", "24GiB"],
            "axis `kept` has no level `three` (its levels: one, two)",
        ),
        (vec!["--at", &twice], "`kept`"),
        (
            vec!["--at", "layers=32,seq=512,batch=8,precision=bf16"],
            "unknown axis `precision` (the sweep's numeric axes: `batch`, `layers`, `seq`; its categorical axes: `kept`)",
        ),
        (
            vec!["--at", KEPT_AT, "--solve", "kept"],
            "--solve kept: `kept` is a categorical axis (levels: one, two)",
        ),
        (
            vec!["--at", KEPT_AT, "--fit-on", "lots"],
            "--fit-on: invalid byte size `lots`",
        ),
    ] {
        let mut all = vec!["show", "kept_levels"];
        all.extend(args);
        let ran = f.run(&all, &[]);
        assert_code(&ran, 2);
        assert!(ran.stderr.contains(needle), "{needle}: {}", ran.text());
        assert_eq!(ran.stdout, "", "nothing printed: {}", ran.text());
    }
    assert_eq!(f.snapshot_files(), before, "nothing written");
}

/// The flags `show --at` gives each combination at `at`: the independent list every
/// row resting on that combination's fit must carry.
fn flags_by_variant(f: &common::Fixture, at: &str) -> BTreeMap<BTreeMap<String, String>, Value> {
    show_kept(f, &["--at", at])
        .iter()
        .map(|o| (variant_of(o), o["flagged"].clone()))
        .collect()
}

fn is_flagged(row: &Value) -> bool {
    !row["flagged"]
        .as_array()
        .expect("a `flagged` list")
        .is_empty()
}

/// Doubt travels with the figure, on `kept_levels`' sweep (whose fits `show --at`
/// flags): every row of `--levers`, `--fit-on`, `--solve` and `measure`'s predicted
/// column carries the flags `show --at` gives for its combination, the text marks it
/// and explains the mark, and `--fit-on` ranks the trusted rows first and says when
/// its answer rests on a flagged fit.
fn doubt_travels(f: &common::Fixture) {
    let flags = flags_by_variant(f, KEPT_AT);
    let flagged_level = flags
        .iter()
        .find(|(_, v)| !v.as_array().unwrap().is_empty())
        .map(|(k, _)| k)
        .unwrap_or_else(|| panic!("a flagged combination: {flags:?}"));
    let [t] = &show_kept(f, &["--at", KEPT_AT, "--levers", "--ranks", "8"])[..] else {
        panic!("one object")
    };
    for row in rows(t) {
        assert_eq!(row["flagged"], flags[&variant_of(row)], "{row}");
        assert_eq!(row["impossible"], serde_json::json!([]), "{row}");
    }
    // The text: each flagged row marked, the others not, and the legend naming them.
    let ran = f.run(
        &[
            "show",
            "kept_levels",
            "--at",
            KEPT_AT,
            "--levers",
            "--ranks",
            "8",
        ],
        &[],
    );
    assert_code(&ran, 0);
    let table: Vec<&str> = ran
        .stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#  "))
        .skip(1)
        .take(rows(t).len())
        .collect();
    for (i, (line, row)) in table.iter().zip(rows(t)).enumerate() {
        let number = line.split_whitespace().next().unwrap();
        let mark = if is_flagged(row) { "*" } else { "" };
        assert_eq!(number, format!("{}{mark}", i + 1), "{}", ran.stdout);
    }
    let flat = ran.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let named = flags[flagged_level].as_array().unwrap()[0]
        .as_str()
        .unwrap();
    assert!(
        flat.contains("* rests on a flagged fit") && flat.contains(named),
        "{}",
        ran.stdout
    );
    // --fit-on a size every row fits: the trusted rows first, each row with its
    // combination's flags, and the answer says whether it rests on a flagged fit.
    let [fit] = &show_kept(f, &["--at", KEPT_AT, "--fit-on", "24GiB"])[..] else {
        panic!("one object")
    };
    let fitting = fit["fitting"].as_array().unwrap();
    assert_eq!(fitting.len(), rows(t).len() - projections(t, "zero").len());
    let order: Vec<bool> = fitting.iter().map(is_flagged).collect();
    assert!(
        order.windows(2).all(|w| w[0] <= w[1]),
        "trusted first: {order:?}"
    );
    for r in fitting {
        assert_eq!(r["flagged"], flags[&variant_of(r)], "{r}");
    }
    assert_eq!(fit["rests_on_flagged"], order[0], "{fit}");
    let ran = f.run(
        &["show", "kept_levels", "--at", KEPT_AT, "--fit-on", "24GiB"],
        &[],
    );
    assert_code(&ran, 0);
    assert_eq!(
        ran.stdout
            .contains("no trusted row fits 24.00 GiB: the answer rests on a flagged fit"),
        order[0],
        "{}",
        ran.stdout
    );
    // --solve: each memory size's row, the flags of its combination.
    for o in show_kept(f, &["--at", "layers=32,seq=512", "--solve", "batch"]) {
        let solved = o["solved"].as_array().expect("the solved rows");
        assert_eq!(solved.len(), o["fits"].as_object().unwrap().len());
        for row in solved {
            assert_eq!(row["flagged"], flags[&variant_of(&o)], "{row}");
            assert_eq!(o["fits"][row["memory"].as_str().unwrap()], row["largest"]);
        }
    }
    // measure: the predicted column carries the flags of the point's combination.
    let point = "batch=2,layers=3,seq=12";
    for level in ["one", "two"] {
        let at = format!("{point},kept={level}");
        let ran = f.run(
            &[
                "measure",
                "kept_levels",
                "--at",
                &at,
                "--message-format",
                "json",
            ],
            &[],
        );
        let v = one_object(&ran);
        let expected =
            &flags_by_variant(f, &at)[&BTreeMap::from([("kept".to_owned(), level.to_owned())])];
        assert_eq!(&v["predicted"]["flagged"], expected, "{v}");
    }
}

/// `show ARGS` on a copy of `fixture` holding its committed snapshot `snapshot`: read
/// from the snapshot, so the same on every machine.
fn show_committed(fixture: &str, snapshot: &str, args: &[&str]) -> String {
    let f = common::Fixture::copy(&common::repo().join("fixtures").join(fixture), fixture);
    f.add_committed_snapshot(fixture, snapshot);
    let ran = f.run(&[&["show"], args].concat(), &[]);
    assert_code(&ran, 0);
    ran.stdout
}

/// The lever tables of the candle and burn fixtures' committed sweeps with levels
/// (candle: bf16 and block checkpointing written by hand; burn: its own gradient
/// checkpointing), as the README and the guide show them.
#[test]
fn the_fixtures_lever_tables_are_the_ones_the_docs_show() {
    let candle = |args: &[&str]| {
        let at = ["levers", "--at"];
        show_committed(
            "candle-transformer",
            "vram__levers@cpu.snap",
            &[&at, args].concat(),
        )
    };
    let levers = candle(&["layers=12,seq=512", "--levers"]);
    insta::assert_snapshot!("candle_transformer_levers", levers);
    let fit_on = candle(&["layers=12,seq=512", "--fit-on", "1GiB"]);
    insta::assert_snapshot!("candle_transformer_fit_on", fit_on);
    let solve = candle(&["seq=512", "--solve", "layers"]);
    insta::assert_snapshot!("candle_transformer_solve_layers", solve);
    let burn = show_committed(
        "burn-transformer",
        "vram__checkpointing@cpu.snap",
        &["checkpointing", "--at", "layers=12,seq=512", "--levers"],
    );
    insta::assert_snapshot!("burn_transformer_levers", burn);
}

/// `optimizer_levels` (36 points: `optimizer = ["adam", "eight_bit_moments"]`): the
/// projected 8-bit row stands beside the level that measures the same lever, both
/// against the fixture's formulas. The projection keeps a quarter of every
/// optimizer-state byte; the step keeps its moments' bytes and their `Vec` headers
/// whole, so the projection promises three quarters of the headers too many.
#[test]
fn a_measured_level_stands_beside_the_projection_of_its_lever() {
    let f = recorded_test("levers-optimizer", "optimizer_levels");
    let (b, s, l) = (8, 512, 32);
    let args = ["--at", KEPT_AT, "--levers"];
    let mut json = vec!["show", "optimizer_levels", "--message-format", "json"];
    json.extend(args);
    let t = one_object(&f.run(&json, &[]));
    let measured = t["levers"].as_array().unwrap();
    assert_eq!(measured.len(), 2, "{t}");
    assert_eq!(measured[0]["variant"]["optimizer"], "adam");
    let eight = &measured[1];
    assert_eq!(eight["variant"]["optimizer"], "eight_bit_moments");
    // Adam's 2·l moments: f32s at the baseline, bytes at the level, each in its `Vec`.
    let full = 2 * l * WEIGHT;
    let bytes = 2 * l * (HIDDEN * HIDDEN + VEC_HEADER);
    assert_eq!(eight["category_bytes"]["optimizer_state"], bytes);
    let measured_peak = forward_peak(b, s, l, 1) - full + bytes;
    assert_eq!(u(&eight["peak_bytes"]), measured_peak);

    // One 8-bit projection, from `adam` (the level measures the lever already).
    let [p] = projections(&t, "eight_bit_moments")[..] else {
        panic!("one projected 8-bit row: {t}")
    };
    assert_eq!(p["variant"]["optimizer"], "adam");
    let projected_peak = forward_peak(b, s, l, 1) - full + full.div_ceil(4);
    assert_eq!(u(&p["peak_bytes"]), projected_peak);
    let m = &p["measured"];
    assert_eq!(
        m["variant"],
        serde_json::json!({"optimizer": "eight_bit_moments"})
    );
    assert_eq!(u(&m["peak_bytes"]), measured_peak);
    assert_eq!(m["category_bytes"]["optimizer_state"], bytes);
    let off = projected_peak as i64 - measured_peak as i64;
    assert_eq!(m["off_bytes"].as_i64(), Some(off));
    assert_eq!(off, -((2 * l * VEC_HEADER * 3 / 4) as i64));
    // Projected rows without a measured level carry no `measured`.
    for row in projections(&t, "accumulation") {
        assert!(row.get("measured").is_none(), "{row}");
    }

    let mut human = vec!["show", "optimizer_levels"];
    human.extend(args);
    let ran = f.run(&human, &[]);
    assert_code(&ran, 0);
    for needle in [
        "projected rows beside the levels that measure them",
        "(optimizer=eight_bit_moments, row 2): the projection is",
        " under",
    ] {
        assert!(ran.stdout.contains(needle), "{needle}: {}", ran.text());
    }
}

/// `precision_levels` (36 points: `precision = ["f32", "bf16"]`, a step that also keeps
/// a gradient of its input): the projections read the row they are projected from.
/// 8-bit moments keep one byte per moment whatever the level's precision (a quarter of
/// f32's moments, a half of bf16's), and gradient accumulation keeps an accumulator of
/// the weights' gradients, not of the input's, both against the fixture's formulas.
#[test]
fn projections_read_the_levels_precision_and_the_weights_gradients() {
    let f = recorded_test("levers-precision", "precision_levels");
    let (big, s, l) = (256, 512, 32);
    let point = |b: u64, level: &str| format!("layers={l},seq={s},batch={b},precision={level}");
    let show = |args: &[&str]| {
        let mut all = vec!["show", "precision_levels", "--message-format", "json"];
        all.extend_from_slice(args);
        let ran = f.run(&all, &[]);
        assert_code(&ran, 0);
        ran.stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<Value>>()
    };
    for (level, width) in [("f32", 4), ("bf16", 2)] {
        // The fixture's layout: per layer a `HIDDEN × HIDDEN` weight of `width`-byte
        // elements in its `Vec`, Adam's two moments alike.
        let weights = l * (HIDDEN * HIDDEN * width + VEC_HEADER);
        let moments = 2 * l * (HIDDEN * HIDDEN * width + VEC_HEADER);
        let input_gradient = big * s * HIDDEN * width;
        let [at] = &show(&["--at", &point(big, level)])[..] else {
            panic!("one object")
        };
        assert_eq!(u(&at["category_bytes"]["parameters"]), weights, "{level}");
        assert_eq!(u(&at["category_bytes"]["optimizer_state"]), moments);
        assert_eq!(
            u(&at["category_bytes"]["gradients"]),
            weights + input_gradient,
            "the input's gradient is a gradient too"
        );

        // 8-bit moments: a byte for each of the 2·l·HIDDEN² moments, plus the
        // headers' share the projection cannot tell apart.
        let [t] = &show(&["--at", &point(big, level), "--levers"])[..] else {
            panic!("one object")
        };
        let eight = projections(t, "eight_bit_moments")
            .into_iter()
            .find(|r| r["variant"]["precision"] == level)
            .unwrap_or_else(|| panic!("an 8-bit row of {level}: {t}"));
        let kept = u(&eight["category_bytes"]["optimizer_state"]);
        assert_eq!(kept, moments.div_ceil(width), "{level}");
        assert_eq!(
            kept - 2 * l * HIDDEN * HIDDEN,
            (2 * l * VEC_HEADER).div_ceil(width)
        );
        assert_eq!(
            u(&eight["peak_bytes"]),
            u(&at["peak_bytes"]) - (moments - kept)
        );

        // Accumulation on a size that half the batch fits with an accumulator of the
        // weights' gradients (and that the whole batch does not).
        let reserved = |b: u64| u(&show(&["--at", &point(b, level)])[0]["reserved_bytes"]);
        let allowance = u(&at["allowance_bytes"]);
        let memory = reserved(big / 2) + weights + allowance;
        assert!(reserved(big) + allowance > memory);
        let [fit] = &show(&[
            "--at",
            &point(big, level),
            "--fit-on",
            &format!("{memory}B"),
        ])[..] else {
            panic!("one object")
        };
        let half = fit["fitting"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| {
                r["variant"]["precision"] == level
                    && r["projection"]["lever"] == "accumulation"
                    && r["projection"]["memory_bytes"] == memory
            })
            .unwrap_or_else(|| panic!("an accumulation row of {level}: {fit}"));
        assert_eq!(half["projection"]["micro_batch"], big / 2, "{half}");
        assert_eq!(half["projection"]["steps"], 2);
        let at_half = &show(&["--at", &point(big / 2, level)])[0];
        assert_eq!(u(&half["peak_bytes"]), u(&at_half["peak_bytes"]) + weights);
        assert_eq!(
            u(&half["category_bytes"]["gradients"]),
            u(&at_half["category_bytes"]["gradients"]) + weights
        );
    }
}
