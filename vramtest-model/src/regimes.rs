//! Where a flagged fit misses: the level of an axis whose points behave unlike the
//! others. Memory changes regime along an axis (grouped-query attention copies keys
//! and values only when heads exceed the kv heads; an optimizer that updates one
//! weight at a time follows the largest; a batch-1 slice is not copied), and a grid
//! whose smallest level is another regime than the rest cannot be fitted by one
//! polynomial. Refitting without the smallest, then the largest, level of each axis of
//! three values or more tells which one it is: the figure fits within 2% without it.
//! Said beside the flag, so the user knows which level to move.

use crate::axes::{AxesError, Fit, Flag, Grid, Point, Prior};
use crate::sweep::{GridRun, Sweep, series_of};
use std::fmt;

/// A flagged figure that fits within 2% without one level of one axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regime {
    /// The figure (`activations`, `phase backward`).
    pub figure: String,
    /// The axis.
    pub axis: String,
    /// The level whose points behave unlike the others.
    pub level: u64,
    /// The axis's other levels.
    pub others: Vec<u64>,
    /// The fit without that level: its worst leave-one-out error, in parts per million.
    pub loo_error_ppm: u64,
    /// The fit's worst leave-one-out error on the whole grid, in parts per million.
    pub whole_ppm: u64,
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (axis, level) = (&self.axis, self.level);
        let others = match (self.others.first(), self.others.last()) {
            (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi}"),
            (Some(lo), _) => lo.to_string(),
            _ => String::new(),
        };
        write!(
            f,
            "`{}` misses at {axis}={level}: {axis}={level} behaves unlike {axis} {others} (the fit misses by {:.2}% with it, {:.2}% without it); measure the regime the target is in, or start the axis past {axis}={level}",
            self.figure,
            self.whole_ppm as f64 / 10_000.0,
            self.loo_error_ppm as f64 / 10_000.0,
        )
    }
}

/// For every figure of `sweep` that misses a held-out point by over 2%, the level of
/// an axis without which it fits within 2%, if one does (the smallest level tried
/// before the largest, the best fit kept), of the figures `wanted` keeps. `runs` are
/// the points `sweep` was fitted on.
pub fn regimes(
    sweep: &Sweep,
    runs: &[GridRun],
    wanted: impl Fn(&str, &Fit) -> bool,
) -> Result<Vec<Regime>, AxesError> {
    let grid = sweep.grid()?;
    let series = series_of(runs);
    let mut found = Vec::new();
    for (figure, fit) in &sweep.figures {
        let Some(Flag::Missed { ppm }) = fit.flag(&grid) else {
            continue;
        };
        // Each figure costs a refit per end level of each axis of three values or
        // more: only those a reader will be told of.
        if !wanted(figure, fit) {
            continue;
        }
        let Some(points) = series.get(figure) else {
            continue;
        };
        // The pool's alignment and rounding are no sum of blocks: refitted as fitted.
        let prior = if crate::sweep::is_pool_figure(figure) {
            Prior::Free
        } else {
            Prior::Blocks
        };
        if let Some(mut regime) = regime_of(&grid, points, prior)? {
            regime.figure = figure.clone();
            regime.whole_ppm = ppm;
            found.push(regime);
        }
    }
    Ok(found)
}

/// The level of an axis of three values or more without which `points` fit within 2%.
/// The refits (the smallest and the largest level of each such axis) run on every core:
/// each is a whole fit, and a sweep's flagged figure needs up to eight.
fn regime_of(
    grid: &Grid,
    points: &[(Point, u64)],
    prior: Prior,
) -> Result<Option<Regime>, AxesError> {
    let mut tries: Vec<(&str, u64, Vec<u64>)> = Vec::new();
    for axis in grid.axes().iter().filter(|a| a.values.len() >= 3) {
        let mut values = axis.values.clone();
        values.sort_unstable();
        for level in [values[0], values[values.len() - 1]] {
            let others: Vec<u64> = values.iter().copied().filter(|&v| v != level).collect();
            tries.push((axis.name.as_str(), level, others));
        }
    }
    let refit = |(axis, level, _): &(&str, u64, Vec<u64>)| -> Result<Option<u64>, AxesError> {
        let reduced = grid.without(axis, *level)?;
        let kept: Vec<(Point, u64)> = points
            .iter()
            .filter(|(p, _)| p.get(*axis) != Some(level))
            .cloned()
            .collect();
        let fit = Fit::under(&reduced, &kept, prior)?;
        Ok(fit.flag(&reduced).is_none().then_some(fit.loo_error_ppm))
    };
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let refits = crate::parallel::map(&tries, cores, refit);
    let mut best: Option<Regime> = None;
    for ((axis, level, others), refit) in tries.into_iter().zip(refits) {
        let Some(loo_error_ppm) = refit? else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|b| loo_error_ppm < b.loo_error_ppm)
        {
            best = Some(Regime {
                figure: String::new(),
                axis: axis.to_owned(),
                level,
                others,
                loo_error_ppm,
                whole_ppm: 0,
            });
        }
    }
    Ok(best)
}
