//! What `show` adds below a snapshot's tables: the breakdown as bars, the figures
//! against the formulas practitioners use, what fits on common GPU memory sizes (the
//! run's allocations replayed through the CUDA pool model, and a batch sweep's fit:
//! a sweep over the one axis `batch`, solved for it as `show --solve batch` does),
//! and hints whose savings come from the measurement.

use std::fmt::Write as _;
use vramtest_model::axes::Point;
use vramtest_model::explain::{self, Measured};
use vramtest_model::fit::{self, LargestBatch, MEMORY_SIZES};
use vramtest_model::pool::{Allowance, PredictedLines, Prediction, SlopeFloors};
use vramtest_model::sweep::{BATCH, Figure, Sweep};
use vramtest_model::{Body, DeviceClass, HumanBytes};

/// What `show` knows about running the step on a GPU.
#[derive(Debug, Clone, Copy)]
pub struct Gpu<'a> {
    /// The package's `reserve`, if it names one (without a prediction: the allowance,
    /// [`fit::DEFAULT_RESERVE`] unless set).
    pub reserve: Option<u64>,
    /// What a prediction adds to the pool's memory.
    pub allowance: Allowance,
    /// The last CPU run's replay through the CUDA pool model, if a run left one.
    pub prediction: Option<&'a Prediction>,
}

/// How `show` draws: Unicode blocks on a terminal, ASCII elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawing {
    pub unicode: bool,
}

/// The sections under a snapshot's tables. `totals` is the recorded live total over
/// the step, when a run left a timeline.
pub fn render(body: &Body, gpu: &Gpu, totals: Option<&[u64]>, draw: Drawing) -> String {
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
    out += &match gpu
        .prediction
        .filter(|_| body.device_class == DeviceClass::Cpu)
    {
        Some(prediction) => predicted_fits(body, prediction, gpu.allowance),
        None => fits(body, gpu.reserve),
    };
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
    explain::hints(&Measured {
        peak_bytes: body.peak_bytes,
        peak_phase: body.peak_phase,
        at_peak: &body.at_peak,
        category_peaks: &body.category_peaks,
        scaling: body.sweep(),
    })
    .into_iter()
    .map(|h| h.text)
    .collect()
}

const NO_SWEEP: &str = "  no batch sweep: `#[vramtest(batch = [64, 128, 256])]` with `t.batch()` fits every category as fixed + per-sample bytes and says what batch fits\n";

/// A batch sweep: a sweep over the one axis `batch`.
pub fn batch_sweep(body: &Body) -> Option<&Sweep> {
    body.sweep()
        .filter(|s| s.axes.len() == 1 && s.axes.contains_key(BATCH))
}

/// The sweep's first point: each axis at its first value.
fn first_point(sweep: &Sweep) -> Point {
    sweep
        .axes
        .iter()
        .map(|(k, v)| (k.clone(), v.first().copied().unwrap_or(1)))
        .collect()
}

/// The peak at `batch` (the others axes at their first value), as the sweep predicts it.
fn peak_at(sweep: &Sweep, batch: u64) -> Option<u64> {
    let mut at = first_point(sweep);
    at.insert(BATCH.to_owned(), batch);
    sweep.estimate(&at, 1).ok().map(|e| e.peak_bytes)
}

