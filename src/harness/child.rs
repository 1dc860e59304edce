//! The child's side: run one test under the probe and write what it measured (or
//! how it failed) to the result file the parent named.

use super::{TestDef, list};
use crate::probe::heap;
use crate::step::{Device, Step};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vramtest_model::Profile;
use vramtest_model::snapshot::Info;

/// What a child process reports back.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ChildResult {
    Measured {
        profile: Box<Profile>,
        info: Info,
        /// Live bytes per category over the step (`None` where the probe saw no
        /// allocation events).
        #[serde(default)]
        timeline: Option<Box<vramtest_chart::Timeline>>,
        /// What a call-sites run found (see [`SitesMode`]).
        #[serde(default)]
        sites: Option<SitesOutcome>,
    },
    Failed {
        message: String,
    },
    Ignored {
        reason: String,
    },
}

/// What a child does about call sites (see [`super::sites`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) enum SitesMode {
    /// Nothing: a plain measurement.
    #[default]
    Off,
    /// Name the calls whose traces are wanted.
    Plan,
    /// Capture the traces of the calls a plan (in this JSON file) names.
    Capture(PathBuf),
    /// Capture a trace of every call.
    Everything,
}

/// What a call-sites child reports.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum SitesOutcome {
    Plan(vramtest_model::sites::Plan),
    Found(vramtest_model::sites::Sites),
    /// The run's allocator calls did not match the plan's.
    Mismatch {
        planned: vramtest_model::sites::Fingerprint,
        measured: vramtest_model::sites::Fingerprint,
        /// Blocks alive at the run's own peaks without a trace.
        missing: u64,
    },
}

/// The first argument of a test binary started as a child.
const FLAG: &str = "--vramtest-child";

/// What the parent tells a child: on its command line, never in its environment,
/// which every process the test itself starts would inherit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Invocation {
    pub(super) test: String,
    pub(super) device: Device,
    pub(super) iterations: u32,
    /// Where the child writes its [`ChildResult`].
    pub(super) result: PathBuf,
    /// The batch size of this run (`t.batch()`).
    pub(super) batch: usize,
    pub(super) sites: SitesMode,
}

impl Invocation {
    /// The arguments that start a child for this invocation.
    pub(super) fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            FLAG.into(),
            self.test.clone().into(),
            self.device.to_string().into(),
            self.iterations.to_string().into(),
            self.result.clone().into(),
            self.batch.to_string().into(),
        ];
        match &self.sites {
            SitesMode::Off => {}
            SitesMode::Plan => args.push("sites-plan".into()),
            SitesMode::Capture(plan) => {
                args.push("sites-capture".into());
                args.push(plan.clone().into());
            }
            SitesMode::Everything => args.push("sites-all".into()),
        }
        args
    }

    /// The invocation in a process's arguments (the program name first); `None` when
    /// the process is not a child.
    pub(super) fn from_args(args: &[OsString]) -> Option<Result<Invocation, String>> {
        if args.get(1).is_none_or(|a| a != FLAG) {
            return None;
        }
        let text = |i: usize, what: &str| {
            args.get(i)
                .and_then(|a| a.to_str())
                .ok_or_else(|| format!("{FLAG}: the {what} is missing"))
        };
        Some((|| {
            let device = match text(3, "device")? {
                "cpu" => Device::Cpu,
                other => other
                    .strip_prefix("cuda:")
                    .and_then(|n| n.parse().ok())
                    .map(Device::Cuda)
                    .ok_or_else(|| format!("{FLAG}: unknown device `{other}`"))?,
            };
            let iterations = text(4, "iterations")?
                .parse()
                .map_err(|e| format!("{FLAG}: bad iterations: {e}"))?;
            let result = args
                .get(5)
                .map(PathBuf::from)
                .ok_or_else(|| format!("{FLAG}: the result file is missing"))?;
            let batch = text(6, "batch size")?
                .parse()
                .ok()
                .filter(|&b: &usize| b >= 1)
                .ok_or_else(|| {
                    format!(
                        "{FLAG}: bad batch size `{}`",
                        text(6, "batch size").unwrap_or_default()
                    )
                })?;
            let sites = match args.get(7).and_then(|a| a.to_str()) {
                None => SitesMode::Off,
                Some("sites-plan") => SitesMode::Plan,
                Some("sites-all") => SitesMode::Everything,
                Some("sites-capture") => SitesMode::Capture(
                    args.get(8)
                        .map(PathBuf::from)
                        .ok_or_else(|| format!("{FLAG}: the plan file is missing"))?,
                ),
                Some(other) => return Err(format!("{FLAG}: unknown call-sites mode `{other}`")),
            };
            Ok(Invocation {
                test: text(2, "test name")?.to_owned(),
                device,
                iterations,
                result,
                batch,
                sites,
            })
        })())
    }
}

