//! The words of a verdict: the message a person reads for a measured test, built
//! from the decision and what the run found. Pure: no file is read or written here.

use super::decide::{Decision, Write};
use super::site_reruns::NoSites;
use vramtest_model::report::{FigureChange, Status};
use vramtest_model::sites::{self, Sites};
use vramtest_model::snapshot;
use vramtest_model::{Body, Category, DeviceClass, HumanBytes, Movement, Policy, Profile, Subject};

/// Everything a verdict's message speaks of.
pub(super) struct Facts<'a> {
    pub(super) name: &'a str,
    pub(super) class: DeviceClass,
    pub(super) decision: &'a Decision,
    pub(super) policy: &'a Policy,
    /// The new result.
    pub(super) body: &'a Body,
    pub(super) profile: &'a Profile,
    /// The committed snapshot, when there is one.
    pub(super) old: Option<&'a snapshot::Parsed>,
    /// Call sites, when they were asked for.
    pub(super) sites: Option<&'a Result<Sites, NoSites>>,
    /// The snapshot's path, as shown (relative to the crate).
    pub(super) snapshot: String,
    /// The file written, as shown, and whether it replaced a different pending result.
    pub(super) written: Option<(String, bool)>,
    /// Why a stale pending result was kept.
    pub(super) kept: Option<String>,
}

/// A verdict in words and numbers.
#[derive(Debug, PartialEq)]
pub(super) struct Message {
    /// The message: a headline, indented lines, a hint.
    pub(super) text: String,
    /// Every figure compared, in numbers.
    pub(super) changes: Vec<FigureChange>,
    /// The unified diff of the old and new bodies, for a regression.
    pub(super) diff: Option<String>,
}

/// The message of a measured test.
pub(super) fn compose(facts: &Facts) -> Message {
    let Facts {
        name,
        class,
        decision,
        ..
    } = *facts;
    if let Some(why) = &decision.sweep_changed {
        return sweep_changed(facts, why);
    }
    let mut lines = Vec::new();
    lines.extend(limit_lines(facts));
    let changes = changes(decision);
    lines.extend(
        changes
            .iter()
            .filter(|c| c.movement != Movement::Within)
            .map(|c| c.message.clone()),
    );
    lines.extend(sweep_lines(facts));
    lines.extend(explanation_lines(facts));
    lines.extend(gradient_lines(facts));
    lines.extend(written_lines(facts));
    lines.extend(facts.profile.hints());
    lines.extend(facts.kept.clone());
    if decision.status == Status::New && decision.write == Some(Write::Pending) {
        lines.insert(
            0,
            format!(
                "{name} ({class}) has no snapshot yet; peak {}",
                HumanBytes(facts.body.peak_bytes)
            ),
        );
    }
    let lines: Vec<String> = headline(facts).into_iter().chain(lines).collect();
    finish(facts, &lines, changes)
}

/// The message of `lines` (indented under the first), the hint after them, and the
/// diff.
fn finish(facts: &Facts, lines: &[String], changes: Vec<FigureChange>) -> Message {
    let mut text = lines.join("\n  ");
    if let Some(h) = hint(facts.decision) {
        text += &format!("\n{h}");
    }
    Message {
        text,
        changes,
        diff: diff(facts),
    }
}

/// The message of a sweep that changed (its sizes, its axes, added or removed): that
/// is said first and alone, since no figure was compared; only what fails whatever the
/// snapshot holds (a budget) follows.
fn sweep_changed(facts: &Facts, why: &str) -> Message {
    let Facts {
        name,
        class,
        decision,
        ..
    } = *facts;
    let mut lines = vec![format!(
        "{name} ({class}) was not compared with its snapshot: {why}"
    )];
    // Only a leak over its ceiling is left among the findings.
    let changes = changes(decision);
    lines.extend(changes.iter().map(|c| c.message.clone()));
    if let Some((peak, budget)) = decision.over_budget {
        lines.push(format!(
            "peak {} is over the budget of {}",
            HumanBytes(peak),
            HumanBytes(budget)
        ));
    }
    lines.extend(decision.target.lines());
    lines.extend(written_lines(facts));
    lines.extend(facts.kept.clone());
    finish(facts, &lines, changes)
}

