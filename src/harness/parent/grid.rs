//! A test's points: one run, the sizes of a batch sweep (`batch = [..]`), or every
//! combination of named axes (`axes(..)`); a sweep fitted (a batch sweep is a sweep
//! over the one axis `batch`) and its target predicted.

use crate::harness::protocol::RunPoint;
use crate::harness::registry::TestDef;
use vramtest_model::Profile;
use vramtest_model::axes::{AxesError, Flag, Grid, Point};
use vramtest_model::cpu_time::CpuTimeRatio;
use vramtest_model::levers::{LeverAxes, LeverVariant};
use vramtest_model::pool::PoolPeaks;
use vramtest_model::regimes::Regime;
use vramtest_model::sweep::{GridRun, Sweep, VariantSweep};

/// The grid of `def`'s named axes (`None` without `axes(..)`), in the attribute's
/// order; the macro checked it with the same rules.
fn named_grid(def: &TestDef) -> Option<Result<Grid, AxesError>> {
    let axes = def.options.axes;
    (!axes.is_empty()).then(|| {
        Grid::new(
            axes.iter()
                .map(|&(k, v)| (k, v.iter().map(|&n| n as u64).collect::<Vec<_>>())),
        )
    })
}

/// The grid `def` sweeps: its named axes, or its batch sizes as the one axis `batch`
/// (`None` without a sweep).
fn sweep_grid(def: &TestDef) -> Option<Result<Grid, AxesError>> {
    named_grid(def).or_else(|| {
        let batch = def.options.batch;
        (!batch.is_empty()).then(|| {
            Grid::new([(
                vramtest_model::sweep::BATCH,
                batch.iter().map(|&b| b as u64).collect::<Vec<_>>(),
            )])
        })
    })
}

/// Why a sweep over named axes has no fit; the report says it in words, once.
#[derive(Debug, thiserror::Error)]
pub(super) enum GridError {
    /// The grid, or a figure that could not be fitted on it.
    #[error(transparent)]
    Fit(#[from] AxesError),
    /// The target (`target(..)`) could not be predicted.
    #[error("target: {0}")]
    Target(AxesError),
}

/// The categorical axes of `def` (checked by the macro with the same rules).
pub(super) fn lever_axes(def: &TestDef) -> LeverAxes {
    LeverAxes::new(
        def.options
            .levels
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.iter().map(|&l| l.to_owned()).collect()))
            .collect(),
    )
    .expect("the attribute checked the levels")
}

/// A combination of levels in the attribute's order, as a point carries it.
pub(super) fn in_attribute_order(def: &TestDef, variant: &LeverVariant) -> Vec<(String, String)> {
    def.options
        .levels
        .iter()
        .map(|&(k, _)| (k.to_owned(), variant[k].clone()))
        .collect()
}

/// The points `def` runs at, in order: the first is the one its snapshot's figures
/// describe. With categorical axes, every combination of levels (the baseline first)
/// runs the whole numeric grid.
pub(super) fn points(def: &TestDef) -> Result<Vec<RunPoint>, AxesError> {
    if let Some(grid) = named_grid(def) {
        let grid = grid?;
        let in_order = |p: &Point| {
            let axes = grid.axes().iter();
            RunPoint::axes(
                axes.map(|a| (a.name.clone(), p[&a.name] as usize))
                    .collect(),
            )
        };
        let numeric: Vec<RunPoint> = grid.points().iter().map(in_order).collect();
        return Ok(lever_axes(def)
            .combinations()
            .iter()
            .flat_map(|variant| {
                let levels = in_attribute_order(def, variant);
                numeric
                    .iter()
                    .map(move |p| p.clone().with_levels(levels.clone()))
            })
            .collect());
    }
    let batch = def.options.batch;
    if batch.is_empty() {
        return Ok(vec![RunPoint::batch(1)]);
    }
    Ok(batch.iter().map(|&b| RunPoint::batch(b)).collect())
}

