//! A figure's fit: the line through two sizes, a constant, or the model the search
//! chooses (with the counting axes' priors first), and its residue.

use super::design::{Candidate, Design, Scored, Screening, Shared, score};
use super::formula::{Formula, Monomial, Term};
use super::grid::{AxesError, FLAG_PPM, Grid, Point};
use super::priors::{is_count_axis, linear_model, prior_candidates, prior_model, residue_of};
use super::search::{exact, max_terms, search};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{ToPrimitive, Zero};
use serde::{Deserialize, Serialize};

/// A figure's fitted model and how well it predicts held-out points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fit {
    /// The chosen formula.
    pub terms: Formula,
    /// The worst relative leave-one-out error, in parts per million, rounded up.
    pub loo_error_ppm: u64,
    /// The residue: the worst leave-one-out miss in bytes, when it is bookkeeping-sized
    /// (at most 2% of the largest measured value); 0 for an exact fit and for one that
    /// misses by more. What steps with the size of the graph instead of scaling with
    /// the axes is bounded by it, never extrapolated: see the documentation of
    /// [`crate::axes`]. Absent from snapshots written before it existed, and from those
    /// of exact fits.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub residue_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The line through the two points of a grid of one axis of two values (a batch sweep
/// of two sizes): nothing is held out to check it, so its leave-one-out error is 0, as
/// a line through two points has no residual.
fn line_through(axis: &str, series: &[(Point, u64)]) -> Fit {
    let at = |i: usize| {
        (
            BigRational::from_integer(BigInt::from(series[i].0[axis])),
            BigRational::from_integer(BigInt::from(series[i].1)),
        )
    };
    let ((x0, y0), (x1, y1)) = (at(0), at(1));
    let slope = (&y1 - &y0) / (&x1 - &x0);
    let intercept = &y0 - &slope * &x0;
    let terms = [
        (intercept, Monomial::constant()),
        (slope, Monomial::new([(axis, 1)])),
    ]
    .into_iter()
    .filter(|(c, _)| !c.is_zero())
    .map(|(coefficient, monomial)| Term {
        coefficient,
        monomial,
    })
    .collect();
    Fit {
        terms: Formula { terms },
        loo_error_ppm: 0,
        residue_bytes: 0,
    }
}

/// The fit of a series whose every point measured the same bytes: that constant (no
/// term for 0), exact held out. What any search would choose, found without one: the
/// floating-point screening has no scale to bound its rounding by when every value is 0.
fn constant(series: &[(Point, u64)]) -> Option<Fit> {
    let (_, first) = *series.first()?;
    if series.iter().any(|&(_, b)| b != first) {
        return None;
    }
    let terms = (first != 0)
        .then(|| Term {
            coefficient: BigRational::from_integer(BigInt::from(first)),
            monomial: Monomial::constant(),
        })
        .into_iter()
        .collect();
    Some(Fit {
        terms: Formula { terms },
        loo_error_ppm: 0,
        residue_bytes: 0,
    })
}

impl Fit {
    /// Fits `series` (each point of `grid` that was measured, with its bytes): see the
    /// documentation of [`crate::axes`] for the model and the search.
    /// The figure is memory, a sum of blocks of positive size: a model whose negative
    /// terms are covered is preferred (see [`Prior::Blocks`]).
    pub fn new(grid: &Grid, series: &[(Point, u64)]) -> Result<Fit, AxesError> {
        Fit::under(grid, series, Prior::Blocks)
    }

    /// [`Fit::new`] for a figure that is no sum of blocks (the pool's alignment and
    /// rounding beyond the peak): any signs ([`Prior::Free`]).
    pub fn free(grid: &Grid, series: &[(Point, u64)]) -> Result<Fit, AxesError> {
        Fit::under(grid, series, Prior::Free)
    }

    /// [`Fit::new`] under `prior`.
    pub fn under(grid: &Grid, series: &[(Point, u64)], prior: Prior) -> Result<Fit, AxesError> {
        Fit::with(grid, series, Screening::Float, None, prior)
    }

