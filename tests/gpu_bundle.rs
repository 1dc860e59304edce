//! The GPU bundle's scripts (`scripts/gpu-bundle/`) on a machine without a GPU or a
//! CUDA toolkit: the toolkit set-up in a brand-new virtualenv (with a fake `python3`
//! whose `pip` "installs" a fake nvcc wheel, so nothing is downloaded), and `run.sh`
//! against fake drivers built with the C compiler.
//!
//! Linux only; a test that lacks bash, python3 or cc says so and passes.

#![cfg(target_os = "linux")]

#[path = "common/executable.rs"]
mod executable;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The path of a program on `PATH`, if there is one.
fn which(program: &str) -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
}

/// Written by a child process: see `executable` on the "Text file busy" race.
fn write_exe(path: &Path, text: &str) {
    executable::write_executable(path, text);
}

/// A `python3` for `bin/` that creates fake virtualenvs: their `python -m pip install`
/// puts a fake CUDA 13.0 nvcc and the libraries' SONAME files into an `nvidia/cu13`
/// namespace package (or fails, with `FAKE_PIP=fail`); everything else runs the real
/// python3. `FAKE_VENV=fail` makes `python3 -m venv` fail.
fn fake_python(bin: &Path, real: &Path) {
    let real = real.display();
    let venv_python = format!(
        r#"#!/bin/sh
venv=$(cd "$(dirname "$0")/.." && pwd)
if [ "$1" = -m ] && [ "$2" = pip ]; then
    [ "$FAKE_PIP" = fail ] && {{ echo "ERROR: Could not find a version (no network)" >&2; exit 1; }}
    cu13="$venv/site/nvidia/cu13"
    mkdir -p "$cu13/bin" "$cu13/lib"
    printf '#!/bin/sh\necho "Cuda compilation tools, release 13.0, V13.0.88"\n' >"$cu13/bin/nvcc"
    chmod +x "$cu13/bin/nvcc"
    for so in libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13 libcudart.so.13; do
        : >"$cu13/lib/$so"
    done
    echo "$*" >>"$venv/pip.log"
    exit 0
fi
PYTHONPATH="$venv/site" exec {real} "$@"
"#
    );
    write_exe(
        &bin.join("python3"),
        &format!(
            r#"#!/bin/sh
if [ "$1" = -m ] && [ "$2" = venv ]; then
    [ "$FAKE_VENV" = fail ] && {{ echo "The virtual environment was not created (ensurepip is not available)" >&2; exit 1; }}
    mkdir -p "$3/bin" "$3/site"
    cat >"$3/bin/python" <<'PY'
{venv_python}PY
    chmod +x "$3/bin/python"
    exit 0
fi
exec {real} "$@"
"#
        ),
    );
}

/// Sources toolkit.sh as build.sh does (`set -euo pipefail`) with the fake python3
/// first on `PATH`, then prints what it exported.
fn source_toolkit(bin: &Path, venv: &Path, stubs: &Path, env: &[(&str, &str)]) -> Output {
    let script = root().join("scripts/gpu-bundle/toolkit.sh");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(
            r#"set -euo pipefail; . "$0" "$1" "$2"
echo "CUDA_HOME=$CUDA_HOME"; echo "CUDA_PATH=$CUDA_PATH"; echo "CUDARC_TOOLKIT_LIB=$CUDARC_TOOLKIT_LIB"
echo "CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP"; echo "NVCC=$(command -v nvcc)""#,
        )
        .arg(&script)
        .arg(venv)
        .arg(stubs)
        .env("PATH", path)
        .env_remove("CUDA_COMPUTE_CAP");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("bash runs")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The lines of stderr that toolkit.sh wrote itself.
fn said(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("gpu-bundle: "))
        .map(str::to_owned)
        .collect()
}

