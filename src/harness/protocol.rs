//! The protocol between the harness's two processes: how the parent starts a child
//! (its command line, [`Invocation`]) and what the child writes back ([`ChildResult`]),
//! call sites included ([`SitesMode`], [`SitesOutcome`]).

use crate::step::Device;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::PathBuf;
use vramtest_model::Profile;
use vramtest_model::snapshot::Info;

/// What a child process reports back.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ChildResult {
    Measured {
        profile: Box<Profile>,
        info: Box<Info>,
        /// Live bytes per category over the step (`None` where the probe saw no
        /// allocation events).
        #[serde(default)]
        timeline: Option<Box<vramtest_chart::Timeline>>,
        /// What a call-sites run found (see [`SitesMode`]).
        #[serde(default)]
        sites: Option<SitesOutcome>,
        /// The event stream replayed through the CUDA pool model (CPU runs only).
        #[serde(default)]
        pool: Option<vramtest_model::pool::PoolReplay>,
        /// The axes of the run's point that the step never read.
        #[serde(default)]
        unread_axes: Vec<String>,
        /// The CPU time (user and system, every thread) the step took, in
        /// microseconds (`None` where it cannot be measured).
        #[serde(default)]
        cpu_micros: Option<u64>,
        /// On a device: its memory, in bytes (`None` on the CPU), which bounds what an
        /// axial point may need there ([`crate::harness::parent`]'s axial points).
        #[serde(default)]
        device_bytes: Option<u64>,
    },
    Failed {
        message: String,
    },
    Ignored {
        reason: String,
    },
}

/// What a child does about call sites.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum SitesMode {
    /// Nothing: a plain measurement.
    #[default]
    Off,
    /// Name the calls whose traces are wanted.
    Plan,
    /// Capture the traces of the calls a plan names: its JSON comes on standard input.
    Capture,
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

/// Where in a sweep a run is: its batch size (1 without a sweep) and, for a sweep
/// over named axes, every axis's value (the batch among them when it is an axis).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RunPoint {
    pub(crate) batch: usize,
    /// `(axis, value)` in the attribute's order; empty without named axes.
    pub(crate) axes: Vec<(String, usize)>,
    /// `(axis, level)` of the categorical axes, in the attribute's order; empty
    /// without them.
    pub(crate) levels: Vec<(String, String)>,
}

impl RunPoint {
    /// A run at one batch size, without named axes.
    pub(crate) fn batch(batch: usize) -> RunPoint {
        RunPoint {
            batch,
            axes: Vec::new(),
            levels: Vec::new(),
        }
    }

    /// A point of named axes: the batch is its `batch` axis, else 1.
    pub(crate) fn axes(axes: Vec<(String, usize)>) -> RunPoint {
        let batch = axes
            .iter()
            .find(|(k, _)| k == "batch")
            .map_or(1, |&(_, v)| v);
        RunPoint {
            batch,
            axes,
            levels: Vec::new(),
        }
    }

    /// The same point at these levels of the categorical axes.
    pub(crate) fn with_levels(mut self, levels: Vec<(String, String)>) -> RunPoint {
        self.levels = levels;
        self
    }

    /// The levels as the child's argument: `-` without any, else a JSON list of
    /// `[axis, level]` pairs (a level is any string literal).
    fn levels_arg(&self) -> String {
        if self.levels.is_empty() {
            return "-".into();
        }
        serde_json::to_string(&self.levels).expect("strings serialize")
    }

    fn parse_levels(text: &str) -> Result<Vec<(String, String)>, InvocationError> {
        if text == "-" {
            return Ok(Vec::new());
        }
        serde_json::from_str(text).map_err(|_| InvocationError::Levels(text.to_owned()))
    }

