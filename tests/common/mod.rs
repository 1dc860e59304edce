//! Building and running the fixture crates the way a user would, for the end-to-end
//! tests. Every fixture shares one target directory, so candle is compiled once.

#![allow(dead_code)]

#[path = "executable.rs"]
pub mod executable;
#[path = "fixture_build.rs"]
pub mod fixture_build;
#[path = "fixture_copy.rs"]
pub mod fixture_copy;
#[path = "nextest.rs"]
pub mod nextest;
#[path = "source.rs"]
pub mod source;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use vramtest_model::Category;
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

/// `cargo`, building into the fixtures' shared target directory with the build
/// settings every fixture build shares ([`fixture_build::settings`]).
pub fn fixture_cargo() -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.env("CARGO_TARGET_DIR", fixture_target_dir());
    fixture_build::settings(&mut cmd);
    cmd
}

/// A fresh, empty scratch directory, removed when dropped.
pub fn scratch_dir(label: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("vramtest-e2e-{label}-"))
        .tempdir()
        .unwrap()
}

/// Builds the `vram` test target of the crate at `manifest_dir` and returns the
/// executable. Builds are serialized: cargo would serialize them on its lock anyway.
pub fn build_vram_target(manifest_dir: &Path) -> PathBuf {
    build_test_target(manifest_dir, "vram")
}

/// Builds the test target `target` of the crate at `manifest_dir` and returns the
/// executable.
pub fn build_test_target(manifest_dir: &Path, target: &str) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let out = fixture_cargo()
        .args([
            "test",
            "--no-run",
            "--test",
            target,
            "--message-format=json",
        ])
        .arg("--manifest-path")
        .arg(manifest_dir.join("Cargo.toml"))
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
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == target)
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
    run_with(crate_dir, exe, args, envs, |_| {})
}

/// [`run`], with `prepare` applied to the command before it starts.
pub fn run_with(
    crate_dir: &Path,
    exe: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
    prepare: impl FnOnce(&mut Command),
) -> Run {
    let scratch = scratch_dir("reports");
    let reports_dir = scratch.path();
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .current_dir(crate_dir)
        .env("VRAMTEST_REPORT_DIR", reports_dir)
        .env("VRAMTEST_UPDATE", "no")
        .env_remove("CI")
        .env_remove("VRAMTEST_CHECK")
        .env_remove("VRAMTEST_STRICT")
        .env_remove("INSTA_UPDATE")
        .env("VRAMTEST_DEVICE", "cpu");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    prepare(&mut cmd);
    let output = cmd.output().expect("the test binary runs");
    let mut reports: Vec<TestReport> = std::fs::read_dir(reports_dir)
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
    Run { output, reports }
}

/// A copy of the manifest of the crate at `crate_dir` whose snapshot of `test` was just
/// measured on this machine by `exe`. The test binary judges the copy when
/// `CARGO_MANIFEST_DIR` names it (the package is the same): a change is then judged
/// against a baseline from the same CPU, where the committed snapshot may come from
/// another (gemm's packing buffers, in `workspace`, are sized from the CPU's caches).
pub fn baseline_here(
    crate_dir: &Path,
    exe: &Path,
    test: &str,
    envs: &[(&str, &str)],
) -> tempfile::TempDir {
    let copy = scratch_dir("baseline");
    std::fs::copy(crate_dir.join("Cargo.toml"), copy.path().join("Cargo.toml")).unwrap();
    let mut with = vec![
        ("CARGO_MANIFEST_DIR", copy.path().to_str().unwrap()),
        ("VRAMTEST_UPDATE", "always"),
    ];
    with.extend_from_slice(envs);
    let r = run(crate_dir, exe, &[test, "--exact"], &with);
    assert_eq!(r.report(test).status, Status::New, "{}", r.text());
    copy
}

/// Runs one test of a committed fixture and returns its report.
pub fn run_one(fixture: &str, test: &str, envs: &[(&str, &str)]) -> (Run, TestReport) {
    let (dir, exe) = fixture_binary(fixture);
    let run = run(&dir, &exe, &[test, "--exact"], envs);
    let report = run.report(test).clone();
    (run, report)
}

/// The host memory candle 0.11.1 allocates for one CPU tensor besides its data, on a
/// 64-bit target without candle's GPU features: the two reference-counted headers
/// `from_storage` allocates, `Arc<Tensor_>` (152 B: a view such as `transpose`
/// allocates it alone) and `Arc<RwLock<Storage>>` (56 B); the contiguous strides, a
/// `Vec<usize>` collected from a `scan` (whose size hint is 0, so the first push
/// reserves 4 elements: 32 B whatever the rank); and the shape, 8 B per dimension.
pub fn candle_tensor_header_bytes(rank: u64) -> u64 {
    152 + 56 + 4 * 8 + 8 * rank
}

/// Asserts `measured` is within `percent` of `expected`.
pub fn assert_close(what: &str, measured: u64, expected: u64, percent: f64) {
    let diff = (measured as f64 - expected as f64).abs() / expected as f64 * 100.0;
    assert!(
        diff <= percent,
        "{what}: measured {measured} B, expected {expected} B (±{percent}%), off by {diff:.2}%"
    );
}

/// A copy of a fixture crate in a scratch directory of its own, removed when dropped.
pub struct Copy {
    /// The copy's root (its `Cargo.toml` is here).
    pub dir: PathBuf,
    _scratch: tempfile::TempDir,
}

impl std::ops::Deref for Copy {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.dir
    }
}

/// Copies a fixture crate (without its target dir and snapshots) to a scratch
/// directory, pointing its `vramtest` dependency back at this repository.
pub fn copy_fixture(name: &str) -> Copy {
    copy_fixture_as(name, "root")
}

/// [`copy_fixture`] with the package version `0.1.0-e2e-<scenario>`: copies that share
/// a scenario share their test binary's name in the shared target directory.
pub fn copy_fixture_as(name: &str, scenario: &str) -> Copy {
    let scratch = scratch_dir(name);
    let dir = scratch.path().join(name);
    fixture_copy::copy_crate(
        &repo_root().join("fixtures").join(name),
        &dir,
        &format!("0.1.0-e2e-{scenario}"),
    );
    Copy {
        dir,
        _scratch: scratch,
    }
}

/// Rewrites the snapshot at `path` with its body edited by `edit` (the header as it
/// was); returns the new text.
pub fn edit_snapshot(path: &Path, edit: impl FnOnce(&mut vramtest_model::Body)) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut body = vramtest_model::snapshot::parse(&text).unwrap().body;
    edit(&mut body);
    let header_end = text.match_indices("---\n").nth(1).unwrap().0 + "---\n".len();
    let edited = format!("{}{}", &text[..header_end], body.to_text());
    std::fs::write(path, &edited).unwrap();
    edited
}

/// `category` set to `bytes` at the peak and in its own peak, the peak moved by as
/// much (no phase above it): a body a run could have written.
pub fn set_category(body: &mut vramtest_model::Body, category: Category, bytes: u64) {
    let delta = i128::from(bytes) - i128::from(body.at_peak[category]);
    let moved = |b: u64| u64::try_from(i128::from(b) + delta).unwrap();
    body.at_peak[category] = bytes;
    body.category_peaks[category] = moved(body.category_peaks[category]).max(bytes);
    body.peak_bytes = moved(body.peak_bytes);
    for phase in &mut body.phases {
        phase.peak_bytes = phase.peak_bytes.min(body.peak_bytes);
    }
}