/// The first line of a failure.
fn headline(facts: &Facts) -> Option<String> {
    let Facts { name, class, .. } = *facts;
    match facts.decision.status {
        Status::Regressed => Some(format!("memory regression in {name} ({class})")),
        Status::Missing => Some(format!(
            "{name} ({class}) has no snapshot {} (check mode, as on CI, never writes one)",
            facts.snapshot
        )),
        _ => None,
    }
}

/// A budget broken, figures that cannot be compared (all, or one the snapshot lacks),
/// a leak without a snapshot.
fn limit_lines(facts: &Facts) -> Vec<String> {
    let decision = facts.decision;
    let mut lines = Vec::new();
    if let Some((peak, budget)) = decision.over_budget {
        lines.push(format!(
            "peak {} is over the budget of {}",
            HumanBytes(peak),
            HumanBytes(budget)
        ));
    }
    if let Some(why) = decision
        .comparison
        .as_ref()
        .and_then(|c| c.incomparable.clone())
    {
        lines.push(why);
    }
    if let Some(c) = &decision.comparison {
        lines.extend(c.notes.iter().cloned());
    }
    if decision.comparison.is_none()
        && let Some(line) = vramtest_model::policy::leak_message(facts.body, facts.policy)
    {
        lines.push(line);
    }
    lines
}

/// Every figure the comparison looked at.
fn changes(decision: &Decision) -> Vec<FigureChange> {
    let Some(cmp) = &decision.comparison else {
        return Vec::new();
    };
    cmp.findings.iter().map(FigureChange::from).collect()
}

/// What changed in a sweep, at its target or its largest point.
fn sweep_lines(facts: &Facts) -> Vec<String> {
    let decision = facts.decision;
    let mut lines: Vec<String> = decision.sweep_changed.clone().into_iter().collect();
    lines.extend(decision.target.lines());
    lines
}

/// Where and why memory grew: call sites, formulas, leaks.
fn explanation_lines(facts: &Facts) -> Vec<String> {
    let regressed = facts.decision.status == Status::Regressed;
    let mut lines = Vec::new();
    if let (false, Some(Err(e))) = (regressed, facts.sites) {
        lines.push(format!("call sites: {e}"));
    }
    if regressed {
        lines.extend(site_lines(
            facts.name,
            facts.class,
            facts.sites,
            facts.old,
            facts.decision.comparison.as_ref(),
            facts.body,
        ));
        let ratios = vramtest_model::explain::ratios(&facts.body.category_peaks);
        if !ratios.is_empty() {
            let text: Vec<String> = ratios.iter().map(|r| r.to_string()).collect();
            lines.push(format!("formulas: {}", text.join("; ")));
        }
    }
    let profile = facts.profile;
    if profile.leak_bytes_per_iteration > 0 {
        for site in &profile.leak_sites {
            lines.push(format!(
                "leak: {} per iteration kept alive in {} (allocated in phase {})",
                HumanBytes(site.bytes_per_iteration),
                site.category,
                site.phase
                    .map_or("outside any phase".into(), |p| p.to_string())
            ));
        }
    }
    lines
}

/// The gradient check's causes with their fixes: said when a result is first recorded
/// and in a failure.
fn gradient_lines(facts: &Facts) -> Vec<String> {
    match facts.decision.status {
        Status::New | Status::Regressed | Status::Missing => facts
            .profile
            .gradient_check
            .iter()
            .map(|f| f.line())
            .collect(),
        _ => Vec::new(),
    }
}

/// The file written, and what it records.
fn written_lines(facts: &Facts) -> Vec<String> {
    let Some((path, replaced)) = &facts.written else {
        return Vec::new();
    };
    let what = if facts.decision.write == Some(Write::Snapshot) {
        "snapshot written"
    } else {
        "pending result written"
    };
    let replacing = if *replaced {
        " (it replaces an earlier pending result that differed)"
    } else {
        ""
    };
    let mut lines = vec![format!("{what}: {path}{replacing}")];
    if facts.body.leak_bytes_per_iteration > 0 {
        lines.push(format!(
            "note: it records a leak of {} per iteration",
            HumanBytes(facts.body.leak_bytes_per_iteration)
        ));
    }
    lines
}