/// What each sample adds to a batch sweep's peak, and to each phase's, from its
/// smallest to its largest batch: the least the pool's lines may grow by.
fn slope_floors(sweep: &Sweep) -> SlopeFloors {
    let Some(batches) = sweep.axes.get(BATCH) else {
        return SlopeFloors::default();
    };
    let (Some(&lo), Some(&hi)) = (batches.iter().min(), batches.iter().max()) else {
        return SlopeFloors::default();
    };
    let slope = |at: &dyn Fn(u64) -> Option<u64>| {
        let rise = i128::from(at(hi)?) - i128::from(at(lo)?);
        i64::try_from(rise / i128::from(hi.checked_sub(lo).filter(|d| *d > 0)?)).ok()
    };
    let phases = vramtest_model::Phase::ALL
        .into_iter()
        .filter_map(|phase| {
            // The phase's peak, or the largest of its moments.
            let fits: Vec<_> = (sweep.figures.iter())
                .filter(|(k, _)| Figure::parse(k).and_then(Figure::phase) == Some(phase))
                .map(|(_, fit)| fit)
                .collect();
            let at = |batch: u64| {
                let mut point = first_point(sweep);
                point.insert(BATCH.to_owned(), batch);
                let bytes = fits.iter().map(|f| f.predict(&point).ok().map(|p| p.bytes));
                bytes.collect::<Option<Vec<u64>>>()?.into_iter().max()
            };
            Some((phase, slope(&at)?))
        })
        .collect();
    SlopeFloors {
        peak: slope(&|batch| peak_at(sweep, batch)),
        phases,
    }
}

/// The largest batch whose predicted peak fits `memory` after `reserve`, as `show
/// --solve batch` searches it (up to 2³²: beyond, the peak does not grow with the
/// batch).
fn largest_batch(sweep: &Sweep, memory: u64, reserve: u64) -> LargestBatch {
    const CAP: u64 = 1 << 32;
    let room = memory.saturating_sub(reserve);
    match sweep.solve_by(&first_point(sweep), BATCH, 1, |e| Ok(e.peak_bytes <= room)) {
        Ok(Some(n)) if n >= CAP => LargestBatch::Any,
        Ok(Some(n)) => LargestBatch::UpTo(n),
        _ => LargestBatch::UpTo(0),
    }
}

/// What stands for a batch sweep's model: the axes of a sweep over named axes, and
/// its target, or how to ask for a sweep.
fn no_batch_sweep(body: &Body) -> String {
    let Some(sweep) = body.sweep() else {
        return NO_SWEEP.to_owned();
    };
    let axes: Vec<String> = sweep
        .axes
        .iter()
        .map(|(k, v)| format!("{k} = {v:?}"))
        .collect();
    let mut out = format!(
        "  a sweep over named axes ({}): `show NAME --at axis=value,..` predicts any configuration, `--solve AXIS` the largest value that fits\n",
        axes.join(", ")
    );
    let levels: Vec<String> = sweep
        .levels
        .iter()
        .map(|(k, v)| format!("{k} = {v:?}"))
        .collect();
    if !levels.is_empty() {
        let _ = writeln!(
            out,
            "  with levels ({}), each combination fitted on its own: `--at .. --levers` compares them; the figures here are the baseline's",
            levels.join(", ")
        );
    }
    if let Some(target) = &sweep.target {
        let _ = writeln!(
            out,
            "  target ({}): predicted peak {}{}",
            vramtest_model::sweep::show_point(&target.at),
            HumanBytes(target.peak_bytes),
            if levels.is_empty() {
                ""
            } else {
                " (the baseline's)"
            }
        );
    }
    out
}

/// The "what fits" section without a prediction: the fit and the largest batch per
/// memory size, from the predicted peak after `reserve`.
pub fn fits(body: &Body, reserve: Option<u64>) -> String {
    let mut out = String::from("\nwhat fits\n");
    let Some(sweep) = batch_sweep(body) else {
        out += &no_batch_sweep(body);
        return out;
    };
    let reserve = reserve.unwrap_or(fit::DEFAULT_RESERVE);
    out += &sweep_model(sweep);
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
                describe(largest_batch(sweep, m.bytes, reserve)),
            )
        })
        .collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(6);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(3);
    let _ = writeln!(out, "  {:<w0$}  {:<w1$}  LARGEST BATCH", "MEMORY", "GPU");
    for (mem, gpu, batch) in rows {
        let _ = writeln!(out, "  {mem:<w0$}  {gpu:<w1$}  {batch}");
    }
    out
}

