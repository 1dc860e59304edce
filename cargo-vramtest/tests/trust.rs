//! Trust in the verdict, on a copy of `tests/fixtures/hostile-crate`: a step that dies
//! after its result was written, returns from the step twice or ends its process
//! midway fails; a daemon one test leaves behind cannot turn another test's failure
//! into a pass; two tests cannot share a snapshot file; a result that cannot be
//! written still shows what grew; a `cargo vramtest` killed midway leaves no harness
//! behind and nothing written. Each under both `cargo test` and `cargo vramtest` where
//! both apply.

mod common;

use common::{Fixture, Ran, assert_code};
use std::path::Path;

fn hostile(name: &str) -> Fixture {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join("hostile-crate");
    Fixture::copy(&src, name)
}

/// `cargo test --test vram -- ARGS` in the copy, with `envs`.
fn cargo_test(f: &Fixture, args: &[&str], envs: &[(&str, &str)]) -> Ran {
    let mut cmd = f.cargo(&["test", "-q", "--test", "vram", "--"]);
    cmd.args(args).envs(envs.iter().copied());
    cmd.output().expect("cargo runs").into()
}

#[test]
fn a_process_that_does_not_end_cleanly_after_its_result_fails() {
    let f = hostile("unclean");
    for (test, how) in [
        ("aborts_after_its_result", "signal: 6 (SIGABRT)"),
        ("returns_twice", "signal: 6 (SIGABRT)"),
        ("exits_midway", "exit status: 0"),
    ] {
        // Writing is allowed: a false pass would record a new snapshot and exit 0.
        let envs = [("HOSTILE", test), ("VRAMTEST_UPDATE", "always")];
        let ran = cargo_test(&f, &[test, "--exact"], &envs);
        assert_ne!(
            ran.code,
            0,
            "{test} passed under cargo test:\n{}",
            ran.text()
        );
        assert!(ran.stdout.contains(how), "{test}: {how}?\n{}", ran.text());

        let ran = f.run(&[test, "--message-format", "json"], &envs);
        assert_code(&ran, 1);
        let line = ran
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == "test" && v["test"] == test)
            .unwrap_or_else(|| panic!("no line for {test}:\n{}", ran.text()));
        assert_eq!(line["status"], "failed", "{line}");
        let message = line["message"].as_str().unwrap();
        assert!(message.contains(how), "{message}");
        if test != "exits_midway" {
            // The figures it wrote are shown, though they decide nothing.
            assert!(
                message.contains("wrote its result, then its process ended with")
                    && message.contains("it had measured a peak of")
                    && message.contains("parameters 16.00 KiB"),
                "{message}"
            );
        }
        assert!(
            !f.snapshot_files().iter().any(|s| s.contains(test)),
            "{test}: a snapshot was written: {:?}",
            f.snapshot_files()
        );
    }
}

/// A step that looks for its own result channel where a careless step would (its
/// command line, its environment) finds nothing to forge its verdict with: under CI
/// with no snapshot it fails as missing, under both runners, never "ignored".
#[test]
fn a_step_does_not_find_its_result_channel_to_forge_its_verdict() {
    let f = hostile("forge");
    let envs = [("HOSTILE", "forges_its_verdict"), ("CI", "true")];
    let ran = cargo_test(&f, &["forges_its_verdict", "--exact"], &envs);
    assert_ne!(ran.code, 0, "a forged verdict passed:\n{}", ran.text());
    assert!(!ran.text().contains("spoofed"), "{}", ran.text());

    let ran = f.run(&["forges_its_verdict", "--message-format", "json"], &envs);
    assert_code(&ran, 1);
    let line = ran
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "test")
        .unwrap_or_else(|| panic!("no test line:\n{}", ran.text()));
    assert_eq!(line["status"], "missing", "{line}");
}

/// Ends the daemon `spoofs` left behind, once a run is over.
fn end_daemon(tmp: &Path) {
    if let Ok(pid) = std::fs::read_to_string(tmp.join("hostile-daemon.pid")) {
        let _ = std::process::Command::new("kill").arg(pid.trim()).status();
    }
}

