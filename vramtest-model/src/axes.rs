//! The model behind named axes: every figure of a sweep over a grid of integer axes
//! (`batch = [2, 4]`, `seq = [16, 32, 48]`, `layers = [1, 2, 3]`) fitted as a sparse
//! sum of monomials of the axes, with exact rational coefficients, so that small runs
//! predict a configuration nobody can run on a CPU (`layers = 32, seq = 4096`).
//!
//! # The model
//!
//! A [`Grid`] is a list of named axes, each with distinct positive values; its points
//! are every combination of them. A figure measured at those points is fitted as
//! `Σ coefficient × monomial`, where a [`Monomial`] raises each axis to a power from 0 up
//! to `min(2, distinct values of that axis − 1)`: an axis measured at two values can
//! only enter linearly, one measured at three or more may enter squared (attention
//! scores grow with `seq²`). Products of axes are allowed (`batch·seq·layers`).
//!
//! # Choosing the terms
//!
//! Of all sums of candidate monomials, the fit keeps the one that predicts held-out
//! points best. Each model is a least-squares fit over all points; its score is its
//! **worst relative leave-one-out error**: for each point, the model refitted without
//! that point predicts it, and the miss is divided by the point's value (by 1 byte
//! when the value is 0). The leave-one-out residual comes exactly from the full fit
//! (`residual / (1 − leverage)`), so each model costs one exact solve. A model may have
//! at most `points − 2` terms, so every held-out refit is overdetermined or exact with
//! one point to spare; on a grid of one axis (a batch sweep), `points − 1`, so that
//! three sizes fit `a + b × batch` with each size predicted from the other two, and two
//! sizes give the line through them, unchecked, as a line through two points is. A
//! model in which a point alone determines a coefficient (leverage 1) cannot be checked
//! and is not considered.
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
//!
//! # Bookkeeping is not a polynomial
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
//! A fit's **residue** ([`Fit::residue_bytes`]) is its worst held-out miss in bytes,
//! when that miss is bookkeeping: at most 2% of the largest measured value, and the
//! fit's misses a step of the counting axes alone. That is checked held out: the
//! formula's terms that involve a tensor axis, plus a free offset for each combination
//! of the counting axes' values (one offset when the grid has none), must predict every
//! held-out point within 2% of its value. The offsets take whatever steps with the
//! graph's size; what varies with the tensors' sizes is a miss like any, and a formula
//! of many terms that passes near every point proves nothing by it. The formula
//! predicts what scales; the residue bounds what steps, and is never extrapolated.
//!
//! A figure that is a **maximum of transient blocks** (a phase's peak, its temporaries)
//! can change which block holds it inside the grid: a table's copy of constant size at
//! small tensors, a buffer that scales beyond. No polynomial is that maximum; its fit
//! misses held-out points and is flagged, never extrapolated silently.
//!
//! A fit whose worst leave-one-out error exceeds 2% ([`FLAG_PPM`]) without a residue to
//! account for it is [flagged](Fit::flagged): its [`FigurePrediction`]s carry the flag and
//! [`FigurePrediction::trusted`] refuses them, so it is never extrapolated silently. One that
//! has a residue is flagged at a point where the residue is over 2% of the prediction.
//!
//! So is a fit that **interpolates** ([`Fit::interpolation`]): one with as many terms
//! as there are combinations of the values of the axes it uses (all 6 monomials of
//! `batch` in 2 values and `seq` in 3, say). It passes through every one of those
//! combinations, whatever the figure does between and beyond them; its leave-one-out
//! error can still be 0, because the points that share a combination (at other values
//! of the other axes) predict each other, but that only checks that the figure does not
//! depend on the other axes, never the form the formula gives it along its own. Only
//! a fit that chose a degree is flagged, one with an axis of three values or more among
//! its own: an axis measured at two values is declared linear (everything a layer holds,
//! the same for every layer), so a fit of two-valued axes alone (`a + b·layers`, or
//! `a + b·batch + c·layers + d·batch·layers`) is what those values allow, not a choice.
//! A fourth value of a three-valued axis checks the form: its powers stop at 2, so its
//! values then outnumber them.
//!
//! # Exactness
//!
//! Everything is exact: the normal equations are solved with fraction-free
//! (Bareiss) Gauss–Jordan elimination on big integers, coefficients are reduced big
//! rationals, and a [`Fit`] serializes them as strings (`"512"`, `"-7/3"`), its error
//! as integer parts per million, so the same measurements give the same snapshot on
//! every machine and no grid (at most [`MAX_POINTS`] points, any byte counts) can
//! overflow. The search screens subsets in floating point first (`f64` leave-one-out
//! estimates with a bound on their rounding) and scores exactly only the subsets that
//! bound cannot rank, the chosen one always: the choice is the exact search's, at a
//! small part of its cost, fast enough unoptimized in a test binary.

use crate::bytes::HumanBytes;
use num_bigint::BigInt;
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

mod border;
mod screen;
use border::Eliminated;
use screen::{Basis, Floats, Metric, UnitColumns, Whole};

/// A model under consideration by the search.
type ScoredModel = screen::Model<Scored>;

/// The most terms a model of `points` points of `grid` may have: `points − 2` (every
/// held-out refit overdetermined), or `points − 1` on a grid of one axis, where each
/// held-out refit goes through the other points exactly and the held-out point is the
/// check (a batch sweep of three sizes is fitted as `a + b × batch`, each size
/// predicted from the other two).
fn max_terms(grid: &Grid, points: usize) -> usize {
    if grid.axes.len() == 1 {
        points - 1
    } else {
        points - 2
    }
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

/// Whether subsets are screened in floating point before the exact scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Screening {
    /// Screened: only the subsets floating point cannot rank are scored exactly.
    Float,
    /// Every subset scored exactly (what screening must agree with).
    #[cfg_attr(not(test), allow(dead_code))]
    Exact,
}

/// The most points a grid may have (each one is a process of its own).
pub const MAX_POINTS: u64 = 256;

/// Worst relative leave-one-out error, in parts per million, above which a fit is
/// flagged and its predictions are not trusted (2%).
pub const FLAG_PPM: u64 = 20_000;

/// The highest power an axis may have in a monomial.
pub const MAX_DEGREE: u8 = 2;

/// How many subsets of candidate monomials are scored exhaustively before the search
/// goes on greedily.
const EXHAUSTIVE_BUDGET: u64 = 1024;

/// The most candidates whose joint least-squares fit is tried first (see the search
/// strategy): its elimination takes a cubic number of big-integer steps.
const EXACT_MAX_CANDIDATES: usize = 100;

/// How many sizes in a row greedy forward selection goes on without a better model
/// before it stops.
const GREEDY_PATIENCE: usize = 2;

/// A point of a grid: each axis's value.
pub type Point = BTreeMap<String, u64>;

