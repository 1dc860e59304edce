//! Where the phase that holds a sweep's predicted peak changes. The peak is the
//! largest of the phases' fits at every point ([`Sweep::estimate`]); the phase that
//! holds it in the grid need not hold it at the point asked for, since a phase with a
//! smaller fixed part and a larger cost per unit of an axis passes the others as that
//! axis grows. Saying so is what tells a user why the answer is not the grid's peak
//! phase scaled up.

use crate::axes::{AxesError, Point};
use std::fmt;

/// The peak's phase at a point differs from the one at the grid's largest point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeakMove {
    /// The phase that holds the peak at the grid's largest point.
    pub from: String,
    /// The phase that holds it at the point asked for.
    pub to: String,
    /// Along one axis (the others as at the point asked for): the axis and the
    /// smallest value at which `to` holds the peak; `None` when more than one axis
    /// differs from the grid's largest point.
    pub above: Option<(String, u64)>,
    /// The grid's largest point.
    pub grid_point: Point,
    /// The point asked for.
    pub at: Point,
}

impl fmt::Display for PeakMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.above {
            Some((axis, value)) => write!(
                f,
                "the peak moves from {} to {} above {axis} ≈ {}",
                self.from,
                self.to,
                crate::bytes::Grouped(value.saturating_sub(1))
            ),
            None => write!(
                f,
                "the peak moves from {} (at the grid's largest point, {}) to {} (at {})",
                self.from,
                shown(&self.grid_point),
                self.to,
                shown(&self.at)
            ),
        }
    }
}

/// Whether the phase holding the peak at `at` is another than at `grid_point`, the
/// grid's largest point: `phase` tells the phase predicted to hold the peak at a point
/// (`None`: the peak is fitted as a whole).
pub(super) fn peak_move(
    grid_point: Point,
    at: &Point,
    phase: impl Fn(&Point) -> Result<Option<String>, AxesError>,
) -> Result<Option<PeakMove>, AxesError> {
    let (Some(from), Some(to)) = (phase(&grid_point)?, phase(at)?) else {
        return Ok(None);
    };
    if from == to {
        return Ok(None);
    }
    let differing: Vec<&String> = at
        .iter()
        .filter(|(axis, v)| grid_point.get(*axis) != Some(v))
        .map(|(axis, _)| axis)
        .collect();
    let above = match differing.as_slice() {
        [axis] => first_value_not_held(at, axis, &grid_point, &from, &phase)?,
        _ => None,
    };
    Ok(Some(PeakMove {
        from,
        to,
        above,
        grid_point,
        at: at.clone(),
    }))
}

/// Along `axis` from the grid's largest value to `at`'s (the other axes from `at`),
/// the first value where the peak is no longer in `from`: bisected, assuming one
/// change of phase between them.
fn first_value_not_held(
    at: &Point,
    axis: &str,
    grid_point: &Point,
    from: &str,
    phase: &impl Fn(&Point) -> Result<Option<String>, AxesError>,
) -> Result<Option<(String, u64)>, AxesError> {
    let (Some(&lo), Some(&hi)) = (grid_point.get(axis), at.get(axis)) else {
        return Ok(None);
    };
    if hi <= lo {
        return Ok(None);
    }
    let held_by_from = |v: u64| -> Result<bool, AxesError> {
        let mut p = at.clone();
        p.insert(axis.to_owned(), v);
        Ok(phase(&p)?.as_deref() == Some(from))
    };
    if !held_by_from(lo)? {
        return Ok(None);
    }
    let (mut lo, mut hi) = (lo, hi);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if held_by_from(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some((axis.to_owned(), hi)))
}

/// `batch=8, seq=4096`.
fn shown(point: &Point) -> String {
    let parts: Vec<String> = point.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(", ")
}
