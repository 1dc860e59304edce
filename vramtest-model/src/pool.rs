//! From a CPU run to a GPU verdict: a measured event stream replayed through a model of
//! CUDA's stream-ordered memory pool (the pool cudarc, and so candle, allocates from),
//! giving the *allocated* and *reserved* peaks a CUDA device would show, and what a
//! GPU of each common memory size holds once the CUDA context and the cuBLAS workspace
//! are added.
//!
//! The facts modelled, each from NVIDIA's documentation, with the values that are not
//! documented marked as assumptions and kept as parameters:
//!
//! - **Alignment.** "Any address of a variable residing in global memory or returned by
//!   one of the memory allocation routines from the driver or runtime API is always
//!   aligned to at least 256 bytes" (CUDA C++ Programming Guide, "Device Memory
//!   Accesses"): every allocation is rounded up to [`CudaPool::alignment`], 256 B by
//!   default.
//! - **Reuse.** "Memory freed on a stream can be reused by subsequent allocations on the
//!   same stream" at once (guide, "Stream Ordered Memory Allocator", "Memory Reuse
//!   Policies"): a free makes its range available to the next allocation. Where in the
//!   pool a block goes is not documented; the model places it best-fit (the smallest
//!   free range that holds it, the lowest address among equals) in one address space
//!   that grows at its top when nothing fits.
//! - **Reserved memory.** The pool backs its address space with memory from the device
//!   in chunks: "the OS allocations may happen at different granularity from the user
//!   allocations", and "the allocator cannot release OS allocations that back
//!   outstanding asynchronous allocations" (Driver API, `cuMemPoolTrimTo`). The model
//!   maps the address space in granules of [`CudaPool::granularity`] (2 MiB by default:
//!   an assumption, the size the pool uses is not documented) and counts as reserved
//!   every granule a block touches.
//! - **Release threshold 0.** "When more than the release threshold bytes of memory are
//!   held by the memory pool, the allocator will try to release memory back to the OS
//!   on the next call to stream, event or context synchronize" and the threshold
//!   defaults to 0 (`cuMemPoolSetAttribute`, `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`): a
//!   granule no live block touches stays reserved until the next synchronization. The
//!   model synchronizes at every phase and iteration boundary (where the CUDA probe
//!   synchronizes the stream); a framework's own synchronizations (a copy to the host)
//!   are not in a CPU stream, so between boundaries the model keeps granules at least
//!   as long as a device would.
//!
//! So at every moment `reserved ≥ allocated` (live blocks do not overlap and lie in
//! mapped granules), and reserved never shrinks when the granularity grows to a
//! multiple of itself (placement does not depend on it, and each coarse granule holds
//! the finer ones a block touches).
//!
//! A CPU stream also holds host-side bookkeeping (shapes, reference counts) that a GPU
//! run keeps on the host; the model treats every allocation as device memory, so small
//! ones cost up to [`CudaPool::alignment`] each: an overestimate, bounded by the
//! alignment times the blocks alive at the peak.
//!
//! burn's CUDA backend allocates through cubecl's own pools (sliced and exclusive pages
//! in cubecl 0.10, pages sized to the largest allocation served in 0.11), whose sizes
//! and policies change between releases: they are not modelled.
//!
//! Device memory the pool does not hold is added as two terms, [`DeviceTerms`]: the
//! CUDA context and the cuBLAS workspace.

use crate::fit::{LargestBatch, Linear, MEMORY_SIZES, MemorySize, fit_series};
use crate::{Event, Phase};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

const MIB: u64 = 1 << 20;

/// The address alignment of every CUDA allocation (guide, "Device Memory Accesses").
pub const DEFAULT_ALIGNMENT: u64 = 256;

/// The granule the pool is assumed to reserve device memory in: 2 MiB (an assumption;
/// the same one the fake device of the CUDA probe's tests makes).
pub const DEFAULT_GRANULARITY: u64 = 2 * MIB;

/// The CUDA context's device memory, when the configuration names none: an estimate,
/// not a documented figure. The context's size depends on the GPU, the driver and the
/// kernels loaded (lazy loading, the default on Linux since CUDA 12.2, loads a kernel
/// at its first use); set `cuda_context` to what `nvidia-smi` shows for an idle
/// process of your program on your GPU.
pub const DEFAULT_CUDA_CONTEXT: u64 = 512 * MIB;

/// The cuBLAS workspace, when the configuration names none: 32 MiB, the size cuBLAS
/// recommends for Hopper GPUs (H100, H200), above the 4 MiB it recommends for the
/// others (cuBLAS library documentation, `cublasSetWorkspace`).
///
/// Two cases, which only a GPU can tell apart (the GPU bundle's `pool_semantics`
/// measures the pool around `CudaBlas::new` and its first gemm): cuBLAS allocates its
/// default workspace outside the stream-ordered pool (a separate term, as modelled by
/// default), or, since cuBLAS 12.2, may take it from the pool of the handle's stream
/// (cudarc never calls `cublasSetWorkspace`): then it is pool memory a GPU run shows in
/// its pool figures, and `cublas_workspace = 0` keeps a prediction from counting it
/// twice.
pub const DEFAULT_CUBLAS_WORKSPACE: u64 = 32 * MIB;

