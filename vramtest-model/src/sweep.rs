//! A sweep over named axes (`#[vramtest(axes(batch = [2, 4], seq = [16, 32, 48]))]`):
//! every run's figures fitted with [`crate::axes`], a configuration nobody can run on a
//! CPU predicted from them (`show --at layers=32,seq=4096`), the largest value of an axis
//! that fits a GPU (`--solve batch`), a data-parallel projection (`--ranks 8 --shard
//! zero3`), and the target a test names (`target(layers = 32, ..)`) compared with the
//! snapshot's.
//!
//! # Figures
//!
//! Each run gives: the peak (`peak`), each category's own peak (`parameters`, …,
//! `untracked`), each phase's peak (`phase forward`, …) and, for a CPU run, what the
//! CUDA pool model's allocated peak adds to the peak (`allocated over peak`: each
//! block's alignment) and its reserved peak to the allocated one (`reserved over
//! allocated`: granules). A figure that
//! is a maximum over time changes which phase it comes from as the axes grow (the
//! optimizer step at small sequence lengths, the backward pass at long ones), so the
//! peak is predicted per phase and the maximum taken at the predicted point; when a run
//! peaked outside every phase, the peak is fitted as a whole. Temporaries, a maximum
//! over time too (the scores of attention in the forward pass, a gradient's scratch in
//! the backward pass), are predicted the same way from each phase's own peak of them
//! (`temporaries in forward`, …) when every run's temporaries peaked inside a phase.

use crate::axes::{AxesError, FigureFits, Fit, Flag, Grid, Interpolation, Point, predict_max};
use crate::axial::AxialPoint;
use crate::bytes::HumanBytes;
use crate::category::{Category, Phase};
use crate::cpu_time::CpuTimeRatio;
use crate::limit::Limit;
use crate::pool::PoolPeaks;
use crate::profile::{CategoryBytes, Profile};
use crate::refit::Without;
use num_rational::BigRational;
use num_traits::{Signed, ToPrimitive, Zero};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

pub mod coverage;
mod legacy;
mod phases;
pub mod saving_check;
pub use legacy::BATCH;
pub use phases::PeakMove;

/// The figure name of the whole peak.
pub const PEAK: &str = "peak";
/// The figure name of what the CUDA pool's allocated peak adds to the peak (each
/// block's alignment): a smooth figure where the allocated peak itself, a maximum over
/// time like the peak, is not.
pub const ALLOCATED: &str = "allocated over peak";
/// The figure name of what the CUDA pool's reserved peak adds to its allocated peak
/// (granules, fragmentation).
pub const RESERVED: &str = "reserved over allocated";

/// The pool's two figures: its alignment and rounding, no sum of tensors. They are
/// fitted on the grid's points alone and with any signs ([`crate::axes::Prior::Free`]),
/// and may fall beyond the grid.
pub const POOL_FIGURES: [&str; 2] = [ALLOCATED, RESERVED];

/// Whether `figure` is one of the [`POOL_FIGURES`].
pub fn is_pool_figure(figure: &str) -> bool {
    POOL_FIGURES.contains(&figure)
}
/// The prefix of a phase's peak (`phase forward`).
const PHASE_PREFIX: &str = "phase ";
/// Between a phase and a category in a phase's moment (`phase backward when
/// gradients peak`).
const MOMENT_INFIX: &str = " when ";
/// After the category in a phase's moment.
const MOMENT_SUFFIX: &str = " peak";
/// The prefix of a phase's own peak of temporaries (`temporaries in forward`).
const TEMPORARIES_PREFIX: &str = "temporaries in ";

/// A figure of a sweep: one series fitted over the grid. Its name (what [`fmt::Display`]
/// writes) is what a snapshot keys the fit by; [`Figure::parse`] reads it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// The whole peak (`peak`).
    Peak,
    /// A category's own peak (`activations`).
    Category(Category),
    /// A phase's peak (`phase backward`).
    Phase(Phase),
    /// A phase's moment: the total at the moment one category first reached its own
    /// most in the phase (`phase backward when gradients peak`), of which the phase's
    /// peak is the largest ([`crate::profile::Profile::phase_moments`]).
    PhaseMoment(Phase, Category),
    /// A phase's own peak of temporaries (`temporaries in forward`).
    TemporariesIn(Phase),
    /// What the pool's allocated peak adds to the peak (`allocated over peak`).
    AllocatedOverPeak,
    /// What the pool's reserved peak adds to its allocated one (`reserved over
    /// allocated`).
    ReservedOverAllocated,
}

impl Figure {
    /// Every figure a run can give.
    pub fn all() -> impl Iterator<Item = Figure> {
        let fixed = [
            Figure::Peak,
            Figure::AllocatedOverPeak,
            Figure::ReservedOverAllocated,
        ];
        let moments = Phase::ALL
            .into_iter()
            .flat_map(|p| Category::ALL.map(move |c| Figure::PhaseMoment(p, c)));
        fixed
            .into_iter()
            .chain(Category::ALL.map(Figure::Category))
            .chain(Phase::ALL.map(Figure::Phase))
            .chain(moments)
            .chain(Phase::ALL.map(Figure::TemporariesIn))
    }

    /// The figure `name` stands for; `None` for a name no run writes.
    pub fn parse(name: &str) -> Option<Figure> {
        match name {
            PEAK => return Some(Figure::Peak),
            ALLOCATED => return Some(Figure::AllocatedOverPeak),
            RESERVED => return Some(Figure::ReservedOverAllocated),
            _ => {}
        }
        if let Some(rest) = name.strip_prefix(PHASE_PREFIX) {
            return match rest.split_once(MOMENT_INFIX) {
                Some((phase, category)) => {
                    let category = category.strip_suffix(MOMENT_SUFFIX)?;
                    Some(Figure::PhaseMoment(
                        phase.parse().ok()?,
                        category.parse().ok()?,
                    ))
                }
                None => rest.parse().ok().map(Figure::Phase),
            };
        }
        if let Some(phase) = name.strip_prefix(TEMPORARIES_PREFIX) {
            return phase.parse().ok().map(Figure::TemporariesIn);
        }
        name.parse().ok().map(Figure::Category)
    }

    /// The phase whose peak this figure is, or a moment of (`None`: another figure).
    pub fn phase(self) -> Option<Phase> {
        match self {
            Figure::Phase(p) | Figure::PhaseMoment(p, _) => Some(p),
            _ => None,
        }
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Figure::Peak => f.write_str(PEAK),
            Figure::Category(c) => f.write_str(c.as_str()),
            Figure::Phase(p) => write!(f, "{PHASE_PREFIX}{p}"),
            Figure::PhaseMoment(p, c) => {
                write!(f, "{PHASE_PREFIX}{p}{MOMENT_INFIX}{c}{MOMENT_SUFFIX}")
            }
            Figure::TemporariesIn(p) => write!(f, "{TEMPORARIES_PREFIX}{p}"),
            Figure::AllocatedOverPeak => f.write_str(ALLOCATED),
            Figure::ReservedOverAllocated => f.write_str(RESERVED),
        }
    }
}

/// What one run of a grid measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridRun {
    /// Its point.
    pub point: Point,
    /// The peak total.
    pub peak_bytes: u64,
    /// Each category's own peak.
    pub category_peaks: CategoryBytes,
    /// Each phase's peak (the highest of a phase run more than once).
    pub phase_peaks: BTreeMap<Phase, u64>,
    /// Each phase's own peak of temporaries (empty when unknown).
    pub phase_temporaries: BTreeMap<Phase, u64>,
    /// Each phase's moments: for every category whose bytes change in the phase, the
    /// total at the moment it first reached its own most there
    /// ([`crate::profile::Profile::phase_moments`]; empty when unknown).
    pub phase_moments: BTreeMap<Phase, BTreeMap<Category, u64>>,
    /// Whether the peak came outside every phase.
    pub peak_outside_phases: bool,
    /// The CUDA pool model's peaks (CPU runs), or the device's allocated and reserved
    /// peaks (CUDA runs), when known.
    pub pool: Option<PoolPeaks>,
}

impl GridRun {
    /// The run at `point` of a measured `profile`: its steady state's phases, and
    /// `pool`, the CUDA pool model's peaks of a CPU run (a CUDA run's are the device's
    /// own, read from the profile).
    pub fn of_profile(point: Point, profile: &Profile, pool: Option<PoolPeaks>) -> GridRun {
        let mut phase_peaks = BTreeMap::new();
        for record in profile.steady_state_phases() {
            let peak = phase_peaks.entry(record.phase).or_insert(0);
            *peak = record.peak_bytes.max(*peak);
        }
        let pool = pool.or_else(|| {
            profile.reserved_peak_bytes.map(|reserved| PoolPeaks {
                allocated_bytes: profile
                    .peak_bytes
                    .saturating_sub(profile.at_peak[Category::Untracked]),
                reserved_bytes: reserved,
            })
        });
        GridRun {
            point,
            peak_bytes: profile.peak_bytes,
            category_peaks: profile.category_peaks,
            phase_peaks,
            phase_temporaries: (profile.phase_category_peaks.iter())
                .map(|(phase, peaks)| (*phase, peaks[Category::Temporaries]))
                .collect(),
            phase_moments: (profile.phase_moments.iter())
                .map(|(phase, moments)| (*phase, moments.iter().copied().collect()))
                .collect(),
            peak_outside_phases: profile.peak_phase.is_none(),
            pool,
        }
    }
}

