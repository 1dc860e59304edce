//! The JSON reports of several shards of one run (`--message-format json`, one file per
//! shard), read back and checked against each other for `cargo vramtest merge`.
//!
//! A file that cannot be read as a whole report (missing, empty, truncated, not JSON,
//! a test report of a schema this release does not read) and a shard of the partition
//! that no file holds are *problems*: the merge goes on with the others and says so in
//! every report it writes. Shards that contradict each other (the same test twice,
//! another cargo-vramtest version, another snapshot schema, another partition) are an
//! error: there is nothing sound to merge.
//!
//! The lines are read as the run wrote them, into the one type it writes
//! ([`crate::output::json::JsonLine`]), whose reports are the harness's own
//! (`vramtest_model::report::TestReport`, `vramtest_model::Body`), so a field added to
//! them travels through a merge unchanged.

use crate::case::{Binary, Outcome, TestCase};
use crate::output::json::{FORMAT_VERSION, JsonLine, LineHead, Record, SummaryLine, TestLine};
use crate::output::view::Summary;
use crate::partition::{ParsePartitionError, Partition};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use vramtest_model::report::{Status, UnknownSchema};

use crate::error::disagree::{ShardsDisagree, TestInTwoShards};

/// One shard's report, read back.
#[derive(Debug, Clone)]
pub struct ShardReport {
    /// The file it was read from.
    pub path: PathBuf,
    /// Its tests, in the file's order.
    pub outcomes: Vec<Outcome>,
    /// The cargo-vramtest that ran them (`None`: a report without the field).
    pub version: Option<String>,
    /// The shard it was (`--partition`), when it was one.
    pub partition: Option<Partition>,
    /// Its summary's exit code.
    pub exit_code: u8,
    /// How long it ran.
    pub duration: Duration,
    /// Problems an earlier merge recorded in it.
    pub problems: Vec<String>,
}

/// What is wrong with one shard's report file, so that the merge leaves it out and
/// says so. The message does not name the file (the caller adds it) and names the
/// line where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ShardProblem {
    /// The file is not there.
    #[error("no such file: the shard's report is missing (did its job fail before writing one?)")]
    Missing,
    /// The file is there but cannot be read.
    #[error("cannot read it: {0}")]
    Unreadable(#[source] std::io::Error),
    /// The file is not UTF-8 text.
    #[error("not UTF-8 text (at byte {valid_up_to}): not a cargo-vramtest report")]
    NotText { valid_up_to: usize },
    /// The file holds nothing but white space.
    #[error(
        "empty: the shard wrote no report (it stopped before its tests ran: see its job's log)"
    )]
    Empty,
    /// Whole test lines and no summary line after them.
    #[error(
        "truncated: no summary line after its {tests} test {} (the run stopped before it finished)",
        if *.tests == 1 { "line" } else { "lines" }
    )]
    NoSummary { tests: usize },
    /// The last line cut short, and no summary line.
    #[error(
        "truncated: line {line} is cut short and there is no summary line (the run stopped while writing its report)"
    )]
    CutShort { line: usize },
    /// The summary counts more or fewer tests than the file holds.
    #[error("its summary counts {counted} tests but it holds {held}: lines are missing")]
    Miscounted { counted: usize, held: usize },
    /// One test in two of the file's lines.
    #[error("{test} is in it twice")]
    Twice { test: String },
    /// The summary's `partition` is not one.
    #[error("its summary's {0}")]
    Partition(#[source] ParsePartitionError),
    /// A line after the summary line: two reports in one file, or text appended.
    #[error("line {line} follows the summary line: not one run's report")]
    AfterSummary { line: usize },
    /// A line that is not JSON.
    #[error("line {line} is not a JSON object: {source}")]
    NotJson {
        line: usize,
        source: serde_json::Error,
    },
    /// A JSON line without the fields every report line has.
    #[error("line {line} is not a cargo-vramtest report line: {source}")]
    NotReportLine {
        line: usize,
        source: serde_json::Error,
    },
    /// A line of another format version of the JSON lines.
    #[error(
        "line {line} has format_version {}, this cargo-vramtest reads {FORMAT_VERSION} (hint: merge with the cargo-vramtest that wrote it)",
        .found.map_or("(none)".to_owned(), |v| v.to_string())
    )]
    FormatVersion { line: usize, found: Option<u32> },
    /// A test line whose report is of a schema this release does not read.
    #[error("line {line} is {source} (hint: merge with the cargo-vramtest that wrote it)")]
    ReportSchema { line: usize, source: UnknownSchema },
    /// A line of another command's output (`list`), or without a type.
    #[error(
        "line {line} is a `{}` line, not a run's report (hint: merge the output of `cargo vramtest --message-format json`)",
        .kind.as_deref().unwrap_or("(no type)")
    )]
    NotRunLine { line: usize, kind: Option<String> },
    /// A test or summary line whose fields do not read as one.
    #[error("line {line} is not {kind}: {source}")]
    Malformed {
        line: usize,
        kind: ReportLineKind,
        source: serde_json::Error,
    },
    /// A test line whose name is not its package, target and test.
    #[error("line {line}: its name `{name}` is not its package, target and test (`{expected}`)")]
    Misnamed {
        line: usize,
        name: String,
        expected: String,
    },
    /// A test line whose `fails` disagrees with its status: neither is trusted over the
    /// other, so the file is not merged (a line that says it fails never becomes a pass).
    #[error(
        "line {line}: {test} has `fails: {said}`, but its status `{}`{} {}: the line contradicts itself (was the report edited?), so it is not merged",
        .status.as_str(),
        if *.pending { " with a pending result" } else { "" },
        if *.fails { "fails" } else { "passes" }
    )]
    Contradiction {
        line: usize,
        test: String,
        /// What its `fails` says.
        said: bool,
        status: Status,
        pending: bool,
        /// Whether its status fails.
        fails: bool,
    },
    /// A summary line whose counts or exit code are not those of the file's test lines
    /// (test lines edited to passes, a summary edited to 0): neither is trusted over the
    /// other, so the file is not merged.
    #[error(
        "its summary says {said}, but its test lines say {lines}: the report contradicts itself (was it edited?), so it is not merged"
    )]
    SummaryContradiction {
        /// The summary's counts and exit code.
        said: String,
        /// The same, of the test lines.
        lines: String,
    },
}

