//! The device a run measures on: `cpu`, `cuda` (or the run ends), or `auto`.

use crate::probe::cuda::first_device;
use crate::step::Device;
use vramtest_model::settings::DeviceSetting;

/// The device for `choice`, or why there is none (the tests are then ignored).
pub(super) fn select(choice: DeviceSetting) -> Result<Device, String> {
    match choice {
        DeviceSetting::Cpu => Ok(Device::Cpu),
        DeviceSetting::Cuda => Ok(require()),
        DeviceSetting::Auto => Ok(auto()),
    }
}

/// The device for a run that asked for CUDA explicitly (`VRAMTEST_DEVICE=cuda`,
/// `device = "cuda"`): the first CUDA device, or the process ends with exit code 2
/// before any test runs, naming what is missing (a run asked for CUDA must not pass by
/// ignoring every test on a machine whose driver broke).
fn require() -> Device {
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
fn auto() -> Device {
    match first_device() {
        Ok(device) => device,
        Err(reason) => {
            eprintln!("note: measuring on the CPU ({reason})");
            Device::Cpu
        }
    }
}
