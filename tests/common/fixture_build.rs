//! The build settings every fixture build of the end-to-end tests shares, so that
//! every test's cargo reuses the others' artifacts in the one fixture target directory.
//! Shared by the root crate's tests and cargo-vramtest's through `#[path]`.

use std::process::Command;

/// On Linux, the linker compresses each test binary's debug info (zlib): full debug
/// info, as cargo's default test profile builds it, makes a candle fixture's test
/// binary about 300 MB, the end-to-end tests build over a hundred binaries into one
/// target directory, and a disk that fills kills the linker with a bus error. The
/// debug info itself is unchanged, so call sites (a backtrace's frames, files and
/// lines) are symbolized as in a user's build; a smaller debug-info level would not
/// be: it changes which frames are told apart.
pub fn settings(cmd: &mut Command) -> &mut Command {
    // Set, it would override RUSTFLAGS, and the builds would part ways.
    cmd.env_remove("CARGO_ENCODED_RUSTFLAGS");
    if cfg!(target_os = "linux") {
        cmd.env(
            "RUSTFLAGS",
            "-C link-arg=-Wl,--compress-debug-sections=zlib",
        );
    }
    cmd
}
