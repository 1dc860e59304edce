//! A sweep over named axes end to end on figures written here from formulas: the fit,
//! a prediction far outside the grid, the largest value that fits, the ZeRO projection,
//! the target gate with the term that grew, and the snapshot's `scaling` key.

use std::collections::BTreeMap;
use vramtest_model::axes::{Grid, Point};
use vramtest_model::pool::PoolPeaks;
use vramtest_model::sweep::{
    GridRun, Shard, Sweep, TargetCheck, TargetFinding, VariantSweep, compare_levels,
    compare_target, parse_point, project, show_point,
};
use vramtest_model::{Category, CategoryBytes, Limit, Phase};

const GIB: u64 = 1 << 30;

/// A transformer-shaped step, in bytes: parameters grow with layers, activations with
/// batch·seq·layers, attention scores (temporaries) with batch·seq²·layers.
struct Model {
    /// Bytes of activations per batch·seq·layer.
    act: u64,
    /// Bytes of inputs per batch·seq.
    inputs: u64,
}

impl Model {
    /// A model keeping `act` bytes of activations per batch·seq·layer and 8 bytes of
    /// inputs per batch·seq.
    fn of(act: u64) -> Model {
        Model { act, inputs: 8 }
    }

    fn categories(&self, b: u64, s: u64, l: u64) -> CategoryBytes {
        CategoryBytes::from([
            (Category::Parameters, 4096 * l + 1000),
            (Category::Gradients, 4096 * l + 1000),
            (Category::OptimizerState, 2 * (4096 * l + 1000)),
            (Category::Activations, self.act * b * s * l),
            (Category::Inputs, self.inputs * b * s),
            (Category::Temporaries, 16 * b * s * s * l),
            (Category::Workspace, 0),
            (Category::Untracked, 0),
        ])
    }

    /// The forward pass holds parameters, optimizer state, activations and the scores;
    /// the backward pass adds gradients over the activations.
    fn phases(&self, b: u64, s: u64, l: u64) -> BTreeMap<Phase, u64> {
        let c = self.categories(b, s, l);
        let state = c[Category::Parameters] + c[Category::OptimizerState] + c[Category::Inputs];
        BTreeMap::from([
            (
                Phase::Forward,
                state + c[Category::Activations] + c[Category::Temporaries],
            ),
            (
                Phase::Backward,
                state + c[Category::Activations] + c[Category::Gradients],
            ),
        ])
    }

    fn run(&self, b: u64, s: u64, l: u64) -> GridRun {
        let phases = self.phases(b, s, l);
        let peak = *phases.values().max().unwrap();
        GridRun {
            point: point(b, s, l),
            peak_bytes: peak,
            category_peaks: self.categories(b, s, l),
            phase_peaks: phases,
            // The scores live in the forward pass only.
            phase_temporaries: BTreeMap::from([
                (
                    Phase::Forward,
                    self.categories(b, s, l)[Category::Temporaries],
                ),
                (Phase::Backward, 0),
            ]),
            phase_moments: BTreeMap::new(),
            peak_outside_phases: false,
            pool: Some(PoolPeaks {
                allocated_bytes: peak + 512,
                reserved_bytes: (peak + 512).div_ceil(2 << 20) * (2 << 20),
            }),
        }
    }

    fn sweep(&self) -> Sweep {
        self.sweep_with(|_, _, _, _| {})
    }

    /// The sweep of [`grid`] whose every run, at batch, seq and layers, is first
    /// changed by `edit`.
    fn sweep_with(&self, edit: impl Fn(&mut GridRun, u64, u64, u64)) -> Sweep {
        let grid = grid();
        let runs: Vec<GridRun> = grid
            .points()
            .iter()
            .map(|p| {
                let (b, s, l) = (p["batch"], p["seq"], p["layers"]);
                let mut run = self.run(b, s, l);
                edit(&mut run, b, s, l);
                run
            })
            .collect();
        Sweep::fit(&grid, &runs).unwrap()
    }
}

fn grid() -> Grid {
    Grid::new([
        ("batch", vec![1, 2]),
        ("seq", vec![8, 16, 24]),
        ("layers", vec![1, 2, 3]),
    ])
    .unwrap()
}

fn point(b: u64, s: u64, l: u64) -> Point {
    Point::from([("batch".into(), b), ("seq".into(), s), ("layers".into(), l)])
}

#[test]
fn every_category_is_predicted_exactly_far_outside_the_grid() {
    let model = Model::of(64);
    let sweep = model.sweep();
    let at = point(8, 4096, 32);
    let e = sweep.estimate(&at, 2 << 20).unwrap();
    let want = model.categories(8, 4096, 32);
    assert_eq!(e.category_bytes.len(), 8);
    for (c, bytes) in want.iter() {
        assert_eq!(e.category_bytes[&c], bytes, "{c}");
    }
    // At seq 4096 the scores (seq²) dominate: the forward pass holds the peak, though
    // at short sequences the backward pass does.
    let phases = model.phases(8, 4096, 32);
    assert_eq!(e.peak_bytes, *phases.values().max().unwrap());
    assert_eq!(e.peak_phase.as_deref(), Some("forward"));
    let small = sweep.estimate(&point(1, 8, 1), 2 << 20).unwrap();
    assert_eq!(small.peak_phase.as_deref(), Some("backward"));
    assert_eq!(e.allocated_bytes, Some(e.peak_bytes + 512));
    assert!(e.reserved_bytes.unwrap() >= e.allocated_bytes.unwrap());
    assert_eq!(
        e.reserved_bytes,
        Some(e.allocated_bytes.unwrap().div_ceil(2 << 20) * (2 << 20))
    );
    assert!(
        e.flagged.iter().all(|f| f == "reserved over allocated"),
        "{:?}",
        e.flagged
    );
    assert_eq!(e.loo_error_ppm["activations"], 0);
    assert_eq!(e.terms["activations"], "64 B × batch·seq·layers");
}

/// The optimizer step's temporaries: three copies of the largest parameter, whatever
/// the batch and sequence.
fn optimizer_temporaries(l: u64) -> u64 {
    3 * (2048 * l + 20_000)
}

/// The backward pass's temporaries: the scores' gradients, batch·seq²·layers.
fn backward_temporaries(b: u64, s: u64, l: u64) -> u64 {
    24 * b * s * s * l + 512
}

#[test]
fn temporaries_follow_the_phase_that_holds_them_as_the_axes_grow() {
    // On the grid the optimizer step's temporaries are the highest at short sequences
    // and the backward pass's at long ones: their maximum is no polynomial, each
    // phase's is.
    let model = Model::of(64);
    let grid = grid();
    let runs: Vec<GridRun> = grid
        .points()
        .iter()
        .map(|p| {
            let (b, s, l) = (p["batch"], p["seq"], p["layers"]);
            let mut run = model.run(b, s, l);
            let (opt, bwd) = (optimizer_temporaries(l), backward_temporaries(b, s, l));
            run.category_peaks[Category::Temporaries] = opt.max(bwd);
            run.phase_temporaries = BTreeMap::from([
                (Phase::Forward, 0),
                (Phase::Backward, bwd),
                (Phase::OptimizerStep, opt),
            ]);
            run
        })
        .collect();
    let small = runs.iter().find(|r| r.point == point(1, 8, 1)).unwrap();
    let large = runs.iter().find(|r| r.point == point(2, 24, 3)).unwrap();
    assert!(optimizer_temporaries(1) > backward_temporaries(1, 8, 1));
    assert!(
        small.category_peaks[Category::Temporaries] > small.phase_temporaries[&Phase::Backward]
    );
    assert_eq!(
        large.category_peaks[Category::Temporaries],
        large.phase_temporaries[&Phase::Backward]
    );
    let sweep = Sweep::fit(&grid, &runs).unwrap();
    assert_eq!(sweep.figures["temporaries in backward"].loo_error_ppm, 0);
    assert_eq!(
        sweep.figures["temporaries in optimizer_step"].loo_error_ppm,
        0
    );
    for (b, s, l) in [(8, 4096, 32), (1, 8, 64), (1, 1, 1), (4, 48, 6)] {
        let e = sweep.estimate(&point(b, s, l), 2 << 20).unwrap();
        let want = optimizer_temporaries(l).max(backward_temporaries(b, s, l));
        assert_eq!(
            e.category_bytes[&Category::Temporaries],
            want,
            "at batch {b}, seq {s}, layers {l}"
        );
    }
    // Fitted as one figure, the maximum misses its own grid.
    assert!(sweep.figures["temporaries"].loo_error_ppm > 0);
}

