//! What can go wrong in a CUDA measurement, and [`guard`], which turns a panic in a
//! driver call into one of those errors.

use crate::attribute::PoolAttribute;
use crate::libs::Unavailable;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Why a CUDA measurement could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CudaError {
    /// No driver, the toolkit's stub, no device, or a driver too old for the bindings.
    #[error("{0}")]
    Unavailable(#[from] Unavailable),
    /// The ordinal is past the last device.
    #[error("no CUDA device {ordinal} (the driver reports {devices})")]
    NoSuchDevice {
        /// The device ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        devices: usize,
    },
    /// A driver call failed.
    #[error("{call} failed: {code}")]
    Driver {
        /// The driver API function called (`cuMemPoolGetAttribute`).
        call: &'static str,
        /// The `CUresult` it returned, by name (`CUDA_ERROR_OUT_OF_MEMORY`).
        code: String,
    },
    /// cudarc panicked inside a driver call (a missing symbol in an old driver).
    #[error("{call} panicked: {message}")]
    Panicked {
        /// The driver or CUPTI function called.
        call: &'static str,
        /// The panic's message.
        message: String,
    },
    /// A pool call on a device without memory pools.
    #[error("the device has no memory pools")]
    NoMemoryPools,
    /// Only high-water marks can be reset.
    #[error("{0:?} is not a high-water mark")]
    NotAHighWaterMark(PoolAttribute),
    /// A call of the per-allocation record source (CUPTI) failed while it was running.
    #[error("{call} failed: {code}")]
    Records {
        /// The CUPTI function called (`cuptiActivityFlushAll`).
        call: &'static str,
        /// The `CUptiResult` it returned, by name.
        code: String,
    },
}

/// Runs driver calls, turning a panic in cudarc's loader into an error.
pub(crate) fn guard<T>(
    call: &'static str,
    f: impl FnOnce() -> Result<T, CudaError>,
) -> Result<T, CudaError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "panic".to_owned());
            Err(CudaError::Panicked { call, message })
        }
    }
}
