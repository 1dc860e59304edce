//! The tuned ledger: the same function as [`super::profile`], with a table of live
//! allocations built for streams of tens of millions of events. Kept only to be
//! measured against the plain one (`benches/replay.rs`).
//!
//! # Cost
//!
//! [`profile`] reads the stream once, front to back, and never looks an event up by its
//! position. The walk pairs frees with allocations in a table keyed by id (a
//! multiply-xor hash, not SipHash; see the `live` module) that holds only the *live*
//! allocations, and decides each allocation's category the moment it is released (or at
//! the end of the stream): every fact the rule needs is known by then. A second walk,
//! over what the first one wrote rather than over the stream, only adds and subtracts
//! bytes per category.
//!
//! Memory: one 4 B word per allocation (its bytes and, once decided, its category;
//! blocks of 64 MiB and more keep their bytes in a map beside it), 4 B per release and
//! 2 bits per event: about 8 B per allocation. Plus the table of live allocations: one
//! 64 B bucket of four slots for every 0.6 to 1.2 allocations alive at the same time
//! (at least 1024 buckets): it starts small and doubles as it fills, so it ends with
//! 53 to 107 B per allocation alive at once. A full bucket sends ids to an overflow
//! table that doubles when it gets half full (32 to 64 B each); the table doubles its
//! buckets when the overflow holds more than one id for every 128 of them.
//!
//! None of these arrays grows by copying: each reserves address space for the most a
//! stream of its length could write (an allocation per event), and the system gives it
//! memory only for the pages it reaches. Where so much address space is refused, they
//! grow as vectors do, by copying.
//!
//! Speed: the table of a long run holds millions of allocations and is far larger than
//! the processor's caches, so the walk prefetches the bucket of the event a few steps
//! ahead (one cache line, whose index it keeps for when it gets there; while the table
//! fits the nearer caches, the walk does not prefetch), and on Linux the table and the
//! per-allocation arrays ask the kernel for huge pages (a hint; with 4 KiB pages nearly
//! every table access also misses the address translation cache, and filling the arrays
//! takes a page fault per 4 KiB).

use super::{Context, Event, classify, leak_per_iteration};
use crate::category::{Category, Phase};
use crate::profile::{CategoryBytes, Fidelity, LeakSite, PhaseRecord, Profile};
use live::{Live, LiveSet, advise_huge_pages, prefetch};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

mod live;

/// Turns an event stream into a [`Profile`], as [`super::profile`] does.
pub fn profile(events: &[Event]) -> Profile {
    let scan = Scan::run(events);
    let totals = replay(&scan, |_, _| {});
    scan.into_profile(totals)
}

// ---------------------------------------------------------------------------------------
// The first walk.

const NONE: u32 = u32::MAX;
const NO_TAG: u8 = u8::MAX;
/// In `Scan::blocks`, one 4 B word per allocation: the bytes it was made with in the low
/// 26 bits, or [`BIG`] when they do not fit (64 MiB or more: then they are in
/// `Scan::big`); [`RESIZED`] when it was resized since (its size now is in
/// `Scan::resized`); [`CLOSES`] when the allocation closed a live one under the same id
/// (its free was missed); and its category's index in the top 3 bits, once decided.
const BLOCK_BYTES: u32 = (1 << 26) - 1;
const BIG: u32 = 1 << 26;
const RESIZED: u32 = 1 << 27;
const CLOSES: u32 = 1 << 28;
const CATEGORY_SHIFT: u32 = 29;
/// In `Scan::resizes`, on a resize's new size: it was resized in place.
const IN_PLACE: u64 = 1 << 63;
/// In `Scan::kinds`, 2 bits per allocation, release or resize, in stream order.
const KIND_ALLOC: u64 = 0;
const KIND_FREE: u64 = 1;
const KIND_REALLOC: u64 = 2;
/// In `Scan::released`: nothing was released.
const NO_BLOCK: u32 = u32::MAX;
/// Leak-site buckets: one per phase, and one for "outside any phase".
const SITES: usize = Phase::ALL.len() + 1;

/// The category index in a word of `Scan::blocks` (below 8, so that it needs no check
/// as an index into an array of 8).
#[inline]
fn category_index(word: u32) -> usize {
    (word >> CATEGORY_SHIFT) as usize
}

/// The bytes the allocation `ordinal` with `word` was made with.
#[inline(always)]
fn made_bytes(word: u32, ordinal: u32, big: &Sizes) -> u64 {
    if word & BIG == 0 {
        u64::from(word & BLOCK_BYTES)
    } else {
        big.get(&ordinal).copied().unwrap_or(0)
    }
}

/// A word of `Scan::blocks` with its category's index set.
#[inline]
fn with_category(word: u32, category: u8) -> u32 {
    word | u32::from(category) << CATEGORY_SHIFT
}

