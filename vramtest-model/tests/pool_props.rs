//! Properties of the pool model (`vramtest_model::pool`) on random event streams:
//! reserved never below allocated, reserved monotone in the granularity, allocated the
//! aligned live bytes at every step, and with alignment 1 the ledger's own peak.

use proptest::prelude::*;
use std::collections::HashMap;
use vramtest_model::pool::{CudaPool, Replay, replay};
use vramtest_model::{Event, Phase, profile};

#[derive(Debug, Clone)]
enum Op {
    Alloc(u64),
    /// Allocate again under a live id (its free was missed).
    AllocReuse(usize, u64),
    Free(usize),
    /// Free an id never allocated (the baseline's).
    FreeBaseline,
    /// Resize a live block, in place or moving it.
    Realloc(usize, bool, u64),
    ReallocBaseline(u64),
    Boundary(Phase),
    PhaseEnd,
}

fn bytes() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0u64..5_000,
        3 => 0u64..3_000_000,
        1 => 0u64..40_000_000,
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
        1 => prop::sample::select(Phase::ALL.to_vec()).prop_map(Op::Boundary),
        1 => Just(Op::PhaseEnd),
    ]
}

/// A stream from the ops: ids picked among the live ones; phases closed only when open.
fn build(ops: &[Op]) -> Vec<Event> {
    let mut events = Vec::new();
    let mut live: Vec<u64> = Vec::new();
    let mut next = 1u64;
    let mut open = 0u32;
    let fresh = |next: &mut u64| {
        *next += 1;
        *next
    };
    for op in ops {
        match *op {
            Op::Alloc(bytes) => {
                let id = fresh(&mut next);
                live.push(id);
                events.push(Event::Alloc { id, bytes });
            }
            Op::AllocReuse(p, bytes) if !live.is_empty() => {
                let id = live[p % live.len()];
                events.push(Event::Alloc { id, bytes });
            }
            Op::Free(p) if !live.is_empty() => {
                let id = live.swap_remove(p % live.len());
                events.push(Event::Free { id });
            }
            Op::FreeBaseline => events.push(Event::Free { id: u64::MAX }),
            Op::Realloc(p, moves, bytes) if !live.is_empty() => {
                let i = p % live.len();
                let from = live[i];
                let to = if moves { fresh(&mut next) } else { from };
                live[i] = to;
                events.push(Event::Realloc { from, to, bytes });
            }
            Op::ReallocBaseline(bytes) => {
                let to = fresh(&mut next);
                live.push(to);
                events.push(Event::Realloc {
                    from: u64::MAX - 1,
                    to,
                    bytes,
                });
            }
            Op::Boundary(phase) => {
                open += 1;
                events.push(Event::PhaseStart(phase));
            }
            Op::PhaseEnd if open > 0 => {
                open -= 1;
                events.push(Event::PhaseEnd);
            }
            _ => {}
        }
    }
    events
}

fn stream() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(op(), 0..200).prop_map(|ops| build(&ops))
}

/// Powers of two from 256 B to 4 MiB.
fn granularity() -> impl Strategy<Value = u64> {
    (8u32..=22).prop_map(|p| 1u64 << p)
}

/// The live bytes, each aligned, after every event, and the peak (which also counts a
/// moving resize's moment with both copies): an independent walk.
fn aligned_live(events: &[Event], alignment: u64) -> (Vec<u64>, u64) {
    let align = |b: u64| b.div_ceil(alignment) * alignment;
    let mut live: HashMap<u64, u64> = HashMap::new();
    let mut after = Vec::with_capacity(events.len());
    let mut peak = 0;
    for e in events {
        match *e {
            Event::Alloc { id, bytes } => {
                live.insert(id, align(bytes));
            }
            Event::Free { id } => {
                live.remove(&id);
            }
            Event::Realloc { from, to, bytes } => {
                if to != from {
                    live.remove(&to);
                    if live.contains_key(&from) {
                        peak = peak.max(live.values().sum::<u64>() + align(bytes));
                    }
                }
                live.remove(&from);
                live.insert(to, align(bytes));
            }
            _ => {}
        }
        let now: u64 = live.values().sum();
        peak = peak.max(now);
        after.push(now);
    }
    (after, peak)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn reserved_is_never_below_allocated(
        events in stream(),
        alignment in prop::sample::select(vec![1u64, 8, 256, 512]),
        granularity in granularity(),
    ) {
        let mut r = Replay::new(CudaPool { alignment, granularity });
        for e in &events {
            r.apply(e);
            prop_assert!(r.reserved() >= r.allocated(), "{} < {}", r.reserved(), r.allocated());
            prop_assert_eq!(r.reserved() % granularity, 0);
        }
        let peaks = r.peaks();
        prop_assert!(peaks.reserved_bytes >= peaks.allocated_bytes);
    }

    #[test]
    fn reserved_grows_with_the_granularity(
        events in stream(),
        granularity in granularity(),
        times in 1u64..=4,
    ) {
        let fine = CudaPool { alignment: 256, granularity };
        let coarse = CudaPool { alignment: 256, granularity: granularity * times };
        let (mut f, mut c) = (Replay::new(fine), Replay::new(coarse));
        for e in &events {
            f.apply(e);
            c.apply(e);
            prop_assert!(c.reserved() >= f.reserved());
            prop_assert_eq!(c.allocated(), f.allocated());
        }
        prop_assert!(c.peaks().reserved_bytes >= f.peaks().reserved_bytes);
    }

    #[test]
    fn allocated_is_the_aligned_live_bytes(
        events in stream(),
        alignment in prop::sample::select(vec![1u64, 256, 4096]),
    ) {
        let (expected, peak) = aligned_live(&events, alignment);
        let mut r = Replay::new(CudaPool { alignment, granularity: 2 << 20 });
        let after: Vec<u64> = events.iter().map(|e| { r.apply(e); r.allocated() }).collect();
        prop_assert_eq!(after, expected);
        prop_assert_eq!(r.peaks().allocated_bytes, peak);
    }

    #[test]
    fn with_alignment_one_allocated_is_the_ledgers_peak(events in stream()) {
        let peaks = replay(&events, &CudaPool { alignment: 1, granularity: 1 });
        prop_assert_eq!(peaks.allocated_bytes, profile(&events).peak_bytes);
        // With 1 B granules, reserved also counts freed bytes until a boundary.
        prop_assert!(peaks.reserved_bytes >= peaks.allocated_bytes);
    }
}