    /// [`Fit::new`], its subsets screened in floating point or all scored exactly, on
    /// `shared` when given (made for series measured at the same points as `series`).
    pub(super) fn with(
        grid: &Grid,
        series: &[(Point, u64)],
        screening: Screening,
        shared: Option<&Shared>,
        prior: Prior,
    ) -> Result<Fit, AxesError> {
        for (point, _) in series {
            grid.check_point(point)?;
        }
        if series.len() == 2 && grid.axes().len() == 1 {
            return Ok(line_through(&grid.axes()[0].name, series));
        }
        if series.len() < 3 {
            return Err(AxesError::TooFewPoints {
                points: series.len(),
            });
        }
        if let Some(constant) = constant(series) {
            return Ok(constant);
        }
        let own;
        let shared = match shared {
            Some(shared) => shared,
            None => {
                own = Shared::new(grid);
                &own
            }
        };
        let candidates = &shared.candidates;
        let best = match linear_model(grid, series, shared, screening)? {
            Some(linear) => linear,
            None => match prior_candidates(grid, candidates) {
                Some(kept) => prior_model(grid, series, shared, screening, &kept)?,
                None => {
                    let design = Design::on(shared.all(series)?, series, screening);
                    let max_terms = max_terms(grid, series.len()).min(candidates.len());
                    exact(&design, max_terms).unwrap_or_else(|| search(&design, max_terms))
                }
            },
        };
        let grid_only = grid_model(grid, series, shared, screening, prior)?;
        let best = match &grid_only {
            Some(grid_only) if grid_only.worst < best.worst => grid_only.clone(),
            _ => best,
        };
        let best = match prior {
            Prior::Blocks => covered_model(grid, series, shared, screening, best, grid_only)?,
            Prior::Free => best,
        };
        let residue_bytes = residue_of(grid, series, candidates, &best)?;
        Ok(Fit {
            terms: formula_of(candidates, &best),
            loo_error_ppm: ppm(&best.worst),
            residue_bytes,
        })
    }
}

/// What a figure's fit may assume of its signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prior {
    /// The figure is memory, a sum of blocks of positive size: a negative term must be
    /// a block's offset, covered by a positive term it divides ([`super::blocks`]).
    /// When the best model holds a negative term nothing covers, the fit takes a model
    /// without one, if one predicts every held-out point within 2% (or misses by no
    /// more than a bookkeeping residue of its own): the grid's own model, else the search without the uncovered terms'
    /// monomials (up to [`COVERED_ROUNDS`] times). Else the best stands, and a
    /// prediction beyond the grid that rests on the term is flagged. A best model that
    /// misses by over 2% beyond any bookkeeping residue stands as it is: it is flagged.
    Blocks,
    /// Any signs: the pool's alignment and rounding beyond the peak, no sum of blocks.
    Free,
}

/// How many times the search is run again without the monomials of uncovered negative
/// terms, before the best model stands.
pub const COVERED_ROUNDS: usize = 3;

/// `model`'s formula: its nonzero terms, the constant first, then by degree (highest
/// first), then by the candidates' exponents.
fn formula_of(candidates: &[Candidate], model: &Scored) -> Formula {
    let mut terms: Vec<(Term, &[u8])> = (model.subset.iter())
        .zip(&model.coefficients)
        .filter(|(_, c)| !c.is_zero())
        .map(|(&i, coefficient)| {
            let term = Term {
                coefficient: coefficient.clone(),
                monomial: candidates[i].monomial.clone(),
            };
            (term, candidates[i].exponents.as_slice())
        })
        .collect();
    terms.sort_by(|(_, a), (_, b)| {
        let degree = |e: &[u8]| e.iter().map(|&p| u32::from(p)).sum::<u32>();
        let constant = |e: &[u8]| degree(e) != 0;
        (constant(a), degree(b), b).cmp(&(constant(b), degree(a), a))
    });
    Formula {
        terms: terms.into_iter().map(|(t, _)| t).collect(),
    }
}

/// The positions, among the candidates, of `model`'s negative terms that no positive
/// term covers at the grid's smallest values, or a point's of `series` below them
/// ([`Formula::uncovered`]).
fn uncovered_of(
    grid: &Grid,
    series: &[(Point, u64)],
    candidates: &[Candidate],
    model: &Scored,
) -> Result<Vec<usize>, AxesError> {
    let smallest = grid.smallest(series.iter().map(|(p, _)| p));
    let uncovered = formula_of(candidates, model).uncovered(&smallest)?;
    Ok((model.subset.iter().copied())
        .filter(|&i| (uncovered.iter()).any(|u| u.term.monomial == candidates[i].monomial))
        .collect())
}

