//! Headless chromium for the tests that open a page as a person would: Debian's
//! `chromium` (`.ci/install-chromium.sh` installs it), a fresh profile per run, and a
//! time limit. Shared by the chart's browser test and the pictures test of
//! `cargo vramtest`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

#[path = "../../../tests/common/required.rs"]
mod required;

/// How long one browser run may take before the test gives up on it.
pub const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

/// The browser on `PATH`, if one is installed. Without one, says that `what` was
/// skipped, or fails where `VRAMTEST_REQUIRE_CHROMIUM` is set (as in CI).
pub fn find_chromium(what: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file());
    if found.is_none() {
        required::CHROMIUM.skip(what, "neither chromium nor chromium-browser is on PATH");
    }
    found
}

/// What one browser run printed.
pub struct Run {
    pub stdout: String,
    /// Browser console messages land here too.
    pub stderr: String,
}

/// Runs chromium on `page` with a fresh profile and `action` (`--screenshot=...` or
/// `--dump-dom`); browser console messages go to stderr. Panics when it fails or
/// outlives [`BROWSER_TIMEOUT`].
pub fn chromium(browser: &Path, page: &Path, action: &str, scratch: &Path) -> Run {
    let profile = tempfile::tempdir_in(scratch).unwrap();
    let stdout = scratch.join("stdout");
    let stderr = scratch.join("stderr");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(action)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    match child.wait_timeout(BROWSER_TIMEOUT).unwrap() {
        Some(status) => assert!(status.success(), "chromium {action} failed: {status}"),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {action} did not finish in {BROWSER_TIMEOUT:?}");
        }
    }
    Run {
        stdout: std::fs::read_to_string(stdout).unwrap(),
        stderr: std::fs::read_to_string(stderr).unwrap(),
    }
}

/// Messages the page wrote to the browser console: script errors, blocked loads.
pub fn console_messages(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}
