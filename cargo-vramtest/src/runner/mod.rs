//! Lists the tests of each built binary and runs them, split the way cargo-nextest
//! splits it: [`list`] asks each binary for its tests, [`schedule`] hands them out
//! to slots (every core, or one GPU each, each process pinned to its own), [`execute`]
//! runs one test in a process of its own and reads its report back, and [`reporter`]
//! shows the progress as they end. A test that panics, aborts or segfaults fails with
//! its output; the others still run.

mod execute;
mod list;
mod reporter;
mod schedule;

pub use list::{PackageEnv, list};
pub use schedule::Devices;

use crate::case::{Outcome, TestCase};
use crate::error::{Error, Result};
use crate::progress::Progress;
use reporter::Reporter;
use std::path::PathBuf;

/// Runs the tests, one at a time in each slot ([`Devices::slots`]): a test of a pinned
/// slot sees only its GPU. Results come back in the order of `cases`. `Err`: a test's
/// harness wrote a report this cargo-vramtest cannot read (another release).
pub fn run(
    cases: &[TestCase],
    env: &PackageEnv,
    slots: &[Option<String>],
    progress: &Progress,
) -> Result<Vec<Outcome>> {
    let scratch = ScratchDir::new()?;
    let mut reporter = Reporter::start(progress, cases);
    let mut outcomes: Vec<Option<Outcome>> = vec![None; cases.len()];
    let mut unreadable = None;
    schedule::schedule(
        cases,
        slots,
        // An ignored test runs too: the harness skips it at once and leaves a report
        // that says why.
        |i, case, slot| {
            let dir = scratch.path.join(i.to_string());
            execute::run_one(case, env, &dir, slot.as_deref())
        },
        |i, outcome| match outcome {
            Ok(outcome) => {
                reporter.ended(&outcome);
                outcomes[i] = Some(outcome);
            }
            Err(e) => {
                unreadable.get_or_insert(e);
            }
        },
    );
    reporter.finish();
    match unreadable {
        Some(e) => Err(e),
        None => Ok(outcomes.into_iter().flatten().collect()),
    }
}

/// A temporary directory for the reports, removed when dropped.
struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    fn new() -> Result<ScratchDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("cargo-vramtest-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(Error::io(&path))?;
        Ok(ScratchDir { path })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
