//! A figure fitted without its axis's smallest level, when that level is another regime
//! than the target's axial point.
//!
//! Memory changes regime along an axis: grouped-query attention copies keys and values
//! only once the heads outnumber the kv heads, so a grid whose smallest `heads` is the kv
//! heads' count holds a level unlike every other and unlike the target. A fit through
//! it is flagged once the target's own value of the axis is measured (an axial point,
//! [`crate::axial`]), or bends a squared term through the step. When the figure, fitted
//! again without the smallest level of one axis (its axial point kept), misses no
//! held-out point by over 2%, that fit is the figure's, and the run says so: the level
//! is a regime of its own, the target's is the others'.

use crate::axes::{AxesError, Fit, Grid, Point};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The level a figure was fitted without.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Without {
    /// The axis.
    pub axis: String,
    /// Its level left out (the grid's smallest).
    pub level: u64,
    /// The fit with it: its worst leave-one-out error, in parts per million.
    pub with_ppm: u64,
}

/// For each figure of `figures` flagged as a miss on `grid`, whose series (in
/// `series`) holds an axial point off the grid along an axis of three values or more:
/// the fit without that axis's smallest level, when it misses no held-out point by over
/// 2% (the first such axis in the grid's order). Those fits replace the figures'; the
/// levels left out are returned by figure.
pub fn without_smallest_levels(
    grid: &Grid,
    series: &BTreeMap<String, Vec<(Point, u64)>>,
    figures: &mut BTreeMap<String, Fit>,
) -> Result<BTreeMap<String, Without>, AxesError> {
    let mut out = BTreeMap::new();
    for (figure, fit) in figures.iter_mut() {
        if !fit.flagged() {
            continue;
        }
        let Some(points) = series.get(figure) else {
            continue;
        };
        for axis in grid.axes().iter().filter(|a| a.values.len() >= 3) {
            let beyond = |p: &Point| !axis.values.contains(&p[&axis.name]);
            if !points.iter().any(|(p, _)| beyond(p)) {
                continue;
            }
            let level = *axis.values.iter().min().expect("an axis has values");
            let mut axes = grid.to_map();
            axes.insert(
                axis.name.clone(),
                axis.values
                    .iter()
                    .copied()
                    .filter(|&v| v != level)
                    .collect(),
            );
            let reduced = Grid::from_map(&axes)?;
            let kept: Vec<(Point, u64)> = points
                .iter()
                .filter(|(p, _)| p[&axis.name] != level)
                .cloned()
                .collect();
            let refit = Fit::new(&reduced, &kept)?;
            if refit.flag(&reduced).is_none() {
                out.insert(
                    figure.clone(),
                    Without {
                        axis: axis.name.clone(),
                        level,
                        with_ppm: fit.loo_error_ppm,
                    },
                );
                *fit = refit;
                break;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes per token per layer of a grouped-query attention block: the kv heads' keys
    /// and values at `heads` = `kv`, copies of them for every head above.
    fn activations(b: u64, s: u64, heads: u64) -> u64 {
        let kv = 2;
        let per_head = 584;
        let copies = if heads > kv { 2 * heads * 64 } else { 0 };
        b * s * (1000 + per_head * heads + copies)
    }

    #[test]
    fn a_smallest_level_unlike_the_axial_point_is_left_out_and_said() {
        let grid = Grid::new([
            ("batch", vec![1, 2]),
            ("seq", vec![8, 16]),
            ("heads", vec![2, 4, 6]),
        ])
        .unwrap();
        let mut points: Vec<(Point, u64)> = grid
            .points()
            .into_iter()
            .map(|p| {
                let b = activations(p["batch"], p["seq"], p["heads"]);
                (p, b)
            })
            .collect();
        // The axial point: heads at the target's 14, the others at their smallest.
        let axial: Point = [("batch", 1), ("seq", 8), ("heads", 14)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        points.push((axial.clone(), activations(1, 8, 14)));
        let series = BTreeMap::from([("activations".to_owned(), points.clone())]);
        let fit = Fit::new(&grid, &points).unwrap();
        assert!(fit.flagged(), "{fit:?}");
        let mut figures = BTreeMap::from([("activations".to_owned(), fit)]);
        let without = without_smallest_levels(&grid, &series, &mut figures).unwrap();
        let w = &without["activations"];
        assert_eq!((w.axis.as_str(), w.level), ("heads", 2));
        let refit = &figures["activations"];
        assert!(!refit.flagged(), "{refit:?}");
        // It predicts a far point exactly: the regime from 4 heads up.
        let far: Point = [("batch", 8), ("seq", 2048), ("heads", 14)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(refit.predict(&far).unwrap().bytes, activations(8, 2048, 14));
    }

    #[test]
    fn without_an_axial_point_nothing_is_left_out() {
        let grid = Grid::new([
            ("batch", vec![1, 2]),
            ("seq", vec![8, 16]),
            ("heads", vec![2, 4, 6]),
        ])
        .unwrap();
        let points: Vec<(Point, u64)> = grid
            .points()
            .into_iter()
            .map(|p| {
                let b = activations(p["batch"], p["seq"], p["heads"]) + p["heads"] * p["heads"] * 7;
                (p, b)
            })
            .collect();
        let series = BTreeMap::from([("activations".to_owned(), points.clone())]);
        let mut figures =
            BTreeMap::from([("activations".to_owned(), Fit::new(&grid, &points).unwrap())]);
        let before = figures.clone();
        assert!(
            without_smallest_levels(&grid, &series, &mut figures)
                .unwrap()
                .is_empty()
        );
        assert_eq!(figures, before);
    }
}
