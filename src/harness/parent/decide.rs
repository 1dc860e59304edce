//! The decision: what a new result means against the committed snapshot, and which
//! file to write. Pure: [`super::files`] does the I/O, [`super::message`] the words.

use vramtest_model::env::Update;
use vramtest_model::policy::{Comparison, check_budget, check_leak};
use vramtest_model::report::Status;
use vramtest_model::sites::Site;
use vramtest_model::sweep::{TargetCheck, compare_levels, show_axes};
use vramtest_model::{Body, Category, Policy, Subject, Verdict, compare};

/// The call sites a snapshot's `info` keeps, per category.
pub type SnapshotSites = [(Category, Vec<Site>)];

/// Which file a result goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Overwrite the `.snap` (update mode `always`).
    Snapshot,
    /// Write `.snap.new` for review.
    Pending,
}

/// The outcome for one result.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub status: Status,
    pub write: Option<Write>,
    /// A `.snap.new` is stale: the result matches the snapshot. The harness removes
    /// it only when it holds this very result; any other is kept and named.
    pub remove_pending: bool,
    pub comparison: Option<Comparison>,
    /// Peak and budget, when the budget is exceeded.
    pub over_budget: Option<(u64, u64)>,
    /// The sweep itself changed (its axes, or a sweep added or removed): the figures
    /// are not comparable, the snapshot must be accepted again.
    pub sweep_changed: Option<String>,
    /// A sweep: at its target (or its largest point) against the snapshot's, and the
    /// budget.
    pub target: TargetCheck,
}

/// Decides the status of `new` against `old` (the committed snapshot, if any).
/// In `check` mode (CI) a missing snapshot fails; `update` is never `Always` there.
pub fn decide(
    old: Option<&Body>,
    new: &Body,
    policy: &Policy,
    update: Update,
    check: bool,
) -> Decision {
    let mut target = check_target(old, new, policy);
    let Some(old) = old else {
        let over_budget = check_budget(new, policy);
        let (status, write) = match update {
            Update::Always => (Status::New, Some(Write::Snapshot)),
            Update::New if check => (Status::Missing, Some(Write::Pending)),
            Update::New => (Status::New, Some(Write::Pending)),
            Update::No => (Status::Missing, None),
        };
        return Decision {
            status: if over_budget.is_some()
                || check_leak(new, policy).is_some()
                || target.over_budget.is_some()
            {
                Status::Regressed
            } else {
                status
            },
            write,
            remove_pending: false,
            comparison: None,
            over_budget,
            sweep_changed: None,
            target,
        };
    };
    let mut comparison = compare(old, new, policy);
    let sweep_changed = sweep_changed(old, new);
    if sweep_changed.is_some() {
        set_aside(&mut comparison, &mut target);
    } else if let Some(note) = migrated_note(old) {
        comparison.notes.push(note);
    }
    if comparison.predates_cpu_only {
        // The snapshot's sweep fitted CPU-only memory into its peak and workspace.
        target.findings.retain(|f| {
            f.figure != vramtest_model::sweep::PEAK && f.figure != Category::Workspace.as_str()
        });
    }
    if sweep_changed.is_some() || target.fails() {
        comparison.verdict = Verdict::Regressed;
    }
    let over_budget = comparison.over_budget;
    let (status, write) = match (comparison.verdict, update) {
        (Verdict::Unchanged, _) => (Status::Passed, None),
        // `always` records every difference; budgets still fail.
        (_, Update::Always)
            if !comparison.fails_whatever_the_snapshot() && target.over_budget.is_none() =>
        {
            (Status::Passed, Some(Write::Snapshot))
        }
        // A snapshot recorded before CPU-only memory was kept apart passes on the
        // figures it can be compared on; the migrated result is left for review.
        (Verdict::WithinLimits, Update::New) if comparison.predates_cpu_only => {
            (Status::Passed, Some(Write::Pending))
        }
        (Verdict::WithinLimits, _) => (Status::Passed, None),
        (Verdict::Improved, Update::New) => (Status::Improved, Some(Write::Pending)),
        (Verdict::Improved, _) => (Status::Improved, None),
        (Verdict::Regressed, Update::No) => (Status::Regressed, None),
        (Verdict::Regressed, _) => (Status::Regressed, Some(Write::Pending)),
    };
    Decision {
        status,
        write,
        // A passing result makes an older pending file stale (it may hold a regression
        // that was fixed since, or a result under review): the harness deals with it,
        // unless nothing may be written at all.
        remove_pending: write.is_none() && !status.is_failure() && update != Update::No,
        comparison: Some(comparison),
        over_budget,
        sweep_changed,
        target,
    }
}

