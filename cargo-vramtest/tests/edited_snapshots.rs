//! The snapshot is the truth, even edited by hand or mangled by a merge: what it says
//! is checked when it is read, a lever it no longer describes cannot slip past the
//! gate, and CPU-only memory is compared on the machine it was recorded on. On copies
//! of fixtures/vec-model (a model of plain `Vec`s) with a snapshot recorded, edited,
//! then run or shown.

mod common;

use common::vec_model::recorded_test;
use common::{Fixture, Ran, assert_code};
use serde_json::Value;
use std::path::Path;

/// The snapshot `checkpointing_levels` records in a copy.
const CHECKPOINTING: &str = "axes__checkpointing_levels@cpu.snap";

/// Rewrites the JSON body of the snapshot at `path` with `edit`, its header kept.
fn edit_body(path: &Path, edit: impl FnOnce(&mut Value)) {
    let text = std::fs::read_to_string(path).unwrap();
    // The header closes at the second `---` line.
    let close = text[4..].find("\n---\n").expect("a closed header") + 4 + 5;
    let (header, body) = text.split_at(close);
    let mut value: Value = serde_json::from_str(body).unwrap();
    edit(&mut value);
    let body = serde_json::to_string_pretty(&value).unwrap();
    std::fs::write(path, format!("{header}{body}\n")).unwrap();
}

/// `cargo vramtest axes::checkpointing_levels` (an ignored sweep) with `envs`.
fn run_levels(f: &Fixture, envs: &[(&str, &str)]) -> Ran {
    f.run(
        &["axes::checkpointing_levels", "--run-ignored", "only"],
        envs,
    )
}

/// A snapshot whose `levels` list `checkpointing = ["off", "blocks"]` but whose
/// `variants` lack `checkpointing=blocks`, or hold it under a level it does not list:
/// the lever would go unjudged, so the sweep has changed. It fails in CI (exit 1,
/// naming the combination, nothing written), even when the level's saving collapsed,
/// and asks to be accepted locally; accepted, the snapshot is whole again.
#[test]
fn variants_that_do_not_cover_the_levels_are_a_changed_sweep() {
    let f = recorded_test("uncovered", "checkpointing_levels");
    let snap = f.snapshots().join(CHECKPOINTING);
    let whole = std::fs::read_to_string(&snap).unwrap();
    let variants = |v: &Value| v["scaling"]["variants"].as_array().map_or(0, Vec::len);

    // The variant deleted: the level keeps every activation (its saving collapses).
    edit_body(&snap, |v| {
        assert_eq!(variants(v), 1, "{v}");
        v["scaling"].as_object_mut().unwrap().remove("variants");
    });
    let edited = std::fs::read_to_string(&snap).unwrap();
    let collapsed = [("CI", "true"), ("VEC_MODEL_NO_CHECKPOINTING", "1")];
    let ran = run_levels(&f, &collapsed);
    assert_code(&ran, 1);
    let said = "the snapshot's variants do not cover its levels (checkpointing [\"off\", \"blocks\"]): no fit for `checkpointing=blocks`";
    assert!(ran.text().contains(said), "{}", ran.text());
    assert_eq!(std::fs::read_to_string(&snap).unwrap(), edited);
    assert_eq!(f.snapshot_files(), [CHECKPOINTING], "nothing written in CI");

    // Renamed to a level the snapshot does not list: both are named.
    std::fs::write(&snap, &whole).unwrap();
    edit_body(&snap, |v| {
        v["scaling"]["variants"][0]["variant"]["checkpointing"] = "block".into();
    });
    let ran = run_levels(&f, &[("CI", "true")]);
    assert_code(&ran, 1);
    for needle in [
        "no fit for `checkpointing=blocks`",
        "a fit for `checkpointing=block`, no combination of its levels",
    ] {
        assert!(ran.text().contains(needle), "{needle}: {}", ran.text());
    }

    // Locally the same run fails and leaves the result to accept.
    let ran = run_levels(&f, &[]);
    assert_code(&ran, 1);
    assert!(
        ran.text().contains("accept the snapshot again"),
        "{}",
        ran.text()
    );
    let pending = format!("{CHECKPOINTING}.new");
    assert_eq!(f.snapshot_files(), [CHECKPOINTING, &pending]);
    // Accepted, the snapshot covers its levels again and the same code passes.
    let ran = run_levels(&f, &[("VRAMTEST_UPDATE", "always")]);
    assert_code(&ran, 0);
    let parsed = vramtest_model::snapshot::read(&snap).unwrap().unwrap();
    let sweep = parsed.body.sweep().unwrap();
    assert!(sweep.coverage().is_exact(), "{:?}", sweep.coverage());
    assert_eq!(sweep.variants[0].variant["checkpointing"], "blocks");
    let ran = run_levels(&f, &[("CI", "true")]);
    assert_code(&ran, 0);
}

