//! Bookkeeping is not a polynomial: figures made here of a polynomial (the tensors)
//! plus the bytes of hash tables that double with the size of the autodiff graph, plus
//! a deterministic jitter of about a kilobyte, fitted on a small grid and predicted far
//! outside it. The polynomial and the tables at the target are computed here,
//! independently of the fit.

use std::collections::BTreeMap;
use vramtest_model::axes::{FLAG_PPM, FigureFits, Fit, Grid, Point};

fn point(values: &[(&str, u64)]) -> Point {
    values.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
}

fn grid(axes: &[(&str, &[u64])]) -> Grid {
    Grid::new(axes.iter().map(|&(k, v)| (k, v.to_vec()))).unwrap()
}

/// `(layers, seq, batch)` of a point.
fn lsb(p: &Point) -> (u64, u64, u64) {
    (p["layers"], p["seq"], p["batch"])
}

/// A deterministic jitter of the `i`-th point, within ±`amplitude` bytes.
fn jitter(i: usize, amplitude: u64) -> i64 {
    let h = (i as u64 + 1).wrapping_mul(2_654_435_761) % (2 * amplitude + 1);
    h as i64 - amplitude as i64
}

/// `f` at every point of `grid`, plus the jitter.
fn series(grid: &Grid, f: impl Fn(&Point) -> u64, amplitude: u64) -> Vec<(Point, u64)> {
    grid.points()
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let bytes = f(&p) as i64 + jitter(i, amplitude);
            (p, bytes as u64)
        })
        .collect()
}

/// The relative miss of `got` against `expected`, in percent.
fn miss_percent(got: u64, expected: u64) -> f64 {
    got.abs_diff(expected) as f64 * 100.0 / expected as f64
}

/// The burn-shaped grid of the issue: layers 1..3 × seq 8, 16, 24 × batch 2, 4.
fn burn_grid() -> Grid {
    grid(&[
        ("layers", &[1, 2, 3]),
        ("seq", &[8, 16, 24]),
        ("batch", &[2, 4]),
    ])
}

/// A decoder's activations at d_model 32: per layer and token 4000 B, attention scores
/// 48 B per layer, batch and seq², the embeddings and logits 8000 B per token, 16000 B
/// a layer whatever the tokens, and 20000 B in all.
fn burn_activations(p: &Point) -> u64 {
    let (l, s, b) = lsb(p);
    4000 * l * s * b + 48 * l * s * s * b + 8000 * s * b + 16000 * l + 20000
}

/// The autodiff graph's node map: 60 B a slot, its slots the next power of two of the
/// graph's nodes (350 a layer). It doubles between 2 and 3 layers (a 31 KB step,
/// whatever the seq and batch).
fn graph_table(p: &Point) -> u64 {
    60 * (350 * p["layers"]).next_power_of_two()
}

/// A table keyed by what grows with layers and seq: 16 B a slot, the next power of two
/// of 40 slots per layer and token position.
fn token_table(p: &Point) -> u64 {
    let (l, s, _) = lsb(p);
    16 * (40 * l * s).next_power_of_two()
}

fn burn_target() -> Point {
    point(&[("layers", 6), ("seq", 48), ("batch", 8)])
}

/// `f` fitted on `g` (with a jitter of ±`amplitude` bytes) and predicted at `at`:
/// the fit and the prediction's miss of `f(at)`, in percent.
fn fit_and_miss(g: &Grid, f: impl Fn(&Point) -> u64, amplitude: u64, at: &Point) -> (Fit, f64) {
    let fit = Fit::new(g, &series(g, &f, amplitude)).unwrap();
    let got = fit.predict(at).unwrap().bytes;
    let miss = miss_percent(got, f(at));
    eprintln!(
        "{} | loo {} ppm, residue {} B, flag {:?} | at the target {got} vs {} ({miss:.2}%)",
        fit.terms,
        fit.loo_error_ppm,
        fit.residue_bytes,
        fit.flag(g),
        f(at)
    );
    (fit, miss)
}

fn has_layers_squared(fit: &Fit) -> bool {
    fit.terms.terms.iter().any(|t| {
        t.monomial
            .powers()
            .iter()
            .any(|(a, p)| a == "layers" && *p == 2)
    })
}

