//! The ledger: one pure function from a probe's event stream to a [`Profile`].
//!
//! Probes only record what happened (allocations, frees, phase and iteration
//! boundaries, tags). Which category a byte belongs to is decided here, after the run,
//! by [`classify`] — the one place that says "survivors of forward are activations".

use crate::category::{Category, Phase};
use crate::profile::{CategoryBytes, Fidelity, LeakSite, PhaseRecord, Profile};
use std::collections::{BTreeMap, HashMap};

/// One thing a probe observed, in the order it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// `bytes` were allocated under the identity `id` (an address, a handle).
    Alloc { id: u64, bytes: u64 },
    /// The allocation `id` was released. Frees of ids never seen belong to the baseline.
    Free { id: u64 },
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

/// Where and when an allocation was made, and when (if ever) it was freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    pub bytes: u64,
    /// Index of its `Alloc` event.
    pub at: usize,
    /// Index of its `Free` event; `None` if still alive at the end of the stream.
    pub freed_at: Option<usize>,
    /// The innermost phase run (index into [`Replay::phases`]) it was made in.
    pub phase_run: Option<usize>,
    /// The iteration it was made in (index into [`Replay::iterations`]).
    pub iteration_run: Option<usize>,
    /// The innermost explicit tag.
    pub tag: Option<Category>,
}

/// One run of a phase: event indices of its start and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseRun {
    pub phase: Phase,
    pub iteration: Option<u32>,
    pub start: usize,
    /// `None`: never ended (the test returned early or panicked); treated as the stream end.
    pub end: Option<usize>,
}

/// One loop iteration: event indices of its start and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IterationRun {
    pub number: u32,
    pub start: usize,
    pub end: Option<usize>,
}

/// The structure recovered from a stream: allocations with their context.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    pub allocations: Vec<Allocation>,
    pub phases: Vec<PhaseRun>,
    pub iterations: Vec<IterationRun>,
    pub events: usize,
}

impl Replay {
    /// Walks the stream once, pairing allocations with their frees.
    pub fn new(events: &[Event]) -> Replay {
        let mut r = Replay {
            events: events.len(),
            ..Replay::default()
        };
        let mut live: HashMap<u64, usize> = HashMap::new();
        let mut phase_stack: Vec<usize> = Vec::new();
        let mut tag_stack: Vec<Category> = Vec::new();
        let mut iteration: Option<usize> = None;
        for (at, event) in events.iter().enumerate() {
            match *event {
                Event::Alloc { id, bytes } => {
                    if let Some(previous) = live.remove(&id) {
                        // An id reused while live means we missed its free; close it here.
                        r.allocations[previous].freed_at = Some(at);
                    }
                    live.insert(id, r.allocations.len());
                    r.allocations.push(Allocation {
                        bytes,
                        at,
                        freed_at: None,
                        phase_run: phase_stack.last().copied(),
                        iteration_run: iteration,
                        tag: tag_stack.last().copied(),
                    });
                }
                Event::Free { id } => {
                    // An unknown id was allocated before recording started: baseline.
                    if let Some(index) = live.remove(&id) {
                        r.allocations[index].freed_at = Some(at);
                    }
                }
                Event::PhaseStart(phase) => {
                    phase_stack.push(r.phases.len());
                    r.phases.push(PhaseRun {
                        phase,
                        iteration: iteration.map(|i| r.iterations[i].number),
                        start: at,
                        end: None,
                    });
                }
                Event::PhaseEnd => {
                    if let Some(run) = phase_stack.pop() {
                        r.phases[run].end = Some(at);
                    }
                }
                Event::IterationStart(number) => {
                    if let Some(open) = iteration {
                        r.iterations[open].end.get_or_insert(at);
                    }
                    iteration = Some(r.iterations.len());
                    r.iterations.push(IterationRun {
                        number,
                        start: at,
                        end: None,
                    });
                }
                Event::IterationEnd => {
                    if let Some(open) = iteration.take() {
                        r.iterations[open].end = Some(at);
                    }
                }
                Event::TagPush(category) => tag_stack.push(category),
                Event::TagPop => {
                    tag_stack.pop();
                }
            }
        }
        r
    }

    /// The category of allocation `a`: the classification rule of the product.
    pub fn category_of(&self, a: &Allocation) -> Category {
        let end_of = |end: Option<usize>| end.unwrap_or(self.events);
        let iteration_end = a.iteration_run.map(|i| end_of(self.iterations[i].end));
        classify(&Context {
            tag: a.tag,
            phase: a.phase_run.map(|p| self.phases[p].phase),
            freed_before_phase_end: match (a.phase_run, a.freed_at) {
                (Some(p), Some(freed)) => freed < end_of(self.phases[p].end),
                _ => false,
            },
            outlives_iteration: match a.freed_at {
                None => true,
                Some(freed) => iteration_end.is_some_and(|end| freed > end),
            },
        })
    }
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
    /// Still alive when its iteration ended (outside the loop: alive at the end of the test).
    pub outlives_iteration: bool,
}

/// The classification rule (DESIGN §3), in one place:
///
/// 1. an explicit tag wins;
/// 2. freed before the phase that made it ended → `temporaries`;
/// 3. survivors of `params` → `parameters`, of `optimizer_init`/`optimizer_step` →
///    `optimizer_state`, of `inputs` → `inputs`, of `backward` → `gradients`;
/// 4. survivors of `forward` → `activations` if freed within their iteration, else
///    `workspace` (a library's scratch buffer or cache);
/// 5. outside any phase: `workspace` if it outlives its iteration, else `temporaries`.
pub fn classify(cx: &Context) -> Category {
    if let Some(tag) = cx.tag {
        return tag;
    }
    let Some(phase) = cx.phase else {
        return if cx.outlives_iteration {
            Category::Workspace
        } else {
            Category::Temporaries
        };
    };
    if cx.freed_before_phase_end {
        return Category::Temporaries;
    }
    match phase {
        Phase::Forward if cx.outlives_iteration => Category::Workspace,
        other => other.survivor_category(),
    }
}