/// Where an allocation was made: everything its category depends on. Few distinct ones
/// exist (one per phase run and tag), so allocations share them by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Ctx {
    /// The innermost phase run it was made in, or `NONE`.
    run: u32,
    /// The iteration run it was made in, or `NONE`.
    iteration: u32,
    /// The iteration run it was last made or resized in, or `NONE`: where a leak grew.
    touched: u32,
    tag: u8,
}

/// How many events ahead the first walk prefetches table buckets.
const PREFETCH_DISTANCE: usize = 16;

/// The buckets' size in bytes from which the first walk prefetches.
const PREFETCH_ABOVE: usize = 1 << 20;

/// Room for at most `n` words written front to back, reserved up front so that nothing
/// grows by copying: the system takes memory only for the pages the words reach, and is
/// asked for huge pages.
fn tape<T>(n: usize) -> Vec<T> {
    let mut words = Vec::new();
    // Where so much address space is refused, the tape grows as vectors do.
    let _ = words.try_reserve_exact(n);
    advise_huge_pages(&mut words);
    words
}

/// The id an event looks up in the live set first, if any.
#[inline(always)]
fn key(event: &Event) -> Option<u64> {
    match *event {
        Event::Alloc { id, .. } | Event::Free { id } => Some(id),
        Event::Realloc { from, .. } => Some(from),
        _ => None,
    }
}

/// What the first walk keeps open besides the live set: runs, tags, the iteration.
struct Open {
    /// The phase runs open now, innermost last.
    runs: Vec<u32>,
    /// The tags open now (a category's index), innermost last.
    tags: Vec<u8>,
    /// The iteration run open now, or `NONE`, and its number.
    iteration: u32,
    number: Option<u32>,
    /// Released after the last iteration ended, by site; reset when another starts.
    after_loop: [[u64; SITES]; 8],
}

/// Where the first walk stands besides the scan and the live set: what it needs to go
/// on from another event.
struct Walk {
    open: Open,
    /// The context of an allocation made now.
    here: u32,
    /// The bytes alive now.
    total: u64,
    /// The highest total since the innermost open run became innermost: its record
    /// takes it over when another run starts inside it or it ends.
    run_peak: u64,
    kinds: KindLog,
}

/// A resize, at the observation `at`.
#[derive(Clone, Copy)]
struct Resize {
    from: u64,
    to: u64,
    bytes: u64,
    at: usize,
}

/// Writes the kinds of events 2 bits at a time into whole words.
struct KindLog {
    words: Vec<u64>,
    word: u64,
    shift: u32,
}

impl KindLog {
    fn new(words: Vec<u64>) -> KindLog {
        KindLog {
            words,
            word: 0,
            shift: 0,
        }
    }

    /// How many kinds were pushed: allocations, releases and resizes so far.
    #[inline]
    fn len(&self) -> usize {
        self.words.len() * 32 + self.shift as usize / 2
    }

    #[inline(always)]
    fn push(&mut self, kind: u64) {
        self.word |= kind << self.shift;
        self.shift += 2;
        if self.shift == 64 {
            self.words.push(self.word);
            self.word = 0;
            self.shift = 0;
        }
    }

    /// The words, and how many kinds they hold.
    fn finish(mut self) -> (Vec<u64>, usize) {
        let len = self.len();
        if self.shift > 0 {
            self.words.push(self.word);
        }
        (self.words, len)
    }
}

/// Sizes by allocation ordinal (of resized allocations).
type Sizes = HashMap<u32, u64, BuildHasherDefault<OrdinalHasher>>;

/// Hashes an allocation's ordinal for `Scan::resized` and `Scan::big`, and a context for
/// `Scan::context_ids` (a multiply per word, not SipHash: a resize looks a context up).
#[derive(Default)]
struct OrdinalHasher(u64);