#[test]
fn solve_finds_the_largest_batch_a_memory_size_holds() {
    let model = Model::of(64);
    let sweep = model.sweep();
    let at = point(1, 4096, 32);
    let memory = 80 * GIB;
    let allowance = GIB;
    let batch = sweep
        .solve(&at, "batch", memory, allowance, 2 << 20)
        .unwrap()
        .expect("some batch fits");
    // Brute force with the formulas above and the reserved rule (the allocated peak
    // rounded up to 2 MiB, the reserved fit being a step function).
    let reserved = |b: u64| {
        let peak = *model.phases(b, 4096, 32).values().max().unwrap();
        (peak + 512).div_ceil(2 << 20) * (2 << 20)
    };
    assert!(reserved(batch) + allowance <= memory);
    assert!(reserved(batch + 1) + allowance > memory);
    assert_eq!(
        sweep.solve(&at, "batch", GIB, allowance, 2 << 20).unwrap(),
        None
    );
    assert!(sweep.solve(&at, "heads", memory, 0, 2 << 20).is_err());
}

#[test]
fn zero_stages_shard_the_model_states() {
    let model = Model::of(64);
    let sweep = model.sweep();
    let at = point(8, 1024, 32);
    let e = sweep.estimate(&at, 2 << 20).unwrap();
    let c = model.categories(8, 1024, 32);
    let z1 = project(&sweep, &e, 8, Shard::Zero1).unwrap();
    assert_eq!(
        z1.per_gpu.category_bytes[&Category::OptimizerState],
        c[Category::OptimizerState].div_ceil(8)
    );
    assert_eq!(
        z1.per_gpu.category_bytes[&Category::Gradients],
        c[Category::Gradients]
    );
    let z3 = project(&sweep, &e, 8, Shard::Zero3).unwrap();
    assert_eq!(
        z3.per_gpu.category_bytes[&Category::Parameters],
        c[Category::Parameters].div_ceil(8)
    );
    // One layer's parameters, gathered: 4096 B per layer in the formula above.
    assert_eq!(z3.gathered_bytes, Some(4096));
    let saved = (c[Category::Parameters] - c[Category::Parameters].div_ceil(8))
        + (c[Category::Gradients] - c[Category::Gradients].div_ceil(8))
        + (c[Category::OptimizerState] - c[Category::OptimizerState].div_ceil(8));
    assert_eq!(z3.per_gpu.peak_bytes, e.peak_bytes - saved + 4096);
    assert_eq!(
        z1.per_gpu.category_bytes[&Category::Activations],
        c[Category::Activations]
    );
}

/// The target check's finding on activations, which the test made grow.
fn activations_finding(check: &TargetCheck) -> &TargetFinding {
    check
        .findings
        .iter()
        .find(|f| f.figure == "activations")
        .expect("activations grew")
}

#[test]
fn the_target_gate_names_the_term_that_grew() {
    let at = point(8, 4096, 32);
    let mut old = Model::of(64).sweep();
    old.target = Some(old.target_at(&at, 2 << 20).unwrap());
    // One more per-layer activation of 512 B per batch·seq.
    let mut new = Model::of(64 + 512).sweep();
    new.target = Some(new.target_at(&at, 2 << 20).unwrap());
    let check = compare_target(Some(&old), &new, |_| Limit::DEFAULT, None);
    assert!(check.fails());
    let act = activations_finding(&check);
    assert!(act.regressed);
    assert_eq!(act.new - act.old, 512 * 8 * 4096 * 32);
    assert_eq!(act.why, "activations: +512 B × batch·seq·layers");
    let lines = check.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("target (batch=8, layers=32, seq=4096): activations")),
        "{lines:?}"
    );
    // The same sweep passes; a budget under the target's peak fails it.
    let same = compare_target(Some(&old), &old, |_| Limit::DEFAULT, None);
    assert!(!same.fails(), "{same:?}");
    let peak = old.target.as_ref().unwrap().peak_bytes;
    let over = compare_target(Some(&old), &old, |_| Limit::DEFAULT, Some(peak - 1));
    assert_eq!(over.over_budget, Some((peak, peak - 1)));
    // A growth within the limit is reported, not failed.
    let loose = compare_target(Some(&old), &new, |_| Limit::ALLOW, None);
    assert!(!loose.fails());
    assert!(!loose.findings.is_empty());
    // A finding on a flagged fit says it is not to be trusted.
    let mut noisy = new.clone();
    noisy.figures.get_mut("activations").unwrap().loo_error_ppm = 30_000;
    let check = compare_target(Some(&old), &noisy, |_| Limit::DEFAULT, None);
    let act = activations_finding(&check);
    assert_eq!(
        act.why,
        "activations: +512 B × batch·seq·layers; the new fit misses a held-out point by 3.00% (over 2%): not to be trusted"
    );
}

#[test]
fn a_flagged_phase_within_the_peaks_maximum_flags_the_peak() {
    let at = point(8, 4096, 32);
    let mut old = Model::of(64).sweep();
    old.target = Some(old.target_at(&at, 2 << 20).unwrap());
    let mut new = Model::of(64 + 512).sweep();
    // The forward pass holds the peak at the target (its scores grow with seq²); the
    // backward pass's fit misses a held-out point by 28%: it may hold the real peak.
    new.figures.get_mut("phase backward").unwrap().loo_error_ppm = 280_000;
    new.target = Some(new.target_at(&at, 2 << 20).unwrap());
    let estimate = new.estimate(&at, 2 << 20).unwrap();
    assert_eq!(estimate.peak_phase.as_deref(), Some("forward"));
    assert_eq!(estimate.flagged_under_peak(), ["phase backward"]);
    let check = compare_target(Some(&old), &new, |_| Limit::DEFAULT, None);
    let peak = check
        .findings
        .iter()
        .find(|f| f.figure == "peak")
        .expect("the peak grew");
    assert!(
        peak.why.ends_with(
            "; within the peak's maximum, phase backward: the new fit misses a held-out point by 28.00% (over 2%): not to be trusted"
        ),
        "{}",
        peak.why
    );
    // Unflagged, the same sweep's peak carries no caveat.
    let clean = Model::of(64 + 512).sweep();
    assert!(
        clean
            .estimate(&at, 2 << 20)
            .unwrap()
            .flagged_under_peak()
            .is_empty()
    );
    let mut clean_target = clean.clone();
    clean_target.target = Some(clean.target_at(&at, 2 << 20).unwrap());
    let check = compare_target(Some(&old), &clean_target, |_| Limit::DEFAULT, None);
    let peak = check.findings.iter().find(|f| f.figure == "peak").unwrap();
    assert!(!peak.why.contains("not to be trusted"), "{}", peak.why);
}

