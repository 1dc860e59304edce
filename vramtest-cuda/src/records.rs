//! Per-allocation records from the device (CUPTI's `MEMORY2` activity records) and the
//! pure merge that puts them into a session's marker stream.
//!
//! A record source ([`AllocationRecords`]) sees every allocation and release on the
//! device, whichever library made it (cudarc, candle, cuBLAS), but delivers them in
//! batches, when asked to [`flush`](AllocationRecords::flush). A
//! [`PoolSession`](crate::PoolSession) flushes at every boundary it samples (after the
//! device synchronize), so each [`Batch`] knows the marker it was flushed at, and it
//! reads the source's clock ([`now`](AllocationRecords::now)) at every marker, tags
//! included. [`merge`] then weaves the records into the markers:
//!
//! - only records of the session's device, and of device memory, are kept (pinned host
//!   memory, managed memory and the other kinds are left to `untracked`);
//! - a record goes just before the first marker whose time is later than the record's
//!   timestamp, so an allocation made inside `t.tag(..)` lands inside the tag;
//! - but never after the marker of the batch it was flushed in (it happened before that
//!   flush). Without marker times this is the only rule: a batch's records go, in
//!   timestamp order, right before the boundary they were flushed at.
//!
//! **Limitation.** Without marker times, a record the source delivers late (in the flush
//! of a later boundary than the one it happened before) is placed before the boundary it
//! was *flushed* at, so it is charged to a later interval than the one it belongs to.
//! CUPTI's forced flush after a device synchronize delivers every completed record, so
//! this should not happen with CUPTI; marker times (CUPTI's `cuptiGetTimestamp`, the
//! clock of its records) place such a record by its timestamp anyway.
//!
//! Allocation records become [`Event::Alloc`] with the address as the id, releases
//! [`Event::Free`]; a release of an address never seen allocated (memory alive before
//! the session started) is ignored by the ledger, like any baseline free.

use crate::CudaError;
use std::fmt;
use vramtest_model::Event;

/// What a memory record says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION`.
    Allocation,
    /// `CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE`.
    Release,
}

/// The kind of memory a record is about (`CUpti_ActivityMemoryKind`), reduced to what
/// the probe needs: device memory is measured, the rest is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// `CUPTI_ACTIVITY_MEMORY_KIND_DEVICE`: `cuMemAlloc`, `cuMemAllocAsync` (pools).
    Device,
    /// Any other kind (pinned or pageable host memory, managed memory, arrays, static
    /// device variables, unknown): not charged; what it takes on the device is
    /// `untracked`.
    Other,
}

/// One memory activity record (a `CUpti_ActivityMemory2..4` reduced to its common fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemoryRecord {
    /// Whether memory was allocated or released.
    pub operation: Operation,
    /// The kind of memory (device memory or another).
    pub kind: MemoryKind,
    /// The device address (the allocation's identity).
    pub address: u64,
    /// Bytes allocated or released.
    pub bytes: u64,
    /// When it happened, in the source's clock (CUPTI: nanoseconds).
    pub timestamp: u64,
    /// The device it happened on (CUPTI's `deviceId`).
    pub device: u32,
}

/// Records delivered by one flush, and the marker it was flushed at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// Index into the marker stream of the boundary this batch was flushed at (flushed
    /// just before that marker took effect); the markers' length for the flush at the
    /// session's end.
    pub before_event: usize,
    /// The records, in delivery order.
    pub records: Vec<MemoryRecord>,
}

/// Why a per-allocation record source cannot run here: a session's fallback reason,
/// each ending in the fidelity it falls back to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsUnavailable {
    /// The library is missing, or present only under a version the bindings do not open.
    #[error("{0} (the toolkit's extras/CUPTI/lib64 or a CUDA wheel's lib folder): phase fidelity")]
    Library(String),
    /// The library was not found: what the lookup said.
    #[error("{0}: phase fidelity")]
    Lookup(String),
    /// The library could not be opened.
    #[error("{name} could not be opened ({error}): phase fidelity")]
    Open {
        /// The library's file name.
        name: String,
        /// What the loader said.
        error: String,
    },
    /// The library lacks a function (it is too old).
    #[error("the CUPTI library lacks {0} (too old): phase fidelity")]
    Symbol(&'static str),
    /// Another session of this process records already (CUPTI's API is process-wide).
    #[error("CUPTI already records for another session in this process: phase fidelity")]
    Busy,
    /// Starting it failed.
    #[error("CUPTI could not record memory activity ({0}): phase fidelity")]
    Failed(CudaError),
    /// A reason given as it is (a test double's).
    #[error("{0}")]
    Other(String),
}

