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
//! It is a part of [vramtest](https://crates.io/crates/vramtest): `cargo vramtest show
//! --svg`, `--html` and `--markdown` draw with it. What the pictures show is in the book,
//! <https://cargo-vramtest.github.io/cargo-vramtest/> ("Pictures").
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
//! - **Byte axes.** Ticks at round binary sizes (`0, 64 MiB, 128 MiB`) need a unit
//!   and a 1-2-5 step, written once (`scale.rs`) and shared with the Mermaid chart;
//!   plotters would need that same code plus the data rescaled to the unit.
//! - **Size.** Each series is one step path, one command per pixel column at most
//!   and only where the value changes: a 2,000-point, eight-series timeline is about
//!   48 KB here against 148 KB of per-point polygons from plotters. No dependency
//!   either (plotters brings four crates).
//! - **Inlining.** The output has no `id`s and no XML declaration, so several charts
//!   sit in one HTML page as they are.
//!
//! The price is code: the drawing (`svg.rs`) is about 360 lines without its tests,
//! where the plotters prototype of the bare chart took about 40 lines of calls; each
//! point above would have added its own workaround to those.

#![deny(missing_docs)]

pub mod color;
pub mod html;
mod markup;
pub mod mermaid;
mod scale;
pub mod svg;
pub mod term;
pub mod timeline;

pub use color::{CATEGORY_COLORS, category_color};
pub use html::{HtmlReport, TestEnd, TestEntry, html_report};
pub use mermaid::mermaid_xychart;
pub use svg::{SvgOptions, svg};
pub use term::{bars, sparkline};
pub use timeline::{
    DEFAULT_MAX_POINTS, Downsampler, IterationSpan, Peak, PhaseSpan, Timeline, TimelinePoint,
    XAxis, downsample, peak,
};
