//! Pictures of what a vramtest run measured. Every function here is pure: data in,
//! text out, no I/O.
//!
//! - [`timeline`]: the [`Timeline`] a run stores beside its report (live bytes per
//!   category over the step, phases, iterations, the exact peak) and the
//!   [`downsample`] that keeps it at most [`DEFAULT_MAX_POINTS`] points without
//!   losing a spike;
//! - [`svg()`]: the timeline as a stacked-area SVG;
//! - [`html_report`]: one self-contained page for a whole run;
//! - [`mermaid_xychart`]: old against new per category, for PR comments;
//! - [`bars`] and [`sparkline`]: the same for a terminal.
//!
//! Every picture takes its colors from one table, [`CATEGORY_COLORS`].
//!
//! # Why hand-written SVG and not plotters
//!
//! plotters (without default features, SVG backend and area series only) can draw
//! this chart and renders text without a font library (its fallback only estimates
//! text width). It was tried and not chosen, because what the pictures need is
//! simpler to write as SVG text than to get out of plotters:
//!
//! - **Addressable elements.** plotters writes anonymous `<polygon>`s and `<line>`s;
//!   here each category is one `<path class="series" data-category="...">` with a
//!   `<title>` tooltip. Tests find a series by name, and a reader hovering in the
//!   HTML report sees what a band is.
//! - **Byte axes.** Ticks at round binary sizes (`0, 64 MiB, 128 MiB`) are a dozen
//!   lines here; plotters places ticks at round decimal values and would need
//!   a custom coordinate to do the same.
//! - **Size.** A step path that only writes a command where a value changes gives
//!   smaller files than plotters' per-point polygons (a 2,000-point, 8-series
//!   timeline came to 148 KB with plotters), and no dependency (plotters brings four
//!   crates).
//! - **Inlining.** The output has no `id`s and no XML declaration, so several charts
//!   sit in one HTML page as they are.
//!
//! The drawing code ([`svg()`](svg::svg)) is about 300 lines; with plotters it would
//! be fewer lines of chart code plus workarounds for each point above.

pub mod color;
pub mod html;
pub mod mermaid;
mod scale;
pub mod svg;
pub mod term;
pub mod timeline;

pub use color::{CATEGORY_COLORS, category_color};
pub use html::{Report, Status, TestEntry, html_report};
pub use mermaid::mermaid_xychart;
pub use svg::{SvgOptions, svg};
pub use term::{bars, sparkline};
pub use timeline::{
    DEFAULT_MAX_POINTS, IterationSpan, Peak, PhaseSpan, Point, Timeline, XAxis, downsample, peak,
};

/// `text` with the five characters that are special in HTML and XML escaped.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_markup() {
        assert_eq!(
            super::escape(r#"<script>alert("x & 'y'")</script>"#),
            "&lt;script&gt;alert(&quot;x &amp; &#39;y&#39;&quot;)&lt;/script&gt;"
        );
    }
}
