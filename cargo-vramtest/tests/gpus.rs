//! Multi-GPU runs, on a copy of `tests/fixtures/gpu-slots` and a fake NVIDIA driver
//! (`tests/fixtures/fake-libcuda`, built with the C compiler as `libcuda.so.1` and put
//! on `LD_LIBRARY_PATH`) that reports `FAKE_CUDA_DEVICES` devices and applies
//! `CUDA_VISIBLE_DEVICES` as the real one does. `cargo vramtest --device cuda` detects
//! them, and every test process measures through the fake on the device it was pinned
//! to; each test records its `CUDA_VISIBLE_DEVICES` and when it held the device.
//!
//! Linux only (the loader path and the library's name); without a C compiler the test
//! says what it skipped, or fails where `VRAMTEST_REQUIRE_CC` is set (as in CI).

#![cfg(target_os = "linux")]

mod common;
#[path = "../../tests/common/required.rs"]
mod required;

use common::{Fixture, assert_code};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the fake driver into `dir` as `libcuda.so.1` (and the `libcuda.so` link),
/// or `None` without a C compiler (said, or failed where one is required).
fn fake_libcuda(dir: &Path) -> Option<()> {
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-libcuda/fake_libcuda.c");
    let so = dir.join("libcuda.so.1");
    let built = match Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&source)
        .status()
    {
        Ok(status) => status,
        Err(e) => {
            required::CC.skip(
                "the multi-GPU runs with a fake driver",
                &format!("cannot run it: {e}"),
            );
            return None;
        }
    };
    assert!(built.success(), "the fake libcuda does not compile");
    std::os::unix::fs::symlink("libcuda.so.1", dir.join("libcuda.so")).unwrap();
    Some(())
}

/// One stretch of a test holding its device.
#[derive(Debug, Clone)]
struct Held {
    test: String,
    device: String,
    start: u128,
    end: u128,
}

fn held(log: &Path) -> Vec<Held> {
    let mut all: Vec<Held> = std::fs::read_dir(log)
        .unwrap()
        .flatten()
        .map(|e| {
            let line = std::fs::read_to_string(e.path()).unwrap();
            let f: Vec<&str> = line.split_whitespace().collect();
            Held {
                test: f[0].into(),
                device: f[1].into(),
                start: f[3].parse().unwrap(),
                end: f[4].parse().unwrap(),
            }
        })
        .collect();
    all.sort_by_key(|h| h.start);
    all
}

/// The most tests that held a device at one moment.
fn most_at_once(held: &[Held]) -> usize {
    held.iter()
        .map(|h| {
            held.iter()
                .filter(|o| o.start <= h.start && h.start < o.end)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Two tests that held one device at once, if any.
fn shared(held: &[Held]) -> Option<(Held, Held)> {
    for (i, a) in held.iter().enumerate() {
        for b in &held[i + 1..] {
            if a.device == b.device && a.start < b.end && b.start < a.end {
                return Some((a.clone(), b.clone()));
            }
        }
    }
    None
}

struct Machine {
    fake: PathBuf,
    _dir: tempfile::TempDir,
}

impl Machine {
    /// `cargo vramtest ARGS` on a machine with `devices` fake GPUs, the user's
    /// `CUDA_VISIBLE_DEVICES` being `visible`; returns the run and what the tests held.
    fn run(
        &self,
        f: &Fixture,
        args: &[&str],
        devices: usize,
        visible: Option<&str>,
    ) -> (common::Ran, Vec<Held>) {
        let log = tempfile::tempdir().unwrap();
        let mut paths = vec![self.fake.clone()];
        paths.extend(
            std::env::var_os("LD_LIBRARY_PATH")
                .iter()
                .flat_map(std::env::split_paths),
        );
        let mut cmd = f.command(args, &[("VRAMTEST_UPDATE", "always")]);
        cmd.env("LD_LIBRARY_PATH", std::env::join_paths(paths).unwrap())
            .env("FAKE_CUDA_DEVICES", devices.to_string())
            .env("GPU_SLOTS_LOG", log.path())
            .env_remove("CUDA_VISIBLE_DEVICES");
        if let Some(v) = visible {
            cmd.env("CUDA_VISIBLE_DEVICES", v);
        }
        let ran: common::Ran = cmd.output().expect("cargo-vramtest runs").into();
        let held = held(log.path());
        (ran, held)
    }
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn one_test_per_gpu_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    if fake_libcuda(dir.path()).is_none() {
        return;
    }
    let machine = Machine {
        fake: dir.path().to_owned(),
        _dir: dir,
    };
    let f = Fixture::copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu-slots"),
        "gpus",
    );

    // Three GPUs: up to three tests at once, each on a device of its own.
    let (ran, held) = machine.run(
        &f,
        &["--device", "cuda", "--message-format", "json"],
        3,
        None,
    );
    assert_code(&ran, 0);
    let tests: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|l: &Value| l["type"] == "test")
        .collect();
    assert_eq!(tests.len(), 6, "{}", ran.text());
    for t in &tests {
        assert!(t["status"] == "new" || t["status"] == "passed", "{t}");
    }
    let names: BTreeSet<&str> = held.iter().map(|h| h.test.as_str()).collect();
    assert_eq!(names.len(), 6, "{held:?}\n{}", ran.text());
    let devices: BTreeSet<String> = held.iter().map(|h| h.device.clone()).collect();
    assert_eq!(devices, set(&["0", "1", "2"]), "{held:?}");
    assert_eq!(shared(&held).map(|s| format!("{s:?}")), None);
    let most = most_at_once(&held);
    assert!((2..=3).contains(&most), "{most} at once: {held:?}");
    // Each test measured through the driver, on the device it was pinned to: the fake
    // names a device by its id on the machine, and the snapshot keeps the name.
    for h in &held {
        let snap = f.snapshots().join(format!("vram__{}@cuda.snap", h.test));
        let text = std::fs::read_to_string(&snap).unwrap_or_else(|e| panic!("{e}: {snap:?}"));
        let device = format!("Fake GPU {}", h.device);
        assert!(text.contains(&device), "{device} not in {snap:?}:\n{text}");
    }

    // The user's CUDA_VISIBLE_DEVICES: its entries are the slots, as written.
    let (ran, held) = machine.run(&f, &["--device", "cuda"], 8, Some("6,3"));
    assert_code(&ran, 0);
    let devices: BTreeSet<String> = held.iter().map(|h| h.device.clone()).collect();
    assert_eq!(devices, set(&["3", "6"]), "{held:?}");
    assert_eq!(shared(&held).map(|s| format!("{s:?}")), None);
    assert!(most_at_once(&held) <= 2, "{held:?}");

    // `-j 1`: one test at a time, on the first device.
    let (ran, held) = machine.run(&f, &["--device", "cuda", "-j", "1"], 3, None);
    assert_code(&ran, 0);
    let devices: BTreeSet<String> = held.iter().map(|h| h.device.clone()).collect();
    assert_eq!(devices, set(&["0"]), "{held:?}");
    assert_eq!(most_at_once(&held), 1, "{held:?}");

    // A CPU run pins nothing.
    let (ran, held) = machine.run(&f, &["--device", "cpu"], 3, None);
    assert_code(&ran, 0);
    assert!(held.iter().all(|h| h.device == "-"), "{held:?}");
}
