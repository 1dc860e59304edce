//! The search's screening in floating point: every candidate subset's leave-one-out
//! errors are estimated in `f64` with a bound on their rounding, and only the subsets
//! whose bounds overlap the best's are scored exactly, so the exact search's choice is
//! kept at a small part of its cost.
//!
//! A subset's least-squares fit is taken by modified Gram–Schmidt on the columns,
//! each scaled to unit length: a [`Basis`] holds the residual of the measured bytes and
//! each point's leverage for a subset, and every other candidate's column with the
//! subset's span taken out, so that adding a candidate to the subset costs one pass over
//! the points. The estimate of a point's held-out miss, `residual / (1 − leverage)`,
//! comes with an interval that holds the exact value: its rounding grows with the
//! points, the terms, and how nearly the subset's columns depend on each other (the
//! growth of the orthogonalization, which stands for the condition number). A subset
//! whose columns nearly depend on each other, or with a point of leverage near 1, gets
//! no bound and is scored exactly whenever it is considered.

use num_bigint::BigInt;
use num_rational::BigRational;
use std::cell::OnceCell;
use std::sync::{Arc, OnceLock};

/// What screening needs of the exact side: the floating-point copy of a design, and the
/// exact score of a subset with its ranking.
pub(super) trait Exact {
    /// A subset's exact score.
    type Score: Clone;
    /// The floating-point copy; `None` scores every subset exactly.
    fn floats(&self) -> Option<&Floats>;
    /// How many candidates there are.
    fn candidates(&self) -> usize;
    /// The exact score of the subset of the candidates `order`, listed in the order
    /// they were added to it (what the exact side may reuse), `None` when it has none.
    fn score(&self, order: &[usize]) -> Option<Self::Score>;
    /// The exact figure of merit.
    fn value(score: &Self::Score, metric: Metric) -> &BigRational;
    /// Whether `a` ranks before `b` by the whole key of `metric`.
    fn before(a: &Self::Score, b: &Self::Score, metric: Metric) -> bool;
}

/// The largest growth of the orthogonalization for which an estimate is bounded.
const GROWTH_LIMIT: f64 = 1e6;

/// How much the rounding bound is widened beyond `ε · points · terms · growth`.
const SLACK: f64 = 64.0;

/// An interval that holds an exact figure of merit.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    lo: f64,
    hi: f64,
}

/// No bound: the exact score decides.
const UNBOUNDED: Bounds = Bounds {
    lo: 0.0,
    hi: f64::INFINITY,
};

/// Which figure of merit ranks the models.
#[derive(Clone, Copy, Debug)]
pub(super) enum Metric {
    /// The worst relative leave-one-out error (then fewer terms, lower degree, the
    /// earlier subset).
    Relative,
    /// The worst leave-one-out miss in bytes (then lower degree, the earlier subset).
    Bytes,
}

/// The candidates' columns in `f64`, each scaled to unit length, and their
/// orthogonalization once needed: what every figure measured at the same points
/// shares.
pub(super) struct UnitColumns {
    columns: Vec<Vec<f64>>,
    orthogonal: OnceLock<Option<Orthogonal>>,
}

/// Modified Gram–Schmidt on every column in order ([`whole`]).
struct Orthogonal {
    /// The orthonormal directions.
    q: Vec<Vec<f64>>,
    /// Row `j`: each later column's projection on the `j`th direction, and the
    /// direction's length before scaling on the diagonal.
    triangle: Vec<Vec<f64>>,
    /// The largest ratio of a column's length to what the columns before left of it.
    growth: f64,
}

impl UnitColumns {
    /// The floating-point copy of `columns`.
    pub(super) fn new(columns: &[Vec<BigInt>]) -> UnitColumns {
        let columns = columns
            .iter()
            .map(|c| {
                let c: Vec<f64> = c.iter().map(float).collect();
                let norm = norm(&c);
                c.iter()
                    .map(|x| if norm > 0.0 { x / norm } else { 0.0 })
                    .collect()
            })
            .collect();
        UnitColumns {
            columns,
            orthogonal: OnceLock::new(),
        }
    }

    /// The orthogonalization of every column, `None` when they nearly depend on each
    /// other.
    fn orthogonal(&self) -> Option<&Orthogonal> {
        self.orthogonal
            .get_or_init(|| orthogonalize(&self.columns))
            .as_ref()
    }
}

fn float(v: &BigInt) -> f64 {
    num_traits::ToPrimitive::to_f64(v).unwrap_or(f64::MAX)
}