/// A sweep, as a snapshot keeps it under `scaling`: over named axes (`axes(..)`), or
/// over the one axis `batch` (`batch = [..]`, a batch sweep). With categorical axes
/// (levers), `levels` lists each with its levels (the first its baseline), this sweep
/// is the baseline combination's fit, and `variants` holds every other combination's
/// own fit over the same numeric axes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Each axis and its values.
    pub axes: BTreeMap<String, Vec<u64>>,
    /// Each figure's fit (see the module's documentation for the names).
    pub figures: BTreeMap<String, Fit>,
    /// The target configuration's predicted figures, when the test names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// The categorical axes, each with its levels, the baseline first (empty: none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub levels: BTreeMap<String, Vec<String>>,
    /// Every combination of levels but the baseline, each with its own fit (empty
    /// without categorical axes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<VariantSweep>,
    /// The target's values measured one axis at a time ([`crate::axial`]), which the
    /// fits include beside the grid's points (empty: none, or a snapshot recorded
    /// before they were measured).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub axial: Vec<AxialPoint>,
    /// The figures fitted without their axis's smallest level, another regime than the
    /// target's axial point ([`crate::refit`]), by figure.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fitted_without: BTreeMap<String, Without>,
    /// Read from a batch sweep's older `scaling` (a line per figure), migrated into
    /// this shape: the run says so once; the file is rewritten only when accepted.
    #[serde(skip)]
    pub migrated: bool,
}

impl From<legacy::BatchLines> for Sweep {
    fn from(old: legacy::BatchLines) -> Sweep {
        let (batch, peak, categories) = old.into_fits();
        let mut figures: BTreeMap<String, Fit> = categories
            .into_iter()
            .map(|(c, fit)| (c.as_str().to_owned(), fit))
            .collect();
        figures.insert(PEAK.to_owned(), peak);
        Sweep {
            axes: BTreeMap::from([(BATCH.to_owned(), batch)]),
            figures,
            target: None,
            levels: BTreeMap::new(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: true,
        }
    }
}

/// One non-baseline combination of levels of a [`Sweep`] and its own fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSweep {
    /// The combination: each categorical axis at one of its levels.
    pub variant: BTreeMap<String, String>,
    /// Its fit over the numeric axes (without `levels` or `variants` of its own).
    pub sweep: Sweep,
    /// What it saves against the baseline combination at the target, else at the
    /// grid's largest point (see [`Saving`]), for the reviewer of a snapshot's diff:
    /// the lever gate computes it from the snapshot's fits, and a recorded one that
    /// contradicts them is an error when read ([`Sweep::check_savings`]). Absent from
    /// a snapshot recorded before savings were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saving: Option<Saving>,
    /// Its CPU step time over the baseline's, summed over the grid (never compared).
    #[serde(default, skip_serializing_if = "CpuTimeRatio::is_unknown")]
    pub cpu_time_ratio: CpuTimeRatio,
}

/// A body's `scaling`: a sweep's (`axes`, `figures`, `target`), or a batch sweep's old
/// lines (`batch`, `peak`, `category_peaks`), migrated (then
/// [`Sweep::migrated`]). Told apart by the `axes` key, so each reads with its own
/// errors.
pub fn deserialize_scaling<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Sweep>, D::Error> {
    use serde::de::Error;
    let Some(value) = Option::<serde_json::Value>::deserialize(d)? else {
        return Ok(None);
    };
    if value.get("axes").is_some() {
        serde_json::from_value(value)
            .map(Some)
            .map_err(|e| D::Error::custom(format!("scaling over named axes: {e}")))
    } else {
        serde_json::from_value::<legacy::BatchLines>(value)
            .map(|old| Some(old.into()))
            .map_err(|e| D::Error::custom(format!("batch scaling: {e}")))
    }
}

/// Every figure's series from `runs`: what [`Sweep::fit`] fits, each a name and the
/// measured bytes at each run's point (see the module's documentation for the names).
pub fn series_of(runs: &[GridRun]) -> BTreeMap<String, Vec<(Point, u64)>> {
    let mut series: BTreeMap<String, Vec<(Point, u64)>> = BTreeMap::new();
    let mut add = |figure: Figure, point: &Point, bytes: u64| {
        series
            .entry(figure.to_string())
            .or_default()
            .push((point.clone(), bytes));
    };
    let by_phase = runs.iter().all(|r| !r.peak_outside_phases);
    let common_phases: Vec<Phase> = Phase::ALL
        .into_iter()
        .filter(|p| runs.iter().all(|r| r.phase_peaks.contains_key(p)))
        .collect();
    let with_pool = runs.iter().all(|r| r.pool.is_some());
    // Temporaries by phase, when each run's own peak of them is some phase's.
    let temporaries_phases: Vec<Phase> = Phase::ALL
        .into_iter()
        .filter(|p| runs.iter().all(|r| r.phase_temporaries.contains_key(p)))
        .collect();
    let by_phase_temporaries = !temporaries_phases.is_empty()
        && runs.iter().all(|r| {
            temporaries_phases
                .iter()
                .map(|p| r.phase_temporaries[p])
                .max()
                == Some(r.category_peaks[Category::Temporaries])
        });
    let moments: Vec<(Phase, Vec<Category>)> = common_phases
        .iter()
        .filter_map(|&p| Some((p, moments_of(runs, p)?)))
        .collect();
    for run in runs {
        // With every phase fitted, the peak is their maximum: no fit of its own.
        if !by_phase || common_phases.is_empty() {
            add(Figure::Peak, &run.point, run.peak_bytes);
        }
        for (category, bytes) in run.category_peaks.iter() {
            add(Figure::Category(category), &run.point, bytes);
        }
        if by_phase {
            for phase in &common_phases {
                match moments.iter().find(|(p, _)| p == phase) {
                    Some((_, categories)) => {
                        for &c in categories {
                            let bytes = run.phase_moments[phase][&c];
                            add(Figure::PhaseMoment(*phase, c), &run.point, bytes);
                        }
                    }
                    None => add(Figure::Phase(*phase), &run.point, run.phase_peaks[phase]),
                }
            }
        }
        if by_phase_temporaries {
            for phase in &temporaries_phases {
                let figure = Figure::TemporariesIn(*phase);
                add(figure, &run.point, run.phase_temporaries[phase]);
            }
        }
        if let (true, Some(pool)) = (with_pool, run.pool) {
            let over_peak = pool.allocated_bytes.saturating_sub(run.peak_bytes);
            let over_allocated = pool.reserved_bytes.saturating_sub(pool.allocated_bytes);
            add(Figure::AllocatedOverPeak, &run.point, over_peak);
            add(Figure::ReservedOverAllocated, &run.point, over_allocated);
        }
    }
    series
}

/// The categories whose moments in `phase` ([`GridRun::phase_moments`]) the phase's peak
/// is predicted as the maximum of, one per distinct series: `None` where the phase is
/// fitted whole, because a run lacks its moments, its peak came at no such moment (the
/// largest of them is not the peak at every point), or they give a single series (the
/// peak is one moment throughout).
fn moments_of(runs: &[GridRun], phase: Phase) -> Option<Vec<Category>> {
    let first = runs.first()?.phase_moments.get(&phase)?;
    let mut kept: Vec<(Category, Vec<u64>)> = Vec::new();
    for &category in first.keys() {
        let series: Option<Vec<u64>> = runs
            .iter()
            .map(|r| r.phase_moments.get(&phase)?.get(&category).copied())
            .collect();
        if let Some(series) = series
            && !kept.iter().any(|(_, s)| *s == series)
        {
            kept.push((category, series));
        }
    }
    let is_peak = |(i, run): (usize, &GridRun)| {
        kept.iter().map(|(_, s)| s[i]).max() == run.phase_peaks.get(&phase).copied()
    };
    (kept.len() >= 2 && runs.iter().enumerate().all(is_peak))
        .then(|| kept.into_iter().map(|(c, _)| c).collect())
}

/// A phase fitted as its moments whose moment is flagged (a moment can be a maximum
/// too: the first instant a category is complete may come with one buffer or another)
/// is fitted whole instead, where the whole phase's fit is not: the split is kept only
/// where it brings no doubt the whole phase's fit is free of. With a `target`, a
/// moment is in doubt too where its prediction there falls or rests on a negative term
/// nothing covers ([`Falls`], [`Negative`]), and the whole phase must be free of both.
/// Decided on the fits over the whole grid, before the refit without a smallest level
/// unlike the target's ([`crate::refit`]): a moment whose fit through every level is
/// flagged has been seen to rest on a negative term at the target even once refitted (a
/// grouped-query decoder's forward pass when its temporaries peak).
fn whole_where_moments_miss(
    grid: &Grid,
    runs: &[GridRun],
    target: Option<&Point>,
    series: &mut BTreeMap<String, Vec<(Point, u64)>>,
    figures: &mut BTreeMap<String, Fit>,
) -> Result<(), AxesError> {
    let beyond = target.and_then(|at| Some((at, corner_below(&grid.to_map(), at)?)));
    let at_target = match beyond {
        Some((at, corner)) => {
            let peak = predict_max(phase_fits(figures), at)?.bytes;
            Some((at, corner, grid.smallest([at]), peak))
        }
        None => None,
    };
    // Flagged on the grid, or (beyond it) at the target: read, as `estimate` reads a
    // phase's figures, beside the peak there.
    let doubted = |fit: &Fit| -> Result<bool, AxesError> {
        if fit.flag(grid).is_some() {
            return Ok(true);
        }
        let Some((at, corner, smallest, peak)) = &at_target else {
            return Ok(false);
        };
        Ok(falls(fit, at, corner).is_some() || negative(fit, at, smallest, Some(*peak))?.is_some())
    };
    for phase in Phase::ALL {
        let moments: Vec<String> = (figures.keys())
            .filter(|k| matches!(Figure::parse(k), Some(Figure::PhaseMoment(p, _)) if p == phase))
            .cloned()
            .collect();
        let mut any_doubted = false;
        for m in &moments {
            any_doubted |= doubted(&figures[m])?;
        }
        if !any_doubted {
            continue;
        }
        let name = Figure::Phase(phase).to_string();
        let whole: Vec<(Point, u64)> = (runs.iter())
            .map(|r| (r.point.clone(), r.phase_peaks[&phase]))
            .collect();
        let one = BTreeMap::from([(name.clone(), whole)]);
        let mut fitted = FigureFits::fit_with(grid, &one, &[])?.figures;
        let Some(fit) = fitted.remove(&name) else {
            continue;
        };
        if doubted(&fit)? {
            continue;
        }
        for m in &moments {
            figures.remove(m);
            series.remove(m);
        }
        figures.insert(name.clone(), fit);
        series.extend(one);
    }
    Ok(())
}

