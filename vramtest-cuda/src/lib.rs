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
//!   pool watermarks and says so in [`SessionReport::fallback`] ("no CUPTI library …").
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
//!
//! It is a part of [vramtest](https://crates.io/crates/vramtest), whose `cuda` feature
//! (on by default) turns it on; a user's tests depend on `vramtest`. Devices, fidelity and
//! the cudarc and CUDA versions it builds beside are in the book,
//! <https://cargo-vramtest.github.io/cargo-vramtest/> ("Devices and fidelity").

#![deny(missing_docs)]

mod attribute;
mod constants;
mod cuda;
#[cfg(feature = "cupti")]
mod cupti;
mod driver;
mod error;
mod fake;
pub mod libs;
mod oom;
pub mod records;
mod session;
pub mod watermarks;

pub use constants::{DEVICE, DeviceConstants};
pub use cuda::{Availability, CudarcDriver, detect, parse_nvidia_version};
pub use driver::{Driver, PoolAttribute};
pub use error::CudaError;
pub use fake::{FakePool, GRANULE};
pub use libs::{Lookup, Unavailable, find_library, probe_driver};
pub use oom::{LiveBlocks, OutOfMemory, is_out_of_memory, live_blocks};
pub use records::{AllocationRecords, MemoryRecord};
pub use session::{DeviceInfo, PoolSession, SessionReport};
pub use watermarks::{PoolFigures, Sample, Source};

#[cfg(test)]
mod tests;
