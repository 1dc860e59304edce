//! `show TEST --at ..`: a configuration predicted from a sweep over named axes, as a
//! table or one JSON object; `--solve AXIS`, the largest value per memory size;
//! `--ranks N --shard zeroK`, a per-GPU projection.

use super::doubt::{MarkedRow, legend, marked};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use vramtest_model::axes::{AxesError, FLAG_PPM, Point};
use vramtest_model::doubt::Doubt;
use vramtest_model::fit::{MEMORY_SIZES, MemorySize};
use vramtest_model::levers::{LeverVariant, show_variant};
use vramtest_model::sweep::{Estimate, PeakMove, Projection, Shard, Sweep, project, show_point};
use vramtest_model::{Category, HumanBytes};

/// What was asked.
#[derive(Debug, Clone)]
pub struct Request {
    /// `--at`.
    pub at: Point,
    /// `--solve`.
    pub solve: Option<String>,
    /// `--ranks`, with `--shard` (`None`: replicated, plain data parallel).
    pub ranks: Option<(u64, Option<Shard>)>,
}

/// What a memory size holds: yes or no, or with `--solve` the largest value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// Whether the configuration fits.
    Fits(bool),
    /// The largest value of the solved axis that fits (`None`: not even 1).
    Largest(Option<u64>),
}

/// The answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The figures at the point (per GPU with `--ranks`).
    pub estimate: Estimate,
    /// The whole step's figures at the point, before any ZeRO projection: what the
    /// checks against the practitioners' formulas read (a shard's optimizer state is
    /// not a fraction of the whole parameters).
    pub whole: Estimate,
    /// With `--ranks`: the ranks, the stage (`None`: replicated) and one layer's
    /// gathered parameters (ZeRO-3 with a `layers` axis).
    pub projection: Option<(u64, Option<Shard>, Option<u64>)>,
    /// Per memory size.
    pub fits: Vec<(MemorySize, Holds)>,
    /// Per memory size, in the order of `fits`: the doubt on the prediction its answer
    /// rests on (with `--solve`, the figures at the largest value, or at 1 when none
    /// fits; else the point's).
    pub doubts: Vec<Doubt>,
    /// The axis solved for, with the value it had in the table when `--at` left it out.
    pub solved: Option<(String, Option<u64>)>,
    /// The bytes set aside for the CUDA context and libraries.
    pub allowance: u64,
    /// With categorical axes: the combination of levels predicted, and whether it is
    /// the baseline.
    pub variant: Option<(LeverVariant, bool)>,
    /// Where the phase holding the peak is another than in the grid: at the point, or
    /// with `--solve` at the largest value any memory size holds.
    pub peak_move: Option<PeakMove>,
}

/// Computes the answer: `allowance` is what the device holds besides the pool,
/// `granule` the pool's.
pub fn answer(
    sweep: &Sweep,
    request: &Request,
    allowance: u64,
    granule: u64,
) -> Result<Answer, AxesError> {
    let mut at = request.at.clone();
    let mut solved = None;
    if let Some(axis) = &request.solve {
        let grid = sweep.grid()?;
        let values = &grid.axis(axis)?.values;
        let filled = match at.get(axis) {
            Some(_) => None,
            None => {
                // Shown at its smallest measured value; the solve varies it anyway.
                let first = values.iter().min().copied();
                if let Some(v) = first {
                    at.insert(axis.clone(), v);
                }
                first
            }
        };
        solved = Some((axis.clone(), filled));
    }
    let per_gpu = |e: &Estimate| -> Result<(Estimate, Option<Projection>), AxesError> {
        match request.ranks {
            Some((ranks, Some(shard))) => {
                let p = project(sweep, e, ranks, shard)?;
                Ok((p.per_gpu.clone(), Some(p)))
            }
            // Replicated: every rank holds the whole step at its own batch.
            _ => Ok((e.clone(), None)),
        }
    };
    let whole = sweep.estimate(&at, granule)?;
    let (estimate, projected) = per_gpu(&whole)?;
    let projection = request
        .ranks
        .map(|(ranks, shard)| (ranks, shard, projected.and_then(|p| p.gathered_bytes)));
    let mut fits = Vec::new();
    let mut doubts = Vec::new();
    for memory in MEMORY_SIZES {
        let (holds, doubt) = match &request.solve {
            Some(axis) => {
                let largest = sweep.solve_by(&at, axis, granule, |e| {
                    Ok(per_gpu(e)?.0.fits(memory.bytes, allowance))
                })?;
                let mut point = at.clone();
                point.insert(axis.clone(), largest.unwrap_or(1));
                let there = per_gpu(&sweep.estimate(&point, granule)?)?.0;
                (Holds::Largest(largest), Doubt::of(&there))
            }
            None => (
                Holds::Fits(estimate.fits(memory.bytes, allowance)),
                Doubt::of(&estimate),
            ),
        };
        fits.push((memory, holds));
        doubts.push(doubt);
    }
    let furthest = match &request.solve {
        Some(axis) => fits
            .iter()
            .filter_map(|(_, h)| match h {
                Holds::Largest(v) => *v,
                Holds::Fits(_) => None,
            })
            .max()
            .map(|v| {
                let mut p = at.clone();
                p.insert(axis.clone(), v);
                p
            }),
        None => Some(at.clone()),
    };
    let peak_move = match furthest {
        Some(p) => sweep.peak_move(&p)?,
        None => None,
    };
    Ok(Answer {
        estimate,
        whole,
        projection,
        fits,
        doubts,
        solved,
        allowance,
        variant: None,
        peak_move,
    })
}

