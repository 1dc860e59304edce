//! The device a run measures on: `cpu`, `cuda` (or the run ends), or `auto`.

use crate::probe::cuda::first_device;
use crate::step::Device;
use vramtest_model::settings::DeviceSetting;

/// The device for `choice`, or why there is none (the tests are then ignored).
/// `by_cargo_vramtest`: the run is one of `cargo vramtest`'s, which says once per run
/// that it measures on the CPU, so this test binary does not say it again.
pub(super) fn select(choice: DeviceSetting, by_cargo_vramtest: bool) -> Result<Device, String> {
    match choice {
        DeviceSetting::Cpu => Ok(Device::Cpu),
        DeviceSetting::Cuda => Ok(require()),
        DeviceSetting::Auto => {
            let (device, note) = auto(first_device(), by_cargo_vramtest);
            if let Some(note) = note {
                eprintln!("{note}");
            }
            Ok(device)
        }
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

/// The device for `device = "auto"` from what the probe `found`: the first CUDA
/// device, else the CPU with the note to print (once per test binary under plain
/// `cargo test`; none under `cargo vramtest`, which said it once for the whole run).
fn auto(found: Result<Device, String>, by_cargo_vramtest: bool) -> (Device, Option<String>) {
    match found {
        Ok(device) => (device, None),
        Err(_) if by_cargo_vramtest => (Device::Cpu, None),
        Err(reason) => (
            Device::Cpu,
            Some(format!("note: measuring on the CPU ({reason})")),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_note_is_said_once_per_binary_under_cargo_test_only() {
        let none = || Err("no CUDA driver: libcuda could not be loaded".to_owned());
        let (device, note) = auto(none(), false);
        assert!(matches!(device, Device::Cpu));
        assert_eq!(
            note.as_deref(),
            Some("note: measuring on the CPU (no CUDA driver: libcuda could not be loaded)")
        );
        let (device, note) = auto(none(), true);
        assert!(matches!(device, Device::Cpu));
        assert_eq!(note, None);
    }
}
