//! Measured figures explained against the formulas practitioners use: each category as
//! a multiple of `parameters` with its textbook meaning, and hints whose savings are
//! computed from the measurement (never generic advice).

use crate::bytes::HumanBytes;
use crate::category::{Category, Phase};
use crate::profile::CategoryBytes;
use crate::sweep::{BATCH, Sweep};
use std::fmt;

/// How far a multiple may sit from a whole number and still read as that formula.
pub const FORMULA_SLACK: f64 = 0.05;

/// Below this share of the parameter bytes with a gradient, most weights do not train:
/// flagged. Above it, the rest reads as buffers built with the weights (rotary tables,
/// masks) or frozen weights, and is said without a flag.
pub const FEW_GRADIENTS: f64 = 0.5;

/// One category as a multiple of the parameters (or of the gradients: the weights that
/// train).
#[derive(Debug, Clone, PartialEq)]
pub struct Ratio {
    /// The category compared.
    pub category: Category,
    /// What it is compared with: `parameters`, or for `optimizer_state` the
    /// `gradients` when only the weights that train read as a formula.
    pub base: Category,
    /// `category bytes / base bytes`.
    pub multiple: f64,
    /// What the multiple means (`two moments per weight: Adam-like`).
    pub meaning: String,
    /// Set when the figure drifts from every formula the category has.
    pub drift: bool,
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:.2}× {} ({})",
            self.category, self.multiple, self.base, self.meaning
        )?;
        if self.drift {
            f.write_str(" [check]")?;
        }
        Ok(())
    }
}

fn near(m: f64, k: f64) -> bool {
    (m - k).abs() <= FORMULA_SLACK
}

/// `gradients` and `optimizer_state` against `parameters`, from each category's own
/// peak (or a predicted configuration's figures). Empty when there are no parameters
/// to compare with.
pub fn ratios(category_peaks: &CategoryBytes) -> Vec<Ratio> {
    let params = category_peaks[Category::Parameters];
    if params == 0 {
        return Vec::new();
    }
    vec![gradients(category_peaks), optimizer_state(category_peaks)]
}

/// Gradients against parameters, both ways: more than one per weight (an extra copy),
/// or a gradient for only a small share of the weights (a backward pass that silently
/// stops short of most of them).
fn gradients(c: &CategoryBytes) -> Ratio {
    let g = c[Category::Gradients] as f64 / c[Category::Parameters] as f64;
    let (meaning, drift) = if near(g, 1.0) {
        ("one gradient per weight".to_owned(), false)
    } else if c[Category::Gradients] == 0 {
        (
            "no gradients kept: frozen weights or no backward pass".to_owned(),
            false,
        )
    } else if g > 1.0 {
        (
            format!(
                "the formula is 1× (one gradient per weight): {:+.2}× unexplained, e.g. an extra copy or a cache charged to gradients",
                g - 1.0
            ),
            true,
        )
    } else if g >= FEW_GRADIENTS {
        (
            format!(
                "{:.0}% of the parameter bytes get no gradient: buffers built with the weights (rotary tables, masks) or frozen weights",
                (1.0 - g) * 100.0
            ),
            false,
        )
    } else {
        (
            format!(
                "only {:.0}% of the parameter bytes get a gradient: frozen weights, or a backward pass that does not reach most weights (an op without a backward, such as a fused kernel, cuts the graph silently)",
                g * 100.0
            ),
            true,
        )
    };
    Ratio {
        category: Category::Gradients,
        base: Category::Parameters,
        multiple: g,
        meaning,
        drift,
    }
}

/// A multiple of per-weight buffers as an optimizer's formula, when it is one.
fn optimizer_formula(m: f64) -> Option<(&'static str, bool)> {
    [
        (0.0, "no state: SGD without momentum", false),
        (1.0, "one buffer per weight: momentum", false),
        (2.0, "two moments per weight: Adam-like", false),
        (
            3.0,
            "two moments plus one extra copy per weight, e.g. f32 master weights",
            true,
        ),
    ]
    .into_iter()
    .find(|(k, _, _)| near(m, *k))
    .map(|(_, meaning, drift)| (meaning, drift))
}

/// Optimizer state against parameters; where that reads as no formula and only part
/// of the weights train (gradients under the parameters: buffers such as rotary tables
/// built in `t.params`), against the gradients, which measure the weights that train.
fn optimizer_state(c: &CategoryBytes) -> Ratio {
    let o = c[Category::OptimizerState] as f64 / c[Category::Parameters] as f64;
    let trained = c[Category::Gradients] > 0 && c[Category::Gradients] < c[Category::Parameters];
    let by_gradients = c[Category::OptimizerState] as f64 / c[Category::Gradients].max(1) as f64;
    let (base, multiple, meaning, drift) = match optimizer_formula(o) {
        Some((meaning, drift)) => (Category::Parameters, o, meaning.to_owned(), drift),
        None => match optimizer_formula(by_gradients).filter(|_| trained && by_gradients > 0.5) {
            Some((meaning, drift)) => (
                Category::Gradients,
                by_gradients,
                format!(
                    "{meaning}, counting the weights that train ({:.2}× parameters: the rest get no gradient)",
                    o
                ),
                drift,
            ),
            None => (
                Category::Parameters,
                o,
                format!(
                    "between the formulas (0× SGD, 1× momentum, 2× Adam): {o:.2} copies per weight"
                ),
                true,
            ),
        },
    };
    Ratio {
        category: Category::OptimizerState,
        base,
        multiple,
        meaning,
        drift,
    }
}

