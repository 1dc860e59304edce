//! What the stream-ordered allocator does on this device, measured with raw cudarc calls
//! (the behaviour `FakePool` models from NVIDIA's documentation; this checks it):
//!
//! 1. on one stream, alloc A, free A, alloc B: does the pool's `USED_MEM_HIGH` read
//!    max(A, B) (the free is reused at once) or A + B;
//! 2. does `RESERVED_MEM_CURRENT` drop after a synchronize (release threshold 0);
//! 3. with the `cupti` feature: the memory kind and address of CUPTI's release record
//!    for `cuMemFreeAsync` (does it name the freed allocation's address, as device
//!    memory);
//! 4. the device constants the fakes assume (`vramtest_cuda::DEVICE`): the alignment
//!    of pool blocks (the distance between two 1-byte allocations, and what the pool's
//!    used counter charges for one), the granule (reserved bytes after one 1-byte
//!    allocation), the device's used bytes once the context exists; printed as a
//!    `constants:` line with the table's names, beside the table's own line;
//! 5. where cuBLAS takes its workspace (cudarc never calls `cublasSetWorkspace`): the
//!    pool's used and the device's used bytes around `CudaBlas::new` and its first
//!    gemm. Pool growth means the workspace is pool memory (a tracked run then falls
//!    back from exact fidelity; set `cublas_workspace = 0` for predictions, the pool
//!    holds it); device growth outside the pool means the separate
//!    `cublas_workspace` term is right.
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
    // 4. The device constants.
    let constants = measure_constants(&driver, stream)?;
    println!("constants: {}", constants.line());
    println!("constants assumed: {}", vramtest_cuda::DEVICE.line());

    // 5. cuBLAS's workspace.
    cublas_workspace(&driver)?;

    println!(
        "{{\"used_high\":{high},\"used_high_before_sync\":{high_before_sync},\"a\":{A},\"b\":{B},\"reserved_before_sync\":{reserved_before},\"reserved_after_sync\":{reserved_after},\"cupti_releases\":{:?}}}",
        release_kinds
    );
    Ok(())
}

/// The alignment, granule and context the fakes assume, as this device shows them (the
/// release threshold, the high-water reset and `cuMemGetInfo` being device-wide are
/// the documented values; parts 1 and 2 above test the first two).
fn measure_constants(
    driver: &CudarcDriver,
    stream: sys::CUstream,
) -> Result<vramtest_cuda::DeviceConstants, Box<dyn std::error::Error>> {
    driver.synchronize()?;
    let (free, total) = driver.mem_get_info()?;
    let used0 = driver.pool_attribute(PoolAttribute::UsedCurrent)?;
    let reserved0 = driver.pool_attribute(PoolAttribute::ReservedCurrent)?;
    // SAFETY: the primary context is current (CudarcDriver::new); both freed below.
    let (p, q) = unsafe {
        (
            result::malloc_async(stream, 1)?,
            result::malloc_async(stream, 1)?,
        )
    };
    let used = driver.pool_attribute(PoolAttribute::UsedCurrent)? - used0;
    let reserved = driver.pool_attribute(PoolAttribute::ReservedCurrent)? - reserved0;
    let distance = p.abs_diff(q);
    println!(
        "alignment: two 1-byte blocks {distance} B apart (lowest set bit {} B); the pool's used counter grew by {used} B for them",
        1u64 << distance.trailing_zeros().min(63)
    );
    println!("granule: reserved grew by {reserved} B for two 1-byte blocks");
    // SAFETY: allocated on `stream` above.
    unsafe {
        result::free_async(p, stream)?;
        result::free_async(q, stream)?;
    }
    driver.synchronize()?;
    Ok(vramtest_cuda::DeviceConstants {
        alignment: (used / 2).max(1),
        granule: reserved,
        context: total - free,
        ..vramtest_cuda::DEVICE
    })
}

/// Where cuBLAS's default workspace lives: the pool's used bytes and the device's used
/// bytes around `CudaBlas::new` and a first 256×256 sgemm.
fn cublas_workspace(driver: &CudarcDriver) -> Result<(), Box<dyn std::error::Error>> {
    use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys as blas};
    let ctx = cudarc::driver::CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let n = 256usize;
    let a = stream.alloc_zeros::<f32>(n * n)?;
    let b = stream.alloc_zeros::<f32>(n * n)?;
    let mut c = stream.alloc_zeros::<f32>(n * n)?;
    let read = |what: &str| -> Result<(u64, u64), Box<dyn std::error::Error>> {
        stream.synchronize()?;
        let pool = driver.pool_attribute(PoolAttribute::UsedCurrent)?;
        let high = driver.pool_attribute(PoolAttribute::UsedHigh)?;
        let (free, total) = driver.mem_get_info()?;
        println!(
            "cublas: {what}: pool used {pool} B (high {high} B), device used {} B",
            total - free
        );
        Ok((pool, total - free))
    };
    // cudarc's loader panics without libcublas: look first.
    let lookup = vramtest_cuda::find_library("cublas", vramtest_cuda::libs::bindings_version());
    if let Some(why) = lookup.problem("cuBLAS") {
        println!("cublas: not measured ({why})");
        return Ok(());
    }
    let before = read("before CudaBlas::new")?;
    let blas = match CudaBlas::new(stream.clone()) {
        Ok(blas) => blas,
        Err(e) => {
            println!("cublas: not available ({e:?})");
            return Ok(());
        }
    };
    let made = read("after CudaBlas::new")?;
    let cfg = GemmConfig {
        transa: blas::cublasOperation_t::CUBLAS_OP_N,
        transb: blas::cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: n as i32,
        k: n as i32,
        alpha: 1.0f32,
        lda: n as i32,
        ldb: n as i32,
        beta: 0.0f32,
        ldc: n as i32,
    };
    // SAFETY: three n×n f32 matrices on the blas handle's stream.
    unsafe { blas.gemm(cfg, &a, &b, &mut c)? };
    let after = read("after the first gemm")?;
    let pool = after.0 as i64 - before.0 as i64;
    let outside = (after.1 as i64 - before.1 as i64) - (after.0 as i64 - before.0 as i64);
    println!(
        "cublas workspace: pool +{pool} B, outside the pool +{outside} B (handle +{} B device); {}",
        made.1 as i64 - before.1 as i64,
        if pool > 0 {
            "taken from the pool: set cublas_workspace = 0 for predictions"
        } else {
            "outside the pool: the cublas_workspace term stands"
        }
    );
    Ok(())
}
