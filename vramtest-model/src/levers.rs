//! Levers: what each way of making a training step smaller saves, on the user's own
//! step, at the configuration that matters (`show TEST --at .. --levers`), and which
//! of them make it fit a memory size (`--fit-on 24GiB`).
//!
//! The article this product grew from ends on the levers practitioners pull when a
//! step does not fit: a smaller batch, gradient accumulation to keep the effective
//! batch, mixed precision ("about 50% less"), gradient checkpointing ("60%–70% less
//! activation memory", trading compute for memory), and data parallelism; ZeRO and
//! 8-bit optimizers are their modern continuation. Estimators compute these by formula
//! from the parameter count. Here a lever is either **measured** or **projected**:
//!
//! - **Measured levers** are the levels of a categorical axis
//!   (`precision = ["f32", "bf16"]`, `checkpointing = ["off", "blocks"]`): the step
//!   runs the numeric grid at every combination of levels, each combination is fitted
//!   on its own, and its figures are predicted at the target. The first level of each
//!   axis is the baseline ([`LeverAxes::baseline`]). A [`LeverTable`] has one row per
//!   combination: each category, the peak, the predicted CUDA allocated and reserved
//!   bytes, the saving against the baseline (signed: a lever that costs memory shows
//!   a negative saving), the measured CPU step time relative to the baseline (the cost
//!   side of checkpointing) and what fits per memory size.
//!   - *precision*: the dtype the parameters, activations and gradients are kept in
//!     (the article's mixed precision);
//!   - *checkpointing*: which forward-pass results are kept for the backward pass and
//!     which are recomputed there (the article's gradient checkpointing).
//! - **Projected levers** need no user code, so they are computed from a row's
//!   figures, each with its formula, and labelled as projected ([`ProjectedLever`]):
//!   - *gradient accumulation* ([`project_accumulation`]): the effective batch `B` as
//!     `k` micro-batches of the largest `b` dividing `B` that fits, from the figures
//!     predicted along the batch axis; an accumulator of the weights' gradients (the
//!     gradient bytes up to the parameters') is kept across the micro-batches;
//!   - *ZeRO-1/2/3* over `ranks` data-parallel GPUs ([`project_zero`]): today's
//!     per-GPU projection ([`crate::sweep::project`]) as a row: the sharded
//!     categories divided among the ranks, ZeRO-3 gathering one layer's parameters;
//!   - *8-bit optimizer moments* ([`project_8bit_moments`]): the optimizer state
//!     stored in 8 bits instead of the row's precision (a quarter of its bytes from
//!     f32, a half from bf16: [`moment_precision`]), assuming every byte of it is a
//!     moment (Adam's two moments; master copies would not shrink).
//!
//! A projected lever can be measured too: a categorical axis with the level
//! `eight_bit_moments`, `zero1`, `zero2` or `zero3` ([`LeverProjection::measured_level`])
//! measures it on the user's step, and the projected row then carries that
//! measurement beside it ([`MeasuredCounterpart`]), so the projection's assumptions
//! are checked against the step.
//!
//! [`LeverTable::fit_on`] ranks the rows, measured and projected, that fit a memory
//! size: trusted first, then cheapest (the measured time ratio, then fewer levers),
//! and when none fits, the closest one and by how many bytes it misses.
//!
//! Doubt travels with the figure ([`crate::doubt`]): every row carries the flagged
//! fits it rests on (`flagged`, what `show --at` lists for its combination; a
//! projected row those of the row it is projected from), and a row with a category
//! above its own peak is impossible (`impossible`): it shows no saving.
//!
//! Pure data in, data out: the caller predicts each combination's figures (the axes
//! model's [`Estimate`]) and hands them here.

use crate::axes::{AxesError, Point};
use crate::bytes::{HumanBytes, ParseBytesError, parse_bytes};
use crate::category::Category;
use crate::doubt::{Doubt, over_peak};
use crate::profile::CategoryBytes;
pub use crate::sweep::show_variant;
use crate::sweep::{Estimate, PointError, Shard, Sweep, parse_point, project};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// A combination of levels: each categorical axis and its level
/// (`{"checkpointing": "blocks", "precision": "bf16"}`).
pub type LeverVariant = BTreeMap<String, String>;

