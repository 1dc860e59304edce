//! The child's side: run one test under the probe and write what it measured (or
//! how it failed) to the result channel the parent handed down.

mod backend;
mod channel;
mod machine;
mod measure;
mod site_capture;
pub(crate) mod threads;
mod timeline;

use super::protocol::{ChildResult, Invocation, InvocationError};
use super::registry;
use std::path::Path;
use std::process::ExitCode;

/// Runs one test in this (child) process and writes its result.
pub(crate) fn main(
    invocation: Result<Invocation, InvocationError>,
    package_dir: &Path,
) -> ExitCode {
    let invocation = match invocation {
        Ok(i) => i,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let sink = match channel::ResultSink::open(&invocation.result) {
        Ok(sink) => sink,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    die_with_parent();
    let result = run(&invocation, package_dir);
    let text = serde_json::to_vec(&result).expect("results serialize");
    if let Err(message) = sink.write(&text) {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

/// A child runs in a process group of its own (so a timeout can end everything it
/// started), out of reach of the terminal's Ctrl-C: on Linux it asks to be killed
/// when the parent dies instead, so an interrupted run leaves no child behind.
fn die_with_parent() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
}

/// Measures the invocation's test on its device.
fn run(invocation: &Invocation, package_dir: &Path) -> ChildResult {
    let test = &invocation.test;
    let Some(def) = registry::find(test) else {
        return ChildResult::Failed {
            message: format!("no test named `{test}` in this binary"),
        };
    };
    if let Err(e) = threads::pin(invocation.threads) {
        return ChildResult::Failed {
            message: e.to_string(),
        };
    }
    backend::backend(invocation.device).measure(def, invocation, package_dir)
}
