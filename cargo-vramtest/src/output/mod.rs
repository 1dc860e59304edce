//! What the commands print and write. For a run: the terminal table, JSON lines, JUnit
//! XML, a markdown PR comment, an HTML page and GitHub Actions annotations, each a pure
//! function of the one [`RunView`] that `run` and `merge` build ([`view`]), reached
//! through one seam ([`sinks`]: the report flags to the list of [`Sink`]s). This
//! module holds what the formats share (the rows of the table, status labels). For
//! `list` and `show`: their tables, what fits, the lever table, and call sites.

mod doubt;
pub mod fits;
pub mod github;
pub mod html;
pub mod json;
pub mod junit;
pub mod levers;
pub mod list;
pub mod markdown;
pub mod measure;
pub mod predict;
pub mod sinks;
pub mod site_listing;
pub mod snapshot_json;
pub mod table;
pub mod view;

pub use view::{Origin, RunView, Sink};

use crate::case::Outcome;
use anstyle::{AnsiColor, Style};
use vramtest_model::report::{FigureChange, Status, TestReport};
use vramtest_model::{HumanBytes, HumanDelta, Movement, Subject};

/// The status column: `passed`, `regressed`, `new (pending)`, `ignored: no CUDA
/// driver`, …; `measured` for a point `measure` ran (nothing was judged: its verdict
/// is the comparison with the prediction, said after the run).
pub fn status_label(r: &TestReport) -> String {
    match r.status {
        Status::Passed if r.measured_at.is_some() => "measured".into(),
        Status::New if r.is_pending() => "new (pending)".into(),
        Status::Ignored => match &r.ignore_reason {
            Some(reason) => format!("ignored: {reason}"),
            None => "ignored".into(),
        },
        s => view::status_word(s).into(),
    }
}

/// The color of a status.
pub fn status_style(s: Status, failing: bool) -> Style {
    let color = match s {
        _ if failing => AnsiColor::Red,
        Status::Passed => AnsiColor::Green,
        Status::Improved => AnsiColor::Cyan,
        Status::New => AnsiColor::Yellow,
        Status::Ignored => AnsiColor::BrightBlack,
        _ => AnsiColor::Red,
    };
    Style::new().fg_color(Some(color.into())).bold()
}

/// One line of the run's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `package::target::test`.
    pub test: String,
    pub peak: String,
    /// CPU-only memory (measured apart), `—` without it.
    pub cpu_only: String,
    pub change: String,
    pub worst: String,
    pub status: String,
    pub failing: bool,
}

impl Row {
    pub fn of(o: &Outcome) -> Row {
        let r = &o.report;
        Row {
            test: o.case.full_name(),
            peak: r
                .body
                .as_ref()
                .map_or("—".into(), |b| HumanBytes(b.peak_bytes).to_string()),
            cpu_only: r
                .body
                .as_ref()
                .and_then(|b| b.cpu_only)
                .map_or("—".into(), |n| HumanBytes(n).to_string()),
            change: peak_change(r),
            worst: worst_category(&r.changes).unwrap_or_else(|| "—".into()),
            status: status_label(r),
            failing: r.fails(),
        }
    }
}

/// The peak's change: `+1.20 MiB (+3.6%)`, `±0`, `new`, or `—` without a measurement.
pub fn peak_change(r: &TestReport) -> String {
    let Some(body) = &r.body else {
        return "—".into();
    };
    let Some(old) = r.old_peak_bytes else {
        return "new".into();
    };
    delta_text(old, body.peak_bytes)
}

fn delta_text(old: u64, new: u64) -> String {
    let delta = new as i128 - old as i128;
    if delta == 0 {
        return "±0".into();
    }
    if old == 0 {
        return format!("{}", HumanDelta(delta));
    }
    format!(
        "{} ({:+.1}%)",
        HumanDelta(delta),
        delta as f64 * 100.0 / old as f64
    )
}

