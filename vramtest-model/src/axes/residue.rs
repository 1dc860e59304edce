//! What scales and what steps: the first choice of a model when the grid measures an
//! axis that counts identical blocks (`layers`) at three values or more.
//!
//! Everything a layer holds is the same for every layer, so such an axis enters the
//! tensors' bytes linearly. What does not is the frameworks' bookkeeping: the autodiff
//! graph's and the gradients' hash tables double as the graph grows (burn: a ~31 KB step
//! between 2 and 3 layers, whatever the tensor sizes). Three values of the axis let a
//! `layers²` term pass through such a step, and that term, multiplied by the tensor
//! axes (`layers²·seq²·batch`), extrapolates the step as if it were tensors.
//!
//! So the candidates first keep a counting axis at degree ≤ 1, and the model is the
//! simplest whose worst leave-one-out miss, in bytes, is within the **residue** of the
//! best: the best model's own worst miss of a point plus that model's worst miss with
//! the point held out. A term whose only gain is to chase a step of that size is
//! refused. The model is kept when its worst held-out miss is bookkeeping-sized: at most
//! 2% ([`FLAG_PPM`]) of the largest measured value; the miss is then the fit's
//! [residue](super::Fit::residue_bytes), a bound of what it does not extrapolate.
//! Otherwise the search over every candidate decides, as for any other grid.

use super::{
    AxesError, Candidate, Design, EXHAUSTIVE_BUDGET, FLAG_PPM, GREEDY_PATIENCE, Grid, Point,
    Scored, choose, exact, gauss_jordan, next_subset, score,
};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, Zero};

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
    let counting: Vec<usize> = (0..grid.axes.len())
        .filter(|&a| is_count_axis(&grid.axes[a].name))
        .collect();
    let kept: Vec<usize> = (0..candidates.len())
        .filter(|&c| counting.iter().all(|&a| candidates[c].exponents[a] <= 1))
        .collect();
    (kept.len() < candidates.len()).then_some(kept)
}

/// The model of the candidates with every counting axis linear, when its worst
/// held-out miss is bookkeeping-sized, its subset given as positions in `candidates`.
/// `None` when the grid has no counting axis of three values or more, or when the
/// linear model misses by more than bookkeeping.
pub(super) fn linear_model(
    grid: &Grid,
    series: &[(Point, u64)],
    candidates: &[Candidate],
) -> Result<Option<Scored>, AxesError> {
    let Some(kept) = linear_candidates(grid, candidates) else {
        return Ok(None);
    };
    let subset: Vec<Candidate> = kept.iter().map(|&i| candidates[i].clone()).collect();
    let design = Design::new(&subset, series)?;
    let max_terms = (series.len() - 2).min(subset.len());
    let mut model = exact(&design, max_terms).unwrap_or_else(|| parsimonious(&design, max_terms));
    let largest = series.iter().map(|(_, b)| *b).max().unwrap_or(0);
    if !bookkeeping_sized(&model.worst_bytes, largest) {
        return Ok(None);
    }
    model.subset = model.subset.iter().map(|&s| kept[s]).collect();
    Ok(Some(model))
}

/// Whether a miss of `bytes` is at most 2% ([`FLAG_PPM`]) of `largest`.
pub(super) fn bookkeeping_sized(bytes: &BigRational, largest: u64) -> bool {
    bytes * BigRational::from_integer(BigInt::from(1_000_000u64))
        <= BigRational::from_integer(BigInt::from(largest) * BigInt::from(FLAG_PPM))
}

/// Ranks models of one size by their worst held-out miss in bytes, then their degree,
/// then the subset.
fn better(a: &Scored, b: &Scored) -> bool {
    (&a.worst_bytes, a.degree, &a.subset) < (&b.worst_bytes, b.degree, &b.subset)
}

fn keep(best: &mut Option<Scored>, candidate: Option<Scored>) {
    if let Some(c) = candidate
        && best.as_ref().is_none_or(|b| better(&c, b))
    {
        *best = Some(c);
    }
}

