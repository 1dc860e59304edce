//! When does a change fail? Limits per category and for the peak, growth-only by
//! default; a hard budget and a leak ceiling that fail whatever the snapshot holds; and
//! `strict` for "any difference fails".

use crate::bytes::{HumanBytes, HumanDelta};
use crate::category::{Category, Phase};
use crate::limit::{Limit, LimitKey, UnknownLimitKey};
use crate::snapshot::Body;
use std::fmt;

/// The limits a result is held to. [`Policy::default`] needs no configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Allowed growth of the total peak.
    pub peak: Limit,
    /// Allowed growth of each category's own peak, indexed by [`Category::index`].
    pub categories: [Limit; Category::ALL.len()],
    /// Allowed growth of a CUDA pool's reserved peak (`reserved_bytes`, device results
    /// only): [`Limit::RESERVED`] by default; `tolerance` leaves it alone.
    pub reserved: Limit,
    /// The leak ceiling: a loop may keep at most `leak.slack(peak)` bytes per iteration,
    /// whatever the snapshot holds ([`Limit::LEAK`] by default; [`Limit::ALLOW`] opts out).
    pub leak: Limit,
    /// A hard ceiling on the peak, whatever the snapshot says.
    pub budget: Option<u64>,
    /// Allowed growth of the CPU-only memory (`cpu_only`: gemm's packing buffers and
    /// the like). `None` (the default): compared only on the machine the snapshot was
    /// recorded on, under [`Limit::CPU_ONLY`] ([`Policy::on_the_snapshots_machine`]);
    /// elsewhere it depends on the CPU that ran the step and is not. Set, it is
    /// compared on every machine; `tolerance` leaves it alone.
    pub cpu_only: Option<Limit>,
    /// Any difference in any figure fails, shrinking included.
    pub strict: bool,
}

impl Default for Policy {
    fn default() -> Self {
        let mut categories = [Limit::DEFAULT; Category::ALL.len()];
        categories[Category::Untracked.index()] = Limit::UNTRACKED;
        Policy {
            peak: Limit::DEFAULT,
            categories,
            reserved: Limit::RESERVED,
            leak: Limit::LEAK,
            budget: None,
            cpu_only: None,
            strict: false,
        }
    }
}

impl Policy {
    /// Sets the limit `key` names, the meaning it has in the `vramtest` metadata and in
    /// `#[vramtest]` options: [`LimitKey::Tolerance`] sets the peak and every category
    /// but `untracked` (which keeps its wider slack unless named); it leaves the
    /// reserved bytes, the leak ceiling and the CPU-only memory alone. Every other key
    /// sets only its own figure.
    pub fn set(&mut self, key: LimitKey, limit: Limit) {
        match key {
            LimitKey::Tolerance => {
                self.peak = limit;
                for c in Category::ALL {
                    if c != Category::Untracked {
                        self.categories[c.index()] = limit;
                    }
                }
            }
            LimitKey::Peak => self.peak = limit,
            LimitKey::Reserved => self.reserved = limit,
            LimitKey::Leak => self.leak = limit,
            LimitKey::CpuOnly => self.cpu_only = Some(limit),
            LimitKey::Category(c) => self.categories[c.index()] = limit,
        }
    }

    /// Sets several limits by key. `tolerance` sets several limits, so it is applied
    /// first, whatever the order given: the specific keys refine it.
    pub fn set_all(&mut self, limits: impl IntoIterator<Item = (LimitKey, Limit)>) {
        let mut limits: Vec<_> = limits.into_iter().collect();
        limits.sort_by_key(|(key, _)| *key != LimitKey::Tolerance);
        for (key, limit) in limits {
            self.set(key, limit);
        }
    }

    /// This policy for a result measured on the machine (CPU, instruction set, caches,
    /// threads) its snapshot was recorded on: CPU-only memory is compared there, under
    /// the `cpu_only` limit when one is set, else [`Limit::CPU_ONLY`].
    pub fn on_the_snapshots_machine(mut self) -> Policy {
        self.cpu_only.get_or_insert(Limit::CPU_ONLY);
        self
    }

    /// The limit for one subject.
    pub fn limit(&self, subject: Subject) -> Limit {
        match subject {
            Subject::Peak => self.peak,
            Subject::Category(c) => self.categories[c.index()],
            Subject::Reserved => self.reserved,
            Subject::Leak => self.leak,
            Subject::CpuOnly => self.cpu_only.unwrap_or(Limit::EXACT),
        }
    }
}

