//! The `#[vramtest]` functions of a test binary: what the attribute registers, and
//! the names libtest and nextest see them under.

use crate::step::Step;

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
    /// `(key, limit)` pairs: `tolerance`, `peak`, `reserved`, `leak` or a category,
    /// read by the attribute at compile time.
    pub limits: &'static [(vramtest_model::LimitKey, vramtest_model::Limit)],
    pub budget: Option<u64>,
    /// `axial_budget = ".."`: the most an axial point may be predicted to need (0: none).
    pub axial_budget: Option<u64>,
    /// Device classes the test supports (`cpu`, `cuda`); empty means all.
    pub devices: &'static [&'static str],
    /// A batch sweep: the test runs once per size (empty: once, `t.batch()` is 1).
    pub batch: &'static [usize],
    /// The CPU threads of the measured process (`None`: [`CANONICAL_THREADS`]).
    pub threads: Option<u32>,
    /// A sweep over named axes: each axis and its values, in the attribute's order
    /// (empty: none). Every combination runs in a process of its own.
    pub axes: &'static [(&'static str, &'static [usize])],
    /// The categorical axes of the sweep: each axis and its levels, the baseline
    /// first, in the attribute's order (empty: none). Every combination of levels runs
    /// the numeric grid.
    pub levels: &'static [(&'static str, &'static [&'static str])],
    /// The configuration the sweep predicts and gates (`target(..)`; empty: none).
    pub target: &'static [(&'static str, usize)],
    /// The levels `target(..)` names (`precision = "bf16"`); a categorical axis left
    /// out is predicted at every level.
    pub target_levels: &'static [(&'static str, &'static str)],
}

inventory::collect!(TestDef);

/// The CPU threads every measured process runs with, whatever the environment says,
/// unless the test's attribute sets `threads = N`: per-thread buffers and the way work
/// is split follow the thread count, so a fixed count keeps the figures the same on
/// every machine.
pub const CANONICAL_THREADS: u32 = 2;

/// The default iterations of `t.iterations()`.
pub const DEFAULT_ITERATIONS: u32 = 3;

impl TestDef {
    /// A test `t` in `tests/vram.rs` over `axes`, of a step that does nothing, with
    /// every other option unset: what unit tests of the harness start from.
    #[cfg(test)]
    pub(crate) fn over(axes: &'static [(&'static str, &'static [usize])]) -> TestDef {
        fn step(_: &mut crate::step::Step) -> crate::Result<()> {
            Ok(())
        }
        TestDef {
            name: "t",
            module: "vram",
            file: "tests/vram.rs",
            line: 1,
            func: step,
            options: Options {
                iterations: None,
                ignore: None,
                limits: &[],
                budget: None,
                axial_budget: None,
                devices: &[],
                batch: &[],
                threads: None,
                axes,
                levels: &[],
                target: &[],
                target_levels: &[],
            },
        }
    }

    /// The name libtest and nextest list: the module path without the crate, then the
    /// function (`tagged::explicit_tag`).
    pub(crate) fn test_name(&self) -> String {
        match self.module.split_once("::") {
            Some((_, rest)) => format!("{rest}::{}", self.name),
            None => self.name.to_owned(),
        }
    }

    /// Starts the probe with `start`, runs the test body, and catches an error or a
    /// panic. Returns what `start` returned.
    pub(crate) fn run<S>(
        &self,
        step: &mut Step,
        start: impl FnOnce() -> S,
    ) -> Result<S, StepFailed> {
        let started = start();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.func)(step)));
        match outcome {
            Ok(Ok(())) => Ok(started),
            Ok(Err(e)) => Err(StepFailed::Returned(e)),
            Err(payload) => {
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string panic payload".into());
                Err(StepFailed::Panicked(msg))
            }
        }
    }
}

/// How a test body failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepFailed {
    /// It returned an error.
    #[error("returned an error: {0}")]
    Returned(crate::Error),
    /// It panicked, with this message.
    #[error("panicked: {0}")]
    Panicked(String),
}

/// Every test of this binary under its listed name, sorted by name.
pub(crate) fn registered() -> Vec<(String, &'static TestDef)> {
    let mut tests: Vec<_> = inventory::iter::<TestDef>
        .into_iter()
        .map(|d| (d.test_name(), d))
        .collect();
    tests.sort_by(|a, b| a.0.cmp(&b.0));
    tests
}

/// The test registered under `name`.
pub(crate) fn find(name: &str) -> Option<&'static TestDef> {
    inventory::iter::<TestDef>
        .into_iter()
        .find(|d| d.test_name() == name)
}
