//! A sweep over named axes through the harness, on fixtures/vec-model's `axes` target:
//! a model of plain `Vec`s whose figures are polynomials written out below, fitted from
//! an 18-point grid, predicted at a target far outside it, and gated.

mod common;

use common::{copy_fixture, run};
use vramtest_model::report::Status;
use vramtest_model::{Body, Category, HumanBytes};

// fixtures/vec-model/tests/axes.rs, in bytes.
const HIDDEN: u64 = 16;
const F32: u64 = 4;
const VEC_HEADER: u64 = 24;

/// Each category's own peak at (batch, seq, layers), from the fixture's code.
fn expected(b: u64, s: u64, l: u64, extra: bool) -> [(Category, u64); 6] {
    // A weight per layer, held in an outer Vec of Vecs.
    let weight = HIDDEN * HIDDEN * F32 + VEC_HEADER;
    let activation = b * s * HIDDEN * F32;
    let kept = if extra { 2 } else { 1 };
    [
        (Category::Parameters, l * weight),
        (Category::Gradients, l * weight),
        (Category::OptimizerState, 2 * l * weight),
        // Two Vec headers per layer reserved up front, the kept activations.
        (
            Category::Activations,
            kept * l * activation + 2 * l * VEC_HEADER,
        ),
        (Category::Inputs, activation),
        // One layer's attention scores at a time.
        (Category::Temporaries, b * s * s * F32),
    ]
}

fn body(r: &common::Run) -> Body {
    r.report("transformer_like")
        .body
        .clone()
        .unwrap_or_else(|| panic!("measured:\n{}", r.text()))
}

#[test]
fn a_sweep_over_named_axes_predicts_its_target_and_gates_it() {
    let dir = copy_fixture("vec-model");
    let exe = common::build_test_target(&dir, "axes");
    let one = ["transformer_like", "--exact", "--include-ignored"];
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(r.status("transformer_like"), Status::New, "{}", r.text());
    let b = body(&r);
    let sweep = b.sweep().expect("a sweep over named axes");
    assert_eq!(sweep.axes["seq"], vec![4, 8, 12]);
    // The snapshot's own figures are the grid's first point.
    for (c, bytes) in expected(1, 4, 1, false) {
        assert_eq!(b.category_peaks[c], bytes, "{c} at the first point");
    }
    // Far outside the grid: 8× the batch, 42× the sequence, 10× the layers.
    let target = sweep.target.as_ref().expect("the target is predicted");
    let want = expected(8, 512, 32, false);
    assert_eq!(target.category_bytes.len(), 8);
    for (c, bytes) in want {
        assert_eq!(target.category_bytes[&c], bytes, "{c} at the target");
    }
    for c in [Category::Workspace, Category::Untracked] {
        assert_eq!(target.category_bytes[&c], 0, "{c}");
    }
    // Forward holds the scores beside the activations; at seq 512 it is the peak.
    let of = |c: Category| want.iter().find(|(k, _)| *k == c).unwrap().1;
    let forward = of(Category::Parameters)
        + of(Category::OptimizerState)
        + of(Category::Inputs)
        + of(Category::Activations)
        + of(Category::Temporaries);
    assert_eq!(target.peak_bytes, forward, "{:#?}", sweep.figures);
    let snap = dir.join("tests/snapshots/axes__transformer_like@cpu.snap");
    let text = std::fs::read_to_string(&snap).unwrap();
    assert!(text.contains("\"scaling\": {\n    \"axes\""), "{text}");

    // The same code passes against its snapshot.
    let r = run(&dir, &exe, &one, &[]);
    assert_eq!(r.status("transformer_like"), Status::Passed, "{}", r.text());

    // One more activation per layer: the target names the term that grew.
    let r = run(&dir, &exe, &one, &[("VEC_MODEL_EXTRA_ACTIVATION", "1")]);
    let report = r.report("transformer_like");
    assert_eq!(report.status, Status::Regressed, "{}", r.text());
    let grown = expected(8, 512, 32, true)[3].1 - want[3].1;
    assert_eq!(grown, 8 * 512 * 32 * HIDDEN * F32);
    let line = report
        .message
        .lines()
        .find(|l| l.contains("target (batch=8, layers=32, seq=512): activations"))
        .unwrap_or_else(|| panic!("{}", report.message));
    assert!(
        line.ends_with("activations: +64 B × batch·seq·layers"),
        "{line}"
    );

    // A budget under the target's peak fails, even when updating; the grid itself is
    // far under it.
    let r = run(
        &dir,
        &exe,
        &[
            "transformer_like_over_budget",
            "--exact",
            "--include-ignored",
        ],
        &[("VRAMTEST_UPDATE", "always")],
    );
    let report = r.report("transformer_like_over_budget");
    assert_eq!(report.status, Status::Regressed, "{}", r.text());
    assert!(
        report.message.contains(
            "target (batch=8, layers=32, seq=512): predicted peak 16.35 MiB is over the budget 16.00 MiB"
        ),
        "{}",
        report.message
    );
}

