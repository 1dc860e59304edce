//! `--message-format json`: one JSON object per line on stdout.
//!
//! Every object has `"format_version": 1` and a `"type"`:
//! - `"test"`: one per test, in list order: `package`, `binary_id`
//!   (`package::target`), `name` (`package::target::test`), `duration_secs`, `fails`
//!   (whether it fails the run), then every field of the harness's `TestReport`
//!   (`schema`, `target`, `test`, `source`, `line`, `device_class`, `status`, `body`,
//!   `old_peak_bytes`, `old_body` (the committed snapshot's body the test was judged
//!   against, as the harness read it before writing anything, or `null`), `changes`,
//!   `message`, `diff`, `snapshot`, `written`, `output`, `details`, and when set
//!   `sites`, `sites_error`, `ignore_reason`, `notes`);
//! - `"summary"`: the last line: `tests`, `counts` (by status), `pending`, `failing`,
//!   `duration_secs`, `exit_code`, `cargo_vramtest_version` (the cargo-vramtest that
//!   ran the tests), and when set `partition` (the shard, `hash:2/4`) and `problems`
//!   (what `merge` could not merge: a missing or truncated shard).
//!
//! The lines are one type, [`JsonLine`]: this module writes it and `cargo vramtest
//! merge` reads it back ([`crate::shards`]); everything a report needs is in them.
//!
//! `list --message-format json` prints `"type": "list"` objects instead (see
//! [`super::list`]): `package`, `binary_id`, `name`, `test`, `ignored`, `shard` (with
//! `--partition`) and `snapshots`.

use super::{RunView, Sink};
use crate::case::Outcome;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use vramtest_model::report::TestReport;

/// The version of this format; bumped on incompatible changes.
pub const FORMAT_VERSION: u32 = 1;

/// One line of a run's JSON report: the format's version, then what the line is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JsonLine<'a> {
    pub format_version: u32,
    #[serde(flatten)]
    pub record: Record<'a>,
}

/// What a line of a run's JSON report holds, by its `"type"`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Record<'a> {
    /// One test's result.
    Test(Box<TestLine<'a>>),
    /// The run's counts and exit code: the last line.
    Summary(SummaryLine),
}

/// A `"type": "test"` line: the fields the run adds around the harness's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestLine<'a> {
    pub package: String,
    /// `package::target`.
    #[serde(default)]
    pub binary_id: String,
    /// `package::target::test`.
    pub name: String,
    pub duration_secs: f64,
    /// Whether the run counted it as failing: a reader checks it against the status.
    pub fails: bool,
    #[serde(flatten)]
    pub report: Cow<'a, TestReport>,
}

/// The `"type": "summary"` line. A reader needs only `tests`, `duration_secs` and
/// `exit_code`; the other fields have defaults.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SummaryLine {
    pub tests: usize,
    /// The tests by status (`"regressed": 1`), in the order of the names.
    #[serde(default)]
    pub counts: BTreeMap<String, usize>,
    #[serde(default)]
    pub pending: usize,
    #[serde(default)]
    pub failing: usize,
    pub duration_secs: f64,
    pub exit_code: u8,
    /// The cargo-vramtest that ran the tests (`None`: a report without the field).
    #[serde(default)]
    pub cargo_vramtest_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// The first fields of any line, read leniently before the line itself, so that a
