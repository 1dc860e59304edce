//! Lines in the batch (`fixed_bytes + bytes_per_sample × batch`) for the CUDA pool
//! model's predicted peaks over a batch sweep ([`crate::pool`]), what follows from
//! them — the largest batch that fits in a given amount of memory — and the memory
//! sizes `show` answers for. A sweep's own figures are fitted by [`crate::axes`].
//!
//! The fit is least squares in exact integer arithmetic, so the same measurements give
//! the same snapshot on every machine. A figure that does not grow linearly with the
//! batch is never fitted silently: [`LineFit::worst_residual`] says how far the
//! worst point is from the line, and [`LineFit::is_linear`] applies the threshold.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest distance of a point from its line, as a fraction of the largest
/// measured value, above which a figure is reported as not linear in the batch.
pub const NONLINEAR_RESIDUAL: f64 = 0.02;

/// Memory a GPU run needs besides the tensors measured on the CPU (CUDA context,
/// cuBLAS and cuDNN handles and workspaces), when the configuration names none.
pub const DEFAULT_RESERVE: u64 = 1 << 30;

/// `fixed_bytes + bytes_per_sample × batch`, in whole bytes (what a snapshot stores).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Linear {
    /// What the step needs whatever the batch (parameters, optimizer state, caches).
    /// Negative only when a least-squares line crosses zero above batch 0.
    pub fixed_bytes: i64,
    /// What each sample of the batch adds (activations, inputs).
    pub bytes_per_sample: i64,
}

impl Linear {
    /// The modelled bytes at `batch`.
    pub fn at(&self, batch: u64) -> i128 {
        i128::from(self.fixed_bytes) + i128::from(self.bytes_per_sample) * i128::from(batch)
    }

    /// The largest batch whose modelled bytes stay within `available`: `LargestBatch::Any` when
    /// the figure does not grow with the batch and its fixed part fits,
    /// `LargestBatch::UpTo(0)` when not even one sample fits.
    pub fn largest_batch(&self, available: u64) -> LargestBatch {
        let available = i128::from(available);
        if self.bytes_per_sample <= 0 {
            return if self.at(1) <= available {
                LargestBatch::Any
            } else {
                LargestBatch::UpTo(0)
            };
        }
        let room = available - i128::from(self.fixed_bytes);
        if room < i128::from(self.bytes_per_sample) {
            return LargestBatch::UpTo(0);
        }
        let batch = room / i128::from(self.bytes_per_sample);
        LargestBatch::UpTo(u64::try_from(batch).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Linear {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::bytes::HumanBytes;
        let fixed = HumanBytes(self.fixed_bytes.unsigned_abs());
        let per = HumanBytes(self.bytes_per_sample.unsigned_abs());
        let fixed_sign = if self.fixed_bytes < 0 { "-" } else { "" };
        let op = if self.bytes_per_sample < 0 { '-' } else { '+' };
        write!(f, "{fixed_sign}{fixed} {op} {per} × batch")
    }
}

/// How large a batch fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LargestBatch {
    /// The memory does not grow with the batch: any batch fits.
    Any,
    /// Batches up to this size fit (0: not even one sample).
    UpTo(u64),
}

impl LargestBatch {
    /// The largest batch as a number, `None` for [`LargestBatch::Any`].
    pub fn batch(self) -> Option<u64> {
        match self {
            LargestBatch::Any => None,
            LargestBatch::UpTo(n) => Some(n),
        }
    }
}

impl fmt::Display for LargestBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LargestBatch::Any => f.write_str("any"),
            LargestBatch::UpTo(0) => f.write_str("none"),
            LargestBatch::UpTo(n) => write!(f, "{n}"),
        }
    }
}

/// Why a sweep cannot be fitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FitError {
    /// Fewer than two distinct batch sizes (the sweep's batch sizes).
    #[error("a batch sweep needs at least two different batch sizes, got {0:?}")]
    TooFewBatches(Vec<u64>),
    /// Not one measurement per batch size.
    #[error("{batches} batch sizes but {measurements} measurements")]
    Mismatch {
        /// How many batch sizes.
        batches: usize,
        /// How many measurements.
        measurements: usize,
    },
    /// A batch size of 0 (the sweep's batch sizes).
    #[error("batch size 0 in the sweep {0:?}: batch sizes start at 1")]
    ZeroBatch(Vec<u64>),
}

/// One figure's line and how well it fits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineFit {
    /// The fitted bytes as a function of the batch size.
    pub line: Linear,
    /// The largest |measured − modelled| over the sweep, as a fraction of the largest
    /// measured value (0 with two batch sizes, where the line goes through both).
    pub worst_residual: f64,
    /// The batch where that residual is.
    pub worst_batch: u64,
}

impl LineFit {
    /// Whether the figure grows linearly with the batch (see [`NONLINEAR_RESIDUAL`]).
    pub fn is_linear(&self) -> bool {
        self.worst_residual <= NONLINEAR_RESIDUAL
    }
}

