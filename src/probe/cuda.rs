//! The CUDA probe's side of a test process: which device there is, and a pool
//! session of `vramtest-cuda` that follows the step's markers. Without the `cuda`
//! feature there is never a device.

use vramtest_model::device::CudaFound;

/// The CUDA probe as a `Backend` (in the harness's child): the pool of device `ordinal` (the
/// child measures with it in `harness::child::measure`; without the `cuda` feature its
/// tests are ignored).
pub(crate) struct Cuda {
    /// The device's ordinal among those the process sees.
    pub(crate) ordinal: usize,
}

#[cfg(feature = "cuda")]
mod imp {
    use super::CudaFound;
    use crate::probe::{self, DeviceProbe};
    use vramtest_cuda::{CudarcDriver, PoolSession};
    use vramtest_model::Event;

    /// A measuring session on one device.
    pub(crate) type Session = PoolSession<CudarcDriver>;

    /// What the driver offers: the device count, or why there is none ("no CUDA
    /// driver: …", "no CUDA device: …", "CUDA driver too old: …").
    pub(crate) fn found() -> CudaFound {
        vramtest_cuda::detect().into()
    }

    /// The session as a device probe; the first driver error is kept for the report.
    struct Probe {
        session: Option<Session>,
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

    /// Opens a session on device `ordinal` and makes it the active device probe.
    pub(crate) fn start(ordinal: usize) -> Result<(), vramtest_cuda::CudaError> {
        let session = CudarcDriver::new(ordinal).and_then(PoolSession::new)?;
        probe::set_device(Box::new(Probe {
            session: Some(session),
            error: None,
        }));
        Ok(())
    }

    /// The session [`start`] opened, and the first error it met, once the step is over.
    pub(crate) fn stop() -> (Option<Session>, Option<String>) {
        probe::take_device()
            .and_then(|p| p.into_any().downcast::<Probe>().ok())
            .map_or((None, None), |p| (p.session, p.error))
    }
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::CudaFound;

    /// Built without the `cuda` feature: there is never a CUDA device.
    pub(crate) fn found() -> CudaFound {
        CudaFound::Unavailable {
            reason: "no CUDA driver (vramtest was built without its `cuda` feature)".into(),
        }
    }
}

pub(crate) use imp::*;

/// The ordinal of the first CUDA device, or why there is none.
pub(crate) fn first_device() -> Result<usize, vramtest_model::device::CudaUnavailable> {
    match found() {
        CudaFound::Ready { .. } => Ok(0),
        CudaFound::Unavailable { reason } => {
            Err(vramtest_model::device::CudaUnavailable { reason })
        }
    }
}
