//! The snapshot files under each package's `tests/snapshots`: finding them by test,
//! and accepting (`.snap.new` → `.snap`) or rejecting (deleting) pending results. No
//! build is needed: file names say which test they belong to.

use crate::discover::Workspace;
use crate::error::{Error, Result};
use crate::filter::{self, TestName};
use std::path::{Path, PathBuf};
use vramtest_model::snapshot;

/// One snapshot file: `<target>__<test>@<class>.snap`, or `.snap.new` when pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    pub path: PathBuf,
    pub package: String,
    /// The cargo target name, as the run's table prints it (the file name holds the
    /// crate name, where `-` became `_`).
    pub target: String,
    /// The test's name, `::` restored.
    pub test: String,
    /// `cpu` or `cuda`.
    pub class: String,
    pub pending: bool,
}

impl SnapshotFile {
    /// The names filters match (see [`crate::filter`]).
    pub fn test_name(&self) -> TestName<'_> {
        TestName {
            package: &self.package,
            target: &self.target,
            test: &self.test,
        }
    }

    /// `package::target::test@class`.
    pub fn label(&self) -> String {
        format!(
            "{}::{}::{} ({})",
            self.package, self.target, self.test, self.class
        )
    }

    /// The committed snapshot beside a pending file (or the file itself).
    pub fn committed(&self) -> PathBuf {
        if self.pending {
            self.path.with_extension("")
        } else {
            self.path.clone()
        }
    }
}

/// Splits a snapshot file name into target, test, class and whether it is pending.
/// Test names had `::` written as `__`; the target is what comes before the first `__`.
pub fn parse_name(name: &str) -> Option<(String, String, String, bool)> {
    let (stem, pending) = match name.strip_suffix(".snap.new") {
        Some(stem) => (stem, true),
        None => (name.strip_suffix(".snap")?, false),
    };
    let (rest, class) = stem.rsplit_once('@')?;
    let (target, test) = rest.split_once("__")?;
    if target.is_empty() || test.is_empty() || class.is_empty() {
        return None;
    }
    Some((
        target.to_owned(),
        test.replace("__", "::"),
        class.to_owned(),
        pending,
    ))
}

/// Every snapshot file of the workspace's vramtest packages, sorted by path.
pub fn scan(ws: &Workspace) -> Result<Vec<SnapshotFile>> {
    let mut files = Vec::new();
    for pkg in &ws.packages {
        let dir = pkg.snapshot_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&dir)(e)),
        };
        for entry in entries {
            let path = entry.map_err(Error::io(&dir))?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if let Some((crate_name, test, class, pending)) = parse_name(name) {
                // The cargo target whose crate name the file carries.
                let target = pkg
                    .targets
                    .iter()
                    .find(|t| t.replace('-', "_") == crate_name)
                    .cloned()
                    .unwrap_or(crate_name);
                files.push(SnapshotFile {
                    package: pkg.name.clone(),
                    target,
                    test,
                    class,
                    pending,
                    path,
                });
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Whether a file's test matches the filters (all when there is none); see
/// [`crate::filter`].
pub fn matches(file: &SnapshotFile, filters: &[String], exact: bool) -> bool {
    file.test_name().matches_any(filters, exact)
}

/// The pending files that match the filters. A filter that names no test with a
/// snapshot file (committed or pending) is an error with the closest names: a typo
/// must not pass as "nothing to do".
pub fn pending(ws: &Workspace, filters: &[String], exact: bool) -> Result<Vec<SnapshotFile>> {
    let files = scan(ws)?;
    let names: Vec<TestName<'_>> = files.iter().map(SnapshotFile::test_name).collect();
    if let Some(typo) = filter::unmatched(&names, filters, exact).first() {
        return Err(Error::NoMatch {
            filter: (*typo).to_owned(),
            among: format!("the snapshot files of {}", ws.root.display()),
            closest: filter::closest(&names, typo),
        });
    }
    Ok(files
        .into_iter()
        .filter(|f| f.pending && matches(f, filters, exact))
        .collect())
}

/// Why `show TEST` (or `measure TEST`) found no one test to show. The message says what
/// to type instead; the caller adds where it looked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TestChoiceError {
    /// No committed snapshot of the test, but a pending result.
    #[error(
        "no snapshot of a test named `{test}` (hint: only a pending result exists: `cargo vramtest show --pending {test}`)"
    )]
    OnlyPending { test: String },
    /// No pending result of the test, but a committed snapshot.
    #[error("no pending result of a test named `{test}` (hint: try `cargo vramtest show {test}`)")]
    OnlyCommitted { test: String },
    /// No file of a test by that name; `closest` are the nearest names, best first.
    #[error(
        "no {} of a test named `{test}` (hint: {}`cargo vramtest list` shows the tests and their snapshots)",
        if *.pending { "pending result" } else { "snapshot" },
        did_you_mean(.closest)
    )]
    NoSuchTest {
        test: String,
        pending: bool,
        closest: Vec<String>,
    },
    /// A part of a name that several tests share.
    #[error(
        "`{test}` matches several tests: {} (hint: give the whole name as the table prints it)",
        .tests.join(", ")
    )]
    Several { test: String, tests: Vec<String> },
}