#[test]
fn a_new_term_shows_both_formulas() {
    let at = point(8, 4096, 32);
    let mut old = Model::of(64).sweep();
    old.target = Some(old.target_at(&at, 2 << 20).unwrap());
    // Activations now also grow with batch·seq² (a kept attention matrix).
    let mut new = Model::of(64).sweep_with(|r, b, s, _| {
        r.category_peaks[Category::Activations] += 4 * b * s * s;
    });
    new.target = Some(new.target_at(&at, 2 << 20).unwrap());
    let check = compare_target(Some(&old), &new, |_| Limit::DEFAULT, None);
    let act = activations_finding(&check);
    assert_eq!(
        act.why,
        "activations: was 64 B × batch·seq·layers, now 4 B × batch·seq² + 64 B × batch·seq·layers"
    );
}

#[test]
fn changed_axes_or_target_must_be_accepted_again() {
    let at = point(8, 4096, 32);
    let mut old = Model::of(64).sweep();
    old.target = Some(old.target_at(&at, 2 << 20).unwrap());
    let mut moved = old.clone();
    moved.target = Some(old.target_at(&point(8, 2048, 32), 2 << 20).unwrap());
    let check = compare_target(Some(&old), &moved, |_| Limit::DEFAULT, None);
    assert!(check.changed.unwrap().contains("the target changed"));
    let mut regrid = old.clone();
    regrid.axes.insert("seq".into(), vec![8, 16, 32]);
    let check = compare_target(Some(&old), &regrid, |_| Limit::DEFAULT, None);
    assert!(check.changed.unwrap().contains("axes changed"));
}

/// A body's `scaling`, read as a snapshot reads it.
#[derive(Debug, serde::Deserialize)]
struct Holder {
    #[serde(
        default,
        deserialize_with = "vramtest_model::sweep::deserialize_scaling"
    )]
    scaling: Option<Sweep>,
}

#[test]
fn the_sweep_round_trips_under_scaling_and_old_batch_scaling_still_reads() {
    let mut sweep = Model::of(64).sweep();
    sweep.target = Some(sweep.target_at(&point(8, 4096, 32), 2 << 20).unwrap());
    let json = serde_json::to_string_pretty(&sweep).unwrap();
    assert!(json.contains("\"axes\""), "{json}");
    assert!(!json.contains('.'), "no floats: {json}");
    assert!(!json.contains("migrated"), "{json}");
    let back: Holder = serde_json::from_str(&format!("{{\"scaling\": {json}}}")).unwrap();
    assert_eq!(back.scaling, Some(sweep));
    let old = r#"{"scaling": {"batch": [32, 64, 128],
        "peak": {"fixed_bytes": 100, "bytes_per_sample": 10},
        "category_peaks": {}}}"#;
    let migrated = serde_json::from_str::<Holder>(old)
        .unwrap()
        .scaling
        .unwrap();
    assert!(migrated.migrated);
    assert_eq!(migrated.axes["batch"], vec![32, 64, 128]);
    let bad = r#"{"scaling": {"axes": {"seq": [1, 2, 3]}, "figures": {}, "extra": 1}}"#;
    let e = serde_json::from_str::<Holder>(bad).unwrap_err();
    assert!(e.to_string().contains("named axes"), "{e}");
    let bad = r#"{"scaling": {"batch": [1, 2], "peak": {"fixed_bytes": 1}, "category_peaks": {}}}"#;
    let e = serde_json::from_str::<Holder>(bad).unwrap_err();
    assert!(e.to_string().contains("batch scaling"), "{e}");
}