/// The category that moved the most: the largest regression (by percent), else the
/// largest change in bytes. `activations +1.50 MiB (+300.0%)`.
pub fn worst_category(changes: &[FigureChange]) -> Option<String> {
    let categories = changes
        .iter()
        .filter(|c| matches!(c.subject, Subject::Category(_)));
    let growth = |c: &FigureChange| {
        if c.old == 0 {
            f64::INFINITY
        } else {
            (c.new as f64 - c.old as f64) / c.old as f64
        }
    };
    let size = |c: &FigureChange| (c.new as i128 - c.old as i128).unsigned_abs();
    let worst = categories
        .clone()
        .filter(|c| c.movement == Movement::Regressed)
        .max_by(|a, b| growth(a).total_cmp(&growth(b)))
        .or_else(|| categories.max_by_key(|c| size(c)))?;
    Some(format!(
        "{} {}",
        worst.subject,
        delta_text(worst.old, worst.new)
    ))
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Outcomes for the output formats' tests.

    use super::Subject;
    use crate::case::{Binary, Outcome, TestCase};
    use std::sync::Arc;
    use std::time::Duration;
    use vramtest_model::report::{FigureChange, Status, TestReport};
    use vramtest_model::{Body, Category, CategoryBytes, DeviceClass, Fidelity};

    pub fn body(peak: u64) -> Body {
        let at_peak = CategoryBytes::from([
            (Category::Parameters, peak / 2),
            (Category::Activations, peak - peak / 2),
        ]);
        Body {
            schema: 1,
            device_class: DeviceClass::Cpu,
            fidelity: Fidelity::Exact,
            iterations: 3,
            peak_bytes: peak,
            reserved_bytes: None,
            peak_phase: None,
            peak_iteration: None,
            at_peak,
            category_peaks: at_peak,
            phases: vec![],
            leak_bytes_per_iteration: 0,
            cpu_only: Some(0),
            scaling: None,
        }
    }

    pub fn outcome(test: &str, status: Status) -> Outcome {
        let mut report = TestReport {
            source: "tests/vram.rs".into(),
            line: 15,
            device_class: Some(DeviceClass::Cpu),
            body: Some(body(4 << 20)),
            old_peak_bytes: Some(4 << 20),
            snapshot: Some(format!("/w/mlp/tests/snapshots/vram__{test}@cpu.snap").into()),
            ..TestReport::new("vram", test, status)
        };
        match status {
            Status::Regressed => {
                report.body = Some(body(6 << 20));
                report.changes = vec![
                    change("peak", 4 << 20, 6 << 20, "regressed"),
                    change("activations", 2 << 20, 4 << 20, "regressed"),
                    change("parameters", 2 << 20, 2 << 20 | 4096, "within"),
                ];
                report.message = format!(
                    "memory regression in {test} (cpu)\n  activations: 2.00 MiB → 4.00 MiB (+2.00 MiB, +100.0%), over the limit +1% | 64.00 KiB"
                );
                report.diff = Some(
                    "--- old\n+++ new\n@@ -1,2 +1,2 @@\n-  \"peak_bytes\": 4194304,\n+  \"peak_bytes\": 6291456,\n".into(),
                );
            }
            Status::Improved => {
                report.body = Some(body(3 << 20));
                report.changes = vec![change("activations", 2 << 20, 1 << 20, "improved")];
                report.message = "improved by 1.00 MiB: accept to lock it in".into();
            }
            Status::New => {
                report.old_peak_bytes = None;
                report.written =
                    Some(format!("/w/mlp/tests/snapshots/vram__{test}@cpu.snap.new").into());
                report.message = format!("{test} (cpu) has no snapshot yet");
            }
            Status::Ignored => {
                report.body = None;
                report.old_peak_bytes = None;
                report.snapshot = None;
                report.ignore("no CUDA driver (vramtest was built without its `cuda` feature)");
            }
            Status::Failed => {
                report.body = None;
                report.old_peak_bytes = None;
                report.message = format!("{test} failed: panicked: out of memory, 100%");
                report.output = Some("thread 'main' panicked at src/lib.rs:3:5".into());
            }
            _ => {}
        }
        // The committed snapshot the result was judged against, when there is one.
        report.old_body = report.old_peak_bytes.map(body);
        Outcome {
            case: TestCase {
                binary: Arc::new(Binary {
                    package: "mlp".into(),
                    target: "vram".into(),
                    path: "/w/target/debug/deps/vram-0123".into(),
                    package_dir: "/w/mlp".into(),
                    package_version: "0.1.0".into(),
                }),
                name: test.into(),
                ignored: false,
                include_ignored: false,
            },
            report,
            duration: Duration::from_millis(1250),
        }
    }

    /// The view of a run of `outcomes` in the workspace `/w`.
    pub fn view(outcomes: &[Outcome], duration: Duration) -> crate::output::view::RunView {
        let origin = crate::output::view::Origin::Run {
            root: "/w".into(),
            target_dir: "/w/target".into(),
        };
        crate::output::view::RunView::new(outcomes.to_vec(), duration, origin)
    }

    pub fn change(subject: &str, old: u64, new: u64, movement: &str) -> FigureChange {
        FigureChange {
            subject: Subject::try_from(subject.to_owned()).expect("a known subject"),
            old,
            new,
            limit: "+1% | 65536".into(),
            movement: serde_json::from_value(serde_json::Value::from(movement))
                .expect("a known movement"),
            message: format!("{subject} moved"),
        }
    }

    /// A realistic regression, judged by the model as the harness does: the committed
    /// `tests/data/mlp_adamw@cpu.snap` against a run whose forward pass keeps 640.71 KiB
    /// more activations alive (`fixtures/candle-mlp` with `CANDLE_MLP_BLOAT`).
    pub fn regression() -> Outcome {
        use vramtest_model::{Movement, Policy, compare};
        let old_text = include_str!("../../tests/data/mlp_adamw@cpu.snap");
        let old = vramtest_model::snapshot::parse(old_text).unwrap().body;
        let grown = 656_088;
        let mut new = old.clone();
        new.at_peak[Category::Activations] += grown;
        new.category_peaks[Category::Activations] += grown;
        new.peak_bytes += grown;
        let cmp = compare(&old, &new, &Policy::default());
        let mut o = outcome("mlp_adamw", Status::Regressed);
        o.case.binary = Arc::new(crate::case::Binary {
            package: "candle-mlp".into(),
            ..(*o.case.binary).clone()
        });
        let r = &mut o.report;
        let mut message = "memory regression in mlp_adamw (cpu)".to_owned();
        for f in cmp
            .findings
            .iter()
            .filter(|f| f.movement != Movement::Within)
        {
            message += &format!("\n  {f}");
        }
        r.message = message;
        r.changes = cmp.findings.iter().map(FigureChange::from).collect();
        r.old_peak_bytes = Some(old.peak_bytes);
        r.diff = Some(
            similar::TextDiff::from_lines(&old.to_text(), &new.to_text())
                .unified_diff()
                .context_radius(3)
                .header(
                    "old: tests/snapshots/vram__mlp_adamw@cpu.snap",
                    "new: mlp_adamw (cpu)",
                )
                .to_string(),
        );
        r.body = Some(new);
        r.old_body = Some(old);
        let r = &mut o.report;
        r.details = Some(vramtest_model::report::Details {
            baseline_bytes: 10_240,
            allocations: 48_213,
            reserved_peak_bytes: None,
            leak_sites: Vec::new(),
            predicted_pool: None,
            point_millis: Vec::new(),
            fit_millis: None,
        });
        r.snapshot = Some("/w/candle-mlp/tests/snapshots/vram__mlp_adamw@cpu.snap".into());
        r.written = Some("/w/candle-mlp/tests/snapshots/vram__mlp_adamw@cpu.snap.new".into());
        o
    }

    /// One of each status that matters.
    pub fn mixed() -> Vec<Outcome> {
        vec![
            outcome("adamw", Status::Regressed),
            outcome("sgd", Status::Passed),
            outcome("small", Status::Improved),
            outcome("fresh", Status::New),
            outcome("broken", Status::Failed),
            outcome("slow", Status::Ignored),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::view::Summary;
    use super::*;

    #[test]
    fn rows_say_what_moved() {
        let rows: Vec<Row> = mixed().iter().map(Row::of).collect();
        let r = &rows[0];
        assert_eq!(r.test, "mlp::vram::adamw");
        assert_eq!(r.peak, "6.00 MiB");
        assert_eq!(r.change, "+2.00 MiB (+50.0%)");
        assert_eq!(r.worst, "activations +2.00 MiB (+100.0%)");
        assert_eq!((r.status.as_str(), r.failing), ("regressed", true));
        assert_eq!(rows[1].change, "±0");
        assert_eq!(rows[1].worst, "—");
        assert_eq!(rows[2].worst, "activations -1.00 MiB (-50.0%)");
        assert_eq!(
            (rows[3].change.as_str(), rows[3].status.as_str()),
            ("new", "new (pending)")
        );
        assert_eq!((rows[4].peak.as_str(), rows[4].change.as_str()), ("—", "—"));
        assert_eq!(
            rows[5].status,
            "ignored: no CUDA driver (vramtest was built without its `cuda` feature)"
        );
    }

    #[test]
    fn the_summary_sets_the_exit_code() {
        let s = Summary::of(&mixed());
        assert_eq!(s.exit_code, 1);
        assert_eq!(s.failing, 3);
        assert_eq!(s.pending, 1);
        assert_eq!(
            s.headline(),
            "6 tests: 1 passed, 1 improved, 1 new, 1 regressed, 1 failed, 1 ignored"
        );
        let passing = [outcome("a", Status::Passed), outcome("b", Status::Improved)];
        assert_eq!(Summary::of(&passing).exit_code, 0);
        let broken = [
            outcome("a", Status::Regressed),
            outcome("b", Status::SnapshotError),
        ];
        assert_eq!(Summary::of(&broken).exit_code, 2);
        assert_eq!(Summary::of(&[]).headline(), "0 tests");
    }

    #[test_case::test_case("no CUDA driver", "ignored: no CUDA driver"; "a reason")]
    #[test_case::test_case("", "ignored"; "no reason")]
    fn ignored_tests_say_why(reason: &str, expected: &str) {
        let mut o = outcome("slow", Status::Ignored);
        o.report.ignore(reason);
        assert_eq!(status_label(&o.report), expected);
    }

    #[test]
    fn the_reason_comes_from_its_field_not_the_message() {
        let mut o = outcome("slow", Status::Ignored);
        o.report.ignore("");
        o.report.message = "ignored: too slow for CI\nmore".into();
        assert_eq!(status_label(&o.report), "ignored");
        o.report.ignore_reason = Some("too slow for CI".into());
        o.report.message = "something else".into();
        assert_eq!(status_label(&o.report), "ignored: too slow for CI");
    }

    #[test]
    fn worst_category_prefers_regressions() {
        let changes = [
            change("peak", 10, 20, "regressed"),
            change("workspace", 1 << 30, 2 << 30, "within"),
            change("activations", 100, 150, "regressed"),
            change("gradients", 100, 300, "regressed"),
        ];
        assert_eq!(
            worst_category(&changes).unwrap(),
            "gradients +200 B (+200.0%)"
        );
        assert_eq!(
            worst_category(&changes[..2]).unwrap(),
            "workspace +1.00 GiB (+100.0%)"
        );
        assert_eq!(worst_category(&changes[..1]), None);
    }
}