/// A batch sweep's fit: the peak's formula (or its phases', whose largest it is) and
/// every category's that grows with the batch.
fn sweep_model(sweep: &Sweep) -> String {
    let mut out = String::new();
    let sizes: Vec<String> = sweep
        .axes
        .get(BATCH)
        .into_iter()
        .flatten()
        .map(u64::to_string)
        .collect();
    let formula = |figure: Figure| {
        sweep
            .figures
            .get(&figure.to_string())
            .map(|f| f.terms.to_string())
    };
    match formula(Figure::Peak) {
        Some(peak) => {
            let _ = writeln!(out, "  batch sweep {}: peak ≈ {peak}", sizes.join(", "));
        }
        None => {
            let _ = writeln!(
                out,
                "  batch sweep {}: the peak is the largest of its phases'",
                sizes.join(", ")
            );
            for phase in vramtest_model::Phase::ALL {
                let moments = vramtest_model::Category::ALL.map(|c| Figure::PhaseMoment(phase, c));
                for figure in std::iter::once(Figure::Phase(phase)).chain(moments) {
                    if let Some(f) = formula(figure) {
                        let _ = writeln!(out, "    {figure} ≈ {f}");
                    }
                }
            }
        }
    }
    for c in vramtest_model::Category::ALL {
        if let Some(fit) = sweep
            .figures
            .get(c.as_str())
            .filter(|f| f.terms.terms.iter().any(|t| t.monomial.degree() > 0))
        {
            let _ = writeln!(out, "    {c} ≈ {}", fit.terms);
        }
    }
    out
}

/// The "what fits" section of a CPU run with a prediction: per memory size, the
/// predicted allocated and reserved peaks on a CUDA GPU and what the device holds with
/// `allowance` added; with a sweep, at the largest batch whose *reserved* peak fits
/// (the reserved line never grows slower than the snapshot's peak).
pub fn predicted_fits(body: &Body, prediction: &Prediction, allowance: Allowance) -> String {
    let mut out = String::from("\nwhat fits\n");
    let sweep = batch_sweep(body);
    match sweep {
        Some(sweep) => out += &sweep_model(sweep),
        None => out += &no_batch_sweep(body),
    }
    let pool = prediction.pool;
    let _ = writeln!(
        out,
        "  on a CUDA GPU, predicted by replaying this run's allocations through CUDA's stream-ordered pool ({} alignment, {} granules, released at phase boundaries):",
        HumanBytes(pool.alignment),
        HumanBytes(pool.granularity)
    );
    let floors = sweep.map(slope_floors).unwrap_or_default();
    let lines = prediction.lines(&floors).filter(|_| prediction.is_sweep());
    match (&lines, prediction.points.first()) {
        (Some(lines), _) => out += &describe_lines(lines),
        (None, Some(point)) => {
            let _ = writeln!(
                out,
                "    allocated {}, reserved {} at the peak",
                HumanBytes(point.replay.peaks.allocated_bytes),
                HumanBytes(point.replay.peaks.reserved_bytes)
            );
        }
        (None, None) => {}
    }
    let _ = writeln!(out, "  {}", describe_allowance(allowance));
    let rows = prediction.per_size(allowance.bytes(), &floors);
    let mut header = vec!["MEMORY", "GPU"];
    if lines.is_some() {
        header.push("LARGEST BATCH");
    }
    header.extend(["ALLOCATED", "RESERVED", "ON THE DEVICE"]);
    if lines.is_none() {
        header.push("FITS");
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![
                HumanBytes(r.memory.bytes).to_string(),
                r.memory.example.into(),
            ];
            if let Some(batch) = r.batch {
                row.push(describe(batch));
            }
            row.extend([
                HumanBytes(r.allocated_bytes).to_string(),
                HumanBytes(r.reserved_bytes).to_string(),
                HumanBytes(r.device_bytes).to_string(),
            ]);
            if r.batch.is_none() {
                row.push(if r.fits { "yes" } else { "no" }.into());
            }
            row
        })
        .collect();
    out += &columns(&header, &table);
    if let Some(lines) = &lines {
        let measured = prediction.points.iter().map(|p| p.batch).max().unwrap_or(1);
        let largest = rows
            .iter()
            .filter_map(|r| r.batch.and_then(LargestBatch::batch))
            .max()
            .unwrap_or(measured);
        for step in lines.peak_moves(measured, largest) {
            let _ = writeln!(
                out,
                "  {step}: the sweep's peak phase is not the peak of the largest batches"
            );
        }
    }
    out
}

