//! Progress while a sweep runs, as a CI log shows it (stderr is no terminal): a
//! `PROGRESS` line at the first point and at every tenth of the points, counting the
//! sweep's points; nothing of it on stdout. Timing (the 30-second line, a slow point)
//! is tested with an injected clock in `src/progress/tracker.rs`.

mod common;

use common::{Fixture, assert_code};

#[test]
fn a_sweep_says_its_points_done_out_of_the_total() {
    let f = Fixture::vec_model("progress");
    // `transformer_like`: axes(batch = [1, 2], seq = [4, 8, 12], layers = [1, 2, 3]).
    let points: u64 = 2 * 3 * 3;
    let ran = f.run(
        &[
            "--test",
            "axes",
            "--run-ignored",
            "only",
            "--exact",
            "axes::transformer_like",
            "--message-format",
            "json",
        ],
        &[],
    );
    assert_code(&ran, 1); // a new result, pending
    let counts: Vec<(u64, u64)> = ran
        .stderr
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("PROGRESS ["))
        .map(|l| {
            let (_, rest) = l.split_once("] ").unwrap();
            let (done, rest) = rest.split_once('/').unwrap();
            let total = rest.split_once(' ').unwrap().0;
            (done.parse().unwrap(), total.parse().unwrap())
        })
        .collect();
    assert!(
        counts.iter().all(|&(_, total)| total == points),
        "every line counts the sweep's {points} points: {}",
        ran.text()
    );
    // The first point, then each tenth crossed: the smallest count that reaches it.
    let mut expected = vec![1];
    for tenth in 1..=10 {
        let first = (1..=points).find(|d| d * 10 / points >= tenth).unwrap();
        if expected.last() != Some(&first) {
            expected.push(first);
        }
    }
    let mut said: Vec<u64> = counts.iter().map(|&(done, _)| done).collect();
    said.dedup(); // a 30-second line repeats a count on a slow machine
    assert_eq!(said, expected, "{}", ran.text());
    assert!(
        ran.stderr.contains(&format!("{points}/{points} points")),
        "{}",
        ran.text()
    );
    // stdout is JSON lines only.
    for line in ran.stdout.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}\n{}", ran.text()));
        assert!(v["type"].is_string(), "{line}");
    }
}
