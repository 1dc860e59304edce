//! A sweep's axial points ([`vramtest_model::axial`]): the budget that bounds them, the
//! points each combination of levels measures toward its target, and what the run says
//! of them: the points the budget held back, what they cost, and where the grid alone
//! mispredicted them.

use super::grid::{combination_label as label, in_attribute_order, is_of};
use crate::harness::protocol::RunPoint;
use crate::harness::registry::TestDef;
use std::time::Duration;
use vramtest_model::HumanBytes;
use vramtest_model::axes::Point;
use vramtest_model::axial::{self, AxialChoice, AxialPoint, AxialSkip};
use vramtest_model::levers::LeverVariant;
use vramtest_model::settings::Settings;
use vramtest_model::sweep::{GridRun, Sweep, show_point};

/// A miss of the grid's prediction at an axial point worth saying: over 2%, as a fit's
/// flag ([`vramtest_model::axes::FLAG_PPM`]).
const MISS_PPM: u64 = vramtest_model::axes::FLAG_PPM;

/// Below this share of the point's peak (1%), a category's miss is not said.
const SMALL_SHARE: u64 = 100;

/// What bounds a sweep's axial points ([`bounds`]).
pub(super) struct Bounds {
    /// The attribute's `axial_budget`, else the metadata's (`0`: none measured); unset,
    /// the default shares [`axial::DEFAULT_SHARE_PERCENT`] of the grid's measured
    /// peaks among the points ([`plan`]).
    pub(super) budget: Option<u64>,
    /// The most one point may need under the default: half the memory of what runs
    /// it (the device's on a device, else the host's where Linux says it), and within
    /// the test's `budget` when one is set.
    pub(super) each: u64,
    /// Whether `each` is half a device's memory rather than the host's.
    pub(super) on_device: bool,
    /// Whether this run records anew (`VRAMTEST_UPDATE=always`): the default then
    /// chooses its points again rather than keep the snapshot's.
    pub(super) anew: bool,
}

/// The [`Bounds`] of `def`'s axial points; `anew` when the run records anew;
/// `device_bytes`, the memory of the device the points run on (`None`: the CPU).
pub(super) fn bounds(
    def: &TestDef,
    settings: &Settings,
    anew: bool,
    device_bytes: Option<u64>,
) -> Bounds {
    let memory = device_bytes.or_else(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| mem_total(&m))
    });
    let ceiling = def.options.budget.or(settings.budget).unwrap_or(u64::MAX);
    Bounds {
        budget: def.options.axial_budget.or(settings.axial_budget),
        each: memory.map_or(u64::MAX, |b| b / 2).min(ceiling),
        on_device: device_bytes.is_some(),
        anew,
    }
}

/// `MemTotal` of a `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib.checked_mul(1024)?)
}

/// How a plan's budget was set, for its notes.
#[derive(Clone, Copy)]
pub(super) enum Budget {
    /// `axial_budget`, each point alone.
    Set,
    /// Unset: the points share this much of the grid's measured peaks (each axis's
    /// share in its choice), each at most `each` ([`Bounds::each`], half a device's
    /// memory when `on_device`).
    Shared {
        total: u64,
        each: u64,
        on_device: bool,
    },
}

/// One axial point to measure: its run, its combination of levels, and the choice.
pub(super) struct Planned {
    pub(super) point: RunPoint,
    pub(super) variant: LeverVariant,
    pub(super) choice: AxialChoice,
}