/// The issue's case: the graph's node map doubles between 2 and 3 layers (a 31 KB
/// step, whatever seq and batch), 10-30% of the small points. The fit keeps `layers`
/// linear, bounds the step by its residue, and lands within 3% of the tensors plus the
/// table at 6 layers, seq 48, batch 8, where the table is under 2% of the figure.
#[test]
fn a_graph_table_that_doubles_is_bounded_not_extrapolated() {
    let g = burn_grid();
    let f = |p: &Point| burn_activations(p) + graph_table(p);
    let at = burn_target();
    assert!(
        graph_table(&at) * 50 < f(&at),
        "the table is under 2% at the target"
    );
    let (fit, miss) = fit_and_miss(&g, f, 1000, &at);
    assert!(miss < 3.0, "{miss:.2}% off");
    assert!(!has_layers_squared(&fit), "{}", fit.terms);
    assert!(
        fit.loo_error_ppm > FLAG_PPM,
        "the step is over 2% of a small point"
    );
    let largest = series(&g, f, 1000).iter().map(|(_, b)| *b).max().unwrap();
    assert!(fit.residue_bytes > 0 && fit.residue_bytes * 50 <= largest);
    assert_eq!(fit.flag(&g), None);
    let scaling = FigureFits::fit(
        &g,
        &BTreeMap::from([("activations".to_owned(), series(&g, f, 1000))]),
    )
    .unwrap();
    let p = scaling.predict("activations", &at).unwrap();
    assert_eq!(p.residue_bytes, fit.residue_bytes);
    let trusted = p.trusted().unwrap();
    assert!(miss_percent(trusted, f(&at)) < 3.0);
    // At a point where the bounded residue is over 2% of the prediction, it is flagged.
    let small = point(&[("layers", 1), ("seq", 1), ("batch", 1)]);
    assert!(fit.predict(&small).unwrap().flagged());
}

/// A table that grows with layers·seq, doubling: its steps vary with a tensor axis, so
/// they are no bookkeeping bound; the fit that misses the target by over 3% is flagged.
#[test]
fn a_table_that_steps_with_seq_is_flagged_when_it_misses() {
    let g = burn_grid();
    let f = |p: &Point| burn_activations(p) + token_table(p);
    let (fit, miss) = fit_and_miss(&g, f, 1000, &burn_target());
    assert!(
        miss < 3.0 || fit.flag(&g).is_some(),
        "{miss:.2}% off, unflagged: {}",
        fit.terms
    );
}

/// burn's gradients: +40,272, +39,472, +41,072 B a layer, a few hundred bytes of
/// jitter. One term a layer, not a parabola through the three layer counts: not
/// flagged as an interpolation, and 6 layers predicted within 2%.
#[test]
fn gradients_that_step_by_a_few_hundred_bytes_are_linear_in_layers() {
    let g = burn_grid();
    let steps = [0u64, 40_272, 79_744, 120_816];
    let f = |p: &Point| 12_000 + steps[p["layers"] as usize];
    let g6 = |_: &Point| 12_000 + 6 * 40_272;
    let fit = Fit::new(&g, &series(&g, f, 300)).unwrap();
    let got = fit.predict(&burn_target()).unwrap();
    let monomials: Vec<String> = fit
        .terms
        .terms
        .iter()
        .map(|t| t.monomial.to_string())
        .collect();
    assert_eq!(monomials, ["1", "layers"], "{}", fit.terms);
    assert_eq!(fit.flag(&g), None, "{} {}", fit.terms, fit.loo_error_ppm);
    let expected = g6(&burn_target());
    assert!(
        miss_percent(got.bytes, expected) < 2.0,
        "{} vs {expected}",
        got.bytes
    );
}

/// The candle decoder's activations on 18 points: six terms of degree ≤ 1 in layers
/// (1, L, L·s·b, L·s²·b, s·b, s²·b), plus the parameter map's table, which doubles with
/// the layers, plus a few bytes of jitter. The six terms come back and predict 6 layers,
/// seq 320, batch 2 within 0.1% of the polynomial plus the table.
#[test]
fn a_candle_decoder_keeps_its_six_terms() {
    let g = grid(&[
        ("layers", &[1, 2, 3]),
        ("seq", &[96, 128, 160]),
        ("batch", &[1, 2]),
    ]);
    let poly = |p: &Point| {
        let (l, s, b) = lsb(p);
        9088 + 22_164 * l + 5072 * l * s * b + 96 * l * s * s * b + 3368 * s * b + 4 * s * s * b
    };
    let table = |p: &Point| 48 * (40 * p["layers"]).next_power_of_two();
    let f = |p: &Point| poly(p) + table(p);
    let at = point(&[("layers", 6), ("seq", 320), ("batch", 2)]);
    let (fit, miss) = fit_and_miss(&g, f, 200, &at);
    assert!(miss < 0.1, "{miss:.3}% off");
    assert_eq!(fit.terms.terms.len(), 6, "{}", fit.terms);
    assert!(!has_layers_squared(&fit), "{}", fit.terms);
    assert_eq!(fit.flag(&g), None);
}

