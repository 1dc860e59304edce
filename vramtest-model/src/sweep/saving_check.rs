//! A recorded `saving` checked against the snapshot's own fits when read. The lever
//! gate judges the saving the fits predict ([`Sweep::saving_at`]), so a saving edited
//! by hand (zeroed, say, which would turn the gate off) changes nothing it decides; and
//! one that contradicts the fits is an error naming the field, as any figure that
//! contradicts the others is: no run writes such a file.
//!
//! A contradiction is a figure more than [`SLACK_PERMILLE`] of the baseline's predicted
//! peak away from the fits' figure: a saving recorded by an older release, whose
//! predictions rounded differently, still reads. Each variant's `cpu_time_ratio` is
//! checked here too: a ratio no run records (0 ranks first, `1e308` prints 309 digits)
//! is an error naming the field.

use super::{Saving, Sweep, show_point, show_variant};
use crate::category::Category;

/// How far a recorded figure may lie from the fits' own, in thousandths of the
/// baseline's predicted peak at the saving's point.
pub const SLACK_PERMILLE: u64 = 10;

/// A recorded figure of a saving and the fits' own, by field name.
fn figures(s: &Saving) -> Vec<(String, i128)> {
    let mut out = vec![("peak_bytes".to_owned(), i128::from(s.peak_bytes))];
    for c in Category::ALL {
        let (saved, of) = s.of(Some(c));
        out.push((format!("category_bytes.{c}"), i128::from(saved)));
        out.push((format!("baseline_category_bytes.{c}"), i128::from(of)));
    }
    out.push((
        "baseline_peak_bytes".to_owned(),
        i128::from(s.baseline_peak_bytes),
    ));
    out
}

impl Sweep {
    /// Checks each variant's recorded `saving` against the saving its fits and the
    /// baseline's predict at its `at`, and its `cpu_time_ratio` against the range a
    /// run records ([`crate::cpu_time::CpuTimeRatio::check`]). `Err`: the field at
    /// fault (its path in the body, `scaling.variants[0].saving.peak_bytes`) and why.
    pub fn check_savings(&self) -> Result<(), (String, String)> {
        let grid = self.grid().ok();
        for (i, variant) in self.variants.iter().enumerate() {
            variant
                .cpu_time_ratio
                .check()
                .map_err(|e| (format!("scaling.variants[{i}].cpu_time_ratio"), e))?;
            let Some(recorded) = &variant.saving else {
                continue;
            };
            let field = |name: &str| format!("scaling.variants[{i}].saving.{name}");
            if let Some(Err(e)) = grid.as_ref().map(|g| g.check_point(&recorded.at)) {
                return Err((field("at"), format!("no point of the sweep: {e}")));
            }
            let Some(derived) = self.saving_of(&variant.sweep, &recorded.at) else {
                continue;
            };
            let slack = i128::from(derived.baseline_peak_bytes) * i128::from(SLACK_PERMILLE) / 1000;
            let pairs = figures(recorded).into_iter().zip(figures(&derived));
            for ((name, was), (_, fitted)) in pairs {
                if (was - fitted).abs() > slack {
                    return Err((
                        field(&name),
                        format!(
                            "{was} B, but the snapshot's own fits give {fitted} B at ({}) for `{}` against the baseline: was it edited by hand?",
                            show_point(&recorded.at),
                            show_variant(&variant.variant)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