fn percent(ppm: u64) -> String {
    format!("{:.2}%", ppm as f64 / 10_000.0)
}

/// The answer as a table, under a heading that names the test.
pub fn human(name: &str, sweep: &Sweep, a: &Answer) -> String {
    let e = &a.estimate;
    let mut out = format!("{name} at {}", show_point(&e.at));
    let axes: Vec<String> = sweep
        .axes
        .iter()
        .map(|(k, v)| format!("{k} = {v:?}"))
        .collect();
    match &a.variant {
        Some((variant, baseline)) => {
            let _ = writeln!(
                out,
                " with {}{}, predicted from its own fit over {}",
                show_variant(variant),
                if *baseline { " (the baseline)" } else { "" },
                axes.join(", ")
            );
        }
        None => {
            let _ = writeln!(out, ", predicted from a sweep over {}", axes.join(", "));
        }
    }
    if let Some((axis, Some(v))) = &a.solved {
        let _ = writeln!(out, "  (the table at {axis}={v}; --solve {axis} varies it)");
    }
    if let Some((ranks, shard, gathered)) = &a.projection {
        let _ = writeln!(
            out,
            "  projected per GPU for {ranks} {}, {}: the batch is per rank; communication buckets, mixed precision and the prefetch of a second layer are left out",
            if *ranks == 1 { "rank" } else { "ranks" },
            shard.map_or("replicated (no --shard)".to_owned(), |s| s.to_string())
        );
        if let Some(g) = *gathered {
            let _ = writeln!(out, "  one layer's gathered parameters: {}", HumanBytes(g));
        }
    }
    let mut rows = vec![vec![
        "FIGURE".to_owned(),
        "PREDICTED".to_owned(),
        "LOO ERROR".to_owned(),
        "FORMULA".to_owned(),
    ]];
    let row = |figure: &str, bytes: u64| {
        let ppm = e.loo_error_ppm.get(figure).copied().unwrap_or(0);
        let flag = own_flag(e, figure).map_or(String::new(), |f| format!(" ({f})"));
        vec![
            figure.to_owned(),
            HumanBytes(bytes).to_string(),
            format!("{}{flag}", percent(ppm)),
            e.terms.get(figure).cloned().unwrap_or_default(),
        ]
    };
    for c in Category::ALL {
        rows.push(row(c.as_str(), e.category_bytes[&c]));
    }
    let peak_figure = e.peak_figure();
    let mut peak = row(&peak_figure, e.peak_bytes);
    peak[0] = match (peak_figure.strip_prefix("phase "), &e.peak_phase) {
        (Some(from), Some(_)) => format!("peak ({from})"),
        _ => "peak".into(),
    };
    peak[2] = peak_error(e, &peak_figure);
    rows.push(peak);
    if let (Some(alloc), Some(reserved)) = (e.allocated_bytes, e.reserved_bytes) {
        rows.push(vec![
            "CUDA allocated".into(),
            HumanBytes(alloc).to_string(),
            String::new(),
            String::new(),
        ]);
        rows.push(vec![
            "CUDA reserved".into(),
            HumanBytes(reserved).to_string(),
            String::new(),
            String::new(),
        ]);
    }
    out += &table(&rows);
    if let Some(m) = &a.peak_move {
        let _ = writeln!(
            out,
            "  {m}: the grid's peak phase is not the peak {}",
            if a.solved.is_some() {
                "of the largest values that fit"
            } else {
                "here"
            }
        );
    }
    out += &formula_checks(&a.whole);
    out + &fits_section(a)
}