/// Of `figures`, the fits the peak is the maximum of, by figure name: each phase's
/// peak, or for a phase predicted from its moments, each moment's.
fn phase_fits(figures: &BTreeMap<String, Fit>) -> impl Iterator<Item = (&str, &Fit)> {
    figures
        .iter()
        .filter(|(k, _)| Figure::parse(k).is_some_and(|f| f.phase().is_some()))
        .map(|(k, f)| (k.as_str(), f))
}

/// The phase a phase's figure or moment names (`backward` for `phase backward when
/// gradients peak`); `None` for another figure.
fn phase_name(figure: &str) -> Option<String> {
    Some(Figure::parse(figure)?.phase()?.as_str().to_owned())
}

/// The predicted figures of the configuration a test names in `target(..)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// The configuration.
    pub at: Point,
    /// Each category's predicted own peak.
    pub category_bytes: BTreeMap<Category, u64>,
    /// The predicted peak.
    pub peak_bytes: u64,
    /// The predicted CUDA allocated peak, when the runs had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_bytes: Option<u64>,
    /// The predicted CUDA reserved peak, when the runs had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
}

/// A configuration predicted from a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    /// The configuration.
    pub at: Point,
    /// Each category's predicted own peak.
    pub category_bytes: BTreeMap<Category, u64>,
    /// The predicted peak: the highest phase's.
    pub peak_bytes: u64,
    /// The phase predicted to hold the peak (`None`: the peak is fitted as a whole).
    pub peak_phase: Option<String>,
    /// The figure the peak is predicted from: the phase's (`phase backward`), or the
    /// moment of it that is highest here (`phase backward when gradients peak`);
    /// `None` when the peak is fitted as a whole.
    pub peak_from: Option<String>,
    /// The predicted CUDA allocated peak: the peak plus the blocks' alignment, or the
    /// peak alone where the fit of the alignment is flagged (it is then listed in
    /// [`Estimate::flagged`]).
    pub allocated_bytes: Option<u64>,
    /// The predicted CUDA reserved peak: the allocated peak rounded up to the pool's
    /// granule, or more where the fit of what the pool reserves beyond it says so.
    pub reserved_bytes: Option<u64>,
    /// Each figure's worst leave-one-out error, in parts per million.
    pub loo_error_ppm: BTreeMap<String, u64>,
    /// Each figure's formula.
    pub terms: BTreeMap<String, String>,
    /// The figures whose fit misses a held-out point by more than 2%, or interpolates
    /// ([`Fit::interpolation`]): their predictions are shown, flagged, never trusted
    /// silently.
    pub flagged: Vec<String>,
    /// Of the flagged figures, those whose fit interpolates and misses no held-out
    /// point by over 2%, with the axes it interpolates.
    pub interpolated: BTreeMap<String, Interpolation>,
    /// Of the flagged figures, those predicted lower here than at the grid's corner
    /// below this point ([`Falls`]): flagged here, whatever their fit's own flag.
    pub falls: BTreeMap<String, Falls>,
    /// Of the flagged figures, those whose prediction here, beyond the grid, rests on
    /// a negative term no positive term covers ([`Negative`]): flagged here, whatever
    /// their fit's own flag.
    pub negative: BTreeMap<String, Negative>,
    /// Where the fit of what the pool reserves beyond the allocated peak predicted a
    /// larger share of it than at the grid's corner below this point, and was held at
    /// that share ([`PoolHeld`]): `reserved over allocated` is flagged here.
    pub pool_held: Option<PoolHeld>,
}

/// What the CUDA pool reserves beyond the allocated peak, held at the grid's share.
///
/// That figure is the pool's rounding of its segments to granules and the blocks it
/// keeps cached: no sum of tensors, and no polynomial of the axes. A fit of it that
/// passes through every grid point can still take products of four or five axes that
/// outgrow the allocation itself far outside the grid (seen: a 65-term fit, exact on a
/// 72-point grid, put 217 TiB over a 368 GiB peak). Beyond the grid, the pool's
/// rounding reserves no larger a share of what is allocated than at the grid's corner
/// below the point: where the fit says more, that share of the allocated peak is the
/// prediction, and the figure is flagged at the point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolHeld {
    /// The grid's corner below the point.
    pub corner: Point,
    /// What the fit predicted beyond the allocated peak here.
    pub fitted_bytes: u64,
    /// What is predicted instead: the corner's share of the allocated peak here.
    pub held_bytes: u64,
}

/// A figure predicted lower at a point beyond the grid than at the grid's corner below
/// it (each axis beyond the grid brought back to its largest value): memory is a sum
/// of tensors of positive size, and does not shrink as a model grows, so a fit whose
/// negative term outgrows the others there is a maximum of regimes or a step, not the
/// figure. Its prediction at the point is flagged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Falls {
    /// The grid's corner below the point.
    pub corner: Point,
    /// The prediction there.
    pub corner_bytes: u64,
    /// The prediction at the point.
    pub bytes: u64,
}

/// A figure predicted beyond the grid by a fit whose negative term no positive term
/// covers ([`crate::axes::Uncovered`]: memory is a sum of blocks of positive size, and
/// a negative term nothing covers is a maximum of regimes or a step the fit passed
/// through), where that term takes away more than 2% of what a reader reads the fit in,
/// or than the fit's residue, whichever is larger: the prediction itself; for a phase,
/// the peak it is a candidate of; for a phase's temporaries, the temporaries. The
/// largest such term is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negative {
    /// The negative term, as a formula reads it (`-0.45 B × seq²`).
    pub term: String,
    /// The positive terms its monomial divides, which cover it in part (`0.26 B ×
    /// layers·seq²`); `None` when there are none.
    pub covers: Option<String>,
    /// The bytes the negative term takes away at the point.
    pub bytes: u64,
}

/// The grid's corner below `at`: each axis beyond the grid's largest value brought back
/// to it (`None` when `at` is nowhere beyond the grid).
fn corner_below(axes: &BTreeMap<String, Vec<u64>>, at: &Point) -> Option<Point> {
    let mut beyond = false;
    let corner = at
        .iter()
        .map(|(k, &v)| {
            let largest = axes
                .get(k)
                .and_then(|vs| vs.iter().copied().max())
                .unwrap_or(v);
            beyond |= v > largest;
            (k.clone(), v.min(largest))
        })
        .collect();
    beyond.then_some(corner)
}

/// Whether `fit`'s prediction at `at` rests on a negative term no positive term covers
/// at `smallest` (each axis at the grid's smallest value), by more than 2% of `read`
/// or than its residue ([`Negative`]). `read` is the figure a reader reads the fit in:
/// its own prediction, or for a phase the peak it is a candidate of, for a phase's
/// temporaries the temporaries (a phase far below the peak, off by a few of its own
/// percent, cannot hold it).
fn negative(
    fit: &Fit,
    at: &Point,
    smallest: &Point,
    read: Option<u64>,
) -> Result<Option<Negative>, AxesError> {
    let read = match read {
        Some(read) => read,
        None => fit.predict(at)?.bytes,
    };
    let slack = (u128::from(read) * u128::from(crate::axes::FLAG_PPM) / 1_000_000)
        .max(u128::from(fit.residue_bytes));
    let mut worst: Option<Negative> = None;
    for u in fit.terms.uncovered(smallest)? {
        let bytes = u.bytes_at(at)?.ceil().to_integer();
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        if u128::from(bytes) > slack && worst.as_ref().is_none_or(|w| bytes > w.bytes) {
            worst = Some(Negative {
                term: u.term_in_words(),
                covers: u.covers_in_words(),
                bytes,
            });
        }
    }
    Ok(worst)
}

/// Whether `fit` falls from `corner` to `at`: lower there by more than 2% of the
/// corner's prediction, or than its residue, whichever is larger.
fn falls(fit: &Fit, at: &Point, corner: &Point) -> Option<Falls> {
    let bytes = fit.predict(at).ok()?.bytes;
    let corner_bytes = fit.predict(corner).ok()?.bytes;
    let slack = (u128::from(corner_bytes) * u128::from(crate::axes::FLAG_PPM) / 1_000_000)
        .max(u128::from(fit.residue_bytes));
    (u128::from(bytes) + slack < u128::from(corner_bytes)).then(|| Falls {
        corner: corner.clone(),
        corner_bytes,
        bytes,
    })
}

impl Sweep {
    /// Fits every figure of `runs`: one per point of `grid`, and a target's axial
    /// points.
    pub fn fit(grid: &Grid, runs: &[GridRun]) -> Result<Sweep, AxesError> {
        Sweep::fit_toward(grid, runs, None)
    }

