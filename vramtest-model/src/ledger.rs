//! The ledger: one pure function from a probe's event stream to a [`Profile`].
//!
//! Probes only record what happened (allocations, frees, resizes, phase and iteration
//! boundaries, tags). Which category a byte belongs to is decided here, after the run,
//! by [`classify`] — the one place that says "survivors of forward are activations".
//!
//! # How
//!
//! The stream is read once, front to back. The walk keeps the live allocations in a
//! `HashMap` by id and decides each allocation's category the moment it is released (or
//! at the end of the stream): every fact the rule needs is known by then. It writes
//! down what each allocation, release and resize did to the live bytes (a `Tape`);
//! a second walk, over the tape rather than the stream, adds and subtracts bytes per
//! category once every category is known. Memory: about 16 B per event of the tape, 1 B
//! per allocation for its category, and the map of the allocations alive at once.

use crate::category::{Category, Phase};
use crate::profile::{CategoryBytes, Fidelity, LeakSite, PhaseRecord, Profile};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

mod moments;

/// One thing a probe observed, in the order it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// `bytes` were allocated under the identity `id` (an address, a handle).
    Alloc {
        /// The allocation's identity.
        id: u64,
        /// Its size.
        bytes: u64,
    },
    /// `bytes` of CPU-only memory were allocated under `id`: memory that exists only
    /// because the step runs on a CPU (gemm's packing buffers, a thread pool's
    /// cache-padded queues), which a GPU would never hold. Measured apart
    /// ([`Profile::cpu_only_peak_bytes`]): never charged to a category, never part of the
    /// peak or the phase figures, whatever the tag; a resize keeps it CPU-only.
    CpuOnlyAlloc {
        /// The allocation's identity.
        id: u64,
        /// Its size.
        bytes: u64,
    },
    /// The allocation `id` was released. Frees of ids never seen belong to the baseline.
    Free {
        /// The identity the allocation was made under.
        id: u64,
    },
    /// The allocation `from` was resized to `bytes` and now lives under `to` (`to ==
    /// from` when it was resized in place). The block keeps the phase, iteration and tag
    /// it was first allocated under; when it moves, the old and the new copy both count
    /// at that moment, then the old one is released. A resize of an id never seen (the
    /// baseline's) is a new allocation of `bytes`.
    Realloc {
        /// The identity before the resize.
        from: u64,
        /// The identity after it.
        to: u64,
        /// The new size.
        bytes: u64,
    },
    /// A phase method started.
    PhaseStart(Phase),
    /// The innermost running phase ended.
    PhaseEnd,
    /// The loop entered iteration `n`.
    IterationStart(u32),
    /// The current iteration ended.
    IterationEnd,
    /// `t.tag(category, ..)` started: allocations inside are charged to `category`.
    TagPush(Category),
    /// The innermost tag ended.
    TagPop,
}

/// The facts about one allocation that decide its category.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    /// An explicit `t.tag(..)` around the allocation.
    pub tag: Option<Category>,
    /// The phase it was allocated in (`None`: outside any phase).
    pub phase: Option<Phase>,
    /// Freed before that phase ended.
    pub freed_before_phase_end: bool,
    /// Inside the loop: still alive when its iteration ended. Outside the loop: still
    /// alive at the end of the test.
    pub outlives: bool,
}

/// The classification rule (the book: `docs/src/guide/categories.md`), in one place:
///
/// 1. an explicit tag wins;
/// 2. freed before the phase that made it ended → `temporaries`;
/// 3. survivors of `params` → `parameters`; of `optimizer_init` and `optimizer_step`
///    → `optimizer_state` (optimizers create their state lazily, in the first step);
/// 4. survivors of `inputs`, `forward` and `backward` still alive when their iteration
///    ended (outside the loop: never released, alive at the end of the test) →
///    `workspace` (a library's cache or scratch buffer); the others → `inputs`,
///    `activations`, `gradients`;
/// 5. outside any phase: `workspace` if it outlives its iteration (outside the loop:
///    if it is alive at the end of the test), else `temporaries`.
pub fn classify(cx: &Context) -> Category {
    if let Some(tag) = cx.tag {
        return tag;
    }
    let Some(phase) = cx.phase else {
        return if cx.outlives {
            Category::Workspace
        } else {
            Category::Temporaries
        };
    };
    if cx.freed_before_phase_end {
        return Category::Temporaries;
    }
    match phase {
        Phase::Params | Phase::OptimizerInit | Phase::OptimizerStep => phase.survivor_category(),
        Phase::Inputs | Phase::Forward | Phase::Backward if cx.outlives => Category::Workspace,
        Phase::Inputs | Phase::Forward | Phase::Backward => phase.survivor_category(),
    }
}

