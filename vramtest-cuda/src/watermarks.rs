//! The arithmetic of the CUDA probe, kept pure: boundary samples in, a [`Profile`] out.
//!
//! A [`PoolSession`](crate::PoolSession) records one stream of [`Event`]s (the harness's
//! markers and any tracked allocations) and, at every sampled boundary, one [`Sample`]
//! of the driver's counters. [`profile`] turns the two into a [`Profile`] by
//! *synthesizing* allocation events from the samples and handing the result to
//! [`vramtest_model::ledger::profile`], so that the classification rule, the per-phase
//! records, the peak search and the leak signal are the very same code as for the exact
//! probes. What is synthesized:
//!
//! - **Untracked** memory (always): the device's used-bytes growth since the start that
//!   the probe does not account for, `U = Δ(device used) − Δ(pool slack) − accounted`,
//!   clamped at 0, where the probe accounts for the pool's used-bytes growth (phase
//!   fidelity) or the tracked live bytes (exact fidelity: the harness's tracked
//!   allocations, or the per-allocation records a session merges in, see
//!   [`exact_profile`]), and the pool's slack is
//!   `reserved − used`. So untracked is device memory outside the pool (the CUDA
//!   runtime's own growth: cuBLAS handles and workspaces, loaded modules, `cuMemAlloc`
//!   outside the pool) plus, in exact fidelity, pool allocations nobody tracked; being
//!   device-wide it also includes other processes on the same GPU. In phase fidelity
//!   this is "device used − pool used" with the pool's reserved-but-unused bytes taken
//!   out: at a boundary sample those are mostly the freed temporaries of the phase that
//!   just ended, already counted at the peak, so they are reported apart as
//!   [`PoolFigures::fragmentation_bytes`] / `reserved_peak_bytes` instead. A rise of `U`
//!   over the interval between two samples is charged from the *start* of that interval
//!   and a fall at its *end*, so inside an interval untracked is
//!   `max(U before, U after)`: the value at the peak is the one measured at the end of
//!   the peak's interval (the peak phase's end, or an earlier boundary inside it), not
//!   an underestimate from before it. These synthetic allocations are tagged
//!   [`Category::Untracked`].
//! - **Pool growth** (phase fidelity only: when no allocation was tracked, or when the
//!   tracked ones leave more than `max(1 MiB, 1%)` of the pool's used memory unexplained,
//!   i.e. the probe did not see every allocation; the tracked events are then left out,
//!   the pool's figures holding them already). For the
//!   interval ending at sample `k`, with live bytes `L0`, `L1` at its ends (pool used
//!   minus pool used at the start) and the pool's high-water mark `H` over it
//!   (`USED_MEM_HIGH`, reset at every sample): the growth `L1 − L0`, when positive, is one
//!   allocation made at the end of the interval, in the innermost phase open there, so
//!   the ledger's rule classifies it (a phase's survivors; forward survivors still alive
//!   when their iteration ends become workspace, else activations). The excess of the
//!   high-water mark over both ends, `H − max(L0, L1)`, is a temporary allocated and
//!   freed right after it: the survivors are assumed to be live at the in-phase peak
//!   (they usually are: a forward pass accumulates activations while its temporaries
//!   come and go), so the breakdown at a peak is "everything alive before the interval +
//!   the interval's survivors + its temporaries", and it sums to the peak. A shrink
//!   `L0 − L1` frees the most recent synthetic allocations first (last in, first out:
//!   activations are released in reverse order of their making). Which buffers were
//!   freed inside an interval is not observable from watermarks, so a phase that frees
//!   one category while allocating another (a backward pass freeing activations while
//!   allocating gradients) is charged its net growth only: that is the limit of `phase`
//!   fidelity, and why tracked allocations give `exact`.
//!
//! Without memory pools (the fallback), the samples carry the device's used bytes
//! (`total − free` from `cuMemGetInfo`) in place of the pool's, with no high-water mark
//! between samples, and untracked is 0 in phase fidelity (everything the device uses is
//! charged to the phases).

