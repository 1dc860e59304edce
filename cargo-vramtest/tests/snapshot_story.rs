//! The life of a snapshot, on a copy of `fixtures/candle-mlp`: a first run leaves
//! pending results, `accept` commits them, a bloat fails naming its category, an
//! improvement passes, and a malformed snapshot stops the run naming the file.

mod common;

use common::{Fixture, assert_code};

#[test]
#[ignore = "slow, builds candle: cargo test -p cargo-vramtest --test snapshot_story -- --ignored"]
fn pending_then_accepted_then_regressed_then_improved() {
    let f = Fixture::candle_mlp("story");

    // No snapshots yet: pending results and exit 1.
    let ran = f.run(&[], &[]);
    assert_code(&ran, 1);
    assert_eq!(
        f.snapshot_files(),
        ["vram__mlp_adamw@cpu.snap.new", "vram__mlp_sgd@cpu.snap.new"]
    );
    assert!(
        ran.stdout.contains("candle-mlp::vram::mlp_adamw"),
        "{}",
        ran.text()
    );
    assert!(ran.stdout.contains("new (pending)"), "{}", ran.text());
    assert!(ran.stdout.contains("2 tests: 2 new"), "{}", ran.text());

    // Without a terminal, review prints the diffs and exits 1 while files are pending.
    let ran = f.run(&["review"], &[]);
    assert_code(&ran, 1);
    assert!(
        ran.stdout
            .contains("Reviewing [1/2] candle-mlp::vram::mlp_adamw (cpu)"),
        "{}",
        ran.text()
    );
    assert!(ran.stdout.contains("new snapshot: peak"), "{}", ran.text());

    // `list` shows the pending state.
    let ran = f.run(&["list"], &[]);
    assert_code(&ran, 0);
    assert!(ran.stdout.contains("cpu (pending)"), "{}", ran.text());

    // Accept: .snap.new → .snap; then a clean pass.
    let ran = f.run(&["accept"], &[]);
    assert_code(&ran, 0);
    assert_eq!(
        f.snapshot_files(),
        ["vram__mlp_adamw@cpu.snap", "vram__mlp_sgd@cpu.snap"]
    );
    let ran = f.run(&[], &[]);
    assert_code(&ran, 0);
    assert!(ran.stdout.contains("2 tests: 2 passed"), "{}", ran.text());

    // `show` prints the per-category and per-phase tables in human units.
    let ran = f.run(&["show", "mlp_adamw"], &[]);
    assert_code(&ran, 0);
    for needle in [
        "optimizer_state",
        "activations",
        "PHASE",
        "optimizer_step",
        "MiB",
    ] {
        assert!(ran.stdout.contains(needle), "{needle}: {}", ran.text());
    }

    // A bloat fails, naming the category; the pending result can be rejected.
    let ran = f.run(&["mlp_adamw"], &[("CANDLE_MLP_BLOAT", "activations")]);
    assert_code(&ran, 1);
    assert!(ran.stdout.contains("regressed"), "{}", ran.text());
    assert!(ran.stdout.contains("activations:"), "{}", ran.text());
    assert!(ran.stdout.contains("1 test: 1 regressed"), "{}", ran.text());
    assert!(f.snapshots().join("vram__mlp_adamw@cpu.snap.new").exists());
    let ran = f.run(&["reject"], &[]);
    assert_code(&ran, 0);
    assert!(!f.snapshots().join("vram__mlp_adamw@cpu.snap.new").exists());

    // An improvement passes: lock in the bloated model, then run the slim one.
    // (Not a bigger batch: candle keeps more gradient bytes at batch 64 than at 128,
    // so going from 128 to 64 grows `gradients` by 10% and fails.)
    let ran = f.run(&["mlp_sgd"], &[("CANDLE_MLP_BLOAT", "activations")]);
    assert_code(&ran, 1);
    let ran = f.run(&["accept", "mlp_sgd"], &[]);
    assert_code(&ran, 0);
    let ran = f.run(&["mlp_sgd"], &[]);
    assert_code(&ran, 0);
    assert!(ran.stdout.contains("1 test: 1 improved"), "{}", ran.text());
    assert!(ran.stdout.contains("activations -"), "{}", ran.text());

    // A malformed snapshot: exit 2, naming the file and the line.
    let snap = f.snapshots().join("vram__mlp_sgd@cpu.snap");
    let text = std::fs::read_to_string(&snap).unwrap();
    std::fs::write(
        &snap,
        text.replace("\"peak_bytes\": ", "\"peak_bytes\": oops"),
    )
    .unwrap();
    let ran = f.run(&[], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stdout.contains("vram__mlp_sgd@cpu.snap:"),
        "{}",
        ran.text()
    );
    let ran = f.run(&["show", "mlp_sgd"], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr.contains("vram__mlp_sgd@cpu.snap:"),
        "{}",
        ran.text()
    );
}
