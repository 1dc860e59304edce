//! The harness on a dependency-free fixture whose every byte is known: exact figures,
//! crash isolation, leaks, tags, listing for nextest, and the snapshot update modes.

mod common;

use common::{copy_fixture, fixture_binary, run, run_one};
use std::process::Command;
use vramtest_model::Category;
use vramtest_model::report::Status;

// fixtures/vec-model: PARAMS f32 weights, a batch of BATCH rows of PARAMS f32.
const PARAMS: u64 = 4096;
const BATCH: u64 = 16;
const F32: u64 = 4;
const VEC_HEADER: u64 = 24; // a Vec<f32> inside the outer Vec<Vec<f32>>

fn batch_bytes() -> u64 {
    BATCH * PARAMS * F32 + BATCH * VEC_HEADER
}

#[test]
fn an_exact_model_is_measured_to_the_byte() {
    let (_, r) = run_one("vec-model", "linear_adam", &[]);
    let b = r.body.expect("measured");
    let weights = PARAMS * F32;
    assert_eq!(b.category_peaks[Category::Parameters], weights);
    assert_eq!(b.category_peaks[Category::Gradients], weights);
    assert_eq!(b.category_peaks[Category::OptimizerState], 2 * weights);
    assert_eq!(b.category_peaks[Category::Inputs], batch_bytes());
    // One product row per example, the same shape as the batch.
    assert_eq!(b.category_peaks[Category::Activations], batch_bytes());
    // backward's per-example scratch row, freed inside the phase.
    assert_eq!(b.category_peaks[Category::Temporaries], weights);
    assert_eq!(b.at_peak.total(), b.peak_bytes);
    // The peak: backward's last scratch row, with the weights, both moments, the batch,
    // the activations and the gradient alive; first reached in iteration 0.
    assert_eq!(b.peak_bytes, 5 * weights + 2 * batch_bytes());
    assert_eq!(b.peak_phase, Some(vramtest_model::Phase::Backward));
    assert_eq!(b.peak_iteration, Some(0));
    assert_eq!(b.at_peak, b.category_peaks);
    assert_eq!(b.leak_bytes_per_iteration, 0);
    // Counted apart from the snapshot: weights 1, moments 2, and per iteration a batch,
    // the activations and the gradient with its scratch rows (1 + BATCH each).
    let details = r.details.expect("measured");
    assert_eq!(details.allocations, 1 + 2 + 3 * 3 * (1 + BATCH));
    assert!(
        details.baseline_bytes > 0,
        "the harness's own heap is the baseline"
    );
}

#[test]
fn a_growing_history_is_reported_as_a_leak_with_its_site() {
    let (run, r) = run_one("vec-model", "leaky_history", &[]);
    let b = r.body.as_ref().expect("measured");
    // Each iteration keeps its activations: one batch-shaped Vec<Vec<f32>>.
    assert_eq!(b.leak_bytes_per_iteration, batch_bytes());
    // Forward survivors that outlive their iteration are workspace, by the rule.
    assert!(b.category_peaks[Category::Workspace] >= 3 * batch_bytes());
    let details = r.details.as_ref().expect("measured");
    assert_eq!(
        details.leak_sites,
        vec![vramtest_model::LeakSite {
            category: Category::Workspace,
            phase: Some(vramtest_model::Phase::Forward),
            bytes_per_iteration: batch_bytes(),
        }]
    );
    // `leak = "allow"` on the test: reported, not failed.
    assert_eq!(r.status, Status::Passed, "{}", run.text());
}

