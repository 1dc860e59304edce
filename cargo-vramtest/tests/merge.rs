//! `cargo vramtest merge`, end to end on `fixtures/vec-model`: the tests run once
//! unsharded and once as three `hash` shards; the shards' JSON reports, merged, are the
//! unsharded run's (tests, verdicts, figures) apart from timings, and the merged
//! markdown and JUnit list every test once. A shard with a failing test makes the merge
//! exit 1 and the PR comment show the failure; a missing, truncated or doubled shard,
//! or one of another report schema, is an error naming the file.

mod common;

use common::{Fixture, Ran, assert_code};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SHARDS: u64 = 3;

/// The JSON lines of a run's stdout.
fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A line without its timing.
fn untimed(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("duration_secs");
    v
}

/// Runs shard `m` of `hash:M/3` and keeps its JSON report in `<dir>/shard-M.jsonl`.
fn run_shard(f: &Fixture, dir: &Path, m: u64, envs: &[(&str, &str)]) -> (PathBuf, Ran) {
    let partition = format!("hash:{m}/{SHARDS}");
    let ran = f.run(
        &["--message-format", "json", "--partition", &partition],
        envs,
    );
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("shard-{m}.jsonl"));
    std::fs::write(&path, &ran.stdout).unwrap();
    (path, ran)
}

fn merge(f: &Fixture, files: &[&Path], extra: &[&str]) -> Ran {
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(files.iter().map(|p| p.to_str().unwrap()));
    args.extend(extra);
    f.run(&args, &[])
}

/// The names of the table rows of a markdown report, in order.
fn markdown_rows(markdown: &str) -> Vec<String> {
    markdown
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l.split('`').next().unwrap().to_owned())
        .collect()
}

/// `classname::name` of every JUnit test case.
fn junit_cases(xml: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(xml).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| {
            format!(
                "{}::{}",
                n.attribute("classname").unwrap(),
                n.attribute("name").unwrap()
            )
        })
        .collect()
}