    /// [`Sweep::fit`], for a sweep that predicts `target` (its `target(..)`): a phase
    /// fitted as its moments gives way to the whole phase where a moment's prediction
    /// at the target is in doubt (it falls there, or rests on a negative term nothing
    /// covers) and the whole phase's is not, as where a moment is flagged on the grid.
    /// A target that is no point of `grid` is left to [`Sweep::target_at`] to refuse.
    pub fn fit_toward(
        grid: &Grid,
        runs: &[GridRun],
        target: Option<&Point>,
    ) -> Result<Sweep, AxesError> {
        let target = target.filter(|at| grid.check_point(at).is_ok());
        let mut series = series_of(runs);
        // The pool's alignment and rounding are no sum of tensors: fitted on the grid's
        // points alone, a target's axial points ([`crate::axial`]) do not stretch them.
        for figure in POOL_FIGURES {
            if let Some(points) = series.get_mut(figure) {
                points.retain(|(p, _)| grid.holds(p));
            }
        }
        let mut fitted = FigureFits::fit_with(grid, &series, &POOL_FIGURES)?;
        whole_where_moments_miss(grid, runs, target, &mut series, &mut fitted.figures)?;
        let fitted_without =
            crate::refit::without_smallest_levels(grid, &series, &mut fitted.figures)?;
        Ok(Sweep {
            fitted_without,
            axes: fitted.axes,
            figures: fitted.figures,
            target: None,
            levels: BTreeMap::new(),
            variants: Vec::new(),
            axial: Vec::new(),
            migrated: false,
        })
    }

    /// Every combination of levels with its fit, the baseline (this sweep) first; one
    /// entry, with an empty combination, without categorical axes.
    pub fn combinations(&self) -> Vec<(BTreeMap<String, String>, &Sweep)> {
        std::iter::once((self.baseline(), self))
            .chain(self.variants.iter().map(|v| (v.variant.clone(), &v.sweep)))
            .collect()
    }

    /// Whether a phase is fitted as its moments here ([`Figure::PhaseMoment`]), in this
    /// sweep's own figures (not its variants'): what only a snapshot of
    /// [`crate::snapshot::MOMENTS_SCHEMA`] holds.
    pub fn has_moments(&self) -> bool {
        (self.figures.keys())
            .any(|name| matches!(Figure::parse(name), Some(Figure::PhaseMoment(..))))
    }

    /// The baseline combination: each categorical axis at its first level (empty
    /// without categorical axes).
    fn baseline(&self) -> BTreeMap<String, String> {
        (self.levels.iter())
            .filter_map(|(axis, levels)| Some((axis.clone(), levels.first()?.clone())))
            .collect()
    }

    /// [`Sweep::variant`], to change.
    pub fn variant_mut(&mut self, variant: &BTreeMap<String, String>) -> Option<&mut Sweep> {
        if *variant == self.baseline() {
            return Some(self);
        }
        (self.variants.iter_mut())
            .find(|v| v.variant == *variant)
            .map(|v| &mut v.sweep)
    }

    /// The fit of one combination of levels (the baseline's is this sweep).
    pub fn variant(&self, variant: &BTreeMap<String, String>) -> Option<&Sweep> {
        self.combinations()
            .into_iter()
            .find(|(v, _)| v == variant)
            .map(|(_, s)| s)
    }

    /// The grid of the stored axes (checked again: a snapshot may have been edited).
    pub fn grid(&self) -> Result<Grid, AxesError> {
        Grid::from_map(&self.axes)
    }

    /// The fits of the figures a run writes (a name none writes is left out).
    fn fits(&self) -> impl Iterator<Item = (Figure, &Fit)> {
        self.figures
            .iter()
            .filter_map(|(k, f)| Some((Figure::parse(k)?, f)))
    }

    /// The fits the peak is the maximum of, by figure name: each phase's peak, or for
    /// a phase predicted from its moments, each moment's (`phase backward when
    /// gradients peak`).
    fn phase_fits(&self) -> impl Iterator<Item = (&str, &Fit)> {
        phase_fits(&self.figures)
    }

    /// The fits of the phases' own peaks of temporaries, by phase name.
    fn temporaries_fits(&self) -> impl Iterator<Item = (&str, &Fit)> {
        self.fits().filter_map(|(figure, f)| match figure {
            Figure::TemporariesIn(p) => Some((p.as_str(), f)),
            _ => None,
        })
    }

    /// `figure`'s fit, when the sweep has one.
    fn get(&self, figure: Figure) -> Option<&Fit> {
        self.figures.get(&figure.to_string())
    }

    fn figure(&self, figure: Figure) -> Result<&Fit, AxesError> {
        self.get(figure).ok_or_else(|| AxesError::UnknownFigure {
            figure: figure.to_string(),
        })
    }

    /// Predicts every figure at `at`, which must give every axis a positive value and
    /// name no other. A flagged figure is predicted and listed in
    /// [`Estimate::flagged`]. `granule`: the CUDA pool's granule, which the reserved
    /// peak is rounded up to from the allocated one when its own fit is flagged.
    pub fn estimate(&self, at: &Point, granule: u64) -> Result<Estimate, AxesError> {
        let mut estimate = self.figures_at(at, granule)?;
        let grid = self.grid()?;
        // The smallest values each fit was checked at: its grid's (without a level it
        // was fitted without), or the point's below them.
        let smallest_for = |figure: &str| -> Point {
            let mut smallest = grid.smallest([at]);
            if let Some(w) = self.fitted_without.get(figure)
                && let Some(values) = self.axes.get(&w.axis)
            {
                let kept = values.iter().copied().filter(|&v| v != w.level);
                if let Some(least) = kept.chain(at.get(&w.axis).copied()).min() {
                    smallest.insert(w.axis.clone(), least);
                }
            }
            smallest
        };
        for (name, fit) in &self.figures {
            estimate
                .loo_error_ppm
                .insert(name.clone(), fit.loo_error_ppm);
            estimate.terms.insert(name.clone(), fit.terms.to_string());
            match fit.flag(&grid) {
                None => {}
                Some(Flag::Missed { .. }) => estimate.flagged.push(name.clone()),
                Some(Flag::Interpolates(i)) => {
                    estimate.flagged.push(name.clone());
                    estimate.interpolated.insert(name.clone(), i);
                }
            }
            // The pool's alignment and rounding are no sum of tensors: they may fall,
            // and take any sign.
            let pool = is_pool_figure(name);
            let Some(corner) = corner_below(&self.axes, at).filter(|_| !pool) else {
                continue;
            };
            if let Some(f) = falls(fit, at, &corner) {
                estimate.flag(name);
                estimate.falls.insert(name.clone(), f);
            }
            let read = match Figure::parse(name) {
                Some(Figure::Phase(_) | Figure::PhaseMoment(..)) => Some(estimate.peak_bytes),
                Some(Figure::TemporariesIn(_)) => {
                    estimate.category_bytes.get(&Category::Temporaries).copied()
                }
                _ => None,
            };
            if let Some(n) = negative(fit, at, &smallest_for(name), read)? {
                estimate.flag(name);
                estimate.negative.insert(name.clone(), n);
            }
        }
        if estimate.pool_held.is_some() {
            estimate.flag(RESERVED);
        }
        Ok(estimate)
    }

    /// [`Sweep::estimate`]'s figures at `at`, without the fits' descriptions
    /// (errors, formulas, flags), which do not depend on the point: what a search
    /// over an axis needs at each value it tries.
    fn figures_at(&self, at: &Point, granule: u64) -> Result<Estimate, AxesError> {
        let grid = self.grid()?;
        grid.check_point(at)?;
        let mut estimate = Estimate {
            at: at.clone(),
            category_bytes: BTreeMap::new(),
            peak_bytes: 0,
            peak_phase: None,
            peak_from: None,
            allocated_bytes: None,
            reserved_bytes: None,
            loo_error_ppm: BTreeMap::new(),
            terms: BTreeMap::new(),
            flagged: Vec::new(),
            interpolated: BTreeMap::new(),
            falls: BTreeMap::new(),
            negative: BTreeMap::new(),
            pool_held: None,
        };
        for category in Category::ALL {
            let p = self.figure(Figure::Category(category))?.predict(at)?;
            estimate.category_bytes.insert(category, p.bytes);
        }
        if self.temporaries_fits().next().is_some() {
            let max = predict_max(self.temporaries_fits(), at)?;
            estimate
                .category_bytes
                .insert(Category::Temporaries, max.bytes);
        }
        let (peak, from) = self.peak_and_figure(at)?;
        estimate.peak_bytes = peak;
        estimate.peak_phase = from.as_deref().and_then(phase_name);
        estimate.peak_from = from;
        let pool = (
            self.get(Figure::AllocatedOverPeak),
            self.get(Figure::ReservedOverAllocated),
        );
        if let (Some(a), Some(r)) = pool {
            // Each block's alignment waste follows the sizes' remainders, not a
            // polynomial: a flagged fit of it is left out rather than extrapolated.
            let over_peak = if a.flag(&grid).is_some() {
                0
            } else {
                a.predict(at)?.bytes
            };
            let allocated = estimate.peak_bytes.saturating_add(over_peak);
            let granule = granule.max(1);
            let rounded = allocated.div_ceil(granule).saturating_mul(granule);
            let reserved = if r.flag(&grid).is_some() {
                rounded
            } else {
                let fitted = r.predict(at)?.bytes;
                let over = match self.pool_share_at_corner(at, a, r, &grid)? {
                    Some((corner, num, den)) => {
                        let held = u128::from(allocated) * u128::from(num);
                        let held = u64::try_from(held.div_ceil(u128::from(den.max(1))))
                            .unwrap_or(u64::MAX);
                        // As for a figure that falls: beyond 2% of the share, or the
                        // fit's residue, whichever is larger.
                        let slack = (u128::from(held) * u128::from(crate::axes::FLAG_PPM)
                            / 1_000_000)
                            .max(u128::from(r.residue_bytes));
                        if u128::from(fitted) > u128::from(held) + slack {
                            estimate.pool_held = Some(PoolHeld {
                                corner,
                                fitted_bytes: fitted,
                                held_bytes: held,
                            });
                            held
                        } else {
                            fitted
                        }
                    }
                    None => fitted,
                };
                allocated.saturating_add(over).max(rounded)
            };
            estimate.allocated_bytes = Some(allocated);
            estimate.reserved_bytes = Some(reserved.max(allocated));
        }
        Ok(estimate)
    }

