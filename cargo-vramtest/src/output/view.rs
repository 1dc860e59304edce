//! The one view of a run that every report is drawn from (its tests' outcomes, the
//! summary, what went wrong beyond the tests, and where the run came from) and the
//! [`Sink`] a report is. `run` builds the view from the tests it ran, `merge` from
//! the shards' reports; the sinks only read it ([`super::sinks`] lists them).

use crate::case::Outcome;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use vramtest_chart::Timeline;
use vramtest_model::report::Status;

/// Where one report of a run goes: the terminal, a file, the job summary.
pub trait Sink {
    /// Writes this report of `view`. The error: it could not be written (the run then
    /// exits 2, whatever its verdict: CI must not take a missing report for a pass).
    fn write(&self, view: &RunView) -> crate::error::Result<()>;
}

/// A run, as the reports see it.
#[derive(Debug, Clone)]
pub struct RunView {
    /// Every test's outcome, in the run's order.
    pub outcomes: Vec<Outcome>,
    /// How long the run took (a merge: its longest shard).
    pub duration: Duration,
    /// The counts and the exit code of the run.
    pub summary: Summary,
    /// The cargo-vramtest that ran the tests.
    pub version: String,
    /// The shard the run was (`--partition hash:2/4`), when it was one.
    pub partition: Option<String>,
    /// What went wrong beyond the tests: a shard `merge` could not read.
    pub problems: Vec<String>,
    /// Where the run came from.
    pub origin: Origin,
}

/// Where a run's view came from: what a report may say or look up beyond the outcomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Tests run here in the workspace at `root`: their recorded timelines are under
    /// `target_dir`, and the annotations of their failures are this run's to print.
    Run { root: PathBuf, target_dir: PathBuf },
    /// The reports of `files` shards merged: each shard's job printed its own
    /// annotations, and the timelines stayed in each shard's target directory.
    Merge { files: usize },
}

impl RunView {
    /// The view of `outcomes` from this cargo-vramtest, with their own summary and no
    /// problems.
    pub fn new(outcomes: Vec<Outcome>, duration: Duration, origin: Origin) -> RunView {
        RunView {
            summary: Summary::of(&outcomes),
            outcomes,
            duration,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            partition: None,
            problems: Vec::new(),
            origin,
        }
    }

    /// The timeline a test recorded, when it was measured in this run and left one:
    /// an older timeline would mislead, and a merge has none.
    pub fn timeline(&self, o: &Outcome) -> Option<Timeline> {
        let Origin::Run { target_dir, .. } = &self.origin else {
            return None;
        };
        o.report.body.as_ref()?;
        let snap = o
            .case
            .binary
            .package_dir
            .join(o.report.snapshot.as_deref()?);
        crate::recorded::timeline(target_dir, &snap)
    }
}

/// Counts and the exit code of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub tests: usize,
    pub counts: BTreeMap<Status, usize>,
    /// New results left pending for review (`.snap.new`).
    pub pending: usize,
    /// Tests that fail the run.
    pub failing: usize,
    pub exit_code: u8,
}

impl Summary {
    pub fn of(outcomes: &[Outcome]) -> Summary {
        let mut counts = BTreeMap::new();
        for o in outcomes {
            *counts.entry(o.report.status).or_insert(0) += 1;
        }
        let failing = outcomes.iter().filter(|o| o.fails()).count();
        let exit_code = if counts.contains_key(&Status::SnapshotError) {
            2
        } else if failing > 0 {
            1
        } else {
            0
        };
        Summary {
            tests: outcomes.len(),
            counts,
            pending: outcomes.iter().filter(|o| o.report.is_pending()).count(),
            failing,
            exit_code,
        }
    }

    /// `3 tests: 1 passed, 1 regressed, 1 new`.
    pub fn headline(&self) -> String {
        let noun = if self.tests == 1 { "test" } else { "tests" };
        if self.tests == 0 {
            return "0 tests".into();
        }
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(s, n)| format!("{n} {}", status_word(*s)))
            .collect();
        format!("{} {noun}: {}", self.tests, parts.join(", "))
    }
}

pub(super) fn status_word(s: Status) -> &'static str {
    match s {
        Status::SnapshotError => "snapshot error",
        other => other.as_str(),
    }
}
