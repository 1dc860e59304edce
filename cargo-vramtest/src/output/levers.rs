//! `show TEST --at .. --levers`: the lever table at a configuration, from the test's
//! sweep (its measured combinations, today the baseline alone, and the levers projected
//! from them, each with its formula), as tables or one JSON object; `--fit-on SIZE`,
//! the rows that fit a memory size, cheapest first, or how far the closest one misses.

use super::doubt::{MarkedRow, legend, marked, wrap};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use vramtest_model::axes::{AxesError, Point};
use vramtest_model::fit::MEMORY_SIZES;
use vramtest_model::levers::{
    FitOnAnswer, LeverAxes, LeverError, LeverFigures, LeverProjection, LeverRow, LeverTable,
    LeverVariant, project_8bit_moments, project_accumulation, project_smallest_accumulation,
    project_zero, show_variant,
};
use vramtest_model::sweep::{Shard, Sweep, show_point};
use vramtest_model::{Category, HumanBytes};

/// The axis gradient accumulation splits.
const BATCH: &str = "batch";

/// What was asked.
#[derive(Debug, Clone)]
pub struct LeverRequest {
    /// `--at`: its numeric axes.
    pub at: Point,
    /// `--at`: the levels it fixes (the others free); the table keeps the combinations
    /// that agree with them, and the baseline, which every saving is measured against.
    pub levels: LeverVariant,
    /// `--ranks`: the ZeRO rows' data-parallel ranks (`None`: no ZeRO rows).
    pub ranks: Option<u64>,
    /// `--shard`: only this ZeRO stage (`None`: all three).
    pub shard: Option<Shard>,
    /// `--fit-on`: a memory size the accumulation rows are also projected for.
    pub fit_on: Option<u64>,
}

/// Why the table could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The sweep cannot predict the configuration (an unknown or missing axis).
    #[error(transparent)]
    Axes(#[from] AxesError),
    /// The measured figures do not make a table.
    #[error(transparent)]
    Lever(#[from] LeverError),
}

/// The measured CPU time ratio of `variant`: 1 for the baseline, else what the
/// snapshot keeps for it (`None` when it keeps none).
pub fn time_ratio(sweep: &Sweep, variant: &LeverVariant) -> Option<f64> {
    match sweep.variants.iter().find(|v| &v.variant == variant) {
        Some(v) => v.cpu_time_ratio.get(),
        None => Some(1.0),
    }
}

/// The lever table of `sweep` at the request's configuration: one measured row per
/// combination of levels (the sweep's baseline alone when it has no categorical
/// axes), each predicted from its own fit, then the projections of each measured row:
/// gradient accumulation, 8-bit optimizer moments and, with `--ranks`, ZeRO.
/// `allowance` is what the device holds besides the pool, `granule` the pool's.
pub fn build(
    sweep: &Sweep,
    request: &LeverRequest,
    allowance: u64,
    granule: u64,
) -> Result<LeverTable, TableError> {
    let axes = LeverAxes::new(sweep.levels.clone())?;
    let wanted = axes.matching(&request.levels)?;
    let baseline = axes.baseline();
    let at = &request.at;
    let mut measured = Vec::new();
    for (variant, own) in sweep.combinations() {
        if variant != baseline && !wanted.contains(&variant) {
            continue;
        }
        let estimate = own.estimate(at, granule)?;
        let ratio = time_ratio(sweep, &variant);
        measured.push((LeverFigures::from_estimate(variant, &estimate, ratio), own));
    }
    let sizes: Vec<u64> = MEMORY_SIZES.iter().map(|m| m.bytes).collect();
    let figures = measured.iter().map(|(f, _)| f.clone()).collect();
    let mut table = LeverTable::build(at.clone(), &axes, figures, &sizes, allowance)?;
    for (mut figures, own) in measured {
        // A projection keeps the time ratio of the row it is projected from.
        figures.time_ratio = table
            .levers
            .iter()
            .find(|r| r.variant == figures.variant)
            .and_then(|r| r.time_ratio);
        add_accumulation(&mut table, own, request, &figures, granule)?;
        table.add_projection(project_8bit_moments(&figures));
        if let Some(ranks) = request.ranks {
            let stages = match request.shard {
                Some(s) => vec![s],
                None => vec![Shard::Zero1, Shard::Zero2, Shard::Zero3],
            };
            for shard in stages {
                table.add_projection(project_zero(own, at, &figures, ranks, shard)?);
            }
        }
    }
    Ok(table)
}

/// Gradient accumulation to the batch in `--at`, for each memory size (the table's and
/// `--fit-on`'s): a row per micro-batch that some size calls for, labelled with the
/// smallest such size. A size the whole batch fits, or that not even one sample fits,
/// adds nothing.
fn add_accumulation(
    table: &mut LeverTable,
    sweep: &Sweep,
    request: &LeverRequest,
    figures: &LeverFigures,
    granule: u64,
) -> Result<(), AxesError> {
    let Some(&effective) = request
        .at
        .get(BATCH)
        .filter(|_| sweep.axes.contains_key(BATCH))
    else {
        return Ok(());
    };
    let memories: BTreeSet<u64> = table.sizes.iter().copied().chain(request.fit_on).collect();
    let mut seen = BTreeSet::new();
    let figures_at = |b: u64| {
        let mut point = request.at.clone();
        point.insert(BATCH.to_owned(), b);
        let e = sweep.estimate(&point, granule)?;
        Ok::<_, AxesError>(LeverFigures::from_estimate(
            figures.variant.clone(),
            &e,
            figures.time_ratio,
        ))
    };
    for memory in memories {
        let mut projected = project_accumulation(effective, memory, table.allowance, figures_at)?;
        // `--fit-on`'s size that no micro-batch fits: the smallest micro-batch still
        // competes for the closest miss.
        if projected.is_none() && request.fit_on == Some(memory) {
            projected = project_smallest_accumulation(effective, memory, figures_at)?;
        }
        if let Some(p) = projected
            && let LeverProjection::Accumulation {
                steps, micro_batch, ..
            } = p.lever.lever
            && steps > 1
            && seen.insert(micro_batch)
        {
            table.add_projection(p);
        }
    }
    Ok(())
}

/// The name of a row: its combination (`baseline` for the baseline) and, for a
/// projected row, the lever.
fn lever_name(row: &LeverRow) -> String {
    let measured = if row.variant.is_empty() {
        "baseline".to_owned()
    } else {
        show_variant(&row.variant)
    };
    let Some(p) = &row.projection else {
        if row.lever_count == 0 && !row.variant.is_empty() {
            return format!("{measured} (baseline)");
        }
        return measured;
    };
    let lever = match &p.lever {
        LeverProjection::Accumulation {
            steps, micro_batch, ..
        } => format!("accumulation {steps} × {micro_batch}"),
        LeverProjection::Zero { stage, ranks, .. } => format!("{stage} on {ranks} ranks"),
        LeverProjection::EightBitMoments => "8-bit optimizer moments".to_owned(),
    };
    if row.variant.is_empty() {
        lever
    } else {
        format!("{measured} + {lever}")
    }
}

fn kind(row: &LeverRow) -> &'static str {
    if row.projection.is_some() {
        "projected"
    } else {
        "measured"
    }
}