    /// At a point `at` beyond the grid: the grid's corner nearest it (each axis brought
    /// into the grid's range: back to its largest value from beyond, up to its smallest
    /// from below), and what the pool reserves there beyond the allocated peak (`r`'s
    /// prediction) over that peak (the peak plus `a`'s alignment, unless `a` is
    /// flagged), as a fraction. `None` within the grid's range ([`PoolHeld`]).
    fn pool_share_at_corner(
        &self,
        at: &Point,
        a: &Fit,
        r: &Fit,
        grid: &Grid,
    ) -> Result<Option<(Point, u64, u64)>, AxesError> {
        if corner_below(&self.axes, at).is_none() {
            return Ok(None);
        }
        let corner: Point = (at.iter())
            .map(|(k, &v)| {
                let values = self.axes.get(k);
                let lo = values.and_then(|vs| vs.iter().copied().min()).unwrap_or(v);
                let hi = values.and_then(|vs| vs.iter().copied().max()).unwrap_or(v);
                (k.clone(), v.clamp(lo, hi))
            })
            .collect();
        let over_peak = if a.flag(grid).is_some() {
            0
        } else {
            a.predict(&corner)?.bytes
        };
        let allocated = self.peak_at(&corner)?.saturating_add(over_peak);
        let reserved_over = r.predict(&corner)?.bytes;
        Ok(Some((corner, reserved_over, allocated)))
    }

    /// The predicted peak at `at` (a point of the sweep's axes), as [`Sweep::estimate`]
    /// predicts it, without the other figures: what a scan over many points needs.
    pub fn peak_at(&self, at: &Point) -> Result<u64, AxesError> {
        Ok(self.peak_and_phase(at)?.0)
    }

    /// Whether the phase holding the predicted peak at `at` is another than at the
    /// grid's largest point, and where along the one axis that differs, if one does
    /// (`None`: the same phase, or the peak is fitted as a whole).
    pub fn peak_move(&self, at: &Point) -> Result<Option<PeakMove>, AxesError> {
        phases::peak_move(largest_point(self), at, |p| Ok(self.peak_and_phase(p)?.1))
    }

    /// The peak at `at` (the highest phase's, when the sweep fits each phase) and that
    /// phase.
    fn peak_and_phase(&self, at: &Point) -> Result<(u64, Option<String>), AxesError> {
        let (bytes, from) = self.peak_and_figure(at)?;
        Ok((bytes, from.as_deref().and_then(phase_name)))
    }

    /// The peak at `at` and the figure it is predicted from: the highest of the
    /// phases' peaks and moments (`phase backward`, `phase backward when gradients
    /// peak`), or `None` when the peak is fitted as a whole.
    fn peak_and_figure(&self, at: &Point) -> Result<(u64, Option<String>), AxesError> {
        if self.phase_fits().next().is_some() {
            let max = predict_max(self.phase_fits(), at)?;
            Ok((max.bytes, Some(max.phase)))
        } else {
            Ok((self.figure(Figure::Peak)?.predict(at)?.bytes, None))
        }
    }

    /// The target's figures at `at`, as a snapshot keeps them.
    pub fn target_at(&self, at: &Point, granule: u64) -> Result<Target, AxesError> {
        let e = self.estimate(at, granule)?;
        Ok(Target {
            at: e.at,
            category_bytes: e.category_bytes,
            peak_bytes: e.peak_bytes,
            allocated_bytes: e.allocated_bytes,
            reserved_bytes: e.reserved_bytes,
        })
    }

    /// The largest value of `axis` (the others from `at`) whose predicted device memory
    /// (`reserved` where the sweep has it, else the peak) plus `allowance` stays within
    /// `memory`: `None` when not even 1 fits. Searched up to 2³², assuming the memory
    /// does not shrink as the axis grows.
    pub fn solve(
        &self,
        at: &Point,
        axis: &str,
        memory: u64,
        allowance: u64,
        granule: u64,
    ) -> Result<Option<u64>, AxesError> {
        self.solve_by(at, axis, granule, |e| Ok(e.fits(memory, allowance)))
    }

    /// The largest value of `axis` (the others from `at`) whose estimate `fits` (its
    /// figures: the fits' errors, formulas and flags are left empty): `None` when not
    /// even 1 does. Searched up to 2³² by doubling, then bisection,
    /// assuming that what fits at a value fits at every smaller one.
    pub fn solve_by(
        &self,
        at: &Point,
        axis: &str,
        granule: u64,
        fits: impl Fn(&Estimate) -> Result<bool, AxesError>,
    ) -> Result<Option<u64>, AxesError> {
        const CAP: u64 = 1 << 32;
        self.grid()?.axis(axis)?;
        let fits_at = |v: u64| -> Result<bool, AxesError> {
            let mut point = at.clone();
            point.insert(axis.to_owned(), v);
            fits(&self.figures_at(&point, granule)?)
        };
        if !fits_at(1)? {
            return Ok(None);
        }
        let (mut lo, mut hi) = (1u64, 2u64);
        while hi < CAP && fits_at(hi)? {
            lo = hi;
            hi *= 2;
        }
        if hi >= CAP && fits_at(hi)? {
            return Ok(Some(hi));
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits_at(mid)? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(Some(lo))
    }
}

impl Estimate {
    /// Lists `figure` among [`Estimate::flagged`], once.
    fn flag(&mut self, figure: &str) {
        if !self.flagged.iter().any(|f| f == figure) {
            self.flagged.push(figure.to_owned());
        }
    }

    /// The figure the peak's formula and held-out error are kept under: the phase, or
    /// the moment of it, that holds it (`phase backward`, `phase backward when
    /// gradients peak`), or `peak` when the peak is fitted as a whole.
    pub fn peak_figure(&self) -> String {
        match (&self.peak_from, &self.peak_phase) {
            (Some(f), _) => f.clone(),
            (None, Some(p)) => format!("{PHASE_PREFIX}{p}"),
            (None, None) => PEAK.to_owned(),
        }
    }

    /// The flagged phases and moments the peak is the maximum of, other than the one
    /// that holds it (figure names: `phase backward`): the peak is the largest one's
    /// prediction, so a flagged one may hold the real peak, and the peak is not to be
    /// trusted either. Empty when the peak is fitted as a whole.
    pub fn flagged_under_peak(&self) -> Vec<&str> {
        if self.peak_phase.is_none() {
            return Vec::new();
        }
        let winner = self.peak_figure();
        self.flagged
            .iter()
            .filter(|f| **f != winner && Figure::parse(f).is_some_and(|f| f.phase().is_some()))
            .map(String::as_str)
            .collect()
    }

    /// What the device must hold: the predicted reserved peak where there is one, else
    /// the peak.
    pub fn device_bytes(&self) -> u64 {
        self.reserved_bytes.unwrap_or(self.peak_bytes)
    }

    /// Whether the configuration fits `memory` with `allowance` set aside.
    pub fn fits(&self, memory: u64, allowance: u64) -> bool {
        self.device_bytes().saturating_add(allowance) <= memory
    }
}

/// `layers=32,seq=4096`: each axis once, each value a positive integer. Errors name the
/// axis and say what is wrong.
pub fn parse_point(text: &str) -> Result<Point, PointError> {
    let mut point = Point::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| PointError::NotAxisValue(part.to_owned()))?;
        let (name, value) = (name.trim(), value.trim());
        let n: u64 = value.parse().map_err(|e: std::num::ParseIntError| {
            if *e.kind() == std::num::IntErrorKind::PosOverflow {
                PointError::TooLarge {
                    axis: name.to_owned(),
                    value: value.to_owned(),
                }
            } else {
                PointError::NotInteger {
                    axis: name.to_owned(),
                    value: value.to_owned(),
                }
            }
        })?;
        if n == 0 {
            return Err(PointError::Zero(name.to_owned()));
        }
        if point.insert(name.to_owned(), n).is_some() {
            return Err(PointError::Twice(name.to_owned()));
        }
    }
    if point.is_empty() {
        return Err(PointError::Empty);
    }
    Ok(point)
}

/// Why a text is not a point (`layers=32,seq=4096`); the message names the axis.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PointError {
    /// A part without `=`.
    #[error("`{0}` is not `axis=value` (like `seq=4096`)")]
    NotAxisValue(String),
    /// A value that is not an integer.
    #[error("axis `{axis}`: `{value}` is not a positive integer (like `{axis}=8`)")]
    NotInteger {
        /// The axis.
        axis: String,
        /// Its value, as given.
        value: String,
    },
    /// A value past `u64::MAX`.
    #[error(
        "axis `{axis}`: `{value}` is larger than {} (the largest value an axis takes)",
        u64::MAX
    )]
    TooLarge {
        /// The axis.
        axis: String,
        /// Its value, as given.
        value: String,
    },
    /// An axis at 0.
    #[error("axis `{0}`: the value must be at least 1")]
    Zero(String),
    /// An axis given twice.
    #[error("axis `{0}` is given twice")]
    Twice(String),
    /// No axis at all.
    #[error("no axes given (like `--at layers=32,seq=4096,batch=8`)")]
    Empty,
}

/// `layers=32, seq=4096`.
pub fn show_point(point: &Point) -> String {
    point
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A ZeRO stage, as `--shard` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shard {
    /// Optimizer state sharded.
    Zero1,
    /// Optimizer state and gradients sharded.
    Zero2,
    /// Optimizer state, gradients and parameters sharded (FSDP full shard), with one
    /// layer's parameters gathered at a time.
    Zero3,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Shard::Zero1 => "zero1",
            Shard::Zero2 => "zero2",
            Shard::Zero3 => "zero3",
        })
    }
}

