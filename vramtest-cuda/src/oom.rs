//! Out of memory on the device inside a step: what the failing test reports instead of
//! a bare error (or a panic) — the per-category breakdown the session measured up to
//! the failure, the size of the request that failed when the code that allocated said
//! it, and, where every allocation was seen (`exact` fidelity), a table of the blocks
//! alive at the failure by category with their top call sites where they are known.

use crate::driver::Driver;
use crate::session::PoolSession;
use std::collections::HashMap;
use std::fmt;
use vramtest_model::bytes::Grouped;
use vramtest_model::sites::{IN_FAILURE, Site};
use vramtest_model::{Category, Event, Fidelity, Phase, Profile, ledger};

/// The status names CUDA's libraries give a failed device allocation, as cudarc's
/// errors print them (`CublasError(CUBLAS_STATUS_ALLOC_FAILED)`): the driver's and the
/// runtime's, then cuBLAS/cuBLASLt (a workspace), cuRAND (a generator's state), cuDNN,
/// cuFFT, cuSPARSE, cuSOLVER and NVRTC (each library's header names them so).
const OUT_OF_MEMORY_STATUSES: &[&str] = &[
    "cuda_error_out_of_memory",
    "cudaerrormemoryallocation",
    "cublas_status_alloc_failed",
    "curand_status_allocation_failed",
    "cudnn_status_alloc_failed",
    "cudnn_status_internal_error_device_allocation_failed",
    "cufft_alloc_failed",
    "cusparse_status_alloc_failed",
    "cusolver_status_alloc_failed",
    "nvrtc_error_out_of_memory",
];

/// Whether an error or panic message is an out-of-memory error of the device: the
/// driver's `CUDA_ERROR_OUT_OF_MEMORY` (cudarc's and candle's wording of it, "out of
/// memory"), the runtime's `cudaErrorMemoryAllocation`, or a CUDA library's allocation
/// failure (`CUBLAS_STATUS_ALLOC_FAILED`, `CURAND_STATUS_ALLOCATION_FAILED`, …).
pub fn is_out_of_memory(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("out of memory") || OUT_OF_MEMORY_STATUSES.iter().any(|s| lower.contains(s))
}

/// A CUDA out-of-memory failure inside a step, with what was measured up to it.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfMemory {
    /// The size of the request that failed, when the allocating code reported it
    /// (vramtest's `CudaTracker::out_of_memory`).
    pub requested: Option<u64>,
    /// The phase that was running when it failed, if one was.
    pub phase: Option<Phase>,
    /// The iteration that was running, if one was.
    pub iteration: Option<u32>,
    /// The profile up to the failure (`None` when the device could not be sampled any
    /// more; the error then says why).
    pub profile: Option<Profile>,
    /// Why there is no profile.
    pub unmeasured: Option<String>,
    /// Device memory in bytes.
    pub total_bytes: u64,
    /// The blocks alive at the failure, by category in report order (categories without
    /// blocks left out); `None` when the run did not see every allocation (`phase`
    /// fidelity) or could not be measured.
    pub live: Option<Vec<LiveBlocks>>,
    /// The top call sites of each category, where known (a run on the CPU captures
    /// them; a device run does not): [`OutOfMemory::with_sites`].
    pub sites: Option<Vec<(Category, Vec<Site>)>>,
    /// The test's name, for the command that finds the call sites.
    pub test: Option<String>,
}

/// The blocks of one category alive at an out-of-memory failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveBlocks {
    /// The category the blocks are charged to.
    pub category: Category,
    /// How many blocks.
    pub count: u64,
    /// Their bytes together.
    pub bytes: u64,
    /// The largest one's bytes.
    pub largest: u64,
}

impl OutOfMemory {
    /// The same failure with the top call sites of each category (as a snapshot's
    /// `info` keeps them, or [`Sites::for_snapshot`](vramtest_model::sites::Sites::for_snapshot)
    /// gives them): the table lists those of the categories it holds.
    pub fn with_sites(mut self, sites: Vec<(Category, Vec<Site>)>) -> OutOfMemory {
        self.sites = Some(sites);
        self
    }

    /// The same failure, naming the test in the command that finds its call sites.
    pub fn for_test(mut self, test: &str) -> OutOfMemory {
        self.test = Some(test.to_owned());
        self
    }
}

