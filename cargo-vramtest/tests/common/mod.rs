//! The end-to-end tests' workbench: a temporary copy of a fixture crate and the real
//! `cargo-vramtest` binary run on it.
//!
//! Every copy builds into one shared target directory with the fixture's committed
//! `Cargo.lock`, so candle is compiled once for all of them: the directory the
//! repository's own end-to-end tests use (`<repo>/target/fixtures`, or
//! `$VRAMTEST_FIXTURE_TARGET_DIR`), so a run of every end-to-end test builds candle once.
//!
//! cargo names a workspace member's artifacts without its absolute path, so copies of
//! one fixture would overwrite each other's test binary there; each copy therefore
//! gets a version of its own (`0.1.0-e2e-<name>`), stable across runs so that the
//! shared directory does not grow with every run.

#![allow(dead_code)]

#[path = "../../../tests/common/executable.rs"]
pub mod executable;
pub mod far;
#[path = "../../../tests/common/fixture_build.rs"]
pub mod fixture_build;
#[path = "../../../tests/common/fixture_copy.rs"]
pub mod fixture_copy;
#[path = "../../../tests/common/nextest.rs"]
pub mod nextest;
#[path = "../../../tests/common/source.rs"]
pub mod source;
pub mod vec_model;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cargo-vramtest lives in the repository")
        .to_path_buf()
}

/// The target directory every copy shares (and the repository's own end-to-end
/// tests too).
pub fn shared_target() -> PathBuf {
    std::env::var_os("VRAMTEST_FIXTURE_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target").join("fixtures"))
}

/// A fixture crate copied into a temporary directory, removed when dropped.
pub struct Fixture {
    /// The copy's root (its `Cargo.toml` is here).
    pub dir: PathBuf,
    /// The scratch directory holding the copy (kept when a test fails, to look at).
    base: Option<tempfile::TempDir>,
}

/// What a run of `cargo vramtest` produced.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// stdout and stderr together, for messages.
    pub fn text(&self) -> String {
        format!(
            "exit code {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl From<Output> for Ran {
    fn from(out: Output) -> Ran {
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Fixture {
    /// `fixtures/candle-mlp`, copied for the scenario `name`.
    /// Only its `vram` target: the stories here are about two training steps, and the
    /// `sweep` target has end-to-end tests of its own (`tests/candle_sweep.rs`).
    pub fn candle_mlp(name: &str) -> Fixture {
        let f = Fixture::copy(&repo().join("fixtures").join("candle-mlp"), name);
        f.drop_test_target("sweep");
        f
    }

    /// Removes the `[[test]]` target `name` (its manifest entry and `tests/<name>.rs`).
    pub fn drop_test_target(&self, name: &str) {
        let manifest = self.dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        let entry = format!("[[test]]\nname = \"{name}\"\nharness = false\n");
        assert!(text.contains(&entry), "no test target {name} in {text}");
        std::fs::write(&manifest, text.replace(&entry, "")).unwrap();
        std::fs::remove_file(self.dir.join("tests").join(format!("{name}.rs"))).unwrap();
    }

    /// `cargo-vramtest/tests/fixtures/abort-crate`, copied for the scenario `name`.
    pub fn abort_crate(name: &str) -> Fixture {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join("fixtures")
            .join("abort-crate");
        Fixture::copy(&src, name)
    }

    /// `fixtures/vec-model` (no dependencies but vramtest), copied for the scenario
    /// `name`.
    pub fn vec_model(name: &str) -> Fixture {
        Fixture::copy(&repo().join("fixtures").join("vec-model"), name)
    }

    /// Copies `src` without `target` and `tests/snapshots`, points its `vramtest`
    /// dependency at this repository, and gives it the version `0.1.0-e2e-<name>`.
    pub fn copy(src: &Path, name: &str) -> Fixture {
        Fixture::copy_as(src, name, &format!("0.1.0-e2e-{name}"))
    }

    /// [`Fixture::copy`] with the package version `version`: copies that share it
    /// share their test binaries in the shared target directory, as two checkouts of
    /// one crate do.
    pub fn copy_as(src: &Path, name: &str, version: &str) -> Fixture {
        let crate_name = src.file_name().expect("a crate directory");
        // One depth for every copy: the path from a copy to the repository (part of
        // the vramtest dependency's build hash) is then the same for all of them.
        let parent = std::env::temp_dir().join("cargo-vramtest-e2e");
        std::fs::create_dir_all(&parent).unwrap();
        let base = tempfile::Builder::new()
            .prefix(&format!("{name}-"))
            .tempdir_in(parent)
            .unwrap();
        let dir = base.path().join(crate_name);
        fixture_copy::copy_crate(src, &dir, version);
        Fixture {
            dir,
            base: Some(base),
        }
    }

    /// `cargo vramtest ARGS` in the copy, with a clean environment (no CI, no GitHub,
    /// no VRAMTEST_* or INSTA_* switches, no color) plus `envs`.
    pub fn command(&self, args: &[&str], envs: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-vramtest"));
        cmd.arg("vramtest").args(args);
        self.clean(&mut cmd);
        cmd.envs(envs.iter().copied());
        cmd
    }

    /// `cargo ARGS` in the copy, with the same environment as [`Fixture::command`].
    pub fn cargo(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.args(args);
        self.clean(&mut cmd);
        cmd
    }

    fn clean(&self, cmd: &mut Command) {
        fixture_build::settings(cmd);
        cmd.current_dir(&self.dir)
            .env("CARGO_TARGET_DIR", shared_target())
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null());
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy().into_owned();
            let scrub = [
                "CI",
                "TF_BUILD",
                "CARGO_TERM_COLOR",
                "CANDLE_MLP_BLOAT",
                "CANDLE_MLP_BATCH",
            ]
            .contains(&key.as_str())
                || key.starts_with("GITHUB_")
                || (key.starts_with("VRAMTEST_") && key != "VRAMTEST_FIXTURE_TARGET_DIR")
                || key.starts_with("INSTA_");
            if scrub {
                cmd.env_remove(&key);
            }
        }
    }

    /// Runs `cargo vramtest ARGS` and returns its exit code and output.
    pub fn run(&self, args: &[&str], envs: &[(&str, &str)]) -> Ran {
        let out = self
            .command(args, envs)
            .output()
            .expect("cargo-vramtest runs");
        out.into()
    }

    /// The copy's `tests/snapshots`.
    pub fn snapshots(&self) -> PathBuf {
        self.dir.join("tests").join("snapshots")
    }

    /// Copies the snapshot `name` committed in the repository's `fixtures/FIXTURE` into
    /// the copy's `tests/snapshots` (a copy starts without snapshots).
    pub fn add_committed_snapshot(&self, fixture: &str, name: &str) {
        let committed = repo()
            .join("fixtures")
            .join(fixture)
            .join("tests/snapshots")
            .join(name);
        std::fs::create_dir_all(self.snapshots()).unwrap();
        std::fs::copy(committed, self.snapshots().join(name)).unwrap();
    }

    /// The file names under `tests/snapshots`, sorted.
    pub fn snapshot_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.snapshots())
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(base) = self.base.take()
        {
            eprintln!("kept for a look: {}", base.keep().display());
        }
    }
}

/// Asserts an exit code, showing the whole output when it differs.
#[track_caller]
pub fn assert_code(ran: &Ran, code: i32) {
    assert_eq!(ran.code, code, "unexpected exit code:\n{}", ran.text());
}
