//! Exit code 2: usage and configuration errors name what is wrong and where.

mod common;

use common::{Fixture, assert_code};
use std::path::Path;

#[test]
fn usage_errors() {
    let f = Fixture::abort_crate("usage");
    for args in [
        &["--partition", "hash:3/2"][..],
        &["--device", "tpu"],
        &["-j", "0"],
        &["--no-such-flag"],
        &["show"],
    ] {
        let ran = f.run(args, &[]);
        assert_code(&ran, 2);
    }
    let ran = f.run(&["--manifest-path", "no/such/Cargo.toml"], &[]);
    assert_code(&ran, 2);
    assert!(ran.stderr.contains("no/such/Cargo.toml"), "{}", ran.text());

    let ran = f.run(&["show", "no_such_test"], &[]);
    assert_code(&ran, 2);
    assert!(ran.stderr.contains("no_such_test"), "{}", ran.text());

    let ran = f.run(&["--help"], &[]);
    assert_code(&ran, 0);
    assert!(ran.stdout.contains("Exit codes:"), "{}", ran.text());
}

#[test]
fn a_bad_environment_switch_is_exit_code_2_before_any_build() {
    let f = Fixture::abort_crate("bad-env");
    for (var, value, what) in [
        ("VRAMTEST_UPDATE", "sometimes", "unknown mode"),
        ("INSTA_UPDATE", "sometimes", "unknown mode"),
        ("VRAMTEST_DEVICE", "tpu", "unknown device"),
        ("VRAMTEST_SITES", "sometimes", "unknown mode"),
        ("VRAMTEST_SITES_TIMEOUT", "soon", RANGE),
        ("VRAMTEST_TIMEOUT", "1e300", RANGE),
        ("VRAMTEST_SITES_TIMEOUT", "18446744073709551616", RANGE),
    ] {
        for args in [&[][..], &["list"]] {
            let ran = f.run(args, &[(var, value)]);
            assert_code(&ran, 2);
            assert!(
                ran.stderr
                    .contains(&format!("error: {var}={value}: {what} (hint: ")),
                "{}",
                ran.text()
            );
            // Nothing was built or run.
            assert!(!ran.stderr.contains("Compiling"), "{}", ran.text());
            assert!(!ran.stdout.contains("passes"), "{}", ran.text());
        }
    }
}

/// What a timeout out of range is told.
const RANGE: &str = "not a number of seconds above 0 and at most 31536000 (365 days)";

/// A timeout past any clock's reach, under `cargo test` and `cargo nextest`: the test
/// binary stops with exit code 2 naming the variable and the range, and panics nowhere.
#[test]
fn a_timeout_out_of_range_is_exit_code_2_under_cargo_test_and_nextest() {
    let f = Fixture::abort_crate("huge-timeout");
    let nextest = common::nextest::has_nextest();
    for (var, value) in [
        ("VRAMTEST_TIMEOUT", "1e300"),
        ("VRAMTEST_SITES_TIMEOUT", "18446744073709551616"),
    ] {
        let mut runners = vec![vec!["test", "--test", "vram", "--", "passes", "--exact"]];
        if nextest {
            runners.push(vec![
                "nextest",
                "run",
                "--test",
                "vram",
                "-E",
                "test(=passes)",
            ]);
        }
        for args in runners {
            let out = f.cargo(&args).env(var, value).output().unwrap();
            let ran = common::Ran::from(out);
            let text = ran.text();
            assert_ne!(ran.code, 0, "{args:?} {var}={value}: {text}");
            assert!(
                ran.stderr.contains("exit status: 2") || ran.stderr.contains("exit code 2"),
                "{args:?} {var}={value}: {text}"
            );
            assert!(
                text.contains(&format!("{var}={value}: {RANGE} (hint: ")),
                "{args:?}: {text}"
            );
            assert!(!text.contains("panicked"), "{args:?}: {text}");
        }
    }
}

