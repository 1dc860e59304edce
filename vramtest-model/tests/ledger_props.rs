//! Properties of `ledger::profile` on random well-formed event streams, checked against
//! an independent walk of the stream written here (live totals, phase and iteration
//! boundaries, and the classification rule applied from scratch).

use proptest::prelude::*;
use std::collections::HashMap;
use vramtest_model::ledger::profile_observing;
use vramtest_model::{Category, CategoryBytes, Event, Phase, Profile, profile};

/// What the generator may do next; turned into a well-formed stream by [`build`].
#[derive(Debug, Clone)]
enum Op {
    Alloc(u64),
    /// Allocate again under the id of a live allocation (its free was missed).
    AllocReuse(usize, u64),
    /// Free the live allocation picked by this number (nothing when none is live).
    Free(usize),
    /// Free an id that was never allocated (baseline memory).
    FreeBaseline,
    /// Resize the live allocation picked by this number, in place or moving it.
    Realloc(usize, bool, u64),
    /// Resize a block allocated before recording (baseline memory).
    ReallocBaseline(u64),
    PhaseStart(Phase),
    PhaseEnd,
    /// Start the next iteration (closing an open one implicitly, as the ledger allows).
    IterationStart,
    IterationEnd,
    TagPush(Category),
    TagPop,
}

fn phase() -> impl Strategy<Value = Phase> {
    prop::sample::select(Phase::ALL.to_vec())
}

fn category() -> impl Strategy<Value = Category> {
    prop::sample::select(Category::ALL.to_vec())
}

/// Sizes: mostly small, sometimes around and far above 64 MiB, where the ledger keeps a
/// block's bytes outside its 4 B word.
fn bytes() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 0u64..100_000,
        1 => ((1u64 << 26) - 2)..((1u64 << 26) + 2),
        1 => (1u64 << 26)..(1u64 << 44),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => bytes().prop_map(Op::Alloc),
        1 => (any::<usize>(), bytes()).prop_map(|(p, b)| Op::AllocReuse(p, b)),
        5 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::FreeBaseline),
        2 => (any::<usize>(), any::<bool>(), bytes()).prop_map(|(p, m, b)| Op::Realloc(p, m, b)),
        1 => bytes().prop_map(Op::ReallocBaseline),
        3 => phase().prop_map(Op::PhaseStart),
        3 => Just(Op::PhaseEnd),
        1 => Just(Op::IterationStart),
        1 => Just(Op::IterationEnd),
        1 => category().prop_map(Op::TagPush),
        1 => Just(Op::TagPop),
    ]
}

/// Interprets the ops, skipping the ones that would make the stream ill-formed (an end
/// with nothing open, a free with nothing live). Ids are unique except for deliberate
/// reuse of a live id; phases, tags and the last iteration may be left open, as when a
/// test panics.
fn build(ops: &[Op]) -> Vec<Event> {
    let mut events = Vec::new();
    let mut live: Vec<u64> = Vec::new();
    let mut next_id = 0u64;
    let mut next_baseline = 1u64 << 40;
    let (mut phases, mut tags) = (0usize, 0usize);
    let mut iteration: Option<u32> = None;
    let mut next_iteration = 0u32;
    for op in ops {
        match *op {
            Op::Alloc(bytes) => {
                next_id += 1;
                live.push(next_id);
                events.push(Event::Alloc { id: next_id, bytes });
            }
            Op::AllocReuse(pick, bytes) => {
                if !live.is_empty() {
                    let id = live[pick % live.len()];
                    events.push(Event::Alloc { id, bytes });
                }
            }
            Op::Free(pick) => {
                if !live.is_empty() {
                    let id = live.swap_remove(pick % live.len());
                    events.push(Event::Free { id });
                }
            }
            Op::FreeBaseline => {
                next_baseline += 1;
                events.push(Event::Free { id: next_baseline });
            }
            Op::Realloc(pick, moves, bytes) => {
                if !live.is_empty() {
                    let k = pick % live.len();
                    let from = live[k];
                    let to = if moves {
                        next_id += 1;
                        next_id
                    } else {
                        from
                    };
                    live[k] = to;
                    events.push(Event::Realloc { from, to, bytes });
                }
            }
            Op::ReallocBaseline(bytes) => {
                next_baseline += 1;
                next_id += 1;
                live.push(next_id);
                events.push(Event::Realloc {
                    from: next_baseline,
                    to: next_id,
                    bytes,
                });
            }
            Op::PhaseStart(p) => {
                phases += 1;
                events.push(Event::PhaseStart(p));
            }
            Op::PhaseEnd => {
                if phases > 0 {
                    phases -= 1;
                    events.push(Event::PhaseEnd);
                }
            }
            Op::IterationStart => {
                iteration = Some(next_iteration);
                events.push(Event::IterationStart(next_iteration));
                next_iteration += 1;
            }
            Op::IterationEnd => {
                if iteration.take().is_some() {
                    events.push(Event::IterationEnd);
                }
            }
            Op::TagPush(c) => {
                tags += 1;
                events.push(Event::TagPush(c));
            }
            Op::TagPop => {
                if tags > 0 {
                    tags -= 1;
                    events.push(Event::TagPop);
                }
            }
        }
    }
    events
}

