//! What the search scores: the candidate monomials a series allows, their values at the
//! series' points ([`Columns`], shared by the figures measured at the same points), a
//! series' [`Design`], and the exact score of a subset of the candidates ([`Scored`]).

use super::border::Eliminated;
use super::formula::Monomial;
use super::grid::{AxesError, Grid, MAX_DEGREE, Point};
use super::screen::{self, Floats, Metric, UnitColumns};
use super::solve::{dot, entries, fitted, leverage, small, small_dot};
#[cfg(test)]
use super::solve::{eliminated_from_scratch, normal_equations};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

/// A model under consideration by the search.
pub(super) type ScoredModel = screen::Model<Scored>;

/// Whether subsets are screened in floating point before the exact scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Screening {
    /// Screened: only the subsets floating point cannot rank are scored exactly.
    Float,
    /// Every subset scored exactly (what screening must agree with).
    #[cfg_attr(not(test), allow(dead_code))]
    Exact,
}

/// A candidate monomial, with its exponents in the grid's axis order.
#[derive(Clone)]
pub(super) struct Candidate {
    pub(super) monomial: Monomial,
    pub(super) exponents: Vec<u8>,
}

/// Every monomial the grid allows: each axis up to `min(2, its values − 1)`, ordered
/// by degree, then by the exponents in the axes' order. Points of the series off the
/// grid (a target's axial points) check the form the grid's values allow; one more
/// value of an axis, at one point, cannot choose a degree.
pub(super) fn candidates(grid: &Grid) -> Vec<Candidate> {
    let caps: Vec<u8> = grid
        .axes()
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
                grid.axes()
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
pub(super) struct Columns {
    pub(super) columns: Vec<Vec<BigInt>>,
    /// Each column in machine words, when every value fits one (every column of a grid
    /// of small axis values does).
    pub(super) small: Vec<Option<Vec<u64>>>,
    degrees: Vec<u32>,
    /// `XᵀX`'s upper triangle, row `r` holding columns `r..`.
    gram: Vec<Vec<OnceLock<BigInt>>>,
    /// The floating-point copy, made when a screened fit first needs it.
    unit: OnceLock<Arc<UnitColumns>>,
}

impl Columns {
    pub(super) fn new(
        candidates: &[Candidate],
        series: &[(Point, u64)],
    ) -> Result<Columns, AxesError> {
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
pub(super) struct Shared {
    pub(super) candidates: Vec<Candidate>,
    all: OnceLock<Result<Arc<Columns>, AxesError>>,
    linear: OnceLock<Result<Arc<Columns>, AxesError>>,
}

impl Shared {
    /// For series measured at the same points, each checked against `grid`.
    pub(super) fn new(grid: &Grid) -> Shared {
        Shared {
            candidates: candidates(grid),
            all: OnceLock::new(),
            linear: OnceLock::new(),
        }
    }

    /// The columns of every candidate.
    pub(super) fn all(&self, series: &[(Point, u64)]) -> Result<Arc<Columns>, AxesError> {
        (self
            .all
            .get_or_init(|| Columns::new(&self.candidates, series).map(Arc::new)))
        .clone()
    }

    /// The columns of `linear`, the candidates a counting axis keeps linear
    /// (`linear_candidates`, in [`priors`](super::priors)).
    pub(super) fn linear(
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
pub(super) struct Design {
    pub(super) shared: Arc<Columns>,
    pub(super) y: Vec<BigInt>,
    /// The same, in machine words.
    bytes: Vec<u64>,
    xty: Vec<OnceLock<BigInt>>,
    /// The floating-point copy that screens subsets; `None` scores every one exactly.
    floats: Option<Floats>,
    /// The reduced normal equations of the subsets scored so far and of the subsets
    /// they were grown from, which their extensions are bordered from
    /// ([`border`](super::border)).
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
    pub(super) fn new(
        candidates: &[Candidate],
        series: &[(Point, u64)],
        screening: Screening,
    ) -> Result<Design, AxesError> {
        let columns = Columns::new(candidates, series)?;
        Ok(Design::on(Arc::new(columns), series, screening))
    }

    /// The design of `series` on `shared`, the columns of its points.
    pub(super) fn on(
        shared: Arc<Columns>,
        series: &[(Point, u64)],
        screening: Screening,
    ) -> Design {
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
    pub(super) fn gram(&self, r: usize, c: usize) -> &BigInt {
        self.shared.gram(r, c)
    }

    /// `Xᵀy[r]`: the dot product of candidate `r` and the measured bytes.
    pub(super) fn xty(&self, r: usize) -> &BigInt {
        self.xty[r].get_or_init(|| {
            (self.shared.small[r].as_ref())
                .and_then(|c| small_dot(c, &self.bytes))
                .map_or_else(|| dot(&self.shared.columns[r], &self.y), BigInt::from)
        })
    }

    /// The reduced normal equations of the candidates `order`, with the order of their
    /// columns (the same candidates, perhaps reordered); `None` when singular. Bordered
    /// ([`border`](super::border)) from those of the longest prefix of `order` already
    /// eliminated, each longer prefix kept: the search scores a model's extensions, each
    /// `order` its model's columns and one more.
    pub(super) fn eliminated(&self, order: &[usize]) -> Option<Grown> {
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

/// A scored model: a subset of the candidates and its least-squares coefficients.
#[derive(Clone)]
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(super) struct Scored {
    pub(super) worst: BigRational,
    /// The worst leave-one-out miss in bytes (not divided by the point's value).
    pub(super) worst_bytes: BigRational,
    /// The worst miss of the fit itself at a point, in bytes.
    pub(super) residual: BigRational,
    pub(super) degree: u32,
    pub(super) subset: Vec<usize>,
    pub(super) coefficients: Vec<BigRational>,
    /// Whether its misses step with the counting axes alone (`steps_with_counting_axes`,
    /// in [`priors`](super::priors)), when the search asked already.
    pub(super) steps: Option<bool>,
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

/// Ranks models of one size by their worst held-out miss in bytes, then their degree,
/// then the subset.
fn better(a: &Scored, b: &Scored) -> bool {
    (&a.worst_bytes, a.degree, &a.subset) < (&b.worst_bytes, b.degree, &b.subset)
}

/// Scores the least-squares model of the candidates `order` (in any order; the
/// search's models list their columns in the order they were added, which
/// [`Design::eliminated`] grows them in): `None` when its normal equations are singular
/// or a point has leverage 1 (its leave-one-out refit is undetermined).
pub(super) fn score(design: &Design, order: &[usize]) -> Option<Scored> {
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
pub(super) fn score_from_scratch(design: &Design, subset: &[usize]) -> Option<Scored> {
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
