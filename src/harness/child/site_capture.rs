//! Call sites, the child's side: a plan run names the calls whose blocks are alive at
//! the peaks; a capture run records a stack trace of exactly those calls (or of every
//! call) and symbolizes them from the test binary's debug info.

use crate::harness::protocol::{SitesMode, SitesOutcome};
use crate::probe::heap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use vramtest_model::Event;
use vramtest_model::sites::{self, Call, Capture, Plan, SiteKey};

/// Gets the probe ready for `mode` before the step runs: a capture run reads its plan
/// and captures the traces of the calls it names.
pub(super) fn prepare(mode: &SitesMode) -> Result<Option<Plan>, PlanError> {
    match mode {
        SitesMode::Capture => {
            // The parent writes the plan on standard input and closes it.
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
                .map_err(PlanError::Read)?;
            let plan = serde_json::from_slice::<Plan>(&bytes).map_err(PlanError::Parse)?;
            heap::capture(heap::CaptureRequest::Sizes(&plan.wanted));
            Ok(Some(plan))
        }
        SitesMode::Everything => {
            heap::capture(heap::CaptureRequest::Everything);
            Ok(None)
        }
        SitesMode::Off | SitesMode::Plan => Ok(None),
    }
}

/// A call-sites plan that cannot be read on standard input.
#[derive(Debug, thiserror::Error)]
pub(super) enum PlanError {
    #[error("cannot read the call-sites plan on standard input: {0}")]
    Read(std::io::Error),
    #[error("cannot read the call-sites plan on standard input: {0}")]
    Parse(serde_json::Error),
}

/// What the child's `mode` asks of the events it just recorded (`traces`: what the
/// probe captured) for the step function `step`.
pub(super) fn outcome(
    mode: &SitesMode,
    plan: Option<&Plan>,
    events: &[Event],
    package_dir: &Path,
    step: &str,
) -> Option<SitesOutcome> {
    let traces = match mode {
        SitesMode::Off => return None,
        SitesMode::Plan => return Some(SitesOutcome::Plan(sites::plan(events))),
        SitesMode::Capture | SitesMode::Everything => heap::traces(),
    };
    // One replay of the stream serves the check against the plan and the sites.
    let peaks = sites::Peaks::of(events);
    let capture = match mode {
        SitesMode::Capture => {
            let planned = plan
                .expect("a capture run reads its plan first")
                .fingerprint;
            let measured = sites::Fingerprint::of(events);
            let captured: std::collections::HashSet<Call> =
                traces.iter().map(|(c, _)| *c).collect();
            let missing = peaks.uncaptured(|c| captured.contains(&c));
            if measured != planned || missing > 0 {
                return Some(SitesOutcome::Mismatch {
                    planned,
                    measured,
                    missing: missing as u64,
                });
            }
            Capture::Planned
        }
        _ => Capture::Everything,
    };
    let keys = symbolize(&traces, package_dir, step);
    let mut found = peaks.sites(capture, traces.len() as u64, |call| {
        keys.get(&call).cloned()
    });
    if !keys.is_empty() && keys.values().all(|k| k.location.is_none()) {
        found.notes.push(
            "no trace reached a line of your code: is the test binary built without debug info? (`debug = 1` or more in the test profile; `--release` builds have none unless the release profile asks for it)".into(),
        );
    }
    Some(SitesOutcome::Found(found))
}

/// One frame of a symbolized trace (inlined functions are frames of their own).
#[derive(Debug, Clone, PartialEq, Eq)]
struct TraceFrame {
    /// The demangled name, without its hash.
    name: Option<String>,
    file: Option<PathBuf>,
    line: Option<u32>,
}

/// The site of each captured call, symbolized from this binary's debug info. Each
/// distinct return address is resolved once.
fn symbolize(
    traces: &[(Call, Vec<usize>)],
    package_dir: &Path,
    step: &str,
) -> HashMap<Call, SiteKey> {
    let mut resolved: HashMap<usize, Vec<TraceFrame>> = HashMap::new();
    let places = Places::new(package_dir, step);
    traces
        .iter()
        .map(|(call, ips)| {
            let frames = ips
                .iter()
                .flat_map(|&ip| resolved.entry(ip).or_insert_with(|| resolve(ip)).clone());
            (*call, places.site(frames))
        })
        .collect()
}