/// What a hint is computed from: one test's measured figures.
#[derive(Debug, Clone, Copy)]
pub struct Measured<'a> {
    /// The step's peak.
    pub peak_bytes: u64,
    /// The phase the peak happened in.
    pub peak_phase: Option<Phase>,
    /// Bytes per category at the peak.
    pub at_peak: &'a CategoryBytes,
    /// Each category's own peak.
    pub category_peaks: &'a CategoryBytes,
    /// The sweep the figures above are the first point of, if any.
    pub scaling: Option<&'a Sweep>,
}

/// The batch of a sweep's first point and what each sample adds to its activations
/// there, from the sweep's fit (`None` without a `batch` axis).
fn activations_per_sample(sweep: &Sweep) -> Option<(u64, u64)> {
    let first: crate::axes::Point = sweep
        .axes
        .iter()
        .map(|(k, v)| Some((k.clone(), *v.first()?)))
        .collect::<Option<_>>()?;
    let batch = *first.get(BATCH)?;
    let fit = sweep.figures.get(Category::Activations.as_str())?;
    let at = |b: u64| {
        let mut point = first.clone();
        point.insert(BATCH.to_owned(), b);
        fit.predict(&point).ok().map(|p| p.bytes)
    };
    let one_less = batch.checked_sub(1).filter(|&b| b > 0)?;
    Some((batch, at(batch)?.saturating_sub(at(one_less)?)))
}

/// A suggestion with the bytes it would save at the peak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// Bytes at the peak the suggestion would save.
    pub saving_bytes: u64,
    /// The suggestion, in words.
    pub text: String,
}

impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A category must be at least this share of the peak before a hint names it.
const HINT_SHARE: f64 = 0.10;