/// The axial points of every combination of levels of `sweep` (a grid's fit) that
/// predicts a target, within `bounds` (its budget `None`: the default, shared from
/// each combination's measured grid `runs`); the snapshot's sweep `old` pins the
/// points it recorded ([`axial::choose`], [`axial::choose_shared`]). With the notes on
/// the axes the budget held back or left out.
pub(super) fn plan(
    name: &str,
    def: &TestDef,
    sweep: &Sweep,
    bounds: &Bounds,
    runs: &[(Vec<(String, String)>, GridRun)],
    old: Option<&Sweep>,
) -> (Vec<Planned>, Vec<String>) {
    let mut planned = Vec::new();
    let mut notes = Vec::new();
    if bounds.budget == Some(0) {
        return (planned, notes);
    }
    for (variant, fitted) in sweep.combinations() {
        let Some(target) = &fitted.target else {
            continue;
        };
        let before = old.and_then(|o| o.variant(&variant));
        let recorded = before.map_or(&[][..], |o| &o.axial[..]);
        // The snapshot's points, where it holds this grid and target and the run does
        // not record anew.
        let kept = before
            .filter(|o| {
                !bounds.anew
                    && o.axes == fitted.axes
                    && o.target.as_ref().map(|t| &t.at) == Some(&target.at)
            })
            .map(|o| &o.axial[..]);
        let peak_at = |p: &Point| fitted.peak_at(p).ok();
        let (plan, how) = match bounds.budget {
            Some(b) => {
                let plan = axial::choose(&fitted.axes, &target.at, b, recorded, peak_at);
                (plan, Budget::Set)
            }
            None => {
                let grid: u64 = (runs.iter())
                    .filter(|(levels, _)| is_of(levels, &variant))
                    .map(|(_, run)| run.peak_bytes)
                    .sum();
                let total = grid / 100 * axial::DEFAULT_SHARE_PERCENT;
                let each = bounds.each;
                let at = &target.at;
                let plan = axial::choose_shared(&fitted.axes, at, total, each, kept, peak_at);
                if kept.is_some_and(<[_]>::is_empty) {
                    let fresh = axial::choose_shared(&fitted.axes, at, total, each, None, peak_at);
                    notes.extend(none_kept_note(&label(name, &variant), &fresh));
                }
                let on_device = bounds.on_device;
                (
                    plan,
                    Budget::Shared {
                        total,
                        each,
                        on_device,
                    },
                )
            }
        };
        let label = label(name, &variant);
        for c in &plan.points {
            if let Some(full) = c.held_back_from {
                notes.push(held_back_note(&label, c, full, how));
            }
        }
        notes.extend(plan.skipped.iter().map(|s| skipped_note(&label, s, how)));
        let levels = in_attribute_order(def, &variant);
        planned.extend(plan.points.into_iter().map(|choice| {
            let axes = def
                .options
                .axes
                .iter()
                .map(|&(k, _)| (k.to_owned(), choice.at[k] as usize))
                .collect();
            Planned {
                point: RunPoint::axes(axes).with_levels(levels.clone()),
                variant: variant.clone(),
                choice,
            }
        }));
    }
    (planned, notes)
}

/// A note when the default keeps a snapshot's none though `fresh` (the points it
/// would choose anew) has some.
fn none_kept_note(label: &str, fresh: &axial::AxialPlan) -> Option<String> {
    let axes: Vec<String> = (fresh.points.iter())
        .map(|c| format!("{}={}", c.axis, c.at[&c.axis]))
        .collect();
    (!axes.is_empty()).then(|| {
        format!(
            "{label}: the snapshot records no axial points (recorded before them, with `axial_budget = \"0\"`, or with every axis over its budget), and the default budget keeps a snapshot's points so that its verdict is judged at the same ones: record it anew (`VRAMTEST_UPDATE=always`), or set `axial_budget`, to measure the {} this grid would ({})",
            axes.len(),
            axes.join(", ")
        )
    })
}

/// The budget a point was chosen within, as a note says it (`None`: the snapshot's).
fn budget_words(budget: Option<u64>, how: Budget) -> String {
    let Some(budget) = budget else {
        return "the budget the snapshot was recorded with, whose points the default keeps; `VRAMTEST_UPDATE=always` chooses anew, and `axial_budget` sets a budget".to_owned();
    };
    match how {
        Budget::Set => format!(
            "the axial budget of {}; `axial_budget` sets it",
            HumanBytes(budget)
        ),
        Budget::Shared {
            each, on_device, ..
        } if budget == each => format!(
            "the default axial budget's bound on one point, {}: half {} memory, or the test's `budget`; `axial_budget` sets it",
            HumanBytes(budget),
            if on_device {
                "the device's"
            } else {
                "this machine's"
            }
        ),
        Budget::Shared { total, .. } => format!(
            "its share, {}, of the default axial budget ({}% of the grid's measured peaks, {}); `axial_budget` sets it",
            HumanBytes(budget),
            axial::DEFAULT_SHARE_PERCENT,
            HumanBytes(total)
        ),
    }
}

fn held_back_note(label: &str, c: &AxialChoice, full: u64, how: Budget) -> String {
    format!(
        "{label}: axial point {}={} (the target's {}={} is predicted to need {}, over {})",
        c.axis,
        c.at[&c.axis],
        c.axis,
        c.target,
        HumanBytes(full),
        budget_words(c.budget, how)
    )
}

