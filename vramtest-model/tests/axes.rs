//! The named-axes model against independent analytic formulas: series made from known
//! polynomials of the axes (a transformer's parameters, activations, attention scores,
//! logits) must give those polynomials back, and predict points far outside the grid
//! exactly; a series no low-degree polynomial explains must be flagged.

use num_bigint::BigInt;
use num_rational::BigRational;
use proptest::prelude::*;
use std::collections::BTreeMap;
use vramtest_model::axes::{
    AxesError, FLAG_PPM, FigureFits, Fit, Flag, Formula, Grid, Interpolation, MAX_POINTS, Monomial,
    Point, Term, predict_max,
};

fn point(values: &[(&str, u64)]) -> Point {
    values.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
}

fn grid(axes: &[(&str, &[u64])]) -> Grid {
    Grid::new(axes.iter().map(|&(k, v)| (k, v.to_vec()))).unwrap()
}

/// Every point of `grid` with `f` of it.
fn series(grid: &Grid, f: impl Fn(&Point) -> u64) -> Vec<(Point, u64)> {
    grid.points()
        .into_iter()
        .map(|p| (p.clone(), f(&p)))
        .collect()
}

fn ax(p: &Point, name: &str) -> u64 {
    p[name]
}

/// Fits `f` on `grid`, then checks the fit is exact, unflagged, has `terms` terms and
/// predicts `f` exactly at every point of `far` (outside the grid).
fn recovers(grid: &Grid, f: impl Fn(&Point) -> u64, terms: usize, far: &[Point]) -> Fit {
    let fit = Fit::new(grid, &series(grid, &f)).unwrap();
    assert_eq!(fit.loo_error_ppm, 0, "{}", fit.terms);
    assert!(!fit.flagged());
    assert_eq!(fit.terms.terms.len(), terms, "{}", fit.terms);
    for p in grid.points().iter().chain(far) {
        let exact = fit.terms.eval(p).unwrap();
        assert_eq!(
            exact,
            BigRational::from_integer(BigInt::from(f(p))),
            "at {p:?}"
        );
        assert_eq!(fit.predict(p).unwrap().trusted().unwrap(), f(p), "at {p:?}");
    }
    fit
}

#[test]
fn parameters_grow_with_layers_and_the_square_of_the_hidden_size() {
    // Per layer 12·h² weights (attention 4h², MLP 8h²), an embedding of vocab × h,
    // 4 bytes each.
    let vocab = 1000;
    let params =
        |p: &Point| 4 * (ax(p, "layers") * 12 * ax(p, "hidden").pow(2) + vocab * ax(p, "hidden"));
    let g = grid(&[("layers", &[1, 2, 3]), ("hidden", &[8, 16, 32])]);
    let far = [point(&[("layers", 32), ("hidden", 4096)])];
    recovers(&g, params, 2, &far);
}

#[test]
fn activations_grow_with_batch_seq_and_layers() {
    let c = 34 * 64;
    let weights = 3 << 20;
    let f = |p: &Point| weights + c * ax(p, "batch") * ax(p, "seq") * ax(p, "layers");
    let g = grid(&[
        ("batch", &[2, 4]),
        ("seq", &[16, 32, 48]),
        ("layers", &[1, 2, 3]),
    ]);
    let far = [
        point(&[("batch", 8), ("seq", 4096), ("layers", 32)]),
        point(&[("batch", 1), ("seq", 96), ("layers", 6)]),
    ];
    let fit = recovers(&g, f, 2, &far);
    assert_eq!(
        fit.terms.to_string(),
        format!(
            "3.00 MiB + {} × batch·seq·layers",
            vramtest_model::HumanBytes(c)
        )
    );
}

#[test]
fn attention_scores_grow_with_the_square_of_seq() {
    let f = |p: &Point| 4 * ax(p, "batch") * ax(p, "heads") * ax(p, "seq").pow(2) * ax(p, "layers");
    let g = grid(&[
        ("batch", &[1, 2]),
        ("heads", &[2, 4]),
        ("seq", &[8, 16, 32]),
        ("layers", &[1, 2]),
    ]);
    let far = [point(&[
        ("batch", 8),
        ("heads", 32),
        ("seq", 4096),
        ("layers", 32),
    ])];
    let fit = recovers(&g, f, 1, &far);
    assert_eq!(
        fit.terms.terms[0].monomial.to_string(),
        "batch·heads·seq²·layers"
    );
}

#[test]
fn logits_grow_with_batch_seq_and_vocab() {
    let f = |p: &Point| 4 * ax(p, "batch") * ax(p, "seq") * ax(p, "vocab") + 4096;
    let g = grid(&[
        ("batch", &[1, 2, 3]),
        ("seq", &[4, 8]),
        ("vocab", &[100, 300]),
    ]);
    let far = [point(&[("batch", 8), ("seq", 4096), ("vocab", 32_000)])];
    recovers(&g, f, 2, &far);
}