/// Bad input to the levers: an unknown axis or level, a categorical axis where a
/// numeric one is needed, a malformed size, figures that do not make a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LeverError {
    /// A categorical axis without levels.
    #[error("categorical axis `{axis}` lists no level (hint: `{axis} = [\"off\", \"on\"]`)")]
    EmptyAxis {
        /// The axis.
        axis: String,
    },
    /// A level listed twice.
    #[error("categorical axis `{axis}` lists `{level}` twice; levels must be distinct")]
    RepeatedLevel {
        /// The axis.
        axis: String,
        /// The level.
        level: String,
    },
    /// A name that is not one of the categorical axes.
    #[error("`{axis}` is not a categorical axis (the categorical axes: {known})")]
    UnknownAxis {
        /// The name given.
        axis: String,
        /// The categorical axes, comma-separated.
        known: String,
    },
    /// A level the axis does not list.
    #[error("axis `{axis}` has no level `{level}` (its levels: {known})")]
    UnknownLevel {
        /// The axis.
        axis: String,
        /// The level given.
        level: String,
        /// The axis's levels, comma-separated, the baseline first.
        known: String,
    },
    /// A combination that leaves a categorical axis out.
    #[error("the combination `{variant}` leaves out the categorical axis `{axis}`")]
    MissingAxis {
        /// The combination, as `axis=level, ..`.
        variant: String,
        /// The axis left out.
        axis: String,
    },
    /// `--solve` given a categorical axis.
    #[error(
        "--solve {axis}: `{axis}` is a categorical axis (levels: {levels}); --solve takes a numeric axis, and every level is shown anyway"
    )]
    CategoricalSolve {
        /// The axis.
        axis: String,
        /// Its levels, comma-separated.
        levels: String,
    },
    /// A memory size that does not parse (`--fit-on 24 gigs`). Its hint offers only
    /// sizes `--fit-on` takes: each with its unit ([`FIT_ON_HINT`]).
    #[error("--fit-on: invalid byte size `{}`: {} (hint: {FIT_ON_HINT})", .0.input, .0.reason)]
    Size(#[from] ParseBytesError),
    /// A memory size without a unit (`--fit-on 24`).
    #[error(
        "--fit-on: `{size}` has no unit (write `{size}GiB`, `{size}GB` or, for bytes, `{size}B`)"
    )]
    SizeUnit {
        /// The size, as given.
        size: String,
    },
    /// A memory size of zero bytes.
    #[error("--fit-on: `{size}` is zero bytes: nothing fits it")]
    SizeZero {
        /// The size, as given.
        size: String,
    },
    /// The numeric part of `--at`.
    #[error("--at: {0}")]
    Point(#[from] PointError),
    /// The same combination given twice.
    #[error("the combination `{variant}` is given twice")]
    RepeatedVariant {
        /// The combination.
        variant: String,
    },
    /// No figures for the baseline: no saving can be computed.
    #[error("no figures for the baseline `{baseline}`: savings are measured against it")]
    NoBaseline {
        /// The baseline combination.
        baseline: String,
    },
}

/// The categorical axes of a sweep, each with its levels; the first level of each axis
/// is its baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeverAxes {
    axes: BTreeMap<String, Vec<String>>,
}

impl LeverAxes {
    /// Checks the axes: each lists at least one level, none twice.
    pub fn new(axes: BTreeMap<String, Vec<String>>) -> Result<LeverAxes, LeverError> {
        for (axis, levels) in &axes {
            if levels.is_empty() {
                return Err(LeverError::EmptyAxis { axis: axis.clone() });
            }
            let mut seen = BTreeSet::new();
            for level in levels {
                if !seen.insert(level) {
                    return Err(LeverError::RepeatedLevel {
                        axis: axis.clone(),
                        level: level.clone(),
                    });
                }
            }
        }
        Ok(LeverAxes { axes })
    }

    /// Each axis and its levels, the baseline first.
    pub fn axes(&self) -> &BTreeMap<String, Vec<String>> {
        &self.axes
    }

    /// The baseline: each axis at its first level.
    pub fn baseline(&self) -> LeverVariant {
        self.axes
            .iter()
            .map(|(axis, levels)| (axis.clone(), levels[0].clone()))
            .collect()
    }

    /// Every combination of levels, the baseline first, then in the order of the axes'
    /// names and of each axis's levels (the last axis varying fastest).
    pub fn combinations(&self) -> Vec<LeverVariant> {
        let mut out = vec![LeverVariant::new()];
        for (axis, levels) in &self.axes {
            out = out
                .into_iter()
                .flat_map(|partial| {
                    levels.iter().map(move |level| {
                        let mut v = partial.clone();
                        v.insert(axis.clone(), level.clone());
                        v
                    })
                })
                .collect();
        }
        out
    }

    /// The combinations that agree with `fixed` (some axes at a level, the others
    /// free): what an `--at` that leaves a categorical axis out predicts.
    pub fn matching(&self, fixed: &LeverVariant) -> Result<Vec<LeverVariant>, LeverError> {
        for (axis, level) in fixed {
            self.check_level(axis, level)?;
        }
        Ok(self
            .combinations()
            .into_iter()
            .filter(|v| fixed.iter().all(|(a, l)| &v[a] == l))
            .collect())
    }

    /// Checks that `variant` gives every categorical axis one of its levels and names
    /// no other axis.
    pub fn check(&self, variant: &LeverVariant) -> Result<(), LeverError> {
        for (axis, level) in variant {
            self.check_level(axis, level)?;
        }
        match self.axes.keys().find(|a| !variant.contains_key(*a)) {
            Some(axis) => Err(LeverError::MissingAxis {
                variant: show_variant(variant),
                axis: axis.clone(),
            }),
            None => Ok(()),
        }
    }

    fn check_level(&self, axis: &str, level: &str) -> Result<(), LeverError> {
        let levels = self.axes.get(axis).ok_or_else(|| LeverError::UnknownAxis {
            axis: axis.to_owned(),
            known: self.axes.keys().cloned().collect::<Vec<_>>().join(", "),
        })?;
        if levels.iter().any(|l| l == level) {
            Ok(())
        } else {
            Err(LeverError::UnknownLevel {
                axis: axis.to_owned(),
                level: level.to_owned(),
                known: levels.join(", "),
            })
        }
    }

