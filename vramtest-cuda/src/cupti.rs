//! CUPTI's activity API as a source of per-allocation records (the `cupti` feature).
//!
//! [`Cupti::start`] enables `CUPTI_ACTIVITY_KIND_MEMORY2` with buffer callbacks that
//! keep the memory records of every completed buffer in [`DELIVERED`];
//! [`flush`](AllocationRecords::flush) forces CUPTI to hand over every buffer
//! (`cuptiActivityFlushAll(FLUSH_FORCED)`, which calls the completion callback before
//! it returns) and takes what was delivered. CUPTI's activity API is process-wide, so
//! one session records at a time ([`RECORDING`]); another gets a fallback reason.
//!
//! cudarc loads libcupti on first use and *panics* when it is absent, so
//! [`Cupti::start`] looks for it first under CUDA 13's and 12's names
//! ([`find_library`](crate::libs::find_library)) and every call runs under [`guard`]
//! (a libcupti too old to export a symbol panics in cudarc's loader too).
//!
//! Records are read by their fields common to `CUpti_ActivityMemory2`, `3` and `4`
//! (kind, operation, memory kind, address, bytes, timestamp, device id), which sit at the
//! same offsets in every version, so a libcupti newer or older than the bindings
//! (cudarc's `cuda-12080`) is read correctly; enum fields are read as raw integers, so a
//! value these bindings do not know is never materialized as a Rust enum.

use crate::CudaError;
use crate::error::guard;
use crate::records::{AllocationRecords, MemoryKind, MemoryRecord, Operation};
use cudarc::cupti::result::{self as cupti, CuptiError, activity};
use cudarc::cupti::sys;
use cudarc::driver::sys::CUcontext;
use std::alloc::{Layout, alloc, dealloc};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// What follows a fallback reason: the fidelity the session falls back to.
const FALLBACK: &str = "phase fidelity";

/// Whether a session holds CUPTI's activity API.
static RECORDING: AtomicBool = AtomicBool::new(false);
/// Memory records of the buffers CUPTI completed since the last flush.
static DELIVERED: Mutex<Vec<MemoryRecord>> = Mutex::new(Vec::new());
/// `cuptiActivityRegisterCallbacks`, once per process.
static CALLBACKS: OnceLock<Result<(), String>> = OnceLock::new();

/// Each activity buffer CUPTI asks for (about 40 000 memory records).
const BUFFER: Layout = match Layout::from_size_align(4 << 20, 8) {
    Ok(layout) => layout,
    Err(_) => panic!("invalid CUPTI buffer layout"),
};

const MEMORY2: u32 = sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMORY2 as u32;
const ALLOCATION: u32 =
    sys::CUpti_ActivityMemoryOperationType::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION as u32;
const RELEASE: u32 =
    sys::CUpti_ActivityMemoryOperationType::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE as u32;
const DEVICE_MEMORY: u32 = sys::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u32;

/// Why libcupti cannot be used (`None` when it can): missing under every name, or
/// present only under a major version the bindings' loader does not open.
pub(crate) fn library_problem() -> Option<String> {
    crate::libs::find_library("cupti", crate::libs::bindings_version())
        .problem("CUPTI library")
        .map(|why| {
            format!(
                "{why} (the toolkit's extras/CUPTI/lib64 or a CUDA wheel's lib folder): {FALLBACK}"
            )
        })
}

fn cupti_error(call: &'static str) -> impl FnOnce(CuptiError) -> CudaError {
    // `CuptiError`'s Debug asks libcupti for the message and panics on an unknown code:
    // print the code only.
    move |e| CudaError::Records {
        call,
        code: format!("{:?}", e.0),
    }
}

/// CUPTI recording the memory activity of one device, until dropped.
#[derive(Debug)]
pub(crate) struct Cupti {
    device: u32,
}

