//! `cargo vramtest measure TEST --at ..`: one point of a sweep over named axes, measured,
//! set against what the committed snapshot's sweep predicts there, as a table or one
//! JSON object; and the gate: every tensor category whose fit is not flagged within 3%
//! of the measurement, the peak within 5%. A category under 1% of the measured peak
//! (measured and predicted) is shown and not gated: a few hundred bytes of bookkeeping
//! beside megabytes of tensors is no prediction to fail on. The verdict is `held` or
//! `missed`, with the figures beyond their bounds.

use super::doubt::{MarkedRow, legend, marked};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use vramtest_model::axes::Point;
use vramtest_model::doubt::{Doubt, over_peak};
use vramtest_model::pool::PoolPeaks;
use vramtest_model::sweep::{Estimate, show_point};
use vramtest_model::{Body, Category, HumanBytes};

/// The categories that hold tensors, each held to [`TENSOR_PERCENT`]; `workspace` and
/// `untracked` are shown, never gated.
pub const TENSORS: [Category; 6] = Category::TENSORS;

/// How far a tensor category's prediction may miss the measurement, in percent.
pub const TENSOR_PERCENT: u64 = 3;

/// How far the peak's prediction may miss the measurement, in percent.
pub const PEAK_PERCENT: u64 = 5;

/// A category under this share of the measured peak, in percent, is not gated.
pub const SMALL_PERCENT: u64 = 1;

/// One side of the comparison: each category's own peak and the peak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figures {
    /// Each category's own peak.
    pub category_bytes: BTreeMap<Category, u64>,
    /// The peak.
    pub peak_bytes: u64,
}

impl Figures {
    /// A measured body's figures.
    pub fn measured(body: &Body) -> Figures {
        Figures {
            category_bytes: Category::ALL
                .iter()
                .map(|&c| (c, body.category_peaks[c]))
                .collect(),
            peak_bytes: body.peak_bytes,
        }
    }

    /// A prediction's figures.
    pub fn predicted(estimate: &Estimate) -> Figures {
        Figures {
            category_bytes: estimate.category_bytes.clone(),
            peak_bytes: estimate.peak_bytes,
        }
    }

    fn json(&self) -> Value {
        let categories: Map<String, Value> = self
            .category_bytes
            .iter()
            .map(|(c, b)| (c.as_str().to_owned(), json!(b)))
            .collect();
        json!({ "category_bytes": categories, "peak_bytes": self.peak_bytes })
    }
}

/// How a figure is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Within this many percent of the measurement.
    Within(u64),
    /// A tensor category whose fit is flagged (over 2% on a held-out point, or
    /// interpolating): shown, not trusted, not gated.
    Flagged,
    /// No tensor (`workspace`, `untracked`): shown, not gated.
    NoTensor,
    /// A tensor category under [`SMALL_PERCENT`] of the measured peak, measured and
    /// predicted: shown, not gated.
    Small,
    /// The CUDA pool's allocated or reserved peak of a CPU run ([`PoolCheck`]): shown,
    /// not gated.
    PoolModel,
}

/// The row of the CUDA pool's allocated peak ([`PoolCheck`]).
pub const ALLOCATED_ROW: &str = "CUDA allocated";
/// The row of the CUDA pool's reserved peak ([`PoolCheck`]).
pub const RESERVED_ROW: &str = "CUDA reserved";

/// One figure of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureRow {
    /// A category's name, or `peak`.
    pub figure: String,
    pub measured: u64,
    pub predicted: u64,
    pub gate: Gate,
}

impl MeasureRow {
    /// `(predicted − measured) / measured`: 0 when both are 0, `None` when only the
    /// measurement is.
    pub fn error(&self) -> Option<f64> {
        match (self.measured, self.predicted) {
            (0, 0) => Some(0.0),
            (0, _) => None,
            (m, p) => Some((p as f64 - m as f64) / m as f64),
        }
    }

