//! The terminal report: one table for the run, one block per failure, a summary line;
//! and `show`'s per-category and per-phase tables of one snapshot. Text carries ANSI
//! styles; `anstream` strips them where color is off.

use super::{Row, RunView, Sink, status_style};
use crate::case::Outcome;
use anstyle::{AnsiColor, Style};
use std::fmt::Write as _;
use std::path::Path;
use vramtest_model::snapshot::Parsed;
use vramtest_model::{HumanBytes, HumanDelta};

/// A cell: its text and its style.
type Cell = (String, Style);

/// Lays out a table: a bold header, columns padded to their widest cell, numeric
/// columns (`right[i]`) aligned right.
pub fn grid(headers: &[&str], rows: &[Vec<Cell>], right: &[bool]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = headers.iter().map(|h| width(h)).collect();
    for row in rows {
        for (i, (text, _)) in row.iter().enumerate() {
            widths[i] = widths[i].max(width(text));
        }
    }
    let bold = Style::new().bold();
    let header: Vec<Cell> = headers.iter().map(|h| (h.to_string(), bold)).collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (text, style)) in row.iter().enumerate() {
            let pad = " ".repeat(widths[i] - width(text));
            let last = i + 1 == row.len();
            if right.get(i).copied().unwrap_or(false) {
                let _ = write!(line, "{pad}{style}{text}{style:#}");
            } else if last {
                let _ = write!(line, "{style}{text}{style:#}");
            } else {
                let _ = write!(line, "{style}{text}{style:#}{pad}");
            }
            if !last {
                line.push_str("  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The whole human report of a run, as plain as the terminal gets it off GitHub Actions.
#[cfg(test)]
pub fn render(view: &RunView) -> String {
    render_guarded(view, false)
}

/// The whole human report of a run, as the terminal gets it: under GitHub Actions the
/// failures' blocks (the messages, the diffs, the tests' own output) are printed with
/// workflow commands stopped ([`super::github::inert`]), so an `::error` or
/// `::add-mask::` a test printed is shown, not run.
pub fn render_for_terminal(view: &RunView) -> String {
    render_guarded(view, super::github::active())
}

/// `--message-format human`: the table on stdout, styled where color is on.
pub struct Terminal;

impl Sink for Terminal {
    fn write(&self, view: &RunView) -> crate::error::Result<()> {
        anstream::print!("{}", render_for_terminal(view));
        Ok(())
    }
}

/// The report, with the failures' blocks made inert to the runner when `guard`.
fn render_guarded(view: &RunView, guard: bool) -> String {
    let summary = &view.summary;
    let mut out = String::new();
    if !view.outcomes.is_empty() {
        let rows: Vec<Vec<Cell>> = view
            .outcomes
            .iter()
            .map(|o| {
                let r = Row::of(o);
                let plain = Style::new();
                vec![
                    (r.test, plain),
                    (r.peak, plain),
                    (r.cpu_only, plain),
                    (r.change, plain),
                    (r.worst, plain),
                    (r.status, status_style(o.report.status, r.failing)),
                ]
            })
            .collect();
        out += &grid(
            &[
                "TEST",
                "PEAK",
                "CPU-ONLY",
                "CHANGE",
                "WORST CATEGORY",
                "STATUS",
            ],
            &rows,
            &[false, true, true, true, false, false],
        );
    }
    let failures = failure_blocks(&view.outcomes);
    if guard && !failures.is_empty() {
        out += &super::github::inert(&failures);
    } else {
        out += &failures;
    }
    let style = if summary.exit_code == 0 {
        Style::new().fg_color(Some(AnsiColor::Green.into())).bold()
    } else {
        Style::new().fg_color(Some(AnsiColor::Red.into())).bold()
    };
    let _ = writeln!(
        out,
        "\n{style}{}{style:#} ({:.2}s)",
        summary.headline(),
        view.duration.as_secs_f64()
    );
    if summary.pending > 0 {
        out += "hint: review the pending results with `cargo vramtest review`, or accept them all with `cargo vramtest accept`\n";
    }
    out
}

/// One block per failing test: its status, message, diff and its own output.
fn failure_blocks(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    for o in outcomes.iter().filter(|o| o.fails()) {
        let style = status_style(o.report.status, true);
        let _ = write!(
            out,
            "\n{style}──── {}: {} ────{style:#}\n",
            o.case.full_name(),
            super::status_label(&o.report)
        );
        out += o.report.message.trim_end();
        out.push('\n');
        if let Some(diff) = &o.report.diff {
            out.push('\n');
            out += &color_diff(diff);
        }
        if let Some(output) = o
            .report
            .output
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let dim = Style::new().fg_color(Some(AnsiColor::BrightBlack.into()));
            let _ = writeln!(out, "{dim}---- output ----{dim:#}\n{output}");
        }
    }
    out
}

/// A unified diff with `+` lines green, `-` lines red and hunk headers cyan.
pub fn color_diff(diff: &str) -> String {
    let green = Style::new().fg_color(Some(AnsiColor::Green.into()));
    let red = Style::new().fg_color(Some(AnsiColor::Red.into()));
    let cyan = Style::new().fg_color(Some(AnsiColor::Cyan.into()));
    let mut out = String::new();
    for line in diff.lines() {
        let style = if line.starts_with("+++") || line.starts_with("---") {
            Style::new().bold()
        } else if line.starts_with('+') {
            green
        } else if line.starts_with('-') {
            red
        } else if line.starts_with("@@") {
            cyan
        } else {
            Style::new()
        };
        let _ = writeln!(out, "{style}{line}{style:#}");
    }
    out
}

/// The line under `show`'s category table about CPU-only memory, which is in none of
/// its rows: its own peak, or why a snapshot has none.
fn cpu_only_line(b: &vramtest_model::Body) -> String {
    match (b.cpu_only, b.device_class) {
        (Some(bytes), _) => format!(
            "cpu_only: {} at its own peak, measured apart (CPU-only memory such as gemm's packing buffers: not in the categories, the peak or the CUDA prediction)\n",
            HumanBytes(bytes)
        ),
        (None, vramtest_model::DeviceClass::Cpu) => {
            "cpu_only: not recorded (the snapshot predates CPU-only memory being kept apart: its workspace and peak include it; re-accept)\n".to_string()
        }
        (None, _) => String::new(),
    }
}

/// `show`: one snapshot's header, peak, per-category and per-phase tables.
pub fn render_snapshot(path: &Path, snap: &Parsed) -> String {
    let b = &snap.body;
    let bold = Style::new().bold();
    let plain = Style::new();
    let mut out = format!("{bold}{}{bold:#}\n", path.display());
    for line in snap.header_lines.lines() {
        let _ = writeln!(out, "  {line}");
    }
    let at = match (b.peak_phase, b.peak_iteration) {
        (Some(p), Some(i)) => format!(" in {p} (iteration {i})"),
        (Some(p), None) => format!(" in {p} (set-up)"),
        (None, _) => String::new(),
    };
    let _ = writeln!(
        out,
        "\npeak {bold}{}{bold:#}{at} · {} · fidelity {} · {} iterations · leak {} per iteration\n",
        HumanBytes(b.peak_bytes),
        b.device_class,
        b.fidelity,
        b.iterations,
        HumanBytes(b.leak_bytes_per_iteration)
    );
    let share = |n: u64| {
        if b.peak_bytes == 0 {
            "—".to_string()
        } else {
            format!("{:.1}%", n as f64 * 100.0 / b.peak_bytes as f64)
        }
    };
    let mut rows: Vec<Vec<Cell>> = b
        .at_peak
        .iter()
        .map(|(c, n)| {
            vec![
                (c.to_string(), plain),
                (HumanBytes(n).to_string(), plain),
                (share(n), plain),
                (HumanBytes(b.category_peaks[c]).to_string(), plain),
            ]
        })
        .collect();
    rows.push(vec![
        ("total".into(), bold),
        (HumanBytes(b.at_peak.total()).to_string(), bold),
        (share(b.at_peak.total()), bold),
        (String::new(), plain),
    ]);
    out += &grid(
        &["CATEGORY", "AT PEAK", "SHARE", "OWN PEAK"],
        &rows,
        &[false, true, true, true],
    );
    out += &cpu_only_line(b);
    if !b.phases.is_empty() {
        out.push('\n');
        let rows: Vec<Vec<Cell>> = b
            .phases
            .iter()
            .map(|p| {
                vec![
                    (p.phase.to_string(), plain),
                    (
                        p.iteration.map_or("set-up".into(), |i| i.to_string()),
                        plain,
                    ),
                    (HumanBytes(p.start_bytes).to_string(), plain),
                    (HumanBytes(p.peak_bytes).to_string(), plain),
                    (HumanBytes(p.end_bytes).to_string(), plain),
                    (
                        HumanDelta(p.end_bytes as i128 - p.start_bytes as i128).to_string(),
                        plain,
                    ),
                ]
            })
            .collect();
        out += &grid(
            &["PHASE", "ITERATION", "START", "PEAK", "END", "KEPT"],
            &rows,
            &[false, true, true, true, true, true],
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::*;
    use anstream::adapter::strip_str;
    use std::time::Duration;
    use vramtest_model::report::Status;

    #[test]
    fn the_run_table() {
        let outcomes = mixed();
        let run = view(&outcomes, Duration::from_millis(4321));
        let text = strip_str(&render(&run)).to_string();
        assert!(
            !text.contains("──── mlp::vram::sgd"),
            "passing tests get no block"
        );
        insta::assert_snapshot!(text);
    }

    #[test]
    fn a_failure_block_colors_its_diff() {
        let outcomes = [regression()];
        let run = view(&outcomes, Duration::from_millis(1250));
        // The styles themselves are part of the design: pinned as escape codes.
        insta::assert_snapshot!(render(&run));
    }

    #[test]
    fn under_github_a_tests_output_runs_no_workflow_command() {
        let mut failed = outcome("broken", Status::Failed);
        failed.report.output = Some("::error::forged\n::add-mask::secret".into());
        let outcomes = [outcome("sgd", Status::Passed), failed];
        let run = view(&outcomes, std::time::Duration::ZERO);
        let plain = render(&run);
        let guarded = render_guarded(&run, true);
        assert!(!plain.contains("::stop-commands::"), "{plain}");
        let lines: Vec<&str> = guarded.lines().collect();
        let start = lines
            .iter()
            .position(|l| l.starts_with("::stop-commands::"))
            .unwrap_or_else(|| panic!("no stop in:\n{guarded}"));
        let token = &lines[start]["::stop-commands::".len()..];
        let end = lines
            .iter()
            .position(|l| *l == format!("::{token}::"))
            .unwrap_or_else(|| panic!("no end in:\n{guarded}"));
        // Every line that would run as a command is between the two; the table and
        // the summary line stay outside.
        for (i, l) in lines.iter().enumerate() {
            if l.starts_with("::error")
                || l.starts_with("::add-mask")
                || l.contains("──── mlp::vram::broken")
            {
                assert!(start < i && i < end, "line {i} {l:?} outside:\n{guarded}");
            }
        }
        assert!(lines[..start].iter().any(|l| l.contains("sgd")));
        assert!(lines[end + 1..].iter().any(|l| l.contains("failed")));
        // Without the guard lines, the two reports are the same.
        let without: Vec<&str> = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != start && *i != end)
            .map(|(_, l)| *l)
            .collect();
        assert_eq!(without.join("\n"), plain.trim_end_matches('\n'));
    }

    #[test]
    fn a_clean_run_is_one_table_and_a_line() {
        let outcomes = [outcome("sgd", Status::Passed)];
        let run = view(&outcomes, Duration::ZERO);
        let text = strip_str(&render(&run)).to_string();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(!text.contains("hint:"));
    }

    #[test]
    fn show_lists_every_category_and_phase() {
        let text = include_str!("../../tests/data/mlp_adamw@cpu.snap");
        let parsed = vramtest_model::snapshot::parse(text).unwrap();
        let out = strip_str(&render_snapshot(Path::new("x.snap"), &parsed)).to_string();
        assert!(
            out.contains("peak 31.96 MiB in optimizer_step (iteration 0)"),
            "{out}"
        );
        let rows: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        let has = |row: &[&str]| rows.iter().any(|r| r.as_slice() == row);
        assert!(
            has(&["parameters", "1.55", "MiB", "4.9%", "1.55", "MiB"]),
            "{out}"
        );
        assert!(has(&["total", "31.96", "MiB", "100.0%"]), "{out}");
        assert!(has(&[
            "optimizer_step",
            "2",
            "10.52",
            "MiB",
            "31.96",
            "MiB",
            "10.52",
            "MiB",
            "+0",
            "B"
        ]));
        assert!(has(&[
            "params", "set-up", "0", "B", "1.55", "MiB", "1.55", "MiB", "+1.55", "MiB"
        ]));
        for c in vramtest_model::Category::ALL {
            assert!(rows.iter().any(|r| r.first() == Some(&c.as_str())), "{c}");
        }
        insta::assert_snapshot!(out);
    }
}
