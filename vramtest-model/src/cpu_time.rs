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

use serde::{Deserialize, Serialize};

/// A combination's CPU step time over the baseline's (`None`: not measured, as in a
/// snapshot recorded before it was). Equal to every other ratio: see the module.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CpuTimeRatio(Option<f64>);

impl CpuTimeRatio {
    /// `this` over `baseline` (the sums of the CPU step times, in any one unit), to
    /// three decimals; unknown when either is unknown or the baseline took no time.
    pub fn of(this: Option<u64>, baseline: Option<u64>) -> CpuTimeRatio {
        match (this, baseline) {
            (Some(t), Some(b)) if b > 0 => {
                CpuTimeRatio(Some((t as f64 / b as f64 * 1000.0).round() / 1000.0))
            }
            _ => CpuTimeRatio(None),
        }
    }

    /// The ratio, when measured (a negative or non-finite one, edited in, is not).
    pub fn get(self) -> Option<f64> {
        self.0.filter(|r| r.is_finite() && *r >= 0.0)
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
    fn a_ratio_reads_back_and_an_edited_negative_one_is_unknown() {
        let r: CpuTimeRatio = serde_json::from_str("1.25").unwrap();
        assert_eq!(r.get(), Some(1.25));
        assert_eq!(serde_json::to_string(&r).unwrap(), "1.25");
        let r: CpuTimeRatio = serde_json::from_str("-2.0").unwrap();
        assert!(r.is_unknown());
        let r: CpuTimeRatio = serde_json::from_str("null").unwrap();
        assert!(r.is_unknown());
    }
}
