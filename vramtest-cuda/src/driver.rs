//! The few driver calls the probe needs, behind a trait so the arithmetic can be tested
//! on a CPU with [`FakePool`](crate::FakePool).

use crate::CudaError;
pub use crate::attribute::PoolAttribute;
use crate::records::AllocationRecords;
use crate::watermarks::Sample;

/// What the probe asks of a CUDA device. Every call concerns one device (and, for pool
/// calls, that device's current memory pool, the one `cuMemAllocAsync` allocates from).
pub trait Driver {
    /// Waits for all work queued on the device's context (so stream-ordered frees land).
    fn synchronize(&self) -> Result<(), CudaError>;
    /// Whether the device supports memory pools (`CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`).
    fn memory_pools_supported(&self) -> Result<bool, CudaError>;
    /// Reads a pool attribute (`cuMemPoolGetAttribute`).
    fn pool_attribute(&self, attribute: PoolAttribute) -> Result<u64, CudaError>;
    /// Resets a high-water mark to the current value (`cuMemPoolSetAttribute` with 0).
    fn reset_high_water_mark(&self, attribute: PoolAttribute) -> Result<(), CudaError>;
    /// `(free, total)` device bytes (`cuMemGetInfo`).
    fn mem_get_info(&self) -> Result<(u64, u64), CudaError>;
    /// The device's name ("NVIDIA H100 80GB HBM3").
    fn device_name(&self) -> Result<String, CudaError>;
    /// The kernel driver's version ("550.54.15"), where the system says it.
    fn driver_version(&self) -> Option<String>;
    /// The CUDA version the driver supports (`cuDriverGetVersion`), as `(major, minor)`.
    fn cuda_version(&self) -> Result<(u32, u32), CudaError>;
    /// Starts a source of per-allocation records for this device, called once when a
    /// [`PoolSession`](crate::PoolSession) starts: `None` when the build or the driver
    /// has none (the default), `Some(Err(reason))` when it has one that cannot run here
    /// (the reason becomes the report's `fallback`, e.g. "no CUPTI library …").
    fn allocation_records(
        &self,
    ) -> Option<Result<Box<dyn AllocationRecords>, crate::records::RecordsUnavailable>> {
        None
    }
}

/// Takes one boundary sample: synchronize, read the pool's counters and the device's
/// used bytes, then reset both high-water marks (so the next sample's marks cover only
/// the interval since this one).
pub(crate) fn sample<D: Driver + ?Sized>(
    driver: &D,
    pools: bool,
    before_event: usize,
) -> Result<Sample, CudaError> {
    driver.synchronize()?;
    let (free, total) = driver.mem_get_info()?;
    let device_used = total.saturating_sub(free);
    if !pools {
        return Ok(Sample {
            before_event,
            used: device_used,
            used_high: device_used,
            reserved: 0,
            reserved_high: 0,
            device_used,
        });
    }
    let used = driver.pool_attribute(PoolAttribute::UsedCurrent)?;
    let used_high = driver.pool_attribute(PoolAttribute::UsedHigh)?;
    let reserved = driver.pool_attribute(PoolAttribute::ReservedCurrent)?;
    let reserved_high = driver.pool_attribute(PoolAttribute::ReservedHigh)?;
    driver.reset_high_water_mark(PoolAttribute::UsedHigh)?;
    driver.reset_high_water_mark(PoolAttribute::ReservedHigh)?;
    Ok(Sample {
        before_event,
        used,
        used_high: used_high.max(used),
        reserved,
        reserved_high: reserved_high.max(reserved),
        device_used,
    })
}
