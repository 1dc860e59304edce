//! The machine-readable result of one test, written by the harness for
//! `cargo vramtest` (one JSON file per test in `VRAMTEST_REPORT_DIR`).

use crate::policy::{Finding, Movement, Subject};
use crate::profile::LeakSite;
use crate::snapshot::{Body, DeviceClass};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The report format's version.
pub const REPORT_SCHEMA: u32 = 1;

/// A report read back whose `schema` is not [`REPORT_SCHEMA`]: written by another
/// release, which this one cannot read soundly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a test report of schema {}, and this release reads schema {REPORT_SCHEMA} only",
    found.map_or_else(|| "(none)".to_owned(), |s| s.to_string())
)]
pub struct UnknownSchema {
    /// The report's `schema` (`None`: it has none, or not a number).
    pub found: Option<u64>,
}

/// Checks the `schema` of a report read back as JSON before it is read as a
/// [`TestReport`]: a report of another release is named as such, not as a malformed one.
pub fn check_schema(report: &serde_json::Value) -> Result<(), UnknownSchema> {
    let found = report.get("schema").and_then(serde_json::Value::as_u64);
    if found == Some(u64::from(REPORT_SCHEMA)) {
        Ok(())
    } else {
        Err(UnknownSchema { found })
    }
}

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Matches its snapshot within every limit.
    Passed,
    /// Shrank beyond a limit: passes; accepting locks the gain in.
    Improved,
    /// No snapshot existed; one was written (`.snap` or `.snap.new`).
    New,
    /// Grew beyond a limit or over budget.
    Regressed,
    /// No snapshot and none may be written (CI / `--check`).
    Missing,
    /// The test returned an error, panicked or crashed.
    Failed,
    /// Skipped (`ignore`, or no device to run on).
    Ignored,
    /// The snapshot file is malformed.
    SnapshotError,
}

impl Status {
    /// Whether this status fails the run.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Status::Regressed | Status::Missing | Status::Failed | Status::SnapshotError
        )
    }
    /// The status's name in a report file (`snapshot_error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Improved => "improved",
            Status::New => "new",
            Status::Regressed => "regressed",
            Status::Missing => "missing",
            Status::Failed => "failed",
            Status::Ignored => "ignored",
            Status::SnapshotError => "snapshot_error",
        }
    }
}

/// One changed figure, in numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureChange {
    /// `peak`, a category name, or `leak`.
    pub subject: Subject,
    /// The snapshot's bytes.
    pub old: u64,
    /// The new result's bytes.
    pub new: u64,
    /// The limit it was held to, in the configuration's syntax (`+2% | 1048576`, `allow`).
    pub limit: String,
    /// `regressed`, `improved` or `within`.
    pub movement: Movement,
    /// The human sentence (the failure message line).
    pub message: String,
}

impl From<&Finding> for FigureChange {
    /// The finding in numbers, with its sentence.
    fn from(f: &Finding) -> FigureChange {
        FigureChange {
            subject: f.subject,
            old: f.old,
            new: f.new,
            limit: String::from(f.limit),
            movement: f.movement,
            message: f.to_string(),
        }
    }
}

/// The result of one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestReport {
    /// The report format's version ([`REPORT_SCHEMA`]).
    pub schema: u32,
    /// The test target (`vram`).
    pub target: String,
    /// The test's name as the harness lists it.
    pub test: String,
    /// The source file, relative to the crate.
    pub source: String,
    /// The line of the `#[vramtest]` function.
    pub line: u32,
    /// The kind of device the test ran on (absent when it did not run).
    pub device_class: Option<DeviceClass>,
    /// How the test ended.
    pub status: Status,
    /// The new result's body (absent when the test did not measure).
    pub body: Option<Body>,
    /// The committed snapshot's peak, when there is one (`old_body`'s peak).
    pub old_peak_bytes: Option<u64>,
    /// The committed snapshot's body the result was judged against, when there is
    /// one: read by the harness before the run wrote anything, so that under
    /// `VRAMTEST_UPDATE=always` it still holds the old figures. Every old figure a
    /// report shows comes from here.
    #[serde(default)]
    pub old_body: Option<Body>,
    /// Every figure that moved, regressions first.
    pub changes: Vec<FigureChange>,
    /// The full human message (failure text, improvement note, error).
    pub message: String,
    /// A unified diff of old and new bodies, when both exist and differ.
    pub diff: Option<String>,
    /// The snapshot file.
    pub snapshot: Option<PathBuf>,
    /// A `.snap.new` (or `.snap`) this run wrote.
    pub written: Option<PathBuf>,
    /// The test's own output, when it failed.
    pub output: Option<String>,
    /// What the measurement saw beyond the snapshot body (absent when it did not measure).
    #[serde(default)]
    pub details: Option<Details>,
    /// Where the memory alive at the peak was allocated, when the run captured call
    /// sites (`show --sites`, a CPU regression).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites: Option<crate::sites::Sites>,
    /// Why call sites were asked for and not found (a re-run that failed or ran out
    /// of time): a sentence that reads after "call sites: ".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites_error: Option<String>,
    /// Why an ignored test was ignored (`None` when its attribute gives no reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_reason: Option<String>,
    /// What the harness says about the run rather than about the test, one sentence
    /// each, without a `note: ` prefix (the package tested is not the one the binary
    /// was built in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The point of a sweep over named axes this report measured, when the run measured
    /// one point (`VRAMTEST_MEASURE_AT`, `cargo vramtest measure`) instead of judging
    /// the test: `body` is that point's measurement, nothing was compared with the
    /// snapshot, and nothing was written beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_at: Option<crate::axes::Point>,
}

