//! Golden outputs: the HTML report, the Mermaid chart and the terminal pictures. The
//! snapshots under `tests/snapshots` change only through review (`cargo insta review`
//! or by editing them); CI never writes them.

mod common;

use common::*;
use vramtest_chart::{bars, html_report, mermaid_xychart, sparkline};
use vramtest_model::Category;

#[test]
fn html_report_of_a_run_with_a_failure() {
    insta::assert_snapshot!("html_report", html_report(&example_report()));
}

#[test]
fn mermaid_chart_of_a_failure() {
    let report = example_report();
    let failed = &report.tests[1];
    let chart = mermaid_xychart(
        "mlp_step_bloated",
        failed.old.as_ref().unwrap(),
        failed.new.as_ref().unwrap(),
    );
    insta::assert_snapshot!("mermaid_failure", chart);
}

#[test]
fn terminal_pictures() {
    let timeline = training_timeline();
    let totals: Vec<u64> = training_step().samples.iter().map(|p| p.total()).collect();
    let text = format!(
        "{}\n{}\n\n{}\n{}\n",
        bars(&timeline.peak.live, 24, true),
        sparkline(&totals, 40, true),
        bars(&timeline.peak.live, 24, false),
        sparkline(&totals, 40, false),
    );
    insta::assert_snapshot!("terminal", text);
}

#[test]
fn markup_in_names_and_diffs_is_escaped() {
    let html = html_report(&example_report());
    assert!(
        !html.to_lowercase().contains("<script"),
        "a raw script tag got through"
    );
    assert!(html.contains("mlp_step_bloated &lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("+&lt;script&gt;alert(&#39;diff&#39;)&lt;/script&gt; &amp; more"));
}

#[test]
fn the_page_loads_nothing_from_anywhere() {
    let html = html_report(&example_report());
    // The only URL is the SVG namespace name, which is never fetched.
    let urls = html.matches("http://").count() + html.matches("https://").count();
    let namespaces = html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
    assert_eq!(urls, namespaces);
    assert_eq!(namespaces, 2, "one inline SVG per test with a timeline");
    for forbidden in ["<link", "<img", "<iframe", "src=", "url(", "@import"] {
        assert!(!html.contains(forbidden), "{forbidden}");
    }
    assert!(html.contains("content=\"default-src 'none'; style-src 'unsafe-inline'\""));
}

#[test]
fn mermaid_series_line_up_with_the_categories() {
    let report = example_report();
    let failed = &report.tests[1];
    let chart = mermaid_xychart(
        &failed.name,
        failed.old.as_ref().unwrap(),
        failed.new.as_ref().unwrap(),
    );
    let lines: Vec<&str> = chart.lines().collect();
    assert_eq!(lines[0], "```mermaid");
    assert_eq!(lines[1], "xychart-beta");
    assert_eq!(*lines.last().unwrap(), "```");
    let list = |prefix: &str| -> Vec<String> {
        let line = lines
            .iter()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap();
        let inner = &line[line.find('[').unwrap() + 1..line.rfind(']').unwrap()];
        inner.split(", ").map(str::to_owned).collect()
    };
    let labels = list("x-axis");
    assert!(
        labels
            .iter()
            .all(|l| l.starts_with('"') && l.ends_with('"'))
    );
    let old = list("bar");
    let new = list("line");
    assert_eq!(labels.len(), old.len());
    assert_eq!(labels.len(), new.len());
    // Activations grew by two 2 MiB activations: 8 -> 12 MiB.
    let at = labels.iter().position(|l| l == "\"activations\"").unwrap();
    assert_eq!(
        old[at],
        format!("{:.2}", (LAYERS * ACTIVATION) as f64 / MIB as f64)
    );
    assert_eq!(
        new[at],
        format!("{:.2}", ((LAYERS + 2) * ACTIVATION) as f64 / MIB as f64)
    );
    // The title keeps its quotes balanced although the name has markup.
    let title = lines[2].trim_start();
    assert_eq!(title.matches('"').count(), 2, "{title}");
    assert!(
        !chart.contains(&Category::Untracked.to_string()),
        "empty categories are left out"
    );
}
