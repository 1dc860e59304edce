//! Call sites on copies of `fixtures/candle-mlp`: `show --sites` and a regression's
//! failure name the fixture's own bloat line as the top site of the category that grew.
//! Every expected line number is found in the fixture's source here, never written in.

mod common;

use common::{Fixture, Ran, assert_code};

/// The line of `src/lib.rs` in the copy that contains `needle` (exactly one).
fn line_of(f: &Fixture, needle: &str) -> usize {
    common::source::line_containing(&f.dir.join("src/lib.rs"), needle)
}

/// The site lines `show --sites` prints under `category`'s heading (at the peak).
fn section<'a>(ran: &'a Ran, category: &str) -> Vec<&'a str> {
    ran.stdout
        .lines()
        .skip_while(|l| !l.starts_with(&format!("{category} ")))
        .skip(1)
        .take_while(|l| l.starts_with("  ") && !l.starts_with("  its own peak"))
        .collect()
}

#[test]
#[ignore = "slow, builds candle: cargo test -p cargo-vramtest --test sites -- --ignored"]
fn show_sites_finds_the_line_that_bloats_activations() {
    let f = Fixture::candle_mlp("sites-show");
    let ran = f.run(
        &["show", "vram::mlp_adamw", "--sites"],
        &[("CANDLE_MLP_BLOAT", "activations")],
    );
    assert_code(&ran, 0);
    let text = ran.text();
    assert!(
        ran.stdout
            .starts_with("call sites of candle-mlp::vram::mlp_adamw (cpu, peak "),
        "{text}"
    );
    // The bloat: `Tensor::cat` of four copies of the hidden layer, kept in the graph.
    let bloat = line_of(&f, "Tensor::cat(&[&h, &h, &h, &h], 1)");
    let activations = section(&ran, "activations");
    let top = activations.first().unwrap_or_else(|| panic!("{text}"));
    assert!(
        top.contains(&format!("src/lib.rs:{bloat} ")),
        "the top activation site is the bloat line {bloat}: {top}\n{text}"
    );
    // Its bytes: 4 × hidden × batch f32 values.
    let wide = 4 * 512 * 64 * 4;
    assert!(
        top.trim_start()
            .starts_with(&vramtest_model::HumanBytes(wide).to_string()),
        "{top}"
    );
    // The first layer's weight matrix: 784 × 512 f32, made where `fc1` is built.
    let fc1 = line_of(&f, "let fc1 = linear(INPUT, HIDDEN");
    let parameters = section(&ran, "parameters");
    assert!(
        parameters[0]
            .trim_start()
            .starts_with(&vramtest_model::HumanBytes(784 * 512 * 4).to_string())
            && parameters[0].contains(&format!("src/lib.rs:{fc1} ")),
        "{text}"
    );
    // A look, not a run of record: nothing is written.
    assert_eq!(f.snapshot_files(), Vec::<String>::new(), "{text}");
}

#[test]
#[ignore = "slow, builds candle: cargo test -p cargo-vramtest --test sites -- --ignored"]
fn a_regression_names_the_new_site_against_the_snapshots_sites() {
    let f = Fixture::candle_mlp("sites-regression");
    // Accept a snapshot that keeps its sites.
    let ran = f.run(
        &["vram::mlp_adamw"],
        &[("VRAMTEST_UPDATE", "always"), ("VRAMTEST_SITES", "always")],
    );
    assert_code(&ran, 0);
    let snap = f.snapshots().join("vram__mlp_adamw@cpu.snap");
    let header = std::fs::read_to_string(&snap).unwrap();
    assert!(
        header.contains("  sites:\n") && header.contains("    optimizer_state:\n"),
        "{header}"
    );

    // Sites off: the failure says nothing of them, and takes no re-run.
    let off = f.run(
        &["vram::mlp_adamw"],
        &[
            ("CANDLE_MLP_BLOAT", "optimizer_state"),
            ("VRAMTEST_SITES", "0"),
            ("VRAMTEST_UPDATE", "no"),
        ],
    );
    assert_code(&off, 1);
    assert!(
        !off.stdout.contains("where optimizer_state grew"),
        "{}",
        off.text()
    );

    // The master copy of every parameter: a new site of optimizer state.
    let ran = f.run(
        &["vram::mlp_adamw"],
        &[("CANDLE_MLP_BLOAT", "optimizer_state")],
    );
    assert_code(&ran, 1);
    let text = ran.text();
    let copy = line_of(&f, ".map(|v| v.as_tensor().copy())");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| {
            l.trim()
                == "where optimizer_state grew (call sites at its peak, against the snapshot's):"
        })
        .unwrap_or_else(|| panic!("no sites of optimizer_state:\n{text}"));
    let top = lines[at + 1];
    assert!(
        top.contains(&format!("at src/lib.rs:{copy} ")) && top.contains("[new site"),
        "the top site is the copy at line {copy}, new: {top}\n{text}"
    );
    // The copy is one f32 per parameter.
    let parameters = 784 * 512 + 512 + 512 * 10 + 10;
    assert!(
        top.trim_start()
            .starts_with(&vramtest_model::HumanBytes(parameters * 4).to_string()),
        "{top}"
    );
    // The pending result keeps the new sites for the next review.
    let pending = std::fs::read_to_string(snap.with_extension("snap.new")).unwrap();
    assert!(
        pending.contains(&format!("src/lib.rs:{copy} |")),
        "{pending}"
    );
}

#[test]
#[ignore = "slow, builds candle: cargo test -p cargo-vramtest --test sites -- --ignored"]
fn show_sites_of_an_unknown_test_is_an_error_naming_it() {
    let f = Fixture::candle_mlp("sites-unknown");
    let ran = f.run(&["show", "no_such_test", "--sites"], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr.contains("no test matches `no_such_test`"),
        "{}",
        ran.text()
    );
}

/// The site lines of every category section `show --sites` prints (the gated
/// categories: CPU-only memory is in none of them).
fn every_category_site(ran: &Ran) -> Vec<&str> {
    vramtest_model::Category::ALL
        .iter()
        .flat_map(|c| section(ran, c.as_str()))
        .collect()
}

/// gemm's packing slab and buffers (and the dyn-stack buffers they are made of) are
/// CPU-only memory: if the rule that keeps them apart stopped matching them (a new
/// gemm release allocating differently), they would show up here as sites of
/// `workspace` or `temporaries`. A look at every category's sites, on candle and burn.
#[test]
#[ignore = "slow, builds candle and burn: cargo test -p cargo-vramtest --test sites -- --ignored"]
fn no_gemm_allocation_lands_in_a_gated_category() {
    let candle = Fixture::candle_mlp("sites-gemm-candle");
    let burn = Fixture::copy(
        &common::repo().join("fixtures").join("burn-mlp"),
        "sites-gemm-burn",
    );
    for (f, test) in [(&candle, "vram::mlp_adamw"), (&burn, "vram::mlp_adam")] {
        let ran = f.run(&["show", test, "--sites"], &[]);
        assert_code(&ran, 0);
        let text = ran.text();
        let sites = every_category_site(&ran);
        assert!(sites.len() >= 3, "{test}: too few sites to judge: {text}");
        let gemm: Vec<&&str> = sites
            .iter()
            .filter(|l| l.contains("gemm") || l.contains("dyn_stack"))
            .collect();
        assert!(
            gemm.is_empty(),
            "{test}: gemm allocations charged to a gated category: {gemm:?}\n{text}"
        );
    }
}