fn skipped_note(label: &str, s: &AxialSkip, how: Budget) -> String {
    if s.budget.is_none() {
        return format!(
            "{label}: no axial point toward {}={}: the snapshot records none for this axis, and the default budget keeps a snapshot's points as recorded; `VRAMTEST_UPDATE=always` chooses anew, and `axial_budget` sets a budget",
            s.axis, s.target
        );
    }
    let need = s.predicted.map_or("cannot be predicted".to_owned(), |b| {
        format!("is predicted to need {}", HumanBytes(b))
    });
    let which = if s.value == s.target {
        "the target's own point"
    } else {
        "one step beyond the grid"
    };
    format!(
        "{label}: no axial point toward {}={}: {which}, {}={}, {need}, over {}",
        s.axis,
        s.target,
        s.axis,
        s.value,
        budget_words(s.budget, how)
    )
}

/// A note for an axial point whose run failed with `message` (the harness's line: the
/// point and what ended it), left out of the fits.
pub(super) fn failed_note(name: &str, plan: &Planned, message: &str) -> String {
    let c = &plan.choice;
    let first = message.lines().next().unwrap_or_default();
    format!(
        "{}: axial point {}={} left out: {first} (the fits rest on the grid and the other points; `axial_budget` bounds the points, `\"0\"` measures none)",
        label(name, &plan.variant),
        c.axis,
        c.at[&c.axis]
    )
}

/// What a snapshot keeps of a measured axial point.
pub(super) fn record(choice: &AxialChoice, run: &GridRun) -> AxialPoint {
    AxialPoint {
        axis: choice.axis.clone(),
        target: choice.target,
        at: choice.at.clone(),
        peak_bytes: run.peak_bytes,
        category_bytes: run.category_peaks.iter().collect(),
    }
}

/// Where the grid alone mispredicted an axial point: each figure (the peak, and each
/// category over 1% of the point's peak) off by more than 2%, named with the axis and
/// the values beyond the grid. `grid` is the combination's fit without the point.
pub(super) fn miss_note(label: &str, grid: &Sweep, point: &AxialPoint) -> Option<String> {
    let predicted = grid.estimate(&point.at, 1).ok()?;
    let off = |measured: u64, predicted: u64| -> Option<String> {
        let diff = predicted.abs_diff(measured);
        (u128::from(diff) * 1_000_000 > u128::from(measured.max(1)) * u128::from(MISS_PPM)).then(
            || {
                let sign = if predicted >= measured { "+" } else { "−" };
                format!(
                    "measured {}, the grid alone predicted {} ({sign}{:.1}%)",
                    HumanBytes(measured),
                    HumanBytes(predicted),
                    diff as f64 / measured.max(1) as f64 * 100.0
                )
            },
        )
    };
    let mut misses: Vec<String> = Vec::new();
    if let Some(m) = off(point.peak_bytes, predicted.peak_bytes) {
        misses.push(format!("peak {m}"));
    }
    for (category, &measured) in &point.category_bytes {
        if measured.saturating_mul(SMALL_SHARE) < point.peak_bytes {
            continue;
        }
        let p = predicted.category_bytes.get(category).copied().unwrap_or(0);
        if let Some(m) = off(measured, p) {
            misses.push(format!("{category} {m}"));
        }
    }
    if misses.is_empty() {
        return None;
    }
    let values = grid
        .axes
        .get(&point.axis)
        .map(|v| {
            let (lo, hi) = (v.iter().min(), v.iter().max());
            format!("{}-{}", lo.unwrap_or(&0), hi.unwrap_or(&0))
        })
        .unwrap_or_default();
    Some(format!(
        "{label}: axial point {}: {}: {}={} behaves unlike {} {values} (the fits include it; a flagged fit says where it still misses)",
        show_point(&point.at),
        misses.join("; "),
        point.axis,
        point.at[&point.axis],
        point.axis
    ))
}

/// What the axial points cost against the grid's points: their count and CPU time
/// (their wall time where the CPU time is unknown).
pub(super) fn cost_note(
    name: &str,
    axial: &[(Option<u64>, Duration)],
    grid: &[(Option<u64>, Duration)],
) -> Option<String> {
    if axial.is_empty() {
        return None;
    }
    let cpu = |points: &[(Option<u64>, Duration)]| -> Option<u64> {
        points.iter().map(|(micros, _)| *micros).sum()
    };
    let (what, spent, whole) = match (cpu(axial), cpu(grid)) {
        (Some(a), Some(g)) => ("of CPU", a, g),
        _ => {
            let wall = |p: &[(Option<u64>, Duration)]| -> u64 {
                p.iter().map(|(_, w)| w.as_micros() as u64).sum()
            };
            ("of wall time", wall(axial), wall(grid))
        }
    };
    let seconds = |micros: u64| micros as f64 / 1e6;
    let share = spent as f64 / whole.max(1) as f64 * 100.0;
    let n = axial.len();
    Some(format!(
        "{name}: {n} axial point{} (the target's values, one axis at a time) took {:.2} s {what}, {share:.0}% of the grid's {:.2} s",
        if n == 1 { "" } else { "s" },
        seconds(spent),
        seconds(whole)
    ))
}