/// What to do next.
fn hint(decision: &Decision) -> Option<&'static str> {
    match decision.status {
        Status::Regressed | Status::Improved | Status::New
            if decision.write == Some(Write::Pending) =>
        {
            Some(
                "hint: review with `cargo vramtest review` (or `cargo insta review`); accept with `cargo vramtest accept`, or rerun with VRAMTEST_UPDATE=always",
            )
        }
        Status::Missing => Some(
            "hint: run the tests locally and commit the accepted .snap file (`cargo vramtest accept`)",
        ),
        _ => None,
    }
}

/// The diff of a regression against its snapshot.
fn diff(facts: &Facts) -> Option<String> {
    let old = facts.old?;
    (facts.decision.status == Status::Regressed).then(|| {
        vramtest_model::policy::body_diff(
            &old.body,
            facts.body,
            &format!("old: {}", facts.snapshot),
            &format!("new: {} ({})", facts.name, facts.class),
        )
    })
}

/// What a regression says about call sites: the top sites of each category that grew,
/// against the accepted snapshot's sites where it kept them; why there are none; or,
/// on CUDA, how to find them on the CPU.
fn site_lines(
    name: &str,
    class: DeviceClass,
    sites: Option<&Result<Sites, NoSites>>,
    old: Option<&snapshot::Parsed>,
    comparison: Option<&vramtest_model::Comparison>,
    body: &Body,
) -> Vec<String> {
    let Some(sites) = sites else {
        return match class {
            DeviceClass::Cuda => vec![format!(
                "hint: `cargo vramtest show {name} --sites` names the lines that allocated each category (it re-runs the test on the CPU, where the categories hold the same tensors)"
            )],
            DeviceClass::Cpu => Vec::new(),
        };
    };
    let sites = match sites {
        Ok(s) => s,
        Err(e) => return vec![format!("call sites: {e}")],
    };
    let grown: Vec<Category> = comparison
        .map(|c| {
            c.findings
                .iter()
                .filter(|f| f.movement == Movement::Regressed)
                .filter_map(|f| match f.subject {
                    Subject::Category(c) => Some(c),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    // Only the total grew beyond its limit: the category that grew most.
    let grown = if grown.is_empty() {
        old.and_then(|o| {
            Category::ALL
                .into_iter()
                .max_by_key(|&c| body.category_peaks[c] as i128 - o.body.category_peaks[c] as i128)
        })
        .into_iter()
        .collect()
    } else {
        grown
    };
    let old_sites = old.map(|o| o.sites()).filter(|s| !s.is_empty());
    let mut lines = Vec::new();
    for category in grown {
        let before = old_sites.as_ref().map(|all| {
            all.iter()
                .find(|(c, _)| *c == category)
                .map_or(&[][..], |(_, s)| s.as_slice())
        });
        let changes = sites::changes(sites.at_own_peak(category), before);
        if changes.is_empty() {
            if let Some(floor) = before.and_then(sites::absent_floor) {
                lines.push(format!(
                    "where {category} grew: at no call site the snapshot lists; among the sites it leaves out (each at most {} before)",
                    HumanBytes(floor)
                ));
            }
            continue;
        }
        lines.push(format!(
            "where {category} grew (call sites at its peak{}):",
            if before.is_some() {
                ", against the snapshot's"
            } else {
                ""
            }
        ));
        for change in changes.iter().take(sites::IN_FAILURE) {
            lines.push(format!("  {change}"));
        }
    }
    lines.extend(sites.notes.iter().map(|n| format!("call sites: {n}")));
    lines
}

#[cfg(test)]
mod tests {
    use super::super::decide::{decide, tests::body};
    use super::*;
    use vramtest_model::env::Update;
    use vramtest_model::ledger::{self, Event};
    use vramtest_model::sites::{Capture, CategorySites, Site, SiteKey};
    use vramtest_model::{Phase, Snapshot};

    fn sites() -> Sites {
        let site = |bytes, line: u32| Site {
            bytes,
            count: 1,
            key: SiteKey {
                operation: Some("lib::op".into()),
                location: Some(format!("src/lib.rs:{line}")),
                callers: None,
            },
        };
        Sites {
            capture: Capture::Planned,
            traces: 4,
            categories: vec![
                CategorySites {
                    category: Category::Activations,
                    bytes: 20 << 20,
                    sites: vec![site(12 << 20, 10), site(8 << 20, 20)],
                    own_peak: None,
                },
                CategorySites {
                    category: Category::Parameters,
                    bytes: 1 << 20,
                    sites: vec![site(1 << 20, 5)],
                    own_peak: None,
                },
            ],
            notes: vec!["a note".into()],
        }
    }

    /// The snapshot's text with `info.sites` as `found` records them.
    fn parsed_with(body: &Body, found: &Sites) -> snapshot::Parsed {
        let snap = Snapshot {
            source: "tests/vram.rs".into(),
            test: "t".into(),
            info: snapshot::Info {
                sites: found.for_snapshot(),
                ..snapshot::Info::default()
            },
            body: body.clone(),
        };
        snapshot::parse(&snap.to_text()).unwrap()
    }

    #[test]
    fn a_regression_lists_the_sites_of_the_grown_category_most_grown_first() {
        let (old, new) = (body(10 << 20), body(20 << 20));
        let cmp = vramtest_model::compare(&old, &new, &Policy::default());
        // The snapshot had only the line-20 site, at 8 MiB: line 10 is new.
        let mut before = sites();
        before.categories[0].sites.remove(0);
        let old = parsed_with(&old, &before);
        let lines = site_lines(
            "t",
            DeviceClass::Cpu,
            Some(&Ok(sites())),
            Some(&old),
            Some(&cmp),
            &new,
        );
        assert_eq!(
            lines,
            [
                "where activations grew (call sites at its peak, against the snapshot's):",
                "  12.00 MiB in 1 block at src/lib.rs:10 (lib::op) [new site]",
                "call sites: a note",
            ]
        );
    }

    /// Unchanged large sites are not listed; a growth among the sites the snapshot
    /// left out is said to be there.
    #[test]
    fn a_regression_lists_no_unchanged_site_and_says_where_the_growth_is_unknown() {
        let (old, new) = (body(10 << 20), body(20 << 20));
        let cmp = vramtest_model::compare(&old, &new, &Policy::default());
        let site = |bytes, line: u32| Site {
            bytes,
            count: 1,
            key: SiteKey {
                operation: None,
                location: Some(format!("src/lib.rs:{line}")),
                callers: None,
            },
        };
        let with = |list: Vec<Site>| {
            let mut s = sites();
            s.categories[0].sites = list;
            s
        };
        // Four large sites, a hundred small ones of 512 B, and one of 1 KiB.
        let mut list: Vec<Site> = (0..4).map(|i| site(4 << 20, i)).collect();
        list.push(site(1024, 99));
        list.extend((0..100).map(|i| site(512, 100 + i)));
        let old = parsed_with(&old, &with(list.clone()));
        let lines_of = |list: &[Site]| {
            site_lines(
                "t",
                DeviceClass::Cpu,
                Some(&Ok(with(list.to_vec()))),
                Some(&old),
                Some(&cmp),
                &new,
            )
        };
        // One small site doubles, to the size of the largest the snapshot left out:
        // it may have held that much before.
        list[50].bytes = 1024;
        assert_eq!(
            lines_of(&list),
            [
                "where activations grew: at no call site the snapshot lists; among the sites it leaves out (each at most 1.00 KiB before)",
                "call sites: a note",
            ]
        );
        // Grown past it: listed, alone.
        list[50].bytes = 4096;
        assert_eq!(
            lines_of(&list),
            [
                "where activations grew (call sites at its peak, against the snapshot's):",
                "  4.00 KiB in 1 block at src/lib.rs:145 [new site, or grew from at most 1.00 KiB]",
                "call sites: a note",
            ]
        );
    }

    #[test]
    fn without_sites_a_cuda_regression_points_to_the_cpu_and_an_error_is_said() {
        let new = body(20 << 20);
        let cuda = site_lines("mod::t", DeviceClass::Cuda, None, None, None, &new);
        assert_eq!(cuda.len(), 1);
        assert!(
            cuda[0].starts_with("hint: `cargo vramtest show mod::t --sites`"),
            "{cuda:?}"
        );
        assert!(site_lines("t", DeviceClass::Cpu, None, None, None, &new).is_empty());
        let failed = Err(NoSites::CutShort(std::time::Duration::from_millis(1)));
        assert_eq!(
            site_lines("t", DeviceClass::Cpu, Some(&failed), None, None, &new),
            ["call sites: cut short after 1ms (VRAMTEST_SITES_TIMEOUT)"]
        );
    }

    /// A measured step: `params` bytes of parameters, then 3 iterations whose forward
    /// keeps `activations` bytes until the iteration ends, and `leak` bytes forever.
    fn step(params: u64, activations: u64, leak: u64) -> Profile {
        let mut events = vec![
            Event::PhaseStart(Phase::Params),
            Event::Alloc {
                id: 1,
                bytes: params,
            },
            Event::PhaseEnd,
        ];
        for i in 0..3u32 {
            let id = 100 + u64::from(i) * 10;
            events.extend([
                Event::IterationStart(i),
                Event::PhaseStart(Phase::Forward),
                Event::Alloc {
                    id,
                    bytes: activations,
                },
                Event::Alloc {
                    id: id + 1,
                    bytes: leak,
                },
                Event::PhaseEnd,
                Event::Free { id },
                Event::IterationEnd,
            ]);
        }
        ledger::profile(&events)
    }

    /// The snapshot file of a body, as read back.
    fn committed(body: &Body) -> snapshot::Parsed {
        let none = Sites {
            categories: Vec::new(),
            notes: Vec::new(),
            ..sites()
        };
        parsed_with(body, &none)
    }

    /// The message for `new` against `old` under `update`, with what was written.
    fn message_for(
        old: Option<&snapshot::Parsed>,
        new: &Profile,
        update: Update,
        check: bool,
        written: Option<(String, bool)>,
        sites: Option<&Result<Sites, NoSites>>,
    ) -> Message {
        message_on(DeviceClass::Cpu, old, new, update, check, written, sites)
    }

    /// [`message_for`] on a device of `class`.
    fn message_on(
        class: DeviceClass,
        old: Option<&snapshot::Parsed>,
        new: &Profile,
        update: Update,
        check: bool,
        written: Option<(String, bool)>,
        sites: Option<&Result<Sites, NoSites>>,
    ) -> Message {
        let policy = Policy::default();
        let body = Body::from_profile(new, class);
        let decision = decide(old.map(|o| &o.body), &body, &policy, update, check);
        compose(&Facts {
            name: "mlp::adamw",
            class,
            decision: &decision,
            policy: &policy,
            body: &body,
            profile: new,
            old,
            sites,
            snapshot: format!("tests/snapshots/vram__mlp__adamw@{class}.snap"),
            written,
            kept: None,
        })
    }

    /// The message text, then the diff, as a reviewer reads them.
    fn shown(message: &Message) -> String {
        match &message.diff {
            Some(diff) => format!("{}\n\n{diff}", message.text),
            None => message.text.clone(),
        }
    }

    #[test]
    fn a_regression_names_the_category_its_sites_and_the_diff() {
        let old = committed(&Body::from_profile(
            &step(1 << 20, 4 << 20, 0),
            DeviceClass::Cpu,
        ));
        let new = step(1 << 20, 8 << 20, 0);
        let mut found = sites();
        found.categories.truncate(1);
        let message = message_for(
            Some(&old),
            &new,
            Update::New,
            false,
            Some((
                "tests/snapshots/vram__mlp__adamw@cpu.snap.new".into(),
                false,
            )),
            Some(&Ok(found)),
        );
        assert!(message.diff.is_some());
        assert!(
            message
                .changes
                .iter()
                .any(|c| c.subject == Subject::Category(Category::Activations)
                    && c.movement == Movement::Regressed),
            "{:?}",
            message.changes
        );
        insta::assert_snapshot!(shown(&message));
    }

    #[test]
    fn a_first_result_is_left_pending_with_what_to_run_next() {
        let new = step(1 << 20, 4 << 20, 0);
        let message = message_for(
            None,
            &new,
            Update::New,
            false,
            Some(("tests/snapshots/vram__mlp__adamw@cpu.snap.new".into(), true)),
            None,
        );
        assert_eq!(message.diff, None);
        assert!(message.changes.is_empty());
        insta::assert_snapshot!(shown(&message));
    }

    /// A step whose backward keeps a gradient of 3 KiB for a tensor that is no
    /// parameter beside the 1 KiB weight's.
    fn with_a_foreign_gradient() -> Profile {
        let mut events = vec![
            Event::PhaseStart(Phase::Params),
            Event::Alloc { id: 1, bytes: 1024 },
            Event::PhaseEnd,
        ];
        for i in 0..2u32 {
            let id = 100 + u64::from(i) * 10;
            events.extend([
                Event::IterationStart(i),
                Event::PhaseStart(Phase::Backward),
                Event::Alloc { id, bytes: 1024 },
                Event::Alloc {
                    id: id + 1,
                    bytes: 3072,
                },
                Event::PhaseEnd,
                Event::Free { id },
                Event::Free { id: id + 1 },
                Event::IterationEnd,
            ]);
        }
        Profile {
            gradient_check: vramtest_model::gradient_reading::check(&events),
            ..ledger::profile(&events)
        }
    }

    #[test]
    fn the_gradient_check_s_cause_and_fix_are_said_when_first_written_and_in_a_failure() {
        let new = with_a_foreign_gradient();
        let said = "gradient check: gradients_of_non_parameters: 3.00 KiB of gradients match no parameter's size (gradient blocks of 3.00 KiB × 1); fix: remove the gradients of tensors that are no parameter";
        let first = message_for(
            None,
            &new,
            Update::New,
            false,
            Some((
                "tests/snapshots/vram__mlp__adamw@cpu.snap.new".into(),
                false,
            )),
            None,
        );
        assert!(first.text.contains(said), "{}", first.text);
        // The same result again: nothing to say.
        let old = committed(&Body::from_profile(&new, DeviceClass::Cpu));
        let again = message_for(Some(&old), &new, Update::No, false, None, None);
        assert!(!again.text.contains("gradient check"), "{}", again.text);
        // A regression says it again.
        let smaller = committed(&Body::from_profile(&step(1024, 0, 0), DeviceClass::Cpu));
        let failed = message_for(Some(&smaller), &new, Update::No, false, None, None);
        assert!(
            failed.text.starts_with("memory regression"),
            "{}",
            failed.text
        );
        assert!(failed.text.contains(said), "{}", failed.text);
    }

    #[test]
    fn check_mode_names_the_missing_snapshot() {
        let new = step(1 << 20, 4 << 20, 0);
        let message = message_for(None, &new, Update::No, true, None, None);
        insta::assert_snapshot!(shown(&message));
    }

    #[test]
    fn a_leak_fails_a_first_result_and_says_where_it_was_allocated() {
        let new = step(1 << 20, 4 << 20, 64 << 20);
        let message = message_for(None, &new, Update::No, true, None, None);
        insta::assert_snapshot!(shown(&message));
    }

    #[test]
    fn a_pass_within_limits_says_nothing_and_a_sites_error_is_said() {
        let body = Body::from_profile(&step(1 << 20, 4 << 20, 0), DeviceClass::Cpu);
        let old = committed(&body);
        let new = step(1 << 20, 4 << 20, 0);
        let quiet = message_for(Some(&old), &new, Update::New, false, None, None);
        assert_eq!(quiet.text, "");
        let failed = Err(NoSites::CutShort(std::time::Duration::from_secs(1)));
        let said = message_for(Some(&old), &new, Update::New, false, None, Some(&failed));
        assert_eq!(
            said.text,
            "call sites: cut short after 1s (VRAMTEST_SITES_TIMEOUT)"
        );
    }

    #[test]
    fn an_improvement_written_for_review() {
        let old = committed(&Body::from_profile(
            &step(1 << 20, 8 << 20, 0),
            DeviceClass::Cpu,
        ));
        let new = step(1 << 20, 4 << 20, 0);
        let message = message_for(
            Some(&old),
            &new,
            Update::New,
            false,
            Some((
                "tests/snapshots/vram__mlp__adamw@cpu.snap.new".into(),
                false,
            )),
            None,
        );
        insta::assert_snapshot!(shown(&message));
    }

    /// `step` measured on a device whose pool reserved `reserved` bytes at its peak.
    fn on_device(params: u64, activations: u64, reserved: u64) -> Profile {
        Profile {
            fidelity: vramtest_model::Fidelity::Phase,
            reserved_peak_bytes: Some(reserved),
            ..step(params, activations, 0)
        }
    }

    #[test]
    fn a_reserved_regression_on_a_device_names_it_and_its_fragmentation() {
        // 5 MiB allocated at the peak both times; the pool reserved 6, then 16 MiB.
        let old = committed(&Body::from_profile(
            &on_device(1 << 20, 4 << 20, 6 << 20),
            DeviceClass::Cuda,
        ));
        assert_eq!(old.body.reserved_bytes, Some(6 << 20));
        let new = on_device(1 << 20, 4 << 20, 16 << 20);
        let message = message_on(
            DeviceClass::Cuda,
            Some(&old),
            &new,
            Update::No,
            false,
            None,
            None,
        );
        assert!(
            message
                .changes
                .iter()
                .any(|c| c.subject == Subject::Reserved && c.movement == Movement::Regressed),
            "{:?}",
            message.changes
        );
        insta::assert_snapshot!(shown(&message));
    }

    #[test]
    fn a_device_snapshot_without_reserved_bytes_passes_with_a_note() {
        let mut before =
            Body::from_profile(&on_device(1 << 20, 4 << 20, 6 << 20), DeviceClass::Cuda);
        before.reserved_bytes = None;
        let old = committed(&before);
        let new = on_device(1 << 20, 4 << 20, 6 << 20);
        let message = message_on(
            DeviceClass::Cuda,
            Some(&old),
            &new,
            Update::New,
            false,
            None,
            None,
        );
        assert_eq!(
            message.text,
            "note: reserved: the snapshot has no reserved bytes (written before they were recorded), this run 6.00 MiB: not compared; record them by accepting this result (VRAMTEST_UPDATE=always)"
        );
        assert_eq!(message.diff, None);
        assert!(message.changes.is_empty());
    }

    /// `body` as a sweep over the axis `batch` (no figures, no target).
    fn swept(mut body: Body, batch: &[u64]) -> Body {
        use vramtest_model::sweep::Sweep;
        body.scaling = Some(Sweep {
            axes: [("batch".to_owned(), batch.to_vec())].into(),
            figures: Default::default(),
            target: None,
            levels: Default::default(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        });
        body
    }

    #[test]
    fn a_changed_grid_is_said_first_and_alone() {
        // The grid grew a point, so the new body's figures were measured elsewhere:
        // activations doubled, which must not read as a regression.
        let old = committed(&swept(
            Body::from_profile(&step(1 << 20, 4 << 20, 0), DeviceClass::Cpu),
            &[1, 2],
        ));
        let profile = step(1 << 20, 8 << 20, 0);
        let body = swept(Body::from_profile(&profile, DeviceClass::Cpu), &[1, 2, 4]);
        let policy = Policy::default();
        let decision = decide(Some(&old.body), &body, &policy, Update::New, false);
        assert_eq!(decision.status, Status::Regressed);
        let message = compose(&Facts {
            name: "mlp::adamw",
            class: DeviceClass::Cpu,
            decision: &decision,
            policy: &policy,
            body: &body,
            profile: &profile,
            old: Some(&old),
            sites: Some(&Ok(sites())),
            snapshot: "tests/snapshots/vram__mlp__adamw@cpu.snap".into(),
            written: Some((
                "tests/snapshots/vram__mlp__adamw@cpu.snap.new".into(),
                false,
            )),
            kept: None,
        });
        assert!(message.changes.is_empty(), "{:?}", message.changes);
        assert_eq!(
            message.text,
            "mlp::adamw (cpu) was not compared with its snapshot: the sweep's axes changed from batch = [1, 2] to batch = [1, 2, 4]: accept the snapshot again\n  \
             pending result written: tests/snapshots/vram__mlp__adamw@cpu.snap.new\n\
             hint: review with `cargo vramtest review` (or `cargo insta review`); accept with `cargo vramtest accept`, or rerun with VRAMTEST_UPDATE=always"
        );
    }
}