impl Shard {
    /// The categories this stage divides among the ranks.
    pub fn sharded(self) -> &'static [Category] {
        match self {
            Shard::Zero1 => &[Category::OptimizerState],
            Shard::Zero2 => &[Category::OptimizerState, Category::Gradients],
            Shard::Zero3 => &[
                Category::OptimizerState,
                Category::Gradients,
                Category::Parameters,
            ],
        }
    }
}

/// An estimate projected to one GPU of `ranks` under a ZeRO stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    /// The number of data-parallel ranks.
    pub ranks: u64,
    /// The stage.
    pub shard: Shard,
    /// The per-GPU estimate.
    pub per_gpu: Estimate,
    /// ZeRO-3: one layer's parameters, gathered whole while it runs (`None`: no
    /// `layers` axis to take it from, or another stage).
    pub gathered_bytes: Option<u64>,
}

/// Projects `estimate` to one GPU of `ranks`: each sharded category becomes
/// `⌈bytes / ranks⌉`, and the peak, allocated and reserved figures lose what the shards
/// save; ZeRO-3 adds one layer's gathered parameters (`parameters` at `layers = L`
/// less at `L − 1`, from the sweep's fit) when the sweep has a `layers` axis and there
/// are two ranks or more.
/// Activations, inputs, temporaries and workspace are unchanged; the batch is read as
/// per rank.
pub fn project(
    sweep: &Sweep,
    estimate: &Estimate,
    ranks: u64,
    shard: Shard,
) -> Result<Projection, AxesError> {
    let ranks = ranks.max(1);
    let mut per_gpu = estimate.clone();
    let mut saved = 0u64;
    for &category in shard.sharded() {
        let bytes = estimate.category_bytes[&category];
        let share = bytes.div_ceil(ranks);
        saved += bytes - share;
        per_gpu.category_bytes.insert(category, share);
        if ranks > 1
            && let Some(formula) = per_gpu.terms.get_mut(category.as_str())
        {
            *formula = format!("⌈({formula}) ÷ {ranks}⌉");
        }
    }
    let gathered_bytes = match (shard, estimate.at.get("layers")) {
        // One rank holds every layer whole: nothing to gather.
        (Shard::Zero3, Some(&layers)) if ranks > 1 => {
            let fit = sweep.figure(Figure::Category(Category::Parameters))?;
            let mut below = estimate.at.clone();
            below.insert("layers".into(), layers - 1);
            let diff = fit.terms.eval(&estimate.at)? - fit.terms.eval(&below)?;
            Some(ceil_bytes(&diff))
        }
        _ => None,
    };
    let gathered = gathered_bytes.unwrap_or(0);
    if (saved > 0 || gathered > 0)
        && let Some(formula) = per_gpu.terms.get_mut(&estimate.peak_figure())
    {
        *formula = format!(
            "{formula} − what the shards save{}",
            if gathered > 0 {
                " + one gathered layer"
            } else {
                ""
            }
        );
    }
    let adjust = |b: u64| b.saturating_sub(saved).saturating_add(gathered);
    per_gpu.allocated_bytes = estimate.allocated_bytes.map(adjust);
    per_gpu.reserved_bytes = estimate.reserved_bytes.map(adjust);
    per_gpu.peak_bytes = estimate
        .peak_bytes
        .saturating_sub(saved)
        .saturating_add(gathered);
    Ok(Projection {
        ranks,
        shard,
        per_gpu,
        gathered_bytes,
    })
}

fn ceil_bytes(r: &BigRational) -> u64 {
    if r.is_negative() {
        return 0;
    }
    r.ceil().to_integer().to_u64().unwrap_or(u64::MAX)
}

/// A target figure that moved between the snapshot and this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetFinding {
    /// `peak` or a category.
    pub figure: String,
    /// The snapshot's prediction.
    pub old: u64,
    /// This run's prediction.
    pub new: u64,
    /// The limit it is held to.
    pub limit: String,
    /// Whether it grew beyond the limit.
    pub regressed: bool,
    /// What changed in its formula: the term that grew, or both formulas.
    pub why: String,
}

/// The largest batch within a hard budget, before and after: a change that lowers it
/// fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WithinBudget {
    /// The budget, in bytes.
    pub budget_bytes: u64,
    /// The snapshot's largest batch (`None`: not even 1).
    pub old: Option<u64>,
    /// This run's.
    pub new: Option<u64>,
}

impl WithinBudget {
    /// Whether the largest batch fell.
    pub fn lowered(&self) -> bool {
        self.new < self.old
    }
}

/// A sweep compared with the snapshot's: at the target its test names, else at the
/// grid's largest point (every axis at its largest value).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetCheck {
    /// Where the sweeps are compared; empty when nothing is.
    pub at: Point,
    /// Whether `at` is the test's target (else the grid's largest point).
    pub named: bool,
    /// Each figure that moved (regressions first).
    pub findings: Vec<TargetFinding>,
    /// Each lever's saving that shrank (regressions first): see [`compare_levels`].
    pub savings: Vec<SavingFinding>,
    /// The peak at `at` and the budget, when it is over the budget.
    pub over_budget: Option<(u64, u64)>,
    /// With a budget and a `batch` axis: the largest batch within it, before and after.
    pub within_budget: Option<WithinBudget>,
    /// The sweeps cannot be compared (axes or target changed): accept again.
    pub changed: Option<String>,
    /// The snapshot has no axial points and this run has: its prediction rests on
    /// measurements the snapshot's did not have ([`crate::axial`]).
    pub predates_axial: bool,
}

impl TargetCheck {
    /// Whether this fails the test.
    pub fn fails(&self) -> bool {
        self.over_budget.is_some()
            || self.changed.is_some()
            || self.findings.iter().any(|f| f.regressed)
            || self.savings.iter().any(|f| f.regressed)
            || self.within_budget.is_some_and(|w| w.lowered())
    }

    /// `target (batch=8, seq=4096)`, or `at batch=128, the sweep's largest point`.
    fn place(&self) -> String {
        if self.named {
            format!("target ({})", show_point(&self.at))
        } else {
            format!("at {}, the sweep's largest point", show_point(&self.at))
        }
    }

    /// One line per failing figure and the budget, for a failure's message.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(changed) = &self.changed {
            lines.push(changed.clone());
        }
        let place = self.place();
        if let Some((peak, budget)) = self.over_budget {
            lines.push(format!(
                "{place}: predicted peak {} is over the budget {}",
                HumanBytes(peak),
                HumanBytes(budget)
            ));
        }
        if let Some(w) = self.within_budget.filter(WithinBudget::lowered) {
            let show = |n: Option<u64>| n.map_or("none".to_owned(), |n| n.to_string());
            lines.push(format!(
                "largest batch within the budget of {}: {} → {} (a change that lowers it fails)",
                HumanBytes(w.budget_bytes),
                show(w.old),
                show(w.new)
            ));
        }
        for f in self.findings.iter().filter(|f| f.regressed) {
            lines.push(format!(
                "{place}: {} {} → {} (+{}, limit {}): {}",
                f.figure,
                HumanBytes(f.old),
                HumanBytes(f.new),
                HumanBytes(f.new - f.old),
                f.limit,
                f.why
            ));
        }
        if self.predates_axial && self.findings.iter().any(|f| f.regressed) {
            lines.push(
                "the snapshot predates axial points (the target's values measured one axis at a time), which this run's prediction rests on: where they explain the change, accept the snapshot again".to_owned(),
            );
        }
        lines.extend(
            self.savings
                .iter()
                .filter(|f| f.regressed)
                .map(SavingFinding::line),
        );
        lines
    }
}

/// The grid's largest point: every axis at its largest value.
pub fn largest_point(sweep: &Sweep) -> Point {
    sweep
        .axes
        .iter()
        .map(|(k, v)| (k.clone(), v.iter().copied().max().unwrap_or(1)))
        .collect()
}

/// The figures `new` is judged by: its target's, else its prediction at the grid's
/// largest point (`None` when it cannot predict there).
fn judged(new: &Sweep) -> Option<(Target, bool)> {
    match &new.target {
        Some(target) => Some((target.clone(), true)),
        None => Some((new.target_at(&largest_point(new), 1).ok()?, false)),
    }
}

/// The largest batch whose predicted peak stays within `budget`, the other axes at `at`.
fn largest_batch(sweep: &Sweep, at: &Point, budget: u64) -> Option<u64> {
    sweep
        .solve_by(at, BATCH, 1, |e| Ok(e.peak_bytes <= budget))
        .ok()
        .flatten()
}