/// The model of CUDA's stream-ordered pool (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaPool {
    /// Every allocation is rounded up to a multiple of this (at least 1).
    pub alignment: u64,
    /// The pool reserves device memory in granules of this size (at least 1).
    pub granularity: u64,
}

impl Default for CudaPool {
    fn default() -> Self {
        CudaPool {
            alignment: DEFAULT_ALIGNMENT,
            granularity: DEFAULT_GRANULARITY,
        }
    }
}

/// The peaks of one replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolPeaks {
    /// The most bytes allocated at once, each allocation aligned (what the pool's
    /// `USED_MEM_HIGH` reads).
    pub allocated_bytes: u64,
    /// The most bytes the pool held from the device at once (`RESERVED_MEM_HIGH`).
    pub reserved_bytes: u64,
}

/// Replays `events` through `pool`.
pub fn replay(events: &[Event], pool: &CudaPool) -> PoolPeaks {
    replay_by_phase(events, pool).peaks
}

/// Replays `events` through `pool`, keeping each phase's own peaks beside the run's.
pub fn replay_by_phase(events: &[Event], pool: &CudaPool) -> PoolReplay {
    let mut replay = Replay::new(*pool);
    for event in events {
        replay.apply(event);
    }
    PoolReplay {
        peaks: replay.peaks(),
        phases: replay.phase_peaks().clone(),
    }
}

/// A replay's peaks: the run's, and each phase's own (the highest over its
/// iterations), which a sweep fits one by one: the phase that holds the peak at one
/// batch need not hold it at another.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PoolReplay {
    /// The run's peaks.
    #[serde(flatten)]
    pub peaks: PoolPeaks,
    /// Each phase's peaks: the most allocated and reserved while it ran (empty when
    /// the run had no phases, or was recorded before phases were kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phases: BTreeMap<Phase, PoolPeaks>,
}

/// A replay in progress: [`Replay::apply`] one event at a time.
#[derive(Debug, Clone)]
pub struct Replay {
    pool: CudaPool,
    /// Live blocks by the stream's id.
    blocks: HashMap<u64, PoolBlock>,
    /// Live blocks of at least one byte, by address: their length.
    placed: BTreeMap<u64, u64>,
    space: Space,
    mapped: Granules,
    allocated: u64,
    peaks: PoolPeaks,
    /// Live CPU-only blocks by the stream's id: skipped, a GPU never holds them.
    cpu_only: BTreeSet<u64>,
    /// The phases open now, the innermost last.
    open: Vec<Phase>,
    /// Each phase's peaks so far.
    phase_peaks: BTreeMap<Phase, PoolPeaks>,
}

#[derive(Debug, Clone, Copy)]
struct PoolBlock {
    address: u64,
    bytes: u64,
}

impl Replay {
    /// A replay of an empty stream through `pool`.
    pub fn new(pool: CudaPool) -> Replay {
        let pool = CudaPool {
            alignment: pool.alignment.max(1),
            granularity: pool.granularity.max(1),
        };
        Replay {
            pool,
            blocks: HashMap::new(),
            placed: BTreeMap::new(),
            space: Space::default(),
            mapped: Granules::default(),
            allocated: 0,
            peaks: PoolPeaks::default(),
            cpu_only: BTreeSet::new(),
            open: Vec::new(),
            phase_peaks: BTreeMap::new(),
        }
    }

    /// Applies one event, with the ledger's meaning (see [`Event`]): an allocation
    /// under a live id releases the old one first; a resize that moves a block holds
    /// both copies for a moment; frees and resizes of ids never seen (the baseline's)
    /// release nothing; phase and iteration boundaries synchronize. CPU-only memory
    /// ([`Event::CpuOnlyAlloc`], kept so by a resize) is skipped: a GPU never holds it.
    pub fn apply(&mut self, event: &Event) {
        match *event {
            Event::Alloc { id, bytes } => {
                self.free(id);
                self.cpu_only.remove(&id);
                self.alloc(id, bytes);
            }
            Event::CpuOnlyAlloc { id, .. } => {
                self.free(id);
                self.cpu_only.insert(id);
            }
            Event::Free { id } => {
                self.free(id);
                self.cpu_only.remove(&id);
            }
            Event::Realloc { from, to, .. } if self.cpu_only.remove(&from) => {
                self.free(to);
                self.cpu_only.insert(to);
            }
            Event::Realloc { from, to, bytes } => {
                self.cpu_only.remove(&to);
                if to != from {
                    self.free(to);
                }
                if to == from || !self.blocks.contains_key(&from) {
                    self.free(from);
                    self.alloc(to, bytes);
                } else {
                    self.alloc(to, bytes);
                    self.free(from);
                }
            }
            Event::PhaseStart(phase) => {
                self.synchronize();
                self.open.push(phase);
                self.note_phase_peaks();
            }
            Event::PhaseEnd => {
                self.synchronize();
                self.open.pop();
            }
            Event::IterationStart(_) | Event::IterationEnd => self.synchronize(),
            Event::TagPush(_) | Event::TagPop => {}
        }
    }

    /// Bytes allocated now: the live blocks' sizes, each aligned.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Bytes the pool holds from the device now.
    pub fn reserved(&self) -> u64 {
        self.mapped.count.saturating_mul(self.pool.granularity)
    }