impl Hasher for OrdinalHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// What the first walk learns: categories, releases, and every category-free figure.
struct Scan {
    /// Per allocation: its bytes, its category index and flags, as one word.
    blocks: Vec<u32>,
    /// The bytes each [`BIG`] allocation was made with, by ordinal.
    big: Sizes,
    /// The size now of each live allocation that was resized, by ordinal.
    resized: Sizes,
    /// Per release, in stream order, for the second walk: which allocation was released
    /// (its ordinal), or [`NO_BLOCK`]. A resize adds two: what it released under its new
    /// id, and the allocation it resized.
    released: Vec<u32>,
    /// Per resize of a live allocation: its size before, and after (with [`IN_PLACE`]).
    resizes: Vec<u64>,
    /// What each allocation, release and resize was ([`KIND_ALLOC`] …), 32 to a word:
    /// all the second walk needs of the stream besides `blocks`, `released` and
    /// `resizes`.
    kinds: Vec<u64>,
    /// How many allocations, releases and resizes the stream has.
    observations: usize,
    /// Every distinct context allocations were made in, and their indices.
    contexts: Vec<Ctx>,
    /// Per context: the category for each (freed before its phase ended, outlives) pair,
    /// as [`classify`] decides it (index: 2 × freed early + outlives).
    context_categories: Vec<[Category; 4]>,
    context_ids: HashMap<Ctx, u32, BuildHasherDefault<OrdinalHasher>>,
    /// Per context: the index of the category of a block made in it and released now
    /// (kept up to date as phase and iteration runs end).
    released_now: Vec<u8>,
    /// Per phase run: its record, whether it ended, and how many contexts existed
    /// when it started (those made in it come after).
    records: Vec<PhaseRecord>,
    run_phase: Vec<Phase>,
    run_ended: Vec<bool>,
    run_first_context: Vec<u32>,
    /// Per iteration run: whether it ended, and how many contexts existed when it
    /// started.
    iteration_ended: Vec<bool>,
    iteration_first_context: Vec<u32>,
    iteration_end_bytes: Vec<u64>,
    peak: u64,
    /// The allocation, release or resize (counted as in `kinds`) at which the live total
    /// first reached `peak`.
    peak_at: Option<usize>,
    peak_phase: Option<Phase>,
    peak_iteration: Option<u32>,
    /// Bytes alive at the end of the last iteration, made or resized after the warm-up,
    /// by (category, phase).
    sites: [[u64; SITES]; 8],
    first_forward_kept_bytes: u64,
}

impl Scan {
    fn run(events: &[Event]) -> Scan {
        // One pass: the tapes have room for the most a stream this long can write (at
        // most one allocation per event, and two releases for a resize), and the table
        // starts small and doubles as it fills.
        let mut s = Scan {
            blocks: tape(events.len()),
            big: HashMap::default(),
            resized: HashMap::default(),
            released: tape(2 * events.len()),
            resizes: Vec::new(),
            kinds: tape(events.len().div_ceil(32)),
            observations: 0,
            contexts: Vec::new(),
            context_categories: Vec::new(),
            context_ids: HashMap::default(),
            released_now: Vec::new(),
            records: Vec::new(),
            run_phase: Vec::new(),
            run_ended: Vec::new(),
            run_first_context: Vec::new(),
            iteration_ended: Vec::new(),
            iteration_first_context: Vec::new(),
            iteration_end_bytes: Vec::new(),
            peak: 0,
            peak_at: None,
            peak_phase: None,
            peak_iteration: None,
            sites: [[0; SITES]; 8],
            first_forward_kept_bytes: 0,
        };
        let table = LiveSet::growing(events.len());
        let open = Open {
            runs: Vec::new(),
            tags: Vec::new(),
            iteration: NONE,
            number: None,
            after_loop: [[0; SITES]; 8],
        };
        let walk = Walk {
            here: s.context_now(&open),
            open,
            total: 0,
            run_peak: 0,
            kinds: KindLog::new(std::mem::take(&mut s.kinds)),
        };
        // Prefetching pays only where the table outgrows the processor's nearer caches;
        // elsewhere it is only work. So the walk starts without it, and goes on with it
        // from where the table outgrew them, if it does.
        let (s, walk, table, stopped) = Scan::walk::<false>(s, events, 0, table, walk);
        let (s, walk, table, _) = if stopped < events.len() {
            Scan::walk::<true>(s, events, stopped, table, walk)
        } else {
            (s, walk, table, stopped)
        };
        s.finish(walk, table)
    }