/// A brand-new virtualenv has no `nvidia` package: the toolkit installs the wheels
/// there instead of ending the build (the probe for them failing is not an error), and
/// the second time reuses them. Every failure is one line saying what is missing.
#[test]
fn the_toolkit_sets_up_a_brand_new_virtualenv_or_says_why_not() {
    let (Some(real), Some(_)) = (which("python3"), which("cc")) else {
        eprintln!("no python3 or cc: the toolkit set-up was not run");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fake_python(&bin, &real);
    let venv = dir.path().join("venv");
    let stubs = dir.path().join("stubs");

    let out = source_toolkit(&bin, &venv, &stubs, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        said(&out),
        [format!(
            "gpu-bundle: installing the CUDA 13.0 wheels into {}",
            venv.display()
        )],
        "{}",
        text(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let cu13 = venv.join("site/nvidia/cu13");
    for line in [
        format!("CUDA_HOME={}", cu13.display()),
        format!("CUDA_PATH={}", stubs.display()),
        format!("CUDARC_TOOLKIT_LIB={}", cu13.join("lib").display()),
        "CUDA_COMPUTE_CAP=90".to_owned(),
        format!("NVCC={}", cu13.join("bin/nvcc").display()),
    ] {
        assert!(stdout.lines().any(|l| l == line), "{line}\n{}", text(&out));
    }
    let pip_log = std::fs::read_to_string(venv.join("pip.log")).unwrap();
    assert!(pip_log.contains("nvidia-cuda-nvcc==13.0.88"), "{pip_log}");
    // The stub driver, with the driver's SONAME, and the linker's unversioned names.
    let stub = std::fs::read(stubs.join("lib/libcuda.so")).unwrap();
    assert!(
        stub.windows(12).any(|w| w == b"libcuda.so.1"),
        "no SONAME libcuda.so.1 in the stub"
    );
    assert!(stubs.join("lib/libcuda.so.1").exists());
    assert!(stubs.join("lib/libcublas.so").exists());

    // Again: the wheels are there, nothing is installed; a chosen compute capability stays.
    let out = source_toolkit(&bin, &venv, &stubs, &[("CUDA_COMPUTE_CAP", "80")]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(said(&out).is_empty(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(venv.join("pip.log"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("CUDA_COMPUTE_CAP=80\n"),
        "{}",
        text(&out)
    );

    // No package index: one line naming the wheels and the virtualenv.
    let venv2 = dir.path().join("venv2");
    let out = source_toolkit(&bin, &venv2, &stubs, &[("FAKE_PIP", "fail")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let lines = said(&out);
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("gpu-bundle: pip could not install nvidia-cuda-nvcc==13.0.88")
            && last.contains(&venv2.display().to_string()),
        "{}",
        text(&out)
    );

    // No venv module (Debian's python3 without python3-venv).
    let venv3 = dir.path().join("venv3");
    let out = source_toolkit(&bin, &venv3, &stubs, &[("FAKE_VENV", "fail")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        said(&out),
        [format!(
            "gpu-bundle: cannot create the virtualenv {} with 'python3 -m venv' (on Debian/Ubuntu: apt-get install python3-venv)",
            venv3.display()
        )],
        "{}",
        text(&out)
    );
}

/// Builds a fake libcuda `name` in `dir`: `cuInit` returns `init`, the driver supports
/// CUDA `version` (`cuDriverGetVersion`), one device.
fn fake_driver(dir: &Path, name: &str, init: i32, version: i32) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    let c = dir.join(format!("{name}.c"));
    std::fs::write(
        &c,
        format!(
            "int cuInit(unsigned f) {{ (void)f; return {init}; }}\n\
             int cuDriverGetVersion(int *v) {{ *v = {version}; return 0; }}\n\
             int cuDeviceGetCount(int *n) {{ *n = 1; return 0; }}\n"
        ),
    )
    .unwrap();
    Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join(name))
        .arg(&c)
        .status()
        .is_ok_and(|s| s.success())
}

/// A bundle folder with run.sh and its bundle.env, no binaries.
fn bundle(dir: &Path) -> PathBuf {
    let b = dir.join("bundle");
    std::fs::create_dir_all(&b).unwrap();
    std::fs::copy(root().join("scripts/gpu-bundle/run.sh"), b.join("run.sh")).unwrap();
    let build_root = dir.join("build-root");
    std::fs::write(
        b.join("bundle.env"),
        format!("BUILD_ROOT={}\nCUDA_NEEDED=13.0\n", build_root.display()),
    )
    .unwrap();
    b
}

fn run_sh(bundle: &Path, lib_path: &[&Path]) -> Output {
    let paths: Vec<String> = lib_path.iter().map(|p| p.display().to_string()).collect();
    Command::new("bash")
        .arg(bundle.join("run.sh"))
        .env("LD_LIBRARY_PATH", paths.join(":"))
        .env("PYTHON", "python3")
        .env("STEP_TIMEOUT", "5")
        .output()
        .expect("bash runs")
}

/// run.sh refuses up front, with one line and exit code 2, what cannot run the bundle:
/// no driver, the toolkit's stub first on the path (as the tests' loader would open
/// it), a driver older than the bundle's CUDA 13.0, missing CUDA 13 libraries; with a
/// new enough driver and the libraries it gets past its checks.
#[test]
fn run_sh_refuses_what_cannot_run_the_bundle_in_one_line() {
    if which("python3").is_none() || which("cc").is_none() {
        eprintln!("no python3 or cc: run.sh's checks were not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let b = bundle(dir.path());
    let refused = |out: &Output, line: &str| {
        assert_eq!(out.status.code(), Some(2), "{}", text(out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let ours: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("run.sh: "))
            .collect();
        assert_eq!(ours.len(), 1, "{}", text(out));
        assert!(ours[0].starts_with(line), "{line:?}\n{}", text(out));
    };

    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    if which("nvidia-smi").is_none() {
        refused(
            &run_sh(&b, &[&empty]),
            "run.sh: no CUDA driver: libcuda could not be loaded",
        );
    }

    let old = dir.path().join("old");
    let stubs = dir.path().join("stubs");
    let new = dir.path().join("new");
    assert!(fake_driver(&old, "libcuda.so.1", 0, 12080));
    assert!(fake_driver(&stubs, "libcuda.so", 34, 13000));
    assert!(fake_driver(&new, "libcuda.so.1", 0, 13000));
    refused(
        &run_sh(&b, &[&old]),
        "run.sh: CUDA driver too old: it supports CUDA 12.8, this bundle needs CUDA 13.0",
    );
    refused(
        &run_sh(&b, &[&stubs, &new]),
        "run.sh: no CUDA driver: libcuda.so is the CUDA toolkit's stub library, found before the driver's libcuda.so.1",
    );
    if std::path::Path::new("/usr/local/cuda").exists() {
        eprintln!("a CUDA toolkit in /usr/local/cuda: the missing-library case was not run");
        return;
    }
    refused(
        &run_sh(&b, &[&new]),
        "run.sh: missing CUDA libraries: libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libcurand.so.10 libcudart.so.13 (",
    );
    // With the libraries (empty files: only their presence is checked) it goes on, to
    // the test binaries this bundle lacks.
    let libs = dir.path().join("libs");
    std::fs::create_dir_all(&libs).unwrap();
    for so in [
        "libcublas.so.13",
        "libcublasLt.so.13",
        "libnvrtc.so.13",
        "libcurand.so.10",
        "libcudart.so.13",
    ] {
        std::fs::write(libs.join(so), b"").unwrap();
    }
    let out = run_sh(&b, &[&new, &libs]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("driver: CUDA 13.0 (libcuda.so.1), 1 device(s)"),
        "{}",
        text(&out)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("run.sh: "),
        "{}",
        text(&out)
    );
    assert_ne!(out.status.code(), Some(2), "{}", text(&out));
}
