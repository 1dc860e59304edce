//! [`FakePool`]: a [`Driver`] that behaves like a CUDA device with a stream-ordered
//! memory pool, driven by a test. CPU only.

use crate::CudaError;
use crate::driver::{Driver, PoolAttribute};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The granule a pool reserves device memory in (2 MiB, as CUDA's pools do).
pub const GRANULE: u64 = 2 << 20;

/// A fake device with a memory pool. Clones share one device, so a test keeps a clone
/// to allocate and free while a session owns another.
///
/// Behaviour:
/// - [`alloc`](FakePool::alloc) takes from the pool at once (used grows; reserved grows
///   in [`GRANULE`]s to cover used, and never shrinks);
/// - [`free`](FakePool::free) is stream-ordered: it lands only at the next
///   [`synchronize`](Driver::synchronize) (without pools, frees are immediate, like
///   `cuMemFree`);
/// - high-water marks follow their current values and are reset *to the current value*
///   by [`reset_high_water_mark`](Driver::reset_high_water_mark);
/// - the device's used bytes (`total − free` of `mem_get_info`) are a fixed `context`
///   amount + memory allocated outside the pool ([`alloc_outside`](FakePool::alloc_outside):
///   a cuBLAS workspace, a loaded module) + the pool's *reserved* bytes (used bytes
///   without pools).
#[derive(Debug, Clone)]
pub struct FakePool {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    pools: bool,
    total: u64,
    context: u64,
    outside: u64,
    used: u64,
    used_high: u64,
    reserved: u64,
    reserved_high: u64,
    live: HashMap<u64, u64>,
    pending_frees: Vec<u64>,
    next_id: u64,
    syncs: u64,
}

impl FakePool {
    /// A device of `total` bytes whose context already uses `context` bytes, with pools.
    pub fn new(total: u64, context: u64) -> FakePool {
        FakePool {
            state: Arc::new(Mutex::new(State {
                pools: true,
                total,
                context,
                ..State::default()
            })),
        }
    }

    /// The same without memory pool support (`cuMemAlloc`/`cuMemFree` only).
    pub fn without_pools(total: u64, context: u64) -> FakePool {
        let pool = FakePool::new(total, context);
        pool.lock().pools = false;
        pool
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allocates `bytes` from the pool (stream-ordered, but effective at once); returns
    /// the allocation's id.
    pub fn alloc(&self, bytes: u64) -> u64 {
        let mut s = self.lock();
        s.next_id += 1;
        let id = s.next_id;
        s.live.insert(id, bytes);
        s.used += bytes;
        s.used_high = s.used_high.max(s.used);
        if s.pools {
            let needed = s.used.div_ceil(GRANULE) * GRANULE;
            s.reserved = s.reserved.max(needed);
            s.reserved_high = s.reserved_high.max(s.reserved);
        }
        id
    }

    /// Frees allocation `id`: queued until the next synchronize (immediate without pools).
    pub fn free(&self, id: u64) {
        let mut s = self.lock();
        if s.pools {
            s.pending_frees.push(id);
        } else if let Some(bytes) = s.live.remove(&id) {
            s.used -= bytes;
        }
    }

    /// Device memory allocated outside the pool (grows `device used` only).
    pub fn alloc_outside(&self, bytes: u64) {
        self.lock().outside += bytes;
    }

    /// Releases device memory allocated outside the pool.
    pub fn free_outside(&self, bytes: u64) {
        let mut s = self.lock();
        s.outside = s.outside.saturating_sub(bytes);
    }

    /// Pool bytes in use now (pending frees still count).
    pub fn used(&self) -> u64 {
        self.lock().used
    }

    /// Pool bytes reserved now.
    pub fn reserved(&self) -> u64 {
        self.lock().reserved
    }

    /// Frees waiting for a synchronize.
    pub fn pending_frees(&self) -> usize {
        self.lock().pending_frees.len()
    }

    /// How many times the device was synchronized.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }
}

impl State {
    fn device_used(&self) -> u64 {
        self.context + self.outside + if self.pools { self.reserved } else { self.used }
    }
}

impl Driver for FakePool {
    fn synchronize(&self) -> Result<(), CudaError> {
        let mut s = self.lock();
        s.syncs += 1;
        for id in std::mem::take(&mut s.pending_frees) {
            if let Some(bytes) = s.live.remove(&id) {
                s.used -= bytes;
            }
        }
        Ok(())
    }

    fn memory_pools_supported(&self) -> Result<bool, CudaError> {
        Ok(self.lock().pools)
    }

    fn pool_attribute(&self, attribute: PoolAttribute) -> Result<u64, CudaError> {
        let s = self.lock();
        if !s.pools {
            return Err(CudaError::NoMemoryPools);
        }
        Ok(match attribute {
            PoolAttribute::UsedCurrent => s.used,
            PoolAttribute::UsedHigh => s.used_high,
            PoolAttribute::ReservedCurrent => s.reserved,
            PoolAttribute::ReservedHigh => s.reserved_high,
        })
    }

    fn reset_high_water_mark(&self, attribute: PoolAttribute) -> Result<(), CudaError> {
        let mut s = self.lock();
        if !s.pools {
            return Err(CudaError::NoMemoryPools);
        }
        match attribute {
            PoolAttribute::UsedHigh => s.used_high = s.used,
            PoolAttribute::ReservedHigh => s.reserved_high = s.reserved,
            other => return Err(CudaError::NotAHighWaterMark(other)),
        }
        Ok(())
    }

    fn mem_get_info(&self) -> Result<(u64, u64), CudaError> {
        let s = self.lock();
        Ok((s.total.saturating_sub(s.device_used()), s.total))
    }

    fn device_name(&self) -> Result<String, CudaError> {
        Ok("FakePool".to_owned())
    }

    fn driver_version(&self) -> Option<String> {
        None
    }

    fn cuda_version(&self) -> Result<(u32, u32), CudaError> {
        Ok((12, 8))
    }
}