/// A figure that is compared. Serialized as `peak`, `reserved`, `leak` or the
/// category's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Subject {
    /// The total peak.
    Peak,
    /// A category's own peak.
    Category(Category),
    /// A CUDA pool's reserved peak (`reserved_bytes`), where both results have one.
    Reserved,
    /// Live bytes retained per iteration.
    Leak,
    /// CPU-only memory (`cpu_only`), compared under a `cpu_only` limit, set or given on the snapshot's machine.
    CpuOnly,
}

impl Subject {
    /// The key its limit is set under, which is its name too.
    pub fn key(self) -> LimitKey {
        match self {
            Subject::Peak => LimitKey::Peak,
            Subject::Category(c) => LimitKey::Category(c),
            Subject::Reserved => LimitKey::Reserved,
            Subject::Leak => LimitKey::Leak,
            Subject::CpuOnly => LimitKey::CpuOnly,
        }
    }

    /// The stable name: `peak`, `reserved`, `leak`, `cpu_only` or a category
    /// (`activations`).
    pub fn as_str(self) -> &'static str {
        self.key().as_str()
    }
}

impl TryFrom<LimitKey> for Subject {
    /// [`LimitKey::Tolerance`], which names several figures.
    type Error = LimitKey;
    fn try_from(key: LimitKey) -> Result<Subject, LimitKey> {
        match key {
            LimitKey::Tolerance => Err(key),
            LimitKey::Peak => Ok(Subject::Peak),
            LimitKey::Reserved => Ok(Subject::Reserved),
            LimitKey::Leak => Ok(Subject::Leak),
            LimitKey::CpuOnly => Ok(Subject::CpuOnly),
            LimitKey::Category(c) => Ok(Subject::Category(c)),
        }
    }
}

impl From<Subject> for String {
    fn from(s: Subject) -> String {
        s.as_str().to_owned()
    }
}

/// A name that is not one figure's [`Subject`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubjectError {
    /// A name that is no limit's.
    #[error(transparent)]
    Unknown(#[from] UnknownLimitKey),
    /// A limit's name that covers several figures (`tolerance`).
    #[error("`{0}` names several figures, not one")]
    Several(String),
}

impl TryFrom<String> for Subject {
    type Error = SubjectError;
    fn try_from(s: String) -> Result<Subject, SubjectError> {
        let key = s.parse::<LimitKey>()?;
        Subject::try_from(key).map_err(|_| SubjectError::Several(s))
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Peak => f.write_str("peak"),
            Subject::Category(c) => write!(f, "{c}"),
            Subject::Reserved => f.write_str("reserved"),
            Subject::Leak => f.write_str("leak per iteration"),
            Subject::CpuOnly => f.write_str("cpu_only"),
        }
    }
}

/// How one figure moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Movement {
    /// Grew beyond its limit (or changed at all, under `strict`).
    Regressed,
    /// Shrank beyond its limit: passes, worth accepting.
    Improved,
    /// Changed within its limit.
    Within,
}

/// One figure that changed between the snapshot and the new result.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The figure: the peak, a category, the reserved bytes or the leak.
    pub subject: Subject,
    /// The snapshot's bytes.
    pub old: u64,
    /// The new result's bytes.
    pub new: u64,
    /// The limit the change is held to.
    pub limit: Limit,
    /// Whether it regressed, improved or stayed within its limit.
    pub movement: Movement,
    /// The phase (and iteration) the change is named under: for a category, the
    /// phase run that can allocate it (by the classification rule) whose own share of
    /// it moved most, when one moved ([`Finding::allocated_in`]); else the phase run
    /// whose peak moved most.
    pub phase: Option<(Phase, Option<u32>)>,
    /// Whether [`Finding::phase`] is where the category's change was allocated (`false`:
    /// the phase whose peak moved most).
    pub allocated_in: bool,
    /// Judged under `strict`: any difference fails.
    pub strict: bool,
    /// For the leak: the ceiling it was held to (its limit applied to the new peak).
    pub ceiling: Option<u64>,
    /// For the reserved bytes: the fragmentation (reserved but not allocated at the
    /// peak, [`Body::fragmentation_bytes`]) before and after.
    pub fragmentation: Option<(u64, u64)>,
}