fn resolve(ip: usize) -> Vec<TraceFrame> {
    let mut frames = Vec::new();
    // `resolve` looks up the instruction before a return address, i.e. the call.
    backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
        frames.push(TraceFrame {
            name: symbol.name().map(|n| format!("{n:#}")),
            file: symbol.filename().map(Path::to_path_buf),
            line: symbol.lineno(),
        });
    });
    if frames.is_empty() {
        frames.push(TraceFrame {
            name: None,
            file: None,
            line: None,
        });
    }
    frames
}

/// What is the user's code and what is not, for one package.
struct Places {
    package_dir: PathBuf,
    /// Where cargo keeps downloaded crates (`$CARGO_HOME`, else `~/.cargo`).
    cargo_home: Option<PathBuf>,
    /// The step function's name: where a trace's callers end.
    step: String,
}

impl Places {
    fn new(package_dir: &Path, step: &str) -> Places {
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
        Places {
            package_dir: package_dir.to_path_buf(),
            cargo_home,
            step: step.to_owned(),
        }
    }

    /// The site of one trace (frames innermost first): the first frame outside the
    /// standard library and vramtest (the operation), the first frame in the user's
    /// own code (the location), and the user's functions from there out to the step
    /// (the callers: `logits() ← step`; `logits() ← …` when the trace ends before it).
    fn site(&self, frames: impl Iterator<Item = TraceFrame>) -> SiteKey {
        let mut key = SiteKey::default();
        let mut callers: Vec<String> = Vec::new();
        for frame in frames {
            let Some(name) = frame.name.as_deref().filter(|n| !is_internal(n)) else {
                continue;
            };
            if key.operation.is_none() {
                key.operation = Some(name.to_owned());
            }
            let (Some(file), Some(line)) = (&frame.file, frame.line) else {
                continue;
            };
            if !self.is_users(file) {
                continue;
            }
            if key.location.is_none() {
                key.location = Some(format!("{}:{line}", self.shown(file)));
            }
            let function = function_name(name);
            if callers.last() != Some(&function) {
                callers.push(function);
            }
            if callers.last() == Some(&self.step) {
                key.callers = callers_text(&callers, true);
                return key;
            }
        }
        key.callers = callers_text(&callers, false);
        key
    }

    /// Code the user wrote: a source file outside cargo's downloaded crates, the Rust
    /// toolchain and vramtest's own sources (`main!` expands to code there).
    fn is_users(&self, file: &Path) -> bool {
        if file.starts_with(Path::new(env!("CARGO_MANIFEST_DIR")).join("src")) {
            return false;
        }
        let text = file.to_string_lossy().replace('\\', "/");
        if text.starts_with("/rustc/") || text.contains("/rustlib/") {
            return false;
        }
        if self
            .cargo_home
            .as_ref()
            .is_some_and(|h| file.starts_with(h))
            || text.contains("/.cargo/registry/")
            || text.contains("/.cargo/git/")
        {
            return false;
        }
        file.is_absolute() || file.components().count() > 1
    }

    /// A path relative to the package when it lies inside it.
    fn shown(&self, file: &Path) -> String {
        file.strip_prefix(&self.package_dir)
            .unwrap_or(file)
            .to_string_lossy()
            .replace('\\', "/")
    }
}

/// A function's own name from its demangled path, its closures folded into it:
/// `app::Model::logits::{{closure}}` is `logits`.
fn function_name(name: &str) -> String {
    let mut name = name;
    while let Some(outer) = name.strip_suffix("::{{closure}}") {
        name = outer;
    }
    name.rsplit("::").next().unwrap_or(name).to_owned()
}