    /// How many levers `variant` pulls: the axes not at their baseline level.
    pub fn lever_count(&self, variant: &LeverVariant) -> usize {
        count_levers(&self.baseline(), variant)
    }

    /// `--solve AXIS`: an error when `axis` is categorical (a numeric axis is checked
    /// against the grid by the sweep).
    pub fn check_solve(&self, axis: &str) -> Result<(), LeverError> {
        match self.axes.get(axis) {
            Some(levels) => Err(LeverError::CategoricalSolve {
                axis: axis.to_owned(),
                levels: levels.join(", "),
            }),
            None => Ok(()),
        }
    }

    /// Splits `--at layers=32,seq=4096,precision=bf16` into its numeric point (parsed
    /// as [`parse_point`] does) and the levels it fixes (checked: an unknown level is
    /// an error naming the axis and its levels).
    pub fn parse_at(&self, text: &str) -> Result<(Point, LeverVariant), LeverError> {
        let mut numeric = Vec::new();
        let mut fixed = LeverVariant::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let categorical = part
                .split_once('=')
                .map(|(a, l)| (a.trim(), l.trim()))
                .filter(|(a, _)| self.axes.contains_key(*a));
            let Some((axis, level)) = categorical else {
                numeric.push(part);
                continue;
            };
            self.check_level(axis, level)?;
            if fixed.insert(axis.to_owned(), level.to_owned()).is_some() {
                return Err(PointError::Twice(axis.to_owned()).into());
            }
        }
        Ok((parse_point(&numeric.join(","))?, fixed))
    }
}

fn count_levers(baseline: &LeverVariant, variant: &LeverVariant) -> usize {
    variant
        .iter()
        .filter(|(axis, level)| baseline.get(*axis) != Some(*level))
        .count()
}

/// What `--fit-on`'s errors suggest: sizes it takes, each with its unit (a bare count,
/// which other sizes take as bytes, it refuses).
pub const FIT_ON_HINT: &str =
    "write a number with its unit, like `24GiB`, `80GB`, `1.5TiB` or, for bytes, `4096B`";

/// `--fit-on 24GiB`: a memory size, in the syntax of every size in the settings, with
/// its unit written out (a bare `24` is more likely 24 GB than 24 bytes); a malformed
/// one is [`LeverError::Size`], one without a unit [`LeverError::SizeUnit`], zero
/// [`LeverError::SizeZero`].
pub fn parse_fit_on(text: &str) -> Result<u64, LeverError> {
    if text.trim().ends_with(|c: char| c.is_ascii_digit()) {
        return Err(LeverError::SizeUnit {
            size: text.trim().to_owned(),
        });
    }
    match parse_bytes(text)? {
        0 => Err(LeverError::SizeZero {
            size: text.trim().to_owned(),
        }),
        bytes => Ok(bytes),
    }
}

/// A memory size as a JSON key: `24GiB`, `512MiB`, else the bytes.
pub fn size_key(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if bytes > 0 && bytes.is_multiple_of(GIB) {
        format!("{}GiB", bytes / GIB)
    } else if bytes > 0 && bytes.is_multiple_of(MIB) {
        format!("{}MiB", bytes / MIB)
    } else {
        bytes.to_string()
    }
}

/// One combination's figures at the target: what the axes model predicts for it,
/// and its measured CPU step time relative to the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct LeverFigures {
    /// The combination.
    pub variant: LeverVariant,
    /// Each category's own peak.
    pub category_bytes: CategoryBytes,
    /// The peak.
    pub peak_bytes: u64,
    /// The predicted CUDA allocated peak, when the runs had one.
    pub allocated_bytes: Option<u64>,
    /// The predicted CUDA reserved peak, when the runs had one.
    pub reserved_bytes: Option<u64>,
    /// The measured CPU step time over the baseline's (`None`: not measured; the
    /// baseline's is 1 by definition).
    pub time_ratio: Option<f64>,
    /// The flagged figures of the fits these figures rest on ([`Estimate::flagged`]
    /// of the combination's sweep; a projection keeps those of its source).
    pub flagged: Vec<String>,
}

impl LeverFigures {
    /// The figures of `estimate` (what [`Sweep::estimate`] predicts for the
    /// combination `variant`).
    pub fn from_estimate(
        variant: LeverVariant,
        estimate: &Estimate,
        time_ratio: Option<f64>,
    ) -> LeverFigures {
        let mut category_bytes = CategoryBytes::default();
        for (&c, &b) in &estimate.category_bytes {
            category_bytes[c] = b;
        }
        LeverFigures {
            variant,
            category_bytes,
            peak_bytes: estimate.peak_bytes,
            allocated_bytes: estimate.allocated_bytes,
            reserved_bytes: estimate.reserved_bytes,
            time_ratio,
            flagged: estimate.flagged.clone(),
        }
    }

    /// The doubt on these figures: the flagged fits they rest on, and the categories
    /// above their own peak.
    pub fn doubt(&self) -> Doubt {
        Doubt {
            flagged: self.flagged.clone(),
            impossible: over_peak(
                Category::ALL.map(|c| (c, self.category_bytes[c])),
                self.peak_bytes,
            ),
        }
    }

