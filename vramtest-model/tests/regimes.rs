//! A flagged fit names the level of an axis that behaves unlike the others: the grid
//! holds two regimes, found by refitting without that level.

use std::collections::BTreeMap;
use vramtest_model::axes::{Grid, Point};
use vramtest_model::regimes::regimes;
use vramtest_model::sweep::{GridRun, Sweep};
use vramtest_model::{Category, CategoryBytes};

/// Grouped-query attention over 2 kv heads: keys and values are copied once per query
/// head only when the heads exceed the kv heads, so heads = 2 holds no copies.
fn activations(heads: u64, seq: u64) -> u64 {
    let copies = if heads > 2 { 2 * 64 * heads * seq } else { 0 };
    10_000 + 256 * heads * seq + copies
}

fn run(heads: u64, seq: u64) -> GridRun {
    let act = activations(heads, seq);
    GridRun {
        point: Point::from([("heads".into(), heads), ("seq".into(), seq)]),
        peak_bytes: 50_000 + act,
        category_peaks: CategoryBytes::from([
            (Category::Parameters, 50_000),
            (Category::Activations, act),
        ]),
        phase_peaks: BTreeMap::new(),
        phase_temporaries: BTreeMap::new(),
        phase_moments: Default::default(),
        peak_outside_phases: true,
        pool: None,
    }
}

#[test]
fn the_level_of_another_regime_is_named() {
    let grid = Grid::new([("heads", vec![2, 4, 6, 8]), ("seq", vec![32, 64, 96])]).unwrap();
    let runs: Vec<GridRun> = grid
        .points()
        .iter()
        .map(|p| run(p["heads"], p["seq"]))
        .collect();
    let sweep = Sweep::fit(&grid, &runs).unwrap();
    assert!(
        sweep.figures["activations"].flagged(),
        "{:?}",
        sweep.figures["activations"]
    );
    let found = regimes(&sweep, &runs, |_, _| true).unwrap();
    let act = found
        .iter()
        .find(|r| r.figure == "activations")
        .unwrap_or_else(|| panic!("{found:?}"));
    assert_eq!((act.axis.as_str(), act.level), ("heads", 2));
    assert_eq!(act.others, vec![4, 6, 8]);
    // Without heads = 2, the activations are 10,000 + 384·heads·seq: exact.
    assert_eq!(act.loo_error_ppm, 0);
    assert!(
        act.to_string()
            .starts_with("`activations` misses at heads=2: heads=2 behaves unlike heads 4-8"),
        "{act}"
    );
    // Figures that fit are not named.
    assert!(found.iter().all(|r| r.figure != "parameters"));
}

#[test]
fn a_miss_no_level_explains_is_not_named() {
    // Noise over every point: no level alone explains it.
    let grid = Grid::new([("heads", vec![2, 4, 6, 8]), ("seq", vec![32, 64, 96])]).unwrap();
    let runs: Vec<GridRun> = grid
        .points()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut r = run(4, p["seq"]);
            r.point = p.clone();
            let wobble = if i % 2 == 0 { 30_000 } else { 0 };
            r.category_peaks[Category::Activations] = 10_000 + 100 * p["heads"] * p["seq"] + wobble;
            r
        })
        .collect();
    let sweep = Sweep::fit(&grid, &runs).unwrap();
    assert!(sweep.figures["activations"].flagged());
    let found = regimes(&sweep, &runs, |_, _| true).unwrap();
    assert!(found.iter().all(|r| r.figure != "activations"), "{found:?}");
}