#[test]
fn a_leak_fails_by_default_whatever_the_snapshot_holds() {
    // The same test without its `leak = "allow"`, in a copy of the fixture (a version of
    // its own, so its binary does not replace another copy's).
    let dir = copy_fixture("vec-model");
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("0.1.0-e2e-root", "0.1.0-e2e-leak")).unwrap();
    let source = dir.join("tests").join("vram.rs");
    let text = std::fs::read_to_string(&source).unwrap();
    assert!(text.contains(", leak = \"allow\""));
    std::fs::write(&source, text.replace(", leak = \"allow\"", "")).unwrap();
    let exe = common::build_vram_target(&dir);
    let one = ["leaky_history", "--exact"];
    let site =
        "leak: 256.38 KiB per iteration kept alive in workspace (allocated in phase forward)";

    // No snapshot: fails (a regression, not a missing snapshot).
    let r = run(&dir, &exe, &one, &[]);
    let report = r.report("leaky_history");
    assert_eq!(report.status, Status::Regressed, "{}", r.text());
    assert!(
        report
            .message
            .contains("leak per iteration: 256.38 KiB is over the ceiling of 64.00 KiB")
            && report.message.contains(site),
        "{}",
        report.message
    );
    // Accepting it writes the snapshot, says it holds a leak, and still fails.
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    let report = r.report("leaky_history");
    assert_eq!(report.status, Status::Regressed, "{}", r.text());
    assert!(
        report
            .message
            .contains("note: it records a leak of 256.38 KiB per iteration"),
        "{}",
        report.message
    );
    assert!(
        dir.join("tests/snapshots/vram__leaky_history@cpu.snap")
            .is_file()
    );
    // With the leaky snapshot committed: the same leak still fails.
    let r = run(&dir, &exe, &one, &[]);
    let report = r.report("leaky_history");
    assert_eq!(report.status, Status::Regressed, "{}", r.text());
    assert!(
        report
            .message
            .contains("(snapshot: 256.38 KiB) is over the ceiling"),
        "{}",
        report.message
    );
    // An explicit limit opts out.
    let config = r#"{"limits": {"leak": "1MiB"}}"#;
    let r = run(&dir, &exe, &one, &[("VRAMTEST_CONFIG", config)]);
    assert_eq!(r.status("leaky_history"), Status::Passed, "{}", r.text());
}

#[test]
fn an_explicit_tag_overrides_the_phase() {
    let (_, r) = run_one("vec-model", "tagged::explicit_tag", &[]);
    let b = r.body.expect("measured");
    assert_eq!(b.category_peaks[Category::Workspace], 1024 * F32);
}

#[test]
fn a_panicking_step_fails_with_its_message_and_the_others_still_pass() {
    for (mode, expected) in [
        ("panic", "panicked: the loss went NaN at step 3"),
        ("error", "returned an error: the data loader ran dry"),
        ("abort", "crashed before reporting a result"),
    ] {
        let (dir, exe) = fixture_binary("vec-model");
        let run = run(&dir, &exe, &[], &[("VEC_MODEL_FAIL", mode), ("CI", "true")]);
        let failed = run.report("fails_on_demand");
        assert_eq!(failed.status, Status::Failed, "{mode}");
        assert!(
            failed.message.contains(expected),
            "{mode}: {}",
            failed.message
        );
        assert!(run.text().contains(expected), "{}", run.text());
        for other in ["linear_adam", "leaky_history", "tagged::explicit_tag"] {
            assert_eq!(run.status(other), Status::Passed, "{mode}: {other}");
        }
        assert!(!run.output.status.success());
    }
}

/// Under GitHub Actions, the harness echoes a failing test's output with workflow
/// commands stopped: the runner obeys no `::error` or `::add-mask::` the test printed.
#[test]
fn a_tests_workflow_commands_are_echoed_inert_under_github_actions() {
    let (dir, exe) = fixture_binary("vec-model");
    let run = run(
        &dir,
        &exe,
        &["fails_on_demand", "--exact"],
        &[("VEC_MODEL_FAIL", "workflow"), ("GITHUB_ACTIONS", "true")],
    );
    assert_eq!(run.status("fails_on_demand"), Status::Failed);
    let stdout = String::from_utf8_lossy(&run.output.stdout);
    assert!(stdout.contains("::error::injected by the test"), "{stdout}");
    let mut stopped: Option<String> = None;
    for line in stdout.lines() {
        match &stopped {
            Some(token) if line == format!("::{token}::") => stopped = None,
            Some(_) => {}
            None => match line.strip_prefix("::stop-commands::") {
                Some(token) => stopped = Some(token.to_owned()),
                None => assert!(!line.starts_with("::"), "obeyed: {line}\n{stdout}"),
            },
        }
    }
    assert_eq!(stopped, None, "commands stay stopped:\n{stdout}");
}

