//! A stream long enough that the ledger's live table outgrows the processor's caches
//! (and asks for huge pages): the figures must be the same arithmetic as on a short one.

use vramtest_model::ledger::categories;
use vramtest_model::{Category, Event, Phase, profile};

use Event::{IterationEnd, IterationStart, PhaseEnd, PhaseStart};

/// Blocks per phase: 200 000 parameters and 200 000 activations alive at once.
const N: u64 = 200_000;

fn param_bytes(i: u64) -> u64 {
    64 + (i % 7) * 16
}

fn activation_bytes(i: u64) -> u64 {
    256 + (i % 13) * 32
}

/// Parameters at addresses 4 KiB apart, then one iteration whose forward pass keeps
/// `N` activations (16 B apart in a separate region) that backward frees in reverse.
fn stream() -> Vec<Event> {
    let param_id = |i: u64| 0x10_0000_0000 + i * 4096;
    let activation_id = |i: u64| 0x7f00_0000_0000 + i * 512;
    let mut events = vec![PhaseStart(Phase::Params)];
    events.extend((0..N).map(|i| Event::Alloc {
        id: param_id(i),
        bytes: param_bytes(i),
    }));
    events.extend([PhaseEnd, IterationStart(0), PhaseStart(Phase::Forward)]);
    events.extend((0..N).map(|i| Event::Alloc {
        id: activation_id(i),
        bytes: activation_bytes(i),
    }));
    events.extend([PhaseEnd, PhaseStart(Phase::Backward)]);
    events.extend((0..N).rev().map(|i| Event::Free {
        id: activation_id(i),
    }));
    events.extend([PhaseEnd, IterationEnd]);
    events
}

#[test]
fn a_long_stream_is_the_same_arithmetic() {
    let events = stream();
    let params: u64 = (0..N).map(param_bytes).sum();
    let activations: u64 = (0..N).map(activation_bytes).sum();
    let p = profile(&events);
    assert_eq!(p.allocations, 2 * N);
    assert_eq!(p.peak_bytes, params + activations);
    assert_eq!(p.peak_phase, Some(Phase::Forward));
    assert_eq!(p.at_peak[Category::Parameters], params);
    assert_eq!(p.at_peak[Category::Activations], activations);
    assert_eq!(p.at_peak.total(), params + activations);
    assert_eq!(p.iteration_end_bytes, vec![params]);
    let cats = categories(&events);
    assert_eq!(
        cats.iter().filter(|&&c| c == Category::Parameters).count() as u64,
        N
    );
    assert_eq!(
        cats.iter().filter(|&&c| c == Category::Activations).count() as u64,
        N
    );
}