/// A row's peak saving ([`saving`]), `impossible` for an impossible row, and `n/a`
/// for a possible one when the baseline is impossible.
fn peak_saving(row: &LeverRow) -> String {
    match row.saving_bytes {
        Some(bytes) => saving(bytes, row.saving_percent),
        None if !row.impossible.is_empty() => "impossible".to_owned(),
        None => "n/a".to_owned(),
    }
}

/// The legend of the rows' marks, each named by its number.
fn rows_legend(rows: &[&LeverRow]) -> String {
    let marked: Vec<MarkedRow> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            MarkedRow::new(
                (i + 1).to_string(),
                r.doubt(),
                Category::ALL.map(|c| (c, r.category_bytes[c])),
                r.peak_bytes,
            )
        })
        .collect();
    legend(&marked)
}

/// `512.00 MiB (25.00%)`, `-1.00 KiB (-4.80%)`, `0 B`.
fn saving(bytes: i64, percent: Option<f64>) -> String {
    let magnitude = HumanBytes(bytes.unsigned_abs());
    let sign = if bytes < 0 { "-" } else { "" };
    match percent {
        _ if bytes == 0 => "0 B".to_owned(),
        Some(p) => format!("{sign}{magnitude} ({p:.2}%)"),
        None => format!("{sign}{magnitude}"),
    }
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("-".to_owned(), |r| format!("{r:.2}×"))
}

fn optional(bytes: Option<u64>) -> String {
    bytes.map_or("-".to_owned(), |b| HumanBytes(b).to_string())
}