/// The predicted categories against the formulas practitioners use (the same checks a
/// run makes on its measured figures): at a target nobody can run, a gradient for only
/// a few weights or an optimizer state off every formula shows here first.
fn formula_checks(e: &Estimate) -> String {
    let ratios = vramtest_model::explain::ratios(&category_bytes(e));
    let mut out = String::new();
    if !ratios.is_empty() {
        let _ = writeln!(out, "\nagainst the formulas (predicted)");
        for r in &ratios {
            let _ = writeln!(out, "  {r}");
        }
    }
    out
}

/// The estimate's categories as the measured figures hold them.
fn category_bytes(e: &Estimate) -> vramtest_model::CategoryBytes {
    let mut bytes = vramtest_model::CategoryBytes::default();
    for (&c, &b) in &e.category_bytes {
        bytes[c] = b;
    }
    bytes
}

/// The peak's leave-one-out error (that of the phase holding it), flagged when that
/// phase's fit is, or when any other phase within the maximum is (named, with how it
/// is flagged): the real peak may be in that phase.
fn peak_error(e: &Estimate, figure: &str) -> String {
    let text = percent(e.loo_error_ppm.get(figure).copied().unwrap_or(0));
    let others: Vec<String> = e
        .flagged_under_peak()
        .into_iter()
        .map(|f| match own_flag(e, f) {
            Some("interpolates") => format!("{f} interpolates"),
            Some("falls") => format!("{f} falls"),
            Some("negative") => format!("{f} rests on a negative term"),
            _ => format!(
                "{f} misses by {}",
                percent(e.loo_error_ppm.get(f).copied().unwrap_or(0))
            ),
        })
        .collect();
    match (own_flag(e, figure), others.is_empty()) {
        (None, true) => text,
        (Some(own), true) => format!("{text} ({own})"),
        (None, false) => format!("{text} (flagged: {})", others.join("; ")),
        (Some(own), false) => format!("{text} ({own}; {})", others.join("; ")),
    }
}

/// How a figure's fit is flagged, the strongest statement first: `falls` (lower here
/// than at the grid's corner below), `flagged` (a held-out point missed by over 2%),
/// `negative` (a negative term nothing covers takes away over 2% here),
/// `interpolates`, or not at all.
fn own_flag(e: &Estimate, figure: &str) -> Option<&'static str> {
    if e.falls.contains_key(figure) {
        Some("falls")
    } else if e.loo_error_ppm.get(figure).copied().unwrap_or(0) > FLAG_PPM {
        Some("flagged")
    } else if e.negative.contains_key(figure) {
        Some("negative")
    } else if e.interpolated.contains_key(figure) {
        Some("interpolates")
    } else {
        None
    }
}

/// The lines of the figures flagged at this point alone: those that fall, those on a
/// negative term nothing covers, and the pool's reservation held at the grid's share.
fn flagged_here(e: &Estimate) -> String {
    let mut out = String::new();
    for (figure, f) in &e.falls {
        let _ = writeln!(
            out,
            "  flagged (falls: {} here, {} at the grid's corner {}; memory does not shrink as a model grows, so a negative term outgrows the others: not to be trusted): {figure}",
            HumanBytes(f.bytes),
            HumanBytes(f.corner_bytes),
            vramtest_model::sweep::show_point(&f.corner)
        );
    }
    for (figure, n) in (e.negative.iter()).filter(|(f, _)| !e.falls.contains_key(*f)) {
        let uncovered = match &n.covers {
            Some(covers) => format!("more than {covers} gives at the grid's smallest values"),
            None => "and no positive term covers it".to_owned(),
        };
        let _ = writeln!(
            out,
            "  flagged (negative: {} takes away {} here, {uncovered}; memory is a sum of blocks of positive size, so the fit passed through a maximum of regimes or a step: not to be trusted): {figure}",
            n.term,
            HumanBytes(n.bytes)
        );
    }
    if let Some(h) = &e.pool_held {
        let _ = writeln!(
            out,
            "  flagged (the pool's rounding and cache beyond the allocated peak: its fit predicts {} here, a larger share of the allocated peak than at the grid's corner {}; held at that share, {}: not to be trusted): {}",
            HumanBytes(h.fitted_bytes),
            vramtest_model::sweep::show_point(&h.corner),
            HumanBytes(h.held_bytes),
            vramtest_model::sweep::RESERVED
        );
    }
    out
}