impl Finding {
    /// `new - old`.
    pub fn delta(&self) -> i128 {
        self.new as i128 - self.old as i128
    }

    /// The change in percent of the old value (`None` when old is zero).
    pub fn percent(&self) -> Option<f64> {
        (self.old != 0).then(|| self.delta() as f64 * 100.0 / self.old as f64)
    }
}

impl fmt::Display for Finding {
    /// `activations: 1.00 MiB → 2.00 MiB (+1.00 MiB, +100.0%), over the limit +1%; allocated in forward (iteration 2)`
    ///
    /// A category's phase is where it was allocated (`allocated in`); the peak's, or a
    /// category's whose phases that can allocate it did not move, is the phase whose
    /// peak moved most (`the phase whose peak grew most`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let (Subject::Leak, Some(ceiling), Movement::Regressed, false) =
            (self.subject, self.ceiling, self.movement, self.strict)
        {
            return write!(
                f,
                "leak per iteration: {} (snapshot: {}) is over the ceiling of {} ({} of the peak): a leak fails whatever the snapshot holds; fix it, or opt out with `leak = \"allow\"` or a larger `leak` limit",
                HumanBytes(self.new),
                HumanBytes(self.old),
                HumanBytes(ceiling),
                self.limit
            );
        }
        write!(
            f,
            "{}: {} → {} ({}",
            self.subject,
            HumanBytes(self.old),
            HumanBytes(self.new),
            HumanDelta(self.delta())
        )?;
        match self.percent() {
            Some(p) => write!(f, ", {p:+.1}%)")?,
            None => write!(f, ", new)")?,
        }
        match self.movement {
            Movement::Regressed if self.strict => write!(f, ", any change fails (strict)")?,
            Movement::Regressed => write!(f, ", over the limit {}", self.limit)?,
            Movement::Improved => write!(
                f,
                ", improved by {}: accept to lock it in",
                HumanBytes(self.old - self.new)
            )?,
            Movement::Within => write!(f, ", within the limit {}", self.limit)?,
        }
        if let Some((phase, iteration)) = self.phase {
            let when = match iteration {
                Some(i) => format!("iteration {i}"),
                None => "set-up".to_owned(),
            };
            if self.allocated_in {
                let how = if self.delta() >= 0 { "more" } else { "less" };
                write!(f, "; allocated {how} in {phase} ({when})")?;
            } else {
                let verb = if self.delta() >= 0 { "grew" } else { "shrank" };
                write!(f, "; the phase whose peak {verb} most: {phase} ({when})")?;
            }
        }
        if let Some((old, new)) = self.fragmentation {
            write!(
                f,
                "; fragmentation (reserved, not allocated at the peak) {} → {}",
                HumanBytes(old),
                HumanBytes(new)
            )?;
        }
        Ok(())
    }
}

/// The overall outcome of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Bodies are identical.
    Unchanged,
    /// Something changed, within every limit.
    WithinLimits,
    /// Something shrank beyond its limit and nothing regressed.
    Improved,
    /// Something grew beyond its limit, or the budget was exceeded.
    Regressed,
}

/// The result of holding a new body to an old one under a policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The overall outcome.
    pub verdict: Verdict,
    /// Every figure that moved, regressions first.
    pub findings: Vec<Finding>,
    /// `Some((peak, budget))` when the peak exceeds the hard budget.
    pub over_budget: Option<(u64, u64)>,
    /// `Some((leak, ceiling))` when the leak per iteration exceeds its ceiling.
    pub over_leak_ceiling: Option<(u64, u64)>,
    /// Why the two bodies cannot be compared figure by figure (measured at another
    /// fidelity, over another number of iterations, in another format): one line that
    /// says what changed. The verdict is then `Regressed` with no findings.
    pub incomparable: Option<String>,
    /// Figures only one of the two bodies has, so not compared (a device snapshot
    /// written before `reserved_bytes` existed): one line each, failing nothing.
    pub notes: Vec<String>,
    /// The snapshot was recorded before CPU-only memory was kept apart
    /// ([`Body::predates_cpu_only`]): its `workspace` and peak are not compared (a
    /// note in `notes` shows them), every other figure is; strict mode fails. Accepting
    /// the result migrates the snapshot.
    pub predates_cpu_only: bool,
}

