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
}

/// An axis whose target value is not measured, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxialSkip {
    /// The axis.
    pub axis: String,
    /// The target's value of it.
    pub target: u64,
    /// The predicted peak at the first value beyond the grid toward the target (over
    /// the budget), or `None` when the sweep could not predict it.
    pub predicted: Option<u64>,
}

/// What [`choose`] decided for a target.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AxialPlan {
    /// The points to measure, in the axes' order.
    pub points: Vec<AxialChoice>,
    /// The axes beyond the grid whose every value toward the target is over the
    /// budget.
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
/// along an axis beyond the grid), or none, said in [`AxialPlan::skipped`], when even
/// the grid's largest value plus one is over it. A point `recorded` in the snapshot for
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
    let fits = |p: &Point| peak_at(p).is_some_and(|b| b <= budget);
    for (axis, values) in axes {
        let Some(&goal) = target.get(axis) else {
            continue;
        };
        if values.contains(&goal) {
            continue;
        }
        let full = along(axes, axis, goal);
        let pinned = recorded
            .iter()
            .find(|r| r.axis == *axis && r.target == goal)
            .filter(|r| {
                let mut base = r.at.clone();
                base.insert(axis.clone(), goal);
                base == full && fits(&r.at)
            });
        if let Some(r) = pinned {
            plan.points.push(AxialChoice {
                axis: axis.clone(),
                target: goal,
                at: r.at.clone(),
                held_back_from: r.held_back().then(|| peak_at(&full)).flatten(),
            });
            continue;
        }
        if fits(&full) {
            plan.points.push(AxialChoice {
                axis: axis.clone(),
                target: goal,
                at: full,
                held_back_from: None,
            });
            continue;
        }
        let largest = values.iter().copied().max().unwrap_or(1);
        // Toward a target below the grid the peak only falls: nothing to hold back.
        let first = largest + 1;
        if goal < largest || !fits(&along(axes, axis, first)) {
            plan.skipped.push(AxialSkip {
                axis: axis.clone(),
                target: goal,
                predicted: peak_at(&along(axes, axis, first)),
            });
            continue;
        }
        // The largest value in [first, goal) within the budget: `lo` fits, `hi` not.
        let (mut lo, mut hi) = (first, goal);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(&along(axes, axis, mid)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        plan.points.push(AxialChoice {
            axis: axis.clone(),
            target: goal,
            at: along(axes, axis, lo),
            held_back_from: peak_at(&full),
        });
    }
    plan
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
        // Checked against the peak itself: `seq` fits, `seq + 1` does not.
        assert!(peak(&c.at).unwrap() <= budget);
        let mut next = c.at.clone();
        next.insert("seq".to_owned(), seq + 1);
        assert!(peak(&next).unwrap() > budget, "{seq}");
        assert_eq!(c.held_back_from, peak(&target));
        assert!(seq > 96 && seq < 4096);
    }

    #[test]
    fn an_axis_over_the_budget_right_beyond_the_grid_is_skipped_and_said() {
        let target = point(&[("batch", 1), ("layers", 1), ("seq", 4096)]);
        let plan = choose(&axes(), &target, 1024 * 97 * 97 - 1, &[], peak);
        assert!(plan.points.is_empty());
        assert_eq!(plan.skipped.len(), 1);
        assert_eq!(plan.skipped[0].predicted, Some(1024 * 97 * 97));
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
}
