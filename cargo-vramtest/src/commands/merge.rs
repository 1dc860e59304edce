//! `cargo vramtest merge FILES...`: the JSON reports of a run's shards (each shard's
//! `--message-format json` output) as one run: the table or JSON lines, `--junit`,
//! `--markdown`, `--html`, the job summary under GitHub Actions, and the exit code.
//!
//! What the shards' own runs already did is not done again: no test runs, nothing is
//! built, and no annotations are printed (each shard's job printed its own). The HTML
//! page has no timelines: they stay in each shard's target directory (each shard's own
//! `--html` page has them).

use crate::cli::MergeArgs;
use crate::error::Result;
use crate::output::{Origin, RunView, sinks};
use crate::shards::{self, ShardProblem, ShardReport};
use std::path::Path;

/// The exit code of a merge that is missing a shard.
const INCOMPLETE: u8 = 2;

pub fn execute(args: &MergeArgs) -> Result<u8> {
    let mut problems = Vec::new();
    let mut read = Vec::new();
    for path in &args.files {
        match read_shard(path) {
            Ok(shard) => read.push(shard),
            Err(problem) => problems.push(format!("{}: {problem}", path.display())),
        }
    }
    shards::check(&read)?;
    problems.extend(shards::missing(&read));
    let view = merged(read, problems, args.files.len());
    Ok(sinks::deliver(&view, &sinks::sinks(&args.report)))
}

/// One shard's report from its file, or what is wrong with the file.
fn read_shard(path: &Path) -> std::result::Result<ShardReport, ShardProblem> {
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ShardProblem::Missing,
        _ => ShardProblem::Unreadable(e),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| ShardProblem::NotText {
        valid_up_to: e.utf8_error().valid_up_to(),
    })?;
    shards::parse(path, &text)
}

/// The shards, read from `files` report files, as one run: the exit code is the worst
/// of the tests', of the shards' own, and 2 when a shard is missing; the version is the
/// one the shards share.
fn merged(read: Vec<ShardReport>, mut problems: Vec<String>, files: usize) -> RunView {
    let shards_code = read.iter().map(|s| s.exit_code).max().unwrap_or(0);
    let version = read.iter().find_map(|s| s.version.clone());
    // Problems an earlier merge recorded stay problems.
    for s in &read {
        problems.extend(s.problems.iter().cloned());
    }
    let (outcomes, duration) = shards::combine(read);
    let mut view = RunView::new(outcomes, duration, Origin::Merge { files });
    if let Some(version) = version {
        view.version = version;
    }
    view.summary.exit_code = view.summary.exit_code.max(shards_code);
    if !problems.is_empty() {
        view.summary.exit_code = view.summary.exit_code.max(INCOMPLETE);
    }
    view.problems = problems;
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::{outcome, view};
    use std::time::Duration;
    use vramtest_model::report::Status;

    fn shard(outcomes: &[crate::case::Outcome], partition: &str, path: &str) -> ShardReport {
        let mut run = view(outcomes, Duration::from_secs(1));
        run.partition = Some(partition.into());
        let text = crate::output::json::render(&run);
        shards::parse(Path::new(path), &text).unwrap()
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
        let code = |shards: Vec<ShardReport>, problems: Vec<String>| {
            merged(shards, problems, 1).summary.exit_code
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
        let m = merged(vec![merged_before], vec![], 1);
        assert_eq!((m.summary.exit_code, m.problems.len()), (2, 1));
    }
}