fn stream() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(op(), 0..160).prop_map(|ops| build(&ops))
}

/// The highest live total during each event (index i: event i), walked independently:
/// after it, or, for a block that moves, while both copies exist.
fn live_totals(events: &[Event]) -> Vec<u64> {
    let mut sizes: HashMap<u64, u64> = HashMap::new();
    let mut total = 0u64;
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        match *e {
            Event::Alloc { id, bytes } => {
                // A live id allocated again: the old allocation is gone.
                if let Some(old) = sizes.insert(id, bytes) {
                    total -= old;
                }
                total += bytes;
            }
            Event::Free { id } => {
                if let Some(b) = sizes.remove(&id) {
                    total -= b;
                }
            }
            Event::Realloc { from, to, bytes } => {
                let old = sizes.remove(&from);
                if to != from
                    && let Some(b) = sizes.remove(&to)
                {
                    total -= b;
                }
                sizes.insert(to, bytes);
                match old {
                    Some(old) if to == from => total = total - old + bytes,
                    Some(old) => {
                        out.push(total + bytes);
                        total = total + bytes - old;
                        continue;
                    }
                    None => total += bytes,
                }
            }
            _ => {}
        }
        out.push(total);
    }
    out
}

/// One allocation as the independent model sees it.
struct Alloc {
    bytes: u64,
    freed: Option<usize>,
    tag: Option<Category>,
    /// (phase, the index that ended its run or the stream length)
    phase: Option<(Phase, usize)>,
    /// The index that ended its iteration (or the stream length), if made in one.
    iteration_end: Option<usize>,
}

/// The classification rule, applied from its text (README, "How memory is
/// classified").
fn rule(a: &Alloc) -> Category {
    if let Some(t) = a.tag {
        return t;
    }
    // Inside the loop: alive when its iteration ended. Outside: alive at the end.
    let outlives = match (a.freed, a.iteration_end) {
        (None, _) => true,
        (Some(f), Some(end)) => f > end,
        (Some(_), None) => false,
    };
    match a.phase {
        None if outlives => Category::Workspace,
        None => Category::Temporaries,
        Some((_, end)) if a.freed.is_some_and(|f| f < end) => Category::Temporaries,
        Some((Phase::Params, _)) => Category::Parameters,
        Some((Phase::OptimizerInit | Phase::OptimizerStep, _)) => Category::OptimizerState,
        Some((Phase::Inputs | Phase::Forward | Phase::Backward, _)) if outlives => {
            Category::Workspace
        }
        Some((Phase::Inputs, _)) => Category::Inputs,
        Some((Phase::Forward, _)) => Category::Activations,
        Some((Phase::Backward, _)) => Category::Gradients,
    }
}

