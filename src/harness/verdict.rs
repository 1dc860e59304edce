//! Judging a measured result against its snapshot: the policy from the settings and
//! the attribute, the decision, the files written, and the messages a person reads.

use super::parent::Run;
use super::spawn::output_section;
use super::{Target, TestDef};
use crate::judge::{self, Write};
use libtest_mimic::Failed;
use std::path::{Path, PathBuf};
use vramtest_model::config::Settings;
use vramtest_model::env;
use vramtest_model::fit::SweepFit;
use vramtest_model::report::{Change, Status, TestReport};
use vramtest_model::sites::{self, Sites};
use vramtest_model::snapshot::{self, Info};
use vramtest_model::{
    Body, Category, DeviceClass, HumanBytes, Limit, Movement, Policy, Profile, Snapshot, Subject,
};

/// What a test's measurement gave, to be judged.
pub(super) struct Measured<'a> {
    /// The batch size it ran with (the first of a sweep): call sites re-run that one.
    pub(super) batch: usize,
    pub(super) profile: &'a Profile,
    pub(super) info: Info,
    /// A sweep's fit over all its batch sizes.
    pub(super) fit: Option<&'a SweepFit>,
}

impl Run {
    /// The limits for `def`: the settings (workspace, package) refined by the test's
    /// attribute, key by key and category by category.
    fn policy(&self, def: &TestDef) -> Result<Policy, String> {
        let mut attribute = Settings {
            budget: def.options.budget,
            ..Settings::default()
        };
        for (key, text) in def.options.limits {
            let limit = text.parse::<Limit>().map_err(|e| e.to_string())?;
            if *key == "tolerance" {
                attribute.tolerance = Some(limit);
            } else {
                attribute.limits.insert((*key).to_owned(), limit);
            }
        }
        let mut policy = self.settings.clone().overridden_by(&attribute).policy();
        policy.strict = self.strict;
        Ok(policy)
    }