/// The callers' line, innermost first: `logits() ← forward() ← step` when they
/// `reached` the step (named bare, last), else `logits() ← forward() ← …`; `None` for
/// the step alone (the location says it) or no function of the user's.
fn callers_text(callers: &[String], reached: bool) -> Option<String> {
    let (inner, last) = match (reached, callers.split_last()) {
        (true, Some((step, inner))) => (inner, step.as_str()),
        (false, Some(_)) => (callers, "…"),
        (_, None) => return None,
    };
    if inner.is_empty() {
        return None;
    }
    let mut text: Vec<String> = inner.iter().map(|f| format!("{f}()")).collect();
    text.push(last.to_owned());
    Some(text.join(" ← "))
}

/// Crates whose frames are never the answer: the standard library, the allocator
/// plumbing, vramtest itself and what it uses to capture traces.
const INTERNAL_CRATES: &[&str] = &[
    "__rustc",
    "std",
    "core",
    "alloc",
    "hashbrown",
    "backtrace",
    "vramtest",
    "vramtest_model",
    "vramtest_chart",
    "libtest_mimic",
];

/// Whether a demangled name belongs to an internal crate: `alloc::vec::Vec<T>::push`,
/// `<alloc::vec::Vec<T> as core::clone::Clone>::clone`, `<T as alloc::borrow::ToOwned>
/// ::to_owned` (a generic impl: its trait decides), `__rust_alloc` (no path at all).
fn is_internal(name: &str) -> bool {
    let crate_of = |path: &str| -> Option<String> {
        let path = path.trim_start_matches(['&', '*', '[', '(', ' ']);
        let path = path.strip_prefix("mut ").unwrap_or(path);
        let path = path.strip_prefix("dyn ").unwrap_or(path);
        path.split_once("::")
            .map(|(krate, _)| krate.to_owned())
            .filter(|k| !k.contains(['<', ' ']))
    };
    let internal = |krate: &str| INTERNAL_CRATES.contains(&krate);
    if let Some(inner) = name.strip_prefix('<') {
        // `<Self as Trait>::method` or `<Self>::method`.
        let (self_ty, rest) = match inner.split_once(" as ") {
            Some((s, rest)) => (s, Some(rest)),
            None => (inner, None),
        };
        return match crate_of(self_ty) {
            Some(krate) => internal(&krate),
            None => rest.and_then(crate_of).is_none_or(|k| internal(&k)),
        };
    }
    crate_of(name).is_none_or(|k| internal(&k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("alloc::vec::Vec<T,A>::push", true)]
    #[test_case("<alloc::vec::Vec<T> as core::clone::Clone>::clone", true)]
    #[test_case("<T as alloc::borrow::ToOwned>::to_owned", true)]
    #[test_case("<[T] as alloc::slice::hack::ConvertVec>::to_vec", true)]
    #[test_case("__rust_alloc", true)]
    #[test_case("vramtest::probe::heap::on_alloc", true)]
    #[test_case(
        "<vramtest::probe::heap::Counting<A> as core::alloc::global::GlobalAlloc>::alloc",
        true
    )]
    #[test_case("candle_core::tensor::Tensor::cat", false)]
    #[test_case("<candle_core::tensor::Tensor as core::ops::arith::Add>::add", false)]
    #[test_case("<T as candle_core::op::Module>::forward", false)]
    #[test_case("<&candle_core::tensor::Tensor as core::ops::arith::Add>::add", false)]
    #[test_case("candle_mlp::Mlp::loss::{{closure}}", false)]
    fn internal_frames_are_those_of_std_and_vramtest(name: &str, internal: bool) {
        assert_eq!(is_internal(name), internal, "{name}");
    }

    fn frame(name: &str, file: &str, line: u32) -> TraceFrame {
        TraceFrame {
            name: Some(name.into()),
            file: Some(file.into()),
            line: Some(line),
        }
    }

    #[test]
    fn a_site_is_the_first_library_frame_and_the_first_frame_of_the_users_code() {
        let places = Places {
            package_dir: "/home/user/app".into(),
            cargo_home: Some("/home/u/.cargo".into()),
            step: "mlp_adamw".into(),
        };
        let frames = vec![
            frame(
                "alloc::raw_vec::RawVec<T>::allocate",
                "/rustc/abc/library/alloc/src/raw_vec.rs",
                10,
            ),
            frame(
                "candle_core::cpu_backend::copy",
                "/home/u/.cargo/registry/src/index.crates.io-1/candle-core-0.11.0/src/cpu.rs",
                200,
            ),
            frame(
                "candle_core::tensor::Tensor::cat",
                "/home/u/.cargo/registry/src/index.crates.io-1/candle-core-0.11.0/src/tensor_cat.rs",
                20,
            ),
            frame("app::Mlp::loss", "/home/user/app/src/lib.rs", 79),
            frame("vram::mlp_adamw", "/home/user/app/tests/vram.rs", 23),
        ];
        assert_eq!(
            places.site(frames.into_iter()),
            SiteKey {
                operation: Some("candle_core::cpu_backend::copy".into()),
                location: Some("src/lib.rs:79".into()),
                callers: Some("loss() ← mlp_adamw".into()),
            }
        );
    }

    /// The callers run from the allocating function of the user's out to the step,
    /// closures folded into their functions and vramtest's frames between them
    /// skipped; nothing past the step (the binary's `main`) is named.
    #[test]
    fn the_callers_are_the_users_functions_up_to_the_step() {
        let places = Places {
            package_dir: "/home/user/app".into(),
            cargo_home: Some("/home/u/.cargo".into()),
            step: "step".into(),
        };
        let lib = "/home/u/.cargo/registry/src/index.crates.io-1/burn-0.18.0/src/encoder.rs";
        let trace = |outermost: &[TraceFrame]| {
            let mut frames = vec![
                frame(
                    "alloc::raw_vec::RawVec<T>::allocate",
                    "/rustc/abc/raw_vec.rs",
                    10,
                ),
                frame("burn::nn::TransformerEncoder<B>::forward", lib, 80),
                frame("app::Model::logits", "/home/user/app/src/lib.rs", 40),
                frame("app::Model::loss", "/home/user/app/src/lib.rs", 60),
                frame(
                    "vram::step::{{closure}}",
                    "/home/user/app/tests/vram.rs",
                    12,
                ),
                frame(
                    "vramtest::step::Step::forward",
                    "/home/user/vramtest/src/step.rs",
                    5,
                ),
            ];
            frames.extend(outermost.iter().cloned());
            places.site(frames.into_iter())
        };
        let key = trace(&[
            frame("vram::step", "/home/user/app/tests/vram.rs", 12),
            frame("vram::main", "/home/user/app/tests/vram.rs", 30),
        ]);
        assert_eq!(key.location.as_deref(), Some("src/lib.rs:40"));
        assert_eq!(key.callers.as_deref(), Some("logits() ← loss() ← step"));
        // The step's closure is the step's.
        assert_eq!(
            trace(&[]).callers.as_deref(),
            Some("logits() ← loss() ← step")
        );
        // A trace cut short before the step says so.
        let cut = places.site(
            vec![
                frame("burn::nn::TransformerEncoder<B>::forward", lib, 80),
                frame("app::Model::logits", "/home/user/app/src/lib.rs", 40),
                frame("app::Model::loss", "/home/user/app/src/lib.rs", 60),
            ]
            .into_iter(),
        );
        assert_eq!(cut.callers.as_deref(), Some("logits() ← loss() ← …"));
    }

    #[test]
    fn code_outside_the_package_but_not_downloaded_is_the_users_too() {
        let places = Places {
            package_dir: "/home/user/ws/crates/app".into(),
            cargo_home: Some("/home/u/.cargo".into()),
            step: "step".into(),
        };
        let key = places.site(
            vec![frame(
                "model::Net::forward",
                "/home/user/ws/crates/model/src/net.rs",
                5,
            )]
            .into_iter(),
        );
        assert_eq!(
            key.location.as_deref(),
            Some("/home/user/ws/crates/model/src/net.rs:5")
        );
        assert_eq!(key.operation.as_deref(), Some("model::Net::forward"));
    }
}
