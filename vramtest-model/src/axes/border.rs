//! Exact normal equations grown one column at a time: a subset's reduced normal
//! equations (what fraction-free Gauss–Jordan elimination leaves of `[XᵀX | I | Xᵀy]`)
//! computed from those of the subset less one column, so that the search, which tries
//! a model and every model of one term more, eliminates each model's equations once
//! and each of its extensions' in a quadratic number of steps instead of a cubic one.
//!
//! The result does not depend on how it is computed: `det(XᵀX)`, its adjugate
//! (`det · (XᵀX)⁻¹`) and `adj · Xᵀy` are fixed integers, so bordering gives exactly
//! what elimination from scratch gives.
//!
//! # Bordering
//!
//! Let `G` be the subset's `XᵀX`, `d = det G`, `A = adj G` and `c = A·Xᵀy`. A column
//! `x` more borders `G` with `g = Xᵀx` and `γ = xᵀx`, and `Xᵀy` with `β = xᵀy`. With
//! `u = A·g` and `t = gᵀc`:
//!
//! - `d' = d·γ − gᵀu` (the determinant times the Schur complement `γ − gᵀG⁻¹g`);
//! - `A' = [[(d'·A + u·uᵀ) / d, −u], [−uᵀ, d]]`;
//! - `c' = [(d'·c + u·t) / d − u·β, d·β − t]`.
//!
//! Each division is exact: its quotient is an entry of the integer adjugate `A'` or of
//! `A'·Xᵀy`. `d' = 0` when the column depends on the others, and then so does every
//! subset that holds them all.

use num_bigint::BigInt;
use num_traits::{One, Zero};

/// The reduced normal equations of some columns, in the order they were added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Eliminated {
    /// `det(XᵀX)`, positive (a Gram matrix of independent columns).
    pub(super) det: BigInt,
    /// `adj(XᵀX) = det · (XᵀX)⁻¹`, symmetric.
    pub(super) adjugate: Vec<Vec<BigInt>>,
    /// `adj(XᵀX) · Xᵀy = det · ` the least-squares coefficients.
    pub(super) solution: Vec<BigInt>,
}

impl Eliminated {
    /// No column: the empty product's determinant, 1.
    pub(super) fn empty() -> Eliminated {
        Eliminated {
            det: BigInt::one(),
            adjugate: Vec::new(),
            solution: Vec::new(),
        }
    }

    /// How many columns.
    pub(super) fn len(&self) -> usize {
        self.solution.len()
    }

    /// These equations with one column more: `g` its products with the columns so far
    /// (in their order), `gamma` its product with itself, `beta` with the measured
    /// bytes. `None` when it depends on the columns so far.
    pub(super) fn border(&self, g: &[BigInt], gamma: &BigInt, beta: &BigInt) -> Option<Eliminated> {
        let k = self.len();
        debug_assert_eq!(g.len(), k);
        let d = &self.det;
        let u: Vec<BigInt> = self
            .adjugate
            .iter()
            .map(|row| row.iter().zip(g).map(|(a, x)| a * x).sum())
            .collect();
        let det = d * gamma - g.iter().zip(&u).map(|(x, v)| x * v).sum::<BigInt>();
        if det.is_zero() {
            return None;
        }
        let t: BigInt = g.iter().zip(&self.solution).map(|(x, c)| x * c).sum();
        let mut adjugate: Vec<Vec<BigInt>> = vec![Vec::with_capacity(k + 1); k + 1];
        for p in 0..k {
            for q in 0..k {
                let entry = if q < p {
                    adjugate[q][p].clone()
                } else {
                    (&det * &self.adjugate[p][q] + &u[p] * &u[q]) / d
                };
                adjugate[p].push(entry);
            }
            adjugate[p].push(-&u[p]);
        }
        adjugate[k].extend(u.iter().map(|v| -v));
        adjugate[k].push(d.clone());
        let mut solution: Vec<BigInt> = (0..k)
            .map(|p| (&det * &self.solution[p] + &u[p] * &t) / d - &u[p] * beta)
            .collect();
        solution.push(d * beta - t);
        Some(Eliminated {
            det,
            adjugate,
            solution,
        })
    }

