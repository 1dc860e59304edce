//! [`FakePool`]: a [`Driver`] that behaves like a CUDA device with a stream-ordered
//! memory pool, driven by a test. CPU only.

use crate::CudaError;
use crate::driver::{Driver, PoolAttribute};
use crate::records::{AllocationRecords, MemoryKind, MemoryRecord, Operation};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// The granule a pool reserves device memory in: [`DEVICE`](crate::DEVICE)`.granule`.
pub const GRANULE: u64 = crate::DEVICE.granule;

/// A fake device with a memory pool. Clones share one device, so a test keeps a clone
/// to allocate and free while a session owns another.
///
/// Behaviour, each from NVIDIA's documentation of the stream-ordered allocator (CUDA C++
/// Programming Guide, "Stream Ordered Memory Allocator"; CUDA Driver API,
/// `cuMemPoolSetAttribute`), on the one stream the fake has:
/// - [`alloc`](FakePool::alloc) takes from the pool at once: used grows; reserved grows
///   in [`GRANULE`]s to cover used (the pool maps physical memory in chunks). The 2 MiB
///   granule is an assumption (the guide gives no size), unconfirmed on hardware; the
///   values the fake assumes and their sources are one table, [`DEVICE`](crate::DEVICE).
/// - [`free`](FakePool::free) is stream-ordered, and "memory freed on a stream can be
///   reused by subsequent allocations on the same stream" at once (guide, "Memory
///   Reuse Policies"): used drops at the free, so on one stream alloc A, free A,
///   alloc B peaks at max(A, B), not A + B. Whether `USED_MEM_HIGH` reads so on a real
///   device is what the bundle's probe (`pool_semantics`) measures: unconfirmed on
///   hardware until it has run. Without pools frees are immediate (`cuMemFree`).
/// - at a synchronize, the pool trims its reserved memory to what is used, rounded up
///   to the granule: "when more than the release threshold bytes of memory are held by
///   the memory pool, the allocator will try to release memory back to the OS on the
///   next call to stream, event or context synchronize", and the threshold defaults to
///   0 (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`, Driver API reference; guide, "Physical
///   Page Caching Behavior"). [`set_release_threshold`](FakePool::set_release_threshold)
///   keeps that much reserved, as a framework that raises the threshold does.
/// - high-water marks follow their current values and are reset *to the current value*
///   by [`reset_high_water_mark`](Driver::reset_high_water_mark) ("setting it to 0
///   resets the high watermark to the current value", `cuMemPoolSetAttribute`);
/// - the device's used bytes (`total − free` of `mem_get_info`) are a fixed `context`
///   amount + memory allocated outside the pool ([`alloc_outside`](FakePool::alloc_outside):
///   a cuBLAS workspace, a loaded module) + the pool's *reserved* bytes (used bytes
///   without pools);
/// - [`with_fragmentation`](FakePool::with_fragmentation) makes the pool place blocks
///   in one address space and never move them: a freed range is reused only by a block
///   that fits in it (the lowest such range: first fit), and reserved memory is every
///   granule a live block touches (since the last synchronize: every granule a block
///   touched), so reserved can stay above used after a synchronize. Where a pool puts a
///   block is not documented; first fit is this fake's choice, independent of the pool
///   model of `vramtest-model` (best fit), so a test can see where the two agree. By
///   default the fake's reserved memory only covers its used bytes, as a pool that could
///   move its blocks would;
/// - [`try_alloc`](FakePool::try_alloc) fails with `CUDA_ERROR_OUT_OF_MEMORY` when the
///   device has no room for the request;
/// - [`with_records`](FakePool::with_records) makes it a source of per-allocation
///   records, like CUPTI: every `alloc` and `free` (at the call) is logged with a
///   logical timestamp, and the log is delivered at each flush;
///   [`with_records_unavailable`](FakePool::with_records_unavailable) plays a build
///   whose record source cannot start (no libcupti).
#[derive(Debug, Clone)]
pub struct FakePool {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    pools: bool,
    /// The pool rounds every allocation up to a multiple of this (0 or 1: not at all).
    alignment: u64,
    total: u64,
    context: u64,
    outside: u64,
    used: u64,
    used_high: u64,
    reserved: u64,
    reserved_high: u64,
    live: HashMap<u64, u64>,
    /// Where blocks lie, when the pool fragments (see the type's documentation).
    placement: Option<Placement>,
    release_threshold: u64,
    next_id: u64,
    syncs: u64,
    records: RecordMode,
    /// Records not flushed yet.
    log: Vec<MemoryRecord>,
    /// The logical clock of the records and of `now`.
    clock: u64,
}