impl TestReport {
    /// The report of `test` in `target` with `status`, before anything is known
    /// about it: every report starts here, its other fields filled in as the run
    /// learns them.
    pub fn new(target: impl Into<String>, test: impl Into<String>, status: Status) -> TestReport {
        TestReport {
            schema: REPORT_SCHEMA,
            target: target.into(),
            test: test.into(),
            source: String::new(),
            line: 0,
            device_class: None,
            status,
            body: None,
            old_peak_bytes: None,
            old_body: None,
            changes: Vec::new(),
            message: String::new(),
            diff: None,
            snapshot: None,
            written: None,
            output: None,
            details: None,
            sites: None,
            sites_error: None,
            ignore_reason: None,
            notes: Vec::new(),
            measured_at: None,
        }
    }

    /// Marks the report ignored for `reason` (empty: none given); the message says
    /// the reason, or `ignored`.
    pub fn ignore(&mut self, reason: &str) {
        self.status = Status::Ignored;
        self.ignore_reason = (!reason.is_empty()).then(|| reason.to_owned());
        self.message = if reason.is_empty() { "ignored" } else { reason }.to_owned();
    }

    /// Whether this result fails the run: a failing status, or a new result left
    /// pending for review (`.snap.new`), as insta fails an unreviewed snapshot.
    pub fn fails(&self) -> bool {
        self.status.is_failure() || (self.status == Status::New && self.is_pending())
    }

    /// Whether the run left a `.snap.new` behind.
    pub fn is_pending(&self) -> bool {
        self.written
            .as_ref()
            .is_some_and(|p| p.extension().is_some_and(|e| e == "new"))
    }
}

impl Details {
    /// A measured `profile`'s details, with the CUDA pool model's peaks of a CPU run
    /// (`predicted_pool`), before a sweep's timings are known.
    pub fn of_profile(
        profile: &crate::profile::Profile,
        predicted_pool: Option<crate::pool::PoolPeaks>,
    ) -> Details {
        Details {
            baseline_bytes: profile.baseline_bytes,
            allocations: profile.allocations,
            reserved_peak_bytes: profile.reserved_peak_bytes,
            leak_sites: profile.leak_sites.clone(),
            predicted_pool,
            point_millis: Vec::new(),
            fit_millis: None,
        }
    }
}

/// Figures reported apart from the snapshot: they vary with the machine or the process,
/// so they are never compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Details {
    /// Bytes alive when the test started (the harness's own, a CUDA context): never
    /// charged to a category.
    pub baseline_bytes: u64,
    /// Allocations observed (0 at `phase` fidelity, which sees none).
    pub allocations: u64,
    /// For pooled GPU memory: the highest reserved (not only used) bytes.
    pub reserved_peak_bytes: Option<u64>,
    /// Where a leak was allocated, largest first (empty when there is none).
    #[serde(default)]
    pub leak_sites: Vec<LeakSite>,
    /// A CPU run's allocations replayed through the CUDA pool model
    /// ([`crate::pool::CudaPool::default`]): what the step is predicted to allocate and
    /// reserve on a GPU, to set beside a CUDA run's measured figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_pool: Option<crate::pool::PoolPeaks>,
    /// A sweep's child processes: each one's wall time in milliseconds, in the points'
    /// order (empty for a test without a sweep).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub point_millis: Vec<u64>,
    /// A sweep over named axes: the wall time of its fit, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_millis: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_of_an_earlier_release_still_reads() {
        // Written before `notes`, `ignore_reason`, `sites_error` and `old_body` existed.
        let mut old = serde_json::to_value(TestReport::new("vram", "t", Status::Passed)).unwrap();
        let fields = old.as_object_mut().unwrap();
        for key in [
            "notes",
            "ignore_reason",
            "sites_error",
            "details",
            "sites",
            "old_body",
        ] {
            fields.remove(key);
        }
        let read: TestReport = serde_json::from_value(old).unwrap();
        assert_eq!(read, TestReport::new("vram", "t", Status::Passed));
    }

    #[test]
    fn an_ignored_report_keeps_its_reason_apart_from_the_message() {
        let mut report = TestReport::new("vram", "t", Status::Failed);
        report.ignore("too slow for CI");
        assert_eq!(report.status, Status::Ignored);
        assert_eq!(report.ignore_reason.as_deref(), Some("too slow for CI"));
        assert_eq!(report.message, "too slow for CI");
        report.ignore("");
        assert_eq!(report.ignore_reason, None);
        assert_eq!(report.message, "ignored");
        assert!(!report.fails());
    }

    #[test]
    fn notes_and_errors_travel_through_json() {
        let mut report = TestReport::new("vram", "t", Status::Regressed);
        report
            .notes
            .push("test binary built in a, testing b".into());
        report.sites_error = Some("cut short after 1s".into());
        let text = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<TestReport>(&text).unwrap(), report);
    }

    #[test]
    fn a_report_of_another_schema_is_named_with_both_schemas() {
        let mut report =
            serde_json::to_value(TestReport::new("vram", "t", Status::Passed)).unwrap();
        assert_eq!(check_schema(&report), Ok(()));
        report["schema"] = (REPORT_SCHEMA + 6).into();
        let e = check_schema(&report).unwrap_err();
        assert_eq!(e.found, Some(u64::from(REPORT_SCHEMA) + 6));
        assert_eq!(
            e.to_string(),
            format!(
                "a test report of schema {}, and this release reads schema {REPORT_SCHEMA} only",
                REPORT_SCHEMA + 6
            )
        );
        report.as_object_mut().unwrap().remove("schema");
        let e = check_schema(&report).unwrap_err();
        assert_eq!(e.found, None);
        assert!(
            e.to_string().starts_with("a test report of schema (none),"),
            "{e}"
        );
        report["schema"] = "1".into();
        assert_eq!(check_schema(&report), Err(UnknownSchema { found: None }));
    }
}
