//! The device a run measures on, as [`vramtest_model::device::choose`] decides it from
//! the setting (`cpu`, `cuda` or `auto`) and what the CUDA probe finds.

use crate::probe::cuda;
use crate::step::Device;
use vramtest_model::device::{self, DeviceChoice};
use vramtest_model::settings::DeviceSetting;

/// The device for `choice`, or the error that ends the run with exit code 2 before any
/// test runs, naming what is missing (a run that asked for CUDA must not pass by
/// ignoring every test on a machine whose driver broke).
/// `by_cargo_vramtest`: the run is one of `cargo vramtest`'s, which says once per run
/// that it measures on the CPU, so this test binary does not say it again.
pub(super) fn select(
    choice: DeviceSetting,
    by_cargo_vramtest: bool,
) -> Result<Device, device::CudaUnavailable> {
    let choice = device::choose(choice, cuda::found)?;
    if let Some(note) = note(&choice, by_cargo_vramtest) {
        eprintln!("{note}");
    }
    Ok(match choice {
        DeviceChoice::Cuda { .. } => Device::Cuda(0),
        DeviceChoice::Cpu | DeviceChoice::CpuFallback { .. } => Device::Cpu,
    })
}

/// The note to print for `choice`: once per test binary under plain `cargo test`;
/// none under `cargo vramtest`, which said it once for the whole run.
fn note(choice: &DeviceChoice, by_cargo_vramtest: bool) -> Option<String> {
    choice.note().filter(|_| !by_cargo_vramtest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_note_is_said_once_per_binary_under_cargo_test_only() {
        let fallback = DeviceChoice::CpuFallback {
            reason: "no CUDA driver: libcuda could not be loaded".to_owned(),
        };
        assert_eq!(
            note(&fallback, false).as_deref(),
            Some("note: measuring on the CPU (no CUDA driver: libcuda could not be loaded)")
        );
        assert_eq!(note(&fallback, true), None);
        assert_eq!(note(&DeviceChoice::Cpu, false), None);
        assert_eq!(note(&DeviceChoice::Cuda { devices: 1 }, false), None);
    }
}