#[test]
fn a_hanging_step_is_killed_after_the_timeout_and_the_others_still_pass() {
    let (dir, exe) = fixture_binary("vec-model");
    let started = std::time::Instant::now();
    let run = run(
        &dir,
        &exe,
        &[],
        &[
            ("VEC_MODEL_FAIL", "hang"),
            ("VRAMTEST_TIMEOUT", "2"),
            ("CI", "true"),
        ],
    );
    let hung = run.report("fails_on_demand");
    assert_eq!(hung.status, Status::Failed);
    assert!(
        hung.message
            .contains("timed out after 2s (VRAMTEST_TIMEOUT) and was killed"),
        "{}",
        hung.message
    );
    assert_eq!(run.status("linear_adam"), Status::Passed);
    assert!(!run.output.status.success());
    assert!(
        started.elapsed().as_secs() < 60,
        "the hang was not cut short"
    );
}

fn list(args: &[&str]) -> String {
    let (dir, exe) = fixture_binary("vec-model");
    let out = Command::new(exe)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn listing_follows_the_custom_harness_rules_of_nextest() {
    let all = list(&["--list", "--format", "terse"]);
    let mut lines: Vec<&str> = all.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "fails_on_demand: test",
            "ignored_step: test",
            "leaky_history: test",
            "linear_adam: test",
            "tagged::explicit_tag: test",
        ]
    );
    let ignored = list(&["--list", "--format", "terse", "--ignored"]);
    assert_eq!(ignored.trim(), "ignored_step: test");
}

#[test]
fn filters_exact_and_ignored_select_tests() {
    let (dir, exe) = fixture_binary("vec-model");
    let r = run(&dir, &exe, &["linear", "--exact"], &[]);
    assert!(r.reports.is_empty(), "`--exact linear` matches nothing");
    let r = run(&dir, &exe, &["linear"], &[]);
    assert_eq!(r.reports.len(), 1);
    let r = run(&dir, &exe, &["--ignored"], &[]);
    assert_eq!(r.reports.len(), 1);
    assert_eq!(r.reports[0].test, "ignored_step");
    let r = run(&dir, &exe, &["--include-ignored"], &[]);
    assert_eq!(r.reports.len(), 5);
}

#[test]
fn cargo_nextest_lists_and_runs_each_test() {
    if !common::nextest::has_nextest() {
        return;
    }
    let (dir, _) = fixture_binary("vec-model");
    let out = common::fixture_cargo()
        .args(["nextest", "run", "--test", "vram", "--no-fail-fast"])
        .current_dir(&dir)
        .env("CI", "true")
        .env("VRAMTEST_DEVICE", "cpu")
        .env_remove("VRAMTEST_UPDATE")
        .output()
        .expect("cargo runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    for test in [
        "linear_adam",
        "leaky_history",
        "tagged::explicit_tag",
        "fails_on_demand",
    ] {
        assert!(
            text.lines().any(|l| l.contains("PASS") && l.contains(test)),
            "{test} not run by nextest:\n{text}"
        );
    }
    assert!(text.contains("1 skipped"), "{text}");
}

/// On a machine without cargo-nextest (the README's test command on a fresh
/// checkout), the nextest test is skipped with its reason, not failed.
#[test]
fn without_nextest_the_nextest_test_is_skipped_with_a_reason() {
    let scratch = common::scratch_dir("no-nextest");
    // Neither CARGO_HOME's bin nor any PATH entry holds cargo-nextest.
    let path: Vec<_> = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .filter(|dir| !dir.join("cargo-nextest").exists())
        .collect();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "cargo_nextest_lists_and_runs_each_test",
            "--exact",
            "--nocapture",
        ])
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("CARGO_HOME", scratch.path())
        .env_remove("VRAMTEST_REQUIRE_NEXTEST")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("skipped: cargo-nextest is not installed") && text.contains("1 passed"),
        "{text}"
    );
}