/// A source of per-allocation records for one device: CUPTI's activity API with the
/// `cupti` feature ([`CudarcDriver`](crate::CudarcDriver)), or
/// [`FakePool`](crate::FakePool)'s log in tests.
pub trait AllocationRecords: Send + fmt::Debug {
    /// What the records come from, for the report ("CUPTI").
    fn name(&self) -> &'static str;
    /// The device id the records of the session's device carry.
    fn device(&self) -> u32;
    /// The source's clock now (the clock of the records' timestamps), when it can tell.
    fn now(&self) -> Option<u64>;
    /// Every record not delivered yet. Call it after a device synchronize.
    fn flush(&mut self) -> Result<Vec<MemoryRecord>, CudaError>;
}

/// The merged stream, and where each marker went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Merged {
    /// The markers and the records' allocations and releases, in order.
    pub events: Vec<Event>,
    /// `positions[i]`: the index in `events` of marker `i`; one more entry,
    /// `events.len()`, for "after everything" (the session's last sample).
    pub positions: Vec<usize>,
}

impl Merged {
    /// The index in the merged stream of what was index `before_event` in the markers.
    pub fn position(&self, before_event: usize) -> usize {
        self.positions
            .get(before_event)
            .copied()
            .unwrap_or(self.events.len())
    }
}