/// The flagged figures and what fits per memory size.
fn fits_section(a: &Answer) -> String {
    let e = &a.estimate;
    let mut out = String::new();
    // `interpolated` holds only the figures that miss no held-out point by over 2%.
    let (missed, interpolated): (Vec<&String>, Vec<&String>) = e
        .flagged
        .iter()
        .filter(|f| !e.falls.contains_key(*f))
        // A figure flagged only for its negative term here has a line of its own.
        .filter(|f| {
            !e.negative.contains_key(*f)
                || e.interpolated.contains_key(*f)
                || e.loo_error_ppm.get(*f).copied().unwrap_or(0) > FLAG_PPM
        })
        .filter(|f| !(e.pool_held.is_some() && f.as_str() == vramtest_model::sweep::RESERVED))
        .partition(|f| !e.interpolated.contains_key(*f));
    out += &flagged_here(e);
    if !missed.is_empty() {
        let names: Vec<&str> = missed.iter().map(|f| f.as_str()).collect();
        let _ = writeln!(
            out,
            "  flagged (a held-out point missed by over 2%, not to be trusted): {}",
            names.join(", ")
        );
    }
    let under_peak = e.flagged_under_peak();
    if !under_peak.is_empty() {
        let _ = writeln!(
            out,
            "  flagged (the peak is the largest phase's prediction, and {} within that maximum {} flagged: the real peak may be there, not to be trusted): peak",
            under_peak.join(", "),
            if under_peak.len() == 1 { "is" } else { "are" }
        );
    }
    if !interpolated.is_empty() {
        let names: Vec<String> = interpolated
            .iter()
            .map(|f| format!("{f} (along {})", e.interpolated[*f].axes_in_words()))
            .collect();
        let _ = writeln!(
            out,
            "  flagged (as many terms as combinations of the axes' values: no held-out point checks the form, not to be trusted): {}",
            names.join(", ")
        );
    }
    out += &impossible_line(e);
    let _ = writeln!(
        out,
        "\nwhat fits ({} with {} set aside for the CUDA context and libraries)",
        if e.reserved_bytes.is_some() {
            "the predicted reserved bytes"
        } else {
            "the predicted peak"
        },
        HumanBytes(a.allowance)
    );
    let mut rows = vec![vec![
        "MEMORY".to_owned(),
        "GPU".to_owned(),
        match &a.solved {
            Some((axis, _)) => format!("LARGEST {}", axis.to_uppercase()),
            None => "FITS".to_owned(),
        },
    ]];
    let solving = a.solved.is_some();
    let mut marked_rows = Vec::new();
    for ((memory, holds), doubt) in a.fits.iter().zip(&a.doubts) {
        let size = HumanBytes(memory.bytes).to_string();
        if solving {
            marked_rows.push(MarkedRow::new(size.clone(), doubt.clone(), Vec::new(), 0));
        }
        rows.push(vec![
            if solving { marked(&size, doubt) } else { size },
            memory.example.to_owned(),
            match holds {
                Holds::Fits(true) => "yes".into(),
                Holds::Fits(false) => "no".into(),
                Holds::Largest(Some(v)) => v.to_string(),
                Holds::Largest(None) => "none".into(),
            },
        ]);
    }
    out += &table(&rows);
    out + &legend(&marked_rows)
}