/// At most three hints, largest saving first.
pub fn hints(m: &Measured<'_>) -> Vec<Hint> {
    let peak = m.peak_bytes;
    if peak == 0 {
        return Vec::new();
    }
    let share = |bytes: u64| bytes as f64 / peak as f64;
    let after = |saved: u64| HumanBytes(peak.saturating_sub(saved));
    let phase = m
        .peak_phase
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "no phase".to_owned());
    let mut out = Vec::new();

    let temps = m.at_peak[Category::Temporaries];
    if share(temps) >= HINT_SHARE {
        let largest_param = m.category_peaks[Category::Parameters];
        let how = match m.peak_phase {
            Some(Phase::OptimizerStep) => "an in-place or fused update",
            Some(Phase::Forward) | Some(Phase::Backward) => "fused kernels or in-place ops",
            _ => "freeing intermediate results earlier",
        };
        let relative = if largest_param > 0 {
            format!(
                " = {:.1}× the parameters",
                temps as f64 / largest_param as f64
            )
        } else {
            String::new()
        };
        out.push(Hint {
            saving_bytes: temps,
            text: format!(
                "temporaries in {phase} are {:.0}% of the peak ({}{relative}): {how} would bring the peak from {} to about {}",
                share(temps) * 100.0,
                HumanBytes(temps),
                HumanBytes(peak),
                after(temps),
            ),
        });
    }

    let acts = m.at_peak[Category::Activations];
    // Without a sweep nothing measured says how activations grow: no hint.
    if share(acts) >= HINT_SHARE
        && let Some((batch, per_sample)) = m.scaling.and_then(activations_per_sample)
    {
        let saved = per_sample.saturating_mul(batch / 2).min(acts);
        if saved > 0 {
            out.push(Hint {
                saving_bytes: saved,
                text: format!(
                    "activations are {:.0}% of the peak at batch {batch} ({} per sample): halving the batch saves about {} (peak about {})",
                    share(acts) * 100.0,
                    HumanBytes(per_sample),
                    HumanBytes(saved),
                    after(saved),
                ),
            });
        }
    }

    let grads = m.at_peak[Category::Gradients];
    if m.peak_phase == Some(Phase::OptimizerStep) && share(grads) >= HINT_SHARE {
        out.push(Hint {
            saving_bytes: grads,
            text: format!(
                "all gradients ({}) are alive at the peak in optimizer_step: releasing each gradient right after its update would bring the peak to about {}",
                HumanBytes(grads),
                after(grads),
            ),
        });
    }

    let opt = m.at_peak[Category::OptimizerState];
    let params = m.category_peaks[Category::Parameters];
    if params > 0 && opt as f64 >= 1.5 * params as f64 && share(opt) >= HINT_SHARE {
        let saved = opt / 4 * 3;
        out.push(Hint {
            saving_bytes: saved,
            text: format!(
                "optimizer state is {:.2}× the parameters ({}): 8-bit moments would save about {} (peak about {})",
                opt as f64 / params as f64,
                HumanBytes(opt),
                HumanBytes(saved),
                after(saved),
            ),
        });
    }

    out.sort_by_key(|h| std::cmp::Reverse(h.saving_bytes));
    out.truncate(3);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peaks(params: u64, grads: u64, opt: u64) -> CategoryBytes {
        CategoryBytes::from([
            (Category::Parameters, params),
            (Category::Gradients, grads),
            (Category::OptimizerState, opt),
        ])
    }

    #[test]
    fn adam_sgd_momentum_and_master_weights_read_as_their_formulas() {
        let cases = [
            (0, "SGD without momentum", false),
            (1000, "momentum", false),
            (2000, "Adam-like", false),
            (3000, "master weights", true),
            (2500, "between the formulas", true),
        ];
        for (opt, meaning, drift) in cases {
            let r = ratios(&peaks(1000, 1000, opt));
            let o = &r[1];
            assert_eq!(o.category, Category::OptimizerState);
            assert!(o.meaning.contains(meaning), "{opt}: {}", o.meaning);
            assert_eq!(o.drift, drift, "{opt}");
        }
    }

    #[test]
    fn gradients_off_one_per_weight_are_flagged() {
        let r = ratios(&peaks(1000, 1000, 0));
        assert!(!r[0].drift);
        assert_eq!(
            r[0].to_string(),
            "gradients 1.00× parameters (one gradient per weight)"
        );
        let r = ratios(&peaks(1000, 2090, 0));
        assert!(r[0].drift);
        assert!(r[0].to_string().contains("2.09×"), "{}", r[0]);
    }

    #[test]
    fn tables_built_with_the_weights_give_no_false_optimizer_hint() {
        // 1000 B of weights that train with AdamW, 227 B of rotary tables built in
        // `t.params` (no gradient, no state): 1000 / 1227 = 0.815 and 2000 / 1227 =
        // 1.63× the parameters, exactly 2× the gradients.
        let r = ratios(&peaks(1227, 1000, 2000));
        assert!(!r[0].drift, "{}", r[0]);
        assert_eq!(
            r[0].to_string(),
            "gradients 0.81× parameters (19% of the parameter bytes get no gradient: buffers built with the weights (rotary tables, masks) or frozen weights)"
        );
        let o = &r[1];
        assert!(!o.drift, "{o}");
        assert_eq!((o.base, o.multiple), (Category::Gradients, 2.0));
        assert!(o.to_string().starts_with("optimizer_state 2.00× gradients (two moments per weight: Adam-like, counting the weights that train (1.63× parameters"), "{o}");
    }

    #[test]
    fn a_gradient_for_few_weights_is_flagged() {
        // candle-transformers' BERT: its fused layer_norm has no backward, so 2 of 39
        // weights get a gradient (5% of the bytes), while AdamW keeps state for all.
        let r = ratios(&peaks(1000, 50, 2000));
        assert!(r[0].drift, "{}", r[0]);
        assert!(
            r[0].to_string().starts_with(
                "gradients 0.05× parameters (only 5% of the parameter bytes get a gradient"
            ),
            "{}",
            r[0]
        );
        assert!(!r[1].drift && r[1].base == Category::Parameters, "{}", r[1]);
        // Half the bytes train: said, not flagged; under half: flagged.
        assert!(!ratios(&peaks(1000, 500, 1000))[0].drift);
        assert!(ratios(&peaks(1000, 499, 998))[0].drift);
        // No gradient at all: frozen, or no backward pass.
        assert!(!ratios(&peaks(1000, 0, 0))[0].drift);
    }

    #[test]
    fn no_parameters_no_ratios() {
        assert!(ratios(&CategoryBytes::default()).is_empty());
    }

    #[test]
    fn hints_come_largest_saving_first_and_at_most_three() {
        let at_peak = CategoryBytes::from([
            (Category::Parameters, 100),
            (Category::Gradients, 100),
            (Category::OptimizerState, 200),
            (Category::Activations, 300),
            (Category::Temporaries, 250),
        ]);
        let h = hints(&Measured {
            peak_bytes: at_peak.total(),
            peak_phase: Some(Phase::OptimizerStep),
            at_peak: &at_peak,
            category_peaks: &at_peak,
            scaling: None,
        });
        assert_eq!(h.len(), 3);
        assert!(h.windows(2).all(|w| w[0].saving_bytes >= w[1].saving_bytes));
        assert_eq!(h[0].saving_bytes, 250, "{h:?}");
        assert!(h[0].text.contains("temporaries in optimizer_step"));
    }

    #[test]
    fn small_categories_give_no_hint() {
        let at_peak =
            CategoryBytes::from([(Category::Parameters, 1000), (Category::Temporaries, 10)]);
        let h = hints(&Measured {
            peak_bytes: at_peak.total(),
            peak_phase: Some(Phase::Forward),
            at_peak: &at_peak,
            category_peaks: &at_peak,
            scaling: None,
        });
        assert!(h.is_empty(), "{h:?}");
    }
}
