//! Copying a fixture crate for an end-to-end test, shared by the test crates of
//! `vramtest` and `cargo-vramtest` (included by both with `#[path]`): the copy leaves
//! out `target` and the committed snapshots, points the `vramtest` dependency at this
//! repository (with the features the original asks for), and gives the package a
//! version of its own.
//!
//! The version matters in a shared target directory: cargo names a root package's
//! artifacts by name and version, not by path, so copies of one fixture with one
//! version overwrite each other's test binary. A fixed version per scenario keeps them
//! apart without growing the directory from run to run.

use std::path::Path;

/// Copies the crate at `src` to `dst` (created), rewritten for `repo` and `version`.
/// Every file gets a fresh modification time, so cargo rebuilds the copy.
pub fn copy_crate(src: &Path, dst: &Path, repo: &Path, version: &str) {
    copy_dir(
        src,
        dst,
        &[Path::new("target"), Path::new("tests/snapshots")],
    );
    let manifest = dst.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, rewrite_manifest(&text, repo, version)).unwrap();
}

/// Points `vramtest = { path = … }` at `repo` (its other keys as they are) and sets the
/// package version.
pub fn rewrite_manifest(text: &str, repo: &Path, version: &str) -> String {
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
            // Only the path changes: the dependency keeps its features, so a copy builds
            // the very `vramtest` its original does and shares it in the target directory.
            if trimmed.starts_with("vramtest")
                && let Some(at) = line.find("path = \"")
            {
                let start = at + "path = \"".len();
                let end = start + line[start..].find('"').expect("a quoted path");
                let repo = repo.display().to_string().replace('\\', "/");
                return format!("{}{repo}{}", &line[..start], &line[end..]);
            }
            line.to_owned()
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