/// Compares `new` with `old` at `new`'s target, or at the grid's largest point when
/// the test names none: each category and the peak against its limit
/// (`limit_of(None)` is the peak's), the peak against `budget` and, with a `batch`
/// axis, the largest batch within `budget` (a change that lowers it fails). A target
/// added to a sweep without one is recorded, not compared; axial points
/// ([`crate::axial`]) other than the snapshot's make the sweeps incomparable (accept
/// again), unless the snapshot has none: then the target is compared, and a failure
/// says the snapshot predates them.
pub fn compare_target(
    old: Option<&Sweep>,
    new: &Sweep,
    limit_of: impl Fn(Option<Category>) -> Limit,
    budget: Option<u64>,
) -> TargetCheck {
    let Some((target, named)) = judged(new) else {
        return TargetCheck::default();
    };
    let mut check = TargetCheck {
        at: target.at.clone(),
        named,
        over_budget: budget
            .filter(|&b| target.peak_bytes > b)
            .map(|b| (target.peak_bytes, b)),
        ..TargetCheck::default()
    };
    let Some(old) = old else {
        return check;
    };
    if old.axes != new.axes {
        check.changed = Some(format!(
            "the sweep's axes changed from {} to {}: accept the snapshot again",
            show_axes(&old.axes),
            show_axes(&new.axes)
        ));
        return check;
    }
    // A target's prediction rests on its axial points: measured at others, it is
    // another prediction. A snapshot recorded before they were measured is compared
    // all the same (nothing slips through an upgrade), and a failure says why.
    let axial = |s: &Sweep| s.axial.iter().map(|a| a.at.clone()).collect::<Vec<_>>();
    check.predates_axial = old.axial.is_empty() && !new.axial.is_empty();
    if !check.predates_axial && axial(old) != axial(new) {
        let show = |points: Vec<Point>| match points.as_slice() {
            [] => "none".to_owned(),
            p => p.iter().map(show_point).collect::<Vec<_>>().join("; "),
        };
        check.changed = Some(format!(
            "the axial points changed from ({}) to ({}): accept the snapshot again",
            show(axial(old)),
            show(axial(new))
        ));
        return check;
    }
    let old_target = match (named, &old.target) {
        (true, None) => return check,
        (true, Some(o)) if o.at != target.at => {
            check.changed = Some(format!(
                "the target changed from ({}) to ({}): accept the snapshot again",
                show_point(&o.at),
                show_point(&target.at)
            ));
            return check;
        }
        (true, Some(o)) => o.clone(),
        (false, _) => match old.target_at(&target.at, 1) {
            Ok(o) => o,
            Err(_) => return check,
        },
    };
    if let Some(budget) = budget.filter(|_| new.axes.contains_key(BATCH)) {
        check.within_budget = Some(WithinBudget {
            budget_bytes: budget,
            old: largest_batch(old, &target.at, budget),
            new: largest_batch(new, &target.at, budget),
        });
    }
    check.findings = findings(old, new, &old_target, &target, limit_of);
    check
}

/// [`compare_target`] for every combination of levels of `new`: the baseline's
/// check, with each other combination's findings added, their figure prefixed by the
/// combination (`precision=bf16: activations`), so a regression at any level fails
/// and names it. Levels added, removed or changed make the sweeps incomparable.
///
/// Then the lever gate: each combination's [`Saving`] against the snapshot's, at the
/// same place (the target, else the grid's largest point). The peak's saving and each
/// category's are held to the peak's limit (`limit_of(None)`), taken of the snapshot's
/// baseline peak there: a saving that shrinks by more than that slack fails, naming
/// the combination ([`SavingFinding`]). A category's saving is held to the peak's
/// slack, not its own, since what a lever saves matters as a share of the memory the
/// step needs: a saving of 1% of a small category is no regression of the lever. The
/// saving is judged on its own: a baseline that shrinks makes each lever save less,
/// and that fails too until accepted. A snapshot whose variants are not exactly the
/// product of its levels ([`Sweep::uncovered`]) is a changed sweep too: a combination
/// it lacks would otherwise go unjudged.
pub fn compare_levels(
    old: Option<&Sweep>,
    new: &Sweep,
    limit_of: impl Fn(Option<Category>) -> Limit,
    budget: Option<u64>,
) -> TargetCheck {
    let mut check = compare_target(old, new, &limit_of, budget);
    if let Some(old) = old.filter(|o| o.levels != new.levels) {
        check.changed.get_or_insert_with(|| {
            format!(
                "the sweep's categorical axes changed from {} to {}: accept the snapshot again",
                show_levels(&old.levels),
                show_levels(&new.levels)
            )
        });
        return check;
    }
    // A combination the snapshot lacks would go unjudged: a changed sweep.
    if let Some(gap) = old.and_then(Sweep::uncovered) {
        check.changed.get_or_insert(gap);
        return check;
    }
    for variant in &new.variants {
        let name = show_variant(&variant.variant);
        let old = old.and_then(|o| o.variant(&variant.variant));
        let level = compare_target(old, &variant.sweep, &limit_of, budget);
        check
            .findings
            .extend(level.findings.into_iter().map(|f| TargetFinding {
                figure: format!("{name}: {}", f.figure),
                ..f
            }));
        check.over_budget = check.over_budget.or(level.over_budget);
        check.predates_axial |= level.predates_axial;
        if check.changed.is_none() {
            check.changed = level.changed.map(|c| format!("{name}: {c}"));
        }
    }
    check.findings.sort_by_key(|f| !f.regressed);
    if let (Some(old), None) = (old, &check.changed) {
        check.savings = saving_findings(old, new, limit_of(None));
    }
    check
}

/// What a combination of levels saves against the baseline combination, as the
/// snapshot keeps it under each variant (`saving`), computed from the two fits
/// ([`Sweep::record_savings`]): at `at` (the target, else the grid's largest point),
/// each category's and the peak's predicted bytes at the baseline less this
/// combination's (negative where the combination costs memory), and the baseline's
/// own figures there, which a saving is a share of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Saving {
    /// Where the savings are predicted.
    pub at: Point,
    /// Each category's saving: the baseline's predicted own peak less this
    /// combination's, in bytes (negative: it costs memory).
    pub category_bytes: BTreeMap<Category, i64>,
    /// The peak's saving: the baseline's predicted peak less this combination's.
    pub peak_bytes: i64,
    /// The baseline's predicted own peak of each category at `at`.
    pub baseline_category_bytes: BTreeMap<Category, u64>,
    /// The baseline's predicted peak at `at`.
    pub baseline_peak_bytes: u64,
}

impl Saving {
    /// What `level` saves against `baseline`, two predictions at the same point.
    pub fn between(baseline: &Target, level: &Target) -> Saving {
        let signed = |base: u64, this: u64| {
            i64::try_from(i128::from(base) - i128::from(this)).unwrap_or(if base >= this {
                i64::MAX
            } else {
                i64::MIN
            })
        };
        let get = |t: &Target, c: Category| t.category_bytes.get(&c).copied().unwrap_or(0);
        Saving {
            at: baseline.at.clone(),
            category_bytes: Category::ALL
                .into_iter()
                .map(|c| (c, signed(get(baseline, c), get(level, c))))
                .collect(),
            peak_bytes: signed(baseline.peak_bytes, level.peak_bytes),
            baseline_category_bytes: Category::ALL
                .into_iter()
                .map(|c| (c, get(baseline, c)))
                .collect(),
            baseline_peak_bytes: baseline.peak_bytes,
        }
    }

    /// The saving of a category (`None`: the peak) and the baseline's figure it is a
    /// share of.
    pub fn of(&self, figure: Option<Category>) -> (i64, u64) {
        match figure {
            None => (self.peak_bytes, self.baseline_peak_bytes),
            Some(c) => (
                self.category_bytes.get(&c).copied().unwrap_or(0),
                self.baseline_category_bytes.get(&c).copied().unwrap_or(0),
            ),
        }
    }
}

impl Sweep {
    /// Where a combination's saving is taken, and whether it is the test's target: the
    /// target any combination predicts (the baseline's first), else the grid's largest
    /// point; `None` without axes.
    pub fn saving_point(&self) -> Option<(Point, bool)> {
        if let Some(target) = self
            .combinations()
            .iter()
            .find_map(|(_, s)| s.target.as_ref())
        {
            return Some((target.at.clone(), true));
        }
        (!self.axes.is_empty()).then(|| (largest_point(self), false))
    }

    /// What the combination fitted by `level` saves against this sweep's baseline at
    /// `at`, from both fits; `None` when either cannot predict there.
    pub fn saving_of(&self, level: &Sweep, at: &Point) -> Option<Saving> {
        let baseline = self.target_at(at, 1).ok()?;
        Some(Saving::between(&baseline, &level.target_at(at, 1).ok()?))
    }

    /// Sets each variant's [`VariantSweep::saving`] at [`Sweep::saving_point`].
    pub fn record_savings(&mut self) {
        let at = self.saving_point().map(|(at, _)| at);
        let savings: Vec<Option<Saving>> = self
            .variants
            .iter()
            .map(|v| self.saving_of(&v.sweep, at.as_ref()?))
            .collect();
        for (variant, saving) in self.variants.iter_mut().zip(savings) {
            variant.saving = saving;
        }
    }

    /// The saving of `variant`'s combination at `at`, computed from the fits, so that
    /// a recorded saving edited by hand decides nothing (one that contradicts the fits
    /// does not even read: [`Sweep::check_savings`]); the recorded one only where the
    /// fits cannot predict there.
    fn saving_at(&self, variant: &VariantSweep, at: &Point) -> Option<Saving> {
        self.saving_of(&variant.sweep, at)
            .or_else(|| variant.saving.clone().filter(|s| s.at == *at))
    }
}

/// A lever's saving that shrank between the snapshot and this run (see
/// [`compare_levels`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavingFinding {
    /// The combination of levels, as a message names it (`checkpointing=blocks`).
    pub lever: String,
    /// `peak` or a category.
    pub figure: String,
    /// Where the savings are predicted.
    pub at: Point,
    /// Whether `at` is the test's target (else the grid's largest point).
    pub named: bool,
    /// The snapshot's saving, in bytes (negative: the combination cost memory).
    pub old: i64,
    /// This run's.
    pub new: i64,
    /// The snapshot's baseline figure the old saving is a share of.
    pub old_baseline: u64,
    /// This run's baseline figure the new saving is a share of.
    pub new_baseline: u64,
    /// The limit it is held to: the peak's, taken of the snapshot's baseline peak.
    pub limit: String,
    /// The bytes the saving may shrink by within the limit.
    pub slack: u64,
    /// Whether it shrank by more than `slack`.
    pub regressed: bool,
}

impl SavingFinding {
    /// `checkpointing=blocks: activations saving at target 61.2% → 4.1% (12.00 MiB →
    /// 820.00 KiB, shrank by 11.20 MiB; over the peak's limit +1% | 64.00 KiB, 409.60
    /// KiB of the baseline's peak)`: each percentage of its own baseline's figure.
    pub fn line(&self) -> String {
        let place = if self.named {
            "target".to_owned()
        } else {
            format!("the sweep's largest point ({})", show_point(&self.at))
        };
        format!(
            "{}: {} saving at {place} {} → {} ({} → {}, shrank by {}; over the peak's limit {}, {} of the baseline's peak)",
            self.lever,
            self.figure,
            percent_of(self.old, self.old_baseline),
            percent_of(self.new, self.new_baseline),
            signed_bytes(self.old),
            signed_bytes(self.new),
            HumanBytes((i128::from(self.old) - i128::from(self.new)).unsigned_abs() as u64),
            self.limit,
            HumanBytes(self.slack),
        )
    }
}