/// The measured bytes in `f64`, and the candidates' columns ([`UnitColumns`]).
pub(super) struct Floats {
    unit: Arc<UnitColumns>,
    y: Vec<f64>,
    y_norm: f64,
}

impl Floats {
    /// The floating-point copy of the measured bytes `y`, beside `unit`.
    pub(super) fn new(unit: Arc<UnitColumns>, y: &[BigInt]) -> Floats {
        let y: Vec<f64> = y.iter().map(float).collect();
        Floats {
            y_norm: norm(&y),
            unit,
            y,
        }
    }
}

// The loops below are indexed rather than iterator chains: the fit runs unoptimized in
// a test binary, where every adapter of a chain is a function call per element. Each
// sum starts from −0.0 and adds in order, as `Iterator::sum` does.

fn norm(v: &[f64]) -> f64 {
    dot(v, v).sqrt()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut sum = -0.0;
    for i in 0..n {
        sum += a[i] * b[i];
    }
    sum
}

/// A model under consideration: a subset, its bounds, and its exact score once needed.
#[derive(Clone)]
pub(super) struct Model<S> {
    /// Positions of the candidates, in increasing order.
    pub(super) subset: Vec<usize>,
    /// The same, in the order they were added (the subset it was grown from first).
    order: Vec<usize>,
    relative: Bounds,
    bytes: Bounds,
    exact: OnceCell<Option<S>>,
}

impl<S: Clone> Model<S> {
    fn unbounded(subset: Vec<usize>, order: Vec<usize>) -> Model<S> {
        Model {
            subset,
            order,
            relative: UNBOUNDED,
            bytes: UNBOUNDED,
            exact: OnceCell::new(),
        }
    }

    fn bounds(&self, metric: Metric) -> Bounds {
        match metric {
            Metric::Relative => self.relative,
            Metric::Bytes => self.bytes,
        }
    }

    /// Whether the bounds make the exact score certain to exist.
    fn bounded(&self) -> bool {
        self.relative.hi.is_finite() && self.bytes.hi.is_finite()
    }

    /// The exact score (`None` when singular or a point has leverage 1).
    pub(super) fn exact<D: Exact<Score = S>>(&self, design: &D) -> Option<&S> {
        self.exact
            .get_or_init(|| design.score(&self.order))
            .as_ref()
    }

    /// The exact score of a model that has one.
    pub(super) fn scored<D: Exact<Score = S>>(&self, design: &D) -> S {
        self.exact(design)
            .expect("a selected model has an exact score")
            .clone()
    }

    /// Whether the figure of merit may be 0 (floating point cannot tell it from 0).
    pub(super) fn may_be_zero(&self) -> bool {
        self.relative.lo <= 0.0
    }
}

/// `Some(true)` when interval `x` lies wholly below `y`, `Some(false)` wholly above:
/// the f64 bounds alone decide; `None` when they overlap and exact scores must.
fn separated(x: Bounds, y: Bounds) -> Option<bool> {
    if x.hi < y.lo {
        Some(true)
    } else if x.lo > y.hi {
        Some(false)
    } else {
        None
    }
}

/// Whether the bounds alone put `m`'s figure of merit above `limit` (an f64 copy of an
/// exact value, hence the margin): no exact score is needed to rule it out.
pub(super) fn certainly_above<S: Clone>(m: &Model<S>, metric: Metric, limit: f64) -> bool {
    m.bounds(metric).lo > limit * (1.0 + 1e-9) + f64::MIN_POSITIVE
}

/// Whether `a`'s figure of merit is below `b`'s, both models having exact scores.
pub(super) fn less<D: Exact>(
    design: &D,
    metric: Metric,
    a: &Model<D::Score>,
    b: &Model<D::Score>,
) -> bool {
    if let Some(order) = separated(a.bounds(metric), b.bounds(metric)) {
        return order;
    }
    match (a.exact(design), b.exact(design)) {
        (Some(sa), Some(sb)) => D::value(sa, metric) < D::value(sb, metric),
        _ => false,
    }
}

/// Whether `a` ranks before `b` by the whole key of `metric`.
pub(super) fn before<D: Exact>(
    design: &D,
    metric: Metric,
    a: &Model<D::Score>,
    b: &Model<D::Score>,
) -> bool {
    if let Some(order) = separated(a.bounds(metric), b.bounds(metric)) {
        return order;
    }
    match (a.exact(design), b.exact(design)) {
        (Some(sa), Some(sb)) => D::before(sa, sb, metric),
        (Some(_), None) => true,
        _ => false,
    }
}