impl Cupti {
    /// Starts recording `MEMORY2` activity; the records kept are those of the device of
    /// `ctx` (CUPTI's device id of the context, else `ordinal`). The error is the
    /// session's fallback reason, ending in "phase fidelity". Never panics.
    pub(crate) fn start(ctx: Option<CUcontext>, ordinal: usize) -> Result<Cupti, String> {
        if let Some(why) = library_problem() {
            return Err(why);
        }
        if RECORDING.swap(true, Ordering::AcqRel) {
            return Err(
                "CUPTI already records for another session in this process: phase fidelity"
                    .to_owned(),
            );
        }
        let started = guard("cuptiActivityEnable", || {
            CALLBACKS
                .get_or_init(|| {
                    activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
                        .map_err(|e| format!("{:?}", e.0))
                })
                .clone()
                .map_err(|code| CudaError::Records {
                    call: "cuptiActivityRegisterCallbacks",
                    code,
                })?;
            activity::enable(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMORY2)
                .map_err(cupti_error("cuptiActivityEnable"))?;
            let mut device = u32::try_from(ordinal).unwrap_or(u32::MAX);
            if let Some(ctx) = ctx {
                let mut id = 0u32;
                // SAFETY: a context the driver retained; writes one u32.
                if unsafe { cupti::get_device_id(ctx, &mut id) }.is_ok() {
                    device = id;
                }
            }
            Ok(device)
        });
        match started {
            Ok(device) => {
                take_delivered();
                Ok(Cupti { device })
            }
            Err(e) => {
                RECORDING.store(false, Ordering::Release);
                Err(format!(
                    "CUPTI could not record memory activity ({e}): phase fidelity"
                ))
            }
        }
    }
}

impl AllocationRecords for Cupti {
    fn name(&self) -> &'static str {
        "CUPTI"
    }

    fn device(&self) -> u32 {
        self.device
    }

    fn now(&self) -> Option<u64> {
        guard("cuptiGetTimestamp", || {
            let mut t = 0u64;
            // SAFETY: writes one u64.
            unsafe { cupti::get_timestamp(&mut t) }.map_err(cupti_error("cuptiGetTimestamp"))?;
            Ok(t)
        })
        .ok()
    }

    fn flush(&mut self) -> Result<Vec<MemoryRecord>, CudaError> {
        guard("cuptiActivityFlushAll", flush_forced)?;
        Ok(take_delivered())
    }
}

impl Drop for Cupti {
    fn drop(&mut self) {
        let _ = guard("cuptiActivityDisable", || {
            activity::disable(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMORY2)
                .map_err(cupti_error("cuptiActivityDisable"))
        });
        // Hand back the buffers CUPTI still holds, and forget their records.
        let _ = guard("cuptiActivityFlushAll", flush_forced);
        take_delivered();
        RECORDING.store(false, Ordering::Release);
    }
}

/// `cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)`: every buffer, also those
/// with records still incomplete (none are after a device synchronize).
fn flush_forced() -> Result<(), CudaError> {
    activity::flush_all(sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32)
        .map_err(cupti_error("cuptiActivityFlushAll"))
}

fn take_delivered() -> Vec<MemoryRecord> {
    std::mem::take(&mut *DELIVERED.lock().unwrap_or_else(PoisonError::into_inner))
}

/// A memory record from the fields of a `MEMORY2` activity record; `None` for an
/// operation other than allocation or release.
fn memory_record(
    operation: u32,
    memory_kind: u32,
    address: u64,
    bytes: u64,
    timestamp: u64,
    device: u32,
) -> Option<MemoryRecord> {
    let operation = match operation {
        ALLOCATION => Operation::Allocation,
        RELEASE => Operation::Release,
        _ => return None,
    };
    Some(MemoryRecord {
        operation,
        kind: if memory_kind == DEVICE_MEMORY {
            MemoryKind::Device
        } else {
            MemoryKind::Other
        },
        address,
        bytes,
        timestamp,
        device,
    })
}

/// Reads one activity record, when it is a `MEMORY2` record.
///
/// # Safety
/// `record` points at a whole activity record from `cuptiActivityGetNextRecord`.
unsafe fn read_record(record: *const sys::CUpti_Activity) -> Option<MemoryRecord> {
    // SAFETY (all reads): every record starts with its kind (a u32); a MEMORY2 record is
    // at least a CUpti_ActivityMemory2, whose fields read here are common to every
    // version; reads are unaligned-safe (the structs are packed).
    unsafe {
        if record.cast::<u32>().read_unaligned() != MEMORY2 {
            return None;
        }
        let m = record.cast::<sys::CUpti_ActivityMemory2>();
        memory_record(
            (&raw const (*m).memoryOperationType)
                .cast::<u32>()
                .read_unaligned(),
            (&raw const (*m).memoryKind).cast::<u32>().read_unaligned(),
            (&raw const (*m).address).read_unaligned(),
            (&raw const (*m).bytes).read_unaligned(),
            (&raw const (*m).timestamp).read_unaligned(),
            (&raw const (*m).deviceId).read_unaligned(),
        )
    }
}

