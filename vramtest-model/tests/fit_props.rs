//! Properties of the batch-sweep fit, against an independent computation: points made
//! from a known line must give that line back, and the largest batch must be the one
//! found by trying batch sizes one by one with the line's arithmetic written here.

use proptest::prelude::*;
use vramtest_model::fit::{LargestBatch, Linear, fit_series};

fn batches() -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::btree_set(1u64..4096, 2..6).prop_map(|s| s.into_iter().collect())
}

proptest! {
    #[test]
    fn points_on_a_line_give_that_line(
        fixed in 0i64..(1 << 40),
        per_sample in 0i64..(1 << 24),
        batch in batches(),
    ) {
        let bytes: Vec<u64> = batch.iter().map(|&b| (fixed + per_sample * b as i64) as u64).collect();
        let f = fit_series(&batch, &bytes).unwrap();
        prop_assert_eq!(f.line, Linear { fixed_bytes: fixed, bytes_per_sample: per_sample });
        prop_assert_eq!(f.worst_residual, 0.0);
        prop_assert!(f.is_linear());
    }

    #[test]
    fn a_few_bytes_of_noise_stay_linear(
        fixed in (1i64 << 20)..(1 << 30),
        per_sample in 1024i64..(1 << 20),
        batch in batches(),
        noise in proptest::collection::vec(-64i64..64, 6),
    ) {
        let bytes: Vec<u64> = batch
            .iter()
            .zip(&noise)
            .map(|(&b, n)| (fixed + per_sample * b as i64 + n) as u64)
            .collect();
        let f = fit_series(&batch, &bytes).unwrap();
        prop_assert!(f.is_linear(), "{:?}", f);
        prop_assert!((f.line.bytes_per_sample - per_sample).abs() <= 128, "{:?}", f);
    }

    /// Against counting by hand: the batches are tried one by one with the line's
    /// arithmetic written here (not through `Linear::at`), up to a few thousand.
    #[test]
    fn the_largest_batch_is_the_last_one_that_fits_counted_by_hand(
        fixed in 0i64..(1 << 36),
        per_sample in 1i64..(1 << 26),
        fitting in prop_oneof![0i64..3, 0i64..3000],
        edge in 0usize..5,
        part in 0.0f64..1.0,
    ) {
        // A memory size of the fixed bytes plus `fitting` samples, then a byte short,
        // exact, a byte over, a byte short of one more sample, or part of one more.
        let offset = [-1, 0, 1, per_sample - 1, (per_sample as f64 * part) as i64][edge];
        let available = (fixed + per_sample * fitting + offset).max(0) as u64;
        let expected = by_counting(fixed, per_sample, available);
        let line = Linear { fixed_bytes: fixed, bytes_per_sample: per_sample };
        prop_assert_eq!(line.largest_batch(available), LargestBatch::UpTo(expected));
    }

    /// A line that does not grow fits at any batch when one sample fits, else at none.
    #[test]
    fn a_flat_or_shrinking_line_fits_any_batch_or_none(
        fixed in 0i64..(1 << 36),
        per_sample in -(1i64 << 20)..=0,
        available in 0u64..(1 << 37),
    ) {
        let line = Linear { fixed_bytes: fixed, bytes_per_sample: per_sample };
        let one_fits = i128::from(fixed) + i128::from(per_sample) <= i128::from(available);
        let expected = if one_fits { LargestBatch::Any } else { LargestBatch::UpTo(0) };
        prop_assert_eq!(line.largest_batch(available), expected);
    }
}

/// The largest batch `b` with `fixed + per_sample × b ≤ available`, by trying
/// `b = 1, 2, …` (`per_sample` > 0; 0 when even one sample does not fit).
fn by_counting(fixed: i64, per_sample: i64, available: u64) -> u64 {
    assert!(per_sample > 0);
    let fits = |b: u64| {
        i128::from(fixed) + i128::from(per_sample) * i128::from(b) <= i128::from(available)
    };
    let mut b = 0;
    while fits(b + 1) {
        b += 1;
    }
    b
}

mod formula {
    //! A formula's bytes at a point, against the rational value summed term by term
    //! and rounded up here.
    use num_bigint::BigInt;
    use num_rational::BigRational;
    use num_traits::{Signed, ToPrimitive};
    use proptest::prelude::*;
    use vramtest_model::axes::{Formula, Monomial, Point, Term};

    proptest! {
        #[test]
        fn bytes_are_the_exact_value_rounded_up(
            terms in proptest::collection::vec(
                ((-5_000_000i64..5_000_000, 1i64..1000), (0u8..3, 0u8..3)),
                0..6,
            ),
            (a, b) in (1u64..5000, 1u64..5000),
        ) {
            let formula = Formula {
                terms: terms
                    .iter()
                    .map(|&((n, d), (pa, pb))| Term {
                        coefficient: BigRational::new(BigInt::from(n), BigInt::from(d)),
                        monomial: Monomial::new([("a", pa), ("b", pb)]),
                    })
                    .collect(),
            };
            let point: Point = [("a".to_owned(), a), ("b".to_owned(), b)].into_iter().collect();
            let exact: BigRational = terms
                .iter()
                .map(|&((n, d), (pa, pb))| {
                    let value = BigInt::from(a).pow(u32::from(pa)) * BigInt::from(b).pow(u32::from(pb));
                    BigRational::new(BigInt::from(n), BigInt::from(d)) * BigRational::from_integer(value)
                })
                .sum();
            // 0 below zero; an error (`None` here) past what a u64 holds.
            let up = exact.ceil().to_integer();
            let expected = if up.is_negative() { Some(0) } else { up.to_u64() };
            prop_assert_eq!(formula.bytes(&point).ok(), expected);
        }
    }
}