    pub(super) fn judge(
        &self,
        name: &str,
        def: &TestDef,
        measured: Measured<'_>,
        report: &mut TestReport,
    ) -> Result<(), String> {
        let Measured {
            batch,
            profile,
            mut info,
            fit,
        } = measured;
        let class = report.device_class.expect("set for measured tests");
        let policy = self.policy(def)?;
        let mut body = Body::from_profile(profile, class);
        body.scaling = fit.map(|f| f.scaling.clone().with_budget(policy.budget));
        let snap_path =
            snapshot::path_for(&self.target.manifest_dir, &self.target.name, name, class);
        let pending = snapshot::pending_path(&snap_path);
        report.snapshot = Some(snap_path.clone());
        report.body = Some(body.clone());
        if let Some(refs) = &self.references {
            append_reference(refs, &snap_path);
        }
        let old = match snapshot::read(&snap_path) {
            Ok(old) => old,
            Err(e) => {
                report.status = Status::SnapshotError;
                report.message = format!("invalid snapshot: {e}");
                return Err(report.message.clone());
            }
        };
        report.old_peak_bytes = old.as_ref().map(|o| o.body.peak_bytes);
        let decision = judge::decide(
            old.as_ref().map(|o| &o.body),
            &body,
            &policy,
            self.update,
            self.check,
        );
        report.status = decision.status;

        let regressed = decision.status == Status::Regressed;
        let sites = match (class, self.sites) {
            (DeviceClass::Cpu, env::Sites::Always) => Some(self.collect_sites(name, def, batch)),
            (DeviceClass::Cpu, env::Sites::OnRegression) if regressed => {
                Some(self.collect_sites(name, def, batch))
            }
            _ => None,
        };
        if let Some(Ok(found)) = &sites {
            info.sites = found.for_snapshot();
            report.sites = Some(found.clone());
        }

        // `VRAMTEST_UPDATE=always` with call sites on also records new sites in a
        // snapshot whose figures did not change (its `info` only).
        let mut decision = decision;
        if decision.write.is_none()
            && decision.status == Status::Passed
            && self.update == env::Update::Always
            && !info.sites.is_empty()
            && old
                .as_ref()
                .is_some_and(|o| o.body == body && Info::sites_in_header(&o.header) != info.sites)
        {
            decision.write = Some(Write::Snapshot);
        }

        let snapshot = Snapshot {
            source: report.source.clone(),
            test: name.to_owned(),
            info,
            body: body.clone(),
        };
        let written = match decision.write {
            Some(Write::Snapshot) => Some(snap_path.clone()),
            Some(Write::Pending) => Some(pending.clone()),
            None => None,
        };
        let replaced = decision.write == Some(Write::Pending) && differs(&pending, &body);
        if let Some(path) = &written {
            snapshot::write_atomic(path, &snapshot.to_text()).map_err(|e| {
                report.status = Status::Failed;
                report.message = format!("cannot write the snapshot: {e}");
                report.message.clone()
            })?;
        }
        let shown = |p: &Path| display_path(&self.target.manifest_dir, p);
        let kept = if decision.write == Some(Write::Snapshot) || decision.remove_pending {
            clear_pending(&pending, &body, &shown(&pending))
        } else {
            None
        };
        report.written = written.clone();
        let mut lines = Vec::new();
        let headline = match decision.status {
            Status::Passed | Status::Improved | Status::New => None,
            Status::Regressed => Some(format!("memory regression in {name} ({class})")),
            Status::Missing => Some(format!(
                "{name} ({class}) has no snapshot {} (check mode, as on CI, never writes one)",
                shown(&snap_path)
            )),
            _ => None,
        };
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
        if decision.comparison.is_none()
            && let Some(line) = vramtest_model::policy::leak_message(&body, &policy)
        {
            lines.push(line);
        }
        if let Some(cmp) = &decision.comparison {
            for f in &cmp.findings {
                report.changes.push(Change {
                    subject: f.subject,
                    old: f.old,
                    new: f.new,
                    limit: String::from(f.limit),
                    movement: f.movement,
                    message: f.to_string(),
                });
                if f.movement != Movement::Within {
                    lines.push(f.to_string());
                }
            }
        }
        lines.extend(decision.sweep_changed.clone());
        for c in &decision.per_sample {
            if c.regressed || c.category.is_none() {
                lines.push(c.to_string());
            }
        }
        if let (false, Some(Err(e))) = (regressed, &sites) {
            lines.push(e.clone());
        }
        if regressed {
            lines.extend(site_lines(
                name,
                class,
                sites.as_ref(),
                old.as_ref(),
                decision.comparison.as_ref(),
                &body,
            ));
        }
        if decision.status == Status::Regressed {
            let ratios = vramtest_model::explain::ratios(&body.category_peaks);
            if !ratios.is_empty() {
                let text: Vec<String> = ratios.iter().map(|r| r.to_string()).collect();
                lines.push(format!("formulas: {}", text.join("; ")));
            }
        }
        if let Some(fit) = fit {
            for (category, f) in fit.nonlinear() {
                lines.push(format!(
                    "note: {} does not grow linearly with the batch (the worst point, batch {}, is {:.1}% of its largest value off the line): its per-sample figure is an approximation",
                    category.map_or("the peak", |c| c.as_str()),
                    f.worst_batch,
                    f.worst_residual * 100.0
                ));
            }
        }
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
        if let Some(path) = &written {
            let what = if decision.write == Some(Write::Snapshot) {
                "snapshot written"
            } else {
                "pending result written"
            };
            let replacing = if replaced {
                " (it replaces an earlier pending result that differed)"
            } else {
                ""
            };
            lines.push(format!("{what}: {}{replacing}", shown(path)));
            if body.leak_bytes_per_iteration > 0 {
                lines.push(format!(
                    "note: it records a leak of {} per iteration",
                    HumanBytes(body.leak_bytes_per_iteration)
                ));
            }
        }
        lines.extend(profile.hints());
        lines.extend(kept);
        if decision.status == Status::New && decision.write == Some(Write::Pending) {
            lines.insert(
                0,
                format!(
                    "{name} ({class}) has no snapshot yet; peak {}",
                    HumanBytes(body.peak_bytes)
                ),
            );
        }
        let hint = match decision.status {
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
        };
        if let (Some(old), true) = (&old, decision.status == Status::Regressed) {
            let diff = vramtest_model::policy::body_diff(
                &old.body,
                &body,
                &format!("old: {}", shown(&snap_path)),
                &format!("new: {name} ({class})"),
            );
            report.diff = Some(diff);
        }
        let mut message = headline
            .into_iter()
            .chain(lines)
            .collect::<Vec<_>>()
            .join("\n  ");
        if let Some(h) = hint {
            message += &format!("\n{h}");
        }
        report.message = message.clone();
        if report.fails() {
            let mut text = message;
            if let Some(diff) = &report.diff {
                text += "\n\n";
                text += diff;
            }
            return Err(text);
        }
        if !message.is_empty() {
            // Passing with something to say (improved, new snapshot written).
            println!("{name}: {message}");
        }
        Ok(())
    }
}

