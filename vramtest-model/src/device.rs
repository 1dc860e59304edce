//! The device a run measures on, decided once from its [`DeviceSetting`] and what the
//! machine has: the test harness and `cargo vramtest` both ask [`choose`].

use crate::settings::DeviceSetting;

/// What a probe found on the machine for CUDA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaFound {
    /// A usable driver that sees this many devices (at least one).
    Ready {
        /// How many devices the driver reports.
        devices: usize,
    },
    /// No usable CUDA device, and why ("no CUDA driver: …", "no CUDA device: …",
    /// "CUDA driver too old: …").
    Unavailable {
        /// The reason, as a person can act on it.
        reason: String,
    },
}

/// The device a run measures on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The CPU heap, as the setting asked.
    Cpu,
    /// CUDA, on a machine whose driver sees `devices` devices.
    Cuda {
        /// How many devices the driver reports.
        devices: usize,
    },
    /// The CPU, because `auto` found no usable CUDA device (see [`DeviceChoice::note`]).
    CpuFallback {
        /// Why there is no CUDA device.
        reason: String,
    },
}

impl DeviceChoice {
    /// The number of CUDA devices the tests measure on: 0 on the CPU.
    pub fn cuda_devices(&self) -> usize {
        match self {
            DeviceChoice::Cuda { devices } => *devices,
            DeviceChoice::Cpu | DeviceChoice::CpuFallback { .. } => 0,
        }
    }

    /// The note a run says once when `auto` measures on the CPU
    /// (`note: measuring on the CPU (no CUDA driver: …)`), `None` otherwise.
    pub fn note(&self) -> Option<String> {
        match self {
            DeviceChoice::CpuFallback { reason } => {
                Some(format!("note: measuring on the CPU ({reason})"))
            }
            DeviceChoice::Cpu | DeviceChoice::Cuda { .. } => None,
        }
    }
}

/// A run asked for CUDA (`cuda`) on a machine where it cannot run: the run stops before
/// any test runs (exit code 2), naming what is missing, so a GPU runner whose driver
/// broke cannot go green by ignoring every test.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "CUDA was asked for (VRAMTEST_DEVICE=cuda or device = \"cuda\" in the metadata), but {reason}"
)]
pub struct CudaUnavailable {
    /// Why there is no CUDA device.
    pub reason: String,
}

/// The device for `setting`, given what `detect` finds (asked only when the setting
/// is not `cpu`, so a CPU run never loads a driver): `cpu` is the CPU whatever the
/// machine has; `cuda` is CUDA or an error; `auto` is CUDA where a device is usable,
/// else the CPU with the reason.
pub fn choose(
    setting: DeviceSetting,
    detect: impl FnOnce() -> CudaFound,
) -> Result<DeviceChoice, CudaUnavailable> {
    if setting == DeviceSetting::Cpu {
        return Ok(DeviceChoice::Cpu);
    }
    match (setting, detect()) {
        (_, CudaFound::Ready { devices }) => Ok(DeviceChoice::Cuda { devices }),
        (DeviceSetting::Cuda, CudaFound::Unavailable { reason }) => Err(CudaUnavailable { reason }),
        (_, CudaFound::Unavailable { reason }) => Ok(DeviceChoice::CpuFallback { reason }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    const WHY: &str = "no CUDA driver: libcuda could not be loaded";

    fn ready() -> CudaFound {
        CudaFound::Ready { devices: 3 }
    }

    fn absent() -> CudaFound {
        CudaFound::Unavailable {
            reason: WHY.to_owned(),
        }
    }

    #[test_case(DeviceSetting::Cpu, ready(), Ok(DeviceChoice::Cpu); "cpu with a driver")]
    #[test_case(DeviceSetting::Cpu, absent(), Ok(DeviceChoice::Cpu); "cpu without a driver")]
    #[test_case(DeviceSetting::Cuda, ready(), Ok(DeviceChoice::Cuda { devices: 3 }); "cuda with a driver")]
    #[test_case(DeviceSetting::Cuda, absent(), Err(CudaUnavailable { reason: WHY.into() }); "cuda without a driver")]
    #[test_case(DeviceSetting::Auto, ready(), Ok(DeviceChoice::Cuda { devices: 3 }); "auto with a driver")]
    #[test_case(DeviceSetting::Auto, absent(), Ok(DeviceChoice::CpuFallback { reason: WHY.into() }); "auto without a driver")]
    fn the_setting_and_the_machine_decide_the_device(
        setting: DeviceSetting,
        found: CudaFound,
        expected: Result<DeviceChoice, CudaUnavailable>,
    ) {
        assert_eq!(choose(setting, || found), expected);
    }

    #[test]
    fn a_cpu_run_never_looks_for_a_driver() {
        let choice = choose(DeviceSetting::Cpu, || panic!("detected on a CPU run"));
        assert_eq!(choice, Ok(DeviceChoice::Cpu));
    }

    #[test]
    fn only_the_fallback_says_a_note_and_the_error_names_what_is_missing() {
        let fallback = choose(DeviceSetting::Auto, absent).unwrap();
        assert_eq!(
            fallback.note().as_deref(),
            Some("note: measuring on the CPU (no CUDA driver: libcuda could not be loaded)")
        );
        assert_eq!(fallback.cuda_devices(), 0);
        assert_eq!(DeviceChoice::Cpu.note(), None);
        let cuda = choose(DeviceSetting::Auto, ready).unwrap();
        assert_eq!((cuda.note(), cuda.cuda_devices()), (None, 3));
        let err = choose(DeviceSetting::Cuda, absent).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "CUDA was asked for (VRAMTEST_DEVICE=cuda or device = \"cuda\" in the metadata), but {WHY}"
            )
        );
    }
}
