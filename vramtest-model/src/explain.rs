//! Measured figures explained against the formulas practitioners use: each category as
//! a multiple of `parameters` with its textbook meaning, and hints whose savings are
//! computed from the measurement (never generic advice).

use crate::bytes::HumanBytes;
use crate::category::{Category, Phase};
use crate::fit::Scaling;
use crate::profile::CategoryBytes;
use std::fmt;

/// How far a multiple may sit from a whole number and still read as that formula.
pub const FORMULA_SLACK: f64 = 0.05;

/// One category as a multiple of the parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Ratio {
    /// The category compared with the parameters.
    pub category: Category,
    /// `category bytes / parameter bytes`.
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
            "{} {:.2}× parameters ({})",
            self.category, self.multiple, self.meaning
        )?;
        if self.drift {
            f.write_str(" [check]")?;
        }
        Ok(())
    }
}

/// `gradients` and `optimizer_state` against `parameters`, from each category's own
/// peak. Empty when the test has no parameters to compare with.
pub fn ratios(category_peaks: &CategoryBytes) -> Vec<Ratio> {
    let params = category_peaks.parameters;
    if params == 0 {
        return Vec::new();
    }
    let multiple = |c: Category| category_peaks[c] as f64 / params as f64;
    let near = |m: f64, k: f64| (m - k).abs() <= FORMULA_SLACK;
    let mut out = Vec::new();

    let g = multiple(Category::Gradients);
    let (meaning, drift) = if near(g, 1.0) {
        ("one gradient per weight".to_owned(), false)
    } else if near(g, 0.0) {
        (
            "no gradients kept: frozen weights or no backward pass".to_owned(),
            false,
        )
    } else {
        (
            format!(
                "the formula is 1× (one gradient per weight): {:+.2}× unexplained, e.g. an extra copy or a cache charged to gradients",
                g - 1.0
            ),
            true,
        )
    };
    out.push(Ratio {
        category: Category::Gradients,
        multiple: g,
        meaning,
        drift,
    });

    let o = multiple(Category::OptimizerState);
    let (meaning, drift) = if near(o, 0.0) {
        ("no state: SGD without momentum".to_owned(), false)
    } else if near(o, 1.0) {
        ("one buffer per weight: momentum".to_owned(), false)
    } else if near(o, 2.0) {
        ("two moments per weight: Adam-like".to_owned(), false)
    } else if near(o, 3.0) {
        (
            "two moments plus one extra copy per weight, e.g. f32 master weights".to_owned(),
            true,
        )
    } else {
        (
            format!(
                "between the formulas (0× SGD, 1× momentum, 2× Adam): {:.2} copies per weight",
                o
            ),
            true,
        )
    };
    out.push(Ratio {
        category: Category::OptimizerState,
        multiple: o,
        meaning,
        drift,
    });
    out
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
    /// The batch sweep's model and the batch the figures above were measured at.
    pub scaling: Option<(&'a Scaling, u64)>,
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

    let temps = m.at_peak.temporaries;
    if share(temps) >= HINT_SHARE {
        let largest_param = m.category_peaks.parameters;
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

    let acts = m.at_peak.activations;
    // Without a sweep nothing measured says how activations grow: no hint.
    if share(acts) >= HINT_SHARE
        && let Some((scaling, batch)) = m.scaling
    {
        let per_sample = scaling
            .category_peaks
            .get(&Category::Activations)
            .map(|l| l.bytes_per_sample.max(0) as u64)
            .unwrap_or(0);
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

    let grads = m.at_peak.gradients;
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

    let opt = m.at_peak.optimizer_state;
    let params = m.category_peaks.parameters;
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
        CategoryBytes {
            parameters: params,
            gradients: grads,
            optimizer_state: opt,
            ..CategoryBytes::default()
        }
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
    fn no_parameters_no_ratios() {
        assert!(ratios(&CategoryBytes::default()).is_empty());
    }

    #[test]
    fn hints_come_largest_saving_first_and_at_most_three() {
        let at_peak = CategoryBytes {
            parameters: 100,
            gradients: 100,
            optimizer_state: 200,
            activations: 300,
            temporaries: 250,
            ..CategoryBytes::default()
        };
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
        let at_peak = CategoryBytes {
            parameters: 1000,
            temporaries: 10,
            ..CategoryBytes::default()
        };
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