/// The two kinds of line a run's report holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportLineKind {
    Test,
    Summary,
}

impl std::fmt::Display for ReportLineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReportLineKind::Test => "a test's report",
            ReportLineKind::Summary => "a run's summary",
        })
    }
}

/// Reads one shard's report from its text.
pub fn parse(path: &Path, text: &str) -> Result<ShardReport, ShardProblem> {
    if text.trim().is_empty() {
        return Err(ShardProblem::Empty);
    }
    let (outcomes, summary) = read_lines(text)?;
    let Some(summary) = summary else {
        return Err(ShardProblem::NoSummary {
            tests: outcomes.len(),
        });
    };
    if summary.tests != outcomes.len() {
        return Err(ShardProblem::Miscounted {
            counted: summary.tests,
            held: outcomes.len(),
        });
    }
    let mut seen = BTreeSet::new();
    for o in &outcomes {
        let name = o.case.full_name();
        if !seen.insert(name.clone()) {
            return Err(ShardProblem::Twice { test: name });
        }
    }
    summary_agrees(&summary, &outcomes)?;
    let partition = summary
        .partition
        .as_deref()
        .map(str::parse::<Partition>)
        .transpose()
        .map_err(ShardProblem::Partition)?;
    Ok(ShardReport {
        path: path.to_owned(),
        outcomes,
        version: summary.cargo_vramtest_version,
        partition,
        exit_code: summary.exit_code,
        duration: duration(summary.duration_secs),
        problems: summary.problems,
    })
}

