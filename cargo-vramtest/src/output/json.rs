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
//! `cargo vramtest merge` reads these lines back ([`crate::shards`]): everything a
//! report needs is in them.
//!
//! `list --message-format json` prints `"type": "list"` objects instead (see
//! [`super::list`]): `package`, `binary_id`, `name`, `test`, `ignored`, `shard` (with
//! `--partition`) and `snapshots`.

use super::{Results, Summary};
use crate::case::Outcome;
use serde::Serialize;
use std::collections::BTreeMap;
use vramtest_model::report::TestReport;

/// The version of this format; bumped on incompatible changes.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Serialize)]
struct TestLine<'a> {
    format_version: u32,
    #[serde(rename = "type")]
    kind: &'static str,
    package: &'a str,
    binary_id: String,
    name: String,
    duration_secs: f64,
    fails: bool,
    #[serde(flatten)]
    report: &'a TestReport,
}

#[derive(Serialize)]
struct SummaryLine<'a> {
    format_version: u32,
    #[serde(rename = "type")]
    kind: &'static str,
    tests: usize,
    counts: BTreeMap<&'static str, usize>,
    pending: usize,
    failing: usize,
    duration_secs: f64,
    exit_code: u8,
    cargo_vramtest_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    problems: &'a [String],
}

/// What the summary line says about the run besides its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    /// The cargo-vramtest that ran the tests.
    pub version: String,
    /// The shard the run was (`--partition hash:2/4`), when it was one.
    pub partition: Option<String>,
    /// What went wrong beyond the tests: a shard `merge` could not read.
    pub problems: Vec<String>,
}

impl RunInfo {
    /// A run of this cargo-vramtest, of the shard `partition` when it is one.
    pub fn run(partition: Option<String>) -> RunInfo {
        RunInfo {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            partition,
            problems: Vec::new(),
        }
    }
}

fn test_object(o: &Outcome) -> TestLine<'_> {
    TestLine {
        format_version: FORMAT_VERSION,
        kind: "test",
        package: &o.case.binary.package,
        binary_id: o.case.binary.id(),
        name: o.case.full_name(),
        duration_secs: o.duration.as_secs_f64(),
        fails: o.fails(),
        report: &o.report,
    }
}

/// One test's line.
pub fn test_line(o: &Outcome) -> String {
    serde_json::to_string(&test_object(o)).expect("reports serialize")
}

fn summary_object<'a>(
    results: Results<'_>,
    summary: &Summary,
    info: &'a RunInfo,
) -> SummaryLine<'a> {
    SummaryLine {
        format_version: FORMAT_VERSION,
        kind: "summary",
        tests: summary.tests,
        counts: summary
            .counts
            .iter()
            .map(|(s, n)| (s.as_str(), *n))
            .collect(),
        pending: summary.pending,
        failing: summary.failing,
        duration_secs: results.duration.as_secs_f64(),
        exit_code: summary.exit_code,
        cargo_vramtest_version: &info.version,
        partition: info.partition.as_deref(),
        problems: &info.problems,
    }
}

/// The summary line.
pub fn summary_line(results: Results<'_>, summary: &Summary, info: &RunInfo) -> String {
    serde_json::to_string(&summary_object(results, summary, info)).expect("summaries serialize")
}

/// Every line of a run.
pub fn render(results: Results<'_>, summary: &Summary, info: &RunInfo) -> String {
    let mut out = String::new();
    for o in results.outcomes {
        out += &test_line(o);
        out.push('\n');
    }
    out += &summary_line(results, summary, info);
    out.push('\n');
    out
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
        let results = Results {
            outcomes: &outcomes,
            duration: Duration::from_secs(2),
        };
        let info = RunInfo::run(Some("hash:2/4".into()));
        let text = render(results, &Summary::of(&outcomes), &info);
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
    fn the_readme_example_is_what_a_run_prints() {
        let outcomes = [regression()];
        let results = Results {
            outcomes: &outcomes,
            duration: Duration::from_millis(1250),
        };
        // A fixed version: the example must not change with each release.
        let info = RunInfo {
            version: "0.1.0".into(),
            partition: None,
            problems: Vec::new(),
        };
        let test = serde_json::to_string_pretty(&test_object(&outcomes[0])).unwrap();
        let summary =
            serde_json::to_string_pretty(&summary_object(results, &Summary::of(&outcomes), &info))
                .unwrap();
        // What `--message-format json` prints, one object a line, pretty-printed.
        for (pretty, line) in [
            (&test, test_line(&outcomes[0])),
            (
                &summary,
                summary_line(results, &Summary::of(&outcomes), &info),
            ),
        ] {
            let a: Value = serde_json::from_str(pretty).unwrap();
            let b: Value = serde_json::from_str(&line).unwrap();
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
