//! Tiny crates written into a temporary folder, and the checks run over them.

use std::path::{Path, PathBuf};

use vramtest_archcheck::{Findings, check};

/// A crate's `src` folder with `files` (`("lib.rs", "mod a;")`, `("a/b.rs", ..)`).
pub fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
        std::fs::write(&path, text).expect("a file written");
    }
    dir
}

/// Both checks over `dir`, with the line limit at 100.
pub fn findings(dir: &Path) -> Findings {
    check(&[dir.to_path_buf()], 100).expect("the tree is readable")
}

/// The files of each cycle, relative to `dir`, as sorted `a.rs` strings.
#[allow(dead_code)] // not every test file uses it
pub fn cycles(dir: &Path) -> Vec<Vec<String>> {
    findings(dir)
        .cycles
        .iter()
        .map(|c| {
            let mut files: Vec<String> = c.files.iter().map(|f| relative(dir, f)).collect();
            files.sort();
            files
        })
        .collect()
}

/// `file` relative to `dir`, with `/` between folders.
pub fn relative(dir: &Path, file: &Path) -> String {
    let rel: PathBuf = file
        .strip_prefix(dir)
        .expect("a file under dir")
        .to_path_buf();
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}
