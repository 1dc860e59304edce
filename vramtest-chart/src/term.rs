//! Pictures for a terminal: one bar per category and a sparkline of the live total.
//! Both have a plain-ASCII form for pipes, dumb terminals and `NO_COLOR`.

use vramtest_model::{Category, CategoryBytes, HumanBytes};

const EIGHTHS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
const ASCII_LEVELS: [char; 8] = ['_', '.', ',', '-', '=', '+', '*', '#'];

/// One line per category that holds bytes: its name, a bar of up to `width` cells
/// scaled to the largest category, and its size. `unicode` draws with block
/// characters to an eighth of a cell; otherwise with `#`. Any nonzero category gets a
/// visible bar.
pub fn bars(live: &CategoryBytes, width: usize, unicode: bool) -> String {
    let shown: Vec<(Category, u64)> = live.iter().filter(|&(_, v)| v > 0).collect();
    let max = shown.iter().map(|&(_, v)| v).max().unwrap_or(0);
    let name_width = shown
        .iter()
        .map(|(c, _)| c.as_str().len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (category, v) in shown {
        let bar = if unicode {
            let eighths = ((u128::from(v) * width as u128 * 8 / u128::from(max)) as usize).max(1);
            let mut bar = "█".repeat(eighths / 8);
            if !eighths.is_multiple_of(8) {
                bar.push(EIGHTHS[eighths % 8]);
            }
            bar
        } else {
            let cells = ((u128::from(v) * width as u128 * 2 + u128::from(max))
                / (2 * u128::from(max))) as usize;
            "#".repeat(cells.max(1))
        };
        let pad = width.saturating_sub(bar.chars().count());
        out.push_str(&format!(
            "{:<name_width$}  {bar}{:pad$}  {}\n",
            category.as_str(),
            "",
            HumanBytes(v)
        ));
    }
    out
}

/// The live total over the step in at most `width` characters, from zero (lowest
/// character) to the highest total (highest character). When there are more totals
/// than characters, each character shows the highest total it covers, so a spike is
/// never lost.
pub fn sparkline(totals: &[u64], width: usize, unicode: bool) -> String {
    let levels = if unicode { LEVELS } else { ASCII_LEVELS };
    let columns: Vec<u64> = if totals.len() <= width {
        totals.to_vec()
    } else {
        let n = totals.len();
        (0..width)
            .map(|j| {
                let (a, b) = (j * n / width, (j + 1) * n / width);
                totals[a..b].iter().copied().max().unwrap_or(0)
            })
            .collect()
    };
    let max = columns.iter().copied().max().unwrap_or(0);
    columns
        .into_iter()
        .map(|v| {
            if max == 0 {
                levels[0]
            } else {
                levels[(u128::from(v) * 7 / u128::from(max)) as usize]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(pairs: &[(Category, u64)]) -> CategoryBytes {
        let mut b = CategoryBytes::default();
        for &(c, v) in pairs {
            b[c] = v;
        }
        b
    }

    #[test]
    fn bars_scale_to_the_largest_category_and_align() {
        let b = live(&[
            (Category::Parameters, 4 << 20),
            (Category::OptimizerState, 8 << 20),
            (Category::Activations, 1 << 20),
        ]);
        let text = bars(&b, 8, true);
        assert_eq!(
            text,
            "parameters       ████      4.00 MiB\n\
             optimizer_state  ████████  8.00 MiB\n\
             activations      █         1.00 MiB\n"
        );
        let ascii = bars(&b, 8, false);
        assert_eq!(
            ascii,
            "parameters       ####      4.00 MiB\n\
             optimizer_state  ########  8.00 MiB\n\
             activations      #         1.00 MiB\n"
        );
        assert!(ascii.is_ascii());
    }

    #[test]
    fn bars_draw_eighths_and_never_hide_a_small_category() {
        let b = live(&[
            (Category::Gradients, 80),
            (Category::Inputs, 13),
            (Category::Workspace, 1),
        ]);
        let text = bars(&b, 2, true);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("██"), "{text}");
        // 13/80 of 16 eighths is 2.6: two eighths.
        assert!(lines[1].contains("inputs     ▎ "), "{text}");
        assert!(lines[2].contains('▏'), "{text}");
        assert_eq!(bars(&CategoryBytes::default(), 10, true), "");
    }

    #[test]
    fn sparkline_keeps_spikes_when_squeezed() {
        assert_eq!(sparkline(&[0, 1, 2, 3, 4, 5, 6, 7], 8, true), "▁▂▃▄▅▆▇█");
        assert_eq!(sparkline(&[0, 1, 2, 3, 4, 5, 6, 7], 8, false), "_.,-=+*#");
        let mut totals = vec![10u64; 1000];
        totals[501] = 1000;
        let line = sparkline(&totals, 10, true);
        assert_eq!(line.chars().count(), 10);
        assert_eq!(line, "▁▁▁▁▁█▁▁▁▁");
        assert_eq!(sparkline(&[0, 0], 5, true), "▁▁");
        assert_eq!(sparkline(&[], 5, true), "");
        assert_eq!(sparkline(&[5, 6], 0, true), "");
    }
}