/// How a run is named in messages: the test, with its point when it is one of several.
pub(super) fn label(name: &str, def: &TestDef, point: &RunPoint) -> String {
    if !def.options.axes.is_empty() {
        format!("{name} ({})", point.label(" "))
    } else if !def.options.batch.is_empty() {
        format!("{name} (batch {})", point.batch)
    } else {
        name.to_owned()
    }
}

/// The point alone, as progress names it: `batch=2 seq=16`, `batch=256`, or empty for
/// a test without a sweep.
pub(super) fn point_name(def: &TestDef, point: &RunPoint) -> String {
    if !def.options.axes.is_empty() {
        point.label(" ")
    } else if !def.options.batch.is_empty() {
        format!("batch={}", point.batch)
    } else {
        String::new()
    }
}

/// One measured point of a sweep, as the fit reads it.
pub(super) fn grid_run(point: &RunPoint, profile: &Profile, pool: Option<PoolPeaks>) -> GridRun {
    let point = match point.axes.as_slice() {
        [] => [(vramtest_model::sweep::BATCH.to_owned(), point.batch as u64)].into(),
        axes => to_point(axes),
    };
    GridRun::of_profile(point, profile, pool)
}

fn to_point(axes: &[(impl AsRef<str>, usize)]) -> Point {
    axes.iter()
        .map(|(k, v)| (k.as_ref().to_owned(), *v as u64))
        .collect()
}

/// Fits a sweep (named axes, or a batch sweep's one axis) and predicts its target;
/// `None` for a test without a sweep. `runs` go with their points' levels: each
/// combination of levels is fitted on its own, the baseline's as the sweep, the
/// others as its variants; the target is predicted for every combination its levels
/// (`target(precision = "bf16", ..)`) match, all of them when it names none.
/// `granule`: the CUDA pool's, for the reserved bytes (see [`Sweep::estimate`]).
pub(super) fn fit(
    def: &TestDef,
    runs: &[(Vec<(String, String)>, GridRun)],
    granule: u64,
) -> Result<Option<Sweep>, GridError> {
    let Some(grid) = sweep_grid(def) else {
        return Ok(None);
    };
    let grid = grid?;
    let levers = lever_axes(def);
    let target_levels: LeverVariant = def
        .options
        .target_levels
        .iter()
        .map(|&(k, l)| (k.to_owned(), l.to_owned()))
        .collect();
    let mut fitted = Vec::new();
    for variant in levers.combinations() {
        let target = def.options.target;
        let named = target_levels.iter().all(|(k, l)| variant.get(k) == Some(l));
        let at = (!target.is_empty() && named).then(|| to_point(target));
        let mut sweep = Sweep::fit_toward(&grid, &runs_of(def, runs, &variant), at.as_ref())?;
        if let Some(at) = &at {
            sweep.target = Some(sweep.target_at(at, granule).map_err(GridError::Target)?);
        }
        fitted.push((variant, sweep));
    }
    let mut fitted = fitted.into_iter();
    let (_, mut sweep) = fitted.next().expect("the baseline combination");
    sweep.levels = levers.axes().clone();
    sweep.variants = fitted
        .map(|(variant, sweep)| VariantSweep {
            variant,
            sweep,
            saving: None,
            cpu_time_ratio: CpuTimeRatio::default(),
        })
        .collect();
    sweep.record_savings();
    Ok(Some(sweep))
}

/// A point's levels of the categorical axes (as [`fit`] reads them) and the CPU time
/// its step took, in microseconds, when measured.
pub(super) type PointTime = (Vec<(String, String)>, Option<u64>);

/// Whether a point's `levels` (as [`fit`] reads them) are the combination `variant`.
pub(super) fn is_of(levels: &[(String, String)], variant: &LeverVariant) -> bool {
    levels.len() == variant.len() && levels.iter().all(|(k, l)| variant.get(k) == Some(l))
}