impl<D: Driver> PoolSession<D> {
    /// Ends the session after an out-of-memory error inside the test: closes the phase
    /// that was running and computes the profile up to there.
    pub fn out_of_memory(mut self, requested: Option<u64>) -> OutOfMemory {
        let (phase, iteration) = open_phase(self.events());
        let total_bytes = self.device().total_bytes;
        // The phase is closed (a boundary sample: an out-of-memory error is not sticky,
        // the device still answers); the iteration is left open, so what it allocated
        // keeps its phase's category instead of reading as having outlived it.
        let closed = match phase {
            Some(_) => self.boundary(&Event::PhaseEnd),
            None => Ok(()),
        };
        let (profile, live, unmeasured) = match closed.and_then(|()| self.finish_with_events()) {
            Ok((report, events)) => {
                let live =
                    (report.profile.fidelity == Fidelity::Exact).then(|| live_blocks(&events));
                (Some(report.profile), live, None)
            }
            Err(e) => (None, None, Some(e.to_string())),
        };
        OutOfMemory {
            requested,
            phase,
            iteration,
            profile,
            unmeasured,
            total_bytes,
            live,
            sites: None,
            test: None,
        }
    }
}

/// The blocks alive at the end of `events` (a stream cut short by a failure), by
/// category, in report order. Each block has the category the ledger charges it to,
/// with the phases still open closed and the iteration still running ended right after
/// the failure, its own blocks released first: a block of the forward pass that was
/// running is an activation, as it would have been, not workspace that outlived it.
pub fn live_blocks(events: &[Event]) -> Vec<LiveBlocks> {
    // id → (the block's position among the stream's allocations, its bytes).
    let mut live: HashMap<u64, (usize, u64)> = HashMap::new();
    let mut made = 0usize;
    let mut open_phases = 0usize;
    // The position of the running iteration's first allocation.
    let mut iteration_from: Option<usize> = None;
    for event in events {
        match *event {
            Event::Alloc { id, bytes } => {
                live.insert(id, (made, bytes));
                made += 1;
            }
            Event::Free { id } => {
                live.remove(&id);
            }
            // Host memory only (the heap probe's): never on the device.
            Event::CpuOnlyAlloc { .. } => {}
            Event::Realloc { from, to, bytes } => {
                let at = live.remove(&from).map_or_else(
                    || {
                        made += 1;
                        made - 1
                    },
                    |(at, _)| at,
                );
                live.insert(to, (at, bytes));
            }
            Event::PhaseStart(_) => open_phases += 1,
            Event::PhaseEnd => open_phases = open_phases.saturating_sub(1),
            Event::IterationStart(_) => iteration_from = Some(made),
            Event::IterationEnd => iteration_from = None,
            Event::TagPush(_) | Event::TagPop => {}
        }
    }
    let mut ended = events.to_vec();
    ended.extend(std::iter::repeat_n(Event::PhaseEnd, open_phases));
    if let Some(from) = iteration_from {
        let mut running: Vec<(usize, u64)> = live
            .iter()
            .filter(|(_, (at, _))| *at >= from)
            .map(|(&id, &(at, _))| (at, id))
            .collect();
        running.sort_unstable();
        ended.extend(running.into_iter().rev().map(|(_, id)| Event::Free { id }));
        ended.push(Event::IterationEnd);
    }
    let categories = ledger::categories(&ended);
    let mut by_category: Vec<LiveBlocks> = Category::ALL
        .into_iter()
        .map(|category| LiveBlocks {
            category,
            count: 0,
            bytes: 0,
            largest: 0,
        })
        .collect();
    for &(at, bytes) in live.values() {
        // The ledger counts allocations as this walk does; a block it did not count
        // (never expected) is shown as untracked rather than failing the report.
        let category = categories.get(at).copied().unwrap_or(Category::Untracked);
        let row = &mut by_category[category.index()];
        row.count += 1;
        row.bytes += bytes;
        row.largest = row.largest.max(bytes);
    }
    by_category.retain(|row| row.count > 0);
    by_category
}

/// The phase and iteration still open at the end of `events`.
fn open_phase(events: &[Event]) -> (Option<Phase>, Option<u32>) {
    let mut phase = None;
    let mut iteration = None;
    for e in events {
        match *e {
            Event::PhaseStart(p) => phase = Some(p),
            Event::PhaseEnd => phase = None,
            Event::IterationStart(i) => iteration = Some(i),
            Event::IterationEnd => iteration = None,
            _ => {}
        }
    }
    (phase, iteration)
}

