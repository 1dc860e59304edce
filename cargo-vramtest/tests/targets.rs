//! Choosing packages and targets as cargo spells it (`-p`, `--workspace`, `--exclude`,
//! `--test NAME`, `--lib`), on a workspace of two small fixtures: `fixtures/vec-model`
//! at the root (three vramtest targets) and `abort-crate` as a member (one vramtest
//! target, one libtest target). What a selection lists is compared with the whole
//! list, filtered here by package and target.

mod common;

use common::{Fixture, assert_code, fixture_copy, repo};
use std::collections::BTreeSet;

/// vec-model with abort-crate as a second workspace member (`abort-crate/`).
fn two_packages(name: &str) -> Fixture {
    let f = Fixture::vec_model(name);
    let member = f.dir.join("abort-crate");
    let src = repo().join("cargo-vramtest/tests/fixtures/abort-crate");
    fixture_copy::copy_crate(&src, &member, &format!("0.1.0-e2e-{name}"));
    let manifest = member.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("\n[workspace]\n", "\n")).unwrap();
    std::fs::remove_file(member.join("Cargo.lock")).unwrap();
    let root = f.dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&root).unwrap();
    let text = text.replace(
        "\n[workspace]\n",
        "\n[workspace]\nmembers = [\"abort-crate\"]\n",
    );
    std::fs::write(&root, text).unwrap();
    f
}

/// The `package::target` of every test `list` prints with `args`.
fn listed(f: &Fixture, args: &[&str]) -> BTreeSet<String> {
    let mut all = vec!["list", "--message-format", "json"];
    all.extend(args);
    let ran = f.run(&all, &[]);
    assert_code(&ran, 0);
    ran.stdout
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            v["binary_id"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn packages_and_targets_are_chosen_as_cargo_does() {
    let f = two_packages("targets");
    let everything = listed(&f, &[]);
    assert_eq!(
        everything,
        set(&[
            "abort-crate::vram",
            "vec-model::axes",
            "vec-model::cpu_only",
            "vec-model::vram",
        ]),
        "the libtest target `plain` is never listed"
    );
    let only = |keep: &dyn Fn(&str, &str) -> bool| -> BTreeSet<String> {
        everything
            .iter()
            .filter(|id| {
                let (pkg, target) = id.split_once("::").unwrap();
                keep(pkg, target)
            })
            .cloned()
            .collect()
    };

    // Several --test, in every package that has them.
    assert_eq!(
        listed(&f, &["--test", "axes", "--test", "cpu_only"]),
        only(&|_, t| t == "axes" || t == "cpu_only")
    );
    assert_eq!(listed(&f, &["--test", "vram"]), only(&|_, t| t == "vram"));
    assert_eq!(
        listed(&f, &["-p", "abort-crate", "--test", "vram"]),
        only(&|p, t| p == "abort-crate" && t == "vram")
    );
    // -p, --workspace, --exclude.
    assert_eq!(
        listed(&f, &["-p", "vec-model"]),
        only(&|p, _| p == "vec-model")
    );
    assert_eq!(listed(&f, &["--workspace"]), everything);
    assert_eq!(
        listed(&f, &["--workspace", "--exclude", "vec-model"]),
        only(&|p, _| p == "abort-crate")
    );
    // With --workspace, -p is ignored, as cargo does.
    assert_eq!(
        listed(&f, &["--workspace", "-p", "abort-crate"]),
        everything
    );

    // The run builds and runs only what was chosen.
    let ran = f.run(&["--test", "cpu_only", "-p", "vec-model"], &[]);
    let ran_ids: BTreeSet<String> = everything
        .iter()
        .filter(|id| ran.stdout.contains(&format!("{id}::")))
        .cloned()
        .collect();
    assert_eq!(ran_ids, set(&["vec-model::cpu_only"]), "{}", ran.text());
}

#[test]
fn an_unknown_target_or_a_lone_exclude_is_a_usage_error() {
    let f = two_packages("no-target");
    let ran = f.run(&["list", "--test", "vrm"], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr.contains(
            "error: --test vrm: no vramtest test target is named `vrm` (hint: the vramtest targets there are: abort-crate: --test vram; vec-model: --test axes, --test cpu_only, --test vram)"
        ),
        "{}",
        ran.text()
    );
    // A libtest target is named as one.
    let ran = f.run(&["--test", "plain"], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr.contains(
            "error: --test plain: `plain` in abort-crate uses libtest's harness, which cargo vramtest never runs"
        ),
        "{}",
        ran.text()
    );
    // A target of a package left out is not there.
    let ran = f.run(&["list", "-p", "abort-crate", "--test", "axes"], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr
            .contains("the vramtest targets there are: abort-crate: --test vram)"),
        "{}",
        ran.text()
    );
    // No library here is a vramtest target.
    let ran = f.run(&["list", "--lib"], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr
            .contains("error: --lib: no selected library is a vramtest target"),
        "{}",
        ran.text()
    );
    // --exclude needs --workspace, as in cargo; an unknown package is named.
    let ran = f.run(&["list", "--exclude", "abort-crate"], &[]);
    assert_code(&ran, 2);
    assert!(ran.stderr.contains("--workspace"), "{}", ran.text());
    let ran = f.run(&["list", "--workspace", "--exclude", "abort"], &[]);
    assert_code(&ran, 2);
    assert!(
        ran.stderr
            .contains("package `abort` is not a member of the workspace"),
        "{}",
        ran.text()
    );
}

#[test]
fn a_library_with_its_own_harness_is_chosen_with_lib() {
    let f = Fixture::vec_model("lib-target");
    let manifest = f.dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}\n[lib]\nharness = false\n")).unwrap();
    let lib = f.dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    let unit = r#"
#[cfg(test)]
#[vramtest::vramtest]
fn unit_step(t: &mut vramtest::Step) -> vramtest::Result<()> {
    let _model = t.params(Linear::new);
    for _ in t.iterations() {
        let _acts = t.forward(|| vec![0f32; 1024]);
    }
    Ok(())
}

#[cfg(test)]
vramtest::main!();
"#;
    std::fs::write(&lib, format!("{text}{unit}")).unwrap();

    let everything = listed(&f, &[]);
    assert!(
        everything.contains("vec-model::vec_model"),
        "{everything:?}"
    );
    assert_eq!(listed(&f, &["--lib"]), set(&["vec-model::vec_model"]));
    assert_eq!(
        listed(&f, &["--lib", "--test", "axes"]),
        set(&["vec-model::axes", "vec-model::vec_model"])
    );
    // Run: the library's test is measured and its snapshot is named by the crate.
    let ran = f.run(&["--lib"], &[]);
    assert_code(&ran, 1);
    assert!(
        ran.stdout.contains("vec-model::vec_model::unit_step"),
        "{}",
        ran.text()
    );
    assert_eq!(f.snapshot_files(), ["vec_model__unit_step@cpu.snap.new"]);
}
