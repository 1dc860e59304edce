//! Reporting as the tests end, on stderr: the progress bar or one line per test
//! (`    PASS [  1.23s] …`), and the harness's notes about the run, each shown once.

use crate::case::{Outcome, TestCase};
use crate::progress::Progress;
use std::collections::BTreeSet;
use vramtest_model::HumanBytes;
use vramtest_model::report::TestReport;

/// What a run shows while its tests run (the points' progress comes from the report
/// pipes' readers, through [`crate::progress::Live`]).
pub(super) struct Reporter<'a> {
    progress: &'a Progress,
    /// The notes shown so far.
    said: BTreeSet<String>,
}

impl<'a> Reporter<'a> {
    /// Starts the progress of `cases`: the ignored ones are not counted (the harness
    /// skips them at once).
    pub(super) fn start(progress: &'a Progress, cases: &[TestCase]) -> Reporter<'a> {
        let to_run = cases
            .iter()
            .filter(|c| !c.ignored)
            .map(TestCase::full_name)
            .collect();
        progress.start(to_run, "Running");
        Reporter {
            progress,
            said: BTreeSet::new(),
        }
    }

    /// Shows a test that ended: the notes not shown yet, then its progress line.
    pub(super) fn ended(&mut self, outcome: &Outcome) {
        for line in unsaid_notes(&mut self.said, &outcome.report) {
            anstream::eprintln!("{line}");
        }
        if !outcome.case.ignored {
            self.progress.test_ended(outcome.case.full_name());
            self.progress.log(progress_line(outcome));
        }
    }

    /// Ends the progress.
    pub(super) fn finish(self) {
        self.progress.finish();
    }
}

/// The harness's notes about the run itself (a test binary built in another checkout)
/// that the run has not shown yet, as `note: …` lines (a warning as it is): each is
/// shown once per run.
fn unsaid_notes(said: &mut BTreeSet<String>, report: &TestReport) -> Vec<String> {
    report
        .notes
        .iter()
        .filter(|note| said.insert((*note).clone()))
        .map(|note| match note.starts_with("warning: ") {
            true => note.clone(),
            false => format!("note: {note}"),
        })
        .collect()
}

/// `    PASS [  1.23s] candle-mlp::vram::mlp_adamw  33.51 MiB`
fn progress_line(o: &Outcome) -> String {
    let style = crate::output::status_style(o.report.status, o.fails());
    let peak = o
        .report
        .body
        .as_ref()
        .map(|b| HumanBytes(b.peak_bytes).to_string())
        .unwrap_or_default();
    format!(
        "{style}{:>14}{style:#} [{:>7.2}s] {}  {peak}",
        crate::output::status_label(&o.report),
        o.duration.as_secs_f64(),
        o.case.full_name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_model::report::Status;

    #[test]
    fn the_harness_notes_about_the_run_are_shown_once() {
        let note = "test binary built in /a/x, testing /b/x";
        let mut first = TestReport::new("vram", "t", Status::Passed);
        first.notes = vec![note.into()];
        let mut said = BTreeSet::new();
        assert_eq!(
            unsaid_notes(&mut said, &first),
            ["note: test binary built in /a/x, testing /b/x"]
        );
        assert!(unsaid_notes(&mut said, &first.clone()).is_empty());
        let other = TestReport::new("vram", "u", Status::Passed);
        assert!(unsaid_notes(&mut said, &other).is_empty());
    }

    #[test]
    fn a_point_measure_ran_is_labelled_measured_not_passed() {
        let mut report = TestReport::new("vram", "t", Status::Passed);
        assert_eq!(crate::output::status_label(&report), "passed");
        report.measured_at = Some([("seq".to_owned(), 48)].into());
        assert_eq!(crate::output::status_label(&report), "measured");
    }
}