/// The note of a snapshot whose sweep was read from a batch sweep's older `scaling` (a
/// line per figure): compared as it is, rewritten in the new shape only when accepted.
fn migrated_note(old: &Body) -> Option<String> {
    let sweep = old.sweep().filter(|s| s.migrated)?;
    Some(format!(
        "note: scaling: the snapshot holds a batch sweep's older scaling (a line per figure over batch = {:?}), read as a sweep over the axis `batch` and compared; accept this result to record the new shape (VRAMTEST_UPDATE=always)",
        sweep
            .axes
            .get(vramtest_model::sweep::BATCH)
            .cloned()
            .unwrap_or_default()
    ))
}

/// A sweep at its target (or its largest point) against the snapshot's, under
/// `policy`'s limits and budget.
fn check_target(old: Option<&Body>, new: &Body, policy: &Policy) -> TargetCheck {
    let Some(sweep) = new.sweep() else {
        return TargetCheck::default();
    };
    let limit_of = |c: Option<Category>| policy.limit(c.map_or(Subject::Peak, Subject::Category));
    compare_levels(old.and_then(Body::sweep), sweep, limit_of, policy.budget)
}

/// A changed sweep: its figures were measured at other points than the snapshot's, so
/// none is compared (the change is said first and alone). What fails whatever the
/// snapshot holds (the budget, the target's budget, the leak ceiling) is kept.
fn set_aside(comparison: &mut Comparison, target: &mut TargetCheck) {
    let over_ceiling = comparison.over_leak_ceiling.is_some();
    comparison
        .findings
        .retain(|f| over_ceiling && f.subject == Subject::Leak);
    comparison.notes.clear();
    comparison.incomparable = None;
    *target = TargetCheck {
        over_budget: target.over_budget,
        ..TargetCheck::default()
    };
}

/// A sweep added or removed, or its grid changed: the figures are not comparable.
fn sweep_changed(old: &Body, new: &Body) -> Option<String> {
    match (old.sweep(), new.sweep()) {
        (Some(o), Some(n)) if o.axes != n.axes => Some(format!(
            "the sweep's axes changed from {} to {}: accept the snapshot again",
            show_axes(&o.axes),
            show_axes(&n.axes)
        )),
        (Some(o), None) => Some(format!(
            "the snapshot holds a sweep ({}) and this run has none: accept it again to drop the sweep",
            show_axes(&o.axes)
        )),
        (None, Some(n)) => Some(format!(
            "this run is a sweep ({}) and the snapshot is not: accept it again to record the sweep",
            show_axes(&n.axes)
        )),
        _ => None,
    }
}