    /// Whether the prediction misses by more than its gate allows (exactly, in
    /// integers: `|p − m| × 100 > percent × m`).
    pub fn missed(&self) -> bool {
        let Gate::Within(percent) = self.gate else {
            return false;
        };
        let off = u128::from(self.measured.abs_diff(self.predicted));
        off * 100 > u128::from(percent) * u128::from(self.measured)
    }
}

/// A point measured against its prediction.
#[derive(Debug, Clone)]
pub struct PointCheck {
    /// The point, every axis of the test.
    pub at: Point,
    pub measured: Figures,
    pub predicted: Figures,
    /// The phase predicted to hold the peak, or the moment of it (`backward when
    /// gradients peak`).
    pub peak_phase: Option<String>,
    /// The predicted figures whose fits are flagged.
    pub flagged: Vec<String>,
    /// The CUDA pool's allocated and reserved peaks, measured (a CPU run's pool model,
    /// replayed on its allocations) against predicted, where both are known.
    pub pool: Option<PoolCheck>,
}

/// The CUDA pool's figures of a CPU run: what a GPU would allocate and reserve, from
/// the pool model replayed on the run's allocations, against the sweep's prediction.
/// Shown, not gated: the pool's rounding to granules is a step, no fit's to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolCheck {
    /// The pool model's peaks at the point.
    pub measured: PoolPeaks,
    /// The predicted ones.
    pub predicted: PoolPeaks,
}

impl PointCheck {
    /// `body`, measured at `estimate.at`, against `estimate`.
    pub fn new(body: &Body, estimate: &Estimate) -> PointCheck {
        PointCheck {
            at: estimate.at.clone(),
            measured: Figures::measured(body),
            predicted: Figures::predicted(estimate),
            peak_phase: (estimate.peak_phase.as_ref()).map(|phase| {
                let figure = estimate.peak_figure();
                figure.strip_prefix("phase ").unwrap_or(phase).to_owned()
            }),
            flagged: estimate.flagged.clone(),
            pool: None,
        }
    }

    /// With the pool model's peaks `measured` at the point (a CPU run's), set beside
    /// the prediction's, when the sweep predicts them.
    pub fn with_pool(mut self, measured: Option<PoolPeaks>, estimate: &Estimate) -> PointCheck {
        self.pool = match (measured, estimate.allocated_bytes, estimate.reserved_bytes) {
            (Some(measured), Some(allocated_bytes), Some(reserved_bytes)) => Some(PoolCheck {
                measured,
                predicted: PoolPeaks {
                    allocated_bytes,
                    reserved_bytes,
                },
            }),
            _ => None,
        };
        self
    }

    /// Every category, then the peak.
    pub fn rows(&self) -> Vec<MeasureRow> {
        let mut rows: Vec<MeasureRow> = Category::ALL
            .iter()
            .map(|&c| MeasureRow {
                figure: c.as_str().to_owned(),
                measured: self.measured.category_bytes.get(&c).copied().unwrap_or(0),
                predicted: self.predicted.category_bytes.get(&c).copied().unwrap_or(0),
                gate: if !TENSORS.contains(&c) {
                    Gate::NoTensor
                } else if self.is_small(c) {
                    Gate::Small
                } else if self.flagged.iter().any(|f| f == c.as_str()) {
                    Gate::Flagged
                } else {
                    Gate::Within(TENSOR_PERCENT)
                },
            })
            .collect();
        rows.push(MeasureRow {
            figure: "peak".into(),
            measured: self.measured.peak_bytes,
            predicted: self.predicted.peak_bytes,
            gate: Gate::Within(PEAK_PERCENT),
        });
        if let Some(pool) = &self.pool {
            rows.push(MeasureRow {
                figure: ALLOCATED_ROW.into(),
                measured: pool.measured.allocated_bytes,
                predicted: pool.predicted.allocated_bytes,
                gate: Gate::PoolModel,
            });
            rows.push(MeasureRow {
                figure: RESERVED_ROW.into(),
                measured: pool.measured.reserved_bytes,
                predicted: pool.predicted.reserved_bytes,
                gate: Gate::PoolModel,
            });
        }
        rows
    }

