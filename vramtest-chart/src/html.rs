//! One self-contained HTML page for a whole run: inline CSS and SVG, no script, and a
//! Content-Security-Policy that forbids loading anything, so it opens the same from a
//! downloaded CI artifact as from the target directory.

use crate::color::category_color;
use crate::markup::escape;
use crate::svg::{SvgOptions, svg};
use crate::timeline::Timeline;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use vramtest_model::{Category, CategoryBytes, HumanBytes, HumanDelta};

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestEnd {
    /// All limits held.
    Passed,
    /// A limit was broken, or the test did not run to its end.
    Failed,
    /// No snapshot yet; one was (or would be) written.
    New,
    /// The snapshot was rewritten with the new result.
    Updated,
    /// Not run here (for example a CUDA test without a driver).
    Ignored,
}

impl TestEnd {
    /// The lower-case word shown in the report (also its CSS class).
    pub fn as_str(self) -> &'static str {
        match self {
            TestEnd::Passed => "passed",
            TestEnd::Failed => "failed",
            TestEnd::New => "new",
            TestEnd::Updated => "updated",
            TestEnd::Ignored => "ignored",
        }
    }
}

/// One test of a run, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestEntry {
    /// The test's name as the harness lists it.
    pub name: String,
    /// How it ended.
    pub status: TestEnd,
    /// The snapshot's breakdown at the peak (`None`: no snapshot).
    pub old: Option<CategoryBytes>,
    /// This run's breakdown at the peak (`None`: not measured).
    pub new: Option<CategoryBytes>,
    /// The snapshot's peak, in bytes.
    pub peak_old: Option<u64>,
    /// This run's peak, in bytes.
    pub peak_new: Option<u64>,
    /// The snapshot's CPU-only memory (measured apart from the categories and the
    /// peak), in bytes, where it has the figure.
    #[serde(default)]
    pub cpu_only_old: Option<u64>,
    /// This run's CPU-only memory, in bytes (CPU runs).
    #[serde(default)]
    pub cpu_only_new: Option<u64>,
    /// The failure diff, as the terminal shows it (lines starting `-`/`+` are colored).
    pub diff: Option<String>,
    /// Pre-rendered text of the scaling fit, where the test has one.
    pub fit: Option<String>,
    /// Pre-rendered hints, where the test has them.
    pub hints: Option<String>,
    /// Live bytes per category over the step, where the run kept them.
    pub timeline: Option<Timeline>,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtmlReport {
    /// The page title (for example `cargo vramtest: my-crate`).
    pub title: String,
    /// One entry per test, in the order of the run.
    pub tests: Vec<TestEntry>,
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;max-width:1120px;margin:1.5em auto;padding:0 1em;line-height:1.4}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-top:1px solid #ddd;padding-top:1em}h3{font-size:1em;margin-bottom:.3em}
table{border-collapse:collapse;margin:.5em 0}
th,td{padding:3px 10px;text-align:left;border-bottom:1px solid #e4e4e4;vertical-align:middle}
th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.status{display:inline-block;font-size:.85em;font-weight:bold;padding:0 .5em;border-radius:3px;color:#fff}
.status.passed{background:#2e7d32}.status.failed{background:#c62828}.status.new{background:#1565c0}.status.updated{background:#6a1b9a}.status.ignored{background:#757575}
.swatch{display:inline-block;width:.8em;height:.8em;margin-right:.4em;vertical-align:-1px}
td.bars{width:300px;min-width:200px}
.bar{height:7px;margin:2px 0;min-width:1px}
.bar.old{opacity:.4}
.legend{font-size:.85em;color:#555}
figure{margin:.5em 0;overflow-x:auto}
pre{background:#f6f8fa;padding:.8em;overflow:auto;font-size:.85em}
pre.diff .del{color:#82071e;background:#ffebe9}pre.diff .add{color:#116329;background:#dafbe1}
p.none{color:#777;font-style:italic}
";

/// The page for `report`. Deterministic: the same report gives the same bytes.
pub fn html_report(report: &HtmlReport) -> String {
    let title = escape(&report.title);
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>{title}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    summary(&mut s, &report.tests);
    for (i, test) in report.tests.iter().enumerate() {
        section(&mut s, i, test);
    }
    s.push_str("</body>\n</html>\n");
    s
}

fn summary(s: &mut String, tests: &[TestEntry]) {
    let counts: Vec<String> = [
        TestEnd::Failed,
        TestEnd::New,
        TestEnd::Updated,
        TestEnd::Passed,
        TestEnd::Ignored,
    ]
    .into_iter()
    .filter_map(|status| {
        let n = tests.iter().filter(|t| t.status == status).count();
        (n > 0).then(|| format!("{n} {}", status.as_str()))
    })
    .collect();
    let _ = writeln!(
        s,
        "<p class=\"counts\">{} test{}{}{}</p>",
        tests.len(),
        if tests.len() == 1 { "" } else { "s" },
        if counts.is_empty() { "" } else { ": " },
        counts.join(", ")
    );
    if tests.is_empty() {
        return;
    }
    s.push_str(
        "<table class=\"summary\">\n<tr><th>Test</th><th>Status</th><th>Snapshot peak</th><th>This run</th><th>Change</th></tr>\n",
    );
    for (i, t) in tests.iter().enumerate() {
        let _ = writeln!(
            s,
            "<tr><td><a href=\"#test-{i}\">{name}</a></td><td><span class=\"status {status}\">{status}</span></td><td class=\"num\">{old}</td><td class=\"num\">{new}</td><td class=\"num\">{change}</td></tr>",
            name = escape(&t.name),
            status = t.status.as_str(),
            old = bytes_or_dash(t.peak_old),
            new = bytes_or_dash(t.peak_new),
            change = change(t.peak_old, t.peak_new),
        );
    }
    s.push_str("</table>\n");
}

fn section(s: &mut String, index: usize, t: &TestEntry) {
    let name = escape(&t.name);
    let _ = writeln!(
        s,
        "<section class=\"test {status}\" id=\"test-{index}\">\n<h2><span class=\"status {status}\">{status}</span> {name}</h2>",
        status = t.status.as_str(),
    );
    match &t.timeline {
        Some(timeline) => {
            // The heading above already names the test.
            let picture = svg(timeline, &SvgOptions::default());
            let _ = write!(s, "<figure class=\"timeline\">\n{picture}</figure>\n");
        }
        None => s.push_str("<p class=\"none\">No timeline recorded for this test.</p>\n"),
    }
    categories(s, t.old.as_ref(), t.new.as_ref());
    cpu_only(s, t.cpu_only_old, t.cpu_only_new);
    for (heading, class, text) in [
        ("Diff", "diff", &t.diff),
        ("Fit", "fit", &t.fit),
        ("Hints", "hints", &t.hints),
    ] {
        let Some(text) = text else { continue };
        let _ = write!(s, "<h3>{heading}</h3>\n<pre class=\"{class}\">");
        if class == "diff" {
            for line in text.lines() {
                let escaped = escape(line);
                match line.chars().next() {
                    Some('-') => {
                        let _ = writeln!(s, "<span class=\"del\">{escaped}</span>");
                    }
                    Some('+') => {
                        let _ = writeln!(s, "<span class=\"add\">{escaped}</span>");
                    }
                    _ => {
                        let _ = writeln!(s, "{escaped}");
                    }
                }
            }
        } else {
            s.push_str(&escape(text));
        }
        s.push_str("</pre>\n");
    }
    s.push_str("</section>\n");
}

/// CPU-only memory, which is in no category and not in the peak: one line, where
/// either side has it.
fn cpu_only(s: &mut String, old: Option<u64>, new: Option<u64>) {
    if old.is_none() && new.is_none() {
        return;
    }
    let _ = writeln!(
        s,
        "<p class=\"cpu-only\">CPU-only memory (gemm's packing buffers and the like, measured apart: not in the categories, the peak or the CUDA prediction): snapshot {}, this run {}, change {}</p>",
        bytes_or_dash(old),
        bytes_or_dash(new),
        change(old, new),
    );
}

/// Old against new per category, with a pair of bars on one scale.
fn categories(s: &mut String, old: Option<&CategoryBytes>, new: Option<&CategoryBytes>) {
    let value = |side: Option<&CategoryBytes>, c: Category| side.map(|b| b[c]);
    let rows: Vec<Category> = Category::ALL
        .into_iter()
        .filter(|&c| value(old, c).unwrap_or(0) > 0 || value(new, c).unwrap_or(0) > 0)
        .collect();
    if rows.is_empty() {
        return;
    }
    let max = rows
        .iter()
        .flat_map(|&c| [value(old, c).unwrap_or(0), value(new, c).unwrap_or(0)])
        .max()
        .unwrap_or(1)
        .max(1);
    s.push_str(
        "<h3>At the peak, per category</h3>\n<table class=\"categories\">\n<tr><th>Category</th><th>Snapshot</th><th>This run</th><th>Change</th><th class=\"legend\">faint: snapshot, full: this run</th></tr>\n",
    );
    for c in rows {
        let color = category_color(c);
        let (o, n) = (value(old, c), value(new, c));
        let bar = |side: &str, v: Option<u64>| match v {
            Some(v) => format!(
                "<div class=\"bar {side}\" style=\"width:{:.1}%;background:{color}\"></div>",
                v as f64 * 100.0 / max as f64
            ),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "<tr><td><span class=\"swatch\" style=\"background:{color}\"></span>{c}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"bars\">{}{}</td></tr>",
            bytes_or_dash(o),
            bytes_or_dash(n),
            change(o, n),
            bar("old", o),
            bar("new", n),
        );
    }
    s.push_str("</table>\n");
}

fn bytes_or_dash(v: Option<u64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| HumanBytes(v).to_string())
}

/// `+1.00 MiB (+12.5%)`, `0 B`, or a dash when a side is missing.
fn change(old: Option<u64>, new: Option<u64>) -> String {
    match (old, new) {
        (Some(o), Some(n)) if o == n => "0 B".to_owned(),
        (Some(o), Some(n)) => {
            let delta = HumanDelta(i128::from(n) - i128::from(o));
            if o == 0 {
                delta.to_string()
            } else {
                let pct = (n as f64 - o as f64) * 100.0 / o as f64;
                format!("{delta} ({pct:+.1}%)")
            }
        }
        _ => "–".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case(Some(100), Some(100), "0 B")]
    #[test_case(Some(1 << 20), Some(3 << 19), "+512.00 KiB (+50.0%)")]
    #[test_case(Some(2048), Some(1024), "-1.00 KiB (-50.0%)")]
    #[test_case(Some(0), Some(10), "+10 B")]
    #[test_case(None, Some(10), "–")]
    fn changes(old: Option<u64>, new: Option<u64>, expected: &str) {
        assert_eq!(change(old, new), expected);
    }
}
