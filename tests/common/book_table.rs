//! The measured-against-predicted tables of the book's "Predicting the full size"
//! (`docs/src/guide/predicting.md`): each is one recorded run of a slow end-to-end
//! test, kept between `<!-- table: NAME -->` and `<!-- end table -->`. A test hands its
//! run's rows to [`check`]: with `VRAMTEST_UPDATE_BOOK=1` the table is rewritten from
//! them; without, the test fails when the book's table is not one this run bears out:
//! a row missing or extra, an `off` its own two columns do not give, or a figure
//! further from this run's than the test's own bounds (3% a tensor category, 5% the
//! peak). Shared by the candle test (cargo-vramtest's tests) and the burn test (the
//! root crate's) through `#[path]`.

use std::path::Path;
use vramtest_model::Category;
use vramtest_model::bytes::Grouped;

/// One row: a category (or `peak`), measured and predicted bytes.
pub struct Row {
    /// `parameters`, .., `peak`.
    pub name: &'static str,
    /// The direct measurement.
    pub measured: u64,
    /// The prediction from the sweep.
    pub predicted: u64,
    /// How far this row's figures may be from the book's: 3.0 (percent) for a tensor
    /// category, 5.0 for the peak.
    pub bound: f64,
}

/// The rows of a table: each tensor category's (measured, predicted) bytes from
/// `bytes`, each held to 3%, then the peak's, held to 5%.
pub fn rows(bytes: impl Fn(Category) -> (u64, u64), peak: (u64, u64)) -> Vec<Row> {
    let mut rows: Vec<Row> = Category::TENSORS
        .iter()
        .map(|&c| {
            let (measured, predicted) = bytes(c);
            Row {
                name: c.as_str(),
                measured,
                predicted,
                bound: 3.0,
            }
        })
        .collect();
    rows.push(Row {
        name: "peak",
        measured: peak.0,
        predicted: peak.1,
        bound: 5.0,
    });
    rows
}

/// `|predicted − measured| / measured` as the book writes it: `0` when equal, three
/// decimals under 0.01%, else two.
pub fn off(predicted: u64, measured: u64) -> String {
    if predicted == measured {
        return "0".to_owned();
    }
    let p = (predicted as f64 - measured as f64).abs() / measured as f64 * 100.0;
    if p < 0.01 {
        format!("{p:.3}%")
    } else {
        format!("{p:.2}%")
    }
}

/// The markdown table of `rows`.
pub fn render(rows: &[Row]) -> String {
    let mut out =
        "| category | measured | predicted | off |\n| --- | ---: | ---: | ---: |\n".to_owned();
    for r in rows {
        out += &format!(
            "| {} | {} B | {} B | {} |\n",
            r.name,
            Grouped(r.measured),
            Grouped(r.predicted),
            off(r.predicted, r.measured)
        );
    }
    out
}

/// `1,234,567 B` back to bytes.
fn parse_bytes(cell: &str) -> Option<u64> {
    cell.strip_suffix(" B")?.replace(',', "").parse().ok()
}

/// Whether `book` is within `bound` percent of `run`.
fn near(book: u64, run: u64, bound: f64) -> bool {
    run.abs_diff(book) as f64 <= run as f64 * bound / 100.0
}

/// Checks (or, with `VRAMTEST_UPDATE_BOOK=1`, rewrites) the book's table `name` against
/// this run's `rows`; `repo` is the repository's root.
pub fn check(repo: &Path, name: &str, rows: &[Row]) {
    let path = repo.join("docs/src/guide/predicting.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = format!("<!-- table: {name} -->\n");
    let end = "<!-- end table -->";
    let from = text
        .find(&start)
        .unwrap_or_else(|| panic!("{}: no `{}`", path.display(), start.trim()))
        + start.len();
    let to = from
        + text[from..]
            .find(end)
            .unwrap_or_else(|| panic!("{}: `{}` is not closed", path.display(), start.trim()));
    if std::env::var_os("VRAMTEST_UPDATE_BOOK").is_some() {
        let new = format!("{}{}{}", &text[..from], render(rows), &text[to..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    let hint = format!(
        "{}: the table `{name}` is not borne out by this run (rewrite it from a run with VRAMTEST_UPDATE_BOOK=1):\n{}",
        path.display(),
        render(rows)
    );
    let book: Vec<Vec<&str>> = text[from..to]
        .lines()
        .skip(2)
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(book.len(), rows.len(), "{hint}");
    for (cells, row) in book.iter().zip(rows) {
        let [label, measured, predicted, shown] = cells[..] else {
            panic!("{hint}\nnot four cells: {cells:?}")
        };
        assert_eq!(label, row.name, "{hint}");
        let (m, p) = (
            parse_bytes(measured).unwrap_or_else(|| panic!("{hint}\n{measured}")),
            parse_bytes(predicted).unwrap_or_else(|| panic!("{hint}\n{predicted}")),
        );
        assert_eq!(
            shown,
            off(p, m),
            "{hint}\n{label}: `off` from its own columns"
        );
        assert!(
            near(m, row.measured, row.bound) && near(p, row.predicted, row.bound),
            "{hint}\n{label}: more than {}% from this run",
            row.bound
        );
    }
}