/// The address space of a pool that cannot move its blocks.
#[derive(Debug, Default)]
struct Placement {
    /// Live blocks of at least one byte: address → aligned length.
    blocks: BTreeMap<u64, u64>,
    /// The address of each such block, by id.
    address: HashMap<u64, u64>,
    /// The granules mapped from the device, by number (address / granule).
    mapped: BTreeSet<u64>,
}

impl Placement {
    /// First fit: the lowest free range between live blocks that holds `bytes`, else
    /// the end of the last block.
    fn place(&self, bytes: u64) -> u64 {
        let mut end = 0;
        for (&address, &len) in &self.blocks {
            if address - end >= bytes {
                return end;
            }
            end = address + len;
        }
        end
    }

    /// The granules `bytes` at `address` touch.
    fn granules(address: u64, bytes: u64) -> std::ops::Range<u64> {
        address / GRANULE..(address + bytes).div_ceil(GRANULE)
    }

    /// Reserved bytes once `bytes` more are placed (nothing is changed).
    fn reserved_with(&self, bytes: u64) -> u64 {
        let mapped = self.mapped.len() as u64;
        if bytes == 0 {
            return mapped * GRANULE;
        }
        let new = Placement::granules(self.place(bytes), bytes)
            .filter(|g| !self.mapped.contains(g))
            .count() as u64;
        (mapped + new) * GRANULE
    }

    /// Places block `id` of `bytes` (aligned) and maps its granules; returns reserved.
    fn alloc(&mut self, id: u64, bytes: u64) -> u64 {
        if bytes > 0 {
            let address = self.place(bytes);
            self.blocks.insert(address, bytes);
            self.address.insert(id, address);
            self.mapped.extend(Placement::granules(address, bytes));
        }
        self.mapped.len() as u64 * GRANULE
    }

    /// Frees block `id`: its range is free at once, its granules stay mapped.
    fn free(&mut self, id: u64) {
        if let Some(address) = self.address.remove(&id) {
            self.blocks.remove(&address);
        }
    }

    /// At a synchronize: unmaps the granules no live block touches, keeping up to
    /// `threshold` bytes mapped (the lowest granules first); returns reserved.
    fn trim(&mut self, threshold: u64) -> u64 {
        let mut keep: BTreeSet<u64> = self
            .blocks
            .iter()
            .flat_map(|(&address, &bytes)| Placement::granules(address, bytes))
            .collect();
        for &g in &self.mapped {
            if (keep.len() as u64 + 1) * GRANULE > threshold {
                break;
            }
            keep.insert(g);
        }
        self.mapped = keep;
        self.mapped.len() as u64 * GRANULE
    }
}

#[derive(Debug, Default, Clone)]
enum RecordMode {
    #[default]
    Off,
    On,
    Unavailable(String),
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

    /// The same device, its pool rounding every allocation up to a multiple of
    /// `alignment` bytes in its used counters (as a pool that hands out aligned blocks
    /// counts them): 256 B is the documented minimum address alignment, 512 B what
    /// others measured for the async allocator; [`DEVICE`](crate::DEVICE) says which.
    pub fn with_alignment(self, alignment: u64) -> FakePool {
        self.lock().alignment = alignment;
        self
    }

    /// The same device, its pool fragmenting: blocks stay where they were placed, and
    /// reserved memory is the granules they touch (see the type's documentation).
    pub fn with_fragmentation(self) -> FakePool {
        self.lock().placement = Some(Placement::default());
        self
    }

    /// The same device, also a source of per-allocation records (see the type's doc).
    pub fn with_records(self) -> FakePool {
        self.lock().records = RecordMode::On;
        self
    }

