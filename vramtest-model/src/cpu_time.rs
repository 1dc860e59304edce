//! The measured cost side of a lever: a combination of levels' CPU step time over the
//! baseline's ([`CpuTimeRatio`]), kept in the snapshot beside the combination's fit.
//!
//! Each child process measures the CPU time (user and system, every thread) its step
//! took; the parent sums it per combination over the same numeric grid and divides
//! by the baseline's sum. A time is not memory: it varies from run to run and from
//! machine to machine, so it is never compared. Two snapshots that differ only in it
//! are the same snapshot (its equality always holds): an otherwise unchanged result
//! is not rewritten, not reported as changed and not failed by `--strict` because a
//! step ran a little faster.
//!
//! A ratio is recorded to three decimals between [`MIN_RATIO`] and [`MAX_RATIO`]: a
//! lever a thousand times faster or slower than its baseline is a measurement gone
//! wrong, not a cost. A snapshot holding another (zero, negative, `1e308`), edited by
//! hand, is an error when read, naming the field: it would rank first, or print 309
//! digits, where the lever table and `--fit-on` rank by it.

use serde::{Deserialize, Serialize};

/// The smallest ratio recorded: 0.001, three decimals' smallest step.
pub const MIN_RATIO: f64 = 0.001;

/// The largest ratio recorded.
pub const MAX_RATIO: f64 = 1000.0;

/// A combination's CPU step time over the baseline's (`None`: not measured, as in a
/// snapshot recorded before it was). Equal to every other ratio: see the module.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CpuTimeRatio(Option<f64>);

/// Whether `ratio` is one a run records.
fn in_range(ratio: f64) -> bool {
    (MIN_RATIO..=MAX_RATIO).contains(&ratio)
}

/// A ratio in a message: `1e308`, not its 309 digits.
fn shown(ratio: f64) -> String {
    if ratio != 0.0 && !(1e-4..1e6).contains(&ratio.abs()) {
        format!("{ratio:e}")
    } else {
        ratio.to_string()
    }
}

impl CpuTimeRatio {
    /// `this` over `baseline` (the sums of the CPU step times, in any one unit), to
    /// three decimals; unknown when either is unknown, the baseline took no time, or
    /// the ratio lies outside [`MIN_RATIO`]..=[`MAX_RATIO`] (see the module).
    pub fn of(this: Option<u64>, baseline: Option<u64>) -> CpuTimeRatio {
        match (this, baseline) {
            (Some(t), Some(b)) if b > 0 => CpuTimeRatio(
                Some((t as f64 / b as f64 * 1000.0).round() / 1000.0).filter(|r| in_range(*r)),
            ),
            _ => CpuTimeRatio(None),
        }
    }

    /// The ratio, when measured.
    pub fn get(self) -> Option<f64> {
        self.0.filter(|r| in_range(*r))
    }

    /// Whether a snapshot's ratio is one a run records: unknown, or within
    /// [`MIN_RATIO`]..=[`MAX_RATIO`]. `Err`: why not, naming the ratio.
    pub fn check(self) -> Result<(), String> {
        match self.0 {
            Some(r) if !in_range(r) => Err(format!(
                "{} is no CPU time ratio: a run records one between {MIN_RATIO} and {MAX_RATIO} (a combination's CPU step time over the baseline's), or none at all (remove the key)",
                shown(r)
            )),
            _ => Ok(()),
        }
    }

    /// Whether it was not measured: a snapshot then writes no key.
    pub fn is_unknown(&self) -> bool {
        self.get().is_none()
    }
}

/// Always equal: a time is never compared (see the module).
impl PartialEq for CpuTimeRatio {
    fn eq(&self, _other: &CpuTimeRatio) -> bool {
        true
    }
}

impl Eq for CpuTimeRatio {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_the_sums_quotient_to_three_decimals() {
        assert_eq!(
            CpuTimeRatio::of(Some(2_469), Some(2_000)).get(),
            Some(1.235)
        );
        assert_eq!(
            CpuTimeRatio::of(Some(1_000), Some(3_000)).get(),
            Some(0.333)
        );
        assert_eq!(CpuTimeRatio::of(Some(5), Some(0)).get(), None);
        assert_eq!(CpuTimeRatio::of(None, Some(7)).get(), None);
        assert_eq!(CpuTimeRatio::of(Some(7), None).get(), None);
        assert!(CpuTimeRatio::default().is_unknown());
    }

    #[test]
    fn ratios_are_never_compared() {
        let a = CpuTimeRatio::of(Some(1), Some(1));
        let b = CpuTimeRatio::of(Some(3), Some(1));
        assert_eq!(a, b);
        assert_eq!(a, CpuTimeRatio::default());
        assert_ne!(a.get(), b.get());
    }

    #[test]
    fn a_ratio_reads_back_and_one_out_of_range_fails_its_check() {
        let r: CpuTimeRatio = serde_json::from_str("1.25").unwrap();
        assert_eq!(r.get(), Some(1.25));
        assert_eq!(serde_json::to_string(&r).unwrap(), "1.25");
        for edge in ["0.001", "1000", "null"] {
            let r: CpuTimeRatio = serde_json::from_str(edge).unwrap();
            assert_eq!(r.check(), Ok(()), "{edge}");
        }
        for (bad, said) in [
            ("-2.0", "-2"),
            ("0", "0"),
            ("0.0009", "0.0009"),
            ("1000.5", "1000.5"),
            ("1e308", "1e308"),
        ] {
            let r: CpuTimeRatio = serde_json::from_str(bad).unwrap();
            assert!(r.is_unknown(), "{bad}");
            let e = r.check().unwrap_err();
            assert!(
                e.starts_with(&format!("{said} is no CPU time ratio"))
                    && e.contains("between 0.001 and 1000"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_ratio_out_of_range_is_not_recorded() {
        // 1 / 4000 rounds to 0.000; 5000 / 1 is past the largest.
        assert_eq!(CpuTimeRatio::of(Some(1), Some(4_000)).get(), None);
        assert_eq!(CpuTimeRatio::of(Some(5_000), Some(1)).get(), None);
        assert_eq!(CpuTimeRatio::of(Some(1), Some(1_000)).get(), Some(0.001));
    }
}
