//! The memory timeline as a stacked-area SVG: one filled series per category, phases
//! shaded and labelled, iterations marked, the peak marked with its figure.

use crate::color::{GRID, INK, PEAK, category_color};
use crate::markup::escape;
use crate::scale::{ByteAxis, byte_axis, count_ticks};
use crate::timeline::{Peak, Timeline, TimelinePoint};
use std::fmt::Write;
use vramtest_model::{Category, HumanBytes};

/// Size and title of a timeline picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SvgOptions {
    /// Pixels; at least 400 are used.
    pub width: u32,
    /// Pixels; at least 200 are used.
    pub height: u32,
    /// Drawn above the chart (usually the test's name).
    pub title: Option<String>,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions {
            width: 900,
            height: 360,
            title: None,
        }
    }
}

/// Margins around the plot: tick labels on the left, the legend on the right, the
/// title and iteration labels above, the x axis below.
const LEFT: f64 = 72.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 38.0;
/// About the width of one character of 11 px sans-serif text, for fitting labels.
const CHAR_WIDTH: f64 = 6.3;

/// Maps data to pixels.
struct PlotFrame {
    x0: u64,
    x1: u64,
    top_bytes: u64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

impl PlotFrame {
    fn px(&self, x: u64) -> f64 {
        let span = (self.x1 - self.x0).max(1) as f64;
        self.left + x.saturating_sub(self.x0) as f64 / span * (self.right - self.left)
    }

    /// When one x unit is narrower than a pixel: the number of pixel columns and the
    /// width of each.
    fn columns(&self) -> Option<(u64, f64)> {
        let width = self.right - self.left;
        let columns = width.floor().max(1.0) as u64;
        (self.x1 - self.x0 > columns).then(|| (columns, width / columns as f64))
    }

    fn column(&self, x: u64, columns: u64) -> u64 {
        let span = (self.x1 - self.x0).max(1);
        (u128::from(x.saturating_sub(self.x0)) * u128::from(columns) / u128::from(span)) as u64
    }

    /// The middle of the step (or pixel column) that shows `x`.
    fn center(&self, x: u64) -> f64 {
        match self.columns() {
            Some((columns, width)) => self.left + (self.column(x, columns) as f64 + 0.5) * width,
            None => (self.px(x) + self.px(x + 1)) / 2.0,
        }
    }

    /// The steps to draw, as `(left edge in pixels, point)`, and the right edge of the
    /// last. Each point lasts until the next. Where one x unit is narrower than a
    /// pixel, each pixel column shows the highest total live in it (the point before
    /// the column counts, as it is live at the column's start), so no spike is thinner
    /// than a pixel or lost; a run of columns without points shows the last value.
    fn steps(&self, points: &[TimelinePoint]) -> (Vec<(f64, TimelinePoint)>, f64) {
        let Some(last) = points.last() else {
            return (Vec::new(), self.left);
        };
        let Some((columns, width)) = self.columns() else {
            let steps = points.iter().map(|p| (self.px(p.x), *p)).collect();
            return (steps, self.px(last.x + 1));
        };
        let mut out: Vec<(u64, TimelinePoint)> = Vec::new();
        let mut previous: Option<TimelinePoint> = None;
        for p in points {
            let c = self.column(p.x, columns);
            match out.last_mut() {
                Some((col, best)) if *col == c => {
                    if p.total() > best.total() {
                        *best = *p;
                    }
                }
                last_column => {
                    let last_column = last_column.map(|(col, _)| *col);
                    let mut start = *p;
                    if let Some(prev) = previous {
                        if last_column.is_some_and(|col| col + 1 < c) {
                            out.push((last_column.unwrap_or(0) + 1, prev));
                        }
                        if prev.total() > start.total() {
                            start = prev;
                        }
                    }
                    out.push((c, start));
                }
            }
            previous = Some(*p);
        }
        let end_column = out.last().map_or(0, |(c, _)| c + 1);
        let steps = out
            .into_iter()
            .map(|(c, p)| (self.left + c as f64 * width, p))
            .collect();
        (steps, self.left + end_column as f64 * width)
    }