/// line of another version or type is named as such.
#[derive(Debug, Deserialize)]
pub struct LineHead {
    pub format_version: Option<u32>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

impl<'a> JsonLine<'a> {
    fn of(record: Record<'a>) -> JsonLine<'a> {
        JsonLine {
            format_version: FORMAT_VERSION,
            record,
        }
    }

    /// A test's line.
    pub fn test(o: &'a Outcome) -> JsonLine<'a> {
        JsonLine::of(Record::Test(Box::new(TestLine {
            package: o.case.binary.package.clone(),
            binary_id: o.case.binary.id(),
            name: o.case.full_name(),
            duration_secs: o.duration.as_secs_f64(),
            fails: o.fails(),
            report: Cow::Borrowed(&o.report),
        })))
    }

    /// The summary line of a run.
    pub fn summary(view: &RunView) -> JsonLine<'static> {
        let summary = &view.summary;
        JsonLine::of(Record::Summary(SummaryLine {
            tests: summary.tests,
            counts: summary
                .counts
                .iter()
                .map(|(s, n)| (s.as_str().to_owned(), *n))
                .collect(),
            pending: summary.pending,
            failing: summary.failing,
            duration_secs: view.duration.as_secs_f64(),
            exit_code: summary.exit_code,
            cargo_vramtest_version: Some(view.version.clone()),
            partition: view.partition.clone(),
            problems: view.problems.clone(),
        }))
    }

    /// The line as one line of JSON.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("report lines serialize")
    }
}

/// Every line of a run.
pub fn render(view: &RunView) -> String {
    let mut out = String::new();
    for o in &view.outcomes {
        out += &JsonLine::test(o).to_line();
        out.push('\n');
    }
    out += &JsonLine::summary(view).to_line();
    out.push('\n');
    out
}

/// `--message-format json`: the lines on stdout.
pub struct Stdout;

impl Sink for Stdout {
    fn write(&self, view: &RunView) -> crate::error::Result<()> {
        print!("{}", render(view));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::*;
    use serde_json::Value;
    use std::time::Duration;
    use vramtest_model::Body;

    #[test]
    fn one_object_per_line_then_a_summary() {
        let outcomes = mixed();
        let mut run = view(&outcomes, Duration::from_secs(2));
        run.partition = Some("hash:2/4".into());
        let text = render(&run);
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), outcomes.len() + 1);
        assert!(lines.iter().all(|l| l["format_version"] == 1));
        let first = &lines[0];
        assert_eq!(first["type"], "test");
        assert_eq!(first["name"], "mlp::vram::adamw");
        assert_eq!(first["binary_id"], "mlp::vram");
        assert_eq!(first["status"], "regressed");
        assert_eq!(first["fails"], true);
        assert_eq!(first["body"]["peak_bytes"], 6 << 20);
        assert_eq!(first["changes"][1]["subject"], "activations");
        // The harness's report round-trips out of the line.
        let report: TestReport = serde_json::from_value(first.clone()).unwrap();
        assert_eq!(report, outcomes[0].report);
        let summary = lines.last().unwrap();
        assert_eq!(summary["type"], "summary");
        assert_eq!(summary["exit_code"], 1);
        assert_eq!(summary["counts"]["regressed"], 1);
        assert_eq!(summary["pending"], 1);
        assert_eq!(summary["cargo_vramtest_version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(summary["partition"], "hash:2/4");
        assert!(
            summary.get("problems").is_none(),
            "only when there are some"
        );
        // The old body travels too, for the charts of a merged report.
        let old: Body = serde_json::from_value(first["old_body"].clone()).unwrap();
        assert_eq!(Some(old), outcomes[0].report.old_body);
        assert_eq!(lines[3]["old_body"], Value::Null, "a new test has none");
    }

    #[test]
    fn a_line_reads_back_as_the_type_it_was_written_from() {
        let mut run = view(&mixed(), Duration::from_millis(2500));
        run.partition = Some("hash:1/2".into());
        run.problems = vec!["b.jsonl: empty".into()];
        let text = render(&run);
        let mut kinds = Vec::new();
        for line in text.lines() {
            let read: JsonLine = serde_json::from_str(line).unwrap();
            assert_eq!(read.to_line(), line, "written again, the same line");
            kinds.push(match read.record {
                Record::Test(t) => {
                    let o = &run.outcomes[kinds.len()];
                    assert_eq!(*t.report, o.report);
                    assert_eq!((t.name, t.fails), (o.case.full_name(), o.fails()));
                    "test"
                }
                Record::Summary(s) => {
                    assert_eq!((s.tests, s.exit_code), (6, run.summary.exit_code));
                    assert_eq!(s.problems, run.problems);
                    "summary"
                }
            });
        }
        assert_eq!(
            kinds,
            ["test"; 6]
                .into_iter()
                .chain(["summary"])
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_readme_example_is_what_a_run_prints() {
        let outcomes = [regression()];
        let mut run = view(&outcomes, Duration::from_millis(1250));
        // A fixed version: the example must not change with each release.
        run.version = "0.1.0".into();
        let test = serde_json::to_string_pretty(&JsonLine::test(&outcomes[0])).unwrap();
        let summary = serde_json::to_string_pretty(&JsonLine::summary(&run)).unwrap();
        // What `--message-format json` prints, one object a line, pretty-printed.
        let text = render(&run);
        let lines: Vec<&str> = text.lines().collect();
        for (pretty, line) in [(&test, lines[0]), (&summary, lines[1])] {
            let a: Value = serde_json::from_str(pretty).unwrap();
            let b: Value = serde_json::from_str(line).unwrap();
            assert_eq!(a, b);
        }
        insta::assert_snapshot!(format!("{test}\n{summary}"));
        // The book's JSON lines page shows this golden: it includes the file.
        let page = include_str!("../../../docs/src/reference/json-lines.md");
        assert!(
            page.contains(
                "cargo_vramtest__output__json__tests__the_readme_example_is_what_a_run_prints.snap"
            ),
            "docs/src/reference/json-lines.md no longer includes the JSON golden"
        );
    }
}
