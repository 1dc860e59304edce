//! Shards that are not parts of one run, as the error `cargo vramtest merge` stops
//! with: each names the files that disagree.

use crate::partition::Partition;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Shards that are not parts of one run: there is nothing sound to merge. The message
/// names the files that disagree.
#[derive(Debug, thiserror::Error)]
pub enum ShardsDisagree {
    /// Two cargo-vramtest versions (`None`: a report without the field).
    #[error(
        "{first} was written by cargo-vramtest {}, {other} by {}: the shards of one run come from one cargo-vramtest (hint: install one version for every shard)",
        version_text(.first_version),
        version_text(.other_version)
    )]
    Versions {
        first: PathBuf,
        other: PathBuf,
        first_version: Option<String>,
        other_version: Option<String>,
    },
    /// Two snapshot schemas (each shard's: the schemas among its tests).
    #[error(
        "{first} holds snapshots of schema {}, {other} of schema {}: the shards of one run share one snapshot schema",
        schemas_text(.first_schemas),
        schemas_text(.other_schemas)
    )]
    SnapshotSchemas {
        first: PathBuf,
        other: PathBuf,
        first_schemas: BTreeSet<u32>,
        other_schemas: BTreeSet<u32>,
    },
    /// Two partition kinds or counts.
    #[error(
        "{first} is shard {first_shard} and {other} is shard {other_shard}: the shards of one run share one partition kind and count"
    )]
    Partitions {
        first: PathBuf,
        first_shard: Partition,
        other: PathBuf,
        other_shard: Partition,
    },
    /// One shard of the partition in two files.
    #[error("{first} and {other} are both shard {shard}: merge each shard's report once")]
    SameShard {
        first: PathBuf,
        other: PathBuf,
        shard: Partition,
    },
    /// Tests that are in two shards (every one, in the order found; the message names
    /// the first five).
    #[error(
        "{}: a test belongs in one shard (hint: give every shard of the run the same `--partition` kind and count, and merge each shard's report once)",
        tests_twice_text(.tests)
    )]
    TestsTwice { tests: Vec<TestInTwoShards> },
}

/// A test found in two shards' files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestInTwoShards {
    pub test: String,
    pub first: PathBuf,
    pub other: PathBuf,
}

impl std::fmt::Display for TestInTwoShards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is in {} and in {}",
            self.test,
            self.first.display(),
            self.other.display()
        )
    }
}

fn version_text(version: &Option<String>) -> &str {
    version
        .as_deref()
        .unwrap_or("an unknown version (no `cargo_vramtest_version`)")
}

/// `1`, `1 and 2`.
fn schemas_text(schemas: &BTreeSet<u32>) -> String {
    let names: Vec<String> = schemas.iter().map(u32::to_string).collect();
    names.join(" and ")
}

/// The first five, then how many more.
fn tests_twice_text(tests: &[TestInTwoShards]) -> String {
    let mut text = tests
        .iter()
        .take(5)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if tests.len() > 5 {
        let _ = write!(text, "; and {} more", tests.len() - 5);
    }
    text
}
