//! What a CUDA test can tell the harness: the allocations it makes on cudarc itself
//! ([`CudaTracker`]), a library it lacks ([`cuda_unavailable`]), a request that
//! failed for lack of memory.

/// A handle that reports device allocations made directly on cudarc, for exact
/// (per-allocation) figures. Get it from [`Step::cuda_tracker`](crate::Step::cuda_tracker);
/// it is cheap to clone and can be moved into your buffers' constructors and `Drop`s.
/// On the CPU it does nothing (the heap probe already sees every allocation).
#[derive(Debug, Clone, Copy, Default)]
pub struct CudaTracker {
    _private: (),
}

impl CudaTracker {
    pub(crate) fn new() -> CudaTracker {
        CudaTracker { _private: () }
    }

    /// `bytes` of device memory were allocated under `id` (the device pointer).
    pub fn alloc(&self, id: u64, bytes: u64) {
        crate::probe::track(vramtest_model::Event::Alloc { id, bytes });
    }

    /// The allocation `id` was released.
    pub fn free(&self, id: u64) {
        crate::probe::track(vramtest_model::Event::Free { id });
    }

    /// A device allocation of `bytes` failed for lack of memory. Call it before
    /// returning the error: the failed test's report then names the size of the request
    /// beside the per-category breakdown measured up to the failure.
    pub fn out_of_memory(&self, bytes: u64) {
        FAILED_REQUEST.store(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Why the running test cannot run on this device, once it said so.
static UNAVAILABLE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// The error a CUDA test returns when something it needs beside the driver is missing
/// on this machine (cuBLAS, NVRTC, a kernel library): the test is reported *ignored*
/// with `reason`, as it is without a driver, not failed.
///
/// ```no_run
/// # fn load_cublas() -> std::io::Result<()> { Ok(()) }
/// # fn f() -> vramtest::Result<()> {
/// load_cublas().map_err(|why| vramtest::cuda_unavailable(format!("no cuBLAS ({why})")))?;
/// # Ok(()) }
/// ```
pub fn cuda_unavailable(reason: impl std::fmt::Display) -> crate::Error {
    let reason = reason.to_string();
    *UNAVAILABLE.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
    crate::Error::msg(format!("cannot run on this device: {reason}"))
}

/// Why the running test said it cannot run on this device ([`cuda_unavailable`]).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn unavailable() -> Option<String> {
    UNAVAILABLE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// The size of the last device request reported as failed (0: none). One test runs per
/// measuring process.
static FAILED_REQUEST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The failed request's size, if one was reported.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn failed_request() -> Option<u64> {
    match FAILED_REQUEST.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        bytes => Some(bytes),
    }
}