/// The update modes, on a copy of the fixture with no snapshots.
#[test]
fn snapshots_are_created_reviewed_and_checked() {
    let dir = copy_fixture("vec-model");
    let exe = common::build_vram_target(&dir);
    let snaps = dir.join("tests").join("snapshots");
    let snap = snaps.join("vram__linear_adam@cpu.snap");
    let pending = snaps.join("vram__linear_adam@cpu.snap.new");
    let one = ["linear_adam", "--exact"];

    // CI: nothing is written and a missing snapshot fails.
    let r = run(&dir, &exe, &one, &[("CI", "true"), ("VRAMTEST_UPDATE", "")]);
    assert_eq!(r.status("linear_adam"), Status::Missing);
    assert!(!r.output.status.success());
    assert!(!snaps.exists(), "check mode wrote files");

    // A pending file that cannot be written fails the test, naming it.
    std::fs::create_dir_all(&pending).unwrap(); // a directory where the file goes
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "auto")]);
    let report = r.report("linear_adam");
    assert_eq!(report.status, Status::Failed, "{}", r.text());
    assert!(
        report.message.contains("cannot write the snapshot")
            && report.message.contains("vram__linear_adam@cpu.snap.new"),
        "{}",
        report.message
    );
    assert!(!r.output.status.success());
    std::fs::remove_dir_all(&snaps).unwrap();

    // Locally (auto): a pending file and a failure, like insta.
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "auto")]);
    assert_eq!(r.status("linear_adam"), Status::New);
    assert!(!r.output.status.success());
    assert!(pending.exists() && !snap.exists());
    let text = std::fs::read_to_string(&pending).unwrap();
    assert!(text.starts_with("---\nsource: tests/vram.rs\n"), "{text}");
    // The first result keeps its call sites, for its first regression to be read
    // against: the activations are made in the fixture's own `forward`.
    let parsed = vramtest_model::snapshot::parse(&text).unwrap();
    let sites = parsed.sites();
    let activations = sites
        .iter()
        .find(|(c, _)| *c == Category::Activations)
        .unwrap_or_else(|| panic!("no activation sites:\n{text}"));
    assert!(
        activations.1[0]
            .key
            .location
            .as_deref()
            .is_some_and(|l| l.starts_with("src/lib.rs:")),
        "{text}"
    );
    // Named with the user's functions up to the step.
    assert_eq!(
        activations.1[0].key.callers.as_deref(),
        Some("forward() ← linear_adam"),
        "{text}"
    );

    // `always` writes the snapshot and clears the pending file.
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(r.status("linear_adam"), Status::New);
    assert!(r.output.status.success(), "{}", r.text());
    assert!(snap.exists() && !pending.exists());

    // Now CI passes.
    let r = run(&dir, &exe, &one, &[("CI", "true"), ("VRAMTEST_UPDATE", "")]);
    assert_eq!(r.status("linear_adam"), Status::Passed, "{}", r.text());
    assert!(r.output.status.success());

    // No temporary files are left behind by the atomic writes.
    let leftovers: Vec<_> = std::fs::read_dir(&snaps)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A malformed snapshot fails with the file and the line.
    let good = std::fs::read_to_string(&snap).unwrap();
    std::fs::write(&snap, good.replace("\"schema\": 1", "\"schema\": \"one\"")).unwrap();
    let r = run(&dir, &exe, &one, &[]);
    let report = r.report("linear_adam");
    assert_eq!(report.status, Status::SnapshotError);
    assert!(
        report.message.contains("vram__linear_adam@cpu.snap:"),
        "{}",
        report.message
    );
    assert!(!r.output.status.success());
    // The malformed file is left as it was: nothing is lost.
    assert!(std::fs::read_to_string(&snap).unwrap().contains("\"one\""));
    std::fs::write(&snap, good).unwrap();

    // Under plain `cargo test` the harness reads [package.metadata.vramtest] itself.
    let manifest = dir.join("Cargo.toml");
    let original = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        format!("{original}\n[package.metadata.vramtest]\nbudget = \"1KiB\"\n"),
    )
    .unwrap();
    let r = run(&dir, &exe, &one, &[]);
    let report = r.report("linear_adam");
    assert_eq!(report.status, Status::Regressed, "{}", r.text());
    assert!(
        report.message.contains("over the budget of 1.00 KiB"),
        "{}",
        report.message
    );
    // A misspelt key is an error that names the manifest and the line.
    std::fs::write(
        &manifest,
        format!("{original}\n[package.metadata.vramtest]\nbudgt = \"1KiB\"\n"),
    )
    .unwrap();
    let r = run(&dir, &exe, &one, &[]);
    assert_eq!(r.output.status.code(), Some(2), "{}", r.text());
    assert!(
        r.text().contains("Cargo.toml:")
            && r.text()
                .contains("`budgt`: unknown field `budgt`, expected one of `iterations`"),
        "{}",
        r.text()
    );
}

