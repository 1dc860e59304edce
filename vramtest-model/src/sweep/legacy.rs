//! The `scaling` a batch sweep (`#[vramtest(batch = [..])]`) wrote before it became a
//! sweep over the one axis `batch`: a line per figure (`fixed_bytes + bytes_per_sample
//! × batch`) for the peak and each category. Read from committed snapshots and those
//! of earlier releases, and migrated into a sweep's shape ([`super::Sweep`]), whose
//! formulas give the same bytes at every batch; never written.

use crate::axes::{Fit, Formula, Monomial, Term};
use crate::category::Category;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::Zero;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The axis a batch sweep sweeps.
pub const BATCH: &str = "batch";

/// `fixed_bytes + bytes_per_sample × batch`, as the old shape stored it.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    fixed_bytes: i64,
    bytes_per_sample: i64,
}

/// The largest batch within a budget, as the old shape stored it: read and dropped (a
/// sweep's budget is judged from its fits, see [`super::compare_target`]).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct LegacyBudget {
    budget_bytes: u64,
    largest_batch: Option<u64>,
}

/// A batch sweep's old `scaling`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BatchLines {
    batch: Vec<u64>,
    peak: Line,
    category_peaks: BTreeMap<Category, Line>,
    #[serde(default)]
    #[allow(dead_code)]
    within_budget: Option<LegacyBudget>,
}

impl Line {
    /// The line as a formula of the axis `batch` (its zero terms left out, as a fit
    /// leaves them). A line has no held-out error on record: the old shape kept none.
    fn fit(self) -> Fit {
        let term = |c: i64, monomial| Term {
            coefficient: BigRational::from_integer(BigInt::from(c)),
            monomial,
        };
        let terms = [
            term(self.fixed_bytes, Monomial::constant()),
            term(self.bytes_per_sample, Monomial::new([(BATCH, 1)])),
        ]
        .into_iter()
        .filter(|t| !t.coefficient.is_zero())
        .collect();
        Fit {
            terms: Formula { terms },
            loo_error_ppm: 0,
            residue_bytes: 0,
        }
    }
}

impl BatchLines {
    /// The batch sizes, the peak's formula and each category's: what the sweep's
    /// `axes` and `figures` hold.
    pub(super) fn into_fits(self) -> (Vec<u64>, Fit, BTreeMap<Category, Fit>) {
        let categories = self
            .category_peaks
            .into_iter()
            .map(|(c, line)| (c, line.fit()))
            .collect();
        (self.batch, self.peak.fit(), categories)
    }
}
