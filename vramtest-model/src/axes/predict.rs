//! Predictions from fits, and why one is not to be trusted (see "Flags" in the
//! documentation of [`crate::axes`]); every figure of a sweep, fitted together; the
//! maximum over phases.

use super::design::{Screening, Shared};
use super::fit::{Fit, Prior};
use super::grid::{AxesError, Axis, FLAG_PPM, Grid, Point};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// A figure predicted at a point.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a prediction may be flagged: check `flagged` or call `trusted`"]
pub struct FigurePrediction {
    /// The predicted bytes, rounded up (0 where the formula is negative).
    pub bytes: u64,
    /// The fit's worst leave-one-out error, in parts per million.
    pub loo_error_ppm: u64,
    /// The fit's [residue](Fit::residue_bytes): the figure is `bytes` within about this
    /// many bytes of bookkeeping, which the formula bounds instead of extrapolating.
    pub residue_bytes: u64,
    /// Why the prediction is not to be trusted, if it is not (an interpolation is known
    /// where the grid is: [`FigureFits::predict`]).
    pub flag: Option<Flag>,
}

impl FigurePrediction {
    /// Whether the prediction is flagged: not to be trusted.
    pub fn flagged(&self) -> bool {
        self.flag.is_some()
    }

    /// The bytes, or why not: [`AxesError::Flagged`] when the fit misses a held-out
    /// point by over 2%, [`AxesError::Interpolated`] when it interpolates.
    pub fn trusted(self) -> Result<u64, AxesError> {
        match self.flag {
            None => Ok(self.bytes),
            Some(Flag::Missed { ppm }) => Err(AxesError::Flagged { ppm }),
            Some(Flag::Interpolates(i)) => Err(AxesError::Interpolated {
                axes: i.axes_in_words(),
                combinations: i.combinations,
            }),
        }
    }
}

/// Why a fit's predictions are not to be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flag {
    /// It misses a held-out point by more than 2% ([`FLAG_PPM`]): its worst
    /// leave-one-out error, in parts per million.
    Missed {
        /// The fit's worst leave-one-out error, in parts per million.
        ppm: u64,
    },
    /// It misses none, but interpolates ([`Fit::interpolation`]).
    Interpolates(Interpolation),
}

impl Fit {
    /// Whether the worst leave-one-out error exceeds 2% ([`FLAG_PPM`]) with no
    /// bookkeeping-sized [residue](Fit::residue_bytes) to account for it.
    pub fn flagged(&self) -> bool {
        self.loo_error_ppm > FLAG_PPM && self.residue_bytes == 0
    }

    /// Whether the fit misses by over 2% on the grid, but by no more than its residue,
    /// and the residue is over 2% of `bytes` (a prediction): at that point the
    /// bookkeeping the fit bounds is no longer small beside what it predicts.
    fn residue_dominates(&self, bytes: u64) -> bool {
        self.loo_error_ppm > FLAG_PPM
            && u128::from(self.residue_bytes) * 1_000_000 > u128::from(bytes) * u128::from(FLAG_PPM)
    }

    /// Whether the fit interpolates on `grid` (the grid it was fitted on): it has as
    /// many terms as there are combinations of the values of the axes its formula uses,
    /// so it passes through every one and nothing checks its form along them, while one
    /// of them has three values or more, so the fit chose its degree (see the
    /// documentation of [`crate::axes`]). `None` for a formula of no axis, whose points
    /// all check it, and for one of two-valued axes alone, which is what such axes are
    /// declared to be.
    pub fn interpolation(&self, grid: &Grid) -> Option<Interpolation> {
        let axes: Vec<&Axis> = grid
            .axes()
            .iter()
            .filter(|a| {
                self.terms
                    .terms
                    .iter()
                    .any(|t| t.monomial.powers().iter().any(|(name, _)| *name == a.name))
            })
            .collect();
        if axes.is_empty() {
            return None;
        }
        let combinations = axes
            .iter()
            .fold(1u64, |n, a| n.saturating_mul(a.values.len() as u64));
        let open: Vec<String> = axes
            .iter()
            .filter(|a| a.values.len() > 2)
            .map(|a| a.name.clone())
            .collect();
        (!open.is_empty() && self.terms.terms.len() as u64 >= combinations).then(|| Interpolation {
            axes: axes.iter().map(|a| a.name.clone()).collect(),
            combinations,
            open,
        })
    }