/// A figure that no polynomial explains (the larger of two moments, which changes
/// inside the grid) is still flagged, `layers` or not.
#[test]
fn a_figure_that_is_no_polynomial_is_still_flagged() {
    let g = burn_grid();
    let f = |p: &Point| {
        let (l, s, b) = lsb(p);
        (6000 * l * s * b).max(300_000 * l + 20_000 * s)
    };
    let fit = Fit::new(&g, &series(&g, f, 1000)).unwrap();
    assert!(
        fit.flag(&g).is_some(),
        "{} {}",
        fit.terms,
        fit.loo_error_ppm
    );
    assert!(fit.predict(&burn_target()).unwrap().trusted().is_err());
}

/// A stored fit without `residue_bytes` (every snapshot written before it) reads, with
/// no residue; an exact fit writes none; a residue round-trips. The committed decoder
/// snapshot's scaling reads and writes back unchanged.
#[test]
fn stored_fits_without_a_residue_keep_reading() {
    let old: Fit = serde_json::from_str(
        r#"{"terms": [{"coefficient": "512", "monomial": "layers"}], "loo_error_ppm": 0}"#,
    )
    .unwrap();
    assert_eq!(old.residue_bytes, 0);
    let text = serde_json::to_string(&old).unwrap();
    assert!(!text.contains("residue"), "{text}");
    let with = Fit {
        residue_bytes: 14_181,
        ..old
    };
    let text = serde_json::to_string(&with).unwrap();
    assert!(text.contains(r#""residue_bytes":14181"#), "{text}");
    assert_eq!(serde_json::from_str::<Fit>(&text).unwrap(), with);
    let snap =
        include_str!("../../fixtures/candle-transformer/tests/snapshots/vram__decoder@cpu.snap");
    let parsed = vramtest_model::snapshot::parse(snap).unwrap();
    let written: serde_json::Value = serde_json::from_str(&parsed.body.to_text()).unwrap();
    let body = snap.splitn(3, "---\n").nth(2).unwrap();
    let stored: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(written, stored);
}

/// burn's activations: the tokens' own bytes outside the layers are small (392 B a
/// token, beside 3.1 KB a token in each layer), and the graph's table steps at 3 layers.
/// The model without the per-token term misses in a way that varies with seq and batch,
/// and a step hides the term from leave-one-out; the one term that leaves a step of the
/// layers alone is kept, the step bounded by the residue, and 6 layers, seq 48, batch 4
/// predicted within 1%, unflagged.
#[test]
fn a_small_per_token_term_beside_a_step_is_kept() {
    let g = burn_grid();
    let poly = |p: &Point| {
        let (l, s, b) = lsb(p);
        3100 * l * s * b + 64 * l * s * s * b + 392 * s * b + 48_000 * l + 38_000
    };
    let f = |p: &Point| poly(p) + graph_table(p);
    let at = point(&[("layers", 6), ("seq", 48), ("batch", 4)]);
    let (fit, miss) = fit_and_miss(&g, f, 500, &at);
    assert!(miss < 1.0, "{miss:.2}% off");
    assert!(
        fit.terms
            .terms
            .iter()
            .any(|t| t.monomial.to_string() == "seq·batch"),
        "{}",
        fit.terms
    );
    assert!(fit.residue_bytes > 0, "the step is bounded by the residue");
    assert_eq!(fit.flag(&g), None, "{} {}", fit.terms, fit.loo_error_ppm);
}

/// burn's backward temporaries: the largest transient block of the pass, a table's
/// copy of about 100 KB (stepping with the layers) at small seq·batch, a buffer of
/// 2 KB a token and 16 B per score beyond; the regime changes inside the grid. No
/// polynomial is that maximum: the fit is flagged unless it lands within 3%, and its
/// prediction is never trusted silently.
#[test]
fn a_maximum_of_a_block_and_a_buffer_is_flagged_unless_it_holds() {
    let g = burn_grid();
    let f = |p: &Point| {
        let (_, s, b) = lsb(p);
        let block = 98_000 + graph_table(p) / 4;
        let buffer = 2048 * s * b + 16 * s * s * b;
        block.max(buffer) + 12_000 * p["layers"]
    };
    let at = point(&[("layers", 6), ("seq", 48), ("batch", 4)]);
    let (fit, miss) = fit_and_miss(&g, f, 500, &at);
    let trusted = fit.predict(&at).unwrap().trusted();
    assert!(
        miss < 3.0 || (fit.flag(&g).is_some() && trusted.is_err()),
        "{miss:.2}% off, trusted: {}",
        fit.terms
    );
}