    /// The figures as an [`Estimate`] at `at` (no fit descriptions): what the sweep's
    /// fitting rule and projection take.
    fn estimate(&self, at: &Point) -> Estimate {
        Estimate {
            at: at.clone(),
            category_bytes: Category::ALL
                .into_iter()
                .map(|c| (c, self.category_bytes[c]))
                .collect(),
            peak_bytes: self.peak_bytes,
            peak_phase: None,
            peak_from: None,
            allocated_bytes: self.allocated_bytes,
            reserved_bytes: self.reserved_bytes,
            loo_error_ppm: BTreeMap::new(),
            terms: BTreeMap::new(),
            flagged: self.flagged.clone(),
            interpolated: BTreeMap::new(),
            falls: BTreeMap::new(),
            negative: BTreeMap::new(),
            pool_held: None,
        }
    }

    /// What the device must hold ([`Estimate::device_bytes`]: the reserved peak where
    /// there is one, else the peak).
    pub fn device_bytes(&self) -> u64 {
        self.estimate(&Point::new()).device_bytes()
    }

    /// Whether the figures fit `memory` with `allowance` set aside ([`Estimate::fits`]).
    pub fn fits(&self, memory: u64, allowance: u64) -> bool {
        self.estimate(&Point::new()).fits(memory, allowance)
    }

    /// Takes `saved` bytes off the peak, allocated and reserved figures (or adds them,
    /// when negative).
    fn shift(&mut self, saved: i128) {
        self.peak_bytes = less(self.peak_bytes, saved);
        self.allocated_bytes = self.allocated_bytes.map(|b| less(b, saved));
        self.reserved_bytes = self.reserved_bytes.map(|b| less(b, saved));
    }
}

/// `bytes − saved`, within `0..=u64::MAX`.
fn less(bytes: u64, saved: i128) -> u64 {
    u64::try_from((i128::from(bytes) - saved).max(0)).unwrap_or(u64::MAX)
}

fn clamp_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// A projected lever: which one, with what, and its formula.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProjectedLever {
    /// The lever and its parameters.
    #[serde(flatten)]
    pub lever: LeverProjection,
    /// How the row was computed from the measured figures, in words and symbols.
    pub formula: String,
}

/// The levers projected from measured figures (JSON: `"lever": "accumulation"`, ..).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "lever", rename_all = "snake_case")]
pub enum LeverProjection {
    /// Gradient accumulation: `effective_batch = steps × micro_batch`.
    Accumulation {
        /// `B`, the batch the optimizer sees.
        effective_batch: u64,
        /// `k`, the micro-batches per optimizer step.
        steps: u64,
        /// `b`, the largest divisor of `B` that fits.
        micro_batch: u64,
        /// The memory size `b` was chosen for.
        memory_bytes: u64,
    },
    /// ZeRO over data-parallel ranks.
    Zero {
        /// `zero1`, `zero2` or `zero3`.
        stage: String,
        /// The number of ranks.
        ranks: u64,
        /// ZeRO-3: one layer's parameters, gathered whole while it runs.
        gathered_bytes: Option<u64>,
    },
    /// The optimizer's moments stored in 8 bits.
    EightBitMoments,
}

impl LeverProjection {
    /// The level a categorical axis names to measure this lever instead of projecting
    /// it: `eight_bit_moments`, `zero1`, `zero2` or `zero3` (a step can shard its own
    /// optimizer state as one rank of many would). `None` for accumulation, whose
    /// micro-batches the batch axis measures already.
    pub fn measured_level(&self) -> Option<&str> {
        match self {
            LeverProjection::Accumulation { .. } => None,
            LeverProjection::Zero { stage, .. } => Some(stage),
            LeverProjection::EightBitMoments => Some(EIGHT_BIT_MOMENTS),
        }
    }
}

/// The level that measures 8-bit optimizer moments
/// ([`LeverProjection::measured_level`]).
pub const EIGHT_BIT_MOMENTS: &str = "eight_bit_moments";

/// A projected row's measured counterpart: the combination that measures the same
/// lever (the row's own combination with one axis at the lever's
/// [`LeverProjection::measured_level`]), shown beside the projection (JSON: the
/// projected row's `measured`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredCounterpart {
    /// The measured combination.
    pub variant: LeverVariant,
    /// Its peak.
    pub peak_bytes: u64,
    /// Each category's own peak.
    pub category_bytes: CategoryBytes,
    /// The projected peak less the measured one (negative: the projection promised
    /// more saving than the lever gave).
    pub off_bytes: i64,
    /// `off_bytes` as a percentage of the measured peak (`None`: a zero peak).
    pub off_percent: Option<f64>,
}

/// A row's figures projected by a lever that needs no user code.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectedFigures {
    /// The projected figures (the combination they were projected from in `variant`).
    pub figures: LeverFigures,
    /// The lever and its formula.
    pub lever: ProjectedLever,
}

