//! The real device: [`detect`] and [`CudarcDriver`], over cudarc's driver API.
//!
//! [`detect`] asks the driver through symbols it looks up itself
//! ([`probe_driver`](crate::libs::probe_driver)), whatever linking cudarc was built
//! with, and only then are cudarc's bindings called; those calls also run under
//! [`std::panic::catch_unwind`] (cudarc's dynamic loader panics on a symbol an old
//! driver does not export).

use crate::CudaError;
use crate::driver::{Driver, PoolAttribute};
use crate::error::guard;
use crate::libs::{Unavailable, probe_driver};
use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::fmt;

/// Whether CUDA tests can run here.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Availability {
    /// The driver initialized and sees this many devices (at least one).
    Ready {
        /// How many devices the driver reports.
        devices: usize,
    },
    /// Why not: no libcuda, the toolkit's stub, no device, a driver too old.
    Unavailable(Unavailable),
}

impl Availability {
    /// Why CUDA tests cannot run here (`None` when ready): "no CUDA driver: …",
    /// "no CUDA device: …" or "CUDA driver too old: …".
    pub fn reason(&self) -> Option<String> {
        match self {
            Availability::Ready { .. } => None,
            Availability::Unavailable(why) => Some(why.to_string()),
        }
    }

    /// The number of devices (0 unless ready).
    pub fn devices(&self) -> usize {
        match self {
            Availability::Ready { devices } => *devices,
            _ => 0,
        }
    }

    /// `Ok(devices)` or the typed reason.
    pub fn into_result(self) -> Result<usize, Unavailable> {
        match self {
            Availability::Ready { devices } => Ok(devices),
            Availability::Unavailable(why) => Err(why),
        }
    }
}

/// What the device decision ([`vramtest_model::device::choose`]) is told: ready with
/// the device count, or unavailable with the reason.
impl From<Availability> for vramtest_model::device::CudaFound {
    fn from(found: Availability) -> Self {
        match found {
            Availability::Ready { devices } => Self::Ready { devices },
            Availability::Unavailable(why) => Self::Unavailable {
                reason: why.to_string(),
            },
        }
    }
}

impl fmt::Display for Availability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Availability::Ready { devices } => write!(f, "CUDA ready ({devices} device(s))"),
            other => f.write_str(&other.reason().unwrap_or_default()),
        }
    }
}

/// Finds out whether CUDA tests can run: libcuda present (under cudarc's names, in
/// cudarc's order) and not the toolkit's stub, `cuInit` succeeds, the driver exports
/// every function the probe calls ([`DRIVER_SYMBOLS`](crate::libs::DRIVER_SYMBOLS)), at
/// least one device; then initializes cudarc's bindings too. Never panics.
pub fn detect() -> Availability {
    let probe = match probe_driver() {
        Ok(probe) => probe,
        Err(why) => return Availability::Unavailable(why),
    };
    // The driver answered through its own symbols; cudarc's bindings (loaded or linked)
    // must agree before any session uses them. They open libcuda under the same names
    // in the same order, so they reach the same library; should they not, their answer
    // is reported as it is (the toolkit's stub, a code), never as a made-up one.
    let answer = guard("cuInit", || {
        Ok(result::init()
            .map_err(|e| ("cuInit", e))
            .and_then(|()| result::device::get_count().map_err(|e| ("cuDeviceGetCount", e))))
    });
    match answer {
        Ok(Ok(n)) if n > 0 => Availability::Ready {
            devices: probe.devices.min(n as usize),
        },
        Ok(Ok(_)) => Availability::Unavailable(Unavailable::NoDevice),
        Ok(Err((_, e))) if e.0 == sys::CUresult::CUDA_ERROR_STUB_LIBRARY => {
            Availability::Unavailable(Unavailable::StubLibrary {
                library: "the libcuda cudarc's loader opened".to_owned(),
                driver: Some(probe.library),
            })
        }
        Ok(Err((_, e))) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => {
            Availability::Unavailable(Unavailable::NoDevice)
        }
        Ok(Err((call, e))) => Availability::Unavailable(Unavailable::DriverFailed {
            call,
            code: e.0 as i32,
        }),
        Err(_) => Availability::Unavailable(Unavailable::DriverFailed {
            call: "cuInit (cudarc's loader panicked)",
            code: -1,
        }),
    }
}

fn driver_error(call: &'static str) -> impl FnOnce(result::DriverError) -> CudaError {
    move |e| CudaError::Driver {
        call,
        code: format!("{:?}", e.0),
    }
}

