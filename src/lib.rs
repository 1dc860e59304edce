//! # vramtest: peak-memory tests for training steps
//!
//! GPU out-of-memory errors, found by a failing test instead of by hand. Annotate a
//! training step with [`#[vramtest]`](vramtest), mark its phases on the [`Step`], and end
//! the test file with [`main!`]. Each test runs in a process of its own under a memory
//! probe (the CPU heap, or a CUDA device); the peak is broken down into [`Category`]s and
//! compared with a snapshot committed beside the test. A change that grows a category
//! beyond its limit fails with a diff that names the category, by how much, and the
//! phase.
//!
//! The guide, the reference and the CI recipes are in the book:
//! <https://cargo-vramtest.github.io/cargo-vramtest/>.
//!
//! ## A test
//!
//! In `Cargo.toml`, a test target without libtest's harness:
//!
//! ```toml
//! [dev-dependencies]
//! vramtest = "0.1"
//!
//! [[test]]
//! name = "vram"
//! harness = false
//! ```
//!
//! In `tests/vram.rs`, one function per training step:
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
//! Run it with `cargo test --test vram`, `cargo nextest run` or `cargo vramtest` (the
//! `cargo-vramtest` crate). The first run writes `tests/snapshots/vram__tiny_step@cpu.snap.new`
//! and fails; accept it with `cargo vramtest accept` (or `cargo insta accept`) and commit
//! the `.snap` file.
//!
//! ## What the phases mean
//!
//! Each [`Step`] method runs its closure and returns its value unchanged. What a phase
//! allocates and still holds when it ends is charged to its category: [`Step::params`] to
//! parameters, [`Step::optimizer_init`] and [`Step::optimizer_step`] to the optimizer
//! state, [`Step::inputs`], [`Step::forward`] and [`Step::backward`] to inputs,
//! activations and gradients; what a phase frees before it ends is temporaries, and what
//! outlives its iteration is workspace. [`Step::tag`] overrides the rule. The eight
//! categories, as snapshots name them:
//!
//! ```
//! use vramtest::Category;
//!
//! let names: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
//! assert_eq!(
//!     names,
//!     ["parameters", "gradients", "optimizer_state", "activations",
//!      "inputs", "temporaries", "workspace", "untracked"],
//! );
//! // Limits and tags name them the same way.
//! assert_eq!("optimizer_state".parse::<Category>(), Ok(Category::OptimizerState));
//! ```
//!
//! ## Errors
//!
//! A step returns [`Result`]: `?` takes any `std::error::Error + Send + Sync + 'static`
//! (candle's and burn's errors included), and [`Error::msg`] makes one from a message.
//! An error fails the test with its message.
//!
//! ```
//! fn load_weights(text: &str) -> vramtest::Result<Vec<f32>> {
//!     let mut weights = Vec::new();
//!     for word in text.split_whitespace() {
//!         weights.push(word.parse::<f32>()?); // a ParseFloatError becomes a vramtest::Error
//!     }
//!     if weights.is_empty() {
//!         return Err(vramtest::Error::msg("no weights"));
//!     }
//!     Ok(weights)
//! }
//!
//! assert_eq!(load_weights("0.5 1.5").unwrap(), [0.5, 1.5]);
//! assert_eq!(load_weights("0.5 x").unwrap_err().to_string(), "invalid float literal");
//! assert_eq!(load_weights("").unwrap_err().to_string(), "no weights");
//! ```
//!
//! That is the whole API: the attribute, [`Step`], [`main!`], plus [`Device`],
//! [`Category`], [`Result`] and, for code written directly on cudarc,
//! [`CudaTracker`] and [`cuda_unavailable`].

#![deny(missing_docs)]

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
