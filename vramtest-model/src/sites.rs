//! Call sites: where the bytes of each category were allocated.
//!
//! On the CPU a step is deterministic, so a second run of it makes the same allocator
//! calls with the same sizes between the same markers (the order inside a stretch
//! between two markers may differ: a `HashMap` iterates in a random order in each
//! process). That makes a cheap question of "which line allocated the memory alive at
//! the peak": a first run names the sizes that matter in each stretch ([`plan`]), a
//! second run captures a stack trace for the calls of those sizes in those stretches
//! only, checks that its own stream has the same [`Fingerprint`] and that every block
//! alive at its own peaks was captured ([`uncaptured`]), and groups the blocks by where
//! they were made ([`sites`]).
//!
//! Nothing here captures or symbolizes: the harness does, and hands in a function from
//! a call to its [`SiteKey`].

use crate::category::{Category, Phase};
use crate::ledger::{Event, LiveChangeKind, NO_BLOCK, Tape};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// How many sites per category a snapshot's `info` keeps at least (then one line for
/// the rest).
pub const IN_SNAPSHOT: usize = 3;
/// A snapshot's `info` also keeps every site holding at least this share of its
/// category (1/`SNAPSHOT_SHARE`, 1%: the default limit's relative slack), so a later
/// failure can tell the site that grew from those that did not.
pub const SNAPSHOT_SHARE: u64 = 100;
/// The location of the line a snapshot's `info` keeps for a category's other sites.
pub const OTHER_SITES: &str = "(other sites)";
/// How the line of the other sites names the largest of them, in its operation's
/// place: `each at most 4096 B`.
const EACH_AT_MOST: (&str, &str) = ("each at most ", " B");
/// How many sites of a grown category a failure names.
pub const IN_FAILURE: usize = 3;

/// Identifies one allocator call of a stream: its position among the stream's
/// allocations and resizes (`Event::Alloc`, `Event::CpuOnlyAlloc` and `Event::Realloc`),
/// from 0.
pub type Call = u32;

/// A stretch of the stream between two markers (phase, iteration and tag boundaries),
/// numbered from 0: the number of markers before it.
pub type Stretch = u32;

/// What a second run must reproduce for its calls to line up with the first's: the
/// number of allocator calls, and a hash of the sizes of each stretch's calls (in size
/// order: the order inside a stretch may differ from run to run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Allocator calls of the run.
    pub calls: u64,
    /// FNV-1a over (stretch, sorted sizes) of each stretch.
    pub sizes_hash: u64,
}

impl Fingerprint {
    /// The fingerprint of a recorded stream.
    pub fn of(events: &[Event]) -> Fingerprint {
        let mut calls = Vec::new();
        let mut stretch: Stretch = 0;
        for e in events {
            match *e {
                Event::Alloc { bytes, .. }
                | Event::CpuOnlyAlloc { bytes, .. }
                | Event::Realloc { bytes, .. } => calls.push((stretch, bytes)),
                Event::Free { .. } => {}
                _ => stretch += 1,
            }
        }
        Fingerprint::of_calls(&calls, stretch)
    }

    /// The fingerprint of the calls `(stretch, bytes)`, in stream order, of a stream
    /// with `markers` markers.
    fn of_calls(calls: &[(Stretch, u64)], markers: Stretch) -> Fingerprint {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |v: u64| {
            for b in v.to_le_bytes() {
                hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        let mut rest = calls;
        let mut sizes: Vec<u64> = Vec::new();
        for stretch in 0..=markers {
            let n = rest.iter().take_while(|&&(s, _)| s == stretch).count();
            sizes.clear();
            sizes.extend(rest[..n].iter().map(|&(_, bytes)| bytes));
            sizes.sort_unstable();
            feed(u64::from(stretch));
            for &s in &sizes {
                feed(s);
            }
            rest = &rest[n..];
        }
        Fingerprint {
            calls: calls.len() as u64,
            sizes_hash: hash,
        }
    }
}

/// What a capture run captures traces of: every call of these sizes in these stretches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// `(stretch, bytes)`, sorted, without duplicates.
    pub wanted: Vec<(Stretch, u64)>,
    /// The first run's fingerprint: a capture run must match it.
    pub fingerprint: Fingerprint,
}

/// The stretch and size of every call behind a block alive at the step's peak or at a
/// category's own peak: the only blocks whose sites [`sites`] reports.
pub fn plan(events: &[Event]) -> Plan {
    let tape = Tape::read(events);
    let calls = calls(&tape);
    let mut wanted: Vec<(Stretch, u64)> = wanted(&tape)
        .into_iter()
        .map(|c| calls[c as usize])
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    Plan {
        wanted,
        fingerprint: Fingerprint::of_calls(&calls, tape.markers.len() as Stretch),
    }
}

/// The calls behind every block alive at the step's peak and at each category's own
/// peak, sorted.
pub fn wanted_calls(events: &[Event]) -> Vec<Call> {
    wanted(&Tape::read(events))
}

fn wanted(tape: &Tape) -> Vec<Call> {
    Peaks::read(tape).wanted()
}

/// The blocks alive at the step's peak and at each category's own peak, from one
/// replay of a stream: what [`uncaptured`] and [`sites`] both look at, so a run that
/// needs both reads its stream once.
pub struct Peaks {
    moments: Moments,
    /// The step's peak first, then each category's own peak in [`Category::ALL`] order.
    sets: Vec<Vec<LiveBlock>>,
}

impl Peaks {
    /// The peaks of `events`.
    pub fn of(events: &[Event]) -> Peaks {
        Peaks::read(&Tape::read(events))
    }

