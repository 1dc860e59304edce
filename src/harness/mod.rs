//! The test harness behind `vramtest::main!()`: lists tests the way libtest does (so
//! `cargo test` and `cargo nextest run` both drive it), runs each test in a child
//! process of its own, and judges the child's measurement against the snapshot.
//!
//! [`registry`] holds what `#[vramtest]` registers; [`protocol`] is all the two
//! processes share (the child's command line and its result); [`parent`] runs the
//! trials and judges; [`child`] measures one test. Neither side imports the other.

mod child;
mod fd;
mod parent;
pub(crate) mod protocol;
mod registry;

pub use registry::{Options, TestDef};

use parent::checkout::{self, HarnessTarget};
use protocol::Invocation;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The whole `main` of a vramtest target: `manifest_dir`, `package` and `crate_name`
/// are the compile-time `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME` and `CARGO_CRATE_NAME`.
#[doc(hidden)]
pub fn main(
    manifest_dir: &'static str,
    package: &'static str,
    crate_name: &'static str,
) -> ExitCode {
    // The command line and the result channel's variable are dropped before a child
    // measures anything: the heap alive when its step starts (the baseline) must not
    // hold the result pipe's descriptor number, which depends on what else the parent
    // had open.
    let result = protocol::take_result_var();
    let invocation =
        Invocation::from_args(&std::env::args_os().collect::<Vec<_>>(), result.as_deref());
    drop(result);
    if let Some(invocation) = invocation {
        return child::main(invocation, Path::new(manifest_dir));
    }
    let built_in = PathBuf::from(manifest_dir);
    let runtime = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let target = HarnessTarget {
        manifest_dir: checkout::package_dir(&built_in, package, runtime.as_deref()),
        built_in,
        name: crate_name.to_owned(),
    };
    match parent::run(target) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
