//! What the fakes assume of a CUDA device, in one table ([`DEVICE`]), each value with
//! its source: NVIDIA's documentation where it says, else an assumption that the GPU
//! bundle's probe measures (`pool_semantics` prints a `constants:` line with the same
//! names; a bundle run's values go here, with the GPU and driver they were measured
//! on). [`FakePool`](crate::FakePool), the pool model of `vramtest-model`
//! (`pool::DEFAULT_ALIGNMENT`, `DEFAULT_GRANULARITY`, `DEFAULT_CUDA_CONTEXT`) and the
//! multi-GPU fake driver of cargo-vramtest's tests take their values from here or are
//! tested against it.

/// The values, by name (see each field for its source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceConstants {
    /// Every allocation's address alignment, 256 B: "any address ... returned by one of
    /// the memory allocation routines from the driver or runtime API is always aligned
    /// to at least 256 bytes" (CUDA C++ Programming Guide, "Device Memory Accesses").
    /// Others have measured 512 B for the stream-ordered allocator: `pool_semantics`
    /// measures it (`alignment`: the distance between two 1-byte allocations). The
    /// pool's used counter may count blocks so rounded ([`FakePool::with_alignment`](
    /// crate::FakePool::with_alignment)); the fake's default counts requests as made
    /// (alignment 1), a departure kept so that the tests' byte sums stay exact.
    pub alignment: u64,
    /// The granule the pool reserves device memory in, 2 MiB: an assumption, not
    /// documented ("the OS allocations may happen at different granularity from the
    /// user allocations", `cuMemPoolTrimTo`). `pool_semantics` measures it (`granule`:
    /// the pool's reserved bytes after one 1-byte allocation).
    pub granule: u64,
    /// The CUDA context's device memory, 512 MiB: an estimate, not documented (it
    /// depends on the GPU, the driver and lazy loading). `pool_semantics` measures the
    /// device's used bytes once the primary context exists (`context`, other
    /// processes included). The fakes take any value (a parameter of `FakePool::new`).
    pub context: u64,
    /// The pool's release threshold, 0: its default (Driver API,
    /// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`), so reserved memory above what is used is
    /// released at the next synchronize. `pool_semantics` reports whether it was
    /// (`reserved ... trimmed at the synchronize`).
    pub release_threshold: u64,
    /// The value that resets a high-water mark, 0: "setting it to 0 resets the high
    /// watermark to the current value" (`cuMemPoolSetAttribute`, `USED_MEM_HIGH`,
    /// `RESERVED_MEM_HIGH`); any other value is an error.
    pub high_water_reset: u64,
    /// Whether `cuMemGetInfo`'s used bytes (`total − free`) include other processes'
    /// memory on the device: yes (1), it reports the device's free memory, not this
    /// context's ("the free and total amount of memory available for allocation",
    /// `cuMemGetInfo`); [`FakePool::alloc_outside`](crate::FakePool::alloc_outside)
    /// plays another process as well as a library's own allocation.
    pub mem_get_info_device_wide: u64,
}

/// The table (see [`DeviceConstants`] for each value's source).
pub const DEVICE: DeviceConstants = DeviceConstants {
    alignment: 256,
    granule: 2 << 20,
    context: 512 << 20,
    release_threshold: 0,
    high_water_reset: 0,
    mem_get_info_device_wide: 1,
};

impl DeviceConstants {
    /// The table as `pool_semantics` prints its measurement: `name=value` pairs.
    pub fn line(&self) -> String {
        format!(
            "alignment={} granule={} context={} release_threshold={} high_water_reset={} mem_get_info_device_wide={}",
            self.alignment,
            self.granule,
            self.context,
            self.release_threshold,
            self.high_water_reset,
            self.mem_get_info_device_wide
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool model of vramtest-model and the fakes use the table's values.
    #[test]
    fn the_model_and_the_fakes_use_the_table() {
        use vramtest_model::pool;
        assert_eq!(pool::DEFAULT_ALIGNMENT, DEVICE.alignment);
        assert_eq!(pool::DEFAULT_GRANULARITY, DEVICE.granule);
        assert_eq!(pool::DEFAULT_CUDA_CONTEXT, DEVICE.context);
        assert_eq!(crate::GRANULE, DEVICE.granule);
        // The fake's pool trims to the threshold at a synchronize and resets marks to
        // the current value.
        use crate::{Driver, FakePool, PoolAttribute};
        let fake = FakePool::new(1 << 30, DEVICE.context);
        let id = fake.alloc(3 << 20);
        fake.free(id);
        fake.synchronize().unwrap();
        assert_eq!(fake.reserved(), DEVICE.release_threshold);
        fake.alloc(1 << 20);
        fake.reset_high_water_mark(PoolAttribute::UsedHigh).unwrap();
        assert_eq!(
            fake.pool_attribute(PoolAttribute::UsedHigh).unwrap(),
            1 << 20
        );
        let (free, total) = fake.mem_get_info().unwrap();
        fake.alloc_outside(5 << 20); // another process
        let (free_after, _) = fake.mem_get_info().unwrap();
        assert_eq!(free - free_after, 5 << 20);
        assert_eq!(total, 1 << 30);
    }

    #[test]
    fn the_line_names_every_value() {
        assert_eq!(
            DEVICE.line(),
            "alignment=256 granule=2097152 context=536870912 release_threshold=0 high_water_reset=0 mem_get_info_device_wide=1"
        );
    }
}