    fn read(tape: &Tape) -> Peaks {
        let moments = Moments::of(tape);
        let sets = live_at(tape, &moments);
        Peaks { moments, sets }
    }

    /// The calls behind every block alive at one of the peaks, sorted.
    fn wanted(&self) -> Vec<Call> {
        let mut calls: Vec<Call> = self.sets.iter().flatten().map(|b| b.call).collect();
        calls.sort_unstable();
        calls.dedup();
        calls
    }

    /// How many of the calls [`Peaks::sites`] needs have no trace (`captured` says
    /// which do).
    pub fn uncaptured(&self, mut captured: impl FnMut(Call) -> bool) -> usize {
        self.wanted().into_iter().filter(|&c| !captured(c)).count()
    }

    /// [`sites`] of the stream these peaks were read from.
    pub fn sites(
        &self,
        capture: Capture,
        traces: u64,
        mut site_of: impl FnMut(Call) -> Option<SiteKey>,
    ) -> Sites {
        let (moments, sets) = (&self.moments, &self.sets);
        let mut keys: HashMap<Call, SiteKey> = HashMap::new();
        let mut key_of = |call: Call| {
            keys.entry(call)
                .or_insert_with(|| site_of(call).unwrap_or_default())
                .clone()
        };
        let mut categories = Vec::new();
        for category in Category::ALL {
            let at_peak: Vec<&LiveBlock> =
                sets[0].iter().filter(|b| b.category == category).collect();
            let bytes: u64 = at_peak.iter().map(|b| b.bytes).sum();
            let sites = group(&at_peak, &mut key_of);
            let own = &sets[1 + category.index()];
            let own_bytes: u64 = own.iter().map(|b| b.category_bytes(category)).sum();
            let own_peak = (own_bytes > bytes).then(|| {
                let blocks: Vec<&LiveBlock> =
                    own.iter().filter(|b| b.category == category).collect();
                OwnPeak {
                    bytes: own_bytes,
                    phase: moments.category_peaks[category.index()].and_then(|m| m.phase),
                    sites: group(&blocks, &mut key_of),
                }
            });
            if bytes > 0 || own_peak.is_some() {
                categories.push(CategorySites {
                    category,
                    bytes,
                    sites,
                    own_peak,
                });
            }
        }
        Sites {
            capture,
            traces,
            categories,
            notes: Vec::new(),
        }
    }
}

/// The stretch and size of every call of the stream, in order.
fn calls(tape: &Tape) -> Vec<(Stretch, u64)> {
    let mut out = Vec::new();
    let mut markers = tape.markers.iter().peekable();
    let (mut stretch, mut k): (Stretch, usize) = (0, 0);
    for change in &tape.changes {
        // The markers before the `k`th allocation, release or resize.
        while markers.next_if(|m| m.observations_before <= k).is_some() {
            stretch += 1;
        }
        if change.kind == LiveChangeKind::Made {
            out.push((stretch, change.bytes));
        }
        k += usize::from(change.observe);
    }
    out
}

/// How many of the calls [`sites`] needs have no trace (`captured` says which do).
pub fn uncaptured(events: &[Event], captured: impl FnMut(Call) -> bool) -> usize {
    Peaks::of(events).uncaptured(captured)
}

/// Where a block was made, as the harness reads it from a stack trace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SiteKey {
    /// The first frame outside the standard library and vramtest: the library
    /// operation that allocated (`candle_core::tensor::Tensor::cat`).
    pub operation: Option<String>,
    /// The first frame in the user's own code, as `file:line` relative to the package
    /// (`src/lib.rs:79`).
    pub location: Option<String>,
    /// The user's functions from the one at `location` out to the step, innermost
    /// first (`logits() ← step`): how the step reached the allocation. `None` when
    /// the allocation is in the step itself, or in a snapshot written without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callers: Option<String>,
}