/// The line that calls the prediction impossible: each category predicted above the
/// peak (nothing when none is).
fn impossible_line(e: &Estimate) -> String {
    let doubt = Doubt::of(e);
    if doubt.impossible.is_empty() {
        return String::new();
    }
    let over: Vec<String> = doubt
        .impossible
        .iter()
        .map(|c| format!("{c} {}", HumanBytes(e.category_bytes[c])))
        .collect();
    super::doubt::wrap(
        &format!(
            "impossible (a category predicted above the peak {}, which no step can hold: the category's fit or the peak's is wrong, not to be trusted): {}",
            HumanBytes(e.peak_bytes),
            over.join(", ")
        ),
        96,
        "  ",
        "    ",
    )
}

/// Rows of cells as aligned columns, each line indented by two spaces.
pub(super) fn table(rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }
    out
}

/// `16GiB`: a memory size as a JSON key.
fn size_key(bytes: u64) -> String {
    format!("{}GiB", bytes >> 30)
}

/// The answer as one JSON object.
pub fn json(test: &str, a: &Answer) -> Value {
    let e = &a.estimate;
    let categories: Map<String, Value> = e
        .category_bytes
        .iter()
        .map(|(c, b)| (c.as_str().to_owned(), json!(b)))
        .collect();
    let fits: Map<String, Value> = a
        .fits
        .iter()
        .map(|(m, h)| {
            let v = match h {
                Holds::Fits(b) => json!(b),
                Holds::Largest(v) => json!(v),
            };
            (size_key(m.bytes), v)
        })
        .collect();
    let loo: Map<String, Value> = e
        .loo_error_ppm
        .iter()
        .map(|(k, ppm)| (k.clone(), json!(*ppm as f64 / 1e6)))
        .collect();
    let mut out = json!({
        "test": test,
        "at": e.at,
        "category_bytes": categories,
        "peak_bytes": e.peak_bytes,
        "peak_phase": e.peak_phase,
        "peak_from": e.peak_figure(),
        "allocated_bytes": e.allocated_bytes,
        "reserved_bytes": e.reserved_bytes,
        "allowance_bytes": a.allowance,
        "fits": fits,
        "loo_error": loo,
        "terms": e.terms,
        "flagged": e.flagged,
        "impossible": Doubt::of(e).impossible,
        "peak_flagged_by": e.flagged_under_peak(),
        "checks": vramtest_model::explain::ratios(&category_bytes(&a.whole))
            .iter()
            .map(|r| json!({
                "category": r.category.as_str(),
                "base": r.base.as_str(),
                "multiple": r.multiple,
                "meaning": r.meaning,
                "check": r.drift,
            }))
            .collect::<Vec<Value>>(),
        "interpolated": e
            .interpolated
            .iter()
            .map(|(f, i)| (f.clone(), json!(i.axes)))
            .collect::<Map<String, Value>>(),
        "falls": falls_json(e),
        "negative": negative_json(e),
        "pool_held": pool_held_json(e),
    });
    if let Some((axis, _)) = &a.solved {
        out["solve"] = json!(axis);
        out["solved"] = Value::Array(
            a.fits
                .iter()
                .zip(&a.doubts)
                .map(|((m, h), d)| {
                    let largest = match h {
                        Holds::Fits(_) => None,
                        Holds::Largest(v) => *v,
                    };
                    json!({
                        "memory": size_key(m.bytes),
                        "largest": largest,
                        "flagged": d.flagged,
                        "impossible": d.impossible,
                    })
                })
                .collect(),
        );
    }
    out["peak_move"] = a.peak_move.as_ref().map_or(Value::Null, |m| {
        json!({
            "from": m.from,
            "to": m.to,
            "axis": m.above.as_ref().map(|(axis, _)| axis),
            "above": m.above.as_ref().map(|(_, v)| v.saturating_sub(1)),
        })
    });
    if let Some((variant, _)) = &a.variant {
        out["variant"] = json!(variant);
    }
    if let Some((ranks, shard, gathered)) = &a.projection {
        out["projection"] = json!({
            "ranks": ranks,
            "shard": shard.map(|s| s.to_string()),
            "gathered_bytes": gathered,
        });
    }
    out
}

/// What the pool's reservation beyond the allocated peak was held at here, if it was:
/// the grid's corner whose share held it, the fit's prediction and the held one.
fn pool_held_json(e: &Estimate) -> Value {
    e.pool_held.as_ref().map_or(Value::Null, |h| {
        json!({ "corner": h.corner, "fitted_bytes": h.fitted_bytes, "held_bytes": h.held_bytes })
    })
}