/// The expected breakdown: per-allocation categories, then a walk for the peaks.
struct Expected {
    peak: u64,
    at_peak: CategoryBytes,
    category_peaks: CategoryBytes,
    peak_phase: Option<Phase>,
    peak_iteration: Option<u32>,
    /// (phase, iteration, start, peak, end) of every run, in order.
    records: Vec<(Phase, Option<u32>, u64, u64, u64)>,
    iteration_ends: Vec<u64>,
    /// Resizes of ids never seen allocated: new allocations.
    baseline_resizes: usize,
}

fn expected(events: &[Event]) -> Expected {
    let n = events.len();
    // First walk: context of every allocation and the end of every phase/iteration run.
    let mut allocs: Vec<Alloc> = Vec::new();
    let mut by_id: HashMap<u64, usize> = HashMap::new();
    let mut alloc_at: HashMap<usize, usize> = HashMap::new();
    // Event index -> (allocation, old bytes or none, new bytes, moved) of a resize.
    let mut resized: HashMap<usize, (usize, Option<u64>, u64, bool)> = HashMap::new();
    let mut run_ends: Vec<usize> = Vec::new(); // per phase run
    let mut run_phase: Vec<Phase> = Vec::new();
    let mut iter_ends: Vec<usize> = Vec::new(); // per iteration
    let mut phase_stack: Vec<usize> = Vec::new();
    let mut tag_stack: Vec<Category> = Vec::new();
    let mut open_iteration: Option<usize> = None;
    // Allocation index -> (phase run, iteration run), resolved after the walk.
    let mut context: Vec<(Option<usize>, Option<usize>)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match *e {
            Event::Alloc { id, bytes } => {
                alloc_at.insert(i, allocs.len());
                if let Some(previous) = by_id.insert(id, allocs.len()) {
                    allocs[previous].freed = Some(i);
                }
                context.push((phase_stack.last().copied(), open_iteration));
                allocs.push(Alloc {
                    bytes,
                    freed: None,
                    tag: tag_stack.last().copied(),
                    phase: None,
                    iteration_end: None,
                });
            }
            Event::Free { id } => {
                if let Some(k) = by_id.remove(&id) {
                    allocs[k].freed = Some(i);
                }
            }
            // CPU-only memory is in no category: the reference ignores it.
            Event::CpuOnlyAlloc { .. } => {}
            Event::Realloc { from, to, bytes } => {
                let moving = by_id.remove(&from);
                if to != from
                    && let Some(k) = by_id.remove(&to)
                {
                    allocs[k].freed = Some(i);
                }
                match moving {
                    Some(k) => {
                        resized.insert(i, (k, Some(allocs[k].bytes), bytes, to != from));
                        allocs[k].bytes = bytes;
                        by_id.insert(to, k);
                    }
                    None => {
                        // A baseline block: a new allocation of the new size.
                        resized.insert(i, (allocs.len(), None, bytes, false));
                        by_id.insert(to, allocs.len());
                        context.push((phase_stack.last().copied(), open_iteration));
                        allocs.push(Alloc {
                            bytes,
                            freed: None,
                            tag: tag_stack.last().copied(),
                            phase: None,
                            iteration_end: None,
                        });
                    }
                }
            }
            Event::PhaseStart(p) => {
                phase_stack.push(run_ends.len());
                run_ends.push(n);
                run_phase.push(p);
            }
            Event::PhaseEnd => {
                let r = phase_stack.pop().expect("well-formed");
                run_ends[r] = i;
            }
            Event::IterationStart(_) => {
                if let Some(k) = open_iteration {
                    iter_ends[k] = i;
                }
                open_iteration = Some(iter_ends.len());
                iter_ends.push(n);
            }
            Event::IterationEnd => {
                let k = open_iteration.take().expect("well-formed");
                iter_ends[k] = i;
            }
            Event::TagPush(c) => tag_stack.push(c),
            Event::TagPop => {
                tag_stack.pop();
            }
        }
    }
    for (a, (run, it)) in allocs.iter_mut().zip(&context) {
        a.phase = run.map(|r| (run_phase[r], run_ends[r]));
        a.iteration_end = it.map(|k| iter_ends[k]);
    }
    let cats: Vec<Category> = allocs.iter().map(rule).collect();
    let mut freed_at: HashMap<usize, usize> = HashMap::new();
    for (k, a) in allocs.iter().enumerate() {
        if let Some(f) = a.freed {
            freed_at.insert(f, k);
        }
    }

    // Second walk: live bytes per category, with each allocation's current size.
    let mut size: Vec<u64> = vec![0; allocs.len()];
    let mut live = CategoryBytes::default();
    let mut out = Expected {
        peak: 0,
        at_peak: CategoryBytes::default(),
        category_peaks: CategoryBytes::default(),
        peak_phase: None,
        peak_iteration: None,
        records: Vec::new(),
        iteration_ends: Vec::new(),
        baseline_resizes: resized.values().filter(|r| r.1.is_none()).count(),
    };
    let mut open_records: Vec<usize> = Vec::new();
    let mut iteration: Option<u32> = None;
    for (i, e) in events.iter().enumerate() {
        // A free, or the implicit free of a reused id just before its new allocation.
        if let Some(&k) = freed_at.get(&i) {
            live[cats[k]] -= size[k];
        }
        // A moment at which the live bytes may be highest.
        let moment = |live: &CategoryBytes, out: &mut Expected, c: Category| {
            out.category_peaks[c] = out.category_peaks[c].max(live[c]);
            let total = live.total();
            if total > out.peak {
                out.peak = total;
                out.at_peak = *live;
                out.peak_phase = open_records.last().map(|&r| out.records[r].0);
                out.peak_iteration = iteration;
            }
            for &r in &open_records {
                out.records[r].3 = out.records[r].3.max(total);
            }
        };
        match *e {
            Event::Alloc { bytes, .. } => {
                let k = alloc_at[&i];
                size[k] = bytes;
                live[cats[k]] += bytes;
                moment(&live, &mut out, cats[k]);
            }
            Event::CpuOnlyAlloc { .. } => {}
            Event::Realloc { .. } => {
                let (k, old, new, moved) = resized[&i];
                let c = cats[k];
                size[k] = new;
                match old {
                    Some(old) if moved => {
                        live[c] += new;
                        moment(&live, &mut out, c);
                        live[c] -= old;
                    }
                    Some(old) => {
                        live[c] = live[c] - old + new;
                        moment(&live, &mut out, c);
                    }
                    None => {
                        live[c] += new;
                        moment(&live, &mut out, c);
                    }
                }
            }
            Event::Free { .. } => {}
            Event::PhaseStart(p) => {
                let t = live.total();
                open_records.push(out.records.len());
                out.records.push((p, iteration, t, t, t));
            }
            Event::PhaseEnd => {
                let r = open_records.pop().unwrap();
                out.records[r].4 = live.total();
            }
            Event::IterationStart(number) => {
                if iteration.is_some() {
                    out.iteration_ends.push(live.total());
                }
                iteration = Some(number);
            }
            Event::IterationEnd => {
                iteration = None;
                out.iteration_ends.push(live.total());
            }
            Event::TagPush(_) | Event::TagPop => {}
        }
    }
    for r in open_records {
        out.records[r].4 = live.total();
    }
    if iteration.is_some() {
        out.iteration_ends.push(live.total());
    }
    out
}