    /// The walk itself from event `from` on, prefetching table buckets ahead or not.
    /// Without prefetching, it stops after the event at which the table outgrew
    /// [`PREFETCH_ABOVE`], and returns where to go on from.
    fn walk<const PREFETCH: bool>(
        mut s: Scan,
        events: &[Event],
        from: usize,
        mut table: LiveSet,
        walk: Walk,
    ) -> (Scan, Walk, LiveSet, usize) {
        let Walk {
            mut open,
            mut here,
            mut total,
            mut run_peak,
            mut kinds,
        } = walk;
        // The buckets of the next events' ids, computed once, when they are prefetched.
        let mut homes = [0usize; PREFETCH_DISTANCE];
        if PREFETCH {
            Scan::prefetch_ahead(&table, &mut homes, events, from);
        }

        let stopped = 'walk: {
            for (k, event) in (from..).zip(&events[from..]) {
                // This event's bucket, when prefetched.
                let mut prefetched = 0;
                if PREFETCH {
                    let slot = &mut homes[k % PREFETCH_DISTANCE];
                    prefetched = *slot;
                    if let Some(id) = events.get(k + PREFETCH_DISTANCE).and_then(key) {
                        *slot = table.home(id);
                        table.prefetch(*slot);
                    }
                }
                let home = |table: &LiveSet, id| {
                    if PREFETCH { prefetched } else { table.home(id) }
                };
                match *event {
                    Event::Alloc { id, bytes } => {
                        kinds.push(KIND_ALLOC);
                        let ordinal = s.blocks.len() as u32;
                        let block = Live { ordinal, ctx: here };
                        let mut word = s.word(ordinal, bytes);
                        // Another live allocation under `id`: its free was missed.
                        if let Some(old) = table.insert_in(home(&table, id), id, block) {
                            total -= s.release(old, open.iteration, &mut open.after_loop);
                            word |= CLOSES;
                        }
                        s.blocks.push(word);
                        total += bytes;
                        if total > s.peak {
                            // This event's kind is the last one logged.
                            s.new_peak(total, kinds.len() - 1, &open);
                        }
                        run_peak = run_peak.max(total);
                        // It may have filled the table.
                        if table.needs_room(s.blocks.len())
                            && Scan::make_room::<PREFETCH>(&mut table, &mut homes, events, k)
                        {
                            break 'walk k + 1;
                        }
                    }
                    Event::Free { id } => {
                        kinds.push(KIND_FREE);
                        match table.remove_from(home(&table, id), id) {
                            Some(old) => {
                                total -= s.release(old, open.iteration, &mut open.after_loop)
                            }
                            None => s.released.push(NO_BLOCK),
                        }
                    }
                    Event::Realloc { from, to, bytes } => {
                        kinds.push(KIND_REALLOC);
                        let resize = Resize {
                            from,
                            to,
                            bytes,
                            at: kinds.len() - 1,
                        };
                        (total, run_peak) =
                            s.resize(&mut table, resize, here, &mut open, total, run_peak);
                        // It may have filled the table.
                        if table.needs_room(s.blocks.len())
                            && Scan::make_room::<PREFETCH>(&mut table, &mut homes, events, k)
                        {
                            break 'walk k + 1;
                        }
                    }
                    marker => {
                        run_peak = s.mark(marker, &mut open, total, run_peak);
                        here = s.context_now(&open);
                    }
                }
            }
            events.len()
        };
        let walk = Walk {
            open,
            here,
            total,
            run_peak,
            kinds,
        };
        (s, walk, table, stopped)
    }

    /// Doubles the table's buckets after event `k` filled it; returns whether the walk
    /// should stop there, to go on prefetching.
    #[cold]
    #[inline(never)]
    fn make_room<const PREFETCH: bool>(
        table: &mut LiveSet,
        homes: &mut [usize; PREFETCH_DISTANCE],
        events: &[Event],
        k: usize,
    ) -> bool {
        table.grow();
        if PREFETCH {
            // The buckets prefetched for the next events moved.
            Scan::prefetch_ahead(table, homes, events, k + 1);
            false
        } else {
            table.bucket_bytes() > PREFETCH_ABOVE
        }
    }

    /// Computes and prefetches the buckets of the ids of events `from..` for the next
    /// [`PREFETCH_DISTANCE`] steps of the walk.
    #[cold]
    #[inline(never)]
    fn prefetch_ahead(
        table: &LiveSet,
        homes: &mut [usize; PREFETCH_DISTANCE],
        events: &[Event],
        from: usize,
    ) {
        let ahead = events.iter().enumerate().skip(from).take(PREFETCH_DISTANCE);
        for (k, event) in ahead {
            if let Some(id) = key(event) {
                let home = table.home(id);
                homes[k % PREFETCH_DISTANCE] = home;
                table.prefetch(home);
            }
        }
    }

    /// The end of the stream ends whatever is still open, and decides the categories of
    /// the allocations still alive.
    fn finish(mut self, walk: Walk, table: LiveSet) -> Scan {
        let Walk {
            mut open,
            total,
            run_peak,
            kinds,
            ..
        } = walk;
        (self.kinds, self.observations) = kinds.finish();
        self.take_run_peak(&open.runs, run_peak);
        while let Some(run) = open.runs.pop() {
            self.end_run(run, open.runs.last().copied(), total);
        }
        if open.iteration != NONE {
            self.iteration_end_bytes.push(total);
        }
        self.sites = open.after_loop;
        // Their words lie all over `blocks`: load them a few blocks ahead.
        let kept: Vec<Live> = table.values().collect();
        drop(table);
        for (k, block) in kept.iter().enumerate() {
            if let Some(ahead) = kept.get(k + PREFETCH_DISTANCE) {
                prefetch(&self.blocks[ahead.ordinal as usize]);
            }
            let category = self.decide(block, true);
            let word = &mut self.blocks[block.ordinal as usize];
            *word = with_category(*word, category.index() as u8);
            let bytes = self.bytes_now(block.ordinal);
            self.note_kept(block, bytes, category);
        }
        self
    }

    /// The word of a new allocation `ordinal` of `bytes` (noting them in `big` if they
    /// do not fit in it).
    #[inline(always)]
    fn word(&mut self, ordinal: u32, bytes: u64) -> u32 {
        if bytes <= u64::from(BLOCK_BYTES) {
            bytes as u32
        } else {
            self.big.insert(ordinal, bytes);
            BIG
        }
    }

    /// The bytes of the live allocation `ordinal` now.
    fn bytes_now(&self, ordinal: u32) -> u64 {
        let word = self.blocks[ordinal as usize];
        if word & RESIZED != 0 {
            self.resized.get(&ordinal).copied().unwrap_or(0)
        } else {
            made_bytes(word, ordinal, &self.big)
        }
    }

    fn new_peak(&mut self, total: u64, at: usize, open: &Open) {
        self.peak = total;
        self.peak_at = Some(at);
        self.peak_phase = open.runs.last().map(|&r| self.run_phase[r as usize]);
        self.peak_iteration = open.number;
    }

    /// The context of an allocation made now.
    fn context_now(&mut self, open: &Open) -> u32 {
        self.intern(Ctx {
            run: open.runs.last().copied().unwrap_or(NONE),
            iteration: open.iteration,
            touched: open.iteration,
            tag: open.tags.last().copied().unwrap_or(NO_TAG),
        })
    }

    /// A resize (see [`Event::Realloc`]) in the context `here`, at the observation `at`:
    /// returns the live total, and the innermost run's peak, after it.
    #[cold]
    #[inline(never)]
    fn resize(
        &mut self,
        table: &mut LiveSet,
        resize: Resize,
        here: u32,
        open: &mut Open,
        mut total: u64,
        mut run_peak: u64,
    ) -> (u64, u64) {
        let Resize {
            from,
            to,
            bytes,
            at,
        } = resize;
        let moved = table.remove(from);
        // Another live allocation under `to`: its free was missed.
        match (to != from).then(|| table.remove(to)).flatten() {
            Some(old) => total -= self.release(old, open.iteration, &mut open.after_loop),
            None => self.released.push(NO_BLOCK),
        }
        let added = match moved {
            Some(mut block) => {
                let old = self.bytes_now(block.ordinal);
                self.blocks[block.ordinal as usize] |= RESIZED;
                self.resized.insert(block.ordinal, bytes);
                self.released.push(block.ordinal);
                self.resizes.push(old);
                self.resizes
                    .push(if to == from { bytes | IN_PLACE } else { bytes });
                let made = self.contexts[block.ctx as usize];
                if made.touched != open.iteration {
                    block.ctx = self.intern(Ctx {
                        touched: open.iteration,
                        ..made
                    });
                }
                table.insert(to, block);
                if to == from {
                    // Resized in place: one copy, of the new size.
                    total -= old;
                    bytes
                } else {
                    // Both copies exist until the old one is released.
                    total += bytes;
                    if total > self.peak {
                        self.new_peak(total, at, open);
                    }
                    run_peak = run_peak.max(total);
                    total -= old;
                    0
                }
            }
            None => {
                self.released.push(NO_BLOCK);
                let ordinal = self.blocks.len() as u32;
                let word = self.word(ordinal, bytes);
                self.blocks.push(word);
                table.insert(to, Live { ordinal, ctx: here });
                bytes
            }
        };
        total += added;
        if total > self.peak {
            self.new_peak(total, at, open);
        }
        (total, run_peak.max(total))
    }

    /// A phase, iteration or tag marker, with `total` bytes live: returns the innermost
    /// run's peak after it.
    #[cold]
    #[inline(never)]
    fn mark(&mut self, marker: Event, open: &mut Open, total: u64, mut run_peak: u64) -> u64 {
        match marker {
            Event::PhaseStart(phase) => {
                self.take_run_peak(&open.runs, run_peak);
                run_peak = total;
                open.runs.push(self.records.len() as u32);
                self.records.push(PhaseRecord {
                    phase,
                    iteration: open.number,
                    start_bytes: total,
                    peak_bytes: total,
                    end_bytes: total,
                });
                self.run_phase.push(phase);
                self.run_ended.push(false);
                self.run_first_context.push(self.contexts.len() as u32);
            }
            Event::PhaseEnd => {
                self.take_run_peak(&open.runs, run_peak);
                if let Some(run) = open.runs.pop() {
                    self.end_run(run, open.runs.last().copied(), total);
                }
                run_peak = self.run_peak(&open.runs);
            }
            Event::IterationStart(number) => {
                if open.iteration != NONE {
                    self.end_iteration(open.iteration, total);
                }
                open.after_loop = [[0; SITES]; 8];
                self.first_forward_kept_bytes = 0;
                open.iteration = self.iteration_ended.len() as u32;
                open.number = Some(number);
                self.iteration_ended.push(false);
                self.iteration_first_context
                    .push(self.contexts.len() as u32);
            }
            Event::IterationEnd => {
                if open.iteration != NONE {
                    self.end_iteration(open.iteration, total);
                    open.iteration = NONE;
                    open.number = None;
                }
            }
            Event::TagPush(category) => open.tags.push(category.index() as u8),
            Event::TagPop => {
                open.tags.pop();
            }
            Event::Alloc { .. } | Event::Free { .. } | Event::Realloc { .. } => {}
        }
        run_peak
    }

    /// The innermost run's peak takes over `peak`; outer runs take it over when it ends.
    fn take_run_peak(&mut self, run_stack: &[u32], peak: u64) {
        if let Some(&r) = run_stack.last() {
            let record = &mut self.records[r as usize];
            record.peak_bytes = record.peak_bytes.max(peak);
        }
    }

    /// The innermost run's peak so far (0 outside any run).
    fn run_peak(&self, run_stack: &[u32]) -> u64 {
        run_stack
            .last()
            .map_or(0, |&r| self.records[r as usize].peak_bytes)
    }

    fn end_run(&mut self, run: u32, outer: Option<u32>, total: u64) {
        let record = &mut self.records[run as usize];
        record.end_bytes = total;
        let peak = record.peak_bytes;
        self.run_ended[run as usize] = true;
        self.refresh_released_now(self.run_first_context[run as usize], |c| c.run == run);
        if let Some(outer) = outer {
            let outer = &mut self.records[outer as usize];
            outer.peak_bytes = outer.peak_bytes.max(peak);
        }
    }

    fn end_iteration(&mut self, iteration: u32, total: u64) {
        self.iteration_ended[iteration as usize] = true;
        self.iteration_end_bytes.push(total);
        let first = self.iteration_first_context[iteration as usize];
        self.refresh_released_now(first, |c| c.iteration == iteration);
    }

    /// Recomputes `released_now` for the contexts from `first` on that `affected` picks.
    fn refresh_released_now(&mut self, first: u32, affected: impl Fn(&Ctx) -> bool) {
        for i in first as usize..self.contexts.len() {
            if affected(&self.contexts[i]) {
                self.released_now[i] = self.decide_ctx(i, false).index() as u8;
            }
        }
    }

    /// The context of an allocation made (or resized) now, by index.
    fn intern(&mut self, ctx: Ctx) -> u32 {
        if let Some(&id) = self.context_ids.get(&ctx) {
            return id;
        }
        let id = self.contexts.len() as u32;
        // The live set keeps a mark of its own in a context's top bit.
        assert!(id < 1 << 31, "more than 2^31 allocation contexts");
        let tag = (ctx.tag != NO_TAG).then(|| Category::ALL[usize::from(ctx.tag)]);
        let phase = (ctx.run != NONE).then(|| self.run_phase[ctx.run as usize]);
        let category = |freed_before_phase_end, outlives| {
            classify(&Context {
                tag,
                phase,
                freed_before_phase_end,
                outlives,
            })
        };
        self.context_categories.push([
            category(false, false),
            category(false, true),
            category(true, false),
            category(true, true),
        ]);
        self.contexts.push(ctx);
        self.context_ids.insert(ctx, id);
        self.released_now
            .push(self.decide_ctx(id as usize, false).index() as u8);
        id
    }

    /// The category of `block`, released now (`at_end`: still alive at the end).
    fn decide(&self, block: &Live, at_end: bool) -> Category {
        self.decide_ctx(block.ctx as usize, at_end)
    }

    fn decide_ctx(&self, index: usize, at_end: bool) -> Category {
        let ctx = &self.contexts[index];
        let in_iteration = ctx.iteration != NONE;
        let freed_early = !at_end && ctx.run != NONE && !self.run_ended[ctx.run as usize];
        let outlives = at_end || (in_iteration && self.iteration_ended[ctx.iteration as usize]);
        self.context_categories[index][usize::from(freed_early) * 2 + usize::from(outlives)]
    }

    /// `block` is released now, while iteration run `iteration` (or `NONE`) is open:
    /// returns its bytes.
    #[inline(always)]
    fn release(&mut self, block: Live, iteration: u32, after_loop: &mut [[u64; SITES]; 8]) -> u64 {
        let category = self.released_now[block.ctx as usize];
        let word = &mut self.blocks[block.ordinal as usize];
        *word = with_category(*word, category);
        let bytes = if *word & (RESIZED | BIG) == 0 {
            u64::from(*word & BLOCK_BYTES)
        } else {
            self.odd_bytes(block.ordinal)
        };
        self.released.push(block.ordinal);
        if iteration == NONE {
            let category = Category::ALL[usize::from(category)];
            self.release_outside_loop(&block, bytes, category, after_loop);
        }
        bytes
    }

    /// The size of the resized or big block `ordinal`, released now.
    #[cold]
    #[inline(never)]
    fn odd_bytes(&mut self, ordinal: u32) -> u64 {
        let word = self.blocks[ordinal as usize];
        if word & RESIZED != 0 {
            self.resized.remove(&ordinal).unwrap_or(0)
        } else {
            made_bytes(word, ordinal, &self.big)
        }
    }

    /// What a release outside the loop also counts.
    fn release_outside_loop(
        &mut self,
        block: &Live,
        bytes: u64,
        category: Category,
        after_loop: &mut [[u64; SITES]; 8],
    ) {
        let block = &self.contexts[block.ctx as usize];
        // Alive when the last iteration ended, if no other iteration starts after this.
        if block.touched != NONE && block.touched > 0 {
            after_loop[category.index()][self.site(block)] += bytes;
        }
        // Made by the first forward pass, kept past the loop and released with the
        // test's own state (a process-wide cache is never released): maybe a parameter
        // created lazily.
        if !self.iteration_ended.is_empty()
            && block.iteration == 0
            && category == Category::Workspace
            && block.tag == NO_TAG
            && block.run != NONE
            && self.run_phase[block.run as usize] == Phase::Forward
        {
            self.first_forward_kept_bytes += bytes;
        }
    }

    /// A block alive at the end of the stream.
    fn note_kept(&mut self, live: &Live, bytes: u64, category: Category) {
        let block = self.contexts[live.ctx as usize];
        let block = &block;
        if block.touched != NONE && block.touched > 0 {
            self.sites[category.index()][self.site(block)] += bytes;
        }
    }

    fn site(&self, block: &Ctx) -> usize {
        if block.run == NONE {
            Phase::ALL.len()
        } else {
            self.run_phase[block.run as usize] as usize
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
            allocations: self.blocks.len() as u64,
            baseline_bytes: 0,
            reserved_peak_bytes: None,
            first_forward_kept_bytes: self.first_forward_kept_bytes,
            not_seen_bytes: None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The second walk.

struct Totals {
    at_peak: CategoryBytes,
    category_peaks: CategoryBytes,
}

/// The second walk's place in what the first one wrote, and the live bytes per
/// category so far (indexed by a category's 3 bits, so that no index needs checking).
struct Replay<'a> {
    scan: &'a Scan,
    blocks: &'a [u32],
    released: &'a [u32],
    live: [u64; 8],
    peaks: [u64; 8],
    /// The next allocation, release and resize.
    ordinal: usize,
    release: usize,
    resize: usize,
    /// The size now of each resized allocation still alive.
    resized: Sizes,
    /// The breakdown at the total's peak, once passed.
    at_peak: Option<[u64; 8]>,
}

impl Replay<'_> {
    /// Replays the observations `range`, calling `observe` after each (at a resize
    /// that moves a block: at the moment both copies exist).
    #[inline(always)]
    fn run(&mut self, range: std::ops::Range<usize>, observe: &mut impl FnMut(usize, &[u64; 8])) {
        let (kinds, blocks, released) = (&self.scan.kinds, self.blocks, self.released);
        // The cursors live in registers here, and in `self` for the rare cases.
        let (mut ordinal, mut release) = (self.ordinal, self.release);
        let mut next = range.start;
        while next < range.end {
            // The kinds of the word `next` is in, from `next` on, 2 bits each.
            let mut word = kinds[next / 32] >> (2 * (next % 32));
            let end = (next / 32 * 32 + 32).min(range.end);
            for at in next..end {
                let kind = word & 3;
                word >>= 2;
                if kind == KIND_ALLOC {
                    let block = blocks[ordinal];
                    if block & (BIG | CLOSES) == 0 {
                        ordinal += 1;
                        self.add(category_index(block), u64::from(block & BLOCK_BYTES));
                    } else {
                        (self.ordinal, self.release) = (ordinal, release);
                        self.allocation(block);
                        (ordinal, release) = (self.ordinal, self.release);
                    }
                } else if kind == KIND_FREE {
                    let block = released[release];
                    release += 1;
                    self.release(block);
                } else {
                    (self.ordinal, self.release) = (ordinal, release);
                    let observed = self.resize(at, observe);
                    (ordinal, release) = (self.ordinal, self.release);
                    if observed {
                        continue;
                    }
                }
                observe(at, &self.live);
            }
            next = end;
        }
        (self.ordinal, self.release) = (ordinal, release);
    }

    #[inline(always)]
    fn next_release(&mut self) -> u32 {
        let block = self.released[self.release];
        self.release += 1;
        block
    }

    /// `block` (an ordinal, or [`NO_BLOCK`]) is released.
    #[inline(always)]
    fn release(&mut self, block: u32) {
        if block != NO_BLOCK {
            let word = self.blocks[block as usize];
            let bytes = if word & (RESIZED | BIG) == 0 {
                u64::from(word & BLOCK_BYTES)
            } else {
                self.odd_bytes(word, block)
            };
            self.take(category_index(word), bytes);
        }
    }

    /// The size of a resized or big block, released now.
    #[cold]
    #[inline(never)]
    fn odd_bytes(&mut self, word: u32, block: u32) -> u64 {
        let made = made_bytes(word, block, &self.scan.big);
        if word & RESIZED != 0 {
            self.resized.remove(&block).unwrap_or(made)
        } else {
            made
        }
    }

    /// The next allocation, the long way: its bytes may be in `big`, and it may have
    /// closed a live one under its id. (`run` adds the common ones itself.)
    #[cold]
    #[inline(never)]
    fn allocation(&mut self, word: u32) {
        let bytes = made_bytes(word, self.ordinal as u32, &self.scan.big);
        self.ordinal += 1;
        if word & CLOSES != 0 {
            let block = self.next_release();
            self.release(block);
        }
        self.add(category_index(word), bytes);
    }

    #[inline(always)]
    fn add(&mut self, c: usize, bytes: u64) {
        self.live[c] += bytes;
    }

    /// Takes `bytes` off category `c`. A category's peak is reached just before it
    /// falls (or at the end), so this is the one place that notes it.
    #[inline(always)]
    fn take(&mut self, c: usize, bytes: u64) {
        self.peaks[c] = self.peaks[c].max(self.live[c]);
        self.live[c] -= bytes;
    }

    /// A resize: what it released under its new id, then the block it resized (or, for
    /// a resize of an id never seen, a new allocation). Returns whether it was observed
    /// already: a resize that moves a block is observed while both copies exist.
    #[cold]
    #[inline(never)]
    fn resize(&mut self, at: usize, observe: &mut impl FnMut(usize, &[u64; 8])) -> bool {
        let block = self.next_release();
        self.release(block);
        let moved = self.next_release();
        if moved == NO_BLOCK {
            self.allocation(self.blocks[self.ordinal]);
            return false;
        }
        let c = category_index(self.blocks[moved as usize]);
        let old = self.scan.resizes[self.resize];
        let bytes = self.scan.resizes[self.resize + 1];
        self.resize += 2;
        self.resized.insert(moved, bytes & !IN_PLACE);
        if bytes & IN_PLACE != 0 {
            self.take(c, old);
            self.add(c, bytes & !IN_PLACE);
            false
        } else {
            // Both copies exist until the old one is released: the peak can only be at
            // that moment.
            self.add(c, bytes);
            if Some(at) == self.scan.peak_at {
                self.at_peak = Some(self.live);
            }
            observe(at, &self.live);
            self.take(c, old);
            true
        }
    }
}

