//! Axial points: a sweep's target measured one axis at a time.
//!
//! A grid a CPU can run lies 10-150× below the configuration a user trains. The
//! points of a central composite design that reach out along each axis are the
//! cheapest check of that distance: for a sweep with `target(..)`, each numeric axis is
//! measured once at its target value, every other axis at its smallest grid value
//! (`seq = 2048, batch = 1, layers = 1, heads = 2` for a target at `seq = 2048`). The
//! point costs what one long sequence costs on the smallest model, not the target's
//! memory, and it is a real measurement at the target's own value of that axis: the
//! regime a framework enters only at the real size (a copy made only when heads
//! outnumber kv heads, an optimizer step that follows the largest weight) is measured,
//! not extrapolated.
//!
//! The points enter the fit beside the grid's, are kept in the snapshot
//! ([`AxialPoint`]) and judged as the grid's are. A budget bounds each point's predicted
//! peak: an axis whose target point is over it is measured at the largest affordable
//! value toward the target ([`choose`]), and the run says so.
//!
//! This module chooses the points and holds what a snapshot keeps of them; it knows no
//! sweep: the prediction it needs is handed in.

use crate::axes::Point;
use crate::category::Category;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One axial point as a snapshot keeps it: where it was measured and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxialPoint {
    /// The axis taken toward the target.
    pub axis: String,
    /// The target's value of that axis (`at[axis]` is lower when the budget held it
    /// back).
    pub target: u64,
    /// The point measured: the axis at its value, every other at its smallest.
    pub at: Point,
    /// The measured peak.
    pub peak_bytes: u64,
    /// Each category's measured own peak.
    pub category_bytes: BTreeMap<Category, u64>,
}

impl AxialPoint {
    /// Whether the budget held the point back from the target's value.
    pub fn held_back(&self) -> bool {
        self.at.get(&self.axis).is_some_and(|&v| v != self.target)
    }
}

/// A point to measure, chosen by [`choose`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxialChoice {
    /// The axis taken toward the target.
    pub axis: String,
    /// The target's value of that axis.
    pub target: u64,
    /// The point to measure.
    pub at: Point,
    /// The predicted peak at the target's value, when the budget held the point back
    /// to `at`.
    pub held_back_from: Option<u64>,
    /// The budget the point was chosen within; `None` for a point the snapshot
    /// recorded, kept as it is under the default budget ([`choose_shared`]).
    pub budget: Option<u64>,
}

/// An axis whose target value is not measured, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxialSkip {
    /// The axis.
    pub axis: String,
    /// The target's value of it.
    pub target: u64,
    /// The value whose point was over the budget: the first beyond the grid toward
    /// the target (one step of the grid's values), or the target where it is nearer.
    pub value: u64,
    /// The predicted peak of that point, or `None` when the sweep could not predict
    /// it.
    pub predicted: Option<u64>,
    /// The budget it was over; `None` where the snapshot records no point for the
    /// axis, under the default budget ([`choose_shared`]).
    pub budget: Option<u64>,
}

/// What [`choose`] decided for a target.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AxialPlan {
    /// The points to measure, in the axes' order.
    pub points: Vec<AxialChoice>,
    /// The axes with no point: every value toward the target over the budget, or
    /// (under the default, [`choose_shared`]) none recorded in the snapshot.
    pub skipped: Vec<AxialSkip>,
}

/// The point with `axis` at `value`, every other axis of `axes` at its smallest value.
fn along(axes: &BTreeMap<String, Vec<u64>>, axis: &str, value: u64) -> Point {
    axes.iter()
        .map(|(name, values)| {
            let v = if name == axis {
                value
            } else {
                values.iter().copied().min().unwrap_or(1)
            };
            (name.clone(), v)
        })
        .collect()
}

/// The axial points of a sweep over `axes` (its numeric axes and their grid values)
/// toward `target`, each point's predicted peak within `budget`.
///
/// For each axis whose target value is not one of its grid values: the point with the
/// axis at the target's value, every other at its smallest. When `peak_at` (the
/// sweep's predicted peak) puts that point over `budget`, the largest value between
/// the grid's and the target's whose point is within it (a bisection: the peak grows
/// along an axis beyond the grid), a multiple of the grid values' greatest common
/// divisor as each grid value is (`hidden = [16, 24, 32]` is held back to a multiple
/// of 8, which a model that splits it into heads takes); or none, said in
/// [`AxialPlan::skipped`], when even one such step beyond the grid's largest value is
/// over it. A point `recorded` in the snapshot for
/// the same axis and target is measured again as recorded while it is within the
/// budget, so the same snapshot gives the same points on every machine whose budget
/// allows them.
pub fn choose(
    axes: &BTreeMap<String, Vec<u64>>,
    target: &Point,
    budget: u64,
    recorded: &[AxialPoint],
    peak_at: impl Fn(&Point) -> Option<u64>,
) -> AxialPlan {
    let mut plan = AxialPlan::default();
    for (axis, goal) in wanted(axes, target) {
        plan.push(choose_axis(axes, axis, goal, budget, recorded, &peak_at));
    }
    plan
}

