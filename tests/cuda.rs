//! The CUDA path on whatever machine runs the tests: without a driver (CI) asking for
//! CUDA is an error, `auto` measures on the CPU and CUDA-only tests are ignored with the
//! reason; with a driver, CUDA tests are measured.
#![cfg(feature = "cuda")]

mod common;

use common::{copy_fixture, fixture_binary, run};
use vramtest_model::DeviceClass;
use vramtest_model::report::Status;

fn driver_present() -> bool {
    matches!(
        vramtest_cuda::detect(),
        vramtest_cuda::Availability::Ready { .. }
    )
}

/// Asking for CUDA where there is none is an error before any test runs (exit code 2,
/// naming what is missing); with a device, every test is measured on it.
#[test]
fn asking_for_cuda_without_a_driver_is_exit_code_2_before_any_test() {
    if driver_present() {
        // Measured on the device: accepted once on a copy of the fixture, the same
        // tests then pass against their snapshots in check mode.
        let dir = copy_fixture("cudarc-mlp");
        let exe = common::build_vram_target(&dir);
        let cuda = ("VRAMTEST_DEVICE", "cuda");
        let r = run(&dir, &exe, &[], &[cuda, ("VRAMTEST_UPDATE", "always")]);
        assert_eq!(r.reports.len(), 2, "{}", r.text());
        let r = run(&dir, &exe, &[], &[cuda, ("CI", "true")]);
        assert_eq!(r.reports.len(), 2, "{}", r.text());
        for report in &r.reports {
            assert_eq!(report.device_class, Some(DeviceClass::Cuda));
            assert_eq!(report.status, Status::Passed, "{}", r.text());
        }
        assert!(r.output.status.success(), "{}", r.text());
        return;
    }
    let (dir, exe) = fixture_binary("cudarc-mlp");
    let r = run(
        &dir,
        &exe,
        &[],
        &[("VRAMTEST_DEVICE", "cuda"), ("CI", "true")],
    );
    assert_eq!(r.output.status.code(), Some(2), "{}", r.text());
    assert!(r.reports.is_empty(), "no test may run:\n{}", r.text());
    let stderr = String::from_utf8_lossy(&r.output.stderr);
    let why = vramtest_cuda::detect().reason().unwrap();
    assert!(
        stderr.contains("CUDA was asked for") && stderr.contains(&why),
        "{stderr}"
    );
    assert!(
        why.starts_with("no CUDA driver")
            || why.starts_with("no CUDA device")
            || why.starts_with("CUDA driver too old"),
        "{why}"
    );
    assert!(!r.text().contains("... ok"), "{}", r.text());
}

#[test]
#[ignore = "slow, builds candle: cargo test -p vramtest --test cuda -- --ignored"]
fn auto_falls_back_to_the_cpu_and_cpu_only_tests_skip_cuda() {
    let (dir, exe) = fixture_binary("candle-mlp");
    if driver_present() {
        return; // `auto` picks the GPU there; the CPU fallback is for driverless machines.
    }
    let r = run(
        &dir,
        &exe,
        &["mlp_sgd", "--exact"],
        &[("VRAMTEST_DEVICE", "auto"), ("CI", "true")],
    );
    let report = r.report("mlp_sgd");
    assert_eq!(report.device_class, Some(DeviceClass::Cpu));
    // Said once, with the reason.
    let stderr = String::from_utf8_lossy(&r.output.stderr);
    assert_eq!(
        stderr.matches("note: measuring on the CPU (").count(),
        1,
        "{stderr}"
    );
    assert_eq!(report.status, Status::Passed, "{}", r.text());
    // A CUDA-only test on the CPU is ignored with its reason.
    let (dir, exe) = fixture_binary("cudarc-mlp");
    let r = run(&dir, &exe, &[], &[("VRAMTEST_DEVICE", "cpu")]);
    // Both of the fixture's tests (`mlp_adam`, `mlp_adam_pool`) report, each ignored.
    assert_eq!(r.reports.len(), 2, "{}", r.text());
    for report in &r.reports {
        assert_eq!(report.status, Status::Ignored);
        assert_eq!(report.message, "runs on cuda only");
    }
}
