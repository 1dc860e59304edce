//! Probes: what records memory while a test runs. The heap probe records every
//! marker; a device probe (CUDA), when one is active, is told about each one too.

pub(crate) mod cuda;
pub mod heap;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use vramtest_model::Event;

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// A probe of device memory, driven by the same markers as the heap probe.
pub trait DeviceProbe: Send {
    /// A marker (phase, iteration, tag) or a tracked allocation event.
    fn record(&mut self, event: &Event);
    /// Back to the concrete probe, once the test is over.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
}

static DEVICE: Mutex<Option<Box<dyn DeviceProbe>>> = Mutex::new(None);
/// Whether a device probe is set: markers on the CPU never touch the mutex (whose
/// first lock may allocate on some platforms, inside a measured phase).
static DEVICE_ACTIVE: AtomicBool = AtomicBool::new(false);

fn device() -> std::sync::MutexGuard<'static, Option<Box<dyn DeviceProbe>>> {
    DEVICE.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// Makes `probe` the active device probe (one test per process).
pub fn set_device(probe: Box<dyn DeviceProbe>) {
    *device() = Some(probe);
    DEVICE_ACTIVE.store(true, Ordering::SeqCst);
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// Takes the active device probe back.
pub fn take_device() -> Option<Box<dyn DeviceProbe>> {
    DEVICE_ACTIVE.store(false, Ordering::SeqCst);
    device().take()
}

/// Records a boundary marker in every active probe.
pub fn mark(event: Event) {
    heap::mark(event);
    track(event);
}

/// Records a tracked device allocation or free (no effect without a device probe).
pub fn track(event: Event) {
    if !DEVICE_ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    if let Some(d) = device().as_mut() {
        d.record(&event);
    }
}
