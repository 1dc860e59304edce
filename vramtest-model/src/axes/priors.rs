//! Bookkeeping is not a polynomial: what scales and what steps, on a grid with a
//! counting axis, and a fit's residue.
//!
//! Frameworks keep the autodiff graph and the gradients in hash tables that double as
//! the graph grows: a step of tens of kilobytes at some layer count, whatever the
//! tensor sizes, 10-30% of a small grid's points and a few percent or less of a
//! full-size configuration. A `layers²` term passes through such a step on three layer
//! counts and, multiplied by the tensor axes, extrapolates it as if it were tensors.
//! So when the grid measures an axis that counts identical blocks ([`COUNT_AXES`]:
//! `layers`, `depth`, …) at three values or more, the candidates first keep it at
//! degree ≤ 1 (everything a layer holds is the same for every layer), and the model is
//! the **simplest within the residue of the best**: of the best model of each size
//! (by worst leave-one-out miss in bytes), the fewest terms whose worst miss is at most
//! the best's plus the best's own worst miss of a point; a term whose only gain is to
//! chase a step of that size is refused. A step can hide a small scaling term from
//! leave-one-out too (a few hundred bytes a token outside the layers, beside a table
//! step of tens of kilobytes): when the simplest model's misses are no step of the
//! counting axes alone (below), the model of one term more is taken instead if it is
//! within the residue of the best too and its misses are such a step; a second term
//! more would chase the step. The model is kept when its worst held-out miss is at
//! most 2% of the largest measured value; otherwise the search below decides as for
//! any grid, still with every counting axis measured at fewer than four values
//! ([`COUNT_AXIS_SQUARED_FROM`]) at degree ≤ 1: memory is a sum of tensors, each
//! block's the same, so a count enters squared only where four or more values demand
//! it, and a figure that is more than linear in a count of three values is flagged,
//! not fitted with a square that multiplies a step into the full size.
//!
//! A fit's **residue** ([`Fit::residue_bytes`](super::Fit::residue_bytes)) is its worst held-out miss in bytes,
//! when that miss is bookkeeping: at most 2% of the largest measured value, and the
//! fit's misses a step of the counting axes alone. That is checked held out: the
//! formula's terms that involve a tensor axis, plus a free offset for each combination
//! of the counting axes' values (one offset when the grid has none), must predict every
//! held-out point within 2% of its value. The offsets take whatever steps with the
//! graph's size; what varies with the tensors' sizes is a miss like any, and a formula
//! of many terms that passes near every point proves nothing by it. The formula
//! predicts what scales; the residue bounds what steps, and is never extrapolated.

use super::design::{Candidate, Columns, Design, Scored, Screening, Shared};
use super::grid::{AxesError, FLAG_PPM, Grid, Point};
use super::search::{exact, max_terms, parsimonious, search};
use super::solve::held_out_misses;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{Signed, ToPrimitive, Zero};
use std::cell::RefCell;
use std::sync::Arc;

/// Axis names that count identical blocks of a model: each enters linearly first.
pub const COUNT_AXES: &[&str] = &[
    "layers",
    "n_layers",
    "num_layers",
    "n_layer",
    "depth",
    "blocks",
    "n_blocks",
    "num_blocks",
];

/// Whether `name` counts identical blocks ([`COUNT_AXES`], any case).
pub fn is_count_axis(name: &str) -> bool {
    COUNT_AXES.iter().any(|c| c.eq_ignore_ascii_case(name))
}

/// The candidates' positions with every counting axis at degree ≤ 1, when that leaves
/// some out (a counting axis measured at three values or more); `None` otherwise.
fn linear_candidates(grid: &Grid, candidates: &[Candidate]) -> Option<Vec<usize>> {
    let counting: Vec<usize> = (0..grid.axes().len())
        .filter(|&a| is_count_axis(&grid.axes()[a].name))
        .collect();
    let kept: Vec<usize> = (0..candidates.len())
        .filter(|&c| counting.iter().all(|&a| candidates[c].exponents[a] <= 1))
        .collect();
    (kept.len() < candidates.len()).then_some(kept)
}

