//! [`PoolSession`]: measures one test on one device.

use crate::CudaError;
use crate::driver::{Driver, sample};
use crate::records::{self, AllocationRecords, Batch};
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
pub struct SessionReport {
    /// The measurement (its `fidelity` says exact or phase).
    pub profile: Profile,
    /// Where the samples came from.
    pub source: Source,
    /// What the per-allocation records came from ("CUPTI"), when a record source ran:
    /// the profile is then exact.
    pub allocation_records: Option<&'static str>,
    /// Set when the probe had to fall back, with the reason (print it): from
    /// per-allocation records to pool watermarks ("no CUPTI library …"), or from pool
    /// watermarks to `cuMemGetInfo` deltas at phase boundaries, with no in-phase peaks
    /// ("the device has no memory pools …"); both joined by "; ".
    pub fallback: Option<String>,
    /// The pool's own peaks and fragmentation.
    pub pool: PoolFigures,
    /// The device measured.
    pub device: DeviceInfo,
    /// Boundaries sampled (each one a device synchronize plus counter reads).
    pub boundaries: u32,
    /// Time spent sampling boundaries (synchronize + reads + resets).
    pub boundary_time: Duration,
    /// Time from the session's start to `finish`.
    pub elapsed: Duration,
}

impl SessionReport {
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
///
/// **Per-allocation records.** When the driver has a record source
/// ([`Driver::allocation_records`]: CUPTI's `MEMORY2` activity records for
/// [`CudarcDriver`](crate::CudarcDriver) with the `cupti` feature), the session starts
/// it before the baseline sample, flushes it at every sampled boundary (after the
/// synchronize) and reads its clock at every marker, tags included; `finish` merges the
/// records into the markers ([`records::merge`]) and the profile is exact whatever
/// framework allocated. Tracked allocations are then ignored (the records already hold
/// them). When the source cannot start (no libcupti), the session runs on the pool
/// watermarks as without it and the reason is the report's `fallback`.
#[derive(Debug)]
pub struct PoolSession<D: Driver> {
    driver: D,
    source: Source,
    fallback: Option<String>,
    device: DeviceInfo,
    baseline: Sample,
    events: Vec<Event>,
    samples: Vec<Sample>,
    records: Option<Records>,
    started: Instant,
    boundary_time: Duration,
}

/// A running record source and what it delivered so far.
#[derive(Debug)]
struct Records {
    source: Box<dyn AllocationRecords>,
    /// The source's clock at each recorded event (one entry per `events` entry).
    times: Vec<Option<u64>>,
    batches: Vec<Batch>,
}

impl Records {
    /// Flushes the source into a batch placed before marker `before_event`.
    fn flush(&mut self, before_event: usize) -> Result<(), CudaError> {
        let records = self.source.flush()?;
        if !records.is_empty() {
            self.batches.push(Batch {
                before_event,
                records,
            });
        }
        Ok(())
    }
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
        // Started before the baseline: whatever the source allocates itself is baseline.
        let (mut records, mut records_fallback) = match driver.allocation_records() {
            None => (None, None),
            Some(Ok(source)) => (
                Some(Records {
                    source,
                    times: Vec::with_capacity(1024),
                    batches: Vec::with_capacity(256),
                }),
                None,
            ),
            Some(Err(reason)) => (None, Some(reason.to_string())),
        };
        let baseline = sample(&driver, pools, 0)?;
        // What happened before the baseline is the baseline: drop it. A source that
        // cannot even flush now is given up for the watermarks, not a failed test.
        if let Some(Err(e)) = records.as_mut().map(|r| r.source.flush()) {
            records = None;
            records_fallback = Some(format!(
                "per-allocation records failed ({e}): phase fidelity"
            ));
        }
        let boundary_time = started.elapsed();
        let pools_fallback = (!pools).then(|| {
            "the device has no memory pools: phase-boundary cuMemGetInfo deltas \
             (no in-phase peaks, no reserved bytes)"
                .to_owned()
        });
        let fallback = match (records_fallback, pools_fallback) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        Ok(PoolSession {
            driver,
            source: if pools {
                Source::Pool
            } else {
                Source::DeviceUsed
            },
            fallback,
            device,
            baseline,
            events: Vec::with_capacity(1024),
            samples: Vec::with_capacity(256),
            records,
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
                let before_event = self.events.len();
                let s = sample(&self.driver, self.source == Source::Pool, before_event)?;
                if let Some(r) = &mut self.records {
                    r.flush(before_event)?;
                }
                self.boundary_time += t.elapsed();
                self.samples.push(s);
                self.push_marker(*event);
            }
            Event::Alloc { id, bytes } => self.track_alloc(id, bytes),
            Event::Free { id } => self.track_free(id),
            Event::TagPush(_) | Event::TagPop => self.push_marker(*event),
            // Only the heap probe resizes blocks and sees CPU-only memory; device
            // allocations are never resized.
            Event::Realloc { .. } | Event::CpuOnlyAlloc { .. } => {}
        }
        Ok(())
    }

