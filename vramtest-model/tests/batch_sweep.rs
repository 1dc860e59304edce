//! A batch sweep is a sweep over the one axis `batch`. The snapshots a batch sweep
//! wrote before (a line per figure: the committed fixtures', and earlier releases')
//! read migrated into that shape: every figure gives the bytes of its old line at every
//! batch, and a run that measures the same lines passes against them.

use serde_json::Value;
use vramtest_model::axes::{Grid, Point};
use vramtest_model::sweep::{GridRun, Sweep, compare_target};
use vramtest_model::{Category, CategoryBytes, Limit, snapshot};

/// The committed snapshots of the candle-mlp fixture's batch sweeps, in the older shape.
const COMMITTED: [&str; 2] = [
    include_str!("../../fixtures/candle-mlp/tests/snapshots/sweep__mlp_adamw_sweep@cpu.snap"),
    include_str!("../../fixtures/candle-mlp/tests/snapshots/sweep__mlp_sgd_sweep@cpu.snap"),
];

/// The old `scaling` as raw JSON, read apart from the snapshot reader.
fn raw_scaling(text: &str) -> Value {
    let body = &text[text.match_indices("---\n").nth(1).unwrap().0 + 4..];
    serde_json::from_str::<Value>(body).unwrap()["scaling"].clone()
}

/// `fixed_bytes + bytes_per_sample × batch` of a raw line.
fn line_at(line: &Value, batch: u64) -> u64 {
    let fixed = line["fixed_bytes"].as_i64().unwrap();
    let per = line["bytes_per_sample"].as_i64().unwrap();
    u64::try_from(fixed + per * batch as i64).unwrap()
}

fn at(batch: u64) -> Point {
    [("batch".to_owned(), batch)].into()
}

#[test]
fn committed_batch_scaling_reads_migrated_with_the_same_bytes() {
    for text in COMMITTED {
        let raw = raw_scaling(text);
        assert!(
            raw.get("axes").is_none(),
            "the committed file is the older shape"
        );
        let sweep = snapshot::parse(text).unwrap().body.scaling.unwrap();
        assert!(sweep.migrated);
        let batches: Vec<u64> = raw["batch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .collect();
        assert_eq!(sweep.axes["batch"], batches);
        for batch in batches.iter().copied().chain([1, 1000]) {
            let e = sweep.estimate(&at(batch), 1).unwrap();
            assert_eq!(e.peak_bytes, line_at(&raw["peak"], batch), "batch {batch}");
            for c in Category::ALL {
                let old = line_at(&raw["category_peaks"][c.as_str()], batch);
                assert_eq!(e.category_bytes[&c], old, "{c} at batch {batch}");
            }
            assert!(e.flagged.is_empty(), "{:?}", e.flagged);
        }
        // The writer writes the new shape only: the migrated sweep serializes as one.
        let written = serde_json::to_value(&sweep).unwrap();
        assert!(written.get("axes").is_some() && written.get("batch").is_none());
    }
}

/// What a run of the same step measures: each batch's figures on the old lines.
fn rerun(raw: &Value) -> Sweep {
    let batches: Vec<u64> = raw["batch"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    let grid = Grid::new([("batch", batches.clone())]).unwrap();
    let runs: Vec<GridRun> = batches
        .iter()
        .map(|&b| {
            let mut category_peaks = CategoryBytes::default();
            for c in Category::ALL {
                category_peaks[c] = line_at(&raw["category_peaks"][c.as_str()], b);
            }
            GridRun {
                point: at(b),
                peak_bytes: line_at(&raw["peak"], b),
                category_peaks,
                phase_peaks: Default::default(),
                phase_temporaries: Default::default(),
                phase_moments: Default::default(),
                peak_outside_phases: true,
                pool: None,
            }
        })
        .collect();
    Sweep::fit(&grid, &runs).unwrap()
}

#[test]
fn a_run_on_the_same_lines_passes_against_a_migrated_snapshot() {
    for text in COMMITTED {
        let raw = raw_scaling(text);
        let old = snapshot::parse(text).unwrap().body.scaling.unwrap();
        let new = rerun(&raw);
        let check = compare_target(Some(&old), &new, |_| Limit::DEFAULT, None);
        assert!(!check.fails(), "{check:?}");
        assert!(check.findings.is_empty(), "{check:?}");
        assert_eq!(check.at, at(128));
        // A step whose activations grow by 1 KiB a sample fails at the largest batch.
        let mut grown = raw.clone();
        let per = &mut grown["category_peaks"]["activations"]["bytes_per_sample"];
        *per = (per.as_i64().unwrap() + 1024).into();
        let peak = &mut grown["peak"]["bytes_per_sample"];
        *peak = (peak.as_i64().unwrap() + 1024).into();
        let check = compare_target(Some(&old), &rerun(&grown), |_| Limit::DEFAULT, None);
        let acts = check
            .findings
            .iter()
            .find(|f| f.figure == "activations")
            .unwrap();
        assert_eq!(acts.new - acts.old, 1024 * 128);
        assert!(acts.regressed && check.fails(), "{check:?}");
        assert_eq!(acts.why, "activations: +1.00 KiB × batch");
    }
}

#[test]
fn a_budget_fails_a_change_that_lowers_the_largest_batch_within_it() {
    let raw = raw_scaling(COMMITTED[1]);
    let old = snapshot::parse(COMMITTED[1]).unwrap().body.scaling.unwrap();
    // 16 B a sample more: within the limit at batch 128, but fewer batches in 64 MiB.
    let mut grown = raw.clone();
    let peak = &mut grown["peak"]["bytes_per_sample"];
    *peak = (peak.as_i64().unwrap() + 16).into();
    let budget = 64 << 20;
    let check = compare_target(Some(&old), &rerun(&grown), |_| Limit::DEFAULT, Some(budget));
    let w = check.within_budget.unwrap();
    // The largest batch by hand: (budget − fixed) / per sample, before and after.
    let fixed = raw["peak"]["fixed_bytes"].as_i64().unwrap();
    let per = raw["peak"]["bytes_per_sample"].as_i64().unwrap();
    let by_hand = |per: i64| u64::try_from((budget as i64 - fixed) / per).unwrap();
    assert_eq!(
        (w.old, w.new),
        (Some(by_hand(per)), Some(by_hand(per + 16)))
    );
    assert!(check.fails(), "{check:?}");
    assert!(
        check
            .lines()
            .iter()
            .any(|l| l.contains("largest batch within the budget of 64.00 MiB")),
        "{:?}",
        check.lines()
    );
    let same = compare_target(Some(&old), &rerun(&raw), |_| Limit::DEFAULT, Some(budget));
    assert!(!same.fails(), "{same:?}");
}