/// Gradient accumulation: the effective batch `effective_batch` (`B`) as `k`
/// micro-batches of `b`, the largest divisor of `B` whose projected figures, with
/// `allowance`, fit `memory`. `figures_at(b)` gives the combination's figures at batch
/// `b` (the axes model's prediction along the batch axis, the other axes at the
/// target). With `k > 1`, an accumulator of the weights' gradients (which do not grow
/// with the batch) is kept across the micro-batches: [`accumulator_bytes`], the
/// gradient bytes up to the parameters', is added to the gradients, the peak, allocated
/// and reserved figures, an upper bound (a framework that accumulates into the
/// gradients it holds needs less). `None` when not even `b = 1`
/// fits. Every divisor is tried, largest first: no assumption that memory grows with
/// the batch.
pub fn project_accumulation<E>(
    effective_batch: u64,
    memory: u64,
    allowance: u64,
    mut figures_at: impl FnMut(u64) -> Result<LeverFigures, E>,
) -> Result<Option<ProjectedFigures>, E> {
    for b in divisors_descending(effective_batch) {
        let why = format!(
            "b the largest divisor of B that fits {}",
            HumanBytes(memory)
        );
        let row = accumulation(effective_batch, b, memory, figures_at(b)?, &why);
        if row.figures.fits(memory, allowance) {
            return Ok(Some(row));
        }
    }
    Ok(None)
}

/// Gradient accumulation at the smallest micro-batch, `b = 1` (`k = B`), for a
/// `memory` that no micro-batch fits ([`project_accumulation`] gave `None`): the row
/// `--fit-on` weighs when it looks for the closest miss. `None` when `B` is 1.
pub fn project_smallest_accumulation<E>(
    effective_batch: u64,
    memory: u64,
    figures_at: impl FnOnce(u64) -> Result<LeverFigures, E>,
) -> Result<Option<ProjectedFigures>, E> {
    if effective_batch < 2 {
        return Ok(None);
    }
    let why = format!(
        "b = 1, the smallest micro-batch; not even it fits {}",
        HumanBytes(memory)
    );
    Ok(Some(accumulation(
        effective_batch,
        1,
        memory,
        figures_at(1)?,
        &why,
    )))
}

/// The effective batch `B` as `B / b` micro-batches of `b`, from `figures` at batch `b`;
/// `why` says how `b` was chosen.
fn accumulation(
    effective_batch: u64,
    b: u64,
    memory: u64,
    mut figures: LeverFigures,
    why: &str,
) -> ProjectedFigures {
    let steps = effective_batch / b;
    let accumulator = accumulator_bytes(&figures.category_bytes);
    let formula = if steps == 1 {
        format!("B = {effective_batch} fits as one batch: the step at batch {b}, no accumulation")
    } else {
        let gradients = figures.category_bytes[Category::Gradients];
        figures.category_bytes[Category::Gradients] = gradients.saturating_add(accumulator);
        figures.shift(-i128::from(accumulator));
        format!(
            "B = k × b = {steps} × {b} ({why}): the step at batch b, plus an accumulator of the weights' gradients ({}) kept across the k micro-batches: peak = peak(b) + min(gradients(b), parameters(b))",
            HumanBytes(accumulator)
        )
    };
    let lever = LeverProjection::Accumulation {
        effective_batch,
        steps,
        micro_batch: b,
        memory_bytes: memory,
    };
    ProjectedFigures {
        figures,
        lever: ProjectedLever { lever, formula },
    }
}

/// The accumulator gradient accumulation keeps: one gradient per weight, so the
/// gradient bytes up to the parameters' (a framework's gradients may also hold
/// gradients of inputs, masks or other tensors that are no weight, which no
/// accumulator keeps); all the gradient bytes when no parameter was measured.
pub fn accumulator_bytes(categories: &CategoryBytes) -> u64 {
    let gradients = categories[Category::Gradients];
    match categories[Category::Parameters] {
        0 => gradients,
        parameters => gradients.min(parameters),
    }
}

/// The divisors of `n`, largest first (none for 0).
fn divisors_descending(n: u64) -> Vec<u64> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1u64;
    while d.saturating_mul(d) <= n {
        if n.is_multiple_of(d) {
            small.push(d);
            if d != n / d {
                large.push(n / d);
            }
        }
        d += 1;
    }
    large.into_iter().chain(small.into_iter().rev()).collect()
}

/// ZeRO over `ranks` GPUs: [`crate::sweep::project`] (the projection `show --at ..
/// --ranks N --shard zeroK` prints) applied to `figures` at the target `at`, as a row.
/// `sweep` is the combination's own sweep (ZeRO-3 takes one layer's parameters from
/// its fit).
pub fn project_zero(
    sweep: &Sweep,
    at: &Point,
    figures: &LeverFigures,
    ranks: u64,
    shard: Shard,
) -> Result<ProjectedFigures, AxesError> {
    let projection = project(sweep, &figures.estimate(at), ranks, shard)?;
    let per_gpu = LeverFigures::from_estimate(
        figures.variant.clone(),
        &projection.per_gpu,
        figures.time_ratio,
    );
    let ranks = projection.ranks;
    let sharded: Vec<String> = shard
        .sharded()
        .iter()
        .map(|c| format!("{c} ⌈÷ {ranks}⌉"))
        .collect();
    let mut formula = format!(
        "per GPU of {ranks} data-parallel ranks ({shard}): {}; the peak, allocated and reserved less what the shards save",
        sharded.join(", ")
    );
    if let Some(g) = projection.gathered_bytes {
        formula += &format!(
            "; plus one layer's parameters gathered whole ({}: parameters at layers = L less at L − 1)",
            HumanBytes(g)
        );
    }
    formula += "; the batch is per rank; communication buckets are left out";
    Ok(ProjectedFigures {
        figures: per_gpu,
        lever: ProjectedLever {
            lever: LeverProjection::Zero {
                stage: shard.to_string(),
                ranks,
                gathered_bytes: projection.gathered_bytes,
            },
            formula,
        },
    })
}

