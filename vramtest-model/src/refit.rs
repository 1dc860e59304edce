//! A figure fitted without its axis's smallest level, when that level is another regime
//! than the target's axial point.
//!
//! Memory changes regime along an axis: grouped-query attention copies keys and values
//! only once the heads outnumber the kv heads, so a grid whose smallest `heads` is the kv
//! heads' count holds a level unlike every other and unlike the target. A fit through
//! it is flagged once the target's own value of the axis is measured (an axial point,
//! [`crate::axial`]), or bends a squared term through the step: then it misses nothing
//! held out, and the step shows only far from the grid, in the terms that cross the axis
//! with another (`layers·heads²`).
//!
//! So for each figure with an axial point along an axis of three values or more, the
//! figure is fitted again without the axis's smallest level (its axial point kept). That
//! fit is the figure's, and the run says so, when it misses no held-out point by over 2%
//! and either the fit with the level was flagged or the fit without it misses the
//! level's own points by over 2%: the level is a regime of its own, the target's is the
//! others'. A figure the level fits as well as the others (a true square, the weights of
//! `heads·head_dim` squared) keeps its fit: without the level, its degree along the axis
//! drops, and the refit misses.

use crate::axes::{AxesError, FLAG_PPM, Fit, Grid, Point};
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
    /// The fit without it, at the level's own points: its worst relative miss, in parts
    /// per million. Absent from snapshots written before
    /// it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub level_miss_ppm: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How badly `refit` misses the points at the level it was fitted without: the
/// worst relative miss, in parts per million (rounded up); 0 for none. A point
/// measured at or near 0 is judged against 2% of the level's largest value, so a byte
/// of rounding is no regime. A point whose prediction fails counts as missed entirely.
/// (Not the refit's residue: a regime's step at the smallest level is as small as the
/// bookkeeping the residue bounds, and would hide behind it.)
fn level_miss_ppm(refit: &Fit, points: &[&(Point, u64)]) -> u64 {
    let largest = points.iter().map(|(_, m)| *m).max().unwrap_or(0);
    let floor = u128::from(largest) * u128::from(FLAG_PPM) / 1_000_000;
    points
        .iter()
        .map(|(p, measured)| {
            let predicted = refit.predict(p).map(|f| f.bytes).unwrap_or(0);
            let diff = predicted.abs_diff(*measured);
            let of = u128::from(*measured).max(floor).max(1);
            let ppm = (u128::from(diff) * 1_000_000).div_ceil(of);
            u64::try_from(ppm).unwrap_or(u64::MAX)
        })
        .max()
        .unwrap_or(0)
}