    /// The same equations with the columns reordered: column `p` of the result is
    /// column `from[p]` of these.
    pub(super) fn permuted(&self, from: &[usize]) -> Eliminated {
        Eliminated {
            det: self.det.clone(),
            adjugate: from
                .iter()
                .map(|&r| from.iter().map(|&c| self.adjugate[r][c].clone()).collect())
                .collect(),
            solution: from.iter().map(|&r| self.solution[r].clone()).collect(),
        }
    }

    /// How many big integers the equations hold (what a cache of them weighs).
    pub(super) fn weight(&self) -> usize {
        let k = self.len();
        k * k + k + 1
    }
}

#[cfg(test)]
mod tests {
    use super::super::design::{Design, Screening, candidates, score, score_from_scratch};
    use super::super::solve::{dot, entries, fitted_and_leverage, gauss_jordan, normal_equations};
    use super::super::{Grid, Point};
    use super::*;
    use proptest::prelude::*;

    /// The equations of `columns` by fraction-free Gauss–Jordan elimination from
    /// scratch, as every score was computed before bordering.
    fn from_scratch(columns: &[Vec<i64>], y: &[i64]) -> Option<Eliminated> {
        let big = |v: &[i64]| -> Vec<BigInt> { v.iter().map(|&x| BigInt::from(x)).collect() };
        let cols: Vec<Vec<BigInt>> = columns.iter().map(|c| big(c)).collect();
        let y = big(y);
        let dot =
            |a: &[BigInt], b: &[BigInt]| -> BigInt { a.iter().zip(b).map(|(x, z)| x * z).sum() };
        let k = cols.len();
        let mut m = normal_equations(k, |r, c| dot(&cols[r], &cols[c]), |r| dot(&cols[r], &y));
        let det = gauss_jordan(&mut m, k)?;
        Some(Eliminated {
            det,
            adjugate: m.iter().map(|row| row[k..2 * k].to_vec()).collect(),
            solution: m.iter().map(|row| row[2 * k].clone()).collect(),
        })
    }

    /// The equations of `columns` bordered one column at a time from none.
    fn bordered(columns: &[Vec<i64>], y: &[i64]) -> Option<Eliminated> {
        let dot = |a: &[i64], b: &[i64]| -> BigInt {
            a.iter()
                .zip(b)
                .map(|(&x, &z)| BigInt::from(x) * BigInt::from(z))
                .sum()
        };
        let mut e = Eliminated::empty();
        for (j, x) in columns.iter().enumerate() {
            let g: Vec<BigInt> = columns[..j].iter().map(|c| dot(c, x)).collect();
            e = e.border(&g, &dot(x, x), &dot(x, y))?;
        }
        Some(e)
    }

    #[test]
    fn a_dependent_column_is_singular_as_from_scratch() {
        let columns = vec![vec![1, 1, 1, 1], vec![1, 2, 3, 4], vec![2, 3, 4, 5]];
        let y = [3, 1, 4, 1];
        assert_eq!(from_scratch(&columns, &y), None);
        assert_eq!(bordered(&columns, &y), None);
        let independent = &columns[..2];
        assert!(bordered(independent, &y).is_some());
        assert_eq!(bordered(independent, &y), from_scratch(independent, &y));
    }

    #[test]
    fn a_permutation_is_the_elimination_of_the_reordered_columns() {
        let columns = vec![
            vec![1, 1, 1, 1, 1],
            vec![1, 2, 3, 4, 5],
            vec![1, 4, 9, 16, 25],
        ];
        let y = [7, 2, 9, 4, 11];
        let order = [2, 0, 1];
        let reordered: Vec<Vec<i64>> = order.iter().map(|&i| columns[i].clone()).collect();
        assert_eq!(
            bordered(&columns, &y).unwrap().permuted(&order),
            from_scratch(&reordered, &y).unwrap()
        );
    }

    /// A design of a three-axis grid (18 candidates on 36 points) whose bytes no small
    /// model fits exactly.
    fn design(seed: u64, screening: Screening) -> Design {
        let grid = Grid::new([
            ("layers", vec![1, 2, 3]),
            ("seq", vec![8, 16, 24, 32]),
            ("batch", vec![1, 2, 4]),
        ])
        .unwrap();
        let series: Vec<(Point, u64)> = (grid.points().into_iter().enumerate())
            .map(|(i, p)| {
                let (l, s, b) = (p["layers"], p["seq"], p["batch"]);
                let jitter = (i as u64 + seed).wrapping_mul(2_654_435_761) % 5000;
                (p, 4000 * l * s * b + 48 * s * s * b + 16_000 * l + jitter)
            })
            .collect();
        Design::new(&candidates(&grid), &series, screening).unwrap()
    }