/// `decision` once the call sites are known: `VRAMTEST_UPDATE=always` also records
/// new call sites (`new_sites`, not empty) in a snapshot whose figures did not change,
/// its `info` only. `old` is the committed snapshot's body and sites.
pub fn record_new_sites(
    decision: Decision,
    update: Update,
    old: Option<(&Body, &SnapshotSites)>,
    new: &Body,
    new_sites: &SnapshotSites,
) -> Decision {
    let sites_moved = old.is_some_and(|(body, sites)| body == new && sites != new_sites);
    if decision.write.is_none()
        && decision.status == Status::Passed
        && update == Update::Always
        && !new_sites.is_empty()
        && sites_moved
    {
        return Decision {
            write: Some(Write::Snapshot),
            ..decision
        };
    }
    decision
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use vramtest_model::{CategoryBytes, DeviceClass, Fidelity};

    /// A CPU body with 1 MiB of parameters and `activations`.
    pub(crate) fn body(activations: u64) -> Body {
        let peaks = CategoryBytes::from([
            (Category::Activations, activations),
            (Category::Parameters, 1 << 20),
        ]);
        Body {
            schema: 1,
            device_class: DeviceClass::Cpu,
            fidelity: Fidelity::Exact,
            iterations: 3,
            peak_bytes: peaks.total(),
            reserved_bytes: None,
            peak_phase: None,
            peak_iteration: None,
            at_peak: peaks,
            category_peaks: peaks,
            phases: vec![],
            leak_bytes_per_iteration: 0,
            cpu_only: Some(0),
            scaling: None,
        }
    }

    #[test]
    fn the_decision_table() {
        use Status::*;
        let p = Policy::default();
        let base = body(10 << 20);
        let bloated = body(20 << 20);
        let slimmer = body(5 << 20);
        let noise = body((10 << 20) + 100);
        type DecisionCase<'a> = (Option<&'a Body>, &'a Body, Update, Status, Option<Write>);
        #[rustfmt::skip]
        let table: &[DecisionCase] = &[
            (None, &base, Update::New, New, Some(Write::Pending)),
            (None, &base, Update::Always, New, Some(Write::Snapshot)),
            (None, &base, Update::No, Missing, None),
            (Some(&base), &base, Update::New, Passed, None),
            (Some(&base), &noise, Update::New, Passed, None),
            (Some(&base), &noise, Update::Always, Passed, Some(Write::Snapshot)),
            (Some(&base), &bloated, Update::New, Regressed, Some(Write::Pending)),
            (Some(&base), &bloated, Update::No, Regressed, None),
            (Some(&base), &bloated, Update::Always, Passed, Some(Write::Snapshot)),
            (Some(&base), &slimmer, Update::New, Improved, Some(Write::Pending)),
            (Some(&base), &slimmer, Update::No, Improved, None),
        ];
        for (i, (old, new, update, status, write)) in table.iter().enumerate() {
            let d = decide(*old, new, &p, *update, false);
            assert_eq!((d.status, d.write), (*status, *write), "row {i}");
        }
    }

    #[test]
    fn a_budget_fails_even_when_updating() {
        let p = Policy {
            budget: Some(1 << 20),
            ..Policy::default()
        };
        let d = decide(None, &body(10 << 20), &p, Update::Always, false);
        assert_eq!(d.status, Status::Regressed);
        let d = decide(
            Some(&body(10 << 20)),
            &body(11 << 20),
            &p,
            Update::Always,
            false,
        );
        assert_eq!(d.status, Status::Regressed);
        assert!(d.over_budget.is_some());
    }

    #[test]
    fn a_result_within_limits_clears_a_stale_pending_file() {
        // Run 1 regressed and left a .snap.new; the fix lands and run 2 is within noise.
        let d = decide(
            Some(&body(10 << 20)),
            &body((10 << 20) + 100),
            &Policy::default(),
            Update::New,
            false,
        );
        assert_eq!(d.status, Status::Passed);
        assert!(
            d.remove_pending,
            "a stale pending file could be accepted later"
        );
    }

    #[test]
    fn a_matching_result_clears_a_stale_pending_file() {
        let d = decide(
            Some(&body(1)),
            &body(1),
            &Policy::default(),
            Update::New,
            false,
        );
        assert!(d.remove_pending);
        let d = decide(
            Some(&body(1)),
            &body(1),
            &Policy::default(),
            Update::No,
            true,
        );
        assert!(!d.remove_pending, "check mode writes and removes nothing");
    }

    #[test]
    fn check_mode_fails_a_missing_snapshot_but_may_leave_it_pending() {
        let p = Policy::default();
        let d = decide(None, &body(1), &p, Update::No, true);
        assert_eq!((d.status, d.write), (Status::Missing, None));
        // CI with VRAMTEST_UPDATE=new: pending files for an artifact, still a failure.
        let d = decide(None, &body(1), &p, Update::New, true);
        assert_eq!((d.status, d.write), (Status::Missing, Some(Write::Pending)));
    }

    /// `body` with a batch sweep of 32, 64 and 128 whose activations are
    /// `per_sample × batch`: in the older shape (a line per figure) when `older`, else
    /// fitted as this version records it.
    fn batch_swept(body: &Body, older: bool, per_sample: u64) -> Body {
        use vramtest_model::axes::Grid;
        use vramtest_model::sweep::{GridRun, Sweep};
        if older {
            let zero = serde_json::json!({"fixed_bytes": 0, "bytes_per_sample": 0});
            let mut lines = serde_json::Map::new();
            for c in Category::ALL {
                lines.insert(c.as_str().into(), zero.clone());
            }
            lines.insert(
                "activations".into(),
                serde_json::json!({"fixed_bytes": 0, "bytes_per_sample": per_sample}),
            );
            let mut value = serde_json::to_value(body).unwrap();
            value["scaling"] = serde_json::json!({
                "batch": [32, 64, 128],
                "peak": {"fixed_bytes": 1 << 20, "bytes_per_sample": per_sample},
                "category_peaks": lines,
            });
            return serde_json::from_value(value).unwrap();
        }
        let grid = Grid::new([("batch", vec![32, 64, 128])]).unwrap();
        let runs: Vec<GridRun> = [32u64, 64, 128]
            .map(|b| GridRun {
                point: [("batch".to_owned(), b)].into(),
                peak_bytes: (1 << 20) + per_sample * b,
                category_peaks: CategoryBytes::from([(Category::Activations, per_sample * b)]),
                phase_peaks: Default::default(),
                phase_temporaries: Default::default(),
                phase_moments: Default::default(),
                peak_outside_phases: true,
                pool: None,
            })
            .into();
        Body {
            scaling: Some(Sweep::fit(&grid, &runs).unwrap()),
            ..body.clone()
        }
    }

    #[test]
    fn an_older_batch_scaling_passes_migrated_with_one_note() {
        let p = Policy::default();
        let old = batch_swept(&body(10 << 20), true, 4096);
        assert!(old.sweep().unwrap().migrated);
        let new = batch_swept(&body(10 << 20), false, 4096);
        let d = decide(Some(&old), &new, &p, Update::New, false);
        assert_eq!((d.status, d.write), (Status::Passed, None), "{d:?}");
        assert_eq!(d.sweep_changed, None);
        let notes = &d.comparison.as_ref().unwrap().notes;
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("older scaling"), "{notes:?}");
        // Accepted, it is written in the new shape.
        let d = decide(Some(&old), &new, &p, Update::Always, false);
        assert_eq!((d.status, d.write), (Status::Passed, Some(Write::Snapshot)));
        // Written in the new shape, the snapshot has nothing to note.
        let d = decide(Some(&new), &new, &p, Update::New, false);
        assert!(d.comparison.unwrap().notes.is_empty());
        // Activations that grow by 1 KiB a sample fail against the migrated lines.
        let grown = batch_swept(&body(10 << 20), false, 4096 + 1024);
        let d = decide(Some(&old), &grown, &p, Update::New, false);
        assert_eq!(d.status, Status::Regressed, "{d:?}");
        assert!(d.target.lines().iter().any(|l| l.contains("activations")));
    }

    fn sites(bytes: u64) -> Vec<(Category, Vec<Site>)> {
        let site =
            Site::from_line(&format!("{bytes} | 1 | src/lib.rs:3 | -")).expect("a site line");
        vec![(Category::Activations, vec![site])]
    }

    #[test]
    fn always_records_new_call_sites_of_unchanged_figures_and_nothing_else() {
        let p = Policy::default();
        let (base, grown) = (body(10 << 20), body(20 << 20));
        let (a, b) = (sites(1 << 20), sites(2 << 20));
        let same = |old: &Body, new: &Body, update| decide(Some(old), new, &p, update, false);
        // Figures unchanged, sites moved, `always`: the snapshot is rewritten.
        let d = record_new_sites(
            same(&base, &base, Update::Always),
            Update::Always,
            Some((&base, &a)),
            &base,
            &b,
        );
        assert_eq!((d.status, d.write), (Status::Passed, Some(Write::Snapshot)));
        assert_eq!(
            d,
            Decision {
                write: Some(Write::Snapshot),
                ..same(&base, &base, Update::Always)
            },
            "only the write changes"
        );
        // Anything else leaves the decision as it was. Rows: the update mode, the
        // snapshot's sites (`None`: no snapshot), this run's sites.
        type SitesCase<'a> = (Update, Option<&'a SnapshotSites>, &'a SnapshotSites);
        #[rustfmt::skip]
        let rows: &[SitesCase] = &[
            (Update::Always, Some(&a), &a), // the same sites
            (Update::Always, Some(&a), &[]), // no sites captured this time
            (Update::New, Some(&a), &b), // `new`: sites never rewrite a snapshot
            (Update::No, Some(&a), &b),
            (Update::Always, None, &b), // no snapshot: the decision writes one already
        ];
        for (i, (update, old_sites, new_sites)) in rows.iter().enumerate() {
            let decision = decide(old_sites.map(|_| &base), &base, &p, *update, false);
            let old = old_sites.map(|s| (&base, s));
            let d = record_new_sites(decision.clone(), *update, old, &base, new_sites);
            assert_eq!(d, decision, "row {i}");
        }
        // Figures that changed: `always` already writes the snapshot, sites or not;
        // a regression under `new` is left pending, never written over the snapshot.
        let regressed = same(&base, &grown, Update::New);
        let d = record_new_sites(
            regressed.clone(),
            Update::Always,
            Some((&base, &a)),
            &grown,
            &b,
        );
        assert_eq!(d, regressed);
        assert_eq!(d.write, Some(Write::Pending));
    }

    /// A body with a sweep over `seq` and a categorical axis `kept`, its level `two`
    /// with the CPU time ratio `ratio`.
    fn with_levels(ratio: Option<u64>) -> Body {
        use std::collections::BTreeMap;
        use vramtest_model::cpu_time::CpuTimeRatio;
        use vramtest_model::sweep::{Sweep, VariantSweep};
        let plain = || Sweep {
            axes: BTreeMap::from([("seq".to_owned(), vec![1, 2])]),
            figures: BTreeMap::new(),
            target: None,
            levels: BTreeMap::new(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        };
        let mut sweep = plain();
        sweep.levels = [("kept".to_owned(), vec!["one".to_owned(), "two".to_owned()])].into();
        sweep.variants = vec![VariantSweep {
            variant: [("kept".to_owned(), "two".to_owned())].into(),
            sweep: plain(),
            saving: None,
            cpu_time_ratio: CpuTimeRatio::of(ratio, Some(1000)),
        }];
        Body {
            scaling: Some(sweep),
            ..body(10 << 20)
        }
    }

    /// A CPU time is not memory: a result that differs from the snapshot in it alone
    /// is unchanged (not rewritten by `always`, not failed by `--strict`), and a stale
    /// pending file holding it is this very result.
    #[test]
    fn a_step_time_alone_changes_nothing() {
        let (old, new) = (with_levels(Some(1500)), with_levels(Some(1700)));
        let unknown = with_levels(None);
        let ratio = |b: &Body| b.sweep().unwrap().variants[0].cpu_time_ratio.get();
        assert_eq!((ratio(&old), ratio(&new)), (Some(1.5), Some(1.7)));
        let strict = Policy {
            strict: true,
            ..Policy::default()
        };
        for policy in [Policy::default(), strict] {
            for update in [Update::Always, Update::New, Update::No] {
                for snapshot in [&old, &unknown] {
                    let d = decide(Some(snapshot), &new, &policy, update, false);
                    assert_eq!((d.status, d.write), (Status::Passed, None), "{update:?}");
                    let verdict = d.comparison.map(|c| c.verdict);
                    assert_eq!(verdict, Some(Verdict::Unchanged));
                }
            }
        }
        // The ratio is written, and read back.
        let text = new.to_text();
        assert!(text.contains("\"cpu_time_ratio\": 1.7"), "{text}");
        assert!(!unknown.to_text().contains("cpu_time_ratio"));
        // A memory figure still counts.
        let grown = Body {
            peak_bytes: new.peak_bytes + 1,
            ..new.clone()
        };
        let d = decide(
            Some(&old),
            &grown,
            &Policy::default(),
            Update::Always,
            false,
        );
        assert_eq!(d.write, Some(Write::Snapshot));
    }
}