/// The share of a grid's measured peaks, in percent, that its axial points may be
/// predicted to need together when no `axial_budget` is set ([`choose_shared`]). A
/// training step's time grows about with the bytes it touches, and somewhat faster at
/// an axial point than at the grid's (a long sequence on the smallest model does more
/// arithmetic per byte kept): on `fixtures/candle-transformer` a 15% share of the
/// bytes cost 20% of the grid's CPU time. 10% keeps the points' cost within the 15%
/// a default may take (the benchmarks page measures it on the fixtures).
pub const DEFAULT_SHARE_PERCENT: u64 = 10;

/// The axial points toward `target` as [`choose`] takes them, within a `total` their
/// predicted peaks share: the axes whose target point needs least are taken first,
/// each within an equal share of what the points before it left, so a cheap axis
/// measures its target and leaves the rest to the dearer ones. `each_at_most` bounds
/// every point alone (the machine's memory). The budget each axis had is in
/// [`AxialChoice::budget`] and [`AxialSkip::budget`].
///
/// The share follows the grid's measured peaks, which a regression moves: so that a
/// regression is judged at the points the snapshot was judged at, a snapshot's points
/// (`recorded`: `Some` where the snapshot holds this sweep's axes and target) are kept
/// as they are, each within `each_at_most`, and no other axis is taken: a snapshot
/// recorded without any keeps none. Only `None` (no such snapshot) chooses anew.
pub fn choose_shared(
    axes: &BTreeMap<String, Vec<u64>>,
    target: &Point,
    total: u64,
    each_at_most: u64,
    recorded: Option<&[AxialPoint]>,
    peak_at: impl Fn(&Point) -> Option<u64>,
) -> AxialPlan {
    let mut wanted = wanted(axes, target);
    if let Some(recorded) = recorded {
        if recorded.is_empty() {
            return AxialPlan::default();
        }
        return as_recorded(axes, &wanted, each_at_most, recorded, &peak_at);
    }
    // Least first; one that cannot be predicted last. Ties in the axes' order.
    wanted.sort_by_key(|&(axis, goal)| peak_at(&along(axes, axis, goal)).unwrap_or(u64::MAX));
    let mut left = total;
    let mut plan = AxialPlan::default();
    for (i, &(axis, goal)) in wanted.iter().enumerate() {
        let budget = (left / (wanted.len() - i) as u64).min(each_at_most);
        let chosen = choose_axis(axes, axis, goal, budget, &[], &peak_at);
        if let Ok(c) = &chosen {
            left = left.saturating_sub(peak_at(&c.at).unwrap_or(budget));
        }
        plan.push(chosen);
    }
    // In the axes' order, as [`choose`] gives them.
    plan.points.sort_by(|a, b| a.axis.cmp(&b.axis));
    plan.skipped.sort_by(|a, b| a.axis.cmp(&b.axis));
    plan
}

/// The points `recorded` for each of the `wanted` axes, each within `each_at_most`,
/// chosen anew within it where the recorded one is over it ([`choose_shared`]).
fn as_recorded(
    axes: &BTreeMap<String, Vec<u64>>,
    wanted: &[(&str, u64)],
    each_at_most: u64,
    recorded: &[AxialPoint],
    peak_at: &impl Fn(&Point) -> Option<u64>,
) -> AxialPlan {
    let mut plan = AxialPlan::default();
    for &(axis, goal) in wanted {
        let kept = recorded.iter().any(|r| r.axis == axis && r.target == goal);
        if !kept {
            let value = goal.min(first_beyond(axes, axis));
            plan.skipped.push(AxialSkip {
                axis: axis.to_owned(),
                target: goal,
                value,
                predicted: peak_at(&along(axes, axis, value)),
                budget: None,
            });
            continue;
        }
        let mut chosen = choose_axis(axes, axis, goal, each_at_most, recorded, peak_at);
        if let Ok(c) = &mut chosen {
            let as_recorded = recorded.iter().any(|r| r.axis == axis && r.at == c.at);
            if as_recorded {
                c.budget = None;
            }
        }
        plan.push(chosen);
    }
    plan
}