#[test]
fn points_parse_with_errors_that_name_the_axis() {
    let p = parse_point("layers=32, seq=4096,batch=8").unwrap();
    assert_eq!(show_point(&p), "batch=8, layers=32, seq=4096");
    for (text, needle) in [
        ("seq=x", "axis `seq`: `x` is not a positive integer"),
        ("seq=0", "axis `seq`: the value must be at least 1"),
        (
            "batch=99999999999999999999",
            "axis `batch`: `99999999999999999999` is larger than 18446744073709551615",
        ),
        ("seq=-3", "axis `seq`: `-3` is not a positive integer"),
        ("seq=1,seq=2", "axis `seq` is given twice"),
        ("seq", "`seq` is not `axis=value`"),
        ("", "no axes given"),
    ] {
        let e = parse_point(text).unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
    let sweep = Model::of(64).sweep();
    let e = sweep
        .estimate(&parse_point("seq=16,layers=2").unwrap(), 2 << 20)
        .unwrap_err();
    assert!(e.to_string().contains("no value for axis `batch`"), "{e}");
    let e = sweep
        .estimate(
            &parse_point("seq=16,layers=2,batch=1,heads=4").unwrap(),
            2 << 20,
        )
        .unwrap_err();
    assert!(e.to_string().contains("unknown axis `heads`"), "{e}");
}

#[test]
fn temporaries_are_predicted_phase_by_phase() {
    // The forward pass's scores (16 B × batch·seq²) against the backward pass's
    // scratch (256 B × batch·seq·layers): each dominates somewhere in the grid, and
    // the maximum of the two is no polynomial.
    let forward = |b: u64, s: u64| 16 * b * s * s;
    let backward = |b: u64, s: u64, l: u64| 256 * b * s * l;
    let sweep = Model::of(64).sweep_with(|r, b, s, l| {
        r.phase_temporaries = BTreeMap::from([
            (Phase::Forward, forward(b, s)),
            (Phase::Backward, backward(b, s, l)),
        ]);
        r.category_peaks[Category::Temporaries] = forward(b, s).max(backward(b, s, l));
    });
    for (b, s, l) in [(8, 4096, 32), (8, 64, 32), (3, 30, 5)] {
        let e = sweep.estimate(&point(b, s, l), 2 << 20).unwrap();
        assert_eq!(
            e.category_bytes[&Category::Temporaries],
            forward(b, s).max(backward(b, s, l)),
            "at batch {b}, seq {s}, layers {l}"
        );
    }
    assert_eq!(sweep.figures["temporaries in forward"].loo_error_ppm, 0);
    assert_eq!(sweep.figures["temporaries in backward"].loo_error_ppm, 0);
}

/// A sweep with a categorical axis `kept = ["one", "two"]`: the baseline keeps
/// `act` bytes per layer·batch·seq, the level `two` `act2`.
fn levels_sweep(act: u64, act2: u64) -> Sweep {
    models_sweep(&Model::of(act), &Model::of(act2))
}

/// A sweep with the level `kept = two` as `two` against the baseline `one`.
fn models_sweep(one: &Model, two: &Model) -> Sweep {
    let at = point(8, 4096, 32);
    let mut sweep = one.sweep();
    sweep.target = Some(sweep.target_at(&at, 2 << 20).unwrap());
    let mut two = two.sweep();
    two.target = Some(two.target_at(&at, 2 << 20).unwrap());
    sweep.levels = [("kept".to_owned(), vec!["one".to_owned(), "two".to_owned()])].into();
    sweep.variants = vec![VariantSweep {
        variant: [("kept".to_owned(), "two".to_owned())].into(),
        sweep: two,
        saving: None,
        cpu_time_ratio: Default::default(),
    }];
    sweep.record_savings();
    sweep
}

#[test]
fn a_sweep_with_levels_round_trips_and_without_them_writes_no_key() {
    let sweep = levels_sweep(64, 128);
    let json = serde_json::to_string(&sweep).unwrap();
    let back: Holder = serde_json::from_str(&format!("{{\"scaling\": {json}}}")).unwrap();
    assert_eq!(back.scaling.as_ref(), Some(&sweep));
    let combinations = sweep.combinations();
    assert_eq!(combinations.len(), 2);
    assert_eq!(combinations[0].0["kept"], "one");
    assert_eq!(combinations[1].0["kept"], "two");
    assert_eq!(
        sweep
            .variant(&[("kept".to_owned(), "two".to_owned())].into())
            .unwrap()
            .figures,
        sweep.variants[0].sweep.figures
    );
    let plain = serde_json::to_string(&Model::of(64).sweep()).unwrap();
    assert!(
        !plain.contains("levels") && !plain.contains("variants"),
        "{plain}"
    );
}

#[test]
fn a_regression_at_a_non_baseline_level_fails_naming_the_level() {
    let old = levels_sweep(64, 128);
    assert!(!compare_levels(Some(&old), &old, |_| Limit::DEFAULT, None).fails());
    // The level `two` keeps 512 B more per layer·batch·seq; the baseline is unchanged.
    let new = levels_sweep(64, 128 + 512);
    assert!(!compare_target(Some(&old), &new, |_| Limit::DEFAULT, None).fails());
    let check = compare_levels(Some(&old), &new, |_| Limit::DEFAULT, None);
    assert!(check.fails(), "{check:?}");
    let f = check
        .findings
        .iter()
        .find(|f| f.figure == "kept=two: activations")
        .expect("the level's activations grew");
    assert!(f.regressed);
    assert_eq!(f.new - f.old, 512 * 8 * 4096 * 32);
    // Levels that changed make the sweeps incomparable.
    let mut other = old.clone();
    other.levels = [(
        "kept".to_owned(),
        vec!["one".to_owned(), "three".to_owned()],
    )]
    .into();
    let check = compare_levels(Some(&old), &other, |_| Limit::DEFAULT, None);
    assert!(
        check
            .changed
            .as_deref()
            .is_some_and(|c| c.contains("categorical axes changed")),
        "{check:?}"
    );
}

/// The baseline's and the level `two`'s figures at (8, 4096, 32), from the model's
/// formulas: each category and the peak (the highest phase).
fn figures_at(act: u64) -> (CategoryBytes, u64) {
    let model = Model::of(act);
    let phases = model.phases(8, 4096, 32);
    (
        model.categories(8, 4096, 32),
        *phases.values().max().unwrap(),
    )
}

#[test]
fn each_level_keeps_its_saving_at_the_target_and_without_one_at_the_largest_point() {
    // The level `two` keeps an eighth of the baseline's activations.
    let sweep = levels_sweep(65536, 8192);
    let saving = sweep.variants[0]
        .saving
        .as_ref()
        .expect("a saving recorded");
    assert_eq!(saving.at, point(8, 4096, 32));
    let ((base, base_peak), (two, two_peak)) = (figures_at(65536), figures_at(8192));
    for (c, bytes) in base.iter() {
        let want = i64::try_from(bytes).unwrap() - i64::try_from(two[c]).unwrap();
        assert_eq!(saving.category_bytes[&c], want, "{c}");
        assert_eq!(saving.baseline_category_bytes[&c], bytes, "{c}");
    }
    assert_eq!(
        saving.category_bytes[&Category::Activations],
        57344 * 8 * 4096 * 32
    );
    assert_eq!(
        saving.peak_bytes,
        i64::try_from(base_peak).unwrap() - i64::try_from(two_peak).unwrap()
    );
    assert_eq!(saving.baseline_peak_bytes, base_peak);
    assert_eq!(sweep.saving_point(), Some((point(8, 4096, 32), true)));

    // A level that costs memory: its saving is negative.
    let costly = levels_sweep(64, 128);
    let saving = costly.variants[0].saving.as_ref().unwrap();
    assert_eq!(
        saving.category_bytes[&Category::Activations],
        -(64 * 8 * 4096 * 32)
    );
    assert!(saving.peak_bytes < 0);

    // Without a target: at the grid's largest point, batch 2, seq 24, layers 3.
    let mut plain = levels_sweep(65536, 8192);
    plain.target = None;
    plain.variants[0].sweep.target = None;
    plain.record_savings();
    let saving = plain.variants[0].saving.as_ref().unwrap();
    assert_eq!(plain.saving_point(), Some((point(2, 24, 3), false)));
    assert_eq!(saving.at, point(2, 24, 3));
    let (base, two) = (Model::of(65536), Model::of(8192));
    let peak = |m: &Model| *m.phases(2, 24, 3).values().max().unwrap();
    assert_eq!(
        saving.peak_bytes,
        i64::try_from(peak(&base)).unwrap() - i64::try_from(peak(&two)).unwrap()
    );
    assert_eq!(
        saving.category_bytes[&Category::Activations],
        (65536 - 8192) * 2 * 24 * 3
    );
}

#[test]
fn a_saving_is_written_in_the_snapshot_and_an_older_one_without_it_still_passes() {
    let sweep = levels_sweep(65536, 8192);
    let json = serde_json::to_string(&sweep).unwrap();
    assert!(json.contains("\"saving\""), "{json}");
    let back: Holder = serde_json::from_str(&format!("{{\"scaling\": {json}}}")).unwrap();
    assert_eq!(back.scaling.as_ref(), Some(&sweep));
    // A snapshot recorded before savings were kept: no `saving` key.
    let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
    value["variants"][0]
        .as_object_mut()
        .unwrap()
        .remove("saving");
    let older: Holder = serde_json::from_value(serde_json::json!({ "scaling": value })).unwrap();
    let older = older.scaling.unwrap();
    assert_eq!(older.variants[0].saving, None);
    let check = compare_levels(Some(&older), &sweep, |_| Limit::DEFAULT, None);
    assert!(!check.fails(), "{check:?}");
    assert!(check.savings.is_empty(), "{check:?}");
    // Its saving is computed from its fits: a level that stops saving still fails.
    let stopped = levels_sweep(65536, 65536);
    let check = compare_levels(Some(&older), &stopped, |_| Limit::DEFAULT, None);
    assert!(check.savings.iter().any(|f| f.regressed), "{check:?}");
}

#[test]
fn a_level_whose_saving_shrinks_beyond_the_peaks_limit_fails_naming_it() {
    let old = levels_sweep(65536, 8192);
    let ((base, base_peak), (two, _)) = (figures_at(65536), figures_at(8192));
    let slack = (base_peak / 100).max(64 * 1024);
    // The level `two` stops saving: it keeps as much as the baseline.
    let new = levels_sweep(65536, 65536);
    let check = compare_levels(Some(&old), &new, |_| Limit::DEFAULT, None);
    assert!(check.fails(), "{check:?}");
    let find = |figure: &str| {
        check
            .savings
            .iter()
            .find(|f| f.figure == figure)
            .unwrap_or_else(|| panic!("{figure}: {check:?}"))
    };
    let act = find("activations");
    assert!(act.regressed);
    assert_eq!(act.lever, "kept=two");
    let was = base[Category::Activations] - two[Category::Activations];
    assert_eq!(act.old, i64::try_from(was).unwrap());
    assert_eq!(act.new, 0);
    assert_eq!(act.slack, slack);
    let percent = was as f64 * 100.0 / base[Category::Activations] as f64;
    let line = act.line();
    assert!(
        line.starts_with(&format!(
            "kept=two: activations saving at target {percent:.1}% → 0.0% ({} → 0 B, shrank by {}; over the peak's limit {}, {} of the baseline's peak)",
            vramtest_model::HumanBytes(was),
            vramtest_model::HumanBytes(was),
            Limit::DEFAULT,
            vramtest_model::HumanBytes(slack),
        )),
        "{line}"
    );
    assert_eq!(format!("{percent:.1}"), "87.5");
    let peak = find("peak");
    assert!(peak.regressed);
    assert_eq!(peak.new, 0);
    // The gate's lines are the check's failure lines.
    let lines = check.lines();
    assert!(lines.contains(&line), "{lines:#?}");

    // A saving that shrinks by 64 B per batch·seq·layer: far within 1% of the peak.
    let shrank = 64 * 8 * 4096 * 32;
    assert!(shrank < slack);
    let new = levels_sweep(65536, 8192 + 64);
    let check = compare_levels(Some(&old), &new, |_| Limit::DEFAULT, None);
    assert!(!check.savings.iter().any(|f| f.regressed), "{check:?}");
    let act = check
        .savings
        .iter()
        .find(|f| f.figure == "activations")
        .expect("recorded, within the limit");
    assert_eq!(act.old - act.new, i64::try_from(shrank).unwrap());
    // Under an exact limit the same shrink fails.
    let check = compare_levels(Some(&old), &new, |_| Limit::EXACT, None);
    assert!(
        check
            .savings
            .iter()
            .any(|f| f.regressed && f.figure == "activations"),
        "{check:?}"
    );
    // A saving that grows is no finding.
    let check = compare_levels(Some(&new), &old, |_| Limit::EXACT, None);
    assert!(check.savings.is_empty(), "{check:?}");
}

#[test]
fn a_level_that_saves_nothing_is_noted_when_first_recorded() {
    use vramtest_model::sweep::saving_notes;
    let costly = levels_sweep(64, 128);
    let notes = saving_notes(&costly, None);
    assert_eq!(notes.len(), 1, "{notes:?}");
    let ((_, base_peak), (_, two_peak)) = (figures_at(64), figures_at(128));
    let over = two_peak - base_peak;
    assert!(
        notes[0].starts_with(&format!(
            "kept=two saves no memory at target (batch=8, layers=32, seq=4096): its predicted peak is {} ({:.1}%) over the baseline's (kept=one, {}); recorded, not a failure",
            vramtest_model::HumanBytes(over),
            over as f64 * 100.0 / base_peak as f64,
            vramtest_model::HumanBytes(base_peak),
        )),
        "{notes:?}"
    );
    // Said once: the snapshot already records the level.
    assert!(saving_notes(&costly, Some(&costly)).is_empty());
    // A level with the baseline's figures saves nothing either.
    let same = saving_notes(&levels_sweep(64, 64), None);
    assert_eq!(same.len(), 1, "{same:?}");
    assert!(
        same[0].contains("its predicted peak equals the baseline's"),
        "{same:?}"
    );
    // A level that saves memory is not noted.
    assert!(saving_notes(&levels_sweep(128, 64), None).is_empty());
}

#[test]
fn a_categorys_saving_is_held_to_the_peaks_slack_not_its_own() {
    let new = levels_sweep(65536, 8192);
    // The inputs are a sliver of the peak: their own limit would allow far less.
    let inputs = figures_at(65536).0[Category::Inputs];
    let own_slack = (inputs / 100).max(64 * 1024);
    // A snapshot whose baseline kept `k` more bytes of inputs per batch·seq, so that
    // its level saved `k·b·s` more of them (b·s = 8·4096 at the target); this run's
    // saving of inputs is smaller by that.
    let with_saved_inputs = |k: u64| {
        let one = Model {
            act: 65536,
            inputs: 8 + k,
        };
        let old = models_sweep(&one, &Model::of(8192));
        let peak = old.target.as_ref().unwrap().peak_bytes;
        (old, (peak / 100).max(64 * 1024))
    };
    let (within, peak_slack) = with_saved_inputs(2 * own_slack / (8 * 4096));
    assert!(own_slack < peak_slack / 4, "{own_slack} {peak_slack}");
    let check = compare_levels(Some(&within), &new, |_| Limit::DEFAULT, None);
    let f = check
        .savings
        .iter()
        .find(|f| f.figure == "inputs")
        .expect("the inputs' saving shrank");
    assert_eq!(
        (f.old - f.new) as u64,
        2 * own_slack,
        "twice the inputs' own slack"
    );
    assert!(!f.regressed, "{f:?}");
    assert!(!check.fails(), "{check:?}");
    // Beyond 1% of the snapshot's baseline peak, which grows with the inputs too.
    let (beyond, peak_slack) = with_saved_inputs(figures_at(65536).1 / 99 / (8 * 4096) + 2);
    let check = compare_levels(Some(&beyond), &new, |_| Limit::DEFAULT, None);
    assert!(check.fails(), "{check:?}");
    let f = check.savings.iter().find(|f| f.regressed).unwrap();
    assert_eq!((f.figure.as_str(), f.slack), ("inputs", peak_slack));
    assert!((f.old - f.new) as u64 > peak_slack, "{f:?}");
    assert!(
        f.line().starts_with("kept=two: inputs saving at target "),
        "{}",
        f.line()
    );
}

/// The lever gate judges the saving the snapshot's fits predict, not the one it
/// records: a recorded saving edited by hand (zeroed) cannot turn the gate off.
#[test]
fn a_recorded_saving_edited_by_hand_decides_nothing() {
    let old = levels_sweep(65536, 8192);
    let mut zeroed = old.clone();
    let saving = zeroed.variants[0].saving.as_mut().unwrap();
    saving.peak_bytes = 0;
    saving.category_bytes.values_mut().for_each(|b| *b = 0);
    // The level stops saving.
    let stopped = levels_sweep(65536, 65536);
    let fair = compare_levels(Some(&old), &stopped, |_| Limit::DEFAULT, None);
    let edited = compare_levels(Some(&zeroed), &stopped, |_| Limit::DEFAULT, None);
    assert!(edited.savings.iter().any(|f| f.regressed), "{edited:?}");
    assert_eq!(edited.savings, fair.savings);
}

#[test]
fn a_newly_added_level_that_costs_memory_is_noted_and_a_snapshot_without_it_changed() {
    use vramtest_model::sweep::saving_notes;
    let new = levels_sweep(64, 128);
    // The snapshot's sweep had no level `two` yet.
    let mut old = new.clone();
    old.variants.clear();
    let notes = saving_notes(&new, Some(&old));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("kept=two saves no memory"),
        "{notes:?}"
    );
    // Its levels list `two` and its variants lack it: a changed sweep, naming it.
    let check = compare_levels(Some(&old), &new, |_| Limit::DEFAULT, None);
    assert!(check.savings.is_empty() && check.fails(), "{check:?}");
    let changed = check.changed.as_deref().unwrap();
    assert!(changed.contains("no fit for `kept=two`"), "{changed}");
    // Without a target: at the grid's largest point.
    let mut plain = new.clone();
    plain.target = None;
    plain.variants[0].sweep.target = None;
    plain.record_savings();
    let notes = saving_notes(&plain, None);
    assert!(
        notes[0].starts_with(
            "kept=two saves no memory at the sweep's largest point (batch=2, layers=3, seq=24)"
        ),
        "{notes:?}"
    );
}