/// The model that ranks first among `models` by `metric` (which all have the same
/// number of terms), `None` when none has an exact score. Only the models whose bounds
/// reach below every other's upper bound are scored exactly, and then only when there
/// are several of them or the one has no bound.
pub(super) fn select<D: Exact>(
    design: &D,
    metric: Metric,
    models: Vec<Model<D::Score>>,
) -> Option<Model<D::Score>> {
    let ceiling = models
        .iter()
        .map(|m| m.bounds(metric).hi)
        .fold(f64::INFINITY, f64::min);
    let contenders: Vec<Model<D::Score>> = models
        .into_iter()
        .filter(|m| m.bounds(metric).lo <= ceiling)
        .collect();
    if let [one] = contenders.as_slice()
        && one.bounded()
    {
        return contenders.into_iter().next();
    }
    let mut best: Option<Model<D::Score>> = None;
    for m in contenders {
        if m.exact(design).is_some() && best.as_ref().is_none_or(|b| before(design, metric, &m, b))
        {
            best = Some(m);
        }
    }
    best
}

/// A subset's least-squares fit in floating point, and every other candidate's column
/// with the subset's span taken out.
#[derive(Clone)]
pub(super) struct Basis {
    /// The subset, in the order its columns were added.
    subset: Vec<usize>,
    residual: Vec<f64>,
    leverage: Vec<f64>,
    /// Each candidate's column less its projection on the subset's span (empty for the
    /// subset's own).
    rest: Vec<Vec<f64>>,
    /// The largest ratio of a column's length to what the span left of it.
    growth: f64,
}

impl Basis {
    /// The empty subset.
    pub(super) fn empty(design: &impl Exact) -> Basis {
        match design.floats() {
            Some(f) => Basis {
                subset: Vec::new(),
                residual: f.y.clone(),
                leverage: vec![0.0; f.y.len()],
                rest: f.unit.columns.clone(),
                growth: 1.0,
            },
            None => Basis {
                subset: Vec::new(),
                residual: Vec::new(),
                leverage: Vec::new(),
                rest: Vec::new(),
                growth: 1.0,
            },
        }
    }

    /// The basis of `subset`, its columns added in order.
    pub(super) fn of(design: &impl Exact, subset: &[usize]) -> Basis {
        subset.iter().fold(Basis::empty(design), |b, &e| b.grow(e))
    }

    /// The sorted subset.
    pub(super) fn sorted(&self) -> Vec<usize> {
        let mut s = self.subset.clone();
        s.sort_unstable();
        s
    }

    /// This subset with candidate `extra` added.
    pub(super) fn grow(&self, extra: usize) -> Basis {
        let mut next = self.clone();
        next.subset.push(extra);
        if self.rest.is_empty() {
            return next;
        }
        let q = std::mem::take(&mut next.rest[extra]);
        let length = norm(&q);
        next.growth = self.growth.max(1.0 / length);
        let q: Vec<f64> = q.iter().map(|x| x / length).collect();
        project_out(&mut next.residual, &q);
        for (h, x) in next.leverage.iter_mut().zip(&q) {
            *h += x * x;
        }
        for column in next.rest.iter_mut().filter(|c| !c.is_empty()) {
            project_out(column, &q);
        }
        next
    }

    /// The model of this subset with candidate `extra` added, with its bounds.
    pub(super) fn estimate<D: Exact>(&self, design: &D, extra: usize) -> Model<D::Score> {
        let mut subset = self.sorted();
        subset.push(extra);
        subset.sort_unstable();
        let mut order = self.subset.clone();
        order.push(extra);
        let Some(floats) = design.floats() else {
            return Model::unbounded(subset, order);
        };
        let p = &self.rest[extra];
        let length = norm(p);
        let growth = self.growth.max(1.0 / length);
        if !(length > 0.0 && growth <= GROWTH_LIMIT) {
            return Model::unbounded(subset, order);
        }
        let spread = rounding_spread(floats.y.len(), subset.len(), growth);
        let (miss_error, leverage_error) = (spread * floats.y_norm, spread);
        let along = dot(p, &self.residual) / (length * length);
        let mut relative = Bounds { lo: 0.0, hi: 0.0 };
        let mut bytes = Bounds { lo: 0.0, hi: 0.0 };
        for (i, &pi) in p.iter().enumerate() {
            let miss = (self.residual[i] - along * pi).abs();
            let free = 1.0 - self.leverage[i] - pi * pi / (length * length);
            if free <= 2.0 * leverage_error {
                return Model::unbounded(subset, order);
            }
            let lo = (miss - miss_error).max(0.0) / (free + leverage_error) * (1.0 - 1e-12);
            let hi = (miss + miss_error) / (free - leverage_error) * (1.0 + 1e-12);
            let scale = floats.y[i].max(1.0);
            bytes.lo = bytes.lo.max(lo);
            bytes.hi = bytes.hi.max(hi);
            relative.lo = relative.lo.max(lo / scale);
            relative.hi = relative.hi.max(hi / scale);
        }
        Model {
            subset,
            order,
            relative,
            bytes,
            exact: OnceCell::new(),
        }
    }