/// CUPTI asks for an activity buffer.
unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_num_records: *mut usize,
) {
    // SAFETY: a non-zero size; CUPTI hands the buffer back to `buffer_completed`, which
    // frees it with the same layout. The out-pointers are CUPTI's.
    unsafe {
        let ptr = alloc(BUFFER);
        *buffer = ptr;
        *size = if ptr.is_null() { 0 } else { BUFFER.size() };
        *max_num_records = 0; // as many as fit
    }
}

/// CUPTI hands back a buffer: keep its memory records, free it.
unsafe extern "C" fn buffer_completed(
    _context: CUcontext,
    _stream_id: u32,
    buffer: *mut u8,
    _size: usize,
    valid_size: usize,
) {
    if buffer.is_null() {
        return;
    }
    // A panic must not cross the FFI boundary (it would abort): keep what was read.
    let mut found = Vec::new();
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
        // SAFETY: a buffer CUPTI filled with `valid_size` bytes of records; it stops with
        // an error (CUPTI_ERROR_MAX_LIMIT_REACHED) after the last one.
        while unsafe { activity::get_next_record(buffer, valid_size, &mut record) }.is_ok() {
            // SAFETY: CUPTI's next record.
            if let Some(r) = unsafe { read_record(record) } {
                found.push(r);
            }
        }
    }));
    DELIVERED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(found);
    // SAFETY: allocated by `buffer_requested` with this layout.
    unsafe { dealloc(buffer, BUFFER) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The machines this suite runs on in CI have no libcupti: starting must say so with
    /// the fallback reason, not panic; on a machine with libcupti it starts or says why.
    #[test]
    fn without_libcupti_start_gives_the_fallback_reason() {
        let _gpu = crate::tests::GPU
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match Cupti::start(None, 0) {
            Err(reason) if library_problem().is_some() => {
                assert_eq!(Some(&reason), library_problem().as_ref());
                assert!(reason.starts_with("no CUPTI library"), "{reason}");
                assert!(reason.ends_with("phase fidelity"), "{reason}");
                // Nothing was left half-started: the same answer again.
                assert_eq!(Cupti::start(None, 0).unwrap_err(), reason);
            }
            Err(reason) => assert!(reason.contains("CUPTI"), "{reason}"),
            Ok(cupti) => {
                // One session at a time.
                let second = Cupti::start(None, 0).unwrap_err();
                assert!(second.contains("already records"), "{second}");
                drop(cupti);
            }
        }
        assert!(!RECORDING.load(Ordering::Acquire));
    }

    #[test]
    fn memory2_fields_become_memory_records() {
        let r = memory_record(ALLOCATION, DEVICE_MEMORY, 0x7f00, 4096, 123, 2).unwrap();
        assert_eq!(
            r,
            MemoryRecord {
                operation: Operation::Allocation,
                kind: MemoryKind::Device,
                address: 0x7f00,
                bytes: 4096,
                timestamp: 123,
                device: 2,
            }
        );
        let pinned = sys::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_PINNED as u32;
        let r = memory_record(RELEASE, pinned, 1, 2, 3, 0).unwrap();
        assert_eq!(
            (r.operation, r.kind),
            (Operation::Release, MemoryKind::Other)
        );
        assert_eq!(memory_record(0, DEVICE_MEMORY, 1, 2, 3, 0), None);
        assert_eq!(memory_record(77, DEVICE_MEMORY, 1, 2, 3, 0), None);
    }

    #[test]
    fn a_memory2_record_is_read_from_its_bytes() {
        // A record as CUPTI lays it out (CUpti_ActivityMemory4 for this CUDA version),
        // read through the common prefix.
        // SAFETY: all-zero bytes are a valid value of this plain-data struct.
        let mut m: sys::CUpti_ActivityMemory4 = unsafe { std::mem::zeroed() };
        m.kind = sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMORY2;
        m.memoryOperationType =
            sys::CUpti_ActivityMemoryOperationType::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
        m.memoryKind = sys::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        m.address = 0xdead_0000;
        m.bytes = 1 << 20;
        m.timestamp = 42;
        m.deviceId = 1;
        // SAFETY: a whole record.
        let r = unsafe { read_record((&raw const m).cast()) }.unwrap();
        assert_eq!(
            r,
            MemoryRecord {
                operation: Operation::Release,
                kind: MemoryKind::Device,
                address: 0xdead_0000,
                bytes: 1 << 20,
                timestamp: 42,
                device: 1,
            }
        );
        m.kind = sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY;
        // SAFETY: a whole record.
        assert_eq!(unsafe { read_record((&raw const m).cast()) }, None);
    }
}