/// A categorical axis `kept = ["one", "two"]`: both combinations run the 18-point grid,
/// each fitted on its own, and each predicts its own activations at the target.
#[test]
fn every_combination_of_levels_is_fitted_on_its_own() {
    // A scenario of its own: a copy built beside another test's would share its binary.
    let dir = common::copy_fixture_as("vec-model", "levels");
    let exe = common::build_test_target(&dir, "axes");
    let one = ["kept_levels", "--exact", "--include-ignored"];
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(r.status("kept_levels"), Status::New, "{}", r.text());
    // The level `two` costs memory: said when it is first recorded, not a failure.
    let costs = "kept_levels: kept=two saves no memory at target (batch=8, layers=32, seq=512)";
    let notes = &r.report("kept_levels").notes;
    assert_eq!(
        notes.iter().filter(|n| n.starts_with(costs)).count(),
        1,
        "{notes:#?}"
    );
    assert!(r.text().contains(&format!("note: {costs}")), "{}", r.text());
    let b = r
        .report("kept_levels")
        .body
        .clone()
        .unwrap_or_else(|| panic!("measured:\n{}", r.text()));
    let sweep = b.sweep().expect("a sweep over named axes");
    assert_eq!(
        sweep.levels["kept"],
        vec!["one".to_owned(), "two".to_owned()]
    );
    // The snapshot's own figures are the baseline's first point.
    for (c, bytes) in expected(1, 4, 1, false) {
        assert_eq!(b.category_peaks[c], bytes, "{c} at the first point");
    }
    let combinations = sweep.combinations();
    assert_eq!(combinations.len(), 2);
    for (variant, fitted) in combinations {
        let extra = match variant["kept"].as_str() {
            "one" => false,
            "two" => true,
            other => panic!("unknown level {other}"),
        };
        let target = fitted
            .target
            .as_ref()
            .expect("each level predicts the target");
        for (c, bytes) in expected(8, 512, 32, extra) {
            assert_eq!(
                target.category_bytes[&c], bytes,
                "{c} at the target, kept={variant:?}"
            );
        }
    }
    // The snapshot on disk holds both, and the same code passes against it.
    let snap = dir.join("tests/snapshots/axes__kept_levels@cpu.snap");
    let text = std::fs::read_to_string(&snap).unwrap();
    assert!(text.contains("\"variants\""), "{text}");
    let r = run(&dir, &exe, &one, &[]);
    assert_eq!(r.status("kept_levels"), Status::Passed, "{}", r.text());
    // Said once: the snapshot records the level now.
    assert!(!r.text().contains("saves no memory"), "{}", r.text());
    // The level `two`'s CPU step time over the baseline's is kept, and never compared:
    // a run under `always` whose times differ leaves the file as it was.
    let ratio = sweep.variants[0].cpu_time_ratio.get();
    assert!(ratio.is_some_and(|r| r > 0.0), "{ratio:?}");
    assert!(text.contains("\"cpu_time_ratio\""), "{text}");
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(r.status("kept_levels"), Status::Passed, "{}", r.text());
    assert_eq!(
        std::fs::read_to_string(&snap).unwrap(),
        text,
        "not rewritten"
    );

    // A third activation per layer at the level `two` only: the baseline is unchanged,
    // and the gate names the level whose activations grew.
    let r = run(&dir, &exe, &one, &[("VEC_MODEL_EXTRA_ACTIVATION", "1")]);
    let report = r.report("kept_levels");
    assert_eq!(report.status, Status::Regressed, "{}", r.text());
    assert!(
        report
            .message
            .lines()
            .any(|l| l.contains("kept=two: activations")),
        "{}",
        report.message
    );
}