/// How many values of a counting axis let it enter a term squared: with three, a
/// `layers²` term passes through whatever steps between them (a hash table that
/// doubles) and multiplies it into the far prediction (+612% at 32 layers, seen on a
/// GQA decoder measured at 1-3 layers); a fourth value checks the form.
pub const COUNT_AXIS_SQUARED_FROM: usize = 4;

/// The candidates' positions with every counting axis measured at fewer than
/// [`COUNT_AXIS_SQUARED_FROM`] values at degree ≤ 1 (everything a block holds is the
/// same for every block: memory is linear in the count), when that leaves some out;
/// `None` otherwise.
pub(super) fn prior_candidates(grid: &Grid, candidates: &[Candidate]) -> Option<Vec<usize>> {
    let capped: Vec<usize> = (0..grid.axes().len())
        .filter(|&a| is_count_axis(&grid.axes()[a].name))
        .filter(|&a| grid.axes()[a].values.len() < COUNT_AXIS_SQUARED_FROM)
        .collect();
    let kept: Vec<usize> = (0..candidates.len())
        .filter(|&c| capped.iter().all(|&a| candidates[c].exponents[a] <= 1))
        .collect();
    (kept.len() < candidates.len()).then_some(kept)
}

/// The best model of the candidates at `kept` (see [`prior_candidates`]), searched as
/// over every candidate, its subset given as positions in the candidates: the counting
/// axes' prior holds even where the model misses by more than bookkeeping, which is
/// then flagged rather than chased by a squared count.
pub(super) fn prior_model(
    grid: &Grid,
    series: &[(Point, u64)],
    shared: &Shared,
    screening: Screening,
    kept: &[usize],
) -> Result<Scored, AxesError> {
    let subset: Vec<Candidate> = kept.iter().map(|&i| shared.candidates[i].clone()).collect();
    let design = Design::on(Arc::new(Columns::new(&subset, series)?), series, screening);
    let max_terms = max_terms(grid, series.len()).min(subset.len());
    let mut model = exact(&design, max_terms).unwrap_or_else(|| search(&design, max_terms));
    model.subset = model.subset.iter().map(|&s| kept[s]).collect();
    Ok(model)
}

/// The model of the candidates with every counting axis linear, when its worst
/// held-out miss is bookkeeping-sized, its subset given as positions in `candidates`.
/// `None` when the grid has no counting axis of three values or more, or when the
/// linear model misses by more than bookkeeping.
pub(super) fn linear_model(
    grid: &Grid,
    series: &[(Point, u64)],
    shared: &Shared,
    screening: Screening,
) -> Result<Option<Scored>, AxesError> {
    let candidates = &shared.candidates;
    let Some(kept) = linear_candidates(grid, candidates) else {
        return Ok(None);
    };
    let subset: Vec<Candidate> = kept.iter().map(|&i| candidates[i].clone()).collect();
    let design = Design::on(shared.linear(&subset, series)?, series, screening);
    let max_terms = max_terms(grid, series.len()).min(subset.len());
    // Each model's answer kept: the chosen one's is its residue's ([`residue_of`]).
    let answers: RefCell<Vec<(Vec<usize>, bool)>> = RefCell::default();
    let steps = |m: &Scored| {
        let known = (answers.borrow().iter()).find_map(|(s, a)| (*s == m.subset).then_some(*a));
        known.unwrap_or_else(|| {
            let answer = steps_with_counting_axes(grid, series, &subset, &design, &m.subset);
            answers.borrow_mut().push((m.subset.clone(), answer));
            answer
        })
    };
    let mut model =
        exact(&design, max_terms).unwrap_or_else(|| parsimonious(&design, max_terms, steps));
    let largest = series.iter().map(|(_, b)| *b).max().unwrap_or(0);
    if !bookkeeping_sized(&model.worst_bytes, largest) {
        return Ok(None);
    }
    model.steps = (answers.borrow().iter()).find_map(|(s, a)| (*s == model.subset).then_some(*a));
    model.subset = model.subset.iter().map(|&s| kept[s]).collect();
    Ok(Some(model))
}