    /// `batch=2,seq=16`, or `-` without named axes: the child's argument.
    fn axes_arg(&self) -> String {
        if self.axes.is_empty() {
            return "-".into();
        }
        self.axes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The axes, then the levels, joined by `sep` (`batch=2 seq=16 precision=bf16`),
    /// or the batch size alone.
    pub(crate) fn label(&self, sep: &str) -> String {
        if self.axes.is_empty() {
            return self.batch.to_string();
        }
        self.axes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .chain(self.levels.iter().map(|(k, l)| format!("{k}={l}")))
            .collect::<Vec<_>>()
            .join(sep)
    }

    fn parse_axes(text: &str) -> Result<Vec<(String, usize)>, InvocationError> {
        if text == "-" {
            return Ok(Vec::new());
        }
        text.split(',')
            .map(|part| {
                let bad = || InvocationError::AxisValue(part.to_owned());
                let (k, v) = part.split_once('=').ok_or_else(bad)?;
                let v: usize = v.parse().ok().filter(|&n| n >= 1).ok_or_else(bad)?;
                Ok((k.to_owned(), v))
            })
            .collect()
    }
}

/// Where a child writes its result: a pipe only it and the parent hold (on Unix), so
/// no other process (another test's child, or a daemon one of them left behind) can
/// write a result in its name; elsewhere, a file in the run's private directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResultChannel {
    /// The write end of a pipe, inherited under this descriptor number.
    Fd(i32),
    /// A file the parent reads once the child has ended.
    File(PathBuf),
}

/// The variable that tells a child where its result goes (`fd:N` or a file's path):
/// set for that child alone, and taken out of its environment before the test's code
/// runs (see [`take_result_var`]), so the step does not find it on its command line, in
/// its environment, or in what a program it starts inherits.
pub(crate) const RESULT_VAR: &str = "VRAMTEST_RESULT_CHANNEL";

/// Reads and removes [`RESULT_VAR`]; on Unix its value is also overwritten where the
/// process's initial environment holds it (what `/proc/self/environ` shows). Call it
/// first thing in `main`, before any thread of the harness runs.
pub(crate) fn take_result_var() -> Option<OsString> {
    let value = std::env::var_os(RESULT_VAR)?;
    #[cfg(unix)]
    // SAFETY: getenv returns a pointer to the value's bytes, NUL-terminated, in the
    // environment block (writable memory of this process); they are overwritten in
    // place, the length unchanged. Nothing else reads the environment meanwhile (see
    // below).
    unsafe {
        let name = std::ffi::CString::new(RESULT_VAR).expect("no NUL in the name");
        let p = libc::getenv(name.as_ptr());
        if !p.is_null() {
            std::ptr::write_bytes(p, b'x', libc::strlen(p));
        }
    }
    // SAFETY: called first thing in `main`, before the harness starts any thread, so
    // no other thread reads or writes the environment.
    unsafe { std::env::remove_var(RESULT_VAR) };
    Some(value)
}

impl ResultChannel {
    /// The channel as the value of [`RESULT_VAR`]: `fd:N`, or the file's path.
    pub(crate) fn to_arg(&self) -> OsString {
        match self {
            ResultChannel::Fd(fd) => format!("fd:{fd}").into(),
            ResultChannel::File(path) => path.clone().into(),
        }
    }

    fn from_arg(arg: &std::ffi::OsStr) -> Result<ResultChannel, InvocationError> {
        match arg.to_str().and_then(|a| a.strip_prefix("fd:")) {
            Some(n) => n
                .parse()
                .ok()
                .filter(|&fd: &i32| fd > 2)
                .map(ResultChannel::Fd)
                .ok_or_else(|| InvocationError::ResultDescriptor(n.to_owned())),
            None => Ok(ResultChannel::File(PathBuf::from(arg))),
        }
    }
}

/// The first argument of a test binary started as a child.
const FLAG: &str = "--vramtest-child";

