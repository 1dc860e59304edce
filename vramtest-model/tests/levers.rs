//! The lever table, its projections and `--fit-on`, against figures computed here by
//! hand from known per-category formulas.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use vramtest_model::axes::{Grid, Point};
use vramtest_model::levers::{
    LeverAxes, LeverError, LeverFigures, LeverProjection, LeverTable, LeverVariant,
    accumulator_bytes, moment_precision, parse_fit_on, project_8bit_moments, project_accumulation,
    project_zero, size_key,
};
use vramtest_model::sweep::{GridRun, PointError, Shard, Sweep};
use vramtest_model::{Category, CategoryBytes};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The pool's granule the hand model rounds reserved bytes to.
const GRANULE: u64 = 2 * MIB;
const ALLOWANCE: u64 = 544 * MIB;
const PARAMS: u64 = 300_000_000;

fn variant(precision: &str, checkpointing: &str) -> LeverVariant {
    [
        ("checkpointing".to_owned(), checkpointing.to_owned()),
        ("precision".to_owned(), precision.to_owned()),
    ]
    .into()
}

fn axes() -> LeverAxes {
    LeverAxes::new(
        [
            ("precision".to_owned(), vec!["f32".into(), "bf16".into()]),
            (
                "checkpointing".to_owned(),
                vec!["off".into(), "blocks".into()],
            ),
        ]
        .into(),
    )
    .unwrap()
}

/// The hand model: a step at batch `batch` (the target's is 8) in `precision`, with
/// or without block checkpointing.
fn categories(precision: &str, checkpointing: &str, batch: u64) -> CategoryBytes {
    let width = if precision == "bf16" { 2 } else { 4 };
    let activations = 2_500_000_000 * batch * width / 4;
    let mut c = CategoryBytes::default();
    c[Category::Parameters] = PARAMS * width;
    c[Category::Gradients] = PARAMS * width;
    // Adam's two moments, kept in the level's precision.
    c[Category::OptimizerState] = 2 * PARAMS * width;
    c[Category::Activations] = if checkpointing == "blocks" {
        activations * 3 / 10 + 100_000_000
    } else {
        activations
    };
    c[Category::Inputs] = batch * 4096 * 4;
    c[Category::Temporaries] = 500_000_000 * width / 4;
    c[Category::Workspace] = 64 * MIB;
    c
}

fn sum(c: &CategoryBytes) -> u64 {
    Category::ALL.iter().map(|&k| c[k]).sum()
}

fn figures(precision: &str, checkpointing: &str, batch: u64, ratio: Option<f64>) -> LeverFigures {
    let c = categories(precision, checkpointing, batch);
    let peak = sum(&c);
    let allocated = peak + MIB;
    LeverFigures {
        variant: variant(precision, checkpointing),
        category_bytes: c,
        peak_bytes: peak,
        allocated_bytes: Some(allocated),
        reserved_bytes: Some(allocated.div_ceil(GRANULE) * GRANULE),
        time_ratio: ratio,
        flagged: Vec::new(),
    }
}

fn ratio_of(precision: &str, checkpointing: &str) -> Option<f64> {
    match (precision, checkpointing) {
        ("f32", "off") => None,
        ("bf16", "off") => Some(0.8),
        ("f32", _) => Some(1.35),
        _ => Some(1.1),
    }
}

const COMBOS: [(&str, &str); 4] = [
    ("f32", "off"),
    ("f32", "blocks"),
    ("bf16", "off"),
    ("bf16", "blocks"),
];

fn target() -> Point {
    [("batch".to_owned(), 8), ("layers".to_owned(), 32)].into()
}

fn table(sizes: &[u64]) -> LeverTable {
    // Given in an order unlike the table's, to see it sorted.
    let measured = COMBOS
        .iter()
        .rev()
        .map(|&(p, c)| figures(p, c, 8, ratio_of(p, c)))
        .collect();
    LeverTable::build(target(), &axes(), measured, sizes, ALLOWANCE).unwrap()
}

/// What the device holds for the hand model: the reserved bytes plus the allowance.
fn device_need(c: &CategoryBytes) -> u64 {
    (sum(c) + MIB).div_ceil(GRANULE) * GRANULE + ALLOWANCE
}

#[test]
fn a_two_by_two_table_saves_what_the_formulas_say() {
    let sizes = [16 * GIB, 24 * GIB, 40 * GIB];
    let t = table(&sizes);
    let order: Vec<LeverVariant> = t.levers.iter().map(|r| r.variant.clone()).collect();
    // Axes by name (checkpointing, then precision), each level in declared order.
    assert_eq!(
        order,
        vec![
            variant("f32", "off"),
            variant("bf16", "off"),
            variant("f32", "blocks"),
            variant("bf16", "blocks"),
        ]
    );
    let base = categories("f32", "off", 8);
    for row in &t.levers {
        let (p, c) = (&row.variant["precision"], &row.variant["checkpointing"]);
        let mine = categories(p, c, 8);
        let saving = sum(&base) as i64 - sum(&mine) as i64;
        assert_eq!(row.saving_bytes, Some(saving), "{p} {c}");
        let pct = row.saving_percent.unwrap();
        assert!((pct - saving as f64 / sum(&base) as f64 * 100.0).abs() < 1e-9);
        for k in Category::ALL {
            let s = base[k] as i64 - mine[k] as i64;
            assert_eq!(row.category_saving_bytes[&k], s, "{p} {c} {k}");
            match base[k] {
                0 => assert_eq!(row.category_saving_percent[&k], None),
                b => {
                    let got = row.category_saving_percent[&k].unwrap();
                    assert!((got - s as f64 / b as f64 * 100.0).abs() < 1e-9, "{k}");
                }
            }
        }
        for (i, &(size, fits)) in row.fits.iter().enumerate() {
            assert_eq!(size, sizes[i]);
            assert_eq!(fits, device_need(&mine) <= size, "{p} {c} at {size}");
        }
        let expected_ratio = ratio_of(p, c).or(Some(1.0));
        assert_eq!(row.time_ratio, expected_ratio);
        assert_eq!(row.projection, None);
    }
    // bf16 halves the weights and their gradients: 600 MB each.
    let bf16 = &t.levers[1];
    assert_eq!(
        bf16.category_saving_bytes[&Category::Parameters],
        600_000_000
    );
    assert_eq!(
        bf16.category_saving_percent[&Category::Parameters],
        Some(50.0)
    );
    assert_eq!(t.baseline().saving_bytes, Some(0));
    // The sizes split the rows: not everything fits everywhere.
    let fits_16: Vec<bool> = t.levers.iter().map(|r| r.fits[0].1).collect();
    assert!(
        fits_16.contains(&true) && fits_16.contains(&false),
        "{fits_16:?}"
    );
}