    fn py(&self, bytes: u64) -> f64 {
        self.bottom - bytes as f64 / self.top_bytes as f64 * (self.bottom - self.top)
    }
}

/// A coordinate with at most one decimal (`12`, `12.5`).
fn num(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0 + 0.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// Draws `timeline` as a standalone SVG document (no XML declaration, so it can also
/// be inlined in HTML). It uses no `id` attributes, so several fit in one page.
///
/// Structure, for tools and tests: one `<path class="series" data-category="NAME">`
/// per category that holds any bytes, one `<rect class="phase" data-phase="NAME">` per
/// phase run, one `<line class="iteration">` per iteration, and a
/// `<text class="peak-label">` reading `peak 196.00 MiB`.
pub fn svg(timeline: &Timeline, options: &SvgOptions) -> String {
    let width = f64::from(options.width.max(400));
    let height = f64::from(options.height.max(200));
    let (x0, x1) = timeline.x_range();
    let axis = byte_axis(highest_total(timeline));
    let f = PlotFrame {
        x0,
        x1,
        top_bytes: axis.top,
        left: LEFT,
        right: width - RIGHT,
        top: TOP,
        bottom: height - BOTTOM,
    };
    let categories = timeline.categories();
    let title = options.title.as_deref().map(escape);

    let mut s = String::new();
    write_header(&mut s, timeline, width, height, title.as_deref());
    // Background: phase shading and the byte grid.
    write_phases(&mut s, timeline, &f);
    write_grid(&mut s, &axis, &f);
    // The series, stacked in report order.
    let (steps, end) = f.steps(&timeline.points);
    write_stack(&mut s, timeline, &categories, &f, &steps, end);
    // Foreground: phase labels, iteration marks, axes, the peak, the legend.
    write_phase_labels(&mut s, timeline, &f);
    write_iterations(&mut s, timeline, &f);
    write_axes(&mut s, timeline, &f, height);
    if !steps.is_empty() {
        write_peak(&mut s, &timeline.peak, &f);
    }
    write_legend(&mut s, timeline, &categories, &f, width);
    s.push_str("</svg>\n");
    s
}

/// The highest total the picture must reach: every point's and the peak's.
fn highest_total(timeline: &Timeline) -> u64 {
    timeline
        .points
        .iter()
        .map(|p| p.total())
        .chain([timeline.peak.total])
        .max()
        .unwrap_or(0)
}

/// The `<svg>` opening tag, the accessible title, the white background and the title.
fn write_header(s: &mut String, timeline: &Timeline, width: f64, height: f64, title: Option<&str>) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11" role="img">"#,
        w = num(width),
        h = num(height),
    );
    let _ = writeln!(
        s,
        "<title>{}memory timeline, peak {}</title>",
        title.map(|t| format!("{t}: ")).unwrap_or_default(),
        HumanBytes(timeline.peak.total),
    );
    let _ = writeln!(
        s,
        r##"<rect class="background" width="{}" height="{}" fill="#ffffff"/>"##,
        num(width),
        num(height)
    );
    if let Some(title) = title {
        let _ = writeln!(
            s,
            r#"<text class="title" x="{}" y="16" font-size="13" font-weight="bold" fill="{INK}">{title}</text>"#,
            num(LEFT)
        );
    }
}

/// One shaded band per phase run, alternately lighter and darker.
fn write_phases(s: &mut String, timeline: &Timeline, f: &PlotFrame) {
    s.push_str("<g class=\"phases\">\n");
    for (i, span) in timeline.phases.iter().enumerate() {
        let (a, b) = (f.px(span.start), f.px(span.end.max(span.start)));
        let when = match span.iteration {
            Some(n) => format!("iteration {n}"),
            None => "set-up".to_owned(),
        };
        let _ = writeln!(
            s,
            r#"<rect class="phase" data-phase="{phase}" x="{x}" y="{y}" width="{w}" height="{h}" fill="{INK}" fill-opacity="{o}"><title>{phase}, {when}</title></rect>"#,
            phase = span.phase,
            x = num(a),
            y = num(f.top),
            w = num(b - a),
            h = num(f.bottom - f.top),
            o = if i % 2 == 0 { "0.05" } else { "0.1" },
        );
    }
    s.push_str("</g>\n");
}

/// The horizontal grid lines of the byte axis, with their labels.
fn write_grid(s: &mut String, axis: &ByteAxis, f: &PlotFrame) {
    s.push_str("<g class=\"grid\">\n");
    for (bytes, label) in &axis.ticks {
        let y = num(f.py(*bytes));
        let _ = writeln!(
            s,
            r#"<line x1="{l}" y1="{y}" x2="{r}" y2="{y}" stroke="{GRID}"/><text x="{tx}" y="{ty}" text-anchor="end" fill="{INK}">{label}</text>"#,
            l = num(f.left),
            r = num(f.right),
            tx = num(f.left - 6.0),
            ty = num(f.py(*bytes) + 4.0),
        );
    }
    s.push_str("</g>\n");
}

