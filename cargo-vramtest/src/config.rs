//! The `vramtest` metadata tables: the shared parser lives in `vramtest_model::config`,
//! where the test harness reads the same settings under plain `cargo test`.

pub use vramtest_model::config::*;

use crate::cli::DeviceArg;

impl From<DeviceSetting> for DeviceArg {
    fn from(d: DeviceSetting) -> DeviceArg {
        match d {
            DeviceSetting::Cpu => DeviceArg::Cpu,
            DeviceSetting::Cuda => DeviceArg::Cuda,
            DeviceSetting::Auto => DeviceArg::Auto,
        }
    }
}
