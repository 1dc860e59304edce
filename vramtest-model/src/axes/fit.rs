//! A figure's fit: the line through two sizes, a constant, or the model the search
//! chooses (with the counting axes' priors first), and its residue.

use super::design::{Design, Scored, Screening, Shared, score};
use super::formula::{Formula, Monomial, Term};
use super::grid::{AxesError, Grid, Point};
use super::priors::{linear_model, prior_candidates, prior_model, residue_of};
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
    pub fn new(grid: &Grid, series: &[(Point, u64)]) -> Result<Fit, AxesError> {
        Fit::with(grid, series, Screening::Float, None)
    }

    /// [`Fit::new`], its subsets screened in floating point or all scored exactly, on
    /// `shared` when given (made for series measured at the same points as `series`).
    pub(super) fn with(
        grid: &Grid,
        series: &[(Point, u64)],
        screening: Screening,
        shared: Option<&Shared>,
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
        let best = match grid_model(grid, series, shared, screening)? {
            Some(grid_only) if grid_only.worst < best.worst => grid_only,
            _ => best,
        };
        let residue_bytes = residue_of(grid, series, candidates, &best)?;
        let mut terms: Vec<(Term, Vec<u8>)> = best
            .subset
            .iter()
            .zip(best.coefficients)
            .filter(|(_, c)| !c.is_zero())
            .map(|(&i, coefficient)| {
                let term = Term {
                    coefficient,
                    monomial: candidates[i].monomial.clone(),
                };
                (term, candidates[i].exponents.clone())
            })
            .collect();
        terms.sort_by(|(_, a), (_, b)| {
            let degree = |e: &[u8]| e.iter().map(|&p| u32::from(p)).sum::<u32>();
            let constant = |e: &[u8]| degree(e) != 0;
            (constant(a), degree(b), b).cmp(&(constant(b), degree(a), a))
        });
        Ok(Fit {
            terms: Formula {
                terms: terms.into_iter().map(|(t, _)| t).collect(),
            },
            loo_error_ppm: ppm(&best.worst),
            residue_bytes,
        })
    }
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
) -> Result<Option<Scored>, AxesError> {
    let grid_series: Vec<(Point, u64)> = series
        .iter()
        .filter(|(p, _)| grid.holds(p))
        .cloned()
        .collect();
    if grid_series.len() == series.len() || grid_series.len() < 3 {
        return Ok(None);
    }
    let fit = Fit::with(grid, &grid_series, screening, None)?;
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