/// Sets each combination of levels' CPU time ratio on `sweep`'s variants: the sum of
/// its points' CPU step times over the baseline's, every combination having run the
/// same numeric grid. `times` holds each point's levels (as [`fit`] reads them) and
/// CPU time; a combination with a point whose time is unknown has no ratio.
pub(super) fn set_cpu_time_ratios(sweep: &mut Sweep, times: &[PointTime]) {
    let total = |variant: &LeverVariant| -> Option<u64> {
        let of_variant = times.iter().filter(|(levels, _)| is_of(levels, variant));
        let mut sum = 0u64;
        let mut any = false;
        for (_, micros) in of_variant {
            sum = sum.checked_add((*micros)?)?;
            any = true;
        }
        any.then_some(sum)
    };
    let baseline: LeverVariant = LeverAxes::new(sweep.levels.clone())
        .map(|axes| axes.baseline())
        .unwrap_or_default();
    let base = total(&baseline);
    for v in &mut sweep.variants {
        v.cpu_time_ratio = CpuTimeRatio::of(total(&v.variant), base);
    }
}

/// Below this share of the largest peak (1 in 10,000: 0.01%), a flagged figure is not
/// noted: a few hundred KB of thread-pool queues that miss their fit by 26,000% change
/// no verdict and no prediction that matters.
const NOTE_SHARE: u64 = 10_000;

/// The largest of `fit`'s predictions at the grid's points.
fn largest(fit: &vramtest_model::axes::Fit, grid: &Grid) -> Option<u64> {
    grid.points()
        .iter()
        .filter_map(|p| fit.predict(p).ok().map(|p| p.bytes))
        .max()
}

/// The largest predicted peak at the grid's points; `None` when the sweep cannot
/// predict it (a sweep without every category's figure).
fn largest_peak(sweep: &Sweep, grid: &Grid) -> Option<u64> {
    let points = grid.points();
    // Every figure predicts at one point, so the peak alone is scanned.
    sweep.estimate(points.first()?, 1).ok()?;
    points
        .iter()
        .map(|p| sweep.peak_at(p).ok())
        .collect::<Option<Vec<u64>>>()?
        .into_iter()
        .max()
}

/// A note per figure of `sweep` whose predictions are flagged, never trusted silently:
/// its best model misses a held-out point by more than 2%, or it interpolates every
/// combination of the values of the axes it uses
/// ([`vramtest_model::axes::Fit::interpolation`]). The pool figures' own fallbacks are
/// documented (see [`vramtest_model::sweep::Estimate`]) and not noted, nor is a figure
/// that stays under 0.01% of the largest peak ([`NOTE_SHARE`]), nor one whose flag the
/// committed snapshot's sweep `old` already records ([`same_flag`]): a note is said
/// once per change, not on every run.
///
/// Each combination of levels is fitted on its own, so each is looked at, and a note
/// names its combination beside the test (`step [precision=bf16]: …`; the baseline's
/// too), against the same combination of `old`.
pub(super) fn flagged_notes(name: &str, sweep: &Sweep, old: Option<&Sweep>) -> Vec<String> {
    sweep
        .combinations()
        .into_iter()
        .flat_map(|(variant, own)| {
            let label = combination_label(name, &variant);
            flagged_in(&label, own, old.and_then(|o| o.variant(&variant)))
        })
        .collect()
}

/// The test, with its combination of levels when it has one (`step [precision=bf16]`).
pub(super) fn combination_label(name: &str, variant: &LeverVariant) -> String {
    if variant.is_empty() {
        name.to_owned()
    } else {
        format!("{name} [{}]", vramtest_model::sweep::show_variant(variant))
    }
}