/// The greatest common divisor of `axis`'s grid values: the step a value held back
/// keeps to.
fn step(axes: &BTreeMap<String, Vec<u64>>, axis: &str) -> u64 {
    axes[axis].iter().copied().fold(0, num_integer::gcd).max(1)
}

/// The first value of `axis` beyond its grid: one [`step`] past its largest value.
fn first_beyond(axes: &BTreeMap<String, Vec<u64>>, axis: &str) -> u64 {
    axes[axis].iter().copied().max().unwrap_or(1) + step(axes, axis)
}

/// The axes of `axes` whose `target` value is not one of their grid values, with it.
fn wanted<'a>(axes: &'a BTreeMap<String, Vec<u64>>, target: &Point) -> Vec<(&'a str, u64)> {
    axes.iter()
        .filter_map(|(axis, values)| {
            let &goal = target.get(axis)?;
            (!values.contains(&goal)).then_some((axis.as_str(), goal))
        })
        .collect()
}

impl AxialPlan {
    fn push(&mut self, chosen: Result<AxialChoice, AxialSkip>) {
        match chosen {
            Ok(c) => self.points.push(c),
            Err(s) => self.skipped.push(s),
        }
    }
}

/// The axial point of `axis` toward `goal` within `budget` ([`choose`]), or why none.
fn choose_axis(
    axes: &BTreeMap<String, Vec<u64>>,
    axis: &str,
    goal: u64,
    budget: u64,
    recorded: &[AxialPoint],
    peak_at: &impl Fn(&Point) -> Option<u64>,
) -> Result<AxialChoice, AxialSkip> {
    let fits = |p: &Point| peak_at(p).is_some_and(|b| b <= budget);
    let choice = |at: Point, held_back_from: Option<u64>| AxialChoice {
        axis: axis.to_owned(),
        target: goal,
        at,
        held_back_from,
        budget: Some(budget),
    };
    let full = along(axes, axis, goal);
    let pinned = recorded
        .iter()
        .find(|r| r.axis == axis && r.target == goal)
        .filter(|r| {
            let mut base = r.at.clone();
            base.insert(axis.to_owned(), goal);
            base == full && fits(&r.at)
        });
    if let Some(r) = pinned {
        let held_back_from = r.held_back().then(|| peak_at(&full)).flatten();
        return Ok(choice(r.at.clone(), held_back_from));
    }
    if fits(&full) {
        return Ok(choice(full, None));
    }
    // A value held back is a multiple of the grid's values' common step, as each of
    // them is: a model that takes only multiples of its heads takes it too.
    let step = step(axes, axis);
    // Toward a target below the grid the peak only falls: nothing to hold back.
    let first = first_beyond(axes, axis);
    if goal < first || !fits(&along(axes, axis, first)) {
        let value = goal.min(first);
        return Err(AxialSkip {
            axis: axis.to_owned(),
            target: goal,
            value,
            predicted: peak_at(&along(axes, axis, value)),
            budget: Some(budget),
        });
    }
    // The largest multiple of `step` in [first, goal) within the budget, counted in
    // steps: `lo` fits, `hi` not (or is the goal).
    let (mut lo, mut hi) = (first / step, goal.div_ceil(step));
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(&along(axes, axis, mid * step)) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(choice(along(axes, axis, lo * step), peak_at(&full)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axes() -> BTreeMap<String, Vec<u64>> {
        BTreeMap::from([
            ("batch".to_owned(), vec![1, 2]),
            ("layers".to_owned(), vec![1, 2]),
            ("seq".to_owned(), vec![32, 64, 96]),
        ])
    }

    fn point(pairs: &[(&str, u64)]) -> Point {
        pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    /// A peak of 1 KiB per batch·seq² per layer: what an attention score costs.
    fn peak(p: &Point) -> Option<u64> {
        Some(1024 * p["batch"] * p["seq"] * p["seq"] * p["layers"])
    }

    #[test]
    fn each_axis_beyond_the_grid_is_measured_at_the_target_with_the_others_smallest() {
        let target = point(&[("batch", 8), ("layers", 2), ("seq", 512)]);
        let plan = choose(&axes(), &target, u64::MAX, &[], peak);
        // `layers` is at a grid value: the grid measures it already.
        let at: Vec<&Point> = plan.points.iter().map(|c| &c.at).collect();
        assert_eq!(
            at,
            [
                &point(&[("batch", 8), ("layers", 1), ("seq", 32)]),
                &point(&[("batch", 1), ("layers", 1), ("seq", 512)]),
            ]
        );
        assert!(plan.skipped.is_empty());
        assert!(plan.points.iter().all(|c| c.held_back_from.is_none()));
    }

    #[test]
    fn a_point_over_the_budget_is_held_back_to_the_largest_value_within_it() {
        let target = point(&[("batch", 1), ("layers", 1), ("seq", 4096)]);
        let budget = 100 << 20;
        let plan = choose(&axes(), &target, budget, &[], peak);
        let [c] = plan.points.as_slice() else {
            panic!("{plan:?}")
        };
        let seq = c.at["seq"];
        // Checked against the peak itself: `seq` fits, one step (32) more does not.
        assert!(peak(&c.at).unwrap() <= budget);
        assert_eq!(seq % 32, 0);
        let mut next = c.at.clone();
        next.insert("seq".to_owned(), seq + 32);
        assert!(peak(&next).unwrap() > budget, "{seq}");
        assert_eq!(c.held_back_from, peak(&target));
        assert!(seq > 96 && seq < 4096);
    }

    #[test]
    fn an_axis_over_the_budget_right_beyond_the_grid_is_skipped_and_said() {
        let target = point(&[("batch", 1), ("layers", 1), ("seq", 4096)]);
        // One step beyond seq = [32, 64, 96] is 128.
        let plan = choose(&axes(), &target, 1024 * 128 * 128 - 1, &[], peak);
        assert!(plan.points.is_empty());
        assert_eq!(plan.skipped.len(), 1);
        assert_eq!(plan.skipped[0].predicted, Some(1024 * 128 * 128));
    }

    #[test]
    fn a_recorded_point_within_the_budget_is_measured_again_as_recorded() {
        let target = point(&[("batch", 1), ("layers", 1), ("seq", 4096)]);
        let recorded = AxialPoint {
            axis: "seq".to_owned(),
            target: 4096,
            at: point(&[("batch", 1), ("layers", 1), ("seq", 200)]),
            peak_bytes: 0,
            category_bytes: BTreeMap::new(),
        };
        // A larger budget here than where it was recorded: the same point still.
        let plan = choose(
            &axes(),
            &target,
            1 << 30,
            std::slice::from_ref(&recorded),
            peak,
        );
        assert_eq!(plan.points[0].at, recorded.at);
        assert_eq!(plan.points[0].held_back_from, peak(&target));
        // Over this machine's budget: chosen again.
        let plan = choose(
            &axes(),
            &target,
            1024 * 150 * 150,
            std::slice::from_ref(&recorded),
            peak,
        );
        assert!(plan.points[0].at["seq"] < 200);
        // Recorded for another target: not pinned.
        let mut other = recorded;
        other.target = 2048;
        let plan = choose(&axes(), &target, 1 << 30, &[other], peak);
        assert_eq!(plan.points[0].at["seq"], 1024);
    }

    #[test]
    fn a_target_below_the_grid_is_measured_whatever_the_budget_says_of_larger_values() {
        let target = point(&[("batch", 1), ("layers", 1), ("seq", 16)]);
        let plan = choose(&axes(), &target, u64::MAX, &[], peak);
        assert_eq!(plan.points[0].at["seq"], 16);
    }

    #[test]
    fn shared_the_cheap_axis_measures_its_target_and_leaves_the_rest_to_the_dear_one() {
        // batch=8 needs 8 × the corner; seq=4096 far more.
        let target = point(&[("batch", 8), ("layers", 1), ("seq", 4096)]);
        let corner = peak(&point(&[("batch", 1), ("layers", 1), ("seq", 32)])).unwrap();
        let total = 100 * corner;
        let plan = choose_shared(&axes(), &target, total, u64::MAX, None, peak);
        let [batch, seq] = plan.points.as_slice() else {
            panic!("{plan:?}")
        };
        assert_eq!(batch.at, point(&[("batch", 8), ("layers", 1), ("seq", 32)]));
        assert_eq!(batch.held_back_from, None);
        // Left for seq: what batch did not need, all of it.
        assert_eq!(seq.budget, Some(total - 8 * corner));
        let used: u64 = plan.points.iter().map(|c| peak(&c.at).unwrap()).sum();
        assert!(used <= total, "{used} over {total}");
        // The largest seq within its share: one more is over it.
        let mut next = seq.at.clone();
        *next.get_mut("seq").unwrap() += 32;
        assert!(peak(&next).unwrap() > seq.budget.unwrap());
        let full = point(&[("batch", 1), ("layers", 1), ("seq", 4096)]);
        assert_eq!(seq.held_back_from, peak(&full));
        // Without the cheap axis's saving, an equal split holds seq lower.
        let split = choose(&axes(), &target, total / 2, &[], peak);
        assert!(split.points[1].at["seq"] < seq.at["seq"]);
    }

    #[test]
    fn shared_each_point_stays_within_the_machines_bound() {
        let target = point(&[("batch", 8), ("layers", 1), ("seq", 4096)]);
        let each = peak(&point(&[("batch", 1), ("layers", 1), ("seq", 224)])).unwrap();
        let plan = choose_shared(&axes(), &target, u64::MAX / 4, each, None, peak);
        assert!(plan.points.iter().all(|c| peak(&c.at).unwrap() <= each));
        assert!(plan.points.iter().all(|c| c.budget == Some(each)));
        let seq = plan.points.iter().find(|c| c.axis == "seq").unwrap();
        assert_eq!(seq.at["seq"], 224);
        // Nothing to share: each axis beyond the grid said, none measured.
        let plan = choose_shared(&axes(), &target, 0, each, None, peak);
        assert!(plan.points.is_empty());
        let skipped: Vec<&str> = plan.skipped.iter().map(|s| s.axis.as_str()).collect();
        assert_eq!(skipped, ["batch", "seq"]);
    }

    #[test]
    fn shared_a_snapshots_points_are_kept_whatever_the_share_says_now() {
        let target = point(&[("batch", 8), ("layers", 4), ("seq", 4096)]);
        let record = |axis: &str, at: Point| AxialPoint {
            axis: axis.to_owned(),
            target: target[axis],
            at,
            peak_bytes: 0,
            category_bytes: BTreeMap::new(),
        };
        // Recorded: batch at its target, seq held back at 200; layers none.
        let recorded = [
            record("batch", point(&[("batch", 8), ("layers", 1), ("seq", 32)])),
            record("seq", point(&[("batch", 1), ("layers", 1), ("seq", 200)])),
        ];
        // A share that would now choose otherwise (none at all, or seq further).
        for total in [0, u64::MAX / 4] {
            let plan = choose_shared(&axes(), &target, total, u64::MAX, Some(&recorded), peak);
            let at: Vec<&Point> = plan.points.iter().map(|c| &c.at).collect();
            assert_eq!(at, [&recorded[0].at, &recorded[1].at], "share {total}");
            assert!(plan.points.iter().all(|c| c.budget.is_none()));
            let [layers] = plan.skipped.as_slice() else {
                panic!("{plan:?}")
            };
            assert_eq!((layers.axis.as_str(), layers.budget), ("layers", None));
        }
        // Over the machine's bound: chosen anew within it.
        let each = peak(&point(&[("batch", 1), ("layers", 1), ("seq", 160)])).unwrap();
        let plan = choose_shared(&axes(), &target, 0, each, Some(&recorded), peak);
        let seq = plan.points.iter().find(|c| c.axis == "seq").unwrap();
        assert_eq!((seq.at["seq"], seq.budget), (160, Some(each)));
        // A snapshot recorded without any (before axial points, or every axis over
        // its share): none, as recorded.
        let plan = choose_shared(&axes(), &target, u64::MAX / 4, u64::MAX, Some(&[]), peak);
        assert_eq!(plan, AxialPlan::default());
    }

    #[test]
    fn a_value_held_back_keeps_to_the_grids_step() {
        // hidden = [16, 24, 32]: every value a multiple of 8, as a model with 4 or 8
        // heads needs. A peak of hidden² bytes.
        let axes = BTreeMap::from([("hidden".to_owned(), vec![16, 24, 32])]);
        let peak = |p: &Point| Some(p["hidden"] * p["hidden"]);
        let target = point(&[("hidden", 256)]);
        let plan = choose(&axes, &target, 200 * 200, &[], peak);
        // 200 itself is within, and a multiple of 8.
        assert_eq!(plan.points[0].at["hidden"], 200);
        // Under 199², one value at a time would give 198; in steps of 8, 192.
        let plan = choose(&axes, &target, 199 * 199, &[], peak);
        assert_eq!(plan.points[0].at["hidden"], 192);
        // Not even one step (40) within: none.
        let plan = choose(&axes, &target, 39 * 39, &[], peak);
        assert!(plan.points.is_empty());
        assert_eq!(plan.skipped[0].predicted, Some(40 * 40));
    }
}