/// [`Driver`] for device ordinal `n`, over cudarc's driver API.
///
/// Retains the device's primary context (the one cudarc's `CudaContext::new(n)` and so
/// candle use) for its lifetime and makes it current on the calling thread before each
/// call; the pool is the device's *current* memory pool (`cuDeviceGetMemPool`, the
/// default pool unless the program set another), the one `cuMemAllocAsync` uses, looked
/// up once at construction.
#[derive(Debug)]
pub struct CudarcDriver {
    ordinal: usize,
    device: sys::CUdevice,
    ctx: sys::CUcontext,
    pool: Option<sys::CUmemoryPool>,
}

// SAFETY: the handles are process-wide driver objects, usable from any thread; every
// call that needs a current context makes ours current on the calling thread first
// (cudarc's `CudaContext` is Send + Sync on the same grounds).
unsafe impl Send for CudarcDriver {}
unsafe impl Sync for CudarcDriver {}

impl CudarcDriver {
    /// Opens device `ordinal`. Fails (never panics) without a driver or device.
    pub fn new(ordinal: usize) -> Result<CudarcDriver, CudaError> {
        match detect() {
            Availability::Ready { devices } if ordinal < devices => {}
            Availability::Ready { devices } => {
                return Err(CudaError::NoSuchDevice { ordinal, devices });
            }
            Availability::Unavailable(why) => return Err(CudaError::Unavailable(why)),
        }
        guard("cuDevicePrimaryCtxRetain", || {
            let device =
                result::device::get(ordinal as i32).map_err(driver_error("cuDeviceGet"))?;
            // SAFETY: `device` comes from cuDeviceGet; released in Drop.
            let ctx = unsafe { result::primary_ctx::retain(device) }
                .map_err(driver_error("cuDevicePrimaryCtxRetain"))?;
            let mut driver = CudarcDriver {
                ordinal,
                device,
                ctx,
                pool: None,
            };
            driver.bind()?;
            if driver.memory_pools_supported()? {
                // SAFETY: a valid device.
                let pool = unsafe { result::device::get_mem_pool(device) }
                    .map_err(driver_error("cuDeviceGetMemPool"))?;
                driver.pool = Some(pool);
            }
            Ok(driver)
        })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Makes the retained context current on this thread (cheap when it already is).
    fn bind(&self) -> Result<(), CudaError> {
        let current = result::ctx::get_current().map_err(driver_error("cuCtxGetCurrent"))?;
        if current != Some(self.ctx) {
            // SAFETY: a context we retained and have not released.
            unsafe { result::ctx::set_current(self.ctx) }
                .map_err(driver_error("cuCtxSetCurrent"))?;
        }
        Ok(())
    }

    fn pool(&self) -> Result<sys::CUmemoryPool, CudaError> {
        self.pool.ok_or(CudaError::NoMemoryPools)
    }
}

fn attribute_of(a: PoolAttribute) -> sys::CUmemPool_attribute {
    use sys::CUmemPool_attribute::*;
    match a {
        PoolAttribute::UsedCurrent => CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
        PoolAttribute::UsedHigh => CU_MEMPOOL_ATTR_USED_MEM_HIGH,
        PoolAttribute::ReservedCurrent => CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
        PoolAttribute::ReservedHigh => CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
    }
}

impl Driver for CudarcDriver {
    fn synchronize(&self) -> Result<(), CudaError> {
        guard("cuCtxSynchronize", || {
            self.bind()?;
            result::ctx::synchronize().map_err(driver_error("cuCtxSynchronize"))
        })
    }

    fn memory_pools_supported(&self) -> Result<bool, CudaError> {
        guard("cuDeviceGetAttribute", || {
            // SAFETY: a valid device.
            let v = unsafe {
                result::device::get_attribute(
                    self.device,
                    sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                )
            }
            .map_err(driver_error("cuDeviceGetAttribute"))?;
            Ok(v > 0)
        })
    }

    fn pool_attribute(&self, attribute: PoolAttribute) -> Result<u64, CudaError> {
        let pool = self.pool()?;
        guard("cuMemPoolGetAttribute", || {
            let mut value: sys::cuuint64_t = 0;
            // SAFETY: a valid pool; these four attributes are cuuint64_t.
            unsafe {
                result::mem_pool::get_attribute(
                    pool,
                    attribute_of(attribute),
                    (&mut value as *mut sys::cuuint64_t).cast::<c_void>(),
                )
            }
            .map_err(driver_error("cuMemPoolGetAttribute"))?;
            Ok(value)
        })
    }