use std::collections::HashMap;
use vramtest_model::{Category, Event, Fidelity, Profile};

/// The driver's counters at one boundary, after a synchronize.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Sample {
    /// Index into the recorded event stream of the boundary event this sample was taken
    /// at: the sample is taken just *before* that event takes effect (a `PhaseStart`'s
    /// sample is outside the new phase, a `PhaseEnd`'s inside the ending one). The final
    /// sample, taken at `finish`, has `before_event == events.len()`.
    pub before_event: usize,
    /// The pool's `USED_MEM_CURRENT` (fallback: the device's used bytes).
    pub used: u64,
    /// The pool's `USED_MEM_HIGH` since the previous sample (fallback: `used`).
    pub used_high: u64,
    /// The pool's `RESERVED_MEM_CURRENT` (fallback: 0).
    pub reserved: u64,
    /// The pool's `RESERVED_MEM_HIGH` since the previous sample (fallback: 0).
    pub reserved_high: u64,
    /// The device's used bytes, `total − free` from `cuMemGetInfo`.
    pub device_used: u64,
}

/// Where a session's samples come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The device's memory pool (`cuMemAllocAsync`): used/reserved watermarks.
    Pool,
    /// The device has no memory pools: `cuMemGetInfo` deltas at the boundaries only.
    DeviceUsed,
}

/// Figures of the pool itself, beside the [`Profile`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PoolFigures {
    /// The pool's highest used bytes above its used bytes at the start.
    pub used_peak_bytes: u64,
    /// The pool's highest reserved bytes above its reserved bytes at the start
    /// (`None` without pools).
    pub reserved_peak_bytes: Option<u64>,
    /// Reserved but unused at the peaks: `reserved_peak_bytes − used_peak_bytes`
    /// (fragmentation and the pool's rounding to its granules).
    pub fragmentation_bytes: u64,
    /// The device's used bytes at the start (context included): the baseline.
    pub device_baseline_bytes: u64,
}

/// The profile of a session: exact fidelity when `events` holds tracked allocations and
/// they account for all of the pool's used memory; else phase fidelity from the pool
/// watermarks, and a mixed run (tracked allocations beside pool allocations nobody
/// reported) says how much it did not see (`Profile::not_seen_bytes`). See the module
/// documentation for the rules.
///
/// `baseline` is the sample taken when the session started (its `before_event` is
/// ignored); `samples` are the later ones, in order, with non-decreasing `before_event`.
pub fn profile(events: &[Event], baseline: &Sample, samples: &[Sample], source: Source) -> Profile {
    if !events.iter().any(|e| matches!(e, Event::Alloc { .. })) {
        return build(events, baseline, samples, source, false);
    }
    let not_seen = not_seen_pool_bytes(events, baseline, samples, source);
    if not_seen <= not_seen_tolerance(baseline, samples) {
        return build(events, baseline, samples, source, true);
    }
    // Some allocations were not seen: the pool's watermarks, without the tracked
    // allocations (which the pool's figures already hold).
    let mut markers = Vec::with_capacity(events.len());
    let mut kept_before = Vec::with_capacity(events.len() + 1);
    for e in events {
        kept_before.push(markers.len());
        if !matches!(e, Event::Alloc { .. } | Event::Free { .. }) {
            markers.push(*e);
        }
    }
    kept_before.push(markers.len());
    let samples: Vec<Sample> = samples
        .iter()
        .map(|s| Sample {
            before_event: kept_before[s.before_event.min(events.len())],
            ..*s
        })
        .collect();
    let mut p = build(&markers, baseline, &samples, source, false);
    p.not_seen_bytes = Some(not_seen);
    p
}