/// Live bytes per category over the stream, now that every allocation's category is
/// known: each category's own peak, and the breakdown at the total's peak.
fn replay(scan: &Scan, mut observe: impl FnMut(usize, &[u64; 8])) -> Totals {
    let mut r = Replay {
        scan,
        blocks: scan.blocks.as_slice(),
        released: scan.released.as_slice(),
        live: [0; 8],
        peaks: [0; 8],
        ordinal: 0,
        release: 0,
        resize: 0,
        resized: Sizes::default(),
        at_peak: None,
    };
    let n = scan.observations;
    // The breakdown at the total's peak is taken right after the observation that
    // reached it (or, at a resize that moved a block, while both copies existed), so
    // the walk stops there once instead of comparing at every step.
    let split = scan.peak_at.map_or(n, |p| (p + 1).min(n));
    r.run(0..split, &mut observe);
    if scan.peak_at.is_some() && r.at_peak.is_none() {
        r.at_peak = Some(r.live);
    }
    r.run(split..n, &mut observe);
    // What is still alive may be a category's peak too.
    for (peak, live) in r.peaks.iter_mut().zip(r.live) {
        *peak = (*peak).max(live);
    }
    let to_bytes = |a: [u64; 8]| {
        let mut out = CategoryBytes::default();
        for c in Category::ALL {
            out[c] = a[c.index()];
        }
        out
    };
    Totals {
        at_peak: to_bytes(r.at_peak.unwrap_or_default()),
        category_peaks: to_bytes(r.peaks),
    }
}
