//! The marks of doubt on a table's rows and the legend that explains them: `*` on a
//! row that rests on a flagged fit, `!` on an impossible one (a category predicted
//! above its own peak), each legend line naming the rows and what flags them.

use std::fmt::Write as _;
use vramtest_model::doubt::{Doubt, FLAGGED_MARK, IMPOSSIBLE_MARK};
use vramtest_model::{Category, HumanBytes};

/// One row of a table as the legend names it.
pub(super) struct MarkedRow {
    /// The row's label as the table shows it (`row 3`, `16.00 GiB`, `activations`).
    pub label: String,
    /// Its doubt.
    pub doubt: Doubt,
    /// Its predicted categories (for what an impossible row's categories exceed).
    pub category_bytes: Vec<(Category, u64)>,
    /// Its predicted peak.
    pub peak_bytes: u64,
}

impl MarkedRow {
    /// A row labelled `label` with `doubt`, for figures `category_bytes` and `peak`.
    pub(super) fn new(
        label: String,
        doubt: Doubt,
        category_bytes: impl IntoIterator<Item = (Category, u64)>,
        peak_bytes: u64,
    ) -> MarkedRow {
        MarkedRow {
            label,
            doubt,
            category_bytes: category_bytes.into_iter().collect(),
            peak_bytes,
        }
    }
}

/// `label` followed by the row's marks (`3*`, `4*!`).
pub(super) fn marked(label: &str, doubt: &Doubt) -> String {
    format!("{label}{}", doubt.marks())
}

/// The legend of the marks `rows` carry, one wrapped line per mark, or nothing when no
/// row is marked. Rows resting on the same flagged fits are named together.
pub(super) fn legend(rows: &[MarkedRow]) -> String {
    let mut out = String::new();
    let mut groups: Vec<(&[String], Vec<&str>)> = Vec::new();
    for r in rows.iter().filter(|r| !r.doubt.flagged.is_empty()) {
        match groups
            .iter_mut()
            .find(|(f, _)| *f == r.doubt.flagged.as_slice())
        {
            Some((_, labels)) => labels.push(&r.label),
            None => groups.push((&r.doubt.flagged, vec![&r.label])),
        }
    }
    if !groups.is_empty() {
        let every = rows.len() > 1 && groups.len() == 1 && groups[0].1.len() == rows.len();
        let named: Vec<String> = groups
            .iter()
            .map(|(flagged, labels)| {
                let who = if every {
                    "every row".to_owned()
                } else {
                    labels.join(", ")
                };
                format!("{who}: {}", flagged.join(", "))
            })
            .collect();
        let text = format!(
            "{FLAGGED_MARK} rests on a flagged fit (a held-out point missed by over 2%, a fit that interpolates, or one that falls or rests on a negative term here; `show --at` says which and how), not to be trusted: {}",
            named.join("; ")
        );
        out += &wrap(&text, 96, "  ", "    ");
    }
    let impossible: Vec<String> = rows
        .iter()
        .filter(|r| !r.doubt.impossible.is_empty())
        .map(|r| {
            let over: Vec<String> = r
                .category_bytes
                .iter()
                .filter(|(c, _)| r.doubt.impossible.contains(c))
                .map(|(c, b)| format!("{c} {}", HumanBytes(*b)))
                .collect();
            format!(
                "{} ({} over the peak {})",
                r.label,
                over.join(", "),
                HumanBytes(r.peak_bytes)
            )
        })
        .collect();
    if !impossible.is_empty() {
        let text = format!(
            "{IMPOSSIBLE_MARK} impossible: a category predicted above the row's own peak, which no step can hold, so the category's fit or the peak's is wrong and no saving is read from it: {}",
            impossible.join("; ")
        );
        out += &wrap(&text, 96, "  ", "    ");
    }
    out
}

/// `text` in lines of at most `width` columns where words allow, the first line after
/// `first`, the others after `rest`.
pub(super) fn wrap(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_owned();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            out += line.trim_end();
            out += "\n";
            line = rest.to_owned();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line += word;
        empty = false;
    }
    let _ = writeln!(out, "{}", line.trim_end());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, flagged: &[&str], activations: u64, peak: u64) -> MarkedRow {
        let doubt = Doubt {
            flagged: flagged.iter().map(|f| (*f).to_owned()).collect(),
            impossible: vramtest_model::doubt::over_peak(
                [(Category::Activations, activations)],
                peak,
            ),
        };
        MarkedRow::new(
            label.to_owned(),
            doubt,
            [(Category::Activations, activations)],
            peak,
        )
    }

    #[test]
    fn the_legend_names_each_marked_row_and_what_flags_it() {
        let rows = [
            row("1", &["activations", "phase backward"], 10, 100),
            row("2", &[], 10, 100),
            row("3", &["activations", "phase backward"], 10, 100),
            row("4", &["peak"], 1 << 40, 1 << 30),
        ];
        assert_eq!(marked("4", &rows[3].doubt), "4*!");
        assert_eq!(marked("2", &rows[1].doubt), "2");
        let text = legend(&rows);
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("not to be trusted: 1, 3: activations, phase backward; 4: peak"),
            "{text}"
        );
        assert!(
            flat.contains("4 (activations 1.00 TiB over the peak 1.00 GiB)"),
            "{text}"
        );
        assert!(text.lines().all(|l| l.chars().count() <= 96), "{text}");
        assert_eq!(legend(&rows[1..2]), "");
        // Every row on the same flagged fits: said once.
        let same = [row("a", &["peak"], 1, 2), row("b", &["peak"], 1, 2)];
        assert!(
            legend(&same).contains("every row: peak"),
            "{}",
            legend(&same)
        );
    }

    #[test]
    fn wrap_keeps_lines_within_the_width() {
        let text = "word ".repeat(50);
        for line in wrap(&text, 30, "  ", "    ").lines() {
            assert!(line.len() <= 30, "{line}");
        }
        assert_eq!(wrap("a b", 30, "- ", "  "), "- a b\n");
    }
}