    /// Every subset of this one plus one candidate after `from`.
    pub(super) fn extensions<D: Exact>(&self, design: &D) -> Vec<Model<D::Score>> {
        (0..design.candidates())
            .filter(|e| !self.subset.contains(e))
            .map(|e| self.estimate(design, e))
            .collect()
    }
}

/// Each point's leverage under the least-squares fit of `subset` in floating point, and
/// the bound on its rounding: what decides which points' held-out misses can be the
/// worst, so that only theirs are computed exactly. `None` when the columns nearly
/// depend on each other, or the design is exact only.
pub(super) fn leverages(design: &impl Exact, subset: &[usize]) -> Option<(Vec<f64>, f64)> {
    let floats = design.floats()?;
    let n = floats.y.len();
    let mut basis: Vec<Vec<f64>> = Vec::with_capacity(subset.len());
    let mut leverage = vec![0.0; n];
    let mut growth = 1.0f64;
    for &s in subset {
        let mut q = floats.unit.columns[s].clone();
        for b in &basis {
            project_out(&mut q, b);
        }
        let length = norm(&q);
        growth = growth.max(1.0 / length);
        if !(length > 0.0 && growth <= GROWTH_LIMIT) {
            return None;
        }
        q.iter_mut().for_each(|x| *x /= length);
        for (h, x) in leverage.iter_mut().zip(&q) {
            *h += x * x;
        }
        basis.push(q);
    }
    Some((leverage, rounding_spread(n, subset.len(), growth)))
}

/// The relative rounding bound of a floating-point least-squares fit of `terms`
/// orthogonalized columns over `points` points, whose orthogonalization divided by at
/// most `growth`: what a leverage may be off by, and (times the target's norm) a miss.
fn rounding_spread(points: usize, terms: usize, growth: f64) -> f64 {
    SLACK * f64::EPSILON * points as f64 * (terms as f64 + 1.0) * growth
}

/// Which points' held-out misses must be computed exactly for the worst of them to be
/// exact, by both metrics: `misses[i]` is point `i`'s in-sample miss (exact, scaled by
/// `d`), `scales[i]` what a relative miss divides by, `leverage` [`leverages`]'s
/// answer. A point is left out only when its interval lies wholly below another point's
/// lower bound, or its miss is 0 and its leverage certainly below 1 (it then misses by
/// 0 held out, and its held-out refit is determined).
pub(super) fn worst_candidates(
    misses: &[f64],
    scales: &[f64],
    leverage: Option<&(Vec<f64>, f64)>,
) -> Vec<bool> {
    let Some((h, error)) = leverage else {
        return vec![true; misses.len()];
    };
    // Per point: the bytes and relative intervals, or None where floating point cannot
    // bound them.
    let bounds: Vec<Option<(Bounds, Bounds)>> = misses
        .iter()
        .zip(h)
        .zip(scales)
        .map(|((&miss, &h), &scale)| {
            let free = 1.0 - h - 2.0 * error;
            if !(miss.is_finite() && free > 0.0) {
                return None;
            }
            let lo = miss / (1.0 - h + 2.0 * error) * (1.0 - 1e-9);
            let hi = miss / free * (1.0 + 1e-9);
            let bytes = Bounds { lo, hi };
            let relative = Bounds {
                lo: lo / scale,
                hi: hi / scale,
            };
            Some((bytes, relative))
        })
        .collect();
    let floor = |pick: fn(&(Bounds, Bounds)) -> Bounds| {
        bounds
            .iter()
            .flatten()
            .map(|b| pick(b).lo)
            .fold(0.0f64, f64::max)
    };
    let (bytes_floor, relative_floor) = (floor(|b| b.0), floor(|b| b.1));
    bounds
        .iter()
        .map(|b| match b {
            None => true,
            Some((bytes, relative)) => {
                (bytes.hi > 0.0 && bytes.hi >= bytes_floor)
                    || (relative.hi > 0.0 && relative.hi >= relative_floor)
            }
        })
        .collect()
}