impl SiteKey {
    /// Whether `other` is the same site: the same line and operation, and the same
    /// callers where both know them (a snapshot written before they were kept names
    /// none).
    pub fn same_site(&self, other: &SiteKey) -> bool {
        self.location == other.location
            && self.operation == other.operation
            && (self.callers.is_none() || other.callers.is_none() || self.callers == other.callers)
    }
}

/// Bytes alive at one moment that were allocated at one site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    /// Bytes alive.
    pub bytes: u64,
    /// How many blocks.
    pub count: u64,
    /// Where they were allocated.
    #[serde(flatten)]
    pub key: SiteKey,
}

impl Site {
    /// The one-line form a snapshot's `info` keeps: `bytes | count | location |
    /// operation`, `-` for what is unknown, then ` | callers` when they are known.
    pub fn to_line(&self) -> String {
        let mut line = format!(
            "{} | {} | {} | {}",
            self.bytes,
            self.count,
            self.key.location.as_deref().unwrap_or("-"),
            self.key.operation.as_deref().unwrap_or("-")
        );
        if let Some(callers) = &self.key.callers {
            line += " | ";
            line += callers;
        }
        line
    }

    /// Reads [`Site::to_line`]'s form back.
    pub fn from_line(line: &str) -> Option<Site> {
        let mut parts = line.splitn(4, " | ");
        let bytes = parts.next()?.trim().parse().ok()?;
        let count = parts.next()?.trim().parse().ok()?;
        let known = |s: &str| (s.trim() != "-").then(|| s.trim().to_owned());
        let location = known(parts.next()?);
        // An operation holds no ` | ` (a Rust path); what follows it is the callers.
        let rest = parts.next()?;
        let (operation, callers) = match rest.split_once(" | ") {
            Some((operation, callers)) => (known(operation), known(callers)),
            None => (known(rest), None),
        };
        Some(Site {
            bytes,
            count,
            key: SiteKey {
                operation,
                location,
                callers,
            },
        })
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in {} block{} at {}",
            crate::HumanBytes(self.bytes),
            self.count,
            if self.count == 1 { "" } else { "s" },
            self.key.location.as_deref().unwrap_or("an unknown line")
        )?;
        if let Some(callers) = &self.key.callers {
            write!(f, " in {callers}")?;
        }
        if let Some(op) = &self.key.operation {
            write!(f, " ({op})")?;
        }
        Ok(())
    }
}

/// A category's sites: at the step's peak, and at its own peak when that is higher.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CategorySites {
    /// The category.
    pub category: Category,
    /// The category's bytes alive at the step's peak.
    pub bytes: u64,
    /// Where they were allocated, most bytes first.
    pub sites: Vec<Site>,
    /// The category's own peak, when it is higher than its bytes at the step's peak.
    pub own_peak: Option<OwnPeak>,
}

/// A category's own peak and the sites of its bytes at that moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnPeak {
    /// The category's bytes at its own peak.
    pub bytes: u64,
    /// The phase running at that moment.
    pub phase: Option<Phase>,
    /// Where they were allocated, most bytes first.
    pub sites: Vec<Site>,
}

/// How the traces were captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capture {
    /// For the calls of a first run's [`Plan`]: the second run matched it.
    Planned,
    /// For every allocation of the run (the step did not repeat its allocations).
    Everything,
}

