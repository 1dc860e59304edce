//! Old against new per category as a Mermaid `xychart-beta` block, which GitHub draws
//! in PR comments and job summaries.

use crate::scale::{byte_axis, decimals};
use std::fmt::Write;
use vramtest_model::{Category, CategoryBytes};

/// A fenced ```` ```mermaid ```` block: one bar per category for the snapshot (`old`)
/// and a line for this run (`new`), in one binary unit chosen for the larger side.
/// Only categories that hold bytes on either side are shown. Mermaid's xychart has no
/// legend, so the title says which is which.
pub fn mermaid_xychart(title: &str, old: &CategoryBytes, new: &CategoryBytes) -> String {
    let mut shown: Vec<Category> = Category::ALL
        .into_iter()
        .filter(|&c| old[c] > 0 || new[c] > 0)
        .collect();
    if shown.is_empty() {
        shown = Category::ALL.to_vec();
    }
    let max = shown
        .iter()
        .flat_map(|&c| [old[c], new[c]])
        .max()
        .unwrap_or(0);
    let axis = byte_axis(max);
    let (unit, unit_name) = axis.unit;
    let top = axis.top as f64 / unit as f64;
    let step = axis.ticks.get(1).map_or(1.0, |t| t.0 as f64 / unit as f64);
    let places = decimals(step);
    let values = |side: &CategoryBytes| {
        shown
            .iter()
            .map(|&c| format!("{:.2}", side[c] as f64 / unit as f64))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let labels = shown
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut s = String::from("```mermaid\nxychart-beta\n");
    let _ = writeln!(
        s,
        "    title \"{}: snapshot (bars) vs this run (line), {unit_name}\"",
        quote_safe(title)
    );
    let _ = writeln!(s, "    x-axis \"category\" [{labels}]");
    let _ = writeln!(s, "    y-axis \"{unit_name}\" 0 --> {top:.places$}");
    let _ = writeln!(s, "    bar [{}]", values(old));
    let _ = writeln!(s, "    line [{}]", values(new));
    s.push_str("```\n");
    s
}

/// Text that can sit inside a Mermaid double-quoted string: no quotes, no line breaks,
/// no backticks (which would end the Markdown fence).
fn quote_safe(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' | '`' => '\'',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_cannot_break_out_of_their_quotes_or_the_fence() {
        assert_eq!(quote_safe("a \"b\"\n```c"), "a 'b' '''c");
    }

    #[test]
    fn values_are_in_one_unit_and_only_nonzero_categories_are_shown() {
        let mut old = CategoryBytes::default();
        let mut new = CategoryBytes::default();
        old[Category::Parameters] = 3 << 20;
        new[Category::Parameters] = 3 << 20;
        new[Category::Activations] = 5 << 19;
        let chart = mermaid_xychart("t", &old, &new);
        assert!(chart.contains("x-axis \"category\" [\"parameters\", \"activations\"]"));
        assert!(chart.contains("    bar [3.00, 0.00]\n"), "{chart}");
        assert!(chart.contains("    line [3.00, 2.50]\n"), "{chart}");
        assert!(chart.contains("y-axis \"MiB\" 0 --> 3\n"), "{chart}");
    }
}