/// Turns an event stream into a [`Profile`] (with `Fidelity::Exact`).
pub fn profile(events: &[Event]) -> Profile {
    profile_observing(events, |_, _| {})
}

/// Calls `observe` once for every allocation, release and resize of the stream, in
/// order, with the event's index and the live bytes per category it leaves — for a
/// resize that moves a block, at the moment both copies exist (the higher of its two
/// states, so the peak is among the observed values). What a timeline is drawn from;
/// the categories are those [`profile`] charges.
pub fn live_by_category(events: &[Event], observe: impl FnMut(usize, &CategoryBytes)) {
    profile_observing(events, observe);
}

/// [`profile`] and [`live_by_category`] at once, from one walk of the stream: the
/// profile, after calling `observe` as [`live_by_category`] does.
pub fn profile_observing(
    events: &[Event],
    mut observe: impl FnMut(usize, &CategoryBytes),
) -> Profile {
    let walk = Walk::run(events);
    // Observation `k` is the stream's event `k` plus the markers before it.
    let mut skipped = 0;
    // The phases open at each observation (innermost last), and each phase's own
    // highest live bytes per category.
    let mut open: Vec<Phase> = Vec::new();
    let mut phase_peaks: Vec<(Phase, [u64; Category::ALL.len()])> = Vec::new();
    let mut moments = moments::Moments::default();
    let totals = walk.tape.replay_marked(|replayed, live| {
        let k = match replayed {
            Replayed::Marker(marker) => {
                skipped += 1;
                match marker {
                    // A phase's start is one of its moments, as the bytes stand there.
                    Event::PhaseStart(phase) => {
                        open.push(phase);
                        moments.start(phase, live);
                    }
                    Event::PhaseEnd => {
                        open.pop();
                    }
                    Event::IterationStart(_) => moments.iteration_start(),
                    Event::IterationEnd => moments.iteration_end(),
                    _ => {}
                }
                return;
            }
            Replayed::Observation(k) => k,
        };
        moments.observe(open.last().copied(), live);
        if let Some(&phase) = open.last() {
            let i = match phase_peaks.iter().position(|(p, _)| *p == phase) {
                Some(i) => i,
                None => {
                    phase_peaks.push((phase, [0; Category::ALL.len()]));
                    phase_peaks.len() - 1
                }
            };
            for (peak, &bytes) in phase_peaks[i].1.iter_mut().zip(live) {
                *peak = (*peak).max(bytes);
            }
        }
        observe(k + skipped, &to_bytes(live));
    });
    let mut profile = walk.into_profile(totals);
    phase_peaks.sort_by_key(|(p, _)| *p);
    profile.phase_category_peaks = phase_peaks
        .into_iter()
        .map(|(p, live)| (p, to_bytes(&live)))
        .collect();
    profile.phase_moments = moments.finish();
    profile
}

/// The category of every allocation, in the order they were made (a resize of a known
/// allocation is not a new one): what [`profile`] charges them to.
pub fn categories(events: &[Event]) -> Vec<Category> {
    Tape::read(events).categories
}

/// Growth of live bytes per iteration after the warm-up: the smallest step between
/// consecutive iteration ends from iteration 1 on, when every step grows; else 0.
/// Iteration 0 may allocate lazy state and caches once; only growth that repeats is a leak.
pub fn leak_per_iteration(iteration_end_bytes: &[u64]) -> u64 {
    iteration_end_bytes
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .min()
        .unwrap_or(0)
}

fn to_bytes(live: &[u64; Category::ALL.len()]) -> CategoryBytes {
    let mut out = CategoryBytes::default();
    for c in Category::ALL {
        out[c] = live[c.index()];
    }
    out
}

// ---------------------------------------------------------------------------------------
// The tape: what the walk of the stream writes down for the second walk.

/// In a [`LiveChange`]: no allocation (a release of an id never seen).
pub(crate) const NO_BLOCK: u32 = u32::MAX;

/// What one allocation, release or resize did to the live bytes. An event makes one to
/// three of them, the last (for a resize that moves a block, the one that adds the new
/// copy) marked `observe`: the live bytes after it are the event's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LiveChange {
    /// The allocation, by its ordinal among the stream's allocations, or [`NO_BLOCK`].
    pub block: u32,
    pub kind: LiveChangeKind,
    pub observe: bool,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LiveChangeKind {
    /// An allocator call (an allocation or a resize) made the block `bytes` large:
    /// exactly one per `Event::Alloc` and `Event::Realloc`.
    Made,
    /// The block, `bytes` large, was released.
    Released,
    /// A resize took the block's old `bytes` off; the block lives on.
    Resized,
}