/// 8-bit optimizer moments: `optimizer_state` becomes `⌈optimizer_state / w⌉`, `w`
/// the bytes of one moment in the row's precision ([`moment_precision`]: a level that
/// names a dtype, `bf16` → 2, else f32's 4), and the peak, allocated and reserved
/// figures lose the difference (the optimizer state lives through the whole step).
/// Assumes every byte of the optimizer state is a moment in that precision; master
/// copies would not shrink, and the quantization's per-block scales are left out.
pub fn project_8bit_moments(figures: &LeverFigures) -> ProjectedFigures {
    let mut projected = figures.clone();
    let state = figures.category_bytes[Category::OptimizerState];
    let precision = moment_precision(&figures.variant);
    let (width, read) = match &precision {
        Some((axis, level, width)) => (*width, format!("{level} moments (from {axis}={level})")),
        None => (4, "f32 moments (no level names a precision)".to_owned()),
    };
    let kept = state.div_ceil(width);
    projected.category_bytes[Category::OptimizerState] = kept;
    projected.shift(i128::from(state - kept));
    let name = precision.map_or("f32".to_owned(), |(_, level, _)| level);
    ProjectedFigures {
        figures: projected,
        lever: ProjectedLever {
            lever: LeverProjection::EightBitMoments,
            formula: format!(
                "optimizer_state × 1/{width} ({} → {}: {read} stored in 8 bits, assuming every optimizer-state byte is part of a moment kept in {name}; master copies and per-block scales left out); the peak, allocated and reserved less the difference",
                HumanBytes(state),
                HumanBytes(kept)
            ),
        },
    }
}

/// The precision a combination keeps its optimizer moments in, as its levels name it:
/// the level of an axis named for it (`precision`, `dtype`, ..) when it names a dtype,
/// else the first level of any axis that can only be a dtype's name (`bf16`, `fp16`,
/// `f32`, `f64`, `fp8`, ..: a level `half` of some other axis is no precision), with
/// the bytes of one element. `None` when no level names one (mixed precision, say,
/// keeps f32 moments).
pub fn moment_precision(variant: &LeverVariant) -> Option<(String, String, u64)> {
    let dtype_axis = |axis: &str| axis.contains("precision") || axis.contains("dtype");
    let named = |(axis, level): (&String, &String), loose: bool| {
        dtype_bytes(level, loose).map(|w| (axis.clone(), level.clone(), w))
    };
    variant
        .iter()
        .filter(|(axis, _)| dtype_axis(axis))
        .find_map(|e| named(e, true))
        .or_else(|| variant.iter().find_map(|e| named(e, false)))
}

/// The bytes of one element of the dtype `name` names (case aside), if it names one;
/// `loose` also reads the words (`half`, `float`, `double`) that name a dtype only on
/// an axis for it.
fn dtype_bytes(name: &str, loose: bool) -> Option<u64> {
    let name = name.to_ascii_lowercase();
    let strict = match name.as_str() {
        "f64" | "fp64" | "float64" => Some(8),
        "f32" | "fp32" | "float32" | "tf32" => Some(4),
        "bf16" | "bfloat16" | "f16" | "fp16" | "float16" => Some(2),
        "f8" | "fp8" | "f8e4m3" | "f8e5m2" | "fp8e4m3" | "fp8e5m2" | "int8" | "i8" | "u8" => {
            Some(1)
        }
        _ => None,
    };
    let words = match name.as_str() {
        "double" => Some(8),
        "float" | "single" => Some(4),
        "half" => Some(2),
        _ => None,
    };
    strict.or(words.filter(|_| loose))
}