/// The most pool memory (above the start) that the tracked allocations leave
/// unexplained: pool allocations nobody reported. Checked at each sample (pool used
/// against the tracked live bytes) and *inside* each interval (the pool's
/// `USED_MEM_HIGH` over it against the most tracked bytes live in it), so a pool
/// allocation made and freed inside a phase (a library's workspace taken from the
/// stream-ordered pool, as cuBLAS 12.2+ may) is seen too. 0 without pools, where the
/// device's used bytes cannot tell them from the runtime's own memory.
fn not_seen_pool_bytes(
    events: &[Event],
    baseline: &Sample,
    samples: &[Sample],
    source: Source,
) -> u64 {
    if source != Source::Pool {
        return 0;
    }
    samples
        .iter()
        .zip(tracked_at(events, samples))
        .map(|(s, tracked)| {
            let at_sample = s
                .used
                .saturating_sub(baseline.used)
                .saturating_sub(tracked.live);
            let inside = s
                .used_high
                .saturating_sub(baseline.used)
                .saturating_sub(tracked.peak);
            at_sample.max(inside)
        })
        .max()
        .unwrap_or(0)
}

/// What the pool may hold beyond the tracked bytes from its own rounding:
/// `max(1 MiB, 1% of its highest used bytes)`.
fn not_seen_tolerance(baseline: &Sample, samples: &[Sample]) -> u64 {
    let used = samples
        .iter()
        .map(|s| s.used.saturating_sub(baseline.used))
        .max()
        .unwrap_or(0);
    (used / 100).max(1 << 20)
}

/// The profile of a session whose `events` hold *every* allocation of the device (a
/// per-allocation record source such as CUPTI): exact fidelity even when it saw none,
/// with untracked memory computed as for tracked allocations.
pub fn exact_profile(
    events: &[Event],
    baseline: &Sample,
    samples: &[Sample],
    source: Source,
) -> Profile {
    build(events, baseline, samples, source, true)
}

/// The profile of the events with synthetic allocations woven in (see the module docs).
fn build(
    events: &[Event],
    baseline: &Sample,
    samples: &[Sample],
    source: Source,
    exact: bool,
) -> Profile {
    let accounted = accounted_at(events, baseline, samples, exact);
    let untracked: Vec<u64> = samples
        .iter()
        .zip(&accounted)
        .map(|(s, &a)| match (exact, source) {
            (false, Source::DeviceUsed) => 0,
            _ => untracked_at(s, baseline, source, a),
        })
        .collect();
    let plan = SyntheticPlan::new(baseline, samples, &accounted, &untracked, exact);
    let out = plan.weave(events, samples);

    let mut p = vramtest_model::ledger::profile(&out);
    p.fidelity = if exact {
        Fidelity::Exact
    } else {
        Fidelity::Phase
    };
    p.allocations = if exact {
        events
            .iter()
            .filter(|e| matches!(e, Event::Alloc { .. }))
            .count() as u64
    } else {
        0
    };
    let figures = pool_figures(baseline, samples, source);
    p.baseline_bytes = baseline.device_used;
    p.reserved_peak_bytes = figures.reserved_peak_bytes;
    p
}

/// Live bytes the probe accounts for at each sample: tracked (exact) or pool (phase).
fn accounted_at(events: &[Event], baseline: &Sample, samples: &[Sample], exact: bool) -> Vec<u64> {
    if exact {
        tracked_at(events, samples)
            .into_iter()
            .map(|t| t.live)
            .collect()
    } else {
        samples
            .iter()
            .map(|s| s.used.saturating_sub(baseline.used))
            .collect()
    }
}

/// The synthetic allocations planned interval by interval. Interval k runs from sample
/// k-1 (or the start) to sample k.
struct SyntheticPlan {
    synth: Synth,
    /// Acts at the start of each interval (the last entry: after the last sample).
    heads: Vec<Vec<Act>>,
    /// Acts at the end of each interval.
    tails: Vec<Vec<Act>>,
}