/// What a regression says about call sites: the top sites of each category that grew,
/// against the accepted snapshot's sites where it kept them; why there are none; or,
/// on CUDA, how to find them on the CPU.
fn site_lines(
    name: &str,
    class: DeviceClass,
    sites: Option<&Result<Sites, String>>,
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
        Err(e) => return vec![e.clone()],
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
    let old_sites = old.map(|o| Info::sites_in_header(&o.header));
    let old_sites = old_sites.filter(|s| !s.is_empty());
    let mut lines = Vec::new();
    for category in grown {
        let before = old_sites.as_ref().map(|all| {
            all.iter()
                .find(|(c, _)| *c == category)
                .map_or(&[][..], |(_, s)| s.as_slice())
        });
        let changes = sites::changes(sites.at_own_peak(category), before);
        if changes.is_empty() {
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

/// A pending result that this run makes stale: removed when it holds exactly this
/// run's result (nothing is lost), else kept (it may be a result under review, say
/// one downloaded from CI) and named in the returned note.
fn clear_pending(pending: &Path, body: &Body, shown: &str) -> Option<String> {
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

pub(super) fn failure(message: &str, output: &str) -> Failed {
    Failed::from(format!("{message}{}", output_section(output)))
}

pub(super) fn write_report(dir: &Path, report: &TestReport) {
    let file = dir.join(format!(
        "{}__{}.json",
        report.target,
        report.test.replace("::", "__")
    ));
    let text = serde_json::to_string(report).expect("reports serialize");
    if let Err(e) = snapshot::write_atomic(&file, &text) {
        eprintln!("warning: cannot write the report: {e}");
    }
}

pub(super) fn append_reference(refs: &Path, snap: &Path) {
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

/// `file!()` of the test, relative to its crate (`tests/vram.rs`). rustc gives paths
/// relative to the workspace root, or absolute (under the directory the binary was
/// built in); the longest suffix that exists under the crate is it.
pub(super) fn relative_source(target: &Target, file: &str) -> String {
    let path = Path::new(file);
    for dir in [&target.manifest_dir, &target.built_in] {
        if let Ok(rel) = path.strip_prefix(dir) {
            return rel.to_string_lossy().replace('\\', "/");
        }
    }
    let parts: Vec<_> = path.components().collect();
    for start in 0..parts.len() {
        let suffix: PathBuf = parts[start..].iter().collect();
        if target.manifest_dir.join(&suffix).is_file() {
            return suffix.to_string_lossy().replace('\\', "/");
        }
    }
    file.replace('\\', "/")
}

/// A path relative to the crate, for messages.
pub(super) fn display_path(manifest_dir: &Path, p: &Path) -> String {
    p.strip_prefix(manifest_dir)
        .unwrap_or(p)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::tests::body;
    use vramtest_model::sites::{Capture, CategorySites, Site, SiteKey};

    fn sites() -> Sites {
        let site = |bytes, line: u32| Site {
            bytes,
            count: 1,
            key: SiteKey {
                operation: Some("lib::op".into()),
                location: Some(format!("src/lib.rs:{line}")),
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
            info: Info {
                sites: found.for_snapshot(),
                ..Info::default()
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
                "  8.00 MiB in 1 block at src/lib.rs:20 (lib::op)",
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
        let failed = Err("call sites: cut short after 1ms (VRAMTEST_SITES_TIMEOUT)".into());
        assert_eq!(
            site_lines("t", DeviceClass::Cpu, Some(&failed), None, None, &new),
            ["call sites: cut short after 1ms (VRAMTEST_SITES_TIMEOUT)"]
        );
    }
}