/// The figures predicted lower here than at the grid's corner below: each one's
/// corner, its prediction there and here.
fn falls_json(e: &Estimate) -> Map<String, Value> {
    (e.falls.iter())
        .map(|(f, x)| {
            let v = json!({ "corner": x.corner, "corner_bytes": x.corner_bytes, "bytes": x.bytes });
            (f.clone(), v)
        })
        .collect()
}

/// The figures whose prediction here rests on a negative term nothing covers: the
/// term, the positive terms that cover it in part (`null`: none), and the bytes the
/// term takes away here.
fn negative_json(e: &Estimate) -> Map<String, Value> {
    (e.negative.iter())
        .map(|(f, n)| {
            let v = json!({ "term": n.term, "covers": n.covers, "bytes": n.bytes });
            (f.clone(), v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// An estimate whose peak is optimizer_step's (145.40 MiB, 0.02% off), with
    /// backward's fit `backward_ppm` off, and whose `flagged` list says which.
    fn estimate(backward_ppm: u64, flagged: &[&str]) -> Estimate {
        let loo: BTreeMap<String, u64> = [
            ("phase forward", 100),
            ("phase backward", backward_ppm),
            ("phase optimizer_step", 200),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        Estimate {
            at: [("batch".to_owned(), 64)].into(),
            category_bytes: Category::ALL.into_iter().map(|c| (c, 0)).collect(),
            peak_bytes: 152_462_950, // 145.40 MiB
            peak_phase: Some("optimizer_step".into()),
            peak_from: None,
            allocated_bytes: None,
            reserved_bytes: None,
            loo_error_ppm: loo,
            terms: BTreeMap::new(),
            flagged: flagged.iter().map(|f| (*f).to_owned()).collect(),
            interpolated: BTreeMap::new(),
            falls: BTreeMap::new(),
            negative: BTreeMap::new(),
            pool_held: None,
        }
    }

    fn shown(e: Estimate) -> (String, Value) {
        let sweep = Sweep {
            axes: [("batch".to_owned(), vec![8, 16, 32])].into(),
            figures: BTreeMap::new(),
            target: None,
            levels: Default::default(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        };
        let a = Answer {
            whole: e.clone(),
            estimate: e,
            projection: None,
            fits: Vec::new(),
            doubts: Vec::new(),
            solved: None,
            allowance: 0,
            variant: None,
            peak_move: None,
        };
        (human("t", &sweep, &a), json("t", &a))
    }

    /// A batch sweep whose optimizer step holds the peak in the grid and backward,
    /// 8 times steeper per sample, beyond it.
    fn crossing_sweep() -> Sweep {
        use vramtest_model::axes::Grid;
        use vramtest_model::sweep::GridRun;
        use vramtest_model::{CategoryBytes, Phase};
        let grid = Grid::new([("batch", vec![8, 16, 32])]).unwrap();
        let runs: Vec<GridRun> = [8u64, 16, 32]
            .map(|b| {
                let phases = [
                    (Phase::Backward, 1_000_000 + 80_000 * b),
                    (Phase::OptimizerStep, 8_000_001 + 10_000 * b),
                ];
                GridRun {
                    point: [("batch".to_owned(), b)].into(),
                    peak_bytes: phases.iter().map(|p| p.1).max().unwrap(),
                    category_peaks: CategoryBytes::from([(Category::Activations, 70_000 * b)]),
                    phase_peaks: phases.into(),
                    phase_temporaries: BTreeMap::new(),
                    phase_moments: Default::default(),
                    peak_outside_phases: false,
                    pool: None,
                }
            })
            .into();
        Sweep::fit(&grid, &runs).unwrap()
    }

    #[test]
    fn a_peak_that_moves_to_another_phase_is_said_with_where() {
        let sweep = crossing_sweep();
        let request = |at: u64, solve: bool| Request {
            at: [("batch".to_owned(), at)].into(),
            solve: solve.then(|| "batch".to_owned()),
            ranks: None,
        };
        // 1,000,000 + 80,000 b > 8,000,001 + 10,000 b from b = 101 on.
        let a = answer(&sweep, &request(1000, false), 0, 1).unwrap();
        assert_eq!(a.estimate.peak_bytes, 1_000_000 + 80_000 * 1000);
        let text = human("t", &sweep, &a);
        assert!(
            text.contains("the peak moves from optimizer_step to backward above batch ≈ 100: the grid's peak phase is not the peak here"),
            "{text}"
        );
        let j = json("t", &a);
        assert_eq!(
            j["peak_move"],
            serde_json::json!({"from": "optimizer_step", "to": "backward", "axis": "batch", "above": 100})
        );
        // Solved for the batch: each size's answer is backward's, by hand.
        let solved = answer(&sweep, &request(8, true), 0, 1).unwrap();
        for (memory, holds) in &solved.fits {
            let by_hand = (memory.bytes - 1_000_000) / 80_000;
            assert_eq!(*holds, Holds::Largest(Some(by_hand)), "{}", memory.example);
        }
        assert!(
            human("t", &sweep, &solved).contains("not the peak of the largest values that fit")
        );
        // Inside the grid nothing moves.
        let inside = answer(&sweep, &request(16, false), 0, 1).unwrap();
        assert_eq!(inside.peak_move, None);
        assert_eq!(json("t", &inside)["peak_move"], Value::Null);
    }

    fn peak_row(text: &str) -> &str {
        text.lines()
            .find(|l| l.trim_start().starts_with("peak ("))
            .unwrap_or_else(|| panic!("no peak row in:\n{text}"))
    }

    #[test]
    fn the_peak_is_flagged_when_another_phase_within_its_maximum_is() {
        // backward misses a held-out point by 28%: it may hold the real peak.
        let (text, json) = shown(estimate(280_000, &["phase backward"]));
        let row = peak_row(&text);
        assert!(
            row.contains("145.40 MiB  0.02% (flagged: phase backward misses by 28.00%)"),
            "{row}"
        );
        assert!(
            text.contains(
                "flagged (the peak is the largest phase's prediction, and phase backward within that maximum is flagged: the real peak may be there, not to be trusted): peak"
            ),
            "{text}"
        );
        assert_eq!(
            json["peak_flagged_by"],
            serde_json::json!(["phase backward"])
        );
    }

    #[test]
    fn the_formula_checks_run_at_the_predicted_point() {
        // BERT-like at the target: 400 MiB of weights, a gradient for 5% of them,
        // AdamW state for all.
        let mut e = estimate(300, &[]);
        e.category_bytes.insert(Category::Parameters, 400 << 20);
        e.category_bytes.insert(Category::Gradients, 20 << 20);
        e.category_bytes.insert(Category::OptimizerState, 800 << 20);
        let (text, json) = shown(e);
        assert!(
            text.contains("against the formulas (predicted)\n  gradients 0.05× parameters (only 5% of the parameter bytes get a gradient"),
            "{text}"
        );
        assert!(
            text.contains(
                "  optimizer_state 2.00× parameters (two moments per weight: Adam-like)\n"
            ),
            "{text}"
        );
        assert_eq!(json["checks"][0]["category"], "gradients");
        assert_eq!(json["checks"][0]["check"], true);
        assert_eq!(json["checks"][1]["check"], false);
        // No parameters predicted: nothing to check against.
        let (text, json) = shown(estimate(300, &[]));
        assert!(!text.contains("against the formulas"), "{text}");
        assert_eq!(json["checks"], serde_json::json!([]));
    }

    #[test]
    fn an_unflagged_maximum_leaves_the_peak_unflagged() {
        let (text, json) = shown(estimate(300, &[]));
        let row = peak_row(&text);
        assert!(row.trim_end().ends_with("145.40 MiB  0.02%"), "{row}");
        assert!(!text.contains("flagged"), "{text}");
        assert_eq!(json["peak_flagged_by"], serde_json::json!([]));
    }

    #[test]
    fn a_flagged_winner_keeps_its_own_flag_and_names_the_others() {
        let mut e = estimate(280_000, &["phase backward", "phase optimizer_step"]);
        e.loo_error_ppm
            .insert("phase optimizer_step".into(), 30_000);
        let (text, _) = shown(e);
        let row = peak_row(&text);
        assert!(
            row.contains("3.00% (flagged; phase backward misses by 28.00%)"),
            "{row}"
        );
    }

    #[test]
    fn a_prediction_on_a_negative_term_nothing_covers_says_which_and_how_much() {
        let mut e = estimate(300, &["activations", "phase backward"]);
        for figure in ["activations", "phase backward"] {
            let n = vramtest_model::sweep::Negative {
                term: "-0.45 B × seq²".into(),
                covers: Some("0.26 B × layers·seq²".into()),
                bytes: 117_965,
            };
            e.negative.insert(figure.into(), n);
        }
        let (text, json) = shown(e);
        assert!(
            text.contains("flagged (negative: -0.45 B × seq² takes away 115.20 KiB here, more than 0.26 B × layers·seq² gives at the grid's smallest values; memory is a sum of blocks of positive size, so the fit passed through a maximum of regimes or a step: not to be trusted): activations"),
            "{text}"
        );
        // Said once, in its own words, not as a held-out miss.
        assert!(
            !text.contains("over 2%, not to be trusted): activations"),
            "{text}"
        );
        assert!(
            peak_row(&text).contains("(flagged: phase backward rests on a negative term)"),
            "{}",
            peak_row(&text)
        );
        assert_eq!(
            json["negative"]["activations"],
            serde_json::json!({"term": "-0.45 B × seq²", "covers": "0.26 B × layers·seq²", "bytes": 117_965})
        );
        assert!(
            json["flagged"]
                .as_array()
                .unwrap()
                .contains(&"activations".into())
        );
    }

    #[test]
    fn a_miss_is_still_said_beside_a_negative_term() {
        let mut e = estimate(300, &["activations"]);
        e.loo_error_ppm.insert("activations".into(), 34_000);
        let n = vramtest_model::sweep::Negative {
            term: "-5 B × seq²".into(),
            covers: None,
            bytes: 20_480,
        };
        e.negative.insert("activations".into(), n);
        let (text, _) = shown(e);
        assert!(text.contains("and no positive term covers it"), "{text}");
        assert!(
            text.contains(
                "flagged (a held-out point missed by over 2%, not to be trusted): activations"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_category_over_the_peak_is_called_impossible() {
        let mut e = estimate(300, &["activations"]);
        e.category_bytes
            .insert(Category::Activations, 2 * e.peak_bytes);
        let (text, json) = shown(e);
        assert!(
            text.contains("impossible (a category predicted above the peak 145.40 MiB"),
            "{text}"
        );
        assert!(text.contains("activations 290.80 MiB"), "{text}");
        assert_eq!(json["impossible"], serde_json::json!(["activations"]));
        let (text, json) = shown(estimate(300, &[]));
        assert!(!text.contains("impossible"), "{text}");
        assert_eq!(json["impossible"], serde_json::json!([]));
    }

    #[test]
    fn each_solved_row_carries_the_flags_of_its_prediction() {
        let e = estimate(280_000, &["phase backward"]);
        let sweep = Sweep {
            axes: [("batch".to_owned(), vec![8, 16, 32])].into(),
            figures: BTreeMap::new(),
            target: None,
            levels: Default::default(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        };
        let trusted = Doubt::default();
        let flagged = Doubt::of(&e);
        let a = Answer {
            whole: e.clone(),
            estimate: e,
            projection: None,
            fits: vec![
                (MEMORY_SIZES[0], Holds::Largest(Some(12))),
                (MEMORY_SIZES[1], Holds::Largest(Some(20))),
            ],
            doubts: vec![trusted, flagged],
            solved: Some(("batch".to_owned(), None)),
            allowance: 0,
            variant: None,
            peak_move: None,
        };
        let text = human("t", &sweep, &a);
        let row = |size: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(size))
                .unwrap_or_else(|| panic!("no {size} row: {text}"))
                .to_owned()
        };
        assert!(row("16.00 GiB ").contains(" 12"), "{text}");
        assert!(row("24.00 GiB*").contains(" 20"), "{text}");
        assert!(
            text.contains("rests on a flagged fit") && text.contains("24.00 GiB: phase backward"),
            "{text}"
        );
        let v = json("t", &a);
        assert_eq!(v["solved"][0]["memory"], "16GiB");
        assert_eq!(v["solved"][0]["largest"], 12);
        assert_eq!(v["solved"][0]["flagged"], serde_json::json!([]));
        assert_eq!(
            v["solved"][1]["flagged"],
            serde_json::json!(["phase backward"])
        );
    }
}