/// The table for a terminal, under a heading that names the test: the peak and its
/// saving, the device memory and what fits, the categories that differ from the
/// baseline, and the projected rows' formulas; every table within 100 columns.
pub fn human(name: &str, table: &LeverTable) -> String {
    let mut out = format!("{name} at {}: the levers\n", show_point(&table.at));
    out += &measured_line(table);
    if !table.at.contains_key(BATCH) {
        out += "no `batch` axis in this test's sweep: gradient accumulation is not projected\n";
    }
    let rows: Vec<&LeverRow> = table.levers.iter().chain(&table.projections).collect();
    let mut peak = vec![header(&[
        "#", "LEVER", "KIND", "PEAK", "SAVING", "CPU TIME",
    ])];
    for (i, r) in rows.iter().enumerate() {
        peak.push(vec![
            marked(&(i + 1).to_string(), &r.doubt()),
            lever_name(r),
            kind(r).to_owned(),
            HumanBytes(r.peak_bytes).to_string(),
            peak_saving(r),
            ratio(r.time_ratio),
        ]);
    }
    out += "\n";
    out += &super::predict::table(&peak);
    let _ = writeln!(
        out,
        "  SAVING: the baseline's peak less the row's. CPU TIME: the measured CPU step time\n  over the baseline's (the cost side of a lever); a projected row keeps that of the\n  row it is projected from."
    );
    out += &rows_legend(&rows);

    let mut head = vec!["#".to_owned(), "ALLOCATED".into(), "RESERVED".into()];
    head.extend(table.sizes.iter().map(|&s| HumanBytes(s).to_string()));
    let mut device = vec![head];
    for (i, r) in rows.iter().enumerate() {
        let mut cells = vec![
            marked(&(i + 1).to_string(), &r.doubt()),
            optional(r.allocated_bytes),
            optional(r.reserved_bytes),
        ];
        cells.extend(
            r.fits
                .iter()
                .map(|&(_, fits)| if fits { "yes" } else { "no" }.to_owned()),
        );
        device.push(cells);
    }
    let _ = writeln!(
        out,
        "\nCUDA memory and what fits (the reserved bytes where predicted, else the peak, with\n{} set aside for the CUDA context and libraries)",
        HumanBytes(table.allowance)
    );
    out += &super::predict::table(&device);

    out += &categories(&rows);
    out += &formulas(&rows);
    out + &beside(&rows)
}

/// The projected rows whose lever a level measures, each beside that measurement.
fn beside(rows: &[&LeverRow]) -> String {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let Some(m) = &r.measured else { continue };
        if out.is_empty() {
            out += "\nprojected rows beside the levels that measure them\n";
        }
        let row = rows
            .iter()
            .position(|o| o.projection.is_none() && o.variant == m.variant)
            .map_or(String::new(), |k| format!(", row {}", k + 1));
        let off = match m.off_bytes {
            0 => "the projection is exact".to_owned(),
            b => format!(
                "the projection is {} ({:.2}%) {}",
                HumanBytes(b.unsigned_abs()),
                m.off_percent.unwrap_or(0.0).abs(),
                if b < 0 { "under" } else { "over" }
            ),
        };
        let text = format!(
            "{}. {}: projected {}, measured {} ({}{row}): {off}",
            i + 1,
            lever_name(r),
            HumanBytes(r.peak_bytes),
            HumanBytes(m.peak_bytes),
            show_variant(&m.variant),
        );
        out += &wrap(&text, 96, "  ", "     ");
    }
    out
}

/// What the measured rows are: the combinations of levels, or the baseline alone.
fn measured_line(table: &LeverTable) -> String {
    if table.baseline().variant.is_empty() {
        return "no categorical axes in this test's sweep: the table holds its measured baseline and the projections\n".to_owned();
    }
    let text = if table.levers.len() == 1 {
        format!(
            "measured: the baseline {} alone, predicted from its own fit",
            show_variant(&table.baseline().variant)
        )
    } else {
        format!(
            "measured: {} combinations of levels, each predicted from its own fit, against the baseline {}",
            table.levers.len(),
            show_variant(&table.baseline().variant)
        )
    };
    wrap(&text, 96, "", "  ")
}

/// The categories: the baseline's each, then for every other row those that differ.
fn categories(rows: &[&LeverRow]) -> String {
    let mut cells = vec![header(&["#", "CATEGORY", "BYTES", "SAVING"])];
    for (i, r) in rows.iter().enumerate() {
        let mut first = true;
        for c in Category::ALL {
            let s = r.category_saving_bytes.get(&c).copied().unwrap_or(0);
            if i > 0 && s == 0 {
                continue;
            }
            let number = if first {
                (i + 1).to_string()
            } else {
                String::new()
            };
            first = false;
            cells.push(vec![
                number,
                c.as_str().to_owned(),
                HumanBytes(r.category_bytes[c]).to_string(),
                saving(s, r.category_saving_percent.get(&c).copied().flatten()),
            ]);
        }
        if first {
            cells.push(vec![
                (i + 1).to_string(),
                "(every category as the baseline's)".to_owned(),
                String::new(),
                String::new(),
            ]);
        }
    }
    let mut out =
        "\ncategories (the baseline's, then those of each row that differ from it)\n".to_owned();
    out += &super::predict::table(&cells);
    out
}