impl Comparison {
    /// The findings that fail the test.
    pub fn regressions(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.movement == Movement::Regressed)
    }

    /// Whether it fails whatever the snapshot holds (budget, leak ceiling): accepting
    /// the new result as the snapshot would not make it pass.
    pub fn fails_whatever_the_snapshot(&self) -> bool {
        self.over_budget.is_some() || self.over_leak_ceiling.is_some()
    }
}

/// Checks only the leak ceiling: `Some((leak, ceiling))` when the loop keeps more per
/// iteration than `policy.leak` allows for this peak.
pub fn check_leak(new: &Body, policy: &Policy) -> Option<(u64, u64)> {
    let ceiling = policy.leak.slack(new.peak_bytes);
    (new.leak_bytes_per_iteration > ceiling).then_some((new.leak_bytes_per_iteration, ceiling))
}

/// The failure line of a leak over its ceiling, for a result with no snapshot to
/// compare with (with one, the leak's [`Finding`] says it).
pub fn leak_message(new: &Body, policy: &Policy) -> Option<String> {
    check_leak(new, policy).map(|(leak, ceiling)| {
        format!(
            "leak per iteration: {} is over the ceiling of {} ({} of the peak): a leak fails whatever the snapshot holds; fix it, or opt out with `leak = \"allow\"` or a larger `leak` limit",
            HumanBytes(leak),
            HumanBytes(ceiling),
            policy.leak
        )
    })
}

/// Why `old` and `new` cannot be compared figure by figure, if they cannot.
pub fn incomparable(old: &Body, new: &Body) -> Option<String> {
    if old.schema != new.schema {
        Some(format!(
            "snapshot written in format {}, this run {}: re-accept it",
            old.schema, new.schema
        ))
    } else if old.fidelity != new.fidelity {
        Some(format!(
            "snapshot measured with fidelity {}, this run {}: re-accept it",
            old.fidelity, new.fidelity
        ))
    } else if old.iterations != new.iterations {
        Some(format!(
            "snapshot measured over {} iterations, this run {}: re-accept it",
            old.iterations, new.iterations
        ))
    } else {
        None
    }
}

/// Checks only the hard budget (for a result with no snapshot yet).
pub fn check_budget(new: &Body, policy: &Policy) -> Option<(u64, u64)> {
    policy
        .budget
        .filter(|&b| new.peak_bytes > b)
        .map(|b| (new.peak_bytes, b))
}

/// Holds `new` to `old` under `policy`.
pub fn compare(old: &Body, new: &Body, policy: &Policy) -> Comparison {
    let over_budget = check_budget(new, policy);
    let over_leak_ceiling = check_leak(new, policy);
    if let Some(why) = incomparable(old, new) {
        return Comparison {
            verdict: Verdict::Regressed,
            findings: Vec::new(),
            over_budget,
            over_leak_ceiling,
            incomparable: Some(why),
            notes: Vec::new(),
            predates_cpu_only: false,
        };
    }
    let predates_cpu_only = old.predates_cpu_only() && new.cpu_only.is_some();
    let mut findings: Vec<Finding> = subjects(old, new, policy, predates_cpu_only)
        .into_iter()
        .filter_map(|(subject, o, n)| {
            finding(subject, o, n, old, new, policy, over_leak_ceiling.is_some())
        })
        .collect();
    findings.sort_by_key(|f| match f.movement {
        Movement::Regressed => 0,
        Movement::Improved => 1,
        Movement::Within => 2,
    });
    let mut notes = uncompared(old, new);
    if predates_cpu_only {
        notes.push(format!(
            "note: workspace {} → {}, peak {} → {}: recorded before CPU-only memory was kept apart (this run: {} of CPU-only memory, measured apart): not compared; re-accept to migrate the snapshot",
            HumanBytes(old.category_peaks[Category::Workspace]),
            HumanBytes(new.category_peaks[Category::Workspace]),
            HumanBytes(old.peak_bytes),
            HumanBytes(new.peak_bytes),
            HumanBytes(new.cpu_only.unwrap_or(0)),
        ));
    }
    let mut verdict = verdict(old, new, policy, over_budget.is_some(), &findings);
    if predates_cpu_only && policy.strict {
        verdict = Verdict::Regressed;
    }
    Comparison {
        verdict,
        findings,
        over_budget,
        over_leak_ceiling,
        incomparable: None,
        notes,
        predates_cpu_only,
    }
}

