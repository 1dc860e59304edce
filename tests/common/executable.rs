//! Programs a test writes and then runs (fake tools, stand-ins for test binaries),
//! written so that running them cannot fail with "Text file busy" (ETXTBSY, os error
//! 26). Shared by the test crates of `vramtest` and `cargo-vramtest` (included with
//! `#[path]`, by `cargo-vramtest`'s unit tests too).
//!
//! The race: a test writes a file and then executes it while another test thread of the
//! same process starts a process. The forked child holds a copy of every descriptor the
//! parent had open at that instant, the writer's included, until it calls `exec`; if the
//! file is executed in that window, the kernel refuses it as being written. Rust opens
//! files close-on-exec, which narrows the window but does not close it (measured: 6
//! refusals in 2,000 write-then-run rounds beside a thread starting processes).
//!
//! The cure here is that the test process never holds a descriptor open for writing on
//! a file it will run: the file is written by a child process (`sh`, reading the text
//! from a pipe), and a program that exists already is linked, not copied.
//! `.ci/check-exec-race.py` flags the patterns that bring the race back.

#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Writes `text` to `path` as an executable (mode 755) without this process ever
/// opening `path` for writing: `sh` writes it, reading the text from a pipe.
pub fn write_executable(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let mut sh = Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .expect("sh runs");
    sh.stdin
        .take()
        .expect("a pipe")
        .write_all(text.as_bytes())
        .unwrap();
    let status = sh.wait().unwrap();
    assert!(status.success(), "writing {}: {status}", path.display());
}

/// Makes the program `src` runnable as `dst` without copying its bytes through this
/// process: a symbolic link (the kernel runs `src` itself, which nobody writes).
pub fn link_executable(src: &Path, dst: &Path) {
    if let Some(dir) = dst.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::os::unix::fs::symlink(src, dst)
        .unwrap_or_else(|e| panic!("linking {} to {}: {e}", dst.display(), src.display()));
}