    /// The highest allocated and reserved bytes so far.
    pub fn peaks(&self) -> PoolPeaks {
        self.peaks
    }

    /// Each phase's highest allocated and reserved bytes so far: what was live while
    /// it was open, blocks from before it included.
    pub fn phase_peaks(&self) -> &BTreeMap<Phase, PoolPeaks> {
        &self.phase_peaks
    }

    /// Raises the open phases' peaks to what is allocated and reserved now.
    fn note_phase_peaks(&mut self) {
        let (allocated, reserved) = (self.allocated, self.reserved());
        for phase in &self.open {
            let peaks = self.phase_peaks.entry(*phase).or_default();
            peaks.allocated_bytes = peaks.allocated_bytes.max(allocated);
            peaks.reserved_bytes = peaks.reserved_bytes.max(reserved);
        }
    }

    fn alloc(&mut self, id: u64, bytes: u64) {
        let alignment = self.pool.alignment;
        let bytes = bytes.div_ceil(alignment).saturating_mul(alignment);
        let address = if bytes == 0 {
            0
        } else {
            let address = self.space.take(bytes);
            self.placed.insert(address, bytes);
            let (lo, hi) = self.granules(address, bytes);
            self.mapped.cover(lo, hi);
            address
        };
        self.blocks.insert(id, PoolBlock { address, bytes });
        self.allocated += bytes;
        self.peaks.allocated_bytes = self.peaks.allocated_bytes.max(self.allocated);
        self.peaks.reserved_bytes = self.peaks.reserved_bytes.max(self.reserved());
        self.note_phase_peaks();
    }

    fn free(&mut self, id: u64) {
        let Some(block) = self.blocks.remove(&id) else {
            return;
        };
        self.allocated -= block.bytes;
        if block.bytes > 0 {
            self.placed.remove(&block.address);
            self.space.give(block.address, block.bytes);
        }
    }

    /// Releases every granule no live block touches (release threshold 0).
    fn synchronize(&mut self) {
        let mut mapped = Granules::default();
        for (&address, &bytes) in &self.placed {
            let (lo, hi) = self.granules(address, bytes);
            mapped.append(lo, hi);
        }
        self.mapped = mapped;
    }

    /// The granules `[lo, hi)` that `bytes` at `address` touch.
    fn granules(&self, address: u64, bytes: u64) -> (u64, u64) {
        let g = self.pool.granularity;
        (address / g, (address + bytes).div_ceil(g))
    }
}

/// The pool's address space: free ranges below `top`, by address and by size.
#[derive(Debug, Clone, Default)]
struct Space {
    by_address: BTreeMap<u64, u64>,
    by_size: BTreeSet<(u64, u64)>,
    top: u64,
}

impl Space {
    /// Places `bytes` (> 0): best fit, else at the top.
    fn take(&mut self, bytes: u64) -> u64 {
        if let Some(&(len, address)) = self.by_size.range((bytes, 0)..).next() {
            self.remove(address, len);
            if len > bytes {
                self.insert(address + bytes, len - bytes);
            }
            return address;
        }
        let address = self.top;
        self.top += bytes;
        address
    }

    /// Frees `bytes` at `address`, merged with its free neighbours; a range that ends
    /// at the top lowers it (so no free range ever ends at the top).
    fn give(&mut self, address: u64, bytes: u64) {
        let (mut start, mut end) = (address, address + bytes);
        if let Some((&a, &len)) = self.by_address.range(..address).next_back()
            && a + len == start
        {
            self.remove(a, len);
            start = a;
        }
        if let Some(&len) = self.by_address.get(&end) {
            self.remove(end, len);
            end += len;
        }
        if end == self.top {
            self.top = start;
        } else {
            self.insert(start, end - start);
        }
    }

    fn insert(&mut self, address: u64, len: u64) {
        self.by_address.insert(address, len);
        self.by_size.insert((len, address));
    }

    fn remove(&mut self, address: u64, len: u64) {
        self.by_address.remove(&address);
        self.by_size.remove(&(len, address));
    }
}

/// A set of granule numbers as disjoint, non-adjacent runs `start → end`.
#[derive(Debug, Clone, Default)]
struct Granules {
    runs: BTreeMap<u64, u64>,
    count: u64,
}

impl Granules {
    /// Adds `[lo, hi)`.
    fn cover(&mut self, mut lo: u64, mut hi: u64) {
        if let Some((&s, &e)) = self.runs.range(..=lo).next_back()
            && e >= lo
        {
            if e >= hi {
                return;
            }
            self.runs.remove(&s);
            self.count -= e - s;
            lo = s;
        }
        while let Some((&s, &e)) = self.runs.range(lo..=hi).next() {
            self.runs.remove(&s);
            self.count -= e - s;
            hi = hi.max(e);
        }
        self.runs.insert(lo, hi);
        self.count += hi - lo;
    }

    /// Adds `[lo, hi)` where `lo` is at least every start added before.
    fn append(&mut self, lo: u64, hi: u64) {
        if let Some(mut last) = self.runs.last_entry()
            && *last.get() >= lo
        {
            let end = *last.get();
            if hi > end {
                *last.get_mut() = hi;
                self.count += hi - end;
            }
            return;
        }
        self.runs.insert(lo, hi);
        self.count += hi - lo;
    }
}