/// `best`, or under [`Prior::Blocks`] a model without a negative term nothing covers
/// (see there): `grid_only` ([`grid_model`]) first, then the search without the
/// uncovered terms' monomials.
fn covered_model(
    grid: &Grid,
    series: &[(Point, u64)],
    shared: &Shared,
    screening: Screening,
    best: Scored,
    grid_only: Option<Scored>,
) -> Result<Scored, AxesError> {
    let candidates = &shared.candidates;
    let mut uncovered = uncovered_of(grid, series, candidates, &best)?;
    if uncovered.is_empty() {
        return Ok(best);
    }
    let limit = BigRational::new(BigInt::from(FLAG_PPM), BigInt::from(1_000_000u64));
    // A best model that misses by over 2% (no bookkeeping residue) is flagged as it
    // is: a model without the term that misses as much is no more to be trusted, and
    // the searches again would cost a figure that is no polynomial three times its fit.
    if best.worst > limit && residue_of(grid, series, candidates, &best)? == 0 {
        return Ok(best);
    }
    // `best` is not flagged here: neither may its replacement be (a miss over 2% is
    // acceptable only as a bookkeeping residue).
    let acceptable = |m: &Scored| -> Result<bool, AxesError> {
        Ok(m.worst <= limit || residue_of(grid, series, candidates, m)? > 0)
    };
    if let Some(g) = grid_only
        && uncovered_of(grid, series, candidates, &g)?.is_empty()
        && acceptable(&g)?
    {
        return Ok(g);
    }
    // The counting axes keep the degree `best` gives them (at least 1): a search
    // without the uncovered terms must not take a `layers²` that `best`'s priors
    // refused.
    let caps: Vec<(usize, u8)> = (0..grid.axes().len())
        .filter(|&a| is_count_axis(&grid.axes()[a].name))
        .map(|a| {
            let degree = best.subset.iter().map(|&i| candidates[i].exponents[a]);
            (a, degree.max().unwrap_or(0).max(1))
        })
        .collect();
    let allowed: Vec<usize> = (0..candidates.len())
        .filter(|&c| {
            caps.iter()
                .all(|&(a, cap)| candidates[c].exponents[a] <= cap)
        })
        .collect();
    let mut excluded: Vec<usize> = Vec::new();
    for _ in 0..COVERED_ROUNDS {
        excluded.extend(uncovered);
        let kept: Vec<usize> = (allowed.iter().copied())
            .filter(|i| !excluded.contains(i))
            .collect();
        if kept.is_empty() {
            break;
        }
        let model = prior_model(grid, series, shared, screening, &kept)?;
        uncovered = uncovered_of(grid, series, candidates, &model)?;
        if uncovered.is_empty() {
            return Ok(if acceptable(&model)? { model } else { best });
        }
    }
    Ok(best)
}

/// With points off the grid in `series` (a target's axial points): the model fitted on
/// the grid's points alone, scored on the whole series. The search over the whole
/// series may stray from it (a greedy step taken toward a far point), and a model the
/// grid found is never to be lost for one that predicts the whole series worse. `None`
/// when every point is the grid's, or the model cannot be scored on the series.
fn grid_model(
    grid: &Grid,
    series: &[(Point, u64)],
    shared: &Shared,
    screening: Screening,
    prior: Prior,
) -> Result<Option<Scored>, AxesError> {
    let grid_series: Vec<(Point, u64)> = series
        .iter()
        .filter(|(p, _)| grid.holds(p))
        .cloned()
        .collect();
    if grid_series.len() == series.len() || grid_series.len() < 3 {
        return Ok(None);
    }
    let fit = Fit::with(grid, &grid_series, screening, None, prior)?;
    let subset: Option<Vec<usize>> = (fit.terms.terms.iter())
        .map(|t| (shared.candidates.iter()).position(|c| c.monomial == t.monomial))
        .collect();
    let Some(subset) = subset.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let design = Design::on(shared.all(series)?, series, screening);
    Ok(score(&design, &subset))
}

/// `⌈error × 10⁶⌉`, saturating: so that `ppm > FLAG_PPM` exactly when the error
/// exceeds 2%.
fn ppm(error: &BigRational) -> u64 {
    (error * BigRational::from_integer(1_000_000.into()))
        .ceil()
        .to_integer()
        .to_u64()
        .unwrap_or(u64::MAX)
}