/// The summary's counts and exit code are the test lines': what a run writes (the exit
/// code 2 at least where the summary records problems, as a merge writes).
fn summary_agrees(summary: &SummaryLine, outcomes: &[Outcome]) -> Result<(), ShardProblem> {
    let of_lines = Summary::of(outcomes);
    let counts: BTreeMap<String, usize> = of_lines
        .counts
        .iter()
        .map(|(s, n)| (s.as_str().to_owned(), *n))
        .collect();
    let summary_counts: BTreeMap<String, usize> = summary
        .counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(s, n)| (s.clone(), *n))
        .collect();
    let floor = if summary.problems.is_empty() { 0 } else { 2 };
    let exit_code = of_lines.exit_code.max(floor);
    let described = |counts: &BTreeMap<String, usize>, failing, pending, code| {
        let mut parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        parts.push(format!("{failing} failing"));
        parts.push(format!("{pending} pending"));
        format!("{} (exit code {code})", parts.join(", "))
    };
    if (
        &summary_counts,
        summary.failing,
        summary.pending,
        summary.exit_code,
    ) == (&counts, of_lines.failing, of_lines.pending, exit_code)
    {
        return Ok(());
    }
    Err(ShardProblem::SummaryContradiction {
        said: described(
            &summary_counts,
            summary.failing,
            summary.pending,
            summary.exit_code,
        ),
        lines: described(&counts, of_lines.failing, of_lines.pending, exit_code),
    })
}

/// The test lines and the summary line of a report, each checked on its own.
fn read_lines(text: &str) -> Result<(Vec<Outcome>, Option<SummaryLine>), ShardProblem> {
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut outcomes = Vec::new();
    let mut binaries: HashMap<(String, String), Arc<Binary>> = HashMap::new();
    let mut summary = None;
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        if summary.is_some() {
            return Err(ShardProblem::AfterSummary { line: n });
        }
        let value: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(_) if n == lines.len() && !complete => {
                return Err(ShardProblem::CutShort { line: n });
            }
            Err(source) => return Err(ShardProblem::NotJson { line: n, source }),
        };
        let head = LineHead::deserialize(&value)
            .map_err(|source| ShardProblem::NotReportLine { line: n, source })?;
        if head.format_version != Some(FORMAT_VERSION) {
            return Err(ShardProblem::FormatVersion {
                line: n,
                found: head.format_version,
            });
        }
        let kind = match head.kind.as_deref() {
            Some("test") => {
                vramtest_model::report::check_schema(&value)
                    .map_err(|source| ShardProblem::ReportSchema { line: n, source })?;
                ReportLineKind::Test
            }
            Some("summary") => ReportLineKind::Summary,
            _ => {
                return Err(ShardProblem::NotRunLine {
                    line: n,
                    kind: head.kind,
                });
            }
        };
        let line = JsonLine::deserialize(value).map_err(|source| ShardProblem::Malformed {
            line: n,
            kind,
            source,
        })?;
        match line.record {
            Record::Test(line) => {
                let said = line.fails;
                let o = outcome(n, *line, &mut binaries)?;
                if o.fails() != said {
                    return Err(ShardProblem::Contradiction {
                        line: n,
                        test: o.case.full_name(),
                        said,
                        status: o.report.status,
                        pending: o.report.is_pending(),
                        fails: o.fails(),
                    });
                }
                outcomes.push(o);
            }
            Record::Summary(s) => summary = Some(s),
        }
    }
    Ok((outcomes, summary))
}

fn duration(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or_default()
}

/// Test line `n` as the outcome the reports are written from. Only what a report shows
/// is known: the binary's path and the package's directory are not in the line.
fn outcome(
    n: usize,
    line: TestLine<'_>,
    binaries: &mut HashMap<(String, String), Arc<Binary>>,
) -> Result<Outcome, ShardProblem> {
    let report = line.report.into_owned();
    let binary = binaries
        .entry((line.package.clone(), report.target.clone()))
        .or_insert_with(|| {
            Arc::new(Binary {
                package: line.package,
                target: report.target.clone(),
                path: PathBuf::new(),
                package_dir: PathBuf::new(),
                package_version: String::new(),
            })
        })
        .clone();
    let case = TestCase {
        binary,
        name: report.test.clone(),
        ignored: report.status == Status::Ignored,
        include_ignored: false,
    };
    if case.full_name() != line.name {
        return Err(ShardProblem::Misnamed {
            line: n,
            name: line.name,
            expected: case.full_name(),
        });
    }
    Ok(Outcome {
        case,
        duration: duration(line.duration_secs),
        report,
    })
}

