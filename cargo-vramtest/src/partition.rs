//! `--partition`: shards of the test list for CI machines, with cargo-nextest's rules, so
//! a workflow that shards nextest can shard `cargo vramtest` the same way.
//!
//! - `hash:M/N`: a test is in shard `xxh64(name, seed 0) % N + 1` (its name within its
//!   binary); adding or removing a test never moves another one.
//! - `slice:M/N`: round-robin over the list of every binary's tests, sorted by binary
//!   (`package::target`) then name: the i-th test (from 0) is in shard `i % N + 1`.
//! - `count:M/N`: the same round-robin, counted within each binary.
//!
//! Partitioning applies after the name filters, and ignored tests are dropped before
//! it, as nextest does: they neither run in a shard nor take a place in the count.

use crate::case::TestCase;
use std::fmt;
use std::str::FromStr;
use xxhash_rust::xxh64::xxh64;

/// One shard of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub kind: PartitionKind,
    /// 1-based.
    pub shard: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionKind {
    Hash,
    Slice,
    Count,
}

/// A `--partition` value that is not `hash:M/N`, `slice:M/N` or `count:M/N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid partition `{input}`: {reason} (hint: write `hash:M/N`, `slice:M/N` or `count:M/N` with 1 ≤ M ≤ N, like `hash:1/2`)"
)]
pub struct ParsePartitionError {
    pub input: String,
    pub reason: String,
}

impl FromStr for Partition {
    type Err = ParsePartitionError;
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| ParsePartitionError {
            input: input.to_owned(),
            reason: reason.to_owned(),
        };
        let (kind, rest) = input
            .split_once(':')
            .ok_or_else(|| err("missing `kind:`"))?;
        let kind = match kind {
            "hash" => PartitionKind::Hash,
            "slice" => PartitionKind::Slice,
            "count" => PartitionKind::Count,
            _ => return Err(err("the kind must be hash, slice or count")),
        };
        let (m, n) = rest.split_once('/').ok_or_else(|| err("expected M/N"))?;
        let shard: u64 = m.parse().map_err(|_| err("M is not a number"))?;
        let total: u64 = n.parse().map_err(|_| err("N is not a number"))?;
        if !(1..=total).contains(&shard) {
            return Err(err("M must be between 1 and N"));
        }
        Ok(Partition { kind, shard, total })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            PartitionKind::Hash => "hash",
            PartitionKind::Slice => "slice",
            PartitionKind::Count => "count",
        };
        write!(f, "{kind}:{}/{}", self.shard, self.total)
    }
}

impl Partition {
    /// The tests of this shard, each with its shard, from the filtered list (sorted by
    /// binary, then name). Ignored tests are dropped first.
    pub fn this_shard(&self, cases: Vec<TestCase>) -> Vec<(TestCase, u64)> {
        let cases: Vec<TestCase> = cases.into_iter().filter(|c| !c.ignored).collect();
        let ids: Vec<(String, &str)> = cases
            .iter()
            .map(|c| (c.binary.id(), c.name.as_str()))
            .collect();
        let refs: Vec<(&str, &str)> = ids.iter().map(|(b, n)| (b.as_str(), *n)).collect();
        let shards = self.shards(&refs);
        cases
            .into_iter()
            .zip(shards)
            .filter(|(_, s)| *s == self.shard)
            .collect()
    }

