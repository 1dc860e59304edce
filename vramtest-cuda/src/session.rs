//! [`PoolSession`]: measures one test on one device.

use crate::CudaError;
use crate::driver::{Driver, sample};
use crate::watermarks::{self, PoolFigures, Sample, Source};
use std::time::{Duration, Instant};
use vramtest_model::{Event, Profile};

/// What the snapshot header's `info` and the report say about the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// The kernel driver ("550.54.15"), when the system says it.
    pub driver_version: Option<String>,
    /// The CUDA version the driver supports ("12.8").
    pub cuda_version: Option<String>,
    /// Device memory in bytes.
    pub total_bytes: u64,
    /// Whether the device has stream-ordered memory pools.
    pub memory_pools: bool,
}

/// The result of a session: the profile and what the harness prints beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The measurement (its `fidelity` says exact or phase).
    pub profile: Profile,
    /// Where the samples came from.
    pub source: Source,
    /// Set when the probe had to fall back from pool watermarks, with the reason
    /// (print it: the figures are then `cuMemGetInfo` deltas at phase boundaries, with no
    /// in-phase peaks).
    pub fallback: Option<String>,
    /// The pool's own peaks and fragmentation.
    pub pool: PoolFigures,
    pub device: DeviceInfo,
    /// Boundaries sampled (each one a device synchronize plus counter reads).
    pub boundaries: u32,
    /// Time spent sampling boundaries (synchronize + reads + resets).
    pub boundary_time: Duration,
    /// Time from the session's start to `finish`.
    pub elapsed: Duration,
}

impl Report {
    /// The share of the test's time spent at phase boundaries (0 ..= 1). Part of it is
    /// the device finishing queued work, which the program would have waited for later.
    pub fn boundary_overhead_share(&self) -> f64 {
        if self.elapsed.is_zero() {
            0.0
        } else {
            (self.boundary_time.as_secs_f64() / self.elapsed.as_secs_f64()).min(1.0)
        }
    }
}

/// Measures the device memory of one test.
///
/// Create it when the test starts (after the harness's own device set-up: what is alive
/// then is the baseline), call [`boundary`](PoolSession::boundary) with every marker
/// event in order on the test thread, [`track_alloc`](PoolSession::track_alloc) /
/// [`track_free`](PoolSession::track_free) for allocations made through the harness's
/// tracked allocation API, then [`finish`](PoolSession::finish).
///
/// At every `PhaseStart`, `PhaseEnd`, `IterationStart` and `IterationEnd` the session
/// synchronizes the device (so stream-ordered frees land), reads the pool's used and
/// reserved bytes and their high-water marks and the device's used bytes, and resets
/// the high-water marks. The iteration boundaries are sampled too (beyond phase starts
/// and ends) so that what a loop body frees outside any phase lands inside its
/// iteration, as the leak signal needs. Tag events are only recorded.
#[derive(Debug)]
pub struct PoolSession<D: Driver> {
    driver: D,
    source: Source,
    fallback: Option<String>,
    device: DeviceInfo,
    baseline: Sample,
    events: Vec<Event>,
    samples: Vec<Sample>,
    started: Instant,
    boundary_time: Duration,
}

impl<D: Driver> PoolSession<D> {
    /// Starts measuring: reads the device and the baseline (pool used, device used) and
    /// resets the high-water marks.
    pub fn new(driver: D) -> Result<PoolSession<D>, CudaError> {
        let started = Instant::now();
        let pools = driver.memory_pools_supported()?;
        let (_, total_bytes) = driver.mem_get_info()?;
        let device = DeviceInfo {
            name: driver.device_name()?,
            driver_version: driver.driver_version(),
            cuda_version: driver
                .cuda_version()
                .ok()
                .map(|(major, minor)| format!("{major}.{minor}")),
            total_bytes,
            memory_pools: pools,
        };
        let baseline = sample(&driver, pools, 0)?;
        let boundary_time = started.elapsed();
        Ok(PoolSession {
            driver,
            source: if pools {
                Source::Pool
            } else {
                Source::DeviceUsed
            },
            fallback: (!pools).then(|| {
                "the device has no memory pools: phase-boundary cuMemGetInfo deltas \
                 (no in-phase peaks, no reserved bytes)"
                    .to_owned()
            }),
            device,
            baseline,
            events: Vec::with_capacity(1024),
            samples: Vec::with_capacity(256),
            started,
            boundary_time,
        })
    }

    /// Records one event from the harness. Phase and iteration boundaries are sampled
    /// (see the type's documentation); `Alloc`/`Free` are tracked allocations.
    pub fn boundary(&mut self, event: &Event) -> Result<(), CudaError> {
        match *event {
            Event::PhaseStart(_)
            | Event::PhaseEnd
            | Event::IterationStart(_)
            | Event::IterationEnd => {
                let t = Instant::now();
                let s = sample(&self.driver, self.source == Source::Pool, self.events.len())?;
                self.boundary_time += t.elapsed();
                self.samples.push(s);
                self.events.push(*event);
            }
            Event::Alloc { id, bytes } => self.track_alloc(id, bytes),
            Event::Free { id } => self.track_free(id),
            Event::TagPush(_) | Event::TagPop => self.events.push(*event),
        }
        Ok(())
    }

    /// An allocation of `bytes` under the identity `id` (its device pointer), made by
    /// code that reports its allocations. Any tracked allocation makes the profile exact.
    pub fn track_alloc(&mut self, id: u64, bytes: u64) {
        self.events.push(Event::Alloc { id, bytes });
    }

    /// The tracked allocation `id` was freed (at the call, not when the stream gets there).
    pub fn track_free(&mut self, id: u64) {
        self.events.push(Event::Free { id });
    }

    /// Set when the probe fell back from pool watermarks, with the reason.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// The device, as read at the start.
    pub fn device(&self) -> &DeviceInfo {
        &self.device
    }

    /// The driver.
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The events recorded so far.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Takes a last sample and computes the profile ([`watermarks::profile`]).
    pub fn finish(mut self) -> Result<Report, CudaError> {
        let t = Instant::now();
        let last = sample(&self.driver, self.source == Source::Pool, self.events.len())?;
        self.boundary_time += t.elapsed();
        self.samples.push(last);
        let profile = watermarks::profile(&self.events, &self.baseline, &self.samples, self.source);
        let pool = watermarks::pool_figures(&self.baseline, &self.samples, self.source);
        Ok(Report {
            profile,
            source: self.source,
            fallback: self.fallback,
            pool,
            device: self.device,
            boundaries: self.samples.len() as u32,
            boundary_time: self.boundary_time,
            elapsed: self.started.elapsed(),
        })
    }
}
