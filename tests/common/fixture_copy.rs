//! Copying a fixture crate for an end-to-end test, shared by the test crates of
//! `vramtest` and `cargo-vramtest` (included by both with `#[path]`): the copy leaves
//! out `target` and the committed snapshots, points its path dependencies (`vramtest`,
//! `vramtest-model`) at this repository's crates, and gives the package a version of
//! its own.
//!
//! The version matters in a shared target directory: cargo names a root package's
//! artifacts by name and version, not by path, so copies of one fixture with one
//! version overwrite each other's test binary. A fixed version per scenario keeps them
//! apart without growing the directory from run to run.

use std::path::Path;

/// Copies the crate at `src` to `dst` (created), rewritten to build from there with
/// `version`. Every file gets a fresh modification time, so cargo rebuilds the copy.
pub fn copy_crate(src: &Path, dst: &Path, version: &str) {
    copy_dir(
        src,
        dst,
        &[Path::new("target"), Path::new("tests/snapshots")],
    );
    let manifest = dst.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, rewrite_manifest(&text, src, version)).unwrap();
}

/// Points every relative `path = "…"` dependency at where it lies from `src` (so
/// `vramtest = { path = "../.." }` names this repository and `vramtest-model` its
/// crate; every other key of the dependency, its features included, stays as it is)
/// and sets the package version.
pub fn rewrite_manifest(text: &str, src: &Path, version: &str) -> String {
    let mut in_package = false;
    let mut version_done = false;
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed.starts_with('[') {
                in_package = trimmed.starts_with("[package]");
            }
            if in_package && !version_done && trimmed.starts_with("version") {
                version_done = true;
                return format!("version = \"{version}\"");
            }
            if trimmed.starts_with('#') {
                return line.to_owned();
            }
            let Some(at) = line.find("path = \"") else {
                return line.to_owned();
            };
            let start = at + "path = \"".len();
            let end = start + line[start..].find('"').expect("a quoted path");
            let path = Path::new(&line[start..end]);
            if path.is_absolute() {
                return line.to_owned();
            }
            let resolved = src
                .join(path)
                .canonicalize()
                .unwrap_or_else(|e| panic!("{}: {e}", src.join(path).display()));
            let resolved = resolved.display().to_string().replace('\\', "/");
            format!("{}{resolved}{}", &line[..start], &line[end..])
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn copy_dir(src: &Path, dst: &Path, skip: &[&Path]) {
    fn walk(root: &Path, rel: &Path, dst: &Path, skip: &[&Path]) {
        std::fs::create_dir_all(dst.join(rel)).unwrap();
        for entry in std::fs::read_dir(root.join(rel)).unwrap().flatten() {
            let rel = rel.join(entry.file_name());
            if skip.contains(&rel.as_path()) {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                walk(root, &rel, dst, skip);
            } else {
                std::fs::write(dst.join(&rel), std::fs::read(entry.path()).unwrap()).unwrap();
            }
        }
    }
    walk(src, Path::new(""), dst, skip);
}