    /// Whether `category` is under [`SMALL_PERCENT`] of the measured peak, both as
    /// measured and as predicted (exactly, in integers).
    fn is_small(&self, category: Category) -> bool {
        let get = |f: &Figures| u128::from(f.category_bytes.get(&category).copied().unwrap_or(0));
        let largest = get(&self.measured).max(get(&self.predicted));
        largest * 100 < u128::from(SMALL_PERCENT) * u128::from(self.measured.peak_bytes)
    }

    /// The figures whose prediction misses beyond their gate's bound.
    pub fn missed(&self) -> Vec<String> {
        self.rows()
            .into_iter()
            .filter(MeasureRow::missed)
            .map(|r| r.figure)
            .collect()
    }

    /// `held` (every gated figure within its bound) or `missed`.
    pub fn verdict(&self) -> &'static str {
        if self.missed().is_empty() {
            "held"
        } else {
            "missed"
        }
    }

    /// The doubt on the predicted figure `figure` (a category's name, or `peak`): the
    /// flagged fits it rests on (the category's own; for the peak, the fit of the
    /// phase holding it and of every other phase within that maximum, or the peak's
    /// own), and whether it is impossible (a category predicted above the predicted
    /// peak; the peak, when any category is).
    pub fn doubt(&self, figure: &str) -> Doubt {
        let over = over_peak(
            self.predicted.category_bytes.iter().map(|(&c, &b)| (c, b)),
            self.predicted.peak_bytes,
        );
        // The pool's rows rest on the peak and on the pool's own fits.
        let pool = [ALLOCATED_ROW, RESERVED_ROW].contains(&figure);
        let rests_on = |f: &String| match (figure, &self.peak_phase) {
            ("peak", Some(_)) => f.starts_with("phase "),
            (_, phase) if pool => {
                (phase.is_some() && f.starts_with("phase "))
                    || (phase.is_none() && f == "peak")
                    || f == vramtest_model::sweep::ALLOCATED
                    || (figure == RESERVED_ROW && f == vramtest_model::sweep::RESERVED)
            }
            _ => f == figure,
        };
        Doubt {
            flagged: self
                .flagged
                .iter()
                .filter(|f| rests_on(f))
                .cloned()
                .collect(),
            impossible: match figure {
                "peak" | ALLOCATED_ROW | RESERVED_ROW => over,
                _ => over.into_iter().filter(|c| c.as_str() == figure).collect(),
            },
        }
    }

    /// The exit code: 1 when a gated figure missed, else 0.
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.missed().is_empty())
    }
}

/// `+1.23%`, or `n/a` where the measurement is 0 and the prediction is not.
fn percent(error: Option<f64>) -> String {
    error.map_or_else(|| "n/a".to_owned(), |e| format!("{:+.2}%", e * 100.0))
}