/// One row of the lever table: a combination's figures (measured or projected) and
/// what it saves against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeverRow {
    /// The combination of levels.
    pub variant: LeverVariant,
    /// Each category's own peak.
    pub category_bytes: CategoryBytes,
    /// The peak.
    pub peak_bytes: u64,
    /// The predicted CUDA allocated peak, when known.
    pub allocated_bytes: Option<u64>,
    /// The predicted CUDA reserved peak, when known.
    pub reserved_bytes: Option<u64>,
    /// The baseline's peak less this one (negative: the lever costs memory); `None`
    /// when this row or the baseline is impossible: no saving can be read from it.
    pub saving_bytes: Option<i64>,
    /// `saving_bytes` as a percentage of the baseline's peak (`None`: a zero baseline,
    /// or no saving).
    pub saving_percent: Option<f64>,
    /// Per category: the baseline's bytes less this row's.
    pub category_saving_bytes: BTreeMap<Category, i64>,
    /// Per category: the saving as a percentage of the baseline's bytes (`None`: the
    /// baseline has none of that category).
    pub category_saving_percent: BTreeMap<Category, Option<f64>>,
    /// The measured CPU step time over the baseline's (`None`: not measured).
    pub time_ratio: Option<f64>,
    /// The flagged figures of the fits the row rests on: the list `show --at` gives
    /// for its combination (a projected row: that of the row it is projected from).
    pub flagged: Vec<String>,
    /// The categories predicted above the row's own peak: a row that cannot be, shown
    /// with no saving (empty: a possible row).
    pub impossible: Vec<Category>,
    /// Per memory size (the table's sizes, in their order): whether it fits.
    #[serde(serialize_with = "serialize_fits")]
    pub fits: Vec<(u64, bool)>,
    /// What the device must hold: the reserved peak where known, else the peak.
    #[serde(skip)]
    pub device_bytes: u64,
    /// The levers pulled: the axes off their baseline level, plus one for a projection.
    #[serde(skip)]
    pub lever_count: usize,
    /// Set on a projected row: the lever and its formula.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projection: Option<ProjectedLever>,
    /// Set on a projected row whose lever is also measured by a level: that
    /// measurement, beside the projection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredCounterpart>,
}

impl LeverRow {
    /// The row's doubt: its flagged fits and the categories above its peak.
    pub fn doubt(&self) -> Doubt {
        Doubt {
            flagged: self.flagged.clone(),
            impossible: self.impossible.clone(),
        }
    }
}

fn serialize_fits<S: Serializer>(fits: &[(u64, bool)], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(fits.len()))?;
    for (bytes, fits) in fits {
        map.serialize_entry(&size_key(*bytes), fits)?;
    }
    map.end()
}

fn percent(saving: i128, base: u64) -> Option<f64> {
    (base > 0).then(|| saving as f64 * 100.0 / base as f64)
}

/// The lever table at a target: one row per measured combination, the baseline first,
/// and the projected rows (JSON: `{"at": .., "levers": [..], "projections": [..]}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeverTable {
    /// The numeric target (`layers=32, seq=4096, batch=8`).
    pub at: Point,
    /// One row per measured combination, the baseline first.
    pub levers: Vec<LeverRow>,
    /// The projected rows, in the order they were added.
    pub projections: Vec<LeverRow>,
    /// The memory sizes each row's `fits` answers for.
    #[serde(skip)]
    pub sizes: Vec<u64>,
    /// The bytes set aside for the CUDA context and libraries.
    #[serde(skip)]
    pub allowance: u64,
    #[serde(skip)]
    baseline: LeverFigures,
}

impl LeverTable {
    /// The table of `measured` (one per combination, the baseline's among them) at
    /// `at`, answering what fits each of `sizes` with `allowance` set aside. Rows follow
    /// [`LeverAxes::combinations`]; a combination not measured is left out.
    pub fn build(
        at: Point,
        axes: &LeverAxes,
        measured: Vec<LeverFigures>,
        sizes: &[u64],
        allowance: u64,
    ) -> Result<LeverTable, LeverError> {
        let mut by_variant: BTreeMap<LeverVariant, LeverFigures> = BTreeMap::new();
        for figures in measured {
            axes.check(&figures.variant)?;
            let variant = figures.variant.clone();
            if by_variant.insert(variant.clone(), figures).is_some() {
                return Err(LeverError::RepeatedVariant {
                    variant: show_variant(&variant),
                });
            }
        }
        let base = axes.baseline();
        let mut baseline =
            by_variant
                .get(&base)
                .cloned()
                .ok_or_else(|| LeverError::NoBaseline {
                    baseline: show_variant(&base),
                })?;
        baseline.time_ratio = baseline.time_ratio.or(Some(1.0));
        let mut table = LeverTable {
            at,
            levers: Vec::new(),
            projections: Vec::new(),
            sizes: sizes.to_vec(),
            allowance,
            baseline,
        };
        for variant in axes.combinations() {
            if let Some(mut figures) = by_variant.remove(&variant) {
                if variant == base {
                    figures.time_ratio = table.baseline.time_ratio;
                }
                let row = table.row(figures, None);
                table.levers.push(row);
            }
        }
        Ok(table)
    }

    /// The baseline's row.
    pub fn baseline(&self) -> &LeverRow {
        &self.levers[0]
    }

    /// Adds a projected row (from [`project_accumulation`], [`project_zero`] or
    /// [`project_8bit_moments`]).
    /// A projected row whose lever a level also measures (an axis at
    /// [`LeverProjection::measured_level`], the other axes as in the row it is
    /// projected from) carries that measurement as its `measured`. A projection from a
    /// combination that already measures its lever is left out: it would pull the
    /// lever twice.
    pub fn add_projection(&mut self, projected: ProjectedFigures) {
        let level = projected.lever.lever.measured_level();
        if level.is_some_and(|l| projected.figures.variant.values().any(|v| v == l)) {
            return;
        }
        let measured = level.and_then(|l| self.counterpart(&projected.figures, l));
        let mut row = self.row(projected.figures, Some(projected.lever));
        row.measured = measured;
        self.projections.push(row);
    }