impl fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CUDA out of memory")?;
        match (self.phase, self.iteration) {
            (Some(p), Some(i)) => write!(f, " in phase {p} of iteration {i}")?,
            (Some(p), None) => write!(f, " in phase {p}")?,
            (None, Some(i)) => write!(f, " in iteration {i}")?,
            (None, None) => {}
        }
        match self.requested {
            Some(bytes) => write!(f, ": a request of {} B failed", Grouped(bytes))?,
            None => write!(
                f,
                ": the size of the request that failed is unknown (code that allocates on \
                 the device can report it with CudaTracker::out_of_memory)"
            )?,
        }
        writeln!(f, "; device memory {} B", Grouped(self.total_bytes))?;
        match &self.profile {
            Some(p) => {
                let at = match (p.peak_phase, p.peak_iteration) {
                    (Some(ph), Some(i)) => format!(" (in {ph} of iteration {i})"),
                    (Some(ph), None) => format!(" (in {ph})"),
                    _ => String::new(),
                };
                writeln!(
                    f,
                    "measured up to the failure ({} fidelity): peak {} B{at}, by category at that peak:",
                    p.fidelity,
                    Grouped(p.peak_bytes)
                )?;
                for c in Category::ALL {
                    writeln!(f, "  {:<16} {:>15} B", c.as_str(), Grouped(p.at_peak[c]))?;
                }
                write!(
                    f,
                    "  (untracked is device-wide: other processes on the GPU count too)"
                )?;
                match &self.live {
                    Some(live) => {
                        writeln!(f)?;
                        self.fmt_live(f, live)
                    }
                    None => write!(
                        f,
                        "\nno table of the blocks alive at the failure: fidelity {} sees the pool's watermarks, not each allocation (report allocations through `t.cuda_tracker()`, or build with the `cupti` feature)",
                        p.fidelity
                    ),
                }
            }
            None => write!(
                f,
                "no breakdown: the device could not be sampled after the failure ({})",
                self.unmeasured.as_deref().unwrap_or("unknown")
            ),
        }
    }
}

impl OutOfMemory {
    /// The table of the blocks alive at the failure, then their call sites.
    fn fmt_live(&self, f: &mut fmt::Formatter<'_>, live: &[LiveBlocks]) -> fmt::Result {
        writeln!(
            f,
            "blocks alive at the failure, by category (the running iteration's as if it ended there):"
        )?;
        writeln!(
            f,
            "  {:<16} {:>7} {:>17} {:>17}",
            "category", "blocks", "bytes", "largest block"
        )?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, count, bytes, largest| {
            writeln!(
                f,
                "  {name:<16} {count:>7} {:>15} B {:>15} B",
                Grouped(bytes),
                Grouped(largest)
            )
        };
        for r in live {
            row(f, r.category.as_str(), r.count, r.bytes, r.largest)?;
        }
        row(
            f,
            "all",
            live.iter().map(|r| r.count).sum(),
            live.iter().map(|r| r.bytes).sum(),
            live.iter().map(|r| r.largest).max().unwrap_or(0),
        )?;
        self.fmt_sites(f, live)
    }

    /// The top call sites of the table's categories, or how to find them.
    fn fmt_sites(&self, f: &mut fmt::Formatter<'_>, live: &[LiveBlocks]) -> fmt::Result {
        let Some(sites) = &self.sites else {
            return write!(
                f,
                "top call sites: not captured on a device; `cargo vramtest show {} --sites` re-runs the test on the CPU, where the categories hold the same tensors, and names them",
                self.test.as_deref().unwrap_or("<test>")
            );
        };
        let known: Vec<(Category, &[Site])> = live
            .iter()
            .filter_map(|r| {
                sites
                    .iter()
                    .find(|(c, s)| *c == r.category && !s.is_empty())
                    .map(|(c, s)| (*c, s.as_slice()))
            })
            .collect();
        if known.is_empty() {
            return write!(f, "top call sites: none known for these categories");
        }
        write!(f, "top call sites:")?;
        for (category, sites) in known {
            write!(f, "\n  {category}:")?;
            for site in sites.iter().take(IN_FAILURE) {
                write!(f, "\n    {site}")?;
            }
        }
        Ok(())
    }
}
