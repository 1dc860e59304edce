//! # vramtest: peak-memory tests for training steps
//!
//! Annotate a training step with [`#[vramtest]`](vramtest), mark its phases on the
//! [`Step`], and end the test file with [`main!`]. Each test runs in a process of its
//! own under a memory probe (the CPU heap, or a CUDA device); the peak is broken down
//! into [`Category`]s and compared with a snapshot committed beside the test.
//!
//! ```no_run
//! use vramtest::{vramtest, Step};
//!
//! #[vramtest]
//! fn tiny_step(t: &mut Step) -> vramtest::Result<()> {
//!     let weights = t.params(|| vec![0f32; 1024]);
//!     for _ in t.iterations() {
//!         let batch = t.inputs(|| vec![1f32; 256]);
//!         let out = t.forward(|| weights.iter().zip(&batch).map(|(w, x)| w * x).collect::<Vec<_>>());
//!         drop(out);
//!     }
//!     Ok(())
//! }
//!
//! vramtest::main!();
//! ```
//!
//! That is the whole API: the attribute, [`Step`], [`main!`], plus [`Device`],
//! [`Category`] and [`Result`].

mod cuda_tracker;
mod error;
mod harness;
mod manifests;
mod probe;
mod step;

pub use cuda_tracker::{CudaTracker, cuda_unavailable};
pub use error::{Error, Result};
pub use step::{Device, Iterations, Step};
pub use vramtest_macros::vramtest;
pub use vramtest_model::Category;

/// Re-exports for the code `#[vramtest]` and `main!` expand to. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::harness::{Options, TestDef, main};
    pub use crate::probe::heap::{BYTES_PER_EVENT, Counting, recorder_capacity_bytes, start, stop};
    pub use inventory;
    pub use vramtest_model::{Category, Limit, LimitKey};
}

/// The `main` of a `harness = false` test target: installs the counting allocator and
/// runs the `#[vramtest]` functions of the target.
///
/// `vramtest::main!()` wraps the system allocator; `vramtest::main!(allocator =
/// mimalloc::MiMalloc)` wraps yours (a binary can have only one `#[global_allocator]`).
#[macro_export]
macro_rules! main {
    () => {
        $crate::main!(allocator = ::std::alloc::System);
    };
    (allocator = $alloc:path $(,)?) => {
        #[global_allocator]
        static __VRAMTEST_GLOBAL_ALLOCATOR: $crate::__private::Counting<$alloc> =
            $crate::__private::Counting::new($alloc);

        fn main() -> ::std::process::ExitCode {
            $crate::__private::main(
                env!("CARGO_MANIFEST_DIR"),
                env!("CARGO_PKG_NAME"),
                env!("CARGO_CRATE_NAME"),
            )
        }
    };
}
