//! Memory is a sum of blocks of positive size: which negative terms a sum of blocks
//! can hold, and which it cannot.
//!
//! A negative term is no tensor, but it can be a tensor's offset: the logits of every
//! position but the last are `4 B × batch·(seq − 1)·vocab`, which a fit writes as
//! `4 B × batch·seq·vocab − 4 B × batch·vocab`. Such a term is **covered**: the
//! positive terms that its monomial divides (`batch·seq·vocab` for `batch·vocab`),
//! each evaluated with its other factors at the grid's smallest values, add up to at
//! least its coefficient, so the pair never takes bytes away anywhere the grid
//! reaches. A negative term that nothing covers takes bytes away that no tensor
//! gives: `0.26 B × layers·seq² − 0.45 B × seq²` is negative at one layer, whatever the
//! sequence. A fit needs one to pass through a maximum of two regimes, or a step (a
//! table that doubles between two layer counts), and far outside the grid the pair
//! extrapolates that, not tensors. The fit prefers a model without one
//! ([`Fit::with`](super::Fit)); a prediction beyond the grid that rests on one, by more
//! than 2% of it, is flagged (`sweep::Negative`).

use super::formula::{Formula, Monomial, Term};
use super::grid::{AxesError, Point};
use num_rational::BigRational;
use num_traits::{Signed, Zero};

/// A negative term no positive term covers, and the positive terms its monomial
/// divides (which cover it in part, or not at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncovered {
    /// The negative term.
    pub term: Term,
    /// The positive terms whose monomials it divides.
    pub covers: Vec<Term>,
}

impl Uncovered {
    /// The bytes the negative term takes away at `point`: what the prediction there
    /// rests on that no block gives.
    pub fn bytes_at(&self, point: &Point) -> Result<BigRational, AxesError> {
        let value = BigRational::from_integer(self.term.monomial.eval(point)?);
        Ok(self.term.coefficient.abs() * value)
    }

    /// The negative term, as a formula reads it (`-0.45 B × seq²`).
    pub fn term_in_words(&self) -> String {
        Formula {
            terms: vec![self.term.clone()],
        }
        .to_string()
    }

    /// The positive terms its monomial divides, as a formula reads them (`0.26 B ×
    /// layers·seq²`); `None` when there are none.
    pub fn covers_in_words(&self) -> Option<String> {
        (!self.covers.is_empty()).then(|| {
            Formula {
                terms: self.covers.clone(),
            }
            .to_string()
        })
    }
}

/// Whether `small` divides `large` and is not it: each of its axes in `large` to at
/// least its power.
fn divides(small: &Monomial, large: &Monomial) -> bool {
    small != large
        && (small.powers().iter())
            .all(|(axis, p)| (large.powers().iter()).any(|(a, q)| a == axis && q >= p))
}

