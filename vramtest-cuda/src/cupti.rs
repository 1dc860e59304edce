//! CUPTI's activity API as a source of per-allocation records (the `cupti` feature).
//!
//! [`Cupti::start`] enables `CUPTI_ACTIVITY_KIND_MEMORY2` with buffer callbacks that
//! keep the memory records of every completed buffer in [`DELIVERED`];
//! [`flush`](AllocationRecords::flush) forces CUPTI to hand over every buffer
//! (`cuptiActivityFlushAll(FLUSH_FORCED)`, which calls the completion callback before
//! it returns) and takes what was delivered. CUPTI's activity API is process-wide, so
//! one session records at a time ([`RECORDING`]); another gets a fallback reason.
//!
//! libcupti is opened here, at run time, never through cudarc's `cupti` module: with
//! cudarc's `dynamic-linking` (candle's `cuda` feature) that module links `-lcupti` at
//! build time, outside cudarc's search paths, and a binary that links it cannot start
//! without libcupti, so the fall-back to watermarks could never happen. [`Api`] looks
//! the library up under CUDA 13's and 12's names
//! ([`find_library`](crate::libs::find_library)) and the seven functions used here by
//! name; a missing library or symbol is a fallback reason, never a panic or a link.
//!
//! Records are read by their fields common to `CUpti_ActivityMemory2`, `3` and `4`
//! (kind, operation, memory kind, address, bytes, timestamp, device id), which sit at the
//! same offsets in every version (`cupti_activity.h`: the structs are packed to 8 bytes
//! and only grow at their end), so any libcupti's records are read correctly; the enum
//! fields are read as raw integers.

use crate::CudaError;
use crate::error::guard;
use crate::records::{AllocationRecords, MemoryKind, MemoryRecord, Operation, RecordsUnavailable};
use cudarc::driver::sys::CUcontext;
use std::alloc::{Layout, alloc, dealloc};
use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Whether a session holds CUPTI's activity API.
static RECORDING: AtomicBool = AtomicBool::new(false);
/// Memory records of the buffers CUPTI completed since the last flush.
static DELIVERED: Mutex<Vec<MemoryRecord>> = Mutex::new(Vec::new());
/// `cuptiActivityRegisterCallbacks`, once per process.
static CALLBACKS: OnceLock<Result<(), CudaError>> = OnceLock::new();

/// Each activity buffer CUPTI asks for (about 40 000 memory records).
const BUFFER: Layout = match Layout::from_size_align(4 << 20, 8) {
    Ok(layout) => layout,
    Err(_) => panic!("invalid CUPTI buffer layout"),
};