    fn push_marker(&mut self, event: Event) {
        if let Some(r) = &mut self.records {
            r.times.push(r.source.now());
        }
        self.events.push(event);
    }

    /// An allocation of `bytes` under the identity `id` (its device pointer), made by
    /// code that reports its allocations. Any tracked allocation makes the profile exact.
    /// Ignored while per-allocation records run (they hold this allocation already).
    pub fn track_alloc(&mut self, id: u64, bytes: u64) {
        if self.records.is_none() {
            self.events.push(Event::Alloc { id, bytes });
        }
    }

    /// The tracked allocation `id` was freed (at the call, not when the stream gets there).
    /// Ignored while per-allocation records run.
    pub fn track_free(&mut self, id: u64) {
        if self.records.is_none() {
            self.events.push(Event::Free { id });
        }
    }

    /// Set when the probe fell back (from per-allocation records, or from pool
    /// watermarks), with the reason.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// What the per-allocation records come from ("CUPTI"), when a record source runs.
    pub fn allocation_records(&self) -> Option<&'static str> {
        self.records.as_ref().map(|r| r.source.name())
    }

    /// The device, as read at the start.
    pub fn device(&self) -> &DeviceInfo {
        &self.device
    }

    /// The driver.
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The events recorded so far (while per-allocation records run: the markers only;
    /// the records are merged in at [`finish`](PoolSession::finish)).
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Takes a last sample and computes the profile ([`watermarks::profile`]; with
    /// per-allocation records, [`watermarks::exact_profile`] of the merged stream).
    pub fn finish(self) -> Result<SessionReport, CudaError> {
        self.finish_with_events().map(|(report, _)| report)
    }

    /// [`finish`](PoolSession::finish), also returning the event stream the profile
    /// was built from (with per-allocation records: the merged stream).
    pub(crate) fn finish_with_events(mut self) -> Result<(SessionReport, Vec<Event>), CudaError> {
        let t = Instant::now();
        let last = sample(&self.driver, self.source == Source::Pool, self.events.len())?;
        if let Some(r) = &mut self.records {
            r.flush(self.events.len())?;
        }
        self.boundary_time += t.elapsed();
        self.samples.push(last);
        let (profile, events) = match &self.records {
            None => (
                watermarks::profile(&self.events, &self.baseline, &self.samples, self.source),
                std::mem::take(&mut self.events),
            ),
            Some(r) => {
                let merged = records::merge(&self.events, &r.times, &r.batches, r.source.device());
                let samples: Vec<Sample> = self
                    .samples
                    .iter()
                    .map(|s| Sample {
                        before_event: merged.position(s.before_event),
                        ..*s
                    })
                    .collect();
                let profile = watermarks::exact_profile(
                    &merged.events,
                    &self.baseline,
                    &samples,
                    self.source,
                );
                (profile, merged.events)
            }
        };
        let pool = watermarks::pool_figures(&self.baseline, &self.samples, self.source);
        let report = SessionReport {
            profile,
            source: self.source,
            allocation_records: self.records.as_ref().map(|r| r.source.name()),
            fallback: self.fallback,
            pool,
            device: self.device,
            boundaries: self.samples.len() as u32,
            boundary_time: self.boundary_time,
            elapsed: self.started.elapsed(),
        };
        Ok((report, events))
    }
}