/// The stream as the second walk reads it.
pub(crate) struct Tape {
    /// Per allocation, by ordinal: its category.
    pub categories: Vec<Category>,
    pub changes: Vec<LiveChange>,
    /// Each marker (phase, iteration, tag), in order.
    pub markers: Vec<Marker>,
}

/// A marker of the stream and where it falls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Marker {
    /// The marker.
    pub event: Event,
    /// How many allocations, releases and resizes (observations) came before it.
    pub observations_before: usize,
    /// How many changes came before it. A move-resize's release is no observation of
    /// its own, so the live bytes as they stand at a marker are those after the
    /// changes before it, not the last observation's.
    pub changes_before: usize,
}

/// What [`Tape::replay_marked`] hands its callback, with the live bytes per category.
pub(crate) enum Replayed {
    /// A marker, where it stands among the changes: the live bytes after every change
    /// before it (markers after the last change are not handed).
    Marker(Event),
    /// An allocation, release or resize: its number among them, from 0, with the live
    /// bytes after it.
    Observation(usize),
}

impl Tape {
    /// Reads the stream once.
    pub fn read(events: &[Event]) -> Tape {
        Walk::run(events).tape
    }

    /// Walks the changes, calling `observe` after each allocation, release and resize
    /// (its number among them, from 0) with the live bytes per category (by index).
    pub fn replay(&self, mut observe: impl FnMut(usize, &[u64; Category::ALL.len()])) -> Totals {
        self.replay_marked(|replayed, live| {
            if let Replayed::Observation(k) = replayed {
                observe(k, live);
            }
        })
    }

    /// [`Tape::replay`], handing each marker too, where it stands among the changes
    /// ([`Replayed::Marker`]).
    pub fn replay_marked(
        &self,
        mut on: impl FnMut(Replayed, &[u64; Category::ALL.len()]),
    ) -> Totals {
        let mut markers = self.markers.iter();
        let mut next = markers.next();
        let (mut live, mut peaks, mut at_peak) = (
            [0u64; Category::ALL.len()],
            [0u64; Category::ALL.len()],
            [0u64; Category::ALL.len()],
        );
        let (mut total, mut highest, mut k) = (0u64, 0u64, 0usize);
        for (i, change) in self.changes.iter().enumerate() {
            while let Some(marker) = next.filter(|m| m.changes_before <= i) {
                debug_assert!(
                    marker.changes_before == i,
                    "markers come in order of the changes"
                );
                on(Replayed::Marker(marker.event), &live);
                next = markers.next();
            }
            if change.block != NO_BLOCK {
                let c = self.categories[change.block as usize].index();
                if change.kind == LiveChangeKind::Made {
                    live[c] += change.bytes;
                    total += change.bytes;
                    peaks[c] = peaks[c].max(live[c]);
                } else {
                    live[c] -= change.bytes;
                    total -= change.bytes;
                }
            }
            if change.observe {
                if total > highest {
                    highest = total;
                    at_peak = live;
                }
                on(Replayed::Observation(k), &live);
                k += 1;
            }
        }
        Totals {
            at_peak: to_bytes(&at_peak),
            category_peaks: to_bytes(&peaks),
        }
    }
}

pub(crate) struct Totals {
    at_peak: CategoryBytes,
    category_peaks: CategoryBytes,
}

// ---------------------------------------------------------------------------------------
// The walk of the stream.

/// Leak-site buckets: one per phase, and one for "outside any phase".
const SITES: usize = Phase::ALL.len() + 1;

/// Where an allocation was made: everything its category depends on.
#[derive(Debug, Clone, Copy)]
struct Made {
    /// The innermost phase run it was made in.
    run: Option<u32>,
    /// The iteration run it was made in.
    iteration: Option<u32>,
    /// The iteration run it was last made or resized in: where a leak grew.
    touched: Option<u32>,
    tag: Option<Category>,
}

/// A live allocation.
#[derive(Debug, Clone, Copy)]
struct Live {
    block: u32,
    bytes: u64,
    made: Made,
}