/// [`flagged_notes`] of one combination's fit, `name` naming it.
fn flagged_in(name: &str, sweep: &Sweep, old: Option<&Sweep>) -> Vec<String> {
    let grid = sweep.grid().ok();
    let noteworthy = noteworthy(sweep);
    sweep
        .figures
        .iter()
        .filter(|(figure, fit)| noteworthy(figure, fit))
        .filter_map(|(figure, fit)| Some((figure, fit.flag(grid.as_ref()?)?)))
        .filter(|(figure, flag)| !old.is_some_and(|old| same_flag(old, figure, flag)))
        .map(|(figure, flag)| match flag {
            Flag::Missed { ppm } => format!(
                "{name}: `{figure}` misses a held-out point of the grid by {:.2}% (over 2%): its predictions are flagged (`show --at` marks them), never trusted silently; the grid may hold two regimes (see the guide's \"Predicting the full size\")",
                ppm as f64 / 10_000.0
            ),
            Flag::Interpolates(i) => {
                let axes = i.axes_in_words();
                format!(
                    "{name}: `{figure}` has as many terms as the grid has combinations of the values of {axes} ({}): it passes through every one, and no held-out point checks its form along {axes}; its predictions are flagged (`show --at` marks them), never trusted silently; {} to check it",
                    i.combinations,
                    i.remedy()
                )
            }
        })
        .collect()
}

/// Whether a flagged figure of `sweep` is worth a note: not the pool's alignment or
/// reservation beyond the peak (a flagged fit of those is not extrapolated), and not a
/// figure under [`NOTE_SHARE`]'s share of the peak.
fn noteworthy(sweep: &Sweep) -> impl Fn(&str, &vramtest_model::axes::Fit) -> bool {
    let grid = sweep.grid().ok();
    let peak = grid.as_ref().and_then(|g| largest_peak(sweep, g));
    move |figure, fit| {
        let negligible = match (peak, grid.as_ref()) {
            (Some(peak), Some(grid)) => {
                largest(fit, grid).is_some_and(|b| b.saturating_mul(NOTE_SHARE) < peak)
            }
            _ => false,
        };
        !vramtest_model::sweep::is_pool_figure(figure) && !negligible
    }
}

/// The runs of one combination of levels.
fn runs_of(
    def: &TestDef,
    runs: &[(Vec<(String, String)>, GridRun)],
    variant: &LeverVariant,
) -> Vec<GridRun> {
    let levels = in_attribute_order(def, variant);
    runs.iter()
        .filter(|(l, _)| *l == levels)
        .map(|(_, run)| run.clone())
        .collect()
}

/// Where each combination of levels' flagged figures miss: the level of an axis that
/// behaves unlike the others ([`vramtest_model::regimes`]), from the runs it was
/// fitted on. Empty where none explains a miss.
pub(super) fn regimes(
    def: &TestDef,
    runs: &[(Vec<(String, String)>, GridRun)],
    sweep: &Sweep,
) -> Vec<(LeverVariant, Regime)> {
    let mut found = Vec::new();
    for (variant, fitted) in sweep.combinations() {
        let of_variant = runs_of(def, runs, &variant);
        let noteworthy = noteworthy(fitted);
        let named =
            vramtest_model::regimes::regimes(fitted, &of_variant, &noteworthy).unwrap_or_default();
        found.extend(named.into_iter().map(|r| (variant.clone(), r)));
    }
    found
}

/// The notes on [`regimes`] whose figure's flag the committed snapshot `old` does
/// not already record, each naming its combination of levels when the sweep has some.
pub(super) fn regime_notes(
    name: &str,
    sweep: &Sweep,
    old: Option<&Sweep>,
    regimes: &[(LeverVariant, Regime)],
) -> Vec<String> {
    regimes
        .iter()
        .filter(|(variant, r)| {
            let old = old.and_then(|o| o.variant(variant));
            let flag = Flag::Missed { ppm: r.whole_ppm };
            !old.is_some_and(|old| same_flag(old, &r.figure, &flag))
        })
        .map(|(variant, r)| {
            if sweep.levels.is_empty() {
                format!("{name}: {r}")
            } else {
                format!(
                    "{name} ({}): {r}",
                    vramtest_model::sweep::show_variant(variant)
                )
            }
        })
        .collect()
}