#[test]
fn strict_mode_and_budgets_fail_on_their_own_terms() {
    // The committed snapshot of linear_adam matches exactly; a different batch does not.
    let (dir, exe) = fixture_binary("vec-model");
    let r = run(
        &dir,
        &exe,
        &["linear_adam", "--exact"],
        &[("VRAMTEST_STRICT", "1")],
    );
    assert_eq!(r.status("linear_adam"), Status::Passed, "{}", r.text());
    let config = r#"{"budget": 1024}"#;
    let r = run(
        &dir,
        &exe,
        &["linear_adam", "--exact"],
        &[("VRAMTEST_CONFIG", config)],
    );
    let report = r.report("linear_adam");
    assert_eq!(report.status, Status::Regressed);
    assert!(
        report.message.contains("over the budget of 1.00 KiB"),
        "{}",
        report.message
    );
}

/// A pending result this run makes stale is kept unless it holds exactly this run's
/// result: it may be one under review (downloaded from a CI artifact).
#[test]
fn a_stale_pending_result_is_kept_and_named_unless_identical() {
    let dir = common::copy_fixture_as("vec-model", "pending");
    let exe = common::build_vram_target(&dir);
    let snaps = dir.join("tests").join("snapshots");
    let snap = snaps.join("vram__linear_adam@cpu.snap");
    let pending = snaps.join("vram__linear_adam@cpu.snap.new");
    let one = ["linear_adam", "--exact"];
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    assert!(r.output.status.success(), "{}", r.text());
    let committed = std::fs::read_to_string(&snap).unwrap();

    // A pending result that differs (CI measured a regression): a passing local run
    // keeps it and says so, in every mode that may write.
    let params = r.report("linear_adam").body.as_ref().unwrap().at_peak[Category::Parameters];
    let different = common::edit_snapshot(&snap, |b| {
        common::set_category(b, Category::Parameters, 2 * params);
    });
    std::fs::write(&snap, &committed).unwrap();
    assert_ne!(different, committed);
    for update in ["auto", "always"] {
        std::fs::write(&pending, &different).unwrap();
        let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", update)]);
        assert_eq!(r.status("linear_adam"), Status::Passed, "{}", r.text());
        assert_eq!(
            std::fs::read_to_string(&pending).ok().as_deref(),
            Some(different.as_str()),
            "{update}: the pending result was not kept:\n{}",
            r.text()
        );
        assert!(
            r.text().contains("stale pending result kept")
                && r.text().contains("vram__linear_adam@cpu.snap.new"),
            "{update}: {}",
            r.text()
        );
    }

    // One that holds exactly this run's result goes: nothing is lost.
    std::fs::write(&pending, &committed).unwrap();
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "auto")]);
    assert_eq!(r.status("linear_adam"), Status::Passed, "{}", r.text());
    assert!(!pending.exists(), "{}", r.text());
}