/// The projected rows' formulas, wrapped.
fn formulas(rows: &[&LeverRow]) -> String {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let Some(p) = &r.projection else { continue };
        if out.is_empty() {
            out += "\nprojected rows (computed from the measured figures, not measured)\n";
        }
        let text = format!("{}. {}: {}", i + 1, lever_name(r), p.formula);
        out += &wrap(&text, 96, "  ", "     ");
    }
    out
}

fn header(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| (*c).to_owned()).collect()
}

/// `--fit-on` for a terminal: the rows that fit, trusted first, then cheapest, or the
/// closest one and by how much it misses; each row marked with its doubt, and a line
/// saying so when the answer rests on a flagged fit.
pub fn human_fit_on(name: &str, table: &LeverTable, answer: &FitOnAnswer) -> String {
    let mut out = wrap(
        &format!(
            "{name} at {} on {} ({} set aside for the CUDA context and libraries)",
            show_point(&table.at),
            HumanBytes(answer.memory_bytes),
            HumanBytes(answer.allowance_bytes)
        ),
        96,
        "",
        "  ",
    );
    out += &measured_line(table);
    if let Some(miss) = &answer.closest {
        return out + &closest_miss(answer, miss);
    }
    if answer.fitting.is_empty() {
        let _ = writeln!(out, "\nthe table has no rows");
        return out;
    }
    let baseline = table.baseline();
    if answer
        .fitting
        .iter()
        .any(|r| r.projection.is_none() && r.variant == baseline.variant)
    {
        let _ = writeln!(
            out,
            "\nthe baseline fits {} as it is{}",
            HumanBytes(answer.memory_bytes),
            if baseline.doubt().trusted() {
                ": no lever is needed"
            } else {
                ", as predicted from a flagged fit (marked below)"
            }
        );
    }
    if answer.rests_on_flagged {
        let text = format!(
            "no trusted row fits {}: the answer rests on a flagged fit (each row's marks are explained below), so measure it before relying on it (`cargo vramtest measure TEST --at ..`)",
            HumanBytes(answer.memory_bytes)
        );
        out += "\n";
        out += &wrap(&text, 96, "", "  ");
    }
    let _ = writeln!(
        out,
        "\nwhat fits, trusted first, then cheapest (the CPU time ratio, then fewer levers, then\nfewer bytes)"
    );
    out += &fitting_table(answer);
    let _ = writeln!(
        out,
        "  DEVICE: the reserved bytes where predicted, else the peak; `--levers` shows each\n  row's categories and the projected rows' formulas."
    );
    let fitting: Vec<&LeverRow> = answer.fitting.iter().collect();
    out + &rows_legend(&fitting)
}

/// The rows that fit, ranked, each marked with its doubt.
fn fitting_table(answer: &FitOnAnswer) -> String {
    let mut cells = vec![header(&[
        "RANK",
        "LEVER",
        "KIND",
        "CPU TIME",
        "DEVICE",
        "ROOM LEFT",
    ])];
    for (i, r) in answer.fitting.iter().enumerate() {
        let need = r.device_bytes.saturating_add(answer.allowance_bytes);
        cells.push(vec![
            marked(&(i + 1).to_string(), &r.doubt()),
            lever_name(r),
            kind(r).to_owned(),
            ratio(r.time_ratio),
            HumanBytes(r.device_bytes).to_string(),
            HumanBytes(answer.memory_bytes.saturating_sub(need)).to_string(),
        ]);
    }
    super::predict::table(&cells)
}

