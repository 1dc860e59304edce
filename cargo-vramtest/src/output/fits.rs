//! What `show` adds below a snapshot's tables: the breakdown as bars, the figures
//! against the formulas practitioners use, what batch fits on common GPU memory sizes
//! (from a batch sweep's fit), and hints whose savings come from the measurement.

use std::fmt::Write as _;
use vramtest_model::explain::{self, Measured};
use vramtest_model::fit::{self, Fits, MEMORY_SIZES};
use vramtest_model::{Body, Category, DeviceClass, HumanBytes};

/// How `show` draws: Unicode blocks on a terminal, ASCII elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawing {
    pub unicode: bool,
}

/// The sections under a snapshot's tables. `reserve` is the package's `reserve` (or
/// the default); `totals` the recorded live total over the step, when a run left a
/// timeline.
pub fn render(body: &Body, reserve: Option<u64>, totals: Option<&[u64]>, draw: Drawing) -> String {
    let mut out = String::new();
    out += "\nat the peak\n";
    for line in vramtest_chart::bars(&body.at_peak, 32, draw.unicode).lines() {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(totals) = totals.filter(|t| !t.is_empty()) {
        let _ = writeln!(
            out,
            "\nlive total over the step (0 to {})\n  {}",
            HumanBytes(totals.iter().copied().max().unwrap_or(0)),
            vramtest_chart::sparkline(totals, 64, draw.unicode)
        );
    }
    let ratios = explain::ratios(&body.category_peaks);
    if !ratios.is_empty() {
        out += "\nagainst the formulas\n";
        for r in &ratios {
            let _ = writeln!(out, "  {r}");
        }
    }
    out += &fits(body, reserve);
    let hints = hints(body);
    if !hints.is_empty() {
        out += "\nhints\n";
        for (i, h) in hints.iter().enumerate() {
            let _ = writeln!(out, "  {}. {h}", i + 1);
        }
    }
    out
}

/// At most three hints for a measured body, largest saving first.
pub fn hints(body: &Body) -> Vec<String> {
    let scaling = body
        .scaling
        .as_ref()
        .map(|s| (s, s.batch.first().copied().unwrap_or(1)));
    explain::hints(&Measured {
        peak_bytes: body.peak_bytes,
        peak_phase: body.peak_phase,
        at_peak: &body.at_peak,
        category_peaks: &body.category_peaks,
        scaling,
    })
    .into_iter()
    .map(|h| h.text)
    .collect()
}

/// The "what fits" section: the fit and the largest batch per memory size.
pub fn fits(body: &Body, reserve: Option<u64>) -> String {
    let mut out = String::from("\nwhat fits\n");
    let Some(scaling) = &body.scaling else {
        out += "  no batch sweep: `#[vramtest(batch = [64, 128, 256])]` with `t.batch()` fits every category as fixed + per-sample bytes and says what batch fits\n";
        return out;
    };
    let reserve = reserve.unwrap_or(fit::DEFAULT_RESERVE);
    let sizes: Vec<String> = scaling.batch.iter().map(u64::to_string).collect();
    let _ = writeln!(
        out,
        "  batch sweep {}: peak ≈ {}",
        sizes.join(", "),
        scaling.peak
    );
    for c in Category::ALL {
        if let Some(line) = scaling
            .category_peaks
            .get(&c)
            .filter(|l| l.bytes_per_sample != 0)
        {
            let _ = writeln!(out, "    {c} ≈ {line}");
        }
    }
    if body.device_class == DeviceClass::Cpu {
        let _ = writeln!(
            out,
            "  measured on the CPU: tensor memory only; each size below keeps {} for the CUDA context and libraries (`reserve` in the metadata)",
            HumanBytes(reserve)
        );
    } else {
        let _ = writeln!(
            out,
            "  each size below keeps {} for what the fit does not see (`reserve` in the metadata)",
            HumanBytes(reserve)
        );
    }
    let rows: Vec<(String, &str, String)> = MEMORY_SIZES
        .iter()
        .map(|m| {
            (
                HumanBytes(m.bytes).to_string(),
                m.example,
                describe(fit::largest_batch(&scaling.peak, m.bytes, reserve)),
            )
        })
        .collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(6);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(3);
    let _ = writeln!(out, "  {:<w0$}  {:<w1$}  LARGEST BATCH", "MEMORY", "GPU");
    for (mem, gpu, batch) in rows {
        let _ = writeln!(out, "  {mem:<w0$}  {gpu:<w1$}  {batch}");
    }
    if let Some(b) = scaling.within_budget {
        let _ = writeln!(
            out,
            "  within the budget of {}: {} (a change that lowers it fails)",
            HumanBytes(b.budget_bytes),
            b.largest_batch
                .map_or("any batch".to_owned(), |n| n.to_string())
        );
    }
    out
}

fn describe(fits: Fits) -> String {
    match fits {
        Fits::Any => "any (the peak does not grow with the batch)".into(),
        Fits::UpTo(0) => "none (not even one sample)".into(),
        Fits::UpTo(n) => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use vramtest_model::fit::{Linear, Scaling};

    /// The committed candle-mlp AdamW snapshot, with a sweep's model added.
    fn body(scaling: bool) -> Body {
        let text = include_str!("../../tests/data/mlp_adamw@cpu.snap");
        let mut body = vramtest_model::snapshot::parse(text).unwrap().body;
        if scaling {
            let line = |fixed, per| Linear {
                fixed_bytes: fixed,
                bytes_per_sample: per,
            };
            let mut category_peaks = BTreeMap::new();
            for c in Category::ALL {
                category_peaks.insert(c, line(0, 0));
            }
            category_peaks.insert(Category::Activations, line(4096, 6_200));
            category_peaks.insert(Category::Inputs, line(0, 3_140));
            body.scaling = Some(
                Scaling {
                    batch: vec![32, 64, 128],
                    peak: line(10 << 20, 12_288),
                    category_peaks,
                    within_budget: None,
                }
                .with_budget(Some(1 << 30)),
            );
        }
        body
    }

    #[test]
    fn show_explains_a_sweep() {
        let text = render(
            &body(true),
            None,
            Some(&[1, 5, 3, 9, 2]),
            Drawing { unicode: false },
        );
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_largest_batch_per_memory_size_follows_the_fit() {
        let text = fits(&body(true), Some(2 << 30));
        // 24 GiB − 2 GiB reserve − 10 MiB fixed, over 12 KiB per sample.
        let expected = ((24u64 << 30) - (2 << 30) - (10 << 20)) / 12_288;
        let row = text.lines().find(|l| l.contains("RTX 4090")).unwrap();
        assert!(row.ends_with(&expected.to_string()), "{row} vs {expected}");
    }

    #[test]
    fn without_a_sweep_show_says_how_to_get_one() {
        let text = render(&body(false), None, None, Drawing { unicode: true });
        assert!(text.contains("no batch sweep"), "{text}");
        assert!(text.contains("against the formulas"), "{text}");
    }
}