/// A lever that saves memory, `checkpointing = ["off", "blocks"]`: the snapshot keeps
/// the level's saving at the target, and a change that silently turns it off fails
/// naming the lever, in the run's output and in its report.
#[test]
fn a_lever_that_stops_saving_fails_naming_it() {
    let dir = common::copy_fixture_as("vec-model", "gate");
    let exe = common::build_test_target(&dir, "axes");
    let one = ["checkpointing_levels", "--exact", "--include-ignored"];
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    let report = r.report("checkpointing_levels");
    assert_eq!(report.status, Status::New, "{}", r.text());
    // It saves memory: nothing to note.
    assert!(!r.text().contains("saves no memory"), "{}", r.text());
    let b = report.body.clone().expect("measured");
    let sweep = b.sweep().expect("a sweep over named axes");
    let saving = sweep.variants[0]
        .saving
        .as_ref()
        .expect("the saving is kept");
    assert_eq!(sweep.variants[0].variant["checkpointing"], "blocks");
    // "off" keeps two activations per layer (`expected`'s `extra`), "blocks" one.
    let (off, blocks) = (expected(8, 512, 32, true), expected(8, 512, 32, false));
    let of = |figures: &[(Category, u64); 6], c: Category| {
        figures.iter().find(|(k, _)| *k == c).map_or(0, |f| f.1)
    };
    let saved = of(&off, Category::Activations) - of(&blocks, Category::Activations);
    assert_eq!(saved, 32 * 8 * 512 * HIDDEN * F32);
    assert_eq!(
        saving.category_bytes[&Category::Activations],
        i64::try_from(saved).unwrap()
    );
    // The forward pass holds the peak at the target, with the activations in it.
    let forward = |f: &[(Category, u64); 6]| {
        [
            Category::Parameters,
            Category::OptimizerState,
            Category::Inputs,
            Category::Activations,
            Category::Temporaries,
        ]
        .map(|c| of(f, c))
        .iter()
        .sum::<u64>()
    };
    assert_eq!(saving.baseline_peak_bytes, forward(&off));
    assert_eq!(
        saving.peak_bytes,
        i64::try_from(forward(&off) - forward(&blocks)).unwrap()
    );
    for c in [
        Category::Parameters,
        Category::Temporaries,
        Category::Inputs,
    ] {
        assert_eq!(saving.category_bytes[&c], 0, "{c}");
    }
    let snap = dir.join("tests/snapshots/axes__checkpointing_levels@cpu.snap");
    let text = std::fs::read_to_string(&snap).unwrap();
    assert!(text.contains("\"saving\""), "{text}");

    // The same code passes against it.
    let r = run(&dir, &exe, &one, &[]);
    assert_eq!(
        r.status("checkpointing_levels"),
        Status::Passed,
        "{}",
        r.text()
    );

    // The level silently keeps every activation: the gate names the lever.
    let r = run(&dir, &exe, &one, &[("VEC_MODEL_NO_CHECKPOINTING", "1")]);
    let report = r.report("checkpointing_levels");
    assert_eq!(report.status, Status::Regressed, "{}", r.text());
    let percent = saved as f64 * 100.0 / of(&off, Category::Activations) as f64;
    let want = format!(
        "checkpointing=blocks: activations saving at target {percent:.1}% → 0.0% ({} → 0 B, shrank by {};",
        HumanBytes(saved),
        HumanBytes(saved)
    );
    let line = report
        .message
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(&want))
        .unwrap_or_else(|| panic!("{want}\n{}", report.message));
    assert!(r.text().contains(line), "{}", r.text());
    assert!(
        report.message.lines().any(|l| l
            .trim_start()
            .starts_with("checkpointing=blocks: peak saving at target")),
        "{}",
        report.message
    );
    // The gate's lines as the guide shows them (the vec model's bytes are exact).
    let gate: Vec<&str> = (report.message.lines())
        .map(str::trim_start)
        .filter(|l| l.contains(" saving at target "))
        .collect();
    insta::assert_snapshot!("lever_gate_failure", gate.join("\n"));
}