/// The comparison as a table under a heading that names the test, then the verdict.
pub fn human(name: &str, c: &PointCheck) -> String {
    let mut out = format!(
        "{name} at {}: measured, against the prediction of its committed snapshot's sweep\n",
        show_point(&c.at)
    );
    let mut table = vec![[
        "FIGURE".to_owned(),
        "MEASURED".to_owned(),
        "PREDICTED".to_owned(),
        "ERROR".to_owned(),
        "GATE".to_owned(),
    ]];
    let rows = c.rows();
    let mut marked_rows = Vec::new();
    for r in &rows {
        let doubt = c.doubt(&r.figure);
        let figure = match (&*r.figure, &c.peak_phase) {
            ("peak", Some(phase)) => format!("peak ({phase})"),
            _ => r.figure.clone(),
        };
        let gate = match (r.gate, r.missed()) {
            (Gate::Within(p), false) => format!("within {p}%"),
            (Gate::Within(p), true) => format!("MISSED (over {p}%)"),
            (Gate::Flagged, _) => "flagged fit, not gated".to_owned(),
            (Gate::NoTensor, _) => "no tensor, not gated".to_owned(),
            (Gate::Small, _) => format!("under {SMALL_PERCENT}% of the peak, not gated"),
            (Gate::PoolModel, _) => "the pool's model, not gated".to_owned(),
        };
        let predicted = marked(&HumanBytes(r.predicted).to_string(), &doubt);
        marked_rows.push(MarkedRow::new(
            figure.clone(),
            doubt,
            c.predicted.category_bytes.iter().map(|(&k, &b)| (k, b)),
            c.predicted.peak_bytes,
        ));
        table.push([
            figure,
            HumanBytes(r.measured).to_string(),
            predicted,
            percent(r.error()),
            gate,
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in &table {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }
    out += &legend(&marked_rows);
    let missed = c.missed();
    out += &if missed.is_empty() {
        format!(
            "\nthe prediction holds: every tensor category whose fit is not flagged within {TENSOR_PERCENT}% of the measurement, the peak within {PEAK_PERCENT}% (a category under {SMALL_PERCENT}% of the peak is not gated)\n"
        )
    } else {
        format!(
            "\nthe prediction misses: {} (a tensor category is held to {TENSOR_PERCENT}%, the peak to {PEAK_PERCENT}%; a category under {SMALL_PERCENT}% of the peak is not gated)\n",
            missed.join(", ")
        )
    };
    out
}

/// The comparison as one JSON object: `at`, `measured` and `predicted` (each
/// `category_bytes` and `peak_bytes`), `error`, each figure's
/// `(predicted − measured) / measured` (`null` where only the measurement is 0), the
/// `verdict` (`held` or `missed`) and `missed`, the figures beyond their bounds.
pub fn json(c: &PointCheck) -> Value {
    let error: Map<String, Value> = c
        .rows()
        .iter()
        .map(|r| (r.figure.clone(), json!(r.error())))
        .collect();
    let mut predicted = c.predicted.json();
    let mut measured = c.measured.json();
    if let Some(pool) = &c.pool {
        for (side, peaks) in [
            (&mut measured, pool.measured),
            (&mut predicted, pool.predicted),
        ] {
            side["allocated_bytes"] = json!(peaks.allocated_bytes);
            side["reserved_bytes"] = json!(peaks.reserved_bytes);
        }
    }
    predicted["flagged"] = json!(c.flagged);
    predicted["impossible"] = json!(c.doubt("peak").impossible);
    json!({
        "at": c.at,
        "measured": measured,
        "predicted": predicted,
        "error": error,
        "verdict": c.verdict(),
        "missed": c.missed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comparison(measured: [u64; 8], predicted: [u64; 8], flagged: &[&str]) -> PointCheck {
        let figures = |bytes: [u64; 8]| Figures {
            category_bytes: Category::ALL.into_iter().zip(bytes).collect(),
            peak_bytes: bytes.iter().sum(),
        };
        PointCheck {
            at: Point::from([("seq".to_owned(), 48)]),
            measured: figures(measured),
            predicted: figures(predicted),
            peak_phase: Some("forward".into()),
            flagged: flagged.iter().map(|f| (*f).to_owned()).collect(),
            pool: None,
        }
    }

    #[test]
    fn a_tensor_category_is_held_to_3_percent_exactly() {
        // parameters 100 → 103 is 3%: within; 104 is over.
        let within = comparison([100, 0, 0, 0, 0, 0, 0, 0], [103, 0, 0, 0, 0, 0, 0, 0], &[]);
        assert_eq!(within.exit_code(), 0);
        let over = comparison([100, 0, 0, 0, 0, 0, 0, 0], [104, 0, 0, 0, 0, 0, 0, 0], &[]);
        let rows = over.rows();
        assert!(rows[0].missed());
        // The peak (100 → 104) is within its 5%.
        assert!(!rows[8].missed());
        assert_eq!(over.exit_code(), 1);
        // Flagged, the same miss is shown and not gated.
        let flagged = comparison(
            [100, 0, 0, 0, 0, 0, 0, 1000],
            [104, 0, 0, 0, 0, 0, 0, 1000],
            &["parameters"],
        );
        assert_eq!(flagged.rows()[0].gate, Gate::Flagged);
        assert_eq!(flagged.exit_code(), 0);
    }

    #[test]
    fn the_pools_figures_are_shown_with_the_doubt_they_rest_on_and_not_gated() {
        let c = comparison(
            [1000, 0, 0, 0, 0, 0, 0, 0],
            [1000, 0, 0, 0, 0, 0, 0, 0],
            &[],
        );
        assert_eq!(c.rows().len(), 9, "no pool without one measured");
        let peaks = |allocated_bytes, reserved_bytes| PoolPeaks {
            allocated_bytes,
            reserved_bytes,
        };
        let mut c = comparison(
            [1000, 0, 0, 0, 0, 0, 0, 0],
            [1000, 0, 0, 0, 0, 0, 0, 0],
            &[
                "reserved over allocated",
                "phase backward when gradients peak",
            ],
        );
        // A reserved peak 50% over the measurement: shown, never a miss.
        c.pool = Some(PoolCheck {
            measured: peaks(1024, 2 << 20),
            predicted: peaks(1024, 3 << 20),
        });
        let rows = c.rows();
        assert_eq!(rows[9].figure, ALLOCATED_ROW);
        assert_eq!(rows[10].figure, RESERVED_ROW);
        assert_eq!(rows[10].gate, Gate::PoolModel);
        assert_eq!(rows[10].error(), Some(0.5));
        assert_eq!(c.exit_code(), 0);
        assert_eq!(c.verdict(), "held");
        // Both rest on the peak's phases; the reserved peak on the pool's rounding too.
        assert_eq!(
            c.doubt(ALLOCATED_ROW).flagged,
            ["phase backward when gradients peak"]
        );
        assert_eq!(c.doubt(RESERVED_ROW).flagged.len(), 2);
        let v = json(&c);
        assert_eq!(v["measured"]["reserved_bytes"], 2 << 20);
        assert_eq!(v["predicted"]["reserved_bytes"], 3 << 20);
        assert_eq!(v["error"][RESERVED_ROW], 0.5);
        let text = human("t", &c);
        assert!(text.contains("the pool's model, not gated"), "{text}");
        assert!(text.contains("the prediction holds"), "{text}");
    }

    #[test]
    fn workspace_and_untracked_are_shown_and_not_gated() {
        let c = comparison(
            [1000, 0, 0, 0, 0, 0, 10, 10],
            [1000, 0, 0, 0, 0, 0, 20, 0],
            &[],
        );
        let rows = c.rows();
        assert_eq!(rows[6].gate, Gate::NoTensor);
        assert_eq!(rows[6].error(), Some(1.0));
        assert_eq!(rows[7].error(), Some(-1.0));
        // The peak: 1020 → 1020.
        assert_eq!(c.exit_code(), 0);
    }

    #[test]
    fn a_tensor_measured_at_zero_and_predicted_otherwise_misses() {
        let c = comparison([0, 0, 0, 0, 0, 0, 0, 100], [0, 0, 0, 0, 0, 1, 0, 100], &[]);
        let rows = c.rows();
        assert_eq!(rows[5].error(), None);
        assert!(rows[5].missed());
        assert_eq!(rows[0].error(), Some(0.0));
        let v = json(&c);
        assert_eq!(v["error"]["temporaries"], Value::Null);
        assert_eq!(v["error"]["parameters"], 0.0);
        assert_eq!(v["measured"]["peak_bytes"], 100);
        assert_eq!(v["predicted"]["peak_bytes"], 101);
        assert_eq!(v["at"]["seq"], 48);
        let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            ["at", "error", "measured", "missed", "predicted", "verdict"]
        );
        assert_eq!(v["verdict"], "missed");
        assert_eq!(v["missed"], json!(["temporaries"]));
        let text = human("t", &c);
        assert!(
            text.contains("the prediction misses: temporaries"),
            "{text}"
        );
    }

    #[test]
    fn a_category_under_1_percent_of_the_peak_is_shown_and_not_gated() {
        // Peak 10,000 B: 1% is 100 B. Gradients 99 → 60 B is under it, measured and
        // predicted: not gated, though 39% off. Inputs 99 → 110 B is not (predicted).
        let c = comparison(
            [9_802, 99, 0, 0, 99, 0, 0, 0],
            [9_802, 60, 0, 0, 110, 0, 0, 0],
            &[],
        );
        let rows = c.rows();
        assert_eq!(rows[1].gate, Gate::Small);
        assert!(!rows[1].missed());
        assert_eq!(rows[4].gate, Gate::Within(TENSOR_PERCENT));
        assert!(rows[4].missed(), "99 → 110 B is over 3%");
        assert_eq!(c.missed(), ["inputs"]);
        // Without the inputs' miss: held, and the table says why the gradients are not
        // gated.
        let c = comparison(
            [9_802, 99, 0, 0, 99, 0, 0, 0],
            [9_802, 60, 0, 0, 99, 0, 0, 0],
            &[],
        );
        assert_eq!((c.verdict(), c.exit_code()), ("held", 0));
        let v = json(&c);
        assert_eq!((&v["verdict"], &v["missed"]), (&json!("held"), &json!([])));
        let text = human("t", &c);
        assert!(
            text.lines().any(|l| l.trim_start().starts_with("gradients")
                && l.ends_with("under 1% of the peak, not gated")),
            "{text}"
        );
        assert!(text.contains("the prediction holds"), "{text}");
        // The largest category of the same peak is gated.
        assert_eq!(rows[0].gate, Gate::Within(TENSOR_PERCENT));
    }

    #[test]
    fn the_predicted_column_carries_the_flags_of_its_fits() {
        let mut c = comparison(
            [100, 100, 200, 1000, 10, 50, 0, 0],
            [100, 100, 200, 1000, 10, 50, 0, 0],
            &["activations", "phase backward"],
        );
        let text = human("t", &c);
        let line = |figure: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(figure))
                .unwrap_or_else(|| panic!("no {figure} row: {text}"))
                .to_owned()
        };
        // activations rests on its flagged fit; the peak (forward's) on backward's,
        // within the maximum; parameters on nothing flagged.
        assert!(line("activations").contains("1000 B*"), "{text}");
        assert!(line("peak (forward)").contains("1.43 KiB*"), "{text}");
        assert!(!line("parameters").contains('*'), "{text}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains(
                "not to be trusted: activations: activations; peak (forward): phase backward"
            ),
            "{text}"
        );
        let v = json(&c);
        assert_eq!(
            v["predicted"]["flagged"],
            serde_json::json!(["activations", "phase backward"])
        );
        assert_eq!(v["predicted"]["impossible"], serde_json::json!([]));
        // Activations predicted above the predicted peak: impossible, both marked.
        c.predicted.peak_bytes = 900;
        let text = human("t", &c);
        assert!(text.contains("1000 B*!"), "{text}");
        assert!(text.contains("900 B*!"), "{text}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("activations (activations 1000 B over the peak 900 B)"),
            "{text}"
        );
        assert_eq!(
            json(&c)["predicted"]["impossible"],
            serde_json::json!(["activations"])
        );
    }
}
