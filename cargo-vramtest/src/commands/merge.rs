//! `cargo vramtest merge FILES...`: the JSON reports of a run's shards (each shard's
//! `--message-format json` output) as one run: the table or JSON lines, `--junit`,
//! `--markdown`, `--html`, the job summary under GitHub Actions, and the exit code.
//!
//! What the shards' own runs already did is not done again: no test runs, nothing is
//! built, and no annotations are printed (each shard's job printed its own). The HTML
//! page has no timelines: they stay in each shard's target directory (each shard's own
//! `--html` page has them).

use super::write_file;
use crate::cli::{MergeArgs, MessageFormat};
use crate::error::{Error, Result};
use crate::output::json::RunInfo;
use crate::output::{self, Results, Summary};
use crate::shards::{self, Shard};
use std::path::Path;

/// The exit code of a merge that is missing a shard, or could not write a report.
const INCOMPLETE: u8 = 2;

pub fn execute(args: &MergeArgs) -> Result<u8> {
    let mut problems = Vec::new();
    let mut read = Vec::new();
    for path in &args.files {
        match read_shard(path) {
            Ok(shard) => read.push(shard),
            Err(message) => problems.push(format!("{}: {message}", path.display())),
        }
    }
    shards::check(&read).map_err(|message| Error::Shards { message })?;
    problems.extend(shards::missing(&read));
    let merged = Merged::of(read, problems);
    let results = Results {
        outcomes: &merged.outcomes,
        duration: merged.duration,
    };
    let summary = &merged.summary;
    match args.report.message_format {
        MessageFormat::Human => {
            anstream::print!("{}", output::table::render_for_terminal(results, summary))
        }
        MessageFormat::Json => print!("{}", output::json::render(results, summary, &merged.info)),
    }
    let red = anstyle::Style::new()
        .fg_color(Some(anstyle::AnsiColor::Red.into()))
        .bold();
    for problem in &merged.info.problems {
        anstream::eprintln!("{red}error{red:#}: {problem}");
    }
    let unwritten = write_reports(args, results, &merged);
    for e in &unwritten {
        anstream::eprintln!("{red}error{red:#}: {e}");
    }
    if unwritten.is_empty() {
        Ok(summary.exit_code)
    } else {
        Ok(INCOMPLETE.max(summary.exit_code))
    }
}

/// One shard's report from its file; the error says what is wrong with the file.
fn read_shard(path: &Path) -> std::result::Result<Shard, String> {
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            "no such file: the shard's report is missing (did its job fail before \
             writing one?)"
                .to_owned()
        }
        _ => format!("cannot read it: {e}"),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (at byte {}): not a cargo-vramtest report",
            e.utf8_error().valid_up_to()
        )
    })?;
    shards::parse(path, &text)
}

/// The shards as one run.
struct Merged {
    outcomes: Vec<crate::case::Outcome>,
    duration: std::time::Duration,
    /// The counts, and the exit code of the whole: the worst of the tests', of the
    /// shards' own, and 2 when a shard is missing.
    summary: Summary,
    /// The version the shards share, and the problems.
    info: RunInfo,
}

impl Merged {
    fn of(read: Vec<Shard>, mut problems: Vec<String>) -> Merged {
        let shards_code = read.iter().map(|s| s.exit_code).max().unwrap_or(0);
        let version = read
            .iter()
            .find_map(|s| s.version.clone())
            .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned());
        // Problems an earlier merge recorded stay problems.
        for s in &read {
            problems.extend(s.problems.iter().cloned());
        }
        let (outcomes, duration) = shards::combine(read);
        let mut summary = Summary::of(&outcomes);
        summary.exit_code = summary.exit_code.max(shards_code);
        if !problems.is_empty() {
            summary.exit_code = summary.exit_code.max(INCOMPLETE);
        }
        Merged {
            outcomes,
            duration,
            summary,
            info: RunInfo {
                version,
                partition: None,
                problems,
            },
        }
    }
}

