//! What each step of a trial returns: measuring gives [`MeasuredTest`] (or why not),
//! judging a [`Judged`], recording the files a [`Recorded`]. Plain values: the report
//! is built from them once, by [`super::report::build`].

use super::decide::Decision;
use super::files::{WriteError, Written};
use super::site_reruns::NoSites;
use crate::harness::protocol::RunPoint;
use std::path::PathBuf;
use vramtest_chart::Timeline;
use vramtest_model::pool::{PoolReplay, Prediction};
use vramtest_model::sites::Sites;
use vramtest_model::snapshot::{self, Info};
use vramtest_model::sweep::Sweep;
use vramtest_model::{Policy, Profile, Snapshot};

/// One point's measurement: where in the sweep it is, its child process's wall time,
/// its profile, what the device reported, its timeline, the pool model's peaks.
pub(super) struct MeasuredPoint {
    pub(super) point: RunPoint,
    pub(super) wall: std::time::Duration,
    pub(super) profile: Box<Profile>,
    pub(super) info: Info,
    pub(super) timeline: Option<Box<Timeline>>,
    pub(super) pool: Option<PoolReplay>,
    /// The CPU time its step took, in microseconds, when measured.
    pub(super) cpu_micros: Option<u64>,
    /// On a device: its memory, in bytes (`None` on the CPU).
    pub(super) device_bytes: Option<u64>,
}

/// A measured test: the point judged against the snapshot (the first batch size), the
/// sweep's fit over every point, and a CPU run's GPU prediction.
pub(super) struct MeasuredTest {
    pub(super) first: MeasuredPoint,
    /// The sweep (over named axes, or a batch sweep's one axis), fitted, with its
    /// target (`None` without a sweep).
    pub(super) sweep: Option<Sweep>,
    /// Every batch size's pool peaks (`None` when a point has none, as on a GPU).
    pub(super) prediction: Option<Prediction>,
    /// A sweep's child processes' wall times, in milliseconds (empty without one).
    pub(super) point_millis: Vec<u64>,
    /// A sweep: its fit's wall time, in milliseconds.
    pub(super) fit_millis: Option<u64>,
    /// Where its flagged figures miss: the level of an axis unlike the others, per
    /// combination of levels.
    pub(super) regimes: Vec<(
        vramtest_model::levers::LeverVariant,
        vramtest_model::regimes::Regime,
    )>,
    /// What the fit says beside its figures (a flagged figure).
    pub(super) notes: Vec<String>,
}

/// Why a test has no measurement.
pub(super) enum Unmeasured {
    /// It does not run here, or it skipped itself: the reason (empty: none given).
    Skipped(String),
    /// It failed, crashed or could not start, or its sweep cannot be fitted: the
    /// message, and the child's output when the child ran.
    Failed {
        message: String,
        output: Option<String>,
    },
}

/// A measurement judged against its snapshot.
pub(super) struct Judged {
    /// The snapshot file.
    pub(super) path: PathBuf,
    /// The new result as a snapshot holds it (its `info` with the call sites found).
    pub(super) new: Snapshot,
    /// The verdict, or why the committed snapshot cannot be read.
    pub(super) verdict: Result<SnapshotVerdict, Unjudged>,
}

/// Why a measurement has no verdict: its committed snapshot cannot be used. The
/// report says it in words, once.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unjudged {
    /// The snapshot file holds another test's snapshot.
    #[error(
        "{path}: holds the snapshot of `{holder}`, not of `{test}`: two tests share one snapshot file (hint: rename one of them)"
    )]
    Shared {
        /// The file, as messages show it.
        path: String,
        /// The test whose snapshot it holds.
        holder: String,
        /// The test judged.
        test: String,
    },
    /// The snapshot file cannot be read or parsed.
    #[error("invalid snapshot: {0}")]
    Invalid(#[from] snapshot::FileError),
}

/// The verdict on a measurement whose snapshot could be read.
pub(super) struct SnapshotVerdict {
    /// The committed snapshot, when there is one: the one source of the old figures.
    pub(super) old: Option<snapshot::Parsed>,
    /// The limits the result was held to.
    pub(super) policy: Policy,
    pub(super) decision: Decision,
    /// Call sites, when this run wanted them.
    pub(super) sites: Option<Result<Sites, NoSites>>,
    /// Notes on the measurement: the snapshot was recorded on another machine (see
    /// `trial::machine_note`), CPU-only memory over the tensors (`trial::tensors_note`).
    pub(super) notes: Vec<String>,
}

/// What recording a verdict wrote: nothing when there was nothing to record.
pub(super) struct Recorded {
    /// The snapshot or pending result written, or why it could not be.
    pub(super) written: Result<Option<Written>, WriteError>,
    /// Why a stale pending result was kept.
    pub(super) kept: Option<String>,
}

impl Recorded {
    /// Nothing written, nothing kept.
    pub(super) fn nothing() -> Recorded {
        Recorded {
            written: Ok(None),
            kept: None,
        }
    }
}

/// How a trial ended.
pub(super) enum TrialEnd {
    Unmeasured(Unmeasured),
    Measured(Box<Steps>),
}

/// What each step of a measured test returned.
pub(super) struct Steps {
    pub(super) measured: MeasuredTest,
    /// The judgement.
    pub(super) judged: Judged,
    pub(super) recorded: Recorded,
}
