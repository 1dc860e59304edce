//! A test's report, built in one place from what the steps of its trial returned
//! ([`super::outcome`]): each field set once, the old figures from the one snapshot
//! the result was judged against.

use super::checkout::display_path;
use super::message::{self, Facts};
use super::outcome::{Steps, TrialEnd, Unmeasured};
use std::path::Path;
use vramtest_model::DeviceClass;
use vramtest_model::report::{Details, Status, TestReport};

/// What every report of a test says about the test itself.
pub(super) struct Head<'a> {
    /// The test target (`vram`).
    pub(super) target: &'a str,
    pub(super) test: &'a str,
    /// The source file, relative to the crate.
    pub(super) source: String,
    pub(super) line: u32,
    /// The device it ran on, if any.
    pub(super) class: Option<DeviceClass>,
    /// What the harness says about the run.
    pub(super) notes: &'a [String],
    /// The crate's directory: paths in messages are shown relative to it.
    pub(super) manifest_dir: &'a Path,
}

impl Head<'_> {
    /// A report of the test with `status` and nothing else known.
    fn report(&self, status: Status) -> TestReport {
        TestReport {
            source: self.source.clone(),
            line: self.line,
            device_class: self.class,
            notes: self.notes.to_vec(),
            ..TestReport::new(self.target, self.test, status)
        }
    }
}

/// The report of a trial that ended with `outcome`.
pub(super) fn build(head: &Head, outcome: &TrialEnd) -> TestReport {
    match outcome {
        TrialEnd::Unmeasured(Unmeasured::Skipped(reason)) => {
            let mut report = head.report(Status::Ignored);
            report.ignore(reason);
            report
        }
        TrialEnd::Unmeasured(Unmeasured::Failed { message, output }) => TestReport {
            message: message.clone(),
            output: output.clone(),
            ..head.report(Status::Failed)
        },
        TrialEnd::Measured(steps) => measured_report(head, steps),
    }
}