/// A step whose optimizer step holds the peak in the grid (a large fixed part) while
/// backward costs 8 times as much per token: the target, far along `seq`, has its peak
/// in backward.
fn crossing_run(b: u64, s: u64) -> GridRun {
    let optimizer_step = 1_000_000 + 64 * b * s;
    let backward = 40_000 + 512 * b * s;
    GridRun {
        point: Point::from([("batch".into(), b), ("seq".into(), s)]),
        peak_bytes: optimizer_step.max(backward),
        category_peaks: CategoryBytes::from([
            (Category::Parameters, 40_000),
            (Category::Activations, 448 * b * s),
        ]),
        phase_peaks: BTreeMap::from([
            (Phase::Backward, backward),
            (Phase::OptimizerStep, optimizer_step),
        ]),
        phase_temporaries: BTreeMap::new(),
        phase_moments: Default::default(),
        peak_outside_phases: false,
        pool: None,
    }
}

#[test]
fn the_peak_far_outside_is_the_largest_phase_there_and_its_move_is_said() {
    let grid = Grid::new([("batch", vec![1, 2, 3]), ("seq", vec![8, 16, 24])]).unwrap();
    let runs: Vec<GridRun> = grid
        .points()
        .iter()
        .map(|p| crossing_run(p["batch"], p["seq"]))
        .collect();
    let sweep = Sweep::fit(&grid, &runs).unwrap();
    let target = Point::from([("batch".into(), 3), ("seq".into(), 4096)]);
    let e = sweep.estimate(&target, 1).unwrap();
    // By hand: the larger of the two phases' formulas at the target.
    let (optimizer_step, backward) = (1_000_000 + 64 * 3 * 4096, 40_000 + 512 * 3 * 4096);
    assert!(backward > optimizer_step);
    assert_eq!(e.peak_bytes, backward);
    assert_eq!(e.peak_phase.as_deref(), Some("backward"));
    // In the grid the optimizer step holds it; along seq (batch 3), backward passes it
    // above 1,344 × seq > 960,000, from seq = 715 on.
    let m = sweep.peak_move(&target).unwrap().expect("the peak moves");
    assert_eq!(
        (m.from.as_str(), m.to.as_str()),
        ("optimizer_step", "backward")
    );
    assert_eq!(m.above, Some(("seq".to_owned(), 715)));
    assert_eq!(
        m.to_string(),
        "the peak moves from optimizer_step to backward above seq ≈ 714"
    );
    // Inside the grid nothing moves; two axes away, the move is said without a value.
    assert_eq!(sweep.peak_move(&point2(2, 16)).unwrap(), None);
    let both = sweep.peak_move(&point2(64, 4096)).unwrap().unwrap();
    assert_eq!(both.above, None);
    assert!(
        both.to_string()
            .contains("at the grid's largest point, batch=3, seq=24"),
        "{both}"
    );
    // The largest batch at seq 4096 within 64 MiB: backward's, by hand.
    let room = 64u64 << 20;
    let at = point2(1, 4096);
    let solved = sweep
        .solve_by(&at, "batch", 1, |e| Ok(e.peak_bytes <= room))
        .unwrap();
    assert_eq!(solved, Some((room - 40_000) / (512 * 4096)));
}