/// What floating point tells of the least-squares fit of every candidate at once.
pub(super) enum Whole {
    /// It misses a point by more than its rounding: no model fits every point exactly.
    Misses,
    /// It passes within rounding of every point; these are the terms it cannot tell
    /// from 0 (what an exact fit's support can be, so that the exact solve need not take
    /// every candidate).
    Passes(Vec<usize>),
    /// The columns nearly depend on each other, or the design is exact only.
    Unsure,
}

/// Modified Gram–Schmidt on `columns` in order, the triangular factor taken from the
/// projections it computes; `None` when the columns nearly depend on each other.
fn orthogonalize(columns: &[Vec<f64>]) -> Option<Orthogonal> {
    let k = columns.len();
    let mut q = columns.to_vec();
    let mut triangle: Vec<Vec<f64>> = vec![vec![0.0; k]; k];
    let mut growth = 1.0f64;
    for j in 0..k {
        let (done, later) = q.split_at_mut(j + 1);
        let direction = &mut done[j];
        let length = norm(direction);
        growth = growth.max(1.0 / length);
        // `max` keeps `growth` when `1 / length` is NaN, and it only grows.
        if growth > GROWTH_LIMIT {
            return None;
        }
        direction.iter_mut().for_each(|x| *x /= length);
        triangle[j][j] = length;
        for (c, column) in later.iter_mut().enumerate() {
            triangle[j][j + 1 + c] = project_out(column, direction);
        }
    }
    Some(Orthogonal {
        q,
        triangle,
        growth,
    })
}

/// The least-squares fit of every candidate at once, in floating point: the measured
/// bytes projected on the candidates' orthogonalization, which every figure measured
/// at the same points shares.
pub(super) fn whole(design: &impl Exact) -> Whole {
    let Some(floats) = design.floats() else {
        return Whole::Unsure;
    };
    let Some(o) = floats.unit.orthogonal() else {
        // The columns nearly depend on each other: no bound on the residual.
        return Whole::Unsure;
    };
    let k = o.q.len();
    let mut residual = floats.y.clone();
    let along_y: Vec<f64> = (o.q.iter())
        .map(|q| project_out(&mut residual, q))
        .collect();
    let bound = rounding_spread(floats.y.len(), k, o.growth) * floats.y_norm;
    if residual.iter().any(|r| r.abs() > bound) {
        return Whole::Misses;
    }
    let mut x = vec![0.0; k];
    for j in (0..k).rev() {
        let known: f64 = (j + 1..k).map(|c| o.triangle[j][c] * x[c]).sum();
        x[j] = (along_y[j] - known) / o.triangle[j][j];
    }
    let floor = 1e-7 * floats.y_norm;
    Whole::Passes((0..k).filter(|&j| x[j].abs() > floor).collect())
}

/// Takes `q`'s direction (unit length) out of `v`; what `v` had along it.
fn project_out(v: &mut [f64], q: &[f64]) -> f64 {
    let along = dot(v, q);
    let n = v.len().min(q.len());
    let (v, q) = (&mut v[..n], &q[..n]);
    for i in 0..n {
        v[i] -= along * q[i];
    }
    along
}

/// Every subset of `size` candidates, in lexicographic order, with its bounds.
pub(super) fn all_subsets<D: Exact>(design: &D, size: usize) -> Vec<Model<D::Score>> {
    let mut out = Vec::new();
    walk(design, &Basis::empty(design), 0, size, &mut out);
    out
}

fn walk<D: Exact>(
    design: &D,
    basis: &Basis,
    from: usize,
    size: usize,
    out: &mut Vec<Model<D::Score>>,
) {
    let n = design.candidates();
    if basis.subset.len() + 1 == size {
        out.extend((from..n).map(|e| basis.estimate(design, e)));
        return;
    }
    for e in from..n {
        walk(design, &basis.grow(e), e + 1, size, out);
    }
}

#[cfg(test)]
mod tests {
    //! Screening must choose what scoring every subset exactly chooses.
    use super::super::design::Screening;
    use super::super::{FigureFits, Fit, Grid, Point, Prior};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn grid(axes: &[(&str, Vec<u64>)]) -> Grid {
        Grid::new(axes.iter().map(|(k, v)| (*k, v.clone()))).unwrap()
    }