/// The lines of a prediction: the whole run's, and with each phase's, the peak is the
/// largest of them at every batch.
fn describe_lines(lines: &PredictedLines) -> String {
    let mut out = String::new();
    if lines.phases.is_empty() {
        let _ = writeln!(out, "    allocated ≈ {}", lines.allocated);
        let _ = writeln!(out, "    reserved  ≈ {}", lines.reserved);
        return out;
    }
    let _ = writeln!(
        out,
        "    the peak at a batch is the largest of these lines there (the run's, and each phase's):"
    );
    let width = lines
        .phases
        .iter()
        .map(|p| p.phase.as_str().len() + 6)
        .max()
        .unwrap_or(0)
        .max("the run".len());
    let row = |name: String, allocated, reserved| {
        format!("      {name:<width$}  allocated ≈ {allocated}, reserved ≈ {reserved}\n")
    };
    out += &row("the run".into(), lines.allocated, lines.reserved);
    for p in &lines.phases {
        out += &row(format!("phase {}", p.phase), p.allocated, p.reserved);
    }
    out
}

/// What a prediction adds to the pool's memory, and where it is configured.
fn describe_allowance(allowance: Allowance) -> String {
    match allowance {
        Allowance::Terms(t) => format!(
            "each size adds {} for the CUDA context (an estimate, `cuda_context` in the metadata) and {} for the cuBLAS workspace (`cublas_workspace`)",
            HumanBytes(t.cuda_context),
            HumanBytes(t.cublas_workspace)
        ),
        Allowance::Reserve(bytes) => format!(
            "each size adds {} for the CUDA context and libraries (`reserve` in the metadata, in place of `cuda_context` and `cublas_workspace`)",
            HumanBytes(bytes)
        ),
    }
}