/// The analytic peak of `transformer_like` at (batch, seq, layers): the forward pass's,
/// or the backward pass's where it is larger (weights, their gradients, Adam's moments,
/// the kept activations and the input).
fn peak(b: u64, s: u64, l: u64) -> u64 {
    let of = |c: Category| {
        expected(b, s, l, false)
            .iter()
            .find(|(k, _)| *k == c)
            .unwrap()
            .1
    };
    let held = of(Category::Parameters) + of(Category::OptimizerState) + of(Category::Inputs);
    let forward = held + of(Category::Activations) + of(Category::Temporaries);
    // Backward: the gradients allocated while the activations are still kept, and
    // the outer Vec of the gradients (24 B per layer, reserved up front).
    let backward = held + of(Category::Activations) + of(Category::Gradients) + VEC_HEADER * l;
    forward.max(backward)
}

/// Axial points on, within 1 GiB (`axial_budget` in the metadata `cargo vramtest`
/// hands the harness).
const AXIAL_ON: &str = "{\"axial_budget\": \"1GiB\"}";

#[test]
fn the_targets_values_are_measured_one_axis_at_a_time_and_fitted_in() {
    let dir = copy_fixture("vec-model");
    let exe = common::build_test_target(&dir, "axes");
    let one = ["transformer_like", "--exact", "--include-ignored"];
    let r = run(
        &dir,
        &exe,
        &one,
        &[("VRAMTEST_UPDATE", "always"), ("VRAMTEST_CONFIG", AXIAL_ON)],
    );
    assert_eq!(r.status("transformer_like"), Status::New, "{}", r.text());
    let b = body(&r);
    let sweep = b.sweep().unwrap();
    // Target (batch=8, seq=512, layers=32) on the grid batch 1-2, seq 4-12, layers
    // 1-3: each axis at the target's value, the others at their smallest.
    let at: Vec<(u64, u64, u64)> = (sweep.axial.iter())
        .map(|a| (a.at["batch"], a.at["seq"], a.at["layers"]))
        .collect();
    assert_eq!(at, [(8, 4, 1), (1, 4, 32), (1, 512, 1)]);
    for a in &sweep.axial {
        let (bs, s, l) = (a.at["batch"], a.at["seq"], a.at["layers"]);
        assert!(!a.held_back(), "{a:?}");
        for (c, bytes) in expected(bs, s, l, false) {
            assert_eq!(a.category_bytes[&c], bytes, "{c} at {:?}", a.at);
        }
    }
    // The fits rest on them and still predict the target exactly.
    let target = sweep.target.as_ref().unwrap();
    for (c, bytes) in expected(8, 512, 32, false) {
        assert_eq!(target.category_bytes[&c], bytes, "{c} at the target");
    }
    let report = r.report("transformer_like");
    let cost = (report.notes.iter())
        .find(|n| n.contains("3 axial points (the target's values, one axis at a time) took"))
        .unwrap_or_else(|| panic!("{:#?}", report.notes));
    assert!(cost.contains("of the grid's"), "{cost}");
    let snap = dir.join("tests/snapshots/axes__transformer_like@cpu.snap");
    let text = std::fs::read_to_string(&snap).unwrap();
    assert!(text.contains("\"axial\": ["), "{text}");
    // Measured again at the same points, it passes.
    let r = run(&dir, &exe, &one, &[("VRAMTEST_CONFIG", AXIAL_ON)]);
    assert_eq!(r.status("transformer_like"), Status::Passed, "{}", r.text());

    // A budget under the seq point's peak holds it back to the largest sequence whose
    // predicted peak is within it; the other points stay.
    let budget = 600 * 1024;
    let config = format!("{{\"axial_budget\": {budget}}}");
    let fresh = copy_fixture("vec-model");
    let here = ("CARGO_MANIFEST_DIR", fresh.to_str().unwrap());
    let r = run(
        &fresh,
        &exe,
        &one,
        &[
            ("VRAMTEST_UPDATE", "always"),
            ("VRAMTEST_CONFIG", &config),
            here,
        ],
    );
    let sweep = body(&r).sweep().cloned().unwrap();
    let seq = (sweep.axial.iter()).find(|a| a.axis == "seq").unwrap();
    assert!(seq.held_back());
    let s = seq.at["seq"];
    assert!(
        s % 4 == 0 && peak(1, s, 1) <= budget && peak(1, s + 4, 1) > budget,
        "seq {s}"
    );
    let note = (r.report("transformer_like").notes.iter())
        .find(|n| n.contains(&format!("axial point seq={s} (the target's seq=512")))
        .cloned();
    assert!(note.is_some_and(|n| n.contains("over the axial budget of 600.00 KiB")));

    // Without a budget (the default), the points' predicted peaks share 10% of the
    // grid's measured ones: computed here from the model's own formulas. A copy of its
    // own, named as cargo names it (its snapshots are not the first copy's).
    let fresh = copy_fixture("vec-model");
    let here = ("CARGO_MANIFEST_DIR", fresh.to_str().unwrap());
    let r = run(&fresh, &exe, &one, &[("VRAMTEST_UPDATE", "always"), here]);
    let sweep = body(&r).sweep().cloned().unwrap();
    let mut grid = 0;
    for (b, s, l) in product3(&[1, 2], &[4, 8, 12], &[1, 2, 3]) {
        grid += peak(b, s, l);
    }
    let share = grid / 100 * 10;
    let at = |a: &vramtest_model::axial::AxialPoint| (a.at["batch"], a.at["seq"], a.at["layers"]);
    let used: u64 = sweep
        .axial
        .iter()
        .map(|a| {
            let (b, s, l) = at(a);
            peak(b, s, l)
        })
        .sum();
    assert!(used <= share, "{used} over {share}: {:?}", sweep.axial);
    // batch and seq beyond the grid, each held back toward its target; seq to a
    // multiple of the grid's step (seq = [4, 8, 12]: 4). (`layers` one step beyond
    // the grid is over its share: none.) The unit tests of `axial::choose_shared`
    // check how the share is split.
    let points: Vec<_> = sweep.axial.iter().map(at).collect();
    let [(b, 4, 1), (1, s, 1)] = points[..] else {
        panic!("{points:?}")
    };
    assert!(b > 2 && b < 8, "batch {b}");
    assert!(s > 12 && s < 512 && s % 4 == 0, "seq {s}");
    let notes = &r.report("transformer_like").notes;
    let held = format!("axial point seq={s} (the target's seq=512");
    let note = notes
        .iter()
        .find(|n| n.contains(&held))
        .unwrap_or_else(|| panic!("{notes:#?}"));
    assert!(
        note.contains("of the default axial budget (10% of the grid's measured peaks"),
        "{note}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("no axial point toward layers=32")),
        "{notes:#?}"
    );
    // Measured again, the snapshot's points are kept, and it passes.
    let r = run(&fresh, &exe, &one, &[here]);
    assert_eq!(r.status("transformer_like"), Status::Passed, "{}", r.text());

    // With `"0"`, none is measured.
    let fresh = copy_fixture("vec-model");
    let here = ("CARGO_MANIFEST_DIR", fresh.to_str().unwrap());
    let r = run(
        &fresh,
        &exe,
        &one,
        &[
            ("VRAMTEST_UPDATE", "always"),
            ("VRAMTEST_CONFIG", "{\"axial_budget\": \"0\"}"),
            here,
        ],
    );
    assert!(body(&r).sweep().unwrap().axial.is_empty(), "{}", r.text());
    // That snapshot holds none (as one recorded before axial points would): under the
    // default it keeps none, passes, and the run says what recording it anew measures.
    let r = run(&fresh, &exe, &one, &[here]);
    assert_eq!(r.status("transformer_like"), Status::Passed, "{}", r.text());
    let notes = &r.report("transformer_like").notes;
    let said = "transformer_like: the snapshot records no axial points (recorded before them, with `axial_budget = \"0\"`, or with every axis over its budget), and the default budget keeps a snapshot's points so that its verdict is judged at the same ones: record it anew (`VRAMTEST_UPDATE=always`), or set `axial_budget`, to measure the 2 this grid would (batch=";
    assert!(notes.iter().any(|n| n.starts_with(said)), "{notes:#?}");
    // Recorded anew, the default chooses them: the two the note named.
    let r = run(&fresh, &exe, &one, &[("VRAMTEST_UPDATE", "always"), here]);
    let sweep = body(&r).sweep().cloned().unwrap();
    let named: Vec<String> = (sweep.axial.iter())
        .map(|a| format!("{}={}", a.axis, a.at[&a.axis]))
        .collect();
    let note = notes.iter().find(|n| n.starts_with(said)).unwrap();
    assert!(
        note.ends_with(&format!("({})", named.join(", "))),
        "{named:?}: {note}"
    );
    assert_eq!(named.len(), 2, "{named:?}");

    // A point the model cannot take (a sequence over 12 panics) is left out and said;
    // the test passes on the grid and the batch point.
    let fresh = copy_fixture("vec-model");
    let here = ("CARGO_MANIFEST_DIR", fresh.to_str().unwrap());
    let at_most = ("VEC_MODEL_SEQ_AT_MOST", "12");
    let r = run(
        &fresh,
        &exe,
        &one,
        &[("VRAMTEST_UPDATE", "always"), here, at_most],
    );
    assert_eq!(r.status("transformer_like"), Status::New, "{}", r.text());
    let sweep = body(&r).sweep().cloned().unwrap();
    let axes: Vec<&str> = sweep.axial.iter().map(|a| a.axis.as_str()).collect();
    assert_eq!(axes, ["batch"], "{}", r.text());
    let notes = &r.report("transformer_like").notes;
    let failed = notes
        .iter()
        .find(|n| n.contains(" left out: "))
        .unwrap_or_else(|| panic!("{notes:#?}"));
    assert!(
        failed.starts_with("transformer_like: axial point seq=")
            && failed.contains("failed: panicked: sequence")
            && failed.contains("is longer than this model takes (12)"),
        "{failed}"
    );
    // The grid's fits stand: the target is predicted exactly, as without the point.
    let target = sweep.target.as_ref().unwrap();
    for (c, bytes) in expected(8, 512, 32, false) {
        assert_eq!(target.category_bytes[&c], bytes, "{c} at the target");
    }
}