/// The call sites of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sites {
    /// How the traces were captured.
    pub capture: Capture,
    /// How many stack traces were captured.
    pub traces: u64,
    /// Per category with bytes at the peak or an own peak, in report order.
    pub categories: Vec<CategorySites>,
    /// What a reader should know (a step that did not repeat itself, a capture cut
    /// short).
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Sites {
    /// The sites of `category` at the step's peak.
    pub fn of(&self, category: Category) -> &[Site] {
        self.categories
            .iter()
            .find(|c| c.category == category)
            .map_or(&[], |c| &c.sites)
    }

    /// The sites of `category` at its own peak (the figure a snapshot compares).
    pub fn at_own_peak(&self, category: Category) -> &[Site] {
        self.categories
            .iter()
            .find(|c| c.category == category)
            .map_or(&[], |c| c.own_peak.as_ref().map_or(&c.sites, |o| &o.sites))
    }

    /// The top sites of each category at its own peak, as a snapshot's `info` keeps
    /// them: the [`IN_SNAPSHOT`] largest and every other one that holds at least
    /// 1/[`SNAPSHOT_SHARE`] of the category, then one line ([`OTHER_SITES`]) with the
    /// bytes and blocks of all the others and the bytes of the largest of them (the
    /// most a site missing from the list held).
    pub fn for_snapshot(&self) -> Vec<(Category, Vec<Site>)> {
        Category::ALL
            .into_iter()
            .map(|c| (c, self.at_own_peak(c)))
            .filter(|(_, sites)| !sites.is_empty())
            .map(|(c, sites)| {
                let total: u64 = sites.iter().map(|s| s.bytes).sum();
                let n = sites
                    .iter()
                    .enumerate()
                    .take_while(|(i, s)| {
                        *i < IN_SNAPSHOT || s.bytes.saturating_mul(SNAPSHOT_SHARE) >= total
                    })
                    .count();
                let mut kept: Vec<Site> = sites[..n].to_vec();
                let rest = &sites[n..];
                if !rest.is_empty() {
                    let largest = rest.iter().map(|s| s.bytes).max().unwrap_or(0);
                    kept.push(Site {
                        bytes: rest.iter().map(|s| s.bytes).sum(),
                        count: rest.iter().map(|s| s.count).sum(),
                        key: SiteKey {
                            operation: Some(format!(
                                "{}{largest}{}",
                                EACH_AT_MOST.0, EACH_AT_MOST.1
                            )),
                            location: Some(OTHER_SITES.to_owned()),
                            callers: None,
                        },
                    });
                }
                (c, kept)
            })
            .collect()
    }
}

/// Groups the blocks alive at the step's peak, and at each category's own peak, by the
/// site `site_of` gives their call (`None`: no trace was captured for it).
pub fn sites(
    events: &[Event],
    capture: Capture,
    traces: u64,
    site_of: impl FnMut(Call) -> Option<SiteKey>,
) -> Sites {
    Peaks::of(events).sites(capture, traces, site_of)
}

fn group(blocks: &[&LiveBlock], key_of: &mut impl FnMut(Call) -> SiteKey) -> Vec<Site> {
    let mut by_key: HashMap<SiteKey, (u64, u64)> = HashMap::new();
    for b in blocks {
        let entry = by_key.entry(key_of(b.call)).or_default();
        entry.0 += b.bytes;
        entry.1 += 1;
    }
    let mut sites: Vec<Site> = by_key
        .into_iter()
        .map(|(key, (bytes, count))| Site { bytes, count, key })
        .collect();
    sites.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
    sites
}

/// The most a site missing from a snapshot's list held (`None`: the list holds every
/// site): at most what all the other
/// sites held together, at most what the smallest listed one held, and at most the
/// largest other site where the list names it (lists written since it does).
pub fn absent_floor(old: &[Site]) -> Option<u64> {
    let rest = old.iter().find(|s| is_rest(s))?;
    let named = rest
        .key
        .operation
        .as_deref()
        .and_then(|op| {
            op.strip_prefix(EACH_AT_MOST.0)?
                .strip_suffix(EACH_AT_MOST.1)
        })
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    Some(
        old.iter()
            .filter(|s| !is_rest(s))
            .map(|s| s.bytes)
            .min()
            .unwrap_or(rest.bytes)
            .min(rest.bytes)
            .min(named),
    )
}

/// Whether `s` is the line a snapshot keeps for a category's other sites.
fn is_rest(s: &Site) -> bool {
    s.key.location.as_deref() == Some(OTHER_SITES)
}

/// A site of a category that grew, against the same category's sites in the accepted
/// snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteChange {
    /// The site as it is now.
    pub site: Site,
    /// The site's bytes in the snapshot; `None`: not among the snapshot's sites (or the
    /// snapshot kept none).
    pub old_bytes: Option<u64>,
    /// What the snapshot's list says of a site it does not hold.
    pub absent: Absent,
}

/// What a site missing from the snapshot's list means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absent {
    /// The snapshot kept no sites: nothing to compare with.
    NoSnapshotSites,
    /// The snapshot kept every site of the category: this one is new.
    New,
    /// The snapshot kept its top sites only, and its other sites held this many bytes
    /// together: this one is new, or held at most that much before.
    AtMost(u64),
}

impl SiteChange {
    /// How much the site grew, at least (a site under the snapshot's top ones may have
    /// held up to the smallest of them).
    pub fn growth(&self) -> i128 {
        let before = match (self.old_bytes, self.absent) {
            (Some(old), _) => old,
            (None, Absent::AtMost(floor)) => floor,
            (None, _) => 0,
        };
        i128::from(self.site.bytes) - i128::from(before)
    }
}