impl SyntheticPlan {
    /// Plans the untracked memory and, in phase fidelity, the pool's growth.
    fn new(
        baseline: &Sample,
        samples: &[Sample],
        accounted: &[u64],
        untracked: &[u64],
        exact: bool,
    ) -> SyntheticPlan {
        let mut plan = SyntheticPlan {
            synth: Synth::default(),
            heads: vec![Vec::new(); samples.len() + 1],
            tails: vec![Vec::new(); samples.len()],
        };
        let mut pool_stack = Stack::default();
        let mut untracked_stack = Stack::default();
        let mut prev_live = 0u64;
        let mut prev_untracked = 0u64;
        for (k, s) in samples.iter().enumerate() {
            let u = untracked[k];
            if u > prev_untracked {
                let e = plan.synth.entry(u - prev_untracked, true);
                untracked_stack.push(e);
                plan.heads[k].push(Act::Alloc(e));
            }
            if !exact {
                let live = accounted[k];
                let high = s.used_high.saturating_sub(baseline.used);
                plan.pool_interval(k, &mut pool_stack, prev_live, live, high);
                prev_live = live;
            }
            if u < prev_untracked {
                for piece in untracked_stack.release(&mut plan.synth, prev_untracked - u) {
                    plan.tails[k].push(Act::Free(piece));
                }
            }
            prev_untracked = u;
        }
        plan
    }

    /// The pool's survivors, temporary and frees over interval `k` (phase fidelity).
    fn pool_interval(&mut self, k: usize, stack: &mut Stack, prev_live: u64, live: u64, high: u64) {
        let high = high.max(live).max(prev_live);
        if live > prev_live {
            let e = self.synth.entry(live - prev_live, false);
            stack.push(e);
            self.tails[k].push(Act::Alloc(e));
        }
        let temporary = high - live.max(prev_live);
        if temporary > 0 {
            self.tails[k].push(Act::Temporary(temporary));
        }
        if live < prev_live {
            for piece in stack.release(&mut self.synth, prev_live - live) {
                self.tails[k].push(Act::Free(piece));
            }
        }
    }

    /// The recorded stream with the plan woven in at the samples' places.
    fn weave(mut self, events: &[Event], samples: &[Sample]) -> Vec<Event> {
        let mut out: Vec<Event> = Vec::with_capacity(events.len() + 4 * samples.len());
        let mut ids = IdMap::default();
        let mut next_sample = 0;
        self.synth.emit(&self.heads[0], &mut out, &mut ids);
        for (i, event) in events.iter().enumerate() {
            let mut heads_after = Vec::new();
            while next_sample < samples.len() && samples[next_sample].before_event <= i {
                self.synth
                    .emit(&self.tails[next_sample], &mut out, &mut ids);
                heads_after.push(next_sample + 1);
                next_sample += 1;
            }
            ids.push_renumbered(*event, &mut out);
            for k in heads_after {
                self.synth.emit(&self.heads[k], &mut out, &mut ids);
            }
        }
        while next_sample < samples.len() {
            self.synth
                .emit(&self.tails[next_sample], &mut out, &mut ids);
            self.synth
                .emit(&self.heads[next_sample + 1], &mut out, &mut ids);
            next_sample += 1;
        }
        out
    }
}

/// The pool's own peaks over a session (see [`PoolFigures`]).
pub fn pool_figures(baseline: &Sample, samples: &[Sample], source: Source) -> PoolFigures {
    let used_peak_bytes = samples
        .iter()
        .map(|s| s.used_high.max(s.used).saturating_sub(baseline.used))
        .max()
        .unwrap_or(0);
    let reserved_peak_bytes = match source {
        Source::Pool => Some(
            samples
                .iter()
                .map(|s| {
                    s.reserved_high
                        .max(s.reserved)
                        .saturating_sub(baseline.reserved)
                })
                .max()
                .unwrap_or(0),
        ),
        Source::DeviceUsed => None,
    };
    PoolFigures {
        used_peak_bytes,
        reserved_peak_bytes,
        fragmentation_bytes: reserved_peak_bytes.map_or(0, |r| r.saturating_sub(used_peak_bytes)),
        device_baseline_bytes: baseline.device_used,
    }
}

/// Device memory growth the probe does not account for: `(device used − pool slack)
/// growth − accounted`, clamped at 0, where the pool's slack is `reserved − used` (0
/// without pools).
fn untracked_at(s: &Sample, baseline: &Sample, source: Source, accounted: u64) -> u64 {
    let slack = |x: &Sample| match source {
        Source::Pool => i128::from(x.reserved) - i128::from(x.used),
        Source::DeviceUsed => 0,
    };
    let device_growth = i128::from(s.device_used) - i128::from(baseline.device_used);
    let u = device_growth - (slack(s) - slack(baseline)) - i128::from(accounted);
    u64::try_from(u.max(0)).unwrap_or(u64::MAX)
}

