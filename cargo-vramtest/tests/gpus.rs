//! Multi-GPU runs, on a copy of `tests/fixtures/gpu-slots` and a fake NVIDIA driver
//! (`tests/fixtures/fake-libcuda`, built with the C compiler as `libcuda.so.1`, the one
//! name the driver installs, and put on `LD_LIBRARY_PATH`) that reports
//! `FAKE_CUDA_DEVICES` devices and applies `CUDA_VISIBLE_DEVICES` as the real one does
//! (indices, GPU UUIDs, MIG instances). `cargo vramtest --device cuda` detects them,
//! and every test process measures through the fake on the device it was pinned to;
//! each test records its `CUDA_VISIBLE_DEVICES` and when it held the device. The same
//! source built as the toolkit's stub (`libcuda.so`, first on the path) must be named
//! as such.
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

/// Builds the fake driver into `dir` as `name` (`libcuda.so.1`; with `stub`, the
/// toolkit's stub, usually `libcuda.so`), or `None` without a C compiler.
fn fake_libcuda(dir: &Path, name: &str, stub: bool) -> Option<()> {
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-libcuda/fake_libcuda.c");
    std::fs::create_dir_all(dir).unwrap();
    let mut cc = Command::new("cc");
    if stub {
        cc.arg("-DFAKE_STUB");
    }
    let built = match cc
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join(name))
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
    Some(())
}

/// The fake's UUID of the machine's GPU `device`.
fn gpu_uuid(device: u32) -> String {
    format!("GPU-5fa4e000-0000-4000-8000-{device:012x}")
}

/// The fake's UUID of MIG instance `instance` of the machine's GPU `device`.
fn mig_uuid(device: u32, instance: u32) -> String {
    format!("MIG-7e1a{device:04x}-0000-4000-8000-{instance:012x}")
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
    /// The folders on `LD_LIBRARY_PATH`, in order.
    paths: Vec<PathBuf>,
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
        let mut paths = self.paths.clone();
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
    if fake_libcuda(dir.path(), "libcuda.so.1", false).is_none() {
        eprintln!("no C compiler (cc): the multi-GPU runs with a fake driver were not run");
        return;
    }
    let machine = Machine {
        paths: vec![dir.path().to_owned()],
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

    // GPU UUIDs and MIG instances, as `nvidia-smi -L` names them: each is a slot of its
    // own, passed on as written (the driver resolves it again in the test's process).
    let entries = [gpu_uuid(2), mig_uuid(1, 1), mig_uuid(0, 0)];
    // (A snapshot whose body did not change is not rewritten: start without them.)
    std::fs::remove_dir_all(f.snapshots()).unwrap();
    let (ran, held) = machine.run(&f, &["--device", "cuda"], 3, Some(&entries.join(",")));
    assert_code(&ran, 0);
    let devices: BTreeSet<String> = held.iter().map(|h| h.device.clone()).collect();
    assert_eq!(devices, entries.iter().cloned().collect(), "{held:?}");
    assert_eq!(shared(&held).map(|s| format!("{s:?}")), None);
    for h in &held {
        let snap = f.snapshots().join(format!("vram__{}@cuda.snap", h.test));
        let text = std::fs::read_to_string(&snap).unwrap_or_else(|e| panic!("{e}: {snap:?}"));
        let name = match h.device.as_str() {
            d if d == entries[0] => "Fake GPU 2",
            d if d == entries[1] => "Fake GPU 1 MIG 1g.10gb 1",
            _ => "Fake GPU 0 MIG 1g.10gb 0",
        };
        let line = format!("  device: {name}");
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} not in {snap:?}:\n{text}"
        );
    }

    // `-j 1`: one test at a time, on the first device.
    let (ran, held) = machine.run(&f, &["--device", "cuda", "-j", "1"], 3, None);
    assert_code(&ran, 0);
    let devices: BTreeSet<String> = held.iter().map(|h| h.device.clone()).collect();
    assert_eq!(devices, set(&["0"]), "{held:?}");
    assert_eq!(most_at_once(&held), 1, "{held:?}");

    // A CPU run pins nothing.
    let (ran, held) = machine.run(&f, &["--device", "cpu"], 3, None);
    assert_code(&ran, 0);
    // (A first result on the CPU re-runs its test for call sites: count tests, not
    // processes.)
    let tests: BTreeSet<&str> = held.iter().map(|h| h.test.as_str()).collect();
    assert_eq!(tests.len(), 6, "every test ran: {held:?}\n{}", ran.text());
    assert!(held.iter().all(|h| h.device == "-"), "{held:?}");
}

/// A CUDA container's `lib64/stubs` first on `LD_LIBRARY_PATH`: its `libcuda.so` is
/// what cudarc's loader opens (it tries that name before `libcuda.so.1`), so the run
/// must stop naming the stub and the driver behind it, not report a driver and then
/// fail every test with a made-up `CUresult`.
#[test]
fn a_toolkit_stub_before_the_driver_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (driver, stubs) = (dir.path().join("driver"), dir.path().join("stubs"));
    if fake_libcuda(&driver, "libcuda.so.1", false).is_none()
        || fake_libcuda(&stubs, "libcuda.so", true).is_none()
    {
        eprintln!("no C compiler (cc): the stub-before-driver run was not run");
        return;
    }
    let machine = Machine {
        paths: vec![stubs.clone(), driver],
        _dir: dir,
    };
    let f = Fixture::copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu-slots"),
        "gpus-stub",
    );
    let (ran, held) = machine.run(&f, &["--device", "cuda"], 2, None);
    assert_code(&ran, 2);
    assert!(held.is_empty(), "{held:?}");
    let stderr = &ran.stderr;
    let stub = stubs.join("libcuda.so");
    for needle in [
        "no CUDA driver: libcuda.so (".to_owned(),
        format!("{})", stub.display()),
        "is the CUDA toolkit's stub library, not a driver, and the loader finds it before the driver's libcuda.so.1".to_owned(),
    ] {
        assert!(stderr.contains(&needle), "{needle:?} not in:\n{}", ran.text());
    }
    assert!(!stderr.contains("CUresult"), "{}", ran.text());
}
