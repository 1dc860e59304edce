//! Doubt travels with the figure: every predicted figure a table shows (a lever row, a
//! `--fit-on` answer, a `--solve` value, `measure`'s predicted column) carries the flags
//! of the fits it rests on, and a prediction that contradicts itself is called
//! impossible rather than read as a saving.
//!
//! - **Flagged**: the figures whose fits [`Estimate::flagged`] names (a held-out point
//!   missed by over 2%, a fit that interpolates, one that falls beyond the grid: lower
//!   at the point than at the grid's corner below it, or one whose negative term nothing
//!   covers takes away over 2% at the point), the same list `show --at` gives for that
//!   combination of levels. The first two do not depend on the point; the last two are
//!   the point's own.
//! - **Impossible**: a category's own peak can never exceed the peak (at the moment a
//!   category peaks, the whole step holds at least that category), so a prediction in
//!   which one does is wrong somewhere: the category's fit, the peak's, or both.

use crate::category::Category;
use crate::sweep::Estimate;

/// The mark of a row that rests on a flagged fit.
pub const FLAGGED_MARK: char = '*';

/// The mark of an impossible row (a category over its own peak).
pub const IMPOSSIBLE_MARK: char = '!';

/// The doubt on one predicted row: the flagged fits it rests on, and the categories
/// predicted above its own peak.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Doubt {
    /// The flagged figures of the fits the row rests on ([`Estimate::flagged`]).
    pub flagged: Vec<String>,
    /// The categories predicted above the row's own peak (empty: a possible row).
    pub impossible: Vec<Category>,
}

impl Doubt {
    /// The doubt on `estimate`'s figures.
    pub fn of(estimate: &Estimate) -> Doubt {
        Doubt {
            flagged: estimate.flagged.clone(),
            impossible: over_peak(
                estimate.category_bytes.iter().map(|(&c, &b)| (c, b)),
                estimate.peak_bytes,
            ),
        }
    }

    /// No flagged fit and no category over the peak.
    pub fn trusted(&self) -> bool {
        self.flagged.is_empty() && self.impossible.is_empty()
    }

    /// How far from trusted, for ranking: 0 trusted, 1 flagged, 2 impossible.
    pub fn rank(&self) -> u8 {
        if !self.impossible.is_empty() {
            2
        } else {
            u8::from(!self.flagged.is_empty())
        }
    }

    /// The row's marks: [`FLAGGED_MARK`] when it rests on a flagged fit, then
    /// [`IMPOSSIBLE_MARK`] when it is impossible (empty: trusted).
    pub fn marks(&self) -> String {
        let mut out = String::new();
        if !self.flagged.is_empty() {
            out.push(FLAGGED_MARK);
        }
        if !self.impossible.is_empty() {
            out.push(IMPOSSIBLE_MARK);
        }
        out
    }
}

/// The categories whose bytes exceed `peak_bytes`, in the order given: what makes a
/// prediction impossible.
pub fn over_peak(
    categories: impl IntoIterator<Item = (Category, u64)>,
    peak_bytes: u64,
) -> Vec<Category> {
    categories
        .into_iter()
        .filter(|&(_, bytes)| bytes > peak_bytes)
        .map(|(c, _)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn estimate(activations: u64, peak: u64, flagged: &[&str]) -> Estimate {
        Estimate {
            at: Default::default(),
            category_bytes: Category::ALL
                .into_iter()
                .map(|c| {
                    (
                        c,
                        if c == Category::Activations {
                            activations
                        } else {
                            1
                        },
                    )
                })
                .collect(),
            peak_bytes: peak,
            peak_phase: None,
            peak_from: None,
            allocated_bytes: None,
            reserved_bytes: None,
            loo_error_ppm: BTreeMap::new(),
            terms: BTreeMap::new(),
            flagged: flagged.iter().map(|f| (*f).to_owned()).collect(),
            interpolated: BTreeMap::new(),
            falls: BTreeMap::new(),
            negative: BTreeMap::new(),
            pool_held: None,
        }
    }

    #[test]
    fn a_category_over_its_own_peak_is_impossible() {
        let d = Doubt::of(&estimate(101, 100, &[]));
        assert_eq!(d.impossible, [Category::Activations]);
        assert_eq!(d.marks(), "!");
        assert!(!d.trusted());
        // Equal to the peak is possible: the category alone at its peak.
        let d = Doubt::of(&estimate(100, 100, &[]));
        assert!(d.trusted());
        assert_eq!(d.marks(), "");
    }

    #[test]
    fn a_flagged_fit_marks_the_row_and_impossible_outranks_it() {
        let d = Doubt::of(&estimate(10, 100, &["activations"]));
        assert_eq!(d.flagged, ["activations"]);
        assert_eq!((d.rank(), d.marks().as_str()), (1, "*"));
        let d = Doubt::of(&estimate(1000, 100, &["activations"]));
        assert_eq!((d.rank(), d.marks().as_str()), (2, "*!"));
    }
}
