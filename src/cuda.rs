//! The CUDA side of the harness: device discovery and measurement through the
//! `vramtest-cuda` probe. Without the `cuda` feature every CUDA test is ignored.

use crate::harness::{ChildResult, TestDef};
use crate::step::Device;

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
/// # fn load_cublas() -> Result<(), String> { Ok(()) }
/// # fn f() -> vramtest::Result<()> {
/// load_cublas().map_err(|why| vramtest::cuda_unavailable(format!("no cuBLAS ({why})")))?;
/// # Ok(()) }
/// ```
pub fn cuda_unavailable(reason: impl std::fmt::Display) -> crate::Error {
    let reason = reason.to_string();
    *UNAVAILABLE.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
    crate::Error::msg(format!("cannot run on this device: {reason}"))
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn unavailable() -> Option<String> {
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
fn failed_request() -> Option<u64> {
    match FAILED_REQUEST.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        bytes => Some(bytes),
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use super::*;
    use crate::harness::run_body;
    use crate::probe::{self, DeviceProbe};
    use crate::step::Step;
    use vramtest_cuda::{Availability, CudarcDriver, PoolSession};
    use vramtest_model::Event;
    use vramtest_model::snapshot::Info;

    /// The first CUDA device, or why there is none ("no CUDA driver: …", "no CUDA
    /// device: …", "CUDA driver too old: …").
    pub fn first_device() -> Result<Device, String> {
        match vramtest_cuda::detect() {
            Availability::Ready { .. } => Ok(Device::Cuda(0)),
            other => Err(other
                .reason()
                .unwrap_or_else(|| "no CUDA device".to_owned())),
        }
    }

    /// The session as a device probe; the first driver error is kept for the report.
    struct Probe {
        session: Option<PoolSession<CudarcDriver>>,
        error: Option<String>,
    }

    impl DeviceProbe for Probe {
        fn record(&mut self, event: &Event) {
            if let Some(Err(e)) = self.session.as_mut().map(|s| s.boundary(event)) {
                self.error.get_or_insert(e.to_string());
            }
        }
        fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
            self
        }
    }

    /// Measures one test on CUDA device `ordinal`.
    pub(crate) fn measure(
        def: &TestDef,
        ordinal: usize,
        iterations: u32,
        batch: usize,
    ) -> ChildResult {
        if let Err(reason) = first_device() {
            return ChildResult::Ignored { reason };
        }
        let mut step = Step::new(Device::Cuda(ordinal), iterations).with_batch(batch);
        let started = run_body(def, &mut step, || {
            let session = CudarcDriver::new(ordinal).and_then(PoolSession::new);
            match session {
                Ok(s) => {
                    probe::set_device(Box::new(Probe {
                        session: Some(s),
                        error: None,
                    }));
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        });
        let (session, error) = probe::take_device()
            .and_then(|p| p.into_any().downcast::<Probe>().ok())
            .map_or((None, None), |p| (p.session, p.error));
        match started {
            Err(_) if unavailable().is_some() => ChildResult::Ignored {
                reason: unavailable().unwrap_or_default(),
            },
            // Out of memory on the device inside the step (an error or a panic): the
            // breakdown up to the failure and the failed request, not the bare error.
            Err(message)
                if failed_request().is_some() || vramtest_cuda::is_out_of_memory(&message) =>
            {
                let detail = match session {
                    Some(s) => s.out_of_memory(failed_request()).to_string(),
                    None => "the CUDA probe was not running: no breakdown".to_owned(),
                };
                ChildResult::Failed {
                    message: format!("{message}\n{detail}"),
                }
            }
            Err(message) => ChildResult::Failed { message },
            Ok(Err(message)) => ChildResult::Failed {
                message: format!("cannot start the CUDA probe: {message}"),
            },
            Ok(Ok(())) => {
                if let Some(e) = error {
                    return ChildResult::Failed {
                        message: format!("the CUDA probe failed: {e}"),
                    };
                }
                let Some(session) = session else {
                    return ChildResult::Failed {
                        message: "the CUDA probe was lost".into(),
                    };
                };
                match session.finish() {
                    Ok(report) => {
                        if let Some(why) = &report.fallback {
                            println!("note: {why}");
                        }
                        println!(
                            "boundary overhead {:.1}% ({} syncs); reserved peak {} B",
                            report.boundary_overhead_share() * 100.0,
                            report.boundaries,
                            report.profile.reserved_peak_bytes.unwrap_or(0)
                        );
                        ChildResult::Measured {
                            timeline: None,
                            sites: None,
                            info: Info {
                                device: report.device.name.clone(),
                                fidelity: report.profile.fidelity.to_string(),
                                tool: format!("vramtest {}", env!("CARGO_PKG_VERSION")),
                                driver: report.device.driver_version.clone(),
                                cuda: report.device.cuda_version.clone(),
                                sites: Vec::new(),
                            },
                            profile: Box::new(report.profile),
                        }
                    }
                    Err(e) => ChildResult::Failed {
                        message: format!("the CUDA probe failed: {e}"),
                    },
                }
            }
        }
    }
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::*;

    /// Built without the `cuda` feature: there is never a CUDA device.
    pub fn first_device() -> Result<Device, String> {
        Err("no CUDA driver (vramtest was built without its `cuda` feature)".into())
    }

    pub(crate) fn measure(
        _def: &TestDef,
        _ordinal: usize,
        _iterations: u32,
        _batch: usize,
    ) -> ChildResult {
        ChildResult::Ignored {
            reason: first_device().unwrap_err(),
        }
    }
}

pub use imp::first_device;

/// The device for a run that asked for CUDA explicitly (`VRAMTEST_DEVICE=cuda`,
/// `device = "cuda"`): the first CUDA device, or the process ends with exit code 2 before
/// any test runs, naming what is missing (a run asked for CUDA must not pass by ignoring
/// every test on a machine whose driver broke).
pub(crate) fn require_device() -> Device {
    match first_device() {
        Ok(device) => device,
        Err(reason) => {
            eprintln!(
                "error: CUDA was asked for (VRAMTEST_DEVICE=cuda or device = \"cuda\" in the \
                 metadata), but {reason}"
            );
            std::process::exit(2);
        }
    }
}

/// The device for `device = "auto"`: the first CUDA device, else the CPU, saying so once
/// on stderr.
pub(crate) fn auto_device() -> Device {
    match first_device() {
        Ok(device) => device,
        Err(reason) => {
            eprintln!("note: measuring on the CPU ({reason})");
            Device::Cpu
        }
    }
}
pub(crate) use imp::measure;
