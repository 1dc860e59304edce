//! Building and running the fixture crates the way a user would, for the end-to-end
//! tests. Every fixture shares one target directory, so candle is compiled once.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use vramtest_model::report::{Status, TestReport};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The one target directory every fixture build shares.
pub fn fixture_target_dir() -> PathBuf {
    std::env::var_os("VRAMTEST_FIXTURE_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target").join("fixtures"))
}

/// A fresh, empty directory under the system's temporary directory.
pub fn temp_dir(label: &str) -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("vramtest-e2e-{}-{label}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds the `vram` test target of the crate at `manifest_dir` and returns the
/// executable. Builds are serialized: cargo would serialize them on its lock anyway.
pub fn build_vram_target(manifest_dir: &Path) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO"))
        .args([
            "test",
            "--no-run",
            "--test",
            "vram",
            "--message-format=json",
        ])
        .arg("--manifest-path")
        .arg(manifest_dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", fixture_target_dir())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building {} failed:\n{}",
        manifest_dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == "vram")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .expect("cargo reports the test executable")
}

/// The executable of a committed fixture, built once per test process.
pub fn fixture_binary(name: &str) -> (PathBuf, PathBuf) {
    static BUILT: OnceLock<Mutex<Vec<(String, PathBuf)>>> = OnceLock::new();
    let dir = repo_root().join("fixtures").join(name);
    let built = BUILT.get_or_init(Default::default);
    if let Some((_, exe)) = built.lock().unwrap().iter().find(|(n, _)| n == name) {
        return (dir, exe.clone());
    }
    let exe = build_vram_target(&dir);
    built.lock().unwrap().push((name.to_owned(), exe.clone()));
    (dir, exe)
}

/// The outcome of running a test binary.
pub struct Run {
    pub output: Output,
    pub reports: Vec<TestReport>,
}

impl Run {
    pub fn text(&self) -> String {
        format!(
            "{}{}",
            String::from_utf8_lossy(&self.output.stdout),
            String::from_utf8_lossy(&self.output.stderr)
        )
    }

    pub fn report(&self, test: &str) -> &TestReport {
        self.reports
            .iter()
            .find(|r| r.test == test)
            .unwrap_or_else(|| panic!("no report for {test}; output:\n{}", self.text()))
    }

    pub fn status(&self, test: &str) -> Status {
        self.report(test).status
    }
}

/// Runs a test binary like `cargo test` does (cwd = the crate), with reports collected.
/// By default nothing is written: `VRAMTEST_UPDATE=no` unless `envs` says otherwise.
pub fn run(crate_dir: &Path, exe: &Path, args: &[&str], envs: &[(&str, &str)]) -> Run {
    let reports_dir = temp_dir("reports");
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .current_dir(crate_dir)
        .env("VRAMTEST_REPORT_DIR", &reports_dir)
        .env("VRAMTEST_UPDATE", "no")
        .env_remove("CI")
        .env_remove("VRAMTEST_CHECK")
        .env_remove("VRAMTEST_STRICT")
        .env_remove("INSTA_UPDATE")
        .env("VRAMTEST_DEVICE", "cpu");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let output = cmd.output().expect("the test binary runs");
    let mut reports: Vec<TestReport> = std::fs::read_dir(&reports_dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| {
                    let text = std::fs::read_to_string(e.path()).unwrap();
                    serde_json::from_str(&text).unwrap()
                })
                .collect()
        })
        .unwrap_or_default();
    reports.sort_by(|a, b| a.test.cmp(&b.test));
    let _ = std::fs::remove_dir_all(&reports_dir);
    Run { output, reports }
}

/// Runs one test of a committed fixture and returns its report.
pub fn run_one(fixture: &str, test: &str, envs: &[(&str, &str)]) -> (Run, TestReport) {
    let (dir, exe) = fixture_binary(fixture);
    let run = run(&dir, &exe, &[test, "--exact"], envs);
    let report = run.report(test).clone();
    (run, report)
}

/// Asserts `measured` is within `percent` of `expected`.
pub fn assert_close(what: &str, measured: u64, expected: u64, percent: f64) {
    let diff = (measured as f64 - expected as f64).abs() / expected as f64 * 100.0;
    assert!(
        diff <= percent,
        "{what}: measured {measured} B, expected {expected} B (±{percent}%), off by {diff:.2}%"
    );
}

/// Copies a fixture crate (without its target dir and snapshots) to a temporary
/// directory, pointing its `vramtest` dependency back at this repository.
pub fn copy_fixture(name: &str) -> PathBuf {
    let src = repo_root().join("fixtures").join(name);
    let dst = temp_dir(name);
    copy_dir(&src, &dst);
    let _ = std::fs::remove_dir_all(dst.join("tests").join("snapshots"));
    let manifest = dst.join("Cargo.toml");
    // Cargo names a root package's artifacts by name and version, not by path: a copy
    // with the same version would overwrite the committed fixture's test binary in the
    // shared target directory. A version of its own keeps them apart (a fixed one, so
    // the target directory does not grow from run to run; one copy per fixture).
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace(
            "path = \"../..\"",
            &format!("path = {:?}", repo_root().display().to_string()),
        )
        .replacen("version = \"0.1.0\"", "version = \"0.1.0-e2e-root\"", 1);
    std::fs::write(manifest, text).unwrap();
    dst
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" {
            continue;
        }
        let to = dst.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), to).unwrap();
        }
    }
}