/// Hashes an id with one multiply, its high half folded onto its low one: ids are the
/// addresses and handles a probe saw, not keys an adversary picks, so SipHash's defence
/// buys nothing here, and SipHash made the replays of the candle-mlp fixture's recorded
/// steps 1.7 to 2.0 times as long (`benches/replay.rs`).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 32);
    }
}

/// The walk's state: the live allocations, what is open, and what it learned.
struct Walk {
    live: HashMap<u64, Live, BuildHasherDefault<IdHasher>>,
    tape: Tape,
    /// Per phase run: its record, its phase and whether it ended.
    records: Vec<PhaseRecord>,
    run_ended: Vec<bool>,
    /// The phase runs open now, innermost last; the tags open now.
    runs: Vec<u32>,
    tags: Vec<Category>,
    /// The iteration run open now, and its number.
    iteration: Option<u32>,
    number: Option<u32>,
    iteration_ended: Vec<bool>,
    iteration_end_bytes: Vec<u64>,
    observations: usize,
    total: u64,
    peak: u64,
    peak_phase: Option<Phase>,
    peak_iteration: Option<u32>,
    /// Bytes released after the last iteration ended (or alive at the end), made or
    /// resized after the warm-up, by category and site; reset when another starts.
    sites: [[u64; SITES]; Category::ALL.len()],
    first_forward_kept_bytes: u64,
    /// CPU-only blocks alive (id → bytes), their live total and its peak.
    cpu_only: HashMap<u64, u64, BuildHasherDefault<IdHasher>>,
    cpu_only_total: u64,
    cpu_only_peak: u64,
}

impl Walk {
    fn run(events: &[Event]) -> Walk {
        let mut w = Walk {
            live: HashMap::default(),
            tape: Tape {
                categories: Vec::new(),
                changes: Vec::with_capacity(events.len()),
                markers: Vec::new(),
            },
            records: Vec::new(),
            run_ended: Vec::new(),
            runs: Vec::new(),
            tags: Vec::new(),
            iteration: None,
            number: None,
            iteration_ended: Vec::new(),
            iteration_end_bytes: Vec::new(),
            observations: 0,
            total: 0,
            peak: 0,
            peak_phase: None,
            peak_iteration: None,
            sites: [[0; SITES]; Category::ALL.len()],
            first_forward_kept_bytes: 0,
            cpu_only: HashMap::default(),
            cpu_only_total: 0,
            cpu_only_peak: 0,
        };
        for &event in events {
            match event {
                Event::Alloc { id, bytes } => {
                    w.cpu_only_release(id);
                    w.alloc(id, bytes)
                }
                Event::CpuOnlyAlloc { id, bytes } => w.cpu_only_alloc(id, bytes),
                Event::Free { id } => match w.live.remove(&id) {
                    Some(old) => w.release(old, true),
                    None => {
                        w.cpu_only_release(id);
                        w.push(NO_BLOCK, LiveChangeKind::Released, 0, true)
                    }
                },
                Event::Realloc { from, to, bytes } if w.cpu_only.contains_key(&from) => {
                    w.cpu_only_release(from);
                    w.cpu_only_alloc(to, bytes)
                }
                Event::Realloc { from, to, bytes } => {
                    if to != from {
                        w.cpu_only_release(to);
                    }
                    w.resize(from, to, bytes)
                }
                marker => w.mark(marker),
            }
        }
        w.finish();
        w
    }

    fn push(&mut self, block: u32, kind: LiveChangeKind, bytes: u64, observe: bool) {
        self.tape.changes.push(LiveChange {
            block,
            kind,
            observe,
            bytes,
        });
        self.observations += usize::from(observe);
    }

    fn here(&self) -> Made {
        Made {
            run: self.runs.last().copied(),
            iteration: self.iteration,
            touched: self.iteration,
            tag: self.tags.last().copied(),
        }
    }

    /// A new allocation, made `bytes` large now in the context `made`: its ordinal.
    fn new_block(&mut self) -> u32 {
        let block = self.tape.categories.len();
        assert!(block < NO_BLOCK as usize, "more than 2^32 - 1 allocations");
        // A placeholder: decided when it is released, or at the end.
        self.tape.categories.push(Category::Untracked);
        block as u32
    }

    fn alloc(&mut self, id: u64, bytes: u64) {
        let block = self.new_block();
        let made = self.here();
        // Another live allocation under `id`: its free was missed.
        if let Some(old) = self.live.insert(id, Live { block, bytes, made }) {
            self.release(old, false);
        }
        self.push(block, LiveChangeKind::Made, bytes, true);
        self.total += bytes;
        self.moment();
    }