fn point2(b: u64, s: u64) -> Point {
    Point::from([("batch".into(), b), ("seq".into(), s)])
}

#[test]
fn a_figure_that_falls_beyond_the_grid_is_flagged_there() {
    let at = point(8, 4096, 32);
    // Every figure of the model grows with every axis: nothing falls.
    let clean = Model::of(64).sweep().estimate(&at, 2 << 20).unwrap();
    assert!(clean.falls.is_empty(), "{:?}", clean.falls);
    assert!(!clean.flagged.contains(&"inputs".to_owned()));
    // Inputs that shrink with seq² on the grid (50,000 B less 40 B × seq², plus
    // 8 B × batch·seq): fitted exactly, unflagged on the grid, and negative far out.
    let inputs = |b: u64, s: u64| 8 * b * s + 50_000 - 40 * s * s;
    let sweep = Model::of(64).sweep_with(|run, b, s, _| {
        run.category_peaks[Category::Inputs] = inputs(b, s);
    });
    assert!(
        !sweep.figures["inputs"].flagged(),
        "{:?}",
        sweep.figures["inputs"]
    );
    let e = sweep.estimate(&at, 2 << 20).unwrap();
    let falls = &e.falls["inputs"];
    // The grid's corner below the target, and the fit's own values there and here.
    assert_eq!(falls.corner, point(2, 24, 3));
    assert_eq!(falls.corner_bytes, inputs(2, 24));
    assert!(falls.bytes < falls.corner_bytes, "{falls:?}");
    assert!(e.flagged.contains(&"inputs".to_owned()), "{:?}", e.flagged);
    // Inside the grid nothing falls below a corner: no such flag.
    let inside = sweep.estimate(&point(2, 16, 3), 2 << 20).unwrap();
    assert!(inside.falls.is_empty());
}

/// A prediction beyond the grid that rests on a negative term nothing covers (a block
/// of 20,000 B less 5 B × seq², which no tensor gives: negative at every batch) by
/// more than 2% is flagged there, with the term and what it takes away; inside the
/// grid, and where the term takes away less, it is not.
#[test]
fn a_prediction_resting_on_a_negative_term_nothing_covers_is_flagged_there() {
    let inputs = |b: u64, s: u64| 1000 * b * s + 20_000 - 5 * s * s;
    let sweep = Model::of(64).sweep_with(|run, b, s, _| {
        run.category_peaks[Category::Inputs] = inputs(b, s);
    });
    let fit = &sweep.figures["inputs"];
    assert_eq!(
        fit.terms.to_string(),
        "19.53 KiB + 1000 B × batch·seq - 5 B × seq²"
    );
    assert!(!fit.flagged(), "{fit:?}");
    // 4% of the prediction at seq 64: flagged, and it does not fall.
    let at = point(8, 64, 32);
    let e = sweep.estimate(&at, 2 << 20).unwrap();
    assert!(e.falls.is_empty(), "{:?}", e.falls);
    let n = &e.negative["inputs"];
    assert_eq!(n.term, "-5 B × seq²");
    assert_eq!(n.covers, None);
    assert_eq!(n.bytes, 5 * 64 * 64);
    assert_eq!(e.category_bytes[&Category::Inputs], inputs(8, 64));
    assert!(e.flagged.contains(&"inputs".to_owned()), "{:?}", e.flagged);
    // Inside the grid it is exact: no such flag.
    let inside = sweep.estimate(&point(2, 16, 3), 2 << 20).unwrap();
    assert!(inside.negative.is_empty(), "{:?}", inside.negative);
    // At batch 64 and seq 32 the term takes away 0.25%: within 2%, not flagged.
    let wide = sweep.estimate(&point(64, 32, 3), 2 << 20).unwrap();
    assert!(wide.negative.is_empty(), "{:?}", wide.negative);
}

/// A figure fitted without its axis's smallest level is checked for cover from the next
/// level up, as its fit was: `100 B × batch·seq − 150 B × seq` is negative at batch 1
/// and a tensor's offset from batch 2 on.
#[test]
fn a_figure_fitted_without_a_level_is_covered_from_the_next() {
    let inputs = |b: u64, s: u64| 100 * b * s + 5000 - 150 * s;
    let mut sweep = Model::of(64).sweep_with(|run, b, s, _| {
        run.category_peaks[Category::Inputs] = inputs(b, s);
    });
    assert_eq!(
        sweep.figures["inputs"].terms.to_string(),
        "4.88 KiB + 100 B × batch·seq - 150 B × seq"
    );
    let at = point(8, 64, 32);
    let e = sweep.estimate(&at, 2 << 20).unwrap();
    assert_eq!(e.negative["inputs"].bytes, 150 * 64);
    sweep.fitted_without.insert(
        "inputs".to_owned(),
        vramtest_model::refit::Without {
            axis: "batch".to_owned(),
            level: 1,
            with_ppm: 0,
            level_miss_ppm: 0,
        },
    );
    let e = sweep.estimate(&at, 2 << 20).unwrap();
    assert!(e.negative.is_empty(), "{:?}", e.negative);
}