/// Runs one test in this (child) process and writes its result.
pub(super) fn main(invocation: Result<Invocation, String>, package_dir: &Path) -> ExitCode {
    let invocation = match invocation {
        Ok(i) => i,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    die_with_parent();
    let result = run_child(&invocation, package_dir);
    let text = serde_json::to_vec(&result).expect("results serialize");
    if let Err(e) = std::fs::write(&invocation.result, text) {
        eprintln!(
            "error: cannot write the result to {}: {e}",
            invocation.result.display()
        );
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

fn run_child(invocation: &Invocation, package_dir: &Path) -> ChildResult {
    let test = &invocation.test;
    let Some((_, def)) = list::registered().into_iter().find(|(n, _)| n == test) else {
        return ChildResult::Failed {
            message: format!("no test named `{test}` in this binary"),
        };
    };
    match invocation.device {
        Device::Cpu => measure_cpu(def, invocation, package_dir),
        Device::Cuda(n) => crate::cuda::measure(def, n, invocation.iterations, invocation.batch),
    }
}

fn measure_cpu(def: &TestDef, invocation: &Invocation, package_dir: &Path) -> ChildResult {
    if !heap::installed() {
        return ChildResult::Failed {
            message: "the counting allocator is not installed (hint: end the test file with `vramtest::main!();`, which installs it)".into(),
        };
    }
    let plan = match &invocation.sites {
        SitesMode::Capture(file) => {
            let read = std::fs::read(file)
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    serde_json::from_slice::<vramtest_model::sites::Plan>(&b)
                        .map_err(|e| e.to_string())
                });
            match read {
                Ok(plan) => {
                    heap::capture(heap::Capture::Sizes(&plan.wanted));
                    Some(plan)
                }
                Err(e) => {
                    return ChildResult::Failed {
                        message: format!("cannot read the call-sites plan {}: {e}", file.display()),
                    };
                }
            }
        }
        SitesMode::Everything => {
            heap::capture(heap::Capture::Everything);
            None
        }
        _ => None,
    };
    let mut step = Step::new(Device::Cpu, invocation.iterations).with_batch(invocation.batch);
    let outcome = run_body(def, &mut step, heap::start);
    let events = heap::stop();
    match outcome {
        Ok(baseline) => {
            let (mut profile, timeline) =
                super::timeline::profile_and_timeline(&events, vramtest_chart::DEFAULT_MAX_POINTS);
            profile.baseline_bytes = baseline;
            let sites =
                super::sites::outcome(&invocation.sites, plan.as_ref(), &events, package_dir);
            ChildResult::Measured {
                timeline: Some(Box::new(timeline)),
                sites,
                info: Info {
                    device: "cpu".into(),
                    fidelity: profile.fidelity.to_string(),
                    tool: format!("vramtest {}", env!("CARGO_PKG_VERSION")),
                    driver: None,
                    cuda: None,
                    sites: Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn an_invocation_round_trips_through_the_command_line() {
        let invocation = Invocation {
            test: "tagged::explicit_tag".into(),
            device: Device::Cuda(1),
            iterations: 4,
            result: "/private/dir/tagged__explicit_tag.json".into(),
            batch: 128,
            sites: SitesMode::Off,
        };
        for sites in [
            SitesMode::Off,
            SitesMode::Plan,
            SitesMode::Capture("/private/dir/plan.json".into()),
            SitesMode::Everything,
        ] {
            let invocation = Invocation {
                sites,
                ..invocation.clone()
            };
            let mut argv = vec![OsString::from("vram-0123")];
            argv.extend(invocation.to_args());
            assert_eq!(Invocation::from_args(&argv), Some(Ok(invocation)));
        }
    }

    #[test_case(&["vram"]; "no arguments")]
    #[test_case(&["vram", "--list"]; "libtest arguments")]
    #[test_case(&["vram", "linear_adam", "--vramtest-child"]; "the flag elsewhere")]
    fn other_command_lines_are_not_children(argv: &[&str]) {
        assert_eq!(Invocation::from_args(&args(argv)), None);
    }

    #[test_case(&["vram", "--vramtest-child"], "is missing"; "nothing after the flag")]
    #[test_case(&["vram", "--vramtest-child", "t", "tpu", "3", "/r"], "unknown device"; "a bad device")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "x", "/r"], "bad iterations"; "bad iterations")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3"], "result file"; "no result file")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r"], "batch size"; "no batch size")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "0"], "bad batch size"; "batch size zero")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "1", "sites-x"], "unknown call-sites mode"; "a bad sites mode")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "1", "sites-capture"], "plan file"; "no plan file")]
    fn a_malformed_child_command_line_is_an_error(argv: &[&str], needle: &str) {
        let e = Invocation::from_args(&args(argv)).unwrap().unwrap_err();
        assert!(e.contains(needle), "{e}");
    }
}