/// Whether a miss of `bytes` is at most 2% ([`FLAG_PPM`]) of `largest`.
fn bookkeeping_sized(bytes: &BigRational, largest: u64) -> bool {
    bytes * BigRational::from_integer(BigInt::from(1_000_000u64))
        <= BigRational::from_integer(BigInt::from(largest) * BigInt::from(FLAG_PPM))
}

/// Whether the misses of the model of `subset` (positions in `design`, whose columns
/// are `candidates`') step with the counting axes alone: its terms that involve another
/// axis, plus a free offset for each combination of the counting axes' values (one
/// offset in all, when the grid has no counting axis), predict every held-out point
/// within 2% ([`FLAG_PPM`]) of its value. The offsets are what steps with the graph's
/// size, whatever it is; what they leave varies with the tensors' sizes, and is a miss
/// like any. Held out, so that a model of many terms, which passes near every point,
/// proves nothing by it.
fn steps_with_counting_axes(
    grid: &Grid,
    series: &[(Point, u64)],
    candidates: &[Candidate],
    design: &Design,
    subset: &[usize],
) -> bool {
    let counting: Vec<usize> = (0..grid.axes().len())
        .filter(|&a| is_count_axis(&grid.axes()[a].name))
        .collect();
    // The grid's own points: a point off it (a target's axial point) is alone at its
    // values, and its bookkeeping no offset of the grid's can tell.
    let on_grid: Vec<usize> = (0..series.len())
        .filter(|&i| grid.holds(&series[i].0))
        .collect();
    let series: Vec<&(Point, u64)> = on_grid.iter().map(|&i| &series[i]).collect();
    let group =
        |p: &Point| -> Vec<u64> { counting.iter().map(|&a| p[&grid.axes()[a].name]).collect() };
    let groups: std::collections::BTreeSet<Vec<u64>> =
        series.iter().map(|(p, _)| group(p)).collect();
    let mut columns: Vec<Vec<BigInt>> = subset
        .iter()
        .filter(|&&s| {
            let e = &candidates[s].exponents;
            (0..e.len()).any(|a| e[a] > 0 && !counting.contains(&a))
        })
        .map(|&s| {
            (on_grid.iter())
                .map(|&i| design.shared.columns[s][i].clone())
                .collect()
        })
        .collect();
    columns.extend(groups.iter().map(|g| {
        series
            .iter()
            .map(|(p, _)| BigInt::from(u8::from(group(p) == *g)))
            .collect()
    }));
    if columns.len() + 2 > series.len() {
        return false;
    }
    let y: Vec<BigInt> = on_grid.iter().map(|&i| design.y[i].clone()).collect();
    let Some(misses) = held_out_misses(columns, &y) else {
        return false;
    };
    let limit = BigRational::new(BigInt::from(FLAG_PPM), BigInt::from(1_000_000u64));
    series
        .iter()
        .zip(&misses)
        .all(|((_, y), e)| e.abs() <= &limit * BigRational::from_integer(BigInt::from((*y).max(1))))
}

/// The fit's [residue](super::Fit::residue_bytes): its worst held-out miss in bytes,
/// when that is bookkeeping-sized (at most 2% of the largest measured value) and the
/// fit's misses step with the counting axes alone (see this module's documentation); 0
/// otherwise, and for an exact fit.
pub(super) fn residue_of(
    grid: &Grid,
    series: &[(Point, u64)],
    candidates: &[Candidate],
    best: &Scored,
) -> Result<u64, AxesError> {
    let largest = series.iter().map(|(_, b)| *b).max().unwrap_or(0);
    if best.worst_bytes.is_zero() || !bookkeeping_sized(&best.worst_bytes, largest) {
        return Ok(0);
    }
    let steps = match best.steps {
        Some(known) => known,
        None => {
            let chosen: Vec<Candidate> =
                best.subset.iter().map(|&i| candidates[i].clone()).collect();
            let design = Design::new(&chosen, series, Screening::Exact)?;
            let all: Vec<usize> = (0..chosen.len()).collect();
            steps_with_counting_axes(grid, series, &chosen, &design, &all)
        }
    };
    Ok(if steps {
        best.worst_bytes
            .ceil()
            .to_integer()
            .to_u64()
            .unwrap_or(u64::MAX)
    } else {
        0
    })
}