/// Device memory besides the pool's, in a prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// The CUDA context and the cuBLAS workspace, each as configured or by default.
    Terms(DeviceTerms),
    /// A `reserve` from the configuration: the whole allowance, as it always was.
    Reserve(u64),
}

/// The CUDA context and the cuBLAS workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceTerms {
    /// `cuda_context`, else [`DEFAULT_CUDA_CONTEXT`].
    pub cuda_context: u64,
    /// `cublas_workspace`, else [`DEFAULT_CUBLAS_WORKSPACE`].
    pub cublas_workspace: u64,
}

impl Allowance {
    /// The allowance a package's settings ask for: `reserve` when set (it replaces the
    /// two terms), else the terms with their defaults.
    pub fn from_settings(
        reserve: Option<u64>,
        cuda_context: Option<u64>,
        cublas_workspace: Option<u64>,
    ) -> Allowance {
        match reserve {
            Some(bytes) => Allowance::Reserve(bytes),
            None => Allowance::Terms(DeviceTerms {
                cuda_context: cuda_context.unwrap_or(DEFAULT_CUDA_CONTEXT),
                cublas_workspace: cublas_workspace.unwrap_or(DEFAULT_CUBLAS_WORKSPACE),
            }),
        }
    }

    /// The bytes set aside on the device besides the tensors.
    pub fn bytes(&self) -> u64 {
        match *self {
            Allowance::Terms(t) => t.cuda_context.saturating_add(t.cublas_workspace),
            Allowance::Reserve(bytes) => bytes,
        }
    }
}

/// A run's prediction, as a run keeps it beside its timeline (volatile, never in a
/// snapshot: it needs every allocation's size and lifetime, which a snapshot does not
/// hold).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prediction {
    /// The model's parameters.
    pub pool: CudaPool,
    /// One point per batch size run (a test without a sweep: one, batch 1).
    pub points: Vec<PredictedPoint>,
}

/// One batch size's replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PredictedPoint {
    /// The batch size.
    pub batch: u64,
    /// Its peaks, and each phase's.
    #[serde(flatten)]
    pub replay: PoolReplay,
}

/// A sweep's predicted peaks as lines in the batch: the whole run's, and each phase's
/// where the replay kept them. The peak at a batch is the largest of these lines there
/// ([`PredictedLines::allocated_at`]): a phase with the larger per-sample cost takes
/// the peak over above some batch, however small its share in the sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredictedLines {
    /// The allocated peaks: per sample, the larger of their least-squares slope and the
    /// measured peak's (from the sweep's fit of the peak); the fixed part the smallest
    /// that keeps the line at or above every measured point.
    pub allocated: Linear,
    /// The reserved peaks: per sample, the larger of their least-squares slope and
    /// the allocated line's (reserved memory never grows slower than what it holds);
    /// the fixed part the smallest that keeps the line at or above every measured
    /// point. Granule rounding makes
    /// reserved a step function of the batch, and over a short sweep a cache that
    /// shrinks as activations grow (gemm's packing buffers) can flatten a tiny model's
    /// peak, so a plain fit could undershoot a point or call the step flat; this line
    /// does neither.
    pub reserved: Linear,
    /// Each phase's own lines, built the same way from its own peaks (the floor of
    /// its allocated slope: the sweep's fit of that phase's peak), for the phases every
    /// point kept; empty when the replay kept none.
    pub phases: Vec<PhaseLines>,
}

/// One phase's predicted peaks as lines in the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseLines {
    /// The phase.
    pub phase: Phase,
    /// Its allocated peaks.
    pub allocated: Linear,
    /// Its reserved peaks.
    pub reserved: Linear,
}

/// Where the phase that holds the predicted peak changes: above `batch`, `to` holds it
/// instead of `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeakMove {
    /// The phase that holds the peak below.
    pub from: Phase,
    /// The phase that holds it above.
    pub to: Phase,
    /// The first batch where `to`'s line is above `from`'s.
    pub batch: u64,
}

impl fmt::Display for PeakMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the peak moves from {} to {} above batch ≈ {}",
            self.from,
            self.to,
            crate::bytes::Grouped(self.batch.saturating_sub(1))
        )
    }
}

impl PredictedLines {
    /// The predicted allocated peak at `batch`: the largest of the lines there.
    pub fn allocated_at(&self, batch: u64) -> i128 {
        self.phases
            .iter()
            .map(|p| p.allocated.at(batch))
            .fold(self.allocated.at(batch), i128::max)
    }

    /// The predicted reserved peak at `batch`: the largest of the lines there.
    pub fn reserved_at(&self, batch: u64) -> i128 {
        self.phases
            .iter()
            .map(|p| p.reserved.at(batch))
            .fold(self.reserved.at(batch), i128::max)
    }

    /// The largest batch whose predicted reserved peak, every phase's, stays within
    /// `available`.
    pub fn largest_batch(&self, available: u64) -> LargestBatch {
        self.phases
            .iter()
            .map(|p| p.reserved.largest_batch(available))
            .fold(self.reserved.largest_batch(available), |a, b| {
                match (a, b) {
                    (LargestBatch::Any, other) | (other, LargestBatch::Any) => other,
                    (LargestBatch::UpTo(x), LargestBatch::UpTo(y)) => LargestBatch::UpTo(x.min(y)),
                }
            })
    }

