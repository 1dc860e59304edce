#![cfg(feature = "cuda")]
//! The CUDA path on whatever machine runs the tests: without a driver (CI) every CUDA
//! test is reported ignored with the reason, never passed; with one, it is measured.

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

#[test]
fn cuda_tests_are_ignored_with_the_reason_when_there_is_no_driver() {
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
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let (dir, exe) = fixture_binary("cudarc-mlp");
    let r = run(
        &dir,
        &exe,
        &[],
        &[("VRAMTEST_DEVICE", "cuda"), ("CI", "true")],
    );
    assert_eq!(r.reports.len(), 2, "{}", r.text());
    for report in &r.reports {
        assert_eq!(report.status, Status::Ignored, "{}", report.test);
        assert!(
            report.message.starts_with("no CUDA driver")
                || report.message.starts_with("no CUDA device"),
            "{}",
            report.message
        );
        assert!(r.text().contains("ignored (no CUDA"), "{}", r.text());
    }
    assert!(
        r.output.status.success(),
        "ignored tests do not fail the run"
    );
    assert!(
        !r.text().contains("... ok"),
        "a CUDA test passed without a GPU:\n{}",
        r.text()
    );
}

#[test]
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
    assert_eq!(report.status, Status::Passed, "{}", r.text());
    // A CUDA-only test on the CPU is ignored with its reason.
    let (dir, exe) = fixture_binary("cudarc-mlp");
    let r = run(&dir, &exe, &[], &[("VRAMTEST_DEVICE", "cpu")]);
    for report in &r.reports {
        assert_eq!(report.status, Status::Ignored);
        assert_eq!(report.message, "runs on cuda only");
    }
}
