//! Call sites, the parent's side: which line allocated the memory of each category.
//!
//! A step on the CPU is deterministic, so its allocator calls repeat one for one from
//! one process to the next. The parent runs the test twice more, each in a child of
//! its own: the first names the calls whose blocks are alive at the peak (and at each
//! category's own peak), the second captures a stack trace of exactly those calls,
//! checks that its stream has the first one's fingerprint (count and sizes of the
//! calls), and symbolizes the traces. A step that does not repeat itself gets a third
//! run that captures every call, and a note that says so. None of this happens unless
//! asked (`VRAMTEST_SITES=always`, what `cargo vramtest show --sites` sets) or a CPU
//! result regressed; `VRAMTEST_SITES=0` turns it off.

use super::spawn::{Launch, Spawner, output_section};
use crate::harness::protocol::{ChildResult, RunPoint, SitesMode, SitesOutcome};
use crate::harness::registry::TestDef;
use crate::step::Device;
use std::time::{Duration, Instant};
use vramtest_model::sites::Sites;

/// Why a run has no call sites: a sentence that follows "call sites: ", put in words
/// where the message is built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoSites {
    /// The re-runs took longer than their budget (`VRAMTEST_SITES_TIMEOUT`).
    #[error("cut short after {} (VRAMTEST_SITES_TIMEOUT)", humantime(*.0))]
    CutShort(Duration),
    /// A re-run could not start or timed out: what the spawner said.
    #[error(transparent)]
    Spawn(#[from] super::spawn::SpawnError),
    /// A re-run ended with a non-zero status or a signal, and its output.
    #[error("the re-run ended with {how}{}", output_section(.output))]
    Unclean {
        /// How it ended (`exit status: 1`).
        how: String,
        /// What it printed.
        output: String,
    },
    /// A re-run's step failed.
    #[error("the re-run failed: {0}")]
    Failed(String),
    /// A re-run ended without a result, and its output.
    #[error("the re-run ended without a result{}", output_section(.0))]
    NoResult(String),
    /// The first re-run gave something other than a plan.
    #[error("the first re-run returned no plan")]
    NoPlan,
    /// The capture re-run gave a plan.
    #[error("the capture re-run returned a plan")]
    PlanOnCapture,
    /// The re-run that captures everything found no sites.
    #[error("the last re-run found none")]
    NoneFound,
}

/// Re-runs the test to find the call sites of the memory alive at its peak, within
/// `VRAMTEST_SITES_TIMEOUT` (every re-run together). CPU only. `Err` says why there
/// are none, as a sentence that follows "call sites: ".
pub(super) fn collect(
    spawner: &Spawner,
    name: &str,
    def: &TestDef,
    point: &RunPoint,
) -> Result<Sites, NoSites> {
    let budget = spawner.sites_timeout;
    let deadline = Instant::now() + budget;
    let run = |mode: SitesMode, stdin: Option<Vec<u8>>| -> Result<SitesOutcome, NoSites> {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(NoSites::CutShort(budget))?;
        // The test's own limit, or what is left of the call sites' budget.
        let own = spawner.timeout.filter(|&t| t < left);
        let timed_out = |output: &str| match own {
            Some(t) => format!(
                "the re-run timed out after {:.0?} (VRAMTEST_TIMEOUT){}",
                t,
                output_section(output)
            ),
            None => NoSites::CutShort(budget).to_string(),
        };
        let child = Launch {
            name,
            def,
            device: Device::Cpu,
            point,
            sites: mode,
            timeout: Some(own.unwrap_or(left)),
            stdin,
        };
        let ended = spawner.spawn(&child, &timed_out).map_err(NoSites::Spawn)?;
        if let Some(how) = ended.unclean {
            return Err(NoSites::Unclean {
                how,
                output: ended.output,
            });
        }
        match ended.result {
            Some(ChildResult::Measured {
                sites: Some(outcome),
                ..
            }) => Ok(outcome),
            Some(ChildResult::Failed { message }) => Err(NoSites::Failed(message)),
            _ => Err(NoSites::NoResult(ended.output)),
        }
    };
    let plan = match run(SitesMode::Plan, None)? {
        SitesOutcome::Plan(plan) => plan,
        _ => return Err(NoSites::NoPlan),
    };
    let plan = serde_json::to_vec(&plan).expect("plans serialize");
    let captured = run(SitesMode::Capture, Some(plan));
    match captured? {
        SitesOutcome::Found(sites) => Ok(sites),
        SitesOutcome::Mismatch {
            planned,
            measured,
            missing,
        } => match run(SitesMode::Everything, None)? {
            SitesOutcome::Found(mut sites) => {
                let what = if planned == measured {
                    format!(
                        "{missing} blocks alive at its peaks were made by calls the first run did not have"
                    )
                } else if planned.calls == measured.calls {
                    format!(
                        "{} allocator calls both times, of other sizes",
                        planned.calls
                    )
                } else {
                    format!("{} allocator calls, then {}", planned.calls, measured.calls)
                };
                sites.notes.push(format!(
                    "the step did not repeat its allocations ({what}): traces were captured for every allocation of a third run"
                ));
                Ok(sites)
            }
            _ => Err(NoSites::NoneFound),
        },
        SitesOutcome::Plan(_) => Err(NoSites::PlanOnCapture),
    }
}

fn humantime(d: Duration) -> String {
    format!("{:.0?}", d)
}