/// A note per figure of `sweep`'s combinations fitted without its axis's smallest level
/// ([`vramtest_model::refit`]) that the snapshot `old` does not record so.
pub(super) fn without_notes(name: &str, sweep: &Sweep, old: Option<&Sweep>) -> Vec<String> {
    let mut notes = Vec::new();
    for (variant, own) in sweep.combinations() {
        let before = old.and_then(|o| o.variant(&variant));
        for (figure, w) in &own.fitted_without {
            if before.is_some_and(|b| b.fitted_without.get(figure) == Some(w)) {
                continue;
            }
            let (axis, level) = (&w.axis, w.level);
            let pct = |ppm: u64| ppm as f64 / 10_000.0;
            // What shows the level is a regime: the fit's held-out miss with it, the
            // fit without it missing the level's own points, or both.
            let flag = vramtest_model::axes::FLAG_PPM;
            let mut why = Vec::new();
            if w.with_ppm > flag {
                why.push(format!(
                    "the fit misses a held-out point by {:.2}% with it",
                    pct(w.with_ppm)
                ));
            }
            if w.level_miss_ppm > flag {
                why.push(format!(
                    "the fit without it misses {axis}={level} by {:.2}%",
                    pct(w.level_miss_ppm)
                ));
            }
            let why = format!(
                "{}, and no held-out point by over 2% without it",
                why.join("; ")
            );
            notes.push(format!(
                "{}: `{figure}` fitted without {axis}={level}: {axis}={level} behaves unlike the other levels and the target's axial point ({why}); its predictions rest on {axis} above {level}",
                label(name, &variant),
            ));
        }
    }
    notes
}

