//! `show TEST --sites`: where the memory of each category was allocated, from a re-run
//! that captured stack traces.

use std::fmt::Write as _;
use vramtest_model::sites::{Capture, Site, Sites};
use vramtest_model::{Body, HumanBytes};

/// How many sites each list shows.
pub const SHOWN: usize = 5;

/// The sites of one test: a line about the run, then per category its bytes at the
/// peak and its top sites (and, where its own peak is higher, the sites there).
pub fn render(test: &str, body: Option<&Body>, sites: &Sites) -> String {
    let mut out = String::new();
    let _ = write!(out, "call sites of {test} (cpu");
    if let Some(b) = body {
        let _ = write!(out, ", peak {}", HumanBytes(b.peak_bytes));
        if let Some(p) = b.peak_phase {
            let _ = write!(out, " in {p}");
        }
        if let Some(i) = b.peak_iteration {
            let _ = write!(out, ", iteration {i}");
        }
    }
    out += ")\n";
    let how = match sites.capture {
        Capture::Planned => "for the blocks alive at the peaks",
        Capture::Everything => "for every allocation",
    };
    let _ = writeln!(out, "{} stack traces captured {how}", sites.traces);
    for note in &sites.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for c in &sites.categories {
        let _ = writeln!(out, "\n{} {} at the peak", c.category, HumanBytes(c.bytes));
        table(&mut out, &c.sites);
        if let Some(own) = &c.own_peak {
            let _ = writeln!(
                out,
                "  its own peak: {}{}",
                HumanBytes(own.bytes),
                own.phase.map(|p| format!(" in {p}")).unwrap_or_default()
            );
            table(&mut out, &own.sites);
        }
    }
    out
}

fn table(out: &mut String, sites: &[Site]) {
    let shown = &sites[..sites.len().min(SHOWN)];
    let width = shown
        .iter()
        .map(|s| location(s).chars().count())
        .max()
        .unwrap_or(0);
    for s in shown {
        let blocks = format!("{} block{}", s.count, if s.count == 1 { "" } else { "s" });
        let _ = writeln!(
            out,
            "  {:>10}  {blocks:<10}  {:<width$}  {}",
            HumanBytes(s.bytes).to_string(),
            location(s),
            s.key.operation.as_deref().unwrap_or("-"),
        );
    }
    if sites.len() > shown.len() {
        let rest: u64 = sites[shown.len()..].iter().map(|s| s.bytes).sum();
        let _ = writeln!(
            out,
            "  {:>10}  in {} more site{}",
            HumanBytes(rest).to_string(),
            sites.len() - shown.len(),
            if sites.len() - shown.len() == 1 {
                ""
            } else {
                "s"
            }
        );
    }
}

/// The line of the user's, with the functions that led there from the step.
fn location(s: &Site) -> String {
    let line = s.key.location.as_deref().unwrap_or("(no line of yours)");
    match &s.key.callers {
        Some(callers) => format!("{line} in {callers}"),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_model::Category;
    use vramtest_model::Phase;
    use vramtest_model::sites::{CategorySites, OwnPeak, SiteKey};

    fn site(bytes: u64, count: u64, location: Option<&str>, op: &str) -> Site {
        Site {
            bytes,
            count,
            key: SiteKey {
                operation: Some(op.into()),
                location: location.map(str::to_owned),
                callers: None,
            },
        }
    }

    #[test]
    fn sites_per_category_with_an_own_peak() {
        let sites = Sites {
            capture: Capture::Planned,
            traces: 930,
            categories: vec![
                CategorySites {
                    category: Category::Activations,
                    bytes: 412_412,
                    sites: (0..7)
                        .map(|i| {
                            site(
                                131_072 >> i,
                                1,
                                Some(&format!("src/lib.rs:{}", 77 + i)),
                                "candle_core::cpu_backend::utils::unary_map_vec",
                            )
                        })
                        .collect(),
                    own_peak: None,
                },
                CategorySites {
                    category: Category::Temporaries,
                    bytes: 1_605_632,
                    sites: vec![site(
                        1_605_632,
                        1,
                        Some("tests/vram.rs:24"),
                        "candle_core::cpu_backend::utils::binary_map_vec_par",
                    )],
                    own_peak: Some(OwnPeak {
                        bytes: 22_482_432,
                        phase: Some(Phase::OptimizerStep),
                        sites: vec![site(
                            14_450_688,
                            9,
                            None,
                            "candle_core::cpu_backend::utils::unary_map",
                        )],
                    }),
                },
            ],
            notes: vec!["an example note".into()],
        };
        insta::assert_snapshot!(render("candle-mlp::vram::mlp_adamw", None, &sites));
    }
}