/// A phase is read in the peak it is a candidate of: a negative term nothing covers
/// that takes away 4% of a phase predicted far below the peak cannot make it the peak,
/// and is not flagged; where it takes away over 2% of the peak, the phase is flagged,
/// and with it the peak.
#[test]
fn a_phases_negative_term_is_weighed_against_the_peak() {
    let step = |b: u64, s: u64| 1000 * b * s + 20_000 - 5 * s * s;
    let sweep = Model::of(64).sweep_with(|run, b, s, _| {
        run.phase_peaks.insert(Phase::OptimizerStep, step(b, s));
    });
    let phase = "phase optimizer_step".to_owned();
    assert_eq!(
        sweep.figures[&phase].terms.to_string(),
        "19.53 KiB + 1000 B × batch·seq - 5 B × seq²"
    );
    // 20,480 B of its own 511,520 B, and of the forward pass's 18 MiB.
    let far = sweep.estimate(&point(8, 64, 32), 2 << 20).unwrap();
    assert_eq!(far.peak_phase.as_deref(), Some("forward"));
    assert!(!far.negative.contains_key(&phase), "{:?}", far.negative);
    assert!(far.flagged_under_peak().is_empty(), "{:?}", far.flagged);
    // One layer, batch 1: the forward pass holds about 85 KiB, and 20,480 B of it is
    // over 2%.
    let small = sweep.estimate(&point(1, 64, 1), 2 << 20).unwrap();
    assert_eq!(small.peak_phase.as_deref(), Some("forward"));
    assert_eq!(small.negative[&phase].bytes, 5 * 64 * 64);
    assert_eq!(small.flagged_under_peak(), [phase.as_str()]);
}

/// What the pool reserves beyond the allocated peak is its rounding and cache, no sum
/// of tensors: a fit of it whose products of axes outgrow the allocation far outside
/// the grid is held at the share of the allocated peak it reserves at the grid's
/// corner below the point, and flagged there; within the grid it is the fit's.
#[test]
fn the_pools_reservation_is_held_at_the_grids_share_far_outside_it() {
    let model = Model::of(64);
    // A reservation that grows as batch²·seq² while the peak grows as batch·seq²·layers:
    // exact on the grid, and far out it would reserve many times the allocation.
    let over = |b: u64, s: u64| 3 * b * b * s * s;
    let sweep = model.sweep_with(|run, b, s, _| {
        let allocated = run.peak_bytes + 512;
        run.pool = Some(PoolPeaks {
            allocated_bytes: allocated,
            reserved_bytes: allocated + over(b, s),
        });
    });
    let granule = 2 << 20;

    // Within the grid: the fit's own prediction.
    let inside = sweep.estimate(&point(2, 16, 2), granule).unwrap();
    let allocated = inside.allocated_bytes.unwrap();
    assert_eq!(allocated, model.run(2, 16, 2).peak_bytes + 512);
    let reserved = (allocated + over(2, 16)).max(allocated.div_ceil(granule) * granule);
    assert_eq!(inside.reserved_bytes, Some(reserved));
    assert!(inside.pool_held.is_none());
    assert!(
        !inside
            .flagged
            .iter()
            .any(|f| f == "reserved over allocated")
    );

    // Far out: the corner's share of the allocated peak, computed here from the model.
    let at = point(64, 512, 4);
    let e = sweep.estimate(&at, granule).unwrap();
    let allocated = e.allocated_bytes.unwrap();
    assert_eq!(allocated, model.run(64, 512, 4).peak_bytes + 512);
    let corner_allocated = model.run(2, 24, 3).peak_bytes + 512;
    let held = (u128::from(allocated) * u128::from(over(2, 24)))
        .div_ceil(u128::from(corner_allocated)) as u64;
    // Batch has two values, so the fit is linear in it (b² = 3b − 2 on {1, 2}).
    let fitted = 9 * 64 * 512 * 512 - 6 * 512 * 512;
    assert!(fitted > held, "the fit would reserve more than the share");
    let rounded = allocated.div_ceil(granule) * granule;
    assert_eq!(e.reserved_bytes, Some((allocated + held).max(rounded)));
    let h = e.pool_held.as_ref().expect("held at the corner's share");
    assert_eq!(h.corner, point(2, 24, 3));
    assert_eq!((h.fitted_bytes, h.held_bytes), (fitted, held));
    assert!(e.flagged.iter().any(|f| f == "reserved over allocated"));
}

/// A step whose backward pass first frees the activations (64 B per batch·seq·layer),
/// then makes the gradients (1 KiB per layer, as the parameters): its peak is its
/// start on one side of `64·batch·seq = 1024`, its end on the other, and the grid
/// holds both. Each moment is a sum of tensors; their maximum is no polynomial.
fn free_then_grow(b: u64, s: u64, l: u64, moments: bool) -> GridRun {
    let (params, act, grads) = (1024 * l, 64 * b * s * l, 1024 * l);
    let start = params + act;
    let end = params + grads;
    let mut categories = CategoryBytes::default();
    categories[Category::Parameters] = params;
    categories[Category::Activations] = act;
    categories[Category::Gradients] = grads;
    let backward = BTreeMap::from([(Category::Gradients, end), (Category::Activations, start)]);
    GridRun {
        point: point(b, s, l),
        peak_bytes: start.max(end),
        category_peaks: categories,
        phase_peaks: BTreeMap::from([
            (Phase::Params, params),
            (Phase::Forward, start),
            (Phase::Backward, start.max(end)),
        ]),
        phase_temporaries: BTreeMap::new(),
        phase_moments: if moments {
            BTreeMap::from([
                (
                    Phase::Params,
                    BTreeMap::from([(Category::Parameters, params)]),
                ),
                (
                    Phase::Forward,
                    BTreeMap::from([(Category::Activations, start)]),
                ),
                (Phase::Backward, backward),
            ])
        } else {
            BTreeMap::new()
        },
        peak_outside_phases: false,
        pool: None,
    }
}

/// A grid holding both sides of [`free_then_grow`]'s switch.
fn free_then_grow_grid() -> Grid {
    Grid::new([
        ("batch", vec![1, 2, 4]),
        ("seq", vec![4, 8, 16]),
        ("layers", vec![1, 2, 3]),
    ])
    .unwrap()
}

/// [`free_then_grow`] over `grid`, its backward pass peaking at its start everywhere:
/// the total when the gradients are complete is `complete` (at batch, seq and layers),
/// below the start at every point.
fn start_held_with(grid: &Grid, complete: impl Fn(u64, u64, u64) -> u64) -> Vec<GridRun> {
    (grid.points().iter())
        .map(|p| {
            let (b, s, l) = (p["batch"], p["seq"], p["layers"]);
            let mut run = free_then_grow(b, s, l, true);
            let moments = run.phase_moments.get_mut(&Phase::Backward).unwrap();
            moments.insert(Category::Gradients, complete(b, s, l));
            let start = moments[&Category::Activations];
            assert!(complete(b, s, l) < start);
            run.phase_peaks.insert(Phase::Backward, start);
            run.peak_bytes = start;
            run
        })
        .collect()
}

