//! Choosing the terms: of all sums of candidate monomials, the one that predicts
//! held-out points best, by its worst relative leave-one-out error (see the
//! documentation of [`crate::axes`]).
//!
//! **Search strategy:** first, the least-squares fit of every candidate at once (up to
//! 100 candidates): when
//! it fits every point exactly with at most `points − 2` nonzero terms, those terms are
//! the model (the candidates are linearly independent on the grid, so an exact model
//! is unique, and it ranks first: no error, then no exact model has fewer terms). This
//! finds a sparse polynomial on a grid of many axes, where the steps below may stray.
//! Otherwise, exhaustive over every subset of the candidates of 1, 2, …
//! terms while the number of subsets enumerated stays within 1024 (every subset of
//! every size for small grids); beyond that size, greedy forward selection from the
//! best model of the largest size searched exhaustively: add the candidate that gives
//! the best score, one term at a time, up to `points − 2` terms, and stop once two
//! sizes in a row bring no better model. The search also stops as soon as a model
//! predicts every held-out point exactly (no larger model can win the tie-break).
//!
//! **Tie-break:** lowest worst leave-one-out error, then fewer terms, then lower total
//! degree (the sum of the degrees of the terms), then the earlier subset in the
//! candidates' order (by degree, then by the axes' order).

use super::design::{Design, Scored, ScoredModel, score};
use super::grid::Grid;
use super::screen::{self, Basis, Metric, Whole};
use super::solve::gauss_jordan;
use num_bigint::BigInt;
use num_traits::{ToPrimitive, Zero};

/// The most terms a model of `points` points of `grid` may have: `points − 2` (every
/// held-out refit overdetermined), or `points − 1` on a grid of one axis, where each
/// held-out refit goes through the other points exactly and the held-out point is the
/// check (a batch sweep of three sizes is fitted as `a + b × batch`, each size
/// predicted from the other two).
pub(super) fn max_terms(grid: &Grid, points: usize) -> usize {
    if grid.axes().len() == 1 {
        points - 1
    } else {
        points - 2
    }
}

/// How many subsets of candidate monomials are scored exhaustively before the search
/// goes on greedily.
const EXHAUSTIVE_BUDGET: u64 = 1024;

/// The most candidates whose joint least-squares fit is tried first (see the search
/// strategy): its elimination takes a cubic number of big-integer steps.
const EXACT_MAX_CANDIDATES: usize = 100;

/// How many sizes in a row greedy forward selection goes on without a better model
/// before it stops.
const GREEDY_PATIENCE: usize = 2;

/// Whether `model` predicts every held-out point exactly.
fn is_exact(design: &Design, model: &ScoredModel) -> bool {
    model.may_be_zero() && model.exact(design).is_some_and(|s| s.worst.is_zero())
}

/// Binomial coefficient, saturating.
fn choose(n: usize, k: usize) -> u64 {
    (0..k).fold(1u64, |acc, i| {
        acc.saturating_mul((n - i) as u64) / (i as u64 + 1)
    })
}

/// The model that fits every point exactly, when the series has one within
/// `max_terms` terms: the least-squares fit of every candidate at once, kept to its
/// nonzero terms. The candidates are linearly independent on the grid (each axis's
/// powers stay below its number of values), so an exact model is unique: no other
/// subset fits exactly, and none ranks before it (no error, then fewest terms).
/// `None` when the fit of every candidate misses a point, or its terms are too many or
/// cannot be checked by leave-one-out.
pub(super) fn exact(design: &Design, max_terms: usize) -> Option<Scored> {
    let k = design.shared.columns.len();
    if k > EXACT_MAX_CANDIDATES {
        return None;
    }
    let support = match screen::whole(design) {
        Whole::Misses => return None,
        Whole::Passes(likely) => {
            exact_support(design, &likely).or_else(|| exact_support(design, &all(k)))?
        }
        Whole::Unsure => exact_support(design, &all(k))?,
    };
    if support.is_empty() || support.len() > max_terms {
        return None;
    }
    score(design, &support).filter(|s| s.worst.is_zero())
}

fn all(k: usize) -> Vec<usize> {
    (0..k).collect()
}

/// The nonzero terms of the least-squares fit of the candidates `subset` when it fits
/// every point exactly; `None` when it misses one or its normal equations are singular.
/// When every candidate is among `subset`, or floating point found them independent and
/// their whole fit's other terms 0, these are the exact model's terms.
fn exact_support(design: &Design, subset: &[usize]) -> Option<Vec<usize>> {
    let k = subset.len();
    let mut m: Vec<Vec<BigInt>> = subset
        .iter()
        .map(|&r| {
            let mut row: Vec<BigInt> = subset.iter().map(|&c| design.gram(r, c).clone()).collect();
            row.push(design.xty(r).clone());
            row
        })
        .collect();
    let d = gauss_jordan(&mut m, k)?;
    let misses = design.y.iter().enumerate().any(|(i, y)| {
        let fitted: BigInt = (0..k)
            .map(|j| &design.shared.columns[subset[j]][i] * &m[j][k])
            .sum();
        &d * y != fitted
    });
    if misses {
        return None;
    }
    Some(
        (0..k)
            .filter(|&j| !m[j][k].is_zero())
            .map(|j| subset[j])
            .collect(),
    )
}

/// What [`walk_sizes`] does after one size's best model.
enum Step {
    /// Goes on: the model ranks before every earlier size's (greedy patience restarts).
    Better,
    /// Goes on: it does not (greedy patience wears down).
    NotBetter,
    /// Stops: nothing larger can win.
    Done,
}