/// A left-aligned table, two spaces between columns, indented by two.
fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let mut text = String::from(" ");
        for (cell, width) in cells.iter().zip(&widths) {
            let _ = write!(text, " {cell:<width$} ");
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

fn describe(fits: LargestBatch) -> String {
    match fits {
        LargestBatch::Any => "any (the peak does not grow with the batch)".into(),
        LargestBatch::UpTo(0) => "none (not even one sample)".into(),
        LargestBatch::UpTo(n) => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_model::axes::Grid;
    use vramtest_model::pool::{CudaPool, PoolPeaks, PoolReplay, PredictedPoint};
    use vramtest_model::sweep::GridRun;
    use vramtest_model::{Category, CategoryBytes};

    /// The committed candle-mlp AdamW snapshot, with a batch sweep added: a sweep over
    /// the axis `batch` fitted from points on known lines (10 MiB + 12 KiB a sample for
    /// the peak).
    fn body(scaling: bool) -> Body {
        let text = include_str!("../../tests/data/mlp_adamw@cpu.snap");
        let mut body = vramtest_model::snapshot::parse(text).unwrap().body;
        if scaling {
            let grid = Grid::new([("batch", vec![32, 64, 128])]).unwrap();
            let runs: Vec<GridRun> = [32u64, 64, 128]
                .map(|b| GridRun {
                    point: [("batch".to_owned(), b)].into(),
                    peak_bytes: (10 << 20) + 12_288 * b,
                    category_peaks: CategoryBytes::from([
                        (Category::Activations, 4096 + 6_200 * b),
                        (Category::Inputs, 3_140 * b),
                    ]),
                    phase_peaks: Default::default(),
                    phase_temporaries: Default::default(),
                    phase_moments: Default::default(),
                    peak_outside_phases: true,
                    pool: None,
                })
                .into();
            body.scaling = Some(vramtest_model::sweep::Sweep::fit(&grid, &runs).unwrap());
        }
        body
    }

    fn no_prediction() -> Gpu<'static> {
        Gpu {
            reserve: None,
            allowance: Allowance::from_settings(None, None, None),
            prediction: None,
        }
    }

    fn point(batch: u64, allocated: u64, reserved: u64) -> PredictedPoint {
        PredictedPoint {
            batch,
            replay: PoolReplay {
                peaks: PoolPeaks {
                    allocated_bytes: allocated,
                    reserved_bytes: reserved,
                },
                phases: Default::default(),
            },
        }
    }

    #[test]
    fn show_predicts_a_sweep_on_a_gpu_by_the_reserved_peak() {
        let prediction = Prediction {
            pool: CudaPool::default(),
            points: vec![
                point(32, (10 << 20) + 32 * 12_544, 14 << 20),
                point(64, (10 << 20) + 64 * 12_544, 14 << 20),
                point(128, (10 << 20) + 128 * 12_544, 14 << 20),
            ],
        };
        let text = predicted_fits(
            &body(true),
            &prediction,
            Allowance::from_settings(None, None, None),
        );
        insta::assert_snapshot!(text);
        // reserved = 14 MiB − 32 × 12,544 B + 12,544 B × batch, by the allocated slope.
        let room = (24u64 << 30) - (544 << 20) - ((14 << 20) - 32 * 12_544);
        let row = text.lines().find(|l| l.contains("RTX 4090")).unwrap();
        assert!(row.contains(&format!(" {} ", room / 12_544)), "{row}");
    }

    /// The case of a candle MLP with AdamW: the optimizer step holds the peak over the
    /// sweep (64, 128, 256), backward grows 28% faster per sample.
    const OPTIMIZER_STEP: (u64, u64) = (80_268_083, 33_423);
    const BACKWARD: (u64, u64) = (37_266_309, 42_639);

    fn phase_bytes((fixed, per_sample): (u64, u64), batch: u64) -> u64 {
        fixed + per_sample * batch
    }

    fn crossing_sweep() -> (Body, Prediction) {
        let mut body = body(false);
        let batches = [64u64, 128, 256];
        let grid = Grid::new([("batch", batches.to_vec())]).unwrap();
        let runs: Vec<GridRun> = batches
            .map(|b| {
                let (opt, bwd) = (phase_bytes(OPTIMIZER_STEP, b), phase_bytes(BACKWARD, b));
                GridRun {
                    point: [("batch".to_owned(), b)].into(),
                    peak_bytes: opt.max(bwd),
                    category_peaks: CategoryBytes::from([(Category::Activations, 41_000 * b)]),
                    phase_peaks: [
                        (vramtest_model::Phase::Backward, bwd),
                        (vramtest_model::Phase::OptimizerStep, opt),
                    ]
                    .into(),
                    phase_temporaries: Default::default(),
                    phase_moments: Default::default(),
                    peak_outside_phases: false,
                    pool: None,
                }
            })
            .into();
        body.scaling = Some(Sweep::fit(&grid, &runs).unwrap());
        let granule = |bytes: u64| bytes.div_ceil(2 << 20) * (2 << 20);
        let peaks = |bytes: u64| PoolPeaks {
            allocated_bytes: bytes.div_ceil(256) * 256,
            reserved_bytes: granule(bytes),
        };
        let points = batches
            .iter()
            .map(|&b| {
                let (opt, bwd) = (phase_bytes(OPTIMIZER_STEP, b), phase_bytes(BACKWARD, b));
                PredictedPoint {
                    batch: b,
                    replay: PoolReplay {
                        peaks: peaks(opt.max(bwd)),
                        phases: [
                            (vramtest_model::Phase::Backward, peaks(bwd)),
                            (vramtest_model::Phase::OptimizerStep, peaks(opt)),
                        ]
                        .into(),
                    },
                }
            })
            .collect();
        let prediction = Prediction {
            pool: CudaPool::default(),
            points,
        };
        (body, prediction)
    }

    /// The largest batch in the 24 GiB row of a "what fits" table.
    fn largest_in_24_gib(text: &str) -> u64 {
        let row = text.lines().find(|l| l.contains("RTX 4090")).unwrap();
        row.split_whitespace()
            .find_map(|w| w.parse::<u64>().ok().filter(|n| *n > 1000))
            .unwrap_or_else(|| panic!("{row}"))
    }

    #[test]
    fn what_fits_takes_the_largest_phase_at_every_batch() {
        let (body, prediction) = crossing_sweep();
        let allowance = Allowance::from_settings(None, None, None);
        let text = predicted_fits(&body, &prediction, allowance);
        let room = (24u64 << 30) - allowance.bytes();
        // By hand: the largest batch where each phase's bytes, aligned and rounded up
        // to the pool's 2 MiB granules, fit the room.
        let reserved = |phase, b| phase_bytes(phase, b).div_ceil(2 << 20) * (2 << 20);
        let fits = |b| reserved(OPTIMIZER_STEP, b) <= room && reserved(BACKWARD, b) <= room;
        let mut by_hand = (room - BACKWARD.0) / BACKWARD.1 + 1;
        while !fits(by_hand) {
            by_hand -= 1;
        }
        let answer = largest_in_24_gib(&text);
        // The lines stay above every measured point: at most a granule's samples lost.
        assert!(
            answer <= by_hand && by_hand - answer <= (2 << 20) / BACKWARD.1,
            "{answer} against {by_hand}\n{text}"
        );
        // The grid's peak phase alone would have answered about 28% more: it does not fit.
        assert!(!fits(answer * 5 / 4), "{text}");
        assert!(
            text.contains("the peak moves from optimizer_step to backward above batch ≈ 4,666"),
            "{text}"
        );
        // Without a prediction, from the snapshot's fits: the same maximum of the phases.
        let plain = super::fits(&body, None);
        let answer = largest_in_24_gib(&plain);
        let by_hand = ((24u64 << 30) - (1 << 30) - BACKWARD.0) / BACKWARD.1;
        assert!(
            answer.abs_diff(by_hand) <= 1,
            "{answer} against {by_hand}\n{plain}"
        );
        insta::assert_snapshot!(text);
    }

    #[test]
    fn show_predicts_a_run_without_a_sweep_per_memory_size() {
        let prediction = Prediction {
            pool: CudaPool::default(),
            points: vec![point(1, 22 << 30, (22 << 30) + (6 << 20))],
        };
        let text = render(
            &body(false),
            &Gpu {
                reserve: Some(2 << 30),
                allowance: Allowance::from_settings(Some(2 << 30), None, None),
                prediction: Some(&prediction),
            },
            None,
            Drawing { unicode: false },
        );
        insta::assert_snapshot!(text);
        let row = |gpu: &str| text.lines().find(|l| l.contains(gpu)).unwrap().to_owned();
        assert!(
            row("RTX 4090").ends_with("no"),
            "22 GiB + 6 MiB over 24 GiB"
        );
        assert!(row("A100 40GB").ends_with("yes"));
    }

    #[test]
    fn show_explains_a_sweep() {
        let text = render(
            &body(true),
            &no_prediction(),
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
        let text = render(
            &body(false),
            &no_prediction(),
            None,
            Drawing { unicode: true },
        );
        assert!(text.contains("no batch sweep"), "{text}");
        assert!(text.contains("against the formulas"), "{text}");
    }
}