    /// Why the fit's predictions on `grid` are not to be trusted, if they are not: a
    /// miss over 2% ([`Fit::flagged`]), the stronger statement, said first whenever it
    /// holds; else an [interpolation](Fit::interpolation).
    pub fn flag(&self, grid: &Grid) -> Option<Flag> {
        if self.flagged() {
            return Some(Flag::Missed {
                ppm: self.loo_error_ppm,
            });
        }
        self.interpolation(grid).map(Flag::Interpolates)
    }

    /// The figure at `point` (which must give every axis of the formula a value),
    /// carrying the fit's 2% flag. Without the grid, an interpolation is not known here
    /// ([`FigurePrediction::trusted`] does not refuse one): [`FigureFits::predict`] adds it,
    /// and [`Fit::flag`] tells it.
    pub fn predict(&self, point: &Point) -> Result<FigurePrediction, AxesError> {
        let bytes = self.terms.bytes(point)?;
        Ok(FigurePrediction {
            bytes,
            loo_error_ppm: self.loo_error_ppm,
            residue_bytes: self.residue_bytes,
            flag: (self.flagged() || self.residue_dominates(bytes)).then_some(Flag::Missed {
                ppm: self.loo_error_ppm,
            }),
        })
    }
}

/// A fit that passes through every combination of the values of the axes it uses: see
/// [`Fit::interpolation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpolation {
    /// The axes the formula uses, in the grid's order.
    pub axes: Vec<String>,
    /// How many combinations of their values the grid has (= the formula's terms).
    pub combinations: u64,
    /// Those of the axes with three values or more, whose degree the fit chose: a
    /// fourth value of one of them checks the form.
    pub open: Vec<String>,
}

impl Interpolation {
    /// The axes as a list in words: `seq`, `batch and seq`, `batch, seq and layers`.
    pub fn axes_in_words(&self) -> String {
        in_words(&self.axes)
    }

    /// What would check the form, in words: `measure seq at a fourth value`.
    pub fn remedy(&self) -> String {
        match self.open.as_slice() {
            [one] => format!("measure {one} at a fourth value"),
            more => format!("measure one of {} at a fourth value", in_words(more)),
        }
    }
}