    /// The phase whose allocated line is the highest at `batch` (the first of equals
    /// in the order a step runs them); `None` without phase lines.
    pub fn peak_phase_at(&self, batch: u64) -> Option<Phase> {
        let mut best: Option<&PhaseLines> = None;
        for p in &self.phases {
            if best.is_none_or(|b| p.allocated.at(batch) > b.allocated.at(batch)) {
                best = Some(p);
            }
        }
        best.map(|p| p.phase)
    }

    /// Every change of the phase that holds the peak from batch `from` up to batch
    /// `to`, in order.
    pub fn peak_moves(&self, from: u64, to: u64) -> Vec<PeakMove> {
        let mut moves = Vec::new();
        let holder = self.peak_phase_at(from);
        let (Some(mut held), mut batch) =
            (self.phases.iter().find(|p| Some(p.phase) == holder), from)
        else {
            return moves;
        };
        while batch < to {
            let line = held.allocated;
            // The first batch above `batch` where a steeper line passes the holder's
            // (the steepest first among lines passing it at the same batch).
            let next = self
                .phases
                .iter()
                .filter(|p| p.allocated.bytes_per_sample > line.bytes_per_sample)
                .filter_map(|p| {
                    let gap = line.at(batch) - p.allocated.at(batch);
                    let slope = i128::from(p.allocated.bytes_per_sample)
                        - i128::from(line.bytes_per_sample);
                    let steps = if gap < 0 { 1 } else { gap / slope + 1 };
                    let at = u64::try_from(i128::from(batch) + steps).ok()?;
                    Some((at, std::cmp::Reverse(p.allocated.bytes_per_sample), p))
                })
                .min_by_key(|&(at, steeper, _)| (at, steeper));
            match next {
                Some((at, _, p)) if at <= to => {
                    moves.push(PeakMove {
                        from: held.phase,
                        to: p.phase,
                        batch: at,
                    });
                    held = p;
                    batch = at;
                }
                _ => break,
            }
        }
        moves
    }
}

impl Prediction {
    /// Whether the points are a sweep (two batch sizes or more).
    pub fn is_sweep(&self) -> bool {
        let first = self.points.first().map(|p| p.batch);
        self.points.iter().any(|p| Some(p.batch) != first)
    }

    /// The lines of a sweep (`None` without one). `floors`: the sweep's fitted
    /// per-sample bytes of the peak (`peak`) and of each phase's peak, when known (see
    /// [`PredictedLines::reserved`]).
    pub fn lines(&self, floors: &SlopeFloors) -> Option<PredictedLines> {
        let batches: Vec<u64> = self.points.iter().map(|p| p.batch).collect();
        let whole: Vec<PoolPeaks> = self.points.iter().map(|p| p.replay.peaks).collect();
        let (allocated, reserved) = lines_through(&batches, &whole, floors.peak)?;
        let phases = Phase::ALL
            .into_iter()
            .filter_map(|phase| {
                let peaks = self
                    .points
                    .iter()
                    .map(|p| p.replay.phases.get(&phase).copied())
                    .collect::<Option<Vec<_>>>()?;
                let floor = floors.phases.get(&phase).copied();
                let (allocated, reserved) = lines_through(&batches, &peaks, floor)?;
                Some(PhaseLines {
                    phase,
                    allocated,
                    reserved,
                })
            })
            .collect();
        Some(PredictedLines {
            allocated,
            reserved,
            phases,
        })
    }

    /// What each of [`MEMORY_SIZES`] holds, `allowance` bytes kept for the context and
    /// libraries. Without a sweep: the run as measured, and whether it fits. With one:
    /// the largest batch whose predicted *reserved* peak fits, every phase's, and the
    /// peaks there (`floors` as in [`Prediction::lines`]).
    pub fn per_size(&self, allowance: u64, floors: &SlopeFloors) -> Vec<SizeVerdict> {
        let lines = self.lines(floors).filter(|_| self.is_sweep());
        MEMORY_SIZES
            .iter()
            .map(|&memory| self.at_size(memory, allowance, lines.as_ref()))
            .collect()
    }

    fn at_size(
        &self,
        memory: MemorySize,
        allowance: u64,
        lines: Option<&PredictedLines>,
    ) -> SizeVerdict {
        let verdict = |batch, allocated: u64, reserved: u64| {
            let device_bytes = reserved.saturating_add(allowance);
            SizeVerdict {
                memory,
                batch,
                allocated_bytes: allocated,
                reserved_bytes: reserved,
                device_bytes,
                fits: device_bytes <= memory.bytes,
            }
        };
        let Some(lines) = lines else {
            let peaks = self
                .points
                .first()
                .map(|p| p.replay.peaks)
                .unwrap_or_default();
            return verdict(None, peaks.allocated_bytes, peaks.reserved_bytes);
        };
        let fits = lines.largest_batch(memory.bytes.saturating_sub(allowance));
        let at = match fits {
            LargestBatch::UpTo(0) => 1,
            LargestBatch::UpTo(n) => n,
            // Nothing grows with the batch: the largest batch measured says it all.
            LargestBatch::Any => self.points.iter().map(|p| p.batch).max().unwrap_or(1),
        };
        let bytes = |b: i128| u64::try_from(b.max(0)).unwrap_or(u64::MAX);
        let reserved = bytes(lines.reserved_at(at));
        verdict(
            Some(fits),
            bytes(lines.allocated_at(at)).min(reserved),
            reserved,
        )
    }
}