#[test]
fn a_whole_step_is_the_sum_of_its_tensors() {
    // Parameters and AdamW state per layer, activations, attention scores, logits.
    let f = |p: &Point| {
        let (b, s, l) = (ax(p, "batch"), ax(p, "seq"), ax(p, "layers"));
        (1 << 20)
            + 16 * 12 * 64 * 64 * l
            + 34 * 64 * b * s * l
            + 4 * 8 * b * s * s * l
            + 4 * 500 * b * s
    };
    let g = grid(&[
        ("batch", &[2, 4]),
        ("seq", &[16, 32, 48]),
        ("layers", &[1, 2, 3]),
    ]);
    let far = [point(&[("batch", 8), ("seq", 4096), ("layers", 32)])];
    recovers(&g, f, 5, &far);
}

/// A decoder's grid of four axes: 36 points, 36 candidate monomials, far too many
/// subsets to score them all.
fn decoder_grid() -> Grid {
    grid(&[
        ("batch", &[1, 2]),
        ("seq", &[96, 128, 160]),
        ("layers", &[1, 2]),
        ("hidden", &[16, 24, 32]),
    ])
}

#[test]
fn a_decoders_parameters_come_back_from_four_axes() {
    // Weights, biases, norms and their tensor headers, as candle holds them: a sparse
    // polynomial greedy forward selection alone strays from, one term at a time.
    let f = |p: &Point| {
        let (l, h) = (ax(p, "layers"), ax(p, "hidden"));
        2900 + 48 * l * h * h + 52 * l * h + 5318 * l + 1032 * h
    };
    let far = [point(&[
        ("batch", 8),
        ("seq", 4096),
        ("layers", 32),
        ("hidden", 4096),
    ])];
    recovers(&decoder_grid(), f, 5, &far);
}

#[test]
fn a_decoders_activations_come_back_from_four_axes() {
    // Attention scores (batch·seq²·layers), the layers' activations, the logits.
    let f = |p: &Point| {
        let (b, s, l, h) = (
            ax(p, "batch"),
            ax(p, "seq"),
            ax(p, "layers"),
            ax(p, "hidden"),
        );
        9088 + 96 * b * s * s * l
            + 156 * b * s * l * h
            + 80 * b * s * l
            + 24 * b * s * h
            + 2600 * b * s
            + 22164 * l
    };
    let far = [point(&[
        ("batch", 8),
        ("seq", 4096),
        ("layers", 32),
        ("hidden", 4096),
    ])];
    recovers(&decoder_grid(), f, 7, &far);
}

#[test]
fn a_noisy_series_is_flagged_and_not_trusted() {
    let g = grid(&[("batch", &[1, 2, 3, 4]), ("seq", &[8, 16])]);
    // Bytes that jump around by a factor of several between neighbouring points.
    let bumps = [100, 9000, 250, 7000, 40, 12000, 3000, 5];
    let s: Vec<(Point, u64)> = g.points().into_iter().zip(bumps).collect();
    let fit = Fit::new(&g, &s).unwrap();
    assert!(
        fit.loo_error_ppm > FLAG_PPM,
        "{} {}",
        fit.terms,
        fit.loo_error_ppm
    );
    assert!(fit.flagged());
    let p = fit.predict(&point(&[("batch", 64), ("seq", 64)])).unwrap();
    assert!(p.flagged());
    assert!(matches!(p.trusted(), Err(AxesError::Flagged { .. })));
}