/// The stacked series, top one first so each path needs only its upper edge.
fn write_stack(
    s: &mut String,
    timeline: &Timeline,
    categories: &[Category],
    f: &PlotFrame,
    steps: &[(f64, TimelinePoint)],
    end: f64,
) {
    s.push_str("<g class=\"stack\">\n");
    if steps.is_empty() {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" fill="{INK}">no samples recorded</text>"#,
            num((f.left + f.right) / 2.0),
            num((f.top + f.bottom) / 2.0),
        );
    } else {
        for (k, &category) in categories.iter().enumerate().rev() {
            let _ = writeln!(
                s,
                r#"<path class="series" data-category="{category}" fill="{color}" d="{d}"><title>{category}: {at_peak} at the peak</title></path>"#,
                color = category_color(category),
                d = series_path(f, steps, end, &categories[..=k]),
                at_peak = HumanBytes(timeline.peak.live[category]),
            );
        }
    }
    s.push_str("</g>\n");
}

/// The outline of the area under the sum of the `stacked` categories over `steps`.
fn series_path(
    f: &PlotFrame,
    steps: &[(f64, TimelinePoint)],
    end: f64,
    stacked: &[Category],
) -> String {
    let height = |p: &TimelinePoint| -> u64 { stacked.iter().map(|&c| p.live[c]).sum() };
    let base = num(f.bottom);
    let start = steps.first().map_or(f.left, |(x, _)| *x);
    let mut d = format!("M{} {base}", num(start));
    let mut last_y: Option<String> = None;
    for (x, p) in steps {
        let y = num(f.py(height(p)));
        if last_y.as_ref() != Some(&y) {
            if last_y.is_some() {
                let _ = write!(d, "H{}", num(*x));
            }
            let _ = write!(d, "V{y}");
            last_y = Some(y);
        }
    }
    let _ = write!(d, "H{}V{base}Z", num(end));
    d
}

/// Each phase run's name at the top of its band, shortened or left out to fit.
fn write_phase_labels(s: &mut String, timeline: &Timeline, f: &PlotFrame) {
    s.push_str(
        "<g class=\"phase-labels\" paint-order=\"stroke\" stroke=\"#ffffff\" stroke-width=\"3\">\n",
    );
    for span in &timeline.phases {
        let room = f.px(span.end.max(span.start)) - f.px(span.start) - 4.0;
        let Some(label) = phase_label(span.phase, room) else {
            continue;
        };
        let _ = writeln!(
            s,
            r#"<text class="phase-label" x="{}" y="{}" text-anchor="middle" fill="{INK}">{label}</text>"#,
            num((f.px(span.start) + f.px(span.end.max(span.start))) / 2.0),
            num(f.top + 12.0),
        );
    }
    s.push_str("</g>\n");
}

/// A dashed line at the start of each iteration, labelled where the label fits.
fn write_iterations(s: &mut String, timeline: &Timeline, f: &PlotFrame) {
    s.push_str("<g class=\"iterations\">\n");
    for it in &timeline.iterations {
        let x = num(f.px(it.start));
        let room = f.px(it.end.max(it.start)) - f.px(it.start) - 4.0;
        let label = iteration_label(it.number, room);
        let _ = writeln!(
            s,
            r#"<line class="iteration" x1="{x}" y1="{t}" x2="{x}" y2="{b}" stroke="{INK}" stroke-dasharray="4 3"><title>iteration {n}</title></line>"#,
            t = num(f.top - 14.0),
            b = num(f.bottom),
            n = it.number,
        );
        if !label.is_empty() {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" fill="{INK}">{label}</text>"#,
                num(f.px(it.start) + 3.0),
                num(f.top - 4.0),
            );
        }
    }
    s.push_str("</g>\n");
}

/// `iteration N`, else `#N`, else nothing: the longest that fits in `room` pixels.
fn iteration_label(number: u32, room: f64) -> String {
    let long = format!("iteration {number}");
    if long.len() as f64 * CHAR_WIDTH <= room {
        long
    } else if (number.to_string().len() + 1) as f64 * CHAR_WIDTH <= room {
        format!("#{number}")
    } else {
        String::new()
    }
}