/// What is wrong with axes, a point, a series or a stored fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AxesError {
    /// A grid without axes.
    #[error("no axes (hint: name at least one, like `batch = [1, 2, 4]`)")]
    NoAxes,
    /// An axis name that is not an identifier.
    #[error(
        "axis name `{axis}` is not a name: use letters, digits and `_`, not starting with a digit"
    )]
    BadName {
        /// The name given.
        axis: String,
    },
    /// The same axis named twice.
    #[error("axis `{axis}` is declared twice")]
    DuplicateAxis {
        /// The axis.
        axis: String,
    },
    /// An axis without values.
    #[error("axis `{axis}` has no values (hint: give at least two, like `{axis} = [1, 2]`)")]
    Empty {
        /// The axis.
        axis: String,
    },
    /// An axis value of 0.
    #[error("axis `{axis}` has the value 0; axis values must be positive")]
    Zero {
        /// The axis.
        axis: String,
    },
    /// A value listed twice.
    #[error("axis `{axis}` lists {value} twice; axis values must be distinct")]
    Duplicate {
        /// The axis.
        axis: String,
        /// The repeated value.
        value: u64,
    },
    /// An axis with too few values for any model.
    #[error(
        "axis `{axis}` has {values} distinct value(s); the model needs at least {needed} (hint: a line needs two values, a checked line three)"
    )]
    TooFewValues {
        /// The axis.
        axis: String,
        /// Its distinct values.
        values: usize,
        /// How many it needs.
        needed: usize,
    },
    /// A grid with more than [`MAX_POINTS`] points.
    #[error("the grid {shape} has {points} points; at most {MAX_POINTS} are allowed")]
    TooManyPoints {
        /// The axes and their sizes (`batch(2) × seq(3)`).
        shape: String,
        /// How many points it has.
        points: u128,
    },
    /// A point naming an axis the grid does not have.
    #[error("unknown axis `{axis}` (the axes are {known})")]
    UnknownAxis {
        /// The name given.
        axis: String,
        /// The grid's axes, comma separated.
        known: String,
    },
    /// A point without a value for one of the axes.
    #[error("no value for axis `{axis}` (the axes are {known})")]
    MissingAxis {
        /// The axis.
        axis: String,
        /// The grid's axes, comma separated.
        known: String,
    },
    /// A series with too few points for any model.
    #[error("a series of {points} point(s) cannot be fitted: the model needs at least 3")]
    TooFewPoints {
        /// How many points it has.
        points: usize,
    },
    /// A stored monomial that does not parse.
    #[error("monomial `{text}`: {reason}")]
    BadMonomial {
        /// The text.
        text: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A stored coefficient that is not an integer or a fraction.
    #[error("coefficient `{text}` is not an integer or a fraction `n/d`")]
    BadCoefficient {
        /// The text.
        text: String,
    },
    /// A predicted byte count beyond 64 bits.
    #[error("the predicted figure {bytes} B does not fit in 64 bits")]
    TooLarge {
        /// The exact prediction, rounded up.
        bytes: String,
    },
    /// A prediction from a fit that interpolates every combination of its axes' values,
    /// asked to be trusted.
    #[error(
        "the fit has as many terms as there are combinations of the values of {axes} ({combinations}): no held-out point checks its form along them, and its prediction is not trusted"
    )]
    Interpolated {
        /// The axes the formula uses, as a list in words (`batch and seq`).
        axes: String,
        /// How many combinations of their values the grid has.
        combinations: u64,
    },
    /// A prediction from a flagged fit, asked to be trusted.
    #[error(
        "the fit misses a held-out point by {ppm} ppm (over {FLAG_PPM} ppm): its prediction is not trusted"
    )]
    Flagged {
        /// The fit's worst leave-one-out error, in parts per million.
        ppm: u64,
    },
    /// A figure the scaling does not have.
    #[error("no figure `{figure}` in the scaling")]
    UnknownFigure {
        /// The name given.
        figure: String,
    },
    /// A figure that could not be fitted.
    #[error("figure `{figure}`: {source}")]
    Figure {
        /// The figure.
        figure: String,
        /// Why.
        source: Box<AxesError>,
    },
    /// A maximum over no phases.
    #[error("no phases to take the maximum of")]
    NoPhases,
}

/// One axis of a grid: a name and its distinct positive values, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    /// The axis's name (`seq`).
    pub name: String,
    /// Its values.
    pub values: Vec<u64>,
}

/// Named integer axes; their points are every combination of the values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    axes: Vec<Axis>,
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_axis(name: &str, values: &[u64]) -> Result<(), AxesError> {
    let axis = || name.to_owned();
    if !is_name(name) {
        return Err(AxesError::BadName { axis: axis() });
    }
    if values.is_empty() {
        return Err(AxesError::Empty { axis: axis() });
    }
    if values.contains(&0) {
        return Err(AxesError::Zero { axis: axis() });
    }
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            return Err(AxesError::Duplicate {
                axis: axis(),
                value: *v,
            });
        }
    }
    if values.len() < 2 {
        return Err(AxesError::TooFewValues {
            axis: axis(),
            values: values.len(),
            needed: 2,
        });
    }
    Ok(())
}

impl Grid {
    /// A grid of these axes, in this order (the order of [`Grid::points`] and of the
    /// factors in a monomial). Every axis needs at least two distinct positive values,
    /// the grid at most [`MAX_POINTS`] points (a grid of one axis of two values, a batch
    /// sweep of two sizes, is fitted as the line through them).
    pub fn new<I, S>(axes: I) -> Result<Grid, AxesError>
    where
        I: IntoIterator<Item = (S, Vec<u64>)>,
        S: Into<String>,
    {
        let mut out: Vec<Axis> = Vec::new();
        for (name, values) in axes {
            let name = name.into();
            check_axis(&name, &values)?;
            if out.iter().any(|a| a.name == name) {
                return Err(AxesError::DuplicateAxis { axis: name });
            }
            out.push(Axis { name, values });
        }
        if out.is_empty() {
            return Err(AxesError::NoAxes);
        }
        let points: u128 = out.iter().map(|a| a.values.len() as u128).product();
        if points > u128::from(MAX_POINTS) {
            let shape = out
                .iter()
                .map(|a| format!("{}({})", a.name, a.values.len()))
                .collect::<Vec<_>>()
                .join(" × ");
            return Err(AxesError::TooManyPoints { shape, points });
        }
        Ok(Grid { axes: out })
    }

    /// The grid of a stored scaling's axes (in the names' order).
    pub fn from_map(axes: &BTreeMap<String, Vec<u64>>) -> Result<Grid, AxesError> {
        Grid::new(axes.iter().map(|(k, v)| (k.clone(), v.clone())))
    }

    /// The axes as a map (what a snapshot stores).
    pub fn to_map(&self) -> BTreeMap<String, Vec<u64>> {
        self.axes
            .iter()
            .map(|a| (a.name.clone(), a.values.clone()))
            .collect()
    }

    /// The axes, in order.
    pub fn axes(&self) -> &[Axis] {
        &self.axes
    }