/// Whether the sweep `old` flags `figure` the same way: a miss over 2% either way (by
/// however much: a noisy figure's miss varies from run to run), or the same
/// interpolation of the same axes.
fn same_flag(old: &Sweep, figure: &str, flag: &Flag) -> bool {
    let Some(grid) = old.grid().ok() else {
        return false;
    };
    match (old.figures.get(figure).and_then(|f| f.flag(&grid)), flag) {
        (Some(Flag::Missed { .. }), Flag::Missed { .. }) => true,
        (Some(Flag::Interpolates(a)), Flag::Interpolates(b)) => a == *b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use vramtest_model::axes::{Fit, Formula};

    #[test]
    fn each_combination_s_cpu_time_is_summed_over_the_grid_and_set_over_the_baseline_s() {
        let plain = || Sweep {
            axes: BTreeMap::from([("seq".to_owned(), vec![1, 2])]),
            figures: BTreeMap::new(),
            target: None,
            levels: Default::default(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        };
        let mut sweep = plain();
        sweep.levels = BTreeMap::from([
            ("kept".to_owned(), vec!["one".to_owned(), "two".to_owned()]),
            ("p".to_owned(), vec!["f32".to_owned(), "bf16".to_owned()]),
        ]);
        let variant = |kept: &str, p: &str| -> LeverVariant {
            [
                ("kept".to_owned(), kept.to_owned()),
                ("p".to_owned(), p.to_owned()),
            ]
            .into()
        };
        for (k, p) in [("one", "bf16"), ("two", "f32"), ("two", "bf16")] {
            sweep.variants.push(VariantSweep {
                variant: variant(k, p),
                sweep: plain(),
                saving: None,
                cpu_time_ratio: CpuTimeRatio::default(),
            });
        }
        // Levels in the attribute's order (`p` first), two points each.
        let levels = |kept: &str, p: &str| {
            vec![
                ("p".to_owned(), p.to_owned()),
                ("kept".to_owned(), kept.to_owned()),
            ]
        };
        let times = vec![
            (levels("one", "f32"), Some(300)),
            (levels("one", "f32"), Some(500)),
            (levels("one", "bf16"), Some(100)),
            (levels("one", "bf16"), Some(300)),
            (levels("two", "f32"), Some(1000)),
            (levels("two", "f32"), Some(1000)),
            (levels("two", "bf16"), Some(1000)),
            (levels("two", "bf16"), None),
        ];
        set_cpu_time_ratios(&mut sweep, &times);
        let ratio = |k, p| {
            let v = variant(k, p);
            let found = sweep.variants.iter().find(|s| s.variant == v).unwrap();
            found.cpu_time_ratio.get()
        };
        assert_eq!(ratio("one", "bf16"), Some(400.0 / 800.0));
        assert_eq!(ratio("two", "f32"), Some(2000.0 / 800.0));
        assert_eq!(ratio("two", "bf16"), None, "a point without a time");
    }

    #[test]
    fn a_flagged_figure_is_noted_and_the_pool_figures_are_not() {
        let fit = |ppm| Fit {
            terms: Formula::default(),
            loo_error_ppm: ppm,
            residue_bytes: 0,
        };
        let sweep = Sweep {
            axes: BTreeMap::from([("seq".to_owned(), vec![1, 2, 3])]),
            figures: BTreeMap::from([
                ("activations".to_owned(), fit(0)),
                ("temporaries".to_owned(), fit(20_001)),
                ("phase backward".to_owned(), fit(20_000)),
                (vramtest_model::sweep::ALLOCATED.to_owned(), fit(90_000)),
                (vramtest_model::sweep::RESERVED.to_owned(), fit(90_000)),
            ]),
            target: None,
            levels: Default::default(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        };
        let notes = flagged_notes("step", &sweep, None);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "step: `temporaries` misses a held-out point of the grid by 2.00% (over 2%)"
            ),
            "{}",
            notes[0]
        );
    }

    /// A bf16 fit flagged at 27% is noted as the f32 one is, and every note names its
    /// combination of levels.
    #[test]
    fn every_combination_s_flags_are_noted_naming_it() {
        let fit = |ppm| Fit {
            terms: Formula::default(),
            loo_error_ppm: ppm,
            residue_bytes: 0,
        };
        let plain = |activations: u64| Sweep {
            axes: BTreeMap::from([("seq".to_owned(), vec![1, 2, 3])]),
            figures: BTreeMap::from([("activations".to_owned(), fit(activations))]),
            target: None,
            levels: Default::default(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        };
        let mut sweep = plain(30_000);
        sweep.levels = BTreeMap::from([(
            "precision".to_owned(),
            vec!["f32".to_owned(), "bf16".to_owned()],
        )]);
        sweep.variants.push(VariantSweep {
            variant: [("precision".to_owned(), "bf16".to_owned())].into(),
            sweep: plain(270_000),
            saving: None,
            cpu_time_ratio: CpuTimeRatio::default(),
        });
        let notes = flagged_notes("step", &sweep, None);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "step [precision=f32]: `activations` misses a held-out point of the grid by 3.00%"
            ),
            "{}",
            notes[0]
        );
        assert!(
            notes[1].starts_with(
                "step [precision=bf16]: `activations` misses a held-out point of the grid by 27.00%"
            ),
            "{}",
            notes[1]
        );
        // Recorded already, at each level: nothing to say again.
        assert_eq!(
            flagged_notes("step", &sweep, Some(&sweep)),
            Vec::<String>::new()
        );
        // The bf16 flag is new against a snapshot whose bf16 fit was not flagged.
        let mut old = sweep.clone();
        old.variants[0].sweep = plain(10_000);
        let notes = flagged_notes("step", &sweep, Some(&old));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("step [precision=bf16]: "),
            "{}",
            notes[0]
        );
    }

    /// A flag is noted when the committed snapshot does not record it: new, or changed
    /// (a miss that was an interpolation); not again when it does, by whatever miss.
    #[test]
    fn a_flag_is_noted_once_per_change() {
        let fit = |ppm| Fit {
            terms: Formula::default(),
            loo_error_ppm: ppm,
            residue_bytes: 0,
        };
        let sweep = |temporaries: u64, workspace: u64| Sweep {
            axes: BTreeMap::from([("seq".to_owned(), vec![1, 2, 3])]),
            figures: BTreeMap::from([
                ("temporaries".to_owned(), fit(temporaries)),
                ("workspace".to_owned(), fit(workspace)),
            ]),
            target: None,
            levels: Default::default(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        };
        let now = sweep(268_930_000, 30_000);
        let figures = |notes: Vec<String>| -> Vec<String> {
            notes
                .iter()
                .map(|n| n.split('`').nth(1).unwrap().to_owned())
                .collect()
        };
        // No snapshot, or one without these flags: both noted.
        assert_eq!(
            figures(flagged_notes("step", &now, None)),
            ["temporaries", "workspace"]
        );
        let unflagged = sweep(0, 0);
        assert_eq!(
            figures(flagged_notes("step", &now, Some(&unflagged))),
            ["temporaries", "workspace"]
        );
        // The snapshot records both flags (by other misses): nothing to say again.
        assert!(flagged_notes("step", &now, Some(&sweep(260_000_000, 25_000))).is_empty());
        // One flag is new.
        assert_eq!(
            figures(flagged_notes("step", &now, Some(&sweep(268_930_000, 0)))),
            ["workspace"]
        );
    }

    #[test]
    fn a_figure_that_interpolates_its_axes_is_noted_with_them() {
        let grid = Grid::new([
            ("batch", vec![1, 2]),
            ("seq", vec![8, 16, 24]),
            ("layers", vec![1, 2]),
        ])
        .unwrap();
        let series = |f: fn(u64, u64) -> u64| -> Vec<(Point, u64)> {
            grid.points()
                .into_iter()
                .map(|p| {
                    let bytes = f(p["batch"], p["seq"]);
                    (p, bytes)
                })
                .collect()
        };
        // Bookkeeping that comes and goes with (batch, seq), the same at both layer
        // counts: no polynomial, fitted exactly through all 6 combinations, each point
        // predicted by its twin at the other layer count.
        let workspace = series(|b, s| {
            [0, 1871, 3391, 1871, 0, 5262][(b as usize - 1) * 3 + (s as usize / 8 - 1)]
        });
        let activations = series(|b, s| 64 * b * s + 512);
        let sweep = Sweep {
            axes: grid.to_map(),
            figures: BTreeMap::from([
                ("workspace".to_owned(), Fit::new(&grid, &workspace).unwrap()),
                (
                    "activations".to_owned(),
                    Fit::new(&grid, &activations).unwrap(),
                ),
            ]),
            target: None,
            levels: Default::default(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        };
        let notes = flagged_notes("step", &sweep, None);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "step: `workspace` has as many terms as the grid has combinations of the values of batch and seq (6): it passes through every one"
            ) && notes[0].ends_with("measure seq at a fourth value to check it"),
            "{}",
            notes[0]
        );
    }

    #[test]
    fn a_flagged_figure_under_a_ten_thousandth_of_the_peak_is_not_noted() {
        use vramtest_model::Category;
        let grid = Grid::new([("seq", vec![1, 2, 3, 4])]).unwrap();
        const GIB: u64 = 1 << 30;
        // Activations of 1 GiB per seq; a workspace of `workspace` bytes, its fit
        // flagged 26,893% off (as thread-pool queues can be).
        let sweep = |workspace: u64| {
            let mut figures = BTreeMap::new();
            for c in Category::ALL {
                let per_seq = match c {
                    Category::Activations => GIB,
                    _ => 0,
                };
                let fixed = if c == Category::Workspace {
                    workspace
                } else {
                    0
                };
                let series: Vec<(Point, u64)> = grid
                    .points()
                    .into_iter()
                    .map(|p| {
                        let bytes = per_seq * p["seq"] + fixed;
                        (p, bytes)
                    })
                    .collect();
                let mut fit = Fit::new(&grid, &series).unwrap();
                if c == Category::Workspace {
                    fit.loo_error_ppm = 268_930_000;
                }
                figures.insert(c.as_str().to_owned(), fit);
            }
            let peak: Vec<(Point, u64)> = grid
                .points()
                .into_iter()
                .map(|p| {
                    let bytes = GIB * p["seq"] + workspace;
                    (p, bytes)
                })
                .collect();
            figures.insert(
                vramtest_model::sweep::PEAK.to_owned(),
                Fit::new(&grid, &peak).unwrap(),
            );
            Sweep {
                axes: grid.to_map(),
                figures,
                target: None,
                levels: Default::default(),
                variants: Vec::new(),
                axial: Vec::new(),
                fitted_without: Default::default(),
                migrated: false,
            }
        };
        // The largest peak is 4 GiB + workspace; 0.01% of it is about 429.5 KB.
        assert_eq!(
            flagged_notes("step", &sweep(100_000), None),
            Vec::<String>::new()
        );
        assert_eq!(
            flagged_notes("step", &sweep(429_000), None),
            Vec::<String>::new()
        );
        let noted = flagged_notes("step", &sweep(430_000), None);
        assert_eq!(noted.len(), 1, "{noted:?}");
        assert!(
            noted[0]
                .starts_with("step: `workspace` misses a held-out point of the grid by 26893.00%"),
            "{}",
            noted[0]
        );
    }
}