/// Nothing fits: the closest row, by how much it misses, and its doubt.
fn closest_miss(answer: &FitOnAnswer, miss: &vramtest_model::levers::FitMiss) -> String {
    let need = miss.row.device_bytes.saturating_add(answer.allowance_bytes);
    let doubt = miss.row.doubt();
    let text = format!(
        "nothing fits {}: the closest, {} ({}), needs {} ({} on the device plus the allowance) and misses by {}{}",
        HumanBytes(answer.memory_bytes),
        lever_name(&miss.row),
        kind(&miss.row),
        HumanBytes(need),
        HumanBytes(miss.row.device_bytes),
        HumanBytes(miss.missing_bytes),
        if doubt.trusted() {
            String::new()
        } else {
            format!(
                "; that rests on a flagged fit, so measure it before relying on it ({})",
                marked("the closest", &doubt)
            )
        }
    );
    let mut out = "\n".to_owned() + &wrap(&text, 96, "", "  ");
    let row = MarkedRow::new(
        "the closest".to_owned(),
        doubt,
        Category::ALL.map(|c| (c, miss.row.category_bytes[c])),
        miss.row.peak_bytes,
    );
    out += &legend(&[row]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_model::axes::Grid;
    use vramtest_model::cpu_time::CpuTimeRatio;
    use vramtest_model::levers::parse_fit_on;
    use vramtest_model::pool::PoolPeaks;
    use vramtest_model::sweep::{GridRun, VariantSweep};
    use vramtest_model::{Category, CategoryBytes};

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    const ALLOWANCE: u64 = 544 * MIB;
    const GRANULE: u64 = 2 * MIB;
    /// Parameters and gradients each, by layer.
    const LAYER: u64 = 100 * MIB;
    /// Activations by sample and layer.
    const SAMPLE: u64 = 50 * MIB;

    /// Each category at (batch, layers): a model whose activations grow with both.
    fn categories(batch: u64, layers: u64) -> CategoryBytes {
        categories_kept(batch, layers, SAMPLE)
    }

    /// [`categories`] with `sample` bytes of activations by sample and layer.
    fn categories_kept(batch: u64, layers: u64, sample: u64) -> CategoryBytes {
        CategoryBytes::from([
            (Category::Parameters, LAYER * layers),
            (Category::Gradients, LAYER * layers),
            (Category::OptimizerState, 2 * LAYER * layers),
            (Category::Activations, sample * batch * layers),
            (Category::Inputs, 2 * MIB * batch),
        ])
    }

    fn total(c: &CategoryBytes) -> u64 {
        Category::ALL.iter().map(|&k| c[k]).sum()
    }

    /// A sweep over `batch` and `layers` fitted from points on the model above, with
    /// the pool's allocated and reserved peaks.
    fn sweep() -> Sweep {
        sweep_kept(SAMPLE)
    }

    /// [`sweep`] of [`categories_kept`].
    fn sweep_kept(sample: u64) -> Sweep {
        sweep_of(|batch, layers| categories_kept(batch, layers, sample))
    }

    /// A sweep fitted from points on `categories` (by batch and layers).
    fn sweep_of(categories: impl Fn(u64, u64) -> CategoryBytes) -> Sweep {
        let grid = Grid::new([("batch", vec![1, 2, 4]), ("layers", vec![1, 2, 3])]).unwrap();
        let runs: Vec<GridRun> = grid
            .points()
            .into_iter()
            .map(|point| {
                let c = categories(point["batch"], point["layers"]);
                let peak = total(&c);
                GridRun {
                    point,
                    peak_bytes: peak,
                    category_peaks: c,
                    phase_peaks: Default::default(),
                    phase_temporaries: Default::default(),
                    phase_moments: Default::default(),
                    peak_outside_phases: true,
                    pool: Some(PoolPeaks {
                        allocated_bytes: peak,
                        reserved_bytes: peak.div_ceil(GRANULE) * GRANULE,
                    }),
                }
            })
            .collect();
        Sweep::fit(&grid, &runs).unwrap()
    }

    fn request(batch: u64, ranks: Option<u64>, fit_on: Option<u64>) -> LeverRequest {
        LeverRequest {
            at: [("batch".to_owned(), batch), ("layers".to_owned(), 24)].into(),
            levels: LeverVariant::new(),
            ranks,
            shard: None,
            fit_on,
        }
    }

    fn table(batch: u64, ranks: Option<u64>, fit_on: Option<u64>) -> LeverTable {
        build(&sweep(), &request(batch, ranks, fit_on), ALLOWANCE, GRANULE).unwrap()
    }

    #[test]
    fn the_lever_table_of_a_sweep_without_categorical_axes() {
        let t = table(32, Some(8), None);
        let text = human("p::vram::lm (cpu)", &t);
        insta::assert_snapshot!(text);
        assert_narrow(&text);
        // The baseline, as the model says, and the saving of each projection against it.
        let base = total(&categories(32, 24));
        assert_eq!(t.levers.len(), 1);
        assert_eq!(t.baseline().peak_bytes, base);
        for r in &t.projections {
            assert_eq!(r.saving_bytes, Some(base as i64 - r.peak_bytes as i64));
        }
        // 8-bit moments: three quarters of the optimizer state saved.
        let state = 2 * LAYER * 24;
        let eight = t
            .projections
            .iter()
            .find(|r| lever_name(r) == "8-bit optimizer moments")
            .unwrap();
        assert_eq!(eight.saving_bytes, Some((state - state.div_ceil(4)) as i64));
        // Accumulation: at 16 GiB, the largest divisor of 32 that fits with the
        // accumulator, by brute force.
        let fits_16 = (1..=32u64)
            .rev()
            .filter(|b| 32 % b == 0)
            .find(|&b| {
                let c = categories(b, 24);
                let need = (total(&c) + c[Category::Gradients]).div_ceil(GRANULE) * GRANULE;
                need + ALLOWANCE <= 16 * GIB
            })
            .unwrap();
        assert!(fits_16 < 32);
        assert!(
            text.contains(&format!("accumulation {} × {fits_16}", 32 / fits_16)),
            "{text}"
        );
    }

    #[test]
    fn fit_on_lists_what_fits_or_says_by_how_much_the_best_misses() {
        let memory = parse_fit_on("24GiB").unwrap();
        let t = table(32, Some(8), Some(memory));
        let answer = t.fit_on(memory);
        let text = human_fit_on("p::vram::lm (cpu)", &t, &answer);
        insta::assert_snapshot!(text);
        assert_narrow(&text);
        assert!(!answer.fitting.is_empty());
        for r in &answer.fitting {
            assert!(r.device_bytes + ALLOWANCE <= memory);
        }
        let fitting = t
            .levers
            .iter()
            .chain(&t.projections)
            .filter(|r| r.reserved_bytes.unwrap() + ALLOWANCE <= memory)
            .count();
        assert_eq!(answer.fitting.len(), fitting);

        let memory = parse_fit_on("1GiB").unwrap();
        let t = table(32, None, Some(memory));
        let answer = t.fit_on(memory);
        let text = human_fit_on("p::vram::lm (cpu)", &t, &answer);
        insta::assert_snapshot!("fit_on_misses", text);
        assert_narrow(&text);
        let best = t
            .levers
            .iter()
            .chain(&t.projections)
            .map(|r| r.reserved_bytes.unwrap() + ALLOWANCE)
            .min()
            .unwrap();
        let miss = answer.closest.as_ref().unwrap().missing_bytes;
        assert_eq!(miss, best - memory);
        assert!(
            text.contains(&format!("misses by {}", HumanBytes(best - memory))),
            "{text}"
        );
        // No micro-batch fits 1 GiB, and the closest miss is the smallest one: batch 1
        // and an accumulator of the gradients, from the model's own formula.
        let one = categories(1, 24);
        let need = (total(&one) + one[Category::Gradients]).div_ceil(GRANULE) * GRANULE;
        assert_eq!(miss, need + ALLOWANCE - memory);
        assert!(
            text.contains("the closest, accumulation 32 × 1 (projected)"),
            "{text}"
        );
        // Where the baseline fits, the answer says so before ranking.
        let memory = parse_fit_on("80GiB").unwrap();
        let t = table(32, None, Some(memory));
        let text = human_fit_on("p::vram::lm (cpu)", &t, &t.fit_on(memory));
        assert!(
            t.baseline().reserved_bytes.unwrap() + ALLOWANCE <= memory,
            "the baseline fits 80 GiB"
        );
        assert!(
            text.contains("the baseline fits 80.00 GiB as it is: no lever is needed"),
            "{text}"
        );
        let memory = parse_fit_on("24GiB").unwrap();
        let t = table(32, None, Some(memory));
        let text = human_fit_on("p::vram::lm (cpu)", &t, &t.fit_on(memory));
        assert!(!text.contains("the baseline fits"), "{text}");
    }

    /// Activations by sample and layer at each level of `kept`: `half` checkpoints,
    /// `twice` keeps two copies.
    const KEPT: [(&str, u64, f64); 3] = [
        ("all", SAMPLE, 1.0),
        ("half", SAMPLE / 2, 1.3),
        ("twice", 2 * SAMPLE, 1.05),
    ];

    /// A sweep with the categorical axis `kept` (`all` the baseline), each level
    /// fitted on its own and with its CPU time ratio.
    fn sweep_with_levels() -> Sweep {
        let mut sweep = sweep_kept(KEPT[0].1);
        sweep.levels = [("kept".to_owned(), KEPT.map(|k| k.0.to_owned()).to_vec())].into();
        for (level, sample, ratio) in &KEPT[1..] {
            let micros = (ratio * 1000.0) as u64;
            sweep.variants.push(VariantSweep {
                variant: [("kept".to_owned(), (*level).to_owned())].into(),
                sweep: sweep_kept(*sample),
                saving: None,
                cpu_time_ratio: CpuTimeRatio::of(Some(micros), Some(1000)),
            });
        }
        sweep
    }

    #[test]
    fn a_projected_row_sits_beside_the_level_that_measures_its_lever() {
        let mut sweep = sweep();
        let level = vramtest_model::levers::EIGHT_BIT_MOMENTS;
        sweep.levels = [(
            "optimizer".to_owned(),
            vec!["adam".to_owned(), level.to_owned()],
        )]
        .into();
        // 8-bit moments that keep 1 MiB of bookkeeping per layer besides the moments.
        let eight = sweep_of(|batch, layers| {
            let mut c = categories(batch, layers);
            c[Category::OptimizerState] = 2 * LAYER * layers / 4 + MIB * layers;
            c
        });
        sweep.variants.push(VariantSweep {
            variant: [("optimizer".to_owned(), level.to_owned())].into(),
            sweep: eight,
            saving: None,
            cpu_time_ratio: CpuTimeRatio::of(Some(1020), Some(1000)),
        });
        let t = build(&sweep, &request(8, None, None), ALLOWANCE, GRANULE).unwrap();
        let text = human("p::vram::lm (cpu)", &t);
        insta::assert_snapshot!(text);
        assert_narrow(&text);
        // One 8-bit projection, from `adam`: the measured level is not projected again.
        let eights: Vec<&LeverRow> = t
            .projections
            .iter()
            .filter(|r| {
                matches!(
                    r.projection.as_ref().map(|p| &p.lever),
                    Some(LeverProjection::EightBitMoments)
                )
            })
            .collect();
        let [projected] = eights[..] else {
            panic!("one 8-bit row: {:?}", t.projections)
        };
        assert_eq!(projected.variant["optimizer"], "adam");
        let m = projected.measured.as_ref().unwrap();
        assert_eq!(m.variant["optimizer"], level);
        // At layers 24 the projection misses the 24 MiB of bookkeeping.
        let bookkeeping = 24 * MIB;
        assert_eq!(m.off_bytes, -(bookkeeping as i64));
        assert_eq!(m.peak_bytes, t.levers[1].peak_bytes);
        assert!(
            text.contains("projected rows beside the levels that measure them"),
            "{text}"
        );
        assert!(
            text.contains(&format!("the projection is {} (", HumanBytes(bookkeeping))),
            "{text}"
        );
    }

    #[test]
    fn the_lever_table_has_a_row_per_level_each_from_its_own_fit() {
        let sweep = sweep_with_levels();
        let mut request = request(32, None, None);
        let t = build(&sweep, &request, ALLOWANCE, GRANULE).unwrap();
        let text = human("p::vram::lm (cpu)", &t);
        insta::assert_snapshot!(text);
        assert_narrow(&text);
        assert!(!text.contains("no categorical axes"), "{text}");
        assert_eq!(t.levers.len(), 3);
        let base = total(&categories_kept(32, 24, SAMPLE));
        for (row, (level, sample, ratio)) in t.levers.iter().zip(KEPT) {
            assert_eq!(row.variant["kept"], level);
            let c = categories_kept(32, 24, sample);
            assert_eq!(row.peak_bytes, total(&c), "{level}");
            assert_eq!(
                row.category_bytes[Category::Activations],
                c[Category::Activations]
            );
            assert_eq!(
                row.saving_bytes,
                Some(base as i64 - total(&c) as i64),
                "{level}"
            );
            assert_eq!(row.time_ratio, Some(ratio), "{level}");
        }
        // Each level's own projections, keeping its time ratio; the 8-bit rows' saving
        // against the baseline.
        for (level, sample, ratio) in KEPT {
            let eight = t
                .projections
                .iter()
                .find(|r| {
                    r.variant["kept"] == level
                        && matches!(
                            r.projection.as_ref().map(|p| &p.lever),
                            Some(LeverProjection::EightBitMoments)
                        )
                })
                .unwrap();
            let state = 2 * LAYER * 24;
            let peak = total(&categories_kept(32, 24, sample)) - (state - state.div_ceil(4));
            assert_eq!(eight.peak_bytes, peak);
            assert_eq!(eight.saving_bytes, Some(base as i64 - peak as i64));
            assert_eq!(eight.time_ratio, Some(ratio));
        }
        // `--at .. kept=twice`: that level's rows and the baseline's.
        request.levels = [("kept".to_owned(), "twice".to_owned())].into();
        let t = build(&sweep, &request, ALLOWANCE, GRANULE).unwrap();
        let levels: Vec<&str> = t
            .levers
            .iter()
            .map(|r| r.variant["kept"].as_str())
            .collect();
        assert_eq!(levels, ["all", "twice"]);
        request.levels = [("kept".to_owned(), "none".to_owned())].into();
        let e = build(&sweep, &request, ALLOWANCE, GRANULE).unwrap_err();
        assert_eq!(
            e.to_string(),
            "axis `kept` has no level `none` (its levels: all, half, twice)"
        );
    }

    #[test]
    fn fit_on_ranks_the_measured_levels_by_their_time_then_their_levers() {
        let sweep = sweep_with_levels();
        // What the level `half` needs at batch 32, and a size just under the baseline's.
        let need = |sample| {
            let c = categories_kept(32, 24, sample);
            total(&c).div_ceil(GRANULE) * GRANULE + ALLOWANCE
        };
        let memory = need(SAMPLE) - 1;
        assert!(need(SAMPLE / 2) <= memory);
        let t = build(&sweep, &request(32, None, Some(memory)), ALLOWANCE, GRANULE).unwrap();
        let answer = t.fit_on(memory);
        let text = human_fit_on("p::vram::lm (cpu)", &t, &answer);
        assert_narrow(&text);
        assert!(!answer.fitting.is_empty(), "{text}");
        let mut previous = (0.0, 0);
        for r in &answer.fitting {
            assert!(r.device_bytes + ALLOWANCE <= memory);
            let key = (r.time_ratio.unwrap(), r.lever_count);
            assert!(
                key.0 > previous.0 || (key.0 == previous.0 && key.1 >= previous.1),
                "{text}"
            );
            previous = key;
        }
        // Neither the baseline nor `twice` fits; `half` does, measured.
        assert!(
            answer
                .fitting
                .iter()
                .all(|r| r.variant["kept"] != "twice" || r.projection.is_some())
        );
        assert!(
            answer
                .fitting
                .iter()
                .any(|r| r.variant["kept"] == "half" && r.projection.is_none()),
            "{text}"
        );
        let half = text
            .lines()
            .find(|l| l.contains(" kept=half ") && l.contains(" measured "))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(half.contains(" 1.30× "), "{half}");
    }

    #[test]
    fn flagged_and_impossible_rows_are_marked_explained_and_said() {
        let memory = parse_fit_on("24GiB").unwrap();
        let mut t = table(32, None, Some(memory));
        for r in t.levers.iter_mut().chain(t.projections.iter_mut()) {
            r.flagged = vec!["phase backward".to_owned()];
        }
        // Every row flagged: the answer says no trusted row fits.
        let text = human_fit_on("p::vram::lm (cpu)", &t, &t.fit_on(memory));
        assert_narrow(&text);
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("no trusted row fits 24.00 GiB: the answer rests on a flagged fit"),
            "{text}"
        );
        assert!(flat.contains("every row: phase backward"), "{text}");
        // Nothing fits: the closest says it rests on a flagged fit.
        let text = human_fit_on("p::vram::lm (cpu)", &t, &t.fit_on(GIB));
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains(
                "that rests on a flagged fit, so measure it before relying on it (the closest*)"
            ),
            "{text}"
        );
        // One trusted row: ranked first, and the answer rests on it.
        t.projections[0].flagged.clear();
        let answer = t.fit_on(memory);
        assert!(answer.fitting[0].flagged.is_empty(), "{answer:?}");
        assert!(!answer.rests_on_flagged);
        // An impossible row: marked, its saving not a number.
        t.projections[0].impossible = vec![Category::Activations];
        t.projections[0].saving_bytes = None;
        t.projections[0].saving_percent = None;
        let text = human("p::vram::lm (cpu)", &t);
        assert_narrow(&text);
        let row = text
            .lines()
            .find(|l| {
                l.trim_start()
                    .starts_with(&format!("{}!", t.levers.len() + 1))
            })
            .unwrap_or_else(|| panic!("the impossible row marked: {text}"));
        assert!(row.contains(" impossible "), "{row}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("! impossible: a category predicted above"),
            "{text}"
        );
    }

    fn assert_narrow(text: &str) {
        for line in text.lines() {
            let n = line.chars().count();
            assert!(n <= 100, "{n} columns: {line}");
        }
    }
}