    /// How many points the grid has.
    pub fn len(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// Never true: a grid has at least 3 points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every combination of the axes' values: the last axis varies fastest, each axis
    /// through its values in the order given.
    pub fn points(&self) -> Vec<Point> {
        let mut points = vec![Point::new()];
        for axis in &self.axes {
            points = points
                .into_iter()
                .flat_map(|p| {
                    axis.values.iter().map(move |&v| {
                        let mut q = p.clone();
                        q.insert(axis.name.clone(), v);
                        q
                    })
                })
                .collect();
        }
        points
    }

    fn known(&self) -> String {
        let names: Vec<&str> = self.axes.iter().map(|a| a.name.as_str()).collect();
        names.join(", ")
    }

    /// The axis called `name`, or [`AxesError::UnknownAxis`] naming the grid's axes.
    pub fn axis(&self, name: &str) -> Result<&Axis, AxesError> {
        self.axes
            .iter()
            .find(|a| a.name == name)
            .ok_or_else(|| AxesError::UnknownAxis {
                axis: name.to_owned(),
                known: self.known(),
            })
    }

    /// Checks that `point` gives every axis a positive value and names no other.
    pub fn check_point(&self, point: &Point) -> Result<(), AxesError> {
        for name in point.keys() {
            self.axis(name)?;
        }
        for axis in &self.axes {
            match point.get(&axis.name) {
                None => {
                    return Err(AxesError::MissingAxis {
                        axis: axis.name.clone(),
                        known: self.known(),
                    });
                }
                Some(0) => {
                    return Err(AxesError::Zero {
                        axis: axis.name.clone(),
                    });
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// A product of axes, each to a power 1 or 2 (`batch·seq²`); the empty product is the
/// constant 1. Written and stored as its factors joined by `·`, a square as `²`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Monomial {
    powers: Vec<(String, u8)>,
}

impl Monomial {
    /// The constant monomial 1.
    pub fn constant() -> Monomial {
        Monomial::default()
    }

    /// A monomial of these axes and powers (powers of 0 are left out).
    pub fn new<S: Into<String>>(powers: impl IntoIterator<Item = (S, u8)>) -> Monomial {
        Monomial {
            powers: powers
                .into_iter()
                .filter(|(_, p)| *p > 0)
                .map(|(s, p)| (s.into(), p))
                .collect(),
        }
    }

    /// Each axis and its power, in order (none for the constant).
    pub fn powers(&self) -> &[(String, u8)] {
        &self.powers
    }

    /// The sum of the powers.
    pub fn degree(&self) -> u32 {
        self.powers.iter().map(|(_, p)| u32::from(*p)).sum()
    }

    /// The monomial's value at `point`.
    pub fn eval(&self, point: &Point) -> Result<BigInt, AxesError> {
        // In u128 while it fits (every grid's monomials do; big integers cost an
        // allocation a product), in big integers past that.
        let mut small = 1u128;
        let mut big: Option<BigInt> = None;
        for (axis, power) in &self.powers {
            let v = point.get(axis).ok_or_else(|| AxesError::MissingAxis {
                axis: axis.clone(),
                known: self.names(),
            })?;
            let power = u32::from(*power);
            let product = u128::from(*v)
                .checked_pow(power)
                .and_then(|f| f.checked_mul(small));
            match (&mut big, product) {
                (None, Some(p)) => small = p,
                (None, None) => big = Some(BigInt::from(small) * BigInt::from(*v).pow(power)),
                (Some(b), _) => *b *= BigInt::from(*v).pow(power),
            }
        }
        Ok(big.unwrap_or_else(|| BigInt::from(small)))
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self.powers.iter().map(|(a, _)| a.as_str()).collect();
        names.join(", ")
    }
}

impl fmt::Display for Monomial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.powers.is_empty() {
            return f.write_str("1");
        }
        for (i, (axis, power)) in self.powers.iter().enumerate() {
            if i > 0 {
                f.write_str("·")?;
            }
            f.write_str(axis)?;
            if *power == 2 {
                f.write_str("²")?;
            }
        }
        Ok(())
    }
}

impl FromStr for Monomial {
    type Err = AxesError;

    fn from_str(text: &str) -> Result<Monomial, AxesError> {
        let bad = |reason| AxesError::BadMonomial {
            text: text.to_owned(),
            reason,
        };
        if text == "1" {
            return Ok(Monomial::constant());
        }
        let mut powers: Vec<(String, u8)> = Vec::new();
        for factor in text.split('·') {
            let (name, power) = match factor.strip_suffix('²') {
                Some(name) => (name, 2),
                None => (factor, 1),
            };
            if !is_name(name) {
                return Err(bad("a factor is not an axis name"));
            }
            if powers.iter().any(|(a, _)| a == name) {
                return Err(bad("an axis appears twice"));
            }
            powers.push((name.to_owned(), power));
        }
        Ok(Monomial { powers })
    }
}

impl Serialize for Monomial {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Monomial {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Monomial, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

mod rational_text {
    //! A big rational stored as the text `n` or `n/d`.
    use super::{AxesError, BigRational};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(r: &BigRational, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(r)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BigRational, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|_| serde::de::Error::custom(AxesError::BadCoefficient { text }))
    }
}

/// `coefficient × monomial`, the coefficient in bytes (an exact rational).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Term {
    /// Bytes per unit of the monomial.
    #[serde(with = "rational_text")]
    pub coefficient: BigRational,
    /// The product of axes it multiplies.
    pub monomial: Monomial,
}

/// A sum of terms: a figure's bytes as a function of the axes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Formula {
    /// The terms, constant first, then by degree (highest first).
    pub terms: Vec<Term>,
}

impl Formula {
    /// The exact value at `point`.
    pub fn eval(&self, point: &Point) -> Result<BigRational, AxesError> {
        let (numerator, denominator) = self.fraction(point)?;
        Ok(BigRational::new(numerator, denominator))
    }

    /// The value at `point` as an unreduced fraction, its denominator positive: summed
    /// over one running denominator, since a fit's coefficients mostly share theirs and
    /// a reduction per term is most of the cost.
    fn fraction(&self, point: &Point) -> Result<(BigInt, BigInt), AxesError> {
        let (mut numerator, mut denominator) = (BigInt::zero(), BigInt::one());
        for term in &self.terms {
            let (n, d) = (term.coefficient.numer(), term.coefficient.denom());
            let value = n * term.monomial.eval(point)?;
            if *d == denominator {
                numerator += value;
            } else {
                numerator = numerator * d + value * &denominator;
                denominator *= d;
            }
        }
        Ok((numerator, denominator))
    }

    /// The value at `point` rounded up to whole bytes; 0 where the formula is negative.
    pub fn bytes(&self, point: &Point) -> Result<u64, AxesError> {
        // Rounded up without reducing the fraction (a gcd, most of a prediction's
        // cost unoptimized): ⌈n/d⌉ = −⌊−n/d⌋ for d > 0.
        let (numerator, denominator) = self.fraction(point)?;
        let up = -(-numerator).div_floor(&denominator);
        if up.is_negative() {
            return Ok(0);
        }
        up.to_u64().ok_or_else(|| AxesError::TooLarge {
            bytes: up.to_string(),
        })
    }
}

/// A coefficient in people's units: whole bytes via [`HumanBytes`], a fraction of a
/// byte with two decimals.
fn human_coefficient(c: &BigRational) -> String {
    let a = c.abs();
    if a.is_integer() || a >= BigRational::from_integer(1024.into()) {
        return match a.round().to_integer().to_u64() {
            Some(n) => HumanBytes(n).to_string(),
            None => format!("{} B", a.round()),
        };
    }
    let hundredths = (a * BigRational::from_integer(100.into()))
        .round()
        .to_integer();
    let (units, cents) = (&hundredths / 100, &hundredths % 100);
    format!("{units}.{cents:0>2} B")
}

impl fmt::Display for Formula {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0 B");
        }
        for (i, term) in self.terms.iter().enumerate() {
            let negative = term.coefficient.is_negative();
            match (i, negative) {
                (0, true) => f.write_str("-")?,
                (0, false) => {}
                (_, true) => f.write_str(" - ")?,
                (_, false) => f.write_str(" + ")?,
            }
            f.write_str(&human_coefficient(&term.coefficient))?;
            if term.monomial.degree() > 0 {
                write!(f, " × {}", term.monomial)?;
            }
        }
        Ok(())
    }
}

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
    /// the axes is bounded by it, never extrapolated: see the module's documentation.
    /// Absent from snapshots written before it existed, and from those of exact fits.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub residue_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

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
    /// module's documentation for the model and the search.
    pub fn new(grid: &Grid, series: &[(Point, u64)]) -> Result<Fit, AxesError> {
        Fit::with(grid, series, Screening::Float, None)
    }

    /// [`Fit::new`], its subsets screened in floating point or all scored exactly, on
    /// `shared` when given (made for series measured at the same points as `series`).
    fn with(
        grid: &Grid,
        series: &[(Point, u64)],
        screening: Screening,
        shared: Option<&Shared>,
    ) -> Result<Fit, AxesError> {
        for (point, _) in series {
            grid.check_point(point)?;
        }
        if series.len() == 2 && grid.axes.len() == 1 {
            return Ok(line_through(&grid.axes[0].name, series));
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
    /// of them has three values or more, so the fit chose its degree (see the module's
    /// documentation). `None` for a formula of no axis, whose points all check it, and
    /// for one of two-valued axes alone, which is what such axes are declared to be.
    pub fn interpolation(&self, grid: &Grid) -> Option<Interpolation> {
        let axes: Vec<&Axis> = grid
            .axes
            .iter()
            .filter(|a| {
                self.terms
                    .terms
                    .iter()
                    .any(|t| t.monomial.powers.iter().any(|(name, _)| *name == a.name))
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

/// The fit's [residue](Fit::residue_bytes): its worst held-out miss in bytes, when that
/// is bookkeeping-sized (at most 2% of the largest measured value) and the fit's misses
/// step with the counting axes alone (see the module's documentation); 0 otherwise, and
/// for an exact fit.
fn residue_of(
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

/// `⌈error × 10⁶⌉`, saturating: so that `ppm > FLAG_PPM` exactly when the error
/// exceeds 2%.
fn ppm(error: &BigRational) -> u64 {
    (error * BigRational::from_integer(1_000_000.into()))
        .ceil()
        .to_integer()
        .to_u64()
        .unwrap_or(u64::MAX)
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
        let mut distinct: Vec<&Vec<(Point, u64)>> = Vec::new();
        for points in series.values() {
            if !distinct.contains(&points) {
                distinct.push(points);
            }
        }
        // Series measured at the same points (every figure of a sweep) share their
        // candidates' columns: values, `XᵀX`, the floating-point orthogonalization.
        let shared = distinct.first().filter(|first| {
            first.len() >= 3
                && first.iter().all(|(p, _)| grid.check_point(p).is_ok())
                && (distinct.iter()).all(|d| {
                    d.len() == first.len() && d.iter().zip(first.iter()).all(|(a, b)| a.0 == b.0)
                })
        });
        let shared = shared.map(|_| Shared::new(grid));
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let fits = crate::parallel::map(&distinct, cores, |points| {
            Fit::with(grid, points, Screening::Float, shared.as_ref())
        });
        let mut figures = BTreeMap::new();
        for (figure, points) in series {
            let i = distinct
                .iter()
                .position(|d| *d == points)
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
    /// The phase predicted highest (the first of equals).
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
    let mut best: Option<PhaseMax> = None;
    for (phase, fit) in phases {
        let p = fit.predict(point)?;
        let (worst, flagged) = match &best {
            Some(b) => (
                b.loo_error_ppm.max(p.loo_error_ppm),
                b.flagged || p.flagged(),
            ),
            None => (p.loo_error_ppm, p.flagged()),
        };
        let higher = best.as_ref().is_none_or(|b| p.bytes > b.bytes);
        let (phase, bytes) = match (&best, higher) {
            (Some(b), false) => (b.phase.clone(), b.bytes),
            _ => (phase.to_owned(), p.bytes),
        };
        best = Some(PhaseMax {
            phase,
            bytes,
            loo_error_ppm: worst,
            flagged,
        });
    }
    best.ok_or(AxesError::NoPhases)
}

/// A candidate monomial, with its exponents in the grid's axis order.
#[derive(Clone)]
struct Candidate {
    monomial: Monomial,
    exponents: Vec<u8>,
}

/// Every monomial the grid allows: each axis up to `min(2, its values − 1)`, ordered
/// by degree, then by the exponents in the axes' order. Points of the series off the
/// grid (a target's axial points) check the form the grid's values allow; one more
/// value of an axis, at one point, cannot choose a degree.
fn candidates(grid: &Grid) -> Vec<Candidate> {
    let caps: Vec<u8> = grid
        .axes
        .iter()
        .map(|axis| (axis.values.len() - 1).min(usize::from(MAX_DEGREE)) as u8)
        .collect();
    let mut all: Vec<Vec<u8>> = vec![Vec::new()];
    for &cap in &caps {
        all = all
            .into_iter()
            .flat_map(|e| {
                (0..=cap).map(move |p| {
                    let mut e = e.clone();
                    e.push(p);
                    e
                })
            })
            .collect();
    }
    all.sort_by_key(|e| (e.iter().map(|&p| u32::from(p)).sum::<u32>(), e.clone()));
    all.into_iter()
        .map(|exponents| Candidate {
            monomial: Monomial::new(
                grid.axes
                    .iter()
                    .zip(&exponents)
                    .map(|(a, &p)| (a.name.clone(), p)),
            ),
            exponents,
        })
        .collect()
}

/// The candidates' values at the points of a series, and what is computed from them
/// alone whatever the measured bytes: `XᵀX` and the floating-point copy. The figures of
/// a sweep, all measured at the same points, share one ([`Shared`]). `XᵀX`'s entries
/// are computed on first use: the floating-point screening leaves few subsets to score
/// exactly, and the whole `XᵀX` of a 256-point grid's 81 candidates is 1.7 million
/// big-integer products, most of an unoptimized fit's time when computed up front.
struct Columns {
    columns: Vec<Vec<BigInt>>,
    /// Each column in machine words, when every value fits one (every column of a grid
    /// of small axis values does).
    small: Vec<Option<Vec<u64>>>,
    degrees: Vec<u32>,
    /// `XᵀX`'s upper triangle, row `r` holding columns `r..`.
    gram: Vec<Vec<OnceLock<BigInt>>>,
    /// The floating-point copy, made when a screened fit first needs it.
    unit: OnceLock<Arc<UnitColumns>>,
}

impl Columns {
    fn new(candidates: &[Candidate], series: &[(Point, u64)]) -> Result<Columns, AxesError> {
        let mut columns = Vec::with_capacity(candidates.len());
        for c in candidates {
            let column = series
                .iter()
                .map(|(p, _)| c.monomial.eval(p))
                .collect::<Result<Vec<_>, _>>()?;
            columns.push(column);
        }
        let n = columns.len();
        Ok(Columns {
            degrees: candidates.iter().map(|c| c.monomial.degree()).collect(),
            gram: (0..n)
                .map(|r| (r..n).map(|_| OnceLock::new()).collect())
                .collect(),
            small: columns.iter().map(|c| small(c)).collect(),
            columns,
            unit: OnceLock::new(),
        })
    }

    /// `XᵀX[r][c]`: the dot product of candidates `r` and `c`.
    fn gram(&self, r: usize, c: usize) -> &BigInt {
        let (lo, hi) = if r <= c { (r, c) } else { (c, r) };
        self.gram[lo][hi - lo].get_or_init(|| {
            let small = (self.small[lo].as_ref()).zip(self.small[hi].as_ref());
            small
                .and_then(|(a, b)| small_dot(a, b))
                .map_or_else(|| dot(&self.columns[lo], &self.columns[hi]), BigInt::from)
        })
    }

    fn unit(&self) -> Arc<UnitColumns> {
        self.unit
            .get_or_init(|| Arc::new(UnitColumns::new(&self.columns)))
            .clone()
    }
}

/// What the fits of series measured at the same points share: the candidates, and
/// their [`Columns`] (all of them, and those a counting axis keeps linear), made when a
/// fit first needs them.
struct Shared {
    candidates: Vec<Candidate>,
    all: OnceLock<Result<Arc<Columns>, AxesError>>,
    linear: OnceLock<Result<Arc<Columns>, AxesError>>,
}

impl Shared {
    /// For series measured at the same points, each checked against `grid`.
    fn new(grid: &Grid) -> Shared {
        Shared {
            candidates: candidates(grid),
            all: OnceLock::new(),
            linear: OnceLock::new(),
        }
    }

    /// The columns of every candidate.
    fn all(&self, series: &[(Point, u64)]) -> Result<Arc<Columns>, AxesError> {
        (self
            .all
            .get_or_init(|| Columns::new(&self.candidates, series).map(Arc::new)))
        .clone()
    }

    /// The columns of `linear`, the candidates a counting axis keeps linear
    /// ([`linear_candidates`]).
    fn linear(
        &self,
        linear: &[Candidate],
        series: &[(Point, u64)],
    ) -> Result<Arc<Columns>, AxesError> {
        (self
            .linear
            .get_or_init(|| Columns::new(linear, series).map(Arc::new)))
        .clone()
    }
}

/// A series' [`Columns`], its measured bytes and `Xᵀy`, from which every subset's
/// normal equations are taken instead of computed again, and the equations reduced so
/// far.
struct Design {
    shared: Arc<Columns>,
    y: Vec<BigInt>,
    /// The same, in machine words.
    bytes: Vec<u64>,
    xty: Vec<OnceLock<BigInt>>,
    /// The floating-point copy that screens subsets; `None` scores every one exactly.
    floats: Option<Floats>,
    /// The reduced normal equations of the subsets scored so far and of the subsets
    /// they were grown from, which their extensions are bordered from ([`border`]).
    eliminated: RefCell<EliminatedCache>,
}

/// A subset's reduced normal equations, with the candidates of its columns in order.
type Grown = Rc<(Vec<usize>, Eliminated)>;

/// Subsets' reduced normal equations, by sorted subset (`None` when singular).
#[derive(Default)]
struct EliminatedCache {
    subsets: HashMap<Vec<usize>, Option<Grown>>,
    /// How many big integers they hold.
    weight: usize,
}

/// The most big integers [`EliminatedCache`] holds before it is emptied: the subsets a
/// search grows from stay within it (a chain of 40 terms, and the extensions scored
/// of its last few), and a fit of a 256-point grid within some tens of megabytes.
const ELIMINATED_WEIGHT: usize = 1 << 16;

impl Design {
    fn new(
        candidates: &[Candidate],
        series: &[(Point, u64)],
        screening: Screening,
    ) -> Result<Design, AxesError> {
        let columns = Columns::new(candidates, series)?;
        Ok(Design::on(Arc::new(columns), series, screening))
    }

    /// The design of `series` on `shared`, the columns of its points.
    fn on(shared: Arc<Columns>, series: &[(Point, u64)], screening: Screening) -> Design {
        let y: Vec<BigInt> = series.iter().map(|(_, b)| BigInt::from(*b)).collect();
        let floats = match screening {
            Screening::Float => Some(Floats::new(shared.unit(), &y)),
            Screening::Exact => None,
        };
        Design {
            xty: (0..shared.columns.len()).map(|_| OnceLock::new()).collect(),
            floats,
            shared,
            y,
            bytes: series.iter().map(|(_, b)| *b).collect(),
            eliminated: RefCell::default(),
        }
    }
}

impl Design {
    /// `XᵀX[r][c]`: the dot product of candidates `r` and `c`.
    fn gram(&self, r: usize, c: usize) -> &BigInt {
        self.shared.gram(r, c)
    }

    /// `Xᵀy[r]`: the dot product of candidate `r` and the measured bytes.
    fn xty(&self, r: usize) -> &BigInt {
        self.xty[r].get_or_init(|| {
            (self.shared.small[r].as_ref())
                .and_then(|c| small_dot(c, &self.bytes))
                .map_or_else(|| dot(&self.shared.columns[r], &self.y), BigInt::from)
        })
    }

    /// The reduced normal equations of the candidates `order`, with the order of their
    /// columns (the same candidates, perhaps reordered); `None` when singular. Bordered
    /// ([`border`]) from those of the longest prefix of `order` already eliminated, each
    /// longer prefix kept: the search scores a model's extensions, each `order` its
    /// model's columns and one more.
    fn eliminated(&self, order: &[usize]) -> Option<Grown> {
        let mut cache = self.eliminated.borrow_mut();
        let key = |prefix: &[usize]| {
            let mut s = prefix.to_vec();
            s.sort_unstable();
            s
        };
        let (mut at, mut state) = (0..=order.len())
            .rev()
            .find_map(|j| Some((j, cache.subsets.get(&key(&order[..j]))?.clone())))
            .unwrap_or_else(|| (0, Some(Rc::new((Vec::new(), Eliminated::empty())))));
        while at < order.len() {
            let current = state?;
            let (columns, e) = &*current;
            let extra = order[at];
            let g: Vec<BigInt> = columns
                .iter()
                .map(|&c| self.gram(c, extra).clone())
                .collect();
            let next = e
                .border(&g, self.gram(extra, extra), self.xty(extra))
                .map(|e| {
                    let mut columns = columns.clone();
                    columns.push(extra);
                    Rc::new((columns, e))
                });
            at += 1;
            let weight = next.as_ref().map_or(1, |n| n.1.weight());
            if cache.weight + weight > ELIMINATED_WEIGHT {
                *cache = EliminatedCache::default();
            }
            cache.weight += weight;
            cache.subsets.insert(key(&order[..at]), next.clone());
            state = next;
        }
        state
    }
}

impl screen::Exact for Design {
    type Score = Scored;

    fn floats(&self) -> Option<&Floats> {
        self.floats.as_ref()
    }

    fn candidates(&self) -> usize {
        self.shared.columns.len()
    }

    fn score(&self, subset: &[usize]) -> Option<Scored> {
        score(self, subset)
    }

    fn value(score: &Scored, metric: Metric) -> &BigRational {
        match metric {
            Metric::Relative => &score.worst,
            Metric::Bytes => &score.worst_bytes,
        }
    }

    fn before(a: &Scored, b: &Scored, metric: Metric) -> bool {
        match metric {
            Metric::Relative => a.beats(b),
            Metric::Bytes => better(a, b),
        }
    }
}

/// Whether `model` predicts every held-out point exactly.
fn is_exact(design: &Design, model: &ScoredModel) -> bool {
    model.may_be_zero() && model.exact(design).is_some_and(|s| s.worst.is_zero())
}

/// A scored model: a subset of the candidates and its least-squares coefficients.
#[derive(Clone)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct Scored {
    worst: BigRational,
    /// The worst leave-one-out miss in bytes (not divided by the point's value).
    worst_bytes: BigRational,
    /// The worst miss of the fit itself at a point, in bytes.
    residual: BigRational,
    degree: u32,
    subset: Vec<usize>,
    coefficients: Vec<BigRational>,
    /// Whether its misses step with the counting axes alone
    /// ([`steps_with_counting_axes`]), when the search asked already.
    steps: Option<bool>,
}

impl Scored {
    /// What models are ranked by (lowest first): the worst error, then the number of
    /// terms, then the total degree, then the subset itself.
    fn key(&self) -> (&BigRational, usize, u32, &[usize]) {
        (&self.worst, self.subset.len(), self.degree, &self.subset)
    }

    /// Whether this model ranks before `other`.
    fn beats(&self, other: &Scored) -> bool {
        self.key() < other.key()
    }
}

fn dot(a: &[BigInt], b: &[BigInt]) -> BigInt {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// [`dot`] in machine words, `None` when it overflows 128 bits.
fn small_dot(a: &[u64], b: &[u64]) -> Option<u128> {
    let mut sum = 0u128;
    for i in 0..a.len().min(b.len()) {
        sum = sum.checked_add(u128::from(a[i]) * u128::from(b[i]))?;
    }
    Some(sum)
}

/// The normal equations of `k` columns, augmented for [`gauss_jordan`]: row `r` holds
/// `XᵀX[r][..]`, then row `r` of the identity (which becomes the inverse), then
/// `Xᵀy[r]`.
fn normal_equations(
    k: usize,
    gram: impl Fn(usize, usize) -> BigInt,
    xty: impl Fn(usize) -> BigInt,
) -> Vec<Vec<BigInt>> {
    (0..k)
        .map(|r| {
            let mut row: Vec<BigInt> = (0..k).map(|c| gram(r, c)).collect();
            row.extend((0..k).map(|c| BigInt::from(u8::from(c == r))));
            row.push(xty(r));
            row
        })
        .collect()
}

/// Fraction-free (Bareiss) Gauss–Jordan elimination of the `k` first columns of `m`
/// (a symmetric positive semi-definite block, so no pivoting: a zero pivot means a
/// singular block). Returns the last pivot `D`; the block becomes `D·I` and every
/// other column `D·` its solution. `None` when singular.
fn gauss_jordan(m: &mut [Vec<BigInt>], k: usize) -> Option<BigInt> {
    let mut previous = BigInt::one();
    for p in 0..k {
        if m[p][p].is_zero() {
            return None;
        }
        let pivot_row = m[p].clone();
        let pivot = &pivot_row[p];
        for (r, row) in m.iter_mut().enumerate() {
            if r == p {
                continue;
            }
            let factor = std::mem::take(&mut row[p]);
            // Most entries off the pivot's row and column are 0 on both sides (the
            // eliminated columns, the identity's columns not yet reached): they stay 0,
            // and a product with a 0 is not computed.
            for (c, (x, q)) in row.iter_mut().zip(&pivot_row).enumerate() {
                let keep = !x.is_zero();
                let subtract = !(factor.is_zero() || q.is_zero());
                *x = match (keep, subtract) {
                    _ if c == p => continue,
                    (false, false) => continue,
                    (true, false) => pivot * &*x / &previous,
                    (false, true) => -(&factor * q) / &previous,
                    (true, true) => (pivot * &*x - &factor * q) / &previous,
                };
            }
        }
        previous = pivot.clone();
    }
    Some(previous)
}

/// The reduced normal equations of `k` columns after [`gauss_jordan`] (`m` was
/// `[XᵀX | I | Xᵀy]`), `None` when singular.
fn eliminated_from_scratch(mut m: Vec<Vec<BigInt>>, k: usize) -> Option<Eliminated> {
    let det = gauss_jordan(&mut m, k)?;
    Some(Eliminated {
        det,
        adjugate: m.iter().map(|row| row[k..2 * k].to_vec()).collect(),
        solution: m
            .into_iter()
            .map(|mut row| row.swap_remove(2 * k))
            .collect(),
    })
}

/// A point's value in a column: a machine word where every value of the column fits
/// one, so that a product with it is a word's multiply-add, not a product of two big
/// integers.
#[derive(Clone, Copy)]
enum ColumnValue<'a> {
    Small(u64),
    Big(&'a BigInt),
}

impl ColumnValue<'_> {
    fn times(self, b: &BigInt) -> BigInt {
        match self {
            ColumnValue::Small(v) => b * v,
            ColumnValue::Big(v) => v * b,
        }
    }

    fn is_zero(self) -> bool {
        match self {
            ColumnValue::Small(v) => v == 0,
            ColumnValue::Big(v) => v.is_zero(),
        }
    }
}

/// `column` in machine words, when every value fits one.
fn small(column: &[BigInt]) -> Option<Vec<u64>> {
    column.iter().map(ToPrimitive::to_u64).collect()
}

/// Point `i`'s values in `columns` (`small` their machine-word copies).
fn entries<'a>(
    columns: &[&'a Vec<BigInt>],
    small: &[Option<&Vec<u64>>],
    i: usize,
) -> Vec<ColumnValue<'a>> {
    (columns.iter().zip(small))
        .map(|(c, s)| match s {
            Some(s) => ColumnValue::Small(s[i]),
            None => ColumnValue::Big(&c[i]),
        })
        .collect()
}

/// The fitted value and leverage, both scaled by the determinant, of the point whose
/// values are `x`, from the reduced normal equations `e`: what a held-out refit of that
/// point is computed from.
fn fitted_and_leverage(x: &[ColumnValue], e: &Eliminated) -> (BigInt, BigInt) {
    (fitted(x, e), leverage(x, e))
}

/// The fitted value, scaled by the determinant (see [`fitted_and_leverage`]).
fn fitted(x: &[ColumnValue], e: &Eliminated) -> BigInt {
    x.iter().zip(&e.solution).map(|(v, b)| v.times(b)).sum()
}

/// The leverage, scaled by the determinant (see [`fitted_and_leverage`]).
///
/// `xᵀ·adj·x` over the point's nonzero entries `x` (a counting axis's offsets are 0 at
/// most points), each product off the diagonal taken once and doubled: `adj` is
/// symmetric.
fn leverage(x: &[ColumnValue], e: &Eliminated) -> BigInt {
    let x: Vec<(usize, ColumnValue)> = (x.iter().copied().enumerate())
        .filter(|(_, v)| !v.is_zero())
        .collect();
    let mut sum = BigInt::zero();
    for (at, &(j, xj)) in x.iter().enumerate() {
        let row = &e.adjugate[j];
        let off: BigInt = x[at + 1..].iter().map(|&(l, xl)| xl.times(&row[l])).sum();
        sum += xj.times(&(xj.times(&row[j]) + (off << 1)));
    }
    sum
}

/// Scores the least-squares model of the candidates `order` (in any order; the
/// search's models list their columns in the order they were added, which
/// [`Design::eliminated`] grows them in): `None` when its normal equations are singular
/// or a point has leverage 1 (its leave-one-out refit is undetermined).
fn score(design: &Design, order: &[usize]) -> Option<Scored> {
    let state = design.eliminated(order)?;
    let (columns, e) = &*state;
    let mut subset = columns.clone();
    subset.sort_unstable();
    let from: Vec<usize> = (subset.iter())
        .map(|s| {
            columns
                .iter()
                .position(|c| c == s)
                .expect("the same candidates")
        })
        .collect();
    scored(design, &subset, &e.permuted(&from))
}

/// [`score`] by elimination from scratch, as every score was computed before the
/// equations were bordered: what bordering must agree with.
#[cfg(test)]
fn score_from_scratch(design: &Design, subset: &[usize]) -> Option<Scored> {
    let k = subset.len();
    let m = normal_equations(
        k,
        |r, c| design.gram(subset[r], subset[c]).clone(),
        |r| design.xty(subset[r]).clone(),
    );
    scored(design, subset, &eliminated_from_scratch(m, k)?)
}

/// Scores the least-squares model of `subset` (sorted) from its reduced normal
/// equations `e`: `None` when a point has leverage 1.
fn scored(design: &Design, subset: &[usize], e: &Eliminated) -> Option<Scored> {
    let d = &e.det;
    let cols: Vec<&Vec<BigInt>> = subset.iter().map(|&s| &design.shared.columns[s]).collect();
    let small: Vec<Option<&Vec<u64>>> = (subset.iter())
        .map(|&s| design.shared.small[s].as_ref())
        .collect();
    // The worst error as an unreduced fraction: compared by cross-multiplication, reduced
    // once at the end (a gcd per point costs more than the rest of the score).
    let (mut worst_num, mut worst_den) = (BigInt::zero(), BigInt::one());
    let (mut bytes_num, mut bytes_den) = (BigInt::zero(), BigInt::one());
    // Every point's in-sample miss is exact and cheap; its leverage (a quadratic form in
    // big integers) only where floating point cannot rule the point out as the worst.
    let misses: Vec<BigInt> = (design.y.iter().enumerate())
        .map(|(i, y)| (d * y - fitted(&entries(&cols, &small, i), e)).abs())
        .collect();
    let residual = misses.iter().max().cloned().unwrap_or_default();
    let needed = {
        let d = d.to_f64().unwrap_or(f64::INFINITY).abs();
        let float = |b: &BigInt| b.to_f64().unwrap_or(f64::INFINITY) / d;
        let misses: Vec<f64> = misses.iter().map(float).collect();
        let scales: Vec<f64> = (design.y.iter())
            .map(|y| y.to_f64().unwrap_or(f64::INFINITY).max(1.0))
            .collect();
        screen::worst_candidates(&misses, &scales, screen::leverages(design, subset).as_ref())
    };
    for ((i, y), miss) in design.y.iter().enumerate().zip(misses) {
        if !needed[i] {
            continue;
        }
        let denominator = d - leverage(&entries(&cols, &small, i), e);
        if denominator.is_zero() {
            return None;
        }
        let scale = y.clone().max(BigInt::one());
        let denominator = denominator.abs();
        if &miss * &bytes_den > &bytes_num * &denominator {
            (bytes_num, bytes_den) = (miss.clone(), denominator.clone());
        }
        let den = denominator * scale;
        if &miss * &worst_den > &worst_num * &den {
            (worst_num, worst_den) = (miss.clone(), den);
        }
    }
    Some(Scored {
        worst: BigRational::new(worst_num, worst_den),
        worst_bytes: BigRational::new(bytes_num, bytes_den),
        residual: BigRational::new(residual, d.abs()),
        degree: subset.iter().map(|&s| design.shared.degrees[s]).sum(),
        subset: subset.to_vec(),
        coefficients: (e.solution.iter())
            .map(|c| BigRational::new(c.clone(), d.clone()))
            .collect(),
        steps: None,
    })
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
fn exact(design: &Design, max_terms: usize) -> Option<Scored> {
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

/// The best model of at most `max_terms` terms: exhaustive while the subsets stay
/// within [`EXHAUSTIVE_BUDGET`] (every single term at least), then greedy forward
/// selection until [`GREEDY_PATIENCE`] sizes in a row bring no better model. Subsets are
/// screened in floating point and scored exactly where that cannot rank them
/// ([`screen`]).
fn search(design: &Design, max_terms: usize) -> Scored {
    let n = design.shared.columns.len();
    let metric = Metric::Relative;
    let (mut best, mut frontier): (Option<ScoredModel>, Option<ScoredModel>) = (None, None);
    let mut spent = 0u64;
    let mut size = 0;
    while size < max_terms
        && (size == 0 || spent.saturating_add(choose(n, size + 1)) <= EXHAUSTIVE_BUDGET)
    {
        size += 1;
        spent += choose(n, size);
        frontier = screen::select(design, metric, screen::all_subsets(design, size));
        keep_first(design, &mut best, frontier.clone());
        if best.as_ref().is_some_and(|b| is_exact(design, b)) {
            break;
        }
    }
    let mut basis = frontier.as_ref().map(|f| Basis::of(design, &f.subset));
    let mut stale = 0;
    while size < max_terms
        && stale < GREEDY_PATIENCE
        && best.as_ref().is_some_and(|b| !is_exact(design, b))
    {
        size += 1;
        let Some(current) = basis.take() else {
            break;
        };
        frontier = screen::select(design, metric, current.extensions(design));
        let improves = |f: &ScoredModel| {
            best.as_ref()
                .is_none_or(|b| screen::before(design, metric, f, b))
        };
        stale = if frontier.as_ref().is_some_and(improves) {
            0
        } else {
            stale + 1
        };
        basis = frontier
            .as_ref()
            .map(|f| grown(design, &current, &f.subset));
        keep_first(design, &mut best, frontier.clone());
    }
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

/// Keeps `candidate` when it ranks before `best` by the whole key ([`Scored::key`]).
fn keep_first(design: &Design, best: &mut Option<ScoredModel>, candidate: Option<ScoredModel>) {
    if let Some(c) = candidate
        && best
            .as_ref()
            .is_none_or(|b| screen::before(design, Metric::Relative, &c, b))
    {
        *best = Some(c);
    }
}

// What scales and what steps: the model of a grid with a counting axis (see the
// module's documentation, "Bookkeeping is not a polynomial").

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

/// How many values of a counting axis let it enter a term squared: with three, a
/// `layers²` term passes through whatever steps between them (a hash table that
/// doubles) and multiplies it into the far prediction (+612% at 32 layers, seen on a
/// GQA decoder measured at 1-3 layers); a fourth value checks the form.
pub const COUNT_AXIS_SQUARED_FROM: usize = 4;

/// The candidates' positions with every counting axis measured at fewer than
/// [`COUNT_AXIS_SQUARED_FROM`] values at degree ≤ 1 (everything a block holds is the
/// same for every block: memory is linear in the count), when that leaves some out;
/// `None` otherwise.
fn prior_candidates(grid: &Grid, candidates: &[Candidate]) -> Option<Vec<usize>> {
    let capped: Vec<usize> = (0..grid.axes.len())
        .filter(|&a| is_count_axis(&grid.axes[a].name))
        .filter(|&a| grid.axes[a].values.len() < COUNT_AXIS_SQUARED_FROM)
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
fn prior_model(
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
fn linear_model(
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

/// Ranks models of one size by their worst held-out miss in bytes, then their degree,
/// then the subset.
fn better(a: &Scored, b: &Scored) -> bool {
    (&a.worst_bytes, a.degree, &a.subset) < (&b.worst_bytes, b.degree, &b.subset)
}

/// The best model of each size (by worst held-out miss in bytes): exhaustive while the
/// subsets stay within [`EXHAUSTIVE_BUDGET`], then greedy forward selection from the
/// best of the last size, until [`GREEDY_PATIENCE`] sizes in a row bring no better
/// model or `max_terms` is reached. Screened as in [`search`].
fn best_by_size(design: &Design, max_terms: usize) -> Vec<ScoredModel> {
    let n = design.shared.columns.len();
    let metric = Metric::Bytes;
    let mut sizes: Vec<ScoredModel> = Vec::new();
    let mut spent = 0u64;
    let mut size = 0;
    while size < max_terms
        && (size == 0 || spent.saturating_add(choose(n, size + 1)) <= EXHAUSTIVE_BUDGET)
    {
        size += 1;
        spent += choose(n, size);
        sizes.extend(screen::select(
            design,
            metric,
            screen::all_subsets(design, size),
        ));
    }
    let mut basis = sizes
        .last()
        .filter(|s| s.subset.len() == size)
        .map(|s| Basis::of(design, &s.subset));
    let mut stale = 0;
    while size < max_terms && stale < GREEDY_PATIENCE {
        size += 1;
        let Some(current) = basis.take() else {
            break;
        };
        let best = screen::select(design, metric, current.extensions(design));
        let record = |b: &ScoredModel| sizes.iter().all(|s| screen::less(design, metric, b, s));
        stale = if best.as_ref().is_some_and(record) {
            0
        } else {
            stale + 1
        };
        basis = best.as_ref().map(|b| grown(design, &current, &b.subset));
        sizes.extend(best);
    }
    sizes
}

/// The simplest model whose worst held-out miss in bytes is within the residue of the
/// best (at most the best's worst held-out miss plus its worst miss in the fit itself);
/// when its misses are no bookkeeping (`steps`: they vary with more than the counting
/// axes), the model of one term more, if it is within the residue of the best too and
/// its misses are bookkeeping: a term that leaves a step of the counting axes alone is
/// a scaling term the step hid, where more terms would chase the step.
fn parsimonious(design: &Design, max_terms: usize, steps: impl Fn(&Scored) -> bool) -> Scored {
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

/// Each point's signed leave-one-out miss in bytes under the least-squares fit of
/// `columns` to `y`; `None` when the normal equations are singular or a point has
/// leverage 1 (its held-out refit is undetermined).
fn held_out_misses(columns: Vec<Vec<BigInt>>, y: &[BigInt]) -> Option<Vec<BigRational>> {
    let k = columns.len();
    let m = normal_equations(
        k,
        |r, c| dot(&columns[r], &columns[c]),
        |r| dot(&columns[r], y),
    );
    let e = eliminated_from_scratch(m, k)?;
    let d = &e.det;
    let small: Vec<Option<Vec<u64>>> = columns.iter().map(|c| small(c)).collect();
    let small: Vec<Option<&Vec<u64>>> = small.iter().map(Option::as_ref).collect();
    let columns: Vec<&Vec<BigInt>> = columns.iter().collect();
    (0..y.len())
        .map(|i| {
            let (fitted, leverage) = fitted_and_leverage(&entries(&columns, &small, i), &e);
            let denominator = d - leverage;
            (!denominator.is_zero()).then(|| BigRational::new(d * &y[i] - fitted, denominator))
        })
        .collect()
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
    let counting: Vec<usize> = (0..grid.axes.len())
        .filter(|&a| is_count_axis(&grid.axes[a].name))
        .collect();
    // The grid's own points: a point off it (a target's axial point) is alone at its
    // values, and its bookkeeping no offset of the grid's can tell.
    let on_grid: Vec<usize> = (0..series.len())
        .filter(|&i| (grid.axes.iter()).all(|a| a.values.contains(&series[i].0[&a.name])))
        .collect();
    let series: Vec<&(Point, u64)> = on_grid.iter().map(|&i| &series[i]).collect();
    let group =
        |p: &Point| -> Vec<u64> { counting.iter().map(|&a| p[&grid.axes[a].name]).collect() };
    let groups: std::collections::BTreeSet<Vec<u64>> =
        series.iter().map(|(p, _)| group(p)).collect();
    let mut columns: Vec<Vec<BigInt>> = subset
        .iter()
        .filter(|&&s| {
            let e = &candidates[s].exponents;
            (0..e.len()).any(|a| e[a] > 0 && !counting.contains(&a))
        })
        .map(|&s| {
            on_grid
                .iter()
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
