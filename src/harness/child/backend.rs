//! The seam between the child process and the probes: which backend measures a test
//! on its device. A new backend (a framework's own memory pool, say) is a module in
//! `probe` with its probe, a type implementing [`Backend`] (in `measure.rs`), and one
//! arm of [`backend`]. The seam lives on the child's side: the probes know nothing of
//! the harness (its test definitions, its invocations, its results).

use crate::harness::protocol::{ChildResult, Invocation};
use crate::harness::registry::TestDef;
use crate::probe::{cuda, heap};
use crate::step::Device;
use std::path::Path;

/// A backend: how the child process measures one test under a probe. The child's
/// dispatch goes through [`backend`], so a new backend (a framework's own memory pool,
/// say) is one module in `probe`, a type implementing this trait, and one arm of
/// [`backend`].
pub(crate) trait Backend {
    /// Measures `def` as `invocation` asks; `package_dir` is the test's package.
    fn measure(&self, def: &TestDef, invocation: &Invocation, package_dir: &Path) -> ChildResult;
}

/// The backend that measures on `device`: the one match over backends.
pub(crate) fn backend(device: Device) -> Box<dyn Backend> {
    match device {
        Device::Cpu => Box::new(heap::Heap),
        Device::Cuda(ordinal) => Box::new(cuda::Cuda { ordinal }),
    }
}
