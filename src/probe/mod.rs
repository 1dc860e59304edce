//! Probes: what records memory while a test runs. The heap probe always records
//! markers; a device probe (CUDA) is told about every marker too.

pub mod heap;

use vramtest_model::Event;

/// Records a boundary marker in every active probe.
pub fn mark(event: Event) {
    heap::mark(event);
}