    /// The same device, with a record source that cannot start: `reason` becomes the
    /// session's fallback.
    pub fn with_records_unavailable(self, reason: &str) -> FakePool {
        self.lock().records = RecordMode::Unavailable(reason.to_owned());
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A device allocation on another device (`device` ≠ 0): a record only, no change
    /// to this device's counters.
    pub fn alloc_on_device(&self, device: u32, bytes: u64) -> u64 {
        let mut s = self.lock();
        s.next_id += 1;
        let id = s.next_id;
        s.record(Operation::Allocation, id, bytes, device);
        id
    }

    /// Allocates `bytes` from the pool (stream-ordered, but effective at once); returns
    /// the allocation's id. Never fails (see [`try_alloc`](FakePool::try_alloc)).
    pub fn alloc(&self, bytes: u64) -> u64 {
        let mut s = self.lock();
        s.alloc(bytes)
    }

    /// [`alloc`](FakePool::alloc), failing like `cuMemAllocAsync` with
    /// `CUDA_ERROR_OUT_OF_MEMORY` when the device cannot hold the request (its used
    /// bytes plus what the pool must reserve for it would pass the total).
    pub fn try_alloc(&self, bytes: u64) -> Result<u64, CudaError> {
        let mut s = self.lock();
        let aligned = s.aligned(bytes);
        let used = s.used + aligned;
        let reserved = match (&s.placement, s.pools) {
            (_, false) => used,
            (Some(placement), true) => placement.reserved_with(aligned),
            (None, true) => s.reserved.max(used.div_ceil(GRANULE) * GRANULE),
        };
        if s.context + s.outside + reserved > s.total {
            return Err(CudaError::Driver {
                call: "cuMemAllocAsync",
                code: "CUDA_ERROR_OUT_OF_MEMORY".to_owned(),
            });
        }
        Ok(s.alloc(bytes))
    }

    /// Frees allocation `id`, stream-ordered: reusable by the next allocation on the
    /// stream at once, so it leaves `used` now; reserved memory is released at the next
    /// synchronize (see the type's documentation).
    pub fn free(&self, id: u64) {
        let mut s = self.lock();
        if let Some(bytes) = s.live.remove(&id) {
            s.record(Operation::Release, id, bytes, 0);
            s.used -= bytes;
            if let Some(placement) = &mut s.placement {
                placement.free(id);
            }
        }
    }

    /// Keeps up to `bytes` reserved at a synchronize (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`;
    /// 0 by default).
    pub fn set_release_threshold(&self, bytes: u64) {
        self.lock().release_threshold = bytes;
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

    /// How many times the device was synchronized.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }
}

impl State {
    fn alloc(&mut self, bytes: u64) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.record(Operation::Allocation, id, bytes, 0);
        let bytes = self.aligned(bytes);
        self.live.insert(id, bytes);
        self.used += bytes;
        self.used_high = self.used_high.max(self.used);
        if self.pools {
            self.reserved = match &mut self.placement {
                Some(placement) => placement.alloc(id, bytes),
                None => self.reserved.max(self.used.div_ceil(GRANULE) * GRANULE),
            };
            self.reserved_high = self.reserved_high.max(self.reserved);
        }
        id
    }

    /// `bytes` as the pool counts them (rounded up to the alignment).
    fn aligned(&self, bytes: u64) -> u64 {
        if self.pools && self.alignment > 1 {
            bytes.div_ceil(self.alignment) * self.alignment
        } else {
            bytes
        }
    }

    fn device_used(&self) -> u64 {
        self.context + self.outside + if self.pools { self.reserved } else { self.used }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn record(&mut self, operation: Operation, address: u64, bytes: u64, device: u32) {
        if matches!(self.records, RecordMode::On) {
            let timestamp = self.tick();
            self.log.push(MemoryRecord {
                operation,
                kind: MemoryKind::Device,
                address,
                bytes,
                timestamp,
                device,
            });
        }
    }
}

/// [`FakePool`]'s record source: its log, flushed.
#[derive(Debug)]
struct FakeRecords {
    state: Arc<Mutex<State>>,
}

impl FakeRecords {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl AllocationRecords for FakeRecords {
    fn name(&self) -> &'static str {
        "FakePool"
    }

    fn device(&self) -> u32 {
        0
    }

    fn now(&self) -> Option<u64> {
        Some(self.lock().tick())
    }

    fn flush(&mut self) -> Result<Vec<MemoryRecord>, CudaError> {
        Ok(std::mem::take(&mut self.lock().log))
    }
}

impl Driver for FakePool {
    fn synchronize(&self) -> Result<(), CudaError> {
        let mut s = self.lock();
        s.syncs += 1;
        if s.pools && s.reserved > s.release_threshold {
            let threshold = s.release_threshold;
            s.reserved = match &mut s.placement {
                // Trim to the granules live blocks touch, keeping the threshold.
                Some(placement) => placement.trim(threshold),
                // Trim to what is used (whole granules), keeping the threshold.
                None => {
                    let keep = (s.used.div_ceil(GRANULE) * GRANULE).max(threshold);
                    s.reserved.min(keep)
                }
            };
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

    fn allocation_records(
        &self,
    ) -> Option<Result<Box<dyn AllocationRecords>, crate::records::RecordsUnavailable>> {
        match &self.lock().records {
            RecordMode::Off => None,
            RecordMode::On => Some(Ok(Box::new(FakeRecords {
                state: Arc::clone(&self.state),
            }))),
            RecordMode::Unavailable(reason) => Some(Err(
                crate::records::RecordsUnavailable::Other(reason.clone()),
            )),
        }
    }
}
