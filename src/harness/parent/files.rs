//! The files a verdict writes: the snapshot or its pending result, a stale pending
//! result cleared, the run's report for `cargo vramtest`, the snapshot's entry in
//! insta's references file, the timeline kept beside the result.

use super::decide::{Decision, Write};
use std::path::{Path, PathBuf};
use vramtest_chart::Timeline;
use vramtest_model::pool::Prediction;
use vramtest_model::report::TestReport;
use vramtest_model::{Body, Snapshot, snapshot};

/// Where a run's reports and snapshot references go, when asked.
pub(super) struct Outputs {
    /// One JSON report per test, for `cargo vramtest`.
    pub(super) reports: Option<Reports>,
    /// `INSTA_SNAPSHOT_REFERENCES_FILE`: every snapshot path the run used.
    pub(super) references: Option<PathBuf>,
    /// Under GitHub Actions and plain `cargo test`: what the harness prints of a test
    /// (its failure, with the test's own output) goes between `::stop-commands::`
    /// markers, so the runner obeys no `::error` or `::add-mask::` a test printed.
    /// (`cargo vramtest` stops them in what it shows itself.)
    pub(super) inert: bool,
}

/// The `cargo vramtest` process that started this binary (`VRAMTEST_STARTED_BY`), if
/// one did: set once at the start of the run.
static STARTED_BY: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();

/// Records which process started this run (`None`: plain `cargo test` or nextest).
pub(super) fn set_started_by(pid: Option<u32>) {
    let _ = STARTED_BY.set(pid);
}

/// Ends this process, having written nothing, when the `cargo vramtest` that started it
/// is gone (its parent is another process now): it was killed, and what this run would
/// write (a snapshot rewritten, a `.snap.new`) is what nobody asked for any more. Called
/// before every file the run writes.
pub(super) fn stop_if_orphaned() {
    if let Some(pid) = orphaned() {
        eprintln!(
            "error: cargo vramtest (process {pid}) that started this run is gone: nothing is written"
        );
        std::process::exit(1);
    }
}

/// The pid of the `cargo vramtest` that started this run, when it is no longer this
/// process's parent.
fn orphaned() -> Option<u32> {
    let pid = (*STARTED_BY.get()?)?;
    #[cfg(unix)]
    {
        // SAFETY: getppid(2) has no preconditions and cannot fail.
        let parent = unsafe { libc::getppid() };
        (u32::try_from(parent).ok() != Some(pid)).then_some(pid)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        None
    }
}

/// What [`write_result`] wrote.
pub(super) struct Written {
    pub(super) path: PathBuf,
    /// It replaced a pending result that held something else.
    pub(super) replaced: bool,
}