/// `61.2%` of `of`, or `n/a` when `of` is 0.
fn percent_of(bytes: i64, of: u64) -> String {
    if of == 0 {
        return "n/a".into();
    }
    format!("{:.1}%", bytes as f64 * 100.0 / of as f64)
}

/// `12.00 MiB`, or `-1.50 MiB` for a negative count.
fn signed_bytes(bytes: i64) -> String {
    let shown = HumanBytes(bytes.unsigned_abs());
    if bytes < 0 {
        format!("-{shown}")
    } else {
        shown.to_string()
    }
}

/// A combination of levels in words, its axes in name order: `checkpointing=blocks, precision=bf16`.
pub fn show_variant(variant: &BTreeMap<String, String>) -> String {
    variant
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Each saving of each combination of `new` that shrank from `old`'s (regressions
/// first), held to `limit` (the peak's) of the snapshot's baseline peak.
fn saving_findings(old: &Sweep, new: &Sweep, limit: Limit) -> Vec<SavingFinding> {
    let Some((at, named)) = new.saving_point() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for variant in &new.variants {
        let was = old
            .variants
            .iter()
            .find(|v| v.variant == variant.variant)
            .and_then(|v| old.saving_at(v, &at));
        let (Some(was), Some(now)) = (was, new.saving_at(variant, &at)) else {
            continue;
        };
        let slack = limit.slack(was.baseline_peak_bytes);
        let figures = Category::ALL.map(Some).into_iter().chain([None]);
        for figure in figures {
            let ((o, o_of), (n, n_of)) = (was.of(figure), now.of(figure));
            let shrank = i128::from(o) - i128::from(n);
            if shrank <= 0 {
                continue;
            }
            out.push(SavingFinding {
                lever: show_variant(&variant.variant),
                figure: figure.map_or(PEAK, Category::as_str).to_owned(),
                at: at.clone(),
                named,
                old: o,
                new: n,
                old_baseline: o_of,
                new_baseline: n_of,
                limit: limit.to_string(),
                slack,
                regressed: shrank > i128::from(slack),
            });
        }
    }
    out.sort_by_key(|f| !f.regressed);
    out
}

/// A note per combination of `new` recorded for the first time (`old`, the
/// snapshot's sweep, lacks it or there is none) whose peak saves nothing or costs
/// memory at the target (else the grid's largest point): said once, when recorded,
/// never a failure.
pub fn saving_notes(new: &Sweep, old: Option<&Sweep>) -> Vec<String> {
    let Some((at, named)) = new.saving_point() else {
        return Vec::new();
    };
    let place = if named {
        format!("target ({})", show_point(&at))
    } else {
        format!("the sweep's largest point ({})", show_point(&at))
    };
    let baseline = show_variant(&new.combinations()[0].0);
    new.variants
        .iter()
        .filter(|v| old.is_none_or(|o| o.variant(&v.variant).is_none()))
        .filter_map(|v| Some((v, new.saving_at(v, &at)?)))
        .filter(|(_, s)| s.peak_bytes <= 0)
        .map(|(v, s)| {
            let what = if s.peak_bytes == 0 {
                "equals".to_owned()
            } else {
                format!(
                    "is {} ({}) over",
                    signed_bytes(-s.peak_bytes),
                    percent_of(-s.peak_bytes, s.baseline_peak_bytes)
                )
            };
            format!(
                "{} saves no memory at {place}: its predicted peak {what} the baseline's ({baseline}, {}); recorded, not a failure",
                show_variant(&v.variant),
                HumanBytes(s.baseline_peak_bytes)
            )
        })
        .collect()
}

/// `precision ["f32", "bf16"]`, or `none`.
fn show_levels(levels: &BTreeMap<String, Vec<String>>) -> String {
    if levels.is_empty() {
        return "none".into();
    }
    levels
        .iter()
        .map(|(k, v)| format!("{k} {v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Each figure of `target` that grew over `old_target` (regressions first), with the
/// term of its formula that grew.
fn findings(
    old: &Sweep,
    new: &Sweep,
    old_target: &Target,
    target: &Target,
    limit_of: impl Fn(Option<Category>) -> Limit,
) -> Vec<TargetFinding> {
    let mut figures: Vec<(String, Option<Category>, u64, u64)> = Category::ALL
        .into_iter()
        .map(|c| {
            let get = |t: &Target| t.category_bytes.get(&c).copied().unwrap_or(0);
            (c.as_str().to_owned(), Some(c), get(old_target), get(target))
        })
        .collect();
    figures.push((PEAK.into(), None, old_target.peak_bytes, target.peak_bytes));
    let grid = new.grid().ok();
    let mut out = Vec::new();
    for (name, category, o, n) in figures {
        if n <= o {
            continue;
        }
        let limit = limit_of(category);
        let regressed = n - o > limit.slack(o);
        let figure = match category {
            Some(c) => Figure::Category(c),
            None => peak_figure(new, &target.at),
        };
        let old_fit = old.get(figure).or_else(|| {
            old.get(peak_figure(old, &target.at))
                .filter(|_| category.is_none())
        });
        let mut why = term_that_grew(&name, old_fit, new.get(figure), &target.at);
        if let Some(caveat) = new
            .get(figure)
            .and_then(|fit| flag_caveat(fit, grid.as_ref()?))
        {
            why = format!("{why}; {caveat}");
        }
        if category.is_none()
            && let Some(grid) = &grid
        {
            for (candidate, fit) in new.phase_fits() {
                if figure.to_string() != candidate
                    && let Some(caveat) = flag_caveat(fit, grid)
                {
                    why = format!("{why}; within the peak's maximum, {candidate}: {caveat}");
                }
            }
        }
        out.push(TargetFinding {
            why,
            figure: name,
            old: o,
            new: n,
            limit: limit.to_string(),
            regressed,
        });
    }
    out.sort_by_key(|f| !f.regressed);
    out
}

/// Why a fit's prediction is not to be trusted, when it is flagged on `grid`: a finding
/// on it says so beside the term that grew.
fn flag_caveat(fit: &Fit, grid: &Grid) -> Option<String> {
    Some(match fit.flag(grid)? {
        Flag::Missed { ppm } => format!(
            "the new fit misses a held-out point by {:.2}% (over 2%): not to be trusted",
            ppm as f64 / 10_000.0
        ),
        Flag::Interpolates(i) => format!(
            "the new fit interpolates every combination of the values of {}: not to be trusted",
            i.axes_in_words()
        ),
    })
}

/// The figure the target's peak comes from: the highest phase at `at`, else `peak`.
fn peak_figure(sweep: &Sweep, at: &Point) -> Figure {
    if sweep.phase_fits().next().is_some()
        && let Ok(max) = predict_max(sweep.phase_fits(), at)
        && let Some(figure) = Figure::parse(&max.phase)
    {
        return figure;
    }
    Figure::Peak
}

/// `activations: +512 B × batch·seq·layers` when both fits have the same terms (the
/// term whose contribution at `at` grew most), else both formulas.
fn term_that_grew(name: &str, old: Option<&Fit>, new: Option<&Fit>, at: &Point) -> String {
    let (Some(old), Some(new)) = (old, new) else {
        return format!("{name}: no formula to compare");
    };
    let monomials = |f: &Fit| {
        let mut m: Vec<_> = f.terms.terms.iter().map(|t| t.monomial.clone()).collect();
        m.sort();
        m
    };
    if monomials(old) != monomials(new) {
        return format!("{name}: was {}, now {}", old.terms, new.terms);
    }
    let mut best: Option<(BigRational, String)> = None;
    for term in &new.terms.terms {
        let was = old
            .terms
            .terms
            .iter()
            .find(|t| t.monomial == term.monomial)
            .map(|t| t.coefficient.clone())
            .unwrap_or_else(BigRational::zero);
        let delta = &term.coefficient - &was;
        let Ok(value) = term.monomial.eval(at) else {
            continue;
        };
        let contribution = &delta * BigRational::from_integer(value);
        if best.as_ref().is_none_or(|(b, _)| contribution > *b) {
            let single = crate::axes::Formula {
                terms: vec![crate::axes::Term {
                    coefficient: delta,
                    monomial: term.monomial.clone(),
                }],
            };
            let text = single.to_string();
            let signed = if text.starts_with('-') {
                text
            } else {
                format!("+{text}")
            };
            best = Some((contribution, signed));
        }
    }
    match best {
        Some((_, text)) => format!("{name}: {text}"),
        None => format!("{name}: was {}, now {}", old.terms, new.terms),
    }
}

/// A sweep's axes as a message names them: `batch = [1, 2], seq = [8, 16]`.
pub fn show_axes(axes: &BTreeMap<String, Vec<u64>>) -> String {
    axes.iter()
        .map(|(k, v)| format!("{k} = {v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_names_read_back_as_the_figure() {
        let names: Vec<String> = Figure::all().map(|f| f.to_string()).collect();
        for (figure, name) in Figure::all().zip(&names) {
            assert_eq!(Figure::parse(name), Some(figure), "{name}");
        }
        for name in [
            "peak",
            "allocated over peak",
            "reserved over allocated",
            "optimizer_state",
            "phase optimizer_step",
            "temporaries in backward",
        ] {
            assert!(names.iter().any(|n| n == name), "{name}");
        }
        assert_eq!(Figure::parse("phase nowhere"), None);
    }
}