/// The least per-sample bytes of a prediction's lines: what the sweep's own fits say
/// each sample adds to the peak and to each phase's peak (the pool never holds less
/// than the tensors).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlopeFloors {
    /// The peak's per-sample bytes.
    pub peak: Option<i64>,
    /// Each phase's peak's per-sample bytes.
    pub phases: BTreeMap<Phase, i64>,
}

/// The allocated and reserved lines through `peaks` (one per batch), the allocated
/// slope at least `floor`, the reserved slope at least the allocated one.
fn lines_through(
    batches: &[u64],
    peaks: &[PoolPeaks],
    floor: Option<i64>,
) -> Option<(Linear, Linear)> {
    let allocated: Vec<u64> = peaks.iter().map(|p| p.allocated_bytes).collect();
    let reserved: Vec<u64> = peaks.iter().map(|p| p.reserved_bytes).collect();
    let slope = |values: &[u64], floor: i64| {
        fit_series(batches, values)
            .ok()
            .map(|f| f.line.bytes_per_sample.max(floor))
    };
    let allocated_slope = slope(&allocated, floor.unwrap_or(i64::MIN))?;
    let reserved_slope = slope(&reserved, allocated_slope)?;
    Some((
        envelope(batches, &allocated, allocated_slope)?,
        envelope(batches, &reserved, reserved_slope)?,
    ))
}

/// The lowest line of slope `per_sample` at or above every `(batch, value)` point.
fn envelope(batches: &[u64], values: &[u64], per_sample: i64) -> Option<Linear> {
    let fixed = batches
        .iter()
        .zip(values)
        .map(|(&b, &v)| i128::from(v) - i128::from(per_sample) * i128::from(b))
        .max()?;
    Some(Linear {
        fixed_bytes: fixed.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
        bytes_per_sample: per_sample,
    })
}