/// Weaves the records of `batches` into `markers` (see the module documentation).
///
/// `times[i]` is the source's clock at marker `i` (`None` where it could not tell; a
/// shorter slice counts as `None` for the rest). Batches must be in flush order. Records
/// of other devices and of memory other than device memory are dropped; the rest are
/// placed by time, bounded by their batch's marker, and where several land before the
/// same marker they are ordered by timestamp, then by batch and delivery order.
pub fn merge(markers: &[Event], times: &[Option<u64>], batches: &[Batch], device: u32) -> Merged {
    // The running maximum of the marker times, so "the first marker later than t" is a
    // binary search even if a time is missing or the clock stepped back.
    let mut latest: Option<u64> = None;
    let horizon: Vec<Option<u64>> = (0..markers.len())
        .map(|i| {
            if let Some(&Some(t)) = times.get(i) {
                latest = Some(latest.map_or(t, |l| l.max(t)));
            }
            latest
        })
        .collect();

    let mut placed: Vec<(usize, u64, usize, usize, &MemoryRecord)> = Vec::new();
    for (b, batch) in batches.iter().enumerate() {
        let bound = batch.before_event.min(markers.len());
        for (seq, r) in batch.records.iter().enumerate() {
            if r.device != device || r.kind != MemoryKind::Device {
                continue;
            }
            let by_time = horizon[..bound].partition_point(|h| h.is_none_or(|h| h <= r.timestamp));
            placed.push((by_time, r.timestamp, b, seq, r));
        }
    }
    placed.sort_by_key(|&(slot, timestamp, b, seq, _)| (slot, timestamp, b, seq));

    let mut events = Vec::with_capacity(markers.len() + placed.len());
    let mut positions = Vec::with_capacity(markers.len() + 1);
    let mut next = placed.iter().peekable();
    for slot in 0..=markers.len() {
        while let Some(&(_, _, _, _, r)) = next.next_if(|p| p.0 == slot) {
            events.push(match r.operation {
                Operation::Allocation => Event::Alloc {
                    id: r.address,
                    bytes: r.bytes,
                },
                Operation::Release => Event::Free { id: r.address },
            });
        }
        positions.push(events.len());
        if let Some(&marker) = markers.get(slot) {
            events.push(marker);
        }
    }
    Merged { events, positions }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_model::{Category, Phase};

    fn alloc(address: u64, bytes: u64, timestamp: u64) -> MemoryRecord {
        MemoryRecord {
            operation: Operation::Allocation,
            kind: MemoryKind::Device,
            address,
            bytes,
            timestamp,
            device: 0,
        }
    }

    fn release(address: u64, timestamp: u64) -> MemoryRecord {
        MemoryRecord {
            operation: Operation::Release,
            bytes: 0,
            ..alloc(address, 0, timestamp)
        }
    }

    fn batch(before_event: usize, records: Vec<MemoryRecord>) -> Batch {
        Batch {
            before_event,
            records,
        }
    }

    const START: Event = Event::PhaseStart(Phase::Forward);
    const END: Event = Event::PhaseEnd;

    #[test]
    fn a_batch_goes_before_its_boundary_in_timestamp_order() {
        let markers = [START, END];
        // Delivered out of order (CUPTI fills one buffer per context and stream).
        let batches = [
            batch(0, vec![]),
            batch(
                1,
                vec![release(0xb, 30), alloc(0xa, 8, 10), alloc(0xb, 4, 20)],
            ),
        ];
        let m = merge(&markers, &[], &batches, 0);
        assert_eq!(
            m.events,
            vec![
                START,
                Event::Alloc { id: 0xa, bytes: 8 },
                Event::Alloc { id: 0xb, bytes: 4 },
                Event::Free { id: 0xb },
                END,
            ]
        );
        assert_eq!(m.positions, vec![0, 4, 5]);
        assert_eq!(m.position(1), 4);
        assert_eq!(m.position(2), 5);
    }

    #[test]
    fn other_devices_and_other_memory_kinds_are_dropped() {
        let markers = [START, END];
        let mut other_device = alloc(0x1, 100, 1);
        other_device.device = 1;
        let mut pinned = alloc(0x2, 100, 2);
        pinned.kind = MemoryKind::Other;
        let batches = [batch(1, vec![other_device, pinned, alloc(0x3, 5, 3)])];
        let m = merge(&markers, &[], &batches, 0);
        assert_eq!(
            m.events,
            vec![START, Event::Alloc { id: 0x3, bytes: 5 }, END]
        );
        // Device 1's session keeps device 1's record.
        let m1 = merge(&markers, &[], &batches, 1);
        assert_eq!(
            m1.events[1],
            Event::Alloc {
                id: 0x1,
                bytes: 100
            }
        );
        assert_eq!(m1.events.len(), 3);
    }

    /// The documented limitation: without marker times, a record delivered in a later
    /// flush than the boundary it happened before is placed before the boundary it was
    /// flushed at.
    #[test]
    fn without_marker_times_a_late_record_goes_before_the_boundary_it_was_flushed_at() {
        let markers = [START, END, Event::PhaseStart(Phase::Backward), END];
        // 0xa was allocated inside forward (t = 5) but delivered with backward's end.
        let batches = [
            batch(0, vec![]),
            batch(1, vec![]),
            batch(2, vec![]),
            batch(3, vec![alloc(0xa, 8, 5), alloc(0xb, 4, 50)]),
        ];
        let m = merge(&markers, &[], &batches, 0);
        assert_eq!(
            m.events,
            vec![
                START,
                END,
                Event::PhaseStart(Phase::Backward),
                Event::Alloc { id: 0xa, bytes: 8 },
                Event::Alloc { id: 0xb, bytes: 4 },
                END,
            ]
        );
    }

    #[test]
    fn with_marker_times_a_late_record_goes_where_its_timestamp_says() {
        let markers = [START, END, Event::PhaseStart(Phase::Backward), END];
        let times = [Some(0), Some(10), Some(40), Some(60)];
        let batches = [
            batch(0, vec![]),
            batch(1, vec![]),
            batch(2, vec![]),
            batch(3, vec![alloc(0xb, 4, 50), alloc(0xa, 8, 5)]),
        ];
        let m = merge(&markers, &times, &batches, 0);
        assert_eq!(
            m.events,
            vec![
                START,
                Event::Alloc { id: 0xa, bytes: 8 },
                END,
                Event::PhaseStart(Phase::Backward),
                Event::Alloc { id: 0xb, bytes: 4 },
                END,
            ]
        );
        assert_eq!(m.positions, vec![0, 2, 3, 5, 6]);
    }

    #[test]
    fn a_record_never_goes_after_the_boundary_it_was_flushed_at() {
        // The clock says after the phase end, the flush says before it: the flush wins.
        let markers = [START, END];
        let times = [Some(0), Some(10)];
        let batches = [batch(1, vec![alloc(0xa, 8, 99)])];
        let m = merge(&markers, &times, &batches, 0);
        assert_eq!(
            m.events,
            vec![START, Event::Alloc { id: 0xa, bytes: 8 }, END]
        );
    }

    #[test]
    fn marker_times_put_allocations_inside_their_tag() {
        // Tags are not sampled boundaries: only the clock can put a record inside one.
        let markers = [START, Event::TagPush(Category::Inputs), Event::TagPop, END];
        let times = [Some(0), Some(10), Some(20), Some(30)];
        let batches = [batch(
            3,
            vec![alloc(0xa, 1, 5), alloc(0xb, 2, 15), alloc(0xc, 3, 25)],
        )];
        let m = merge(&markers, &times, &batches, 0);
        assert_eq!(
            m.events,
            vec![
                START,
                Event::Alloc { id: 0xa, bytes: 1 },
                Event::TagPush(Category::Inputs),
                Event::Alloc { id: 0xb, bytes: 2 },
                Event::TagPop,
                Event::Alloc { id: 0xc, bytes: 3 },
                END,
            ]
        );
        let p = vramtest_model::ledger::profile(&m.events);
        assert_eq!(p.at_peak[Category::Inputs], 2);
        // Forward survivors outside any iteration: workspace.
        assert_eq!(p.at_peak[Category::Workspace], 1 + 3);
    }

    #[test]
    fn a_missing_marker_time_falls_back_to_the_previous_one() {
        let markers = [START, Event::TagPush(Category::Inputs), Event::TagPop, END];
        let times = [Some(0), None, Some(20), Some(30)];
        let batches = [batch(3, vec![alloc(0xa, 1, 5), alloc(0xb, 2, 15)])];
        let m = merge(&markers, &times, &batches, 0);
        // 0xa (t = 5) is after START (0): it could be before or after the untimed push;
        // it goes before the first marker known to be later, TagPop (20) — so does 0xb.
        assert_eq!(
            m.events,
            vec![
                START,
                Event::TagPush(Category::Inputs),
                Event::Alloc { id: 0xa, bytes: 1 },
                Event::Alloc { id: 0xb, bytes: 2 },
                Event::TagPop,
                END,
            ]
        );
    }

    #[test]
    fn equal_timestamps_keep_batch_then_delivery_order() {
        let markers = [START, END];
        let batches = [
            batch(1, vec![alloc(0xa, 1, 7), release(0xa, 7)]),
            batch(2, vec![alloc(0xa, 2, 7)]),
        ];
        // The second batch is bounded by the end of the stream; with equal times and no
        // marker times it stays after END, where it was flushed.
        let m = merge(&markers, &[], &batches, 0);
        assert_eq!(
            m.events,
            vec![
                START,
                Event::Alloc { id: 0xa, bytes: 1 },
                Event::Free { id: 0xa },
                END,
                Event::Alloc { id: 0xa, bytes: 2 },
            ]
        );
        assert_eq!(m.position(2), 5);
        // With marker times that put both before END, the earlier batch comes first.
        let times = [Some(0), Some(10)];
        let m = merge(&markers, &times, &batches, 0);
        assert_eq!(
            &m.events[1..4],
            &[
                Event::Alloc { id: 0xa, bytes: 1 },
                Event::Free { id: 0xa },
                Event::Alloc { id: 0xa, bytes: 2 },
            ]
        );
    }

    #[test]
    fn releases_of_baseline_memory_are_ignored_by_the_ledger() {
        let markers = [Event::PhaseStart(Phase::Params), END];
        let batches = [batch(1, vec![release(0xdead, 1), alloc(0xa, 64, 2)])];
        let m = merge(&markers, &[], &batches, 0);
        assert_eq!(m.events[1], Event::Free { id: 0xdead });
        let p = vramtest_model::ledger::profile(&m.events);
        assert_eq!(p.peak_bytes, 64);
        assert_eq!(p.at_peak[Category::Parameters], 64);
        assert_eq!(p.allocations, 1);
    }

    #[test]
    fn no_records_leave_the_markers_alone() {
        let markers = [START, END];
        let m = merge(&markers, &[Some(1), Some(2)], &[], 0);
        assert_eq!(m.events, markers.to_vec());
        assert_eq!(m.positions, vec![0, 1, 2]);
        let empty = merge(&[], &[], &[batch(0, vec![alloc(1, 1, 1)])], 0);
        assert_eq!(empty.events, vec![Event::Alloc { id: 1, bytes: 1 }]);
        assert_eq!(empty.positions, vec![1]);
    }
}