    /// The machine-word shortcuts give the big integers' products: `XᵀX` and `Xᵀy` on
    /// a grid whose values overflow a word (and whose products overflow 128 bits), and
    /// each point's fitted value and leverage against the quadratic form in full.
    #[test]
    fn machine_words_give_the_big_integers_products() {
        let huge = 3u64 << 61;
        let grid = Grid::new([
            ("layers", vec![1, 2, 3]),
            ("seq", vec![huge - 2, huge - 1, huge]),
        ])
        .unwrap();
        let series: Vec<(Point, u64)> = (grid.points().into_iter().enumerate())
            .map(|(i, p)| (p, u64::MAX - i as u64))
            .collect();
        let design = Design::new(&candidates(&grid), &series, Screening::Exact).unwrap();
        let columns = &design.shared.columns;
        assert!(design.shared.small.iter().any(Option::is_some));
        assert!(design.shared.small.iter().any(Option::is_none));
        for r in 0..columns.len() {
            assert_eq!(*design.xty(r), dot(&columns[r], &design.y));
            for c in 0..columns.len() {
                assert_eq!(*design.gram(r, c), dot(&columns[r], &columns[c]));
            }
        }
        let subset = [0, 1, 2, 4];
        let e = design.eliminated(&subset).unwrap().1.clone();
        let cols: Vec<&Vec<BigInt>> = subset.iter().map(|&s| &columns[s]).collect();
        let small: Vec<Option<&Vec<u64>>> = (subset.iter())
            .map(|&s| design.shared.small[s].as_ref())
            .collect();
        for i in 0..series.len() {
            let x: Vec<&BigInt> = cols.iter().map(|c| &c[i]).collect();
            let fitted_in_full: BigInt = x.iter().zip(&e.solution).map(|(x, c)| *x * c).sum();
            let leverage_in_full: BigInt = (0..x.len())
                .flat_map(|j| (0..x.len()).map(move |l| (j, l)))
                .map(|(j, l)| x[j] * x[l] * &e.adjugate[j][l])
                .sum();
            let x = entries(&cols, &small, i);
            assert_eq!(
                fitted_and_leverage(&x, &e),
                (fitted_in_full, leverage_in_full)
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// A score bordered from the subsets scored before it (in whatever order their
        /// columns were added) is the score from scratch, every field of it.
        #[test]
        fn a_bordered_score_is_the_score_from_scratch(
            seed in 0u64..1000,
            exact_only in any::<bool>(),
            orders in proptest::collection::vec(
                proptest::sample::subsequence((0..18).collect::<Vec<usize>>(), 1..12)
                    .prop_shuffle(),
                1..8,
            ),
        ) {
            let screening = if exact_only { Screening::Exact } else { Screening::Float };
            let design = design(seed, screening);
            for order in &orders {
                // Each order's prefixes first, as the search grows a model.
                for j in 1..=order.len() {
                    let prefix = &order[..j];
                    let mut subset = prefix.to_vec();
                    subset.sort_unstable();
                    prop_assert_eq!(score(&design, prefix), score_from_scratch(&design, &subset));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Bordering gives the very integers elimination from scratch gives, singular
        /// or not, whatever the columns (small values make dependent ones likely).
        #[test]
        fn bordering_is_elimination_from_scratch(
            (columns, y) in (1usize..7, 3usize..9).prop_flat_map(|(k, n)| (
                proptest::collection::vec(proptest::collection::vec(-3i64..4, n), k),
                proptest::collection::vec(-1000i64..1000, n),
            )),
            scale in prop_oneof![Just(1i64), Just(1_000_003i64)],
        ) {
            let columns: Vec<Vec<i64>> =
                columns.iter().map(|c| c.iter().map(|x| x * scale).collect()).collect();
            prop_assert_eq!(bordered(&columns, &y), from_scratch(&columns, &y));
        }
    }
}