/// One memory size's prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeVerdict {
    /// The memory size and a GPU that has it.
    pub memory: MemorySize,
    /// With a sweep: the largest batch whose reserved peak fits.
    pub batch: Option<LargestBatch>,
    /// The allocated and reserved peaks (with a sweep: at that batch, or at batch 1
    /// when none fits).
    pub allocated_bytes: u64,
    /// The reserved peak, at the same batch.
    pub reserved_bytes: u64,
    /// Reserved plus the allowance: what the device would have in use.
    pub device_bytes: u64,
    /// Whether the reserved peak plus the allowance fits in the memory.
    pub fits: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Phase;

    const KIB: u64 = 1 << 10;

    fn pool(alignment: u64, granularity: u64) -> CudaPool {
        CudaPool {
            alignment,
            granularity,
        }
    }

    #[test]
    fn allocations_round_up_to_the_alignment() {
        let events = [
            Event::Alloc { id: 1, bytes: 1 },
            Event::Alloc { id: 2, bytes: 257 },
            Event::Alloc { id: 3, bytes: 0 },
        ];
        let peaks = replay(&events, &CudaPool::default());
        assert_eq!(peaks.allocated_bytes, 256 + 512);
        assert_eq!(peaks.reserved_bytes, 2 * MIB);
    }

    #[test]
    fn a_free_is_reused_by_the_next_allocation_of_the_stream() {
        // alloc A, free A, alloc B: max(A, B), in one granule run.
        let events = [
            Event::Alloc {
                id: 1,
                bytes: 3 * MIB,
            },
            Event::Free { id: 1 },
            Event::Alloc { id: 2, bytes: MIB },
        ];
        let peaks = replay(&events, &CudaPool::default());
        assert_eq!(peaks.allocated_bytes, 3 * MIB);
        assert_eq!(peaks.reserved_bytes, 4 * MIB);
    }

    #[test]
    fn freed_granules_stay_reserved_until_a_boundary() {
        // A hole between two live blocks, too small for the third: it goes on top.
        let hole_then_big = |sync: bool| {
            let mut events = vec![
                Event::Alloc {
                    id: 1,
                    bytes: 2 * MIB,
                },
                Event::Alloc {
                    id: 2,
                    bytes: 2 * MIB,
                },
                Event::Alloc {
                    id: 3,
                    bytes: 2 * MIB,
                },
                Event::Free { id: 2 },
            ];
            if sync {
                events.push(Event::PhaseStart(Phase::Forward));
            }
            events.push(Event::Alloc {
                id: 4,
                bytes: 4 * MIB,
            });
            replay(&events, &CudaPool::default())
        };
        // 2 + (2 freed, still mapped) + 2 + 4.
        assert_eq!(hole_then_big(false).reserved_bytes, 10 * MIB);
        // The synchronize gave the hole's granule back.
        assert_eq!(hole_then_big(true).reserved_bytes, 8 * MIB);
        assert_eq!(hole_then_big(true).allocated_bytes, 8 * MIB);
    }

    #[test]
    fn small_blocks_share_a_granule_and_a_straddling_block_maps_two() {
        let mut events: Vec<Event> = (0..8)
            .map(|id| Event::Alloc {
                id,
                bytes: 256 * KIB,
            })
            .collect();
        assert_eq!(
            replay(&events, &CudaPool::default()).reserved_bytes,
            2 * MIB
        );
        events[7] = Event::Alloc {
            id: 7,
            bytes: 512 * KIB,
        };
        let peaks = replay(&events, &CudaPool::default());
        assert_eq!(peaks.allocated_bytes, 2 * MIB + 256 * KIB);
        assert_eq!(peaks.reserved_bytes, 4 * MIB);
    }

    #[test]
    fn a_moving_resize_holds_both_copies() {
        let events = [
            Event::Alloc { id: 1, bytes: 1000 },
            Event::Realloc {
                from: 1,
                to: 2,
                bytes: 3000,
            },
            Event::Realloc {
                from: 2,
                to: 2,
                bytes: 100,
            },
        ];
        let peaks = replay(&events, &pool(1, 1));
        assert_eq!(peaks.allocated_bytes, 4000);
        assert_eq!(peaks.reserved_bytes, 4000);
    }

    #[test]
    fn granules_merge_and_count_once() {
        let mut g = Granules::default();
        g.cover(0, 2);
        g.cover(5, 7);
        g.cover(1, 6);
        assert_eq!((g.count, g.runs.len()), (7, 1));
        g.cover(2, 3);
        g.cover(7, 9);
        assert_eq!((g.count, g.runs.len()), (9, 1));
        g.cover(20, 21);
        assert_eq!((g.count, g.runs.len()), (10, 2));
    }

    #[test]
    fn the_allowance_is_the_reserve_or_the_two_terms() {
        assert_eq!(
            Allowance::from_settings(Some(5), Some(1), Some(2)).bytes(),
            5
        );
        assert_eq!(
            Allowance::from_settings(None, None, None).bytes(),
            DEFAULT_CUDA_CONTEXT + DEFAULT_CUBLAS_WORKSPACE
        );
        assert_eq!(
            Allowance::from_settings(None, Some(100), None).bytes(),
            100 + DEFAULT_CUBLAS_WORKSPACE
        );
    }

    fn point(batch: u64, allocated: u64, reserved: u64) -> PredictedPoint {
        PredictedPoint {
            batch,
            replay: PoolReplay {
                peaks: PoolPeaks {
                    allocated_bytes: allocated,
                    reserved_bytes: reserved,
                },
                phases: BTreeMap::new(),
            },
        }
    }

    fn floor(peak: Option<i64>) -> SlopeFloors {
        SlopeFloors {
            peak,
            phases: BTreeMap::new(),
        }
    }

    #[test]
    fn the_reserved_line_is_above_every_point_and_never_flatter_than_allocated() {
        // Reserved is flat over the sweep (one granule run), allocated grows.
        let p = Prediction {
            pool: CudaPool::default(),
            points: vec![
                point(32, MIB, 4 * MIB),
                point(64, 2 * MIB, 4 * MIB),
                point(128, 4 * MIB, 4 * MIB),
            ],
        };
        let lines = p.lines(&floor(None)).unwrap();
        assert_eq!(lines.allocated.bytes_per_sample, 32 * KIB as i64);
        assert_eq!(lines.reserved.bytes_per_sample, 32 * KIB as i64);
        for q in &p.points {
            assert!(lines.reserved.at(q.batch) >= i128::from(q.replay.peaks.reserved_bytes));
        }
        assert_eq!(lines.reserved.at(32), i128::from(4 * MIB));
        // A steeper measured peak wins; a flatter one does not.
        let steeper = p.lines(&floor(Some(40 * KIB as i64))).unwrap().reserved;
        assert_eq!(steeper.bytes_per_sample, 40 * KIB as i64);
        assert!(
            p.points
                .iter()
                .all(|q| steeper.at(q.batch) >= i128::from(q.replay.peaks.reserved_bytes))
        );
        assert_eq!(p.lines(&floor(Some(1))).unwrap().reserved, lines.reserved);
    }

    #[test]
    fn per_size_says_the_largest_batch_by_the_reserved_line() {
        let p = Prediction {
            pool: CudaPool::default(),
            points: vec![point(1, 1000, 3000), point(2, 2000, 4000)],
        };
        // reserved = 2000 + 1000 × batch; 16 GiB − 1 GiB allowance.
        let rows = p.per_size(1 << 30, &floor(None));
        let room = (16u64 << 30) - (1 << 30);
        assert_eq!(
            rows[0].batch,
            Some(LargestBatch::UpTo((room - 2000) / 1000))
        );
        assert!(
            rows.iter()
                .all(|r| r.fits && r.device_bytes <= r.memory.bytes)
        );
        assert!(rows.iter().all(|r| r.reserved_bytes >= r.allocated_bytes));
    }

    #[test]
    fn without_a_sweep_per_size_says_whether_the_run_fits() {
        let p = Prediction {
            pool: CudaPool::default(),
            points: vec![point(1, 10 << 30, 20 << 30)],
        };
        let rows = p.per_size(1 << 30, &floor(Some(5)));
        assert!(!p.is_sweep());
        assert_eq!(rows[0].device_bytes, 21 << 30);
        assert!(!rows[0].fits, "16 GiB");
        assert!(rows[1].fits, "24 GiB");
        assert!(rows.iter().all(|r| r.batch.is_none()));
    }

    /// A step whose optimizer step holds the peak over the sweep (a large fixed part)
    /// while backward grows faster per sample: 20 MiB of parameters kept, backward
    /// 16 MiB + 40 KiB × batch on top, the optimizer step 56 MiB + 32 KiB × batch.
    fn crossing_phases(batch: u64) -> Vec<Event> {
        vec![
            Event::PhaseStart(Phase::Params),
            Event::Alloc {
                id: 1,
                bytes: 20 * MIB,
            },
            Event::PhaseEnd,
            Event::PhaseStart(Phase::Backward),
            Event::Alloc {
                id: 2,
                bytes: 16 * MIB + 40 * KIB * batch,
            },
            Event::Free { id: 2 },
            Event::PhaseEnd,
            Event::PhaseStart(Phase::OptimizerStep),
            Event::Alloc {
                id: 3,
                bytes: 56 * MIB + 32 * KIB * batch,
            },
            Event::Free { id: 3 },
            Event::PhaseEnd,
        ]
    }

    /// [`crossing_phases`] replayed at batch 64, 128 and 256.
    fn crossing_prediction(pool: CudaPool) -> Prediction {
        Prediction {
            pool,
            points: [64, 128, 256]
                .into_iter()
                .map(|batch| PredictedPoint {
                    batch,
                    replay: replay_by_phase(&crossing_phases(batch), &pool),
                })
                .collect(),
        }
    }

    #[test]
    fn the_largest_batch_is_the_one_every_phase_fits() {
        let pool = CudaPool::default();
        let prediction = crossing_prediction(pool);
        // In the sweep the optimizer step holds the peak.
        for p in &prediction.points {
            let phases = &p.replay.phases;
            assert!(
                phases[&Phase::OptimizerStep].allocated_bytes
                    > phases[&Phase::Backward].allocated_bytes
            );
            assert_eq!(p.replay.peaks, phases[&Phase::OptimizerStep]);
        }
        let allowance = 544 * MIB;
        let rows = prediction.per_size(allowance, &SlopeFloors::default());
        let row = rows.iter().find(|r| r.memory.bytes == 24 << 30).unwrap();
        let room = (24u64 << 30) - allowance;
        // By hand: each phase's live bytes at its peak, rounded up to the 2 MiB
        // granules the pool maps; the largest batch where both fit.
        let granules = |bytes: u64| bytes.div_ceil(2 * MIB) * (2 * MIB);
        let both_fit = |b: u64| {
            granules(36 * MIB + 40 * KIB * b) <= room && granules(76 * MIB + 32 * KIB * b) <= room
        };
        let by_hand = (room - 36 * MIB) / (40 * KIB);
        assert!(both_fit(by_hand) && !both_fit(by_hand + 1));
        let Some(LargestBatch::UpTo(answer)) = row.batch else {
            panic!("{row:?}")
        };
        // The lines keep above every measured point, so they may give up to a granule's
        // worth of samples, never more, and never a batch that does not fit.
        assert!(
            answer <= by_hand && answer + (2 * MIB) / (40 * KIB) >= by_hand,
            "{answer} against {by_hand}"
        );
        let measured = replay(&crossing_phases(answer), &pool);
        assert!(measured.reserved_bytes <= room, "{measured:?}");
        assert!(row.allocated_bytes >= measured.allocated_bytes);
        // The old answer, the whole run's line alone (the sweep's peak phase), did not fit.
        let whole = prediction.lines(&SlopeFloors::default()).unwrap().reserved;
        let LargestBatch::UpTo(old) = whole.largest_batch(room) else {
            panic!()
        };
        assert!(replay(&crossing_phases(old), &pool).reserved_bytes > room);
    }

    #[test]
    fn the_peak_move_is_where_the_phase_lines_cross() {
        let pool = CudaPool::default();
        let prediction = crossing_prediction(pool);
        let lines = prediction.lines(&SlopeFloors::default()).unwrap();
        assert_eq!(lines.peak_phase_at(256), Some(Phase::OptimizerStep));
        // 36 MiB + 40 KiB × b > 76 MiB + 32 KiB × b from b = 5,121 on.
        let moves = lines.peak_moves(256, 1 << 20);
        assert_eq!(
            moves,
            vec![PeakMove {
                from: Phase::OptimizerStep,
                to: Phase::Backward,
                batch: 5121
            }]
        );
        assert_eq!(
            moves[0].to_string(),
            "the peak moves from optimizer_step to backward above batch ≈ 5,120"
        );
        assert!(lines.peak_moves(256, 5120).is_empty());
        assert_eq!(
            lines.allocated_at(5121),
            i128::from(36 * MIB + 40 * KIB * 5121)
        );
    }

    #[test]
    fn a_prediction_reads_back_what_it_wrote() {
        let p = Prediction {
            pool: CudaPool::default(),
            points: vec![point(32, 1, 2)],
        };
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(
            text,
            r#"{"pool":{"alignment":256,"granularity":2097152},"points":[{"batch":32,"allocated_bytes":1,"reserved_bytes":2}]}"#
        );
        assert_eq!(serde_json::from_str::<Prediction>(&text).unwrap(), p);
    }
}
