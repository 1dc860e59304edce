//! A `#[vramtest]` attribute with a bad option, compiled the way a user compiles it: the
//! option's error is the only diagnostic, with no `unused import` of `Step` beside it.

mod common;

/// A test file whose attributes are wrong in two ways: an option out of range and a
/// signature the harness cannot call.
const BAD: &str = r#"//! Bad attributes.

use vramtest::{Step, vramtest};

#[vramtest(iterations = 0)]
fn zero_iterations(t: &mut Step) -> vramtest::Result<()> {
    for _ in t.iterations() {}
    Ok(())
}

#[vramtest]
fn shared_step(t: &Step) -> vramtest::Result<()> {
    let _ = t;
    Ok(())
}

vramtest::main!();
"#;

#[test]
fn a_bad_option_is_the_only_diagnostic() {
    let copy = common::copy_fixture_as("vec-model", "macro-errors");
    std::fs::write(copy.join("tests/vram.rs"), BAD).unwrap();
    let out = common::fixture_cargo()
        .args([
            "test",
            "--no-run",
            "--test",
            "vram",
            "--message-format=short",
        ])
        .arg("--manifest-path")
        .arg(copy.join("Cargo.toml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let diagnostics: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("tests/vram.rs:"))
        .collect();
    assert!(
        diagnostics.iter().any(|l| l.contains("at least 1")),
        "{stderr}"
    );
    assert!(
        diagnostics.iter().any(|l| l.contains("one argument")),
        "{stderr}"
    );
    assert_eq!(diagnostics.len(), 2, "only the two errors:\n{stderr}");
    assert!(!stderr.contains("unused"), "{stderr}");
}