/// Least squares through `(batch, bytes)` points, in exact integer arithmetic: the
/// slope is rounded to the nearest byte, then the intercept is the mean of
/// `bytes − slope × batch`, also rounded.
pub fn fit_series(batches: &[u64], bytes: &[u64]) -> Result<LineFit, FitError> {
    check_sweep(batches, bytes.len())?;
    let n = batches.len() as i128;
    let xs: Vec<i128> = batches.iter().map(|&b| i128::from(b)).collect();
    let ys: Vec<i128> = bytes.iter().map(|&b| i128::from(b)).collect();
    let sx: i128 = xs.iter().sum();
    let sy: i128 = ys.iter().sum();
    let sxx: i128 = xs.iter().map(|x| x * x).sum();
    let sxy: i128 = xs.iter().zip(&ys).map(|(x, y)| x * y).sum();
    let den = n * sxx - sx * sx;
    let slope = div_round(n * sxy - sx * sy, den);
    let intercept = div_round(sy - slope * sx, n);
    let line = Linear {
        fixed_bytes: clamp_i64(intercept),
        bytes_per_sample: clamp_i64(slope),
    };
    let largest = ys.iter().copied().max().unwrap_or(0).max(1);
    let (worst_batch, worst) = xs
        .iter()
        .zip(&ys)
        .map(|(&x, &y)| (x, (y - line.at(x as u64)).abs()))
        .max_by_key(|&(_, r)| r)
        .unwrap_or((0, 0));
    Ok(LineFit {
        line,
        worst_residual: worst as f64 / largest as f64,
        worst_batch: worst_batch as u64,
    })
}

fn check_sweep(batches: &[u64], measurements: usize) -> Result<(), FitError> {
    if batches.len() != measurements {
        return Err(FitError::Mismatch {
            batches: batches.len(),
            measurements,
        });
    }
    if batches.contains(&0) {
        return Err(FitError::ZeroBatch(batches.to_vec()));
    }
    let mut distinct = batches.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 2 {
        return Err(FitError::TooFewBatches(batches.to_vec()));
    }
    Ok(())
}

/// `num / den` rounded to the nearest integer, halves away from zero.
fn div_round(num: i128, den: i128) -> i128 {
    debug_assert!(den != 0);
    let (num, den) = if den < 0 { (-num, -den) } else { (num, den) };
    if num >= 0 {
        (num + den / 2) / den
    } else {
        -((-num + den / 2) / den)
    }
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// A memory size to plan for, with a GPU that has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySize {
    /// The memory size, in bytes.
    pub bytes: u64,
    /// GPUs with that much memory ("H100, A100 80GB").
    pub example: &'static str,
}

const GIB: u64 = 1 << 30;

/// The memory sizes `cargo vramtest show` answers for.
pub const MEMORY_SIZES: [MemorySize; 6] = [
    MemorySize {
        bytes: 16 * GIB,
        example: "T4, V100 16GB",
    },
    MemorySize {
        bytes: 24 * GIB,
        example: "RTX 4090, L4, A10",
    },
    MemorySize {
        bytes: 40 * GIB,
        example: "A100 40GB",
    },
    MemorySize {
        bytes: 48 * GIB,
        example: "L40S, RTX 6000 Ada",
    },
    MemorySize {
        bytes: 80 * GIB,
        example: "H100, A100 80GB",
    },
    MemorySize {
        bytes: 141 * GIB,
        example: "H200",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_points_give_the_line_through_them() {
        let f = fit_series(&[64, 128], &[1_000 + 64 * 3_140, 1_000 + 128 * 3_140]).unwrap();
        assert_eq!(
            f.line,
            Linear {
                fixed_bytes: 1_000,
                bytes_per_sample: 3_140
            }
        );
        assert_eq!(f.worst_residual, 0.0);
    }

    #[test]
    fn a_curve_is_flagged_not_fitted_silently() {
        // bytes = batch²: far from any line over 1..=8.
        let b = [1u64, 2, 4, 8];
        let y: Vec<u64> = b.iter().map(|x| 1_000 * x * x).collect();
        let f = fit_series(&b, &y).unwrap();
        assert!(!f.is_linear(), "{f:?}");
    }

    #[test]
    fn sweeps_need_two_distinct_nonzero_batches() {
        assert!(matches!(
            fit_series(&[64, 64], &[1, 2]),
            Err(FitError::TooFewBatches(_))
        ));
        assert!(matches!(
            fit_series(&[0, 64], &[1, 2]),
            Err(FitError::ZeroBatch(_))
        ));
        assert!(matches!(
            fit_series(&[1, 2], &[1]),
            Err(FitError::Mismatch { .. })
        ));
    }

    #[test]
    fn largest_batch_is_the_floor_of_the_room_per_sample() {
        let line = Linear {
            fixed_bytes: 100,
            bytes_per_sample: 30,
        };
        assert_eq!(line.largest_batch(100 + 30 * 7 + 29), LargestBatch::UpTo(7));
        assert_eq!(line.largest_batch(100 + 29), LargestBatch::UpTo(0));
        assert_eq!(line.largest_batch(50), LargestBatch::UpTo(0));
        let flat = Linear {
            fixed_bytes: 100,
            bytes_per_sample: 0,
        };
        assert_eq!(flat.largest_batch(100), LargestBatch::Any);
        assert_eq!(flat.largest_batch(99), LargestBatch::UpTo(0));
    }

    #[test]
    fn linear_displays_as_a_formula() {
        let line = Linear {
            fixed_bytes: 12 << 20,
            bytes_per_sample: 4096,
        };
        assert_eq!(line.to_string(), "12.00 MiB + 4.00 KiB × batch");
    }
}
