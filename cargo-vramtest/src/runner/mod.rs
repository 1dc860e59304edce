//! Lists the tests of each built binary and runs them, split the way cargo-nextest
//! splits it: [`mod@list`] asks each binary for its tests, [`schedule`] hands them out
//! to slots (every core, or one GPU each, each process pinned to its own), [`execute`]
//! runs one test in a process of its own and reads its report back, [`batch`] runs
//! the tests of one binary in one process where no slot is pinned (each still measured
//! and judged in a child of its own, each report on its own line), and [`reporter`]
//! shows the progress as they end. A test that panics, aborts or segfaults fails with
//! its output; the others still run.

mod batch;
mod command;
mod execute;
mod list;
mod reporter;
mod schedule;

pub use command::PackageEnv;
pub use list::list;
pub use schedule::Devices;

use crate::case::{Outcome, TestCase};
#[cfg(not(unix))]
use crate::error::Error;
use crate::error::Result;
use crate::progress::Progress;
use reporter::Reporter;
use std::path::PathBuf;

/// Runs the tests, one at a time in each slot ([`Devices::slots`]): a test of a pinned
/// slot sees only its GPU; unpinned, a binary's tests share one process and its slots. Results come back in the order of `cases`. `Err`: a test's
/// harness wrote a report this cargo-vramtest cannot read (another release).
pub fn run(
    cases: &[TestCase],
    env: &PackageEnv,
    slots: &[Option<String>],
    progress: &Progress,
) -> Result<Vec<Outcome>> {
    let scratch = ScratchDir::new()?;
    let mut reporter = Reporter::start(progress, cases);
    let mut outcomes_by_case: Vec<Option<Outcome>> = vec![None; cases.len()];
    let mut unreadable = None;
    let live = progress.live();
    let units = batch::plan(cases, slots);
    schedule::schedule(
        &units,
        slots,
        // An ignored test runs too: the harness skips it at once and leaves a report
        // that says why.
        |_, unit, slot| {
            let alone = |i: usize| {
                execute::run_one(&cases[i], env, &scratch.dir_for(i), slot.as_deref(), &live)
            };
            match unit.cases.as_slice() {
                [i] => vec![(*i, alone(*i))],
                _ => batch::run(cases, unit, env, &live, alone),
            }
        },
        |_, outcomes| {
            for (i, outcome) in outcomes {
                match outcome {
                    Ok(outcome) => {
                        reporter.ended(&outcome);
                        outcomes_by_case[i] = Some(outcome);
                    }
                    Err(e) => {
                        unreadable.get_or_insert(e);
                    }
                }
            }
        },
    );
    reporter.finish();
    match unreadable {
        Some(e) => Err(e),
        None => Ok(outcomes_by_case.into_iter().flatten().collect()),
    }
}

/// Where the reports of a run's tests go when no pipe can carry them (not on Unix): a
/// fresh directory made by tempfile (mode 0700, an unpredictable name, never an
/// existing one, `TMPDIR` never created), removed when dropped. On Unix reports come
/// over pipes and no directory is made.
struct ScratchDir {
    #[cfg(not(unix))]
    dir: tempfile::TempDir,
}

impl ScratchDir {
    #[cfg(unix)]
    fn new() -> Result<ScratchDir> {
        Ok(ScratchDir {})
    }

    #[cfg(not(unix))]
    fn new() -> Result<ScratchDir> {
        let tmp = std::env::temp_dir();
        let dir = tempfile::Builder::new()
            .prefix("cargo-vramtest-")
            .tempdir_in(&tmp)
            .map_err(Error::io(&tmp))?;
        Ok(ScratchDir { dir })
    }

    /// The report directory of the `i`th test (unused on Unix).
    fn dir_for(&self, i: usize) -> PathBuf {
        #[cfg(not(unix))]
        return self.dir.path().join(i.to_string());
        #[cfg(unix)]
        PathBuf::from(i.to_string())
    }
}