impl fmt::Display for SiteChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.site)?;
        match (self.old_bytes, self.absent) {
            (None, Absent::New) => write!(f, " [new site]"),
            (None, Absent::AtMost(before)) => write!(
                f,
                " [new site, or grew from at most {}]",
                crate::HumanBytes(before)
            ),
            (Some(old), _) if old < self.site.bytes => write!(
                f,
                " [grew at this site by {}]",
                crate::HumanBytes(self.site.bytes - old)
            ),
            _ => Ok(()),
        }
    }
}

/// The sites of a grown category against `old` (the snapshot's list of the category,
/// as [`Sites::for_snapshot`] keeps it): only those that grew (by at least one byte,
/// for a site the list does not hold: new, or grown from at most the largest site it
/// left out), most grown first. Without `old` (a snapshot taken without sites): every
/// site, by bytes.
pub fn changes(new: &[Site], old: Option<&[Site]>) -> Vec<SiteChange> {
    let absent = match old {
        None => Absent::NoSnapshotSites,
        Some(old) => absent_floor(old).map_or(Absent::New, Absent::AtMost),
    };
    let mut out: Vec<SiteChange> = new
        .iter()
        .map(|site| SiteChange {
            site: site.clone(),
            old_bytes: old.and_then(|old| {
                old.iter()
                    .find(|o| o.key.same_site(&site.key))
                    .map(|o| o.bytes)
            }),
            absent,
        })
        .collect();
    if old.is_some() {
        out.retain(|c| c.growth() > 0);
        out.sort_by(|a, b| {
            b.growth()
                .cmp(&a.growth())
                .then_with(|| b.site.bytes.cmp(&a.site.bytes))
        });
    }
    out
}

/// One block alive at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LiveBlock {
    call: Call,
    bytes: u64,
    category: Category,
}

impl LiveBlock {
    fn category_bytes(&self, category: Category) -> u64 {
        if self.category == category {
            self.bytes
        } else {
            0
        }
    }
}

/// A moment of the stream: after its `at`th allocation, release or resize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Moment {
    at: usize,
    phase: Option<Phase>,
}

/// The step's peak and each category's own peak: the first allocation, release or
/// resize after which the total (or the category's live bytes) reached its highest
/// value.
#[derive(Debug)]
struct Moments {
    peak: Option<Moment>,
    category_peaks: [Option<Moment>; Category::ALL.len()],
}

impl Moments {
    fn of(tape: &Tape) -> Moments {
        let mut best_total = 0;
        let mut best = [0u64; Category::ALL.len()];
        let mut peak = None;
        let mut category_peaks = [None; Category::ALL.len()];
        tape.replay(|at, live| {
            let total = live.iter().sum();
            if total > best_total {
                best_total = total;
                peak = Some(at);
            }
            for (c, &bytes) in live.iter().enumerate() {
                if bytes > best[c] {
                    best[c] = bytes;
                    category_peaks[c] = Some(at);
                }
            }
        });
        let moment = |at: usize| Moment {
            at,
            phase: phase_at(tape, at),
        };
        Moments {
            peak: peak.map(moment),
            category_peaks: category_peaks.map(|m| m.map(moment)),
        }
    }

    /// The step's peak first, then each category's own peak.
    fn all(&self) -> impl Iterator<Item = Option<usize>> + '_ {
        std::iter::once(self.peak)
            .chain(self.category_peaks.iter().copied())
            .map(|m| m.map(|m| m.at))
    }
}

