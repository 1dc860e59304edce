//! The test harness behind `vramtest::main!()`: lists tests the way libtest does (so
//! `cargo test` and `cargo nextest run` both drive it), runs each test in a child
//! process of its own, and judges the child's measurement against the snapshot.
//!
//! One module per job: [`list`] (what the binary holds, for libtest and nextest),
//! [`parent`] (the run: device, settings, one trial per test), [`spawn`] (a child
//! process per test, with a timeout), [`checkout`] (which package directory is
//! tested), [`verdict`] (judging a result against its
//! snapshot, and the messages), [`child`] (the child's side: run one test under the
//! probe and report).

mod checkout;
mod child;
mod list;
mod parent;
mod sites;
mod spawn;
mod timeline;
mod verdict;

pub(crate) use child::ChildResult;
#[cfg(feature = "cuda")]
pub(crate) use child::run_body;

use crate::step::Step;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A `#[vramtest]` function, registered by the attribute.
#[doc(hidden)]
pub struct TestDef {
    pub name: &'static str,
    pub module: &'static str,
    pub file: &'static str,
    pub line: u32,
    pub func: fn(&mut Step) -> crate::Result<()>,
    pub options: Options,
}

/// The attribute's options, checked at compile time.
#[doc(hidden)]
pub struct Options {
    pub iterations: Option<u32>,
    /// `Some(reason)` (possibly empty) when the test is ignored.
    pub ignore: Option<&'static str>,
    /// `(key, limit)` pairs: `tolerance`, `peak`, `leak` or a category.
    pub limits: &'static [(&'static str, &'static str)],
    pub budget: Option<u64>,
    /// Device classes the test supports (`cpu`, `cuda`); empty means all.
    pub devices: &'static [&'static str],
    /// A batch sweep: the test runs once per size (empty: once, `t.batch()` is 1).
    pub batch: &'static [usize],
}

inventory::collect!(TestDef);

/// The test target this harness runs in.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The package being tested: its snapshots, settings and sources.
    pub(crate) manifest_dir: PathBuf,
    /// The package directory the binary was compiled in (the same, unless cargo reused
    /// a binary built in another checkout).
    pub(crate) built_in: PathBuf,
    pub(crate) name: String,
}

/// The default iterations of `t.iterations()`.
pub const DEFAULT_ITERATIONS: u32 = 3;

/// The whole `main` of a vramtest target: `manifest_dir`, `package` and `crate_name`
/// are the compile-time `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME` and `CARGO_CRATE_NAME`.
#[doc(hidden)]
pub fn main(
    manifest_dir: &'static str,
    package: &'static str,
    crate_name: &'static str,
) -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(invocation) = child::Invocation::from_args(&args) {
        return child::main(invocation, Path::new(manifest_dir));
    }
    let built_in = PathBuf::from(manifest_dir);
    let runtime = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let target = Target {
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