/// A figure that depends on `seq` alone, with no polynomial behind it (bookkeeping
/// that comes and goes), on `batch` × `seq` in 2 × 3 values: the constant, `seq` and
/// `seq²` pass through its three values exactly, and the leave-one-out error is 0
/// (each point's twin at the other batch predicts it), yet nothing checks the
/// parabola: the fit interpolates `seq` and is flagged. A figure whose formula leaves
/// some combination of its axes to check it is not, nor a straight line through the
/// two values of one axis.
#[test]
fn a_fit_that_interpolates_every_combination_of_its_axes_is_flagged() {
    let g = grid(&[("batch", &[1, 2]), ("seq", &[8, 16, 24])]);
    let per_seq = |p: &Point| match ax(p, "seq") {
        8 => 1871,
        16 => 0,
        _ => 3391,
    };
    let fit = Fit::new(&g, &series(&g, per_seq)).unwrap();
    assert_eq!(fit.loo_error_ppm, 0, "{}", fit.terms);
    assert!(!fit.flagged());
    assert_eq!(
        fit.interpolation(&g),
        Some(Interpolation {
            axes: vec!["seq".to_owned()],
            combinations: 3,
            open: vec!["seq".to_owned()],
        }),
        "{}",
        fit.terms
    );
    assert!(matches!(fit.flag(&g), Some(Flag::Interpolates(_))));
    let scaling = FigureFits::fit(
        &g,
        &BTreeMap::from([("workspace".to_owned(), series(&g, per_seq))]),
    )
    .unwrap();
    let p = scaling
        .predict("workspace", &point(&[("batch", 8), ("seq", 4096)]))
        .unwrap();
    assert!(p.flagged());
    let e = p.trusted().unwrap_err();
    assert!(
        matches!(
            e,
            AxesError::Interpolated {
                combinations: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("combinations of the values of seq (3)"),
        "{e}"
    );
    let three = Interpolation {
        axes: vec!["batch".to_owned(), "seq".to_owned(), "layers".to_owned()],
        combinations: 18,
        open: vec!["seq".to_owned(), "layers".to_owned()],
    };
    assert_eq!(three.axes_in_words(), "batch, seq and layers");
    assert_eq!(
        three.remedy(),
        "measure one of seq and layers at a fourth value"
    );

    // 2 terms over 6 combinations of batch and seq: 4 of them check it.
    let checked = Fit::new(&g, &series(&g, |p| 7 + 100 * ax(p, "batch") * ax(p, "seq"))).unwrap();
    assert_eq!(checked.terms.terms.len(), 2, "{}", checked.terms);
    assert_eq!(checked.interpolation(&g), None);
    // A constant uses no axis: every point checks it.
    let constant = Fit::new(&g, &series(&g, |_| 4096)).unwrap();
    assert_eq!(constant.interpolation(&g), None);
    // A straight line through batch's two values is what they allow: not flagged.
    let line = Fit::new(&g, &series(&g, |p| 512 + 4096 * ax(p, "batch"))).unwrap();
    assert_eq!(line.terms.terms.len(), 2, "{}", line.terms);
    assert_eq!(line.interpolation(&g), None);
    // Nor is a plane through two two-valued axes (batch × layers), with its product.
    let g = grid(&[
        ("batch", &[1, 2]),
        ("layers", &[1, 2]),
        ("seq", &[8, 16, 24]),
    ]);
    let bilinear = |p: &Point| {
        100 + 7 * ax(p, "batch") + 5 * ax(p, "layers") + 3 * ax(p, "batch") * ax(p, "layers")
    };
    let plane = Fit::new(&g, &series(&g, bilinear)).unwrap();
    assert_eq!(plane.terms.terms.len(), 4, "{}", plane.terms);
    assert_eq!(plane.interpolation(&g), None);
    // A fourth value of seq checks the parabola: the same figure is not flagged there.
    let g = grid(&[("batch", &[1, 2]), ("seq", &[8, 16, 24, 32])]);
    let fit = Fit::new(
        &g,
        &series(&g, |p| {
            64 * ax(p, "seq") * ax(p, "seq") + 8 * ax(p, "seq") + 1
        }),
    )
    .unwrap();
    assert_eq!(fit.terms.terms.len(), 3, "{}", fit.terms);
    assert_eq!(fit.interpolation(&g), None);
}

#[test]
fn a_little_noise_is_not_flagged() {
    let g = grid(&[("batch", &[1, 2, 3, 4]), ("seq", &[8, 16])]);
    let noise = [3i64, -5, 0, 7, -2, 4, -6, 1];
    let s: Vec<(Point, u64)> = g
        .points()
        .into_iter()
        .zip(noise)
        .map(|(p, n)| {
            let exact = (1 << 20) + 4096 * ax(&p, "batch") * ax(&p, "seq");
            (p, (exact as i64 + n) as u64)
        })
        .collect();
    let fit = Fit::new(&g, &s).unwrap();
    assert!(!fit.flagged(), "{} {}", fit.terms, fit.loo_error_ppm);
    assert!(fit.loo_error_ppm > 0);
    let far = point(&[("batch", 64), ("seq", 64)]);
    let exact = (1 << 20) + 4096 * 64 * 64;
    let got = fit.predict(&far).unwrap().trusted().unwrap();
    assert!(got.abs_diff(exact) * 1000 < exact, "{got} vs {exact}");
}

#[test]
fn an_eighteen_point_grid_of_terabyte_figures_does_not_overflow() {
    let g = grid(&[
        ("a", &[1024, 2048, 4096]),
        ("b", &[1024, 2048, 4096]),
        ("c", &[1, 2]),
    ]);
    let f = |p: &Point| (1u64 << 40) + 7 * ax(p, "a") * ax(p, "b").pow(2) * ax(p, "c");
    let far = [point(&[("a", 4096), ("b", 8192), ("c", 4)])];
    recovers(&g, f, 2, &far);
    // The same figures with noise: big denominators, still exact and serialisable.
    let noisy: Vec<(Point, u64)> = series(&g, f)
        .into_iter()
        .enumerate()
        .map(|(i, (p, y))| (p, y + (i as u64 * 7919 % 13) * 1_000_003))
        .collect();
    let fit = Fit::new(&g, &noisy).unwrap();
    let back: Fit = serde_json::from_str(&serde_json::to_string(&fit).unwrap()).unwrap();
    assert_eq!(back, fit);
    for (p, y) in &noisy {
        let got = fit.predict(p).unwrap().bytes;
        assert!(got.abs_diff(*y) < 1 << 30, "{got} vs {y}");
    }
}

/// Axes as written in a test: each name with its values.
type Axes<'a> = &'a [(&'a str, &'a [u64])];

fn grid_error(axes: Axes) -> String {
    Grid::new(axes.iter().map(|&(k, v)| (k, v.to_vec())))
        .unwrap_err()
        .to_string()
}

/// A batch sweep is a grid of one axis: three sizes fit `a + b × batch`, each size
/// predicted by the line through the other two; two sizes give the line through both.
#[test]
fn a_grid_of_one_axis_fits_a_line_checked_by_the_held_out_size() {
    let line = |b: u64| 29_007_703 + 20_956 * b;
    let grid = Grid::new([("batch", vec![32, 64, 128])]).unwrap();
    let series: Vec<(Point, u64)> = [32, 64, 128]
        .map(|b| (point(&[("batch", b)]), line(b)))
        .into();
    let fit = Fit::new(&grid, &series).unwrap();
    let term = |c: i64, m: Monomial| Term {
        coefficient: BigRational::from_integer(BigInt::from(c)),
        monomial: m,
    };
    let expected = Formula {
        terms: vec![
            term(29_007_703, Monomial::constant()),
            term(20_956, Monomial::new([("batch", 1)])),
        ],
    };
    assert_eq!(fit.terms, expected);
    assert_eq!(fit.loo_error_ppm, 0);
    let at = point(&[("batch", 1000)]);
    assert_eq!(fit.predict(&at).unwrap().bytes, line(1000));
    // One size off its line by 10%: the line through the two others misses it.
    let mut bent = series.clone();
    bent[2].1 = line(128) * 11 / 10;
    let fit = Fit::new(&grid, &bent).unwrap();
    assert!(fit.flagged(), "{fit:?}");
    // Two sizes: the line through both, nothing held out.
    let two = Grid::new([("batch", vec![64, 128])]).unwrap();
    let fit = Fit::new(&two, &series[1..]).unwrap();
    assert_eq!(fit.predict(&at).unwrap().bytes, line(1000));
    assert_eq!((fit.loo_error_ppm, fit.flag(&two)), (0, None));
}

#[test]
fn bad_grids_name_the_axis() {
    let cases: [(Axes, &str, &str); 6] = [
        (&[("batch", &[1])], "`batch`", "1 distinct value"),
        (&[("batch", &[1, 2]), ("seq", &[])], "`seq`", "no values"),
        (&[("batch", &[1, 2]), ("seq", &[0, 4])], "`seq`", "0"),
        (&[("batch", &[1, 2]), ("seq", &[4, 8, 4])], "`seq`", "twice"),
        (
            &[("batch", &[1, 2]), ("seq", &[4])],
            "`seq`",
            "1 distinct value",
        ),
        (
            &[("batch", &[1, 2]), ("se q", &[1, 2])],
            "`se q`",
            "not a name",
        ),
    ];
    for (axes, axis, what) in cases {
        let e = grid_error(axes);
        assert!(e.contains(axis) && e.contains(what), "{e}");
    }
    let e = grid_error(&[("batch", &[1, 2]), ("batch", &[3, 4])]);
    assert!(e.contains("`batch`") && e.contains("twice"), "{e}");
}

#[test]
fn a_grid_over_256_points_is_refused() {
    let values: Vec<u64> = (1..=17).collect();
    let e = Grid::new([("batch", values.clone()), ("seq", values[..16].to_vec())]).unwrap_err();
    assert_eq!(
        e,
        AxesError::TooManyPoints {
            shape: "batch(17) × seq(16)".into(),
            points: 17 * 16
        }
    );
    assert!(e.to_string().contains(&MAX_POINTS.to_string()));
    let g = Grid::new([
        ("batch", values[..16].to_vec()),
        ("seq", values[..16].to_vec()),
    ])
    .unwrap();
    assert_eq!(g.points().len(), 256);
}

#[test]
fn points_enumerate_every_combination_in_order() {
    let g = grid(&[("seq", &[32, 16]), ("batch", &[2, 4, 8])]);
    let got = g.points();
    let mut expected = Vec::new();
    for s in [32, 16] {
        for b in [2, 4, 8] {
            expected.push(point(&[("seq", s), ("batch", b)]));
        }
    }
    assert_eq!(got, expected);
}

#[test]
fn points_name_known_axes_only() {
    let g = grid(&[("batch", &[1, 2]), ("seq", &[4, 8])]);
    let unknown = g
        .check_point(&point(&[("batch", 1), ("seq", 4), ("layrs", 2)]))
        .unwrap_err();
    assert!(matches!(&unknown, AxesError::UnknownAxis { axis, .. } if axis == "layrs"));
    assert!(unknown.to_string().contains("batch, seq"), "{unknown}");
    let missing = g.check_point(&point(&[("batch", 1)])).unwrap_err();
    assert!(matches!(&missing, AxesError::MissingAxis { axis, .. } if axis == "seq"));
    let zero = g
        .check_point(&point(&[("batch", 0), ("seq", 4)]))
        .unwrap_err();
    assert!(matches!(&zero, AxesError::Zero { axis } if axis == "batch"));
    let s = series(&g, |p| ax(p, "batch"));
    let off = [
        (point(&[("batch", 1), ("seqq", 4)]), 1),
        s[1].clone(),
        s[2].clone(),
    ];
    assert!(matches!(
        Fit::new(&g, &off),
        Err(AxesError::UnknownAxis { .. })
    ));
    assert!(matches!(
        Fit::new(&g, &s[..2]),
        Err(AxesError::TooFewPoints { points: 2 })
    ));
}

#[test]
fn the_tie_break_prefers_fewer_terms() {
    // Exactly linear in batch: every larger model fits exactly too.
    let g = grid(&[("batch", &[1, 2, 3, 4]), ("seq", &[8, 16, 24])]);
    let fit = Fit::new(&g, &series(&g, |p| 100 + 64 * ax(p, "batch"))).unwrap();
    let monomials: Vec<String> = fit
        .terms
        .terms
        .iter()
        .map(|t| t.monomial.to_string())
        .collect();
    assert_eq!(monomials, ["1", "batch"]);
}

#[test]
fn the_tie_break_prefers_lower_degree() {
    // On these three points b = a²: `7 × b` and `7 × a²` fit equally well.
    let g = grid(&[("a", &[1, 2, 3]), ("b", &[1, 4, 9])]);
    let s: Vec<(Point, u64)> = [1, 2, 3]
        .iter()
        .map(|&a| (point(&[("a", a), ("b", a * a)]), 7 * a * a))
        .collect();
    let fit = Fit::new(&g, &s).unwrap();
    assert_eq!(fit.terms.terms.len(), 1);
    assert_eq!(
        fit.terms.terms[0].monomial.to_string(),
        "b",
        "{}",
        fit.terms
    );
}

fn term(coefficient: BigRational, monomial: &str) -> Term {
    Term {
        coefficient,
        monomial: monomial.parse().unwrap(),
    }
}

fn int(n: i64) -> BigRational {
    BigRational::from_integer(n.into())
}

#[test]
fn formulas_display_in_human_bytes() {
    let f = Formula {
        terms: vec![
            term(int(1 << 20), "1"),
            term(int(512), "batch·seq·layers"),
            term(int(2048), "layers"),
        ],
    };
    assert_eq!(
        f.to_string(),
        "1.00 MiB + 512 B × batch·seq·layers + 2.00 KiB × layers"
    );
    let g = Formula {
        terms: vec![
            term(int(-3), "1"),
            term(BigRational::new(1.into(), 3.into()), "seq²"),
            term(BigRational::new((-7).into(), 2.into()), "batch"),
        ],
    };
    assert_eq!(g.to_string(), "-3 B + 0.33 B × seq² - 3.50 B × batch");
    assert_eq!(Formula::default().to_string(), "0 B");
}

#[test]
fn fitted_terms_come_constant_first_then_by_degree() {
    let g = grid(&[
        ("batch", &[2, 4]),
        ("seq", &[16, 32, 48]),
        ("layers", &[1, 2, 3]),
    ]);
    let f = |p: &Point| {
        (1 << 20) + 2048 * ax(p, "layers") + 512 * ax(p, "batch") * ax(p, "seq") * ax(p, "layers")
    };
    let fit = Fit::new(&g, &series(&g, f)).unwrap();
    assert_eq!(
        fit.terms.to_string(),
        "1.00 MiB + 512 B × batch·seq·layers + 2.00 KiB × layers"
    );
}

#[test]
fn a_fit_stores_integers_and_rational_strings_only() {
    let g = grid(&[("batch", &[1, 2, 3]), ("seq", &[3, 6])]);
    // 1/3 byte per batch·seq: a rational coefficient.
    let fit = Fit::new(&g, &series(&g, |p| 999 + ax(p, "batch") * ax(p, "seq") / 3)).unwrap();
    assert_eq!(
        fit.terms.terms[1].coefficient,
        BigRational::new(1.into(), 3.into())
    );
    let scaling = FigureFits {
        axes: g.to_map(),
        figures: BTreeMap::from([("activations".to_owned(), fit.clone())]),
    };
    let json = serde_json::to_value(&scaling).unwrap();
    fn no_floats(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Number(n) => n.is_u64() || n.is_i64(),
            serde_json::Value::Array(a) => a.iter().all(no_floats),
            serde_json::Value::Object(o) => o.values().all(no_floats),
            _ => true,
        }
    }
    assert!(no_floats(&json), "{json}");
    let terms = &json["figures"]["activations"]["terms"];
    assert_eq!(terms[1]["coefficient"], "1/3");
    assert_eq!(terms[1]["monomial"], "batch·seq");
    let back: FigureFits = serde_json::from_value(json).unwrap();
    assert_eq!(back, scaling);
    let toml_text = toml::to_string(&scaling).unwrap();
    assert_eq!(toml::from_str::<FigureFits>(&toml_text).unwrap(), scaling);
}

#[test]
fn bad_stored_fits_are_refused() {
    let bad = |json: &str| serde_json::from_str::<Fit>(json).unwrap_err().to_string();
    let e = bad(r#"{"terms":[{"coefficient":"1/0","monomial":"batch"}],"loo_error_ppm":0}"#);
    assert!(e.contains("`1/0`"), "{e}");
    let e = bad(r#"{"terms":[{"coefficient":"0.5","monomial":"batch"}],"loo_error_ppm":0}"#);
    assert!(e.contains("`0.5`"), "{e}");
    let e = bad(r#"{"terms":[{"coefficient":"1","monomial":"batch·batch"}],"loo_error_ppm":0}"#);
    assert!(e.contains("twice"), "{e}");
    let e = bad(r#"{"terms":[],"loo_error_ppm":0,"extra":1}"#);
    assert!(e.contains("extra"), "{e}");
    assert_eq!("batch·seq²".parse::<Monomial>().unwrap().degree(), 3);
}

#[test]
fn a_scaling_predicts_each_figure_and_checks_the_point() {
    let g = grid(&[("batch", &[1, 2, 3]), ("layers", &[1, 2])]);
    let figures = BTreeMap::from([
        (
            "parameters".to_owned(),
            series(&g, |p| 4096 * ax(p, "layers")),
        ),
        (
            "activations".to_owned(),
            series(&g, |p| 64 * ax(p, "batch") * ax(p, "layers")),
        ),
    ]);
    let scaling = FigureFits::fit(&g, &figures).unwrap();
    let at = point(&[("batch", 100), ("layers", 80)]);
    let got = scaling
        .predict("activations", &at)
        .unwrap()
        .trusted()
        .unwrap();
    assert_eq!(got, 64 * 100 * 80);
    assert!(matches!(
        scaling.predict("gradients", &at),
        Err(AxesError::UnknownFigure { .. })
    ));
    let e = scaling
        .predict("parameters", &point(&[("batch", 1)]))
        .unwrap_err();
    assert!(e.to_string().contains("`layers`"), "{e}");
    let mut few = figures.clone();
    few.insert("temporaries".to_owned(), series(&g, |_| 1)[..2].to_vec());
    let e = FigureFits::fit(&g, &few).unwrap_err().to_string();
    assert!(
        e.contains("`temporaries`") && e.contains("at least 3"),
        "{e}"
    );
}

#[test]
fn the_maximum_over_phases_follows_the_dominant_phase() {
    // The forward pass holds activations (per batch·seq), the optimizer step holds
    // AdamW state (per layer, squared hidden size): in the grid the forward pass
    // dominates, at the target the optimizer step does.
    let g = grid(&[
        ("batch", &[4, 8]),
        ("seq", &[64, 128, 256]),
        ("layers", &[1, 2]),
    ]);
    let forward = |p: &Point| 1000 * ax(p, "batch") * ax(p, "seq");
    let optimizer = |p: &Point| 12 * 4096 * ax(p, "layers");
    let fits: Vec<(&str, Fit)> = vec![
        ("forward", Fit::new(&g, &series(&g, forward)).unwrap()),
        ("optimizer", Fit::new(&g, &series(&g, optimizer)).unwrap()),
    ];
    let phases = || fits.iter().map(|(n, f)| (*n, f));
    for p in g.points() {
        assert!(forward(&p) > optimizer(&p));
        let max = predict_max(phases(), &p).unwrap();
        assert_eq!((max.phase.as_str(), max.bytes), ("forward", forward(&p)));
    }
    let target = point(&[("batch", 1), ("seq", 64), ("layers", 32)]);
    let max = predict_max(phases(), &target).unwrap();
    assert_eq!(max.phase, "optimizer");
    assert_eq!(max.bytes, optimizer(&target).max(forward(&target)));
    assert!(!max.flagged);
    assert!(matches!(predict_max([], &target), Err(AxesError::NoPhases)));
}

/// Two phases predicted equal at a point: the one named as holding the maximum is the
/// one whose own fit is trusted, then the one with the smaller held-out error, and only
/// then the first by name.
#[test]
fn of_equal_phases_the_maximum_names_the_trusted_one() {
    let g = grid(&[("batch", &[1, 2, 3]), ("seq", &[8, 16])]);
    let f = |p: &Point| 1000 * ax(p, "batch") * ax(p, "seq") + 64;
    let trusted = Fit::new(&g, &series(&g, f)).unwrap();
    assert!(!trusted.flagged());
    let mut missing = trusted.clone();
    missing.loo_error_ppm = 2 * FLAG_PPM;
    assert!(missing.flagged());
    let mut rougher = trusted.clone();
    rougher.loo_error_ppm = FLAG_PPM / 2;
    assert!(!rougher.flagged());
    let at = point(&[("batch", 40), ("seq", 4096)]);
    for (fits, named) in [
        (vec![("a", &missing), ("b", &trusted)], "b"),
        (vec![("a", &trusted), ("b", &missing)], "a"),
        (vec![("a", &rougher), ("b", &trusted)], "b"),
        (vec![("a", &trusted), ("b", &trusted)], "a"),
    ] {
        let max = predict_max(fits.iter().copied(), &at).unwrap();
        assert_eq!(max.phase, named);
        assert_eq!(max.bytes, f(&at));
        // The doubt is the worst of them all, whichever is named.
        let any_flagged = fits.iter().any(|(_, fit)| fit.flagged());
        assert_eq!(max.flagged, any_flagged);
    }
    // A larger prediction wins over a trusted one, flagged or not.
    let mut larger = missing.clone();
    larger.terms = Fit::new(&g, &series(&g, |p| f(p) + 8)).unwrap().terms;
    let max = predict_max([("a", &trusted), ("b", &larger)], &at).unwrap();
    assert_eq!((max.phase.as_str(), max.bytes), ("b", f(&at) + 8));
    assert!(max.flagged);
}

fn any_point_far_out() -> impl Strategy<Value = Point> {
    (1u64..5000, 1u64..5000).prop_map(|(b, s)| point(&[("batch", b), ("seq", s)]))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any sum of up to three monomials with positive coefficients is recovered and
    /// predicts any point exactly.
    #[test]
    fn sparse_polynomials_come_back(
        terms in proptest::collection::btree_map((0u32..=2, 0u32..=2), 1u64..1 << 24, 1..=3),
        far in any_point_far_out(),
    ) {
        let g = grid(&[("batch", &[1, 2, 3]), ("seq", &[2, 3, 5])]);
        // In u128: far out, `c × batch² × seq²` passes 64 bits.
        let f = |p: &Point| -> u128 {
            let (b, s) = (u128::from(ax(p, "batch")), u128::from(ax(p, "seq")));
            terms.iter().map(|(&(eb, es), &c)| u128::from(c) * b.pow(eb) * s.pow(es)).sum()
        };
        let fit = Fit::new(&g, &series(&g, |p| f(p) as u64)).unwrap();
        prop_assert_eq!(fit.loo_error_ppm, 0);
        prop_assert_eq!(fit.terms.terms.len(), terms.len(), "{}", fit.terms);
        let exact = fit.terms.eval(&far).unwrap();
        prop_assert_eq!(exact, BigRational::from_integer(BigInt::from(f(&far))));
    }

    /// The fit does not depend on the order the points were measured in.
    #[test]
    fn the_order_of_the_points_does_not_matter(
        bytes in proptest::collection::vec(1u64..1 << 40, 8),
        rotate in 0usize..8,
    ) {
        let g = grid(&[("batch", &[1, 2, 3, 4]), ("seq", &[8, 16])]);
        let s: Vec<(Point, u64)> = g.points().into_iter().zip(bytes).collect();
        let mut t = s.clone();
        t.rotate_left(rotate);
        t.reverse();
        prop_assert_eq!(Fit::new(&g, &s).unwrap(), Fit::new(&g, &t).unwrap());
    }
}

proptest! {
    /// A monomial's value is the product of its axes' powers, in small integers or
    /// past `u128` alike (the evaluation switches to big integers where a product
    /// overflows).
    #[test]
    fn a_monomial_is_the_product_of_its_powers(
        a in 1u64..=u64::MAX, b in 1u64..=u64::MAX, c in 1u64..=4096,
        pa in 0u8..=2, pb in 0u8..=2, pc in 0u8..=2,
    ) {
        let m = Monomial::new([("a", pa), ("b", pb), ("c", pc)]);
        let p = point(&[("a", a), ("b", b), ("c", c)]);
        let expected = BigInt::from(a).pow(u32::from(pa))
            * BigInt::from(b).pow(u32::from(pb))
            * BigInt::from(c).pow(u32::from(pc));
        prop_assert_eq!(m.eval(&p).unwrap(), expected);
    }
}

proptest! {
    /// A formula's value is the sum of its terms, each its coefficient times its
    /// monomial, whatever their denominators (summed here one rational at a time).
    #[test]
    fn a_formula_is_the_sum_of_its_terms(
        terms in proptest::collection::vec((-10_000i64..10_000, 1i64..50, 0u8..=2, 0u8..=2), 0..6),
        a in 1u64..5000, b in 1u64..5000,
    ) {
        let formula = Formula {
            terms: terms
                .iter()
                .map(|&(n, d, pa, pb)| Term {
                    coefficient: BigRational::new(n.into(), d.into()),
                    monomial: Monomial::new([("a", pa), ("b", pb)]),
                })
                .collect(),
        };
        let p = point(&[("a", a), ("b", b)]);
        let mut expected = BigRational::from_integer(0.into());
        for &(n, d, pa, pb) in &terms {
            let m = BigInt::from(a).pow(u32::from(pa)) * BigInt::from(b).pow(u32::from(pb));
            expected += BigRational::new(n.into(), d.into()) * BigRational::from_integer(m);
        }
        prop_assert_eq!(formula.eval(&p).unwrap(), expected);
    }
}

#[test]
fn a_constant_figure_is_one_constant_term_and_zero_is_none() {
    let g = grid(&[("batch", &[1, 2, 4]), ("seq", &[8, 16, 24])]);
    let far = [point(&[("batch", 64), ("seq", 4096)])];
    let fit = recovers(&g, |_| 4096, 1, &far);
    assert_eq!(fit.terms.terms[0].monomial.degree(), 0, "{}", fit.terms);
    recovers(&g, |_| 0, 0, &far);
}

/// The powers of `axis` in a fit's terms.
fn powers_of(fit: &Fit, axis: &str) -> Vec<u8> {
    fit.terms
        .terms
        .iter()
        .flat_map(|t| t.monomial.powers().iter())
        .filter(|(name, _)| name == axis)
        .map(|(_, p)| *p)
        .collect()
}

#[test]
fn a_counting_axis_at_three_values_enters_linearly_even_where_a_square_would_fit() {
    // Activations of b·s per layer, plus a table that doubles from two layers to three
    // (64 KiB to 128 KiB): a step, over 2% of the grid's figures, that a layers² term
    // passes through exactly.
    let g = grid(&[
        ("batch", &[1, 2]),
        ("seq", &[8, 16, 24]),
        ("layers", &[1, 2, 3]),
    ]);
    let table = |l: u64| if l < 3 { 64 << 10 } else { 128 << 10 };
    let f =
        |p: &Point| 1024 * ax(p, "batch") * ax(p, "seq") * ax(p, "layers") + table(ax(p, "layers"));
    let fit = Fit::new(&g, &series(&g, f)).unwrap();
    assert!(
        powers_of(&fit, "layers").iter().all(|&p| p <= 1),
        "{}",
        fit.terms
    );
    // The step cannot be told from tensors on three layer counts: the fit misses a
    // held-out point by more than bookkeeping and says so, rather than multiplying a
    // layers² term into the far prediction.
    assert!(fit.flagged(), "{} at {} ppm", fit.terms, fit.loo_error_ppm);
    let far = point(&[("batch", 8), ("seq", 4096), ("layers", 32)]);
    assert!(fit.predict(&far).unwrap().flagged());
}

#[test]
fn four_values_of_a_counting_axis_may_demand_its_square() {
    // A figure that really grows with layers² (each layer attends to every earlier one).
    let g = grid(&[("batch", &[1, 2]), ("layers", &[1, 2, 3, 4])]);
    let f = |p: &Point| 512 * ax(p, "batch") * ax(p, "layers") * ax(p, "layers") + 4096;
    let fit = Fit::new(&g, &series(&g, f)).unwrap();
    assert!(powers_of(&fit, "layers").contains(&2), "{}", fit.terms);
    let far = point(&[("batch", 8), ("layers", 32)]);
    assert_eq!(fit.predict(&far).unwrap().bytes, f(&far));
    // The same figure at three values: no square, and the miss is flagged, not trusted.
    let g3 = grid(&[("batch", &[1, 2]), ("layers", &[1, 2, 3])]);
    let fit3 = Fit::new(&g3, &series(&g3, f)).unwrap();
    assert!(
        powers_of(&fit3, "layers").iter().all(|&p| p <= 1),
        "{}",
        fit3.terms
    );
    assert!(
        fit3.flagged(),
        "{} at {} ppm",
        fit3.terms,
        fit3.loo_error_ppm
    );
}

/// The activations of `fixtures/candle-transformer`'s `levers` at `checkpointing =
/// blocks, precision = f32`, as measured: exactly
/// `8664 + 256·layers·seq + 272·layers + 6736·seq` on the grid, and 1,520 B over it at
/// the one axial point toward the
/// target's 12 layers (layers=9, seq=96), where the autodiff graph's table has
/// doubled once more. A model free of signs chases that step with a pair whose
/// negative term nothing covers (negative at one layer, whatever the sequence), and
/// is 7% over at the target; memory's prior keeps the model of tensors, within its
/// 0.17% of the step.
#[test]
fn a_negative_term_nothing_covers_gives_way_to_a_model_of_tensors() {
    let g = grid(&[("layers", &[1, 2]), ("seq", &[96, 128, 160, 192])]);
    let tensors = |p: &Point| {
        8664 + 256 * ax(p, "layers") * ax(p, "seq") + 272 * ax(p, "layers") + 6736 * ax(p, "seq")
    };
    let mut s = series(&g, tensors);
    let axial = point(&[("layers", 9), ("seq", 96)]);
    s.push((axial.clone(), tensors(&axial) + 1520));
    let target = point(&[("layers", 12), ("seq", 512)]);
    let smallest = point(&[("layers", 1), ("seq", 96)]);
    let free = Fit::free(&g, &s).unwrap();
    assert!(
        !free.terms.uncovered(&smallest).unwrap().is_empty(),
        "the free fit chases the step with an uncovered negative term: {}",
        free.terms
    );
    let off = |fit: &Fit| {
        let predicted = fit.predict(&target).unwrap().bytes as f64;
        predicted / tensors(&target) as f64 - 1.0
    };
    assert!(
        off(&free) > 0.05,
        "free: {} is {:+.2}%",
        free.terms,
        off(&free) * 100.0
    );
    let fit = Fit::new(&g, &s).unwrap();
    assert!(
        fit.terms.uncovered(&smallest).unwrap().is_empty(),
        "{}",
        fit.terms
    );
    assert!(
        off(&fit).abs() < 0.005,
        "{} is {:+.2}% at the target",
        fit.terms,
        off(&fit) * 100.0
    );
    assert!(
        !fit.flagged(),
        "{} misses by {} ppm",
        fit.terms,
        fit.loo_error_ppm
    );
}