/// Why a figure one body has and the other lacks was not compared: today the
/// reserved bytes of a device result against a snapshot written without them, or
/// the reverse (a device without memory pools).
fn uncompared(old: &Body, new: &Body) -> Vec<String> {
    match (old.reserved_bytes, new.reserved_bytes) {
        (None, Some(n)) => vec![format!(
            "note: reserved: the snapshot has no reserved bytes (written before they were recorded), this run {}: not compared; record them by accepting this result (VRAMTEST_UPDATE=always)",
            HumanBytes(n)
        )],
        (Some(o), None) => vec![format!(
            "note: reserved: the snapshot has {} reserved, this run none (a device without memory pools): not compared",
            HumanBytes(o)
        )],
        _ => Vec::new(),
    }
}

/// `(subject, old, new)` per figure: categories (what grew), the peak (its cost), the
/// pool's reserved peak where both bodies have one, the CPU-only memory under a
/// `cpu_only` limit, the leak. A snapshot that predates CPU-only memory being kept
/// apart has no comparable `workspace` and peak.
fn subjects(
    old: &Body,
    new: &Body,
    policy: &Policy,
    predates_cpu_only: bool,
) -> Vec<(Subject, u64, u64)> {
    let mut subjects: Vec<(Subject, u64, u64)> = Category::ALL
        .iter()
        .filter(|&&c| !(predates_cpu_only && c == Category::Workspace))
        .map(|&c| {
            (
                Subject::Category(c),
                old.category_peaks[c],
                new.category_peaks[c],
            )
        })
        .collect();
    if !predates_cpu_only {
        subjects.push((Subject::Peak, old.peak_bytes, new.peak_bytes));
    }
    if let (Some(o), Some(n)) = (old.reserved_bytes, new.reserved_bytes) {
        subjects.push((Subject::Reserved, o, n));
    }
    if let (Some(_), Some(o), Some(n)) = (policy.cpu_only, old.cpu_only, new.cpu_only) {
        subjects.push((Subject::CpuOnly, o, n));
    }
    subjects.push((
        Subject::Leak,
        old.leak_bytes_per_iteration,
        new.leak_bytes_per_iteration,
    ));
    subjects
}

/// The finding for a figure that went from `o` to `n`; `None` when nothing is to report.
fn finding(
    subject: Subject,
    o: u64,
    n: u64,
    old: &Body,
    new: &Body,
    policy: &Policy,
    over_leak_ceiling: bool,
) -> Option<Finding> {
    let leak = subject == Subject::Leak;
    // A leak over its ceiling fails even when the snapshot holds the same leak.
    if o == n && !(leak && over_leak_ceiling && !policy.strict) {
        return None;
    }
    let limit = if policy.strict {
        Limit::EXACT
    } else {
        policy.limit(subject)
    };
    let phase = match subject {
        Subject::Leak | Subject::Reserved => None,
        Subject::Category(c) => allocated_in(old, new, c, n > o)
            .map(|p| (p, true))
            .or_else(|| phase_of_change(old, new, n > o).map(|p| (p, false))),
        _ => phase_of_change(old, new, n > o).map(|p| (p, false)),
    };
    Some(Finding {
        subject,
        old: o,
        new: n,
        limit,
        movement: movement(leak, o, n, limit, new, policy),
        // Phase records hold allocated bytes: they say nothing of the reserved ones.
        phase: phase.map(|(p, _)| p),
        allocated_in: phase.is_some_and(|(_, allocated)| allocated),
        strict: policy.strict,
        ceiling: leak.then(|| policy.leak.slack(new.peak_bytes)),
        fragmentation: match subject {
            Subject::Reserved => old.fragmentation_bytes().zip(new.fragmentation_bytes()),
            _ => None,
        },
    })
}

/// How a figure moved against its limit (the leak: against its ceiling, unless strict).
fn movement(leak: bool, o: u64, n: u64, limit: Limit, new: &Body, policy: &Policy) -> Movement {
    let slack = limit.slack(o);
    if leak && !policy.strict {
        let ceiling = policy.leak.slack(new.peak_bytes);
        if n > ceiling {
            Movement::Regressed
        } else if o > ceiling {
            Movement::Improved
        } else {
            Movement::Within
        }
    } else if policy.strict || (n > o && n - o > slack) {
        Movement::Regressed
    } else if n < o && o - n > slack {
        Movement::Improved
    } else {
        Movement::Within
    }
}

