//! The pre-flight check of a run that asks for CUDA: without a usable driver and
//! device, the run stops with exit code 2 before anything is built, naming what is
//! missing (a self-hosted GPU runner whose driver broke must not go green by ignoring
//! every test). `auto` measures on the CPU instead, and says so once.

use crate::error::{Error, Result};
use vramtest_model::device::{self, CudaFound, CudaUnavailable};
use vramtest_model::settings::DeviceSetting;

/// Checks the device the run measures on ([`DeviceSetting::Cuda`]: a usable driver and at
/// least one device, or an error; [`DeviceSetting::Auto`]: a note when it will be the CPU).
/// Returns the number of CUDA devices the tests measure on, 0 for the CPU.
pub fn preflight(device: DeviceSetting) -> Result<usize> {
    check(device, || vramtest_cuda::detect().into())
}

fn check(setting: DeviceSetting, detect: impl FnOnce() -> CudaFound) -> Result<usize> {
    let choice = device::choose(setting, detect).map_err(asked_for_cuda)?;
    if let Some(note) = choice.note() {
        anstream::eprintln!("{note}");
    }
    Ok(choice.cuda_devices())
}

/// The error of a run that asks for CUDA where it cannot run, naming every way it can
/// be asked for (the flag included).
fn asked_for_cuda(error: CudaUnavailable) -> Error {
    Error::Environment {
        message: format!(
            "the run asks for CUDA (--device cuda, VRAMTEST_DEVICE=cuda or device = \"cuda\" in the metadata), but {}",
            error.reason
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_cuda::{Availability, Unavailable};

    #[test]
    fn cuda_without_a_device_is_an_error_naming_what_is_missing() {
        let cases = [
            (
                Unavailable::NoLibrary {
                    tried: vec!["libcuda.so.1".into(), "libcuda.so".into()],
                },
                "no CUDA driver: libcuda could not be loaded (tried libcuda.so.1, libcuda.so",
            ),
            (
                Unavailable::StubLibrary {
                    library: "libcuda.so".into(),
                    driver: None,
                },
                "stub library",
            ),
            (Unavailable::NoDevice, "no CUDA device"),
            (
                Unavailable::DriverTooOld {
                    driver: (11, 1),
                    needed: (11, 2),
                    symbol: "cuMemPoolGetAttribute",
                },
                "CUDA driver too old",
            ),
        ];
        for (why, needle) in cases {
            let err = check(DeviceSetting::Cuda, || {
                Availability::Unavailable(why).into()
            })
            .unwrap_err();
            assert_eq!(err.exit_code(), 2);
            let text = err.to_string();
            assert!(text.contains(needle), "{text} lacks {needle}");
            assert!(text.starts_with("the run asks for CUDA"), "{text}");
        }
    }

    #[test]
    fn cpu_and_auto_never_fail_and_a_ready_device_passes() {
        for device in [DeviceSetting::Cpu, DeviceSetting::Auto] {
            let found = Availability::Unavailable(Unavailable::NoDevice);
            assert_eq!(check(device, || found.into()).unwrap(), 0);
        }
        for device in [DeviceSetting::Auto, DeviceSetting::Cuda] {
            assert_eq!(
                check(device, || Availability::Ready { devices: 3 }.into()).unwrap(),
                3
            );
        }
        // A CPU run measures on the CPU whatever GPUs there are.
        let found = Availability::Ready { devices: 3 };
        assert_eq!(check(DeviceSetting::Cpu, || found.into()).unwrap(), 0);
    }
}