/// Turns an event stream into a [`Profile`] (with `Fidelity::Exact`).
pub fn profile(events: &[Event]) -> Profile {
    let replay = Replay::new(events);
    let categories: Vec<Category> = replay
        .allocations
        .iter()
        .map(|a| replay.category_of(a))
        .collect();

    // Allocations and frees indexed by event position, for the second walk.
    let mut alloc_at: HashMap<usize, usize> = HashMap::with_capacity(replay.allocations.len());
    let mut free_at: HashMap<usize, usize> = HashMap::with_capacity(replay.allocations.len());
    for (i, a) in replay.allocations.iter().enumerate() {
        alloc_at.insert(a.at, i);
        if let Some(f) = a.freed_at {
            free_at.insert(f, i);
        }
    }

    let mut live = CategoryBytes::default();
    let mut total: u64 = 0;
    let mut peak: u64 = 0;
    let mut at_peak = CategoryBytes::default();
    let mut peak_phase = None;
    let mut peak_iteration = None;
    let mut category_peaks = CategoryBytes::default();
    let mut records: Vec<PhaseRecord> = Vec::with_capacity(replay.phases.len());
    let mut open_phases: Vec<usize> = Vec::new();
    let mut current_iteration: Option<u32> = None;
    let mut iteration_end_bytes = Vec::new();

    for (at, event) in events.iter().enumerate() {
        // A reused id frees its previous allocation at this same index, before the new one.
        if let Some(&i) = free_at.get(&at) {
            let bytes = replay.allocations[i].bytes;
            live[categories[i]] -= bytes;
            total -= bytes;
        }
        match *event {
            Event::Alloc { .. } => {
                let i = alloc_at[&at];
                let bytes = replay.allocations[i].bytes;
                let c = categories[i];
                live[c] += bytes;
                total += bytes;
                category_peaks[c] = category_peaks[c].max(live[c]);
                if total > peak {
                    peak = total;
                    at_peak = live;
                    peak_phase = open_phases.last().map(|&r: &usize| records[r].phase);
                    peak_iteration = current_iteration;
                }
                for &r in &open_phases {
                    records[r].peak_bytes = records[r].peak_bytes.max(total);
                }
            }
            Event::Free { .. } => {}
            Event::PhaseStart(phase) => {
                open_phases.push(records.len());
                records.push(PhaseRecord {
                    phase,
                    iteration: current_iteration,
                    start_bytes: total,
                    peak_bytes: total,
                    end_bytes: total,
                });
            }
            Event::PhaseEnd => {
                if let Some(r) = open_phases.pop() {
                    records[r].end_bytes = total;
                }
            }
            Event::IterationStart(n) => {
                if current_iteration.is_some() {
                    iteration_end_bytes.push(total);
                }
                current_iteration = Some(n);
            }
            Event::IterationEnd => {
                if current_iteration.take().is_some() {
                    iteration_end_bytes.push(total);
                }
            }
            Event::TagPush(_) | Event::TagPop => {}
        }
    }
    for r in open_phases {
        records[r].end_bytes = total;
    }
    if current_iteration.is_some() {
        iteration_end_bytes.push(total);
    }

    let leak_bytes_per_iteration = leak_per_iteration(&iteration_end_bytes);
    let leak_sites = if leak_bytes_per_iteration > 0 {
        leak_sites(&replay, &categories)
    } else {
        Vec::new()
    };

    Profile {
        fidelity: Fidelity::Exact,
        iterations: replay.iterations.len() as u32,
        peak_bytes: peak,
        peak_phase,
        peak_iteration,
        at_peak,
        category_peaks,
        phases: records,
        iteration_end_bytes,
        leak_bytes_per_iteration,
        leak_sites,
        allocations: replay.allocations.len() as u64,
        baseline_bytes: 0,
        reserved_peak_bytes: None,
    }
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

/// Bytes allocated in iterations after the warm-up and still alive at the end of the
/// last iteration, per (category, phase), divided by the iterations that retained them.
fn leak_sites(replay: &Replay, categories: &[Category]) -> Vec<LeakSite> {
    let Some(last) = replay.iterations.last() else {
        return Vec::new();
    };
    let last_end = last.end.unwrap_or(replay.events);
    let retaining = (replay.iterations.len() as u64).saturating_sub(1).max(1);
    let mut sites: BTreeMap<(Category, Option<Phase>), u64> = BTreeMap::new();
    for (a, &c) in replay.allocations.iter().zip(categories) {
        let after_warm_up = a.iteration_run.is_some_and(|i| i > 0);
        let alive = a.freed_at.is_none_or(|f| f > last_end);
        if after_warm_up && alive {
            let phase = a.phase_run.map(|p| replay.phases[p].phase);
            *sites.entry((c, phase)).or_default() += a.bytes;
        }
    }
    let mut out: Vec<LeakSite> = sites
        .into_iter()
        .map(|((category, phase), bytes)| LeakSite {
            category,
            phase,
            bytes_per_iteration: bytes / retaining,
        })
        .collect();
    out.sort_by_key(|s| std::cmp::Reverse(s.bytes_per_iteration));
    out
}