/// The README's merge rule, end to end: a workspace that lets activations grow 400%
/// and a package with a tight `tolerance`. Activations that grew 200% pass, under
/// plain `cargo test` (the harness reads the manifest) and with the settings
/// `cargo vramtest` hands over; without the workspace's line they fail.
#[test]
fn settings_merge_key_by_key_under_cargo_test_and_cargo_vramtest() {
    use vramtest_model::settings::Settings;
    let dir = common::copy_fixture_as("vec-model", "settings");
    let exe = common::build_vram_target(&dir);
    let one = ["linear_adam", "--exact"];
    let r = run(&dir, &exe, &one, &[("VRAMTEST_UPDATE", "always")]);
    assert!(r.output.status.success(), "{}", r.text());
    let activations = r
        .report("linear_adam")
        .body
        .as_ref()
        .unwrap()
        .category_peaks[Category::Activations];

    // The committed snapshot says a third of that: activations grew by 200%.
    let snap = dir.join("tests/snapshots/vram__linear_adam@cpu.snap");
    common::edit_snapshot(&snap, |b| {
        common::set_category(b, Category::Activations, activations / 3);
    });

    let manifest = dir.join("Cargo.toml");
    let original = std::fs::read_to_string(&manifest).unwrap();
    let workspace = r#"limits = { activations = "+400%", peak = "+400%" }"#;
    let package = r#"tolerance = "+1% | 1KiB""#;
    for (with_workspace, expected) in [(true, Status::Passed), (false, Status::Regressed)] {
        let ws_table = if with_workspace { workspace } else { "" };
        std::fs::write(
            &manifest,
            format!(
                "{original}\n[workspace.metadata.vramtest]\n{ws_table}\n\n[package.metadata.vramtest]\n{package}\n"
            ),
        )
        .unwrap();
        // Plain `cargo test`: the harness reads the manifest.
        let r = run(&dir, &exe, &one, &[]);
        assert_eq!(r.status("linear_adam"), expected, "{}", r.text());
        // `cargo vramtest`: its reading of the same tables, handed over.
        let parse = |table: &str| {
            let value: toml::Value = toml::from_str(table).unwrap();
            Settings::parse(&serde_json::to_value(value).unwrap()).unwrap()
        };
        let config = parse(ws_table).overridden_by(&parse(package)).to_json();
        let config = config.to_string();
        let r = run(&dir, &exe, &one, &[("VRAMTEST_CONFIG", &config)]);
        assert_eq!(r.status("linear_adam"), expected, "{config}\n{}", r.text());
    }
}

/// `file:line` of the line of `fixtures/vec-model/<file>` that contains `needle`.
fn vec_model_line(file: &str, needle: &str) -> String {
    let path = common::repo_root().join("fixtures/vec-model").join(file);
    format!("{file}:{}", common::source::line_containing(&path, needle))
}

#[test]
fn call_sites_of_an_exact_model_are_its_own_lines_with_its_own_bytes() {
    use vramtest_model::sites::Capture;
    let (run, r) = run_one("vec-model", "linear_adam", &[("VRAMTEST_SITES", "always")]);
    let sites = r
        .sites
        .unwrap_or_else(|| panic!("no call sites:\n{}", run.text()));
    // The step repeats itself: traces of the blocks at the peaks only.
    assert_eq!(sites.capture, Capture::Planned, "{:?}", sites.notes);
    assert!(sites.notes.is_empty(), "{:?}", sites.notes);
    let allocations = r.details.expect("measured").allocations;
    assert!(
        sites.traces < allocations,
        "{} traces for {allocations} allocations",
        sites.traces
    );
    let weights = PARAMS * F32;
    let at = |c: Category| -> Vec<(String, u64, u64)> {
        sites
            .at_own_peak(c)
            .iter()
            .map(|s| (s.key.location.clone().unwrap_or_default(), s.bytes, s.count))
            .collect()
    };
    assert_eq!(
        at(Category::Parameters),
        [(
            vec_model_line("src/lib.rs", "w: vec![0.5; PARAMS]"),
            weights,
            1
        )]
    );
    let mut moments = at(Category::OptimizerState);
    moments.sort();
    assert_eq!(
        moments,
        [
            (
                vec_model_line("src/lib.rs", "m: vec![0.0; PARAMS]"),
                weights,
                1
            ),
            (
                vec_model_line("src/lib.rs", "v: vec![0.0; PARAMS]"),
                weights,
                1
            ),
        ]
    );
    assert_eq!(
        at(Category::Gradients),
        [(
            vec_model_line("src/lib.rs", "let mut g = vec![0f32; PARAMS];"),
            weights,
            1
        )]
    );
    // backward's scratch row, at temporaries' own peak: one row of PARAMS f32.
    assert_eq!(
        at(Category::Temporaries),
        [(
            vec_model_line("src/lib.rs", "let scratch: Vec<f32>"),
            weights,
            1
        )]
    );
}