/// The innermost phase running at the `at`th allocation, release or resize.
fn phase_at(tape: &Tape, at: usize) -> Option<Phase> {
    let mut stack: Vec<Phase> = Vec::new();
    let before = tape
        .markers
        .iter()
        .take_while(|m| m.observations_before <= at);
    for marker in before {
        match marker.event {
            Event::PhaseStart(p) => stack.push(p),
            Event::PhaseEnd => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack.last().copied()
}

/// The blocks alive after each of `moments` (the step's peak, then each category's
/// own peak; an empty set where there is no such moment), from the tape: a block is
/// keyed by its allocation's ordinal, and carries the last call that made or resized it.
fn live_at(tape: &Tape, moments: &Moments) -> Vec<Vec<LiveBlock>> {
    let wanted: Vec<Option<usize>> = moments.all().collect();
    let mut sets = vec![Vec::new(); wanted.len()];
    let mut order: Vec<(usize, usize)> = wanted
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.map(|at| (at, i)))
        .collect();
    order.sort_unstable();
    let mut next = order.iter().peekable();
    // block → (call, bytes)
    let mut live: HashMap<u32, (Call, u64)> = HashMap::new();
    let (mut call, mut at): (Call, usize) = (0, 0);
    for change in &tape.changes {
        if next.peek().is_none() {
            break;
        }
        match change.kind {
            LiveChangeKind::Made => {
                // A CPU-only block is a call of no block: counted, never a site.
                if change.block != NO_BLOCK {
                    live.insert(change.block, (call, change.bytes));
                }
                call += 1;
            }
            LiveChangeKind::Released => {
                live.remove(&change.block);
            }
            // A resize took the old size off; the block lives on, made by its last call.
            LiveChangeKind::Resized => {}
        }
        if !change.observe {
            continue;
        }
        while let Some(&(_, i)) = next.next_if(|&&(m, _)| m == at) {
            sets[i] = live
                .iter()
                .map(|(&block, &(call, bytes))| LiveBlock {
                    call,
                    bytes,
                    category: tape.categories[block as usize],
                })
                .collect();
        }
        at += 1;
    }
    sets
}

#[cfg(test)]
mod tests {
    use super::*;
    use Event::*;

    /// params: 1000 B; forward: a 300 B activation and a 50 B temporary, then a 700 B
    /// temporary at the peak; backward: frees everything but the parameters.
    fn stream() -> Vec<Event> {
        vec![
            PhaseStart(Phase::Params),
            Alloc { id: 1, bytes: 1000 },
            PhaseEnd,
            IterationStart(0),
            PhaseStart(Phase::Forward),
            Alloc { id: 2, bytes: 300 },
            Alloc { id: 3, bytes: 50 },
            Free { id: 3 },
            Alloc { id: 4, bytes: 700 },
            Free { id: 4 },
            PhaseEnd,
            PhaseStart(Phase::Backward),
            Free { id: 2 },
            PhaseEnd,
            IterationEnd,
        ]
    }

    #[test]
    fn the_plan_names_the_calls_alive_at_the_peaks() {
        // Calls: 0 = params, 1 = activation, 2 = 50 B temporary, 3 = 700 B temporary.
        // The peak (2000 B) holds 0, 1 and 3; temporaries' own peak is that moment too.
        assert_eq!(wanted_calls(&stream()), vec![0, 1, 3]);
        let plan = plan(&stream());
        // Params' allocation is in stretch 1 (after one marker), forward's in 4.
        assert_eq!(plan.wanted, vec![(1, 1000), (4, 300), (4, 700)]);
        assert_eq!(plan.fingerprint.calls, 4);
        assert_eq!(uncaptured(&stream(), |c| c != 2), 0);
        assert_eq!(uncaptured(&stream(), |c| c != 3), 1);
    }

    #[test]
    fn a_fingerprint_tells_a_different_size_or_count_apart_but_not_another_order() {
        let a = Fingerprint::of(&stream());
        let mut other = stream();
        other[6] = Alloc { id: 3, bytes: 51 };
        assert_ne!(Fingerprint::of(&other), a);
        other.truncate(8);
        assert_ne!(Fingerprint::of(&other).calls, a.calls);
        assert_eq!(Fingerprint::of(&stream()), a);
        // The same calls in another order inside one stretch: the same fingerprint.
        let mut swapped = stream();
        swapped.swap(5, 6);
        assert_eq!(Fingerprint::of(&swapped), a);
        // One call moved to another stretch: not the same.
        let mut moved = stream();
        let call = moved.remove(1);
        moved.insert(4, call);
        assert_ne!(Fingerprint::of(&moved), a);
    }

    #[test]
    fn sites_group_the_peak_by_key_per_category() {
        let key = |line: u32| SiteKey {
            operation: Some("lib::op".into()),
            location: Some(format!("src/lib.rs:{line}")),
            callers: None,
        };
        let s = sites(&stream(), Capture::Planned, 3, |call| match call {
            0 => Some(key(10)),
            1 => Some(key(20)),
            3 => Some(key(30)),
            _ => None,
        });
        assert_eq!(
            s.of(Category::Parameters),
            [Site {
                bytes: 1000,
                count: 1,
                key: key(10)
            }]
        );
        assert_eq!(s.of(Category::Activations)[0].key, key(20));
        assert_eq!(s.of(Category::Temporaries)[0].bytes, 700);
        assert_eq!(s.of(Category::Gradients), []);
        // The activation's own peak is the step's peak: no separate list.
        let act = &s.categories[s
            .categories
            .iter()
            .position(|c| c.category == Category::Activations)
            .unwrap()];
        assert_eq!(act.own_peak, None);
    }

    #[test]
    fn a_category_whose_own_peak_is_elsewhere_lists_that_moment_too() {
        // Backward allocates a 400 B gradient after the peak has passed; it is
        // released before the iteration ends.
        let mut events = stream();
        let at = events.len() - 2;
        events.insert(at, Alloc { id: 9, bytes: 400 });
        events.insert(events.len() - 1, Free { id: 9 });
        let s = sites(&events, Capture::Everything, 5, |call| {
            Some(SiteKey {
                operation: None,
                location: Some(format!("call {call}")),
                callers: None,
            })
        });
        let grads = s
            .categories
            .iter()
            .find(|c| c.category == Category::Gradients)
            .expect("gradients have an own peak");
        assert_eq!(grads.bytes, 0);
        let own = grads.own_peak.as_ref().unwrap();
        assert_eq!(own.bytes, 400);
        assert_eq!(own.phase, Some(Phase::Backward));
        assert_eq!(own.sites[0].key.location.as_deref(), Some("call 4"));
    }

    #[test]
    fn a_resized_block_is_found_at_its_last_call() {
        let events = vec![
            PhaseStart(Phase::Params),
            Alloc { id: 1, bytes: 10 },
            Realloc {
                from: 1,
                to: 2,
                bytes: 100,
            },
            PhaseEnd,
        ];
        assert_eq!(wanted_calls(&events), vec![1]);
    }

    #[test]
    fn site_lines_round_trip() {
        for site in [
            Site {
                bytes: 524_288,
                count: 3,
                key: SiteKey {
                    operation: Some("<candle_core::Tensor as core::ops::Add>::add".into()),
                    location: Some("src/lib.rs:79".into()),
                    callers: None,
                },
            },
            Site {
                bytes: 1,
                count: 1,
                key: SiteKey::default(),
            },
            Site {
                bytes: 2048,
                count: 2,
                key: SiteKey {
                    operation: Some("burn::nn::TransformerEncoder<B>::forward".into()),
                    location: Some("src/lib.rs:40".into()),
                    callers: Some("logits() ← step".into()),
                },
            },
        ] {
            assert_eq!(Site::from_line(&site.to_line()), Some(site));
        }
        assert_eq!(Site::from_line("x | 1 | - | -"), None);
        assert!(
            Site::from_line("2048 | 2 | src/lib.rs:40 | op | logits() ← step")
                .unwrap()
                .to_string()
                .ends_with("at src/lib.rs:40 in logits() ← step (op)")
        );
    }

    /// A snapshot written before callers were kept still matches its sites.
    #[test]
    fn a_site_without_callers_is_the_same_site() {
        let old = Site::from_line("100 | 1 | src/lib.rs:40 | op").unwrap();
        let new = Site::from_line("300 | 1 | src/lib.rs:40 | op | logits() ← step").unwrap();
        let other = Site::from_line("300 | 1 | src/lib.rs:40 | op | loss() ← step").unwrap();
        assert!(new.key.same_site(&old.key) && old.key.same_site(&new.key));
        assert!(!new.key.same_site(&other.key));
        let c = changes(std::slice::from_ref(&new), Some(&[old]));
        assert_eq!(c[0].old_bytes, Some(100));
    }

    #[test]
    fn changes_list_only_the_sites_that_grew_most_grown_first_and_name_new_ones() {
        let site = |bytes, line: &str| Site {
            bytes,
            count: 1,
            key: SiteKey {
                operation: None,
                location: Some(line.into()),
                callers: None,
            },
        };
        let new = [
            site(2000, "a.rs:1"),
            site(1000, "b.rs:2"),
            site(30, "c.rs:3"),
        ];
        let old = [site(2000, "a.rs:1"), site(10, "c.rs:3")];
        let c = changes(&new, Some(&old));
        // a.rs:1 did not grow: not listed, though it is the largest.
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0].site.key.location.as_deref(), Some("b.rs:2"));
        assert_eq!(c[0].old_bytes, None);
        assert!(c[0].to_string().ends_with("[new site]"), "{}", c[0]);
        assert_eq!(c[1].old_bytes, Some(10));
        assert!(
            c[1].to_string().ends_with("[grew at this site by 20 B]"),
            "{}",
            c[1]
        );
        // A list with a line for its other sites: one missing from it may have been
        // among those, with at most their bytes (and at most the smallest kept one's).
        let old = [
            site(2000, "a.rs:1"),
            site(600, "d.rs:4"),
            site(500, "e.rs:5"),
            site(300, OTHER_SITES),
        ];
        let c = changes(&new, Some(&old));
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].site.key.location.as_deref(), Some("b.rs:2"));
        assert_eq!(c[0].growth(), 700);
        assert!(
            c[0].to_string()
                .ends_with("[new site, or grew from at most 300 B]"),
            "{}",
            c[0]
        );
        // The line of the other sites names the largest of them: the tighter bound.
        let mut named = old.clone();
        named[3].key.operation = Some("each at most 20 B".into());
        assert_eq!(absent_floor(&named), Some(20));
        let c = changes(&new, Some(&named));
        assert_eq!(c[0].growth(), 980);
        assert_eq!(c[1].site.key.location.as_deref(), Some("c.rs:3"));
        assert_eq!(c[1].growth(), 10);
        // Without the old sites: by bytes, nothing called new.
        let c = changes(&new, None);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].site.bytes, 2000);
        assert!(!c[0].to_string().contains("new site"));
    }

    /// The case of a debug hook keeping one more feature map per block: the largest
    /// sites are unchanged and the one that grew is small; the failure lists it, and
    /// only it.
    #[test]
    fn a_small_site_that_grew_is_found_among_large_unchanged_ones() {
        let site = |bytes: u64, line: u64| Site {
            bytes,
            count: 4,
            key: SiteKey {
                operation: Some("batch_norm".into()),
                location: Some(format!("src/lib.rs:{line}")),
                callers: None,
            },
        };
        // Ten batch-norm sites of 1 MiB down to 100 KiB, and twenty small ones.
        let mut before: Vec<Site> = (0..10).map(|i| site((10 - i) << 17, 100 + i)).collect();
        before.extend((0..20).map(|i| site(512, 200 + i)));
        let snapshot = |sites: &[Site]| Sites {
            capture: Capture::Planned,
            traces: 1,
            categories: vec![CategorySites {
                category: Category::Activations,
                bytes: sites.iter().map(|s| s.bytes).sum(),
                sites: sites.to_vec(),
                own_peak: None,
            }],
            notes: Vec::new(),
        };
        let kept = snapshot(&before).for_snapshot().remove(0).1;
        // Read back as a later run reads the snapshot's `info`.
        let kept: Vec<Site> = kept
            .iter()
            .map(|s| Site::from_line(&s.to_line()).unwrap())
            .collect();
        let mut after = before.clone();
        let hook = Site {
            bytes: 97 << 10,
            count: 8,
            key: SiteKey {
                operation: Some("clone".into()),
                location: Some("src/lib.rs:300".into()),
                callers: None,
            },
        };
        after.insert(10, hook.clone());
        let c = changes(&after, Some(&kept));
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].site, hook);
        assert_eq!(c[0].growth(), (97 << 10) - 512);
        assert!(
            c[0].to_string()
                .ends_with("[new site, or grew from at most 512 B]"),
            "{}",
            c[0]
        );
        // One of the small sites grew too, by less: listed after the hook.
        after[15].bytes = 8192;
        let c = changes(&after, Some(&kept));
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0].site, hook);
        assert_eq!(c[1].growth(), 8192 - 512);
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;

    #[test]
    fn a_snapshot_keeps_the_top_sites_and_one_line_for_the_rest() {
        let site = |bytes, count, line: &str| Site {
            bytes,
            count,
            key: SiteKey {
                operation: None,
                location: Some(line.into()),
                callers: None,
            },
        };
        let all: Vec<Site> = (0..5)
            .map(|i| site(100 - i, 2, &format!("a.rs:{i}")))
            .collect();
        let sites = Sites {
            capture: Capture::Planned,
            traces: 10,
            categories: vec![CategorySites {
                category: Category::Activations,
                bytes: all.iter().map(|s| s.bytes).sum(),
                sites: all.clone(),
                own_peak: None,
            }],
            notes: Vec::new(),
        };
        let kept = sites.for_snapshot();
        assert_eq!(kept.len(), 1);
        let (category, list) = &kept[0];
        assert_eq!(*category, Category::Activations);
        // Each of the five holds 20% of the category: all kept, no line for the rest.
        assert_eq!(list, &all);
        // Sites under 1% of the category beyond the top three: one line, naming the
        // largest of them.
        let mut all = all;
        all.extend((0..4).map(|i| site(4 - i, 1, &format!("b.rs:{i}"))));
        let sites = Sites {
            categories: vec![CategorySites {
                category: Category::Activations,
                bytes: all.iter().map(|s| s.bytes).sum(),
                sites: all.clone(),
                own_peak: None,
            }],
            ..sites
        };
        let (_, list) = &sites.for_snapshot()[0];
        assert_eq!(&list[..5], &all[..5]);
        let mut rest = site(4 + 3 + 2 + 1, 4, OTHER_SITES);
        rest.key.operation = Some("each at most 4 B".into());
        assert_eq!(list[5..], [rest]);
    }
}