    /// A CPU-only block (see [`Event::CpuOnlyAlloc`]): counted apart, observed as an
    /// event that changes no category. Another allocation live under `id` had its free
    /// missed.
    fn cpu_only_alloc(&mut self, id: u64, bytes: u64) {
        if let Some(old) = self.live.remove(&id) {
            self.release(old, false);
        }
        self.cpu_only_release(id);
        self.cpu_only.insert(id, bytes);
        self.cpu_only_total += bytes;
        self.cpu_only_peak = self.cpu_only_peak.max(self.cpu_only_total);
        // An allocator call like any other (call sites number them all), of no block.
        self.push(NO_BLOCK, LiveChangeKind::Made, bytes, true);
    }

    /// The CPU-only block `id`, if there is one, is released (its event is observed
    /// by the caller).
    fn cpu_only_release(&mut self, id: u64) {
        if let Some(bytes) = self.cpu_only.remove(&id) {
            self.cpu_only_total -= bytes;
        }
    }

    /// A resize (see [`Event::Realloc`]).
    fn resize(&mut self, from: u64, to: u64, bytes: u64) {
        let moved = self.live.remove(&from);
        // Another live allocation under `to`: its free was missed.
        if to != from
            && let Some(old) = self.live.remove(&to)
        {
            self.release(old, false);
        }
        let Some(mut block) = moved else {
            // A block of the baseline: a new allocation.
            let made = self.here();
            let block = self.new_block();
            self.live.insert(to, Live { block, bytes, made });
            self.push(block, LiveChangeKind::Made, bytes, true);
            self.total += bytes;
            self.moment();
            return;
        };
        let old = std::mem::replace(&mut block.bytes, bytes);
        block.made.touched = self.iteration;
        self.live.insert(to, block);
        if to == from {
            // Resized in place: one copy, of the new size.
            self.push(block.block, LiveChangeKind::Resized, old, false);
            self.push(block.block, LiveChangeKind::Made, bytes, true);
            self.total = self.total - old + bytes;
            self.moment();
        } else {
            // Both copies exist until the old one is released.
            self.push(block.block, LiveChangeKind::Made, bytes, true);
            self.total += bytes;
            self.moment();
            self.push(block.block, LiveChangeKind::Resized, old, false);
            self.total -= old;
        }
    }

    /// A moment at which the live total may be highest.
    fn moment(&mut self) {
        if self.total > self.peak {
            self.peak = self.total;
            self.peak_phase = self.runs.last().map(|&r| self.records[r as usize].phase);
            self.peak_iteration = self.number;
        }
        if let Some(&r) = self.runs.last() {
            let record = &mut self.records[r as usize];
            record.peak_bytes = record.peak_bytes.max(self.total);
        }
    }

    /// The category of `made`'s allocation, released now (`at_end`: alive at the end).
    fn decide(&self, made: &Made, at_end: bool) -> Category {
        let run = made.run.map(|r| r as usize);
        classify(&Context {
            tag: made.tag,
            phase: run.map(|r| self.records[r].phase),
            freed_before_phase_end: !at_end && run.is_some_and(|r| !self.run_ended[r]),
            outlives: at_end
                || made
                    .iteration
                    .is_some_and(|i| self.iteration_ended[i as usize]),
        })
    }

    /// `live` is released now.
    fn release(&mut self, live: Live, observe: bool) {
        let category = self.decide(&live.made, false);
        self.tape.categories[live.block as usize] = category;
        self.push(live.block, LiveChangeKind::Released, live.bytes, observe);
        self.total -= live.bytes;
        if self.iteration.is_none() {
            self.release_outside_loop(&live, category);
        }
    }

    /// What a release outside the loop also counts.
    fn release_outside_loop(&mut self, live: &Live, category: Category) {
        let made = &live.made;
        // Alive when the last iteration ended, if no other iteration starts after this.
        if made.touched.is_some_and(|t| t > 0) {
            self.sites[category.index()][self.site(made)] += live.bytes;
        }
        // Made by the first forward pass, kept past the loop and released with the
        // test's own state (a process-wide cache is never released): maybe a parameter
        // created lazily.
        if !self.iteration_ended.is_empty()
            && made.iteration == Some(0)
            && category == Category::Workspace
            && made.tag.is_none()
            && made
                .run
                .is_some_and(|r| self.records[r as usize].phase == Phase::Forward)
        {
            self.first_forward_kept_bytes += live.bytes;
        }
    }

    fn site(&self, made: &Made) -> usize {
        made.run.map_or(Phase::ALL.len(), |r| {
            self.records[r as usize].phase as usize
        })
    }

