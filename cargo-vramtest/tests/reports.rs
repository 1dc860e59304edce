//! The machine-readable reports of a failing run on a copy of `fixtures/candle-mlp`:
//! JSON lines, JUnit XML, the markdown PR comment, and GitHub Actions annotations and
//! job summary.

mod common;

use common::{Fixture, assert_code};
use serde_json::Value;

#[test]
#[ignore = "slow, builds candle: cargo test -p cargo-vramtest --test reports -- --ignored"]
fn json_junit_markdown_and_github() {
    let f = Fixture::candle_mlp("reports");
    let ran = f.run(&[], &[("VRAMTEST_UPDATE", "always")]);
    assert_code(&ran, 0);

    let out = f.dir.join("out");
    let junit = out.join("junit.xml");
    let markdown = out.join("report.md");
    let summary = out.join("step-summary.md");
    let ran = f.run(
        &[
            "--message-format",
            "json",
            "--junit",
            junit.to_str().unwrap(),
            "--markdown",
            markdown.to_str().unwrap(),
        ],
        &[
            ("CANDLE_MLP_BLOAT", "activations"),
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()),
        ],
    );
    assert_code(&ran, 1);

    // JSON: one object per line, each test's report then a summary.
    let lines: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 3, "{}", ran.text());
    for l in &lines {
        assert_eq!(l["format_version"], 1);
    }
    assert_eq!(lines[0]["name"], "candle-mlp::vram::mlp_adamw");
    assert_eq!(lines[0]["status"], "regressed");
    assert!(
        lines[0]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["subject"] == "activations" && c["movement"] == "regressed")
    );
    assert!(
        lines[0]["diff"]
            .as_str()
            .unwrap()
            .contains("\"activations\"")
    );
    assert_eq!(lines[2]["type"], "summary");
    assert_eq!(lines[2]["counts"]["regressed"], 2);
    assert_eq!(lines[2]["exit_code"], 1);

    // JUnit: well-formed XML, one failing case per test.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 2);
    assert!(
        cases
            .iter()
            .all(|c| c.children().any(|n| n.has_tag_name("failure")))
    );
    assert_eq!(cases[0].attribute("classname"), Some("candle-mlp::vram"));

    // Markdown: the hidden marker, the table, a collapsible diff per failure.
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(md.starts_with("<!-- cargo-vramtest-report -->\n"), "{md}");
    assert!(
        md.contains("| Test | Peak | Change | Worst category | Status |"),
        "{md}"
    );
    assert!(md.contains("| `candle-mlp::vram::mlp_adamw` |"), "{md}");
    assert_eq!(md.matches("<details>").count(), 2, "{md}");
    assert!(md.contains("```diff\n"), "{md}");

    // GitHub: the job summary gets the markdown; annotations point at each test's
    // line (on stderr, since stdout holds JSON).
    let step = std::fs::read_to_string(&summary).unwrap();
    assert!(step.contains(&md), "{step}");
    let source = std::fs::read_to_string(f.dir.join("tests/vram.rs")).unwrap();
    let line = source
        .lines()
        .position(|l| l.contains("fn mlp_adamw"))
        .unwrap();
    let annotation = ran
        .stderr
        .lines()
        .find(|l| l.starts_with("::error file=tests/vram.rs,") && l.contains("mlp_adamw"))
        .unwrap_or_else(|| panic!("no annotation in {}", ran.text()));
    let line_prop = format!(",line={},", line + 1);
    let attr_line = format!(",line={},", line);
    assert!(
        annotation.contains(&line_prop) || annotation.contains(&attr_line),
        "the fn (or its attribute) line: {annotation}"
    );
    assert!(annotation.contains("title=candle-mlp%3A%3Avram%3A%3Amlp_adamw%3A regressed::"));
    assert!(annotation.contains("activations"));
    assert!(!annotation.contains('\n'));
}