    /// The measured row that is `projected`'s combination with one axis moved to
    /// `level`, compared with it.
    fn counterpart(&self, projected: &LeverFigures, level: &str) -> Option<MeasuredCounterpart> {
        let from = &projected.variant;
        let row = self.levers.iter().find(|r| {
            let moved: Vec<&String> = r
                .variant
                .iter()
                .filter(|(axis, l)| from.get(*axis) != Some(*l))
                .map(|(_, l)| l)
                .collect();
            r.variant.len() == from.len() && moved == [level]
        })?;
        let off = i128::from(projected.peak_bytes) - i128::from(row.peak_bytes);
        Some(MeasuredCounterpart {
            variant: row.variant.clone(),
            peak_bytes: row.peak_bytes,
            category_bytes: row.category_bytes,
            off_bytes: clamp_i64(off),
            off_percent: percent(off, row.peak_bytes),
        })
    }

    fn row(&self, figures: LeverFigures, projection: Option<ProjectedLever>) -> LeverRow {
        let base = &self.baseline;
        let mut category_saving_bytes = BTreeMap::new();
        let mut category_saving_percent = BTreeMap::new();
        for c in Category::ALL {
            let saving = i128::from(base.category_bytes[c]) - i128::from(figures.category_bytes[c]);
            category_saving_bytes.insert(c, clamp_i64(saving));
            category_saving_percent.insert(c, percent(saving, base.category_bytes[c]));
        }
        let doubt = figures.doubt();
        let saving = (doubt.impossible.is_empty() && base.doubt().impossible.is_empty())
            .then(|| i128::from(base.peak_bytes) - i128::from(figures.peak_bytes));
        let fits = self
            .sizes
            .iter()
            .map(|&m| (m, figures.fits(m, self.allowance)))
            .collect();
        LeverRow {
            lever_count: count_levers(&base.variant, &figures.variant)
                + usize::from(projection.is_some()),
            device_bytes: figures.device_bytes(),
            category_saving_bytes,
            category_saving_percent,
            saving_bytes: saving.map(clamp_i64),
            saving_percent: saving.and_then(|s| percent(s, base.peak_bytes)),
            fits,
            variant: figures.variant,
            category_bytes: figures.category_bytes,
            peak_bytes: figures.peak_bytes,
            allocated_bytes: figures.allocated_bytes,
            reserved_bytes: figures.reserved_bytes,
            time_ratio: figures.time_ratio,
            flagged: doubt.flagged,
            impossible: doubt.impossible,
            projection,
            measured: None,
        }
    }

    /// `--fit-on SIZE`: the rows, measured and projected, whose device bytes with the
    /// table's allowance fit `memory`, trusted first (then those resting on a flagged
    /// fit, then the impossible ones), each group cheapest first: a known time ratio
    /// before an unknown one, the smaller first; then fewer levers; then fewer device
    /// bytes. When none fits, the row that misses by the fewest bytes (a possible row
    /// before an impossible one; fewer levers on a tie).
    pub fn fit_on(&self, memory: u64) -> FitOnAnswer {
        let rows = self.levers.iter().chain(&self.projections);
        let need = |r: &LeverRow| r.device_bytes.saturating_add(self.allowance);
        let mut fitting: Vec<LeverRow> = rows
            .clone()
            .filter(|r| need(r) <= memory)
            .cloned()
            .collect();
        fitting.sort_by(|a, b| a.doubt().rank().cmp(&b.doubt().rank()).then(cheaper(a, b)));
        let closest = if fitting.is_empty() {
            rows.min_by_key(|r| (!r.impossible.is_empty(), need(r), r.lever_count))
                .map(|r| FitMiss {
                    missing_bytes: need(r) - memory,
                    row: r.clone(),
                })
        } else {
            None
        };
        let answer = fitting.first().or(closest.as_ref().map(|m| &m.row));
        FitOnAnswer {
            memory_bytes: memory,
            allowance_bytes: self.allowance,
            rests_on_flagged: answer.is_some_and(|r| !r.doubt().trusted()),
            fitting,
            closest,
        }
    }
}

/// The ranking of `--fit-on`: a known time ratio first, smaller first; then fewer
/// levers; then fewer device bytes.
fn cheaper(a: &LeverRow, b: &LeverRow) -> Ordering {
    let time = match (a.time_ratio, b.time_ratio) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    time.then(a.lever_count.cmp(&b.lever_count))
        .then(a.device_bytes.cmp(&b.device_bytes))
}

/// What makes the step fit a memory size (`--fit-on`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitOnAnswer {
    /// The memory size.
    pub memory_bytes: u64,
    /// The bytes set aside for the CUDA context and libraries.
    pub allowance_bytes: u64,
    /// The rows that fit, cheapest first.
    pub fitting: Vec<LeverRow>,
    /// When none fits: the closest row and by how much it misses.
    pub closest: Option<FitMiss>,
    /// Whether the answer (the first row that fits, else the closest) rests on a
    /// flagged fit or is impossible: no trusted row gives it.
    pub rests_on_flagged: bool,
}

/// The row that misses a memory size by the fewest bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitMiss {
    /// The row.
    pub row: LeverRow,
    /// Its device bytes plus the allowance, less the memory size.
    pub missing_bytes: u64,
}