    /// A phase, iteration or tag marker.
    fn mark(&mut self, marker: Event) {
        self.tape.markers.push(Marker {
            event: marker,
            observations_before: self.observations,
            changes_before: self.tape.changes.len(),
        });
        match marker {
            Event::PhaseStart(phase) => {
                self.runs.push(self.records.len() as u32);
                self.records.push(PhaseRecord {
                    phase,
                    iteration: self.number,
                    start_bytes: self.total,
                    peak_bytes: self.total,
                    end_bytes: self.total,
                });
                self.run_ended.push(false);
            }
            Event::PhaseEnd => {
                if let Some(run) = self.runs.pop() {
                    self.end_run(run);
                }
            }
            Event::IterationStart(number) => {
                if let Some(iteration) = self.iteration {
                    self.end_iteration(iteration);
                }
                self.sites = [[0; SITES]; Category::ALL.len()];
                self.first_forward_kept_bytes = 0;
                self.iteration = Some(self.iteration_ended.len() as u32);
                self.number = Some(number);
                self.iteration_ended.push(false);
            }
            Event::IterationEnd => {
                if let Some(iteration) = self.iteration.take() {
                    self.end_iteration(iteration);
                    self.number = None;
                }
            }
            Event::TagPush(category) => self.tags.push(category),
            Event::TagPop => {
                self.tags.pop();
            }
            Event::Alloc { .. }
            | Event::CpuOnlyAlloc { .. }
            | Event::Free { .. }
            | Event::Realloc { .. } => {}
        }
    }

    /// The phase run `run` ends; the run around it (if any) takes over its peak.
    fn end_run(&mut self, run: u32) {
        let record = &mut self.records[run as usize];
        record.end_bytes = self.total;
        let peak = record.peak_bytes;
        self.run_ended[run as usize] = true;
        if let Some(&outer) = self.runs.last() {
            let outer = &mut self.records[outer as usize];
            outer.peak_bytes = outer.peak_bytes.max(peak);
        }
    }

    fn end_iteration(&mut self, iteration: u32) {
        self.iteration_ended[iteration as usize] = true;
        self.iteration_end_bytes.push(self.total);
    }

    /// The end of the stream ends whatever is still open, and decides the categories of
    /// the allocations still alive.
    fn finish(&mut self) {
        while let Some(run) = self.runs.pop() {
            self.end_run(run);
        }
        if self.iteration.is_some() {
            self.iteration_end_bytes.push(self.total);
        }
        for (_, live) in std::mem::take(&mut self.live) {
            let category = self.decide(&live.made, true);
            self.tape.categories[live.block as usize] = category;
            if live.made.touched.is_some_and(|t| t > 0) {
                self.sites[category.index()][self.site(&live.made)] += live.bytes;
            }
        }
    }

    fn into_profile(self, totals: Totals) -> Profile {
        let leak_bytes_per_iteration = leak_per_iteration(&self.iteration_end_bytes);
        let iterations = self.iteration_ended.len() as u32;
        let mut leak_sites = Vec::new();
        if leak_bytes_per_iteration > 0 {
            let retaining = u64::from(iterations).saturating_sub(1).max(1);
            for category in Category::ALL {
                for (i, &bytes) in self.sites[category.index()].iter().enumerate() {
                    if bytes > 0 {
                        leak_sites.push(LeakSite {
                            category,
                            phase: Phase::ALL.get(i).copied(),
                            bytes_per_iteration: bytes / retaining,
                        });
                    }
                }
            }
            leak_sites.sort_by_key(|s| std::cmp::Reverse(s.bytes_per_iteration));
        }
        Profile {
            fidelity: Fidelity::Exact,
            iterations,
            peak_bytes: self.peak,
            peak_phase: self.peak_phase,
            peak_iteration: self.peak_iteration,
            at_peak: totals.at_peak,
            category_peaks: totals.category_peaks,
            phases: self.records,
            iteration_end_bytes: self.iteration_end_bytes,
            leak_bytes_per_iteration,
            leak_sites,
            allocations: self.tape.categories.len() as u64,
            baseline_bytes: 0,
            reserved_peak_bytes: None,
            first_forward_kept_bytes: self.first_forward_kept_bytes,
            not_seen_bytes: None,
            cpu_only_peak_bytes: self.cpu_only_peak,
            phase_category_peaks: Vec::new(),
            phase_moments: Vec::new(),
            gradient_check: Vec::new(),
        }
    }
}