impl Formula {
    /// Its negative terms that no positive term covers at `smallest` (each axis at the
    /// grid's smallest value): see this module's documentation. Each positive term's
    /// bytes at `smallest` are shared out among the negative terms it divides, the
    /// highest degree first (then in the formula's order), so that no cover counts
    /// twice: `L·S·B − 0.9·L·S − 0.9·S·B` is negative wherever `L = B = 1`, though
    /// each of its negative terms alone is covered there.
    pub fn uncovered(&self, smallest: &Point) -> Result<Vec<Uncovered>, AxesError> {
        let at = |t: &Term| -> Result<BigRational, AxesError> {
            Ok(&t.coefficient * BigRational::from_integer(t.monomial.eval(smallest)?))
        };
        let mut left: Vec<BigRational> = Vec::with_capacity(self.terms.len());
        for t in &self.terms {
            left.push(if t.coefficient.is_positive() {
                at(t)?
            } else {
                BigRational::zero()
            });
        }
        let mut negatives: Vec<usize> = (0..self.terms.len())
            .filter(|&i| self.terms[i].coefficient.is_negative())
            .collect();
        negatives.sort_by_key(|&i| (std::cmp::Reverse(self.terms[i].monomial.degree()), i));
        let mut out = Vec::new();
        for j in negatives {
            let term = &self.terms[j];
            let covering: Vec<usize> = (0..self.terms.len())
                .filter(|&i| {
                    self.terms[i].coefficient.is_positive()
                        && divides(&term.monomial, &self.terms[i].monomial)
                })
                .collect();
            let mut need = -at(term)?;
            for &i in &covering {
                let take = if left[i] < need {
                    left[i].clone()
                } else {
                    need.clone()
                };
                left[i] -= &take;
                need -= take;
            }
            if need.is_positive() {
                out.push(Uncovered {
                    term: term.clone(),
                    covers: covering.iter().map(|&i| self.terms[i].clone()).collect(),
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formula(terms: &[(i64, i64, &str)]) -> Formula {
        Formula {
            terms: (terms.iter())
                .map(|&(n, d, m)| Term {
                    coefficient: BigRational::new(n.into(), d.into()),
                    monomial: m.parse().unwrap(),
                })
                .collect(),
        }
    }

    fn at(values: &[(&str, u64)]) -> Point {
        values.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    #[test]
    fn an_offset_of_a_tensor_is_covered() {
        // The logits of all positions but the last, f32: 4 × batch·(seq − 1)·vocab.
        let f = formula(&[(4, 1, "batch·seq·vocab"), (-4, 1, "batch·vocab")]);
        let smallest = at(&[("batch", 1), ("seq", 1), ("vocab", 256)]);
        assert!(f.uncovered(&smallest).unwrap().is_empty());
        // A constant taken off a per-layer table of more bytes than it, at one layer.
        let f = formula(&[(-1167, 1, "1"), (1516, 1, "layers")]);
        assert!(f.uncovered(&at(&[("layers", 1)])).unwrap().is_empty());
    }

    #[test]
    fn a_negative_term_nothing_covers_is_found_with_its_partial_covers() {
        // Negative at one layer whatever the sequence: a step chased, not a tensor.
        let f = formula(&[
            (13, 50, "layers·seq²"),
            (181, 1, "layers·seq"),
            (-9, 20, "seq²"),
            (6861, 1, "seq"),
        ]);
        let smallest = at(&[("layers", 1), ("seq", 96)]);
        let u = f.uncovered(&smallest).unwrap();
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].term.monomial.to_string(), "seq²");
        assert_eq!(u[0].covers.len(), 1);
        assert_eq!(u[0].covers[0].monomial.to_string(), "layers·seq²");
        assert_eq!(u[0].term_in_words(), "-0.45 B × seq²");
        assert_eq!(
            u[0].covers_in_words().as_deref(),
            Some("0.26 B × layers·seq²")
        );
        // At 12 layers and seq 512: 0.45 × 512².
        let bytes = u[0].bytes_at(&at(&[("layers", 12), ("seq", 512)])).unwrap();
        assert_eq!(bytes, BigRational::new((512 * 512 * 45).into(), 100.into()));
        // Covered where the grid starts at two layers: 0.26 × 2 ≥ 0.45.
        let from_two = at(&[("layers", 2), ("seq", 96)]);
        assert!(f.uncovered(&from_two).unwrap().is_empty());
    }

    #[test]
    fn a_positive_term_covers_no_two_negative_terms_with_the_same_bytes() {
        // Each alone is covered at layers = batch = 1; together they take 0.8 × seq
        // away at every sequence.
        let f = formula(&[
            (1, 1, "batch·layers·seq"),
            (-9, 10, "layers·seq"),
            (-9, 10, "batch·seq"),
        ]);
        let smallest = at(&[("batch", 1), ("layers", 1), ("seq", 8)]);
        let u = f.uncovered(&smallest).unwrap();
        assert_eq!(u.len(), 1, "{u:?}");
        // Where batch and layers start at 2 (4 × seq against 1.8 + 1.8), there is
        // enough for both.
        let from_two = at(&[("batch", 2), ("layers", 2), ("seq", 8)]);
        assert!(f.uncovered(&from_two).unwrap().is_empty());
    }

    #[test]
    fn a_negative_term_with_no_multiple_is_uncovered() {
        let f = formula(&[(8, 1, "batch·seq"), (-3, 1, "vocab")]);
        let smallest = at(&[("batch", 1), ("seq", 8), ("vocab", 256)]);
        let u = f.uncovered(&smallest).unwrap();
        assert_eq!(u.len(), 1);
        assert!(u[0].covers.is_empty());
        assert_eq!(u[0].covers_in_words(), None);
        // A square divides by its own axis: seq² covers −seq when seq starts at 8.
        let f = formula(&[(1, 1, "seq²"), (-8, 1, "seq")]);
        assert!(f.uncovered(&at(&[("seq", 8)])).unwrap().is_empty());
        assert_eq!(f.uncovered(&at(&[("seq", 4)])).unwrap().len(), 1);
    }
}
