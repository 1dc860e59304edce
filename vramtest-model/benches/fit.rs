//! How long the axes model takes to fit one figure. Run with
//! `cargo bench -p vramtest-model --bench fit`, and unoptimized, as a test binary
//! builds the fit, with `cargo bench --profile dev -p vramtest-model --bench fit`.
//!
//! Two grids: a transformer-shaped one (2 × 3 × 2 × 3 = 36 points, the size of
//! `fixtures/candle-transformer`'s) and the largest a test may have (4⁴ = 256 points).
//! On each, two figures: a polynomial (`12·a·b·c·d + 4·a·b²·c + 1000·c + 77`, fitted
//! exactly by the first, all-candidates least squares) and one that is no polynomial
//! (the larger of two moments, plus a few KiB that vary from point to point), which
//! takes the subset search. Each is fitted 5 times; the median is printed, as memory
//! (`Fit::new`, whose prior refits a model with a negative term nothing covers) and
//! free of signs (`Fit::free`): the difference is what the prior costs.

use std::time::{Duration, Instant};
use vramtest_model::axes::{AxesError, Fit, Grid, Point};

const ROUNDS: usize = 5;

type Figure = fn(u64, u64, u64, u64) -> u64;

/// A way to fit a series: `Fit::new` or `Fit::free`.
type Fitter = fn(&Grid, &[(Point, u64)]) -> Result<Fit, AxesError>;

fn polynomial(a: u64, b: u64, c: u64, d: u64) -> u64 {
    12 * a * b * c * d + 4 * a * b * b * c + 1000 * c + 77
}

fn no_polynomial(a: u64, b: u64, c: u64, d: u64) -> u64 {
    (12 * a * b * c * d).max(40 * a * b * b) + (a * 7919 * b * c * d) % 4096
}

fn main() {
    let grids = [
        (
            "36 points (2 × 3 × 2 × 3)",
            Grid::new([
                ("a", vec![1, 2]),
                ("b", vec![96, 128, 160]),
                ("c", vec![1, 2]),
                ("d", vec![16, 24, 32]),
            ]),
        ),
        (
            "256 points (4 × 4 × 4 × 4)",
            Grid::new([
                ("a", vec![1, 2, 3, 4]),
                ("b", vec![8, 16, 24, 32]),
                ("c", vec![1, 2, 3, 4]),
                ("d", vec![16, 24, 32, 40]),
            ]),
        ),
    ];
    let figures: [(&str, Figure); 2] =
        [("polynomial", polynomial), ("no polynomial", no_polynomial)];
    println!("fit of one figure, median of {ROUNDS} rounds");
    for (name, grid) in grids {
        let grid = grid.expect("a valid grid");
        for (kind, figure) in figures {
            let series: Vec<_> = grid
                .points()
                .into_iter()
                .map(|p| {
                    let bytes = figure(p["a"], p["b"], p["c"], p["d"]);
                    (p, bytes)
                })
                .collect();
            let fits: [(&str, Fitter); 2] = [("memory", Fit::new), ("free of signs", Fit::free)];
            for (prior, fit_with) in fits {
                let mut times: Vec<Duration> = Vec::new();
                let mut flagged = false;
                for _ in 0..ROUNDS {
                    let start = Instant::now();
                    let fit = fit_with(&grid, &series).expect("fits");
                    times.push(start.elapsed());
                    flagged = fit.flagged();
                }
                times.sort();
                println!(
                    "{name}, {kind}, {prior}: {:.1} ms{}",
                    times[ROUNDS / 2].as_secs_f64() * 1e3,
                    if flagged { " (flagged)" } else { "" }
                );
            }
        }
    }
}