/// The tracked bytes around one sample.
#[derive(Debug, Clone, Copy)]
struct Tracked {
    /// Live at the sample (every `Alloc`/`Free` before its event replayed).
    live: u64,
    /// The most live at once in the interval that ends at the sample (from the sample
    /// before, or the start).
    peak: u64,
}

/// [`Tracked`] bytes at each sample, from one replay of the tracked allocations.
fn tracked_at(events: &[Event], samples: &[Sample]) -> Vec<Tracked> {
    let mut live: HashMap<u64, u64> = HashMap::new();
    let (mut total, mut peak) = (0u64, 0u64);
    let mut out = Vec::with_capacity(samples.len());
    let mut next = 0;
    for (i, event) in events.iter().enumerate() {
        while next < samples.len() && samples[next].before_event <= i {
            out.push(Tracked { live: total, peak });
            peak = total;
            next += 1;
        }
        match *event {
            Event::Alloc { id, bytes } => {
                if let Some(old) = live.insert(id, bytes) {
                    total -= old;
                }
                total += bytes;
                peak = peak.max(total);
            }
            Event::Free { id } => {
                if let Some(bytes) = live.remove(&id) {
                    total -= bytes;
                }
            }
            _ => {}
        }
    }
    while out.len() < samples.len() {
        out.push(Tracked { live: total, peak });
        peak = total;
    }
    out
}

/// One planned action on synthetic allocations.
#[derive(Debug, Clone, Copy)]
enum Act {
    /// Allocate every piece of entry `.0` (tagged untracked when the entry is).
    Alloc(usize),
    /// Free one piece (entry, piece index).
    Free((usize, usize)),
    /// A temporary of this many bytes: allocated and freed at once.
    Temporary(u64),
}

/// A synthetic allocation, carved into pieces by the frees that later consume it, so
/// that every free releases whole pieces (the ledger has no partial frees).
#[derive(Debug, Clone, Default)]
struct Entry {
    untracked: bool,
    /// Sizes of the pieces freed so far, in order.
    pieces: Vec<u64>,
    /// Bytes not yet freed (the last piece, alive at the end).
    remaining: u64,
    /// The event id of each piece, assigned at emission (`pieces` then `remaining`).
    ids: Vec<u64>,
}

#[derive(Debug, Default)]
struct Synth {
    entries: Vec<Entry>,
}

impl Synth {
    fn entry(&mut self, bytes: u64, untracked: bool) -> usize {
        self.entries.push(Entry {
            untracked,
            remaining: bytes,
            ..Entry::default()
        });
        self.entries.len() - 1
    }

    fn emit(&mut self, acts: &[Act], out: &mut Vec<Event>, ids: &mut IdMap) {
        for act in acts {
            match *act {
                Act::Alloc(e) => {
                    let entry = &mut self.entries[e];
                    if entry.untracked {
                        out.push(Event::TagPush(Category::Untracked));
                    }
                    let sizes = entry
                        .pieces
                        .iter()
                        .copied()
                        .chain((entry.remaining > 0).then_some(entry.remaining));
                    for bytes in sizes {
                        let id = ids.fresh();
                        entry.ids.push(id);
                        out.push(Event::Alloc { id, bytes });
                    }
                    if entry.untracked {
                        out.push(Event::TagPop);
                    }
                }
                Act::Free((e, piece)) => out.push(Event::Free {
                    id: self.entries[e].ids[piece],
                }),
                Act::Temporary(bytes) => {
                    let id = ids.fresh();
                    out.push(Event::Alloc { id, bytes });
                    out.push(Event::Free { id });
                }
            }
        }
    }
}

/// Live synthetic entries, last in first out.
#[derive(Debug, Default)]
struct Stack(Vec<usize>);