#[test]
fn a_step_that_does_not_repeat_itself_is_traced_whole_and_says_so() {
    use vramtest_model::sites::Capture;
    let scratch = common::scratch_dir("unsteady");
    let counter = scratch.path().join("runs");
    let (run, r) = run_one(
        "vec-model",
        "fails_on_demand",
        &[
            ("VEC_MODEL_FAIL", "unsteady"),
            ("VEC_MODEL_RUNS", counter.to_str().unwrap()),
            ("VRAMTEST_SITES", "always"),
        ],
    );
    let sites = r
        .sites
        .unwrap_or_else(|| panic!("no call sites:\n{}", run.text()));
    assert_eq!(sites.capture, Capture::Everything);
    assert!(
        sites
            .notes
            .iter()
            .any(|n| n.contains("did not repeat its allocations")),
        "{:?}",
        sites.notes
    );
    // Four processes counted: the measurement, the plan, the capture that did not
    // match, and the run traced whole, whose own rows are the ones reported.
    let runs: u64 = std::fs::read_to_string(&counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(runs, 4);
    let row = 1024 * F32 + VEC_HEADER;
    let rows = sites
        .at_own_peak(Category::Activations)
        .iter()
        .find(|s| {
            s.key.location.as_deref()
                == Some(vec_model_line("tests/vram.rs", "vec![vec![0f32; 1024]; runs]").as_str())
        })
        .unwrap_or_else(|| panic!("{sites:?}"))
        .clone();
    assert_eq!((rows.bytes, rows.count), (runs * row, runs + 1));
}

#[test]
fn call_sites_that_take_too_long_are_cut_short_and_say_so() {
    let (run, r) = run_one(
        "vec-model",
        "linear_adam",
        &[
            ("VRAMTEST_SITES", "always"),
            ("VRAMTEST_SITES_TIMEOUT", "0.001"),
        ],
    );
    assert_eq!(r.status, Status::Passed, "{}", run.text());
    assert!(r.sites.is_none());
    assert!(
        r.message
            .contains("call sites: cut short after 1ms (VRAMTEST_SITES_TIMEOUT)"),
        "{}",
        r.message
    );
}

/// A tensor of exactly the size of gemm's L2 slab stays a parameter; the slab itself
/// (aligned to 128 B, kept for the process's life) is CPU-only memory: in no category
/// and not in the peak.
#[test]
fn a_slab_sized_parameter_stays_a_parameter_and_the_slab_is_kept_apart() {
    const SLAB: u64 = 1 << 20;
    let dir = common::repo_root().join("fixtures").join("vec-model");
    let exe = common::build_test_target(&dir, "cpu_only");
    let r = run(&dir, &exe, &["slab_sized_parameter", "--exact"], &[]);
    let b = r
        .report("slab_sized_parameter")
        .body
        .clone()
        .expect("measured");
    assert_eq!(b.category_peaks[Category::Parameters], SLAB);
    assert_eq!(b.category_peaks[Category::Workspace], 0);
    assert_eq!(b.cpu_only, Some(SLAB));
    // Weights and the activations made from them: the slab is not in the peak.
    assert_eq!(b.peak_bytes, 2 * SLAB);
}

/// The heap alive before the step (the baseline) is the harness's own and the test's:
/// nothing in it may depend on how the parent happened to hand down the result pipe.
/// Started with descriptors 3 to 199 already open, the parent's pipe gets a
/// three-digit descriptor, and the child's command line says so (`fd:2NN`, not
/// `fd:N`); a run in a batch or a shard gets another number again.
#[cfg(unix)]
#[test]
fn the_baseline_does_not_depend_on_the_result_descriptor() {
    use std::os::unix::process::CommandExt;
    let (dir, exe) = fixture_binary("vec-model");
    let test = "leaky_history";
    let plain = run(&dir, &exe, &[test, "--exact"], &[]);
    let crowded = common::run_with(&dir, &exe, &[test, "--exact"], &[], |cmd| {
        // SAFETY: dup2 is async-signal-safe; it runs in the forked child before exec.
        unsafe {
            cmd.pre_exec(|| {
                for fd in 3..200 {
                    if libc::dup2(2, fd) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    });
    let baseline = |r: &common::Run| {
        r.report(test)
            .details
            .as_ref()
            .unwrap_or_else(|| panic!("measured: {}", r.text()))
            .baseline_bytes
    };
    assert_eq!(baseline(&crowded), baseline(&plain));
}