/// The left and bottom axes, the x ticks and the x axis's label.
fn write_axes(s: &mut String, timeline: &Timeline, f: &PlotFrame, height: f64) {
    s.push_str("<g class=\"axes\">\n");
    let _ = writeln!(
        s,
        r#"<path d="M{l} {t}V{b}H{r}" fill="none" stroke="{INK}"/>"#,
        l = num(f.left),
        t = num(f.top),
        b = num(f.bottom),
        r = num(f.right),
    );
    for x in count_ticks(f.x0, f.x1, 6) {
        let px = num(f.px(x));
        let _ = writeln!(
            s,
            r#"<line x1="{px}" y1="{b}" x2="{px}" y2="{b4}" stroke="{INK}"/><text x="{px}" y="{ty}" text-anchor="middle" fill="{INK}">{x}</text>"#,
            b = num(f.bottom),
            b4 = num(f.bottom + 4.0),
            ty = num(f.bottom + 16.0),
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" fill="{INK}">{}</text>"#,
        num((f.left + f.right) / 2.0),
        num(height - 6.0),
        timeline.x_axis.label(),
    );
    s.push_str("</g>\n");
}

/// The peak's marker and figure, the label on the side with more room.
fn write_peak(s: &mut String, peak: &Peak, f: &PlotFrame) {
    let x = f.center(peak.x);
    let y = f.py(peak.total);
    let right_half = x > (f.left + f.right) / 2.0;
    let _ = writeln!(
        s,
        r##"<g class="peak"><line x1="{x}" y1="{b}" x2="{x}" y2="{y}" stroke="{PEAK}" stroke-dasharray="2 2"/><circle cx="{x}" cy="{y}" r="3.5" fill="{PEAK}"/><text class="peak-label" x="{tx}" y="{ty}" text-anchor="{anchor}" font-weight="bold" fill="{PEAK}" paint-order="stroke" stroke="#ffffff" stroke-width="3">peak {figure}</text></g>"##,
        x = num(x),
        y = num(y),
        b = num(f.bottom),
        tx = num(if right_half { x - 6.0 } else { x + 6.0 }),
        ty = num((y - 6.0).max(f.top + 24.0)),
        anchor = if right_half { "end" } else { "start" },
        figure = HumanBytes(peak.total),
    );
}

/// The legend right of the plot: each category's bytes at the peak, then the total.
fn write_legend(
    s: &mut String,
    timeline: &Timeline,
    categories: &[Category],
    f: &PlotFrame,
    width: f64,
) {
    let lx = f.right + 16.0;
    let vx = width - 8.0;
    let _ = writeln!(
        s,
        r#"<g class="legend"><text x="{}" y="{}" font-weight="bold" fill="{INK}">at the peak</text>"#,
        num(lx),
        num(f.top + 4.0),
    );
    for (row, &category) in categories.iter().rev().enumerate() {
        let y = f.top + 22.0 + row as f64 * 17.0;
        let _ = writeln!(
            s,
            r#"<rect x="{sx}" y="{sy}" width="10" height="10" fill="{color}"/><text x="{tx}" y="{y}" fill="{INK}">{category}</text><text x="{vx}" y="{y}" text-anchor="end" fill="{INK}">{value}</text>"#,
            sx = num(lx),
            sy = num(y - 9.0),
            color = category_color(category),
            tx = num(lx + 15.0),
            y = num(y),
            vx = num(vx),
            value = HumanBytes(timeline.peak.live[category]),
        );
    }
    let y = f.top + 22.0 + categories.len() as f64 * 17.0 + 4.0;
    let _ = writeln!(
        s,
        r#"<text x="{tx}" y="{y}" font-weight="bold" fill="{INK}">total</text><text x="{vx}" y="{y}" text-anchor="end" font-weight="bold" fill="{INK}">{value}</text></g>"#,
        tx = num(lx + 15.0),
        y = num(y),
        vx = num(vx),
        value = HumanBytes(timeline.peak.total),
    );
}

/// The longest name of `phase` that fits in `room` pixels, if any.
fn phase_label(phase: vramtest_model::Phase, room: f64) -> Option<&'static str> {
    use vramtest_model::Phase;
    let short = match phase {
        Phase::Params => "params",
        Phase::OptimizerInit => "opt init",
        Phase::Inputs => "inputs",
        Phase::Forward => "fwd",
        Phase::Backward => "bwd",
        Phase::OptimizerStep => "opt step",
    };
    [phase.as_str(), short]
        .into_iter()
        .find(|l| l.len() as f64 * CHAR_WIDTH <= room)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_at_most_one_decimal() {
        assert_eq!(num(12.0), "12");
        assert_eq!(num(12.04), "12");
        assert_eq!(num(12.06), "12.1");
        assert_eq!(num(-0.01), "0");
    }

    #[test]
    fn phase_labels_shrink_to_fit_or_disappear() {
        use vramtest_model::Phase;
        assert_eq!(
            phase_label(Phase::OptimizerStep, 200.0),
            Some("optimizer_step")
        );
        assert_eq!(phase_label(Phase::OptimizerStep, 60.0), Some("opt step"));
        assert_eq!(phase_label(Phase::OptimizerStep, 10.0), None);
    }
}
