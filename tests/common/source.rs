//! Finding a line in a fixture's source, shared by the test crates of `vramtest` and
//! `cargo-vramtest` (included by both with `#[path]`): tests that expect a call site
//! find its line number in the source, never write it in.

use std::path::Path;

/// The 1-based number of the one line of `file` that contains `needle`.
pub fn line_containing(file: &Path, needle: &str) -> usize {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let lines: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "`{needle}` in {}: {lines:?}",
        file.display()
    );
    lines[0]
}
