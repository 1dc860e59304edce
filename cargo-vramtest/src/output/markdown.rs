//! `--markdown PATH` (and the GitHub job summary): a pull-request comment body. It
//! starts with a hidden marker line, so a bot can find and update its own comment,
//! then the run's headline, a warning when the run is incomplete (a shard `merge` could
//! not read), the table and one collapsible `<details>` block per failure.

use super::{Row, RunView};
use std::fmt::Write as _;
use vramtest_model::report::Status;

/// The first line of every report.
pub const MARKER: &str = "<!-- cargo-vramtest-report -->";

/// The most output lines a failure block keeps (the end of the output).
const OUTPUT_LINES: usize = 60;

/// GitHub rejects a comment body over 65,536 characters; failure blocks that would
/// take the report past this many bytes are left out, with a note that says so.
pub const MAX_BYTES: usize = 60_000;

/// The markdown text of a run.
pub fn render(view: &RunView) -> String {
    let summary = &view.summary;
    let mut out = String::new();
    let mark = if summary.exit_code == 0 { "✅" } else { "❌" };
    let _ = writeln!(out, "{MARKER}");
    let _ = writeln!(out, "### cargo-vramtest {mark} {}\n", summary.headline());
    out += &incomplete(&view.problems);
    if !view.outcomes.is_empty() {
        out += "| Test | Peak | Change | Worst category | Status |\n";
        out += "| :--- | ---: | ---: | :--- | :--- |\n";
        for o in &view.outcomes {
            let r = Row::of(o);
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} {} |",
                cell(&r.test),
                cell(&r.peak),
                cell(&r.change),
                cell(&r.worst),
                emoji(o.report.status, r.failing),
                cell(&r.status)
            );
        }
    }
    let failing: Vec<_> = view.outcomes.iter().filter(|o| o.fails()).collect();
    for (shown, o) in failing.iter().enumerate() {
        let block = failure_block(o);
        if out.len() + block.len() > MAX_BYTES {
            let left = failing.len() - shown;
            let _ = writeln!(
                out,
                "\n{left} more failing {} left out to stay within GitHub's comment size limit: the HTML report (`cargo vramtest --html`, uploaded with the run's artifacts) has every test.",
                if left == 1 { "test" } else { "tests" }
            );
            break;
        }
        out += &block;
    }
    if summary.pending > 0 {
        out += "\nPending results were written as `.snap.new` files: review them with `cargo vramtest review` (or `cargo insta review`).\n";
    }
    out
}

/// The problems in a warning right under the headline, so a pull-request comment
/// cannot look complete when a shard is missing; nothing without problems.
fn incomplete(problems: &[String]) -> String {
    if problems.is_empty() {
        return String::new();
    }
    let mut block = String::from(
        "> [!WARNING]\n> **Incomplete:** this report does not hold every shard's tests.\n>\n",
    );
    for p in problems {
        let _ = writeln!(block, "> - {}", p.replace('\n', " "));
    }
    block.push('\n');
    block
}

/// One collapsible block: the message, a chart of old against new per category,
/// the diff and the end of the test's output.
fn failure_block(o: &crate::case::Outcome) -> String {
    let mut out = String::new();
    let r = &o.report;
    let _ = write!(
        out,
        "\n<details>\n<summary>❌ <code>{}</code>: {}</summary>\n\n",
        html(&o.case.full_name()),
        html(&super::status_label(r))
    );
    out += &fenced("text", r.message.trim_end());
    if let (Some(old), Some(new)) = (&r.old_body, &r.body) {
        out.push('\n');
        out += &vramtest_chart::mermaid_xychart(
            &format!("{}: category peaks", o.case.name),
            &old.category_peaks,
            &new.category_peaks,
        );
    }
    if let Some(body) = &r.body {
        let hints = super::fits::hints(body);
        if !hints.is_empty() {
            out += "\nHints (from the measured figures):\n\n";
            for h in hints {
                let _ = writeln!(out, "- {}", html(&h));
            }
        }
    }
    if let Some(diff) = &r.diff {
        out.push('\n');
        out += &fenced("diff", diff.trim_end());
    }
    if let Some(output) = r.output.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        let lines: Vec<&str> = output.lines().collect();
        let tail = lines[lines.len().saturating_sub(OUTPUT_LINES)..].join("\n");
        out += "\nOutput";
        if lines.len() > OUTPUT_LINES {
            let _ = write!(out, " (last {OUTPUT_LINES} lines)");
        }
        out += ":\n\n";
        out += &fenced("text", &tail);
    }
    out += "\n</details>\n";
    out
}

