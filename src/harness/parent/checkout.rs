//! Which package directory is tested: the checkout cargo runs the binary for, which
//! is not always the one it was compiled in.
//!
//! Two checkouts of one crate that share a target directory share its test binaries:
//! cargo may run a binary built in checkout B for a `cargo test` in checkout A. Its
//! compile-time `CARGO_MANIFEST_DIR` then names B, while cargo (and nextest, and
//! `cargo vramtest`) set the run-time `CARGO_MANIFEST_DIR` to A, whose snapshots,
//! settings and sources are the ones under test.

use std::path::{Path, PathBuf};

/// The test target this harness runs in.
#[derive(Debug, Clone)]
pub(crate) struct HarnessTarget {
    /// The package being tested: its snapshots, settings and sources.
    pub(crate) manifest_dir: PathBuf,
    /// The package directory the binary was compiled in (the same, unless cargo reused
    /// a binary built in another checkout).
    pub(crate) built_in: PathBuf,
    pub(crate) name: String,
}

/// The directory of the package under test: the run-time `CARGO_MANIFEST_DIR` when
/// it holds the same package as the compile-time `built_in`, else `built_in`.
///
/// A run-time value that names another package is not cargo's setting for this binary
/// but one inherited from a process up the chain (a test of another crate that starts
/// this binary): it is ignored.
pub(crate) fn package_dir(built_in: &Path, package: &str, runtime: Option<&Path>) -> PathBuf {
    match runtime {
        Some(dir) if dir != built_in && package_name(dir).as_deref() == Some(package) => {
            dir.to_path_buf()
        }
        _ => built_in.to_path_buf(),
    }
}

/// `package.name` of the manifest in `dir`, if it can be read.
fn package_name(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
    let table: toml::Table = toml::from_str(&text).ok()?;
    table
        .get("package")?
        .get("name")?
        .as_str()
        .map(str::to_owned)
}

/// What a run says once when the binary was built in another checkout.
pub(crate) fn reuse_note(built_in: &Path, tested: &Path) -> Option<String> {
    (built_in != tested).then(|| {
        format!(
            "test binary built in {}, testing {}",
            built_in.display(),
            tested.display()
        )
    })
}

/// `file!()` of the test, relative to its crate (`tests/vram.rs`). rustc gives paths
/// relative to the workspace root, or absolute (under the directory the binary was
/// built in); the longest suffix that exists under the crate is it.
pub(super) fn relative_source(target: &HarnessTarget, file: &str) -> String {
    let path = Path::new(file);
    for dir in [&target.manifest_dir, &target.built_in] {
        if let Ok(rel) = path.strip_prefix(dir) {
            return rel.to_string_lossy().replace('\\', "/");
        }
    }
    let parts: Vec<_> = path.components().collect();
    for start in 0..parts.len() {
        let suffix: PathBuf = parts[start..].iter().collect();
        if target.manifest_dir.join(&suffix).is_file() {
            return suffix.to_string_lossy().replace('\\', "/");
        }
    }
    file.replace('\\', "/")
}

/// A path relative to the crate, for messages.
pub(super) fn display_path(manifest_dir: &Path, p: &Path) -> String {
    p.strip_prefix(manifest_dir)
        .unwrap_or(p)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn checkout(root: &Path, name: &str, package: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            format!("[package]\nname = \"{package}\"\nversion = \"0.1.0\"\n"),
        )
        .unwrap();
        dir
    }

    #[test_case(None, "b"; "no run-time value: where it was built")]
    #[test_case(Some("a"), "a"; "another checkout of the package: that one")]
    #[test_case(Some("b"), "b"; "the same directory")]
    #[test_case(Some("other"), "b"; "another package: inherited, ignored")]
    #[test_case(Some("missing"), "b"; "no manifest there: ignored")]
    fn picks_the_package_under_test(runtime: Option<&str>, expected: &str) {
        let root = tempfile::tempdir().unwrap();
        checkout(root.path(), "a", "vec-model");
        let b = checkout(root.path(), "b", "vec-model");
        checkout(root.path(), "other", "some-crate");
        let runtime = runtime.map(|r| root.path().join(r));
        assert_eq!(
            package_dir(&b, "vec-model", runtime.as_deref()),
            root.path().join(expected)
        );
    }

    #[test]
    fn the_note_names_both_directories_only_when_they_differ() {
        assert_eq!(reuse_note(Path::new("/x/b"), Path::new("/x/b")), None);
        assert_eq!(
            reuse_note(Path::new("/x/b"), Path::new("/x/a")).unwrap(),
            "test binary built in /x/b, testing /x/a"
        );
    }
}
