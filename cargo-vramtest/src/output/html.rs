//! `--html PATH`: one self-contained page for the whole run (inline CSS and SVG,
//! nothing loaded from the network), so it opens from a downloaded CI artifact. The
//! page itself is drawn by `vramtest-chart`; this module maps outcomes onto it.

use super::{Origin, RunView};
use crate::case::Outcome;
use vramtest_chart::{HtmlReport, TestEnd as PageStatus, TestEntry, Timeline};
use vramtest_model::report::Status;

/// The page of a run, with each test's timeline where this run recorded one.
pub fn render(view: &RunView) -> String {
    page(view, &title(view), |o| view.timeline(o))
}

/// The page's title: the workspace of a run; what a merge merged, and whether it is
/// whole.
fn title(view: &RunView) -> String {
    match &view.origin {
        Origin::Run { root, .. } => format!("cargo vramtest: {}", root.display()),
        Origin::Merge { files } => {
            let mut title = format!(
                "cargo vramtest: {} merged from {files} {}",
                view.summary.headline(),
                if *files == 1 { "report" } else { "reports" }
            );
            if !view.problems.is_empty() {
                title += &format!(" (incomplete: {})", view.problems.join("; "));
            }
            title
        }
    }
}

/// The page of a run under `title`. `timeline` finds the recorded timeline of a test,
/// when there is one.
fn page(view: &RunView, title: &str, timeline: impl Fn(&Outcome) -> Option<Timeline>) -> String {
    let tests = view
        .outcomes
        .iter()
        .map(|o| entry(o, timeline(o)))
        .collect();
    vramtest_chart::html_report(&HtmlReport {
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
        let run = view(&outcomes, Duration::ZERO);
        let page = page(&run, "cargo vramtest: mlp", |_| None);
        for o in &outcomes {
            assert!(page.contains(&o.case.full_name()), "{}", o.case.full_name());
        }
        assert!(page.contains("<title>"), "a page of its own");
        assert!(!page.contains("<script"), "nothing runs in the page");
    }

    #[test]
    fn a_regression_shows_its_message_and_diff() {
        let outcomes = [regression()];
        let run = view(&outcomes, Duration::ZERO);
        let page = page(&run, "t", |_| None);
        assert!(page.contains("memory regression in mlp_adamw"), "{page}");
        assert!(page.contains("peak_bytes"), "the diff is on the page");
    }

    #[test]
    fn the_title_says_where_the_run_came_from() {
        let mut run = view(&mixed(), Duration::ZERO);
        assert_eq!(title(&run), "cargo vramtest: /w");
        run.origin = Origin::Merge { files: 1 };
        let headline = run.summary.headline();
        assert_eq!(
            title(&run),
            format!("cargo vramtest: {headline} merged from 1 report")
        );
        run.origin = Origin::Merge { files: 3 };
        run.problems = vec!["a: empty".into(), "shard hash:3/3: no report".into()];
        assert_eq!(
            title(&run),
            format!(
                "cargo vramtest: {headline} merged from 3 reports (incomplete: a: empty; shard hash:3/3: no report)"
            )
        );
        let page = render(&run);
        assert!(page.contains("merged from 3 reports"), "{page}");
    }
}