/// The overall verdict from the findings, the budget and, under `strict`, any difference.
fn verdict(
    old: &Body,
    new: &Body,
    policy: &Policy,
    over_budget: bool,
    findings: &[Finding],
) -> Verdict {
    if over_budget || findings.iter().any(|f| f.movement == Movement::Regressed) {
        Verdict::Regressed
    } else if findings.iter().any(|f| f.movement == Movement::Improved) {
        Verdict::Improved
    } else if old != new {
        if policy.strict && differs_where_compared(old, new, policy) {
            Verdict::Regressed
        } else {
            Verdict::WithinLimits
        }
    } else {
        Verdict::Unchanged
    }
}

/// Whether the bodies differ in more than a figure only one of them has (the
/// reserved bytes: see [`Comparison::notes`]) or the CPU-only memory, which depends on
/// the CPU and is compared only under a `cpu_only` limit (set, or given on the snapshot's machine).
fn differs_where_compared(old: &Body, new: &Body, policy: &Policy) -> bool {
    let mut new = new.clone();
    if old.reserved_bytes.is_some() != new.reserved_bytes.is_some() {
        new.reserved_bytes = old.reserved_bytes;
    }
    if policy.cpu_only.is_none() {
        new.cpu_only = old.cpu_only;
    }
    *old != new
}

/// The phase run (matched by phase and iteration) whose peak moved the most in the
/// direction of the change.
fn phase_of_change(old: &Body, new: &Body, grew: bool) -> Option<(Phase, Option<u32>)> {
    most_moved(old, new, grew, |_| true, |r| i128::from(r.peak_bytes))
}

/// Where a change of `category` was allocated: among the phase runs that can allocate
/// it by the classification rule (parameters in `params`, optimizer state in
/// `optimizer_init` or `optimizer_step`, …; temporaries in any), the one whose own
/// share of the category moved most in the direction of the change: what it kept
/// (its end over its start) for a category that survives its phase, what it freed
/// before ending (its peak over its end) for temporaries. A phase's peak also holds
/// what earlier phases left alive, so its peak alone would name a later phase:
/// optimizer state made in `optimizer_init` raises every later peak too. `None` for
/// untracked bytes, and when none of those phase runs moved (a tag charged the bytes
/// elsewhere, or the state was made lazily in the warm-up's step, a phase run the
/// snapshot does not keep).
fn allocated_in(
    old: &Body,
    new: &Body,
    category: Category,
    grew: bool,
) -> Option<(Phase, Option<u32>)> {
    let can_allocate = |p: Phase| match category {
        Category::Temporaries => true,
        Category::Untracked => false,
        Category::Workspace => matches!(p, Phase::Inputs | Phase::Forward | Phase::Backward),
        c => p.survivor_category() == c,
    };
    let share = |r: &crate::profile::PhaseRecord| match category {
        Category::Temporaries => i128::from(r.peak_bytes) - i128::from(r.end_bytes),
        _ => i128::from(r.end_bytes) - i128::from(r.start_bytes),
    };
    most_moved(old, new, grew, can_allocate, share)
}

/// The phase run of `new` (among those `keep` lets through) whose `figure` moved most
/// against the same phase run of `old` (0 where `old` has none), in the direction of
/// the change.
fn most_moved(
    old: &Body,
    new: &Body,
    grew: bool,
    keep: impl Fn(Phase) -> bool,
    figure: impl Fn(&crate::profile::PhaseRecord) -> i128,
) -> Option<(Phase, Option<u32>)> {
    let mut best: Option<((Phase, Option<u32>), i128)> = None;
    for n in new.phases.iter().filter(|r| keep(r.phase)) {
        let key = (n.phase, n.iteration);
        let o = old
            .phases
            .iter()
            .find(|o| (o.phase, o.iteration) == key)
            .map_or(0, &figure);
        let delta = figure(n) - o;
        let delta = if grew { delta } else { -delta };
        if delta > 0 && best.is_none_or(|(_, d)| delta > d) {
            best = Some((key, delta));
        }
    }
    best.map(|(k, _)| k)
}

/// A unified diff of two snapshot bodies, as `similar` renders it.
pub fn body_diff(old: &Body, new: &Body, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::from_lines(&old.to_text(), &new.to_text())
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}