#[test]
fn a_phase_whose_peak_moves_between_moments_is_predicted_as_their_maximum() {
    let grid = free_then_grow_grid();
    let runs = |moments: bool| -> Vec<GridRun> {
        grid.points()
            .iter()
            .map(|p| free_then_grow(p["batch"], p["seq"], p["layers"], moments))
            .collect()
    };
    let sweep = Sweep::fit(&grid, &runs(true)).unwrap();
    assert!(
        sweep
            .figures
            .contains_key("phase backward when activations peak")
            && sweep
                .figures
                .contains_key("phase backward when gradients peak")
            && !sweep.figures.contains_key("phase backward"),
        "{:?}",
        sweep.figures.keys()
    );
    // A single moment gives no maximum: the forward pass is fitted whole.
    assert!(sweep.figures.contains_key("phase forward"));
    // A snapshot holding it is one a release before moments refuses.
    assert!(sweep.has_moments());
    // Far outside the grid on either side of the switch, from the formulas above.
    for (b, s, l) in [(64, 2048, 24), (1, 1, 96), (8, 4, 48)] {
        let e = sweep.estimate(&point(b, s, l), 1).unwrap();
        let (start, end) = (1024 * l + 64 * b * s * l, 2048 * l);
        assert_eq!(e.peak_bytes, start.max(end), "at {b}, {s}, {l}");
        let from = if start >= end {
            "activations"
        } else {
            "gradients"
        };
        assert_eq!(
            e.peak_from.as_deref(),
            Some(format!("phase backward when {from} peak").as_str())
        );
        assert_eq!(e.peak_phase.as_deref(), Some("backward"));
        assert!(e.flagged.is_empty(), "{:?}", e.flagged);
    }
    // Without the moments, one polynomial through the maximum cannot be trusted there.
    let whole = Sweep::fit(&grid, &runs(false)).unwrap();
    assert!(!whole.has_moments());
    let e = whole.estimate(&point(64, 2048, 24), 1).unwrap();
    let right = 1024 * 24 + 64 * 64 * 2048 * 24;
    assert!(
        !e.flagged.is_empty() || e.peak_bytes != right,
        "the whole phase's fit was right and trusted: {e:?}"
    );
}

#[test]
fn a_phase_whose_moment_misses_is_fitted_whole_where_the_whole_does_not() {
    // The backward pass peaks at its start everywhere (parameters and activations); the
    // moment the gradients are complete comes with one scratch buffer or another, the
    // larger of 32 B per batch·seq·layer and 60 B per seq·layer: a maximum of two
    // regimes, below the start at every point.
    let grid = Grid::new([
        ("batch", vec![1, 2, 3, 4]),
        ("seq", vec![4, 8, 16]),
        ("layers", vec![1, 2, 3]),
    ])
    .unwrap();
    let runs = start_held_with(&grid, |b, s, l| 1024 * l + (32 * b * s * l).max(60 * s * l));
    let sweep = Sweep::fit(&grid, &runs).unwrap();
    let names: Vec<&String> = sweep.figures.keys().collect();
    assert!(sweep.figures.contains_key("phase backward"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("phase backward when")),
        "{names:?}"
    );
    let e = sweep.estimate(&point(64, 2048, 24), 1).unwrap();
    assert_eq!(e.peak_bytes, 1024 * 24 + 64 * 64 * 2048 * 24);
    assert!(e.flagged.is_empty(), "{:?}", e.flagged);
}

#[test]
fn a_moment_in_doubt_at_the_target_gives_way_to_the_whole_phase() {
    // The backward pass peaks at its start everywhere (parameters and activations). The
    // moment the gradients are complete is below it at every point, and exact on the
    // grid through a negative `seq²` term nothing covers: unflagged on the grid, but at
    // a target far along `seq` it takes away over 2% of the peak.
    let grid = free_then_grow_grid();
    let runs = start_held_with(&grid, |b, s, l| 1024 * l + 32 * b * s * l - 2 * s * s);
    let target = point(64, 2048, 24);
    let start = 1024 * 24 + 64 * 64 * 2048 * 24;
    // Without the target, the split stands, and the target's estimate is flagged for it.
    let split = Sweep::fit(&grid, &runs).unwrap();
    let moment = "phase backward when gradients peak";
    assert!(split.figures.contains_key(moment));
    assert!(split.figures[moment].flag(&grid).is_none());
    let e = split.estimate(&target, 1).unwrap();
    assert!(e.negative.contains_key(moment), "{e:?}");
    assert!(e.flagged.iter().any(|f| f == moment), "{:?}", e.flagged);
    // Toward the target, the whole phase (its start throughout) is fitted instead.
    let sweep = Sweep::fit_toward(&grid, &runs, Some(&target)).unwrap();
    let names: Vec<&String> = sweep.figures.keys().collect();
    assert!(sweep.figures.contains_key("phase backward"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("phase backward when")),
        "{names:?}"
    );
    let e = sweep.estimate(&target, 1).unwrap();
    assert_eq!(e.peak_bytes, start);
    assert!(e.flagged.is_empty(), "{:?}", e.flagged);
    // A target within the grid's range, or one of other axes, changes nothing.
    for at in [point(4, 16, 3), Point::from([("batch".to_owned(), 64)])] {
        let same = Sweep::fit_toward(&grid, &runs, Some(&at)).unwrap();
        assert_eq!(same.figures, split.figures);
    }
}

/// [`free_then_grow`]'s step as an event stream, through the ledger: two iterations of
/// a forward pass that keeps 64 B per batch·seq·layer and a backward pass that first
/// frees it, then makes 1 KiB of gradients per layer (released after the step).
fn free_then_grow_run(b: u64, s: u64, l: u64) -> GridRun {
    use vramtest_model::Event::{self, IterationEnd, IterationStart, PhaseEnd, PhaseStart};
    let alloc = |id, bytes| Event::Alloc { id, bytes };
    let free = |id| Event::Free { id };
    let mut events = vec![PhaseStart(Phase::Params), alloc(1, 1024 * l), PhaseEnd];
    for i in 0..2u32 {
        let id = 10 + 10 * u64::from(i);
        events.extend([
            IterationStart(i),
            PhaseStart(Phase::Forward),
            alloc(id, 64 * b * s * l),
            PhaseEnd,
            PhaseStart(Phase::Backward),
            free(id),
            alloc(id + 1, 1024 * l),
            PhaseEnd,
            free(id + 1),
            IterationEnd,
        ]);
    }
    GridRun::of_profile(point(b, s, l), &vramtest_model::profile(&events), None)
}

#[test]
fn the_ledgers_moments_give_the_phases_peak_and_predict_it_far_outside_the_grid() {
    let grid = free_then_grow_grid();
    let runs: Vec<GridRun> = (grid.points().iter())
        .map(|p| free_then_grow_run(p["batch"], p["seq"], p["layers"]))
        .collect();
    let sweep = Sweep::fit(&grid, &runs).unwrap();
    let names: Vec<&String> = sweep.figures.keys().collect();
    assert!(
        sweep
            .figures
            .contains_key("phase backward when activations peak")
            && sweep
                .figures
                .contains_key("phase backward when gradients peak"),
        "{names:?}"
    );
    for (b, s, l) in [(64, 2048, 24), (1, 1, 96)] {
        let e = sweep.estimate(&point(b, s, l), 1).unwrap();
        let (start, end) = (1024 * l + 64 * b * s * l, 2048 * l);
        assert_eq!(e.peak_bytes, start.max(end), "at {b}, {s}, {l}");
        assert_eq!(e.peak_phase.as_deref(), Some("backward"));
        assert!(e.flagged.is_empty(), "{:?}", e.flagged);
    }
}
