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
//! scores grow with `seq²`). Products of axes are allowed (`batch·seq·layers`). Points
//! off the grid may join a series (a target's axial points, [`crate::axial`]): they are
//! held out and predicted like the grid's, and check the form the grid's values allow;
//! the degrees stay the grid's.
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
//! The search for that model (exact where one model fits every point, exhaustive, then
//! greedy) and its tie-break are documented with it, in `axes/search.rs`.
//!
//! # Bookkeeping is not a polynomial
//!
//! Frameworks keep the autodiff graph and the gradients in hash tables that double as
//! the graph grows: a step of tens of kilobytes at some layer count, whatever the
//! tensor sizes. So on a grid that measures an axis that counts identical blocks
//! ([`COUNT_AXES`]) at three values or more, that axis enters linearly first and the
//! model is the simplest within the residue of the best; a fit's **residue**
//! ([`Fit::residue_bytes`]) bounds what steps instead of scaling, and is never
//! extrapolated. The details are in `axes/priors.rs`.
//!
//! # Flags
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
//!
//! # The files
//!
//! Each depends only on those above it:
//!
//! - `grid.rs`: the axes, their points, and what can be wrong with them;
//! - `formula.rs`: monomials, terms and formulas, and how a snapshot stores them;
//! - `border.rs` and `solve.rs`: exact least squares: the normal equations grown one
//!   column at a time, fraction-free elimination, fitted values and leverages;
//! - `screen.rs`: the floating-point screening of subsets;
//! - `design.rs`: the candidate monomials, a series' design, and the score of a subset;
//! - `search.rs`: choosing the terms;
//! - `priors.rs`: counting axes: what scales, what steps, and the residue;
//! - `fit.rs`: a figure's fit;
//! - `predict.rs`: predictions and their flags, and every figure of a sweep.

mod blocks;
mod border;
mod design;
mod fit;
mod formula;
mod grid;
mod predict;
mod priors;
mod screen;
mod search;
mod solve;

pub use blocks::Uncovered;
pub use fit::{COVERED_ROUNDS, Fit, Prior};
pub use formula::{Formula, Monomial, Term};
pub use grid::{AxesError, Axis, FLAG_PPM, Grid, MAX_DEGREE, MAX_POINTS, Point};
pub use predict::{FigureFits, FigurePrediction, Flag, Interpolation, PhaseMax, predict_max};
pub use priors::{COUNT_AXES, COUNT_AXIS_SQUARED_FROM, is_count_axis};