#[test]
fn configuration_from_the_metadata() {
    let f = Fixture::abort_crate("config");
    let manifest = f.dir.join("Cargo.toml");
    let base = std::fs::read_to_string(&manifest).unwrap();

    // An unknown key: exit 2, naming the manifest, the line and the key.
    std::fs::write(
        &manifest,
        format!("{base}\n[package.metadata.vramtest]\niterations = 2\nlimits = {{ activation = \"+5%\" }}\n"),
    )
    .unwrap();
    let ran = f.run(&["passes"], &[]);
    assert_code(&ran, 2);
    let line = base.lines().count() + 4;
    assert!(
        ran.stderr.contains(&format!(
            "Cargo.toml:{line}: [package.metadata.vramtest] `limits.activation`: unknown limit"
        )),
        "{}",
        ran.text()
    );

    // Every bad key, in the manifest's order (not the table's alphabetical one).
    std::fs::write(
        &manifest,
        format!("{base}\n[package.metadata.vramtest]\ntolerance = \"x\"\nbudget = \"lots\"\n"),
    )
    .unwrap();
    let ran = f.run(&["passes"], &[]);
    assert_code(&ran, 2);
    let first = base.lines().count() + 3;
    let expected = format!("Cargo.toml:{first}: [package.metadata.vramtest] `tolerance`: ");
    let at = |needle: &str| {
        ran.stderr
            .find(needle)
            .unwrap_or_else(|| panic!("{needle}: {}", ran.text()))
    };
    let second = format!(
        "Cargo.toml:{}: [package.metadata.vramtest] `budget`: ",
        first + 1
    );
    assert!(at(&expected) < at(&second), "{}", ran.text());

    // A bad value in the workspace's table.
    std::fs::write(
        &manifest,
        base.replace(
            "[workspace]",
            "[workspace]\nmetadata.vramtest.budget = \"lots\"",
        ),
    )
    .unwrap();
    let ran = f.run(&["passes"], &[]);
    assert_code(&ran, 2);
    assert!(ran.stderr.contains("`budget`"), "{}", ran.text());

    // Valid settings reach the harness: iterations, and a budget that fails.
    std::fs::write(
        &manifest,
        format!("{base}\n[package.metadata.vramtest]\niterations = 2\nbudget = \"1KiB\"\n"),
    )
    .unwrap();
    let ran = f.run(
        &["passes", "--message-format", "json"],
        &[("VRAMTEST_UPDATE", "always")],
    );
    assert_code(&ran, 1);
    let first: serde_json::Value =
        serde_json::from_str(ran.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["body"]["iterations"], 2, "{first}");
    assert_eq!(first["status"], "regressed", "{first}");
    assert!(
        first["message"].as_str().unwrap().contains("budget"),
        "{first}"
    );
}

#[test]
fn runs_as_a_cargo_subcommand() {
    let f = Fixture::abort_crate("subcommand");
    // cargo runs `cargo-vramtest vramtest …` when `cargo-vramtest` is on the PATH.
    // Linked, not copied: a copy written by this process could be refused as "Text
    // file busy" while another test thread starts a process (see common::executable).
    let bin = f.dir.join("bin");
    common::executable::link_executable(
        Path::new(env!("CARGO_BIN_EXE_cargo-vramtest")),
        &bin.join("cargo-vramtest"),
    );
    let path = std::env::join_paths(
        std::iter::once(bin.clone())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let out = f
        .cargo(&["vramtest", "list", "passes"])
        .env("PATH", path)
        .output()
        .unwrap();
    let ran = common::Ran::from(out);
    assert_code(&ran, 0);
    assert!(ran.stdout.contains("passes"), "{}", ran.text());
    assert!(ran.stdout.contains("1 test"), "{}", ran.text());
}

#[test]
fn color_follows_the_flag_and_cargo_term_color() {
    let f = Fixture::abort_crate("color");
    let esc = "\u{1b}[";
    let ran = f.run(&["list"], &[]);
    assert_code(&ran, 0);
    assert!(!ran.stdout.contains(esc), "NO_COLOR: {}", ran.text());
    let ran = f.run(&["list", "--color", "always"], &[]);
    assert!(ran.stdout.contains(esc), "--color always: {}", ran.text());
    let ran = f.run(&["list"], &[("CARGO_TERM_COLOR", "always")]);
    assert!(ran.stdout.contains(esc), "CARGO_TERM_COLOR: {}", ran.text());
    let ran = f.run(
        &["list", "--color", "never"],
        &[("CARGO_TERM_COLOR", "always")],
    );
    assert!(!ran.stdout.contains(esc), "the flag wins: {}", ran.text());
}

#[test]
fn a_build_error_is_cargos_exit_code_101() {
    let f = Fixture::abort_crate("build-error");
    let test = f.dir.join("tests").join("vram.rs");
    let source = std::fs::read_to_string(&test).unwrap();
    std::fs::write(
        &test,
        source.replace(
            "vramtest::main!();",
            "vramtest::main!(); fn broken() -> u32 { \"not a number\" }",
        ),
    )
    .unwrap();
    let ran = f.run(&[], &[]);
    assert_code(&ran, 101);
    // cargo's own diagnostic, as cargo printed it.
    assert!(
        ran.stderr.contains("error[E0308]: mismatched types"),
        "{}",
        ran.text()
    );
    assert!(ran.stderr.contains("the build failed"), "{}", ran.text());
}