/// A snapshot or pending result that cannot be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the snapshot: {0}")]
pub(super) struct WriteError(#[from] pub(super) snapshot::FileError);

/// Writes `snapshot` where `decision` says (the `.snap` itself or the pending
/// `.snap.new` beside it), atomically.
pub(super) fn write_result(
    decision: &Decision,
    snap: &Path,
    snapshot: &Snapshot,
) -> Result<Option<Written>, WriteError> {
    stop_if_orphaned();
    let pending = snapshot::pending_path(snap);
    let written = match decision.write {
        Some(Write::Snapshot) => Written {
            path: snap.to_path_buf(),
            replaced: false,
        },
        Some(Write::Pending) => Written {
            replaced: differs(&pending, &snapshot.body),
            path: pending,
        },
        None => return Ok(None),
    };
    snapshot::write_atomic(&written.path, &snapshot.to_text())?;
    Ok(Some(written))
}

/// A pending result that this run makes stale: removed when it holds exactly this
/// run's result (nothing is lost), else kept (it may be a result under review, say
/// one downloaded from CI) and named in the returned note.
pub(super) fn clear_pending(pending: &Path, body: &Body, shown: &str) -> Option<String> {
    stop_if_orphaned();
    match snapshot::read(pending) {
        Ok(None) => None,
        Ok(Some(p)) if p.body == *body => {
            let _ = std::fs::remove_file(pending);
            None
        }
        Ok(Some(_)) => Some(format!(
            "stale pending result kept: {shown} differs from this run's result (hint: review it with `cargo vramtest review`, or delete it)"
        )),
        Err(e) => Some(format!(
            "pending result kept: {e} (hint: delete it, or rerun to write a new one)"
        )),
    }
}

/// Whether a pending file exists and holds something other than `body`.
fn differs(pending: &Path, body: &Body) -> bool {
    match snapshot::read(pending) {
        Ok(None) => false,
        Ok(Some(p)) => p.body != *body,
        Err(_) => true,
    }
}

/// Where the reports go: a pipe `cargo vramtest` handed down (`VRAMTEST_REPORT_FD`),
/// which no test's process inherits, or a directory (`VRAMTEST_REPORT_DIR`).
pub(super) enum Reports {
    /// The pipe, and whether the points' progress goes into it too
    /// (`VRAMTEST_PROGRESS`).
    Pipe(std::sync::Mutex<std::fs::File>, bool),
    Dir(PathBuf),
}

impl Reports {
    /// The reports' destination the environment names; the pipe is taken at once, so
    /// no child started later inherits it.
    pub(super) fn of(
        env: &vramtest_model::env::HarnessEnv,
    ) -> Result<Option<Reports>, crate::harness::fd::FdError> {
        if let Some(fd) = env.report_fd {
            let file = crate::harness::fd::take(fd, "report")?;
            let pipe = std::sync::Mutex::new(file);
            return Ok(Some(Reports::Pipe(pipe, env.progress)));
        }
        Ok(env.report_dir.clone().map(Reports::Dir))
    }

    /// Writes `report`: one line in the pipe, or one file per test in the directory; a
    /// warning when it cannot.
    pub(super) fn write(&self, report: &TestReport) {
        stop_if_orphaned();
        let text = serde_json::to_string(report).expect("reports serialize");
        let written = match self {
            Reports::Pipe(pipe, _) => {
                use std::io::Write as _;
                let mut pipe = pipe.lock().unwrap_or_else(|e| e.into_inner());
                pipe.write_all(format!("{text}\n").as_bytes())
                    .map_err(|e| e.to_string())
            }
            Reports::Dir(dir) => {
                let file = dir.join(format!(
                    "{}__{}.json",
                    report.target,
                    report.test.replace("::", "__")
                ));
                snapshot::write_atomic(&file, &text).map_err(|e| e.to_string())
            }
        };
        if let Err(e) = written {
            eprintln!("warning: cannot write the report: {e}");
        }
    }
}

impl Reports {
    /// Writes a point's progress as a line of the pipe, for `cargo vramtest` to show
    /// while the test runs, when it asked for it; nothing with a report directory or
    /// without `VRAMTEST_PROGRESS`, and nothing said when the
    /// line cannot be written (the report that follows says what matters).
    pub(super) fn progress(&self, progress: &vramtest_model::progress::PointProgress) {
        if let Reports::Pipe(pipe, true) = self {
            use std::io::Write as _;
            let mut pipe = pipe.lock().unwrap_or_else(|e| e.into_inner());
            let _ = pipe.write_all(progress.to_line().as_bytes());
        }
    }
}

/// Appends `snap` to insta's references file; a warning when it cannot.
pub(super) fn append_reference(refs: &Path, snap: &Path) {
    stop_if_orphaned();
    use std::io::Write as _;
    // One `write_all` of a whole line on an append-mode file: parallel trials and
    // processes do not interleave their lines.
    let line = format!("{}\n", snap.display());
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(refs)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!(
            "warning: cannot record {} in {}: {e}",
            snap.display(),
            refs.display()
        );
    }
}

/// The target directory the running test binary was built in: the nearest ancestor
/// of the executable that cargo marked with `CACHEDIR.TAG`.
fn target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
}

/// Writes `timeline` where `cargo vramtest` looks for the result of `snap`. A timeline
/// that cannot be written is a warning: the verdict does not depend on it.
pub(super) fn keep_timeline(timeline: &Timeline, snap: &Path) {
    let text = serde_json::to_string(timeline).expect("timelines serialize");
    keep(snapshot::timeline_path, &text, "timeline", snap);
}

/// Writes a CPU run's GPU prediction beside its timeline; a warning when it cannot.
pub(super) fn keep_prediction(prediction: &Prediction, snap: &Path) {
    let text = serde_json::to_string(prediction).expect("predictions serialize");
    keep(snapshot::prediction_path, &text, "prediction", snap);
}

/// Writes `text` at `path_of(target dir, snap)`, under the target directory the test
/// binary was built in (nothing outside one).
fn keep(path_of: fn(&Path, &Path) -> PathBuf, text: &str, what: &str, snap: &Path) {
    stop_if_orphaned();
    let Some(target) = target_dir() else {
        return;
    };
    let path = path_of(&target, snap);
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            snapshot::write_atomic(&path, text).map_err(|e| std::io::Error::other(e.to_string()))
        });
    if let Err(e) = written {
        eprintln!("warning: cannot keep the {what} {}: {e}", path.display());
    }
}
