//! The targets of a manifest that use a harness of their own (`harness = false`), where
//! a vramtest harness can be: its `[[test]]` targets and its library (`[lib]`).

use std::collections::BTreeSet;

pub use crate::error::TestTablesError;

/// Whether the manifest's library is built with `harness = false` (`[lib]`), so that
/// its test build can hold a vramtest harness (`#[cfg(test)] vramtest::main!();`).
pub fn harness_free_lib(manifest: &str) -> Result<bool, TestTablesError> {
    let table: toml::Table = toml::from_str(manifest)?;
    Ok(table
        .get("lib")
        .and_then(|lib| lib.get("harness"))
        .and_then(|h| h.as_bool())
        == Some(false))
}

/// The names of a manifest's `[[test]]` targets declared with `harness = false`.
pub fn harness_free_tests(manifest: &str) -> Result<BTreeSet<String>, TestTablesError> {
    let table: toml::Table = toml::from_str(manifest)?;
    let Some(tests) = table.get("test") else {
        return Ok(BTreeSet::new());
    };
    let tests = tests.as_array().ok_or(TestTablesError::NotAnArray)?;
    Ok(tests
        .iter()
        .filter_map(|t| t.as_table())
        .filter(|t| t.get("harness").and_then(|h| h.as_bool()) == Some(false))
        .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_owned))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("[package]\nname = \"a\"\n", &[]; "no test targets")]
    #[test_case("[[test]]\nname = \"vram\"\nharness = false\n", &["vram"]; "one custom harness")]
    #[test_case("[[test]]\nname = \"plain\"\n", &[]; "the default harness")]
    #[test_case("[[test]]\nname = \"plain\"\nharness = true\n", &[]; "an explicit libtest harness")]
    #[test_case(
        "[[test]]\nname = \"a\"\nharness = false\n[[test]]\nname = \"b\"\n[[test]]\nname = \"c\"\nharness = false\npath = \"tests/c.rs\"\n",
        &["a", "c"]; "several"
    )]
    #[test_case("[[test]]\nharness = false\n", &[]; "a nameless target is cargo's error, not ours")]
    fn finds_custom_harness_targets(manifest: &str, expected: &[&str]) {
        let found = harness_free_tests(manifest).unwrap();
        assert_eq!(
            found.iter().map(String::as_str).collect::<Vec<_>>(),
            expected
        );
    }

    #[test_case("[package]\nname = \"a\"\n", false; "no lib table")]
    #[test_case("[lib]\npath = \"src/lib.rs\"\n", false; "the default harness")]
    #[test_case("[lib]\nharness = true\n", false; "an explicit libtest harness")]
    #[test_case("[lib]\nharness = false\n", true; "a custom harness")]
    fn finds_a_custom_harness_library(manifest: &str, expected: bool) {
        assert_eq!(harness_free_lib(manifest).unwrap(), expected);
    }

    #[test_case("[[test]\n"; "not toml")]
    #[test_case("test = \"vram\"\n"; "test is not an array")]
    fn rejects(manifest: &str) {
        assert!(harness_free_tests(manifest).is_err());
    }
}