/// `did you mean a, b? ` when there are close names.
fn did_you_mean(closest: &[String]) -> String {
    if closest.is_empty() {
        String::new()
    } else {
        format!("did you mean {}? ", closest.join(", "))
    }
}

/// `show`'s choice: the files (one per device class) of the one test named `test`,
/// committed or `pending`. A whole name (`mlp_adamw`, `vram::mlp_adamw`) wins; else a
/// part of a name that only one test has.
pub fn find<'a>(
    files: &'a [SnapshotFile],
    test: &str,
    pending: bool,
) -> Result<Vec<&'a SnapshotFile>, TestChoiceError> {
    let filter = [test.to_owned()];
    let of_kind = |exact: bool| -> Vec<&SnapshotFile> {
        files
            .iter()
            .filter(|f| f.pending == pending && matches(f, &filter, exact))
            .collect()
    };
    let exact = of_kind(true);
    let chosen = if exact.is_empty() {
        of_kind(false)
    } else {
        exact
    };
    let mut tests: Vec<String> = chosen
        .iter()
        .map(|f| format!("{}::{}::{}", f.package, f.target, f.test))
        .collect();
    tests.sort();
    tests.dedup();
    let test = test.to_owned();
    match tests.len() {
        1 => Ok(chosen),
        0 => {
            let other = files
                .iter()
                .any(|f| f.pending != pending && matches(f, &filter, false));
            Err(match (other, pending) {
                (true, false) => TestChoiceError::OnlyPending { test },
                (true, true) => TestChoiceError::OnlyCommitted { test },
                _ => {
                    let names: Vec<TestName<'_>> =
                        files.iter().map(SnapshotFile::test_name).collect();
                    let closest = filter::closest(&names, &test);
                    TestChoiceError::NoSuchTest {
                        test,
                        pending,
                        closest,
                    }
                }
            })
        }
        _ => Err(TestChoiceError::Several { test, tests }),
    }
}

/// Renames a pending file over its snapshot, after checking that it parses.
pub fn accept(file: &SnapshotFile) -> Result<PathBuf> {
    snapshot::read(&file.path)?;
    let target = file.committed();
    std::fs::rename(&file.path, &target).map_err(Error::io(&file.path))?;
    Ok(target)
}

/// Deletes a pending file.
pub fn reject(file: &SnapshotFile) -> Result<()> {
    std::fs::remove_file(&file.path).map_err(Error::io(&file.path))
}