    fn agree(grid: &Grid, f: impl Fn(&Point, usize) -> u64) {
        let series: Vec<(Point, u64)> = grid
            .points()
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let bytes = f(&p, i);
                (p, bytes)
            })
            .collect();
        let screened = Fit::with(grid, &series, Screening::Float, None, Prior::Blocks).unwrap();
        let exact = Fit::with(grid, &series, Screening::Exact, None, Prior::Blocks).unwrap();
        assert_eq!(screened, exact, "series {series:?}");
    }

    fn jitter(i: usize, amplitude: u64) -> u64 {
        (i as u64 + 1).wrapping_mul(2_654_435_761) % (2 * amplitude + 1)
    }

    #[test]
    fn a_maximum_with_jitter_is_chosen_as_exactly() {
        let g = grid(&[
            ("a", vec![1, 2]),
            ("b", vec![96, 128, 160]),
            ("c", vec![1, 2]),
            ("d", vec![16, 24, 32]),
        ]);
        agree(&g, |p, _| {
            let (a, b, c, d) = (p["a"], p["b"], p["c"], p["d"]);
            (12 * a * b * c * d).max(40 * a * b * b) + (a * 7919 * b * c * d) % 4096
        });
    }

    #[test]
    fn a_table_step_beside_tensors_is_chosen_as_exactly() {
        let g = grid(&[
            ("layers", vec![1, 2, 3]),
            ("seq", vec![8, 16, 24]),
            ("batch", vec![2, 4]),
        ]);
        agree(&g, |p, i| {
            let (l, s, b) = (p["layers"], p["seq"], p["batch"]);
            4000 * l * s * b
                + 48 * l * s * s * b
                + 8000 * s * b
                + 16000 * l
                + 60 * (350 * l).next_power_of_two()
                + jitter(i, 1000)
        });
    }

    /// Figures fitted together share their points' columns ([`super::super::design::Shared`]):
    /// each must be fitted as it is alone, whichever figure makes the shared parts.
    #[test]
    fn figures_fitted_together_are_fitted_as_alone() {
        let g = grid(&[
            ("layers", vec![1, 2, 3]),
            ("seq", vec![8, 16, 24]),
            ("batch", vec![1, 2]),
        ]);
        type Figure = fn(u64, u64, u64, usize) -> u64;
        let figures: [(&str, Figure); 5] = [
            ("constant", |_, _, _, _| 4096),
            ("exact", |l, s, b, _| 4000 * l * s * b + 1000 * l),
            ("bookkeeping", |l, s, b, i| {
                4000 * l * s * b + 60 * (350 * l).next_power_of_two() + jitter(i, 100)
            }),
            ("maximum", |l, s, b, i| {
                (12 * l * s * b).max(40 * s * s) + jitter(i, 2000)
            }),
            ("noise", |l, s, b, i| {
                1_000_000 + 10 * l * s * b + jitter(i, 50_000)
            }),
        ];
        let series: BTreeMap<String, Vec<(Point, u64)>> = figures
            .iter()
            .map(|(name, f)| {
                let points = (g.points().into_iter().enumerate())
                    .map(|(i, p)| {
                        let bytes = f(p["layers"], p["seq"], p["batch"], i);
                        (p, bytes)
                    })
                    .collect();
                (name.to_string(), points)
            })
            .collect();
        let together = FigureFits::fit(&g, &series).unwrap();
        for (name, points) in &series {
            assert_eq!(
                together.figures[name],
                Fit::new(&g, points).unwrap(),
                "{name}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_series_is_chosen_as_exactly(
            counting in any::<bool>(),
            coefficients in proptest::collection::vec(0u64..5000, 6),
            amplitude in 0u64..4000,
            step in 0u64..50_000,
        ) {
            let first = if counting { "layers" } else { "width" };
            let g = grid(&[(first, vec![1, 2, 3]), ("seq", vec![8, 16, 24]), ("batch", vec![1, 2])]);
            agree(&g, |p, i| {
                let (l, s, b) = (p[first], p["seq"], p["batch"]);
                let c = &coefficients;
                c[0] + c[1] * l + c[2] * s * b + c[3] * l * s * b + c[4] * s * s + c[5] * l * s
                    + if l > 2 { step } else { 0 }
                    + jitter(i, amplitude)
            });
        }
    }
}