#[test]
fn a_lever_that_costs_memory_shows_a_negative_saving() {
    let axes = LeverAxes::new(
        [(
            "checkpointing".into(),
            vec!["off".into(), "balanced".into()],
        )]
        .into(),
    )
    .unwrap();
    let mut off = figures("f32", "off", 8, None);
    off.variant = [("checkpointing".into(), "off".into())].into();
    let mut balanced = off.clone();
    balanced.variant = [("checkpointing".into(), "balanced".into())].into();
    // burn's checkpointing on a small encoder: activations +4.8%.
    let extra = off.category_bytes[Category::Activations] * 48 / 1000;
    balanced.category_bytes[Category::Activations] += extra;
    balanced.peak_bytes += extra;
    let t = LeverTable::build(Point::new(), &axes, vec![off, balanced], &[], 0).unwrap();
    let row = &t.levers[1];
    assert_eq!(row.saving_bytes, Some(-(extra as i64)));
    assert_eq!(
        row.category_saving_bytes[&Category::Activations],
        -(extra as i64)
    );
    let pct = row.category_saving_percent[&Category::Activations].unwrap();
    assert!((pct + 4.8).abs() < 1e-6, "{pct}");
    assert!(row.fits.is_empty());
}

#[test]
fn the_table_refuses_figures_it_cannot_compare() {
    let a = axes();
    let build = |measured: Vec<LeverFigures>| LeverTable::build(target(), &a, measured, &[], 0);
    // No baseline.
    let err = build(vec![figures("bf16", "off", 8, None)]).unwrap_err();
    assert_eq!(
        err,
        LeverError::NoBaseline {
            baseline: "checkpointing=off, precision=f32".into()
        }
    );
    // Twice the same combination.
    let err = build(vec![
        figures("f32", "off", 8, None),
        figures("f32", "off", 8, None),
    ])
    .unwrap_err();
    assert!(matches!(err, LeverError::RepeatedVariant { .. }), "{err}");
    // An unknown level.
    let err = build(vec![figures("f16", "off", 8, None)]).unwrap_err();
    assert_eq!(
        err,
        LeverError::UnknownLevel {
            axis: "precision".into(),
            level: "f16".into(),
            known: "f32, bf16".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "axis `precision` has no level `f16` (its levels: f32, bf16)"
    );
    // A combination leaving an axis out.
    let mut partial = figures("f32", "off", 8, None);
    partial.variant.remove("checkpointing");
    let err = build(vec![partial]).unwrap_err();
    assert!(
        matches!(&err, LeverError::MissingAxis { axis, .. } if axis == "checkpointing"),
        "{err}"
    );
}

#[test]
fn axes_refuse_empty_and_repeated_levels() {
    let err = LeverAxes::new([("precision".into(), vec![])].into()).unwrap_err();
    assert_eq!(
        err,
        LeverError::EmptyAxis {
            axis: "precision".into()
        }
    );
    let err = LeverAxes::new([("precision".into(), vec!["f32".into(), "f32".into()])].into())
        .unwrap_err();
    assert_eq!(
        err,
        LeverError::RepeatedLevel {
            axis: "precision".into(),
            level: "f32".into()
        }
    );
}

#[test]
fn at_splits_into_a_numeric_point_and_fixed_levels() {
    let a = axes();
    let (point, fixed) = a
        .parse_at("layers=32, seq=4096,batch=8,precision=bf16")
        .unwrap();
    assert_eq!(
        point,
        Point::from([
            ("batch".into(), 8),
            ("layers".into(), 32),
            ("seq".into(), 4096)
        ])
    );
    assert_eq!(
        fixed,
        LeverVariant::from([("precision".into(), "bf16".into())])
    );
    // The free axis gives every combination with bf16.
    let combos = a.matching(&fixed).unwrap();
    assert_eq!(
        combos,
        vec![variant("bf16", "off"), variant("bf16", "blocks")]
    );
    assert_eq!(a.combinations().len(), 4);
    assert_eq!(a.baseline(), variant("f32", "off"));
    assert_eq!(a.lever_count(&variant("bf16", "blocks")), 2);

    let err = a.parse_at("layers=32,precision=fp8").unwrap_err();
    assert_eq!(
        err,
        LeverError::UnknownLevel {
            axis: "precision".into(),
            level: "fp8".into(),
            known: "f32, bf16".into()
        }
    );
    let err = a
        .parse_at("layers=32,precision=bf16,precision=f32")
        .unwrap_err();
    assert_eq!(
        err,
        LeverError::Point(PointError::Twice("precision".into()))
    );
    let err = a.parse_at("layers=thirty").unwrap_err();
    assert!(
        matches!(err, LeverError::Point(PointError::NotInteger { .. })),
        "{err}"
    );
    let err = a
        .matching(&[("dtype".into(), "bf16".into())].into())
        .unwrap_err();
    assert!(matches!(err, LeverError::UnknownAxis { .. }), "{err}");
}

#[test]
fn solve_refuses_a_categorical_axis() {
    let a = axes();
    assert_eq!(a.check_solve("batch"), Ok(()));
    let err = a.check_solve("precision").unwrap_err();
    assert_eq!(
        err,
        LeverError::CategoricalSolve {
            axis: "precision".into(),
            levels: "f32, bf16".into()
        }
    );
    assert!(
        err.to_string()
            .starts_with("--solve precision: `precision` is a categorical axis")
    );
}

/// The sizes a message suggests: each `quoted` one inside its last parenthesis.
fn suggestions(message: &str) -> Vec<String> {
    let open = message.rfind('(').expect("a parenthesis with the hint");
    message[open..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn what_fit_on_suggests_is_what_fit_on_takes() {
    for bad in ["24 gigs", "lots", "GiB", "24", "1.5.2GiB"] {
        let err = parse_fit_on(bad).unwrap_err().to_string();
        let offered = suggestions(&err);
        assert!(offered.len() >= 3, "{bad}: {err}");
        for size in offered {
            assert!(
                parse_fit_on(&size).is_ok(),
                "{bad}: the hint offers `{size}`, which --fit-on refuses: {err}"
            );
        }
    }
}

#[test]
fn fit_on_parses_sizes_and_names_a_malformed_one() {
    assert_eq!(parse_fit_on("24GiB"), Ok(24 * GIB));
    assert_eq!(parse_fit_on("80 GB"), Ok(80_000_000_000));
    let err = parse_fit_on("24 gigs").unwrap_err();
    assert!(
        matches!(&err, LeverError::Size(e) if e.input == "24 gigs"),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("--fit-on: invalid byte size `24 gigs`"),
        "{err}"
    );
    for bytes in [16 * GIB, 512 * MIB] {
        assert_eq!(parse_fit_on(&size_key(bytes)), Ok(bytes));
    }
    assert_eq!(parse_fit_on("1000B"), Ok(1000));
    // A bare number is more likely gigabytes than bytes: its unit must be written.
    let err = parse_fit_on("24").unwrap_err();
    assert_eq!(
        err,
        LeverError::SizeUnit {
            size: "24".to_owned()
        }
    );
    assert!(err.to_string().contains("`24GiB`"), "{err}");
    assert!(matches!(
        parse_fit_on("0GiB"),
        Err(LeverError::SizeZero { .. })
    ));
}

/// Brute force: every batch from `B` down, kept when it divides `B` and fits.
fn brute_accumulation(big_b: u64, memory: u64) -> Option<(u64, u64, u64)> {
    (1..=big_b).rev().find_map(|b| {
        if !big_b.is_multiple_of(b) {
            return None;
        }
        let c = categories("f32", "off", b);
        let k = big_b / b;
        let extra = if k > 1 { c[Category::Gradients] } else { 0 };
        let need = device_need(&c) + extra;
        (need <= memory).then_some((k, b, sum(&c) + extra))
    })
}

#[test]
fn accumulation_finds_the_largest_micro_batch_by_brute_force() {
    let mut seen_split = false;
    for big_b in [1, 2, 6, 8, 12, 13, 32, 48] {
        for memory in [8 * GIB, 12 * GIB, 16 * GIB, 24 * GIB, 48 * GIB, 200 * GIB] {
            let got = project_accumulation(big_b, memory, ALLOWANCE, |b| {
                Ok::<_, String>(figures("f32", "off", b, None))
            })
            .unwrap();
            let expected = brute_accumulation(big_b, memory);
            match (got, expected) {
                (None, None) => {}
                (Some(p), Some((k, b, peak))) => {
                    let LeverProjection::Accumulation {
                        effective_batch,
                        steps,
                        micro_batch,
                        memory_bytes,
                    } = p.lever.lever
                    else {
                        panic!("{:?}", p.lever)
                    };
                    assert_eq!((effective_batch, steps, micro_batch), (big_b, k, b));
                    assert_eq!(memory_bytes, memory);
                    assert_eq!(p.figures.peak_bytes, peak, "B={big_b} at {memory}");
                    assert!(p.lever.formula.contains(&format!("{k} × {b}")) || k == 1);
                    seen_split |= k > 1;
                }
                (got, expected) => panic!("B={big_b} at {memory}: {got:?} vs {expected:?}"),
            }
        }
    }
    assert!(seen_split, "no case needed accumulation");
    // Nothing fits: every divisor of B is tried, once each, largest first.
    for big_b in [1, 16, 36, 60] {
        let mut tried = Vec::new();
        let none = project_accumulation(big_b, GIB, ALLOWANCE, |b| {
            tried.push(b);
            Ok::<_, String>(figures("f32", "off", b, None))
        })
        .unwrap();
        assert_eq!(none, None);
        let divisors: Vec<u64> = (1..=big_b)
            .rev()
            .filter(|b| big_b.is_multiple_of(*b))
            .collect();
        assert_eq!(tried, divisors);
    }
    // The caller's error comes back.
    let err =
        project_accumulation(4, GIB, 0, |_| Err::<LeverFigures, _>("no batch axis")).unwrap_err();
    assert_eq!(err, "no batch axis");
}

fn no_layers_sweep() -> Sweep {
    Sweep {
        axes: [("batch".to_owned(), vec![4, 8])].into(),
        figures: BTreeMap::new(),
        target: None,
        levels: Default::default(),
        variants: Vec::new(),
        axial: Vec::new(),
        fitted_without: Default::default(),
        migrated: false,
    }
}

#[test]
fn zero_rows_shard_by_the_formula() {
    let f = figures("f32", "off", 8, Some(1.0));
    let at: Point = [("batch".to_owned(), 8)].into();
    for ranks in [1, 3, 8] {
        for (shard, sharded) in [
            (Shard::Zero1, vec![Category::OptimizerState]),
            (
                Shard::Zero2,
                vec![Category::OptimizerState, Category::Gradients],
            ),
            (
                Shard::Zero3,
                vec![
                    Category::OptimizerState,
                    Category::Gradients,
                    Category::Parameters,
                ],
            ),
        ] {
            let p = project_zero(&no_layers_sweep(), &at, &f, ranks, shard).unwrap();
            let mut saved = 0;
            for c in Category::ALL {
                let whole = f.category_bytes[c];
                let expected = if sharded.contains(&c) {
                    whole.div_ceil(ranks)
                } else {
                    whole
                };
                saved += whole - expected;
                assert_eq!(p.figures.category_bytes[c], expected, "{shard} {ranks} {c}");
            }
            assert_eq!(p.figures.peak_bytes, f.peak_bytes - saved);
            assert_eq!(
                p.figures.allocated_bytes,
                Some(f.allocated_bytes.unwrap() - saved)
            );
            assert_eq!(
                p.figures.reserved_bytes,
                Some(f.reserved_bytes.unwrap() - saved)
            );
            assert_eq!(
                p.lever.lever,
                LeverProjection::Zero {
                    stage: shard.to_string(),
                    ranks,
                    gathered_bytes: None
                }
            );
            assert!(
                p.lever.formula.contains(&format!("⌈÷ {ranks}⌉")),
                "{}",
                p.lever.formula
            );
        }
    }
}

/// A sweep over `layers` whose parameters are `per_layer` bytes a layer.
fn layers_sweep(per_layer: u64) -> Sweep {
    let values = vec![1, 2, 3, 4];
    let grid = Grid::from_map(&[("layers".to_owned(), values.clone())].into()).unwrap();
    let runs: Vec<GridRun> = values
        .iter()
        .map(|&l| {
            let mut c = CategoryBytes::default();
            c[Category::Parameters] = per_layer * l;
            c[Category::Activations] = 1000 * l;
            GridRun {
                point: [("layers".to_owned(), l)].into(),
                peak_bytes: sum(&c),
                category_peaks: c,
                phase_peaks: BTreeMap::new(),
                phase_temporaries: BTreeMap::new(),
                phase_moments: Default::default(),
                peak_outside_phases: true,
                pool: None,
            }
        })
        .collect();
    Sweep::fit(&grid, &runs).unwrap()
}

#[test]
fn zero3_gathers_one_layers_parameters() {
    let per_layer = 7 * MIB + 3;
    let sweep = layers_sweep(per_layer);
    let at: Point = [("layers".to_owned(), 32)].into();
    let mut f = figures("f32", "off", 8, None);
    f.category_bytes = CategoryBytes::default();
    f.category_bytes[Category::Parameters] = per_layer * 32;
    f.category_bytes[Category::Activations] = 32_000;
    f.peak_bytes = sum(&f.category_bytes);
    f.allocated_bytes = None;
    f.reserved_bytes = None;
    let ranks = 4;
    let p = project_zero(&sweep, &at, &f, ranks, Shard::Zero3).unwrap();
    let share = (per_layer * 32).div_ceil(ranks);
    assert_eq!(p.figures.category_bytes[Category::Parameters], share);
    assert_eq!(p.figures.peak_bytes, share + 32_000 + per_layer);
    assert!(matches!(
        p.lever.lever,
        LeverProjection::Zero { gathered_bytes: Some(g), .. } if g == per_layer
    ));
    assert!(p.lever.formula.contains("one layer's parameters gathered"));
    // On one rank every layer is whole already: nothing is gathered, nothing changes.
    let one = project_zero(&sweep, &at, &f, 1, Shard::Zero3).unwrap();
    assert_eq!(one.figures.peak_bytes, f.peak_bytes);
    assert_eq!(one.figures.category_bytes, f.category_bytes);
    assert!(matches!(
        one.lever.lever,
        LeverProjection::Zero {
            gathered_bytes: None,
            ..
        }
    ));
}

#[test]
fn eight_bit_moments_keep_a_byte_per_moment_of_the_levels_precision() {
    // f32 moments: a quarter; bf16 moments (the hand model keeps them in the level's
    // precision): a half, not a quarter.
    for (precision, width) in [("f32", 4), ("bf16", 2)] {
        let mut f = figures(precision, "blocks", 8, Some(1.1));
        f.category_bytes[Category::OptimizerState] += 3; // not a multiple of the width
        f.peak_bytes += 3;
        let p = project_8bit_moments(&f);
        let state = f.category_bytes[Category::OptimizerState];
        // One byte per moment: the moments' count, from the hand model's formula.
        let moments = 2 * PARAMS;
        assert_eq!(state - 3, moments * width, "{precision}");
        let kept = state.div_ceil(width);
        assert_eq!(kept, moments + 3u64.div_ceil(width), "{precision}");
        assert_eq!(p.figures.category_bytes[Category::OptimizerState], kept);
        assert_eq!(p.figures.peak_bytes, f.peak_bytes - (state - kept));
        assert_eq!(
            p.figures.reserved_bytes,
            Some(f.reserved_bytes.unwrap() - (state - kept))
        );
        assert_eq!(
            p.figures.category_bytes[Category::Activations],
            f.category_bytes[Category::Activations]
        );
        assert_eq!(p.figures.time_ratio, Some(1.1));
        assert_eq!(p.lever.lever, LeverProjection::EightBitMoments);
        let formula = &p.lever.formula;
        assert!(
            formula.contains(&format!("optimizer_state × 1/{width}")),
            "{formula}"
        );
        assert!(
            formula.contains(&format!(
                "{precision} moments (from precision={precision}) stored in 8 bits"
            )),
            "{formula}"
        );
    }
    // No level names a precision: f32 moments, assumed and said.
    let mut f = figures("f32", "off", 8, None);
    f.variant = [("checkpointing".to_owned(), "off".to_owned())].into();
    let p = project_8bit_moments(&f);
    assert_eq!(
        p.figures.category_bytes[Category::OptimizerState],
        2 * PARAMS
    );
    assert!(
        p.lever
            .formula
            .contains("f32 moments (no level names a precision)"),
        "{}",
        p.lever.formula
    );
    // A dtype named by another axis, in any case.
    let v: LeverVariant = [("dtype".to_owned(), "FP16".to_owned())].into();
    assert_eq!(
        moment_precision(&v),
        Some(("dtype".to_owned(), "FP16".to_owned(), 2))
    );
    let v: LeverVariant = [("precision".to_owned(), "mixed".to_owned())].into();
    assert_eq!(moment_precision(&v), None);
    // `half` is a precision on an axis for one, and no precision on another.
    let v: LeverVariant = [("precision".to_owned(), "half".to_owned())].into();
    assert_eq!(moment_precision(&v).map(|p| p.2), Some(2));
    let v: LeverVariant = [("kept".to_owned(), "half".to_owned())].into();
    assert_eq!(moment_precision(&v), None);
}

#[test]
fn the_accumulator_holds_the_weights_gradients_not_every_gradient_byte() {
    // A framework that also keeps gradients of its inputs and masks (candle's
    // GradStore): 1 GB of gradients that are no weight's, growing with the batch.
    let other = |b: u64| 125_000_000 * b;
    let with_other = |b: u64| {
        let mut f = figures("f32", "off", b, None);
        f.category_bytes[Category::Gradients] += other(b);
        f.peak_bytes += other(b);
        f.allocated_bytes = f.allocated_bytes.map(|x| x + other(b));
        f.reserved_bytes = Some((f.peak_bytes + MIB).div_ceil(GRANULE) * GRANULE);
        f
    };
    let weights = PARAMS * 4;
    let p = project_accumulation(32, 24 * GIB, ALLOWANCE, |b| Ok::<_, String>(with_other(b)))
        .unwrap()
        .expect("a micro-batch fits 24 GiB");
    let LeverProjection::Accumulation { micro_batch: b, .. } = p.lever.lever else {
        panic!("{:?}", p.lever)
    };
    let own = with_other(b);
    // The accumulator: the parameters' bytes, not the gradients' (which hold more).
    assert!(own.category_bytes[Category::Gradients] > weights);
    assert_eq!(accumulator_bytes(&own.category_bytes), weights);
    assert_eq!(p.figures.peak_bytes, own.peak_bytes + weights);
    assert_eq!(
        p.figures.category_bytes[Category::Gradients],
        own.category_bytes[Category::Gradients] + weights
    );
    assert!(p.lever.formula.contains("min(gradients(b), parameters(b))"));
    // Fewer gradient bytes than parameters (a frozen part): all of them.
    let mut frozen = CategoryBytes::default();
    frozen[Category::Parameters] = 10;
    frozen[Category::Gradients] = 4;
    assert_eq!(accumulator_bytes(&frozen), 4);
    // No parameters measured: every gradient byte, as before.
    frozen[Category::Parameters] = 0;
    assert_eq!(accumulator_bytes(&frozen), 4);
}

#[test]
fn every_row_carries_its_flags_and_an_impossible_row_shows_no_saving() {
    let axes = axes();
    let mut measured: Vec<LeverFigures> = COMBOS
        .iter()
        .map(|&(p, c)| figures(p, c, 8, ratio_of(p, c)))
        .collect();
    // bf16 without checkpointing: its activations' fit is flagged; bf16 with
    // checkpointing: activations predicted above its own peak (the peak's fit broke).
    measured[2].flagged = vec!["activations".into(), "phase backward".into()];
    let broken = &mut measured[3];
    broken.flagged = vec!["activations".into()];
    broken.peak_bytes = broken.category_bytes[Category::Activations] - 1;
    broken.allocated_bytes = Some(broken.peak_bytes);
    broken.reserved_bytes = Some(broken.peak_bytes);
    let mut t =
        LeverTable::build(target(), &axes, measured.clone(), &[16 * GIB], ALLOWANCE).unwrap();
    for f in &measured {
        t.add_projection(project_8bit_moments(f));
    }
    for row in t.levers.iter().chain(&t.projections) {
        let own = measured.iter().find(|f| f.variant == row.variant).unwrap();
        assert_eq!(row.flagged, own.flagged, "{:?}", row.variant);
        let over: Vec<Category> = Category::ALL
            .into_iter()
            .filter(|&c| row.category_bytes[c] > row.peak_bytes)
            .collect();
        assert_eq!(row.impossible, over, "{:?}", row.variant);
        if over.is_empty() {
            let base = t.baseline().peak_bytes as i64;
            assert_eq!(row.saving_bytes, Some(base - row.peak_bytes as i64));
        } else {
            assert_eq!(
                row.saving_bytes, None,
                "no saving read from an impossible row"
            );
            assert_eq!(row.saving_percent, None);
        }
    }
    let broken = t
        .levers
        .iter()
        .find(|r| r.variant == variant("bf16", "blocks"))
        .unwrap();
    assert_eq!(broken.impossible, [Category::Activations]);
    let v = serde_json::to_value(broken).unwrap();
    assert_eq!(v["flagged"], serde_json::json!(["activations"]));
    assert_eq!(v["impossible"], serde_json::json!(["activations"]));
    assert_eq!(v["saving_bytes"], Value::Null);

    // --fit-on: the trusted rows first, then the flagged, then the impossible.
    let answer = t.fit_on(80 * GIB);
    let ranks: Vec<u8> = answer.fitting.iter().map(|r| r.doubt().rank()).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
    assert_eq!(ranks.first(), Some(&0));
    assert_eq!(ranks.last(), Some(&2));
    assert!(!answer.rests_on_flagged);
    // A size only the impossible rows fit (the row and its 8-bit projection): the
    // answer rests on them, and says so.
    let all: Vec<&vramtest_model::levers::LeverRow> =
        t.levers.iter().chain(&t.projections).collect();
    let need = |r: &&vramtest_model::levers::LeverRow| r.device_bytes + ALLOWANCE;
    let memory = all
        .iter()
        .filter(|r| !r.impossible.is_empty())
        .map(need)
        .max()
        .unwrap();
    let answer = t.fit_on(memory);
    assert!(!answer.fitting.is_empty());
    assert!(answer.fitting.iter().all(|r| !r.impossible.is_empty()));
    assert!(answer.rests_on_flagged);
    let v = serde_json::to_value(&answer).unwrap();
    assert_eq!(v["rests_on_flagged"], true);
    // Nothing fits: the closest possible row, not the nearer impossible one.
    let memory = all.iter().map(need).min().unwrap() - 1;
    let answer = t.fit_on(memory);
    let closest = answer.closest.unwrap();
    assert!(closest.row.impossible.is_empty());
    let best = all
        .iter()
        .filter(|r| r.impossible.is_empty())
        .map(need)
        .min()
        .unwrap();
    assert_eq!(closest.missing_bytes, best - memory);
}

/// A table over `optimizer = ["adam", "eight_bit_moments"]` × `precision = ["f32",
/// "bf16"]`, the 8-bit level measured with `header` bytes of bookkeeping per moment
/// tensor that the projection's "a quarter of every byte" cannot know.
fn optimizer_table(header: u64) -> (LeverTable, Vec<LeverFigures>) {
    let axes = LeverAxes::new(
        [
            (
                "optimizer".to_owned(),
                vec!["adam".into(), "eight_bit_moments".into()],
            ),
            ("precision".to_owned(), vec!["f32".into(), "bf16".into()]),
        ]
        .into(),
    )
    .unwrap();
    let mut measured = Vec::new();
    for optimizer in ["adam", "eight_bit_moments"] {
        for precision in ["f32", "bf16"] {
            let mut f = figures(precision, "off", 8, Some(1.0));
            f.variant = [
                ("optimizer".to_owned(), optimizer.to_owned()),
                ("precision".to_owned(), precision.to_owned()),
            ]
            .into();
            if optimizer == "eight_bit_moments" {
                // Two moments of PARAMS bytes each, plus their bookkeeping.
                let state = 2 * PARAMS + header;
                let saved = f.category_bytes[Category::OptimizerState] - state;
                f.category_bytes[Category::OptimizerState] = state;
                f.peak_bytes -= saved;
                f.allocated_bytes = f.allocated_bytes.map(|b| b - saved);
                f.reserved_bytes = f.reserved_bytes.map(|b| b - saved);
            }
            measured.push(f);
        }
    }
    let table =
        LeverTable::build(target(), &axes, measured.clone(), &[80 * GIB], ALLOWANCE).unwrap();
    (table, measured)
}

#[test]
fn a_projection_shows_the_level_that_measures_its_lever_beside_it() {
    let header = 4096;
    let (mut t, measured) = optimizer_table(header);
    for f in &measured {
        t.add_projection(project_8bit_moments(f));
    }
    // Projected from the two `adam` rows only: the `eight_bit_moments` rows measure
    // the lever already.
    assert_eq!(t.projections.len(), 2, "{:?}", t.projections);
    for p in &t.projections {
        assert_eq!(p.variant["optimizer"], "adam");
        let m = p.measured.as_ref().expect("the measured level beside it");
        assert_eq!(m.variant["optimizer"], "eight_bit_moments");
        assert_eq!(m.variant["precision"], p.variant["precision"]);
        let own = measured.iter().find(|f| f.variant == m.variant).unwrap();
        assert_eq!(m.peak_bytes, own.peak_bytes);
        assert_eq!(m.category_bytes, own.category_bytes);
        // The projection keeps a byte of each of the 2 × PARAMS moments (a quarter of
        // f32's, a half of bf16's); the measurement, the moments and their
        // bookkeeping: it promised `header` bytes too many.
        assert_eq!(p.category_bytes[Category::OptimizerState], 2 * PARAMS);
        assert_eq!(m.off_bytes, -(header as i64));
        let percent = m.off_percent.unwrap();
        assert!(
            (percent - (-(header as f64) * 100.0 / own.peak_bytes as f64)).abs() < 1e-9,
            "{percent}"
        );
    }
    let json = serde_json::to_value(&t).unwrap();
    let row = &json["projections"][0];
    assert_eq!(row["measured"]["off_bytes"], -(header as i64));
    assert_eq!(row["measured"]["variant"]["optimizer"], "eight_bit_moments");
    // A measured row and a projection without a measured level carry no `measured`.
    assert!(json["levers"][0].get("measured").is_none());
    let (mut t, measured) = optimizer_table(0);
    let at: Point = [("batch".to_owned(), 8)].into();
    t.add_projection(project_zero(&no_layers_sweep(), &at, &measured[0], 8, Shard::Zero2).unwrap());
    assert!(t.projections[0].measured.is_none());
    assert!(
        serde_json::to_value(&t).unwrap()["projections"][0]
            .get("measured")
            .is_none()
    );
}

#[test]
fn a_zero_level_measures_its_own_stage_only() {
    let axes = LeverAxes::new(
        [(
            "sharding".to_owned(),
            vec!["none".into(), "zero1".into(), "zero3".into()],
        )]
        .into(),
    )
    .unwrap();
    let measured: Vec<LeverFigures> = ["none", "zero1", "zero3"]
        .iter()
        .enumerate()
        .map(|(i, level)| {
            let mut f = figures("f32", "off", 8, Some(1.0));
            f.variant = [("sharding".to_owned(), (*level).to_owned())].into();
            f.peak_bytes -= i as u64 * MIB;
            f
        })
        .collect();
    let mut t =
        LeverTable::build(target(), &axes, measured.clone(), &[80 * GIB], ALLOWANCE).unwrap();
    let at: Point = [("batch".to_owned(), 8)].into();
    for shard in [Shard::Zero1, Shard::Zero2, Shard::Zero3] {
        t.add_projection(project_zero(&no_layers_sweep(), &at, &measured[0], 8, shard).unwrap());
    }
    let beside: Vec<Option<&str>> = t
        .projections
        .iter()
        .map(|p| p.measured.as_ref().map(|m| m.variant["sharding"].as_str()))
        .collect();
    assert_eq!(beside, [Some("zero1"), None, Some("zero3")]);
    let zero3 = &t.projections[2];
    assert_eq!(
        zero3.measured.as_ref().unwrap().off_bytes,
        zero3.peak_bytes as i64 - measured[2].peak_bytes as i64
    );
}

/// The table with projections on the baseline: 8-bit moments, ZeRO-3 over 8 ranks and
/// accumulation of batch 8 for `memory`.
fn table_with_projections(memory: u64) -> LeverTable {
    let mut t = table(&[memory]);
    let base = figures("f32", "off", 8, Some(1.0));
    t.add_projection(project_8bit_moments(&base));
    let at: Point = [("batch".to_owned(), 8)].into();
    t.add_projection(project_zero(&no_layers_sweep(), &at, &base, 8, Shard::Zero3).unwrap());
    let accumulation = project_accumulation(8, memory, ALLOWANCE, |b| {
        Ok::<_, String>(figures("f32", "off", b, Some(1.0)))
    })
    .unwrap();
    if let Some(a) = accumulation {
        t.add_projection(a);
    }
    t
}

/// A row's label: its levels, then the projection.
fn label(variant: &LeverVariant, projection: Option<&LeverProjection>) -> String {
    let lever = match projection {
        None => String::new(),
        Some(LeverProjection::Accumulation { .. }) => " +accumulation".into(),
        Some(LeverProjection::Zero { stage, .. }) => format!(" +{stage}"),
        Some(LeverProjection::EightBitMoments) => " +8bit".into(),
    };
    format!(
        "{}/{}{lever}",
        variant["precision"], variant["checkpointing"]
    )
}

#[test]
fn fit_on_lists_what_fits_cheapest_first() {
    // Hand ranking: time ratio (bf16/off 0.8; the baseline and its projections 1.0;
    // bf16/blocks 1.1; f32/blocks 1.35), then levers (baseline 0, projections 1), then
    // device bytes (accumulation of 4 × 2 keeps 17.1 GB, ZeRO-3 saves 7/8 of 4.8 GB,
    // 8-bit moments 1.8 GB; at 40 GiB batch 8 fits whole: accumulation is the baseline).
    let small = [
        "bf16/off",
        "f32/off",
        "f32/off +accumulation",
        "f32/off +zero3",
        "f32/off +8bit",
        "bf16/blocks",
        "f32/blocks",
    ];
    let large = [
        "bf16/off",
        "f32/off",
        "f32/off +zero3",
        "f32/off +8bit",
        "f32/off +accumulation",
        "bf16/blocks",
        "f32/blocks",
    ];
    let mut lengths = BTreeSet::new();
    for (memory, ranking) in [(16 * GIB, small), (24 * GIB, small), (40 * GIB, large)] {
        let t = table_with_projections(memory);
        let mut device = BTreeMap::new();
        for row in t.levers.iter().chain(&t.projections) {
            let l = label(&row.variant, row.projection.as_ref().map(|p| &p.lever));
            // By hand: reserved (or the peak) plus the allowance.
            let need = row.reserved_bytes.unwrap_or(row.peak_bytes) + ALLOWANCE;
            device.insert(l, need);
        }
        assert_eq!(device.len(), ranking.len(), "{device:?}");
        let expected: Vec<&str> = ranking
            .into_iter()
            .filter(|l| device[*l] <= memory)
            .collect();
        let answer = t.fit_on(memory);
        let got: Vec<String> = answer
            .fitting
            .iter()
            .map(|r| label(&r.variant, r.projection.as_ref().map(|p| &p.lever)))
            .collect();
        assert_eq!(got, expected, "at {memory}: {device:?}");
        assert_eq!(answer.closest, None);
        assert_eq!(answer.memory_bytes, memory);
        lengths.insert(expected.len());
    }
    // 4 fit at 16 GiB, 6 at 24 GiB, all 7 at 40 GiB.
    assert_eq!(lengths, BTreeSet::from([4, 6, 7]));
}

#[test]
fn fit_on_says_by_how_much_the_closest_misses() {
    let memory = 5 * GIB;
    let t = table_with_projections(memory);
    let answer = t.fit_on(memory);
    assert!(answer.fitting.is_empty());
    let miss = answer.closest.expect("a closest row");
    let least = t
        .levers
        .iter()
        .chain(&t.projections)
        .map(|r| r.reserved_bytes.unwrap() + ALLOWANCE)
        .min()
        .unwrap();
    assert_eq!(miss.missing_bytes, least - memory);
    assert_eq!(miss.row.reserved_bytes.unwrap() + ALLOWANCE, least);
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn the_json_has_the_documented_shape() {
    let sizes = [24 * GIB, 141 * GIB, 16 * GIB];
    let mut t = table(&sizes);
    let base = figures("f32", "off", 8, None);
    let at: Point = [("batch".to_owned(), 8)].into();
    t.add_projection(project_zero(&no_layers_sweep(), &at, &base, 8, Shard::Zero2).unwrap());
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(keys(&v), BTreeSet::from(["at", "levers", "projections"]));
    assert_eq!(v["at"], serde_json::json!({"batch": 8, "layers": 32}));
    let row_keys = BTreeSet::from([
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
        "flagged",
        "impossible",
        "fits",
    ]);
    let levers = v["levers"].as_array().unwrap();
    assert_eq!(levers.len(), 4);
    for (row, table_row) in levers.iter().zip(&t.levers) {
        assert_eq!(keys(row), row_keys);
        assert_eq!(
            row["variant"]["precision"],
            table_row.variant["precision"].as_str()
        );
        let names: BTreeSet<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(keys(&row["category_bytes"]), names);
        assert_eq!(keys(&row["category_saving_bytes"]), names);
        assert_eq!(row["peak_bytes"], table_row.peak_bytes);
        assert_eq!(row["saving_bytes"].as_i64(), table_row.saving_bytes);
        assert_eq!(
            keys(&row["fits"]),
            BTreeSet::from(["16GiB", "24GiB", "141GiB"])
        );
        assert!(row["fits"]["141GiB"].as_bool().unwrap());
    }
    // bf16 with checkpointing saves.
    assert!(levers[3]["saving_bytes"].as_i64().unwrap() > 0);
    assert_eq!(levers[0]["time_ratio"], 1.0);
    assert_eq!(levers[1]["time_ratio"], 0.8);
    let projections = v["projections"].as_array().unwrap();
    assert_eq!(projections.len(), 1);
    let p = &projections[0];
    let mut with_projection = row_keys.clone();
    with_projection.insert("projection");
    assert_eq!(keys(p), with_projection);
    assert_eq!(p["projection"]["lever"], "zero");
    assert_eq!(p["projection"]["stage"], "zero2");
    assert_eq!(p["projection"]["ranks"], 8);
    assert!(
        p["projection"]["formula"]
            .as_str()
            .unwrap()
            .contains("gradients ⌈÷ 8⌉")
    );
    // The sizes keep the caller's order in the text.
    let text = serde_json::to_string(&t.levers[0]).unwrap();
    let at = |k: &str| text.find(k).unwrap();
    assert!(
        at("\"24GiB\"") < at("\"141GiB\"") && at("\"141GiB\"") < at("\"16GiB\""),
        "{text}"
    );
}

#[test]
fn a_costly_lever_serializes_a_negative_saving() {
    let axes =
        LeverAxes::new([("checkpointing".into(), vec!["off".into(), "broken".into()])].into())
            .unwrap();
    let mut off = figures("f32", "off", 8, None);
    off.variant = [("checkpointing".into(), "off".into())].into();
    let mut broken = off.clone();
    broken.variant = [("checkpointing".into(), "broken".into())].into();
    broken.peak_bytes += 4096;
    let t = LeverTable::build(Point::new(), &axes, vec![off, broken], &[], 0).unwrap();
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(v["levers"][1]["saving_bytes"], -4096);
}

#[test]
fn an_unmeasured_time_ranks_after_every_measured_one() {
    let axes = LeverAxes::new(
        [(
            "checkpointing".into(),
            vec!["off".into(), "blocks".into(), "selective".into()],
        )]
        .into(),
    )
    .unwrap();
    let level = |name: &str, activations: u64, ratio: Option<f64>| {
        let mut f = figures("f32", "off", 8, ratio);
        f.variant = [("checkpointing".into(), name.into())].into();
        f.category_bytes[Category::Activations] = activations;
        f.peak_bytes = sum(&f.category_bytes);
        f.allocated_bytes = None;
        f.reserved_bytes = None;
        f
    };
    // blocks is the smallest, but its time was not measured.
    let measured = vec![
        level("off", 3 * GIB, None),
        level("blocks", GIB, None),
        level("selective", 2 * GIB, Some(1.4)),
    ];
    let t = LeverTable::build(Point::new(), &axes, measured, &[], 0).unwrap();
    let answer = t.fit_on(80 * GIB);
    let order: Vec<&str> = answer
        .fitting
        .iter()
        .map(|r| r.variant["checkpointing"].as_str())
        .collect();
    assert_eq!(order, ["off", "selective", "blocks"]);
}