/// Checks that the shards are parts of one run: one cargo-vramtest version, one
/// snapshot schema (the report schema is checked as each file is read), one partition
/// kind and count with each shard once, and each test in one shard.
pub fn check(shards: &[ShardReport]) -> Result<(), ShardsDisagree> {
    // A version field left empty says nothing to disagree with.
    let versions = shards
        .iter()
        .map(|s| (s, s.version.clone()))
        .filter(|(_, v)| v.as_deref() != Some(""));
    if let Some((first, other)) = disagree(versions) {
        return Err(ShardsDisagree::Versions {
            first: first.0.path.clone(),
            other: other.0.path.clone(),
            first_version: first.1,
            other_version: other.1,
        });
    }
    // A shard without tests has no schema to disagree with.
    let snapshot_schemas = shards
        .iter()
        .map(|s| (s, snapshot_schemas(s)))
        .filter(|(_, k)| !k.is_empty());
    if let Some((first, other)) = disagree(snapshot_schemas) {
        return Err(ShardsDisagree::SnapshotSchemas {
            first: first.0.path.clone(),
            other: other.0.path.clone(),
            first_schemas: first.1,
            other_schemas: other.1,
        });
    }
    check_partitions(shards)?;
    let mut owner: HashMap<String, &Path> = HashMap::new();
    let mut twice = Vec::new();
    for s in shards {
        for o in &s.outcomes {
            let name = o.case.full_name();
            if let Some(first) = owner.insert(name.clone(), &s.path) {
                twice.push(TestInTwoShards {
                    test: name,
                    first: first.to_owned(),
                    other: s.path.clone(),
                });
            }
        }
    }
    if !twice.is_empty() {
        return Err(ShardsDisagree::TestsTwice { tests: twice });
    }
    Ok(())
}

/// The snapshot schemas among a shard's tests; empty when none has one.
fn snapshot_schemas(s: &ShardReport) -> BTreeSet<u32> {
    s.outcomes
        .iter()
        .filter_map(|o| o.report.body.as_ref().map(|b| b.schema))
        .collect()
}

/// A shard and its key (its version, its snapshot schemas).
type Keyed<'a, K> = (&'a ShardReport, K);

/// The first shard and the first other shard whose key differs from the first's, each
/// with its key.
fn disagree<'a, K: PartialEq>(
    mut keys: impl Iterator<Item = Keyed<'a, K>>,
) -> Option<(Keyed<'a, K>, Keyed<'a, K>)> {
    let first = keys.next()?;
    let other = keys.find(|(_, o)| *o != first.1)?;
    Some((first, other))
}

/// One partition kind and count among the partitioned shards, each shard once.
fn check_partitions(shards: &[ShardReport]) -> Result<(), ShardsDisagree> {
    let parts: Vec<(&ShardReport, Partition)> = shards
        .iter()
        .filter_map(|s| s.partition.map(|p| (s, p)))
        .collect();
    let Some((first, p)) = parts.first() else {
        return Ok(());
    };
    let mut seen: BTreeMap<u64, &Path> = BTreeMap::new();
    for (s, q) in &parts {
        if (q.kind, q.total) != (p.kind, p.total) {
            return Err(ShardsDisagree::Partitions {
                first: first.path.clone(),
                first_shard: *p,
                other: s.path.clone(),
                other_shard: *q,
            });
        }
        if let Some(other) = seen.insert(q.shard, &s.path) {
            return Err(ShardsDisagree::SameShard {
                first: other.to_owned(),
                other: s.path.clone(),
                shard: *q,
            });
        }
    }
    Ok(())
}

/// The shards of the partition that no file holds, one sentence each (`shard hash:3/4:
/// no report …`). Shards without a partition are not counted.
pub fn missing(shards: &[ShardReport]) -> Vec<String> {
    let Some(p) = shards.iter().find_map(|s| s.partition) else {
        return Vec::new();
    };
    let present: BTreeSet<u64> = shards
        .iter()
        .filter_map(|s| s.partition.map(|q| q.shard))
        .collect();
    (1..=p.total)
        .filter(|m| !present.contains(m))
        .map(|m| {
            let shard = Partition { shard: m, ..p };
            format!(
                "shard {shard}: no report among the files merged, so its tests are not in \
                 this report (did its job fail before writing one?)"
            )
        })
        .collect()
}