// The constants of `cupti_activity.h` and `cupti_result.h` used here (the same in every
// CUPTI since CUDA 11.2, which brought MEMORY2).
/// `CUPTI_ACTIVITY_KIND_MEMORY2`.
const MEMORY2: u32 = 49;
/// `CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION`.
const ALLOCATION: u32 = 1;
/// `CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE`.
const RELEASE: u32 = 2;
/// `CUPTI_ACTIVITY_MEMORY_KIND_DEVICE`.
const DEVICE_MEMORY: u32 = 3;
/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`.
const FLUSH_FORCED: u32 = 1;
/// `CUPTI_SUCCESS`.
const SUCCESS: c_int = 0;

// Offsets of the fields read from a `CUpti_ActivityMemory2` record (packed(8)): kind,
// operation, memory kind, correlation id (u32 each), address, bytes, timestamp, PC
// (u64 each), process id, device id (u32 each).
const OPERATION_AT: usize = 4;
const MEMORY_KIND_AT: usize = 8;
const ADDRESS_AT: usize = 16;
const BYTES_AT: usize = 24;
const TIMESTAMP_AT: usize = 32;
const DEVICE_ID_AT: usize = 52;

type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = unsafe extern "C" fn(CUcontext, u32, *mut u8, usize, usize);

/// The CUPTI functions used here, looked up in libcupti by name (cupti.h's signatures;
/// every one returns a `CUptiResult`).
#[derive(Debug, Clone, Copy)]
struct Api {
    register_callbacks: unsafe extern "C" fn(Option<RequestFn>, Option<CompleteFn>) -> c_int,
    enable: unsafe extern "C" fn(u32) -> c_int,
    disable: unsafe extern "C" fn(u32) -> c_int,
    flush_all: unsafe extern "C" fn(u32) -> c_int,
    get_next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> c_int,
    get_timestamp: unsafe extern "C" fn(*mut u64) -> c_int,
    get_device_id: unsafe extern "C" fn(CUcontext, *mut u32) -> c_int,
}

impl Api {
    /// libcupti's functions, opened once per process, or why not (ending in "phase
    /// fidelity").
    fn get() -> Result<Api, RecordsUnavailable> {
        static API: OnceLock<Result<Api, RecordsUnavailable>> = OnceLock::new();
        API.get_or_init(|| {
            if let Some(why) = library_problem() {
                return Err(why);
            }
            let name = match crate::libs::find_library("cupti", crate::libs::bindings_version()) {
                crate::libs::Lookup::Found { name } => name,
                other => return Err(RecordsUnavailable::Lookup(format!("{other:?}"))),
            };
            // SAFETY: opening libcupti runs its initializers only; it stays loaded for
            // the process (its functions are kept in `API`).
            let lib = unsafe { libloading::Library::new(&name) }.map_err(|e| {
                RecordsUnavailable::Open {
                    name: name.clone(),
                    error: e.to_string(),
                }
            })?;
            let lib: &'static libloading::Library = Box::leak(Box::new(lib));
            fn symbol<T: Copy>(
                lib: &libloading::Library,
                name: &'static str,
            ) -> Result<T, RecordsUnavailable> {
                // SAFETY: `T` is the function type cupti.h gives `name`.
                unsafe { lib.get::<T>(name.as_bytes()) }
                    .map(|f| *f)
                    .map_err(|_| RecordsUnavailable::Symbol(name))
            }
            Ok(Api {
                register_callbacks: symbol(lib, "cuptiActivityRegisterCallbacks")?,
                enable: symbol(lib, "cuptiActivityEnable")?,
                disable: symbol(lib, "cuptiActivityDisable")?,
                flush_all: symbol(lib, "cuptiActivityFlushAll")?,
                get_next_record: symbol(lib, "cuptiActivityGetNextRecord")?,
                get_timestamp: symbol(lib, "cuptiGetTimestamp")?,
                get_device_id: symbol(lib, "cuptiGetDeviceId")?,
            })
        })
        .clone()
    }
}

/// A CUPTI call's result as an error naming the call and the code.
fn check(call: &'static str, code: c_int) -> Result<(), CudaError> {
    if code == SUCCESS {
        Ok(())
    } else {
        Err(CudaError::Records {
            call,
            code: format!("CUptiResult {code}"),
        })
    }
}

/// Why libcupti cannot be used (`None` when it can): missing under every name, or
/// present only under a major version the bindings' loader does not open.
pub(crate) fn library_problem() -> Option<RecordsUnavailable> {
    crate::libs::find_library("cupti", crate::libs::bindings_version())
        .problem("CUPTI library")
        .map(RecordsUnavailable::Library)
}

/// CUPTI recording the memory activity of one device, until dropped.
#[derive(Debug)]
pub(crate) struct Cupti {
    api: Api,
    device: u32,
}

impl Cupti {
    /// Starts recording `MEMORY2` activity; the records kept are those of the device of
    /// `ctx` (CUPTI's device id of the context, else `ordinal`). The error is the
    /// session's fallback reason, ending in "phase fidelity". Never panics.
    pub(crate) fn start(
        ctx: Option<CUcontext>,
        ordinal: usize,
    ) -> Result<Cupti, RecordsUnavailable> {
        if let Some(why) = library_problem() {
            return Err(why);
        }
        if RECORDING.swap(true, Ordering::AcqRel) {
            return Err(RecordsUnavailable::Busy);
        }
        let api = match Api::get() {
            Ok(api) => api,
            Err(why) => {
                RECORDING.store(false, Ordering::Release);
                return Err(why);
            }
        };
        let started = guard("cuptiActivityEnable", || {
            CALLBACKS
                .get_or_init(|| {
                    // SAFETY: two functions of the signatures CUPTI expects.
                    let code = unsafe {
                        (api.register_callbacks)(Some(buffer_requested), Some(buffer_completed))
                    };
                    check("cuptiActivityRegisterCallbacks", code)
                })
                .clone()?;
            // SAFETY: a plain call with an activity kind.
            check("cuptiActivityEnable", unsafe { (api.enable)(MEMORY2) })?;
            let mut device = u32::try_from(ordinal).unwrap_or(u32::MAX);
            if let Some(ctx) = ctx {
                let mut id = 0u32;
                // SAFETY: a context the driver retained; writes one u32.
                if unsafe { (api.get_device_id)(ctx, &mut id) } == SUCCESS {
                    device = id;
                }
            }
            Ok(device)
        });
        match started {
            Ok(device) => {
                take_delivered();
                Ok(Cupti { api, device })
            }
            Err(e) => {
                RECORDING.store(false, Ordering::Release);
                Err(RecordsUnavailable::Failed(e))
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
        let mut t = 0u64;
        // SAFETY: writes one u64.
        (unsafe { (self.api.get_timestamp)(&mut t) } == SUCCESS).then_some(t)
    }

    fn flush(&mut self) -> Result<Vec<MemoryRecord>, CudaError> {
        flush_forced(&self.api)?;
        Ok(take_delivered())
    }
}

impl Drop for Cupti {
    fn drop(&mut self) {
        // SAFETY: a plain call with an activity kind.
        let _ = unsafe { (self.api.disable)(MEMORY2) };
        // Hand back the buffers CUPTI still holds, and forget their records.
        let _ = flush_forced(&self.api);
        take_delivered();
        RECORDING.store(false, Ordering::Release);
    }
}

/// `cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)`: every buffer, also those
/// with records still incomplete (none are after a device synchronize).
fn flush_forced(api: &Api) -> Result<(), CudaError> {
    guard("cuptiActivityFlushAll", || {
        // SAFETY: a plain call; CUPTI calls `buffer_completed` before it returns.
        check("cuptiActivityFlushAll", unsafe {
            (api.flush_all)(FLUSH_FORCED)
        })
    })
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
unsafe fn read_record(record: *const u8) -> Option<MemoryRecord> {
    // SAFETY (all reads): every record starts with its kind (a u32); a MEMORY2 record is
    // at least a CUpti_ActivityMemory2, whose fields read here are common to every
    // version; reads are unaligned-safe (the structs are packed).
    unsafe {
        let u32_at = |at: usize| record.add(at).cast::<u32>().read_unaligned();
        let u64_at = |at: usize| record.add(at).cast::<u64>().read_unaligned();
        if u32_at(0) != MEMORY2 {
            return None;
        }
        memory_record(
            u32_at(OPERATION_AT),
            u32_at(MEMORY_KIND_AT),
            u64_at(ADDRESS_AT),
            u64_at(BYTES_AT),
            u64_at(TIMESTAMP_AT),
            u32_at(DEVICE_ID_AT),
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
        let Ok(api) = Api::get() else { return };
        let mut record: *mut u8 = std::ptr::null_mut();
        // SAFETY: a buffer CUPTI filled with `valid_size` bytes of records; it stops with
        // an error (CUPTI_ERROR_MAX_LIMIT_REACHED) after the last one.
        while unsafe { (api.get_next_record)(buffer, valid_size, &mut record) } == SUCCESS {
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
                let text = reason.to_string();
                assert!(text.starts_with("no CUPTI library"), "{text}");
                assert!(text.ends_with("phase fidelity"), "{text}");
                // Nothing was left half-started: the same answer again.
                assert_eq!(Cupti::start(None, 0).unwrap_err(), reason);
            }
            Err(reason) => assert!(reason.to_string().contains("CUPTI"), "{reason}"),
            Ok(cupti) => {
                // One session at a time.
                let second = Cupti::start(None, 0).unwrap_err();
                assert_eq!(second, RecordsUnavailable::Busy);
                assert!(second.to_string().contains("already records"), "{second}");
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
        let pinned = 2; // CUPTI_ACTIVITY_MEMORY_KIND_PINNED
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
        // A record as CUPTI lays it out (CUpti_ActivityMemory4, 8-byte packed, bigger than
        // the fields read), written field by field at cupti_activity.h's offsets.
        let mut m = [0u8; 128];
        let put = |m: &mut [u8; 128], at: usize, bytes: &[u8]| {
            m[at..at + bytes.len()].copy_from_slice(bytes)
        };
        put(&mut m, 0, &MEMORY2.to_le_bytes());
        put(&mut m, OPERATION_AT, &RELEASE.to_le_bytes());
        put(&mut m, MEMORY_KIND_AT, &DEVICE_MEMORY.to_le_bytes());
        put(&mut m, 12, &7u32.to_le_bytes()); // correlation id
        put(&mut m, ADDRESS_AT, &0xdead_0000u64.to_le_bytes());
        put(&mut m, BYTES_AT, &(1u64 << 20).to_le_bytes());
        put(&mut m, TIMESTAMP_AT, &42u64.to_le_bytes());
        put(&mut m, 40, &0x1234u64.to_le_bytes()); // PC
        put(&mut m, 48, &999u32.to_le_bytes()); // process id
        put(&mut m, DEVICE_ID_AT, &1u32.to_le_bytes());
        // SAFETY: a whole record.
        let r = unsafe { read_record(m.as_ptr()) }.unwrap();
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
        put(&mut m, 0, &1u32.to_le_bytes()); // CUPTI_ACTIVITY_KIND_MEMCPY
        // SAFETY: a whole record.
        assert_eq!(unsafe { read_record(m.as_ptr()) }, None);
    }

    /// The constants and offsets above are cupti_activity.h's, as cudarc's bindings
    /// (generated from it) have them.
    #[test]
    fn the_layout_is_cuptis() {
        use cudarc::cupti::sys;
        use std::mem::offset_of;
        type M2 = sys::CUpti_ActivityMemory2;
        assert_eq!(offset_of!(M2, memoryOperationType), OPERATION_AT);
        assert_eq!(offset_of!(M2, memoryKind), MEMORY_KIND_AT);
        assert_eq!(offset_of!(M2, address), ADDRESS_AT);
        assert_eq!(offset_of!(M2, bytes), BYTES_AT);
        assert_eq!(offset_of!(M2, timestamp), TIMESTAMP_AT);
        assert_eq!(offset_of!(M2, deviceId), DEVICE_ID_AT);
        type M4 = sys::CUpti_ActivityMemory4;
        assert_eq!(offset_of!(M4, deviceId), DEVICE_ID_AT);
        assert_eq!(offset_of!(M4, bytes), BYTES_AT);
        assert_eq!(
            sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMORY2 as u32,
            MEMORY2
        );
        use sys::CUpti_ActivityMemoryOperationType as Op;
        assert_eq!(
            Op::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION as u32,
            ALLOCATION
        );
        assert_eq!(
            Op::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE as u32,
            RELEASE
        );
        assert_eq!(
            sys::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u32,
            DEVICE_MEMORY
        );
        assert_eq!(
            sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32,
            FLUSH_FORCED
        );
        assert_eq!(sys::CUptiResult::CUPTI_SUCCESS as c_int, SUCCESS);
    }
}
