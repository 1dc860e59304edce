//! The CUDA side of the harness: device discovery and measurement.

use crate::harness::{ChildResult, TestDef};
use crate::step::Device;

/// The first CUDA device, or why there is none.
pub fn first_device() -> Result<Device, String> {
    Err("no CUDA driver".into())
}

/// Measures one test on CUDA device `ordinal`.
pub(crate) fn measure(_def: &TestDef, _ordinal: usize, _iterations: u32) -> ChildResult {
    ChildResult::Ignored {
        reason: "no CUDA driver".into(),
    }
}