/// Every shard's tests in one list, in the order of a single run (by binary, then
/// name); the run's duration is the longest shard's (the shards run side by side).
pub fn combine(shards: Vec<ShardReport>) -> (Vec<Outcome>, Duration) {
    let duration = shards.iter().map(|s| s.duration).max().unwrap_or_default();
    let mut outcomes: Vec<Outcome> = shards.into_iter().flat_map(|s| s.outcomes).collect();
    outcomes.sort_by(|a, b| {
        (a.case.binary.id(), &a.case.name).cmp(&(b.case.binary.id(), &b.case.name))
    });
    (outcomes, duration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::{mixed, outcome, view};
    use crate::output::json;

    /// What `--message-format json` prints for `outcomes`, as shard `partition`.
    fn report(outcomes: &[Outcome], partition: Option<&str>) -> String {
        let mut run = view(outcomes, Duration::from_millis(1500));
        run.partition = partition.map(str::to_owned);
        json::render(&run)
    }

    fn shard(outcomes: &[Outcome], partition: Option<&str>, path: &str) -> ShardReport {
        parse(Path::new(path), &report(outcomes, partition)).unwrap()
    }

    #[test]
    fn a_report_reads_back_as_it_was_written() {
        let outcomes = mixed();
        let s = shard(&outcomes, Some("hash:2/3"), "b.jsonl");
        assert_eq!(s.outcomes.len(), outcomes.len());
        for (read, written) in s.outcomes.iter().zip(&outcomes) {
            assert_eq!(read.report, written.report);
            assert_eq!(read.duration, written.duration);
            assert_eq!(read.case.full_name(), written.case.full_name());
            assert_eq!(read.fails(), written.fails());
        }
        assert_eq!(s.partition, Some("hash:2/3".parse().unwrap()));
        assert_eq!(s.version.as_deref(), Some(env!("CARGO_PKG_VERSION")));
        assert_eq!(s.exit_code, Summary::of(&outcomes).exit_code);
        assert_eq!(s.duration, Duration::from_millis(1500));
        // Written again, it is the same text.
        assert_eq!(
            report(&s.outcomes, Some("hash:2/3")),
            report(&outcomes, Some("hash:2/3"))
        );
    }

    #[test]
    fn a_broken_file_says_what_is_wrong_with_it() {
        let text = report(&mixed(), None);
        let path = Path::new("a.jsonl");
        let err = |t: &str| parse(path, t).unwrap_err().to_string();
        assert!(err("").starts_with("empty"), "{}", err(""));
        // Cut in the middle of a line, and after a whole line.
        let cut = &text[..text.len() / 2];
        assert!(err(cut).starts_with("truncated: line"), "{}", err(cut));
        let whole_lines: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            err(&whole_lines),
            "truncated: no summary line after its 2 test lines (the run stopped before it finished)"
        );
        let dropped: String = text
            .lines()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        assert!(
            err(&dropped).contains("summary counts 6 tests but it holds 5"),
            "{}",
            err(&dropped)
        );
        let garbage = format!("warning: hello\n{text}");
        assert!(
            err(&garbage).starts_with("line 1 is not a JSON object"),
            "{}",
            err(&garbage)
        );
        let newer = text.replacen("\"format_version\":1", "\"format_version\":2", 1);
        assert!(
            err(&newer).contains("line 1 has format_version 2"),
            "{}",
            err(&newer)
        );
        // A test report of another schema: named with the schema this one reads.
        let other = text.replacen("\"schema\":1,\"target\"", "\"schema\":7,\"target\"", 1);
        assert_ne!(other, text);
        assert_eq!(
            err(&other),
            "line 1 is a test report of schema 7, and this release reads schema 1 only \
             (hint: merge with the cargo-vramtest that wrote it)"
        );
        let list = "{\"format_version\":1,\"type\":\"list\",\"name\":\"a\"}\n";
        assert!(err(list).contains("a `list` line"), "{}", err(list));
        let after = format!("{text}{}", text.lines().next().unwrap());
        assert!(
            err(&after).contains("follows the summary line"),
            "{}",
            err(&after)
        );
        let renamed = text.replacen("mlp::vram::adamw", "mlp::vram::other", 1);
        assert!(
            err(&renamed).contains("is not its package, target and test"),
            "{}",
            err(&renamed)
        );
        let first = text.lines().next().unwrap();
        let twice = format!("{first}\n{text}").replacen("\"tests\":6", "\"tests\":7", 1);
        assert_eq!(err(&twice), "mlp::vram::adamw is in it twice");
    }

    #[test]
    fn a_line_whose_status_and_fails_disagree_is_not_merged_as_a_pass() {
        let text = report(&[outcome("a", Status::Regressed)], None);
        assert!(text.contains("\"fails\":true"), "{text}");
        // Its status edited to a pass, its `fails` left saying it fails.
        let edited = text.replacen("\"status\":\"regressed\"", "\"status\":\"passed\"", 1);
        assert_ne!(edited, text);
        assert_eq!(
            parse(Path::new("a.jsonl"), &edited)
                .unwrap_err()
                .to_string(),
            "line 1: mlp::vram::a has `fails: true`, but its status `passed` passes: the \
             line contradicts itself (was the report edited?), so it is not merged"
        );
        // The other way round too: neither field is trusted over the other.
        let quiet = text.replacen("\"fails\":true", "\"fails\":false", 1);
        assert!(
            parse(Path::new("a.jsonl"), &quiet)
                .unwrap_err()
                .to_string()
                .contains("has `fails: false`, but its status `regressed` fails"),
        );
        // Unedited, it reads back failing.
        assert!(parse(Path::new("a.jsonl"), &text).unwrap().outcomes[0].fails());
    }

    #[test]
    fn a_summary_that_disagrees_with_its_test_lines_is_not_merged() {
        let outcomes = [
            outcome("a", Status::Regressed),
            outcome("b", Status::Passed),
        ];
        let text = report(&outcomes, None);
        let err = |t: &str| parse(Path::new("a.jsonl"), t).unwrap_err().to_string();
        // The failing line edited to a pass (status and `fails` both), the summary not.
        let edited = text
            .replacen("\"status\":\"regressed\"", "\"status\":\"passed\"", 1)
            .replacen("\"fails\":true", "\"fails\":false", 1);
        assert_eq!(
            err(&edited),
            "its summary says 1 passed, 1 regressed, 1 failing, 0 pending (exit code 1), but \
             its test lines say 2 passed, 0 failing, 0 pending (exit code 0): the report \
             contradicts itself (was it edited?), so it is not merged"
        );
        // The summary edited to a pass, the lines not.
        let code = text.replacen("\"exit_code\":1", "\"exit_code\":0", 1);
        assert_ne!(code, text);
        assert!(err(&code).contains("its summary says 1 passed, 1 regressed, 1 failing, 0 pending (exit code 0), but its test lines say 1 passed, 1 regressed, 1 failing, 0 pending (exit code 1)"), "{}", err(&code));
        // A summary with problems (an earlier merge's) has exit code 2 at least.
        let merged = text.replacen("\"exit_code\":1", "\"exit_code\":2,\"problems\":[\"x\"]", 1);
        assert_eq!(parse(Path::new("a.jsonl"), &merged).unwrap().exit_code, 2);
        assert!(parse(Path::new("a.jsonl"), &text).is_ok());
    }

    #[test]
    fn shards_that_disagree_are_an_error_naming_both_files() {
        let a = shard(&[outcome("a", Status::Passed)], Some("hash:1/2"), "a.jsonl");
        let b = shard(&[outcome("b", Status::Passed)], Some("hash:2/2"), "b.jsonl");
        check(&[a.clone(), b.clone()]).unwrap();

        let mut old = b.clone();
        old.version = Some("0.0.9".into());
        let e = check(&[a.clone(), old]).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "a.jsonl was written by cargo-vramtest {}, b.jsonl by 0.0.9",
                env!("CARGO_PKG_VERSION")
            )),
            "{e}"
        );

        let mut schema = b.clone();
        schema.outcomes[0].report.body.as_mut().unwrap().schema = 2;
        let e = check(&[a.clone(), schema]).unwrap_err().to_string();
        assert!(
            e.starts_with("a.jsonl holds snapshots of schema 1, b.jsonl of schema 2"),
            "{e}"
        );

        let dup = shard(&[outcome("a", Status::Passed)], Some("hash:2/2"), "c.jsonl");
        let e = check(&[a.clone(), dup]).unwrap_err().to_string();
        assert!(
            e.starts_with("mlp::vram::a is in a.jsonl and in c.jsonl"),
            "{e}"
        );

        let other = shard(
            &[outcome("b", Status::Passed)],
            Some("slice:2/3"),
            "d.jsonl",
        );
        let e = check(&[a.clone(), other]).unwrap_err().to_string();
        assert!(
            e.starts_with("a.jsonl is shard hash:1/2 and d.jsonl is shard slice:2/3"),
            "{e}"
        );

        let again = shard(&[outcome("c", Status::Passed)], Some("hash:1/2"), "e.jsonl");
        let e = check(&[a.clone(), b.clone(), again])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("a.jsonl and e.jsonl are both shard hash:1/2"),
            "{e}"
        );

        // A shard without tests has no schema to disagree with.
        let empty = shard(&[], Some("hash:2/2"), "f.jsonl");
        check(&[a, empty]).unwrap();
    }

    #[test]
    fn tests_in_two_shards_are_each_kept_and_the_first_five_named() {
        let names = ["a", "b", "c", "d", "e", "f", "g"];
        let outcomes: Vec<Outcome> = names.iter().map(|n| outcome(n, Status::Passed)).collect();
        let a = shard(&outcomes, None, "a.jsonl");
        let b = shard(&outcomes, None, "b.jsonl");
        let e = check(&[a.clone(), b]).unwrap_err();
        let ShardsDisagree::TestsTwice { tests } = &e else {
            panic!("{e}")
        };
        assert_eq!(tests.len(), names.len());
        let text = e.to_string();
        assert!(
            text.starts_with("mlp::vram::a is in a.jsonl and in b.jsonl; "),
            "{text}"
        );
        assert!(
            text.contains(
                "mlp::vram::e is in a.jsonl and in b.jsonl; and 2 more: a test belongs in one shard"
            ),
            "{text}"
        );
        assert!(!text.contains("mlp::vram::f"), "{text}");

        // A report without a version is named as such.
        let mut unknown = a.clone();
        unknown.version = None;
        unknown.path = "u.jsonl".into();
        let e = check(&[a, unknown]).unwrap_err().to_string();
        assert!(
            e.contains(", u.jsonl by an unknown version (no `cargo_vramtest_version`): "),
            "{e}"
        );
    }

    #[test]
    fn a_missing_shard_is_named() {
        let a = shard(&[outcome("a", Status::Passed)], Some("hash:1/4"), "a.jsonl");
        let c = shard(&[outcome("c", Status::Passed)], Some("hash:3/4"), "c.jsonl");
        let missing: Vec<String> = missing(&[a.clone(), c.clone()]);
        assert_eq!(missing.len(), 2, "{missing:?}");
        assert!(
            missing[0].starts_with("shard hash:2/4: no report"),
            "{missing:?}"
        );
        assert!(
            missing[1].starts_with("shard hash:4/4: no report"),
            "{missing:?}"
        );
        let unpartitioned = shard(&[outcome("a", Status::Passed)], None, "a.jsonl");
        assert!(super::missing(&[unpartitioned]).is_empty());
    }

    #[test]
    fn combined_tests_are_in_a_runs_order() {
        let a = shard(
            &[
                outcome("zeta", Status::Passed),
                outcome("beta", Status::Regressed),
            ],
            Some("hash:1/2"),
            "a.jsonl",
        );
        let mut b = shard(
            &[outcome("alpha", Status::Passed)],
            Some("hash:2/2"),
            "b.jsonl",
        );
        b.duration = Duration::from_secs(9);
        let (outcomes, duration) = combine(vec![a, b]);
        let names: Vec<&str> = outcomes.iter().map(|o| o.case.name.as_str()).collect();
        assert_eq!(names, ["alpha", "beta", "zeta"]);
        assert_eq!(duration, Duration::from_secs(9));
    }
}
