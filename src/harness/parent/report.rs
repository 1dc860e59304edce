//! A test's report, built in one place from what the steps of its trial returned
//! ([`super::outcome`]): each field set once, the old figures from the one snapshot
//! the result was judged against.

use super::checkout::display_path;
use super::message::{self, Facts};
use super::outcome::{Outcome, Steps, Unmeasured};
use std::path::Path;
use vramtest_model::DeviceClass;
use vramtest_model::report::{Details, Status, TestReport};

/// What every report of a test says about the test itself.
pub(super) struct Head<'a> {
    /// The test target (`vram`).
    pub(super) target: &'a str,
    pub(super) test: &'a str,
    /// The source file, relative to the crate.
    pub(super) source: String,
    pub(super) line: u32,
    /// The device it ran on, if any.
    pub(super) class: Option<DeviceClass>,
    /// What the harness says about the run.
    pub(super) notes: &'a [String],
    /// The crate's directory: paths in messages are shown relative to it.
    pub(super) manifest_dir: &'a Path,
}

impl Head<'_> {
    /// A report of the test with `status` and nothing else known.
    fn report(&self, status: Status) -> TestReport {
        TestReport {
            source: self.source.clone(),
            line: self.line,
            device_class: self.class,
            notes: self.notes.to_vec(),
            ..TestReport::new(self.target, self.test, status)
        }
    }
}

/// The report of a trial that ended with `outcome`.
pub(super) fn build(head: &Head, outcome: &Outcome) -> TestReport {
    match outcome {
        Outcome::Unmeasured(Unmeasured::Skipped(reason)) => {
            let mut report = head.report(Status::Ignored);
            report.ignore(reason);
            report
        }
        Outcome::Unmeasured(Unmeasured::Failed { message, output }) => TestReport {
            message: message.clone(),
            output: output.clone(),
            ..head.report(Status::Failed)
        },
        Outcome::Measured(steps) => measured_report(head, steps),
    }
}

/// The report of a measured test: failed when its limits, its snapshot or the file
/// its verdict asks for cannot be read or written; else the verdict in words.
fn measured_report(head: &Head, steps: &Steps) -> TestReport {
    let Steps {
        measured,
        judged,
        recorded,
    } = steps;
    let first = &measured.first;
    let report = TestReport {
        details: Some(Details {
            baseline_bytes: first.profile.baseline_bytes,
            allocations: first.profile.allocations,
            reserved_peak_bytes: first.profile.reserved_peak_bytes,
            leak_sites: first.profile.leak_sites.clone(),
            predicted_pool: first.pool,
        }),
        ..head.report(Status::Failed)
    };
    let judged = match judged {
        Ok(judged) => judged,
        Err(message) => {
            return TestReport {
                message: message.clone(),
                ..report
            };
        }
    };
    let report = TestReport {
        snapshot: Some(judged.path.clone()),
        body: Some(judged.new.body.clone()),
        ..report
    };
    let verdict = match &judged.verdict {
        Ok(verdict) => verdict,
        Err(message) => {
            return TestReport {
                status: Status::SnapshotError,
                message: message.clone(),
                ..report
            };
        }
    };
    let old = verdict.old.as_ref().map(|o| o.body.clone());
    let (sites, sites_error) = match &verdict.sites {
        Some(Ok(found)) => (Some(found.clone()), None),
        Some(Err(e)) => (None, Some(e.clone())),
        None => (None, None),
    };
    let report = TestReport {
        old_peak_bytes: old.as_ref().map(|o| o.peak_bytes),
        old_body: old,
        notes: report
            .notes
            .into_iter()
            .chain(verdict.note.clone())
            .collect(),
        sites,
        sites_error,
        ..report
    };
    let written = match &recorded.written {
        Ok(written) => written,
        Err(message) => {
            return TestReport {
                message: message.clone(),
                ..report
            };
        }
    };
    let shown = |p: &Path| display_path(head.manifest_dir, p);
    let message = message::compose(&Facts {
        name: head.test,
        class: judged.new.body.device_class,
        decision: &verdict.decision,
        policy: &verdict.policy,
        body: &judged.new.body,
        profile: &first.profile,
        fit: measured.fit.as_ref(),
        old: verdict.old.as_ref(),
        sites: verdict.sites.as_ref(),
        snapshot: shown(&judged.path),
        written: written.as_ref().map(|w| (shown(&w.path), w.replaced)),
        kept: recorded.kept.clone(),
    });
    TestReport {
        status: verdict.decision.status,
        message: message.text,
        changes: message.changes,
        diff: message.diff,
        written: written.as_ref().map(|w| w.path.clone()),
        ..report
    }
}