/// Every `(a, b, c)` of the three lists.
fn product3(a: &[u64], b: &[u64], c: &[u64]) -> Vec<(u64, u64, u64)> {
    let mut all = Vec::new();
    for &x in a {
        for &y in b {
            for &z in c {
                all.push((x, y, z));
            }
        }
    }
    all
}

#[test]
fn an_axial_point_in_another_regime_is_said_and_flags_the_fit_it_misses() {
    let dir = copy_fixture("vec-model");
    let exe = common::build_test_target(&dir, "axes");
    let one = ["regime_beyond_the_grid", "--exact", "--include-ignored"];
    let f32s = |n: u64| n * F32;
    // The grid alone: the buffer is its 64 KiB floor at every point, and the target's
    // temporaries are predicted at the floor, unflagged: wrong by 128×.
    let r = run(
        &dir,
        &exe,
        &one,
        &[
            ("VRAMTEST_UPDATE", "always"),
            ("VRAMTEST_CONFIG", "{\"axial_budget\": \"0\"}"),
        ],
    );
    let report = r.report("regime_beyond_the_grid");
    let grid_only = report.body.as_ref().unwrap().sweep().unwrap().clone();
    let target = grid_only.target.as_ref().unwrap().at.clone();
    let e = grid_only.estimate(&target, 1).unwrap();
    assert_eq!(e.category_bytes[&Category::Temporaries], f32s(16_384));
    assert!(!e.flagged.contains(&"temporaries".to_owned()), "{e:?}");

    // With the axial points: the one at the target's seq measures the scores, the run
    // says the grid alone missed it there, and the fit that misses it is flagged.
    let fresh = copy_fixture("vec-model");
    let r = run(
        &fresh,
        &exe,
        &one,
        &[("VRAMTEST_UPDATE", "always"), ("VRAMTEST_CONFIG", AXIAL_ON)],
    );
    let report = r.report("regime_beyond_the_grid");
    let sweep = report.body.as_ref().unwrap().sweep().unwrap().clone();
    let seq = (sweep.axial.iter()).find(|a| a.axis == "seq").unwrap();
    assert_eq!(seq.category_bytes[&Category::Temporaries], f32s(512 * 512));
    let note = (report.notes.iter())
        .find(|n| n.contains("axial point batch=1, layers=1, seq=512"))
        .unwrap_or_else(|| panic!("{:#?}", report.notes));
    assert!(
        note.contains("temporaries measured 1.00 MiB, the grid alone predicted 64.00 KiB"),
        "{note}"
    );
    assert!(note.contains("seq=512 behaves unlike seq 4-12"), "{note}");
    let e = sweep.estimate(&target, 1).unwrap();
    assert!(e.flagged.contains(&"temporaries".to_owned()), "{e:?}");
}
