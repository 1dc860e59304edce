//! Out of memory on the device inside a step: what the failing test reports instead of
//! a bare error (or a panic) — the per-category breakdown the session measured up to
//! the failure, and the size of the request that failed when the code that allocated
//! said it.

use crate::driver::Driver;
use crate::session::PoolSession;
use std::fmt;
use vramtest_model::{Category, Event, Phase, Profile};

/// Whether an error or panic message is the driver's out-of-memory error
/// (`CUDA_ERROR_OUT_OF_MEMORY`, cudarc's and candle's wording of it, or the runtime's
/// `cudaErrorMemoryAllocation`).
pub fn is_out_of_memory(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("cuda_error_out_of_memory")
        || lower.contains("cudaerrormemoryallocation")
        || lower.contains("out of memory")
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
        let (profile, unmeasured) = match closed.and_then(|()| self.finish()) {
            Ok(report) => (Some(report.profile), None),
            Err(e) => (None, Some(e.to_string())),
        };
        OutOfMemory {
            requested,
            phase,
            iteration,
            profile,
            unmeasured,
            total_bytes,
        }
    }
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

/// `1,048,576`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
            Some(bytes) => write!(f, ": a request of {} B failed", grouped(bytes))?,
            None => write!(
                f,
                ": the size of the request that failed is unknown (code that allocates on \
                 the device can report it with CudaTracker::out_of_memory)"
            )?,
        }
        writeln!(f, "; device memory {} B", grouped(self.total_bytes))?;
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
                    grouped(p.peak_bytes)
                )?;
                for c in Category::ALL {
                    writeln!(f, "  {:<16} {:>15} B", c.as_str(), grouped(p.at_peak[c]))?;
                }
                write!(
                    f,
                    "  (untracked is device-wide: other processes on the GPU count too)"
                )
            }
            None => write!(
                f,
                "no breakdown: the device could not be sampled after the failure ({})",
                self.unmeasured.as_deref().unwrap_or("unknown")
            ),
        }
    }
}