/// Writes `--junit`, `--markdown`, `--html` and, under GitHub Actions, appends the
/// markdown to the job summary. Returns the reports that could not be written.
fn write_reports(args: &MergeArgs, results: Results<'_>, merged: &Merged) -> Vec<Error> {
    let problems = &merged.info.problems;
    let mut unwritten = Vec::new();
    if let Some(path) = &args.report.junit {
        let xml = output::junit::render_with_problems(results, problems);
        unwritten.extend(write_file(path, &xml).err());
    }
    let markdown = with_problems(
        &output::markdown::render(results, &merged.summary),
        problems,
    );
    if let Some(path) = &args.report.markdown {
        unwritten.extend(write_file(path, &markdown).err());
    }
    if let Some(path) = &args.report.html {
        let mut title = format!(
            "cargo vramtest: {} merged from {} {}",
            merged.summary.headline(),
            args.files.len(),
            if args.files.len() == 1 {
                "report"
            } else {
                "reports"
            }
        );
        if !problems.is_empty() {
            title += &format!(" (incomplete: {})", problems.join("; "));
        }
        let page = output::html::render(results, &title, |_| None);
        unwritten.extend(write_file(path, &page).err());
    }
    if output::github::active()
        && let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY")
    {
        unwritten.extend(super::append_file(Path::new(&path), &markdown).err());
    }
    unwritten
}

/// The markdown report with the problems in a warning right under its headline, so a
/// pull-request comment cannot look complete when a shard is missing.
fn with_problems(markdown: &str, problems: &[String]) -> String {
    if problems.is_empty() {
        return markdown.to_owned();
    }
    let mut block = String::from(
        "> [!WARNING]\n> **Incomplete:** this report does not hold every shard's tests.\n>\n",
    );
    for p in problems {
        block += &format!("> - {}\n", p.replace('\n', " "));
    }
    block.push('\n');
    // The headline is the second line; the table (or the end) follows a blank line.
    match markdown.find("\n\n") {
        Some(i) => format!("{}{block}{}", &markdown[..i + 2], &markdown[i + 2..]),
        None => format!("{markdown}\n{block}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::{mixed, outcome};
    use crate::output::markdown::MARKER;
    use std::time::Duration;
    use vramtest_model::report::Status;

    fn shard(outcomes: &[crate::case::Outcome], partition: &str, path: &str) -> Shard {
        let results = Results {
            outcomes,
            duration: Duration::from_secs(1),
        };
        let info = RunInfo::run(Some(partition.into()));
        let text = output::json::render(results, &Summary::of(outcomes), &info);
        shards::parse(Path::new(path), &text).unwrap()
    }

    #[test]
    fn the_warning_comes_right_after_the_headline() {
        let outcomes = mixed();
        let results = Results {
            outcomes: &outcomes,
            duration: Duration::ZERO,
        };
        let plain = output::markdown::render(results, &Summary::of(&outcomes));
        assert_eq!(with_problems(&plain, &[]), plain);
        let problems = ["shard hash:2/3: no report".to_owned()];
        let warned = with_problems(&plain, &problems);
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
    fn the_exit_code_is_the_worst_of_the_shards() {
        let passing = shard(&[outcome("a", Status::Passed)], "hash:1/2", "a.jsonl");
        let failing = shard(&[outcome("b", Status::Regressed)], "hash:2/2", "b.jsonl");
        let broken = shard(
            &[outcome("c", Status::SnapshotError)],
            "hash:2/2",
            "c.jsonl",
        );
        let code = |shards: Vec<Shard>, problems: Vec<String>| {
            Merged::of(shards, problems).summary.exit_code
        };
        assert_eq!(code(vec![passing.clone()], vec![]), 0);
        assert_eq!(code(vec![passing.clone(), failing.clone()], vec![]), 1);
        assert_eq!(code(vec![passing.clone(), broken], vec![]), 2);
        assert_eq!(
            code(
                vec![passing.clone()],
                vec!["shard hash:2/2: no report".into()]
            ),
            2
        );
        // A shard's own exit code counts even where its tests would not say it.
        let mut odd = passing.clone();
        odd.exit_code = 1;
        assert_eq!(code(vec![odd], vec![]), 1);
        // An earlier merge's problems are kept.
        let mut merged_before = passing;
        merged_before.problems = vec!["x.jsonl: empty".into()];
        let m = Merged::of(vec![merged_before], vec![]);
        assert_eq!((m.summary.exit_code, m.info.problems.len()), (2, 1));
    }
}
