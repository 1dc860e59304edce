//! Properties of the probe over arbitrary programs run on a [`FakePool`].

use proptest::prelude::*;
use vramtest_cuda::{FakePool, PoolSession, SessionReport};
use vramtest_model::{Category, Event, Fidelity, Phase, ledger};

const MIB: u64 = 1 << 20;

#[derive(Debug, Clone)]
enum Op {
    Alloc(u64),
    /// Free the n-th live allocation (modulo the live count).
    Free(usize),
    Outside(u64),
    Mark(Event),
}

fn op() -> impl Strategy<Value = Op> {
    let phase = prop::sample::select(Phase::ALL.to_vec());
    prop_oneof![
        4 => (1u64..8 * MIB).prop_map(Op::Alloc),
        3 => any::<usize>().prop_map(Op::Free),
        2 => phase.prop_map(|p| Op::Mark(Event::PhaseStart(p))),
        2 => Just(Op::Mark(Event::PhaseEnd)),
        1 => (0u32..4).prop_map(|i| Op::Mark(Event::IterationStart(i))),
        1 => Just(Op::Mark(Event::IterationEnd)),
    ]
}

/// Runs `ops` on a fresh fake device; returns the report and the recorded events.
fn run(ops: &[Op], tracked: bool, pools: bool) -> (SessionReport, Vec<Event>) {
    let fake = if pools {
        FakePool::new(1 << 40, 300 * MIB)
    } else {
        FakePool::without_pools(1 << 40, 300 * MIB)
    };
    run_on(fake, ops, tracked)
}

/// [`run`] on a device whose pool rounds to 512 B and fragments.
fn run_fragmenting(ops: &[Op], tracked: bool) -> (SessionReport, Vec<Event>) {
    let fake = FakePool::new(1 << 40, 300 * MIB)
        .with_alignment(512)
        .with_fragmentation();
    run_on(fake, ops, tracked)
}

/// Runs `ops` on `fake`.
fn run_on(fake: FakePool, ops: &[Op], tracked: bool) -> (SessionReport, Vec<Event>) {
    let mut s = PoolSession::new(fake.clone()).unwrap();
    let mut live: Vec<u64> = Vec::new();
    for op in ops {
        match op {
            Op::Alloc(bytes) => {
                let id = fake.alloc(*bytes);
                if tracked {
                    s.track_alloc(id, *bytes);
                }
                live.push(id);
            }
            Op::Free(n) => {
                if !live.is_empty() {
                    let id = live.remove(n % live.len());
                    fake.free(id);
                    if tracked {
                        s.track_free(id);
                    }
                }
            }
            Op::Outside(bytes) => fake.alloc_outside(*bytes),
            Op::Mark(e) => s.boundary(e).unwrap(),
        }
    }
    let events = s.events().to_vec();
    (s.finish().unwrap(), events)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The breakdown at the peak sums to the peak, whatever the program.
    #[test]
    fn at_peak_sums_to_peak(ops in prop::collection::vec(
        prop_oneof![9 => op(), 1 => (1u64..64 * MIB).prop_map(Op::Outside)], 0..60),
        tracked: bool, pools: bool, fragmenting: bool)
    {
        let (r, _) = if fragmenting {
            run_fragmenting(&ops, tracked)
        } else {
            run(&ops, tracked, pools)
        };
        let pools = pools || fragmenting;
        let p = &r.profile;
        prop_assert_eq!(p.at_peak.total(), p.peak_bytes);
        for rec in &p.phases {
            prop_assert!(rec.peak_bytes >= rec.start_bytes.max(rec.end_bytes));
            prop_assert!(rec.peak_bytes <= p.peak_bytes);
        }
        for (c, bytes) in p.at_peak.iter() {
            prop_assert!(bytes <= p.category_peaks[c]);
        }
        if let (Some(reserved), true) = (p.reserved_peak_bytes, pools) {
            prop_assert!(reserved >= r.pool.used_peak_bytes);
            prop_assert_eq!(r.pool.fragmentation_bytes, reserved - r.pool.used_peak_bytes);
        }
    }

    /// Without memory outside the pool, phase fidelity's peak is the pool's own peak.
    #[test]
    fn phase_peak_is_the_pool_peak(ops in prop::collection::vec(op(), 0..60)) {
        let (r, _) = run(&ops, false, true);
        prop_assert_eq!(r.profile.fidelity, Fidelity::Phase);
        prop_assert_eq!(r.profile.peak_bytes, r.pool.used_peak_bytes);
        prop_assert_eq!(r.profile.at_peak[Category::Untracked], 0);
    }

    /// Tracked allocations with nothing else on the device: exactly the ledger's profile.
    #[test]
    fn tracked_is_the_ledger(ops in prop::collection::vec(op(), 1..60), pools: bool) {
        let (r, events) = run(&ops, true, pools);
        let p = &r.profile;
        let reference = ledger::profile(&events);
        prop_assert_eq!(p.fidelity, if reference.allocations > 0 { Fidelity::Exact } else { Fidelity::Phase });
        if reference.allocations > 0 {
            prop_assert_eq!(p.at_peak, reference.at_peak);
            prop_assert_eq!(p.peak_bytes, reference.peak_bytes);
            prop_assert_eq!(p.peak_phase, reference.peak_phase);
            prop_assert_eq!(p.peak_iteration, reference.peak_iteration);
            prop_assert_eq!(p.category_peaks, reference.category_peaks);
            prop_assert_eq!(&p.phases, &reference.phases);
            prop_assert_eq!(&p.iteration_end_bytes, &reference.iteration_end_bytes);
            prop_assert_eq!(p.leak_bytes_per_iteration, reference.leak_bytes_per_iteration);
        }
    }

    /// Per-allocation records (CUPTI's role) merged at the boundaries give the very
    /// profile of the same allocations tracked one by one, whatever the program.
    #[test]
    fn records_are_the_tracked_profile(
        ops in prop::collection::vec(
            prop_oneof![9 => op(), 1 => (1u64..64 * MIB).prop_map(Op::Outside)], 0..60),
        pools: bool, tracked_too: bool)
    {
        let fake = || if pools {
            FakePool::new(1 << 40, 300 * MIB)
        } else {
            FakePool::without_pools(1 << 40, 300 * MIB)
        };
        let (tracked, events) = run_on(fake(), &ops, true);
        let (records, _) = run_on(fake().with_records(), &ops, tracked_too);
        prop_assert_eq!(records.profile.fidelity, Fidelity::Exact);
        prop_assert_eq!(records.allocation_records, Some("FakePool"));
        if events.iter().any(|e| matches!(e, Event::Alloc { .. })) {
            prop_assert_eq!(&records.profile, &tracked.profile);
        } else {
            prop_assert_eq!(records.profile.allocations, 0);
            prop_assert_eq!(records.profile.at_peak.total(), records.profile.peak_bytes);
        }
    }
}
