//! `--partition`: shards 1/2 and 2/2 together cover every test that is not ignored
//! exactly once, for `list` and for `run`; ignored tests are dropped first, as nextest
//! does.

mod common;

use common::{Fixture, assert_code};
use serde_json::Value;
use std::collections::BTreeSet;

fn names(stdout: &str, kind: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == kind)
        .map(|v| v["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn shards_cover_every_test_once() {
    let f = Fixture::abort_crate("partition");
    let all = f.run(&["list", "--message-format", "json"], &[]);
    assert_code(&all, 0);
    assert_eq!(names(&all.stdout, "list").len(), 4, "{}", all.text());
    let all: BTreeSet<String> = all
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["ignored"] == false)
        .map(|v| v["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(all.len(), 3, "{all:?}");

    for kind in ["hash", "slice", "count"] {
        let mut seen = Vec::new();
        for m in 1..=2 {
            let p = format!("{kind}:{m}/2");
            let ran = f.run(
                &["list", "--message-format", "json", "--partition", &p],
                &[],
            );
            assert_code(&ran, 0);
            for line in ran.stdout.lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                assert_eq!(v["shard"], m, "{line}");
            }
            seen.extend(names(&ran.stdout, "list"));
        }
        let unique: BTreeSet<String> = seen.iter().cloned().collect();
        assert_eq!(seen.len(), all.len(), "{kind}: {seen:?}");
        assert_eq!(unique, all, "{kind}");
    }

    // The human list shows the shard; slice:1/2 of the three sorted tests that are not
    // ignored is the 1st and 3rd.
    let ran = f.run(&["list", "--partition", "slice:1/2"], &[]);
    assert_code(&ran, 0);
    assert!(ran.stdout.contains("SHARD"), "{}", ran.text());
    assert!(
        ran.stdout.contains("2 tests in partition slice:1/2"),
        "{}",
        ran.text()
    );

    // `run` runs exactly its shard.
    let listed = f.run(
        &[
            "list",
            "--message-format",
            "json",
            "--partition",
            "hash:2/2",
        ],
        &[],
    );
    let ran = f.run(
        &["--message-format", "json", "--partition", "hash:2/2"],
        &[],
    );
    assert_eq!(
        names(&ran.stdout, "test"),
        names(&listed.stdout, "list"),
        "{}",
        ran.text()
    );
}
