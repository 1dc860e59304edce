//! `--html PATH`: one self-contained page for the whole run (inline CSS and SVG,
//! nothing loaded from the network), so it opens from a downloaded CI artifact. The
//! page itself is drawn by `vramtest-chart`; this module maps outcomes onto it.

use super::Results;
use crate::case::Outcome;
use vramtest_chart::{Report, Status as PageStatus, TestEntry, Timeline};
use vramtest_model::report::Status;

/// The page of a run. `timeline` finds the recorded timeline of a test, when there
/// is one.
pub fn render(
    results: Results<'_>,
    title: &str,
    timeline: impl Fn(&Outcome) -> Option<Timeline>,
) -> String {
    let tests = results
        .outcomes
        .iter()
        .map(|o| entry(o, timeline(o)))
        .collect();
    vramtest_chart::html_report(&Report {
        title: title.to_owned(),
        tests,
    })
}

fn entry(o: &Outcome, timeline: Option<Timeline>) -> TestEntry {
    let r = &o.report;
    let status = match r.status {
        _ if o.fails() => PageStatus::Failed,
        Status::Passed | Status::Improved => PageStatus::Passed,
        Status::New if r.is_pending() => PageStatus::New,
        Status::New => PageStatus::Updated,
        Status::Ignored => PageStatus::Ignored,
        _ => PageStatus::Failed,
    };
    let failing = o.fails();
    TestEntry {
        name: o.case.full_name(),
        status,
        old: r.old_body.as_ref().map(|b| b.category_peaks),
        new: r.body.as_ref().map(|b| b.category_peaks),
        peak_old: r.old_peak_bytes,
        peak_new: r.body.as_ref().map(|b| b.peak_bytes),
        cpu_only_old: r.old_body.as_ref().and_then(|b| b.cpu_only),
        cpu_only_new: r.body.as_ref().and_then(|b| b.cpu_only),
        diff: failing
            .then(|| {
                let mut text = r.message.trim_end().to_owned();
                if let Some(diff) = &r.diff {
                    text += "\n\n";
                    text += diff.trim_end();
                }
                text
            })
            .filter(|t| !t.is_empty()),
        fit: r
            .body
            .as_ref()
            .filter(|b| super::fits::batch_sweep(b).is_some())
            .map(|b| super::fits::fits(b, None).trim().to_owned()),
        hints: r
            .body
            .as_ref()
            .map(super::fits::hints)
            .filter(|h| !h.is_empty())
            .map(|h| h.join("\n")),
        timeline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::*;
    use std::time::Duration;

    #[test]
    fn every_test_is_on_the_page_with_its_status() {
        let outcomes = mixed();
        let results = Results {
            outcomes: &outcomes,
            duration: Duration::ZERO,
        };
        let page = render(results, "cargo vramtest: mlp", |_| None);
        for o in &outcomes {
            assert!(page.contains(&o.case.full_name()), "{}", o.case.full_name());
        }
        assert!(page.contains("<title>"), "a page of its own");
        assert!(!page.contains("<script"), "nothing runs in the page");
    }

    #[test]
    fn a_regression_shows_its_message_and_diff() {
        let outcomes = [regression()];
        let results = Results {
            outcomes: &outcomes,
            duration: Duration::ZERO,
        };
        let page = render(results, "t", |_| None);
        assert!(page.contains("memory regression in mlp_adamw"), "{page}");
        assert!(page.contains("peak_bytes"), "the diff is on the page");
    }
}
