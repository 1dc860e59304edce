//! `cargo vramtest` asked for CUDA where there is none: exit code 2 before anything is
//! built, naming what is missing, whichever way CUDA was asked for.

mod common;

use common::{Fixture, assert_code};

#[test]
fn asking_for_cuda_without_a_driver_is_exit_code_2_before_any_build() {
    let Some(why) = vramtest_cuda::detect().reason() else {
        return; // A GPU machine: `--device cuda` runs there.
    };
    let f = Fixture::abort_crate("no-cuda");
    let ran = f.run(&["--device", "cuda"], &[]);
    assert_code(&ran, 2);
    assert!(ran.stderr.contains(&why), "{}", ran.text());
    assert!(
        ran.stderr.contains("error: the run asks for CUDA"),
        "{}",
        ran.text()
    );
    assert!(!ran.stderr.contains("Compiling"), "{}", ran.text());

    let ran = f.run(&[], &[("VRAMTEST_DEVICE", "cuda")]);
    assert_code(&ran, 2);
    assert!(ran.stderr.contains(&why), "{}", ran.text());

    // `device = "cuda"` in the crate's metadata.
    let manifest = f.dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = text.replacen(
        "[workspace]",
        "[package.metadata.vramtest]\ndevice = \"cuda\"\n\n[workspace]",
        1,
    );
    std::fs::write(&manifest, text).unwrap();
    let ran = f.run(&[], &[]);
    assert_code(&ran, 2);
    assert!(ran.stderr.contains(&why), "{}", ran.text());
    // Listing measures nothing: it needs no device.
    let ran = f.run(&["list"], &[]);
    assert_code(&ran, 0);
}