/// A lever's recorded `saving` zeroed by hand (which would turn its gate off), or a
/// `cpu_time_ratio` no run records (`1e308` printed 309 digits, `0` ranked first):
/// the snapshot contradicts itself, an error naming the file and the field (exit 2),
/// for a run in CI and for `show`; nothing is written.
#[test]
fn a_saving_or_a_time_ratio_edited_by_hand_is_an_error_naming_the_field() {
    let f = recorded_test("edited-saving", "checkpointing_levels");
    let snap = f.snapshots().join(CHECKPOINTING);
    let whole = std::fs::read_to_string(&snap).unwrap();
    let levers = [
        "show",
        "checkpointing_levels",
        "--at",
        "batch=8,layers=32,seq=512",
        "--levers",
    ];
    assert_code(&f.run(&levers, &[]), 0);

    // The saving zeroed: the level's fits still save activations.
    edit_body(&snap, |v| {
        let saving = &mut v["scaling"]["variants"][0]["saving"];
        assert!(saving["peak_bytes"].as_i64().unwrap() > 0, "{saving}");
        saving["peak_bytes"] = 0.into();
        for (_, bytes) in saving["category_bytes"].as_object_mut().unwrap() {
            *bytes = 0.into();
        }
    });
    let edited = std::fs::read_to_string(&snap).unwrap();
    let collapsed = [("CI", "true"), ("VEC_MODEL_NO_CHECKPOINTING", "1")];
    for ran in [run_levels(&f, &collapsed), f.run(&levers, &[])] {
        assert_code(&ran, 2);
        for needle in [
            CHECKPOINTING,
            "`scaling.variants[0].saving.peak_bytes`",
            "0 B, but the snapshot's own fits give",
            "for `checkpointing=blocks` against the baseline",
        ] {
            assert!(ran.text().contains(needle), "{needle}: {}", ran.text());
        }
    }
    assert_eq!(std::fs::read_to_string(&snap).unwrap(), edited);
    assert_eq!(f.snapshot_files(), [CHECKPOINTING], "nothing written");

    for (ratio, shown) in [(Value::from(1e308), "1e308"), (Value::from(0), "0")] {
        std::fs::write(&snap, &whole).unwrap();
        edit_body(&snap, |v| {
            v["scaling"]["variants"][0]["cpu_time_ratio"] = ratio
        });
        let ran = f.run(&levers, &[]);
        assert_code(&ran, 2);
        for needle in [
            "`scaling.variants[0].cpu_time_ratio`",
            &format!("{shown} is no CPU time ratio"),
        ] {
            assert!(ran.stderr.contains(needle), "{needle}: {}", ran.text());
        }
        assert!(ran.stdout.is_empty(), "{}", ran.text());
    }
}

/// CPU-only memory can hide tensors (faer and aligned-vec align theirs to 128 B, as gemm
/// aligns its packing slabs): on the machine its snapshot was recorded on, it is
/// compared under a limit of its own, so 64 MiB of activations kept in such blocks
/// fail; on another machine, a note says it is not compared. Either way a warning says
/// CPU-only memory is larger than the tensor categories.
#[test]
fn cpu_only_memory_is_compared_on_the_snapshots_machine() {
    let f = Fixture::vec_model("cpu-only-machine");
    // The fixture reads N and keeps its N block addresses: a few bytes of the step's own
    // that grow with N (a String, a Vec of pointers), which the default `+1%` would
    // judge too. They are not what this test is about: the tensor categories get a
    // floor of 1 KiB here, the CPU-only limit stays the default.
    let manifest = f.dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = text.replacen(
        "[workspace]",
        "[package.metadata.vramtest]\ntolerance = \"+1% | 1KiB\"\n\n[workspace]",
        1,
    );
    std::fs::write(&manifest, text).unwrap();
    let test = ["cpu_only::slab_sized_parameter"];
    let ran = f.run(&test, &[("VRAMTEST_UPDATE", "always")]);
    assert_code(&ran, 0);
    let snap = f
        .snapshots()
        .join("cpu_only__slab_sized_parameter@cpu.snap");
    let recorded = std::fs::read_to_string(&snap).unwrap();
    let parsed = vramtest_model::snapshot::read(&snap).unwrap().unwrap();
    // The slab alone, 1 MiB: under the tensors (the weights and their activations).
    assert_eq!(parsed.body.cpu_only, Some(1 << 20));
    assert_eq!(parsed.body.cpu_only_over_tensors(), None);

    // 64 blocks of 1 MiB more, on the same machine: fails in CI, naming it.
    let hidden = [("CI", "true"), ("VEC_MODEL_ALIGNED_ACTIVATIONS", "64")];
    let ran = f.run(&test, &hidden);
    assert_code(&ran, 1);
    for needle in [
        "cpu_only",
        "1.00 MiB → 65.00 MiB",
        "+50% | 4.00 MiB",
        "CPU-only memory (65.00 MiB) is larger than the tensor categories together (2.00 MiB)",
    ] {
        assert!(ran.text().contains(needle), "{needle}: {}", ran.text());
    }
    // One block more is within the limit (1 → 2 MiB, under its 4 MiB floor).
    let ran = f.run(
        &test,
        &[("CI", "true"), ("VEC_MODEL_ALIGNED_ACTIVATIONS", "1")],
    );
    assert_code(&ran, 0);

    // The snapshot recorded on another CPU: not compared, and said.
    let other = recorded
        .lines()
        .map(|l| match l.starts_with("  cpu: ") {
            true => "  cpu: Another CPU",
            false => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&snap, other + "\n").unwrap();
    let ran = f.run(&test, &hidden);
    assert_code(&ran, 0);
    for needle in [
        "snapshots recorded on Another CPU",
        "compared only on the snapshot's own",
        "is larger than the tensor categories together",
    ] {
        assert!(ran.text().contains(needle), "{needle}: {}", ran.text());
    }
}
