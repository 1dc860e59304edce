//! The memory-pool attributes the probe reads.

/// A memory-pool attribute (`CU_MEMPOOL_ATTR_*`). All are 64-bit byte counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolAttribute {
    /// Bytes of the pool in use by the application.
    UsedCurrent,
    /// High-water mark of `UsedCurrent` since the last reset.
    UsedHigh,
    /// Bytes the pool has reserved from the device.
    ReservedCurrent,
    /// High-water mark of `ReservedCurrent` since the last reset.
    ReservedHigh,
}

impl PoolAttribute {
    /// Whether this is a high-water mark (the only attributes that can be reset).
    pub fn is_high_water_mark(self) -> bool {
        matches!(self, PoolAttribute::UsedHigh | PoolAttribute::ReservedHigh)
    }
}