fn emoji(status: Status, failing: bool) -> &'static str {
    match status {
        _ if failing => "❌",
        Status::Passed => "✅",
        Status::Improved => "📉",
        Status::New => "🆕",
        Status::Ignored => "⏭️",
        _ => "❌",
    }
}

/// A table cell: `|` would end it, a newline would end the row.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Text inside HTML tags.
fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A fenced code block whose fence is longer than any backtick run inside it.
fn fenced(lang: &str, body: &str) -> String {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{body}\n{fence}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::*;
    use std::time::Duration;

    #[test]
    fn a_pull_request_comment() {
        let outcomes = mixed();
        let run = view(&outcomes, Duration::from_secs(2));
        insta::assert_snapshot!(render(&run));
    }

    #[test]
    fn a_failure_charts_old_against_new() {
        let outcomes = [regression()];
        let run = view(&outcomes, Duration::ZERO);
        let text = render(&run);
        let chart = text.split("```mermaid\n").nth(1).expect("a mermaid block");
        assert!(chart.starts_with("xychart-beta\n"), "{chart}");
        assert!(chart.contains("\"activations\""), "{chart}");
    }

    #[test]
    fn many_failures_stay_within_a_comment() {
        let outcomes: Vec<_> = (0..400)
            .map(|i| outcome(&format!("t{i}"), Status::Regressed))
            .collect();
        let run = view(&outcomes, Duration::ZERO);
        let text = render(&run);
        assert!(text.len() <= MAX_BYTES + 1_000, "{} bytes", text.len());
        assert!(text.contains("more failing tests left out"), "{text}");
        assert!(text.contains("cargo vramtest --html"));
    }

    #[test]
    fn a_clean_run() {
        let outcomes = [outcome("sgd", vramtest_model::report::Status::Passed)];
        let run = view(&outcomes, Duration::ZERO);
        let text = render(&run);
        assert!(text.starts_with(&format!(
            "{MARKER}\n### cargo-vramtest ✅ 1 test: 1 passed\n"
        )));
        assert!(!text.contains("<details>"));
    }

    #[test]
    fn the_warning_comes_right_after_the_headline() {
        let mut run = view(&mixed(), Duration::ZERO);
        let plain = render(&run);
        run.problems = vec!["shard hash:2/3: no report".to_owned()];
        let warned = render(&run);
        let lines: Vec<&str> = warned.lines().collect();
        assert_eq!(lines[0], MARKER);
        assert!(lines[1].starts_with("### cargo-vramtest"), "{warned}");
        assert_eq!(lines[3], "> [!WARNING]");
        assert!(
            warned.contains("> - shard hash:2/3: no report\n\n| Test |"),
            "{warned}"
        );
        // Everything else is the plain report.
        assert_eq!(
            warned.replace(
                &warned[plain.find("\n\n").unwrap() + 2..warned.find("| Test").unwrap()],
                ""
            ),
            plain
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert_eq!(html("<T & U>"), "&lt;T &amp; U&gt;");
        assert_eq!(fenced("text", "x"), "```text\nx\n```\n");
        assert_eq!(fenced("text", "a ``` b"), "````text\na ``` b\n````\n");
    }
}