impl Stack {
    fn push(&mut self, entry: usize) {
        self.0.push(entry);
    }

    /// Frees `bytes` from the most recent entries; returns the pieces freed.
    fn release(&mut self, synth: &mut Synth, mut bytes: u64) -> Vec<(usize, usize)> {
        let mut freed = Vec::new();
        while bytes > 0 {
            let Some(&top) = self.0.last() else { break };
            let entry = &mut synth.entries[top];
            let take = bytes.min(entry.remaining);
            entry.pieces.push(take);
            entry.remaining -= take;
            freed.push((top, entry.pieces.len() - 1));
            bytes -= take;
            if entry.remaining == 0 {
                self.0.pop();
            }
        }
        freed
    }
}

/// Ids of the synthesized stream: tracked ids are renumbered so they never collide with
/// synthetic ones.
#[derive(Debug, Default)]
struct IdMap {
    next: u64,
    tracked: HashMap<u64, u64>,
}

impl IdMap {
    /// A new id, never used before in the stream.
    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Pushes a recorded event onto `out`, its tracked allocation renumbered.
    fn push_renumbered(&mut self, event: Event, out: &mut Vec<Event>) {
        match event {
            Event::Alloc { id, bytes } => {
                if let Some(old) = self.tracked.remove(&id) {
                    // The ledger's rule: an id reused while live closes the old allocation.
                    out.push(Event::Free { id: old });
                }
                let fresh = self.fresh();
                self.tracked.insert(id, fresh);
                out.push(Event::Alloc { id: fresh, bytes });
            }
            Event::Free { id } => {
                if let Some(fresh) = self.tracked.remove(&id) {
                    out.push(Event::Free { id: fresh });
                }
            }
            other => out.push(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_model::{CategoryBytes, Phase};

    const MIB: u64 = 1 << 20;

    /// A sample of a pool with no untracked device memory (device used = pool used).
    fn s(before_event: usize, used: u64, used_high: u64) -> Sample {
        Sample {
            before_event,
            used,
            used_high,
            reserved: used,
            reserved_high: used_high,
            device_used: used,
        }
    }

    #[test]
    fn survivors_and_temporaries_of_one_phase() {
        // params: +4 MiB survivors, 1 MiB of temporaries on top.
        let events = [Event::PhaseStart(Phase::Params), Event::PhaseEnd];
        let samples = [s(0, 0, 0), s(1, 4 * MIB, 5 * MIB), s(2, 4 * MIB, 4 * MIB)];
        let p = profile(&events, &Sample::default(), &samples, Source::Pool);
        assert_eq!(p.fidelity, Fidelity::Phase);
        assert_eq!(p.peak_bytes, 5 * MIB);
        assert_eq!(p.peak_phase, Some(Phase::Params));
        assert_eq!(p.at_peak[Category::Parameters], 4 * MIB);
        assert_eq!(p.at_peak[Category::Temporaries], MIB);
        assert_eq!(p.at_peak.total(), p.peak_bytes);
        assert_eq!(p.phases[0].start_bytes, 0);
        assert_eq!(p.phases[0].peak_bytes, 5 * MIB);
        assert_eq!(p.phases[0].end_bytes, 4 * MIB);
        assert_eq!(p.allocations, 0);
    }

    #[test]
    fn shrinking_frees_the_most_recent_growth_first() {
        // forward +3 MiB, then an unphased interval frees 2 MiB (within the iteration):
        // 2 MiB of activations freed in the iteration, 1 MiB still alive at its end.
        let events = [
            Event::IterationStart(0),
            Event::PhaseStart(Phase::Forward),
            Event::PhaseEnd,
            Event::IterationEnd,
        ];
        let samples = [
            s(0, 0, 0),
            s(1, 0, 0),
            s(2, 3 * MIB, 3 * MIB),
            s(3, MIB, 3 * MIB),
        ];
        let p = profile(&events, &Sample::default(), &samples, Source::Pool);
        assert_eq!(p.peak_bytes, 3 * MIB);
        // The 3 MiB chunk was split: 2 MiB freed within the iteration (activations),
        // 1 MiB outlived it (workspace).
        assert_eq!(p.at_peak[Category::Activations], 2 * MIB);
        assert_eq!(p.at_peak[Category::Workspace], MIB);
        assert_eq!(p.iteration_end_bytes, vec![MIB]);
    }

    #[test]
    fn untracked_is_device_growth_beyond_the_pool() {
        let events = [Event::PhaseStart(Phase::Forward), Event::PhaseEnd];
        let base = Sample {
            device_used: 500 * MIB,
            ..Sample::default()
        };
        let mut end = s(1, 8 * MIB, 8 * MIB);
        end.device_used = 500 * MIB + 8 * MIB + 32 * MIB; // + a 32 MiB library workspace
        let samples = [
            Sample {
                device_used: 500 * MIB,
                ..s(0, 0, 0)
            },
            end,
        ];
        let p = profile(&events, &base, &samples, Source::Pool);
        assert_eq!(p.at_peak[Category::Untracked], 32 * MIB);
        assert_eq!(p.peak_bytes, 40 * MIB);
        assert_eq!(p.at_peak.total(), p.peak_bytes);
        assert_eq!(p.baseline_bytes, 500 * MIB);
    }

    #[test]
    fn device_used_source_has_no_untracked_and_no_reserved() {
        let events = [Event::PhaseStart(Phase::Params), Event::PhaseEnd];
        let mut samples = [s(0, 0, 0), s(1, 6 * MIB, 6 * MIB)];
        for x in &mut samples {
            x.reserved = 0;
            x.reserved_high = 0;
        }
        let p = profile(&events, &Sample::default(), &samples, Source::DeviceUsed);
        assert_eq!(p.at_peak[Category::Parameters], 6 * MIB);
        assert_eq!(p.at_peak[Category::Untracked], 0);
        assert_eq!(p.reserved_peak_bytes, None);
    }

    #[test]
    fn tracked_allocations_give_the_ledger_profile() {
        let events = vec![
            Event::PhaseStart(Phase::Params),
            Event::Alloc { id: 7, bytes: 100 },
            Event::PhaseEnd,
            Event::IterationStart(0),
            Event::PhaseStart(Phase::Forward),
            Event::Alloc { id: 8, bytes: 50 },
            Event::Alloc { id: 9, bytes: 30 },
            Event::Free { id: 9 },
            Event::PhaseEnd,
            Event::Free { id: 8 },
            Event::IterationEnd,
        ];
        // Samples at every boundary; device used equals the tracked bytes.
        let at = |i: usize, live: u64| Sample {
            before_event: i,
            device_used: live,
            ..Sample::default()
        };
        let samples = [
            at(0, 0),
            at(2, 100),
            at(3, 100),
            at(4, 100),
            at(8, 150),
            at(10, 100),
            at(11, 100),
        ];
        let p = profile(&events, &Sample::default(), &samples, Source::Pool);
        let ledger = vramtest_model::ledger::profile(&events);
        assert_eq!(p.fidelity, Fidelity::Exact);
        assert_eq!(p.at_peak, ledger.at_peak);
        assert_eq!(p.peak_bytes, ledger.peak_bytes);
        assert_eq!(p.category_peaks, ledger.category_peaks);
        assert_eq!(p.phases, ledger.phases);
        assert_eq!(p.allocations, 3);
        assert_eq!(
            p.at_peak,
            CategoryBytes::from([
                (Category::Parameters, 100),
                (Category::Activations, 50),
                (Category::Temporaries, 30),
            ])
        );
    }

    #[test]
    fn reused_tracked_ids_follow_the_ledger() {
        let events = vec![
            Event::Alloc { id: 1, bytes: 10 },
            Event::Alloc { id: 1, bytes: 20 },
            Event::Free { id: 42 },
        ];
        let p = profile(&events, &Sample::default(), &[], Source::Pool);
        let ledger = vramtest_model::ledger::profile(&events);
        assert_eq!(p.peak_bytes, ledger.peak_bytes);
        assert_eq!(p.at_peak, ledger.at_peak);
    }
}
