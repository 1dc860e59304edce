//! Properties of the batch-sweep fit, against an independent computation: points made
//! from a known line must give that line back, and the largest batch must be the last
//! one whose modelled bytes fit.

use proptest::prelude::*;
use vramtest_model::fit::{Fits, Linear, fit_series};

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

    #[test]
    fn the_largest_batch_fits_and_one_more_does_not(
        fixed in 0i64..(1 << 36),
        per_sample in 1i64..(1 << 26),
        available in 0u64..(1 << 40),
    ) {
        let line = Linear { fixed_bytes: fixed, bytes_per_sample: per_sample };
        match line.largest_batch(available) {
            Fits::UpTo(0) => prop_assert!(line.at(1) > i128::from(available)),
            Fits::UpTo(n) => {
                prop_assert!(line.at(n) <= i128::from(available));
                prop_assert!(line.at(n + 1) > i128::from(available));
            }
            Fits::Any => prop_assert!(false, "a growing line always has a limit"),
        }
    }
}