    /// The shard (1-based) of each test in `tests`, given as `(binary id, test name)`
    /// in list order (sorted by binary, then name).
    pub fn shards(&self, tests: &[(&str, &str)]) -> Vec<u64> {
        let n = self.total;
        match self.kind {
            PartitionKind::Hash => tests
                .iter()
                .map(|(_, name)| xxh64(name.as_bytes(), 0) % n + 1)
                .collect(),
            PartitionKind::Slice => (0..tests.len() as u64).map(|i| i % n + 1).collect(),
            PartitionKind::Count => {
                let mut out = Vec::with_capacity(tests.len());
                let mut index = 0;
                for (i, (binary, _)) in tests.iter().enumerate() {
                    if i > 0 && tests[i - 1].0 != *binary {
                        index = 0;
                    }
                    out.push(index % n + 1);
                    index += 1;
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("hash:1/2", PartitionKind::Hash, 1, 2)]
    #[test_case("hash:1/1", PartitionKind::Hash, 1, 1)]
    #[test_case("slice:3/3", PartitionKind::Slice, 3, 3)]
    #[test_case("count:99/200", PartitionKind::Count, 99, 200)]
    fn parses(input: &str, kind: PartitionKind, shard: u64, total: u64) {
        let p: Partition = input.parse().unwrap();
        assert_eq!(p, Partition { kind, shard, total });
        assert_eq!(p.to_string(), input);
    }

    #[test_case("foo")]
    #[test_case("hash")]
    #[test_case("hash:")]
    #[test_case("hash:1")]
    #[test_case("hash:1/")]
    #[test_case("hash:0/2")]
    #[test_case("hash:3/2")]
    #[test_case("hash:m/2")]
    #[test_case("hash:1/n")]
    #[test_case("hash:1/2/3")]
    #[test_case("slice:0/0")]
    #[test_case("modulo:1/2")]
    fn rejects(input: &str) {
        let e = input.parse::<Partition>().unwrap_err();
        assert!(e.to_string().contains("hint:"), "{e}");
    }

    const TESTS: [(&str, &str); 6] = [
        ("a::t", "one"),
        ("a::t", "two"),
        ("b::t", "one"),
        ("b::t", "two"),
        ("c::t", "one"),
        ("c::t", "two"),
    ];

    #[test]
    fn slices_round_robin_across_binaries() {
        // nextest's documented table: 2 and 3 slices over three binaries of two tests.
        let two: Partition = "slice:1/2".parse().unwrap();
        assert_eq!(two.shards(&TESTS), [1, 2, 1, 2, 1, 2]);
        let three: Partition = "slice:1/3".parse().unwrap();
        assert_eq!(three.shards(&TESTS), [1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn counts_restart_in_each_binary() {
        let three: Partition = "count:1/3".parse().unwrap();
        assert_eq!(three.shards(&TESTS), [1, 2, 1, 2, 1, 2]);
    }

    #[test]
    fn hashes_the_name_with_xxh64() {
        // Pinned values: nextest 0.9 fixes the hash to xxh64 with seed 0.
        assert_eq!(xxh64(b"", 0), 0xef46db3751d8e999);
        let p: Partition = "hash:1/7".parse().unwrap();
        let shards = p.shards(&[("x", "mlp_adamw")]);
        assert_eq!(shards, [xxh64(b"mlp_adamw", 0) % 7 + 1]);
        // Same name, same shard, whatever the binary.
        assert_eq!(p.shards(&TESTS)[0], p.shards(&TESTS)[2]);
    }

    fn cases(tests: &[(&str, &str, bool)]) -> Vec<TestCase> {
        tests
            .iter()
            .map(|(target, name, ignored)| TestCase {
                binary: std::sync::Arc::new(crate::case::Binary {
                    package: "p".into(),
                    target: (*target).into(),
                    path: "/x".into(),
                    package_dir: "/".into(),
                    package_version: "0.1.0".into(),
                }),
                name: (*name).into(),
                ignored: *ignored,
                include_ignored: false,
            })
            .collect()
    }

    #[test_case("slice:1/2", &["a::one", "a::two", "b::two"]; "slice")]
    #[test_case("slice:2/2", &["a::three", "b::one"]; "slice, second shard")]
    #[test_case("count:1/2", &["a::one", "a::two", "b::one"]; "count")]
    #[test_case("count:2/2", &["a::three", "b::two"]; "count, second shard")]
    fn ignored_tests_are_dropped_before_dealing(partition: &str, expected: &[&str]) {
        // nextest drops ignored tests first: `slow` takes no place in the round-robin.
        let tests = cases(&[
            ("a", "one", false),
            ("a", "slow", true),
            ("a", "three", false),
            ("a", "two", false),
            ("b", "one", false),
            ("b", "slow", true),
            ("b", "two", false),
        ]);
        let p: Partition = partition.parse().unwrap();
        let got: Vec<String> = p
            .this_shard(tests)
            .iter()
            .map(|(c, s)| {
                assert_eq!(*s, p.shard);
                format!("{}::{}", c.binary.target, c.name)
            })
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn every_kind_covers_each_test_exactly_once() {
        for kind in ["hash", "slice", "count"] {
            for n in 1..=4u64 {
                let mut hits = vec![0; TESTS.len()];
                for m in 1..=n {
                    let p: Partition = format!("{kind}:{m}/{n}").parse().unwrap();
                    for (i, shard) in p.shards(&TESTS).into_iter().enumerate() {
                        hits[i] += (shard == m) as u32;
                    }
                }
                assert!(hits.iter().all(|&h| h == 1), "{kind} /{n}: {hits:?}");
            }
        }
    }
}