/// A note when the snapshot `old` holds no axial points and `sweep` has some: a
/// snapshot recorded before they were measured. Its target is compared all the same
/// ([`vramtest_model::sweep::compare_target`]); accepting the result keeps them.
pub(super) fn new_points_note(name: &str, sweep: &Sweep, old: Option<&Sweep>) -> Option<String> {
    let old = old?;
    let added: usize = (sweep.combinations().into_iter())
        .filter(|(variant, _)| old.variant(variant).is_some_and(|o| o.axial.is_empty()))
        .map(|(_, s)| s.axial.len())
        .sum();
    (added > 0).then(|| {
        format!(
            "{name}: the snapshot predates axial points: the target's prediction now rests on {added} more (the target's values, one axis at a time); accept this result to keep them"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(pairs: &[(&str, u64)]) -> Point {
        pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    #[test]
    fn the_cost_is_the_share_of_the_grids_cpu_time() {
        let ms = Duration::from_millis;
        let grid = [(Some(4_000_000), ms(1)), (Some(6_000_000), ms(1))];
        let axial = [(Some(1_000_000), ms(1))];
        let note = cost_note("t", &axial, &grid).unwrap();
        assert_eq!(
            note,
            "t: 1 axial point (the target's values, one axis at a time) took 1.00 s of CPU, 10% of the grid's 10.00 s"
        );
        // Without every CPU time, the wall times.
        let axial = [(None, ms(500)), (Some(1), ms(500))];
        let note = cost_note("t", &axial, &grid).unwrap();
        assert!(note.contains("2 axial points"), "{note}");
        assert!(note.contains("1.00 s of wall time, 50000%"), "{note}");
        assert!(cost_note("t", &[], &grid).is_none());
    }

    #[test]
    fn a_held_back_point_names_both_values_and_the_budget() {
        let c = AxialChoice {
            axis: "seq".to_owned(),
            target: 4096,
            at: point(&[("batch", 1), ("seq", 1400)]),
            held_back_from: Some(30 << 30),
            budget: Some(6 << 30),
        };
        let note = held_back_note("t", &c, 30 << 30, Budget::Set);
        assert_eq!(
            note,
            "t: axial point seq=1400 (the target's seq=4096 is predicted to need 30.00 GiB, over the axial budget of 6.00 GiB; `axial_budget` sets it)"
        );
        let s = AxialSkip {
            axis: "seq".to_owned(),
            target: 4096,
            value: 4096,
            predicted: None,
            budget: Some(1),
        };
        assert!(skipped_note("t", &s, Budget::Set).contains("cannot be predicted"));
    }

    fn sweep_without(without: &[(&str, u64, u64, u64)]) -> Sweep {
        Sweep {
            axes: std::collections::BTreeMap::from([("heads".to_owned(), vec![2, 4, 6])]),
            figures: Default::default(),
            target: None,
            levels: Default::default(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: without
                .iter()
                .map(|&(figure, level, with_ppm, level_miss_ppm)| {
                    let w = vramtest_model::refit::Without {
                        axis: "heads".to_owned(),
                        level,
                        with_ppm,
                        level_miss_ppm,
                    };
                    (figure.to_owned(), w)
                })
                .collect(),
            migrated: false,
        }
    }

    #[test]
    fn a_level_left_out_is_said_with_the_miss_that_shows_it_once() {
        // Flagged with the level: its held-out miss. Bent through it unflagged: the
        // refit's miss at the level.
        let sweep = sweep_without(&[("activations", 2, 0, 41_000), ("temporaries", 2, 52_000, 0)]);
        let notes = without_notes("t", &sweep, None);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(
            notes[0],
            "t: `activations` fitted without heads=2: heads=2 behaves unlike the other levels and the target's axial point (the fit without it misses heads=2 by 4.10%, and no held-out point by over 2% without it); its predictions rest on heads above 2",
        );
        let said = "(the fit misses a held-out point by 5.20% with it, and no held-out point by over 2% without it)";
        assert!(notes[1].contains(said), "{}", notes[1]);
        // Both: both said.
        let both = sweep_without(&[("activations", 2, 38_609, 29_030)]);
        let note = &without_notes("t", &both, None)[0];
        let said = "(the fit misses a held-out point by 3.86% with it; the fit without it misses heads=2 by 2.90%, and";
        assert!(note.contains(said), "{note}");
        // A snapshot that records the same refit: nothing new to say.
        assert!(without_notes("t", &sweep, Some(&sweep)).is_empty());
        let other = sweep_without(&[("activations", 2, 0, 30_000)]);
        assert_eq!(without_notes("t", &sweep, Some(&other)).len(), 2);
    }

    /// On a device the default bound on one point is half the device's memory, not
    /// the host's: a GPU of 24 GiB beside a host of 256 GiB must not be asked for a
    /// point of 100 GiB. The test's `budget` still bounds it.
    #[test]
    fn on_a_device_one_point_is_bounded_by_half_its_memory() {
        let mut def = TestDef::over(&[("seq", &[4, 8])]);
        let settings = Settings::default();
        let gpu = bounds(&def, &settings, false, Some(24 << 30));
        assert_eq!((gpu.each, gpu.on_device), (12 << 30, true));
        let host = bounds(&def, &settings, false, None);
        assert!(!host.on_device);
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
        let expected = meminfo
            .as_deref()
            .and_then(mem_total)
            .map_or(u64::MAX, |b| b / 2);
        assert_eq!(host.each, expected);
        def.options.budget = Some(2 << 30);
        assert_eq!(bounds(&def, &settings, false, Some(24 << 30)).each, 2 << 30);
    }

    #[test]
    fn the_machines_memory_is_read_from_meminfo() {
        let meminfo = "MemFree:  100 kB\nMemTotal:       24576000 kB\nSwapTotal: 0 kB\n";
        assert_eq!(mem_total(meminfo), Some(24_576_000 * 1024));
        assert_eq!(mem_total("MemTotal: 12 MB\n"), None);
        assert_eq!(mem_total("MemFree: 12 kB\n"), None);
    }

    #[test]
    fn a_point_held_back_by_the_default_says_which_bound_held_it() {
        let c = AxialChoice {
            axis: "seq".to_owned(),
            target: 4096,
            at: point(&[("batch", 1), ("seq", 1400)]),
            held_back_from: Some(30 << 30),
            budget: Some(1 << 30),
        };
        let shared = Budget::Shared {
            total: 4 << 30,
            each: 12 << 30,
            on_device: false,
        };
        let note = held_back_note("t", &c, 30 << 30, shared);
        assert_eq!(
            note,
            "t: axial point seq=1400 (the target's seq=4096 is predicted to need 30.00 GiB, over its share, 1.00 GiB, of the default axial budget (10% of the grid's measured peaks, 4.00 GiB); `axial_budget` sets it)"
        );
        let bound = Budget::Shared {
            total: 40 << 30,
            each: 1 << 30,
            on_device: false,
        };
        let note = held_back_note("t", &c, 30 << 30, bound);
        assert!(
            note.contains("bound on one point, 1.00 GiB: half this machine's memory"),
            "{note}"
        );
        let on_device = Budget::Shared {
            total: 40 << 30,
            each: 1 << 30,
            on_device: true,
        };
        let note = held_back_note("t", &c, 30 << 30, on_device);
        assert!(
            note.contains("bound on one point, 1.00 GiB: half the device's memory"),
            "{note}"
        );
    }
}