/// A child's command line that does not read back (the binary started by hand).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvocationError {
    #[error("{FLAG}: the {0} is missing")]
    Missing(&'static str),
    #[error("{FLAG}: {0}")]
    Device(#[from] crate::step::ParseDeviceError),
    #[error("{FLAG}: bad iterations: {0}")]
    Iterations(std::num::ParseIntError),
    #[error("{FLAG}: bad result descriptor `fd:{0}`")]
    ResultDescriptor(String),
    #[error("{FLAG}: bad {what} `{given}`")]
    Count { what: &'static str, given: String },
    #[error("{FLAG}: bad thread count")]
    ThreadCount,
    #[error("{FLAG}: bad axis value `{0}`")]
    AxisValue(String),
    #[error("{FLAG}: bad levels `{0}`")]
    Levels(String),
    #[error("{FLAG}: unknown call-sites mode `{0}`")]
    SitesMode(String),
}

/// What the parent tells a child: on its command line, never in its environment,
/// which every process the test itself starts would inherit; but for the result
/// channel, which is no business of the step's: it travels in [`RESULT_VAR`], taken out
/// of the environment before the step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    pub(crate) test: String,
    pub(crate) device: Device,
    pub(crate) iterations: u32,
    /// Where the child writes its [`ChildResult`].
    pub(crate) result: ResultChannel,
    /// The point of a sweep this run measures (`t.batch()`, `t.axis(..)`).
    pub(crate) point: RunPoint,
    /// The CPU threads every thread pool of the child gets (see
    /// [`crate::harness::child::threads`]).
    pub(crate) threads: u32,
    pub(crate) sites: SitesMode,
}

impl Invocation {
    /// The arguments that start a child for this invocation.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            FLAG.into(),
            self.test.clone().into(),
            self.device.to_string().into(),
            self.iterations.to_string().into(),
            self.point.batch.to_string().into(),
            self.threads.to_string().into(),
            self.point.axes_arg().into(),
            self.point.levels_arg().into(),
        ];
        match &self.sites {
            SitesMode::Off => {}
            SitesMode::Plan => args.push("sites-plan".into()),
            SitesMode::Capture => args.push("sites-capture".into()),
            SitesMode::Everything => args.push("sites-all".into()),
        }
        args
    }

    /// The invocation in a process's arguments (the program name first) and its result
    /// channel (the value of [`RESULT_VAR`]); `None` when the process is not a child.
    pub(crate) fn from_args(
        args: &[OsString],
        result: Option<&std::ffi::OsStr>,
    ) -> Option<Result<Invocation, InvocationError>> {
        if args.get(1).is_none_or(|a| a != FLAG) {
            return None;
        }
        let text = |i: usize, what: &'static str| {
            args.get(i)
                .and_then(|a| a.to_str())
                .ok_or(InvocationError::Missing(what))
        };
        Some((|| {
            let device: Device = text(3, "device")?.parse()?;
            let iterations = text(4, "iterations")?
                .parse()
                .map_err(InvocationError::Iterations)?;
            let result = result
                .map(ResultChannel::from_arg)
                .ok_or(InvocationError::Missing("result channel"))??;
            // A count of at least 1.
            let count = |i: usize, what: &'static str| -> Result<usize, InvocationError> {
                let given = text(i, what)?;
                given
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n >= 1)
                    .ok_or_else(|| InvocationError::Count {
                        what,
                        given: given.to_owned(),
                    })
            };
            let batch = count(5, "batch size")?;
            let threads = u32::try_from(count(6, "thread count")?)
                .map_err(|_| InvocationError::ThreadCount)?;
            let axes = RunPoint::parse_axes(text(7, "axes")?)?;
            let levels = RunPoint::parse_levels(text(8, "levels")?)?;
            let sites = match args.get(9).and_then(|a| a.to_str()) {
                None => SitesMode::Off,
                Some("sites-plan") => SitesMode::Plan,
                Some("sites-all") => SitesMode::Everything,
                Some("sites-capture") => SitesMode::Capture,
                Some(other) => return Err(InvocationError::SitesMode(other.to_owned())),
            };
            Ok(Invocation {
                test: text(2, "test name")?.to_owned(),
                device,
                iterations,
                result,
                point: RunPoint {
                    batch,
                    axes,
                    levels,
                },
                threads,
                sites,
            })
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    /// `from_args` on a command line written with the result channel as its sixth
    /// word, where the channel used to be: that word goes to [`RESULT_VAR`] instead.
    fn read(argv: &[&str]) -> Option<Result<Invocation, InvocationError>> {
        let mut argv = args(argv);
        let result = (argv.len() > 5).then(|| argv.remove(5));
        Invocation::from_args(&argv, result.as_deref())
    }

    #[test]
    fn an_invocation_round_trips_through_the_command_line() {
        let invocation = Invocation {
            test: "tagged::explicit_tag".into(),
            device: Device::Cuda(1),
            iterations: 4,
            result: ResultChannel::Fd(7),
            point: RunPoint::axes(vec![("batch".into(), 128), ("seq".into(), 16)]).with_levels(
                vec![
                    ("precision".into(), "bf16".into()),
                    ("note".into(), "a, b=\"c\"".into()),
                ],
            ),
            threads: 2,
            sites: SitesMode::Off,
        };
        let plain = Invocation {
            point: RunPoint::batch(4),
            result: ResultChannel::File("/private/dir/tagged__explicit_tag.json".into()),
            ..invocation.clone()
        };
        let mut argv = vec![OsString::from("vram-0123")];
        argv.extend(plain.to_args());
        // The channel is on no command line.
        assert!(
            !argv
                .iter()
                .any(|a| a.to_string_lossy().contains("explicit_tag.json"))
        );
        assert_eq!(
            Invocation::from_args(&argv, Some(&plain.result.to_arg())),
            Some(Ok(plain))
        );
        for sites in [
            SitesMode::Off,
            SitesMode::Plan,
            SitesMode::Capture,
            SitesMode::Everything,
        ] {
            let invocation = Invocation {
                sites,
                ..invocation.clone()
            };
            let mut argv = vec![OsString::from("vram-0123")];
            argv.extend(invocation.to_args());
            assert!(!argv.iter().any(|a| a.to_string_lossy().contains("fd:")));
            assert_eq!(
                Invocation::from_args(&argv, Some(&invocation.result.to_arg())),
                Some(Ok(invocation))
            );
        }
    }

    #[test_case(&["vram"]; "no arguments")]
    #[test_case(&["vram", "--list"]; "libtest arguments")]
    #[test_case(&["vram", "linear_adam", "--vramtest-child"]; "the flag elsewhere")]
    fn other_command_lines_are_not_children(argv: &[&str]) {
        assert_eq!(read(argv), None);
    }

    #[test_case(&["vram", "--vramtest-child"], "is missing"; "nothing after the flag")]
    #[test_case(&["vram", "--vramtest-child", "t", "tpu", "3", "/r"], "unknown device"; "a bad device")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "x", "/r"], "bad iterations"; "bad iterations")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3"], "result channel"; "no result channel")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "fd:x", "1", "2", "-"], "bad result descriptor"; "a bad descriptor")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "fd:1", "1", "2", "-"], "bad result descriptor"; "stdout as the descriptor")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r"], "batch size"; "no batch size")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "0"], "bad batch size"; "batch size zero")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "1"], "thread count"; "no thread count")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "1", "0"], "bad thread count"; "zero threads")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "1", "2"], "axes"; "no axes")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "1", "2", "seq=0"], "bad axis value `seq=0`"; "an axis at zero")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "1", "2", "-"], "levels"; "no levels")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "1", "2", "-", "precision=bf16"], "bad levels `precision=bf16`"; "levels that are not a list of pairs")]
    #[test_case(&["vram", "--vramtest-child", "t", "cpu", "3", "/r", "1", "2", "-", "-", "sites-x"], "unknown call-sites mode"; "a bad sites mode")]
    fn a_malformed_child_command_line_is_an_error(argv: &[&str], needle: &str) {
        let e = read(argv).unwrap().unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
}
