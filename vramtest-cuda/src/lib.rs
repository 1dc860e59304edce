//! The CUDA probe of vramtest: measures the device memory of one test through cudarc,
//! and never panics on a machine without a driver.
//!
//! - [`detect`] says whether CUDA tests can run here ([`Availability`]);
//! - [`Driver`] is the handful of driver calls the probe needs, implemented over cudarc
//!   by [`CudarcDriver`] and, for tests on any machine, by [`FakePool`];
//! - [`PoolSession`] samples the device's memory pool at phase boundaries and records
//!   tracked allocations; [`watermarks::profile`] (pure) turns what it recorded into a
//!   [`vramtest_model::Profile`] with fidelity `exact` (tracked allocations) or `phase`
//!   (pool watermarks);
//! - with the `cupti` cargo feature (off by default), [`CudarcDriver`] also starts a
//!   source of per-allocation records ([`records::AllocationRecords`]: CUPTI's
//!   `MEMORY2` activity records, whichever framework allocates), and the session's
//!   profile is `exact`; without libcupti at run time the session falls back to the
//!   pool watermarks and says so in [`Report::fallback`] ("no CUPTI library …").
//!
//! ```no_run
//! use vramtest_cuda::{Availability, CudarcDriver, PoolSession, detect};
//! use vramtest_model::{Event, Phase};
//!
//! # fn main() -> Result<(), vramtest_cuda::CudaError> {
//! match detect() {
//!     Availability::Ready { .. } => {}
//!     other => { println!("ignored: {}", other.reason().unwrap()); return Ok(()); }
//! }
//! let mut session = PoolSession::new(CudarcDriver::new(0)?)?;
//! session.boundary(&Event::PhaseStart(Phase::Params))?;
//! // ... the test's code allocates on device 0 ...
//! session.boundary(&Event::PhaseEnd)?;
//! let report = session.finish()?;
//! if let Some(why) = &report.fallback { println!("note: {why}"); }
//! println!("{} bytes at the peak ({})", report.profile.peak_bytes, report.profile.fidelity);
//! # Ok(()) }
//! ```
//!
//! Builds beside any cudarc configuration another crate of the build turns on
//! (`dynamic-loading`, `fallback-dynamic-loading` or `dynamic-linking`, any CUDA 12 or
//! 13 version feature): the probe finds libcuda and the CUDA libraries itself
//! ([`libs`]). Its default feature `cuda-version-default` picks cudarc's `cuda-12080`
//! for builds where no other crate picks a version; turn it off to use the version
//! another crate selects. With dynamic loading (our own choice) it compiles without a
//! CUDA toolkit and runs, reporting [`Availability::Unavailable`], without a driver.

mod cuda;
#[cfg(feature = "cupti")]
mod cupti;
mod driver;
mod fake;
pub mod libs;
mod oom;
pub mod records;
mod session;
pub mod watermarks;

pub use cuda::{Availability, CudarcDriver, detect, parse_nvidia_version};
pub use driver::{Driver, PoolAttribute};
pub use fake::{FakePool, GRANULE};
pub use libs::{Lookup, Unavailable, find_library, probe_driver};
pub use oom::{LiveBlocks, OutOfMemory, is_out_of_memory, live_blocks};
pub use records::{AllocationRecords, MemoryRecord};
pub use session::{DeviceInfo, PoolSession, Report};
pub use watermarks::{PoolFigures, Sample, Source};

/// Why a CUDA measurement could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CudaError {
    /// No driver, the toolkit's stub, no device, or a driver too old for the bindings.
    #[error("{0}")]
    Unavailable(#[from] Unavailable),
    /// The ordinal is past the last device.
    #[error("no CUDA device {ordinal} (the driver reports {devices})")]
    NoSuchDevice { ordinal: usize, devices: usize },
    /// A driver call failed.
    #[error("{call} failed: {code}")]
    Driver { call: &'static str, code: String },
    /// cudarc panicked inside a driver call (a missing symbol in an old driver).
    #[error("{call} panicked: {message}")]
    Panicked { call: &'static str, message: String },
    /// A pool call on a device without memory pools.
    #[error("the device has no memory pools")]
    NoMemoryPools,
    /// Only high-water marks can be reset.
    #[error("{0:?} is not a high-water mark")]
    NotAHighWaterMark(PoolAttribute),
    /// A call of the per-allocation record source (CUPTI) failed while it was running.
    #[error("{call} failed: {code}")]
    Records { call: &'static str, code: String },
}

#[cfg(test)]
mod tests;