/// For each figure of `figures` whose series (in `series`) holds an axial point off
/// `grid` along an axis of three values or more: the fit without that axis's smallest
/// level, when it misses no held-out point by over 2%, and the figure's fit was flagged
/// as a miss or the fit without the level misses the level's own points by over 2%
/// (the first such axis in the grid's order). The other axes' axial points, at the
/// level, are left out with it. Those fits replace the figures'; the levels
/// left out are returned by figure.
pub fn without_smallest_levels(
    grid: &Grid,
    series: &BTreeMap<String, Vec<(Point, u64)>>,
    figures: &mut BTreeMap<String, Fit>,
) -> Result<BTreeMap<String, Without>, AxesError> {
    let mut out = BTreeMap::new();
    for (figure, fit) in figures.iter_mut() {
        let Some(points) = series.get(figure) else {
            continue;
        };
        for axis in grid.axes().iter().filter(|a| a.values.len() >= 3) {
            let beyond = |p: &Point| !axis.values.contains(&p[&axis.name]);
            if !points.iter().any(|(p, _)| beyond(p)) {
                continue;
            }
            let level = *axis.values.iter().min().expect("an axis has values");
            let reduced = grid.without(&axis.name, level)?;
            let kept: Vec<(Point, u64)> = points
                .iter()
                .filter(|(p, _)| p[&axis.name] != level)
                .cloned()
                .collect();
            let refit = Fit::new(&reduced, &kept)?;
            if refit.flag(&reduced).is_some() {
                continue;
            }
            // The level's points: the grid's, and the other axes' axial points, which
            // lie at the level too and reach far along their own axes, where a step
            // of the level has grown with them (GQA's missing copies of keys and
            // values, times 24 layers).
            let at_level: Vec<&(Point, u64)> = points
                .iter()
                .filter(|(p, _)| p[&axis.name] == level)
                .collect();
            let level_miss_ppm = level_miss_ppm(&refit, &at_level);
            if !fit.flagged() && level_miss_ppm <= FLAG_PPM {
                continue;
            }
            out.insert(
                figure.clone(),
                Without {
                    axis: axis.name.clone(),
                    level,
                    with_ppm: fit.loo_error_ppm,
                    level_miss_ppm,
                },
            );
            *fit = refit;
            break;
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
        assert_kept(&grid, &points);
    }

    fn point(values: &[(&str, u64)]) -> Point {
        values.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    /// Activations of a decoder of `layers` layers: per layer, the GQA block of
    /// [`activations`]; once, the logits.
    fn decoder(p: &Point) -> u64 {
        let (b, s, l, h) = (p["batch"], p["seq"], p["layers"], p["heads"]);
        l * activations(b, s, h) + b * s * 4096
    }

    fn decoder_series(grid: &Grid, axial: &Point) -> Vec<(Point, u64)> {
        let mut points: Vec<(Point, u64)> = grid
            .points()
            .into_iter()
            .map(|p| {
                let b = decoder(&p);
                (p, b)
            })
            .collect();
        points.push((axial.clone(), decoder(axial)));
        points
    }

    #[test]
    fn a_step_the_fit_absorbs_unflagged_is_left_out_when_the_level_misses() {
        let grid = Grid::new([
            ("batch", vec![1, 2]),
            ("seq", vec![8, 16]),
            ("layers", vec![1, 2]),
            ("heads", vec![2, 4, 6]),
        ])
        .unwrap();
        let axial = point(&[("batch", 1), ("seq", 8), ("layers", 1), ("heads", 14)]);
        let points = decoder_series(&grid, &axial);
        let series = BTreeMap::from([("activations".to_owned(), points.clone())]);
        let fit = Fit::new(&grid, &points).unwrap();
        // The step bends a squared term: nothing held out misses, nothing is flagged,
        // yet the fit is wrong far out.
        assert!(!fit.flagged(), "{fit:?}");
        let far = point(&[("batch", 8), ("seq", 2048), ("layers", 24), ("heads", 14)]);
        assert_ne!(fit.predict(&far).unwrap().bytes, decoder(&far));
        let mut figures = BTreeMap::from([("activations".to_owned(), fit.clone())]);
        let without = without_smallest_levels(&grid, &series, &mut figures).unwrap();
        let w = &without["activations"];
        assert_eq!((w.axis.as_str(), w.level), ("heads", 2), "{fit:?}");
        // The level left out is another regime: the fit without it misses it.
        assert!(w.level_miss_ppm > FLAG_PPM, "{w:?}");
        assert_eq!(
            figures["activations"].predict(&far).unwrap().bytes,
            decoder(&far)
        );
    }

    #[test]
    fn a_square_the_smallest_level_fits_keeps_its_fit() {
        // Weights of `heads·64` squared: heads=2 is no regime of its own.
        let grid = Grid::new([
            ("batch", vec![1, 2]),
            ("layers", vec![1, 2]),
            ("heads", vec![2, 4, 6]),
        ])
        .unwrap();
        let weights = |p: &Point| p["layers"] * (p["heads"] * 64).pow(2) * 4 + p["batch"] * 512;
        let axial = point(&[("batch", 1), ("layers", 1), ("heads", 14)]);
        let mut points: Vec<(Point, u64)> = grid
            .points()
            .into_iter()
            .map(|p| (p.clone(), weights(&p)))
            .collect();
        points.push((axial.clone(), weights(&axial)));
        assert_kept(&grid, &points);
    }

    /// The figure fitted on `points` keeps its fit: no level is left out.
    fn assert_kept(grid: &Grid, points: &[(Point, u64)]) {
        let series = BTreeMap::from([("figure".to_owned(), points.to_vec())]);
        let mut figures = BTreeMap::from([("figure".to_owned(), Fit::new(grid, points).unwrap())]);
        let before = figures.clone();
        assert!(
            without_smallest_levels(grid, &series, &mut figures)
                .unwrap()
                .is_empty()
        );
        assert_eq!(figures, before);
    }
}
