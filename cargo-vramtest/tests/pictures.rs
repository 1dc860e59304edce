//! The pictures of a failing run, on a copy of `fixtures/candle-mlp` whose forward pass
//! keeps a 4× wider hidden layer: a timeline SVG per test (`show --svg`), a
//! self-contained HTML report that a headless browser renders, and a Mermaid chart of
//! old against new in the markdown report.

mod common;
#[path = "../../vramtest-chart/tests/support/headless.rs"]
mod headless;

use common::{Fixture, assert_code};
use std::path::{Path, PathBuf};

#[test]
#[ignore = "slow, builds candle: cargo test -p cargo-vramtest --test pictures -- --ignored"]
fn a_failing_run_draws_timelines_an_html_report_and_a_mermaid_chart() {
    let f = Fixture::candle_mlp("pictures");
    assert_code(&f.run(&[], &[("VRAMTEST_UPDATE", "always")]), 0);
    let out = f.dir.join("out");
    let html = out.join("report.html");
    let markdown = out.join("report.md");
    let ran = f.run(
        &[
            "--html",
            html.to_str().unwrap(),
            "--markdown",
            markdown.to_str().unwrap(),
        ],
        &[("CANDLE_MLP_BLOAT", "activations")],
    );
    assert_code(&ran, 1);

    // The PR comment: a Mermaid chart per failing test.
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(md.contains("```mermaid\nxychart-beta"), "{md}");
    assert!(md.contains("\"activations\""), "{md}");

    // A timeline per test, drawn from the run that just failed.
    for test in ["mlp_adamw", "mlp_sgd"] {
        let svg = out.join(format!("{test}.svg"));
        let shown = f.run(&["show", test, "--svg", svg.to_str().unwrap()], &[]);
        assert_code(&shown, 0);
        let text = std::fs::read_to_string(&svg).unwrap();
        let doc = roxmltree::Document::parse(&text).expect("the SVG is valid XML");
        let series: Vec<&str> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("series"))
            .filter_map(|n| n.attribute("data-category"))
            .collect();
        for category in ["parameters", "activations", "inputs", "temporaries"] {
            assert_eq!(
                series.iter().filter(|s| **s == category).count(),
                1,
                "one {category} series in {test}: {series:?}"
            );
        }
        assert!(text.contains("peak "), "the peak is labelled in {test}");
        // The sparkline of the same timeline in the terminal.
        assert!(
            shown.stdout.contains("live total over the step"),
            "{}",
            shown.text()
        );
    }

    // The HTML report: both timelines inline, nothing that runs or loads.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.matches("<svg").count() >= 2, "a timeline per test");
    assert!(page.contains("candle-mlp::vram::mlp_adamw"));
    assert!(!page.contains("<script"));
    // Without chromium, find_chromium says what was skipped (or fails, where it is required).
    if let Some(browser) = headless::find_chromium("the browser check of the HTML report") {
        let run = headless::chromium(&browser, &html, "--dump-dom", &out);
        assert_eq!(headless::console_messages(&run.stderr), Vec::<&str>::new());
        let dom = run.stdout;
        assert!(
            dom.contains("<svg"),
            "the browser sees the timelines:\n{dom}"
        );
        assert!(dom.contains("mlp_adamw"), "{dom}");
    }

    // Without a recorded run there is nothing to draw: exit 2 with a hint.
    let other = Fixture::candle_mlp("pictures-none");
    std::fs::create_dir_all(other.snapshots()).unwrap();
    std::fs::copy(
        f.snapshots().join("vram__mlp_sgd@cpu.snap"),
        other.snapshots().join("vram__mlp_sgd@cpu.snap"),
    )
    .unwrap();
    let target = common::shared_target().join("vramtest").join("timelines");
    let before: Vec<PathBuf> = list(&target);
    let none = other.run(
        &[
            "show",
            "mlp_sgd",
            "--svg",
            out.join("none.svg").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(list(&target), before, "show records nothing");
    assert_code(&none, 2);
    assert!(none.stderr.contains("run it first"), "{}", none.text());
}

fn list(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The book's timeline picture (`fixtures/candle-mlp/timeline.svg`, on its Pictures
/// page; drawn by `cargo vramtest show mlp_adamw --svg`) still shows what the tool draws for the fixture today: the
/// same title, axis, phase and iteration labels, legend and peak label, their figures
/// left out (labels are compared, not the drawing). (Event order between threads may
/// vary from run to run, so the shapes are not compared point by point.) To refresh it: run the README's first command, then
/// `cargo run -p cargo-vramtest -- vramtest show mlp_adamw --manifest-path
/// fixtures/candle-mlp/Cargo.toml --svg fixtures/candle-mlp/timeline.svg`.
#[test]
#[ignore = "slow, builds candle: cargo test -p cargo-vramtest --test pictures -- --ignored"]
fn the_readme_picture_is_up_to_date() {
    let committed = common::repo().join("fixtures/candle-mlp/timeline.svg");
    let committed = std::fs::read_to_string(&committed).expect("the README's picture");
    let f = Fixture::candle_mlp("readme-picture");
    assert_code(&f.run(&[], &[("VRAMTEST_UPDATE", "always")]), 0);
    let fresh = f.dir.join("timeline.svg");
    assert_code(
        &f.run(
            &["show", "mlp_adamw", "--svg", fresh.to_str().unwrap()],
            &[],
        ),
        0,
    );
    let fresh = std::fs::read_to_string(&fresh).unwrap();
    assert_eq!(
        without_figures(&labels(&committed)),
        without_figures(&labels(&fresh)),
        "fixtures/candle-mlp/timeline.svg is out of date (see this test's doc comment to refresh it)"
    );
}

/// Every text of an SVG, sorted.
fn labels(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("valid XML");
    let mut v: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.descendants().filter_map(|t| t.text()).collect::<String>())
        .collect();
    v.sort();
    v
}

/// The distinct labels with every figure replaced by `#` (`peak 34.96 MiB` → `peak #.#
/// MiB`).
fn without_figures(labels: &[String]) -> std::collections::BTreeSet<String> {
    labels
        .iter()
        .map(|l| {
            let mut out = String::new();
            for c in l.chars() {
                if c.is_ascii_digit() {
                    if !out.ends_with('#') {
                        out.push('#');
                    }
                } else {
                    out.push(c);
                }
            }
            out
        })
        .collect()
}