/// Walks the sizes of model, 1 term and up to at most `max_terms`, handing `visit` the
/// best model of each by `metric` (`None` where none of that size scores): exhaustive
/// while the subsets stay within [`EXHAUSTIVE_BUDGET`] (every single term at least),
/// then greedy forward selection from the best of the last size, until
/// [`GREEDY_PATIENCE`] sizes in a row bring no better model ([`Step::NotBetter`]) or
/// `visit` says [`Step::Done`]. Subsets are screened in floating point and scored
/// exactly where that cannot rank them ([`screen`]).
fn walk_sizes(
    design: &Design,
    metric: Metric,
    max_terms: usize,
    mut visit: impl FnMut(Option<ScoredModel>) -> Step,
) {
    let n = design.shared.columns.len();
    // The last size's best model's terms, which greedy selection starts from.
    let mut last: Option<Vec<usize>> = None;
    let mut spent = 0u64;
    let mut size = 0;
    while size < max_terms
        && (size == 0 || spent.saturating_add(choose(n, size + 1)) <= EXHAUSTIVE_BUDGET)
    {
        size += 1;
        spent += choose(n, size);
        let best = screen::select(design, metric, screen::all_subsets(design, size));
        last = best.as_ref().map(|b| b.subset.clone());
        if let Step::Done = visit(best) {
            return;
        }
    }
    let mut basis = last.map(|subset| Basis::of(design, &subset));
    let mut stale = 0;
    while size < max_terms && stale < GREEDY_PATIENCE {
        size += 1;
        let Some(current) = basis.take() else {
            break;
        };
        let best = screen::select(design, metric, current.extensions(design));
        basis = best.as_ref().map(|b| grown(design, &current, &b.subset));
        stale = match visit(best) {
            Step::Done => return,
            Step::Better => 0,
            Step::NotBetter => stale + 1,
        };
    }
}

/// The best model of at most `max_terms` terms, by the whole key ([`Scored::key`]),
/// over the sizes [`walk_sizes`] walks; it stops as soon as a model predicts every
/// held-out point exactly.
pub(super) fn search(design: &Design, max_terms: usize) -> Scored {
    let mut best: Option<ScoredModel> = None;
    walk_sizes(design, Metric::Relative, max_terms, |frontier| {
        let improves = frontier.as_ref().is_some_and(|f| {
            best.as_ref()
                .is_none_or(|b| screen::before(design, Metric::Relative, f, b))
        });
        if improves {
            best = frontier;
        }
        match &best {
            Some(b) if is_exact(design, b) => Step::Done,
            Some(_) if improves => Step::Better,
            // None: no model of this size scored, nor of any before it.
            _ => Step::NotBetter,
        }
    });
    best.expect("the constant model always scores: at least 3 points, leverage 1/n")
        .scored(design)
}

/// The basis of `subset`, which is `basis`'s subset and one candidate more.
fn grown(design: &Design, basis: &Basis, subset: &[usize]) -> Basis {
    let have = basis.sorted();
    match subset.iter().find(|e| !have.contains(e)) {
        Some(&extra) => basis.grow(extra),
        None => Basis::of(design, subset),
    }
}

/// The best model of each size (by worst held-out miss in bytes), over the sizes
/// [`walk_sizes`] walks.
fn best_by_size(design: &Design, max_terms: usize) -> Vec<ScoredModel> {
    let metric = Metric::Bytes;
    let mut sizes: Vec<ScoredModel> = Vec::new();
    walk_sizes(design, metric, max_terms, |best| {
        let record = (best.as_ref())
            .is_some_and(|b| sizes.iter().all(|s| screen::less(design, metric, b, s)));
        sizes.extend(best);
        if record {
            Step::Better
        } else {
            Step::NotBetter
        }
    });
    sizes
}

/// The simplest model whose worst held-out miss in bytes is within the residue of the
/// best (at most the best's worst held-out miss plus its worst miss in the fit itself);
/// when its misses are no bookkeeping (`steps`: they vary with more than the counting
/// axes), the model of one term more, if it is within the residue of the best too and
/// its misses are bookkeeping: a term that leaves a step of the counting axes alone is
/// a scaling term the step hid, where more terms would chase the step.
pub(super) fn parsimonious(
    design: &Design,
    max_terms: usize,
    steps: impl Fn(&Scored) -> bool,
) -> Scored {
    let sizes = best_by_size(design, max_terms);
    let mut best: Option<&ScoredModel> = None;
    for s in &sizes {
        if best.is_none_or(|b| screen::less(design, Metric::Bytes, s, b)) {
            best = Some(s);
        }
    }
    let best = best
        .expect("the constant model always scores: at least 3 points, leverage 1/n")
        .scored(design);
    let tolerance = &best.worst_bytes + &best.residual;
    // Sizes whose bounds already miss the tolerance need no exact score: with a series
    // that many models fit exactly, those scores are most of an unoptimized fit.
    let limit = tolerance.to_f64().unwrap_or(f64::INFINITY);
    let within = |s: &ScoredModel| {
        !screen::certainly_above(s, Metric::Bytes, limit)
            && s.scored(design).worst_bytes <= tolerance
    };
    let Some(at) = sizes.iter().position(within) else {
        return best;
    };
    let simplest = sizes[at].scored(design);
    match sizes.get(at + 1) {
        Some(next)
            if next.subset.len() == simplest.subset.len() + 1
                && within(next)
                && !steps(&simplest)
                && steps(&next.scored(design)) =>
        {
            next.scored(design)
        }
        _ => simplest,
    }
}