/// `list`'s snapshot column for one test: `cpu`, `cpu (pending)`, `cuda + pending`,
/// or `missing`.
pub fn status(package_dir: &Path, target: &str, test: &str) -> String {
    let crate_name = target.replace('-', "_");
    let mut parts = Vec::new();
    for class in [
        vramtest_model::DeviceClass::Cpu,
        vramtest_model::DeviceClass::Cuda,
    ] {
        let snap = snapshot::path_for(package_dir, &crate_name, test, class);
        let pending = snapshot::pending_path(&snap).exists();
        match (snap.exists(), pending) {
            (true, true) => parts.push(format!("{class} + pending")),
            (true, false) => parts.push(class.to_string()),
            (false, true) => parts.push(format!("{class} (pending)")),
            (false, false) => {}
        }
    }
    if parts.is_empty() {
        "missing".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("vram__mlp_adamw@cpu.snap", Some(("vram", "mlp_adamw", "cpu", false)))]
    #[test_case("vram__mlp_adamw@cuda.snap.new", Some(("vram", "mlp_adamw", "cuda", true)))]
    #[test_case("vram__nested__mlp@cpu.snap", Some(("vram", "nested::mlp", "cpu", false)); "module path")]
    #[test_case("my_vram__t@cpu.snap", Some(("my_vram", "t", "cpu", false)); "underscore in target")]
    #[test_case("vram__t.snap", None; "no class")]
    #[test_case("vram@cpu.snap", None; "no test")]
    #[test_case("vram__t@cpu.json", None; "not a snapshot")]
    #[test_case(".vram__t@cpu.snap.new.tmp123", None; "a temporary file")]
    fn parses_names(name: &str, expected: Option<(&str, &str, &str, bool)>) {
        let got = parse_name(name);
        let want = expected.map(|(a, b, c, d)| (a.to_owned(), b.to_owned(), c.to_owned(), d));
        assert_eq!(got, want);
    }

    fn file(test: &str) -> SnapshotFile {
        SnapshotFile {
            path: format!("/p/tests/snapshots/vram__{test}@cpu.snap.new").into(),
            package: "p".into(),
            target: "vram".into(),
            test: test.into(),
            class: "cpu".into(),
            pending: true,
        }
    }

    #[test_case(&[], false, true)]
    #[test_case(&["adam"], false, true)]
    #[test_case(&["vram::mlp"], false, true)]
    #[test_case(&["adam"], true, false)]
    #[test_case(&["mlp_adamw"], true, true)]
    #[test_case(&["vram::mlp_adamw"], true, true)]
    #[test_case(&["sgd"], false, false)]
    #[test_case(&["p::vram::mlp_adamw"], false, true; "the name the table prints")]
    #[test_case(&["p::vram::mlp_adamw"], true, true; "the name the table prints, exact")]
    #[test_case(&["q::vram::mlp_adamw"], false, false; "another package")]
    fn filters(filters: &[&str], exact: bool, expected: bool) {
        let filters: Vec<String> = filters.iter().map(|s| s.to_string()).collect();
        assert_eq!(matches(&file("mlp_adamw"), &filters, exact), expected);
    }

    fn snap(test: &str, class: &str, pending: bool) -> SnapshotFile {
        SnapshotFile {
            path: format!("/p/tests/snapshots/vram__{test}@{class}.snap").into(),
            package: "p".into(),
            target: "vram".into(),
            test: test.into(),
            class: class.into(),
            pending,
        }
    }

    #[test_case("mlp_adamw", false, Ok(&["mlp_adamw@cpu", "mlp_adamw@cuda"]); "every class of the test")]
    #[test_case("vram::mlp_sgd", false, Ok(&["mlp_sgd@cpu"]); "target and name")]
    #[test_case("adam", false, Ok(&["mlp_adamw@cpu", "mlp_adamw@cuda"]); "a unique part")]
    #[test_case("mlp", false, Ok(&["mlp@cpu"]); "a whole name wins over parts")]
    #[test_case("p::vram::mlp_sgd", false, Ok(&["mlp_sgd@cpu"]); "the name the table prints")]
    #[test_case("mlp_adamv", false, Err("(hint: did you mean p::vram::mlp_adamw"); "closest names")]
    #[test_case("mlp_", false, Err("`mlp_` matches several tests: p::vram::mlp_adamw, p::vram::mlp_sgd"); "ambiguous part")]
    #[test_case("mlp", true, Err("no pending result of a test named `mlp` (hint: try"); "pending of another test")]
    #[test_case("conv", false, Err("no snapshot of a test named `conv` (hint: only a pending result exists: `cargo vramtest show --pending conv`)"); "only pending")]
    #[test_case("gpt", false, Err("(hint: `cargo vramtest list`"); "nothing")]
    fn finds_the_test_to_show(test: &str, pending: bool, expected: Result<&[&str], &str>) {
        let files = [
            snap("mlp_adamw", "cpu", false),
            snap("mlp_adamw", "cuda", false),
            snap("mlp_sgd", "cpu", false),
            snap("mlp", "cpu", false),
            snap("conv", "cpu", true),
        ];
        let found = find(&files, test, pending);
        match expected {
            Ok(names) => {
                let got: Vec<String> = found
                    .unwrap()
                    .iter()
                    .map(|f| format!("{}@{}", f.test, f.class))
                    .collect();
                assert_eq!(got, names);
            }
            Err(needle) => {
                let e = found.unwrap_err().to_string();
                assert!(e.contains(needle), "{e}");
            }
        }
    }

    #[test]
    fn files_carry_the_cargo_target_name_and_a_typo_is_an_error() {
        let dir = std::env::temp_dir().join(format!("cargo-vramtest-scan-{}", std::process::id()));
        let snaps = dir.join("p").join("tests").join("snapshots");
        std::fs::create_dir_all(&snaps).unwrap();
        for name in [
            "my_vram__mlp_adamw@cpu.snap.new",
            "my_vram__mlp_sgd@cpu.snap",
        ] {
            std::fs::write(snaps.join(name), "").unwrap();
        }
        let ws = Workspace {
            root: dir.clone(),
            manifest: dir.join("Cargo.toml"),
            packages: vec![crate::discover::Package {
                name: "p".into(),
                id: "p 0.1.0".into(),
                version: "0.1.0".into(),
                dir: dir.join("p"),
                targets: vec!["my-vram".into()],
                lib: None,
                settings: Default::default(),
            }],
            target_dir: dir.join("target"),
        };
        let filters = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let found = pending(&ws, &filters(&["p::my-vram::mlp_adamw"]), true).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].label(), "p::my-vram::mlp_adamw (cpu)");
        // A test with only a committed snapshot is matched, and has nothing pending.
        assert!(
            pending(&ws, &filters(&["mlp_sgd"]), false)
                .unwrap()
                .is_empty()
        );
        let e = pending(&ws, &filters(&["mlp_adamv"]), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("no test matches `mlp_adamv` in the snapshot files of"),
            "{e}"
        );
        assert!(e.contains("did you mean p::my-vram::mlp_adamw"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_pending_files_snapshot_is_beside_it() {
        let f = file("t");
        assert_eq!(
            f.committed(),
            PathBuf::from("/p/tests/snapshots/vram__t@cpu.snap")
        );
        assert_eq!(f.label(), "p::vram::t (cpu)");
    }
}