#[test]
fn three_hash_shards_merge_into_the_unsharded_run() {
    let f = Fixture::vec_model("merge");
    // Snapshots for every test, then a plain run that compares with them.
    assert_code(&f.run(&[], &[("VRAMTEST_UPDATE", "always")]), 0);
    let whole = f.run(&["--message-format", "json"], &[]);
    assert_code(&whole, 0);
    let whole = lines(&whole.stdout);

    let shards: Vec<PathBuf> = (1..=SHARDS)
        .map(|m| {
            let (path, ran) = run_shard(&f, &f.dir.join("shards"), m, &[]);
            assert_code(&ran, 0);
            path
        })
        .collect();
    let files: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    let out = f.dir.join("out");
    let (md, xml, html) = (out.join("m.md"), out.join("j.xml"), out.join("r.html"));
    let merged = merge(
        &f,
        &files,
        &[
            "--message-format",
            "json",
            "--markdown",
            md.to_str().unwrap(),
            "--junit",
            xml.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert_code(&merged, 0);
    let merged = lines(&merged.stdout);

    // The unsharded run, less its ignored tests (no shard runs them: nextest's rule).
    let (tests, summary) = whole.split_at(whole.len() - 1);
    let ignored: Vec<&Value> = tests.iter().filter(|t| t["status"] == "ignored").collect();
    // vram's `ignored_step`, and `axes`'s seven sweeps over named axes (four with
    // levels) and its batch sweep.
    assert_eq!(ignored.len(), 9, "the fixture has nine ignored tests");
    let expected_tests: Vec<Value> = tests
        .iter()
        .filter(|t| t["status"] != "ignored")
        .cloned()
        .map(untimed)
        .collect();
    assert!(expected_tests.len() >= 4, "{expected_tests:?}");
    let mut expected_summary = untimed(summary[0].clone());
    expected_summary["tests"] = (expected_tests.len()).into();
    expected_summary["counts"]
        .as_object_mut()
        .unwrap()
        .remove("ignored");

    let (got_tests, got_summary) = merged.split_at(merged.len() - 1);
    let got_tests: Vec<Value> = got_tests.iter().cloned().map(untimed).collect();
    assert_eq!(got_tests, expected_tests, "the merged tests are the run's");
    assert_eq!(untimed(got_summary[0].clone()), expected_summary);
    // The figures are really there (a measured body, the snapshot judged against).
    for t in &got_tests {
        assert!(t["body"]["peak_bytes"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(
            t["old_body"], t["body"],
            "passing against its own snapshot: {t}"
        );
    }

    // The markdown and JUnit reports list every test once.
    let names: Vec<String> = expected_tests
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    let markdown = std::fs::read_to_string(&md).unwrap();
    assert_eq!(markdown_rows(&markdown), names, "{markdown}");
    assert!(
        markdown.contains(&format!("✅ {} tests: {} passed", names.len(), names.len())),
        "{markdown}"
    );
    let mut cases = junit_cases(&std::fs::read_to_string(&xml).unwrap());
    cases.sort();
    assert_eq!(cases, names);
    let page = std::fs::read_to_string(&html).unwrap();
    for name in &names {
        assert_eq!(
            page.matches(&format!(">{name}<")).count(),
            1,
            "{name} once in the summary table"
        );
    }

    // The shards cover the run: each test in one of them.
    let mut owner: BTreeMap<String, u64> = BTreeMap::new();
    for (m, path) in (1..=SHARDS).zip(&shards) {
        for t in lines(&std::fs::read_to_string(path).unwrap()) {
            if t["type"] == "test" {
                assert!(
                    owner
                        .insert(t["name"].as_str().unwrap().into(), m)
                        .is_none()
                );
            } else {
                assert_eq!(t["partition"], format!("hash:{m}/{SHARDS}"));
            }
        }
    }
    assert_eq!(owner.keys().cloned().collect::<Vec<_>>(), names);

    a_failing_shard_fails_the_merge_and_shows_in_the_comment(&f, &shards, &owner);
    broken_shards_are_named(&f, &shards);
}

fn a_failing_shard_fails_the_merge_and_shows_in_the_comment(
    f: &Fixture,
    shards: &[PathBuf],
    owner: &BTreeMap<String, u64>,
) {
    let m = owner["vec-model::vram::fails_on_demand"];
    let (failing, ran) = run_shard(f, &f.dir.join("failing"), m, &[("VEC_MODEL_FAIL", "error")]);
    assert_code(&ran, 1);
    let files: Vec<&Path> = (1..=SHARDS)
        .zip(shards)
        .map(|(k, p)| {
            if k == m {
                failing.as_path()
            } else {
                p.as_path()
            }
        })
        .collect();
    let md = f.dir.join("failing.md");
    let merged = merge(f, &files, &["--markdown", md.to_str().unwrap()]);
    assert_code(&merged, 1);
    assert!(
        merged.stdout.contains("vec-model::vram::fails_on_demand"),
        "{}",
        merged.text()
    );
    let markdown = std::fs::read_to_string(&md).unwrap();
    assert!(markdown.contains("### cargo-vramtest ❌"), "{markdown}");
    assert!(
        markdown.contains("| `vec-model::vram::fails_on_demand` | — | — | — | ❌ failed |"),
        "{markdown}"
    );
    assert!(
        markdown.contains(
            "<summary>❌ <code>vec-model::vram::fails_on_demand</code>: failed</summary>"
        ),
        "{markdown}"
    );
    assert!(markdown.contains("the data loader ran dry"), "{markdown}");
    // The shards that passed are still in it, each once.
    assert_eq!(markdown_rows(&markdown).len(), owner.len(), "{markdown}");

    // The failing shard's test lines edited to passes, its summary left counting the
    // failure: the contradiction is named, the shard is not merged (so it is missing),
    // and no report says the failure passed.
    let text = std::fs::read_to_string(&failing).unwrap();
    let edited = text
        .replace("\"status\":\"failed\"", "\"status\":\"passed\"")
        .replace("\"fails\":true", "\"fails\":false");
    assert_ne!(edited, text);
    let forged = f.dir.join("forged.jsonl");
    std::fs::write(&forged, edited).unwrap();
    let files: Vec<&Path> = files
        .iter()
        .map(|p| if *p == failing { forged.as_path() } else { *p })
        .collect();
    let junit = f.dir.join("forged.xml");
    let merged = merge(f, &files, &["--junit", junit.to_str().unwrap()]);
    assert_code(&merged, 2);
    let named = format!("error: {}: its summary says ", forged.display());
    assert!(merged.stderr.contains(&named), "{}", merged.text());
    assert!(
        merged
            .stderr
            .contains("the report contradicts itself (was it edited?), so it is not merged"),
        "{}",
        merged.text()
    );
    assert!(
        merged
            .stderr
            .contains(&format!("shard hash:{m}/{SHARDS}: no report")),
        "{}",
        merged.text()
    );
    assert!(
        !merged.stdout.contains("fails_on_demand"),
        "the forged pass was merged:\n{}",
        merged.text()
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(!xml.contains("fails_on_demand"), "{xml}");
}

fn broken_shards_are_named(f: &Fixture, shards: &[PathBuf]) {
    let md = f.dir.join("broken.md");
    let md_arg = md.to_str().unwrap();

    // A shard's report cut short: named, the others merged, exit 2.
    let text = std::fs::read_to_string(&shards[0]).unwrap();
    let cut = f.dir.join("cut.jsonl");
    std::fs::write(&cut, &text[..text.len() - 10]).unwrap();
    let ran = merge(f, &[&cut, &shards[1], &shards[2]], &["--markdown", md_arg]);
    assert_code(&ran, 2);
    let named = format!("error: {}: truncated", cut.display());
    assert!(ran.stderr.contains(&named), "{}", ran.text());
    // Shard 1 is then missing too, and the comment says so.
    assert!(
        ran.stderr.contains("shard hash:1/3: no report"),
        "{}",
        ran.text()
    );
    let markdown = std::fs::read_to_string(&md).unwrap();
    assert!(markdown.contains("> [!WARNING]"), "{markdown}");
    assert!(markdown.contains("shard hash:1/3: no report"), "{markdown}");
    assert!(markdown.contains("### cargo-vramtest ❌"), "{markdown}");

    // A file that is not there.
    let gone = f.dir.join("gone.jsonl");
    let ran = merge(f, &[&gone, &shards[1], &shards[2]], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr
            .contains(&format!("error: {}: no such file", gone.display())),
        "{}",
        ran.text()
    );

    // A shard written by another release, of another report schema: named with both
    // schemas, the others merged, exit 2.
    let (k, text) = shards
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .enumerate()
        .find(|(_, t)| t.contains("\"schema\":1,\"target\""))
        .expect("a shard with a test");
    let other = f.dir.join("other-schema.jsonl");
    let newer = text.replacen("\"schema\":1,\"target\"", "\"schema\":2,\"target\"", 1);
    std::fs::write(&other, newer).unwrap();
    let mut files: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    files[k] = &other;
    let ran = merge(f, &files, &[]);
    assert_code(&ran, 2);
    let named = format!(
        "error: {}: line 1 is a test report of schema 2, and this release reads schema 1 only",
        other.display()
    );
    assert!(ran.stderr.contains(&named), "{}", ran.text());

    // One shard twice: nothing to merge, no report written.
    std::fs::remove_file(&md).unwrap();
    let copy = f.dir.join("copy.jsonl");
    std::fs::copy(&shards[1], &copy).unwrap();
    let ran = merge(
        f,
        &[&shards[0], &shards[1], &copy, &shards[2]],
        &["--markdown", md_arg],
    );
    assert_code(&ran, 2);
    let both = format!(
        "error: cannot merge the shards: {} and {} are both shard hash:2/3",
        shards[1].display(),
        copy.display()
    );
    assert!(ran.stderr.contains(&both), "{}", ran.text());
    assert!(
        !md.exists(),
        "no report from shards that contradict each other"
    );
}
