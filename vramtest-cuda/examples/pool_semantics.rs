//! What the stream-ordered allocator does on this device, measured with raw cudarc calls
//! (the behaviour `FakePool` models from NVIDIA's documentation; this checks it):
//!
//! 1. on one stream, alloc A, free A, alloc B: does the pool's `USED_MEM_HIGH` read
//!    max(A, B) (the free is reused at once) or A + B;
//! 2. does `RESERVED_MEM_CURRENT` drop after a synchronize (release threshold 0);
//! 3. with the `cupti` feature: the memory kind and address of CUPTI's release record
//!    for `cuMemFreeAsync` (does it name the freed allocation's address, as device
//!    memory).
//!
//! Prints one `key: value` line per finding and a JSON line at the end. Exit code 2
//! without a usable device.
//!
//!     cargo run -p vramtest-cuda --example pool_semantics --features cupti

use cudarc::driver::{result, sys};
use std::process::ExitCode;
use vramtest_cuda::{Availability, CudarcDriver, Driver, PoolAttribute, detect};

const MIB: u64 = 1 << 20;
const A: u64 = 64 * MIB;
const B: u64 = 32 * MIB;

fn main() -> ExitCode {
    if let Availability::Unavailable(why) = detect() {
        eprintln!("pool_semantics: {why}");
        return ExitCode::from(2);
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pool_semantics: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let driver = CudarcDriver::new(0)?;
    println!("device: {}", driver.device_name()?);
    if !driver.memory_pools_supported()? {
        println!("memory pools: not supported (nothing to measure)");
        return Ok(());
    }
    let mut records = match driver.allocation_records() {
        Some(Ok(source)) => Some(source),
        Some(Err(why)) => {
            println!("cupti: not running ({why})");
            None
        }
        None => {
            println!("cupti: not in this build (build with --features cupti)");
            None
        }
    };
    let attr = |a| driver.pool_attribute(a);
    // The legacy stream of the current (primary) context.
    let stream: sys::CUstream = std::ptr::null_mut();

    driver.synchronize()?;
    let used0 = attr(PoolAttribute::UsedCurrent)?;
    driver.reset_high_water_mark(PoolAttribute::UsedHigh)?;
    driver.reset_high_water_mark(PoolAttribute::ReservedHigh)?;
    if let Some(r) = records.as_mut() {
        r.flush()?;
    }

    // 1. alloc A, free A, alloc B on one stream, with no synchronize in between.
    // SAFETY: the driver made device 0's primary context current on this thread; every
    // pointer is freed on the same stream below.
    let (a, b) = unsafe {
        let a = result::malloc_async(stream, A as usize)?;
        result::free_async(a, stream)?;
        let b = result::malloc_async(stream, B as usize)?;
        (a, b)
    };
    let high_before_sync = attr(PoolAttribute::UsedHigh)? - used0;
    driver.synchronize()?;
    let high = attr(PoolAttribute::UsedHigh)? - used0;
    let verdict = if high == A.max(B) {
        "max(A, B): a free is reused on its stream at once"
    } else if high == A + B {
        "A + B: the free was not reused before B"
    } else {
        "neither max(A, B) nor A + B"
    };
    println!(
        "used_high after alloc A ({A} B), free A, alloc B ({B} B): {high} B ({verdict}); read before the synchronize: {high_before_sync} B"
    );

    // 2. Reserved memory before and after a synchronize, once B is freed.
    // SAFETY: `b` was allocated on `stream` above.
    unsafe { result::free_async(b, stream)? };
    let reserved_before = attr(PoolAttribute::ReservedCurrent)?;
    driver.synchronize()?;
    let reserved_after = attr(PoolAttribute::ReservedCurrent)?;
    let trimmed = reserved_after < reserved_before;
    println!(
        "reserved after free B: {reserved_before} B before the synchronize, {reserved_after} B after ({})",
        if trimmed {
            "trimmed at the synchronize"
        } else {
            "kept"
        }
    );

    // 3. CUPTI's records of the four operations.
    let mut release_kinds = Vec::new();
    if let Some(r) = records.as_mut() {
        let flushed = r.flush()?;
        for rec in &flushed {
            let which = if rec.address == a {
                "A"
            } else if rec.address == b {
                "B"
            } else {
                "other"
            };
            println!(
                "cupti record: {:?} kind {:?} address {:#x} ({which}) bytes {}",
                rec.operation, rec.kind, rec.address, rec.bytes
            );
            if matches!(rec.operation, vramtest_cuda::records::Operation::Release) {
                release_kinds.push(format!("{:?}:{which}", rec.kind));
            }
        }
        if flushed.is_empty() {
            println!("cupti record: none delivered");
        }
    }
    println!(
        "{{\"used_high\":{high},\"used_high_before_sync\":{high_before_sync},\"a\":{A},\"b\":{B},\"reserved_before_sync\":{reserved_before},\"reserved_after_sync\":{reserved_after},\"cupti_releases\":{:?}}}",
        release_kinds
    );
    Ok(())
}