/// The report of a measured test: failed when its snapshot or the file
/// its verdict asks for cannot be read or written; else the verdict in words.
fn measured_report(head: &Head, steps: &Steps) -> TestReport {
    let Steps {
        measured,
        judged,
        recorded,
    } = steps;
    let first = &measured.first;
    let report = TestReport {
        details: Some(Details {
            point_millis: measured.point_millis.clone(),
            fit_millis: measured.fit_millis,
            ..Details::of_profile(&first.profile, first.pool.as_ref().map(|r| r.peaks))
        }),
        notes: head.notes.iter().chain(&measured.notes).cloned().collect(),
        ..head.report(Status::Failed)
    };
    let report = TestReport {
        snapshot: Some(judged.path.clone()),
        body: Some(judged.new.body.clone()),
        ..report
    };
    let verdict = match &judged.verdict {
        Ok(verdict) => verdict,
        Err(e) => {
            return TestReport {
                status: Status::SnapshotError,
                message: e.to_string(),
                ..report
            };
        }
    };
    let old = verdict.old.as_ref().map(|o| o.body.clone());
    let (sites, sites_error) = match &verdict.sites {
        Some(Ok(found)) => (Some(found.clone()), None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    let report = TestReport {
        old_peak_bytes: old.as_ref().map(|o| o.peak_bytes),
        old_body: old,
        notes: report
            .notes
            .into_iter()
            .chain(verdict.notes.iter().cloned())
            .collect(),
        sites,
        sites_error,
        ..report
    };
    // A file that cannot be written does not hide the verdict: what grew, and the
    // diff, come first; the write error after them.
    let (written, write_error) = match &recorded.written {
        Ok(written) => (written.as_ref(), None),
        Err(message) => (None, Some(message)),
    };
    let shown = |p: &Path| display_path(head.manifest_dir, p);
    let message = message::compose(&Facts {
        name: head.test,
        class: judged.new.body.device_class,
        decision: &verdict.decision,
        policy: &verdict.policy,
        body: &judged.new.body,
        profile: &first.profile,
        old: verdict.old.as_ref(),
        sites: verdict.sites.as_ref(),
        snapshot: shown(&judged.path),
        written: written.map(|w| (shown(&w.path), w.replaced)),
        kept: recorded.kept.clone(),
    });
    let (status, text) = match write_error {
        None => (verdict.decision.status, message.text),
        Some(e) if verdict.decision.status.is_failure() => {
            (verdict.decision.status, format!("{}\n{e}", message.text))
        }
        Some(e) => (Status::Failed, format!("{}\n{e}", message.text)),
    };
    TestReport {
        status,
        message: text,
        changes: message.changes,
        diff: message.diff,
        written: written.map(|w| w.path.clone()),
        ..report
    }
}

#[cfg(test)]
mod tests {
    use super::super::decide::decide;
    use super::super::files::{WriteError, Written};
    use super::super::outcome::{
        Judged, MeasuredPoint, MeasuredTest, Recorded, SnapshotVerdict, Unjudged,
    };
    use super::super::site_reruns::NoSites;
    use super::*;
    use std::path::PathBuf;
    use vramtest_model::env::Update;
    use vramtest_model::ledger::{self, Event};
    use vramtest_model::snapshot::{self, Info};
    use vramtest_model::{Body, Category, Phase, Policy, Snapshot};

    const PARAMS: u64 = 4096;

    /// A step that allocates `PARAMS` bytes of parameters.
    fn measured() -> MeasuredTest {
        let profile = ledger::profile(&[
            Event::PhaseStart(Phase::Params),
            Event::Alloc {
                id: 1,
                bytes: PARAMS,
            },
            Event::PhaseEnd,
        ]);
        MeasuredTest {
            first: MeasuredPoint {
                point: crate::harness::protocol::RunPoint::batch(1),
                wall: std::time::Duration::ZERO,
                profile: Box::new(profile),
                info: Info::default(),
                timeline: None,
                pool: None,
                cpu_micros: None,
                device_bytes: None,
            },
            sweep: None,
            prediction: None,
            point_millis: Vec::new(),
            fit_millis: None,
            regimes: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn head() -> Head<'static> {
        Head {
            target: "vram",
            test: "t",
            source: "tests/vram.rs".into(),
            line: 7,
            class: Some(DeviceClass::Cpu),
            notes: &[],
            manifest_dir: Path::new("/w"),
        }
    }

    /// The committed snapshot: the measured body with `params` bytes of parameters.
    fn committed(new: &Body, params: u64) -> snapshot::Parsed {
        let mut body = new.clone();
        body.category_peaks[Category::Parameters] = params;
        body.at_peak[Category::Parameters] = params;
        body.peak_bytes = params;
        for phase in &mut body.phases {
            phase.peak_bytes = phase.peak_bytes.min(params);
        }
        let snap = Snapshot {
            source: "tests/vram.rs".into(),
            test: "t".into(),
            info: Info::default(),
            body,
        };
        snapshot::parse(&snap.to_text()).unwrap()
    }

    /// The steps of `measured()` judged against `old` under `update`, `written` as
    /// recording went.
    fn steps(old: Option<snapshot::Parsed>, update: Update, written: Result<bool, &str>) -> Steps {
        let measured = measured();
        let body = Body::from_profile(&measured.first.profile, DeviceClass::Cpu);
        let path = PathBuf::from("/w/tests/snapshots/vram__t@cpu.snap");
        let decision = decide(
            old.as_ref().map(|o| &o.body),
            &body,
            &Policy::default(),
            update,
            false,
        );
        let written = match written {
            Ok(true) => Ok(Some(Written {
                path: path.clone(),
                replaced: false,
            })),
            Ok(false) => Ok(None),
            Err(e) => Err(WriteError(snapshot::FileError::Io {
                path: "t.snap".into(),
                source: std::io::Error::other(e),
            })),
        };
        Steps {
            measured,
            judged: Judged {
                path,
                new: Snapshot {
                    source: "tests/vram.rs".into(),
                    test: "t".into(),
                    info: Info::default(),
                    body,
                },
                verdict: Ok(SnapshotVerdict {
                    old,
                    policy: Policy::default(),
                    decision,
                    sites: Some(Err(NoSites::NoneFound)),
                    notes: vec!["another machine".into()],
                }),
            },
            recorded: Recorded {
                written,
                kept: None,
            },
        }
    }

    #[test]
    fn the_old_figures_are_the_committed_snapshots_even_when_it_was_written_over() {
        let m = measured();
        let new = Body::from_profile(&m.first.profile, DeviceClass::Cpu);
        let old = committed(&new, PARAMS / 2);
        let s = steps(Some(old.clone()), Update::Always, Ok(true));
        let r = build(&head(), &TrialEnd::Measured(Box::new(s)));
        assert_eq!(r.status, Status::Passed, "{}", r.message);
        assert_eq!(r.old_body.as_ref(), Some(&old.body));
        assert_eq!(r.old_peak_bytes, Some(PARAMS / 2));
        assert_eq!(r.body.as_ref(), Some(&new));
        assert_eq!(r.body.as_ref().map(|b| b.peak_bytes), Some(PARAMS));
        assert_eq!(r.written, r.snapshot, "the snapshot itself was written");
        assert_eq!(r.sites_error.as_deref(), Some("the last re-run found none"));
        assert_eq!(r.notes, ["another machine"]);
        assert_eq!(r.details.as_ref().map(|d| d.allocations), Some(1));
        assert!(!r.changes.is_empty(), "the peak moved");
        assert_eq!((r.source.as_str(), r.line), ("tests/vram.rs", 7));
    }

    #[test]
    fn what_could_not_be_done_fails_with_what_was_known_by_then() {
        let m = measured();
        let new = Body::from_profile(&m.first.profile, DeviceClass::Cpu);
        // The verdict's file could not be written: failed, the judgement's facts kept
        // and said first (what moved), the write error after them.
        let s = steps(Some(committed(&new, 1)), Update::Always, Err("disk full"));
        let r = build(&head(), &TrialEnd::Measured(Box::new(s)));
        assert_eq!(r.status, Status::Failed);
        assert!(
            r.message
                .ends_with("\ncannot write the snapshot: t.snap: disk full")
                && r.message.len() > "\ncannot write the snapshot: t.snap: disk full".len(),
            "{}",
            r.message
        );
        assert_eq!((r.old_peak_bytes, r.written.as_ref()), (Some(1), None));
        assert!(!r.changes.is_empty(), "what moved is kept");
        assert!(r.fails());
        // The snapshot cannot be read: a snapshot error, with the new body.
        let mut s = steps(None, Update::New, Ok(false));
        s.judged.verdict = Err(Unjudged::Invalid(snapshot::FileError::Io {
            path: "t.snap".into(),
            source: std::io::Error::other("line 3: oops"),
        }));
        let r = build(&head(), &TrialEnd::Measured(Box::new(s)));
        assert_eq!(r.status, Status::SnapshotError);
        assert_eq!(r.message, "invalid snapshot: t.snap: line 3: oops");
        assert_eq!(r.body.as_ref(), Some(&new));
        assert!(r.snapshot.is_some() && r.old_body.is_none() && r.notes.is_empty());
    }

    #[test]
    fn a_test_not_measured_says_why() {
        let skipped = TrialEnd::Unmeasured(Unmeasured::Skipped("no CUDA driver".into()));
        let r = build(&head(), &skipped);
        assert_eq!(r.status, Status::Ignored);
        assert_eq!(r.ignore_reason.as_deref(), Some("no CUDA driver"));
        let crashed = TrialEnd::Unmeasured(Unmeasured::Failed {
            message: "t crashed before reporting a result".into(),
            output: Some("segfault".into()),
        });
        let r = build(&head(), &crashed);
        assert_eq!(r.status, Status::Failed);
        assert_eq!(r.message, "t crashed before reporting a result");
        assert_eq!(r.output.as_deref(), Some("segfault"));
        assert!(r.body.is_none() && r.details.is_none());
    }
}
