//! The child's side: run one test under the probe and write what it measured (or
//! how it failed) to the result file the parent named.

use super::{DEFAULT_ITERATIONS, TestDef, list};
use crate::env;
use crate::probe::heap;
use crate::step::{Device, Step};
use serde::{Deserialize, Serialize};
use std::process::ExitCode;
use vramtest_model::Profile;
use vramtest_model::snapshot::Info;

/// What a child process reports back.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ChildResult {
    Measured { profile: Box<Profile>, info: Info },
    Failed { message: String },
    Ignored { reason: String },
}

/// Runs one test in this (child) process and writes its result.
pub(super) fn main(test: &str) -> ExitCode {
    let result = run_child(test);
    let Ok(path) = std::env::var(env::CHILD_RESULT) else {
        eprintln!(
            "error: {} is set without {}",
            env::CHILD_TEST,
            env::CHILD_RESULT
        );
        return ExitCode::from(2);
    };
    let text = serde_json::to_vec(&result).expect("results serialize");
    if let Err(e) = std::fs::write(&path, text) {
        eprintln!("error: cannot write the result to {path}: {e}");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

fn run_child(test: &str) -> ChildResult {
    let Some((_, def)) = list::registered().into_iter().find(|(n, _)| n == test) else {
        return ChildResult::Failed {
            message: format!("no test named `{test}` in this binary"),
        };
    };
    let device = match std::env::var(env::CHILD_DEVICE).as_deref() {
        Ok("cpu") | Err(_) => Device::Cpu,
        Ok(other) => match other.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
            Some(n) => Device::Cuda(n),
            None => {
                return ChildResult::Failed {
                    message: format!("unknown device `{other}`"),
                };
            }
        },
    };
    let iterations = def
        .options
        .iterations
        .or(env::config().ok().flatten().and_then(|c| c.iterations))
        .unwrap_or(DEFAULT_ITERATIONS);
    match device {
        Device::Cpu => measure_cpu(def, iterations),
        Device::Cuda(n) => crate::cuda::measure(def, n, iterations),
    }
}

fn measure_cpu(def: &TestDef, iterations: u32) -> ChildResult {
    if !heap::installed() {
        return ChildResult::Failed {
            message: "the counting allocator is not installed (hint: end the test file with `vramtest::main!();`, which installs it)".into(),
        };
    }
    let mut step = Step::new(Device::Cpu, iterations);
    let outcome = run_body(def, &mut step, heap::start);
    let events = heap::stop();
    match outcome {
        Ok(baseline) => {
            let mut profile = vramtest_model::ledger::profile(&events);
            profile.baseline_bytes = baseline;
            ChildResult::Measured {
                info: Info {
                    device: "cpu".into(),
                    fidelity: profile.fidelity.to_string(),
                    tool: format!("vramtest {}", env!("CARGO_PKG_VERSION")),
                    driver: None,
                    cuda: None,
                },
                profile: Box::new(profile),
            }
        }
        Err(message) => ChildResult::Failed { message },
    }
}

/// Starts the probe with `start`, runs the test body, and turns an error or a panic
/// into a message. Returns what `start` returned.
pub(crate) fn run_body<S>(
    def: &TestDef,
    step: &mut Step,
    start: impl FnOnce() -> S,
) -> Result<S, String> {
    let started = start();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (def.func)(step)));
    match outcome {
        Ok(Ok(())) => Ok(started),
        Ok(Err(e)) => Err(format!("returned an error: {e}")),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".into());
            Err(format!("panicked: {msg}"))
        }
    }
}