/// The best model of each size (by worst held-out miss in bytes): exhaustive while the
/// subsets stay within [`EXHAUSTIVE_BUDGET`], then greedy forward selection from the
/// best of the last size, until [`GREEDY_PATIENCE`] sizes in a row bring no better
/// model or `max_terms` is reached.
fn best_by_size(design: &Design, max_terms: usize) -> Vec<Scored> {
    let n = design.columns.len();
    let mut sizes: Vec<Scored> = Vec::new();
    let mut spent = 0u64;
    let mut size = 0;
    while size < max_terms
        && (size == 0 || spent.saturating_add(choose(n, size + 1)) <= EXHAUSTIVE_BUDGET)
    {
        size += 1;
        spent += choose(n, size);
        let mut best = None;
        let mut subset: Vec<usize> = (0..size).collect();
        loop {
            keep(&mut best, score(design, &subset));
            if !next_subset(&mut subset, n) {
                break;
            }
        }
        sizes.extend(best);
    }
    let mut stale = 0;
    while size < max_terms && stale < GREEDY_PATIENCE {
        size += 1;
        let Some(current) = sizes.last().filter(|s| s.subset.len() == size - 1) else {
            break;
        };
        let mut best = None;
        for extra in (0..n).filter(|e| !current.subset.contains(e)) {
            let mut subset = current.subset.clone();
            subset.push(extra);
            subset.sort_unstable();
            keep(&mut best, score(design, &subset));
        }
        let record = sizes.iter().map(|s| &s.worst_bytes).min();
        stale = match (&best, record) {
            (Some(b), Some(r)) if b.worst_bytes < *r => 0,
            _ => stale + 1,
        };
        sizes.extend(best);
    }
    sizes
}

/// The simplest model whose worst held-out miss in bytes is within the residue of the
/// best: at most the best's worst held-out miss plus its worst miss in the fit itself.
fn parsimonious(design: &Design, max_terms: usize) -> Scored {
    let sizes = best_by_size(design, max_terms);
    let best = sizes
        .iter()
        .min_by(|a, b| a.worst_bytes.cmp(&b.worst_bytes))
        .expect("the constant model always scores: at least 3 points, leverage 1/n");
    let tolerance = &best.worst_bytes + &best.residual;
    sizes
        .iter()
        .find(|s| s.worst_bytes <= tolerance)
        .unwrap_or(best)
        .clone()
}

/// Each point's signed leave-one-out miss in bytes under the model of `subset` (whose
/// score exists: its normal equations are regular, no point has leverage 1).
pub(super) fn held_out_misses(design: &Design, subset: &[usize]) -> Vec<BigRational> {
    let k = subset.len();
    let mut m: Vec<Vec<BigInt>> = subset
        .iter()
        .enumerate()
        .map(|(r, &sr)| {
            let mut row: Vec<BigInt> = subset
                .iter()
                .map(|&sc| design.gram[sr][sc].clone())
                .collect();
            row.extend((0..k).map(|c| BigInt::from(u8::from(c == r))));
            row.push(design.xty[sr].clone());
            row
        })
        .collect();
    let Some(d) = gauss_jordan(&mut m, k) else {
        return vec![BigRational::zero(); design.y.len()];
    };
    (0..design.y.len())
        .map(|i| {
            let x: Vec<&BigInt> = subset.iter().map(|&s| &design.columns[s][i]).collect();
            let fitted: BigInt = x.iter().zip(&m).map(|(xj, row)| *xj * &row[2 * k]).sum();
            let leverage: BigInt = x
                .iter()
                .zip(&m)
                .map(|(xj, row)| {
                    *xj * x
                        .iter()
                        .zip(&row[k..2 * k])
                        .map(|(xl, a)| *xl * a)
                        .sum::<BigInt>()
                })
                .sum();
            let denominator = &d - leverage;
            if denominator.is_zero() {
                return BigRational::zero();
            }
            BigRational::new(&d * &design.y[i] - fitted, denominator)
        })
        .collect()
}

/// Whether held-out misses of `misses` (one a point of `series`, in order) step with
/// the counting axes alone: less their mean over the points that share the counting
/// axes' values (every point, when the grid has no counting axis), each is within 2%
/// ([`FLAG_PPM`]) of its point's value. The mean of a group is what steps with the
/// graph's size; what is left varies with the tensors' sizes, and is a miss like any.
pub(super) fn steps_with_counting_axes(
    grid: &Grid,
    series: &[(Point, u64)],
    misses: &[BigRational],
) -> bool {
    let group = |p: &Point| -> Vec<u64> {
        grid.axes
            .iter()
            .filter(|a| is_count_axis(&a.name))
            .map(|a| p[&a.name])
            .collect()
    };
    let mut sums: std::collections::BTreeMap<Vec<u64>, (BigRational, BigInt)> =
        std::collections::BTreeMap::new();
    for ((p, _), e) in series.iter().zip(misses) {
        let entry = sums
            .entry(group(p))
            .or_insert_with(|| (BigRational::zero(), BigInt::zero()));
        entry.0 += e;
        entry.1 += BigInt::one();
    }
    let limit = BigRational::new(BigInt::from(FLAG_PPM), BigInt::from(1_000_000u64));
    series.iter().zip(misses).all(|((p, y), e)| {
        let (sum, count) = &sums[&group(p)];
        let varying = e - sum / BigRational::from_integer(count.clone());
        varying.abs() <= &limit * BigRational::from_integer(BigInt::from((*y).max(1)))
    })
}