#[test]
fn a_daemon_left_behind_cannot_change_a_neighbours_verdict() {
    let f = hostile("spoof");
    let tmp = tempfile::tempdir().unwrap();
    let tmp_dir = tmp.path().to_str().unwrap();
    let envs = [
        ("HOSTILE", "spoofs"),
        ("TMPDIR", tmp_dir),
        ("VRAMTEST_UPDATE", "always"),
    ];
    // Every test at once, so the daemon runs while `fails_slowly` does.
    let ran = cargo_test(&f, &["--test-threads", "5"], &envs);
    end_daemon(tmp.path());
    assert_ne!(ran.code, 0, "{}", ran.text());
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("test fails_slowly ") && l.ends_with("... FAILED")),
        "{}",
        ran.text()
    );
    assert!(!ran.stdout.contains("spoofed"), "{}", ran.text());

    let ran = f.run(&["-j", "5", "--message-format", "json"], &envs);
    end_daemon(tmp.path());
    assert_code(&ran, 1);
    let statuses: Vec<(String, String, String)> = ran
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "test")
        .map(|v| {
            (
                v["test"].as_str().unwrap().to_owned(),
                v["status"].as_str().unwrap().to_owned(),
                v["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(statuses.len(), 9, "{}", ran.text());
    // The daemon may break a neighbour's pass (its result channel then holds two
    // results, which fails it, saying so); it never turns a failure into a pass, nor
    // a test into an ignored one.
    for (test, status, message) in &statuses {
        match (test.as_str(), status.as_str()) {
            // Recorded under cargo test, or (when the daemon broke it there) now.
            ("fails_slowly", "failed") | (_, "passed" | "new") => {}
            (_, "failed") => assert!(message.contains("more than one result"), "{message}"),
            _ => panic!("{test}: {status}:\n{}", ran.text()),
        }
    }
    assert!(!ran.stdout.contains("spoofed"), "{}", ran.text());
}

#[test]
fn a_snapshot_that_cannot_be_written_still_shows_what_grew() {
    let f = hostile("unwritable");
    let ran = f.run(&["grows"], &[("VRAMTEST_UPDATE", "always")]);
    assert_code(&ran, 0);
    // A directory where the pending result goes: no write can succeed there.
    std::fs::create_dir_all(f.snapshots().join("vram__grows@cpu.snap.new")).unwrap();
    let envs = [("HOSTILE", "grows"), ("VRAMTEST_UPDATE", "auto")];
    for ran in [
        cargo_test(&f, &["grows", "--exact"], &envs),
        f.run(&["grows"], &envs),
    ] {
        assert_ne!(ran.code, 0, "{}", ran.text());
        let text = &ran.stdout;
        let grew = text
            .find("parameters: 16.00 KiB → 4.00 MiB")
            .unwrap_or_else(|| panic!("what grew is not shown:\n{}", ran.text()));
        let error = text
            .find("cannot write the snapshot")
            .unwrap_or_else(|| panic!("the write error is not shown:\n{}", ran.text()));
        assert!(grew < error, "the verdict comes first:\n{}", ran.text());
    }
}

/// Adds a test target `name` with `source` to the copy.
fn add_target(f: &Fixture, name: &str, source: &str) {
    std::fs::write(f.dir.join("tests").join(format!("{name}.rs")), source).unwrap();
    let manifest = f.dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let target = format!("\n[[test]]\nname = \"{name}\"\nharness = false\n");
    std::fs::write(&manifest, text + &target).unwrap();
}

#[test]
fn two_tests_of_one_snapshot_file_are_an_error_before_anything_runs() {
    let f = hostile("shared");
    // In one target: `x::y` and `x__y`.
    add_target(
        &f,
        "clash",
        "use vramtest::{Step, vramtest};\n\
         mod x {\n    use vramtest::{Step, vramtest};\n    \
         #[vramtest]\n    fn y(t: &mut Step) -> vramtest::Result<()> {\n        \
         t.params(|| vec![0u8; 64]);\n        Ok(())\n    }\n}\n\
         #[vramtest]\nfn x__y(t: &mut Step) -> vramtest::Result<()> {\n    \
         t.params(|| vec![0u8; 64]);\n    Ok(())\n}\n\
         vramtest::main!();\n",
    );
    let envs = [("VRAMTEST_UPDATE", "always")];
    let ran: Ran = f
        .cargo(&["test", "-q", "--test", "clash"])
        .envs(envs)
        .output()
        .unwrap()
        .into();
    assert!(
        ran.stderr.contains(
            "error: `clash::x::y` and `clash::x__y` would share the snapshot file tests/snapshots/clash__x__y@<device>.snap"
        ),
        "{}",
        ran.text()
    );
    assert_ne!(ran.code, 0, "{}", ran.text());
    let ran = f.run(&[], &envs);
    assert_code(&ran, 2);
    assert!(
        ran.stderr.contains("`clash::x::y` and `clash::x__y`"),
        "{}",
        ran.text()
    );
    assert!(f.snapshot_files().is_empty(), "{:?}", f.snapshot_files());

    // In two targets: `pair` with `x::y`, and `pair__x` with `y`.
    std::fs::remove_file(f.dir.join("tests").join("clash.rs")).unwrap();
    let manifest = f.dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = text.replace("\n[[test]]\nname = \"clash\"\nharness = false\n", "");
    std::fs::write(&manifest, text).unwrap();
    let y = "#[vramtest]\nfn y(t: &mut Step) -> vramtest::Result<()> {\n    \
             t.params(|| vec![0u8; 64]);\n    Ok(())\n}\n";
    add_target(
        &f,
        "pair",
        &format!(
            "mod x {{\n    use vramtest::{{Step, vramtest}};\n    {y}}}\nvramtest::main!();\n"
        ),
    );
    add_target(
        &f,
        "pair__x",
        &format!("use vramtest::{{Step, vramtest}};\n{y}vramtest::main!();\n"),
    );
    let ran = f.run(&[], &envs);
    assert_code(&ran, 2);
    assert!(
        ran.stderr
            .contains("`pair::x::y` and `pair__x::y` would share the snapshot file tests/snapshots/pair__x__y@<device>.snap"),
        "{}",
        ran.text()
    );
    assert!(f.snapshot_files().is_empty(), "{:?}", f.snapshot_files());
}

#[test]
fn an_axis_the_step_never_reads_fails_naming_it() {
    let f = hostile("unread");
    let envs = [("HOSTILE", "ignores_seq"), ("VRAMTEST_UPDATE", "always")];
    let needle = "no point of the sweep read the axis `seq` (t.axis(\"seq\"))";
    let ran = cargo_test(&f, &["sweeps", "--exact"], &envs);
    assert_ne!(ran.code, 0, "{}", ran.text());
    assert!(ran.stdout.contains(needle), "{}", ran.text());
    let ran = f.run(&["sweeps"], &envs);
    assert_code(&ran, 1);
    assert!(ran.stdout.contains(needle), "{}", ran.text());
    assert!(f.snapshot_files().is_empty(), "{:?}", f.snapshot_files());
    // The same sweep reading both axes passes.
    let ran = f.run(&["sweeps"], &[("VRAMTEST_UPDATE", "always")]);
    assert_code(&ran, 0);
}

/// Whether process `pid` is gone: no such process, or a zombie nobody reaped yet (it
/// runs nothing and writes nothing).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// `cargo vramtest` killed (SIGKILL, as by a CI timeout or the OOM killer, and SIGTERM)
/// while a test runs: the harness it started dies with it, and nothing is written, not
/// even with `VRAMTEST_UPDATE=always` (the step would have passed 4 s later with a first
/// result, written as the snapshot).
#[cfg(target_os = "linux")]
#[test]
fn a_killed_run_leaves_no_harness_behind_and_writes_nothing() {
    let f = hostile("killed");
    for signal in ["KILL", "TERM"] {
        let tmp = tempfile::tempdir().unwrap();
        let marker = tmp.path().join("hostile-harness.pid");
        let mut run = f
            .command(
                &["outlives_its_runner", "--device", "cpu"],
                &[
                    ("HOSTILE", "outlives_its_runner"),
                    ("TMPDIR", tmp.path().to_str().unwrap()),
                    ("VRAMTEST_UPDATE", "always"),
                    ("VRAMTEST_SITES", "0"),
                ],
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The build first, then the step starts and says which harness runs it.
        let start = std::time::Instant::now();
        let harness = loop {
            if let Ok(pid) = std::fs::read_to_string(&marker)
                && !pid.is_empty()
            {
                break pid;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(600),
                "the step never started"
            );
            assert!(
                run.try_wait().unwrap().is_none(),
                "cargo vramtest ended first"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let killed = std::process::Command::new("kill")
            .args([format!("-{signal}"), run.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        run.wait().unwrap();
        // Past the end of the step (4 s) and what the harness would do after it.
        std::thread::sleep(std::time::Duration::from_secs(7));
        assert!(
            gone(&harness),
            "SIG{signal}: the harness {harness} still runs"
        );
        assert!(
            f.snapshot_files().is_empty(),
            "SIG{signal}: written after cargo vramtest was killed: {:?}",
            f.snapshot_files()
        );
    }
}