/// The profile's peak and its breakdown are those of the independent walk.
fn same_breakdown(p: &Profile, x: &Expected) -> Result<(), TestCaseError> {
    prop_assert_eq!(p.peak_bytes, x.peak);
    prop_assert_eq!(p.at_peak, x.at_peak);
    prop_assert_eq!(p.category_peaks, x.category_peaks);
    prop_assert_eq!(p.peak_phase, x.peak_phase);
    prop_assert_eq!(p.peak_iteration, x.peak_iteration);
    Ok(())
}

/// The profile's phase records and iteration ends are those of the independent walk.
fn same_records(p: &Profile, x: &Expected) -> Result<(), TestCaseError> {
    let got: Vec<_> = p
        .phases
        .iter()
        .map(|r| {
            (
                r.phase,
                r.iteration,
                r.start_bytes,
                r.peak_bytes,
                r.end_bytes,
            )
        })
        .collect();
    prop_assert_eq!(&got, &x.records);
    prop_assert_eq!(&p.iteration_end_bytes, &x.iteration_ends);
    Ok(())
}

/// Whether an allocation or a resize happens after the loop started while no iteration
/// is open.
fn allocates_between_iterations(events: &[Event]) -> bool {
    let (mut started, mut open) = (false, false);
    for e in events {
        match e {
            Event::IterationStart(_) => (started, open) = (true, true),
            Event::IterationEnd => open = false,
            Event::Alloc { .. } | Event::Realloc { .. } if started && !open => return true,
            _ => {}
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn at_peak_sums_to_the_peak(events in stream()) {
        let p = profile(&events);
        prop_assert_eq!(p.at_peak.total(), p.peak_bytes);
    }

    #[test]
    fn the_peak_is_the_highest_live_total(events in stream()) {
        let p = profile(&events);
        let totals = live_totals(&events);
        for (i, &t) in totals.iter().enumerate() {
            prop_assert!(p.peak_bytes >= t, "live {} after event {} exceeds peak {}", t, i, p.peak_bytes);
        }
        prop_assert_eq!(p.peak_bytes, totals.iter().copied().max().unwrap_or(0));
    }

    #[test]
    fn the_observed_timeline_is_the_independent_walk_with_the_profiles_breakdown(events in stream()) {
        let p = profile(&events);
        let totals = live_totals(&events);
        let mut seen = Vec::new();
        let mut highest = CategoryBytes::default();
        let observed = profile_observing(&events, |at, live| {
            seen.push((at, live.total()));
            if live.total() > highest.total() {
                highest = *live;
            }
        });
        // The same walk gives the same profile.
        prop_assert_eq!(&observed, &p);
        let expected: Vec<(usize, u64)> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Event::Alloc { .. } | Event::Free { .. } | Event::Realloc { .. }))
            .map(|(i, _)| (i, totals[i]))
            .collect();
        prop_assert_eq!(seen, expected);
        if p.peak_bytes > 0 {
            prop_assert_eq!(highest, p.at_peak);
        }
    }

    #[test]
    fn category_peaks_are_bounded_and_cover_the_peak(events in stream()) {
        let p = profile(&events);
        let max_live = live_totals(&events).into_iter().max().unwrap_or(0);
        for c in Category::ALL {
            prop_assert!(p.category_peaks[c] <= max_live, "{} peak {} > {}", c, p.category_peaks[c], max_live);
            prop_assert!(p.at_peak[c] <= p.category_peaks[c], "{} at peak {} > its peak {}", c, p.at_peak[c], p.category_peaks[c]);
        }
        // Each category is at most its own peak at the moment of the total peak.
        prop_assert!(p.category_peaks.total() >= p.peak_bytes);
        // Only tags can charge untracked; nothing else does.
        if !events.iter().any(|e| matches!(e, Event::TagPush(Category::Untracked))) {
            prop_assert_eq!(p.category_peaks[Category::Untracked], 0);
        }
    }

    #[test]
    fn ids_are_only_names(events in stream()) {
        // The same program seen with every id renamed (another allocator's addresses).
        let rename = |id: u64| id.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5555;
        let renamed: Vec<Event> = events
            .iter()
            .map(|e| match *e {
                Event::Alloc { id, bytes } => Event::Alloc { id: rename(id), bytes },
                Event::Free { id } => Event::Free { id: rename(id) },
                Event::Realloc { from, to, bytes } => Event::Realloc { from: rename(from), to: rename(to), bytes },
                other => other,
            })
            .collect();
        prop_assert_eq!(profile(&renamed), profile(&events));
    }

    #[test]
    fn counts_match_the_stream(events in stream()) {
        let p = profile(&events);
        let x = expected(&events);
        // Allocations, and resizes of blocks the probe never saw allocated.
        let allocs = events.iter().filter(|e| matches!(e, Event::Alloc { .. })).count()
            + x.baseline_resizes;
        let iterations = events.iter().filter(|e| matches!(e, Event::IterationStart(_))).count();
        let phases = events.iter().filter(|e| matches!(e, Event::PhaseStart(_))).count();
        prop_assert_eq!(p.allocations, allocs as u64);
        prop_assert_eq!(p.iterations, iterations as u32);
        prop_assert_eq!(p.phases.len(), phases);
        prop_assert_eq!(p.iteration_end_bytes.len(), iterations);
    }

    #[test]
    fn breakdown_matches_the_rule_applied_independently(events in stream()) {
        same_breakdown(&profile(&events), &expected(&events))?;
    }

    #[test]
    fn phase_records_and_iteration_ends_match_an_independent_walk(events in stream()) {
        let p = profile(&events);
        same_records(&p, &expected(&events))?;
        for r in &p.phases {
            prop_assert!(r.start_bytes <= r.peak_bytes && r.end_bytes <= r.peak_bytes);
            prop_assert!(r.peak_bytes <= p.peak_bytes);
        }
    }

    #[test]
    fn leak_is_zero_unless_every_step_after_warm_up_grows(events in stream()) {
        let p = profile(&events);
        let ends = &p.iteration_end_bytes;
        let every_step_grows = ends.len() >= 2 && ends.windows(2).all(|w| w[1] > w[0]);
        if every_step_grows {
            let smallest = ends.windows(2).map(|w| w[1] - w[0]).min().unwrap();
            prop_assert_eq!(p.leak_bytes_per_iteration, smallest);
            // Sites name allocations made inside iterations 1..n; growth that comes only
            // from allocations made between two iterations (which the harness never
            // does) has no iteration to name.
            if !allocates_between_iterations(&events) {
                prop_assert!(!p.leak_sites.is_empty());
            }
        } else {
            prop_assert_eq!(p.leak_bytes_per_iteration, 0);
            prop_assert!(p.leak_sites.is_empty());
        }
    }

    #[test]
    fn steady_state_keeps_set_up_and_the_last_iteration(events in stream()) {
        let p = profile(&events);
        // The last iteration number that ran a phase, from the independent walk.
        let x = expected(&events);
        let last = x.records.iter().filter_map(|r| r.1).max();
        let kept: Vec<_> = p
            .steady_state_phases()
            .iter()
            .map(|r| (r.phase, r.iteration, r.start_bytes, r.peak_bytes, r.end_bytes))
            .collect();
        let expected: Vec<_> = x
            .records
            .iter()
            .filter(|r| r.1.is_none() || r.1 == last)
            .copied()
            .collect();
        prop_assert_eq!(kept, expected);
    }
}

/// A long stream: the random ops of [`stream`] with runs of allocations between them,
/// so that tens of thousands are alive at once and the ledger's live table doubles
/// several times (and starts prefetching) amid resizes, frees and markers; then most
/// are freed.
fn long_stream() -> impl Strategy<Value = Vec<Event>> {
    (20_000usize..45_000, prop::collection::vec(op(), 1..400)).prop_map(|(n, ops)| {
        let run = n / ops.len() + 1;
        let mut all = Vec::with_capacity(ops.len() * (run + 1));
        for op in ops {
            all.extend((0..run as u64).map(|k| Op::Alloc(16 + k % 4096)));
            all.push(op);
        }
        // Then free nearly all of them, in a phase of its own, in scattered order.
        all.push(Op::PhaseStart(Phase::Backward));
        all.extend((0..n).map(|k| Op::Free(k.wrapping_mul(7919))));
        all.push(Op::PhaseEnd);
        build(&all)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn a_long_stream_matches_the_rule_applied_independently(events in long_stream()) {
        let p = profile(&events);
        let x = expected(&events);
        same_breakdown(&p, &x)?;
        same_records(&p, &x)?;
    }
}