    fn reset_high_water_mark(&self, attribute: PoolAttribute) -> Result<(), CudaError> {
        if !attribute.is_high_water_mark() {
            return Err(CudaError::NotAHighWaterMark(attribute));
        }
        let pool = self.pool()?;
        guard("cuMemPoolSetAttribute", || {
            // The driver accepts only 0: "reset the high-water mark to the current value".
            let mut zero: sys::cuuint64_t = 0;
            // SAFETY: a valid pool; a high-water attribute takes a cuuint64_t.
            unsafe {
                result::mem_pool::set_attribute(
                    pool,
                    attribute_of(attribute),
                    (&mut zero as *mut sys::cuuint64_t).cast::<c_void>(),
                )
            }
            .map_err(driver_error("cuMemPoolSetAttribute"))
        })
    }

    fn mem_get_info(&self) -> Result<(u64, u64), CudaError> {
        guard("cuMemGetInfo", || {
            self.bind()?;
            let (free, total) = result::mem_get_info().map_err(driver_error("cuMemGetInfo"))?;
            Ok((free as u64, total as u64))
        })
    }

    fn device_name(&self) -> Result<String, CudaError> {
        guard("cuDeviceGetName", || {
            result::device::get_name(self.device).map_err(driver_error("cuDeviceGetName"))
        })
    }

    fn driver_version(&self) -> Option<String> {
        std::fs::read_to_string("/proc/driver/nvidia/version")
            .ok()
            .and_then(|text| parse_nvidia_version(&text))
    }

    fn cuda_version(&self) -> Result<(u32, u32), CudaError> {
        guard("cuDriverGetVersion", || {
            let mut v: std::ffi::c_int = 0;
            // SAFETY: writes one int.
            unsafe { sys::cuDriverGetVersion(&mut v) }
                .result()
                .map_err(driver_error("cuDriverGetVersion"))?;
            Ok(((v / 1000) as u32, ((v % 1000) / 10) as u32))
        })
    }

    /// With the `cupti` feature: CUPTI's `MEMORY2` activity records of this device, or
    /// why not ("no CUPTI library …").
    #[cfg(feature = "cupti")]
    fn allocation_records(
        &self,
    ) -> Option<
        Result<Box<dyn crate::records::AllocationRecords>, crate::records::RecordsUnavailable>,
    > {
        Some(
            crate::cupti::Cupti::start(Some(self.ctx), self.ordinal)
                .map(|c| Box::new(c) as Box<dyn crate::records::AllocationRecords>),
        )
    }
}

impl Drop for CudarcDriver {
    fn drop(&mut self) {
        let device = self.device;
        // SAFETY: we retained this device's primary context once in `new`.
        let _ = guard("cuDevicePrimaryCtxRelease", || {
            unsafe { result::primary_ctx::release(device) }
                .map_err(driver_error("cuDevicePrimaryCtxRelease"))
        });
    }
}

/// The kernel module's version from `/proc/driver/nvidia/version`
/// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar …").
pub fn parse_nvidia_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    line.split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.split('.').count() >= 2
                && w.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine (and CI) has no NVIDIA driver: detect() must say so, not panic.
    /// On a GPU machine it must find the devices instead.
    #[test]
    fn detect_never_panics_and_names_the_reason() {
        let a = detect();
        match &a {
            Availability::Ready { devices } => assert!(*devices > 0),
            Availability::Unavailable(why) => {
                let reason = why.to_string();
                assert!(
                    reason.starts_with("no CUDA driver")
                        || reason.starts_with("no CUDA device")
                        || reason.starts_with("CUDA driver too old"),
                    "{reason}"
                )
            }
        }
        // Twice: detection has no lasting side effect that breaks a second call.
        assert_eq!(detect(), a);
    }

    #[test]
    fn without_a_driver_the_driver_cannot_be_opened_and_does_not_panic() {
        if let Availability::Ready { devices } = detect() {
            // A GPU machine: an ordinal past the end is an error, not a panic.
            let err = CudarcDriver::new(devices).unwrap_err();
            assert!(matches!(err, CudaError::NoSuchDevice { .. }), "{err}");
        } else {
            let err = CudarcDriver::new(0).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("no CUDA"), "{text}");
        }
    }

    #[test]
    fn parses_the_kernel_module_version() {
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version:  gcc version 12.3.0\n";
        assert_eq!(parse_nvidia_version(text).as_deref(), Some("550.54.15"));
        let open =
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n";
        assert_eq!(parse_nvidia_version(open).as_deref(), Some("570.86.15"));
        assert_eq!(parse_nvidia_version("nothing"), None);
    }
}