/// `a`, `a and b`, `a, b and c`.
fn in_words(names: &[String]) -> String {
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Every figure of a sweep over named axes, fitted: what a snapshot keeps.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureFits {
    /// Each axis and its values.
    pub axes: BTreeMap<String, Vec<u64>>,
    /// Each figure's fit.
    pub figures: BTreeMap<String, Fit>,
}

impl FigureFits {
    /// Fits every figure's series on `grid`; an error names the figure. Figures are
    /// fitted on as many threads as the machine has (each fit is independent and
    /// exact, so the result does not depend on the order), and a series identical to
    /// another figure's (gradients and parameters, often) is fitted once.
    pub fn fit(
        grid: &Grid,
        series: &BTreeMap<String, Vec<(Point, u64)>>,
    ) -> Result<FigureFits, AxesError> {
        FigureFits::fit_with(grid, series, &[])
    }

    /// [`FigureFits::fit`], the figures named in `free` fitted with any signs
    /// ([`Prior::Free`]: no sum of blocks), the others as memory ([`Prior::Blocks`]).
    pub fn fit_with(
        grid: &Grid,
        series: &BTreeMap<String, Vec<(Point, u64)>>,
        free: &[&str],
    ) -> Result<FigureFits, AxesError> {
        let prior = |figure: &str| {
            if free.contains(&figure) {
                Prior::Free
            } else {
                Prior::Blocks
            }
        };
        let mut distinct: Vec<(&Vec<(Point, u64)>, Prior)> = Vec::new();
        for (figure, points) in series {
            let key = (points, prior(figure));
            if !distinct.contains(&key) {
                distinct.push(key);
            }
        }
        // Series measured at the same points (every figure of a sweep) share their
        // candidates' columns: values, `XᵀX`, the floating-point orthogonalization.
        let shared = distinct.first().filter(|(first, _)| {
            first.len() >= 3
                && first.iter().all(|(p, _)| grid.check_point(p).is_ok())
                && (distinct.iter()).all(|(d, _)| {
                    d.len() == first.len() && d.iter().zip(first.iter()).all(|(a, b)| a.0 == b.0)
                })
        });
        let shared = shared.map(|_| Shared::new(grid));
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let fits = crate::parallel::map(&distinct, cores, |(points, prior)| {
            Fit::with(grid, points, Screening::Float, shared.as_ref(), *prior)
        });
        let mut figures = BTreeMap::new();
        for (figure, points) in series {
            let i = distinct
                .iter()
                .position(|d| *d == (points, prior(figure)))
                .expect("every series is among the distinct ones");
            let fit = fits[i].clone().map_err(|e| AxesError::Figure {
                figure: figure.clone(),
                source: Box::new(e),
            })?;
            figures.insert(figure.clone(), fit);
        }
        Ok(FigureFits {
            axes: grid.to_map(),
            figures,
        })
    }

    /// The grid of the stored axes (checked again: a snapshot may have been edited).
    pub fn grid(&self) -> Result<Grid, AxesError> {
        Grid::from_map(&self.axes)
    }

    /// `figure` at `point`, which must give every axis a positive value and name no
    /// other.
    pub fn predict(&self, figure: &str, point: &Point) -> Result<FigurePrediction, AxesError> {
        let grid = self.grid()?;
        grid.check_point(point)?;
        let fit = self
            .figures
            .get(figure)
            .ok_or_else(|| AxesError::UnknownFigure {
                figure: figure.to_owned(),
            })?;
        let mut prediction = fit.predict(point)?;
        prediction.flag = fit.flag(&grid).or(prediction.flag);
        Ok(prediction)
    }
}

/// The maximum over phases of a figure that is a maximum over time.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a maximum may be flagged: check `flagged`"]
pub struct PhaseMax {
    /// The phase predicted highest; of equals, the one whose own fit is trusted, then
    /// the one with the smaller held-out error, then the first.
    pub phase: String,
    /// Its predicted bytes.
    pub bytes: u64,
    /// The worst leave-one-out error among the phases, in parts per million.
    pub loo_error_ppm: u64,
    /// Whether any phase's fit misses a held-out point by over 2% (a flagged phase might
    /// dominate). An interpolation needs the grid: [`Fit::interpolation`].
    pub flagged: bool,
}

/// Predicts each phase's fit at `point` and takes the maximum, so a change of which
/// phase dominates between the grid and the point is followed.
pub fn predict_max<'a, I>(phases: I, point: &Point) -> Result<PhaseMax, AxesError>
where
    I: IntoIterator<Item = (&'a str, &'a Fit)>,
{
    // Of equals, the trusted one, then the one with the smaller held-out error, then
    // the first: the figure named as holding the maximum is the one whose formula and
    // error are the best to read it by.
    let rank = |p: &FigurePrediction| (p.bytes, !p.flagged(), Reverse(p.loo_error_ppm));
    let mut winner: Option<(&str, FigurePrediction)> = None;
    let (mut worst, mut flagged) = (0, false);
    for (phase, fit) in phases {
        let p = fit.predict(point)?;
        worst = worst.max(p.loo_error_ppm);
        flagged |= p.flagged();
        if winner.as_ref().is_none_or(|(_, w)| rank(&p) > rank(w)) {
            winner = Some((phase, p));
        }
    }
    let (phase, p) = winner.ok_or(AxesError::NoPhases)?;
    Ok(PhaseMax {
        phase: phase.to_owned(),
        bytes: p.bytes,
        loo_error_ppm: worst,
        flagged,
    })
}
