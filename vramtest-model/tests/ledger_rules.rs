//! The classification rule (README, "How memory is classified"), one case at a time,
//! on hand-written event streams. Every expected figure below is worked out by hand in the comments next to it.

use test_case::test_case;
use vramtest_model::ledger::categories;
use vramtest_model::{Category, CategoryBytes, Event, LeakSite, Phase, PhaseRecord, profile};

use Event::{IterationEnd, IterationStart, PhaseEnd, PhaseStart, TagPop, TagPush};

fn a(id: u64, bytes: u64) -> Event {
    Event::Alloc { id, bytes }
}

fn f(id: u64) -> Event {
    Event::Free { id }
}

/// `CategoryBytes` from a short list of non-zero entries.
fn bytes(entries: &[(Category, u64)]) -> CategoryBytes {
    let mut out = CategoryBytes::default();
    for &(c, b) in entries {
        out[c] += b;
    }
    out
}

fn only(c: Category, b: u64) -> CategoryBytes {
    bytes(&[(c, b)])
}

fn record(phase: Phase, iteration: Option<u32>, start: u64, peak: u64, end: u64) -> PhaseRecord {
    PhaseRecord {
        phase,
        iteration,
        start_bytes: start,
        peak_bytes: peak,
        end_bytes: end,
    }
}

// ---------------------------------------------------------------------------------------
// Temporaries: freed before the phase that made them ended, whatever the phase.

#[test_case(Phase::Params)]
#[test_case(Phase::OptimizerInit)]
#[test_case(Phase::Inputs)]
#[test_case(Phase::Forward)]
#[test_case(Phase::Backward)]
#[test_case(Phase::OptimizerStep)]
fn freed_before_its_phase_ends_is_a_temporary_in_the_loop(phase: Phase) {
    let events = [
        IterationStart(0),
        PhaseStart(phase),
        a(1, 4096),
        f(1),
        PhaseEnd,
        IterationEnd,
    ];
    assert_eq!(categories(&events), [Category::Temporaries]);
    let p = profile(&events);
    assert_eq!(p.category_peaks, only(Category::Temporaries, 4096));
    assert_eq!(p.at_peak, only(Category::Temporaries, 4096));
}

#[test_case(Phase::Params)]
#[test_case(Phase::OptimizerInit)]
#[test_case(Phase::Inputs)]
#[test_case(Phase::Forward)]
#[test_case(Phase::Backward)]
#[test_case(Phase::OptimizerStep)]
fn freed_before_its_phase_ends_is_a_temporary_before_the_loop(phase: Phase) {
    // A kept allocation next to the temporary must not change the temporary's category.
    let events = [PhaseStart(phase), a(1, 10), a(2, 300), f(2), PhaseEnd];
    assert_eq!(categories(&events)[1], Category::Temporaries);
}

#[test]
fn a_temporary_freed_in_a_nested_phase_is_judged_by_the_phase_that_made_it() {
    // Made in forward, freed inside a nested backward run, before forward ended.
    let events = [
        IterationStart(0),
        PhaseStart(Phase::Forward),
        a(1, 64),
        PhaseStart(Phase::Backward),
        f(1),
        PhaseEnd,
        PhaseEnd,
        IterationEnd,
    ];
    assert_eq!(categories(&events), [Category::Temporaries]);
}

#[test]
fn each_phase_keeps_its_own_highest_temporaries() {
    // Backward's temporaries peak at 3000 in iteration 0 and 5000 in iteration 1; the
    // optimizer step's at 800 (two at once), beside 100 kept bytes; forward has none.
    let mut events = vec![PhaseStart(Phase::Params), a(1, 100), PhaseEnd];
    for (i, big) in [(0u32, 3000u64), (1, 5000)] {
        let id = 10 + 10 * u64::from(i);
        events.extend([
            IterationStart(i),
            PhaseStart(Phase::Forward),
            a(id, 64),
            PhaseEnd,
            PhaseStart(Phase::Backward),
            a(id + 1, big),
            f(id + 1),
            a(id + 2, 1000),
            f(id + 2),
            PhaseEnd,
            PhaseStart(Phase::OptimizerStep),
            a(id + 3, 400),
            a(id + 4, 400),
            f(id + 3),
            f(id + 4),
            PhaseEnd,
            f(id),
            IterationEnd,
        ]);
    }
    let p = profile(&events);
    let temporaries: std::collections::BTreeMap<Phase, u64> = p
        .phase_category_peaks
        .iter()
        .map(|(phase, peaks)| (*phase, peaks[Category::Temporaries]))
        .collect();
    assert_eq!(
        temporaries,
        std::collections::BTreeMap::from([
            (Phase::Params, 0),
            (Phase::Forward, 0),
            (Phase::Backward, 5000),
            (Phase::OptimizerStep, 800),
        ])
    );
    assert_eq!(p.category_peaks[Category::Temporaries], 5000);
}

// ---------------------------------------------------------------------------------------
// Survivors of each phase.

#[test_case(Phase::Params, Category::Parameters)]
#[test_case(Phase::OptimizerInit, Category::OptimizerState)]
#[test_case(Phase::Inputs, Category::Inputs)]
#[test_case(Phase::Forward, Category::Activations; "forward freed within its iteration")]
#[test_case(Phase::Backward, Category::Gradients)]
#[test_case(Phase::OptimizerStep, Category::OptimizerState)]
fn survivors_freed_later_in_the_same_iteration(phase: Phase, expected: Category) {
    let events = [
        IterationStart(0),
        PhaseStart(phase),
        a(1, 1000),
        PhaseEnd,
        f(1),
        IterationEnd,
    ];
    assert_eq!(categories(&events), [expected]);
    let p = profile(&events);
    assert_eq!(p.category_peaks, only(expected, 1000));
    assert_eq!(p.at_peak, only(expected, 1000));
}

#[test_case(Phase::Params, Category::Parameters)]
#[test_case(Phase::OptimizerInit, Category::OptimizerState)]
#[test_case(Phase::OptimizerStep, Category::OptimizerState; "lazily created optimizer state")]
#[test_case(Phase::Inputs, Category::Workspace; "a prefetch buffer kept by the loader")]
#[test_case(Phase::Forward, Category::Workspace; "a cache grown in forward")]
#[test_case(Phase::Backward, Category::Workspace; "a cache grown in backward, like gemm's packing buffer")]
fn survivors_that_outlive_their_iteration(phase: Phase, expected: Category) {
    // Never freed, and freed only after the iteration: the same category either way.
    let never = [
        IterationStart(0),
        PhaseStart(phase),
        a(1, 8),
        PhaseEnd,
        IterationEnd,
    ];
    assert_eq!(categories(&never), [expected]);
    let later = [
        IterationStart(0),
        PhaseStart(phase),
        a(1, 8),
        PhaseEnd,
        IterationEnd,
        f(1),
    ];
    assert_eq!(categories(&later), [expected]);
}

#[test_case(Phase::Inputs, Category::Inputs)]
#[test_case(Phase::Forward, Category::Activations)]
#[test_case(Phase::Backward, Category::Gradients)]
fn outside_the_loop_only_what_is_never_released_is_workspace(phase: Phase, expected: Category) {
    // A test without `t.iterations()`: its own state is released when it returns; only
    // a process-wide cache is still alive at the end of the stream.
    let freed = [PhaseStart(phase), a(1, 8), PhaseEnd, f(1)];
    assert_eq!(categories(&freed), [expected]);
    let kept = [PhaseStart(phase), a(1, 8), PhaseEnd];
    assert_eq!(categories(&kept), [Category::Workspace]);
}

#[test]
fn a_cache_grown_in_backward_is_not_charged_to_gradients() {
    // The shape of candle's MLP step: 1000 B of gradients per iteration, released at the
    // end of the loop body, and a 600 B packing buffer grown once in backward and kept
    // for the life of the process. Gradients must equal the parameters (1000 B).
    let mut events = vec![PhaseStart(Phase::Params), a(1, 1000), PhaseEnd];
    for i in 0..3u32 {
        let id = 10 * u64::from(i + 1);
        events.extend([IterationStart(i), PhaseStart(Phase::Backward), a(id, 1000)]);
        if i == 0 {
            events.push(a(2, 600));
        }
        events.extend([PhaseEnd, f(id), IterationEnd]);
    }
    let p = profile(&events);
    assert_eq!(p.category_peaks[Category::Gradients], 1000);
    assert_eq!(p.category_peaks[Category::Workspace], 600);
    assert_eq!(p.category_peaks[Category::Parameters], 1000);
    // 1000 parameters + 1000 gradients + 600 cache.
    assert_eq!(p.peak_bytes, 2600);
    assert_eq!(p.peak_phase, Some(Phase::Backward));
    assert_eq!(p.peak_iteration, Some(0));
}

#[test_case(Phase::Params, Category::Parameters)]
#[test_case(Phase::OptimizerInit, Category::OptimizerState)]
fn set_up_phases_before_the_loop_charge_their_survivors(phase: Phase, expected: Category) {
    let events = [
        PhaseStart(phase),
        a(1, 512),
        PhaseEnd,
        IterationStart(0),
        IterationEnd,
    ];
    assert_eq!(categories(&events), [expected]);
}

#[test]
fn forward_survivors_alive_when_the_iteration_ends_are_workspace() {
    // id 1: freed after IterationEnd (outlives its iteration) -> workspace;
    // id 2: never freed -> workspace; id 3: freed in backward -> activations.
    let events = [
        IterationStart(0),
        PhaseStart(Phase::Forward),
        a(1, 100),
        a(2, 200),
        a(3, 400),
        PhaseEnd,
        PhaseStart(Phase::Backward),
        f(3),
        PhaseEnd,
        IterationEnd,
        IterationStart(1),
        f(1),
        IterationEnd,
    ];
    assert_eq!(
        categories(&events),
        [
            Category::Workspace,
            Category::Workspace,
            Category::Activations
        ]
    );
    let p = profile(&events);
    // All three are alive together right after id 3: 700 bytes, 300 workspace.
    assert_eq!(p.peak_bytes, 700);
    assert_eq!(
        p.at_peak,
        bytes(&[(Category::Workspace, 300), (Category::Activations, 400)])
    );
}

#[test]
fn an_iteration_closed_by_the_next_iteration_start_bounds_its_forward_survivors() {
    // No IterationEnd: IterationStart(1) closes iteration 0. id 1 is freed after that.
    let events = [
        IterationStart(0),
        PhaseStart(Phase::Forward),
        a(1, 100),
        a(2, 50),
        PhaseEnd,
        f(2),
        IterationStart(1),
        f(1),
        IterationEnd,
    ];
    assert_eq!(
        categories(&events),
        [Category::Workspace, Category::Activations]
    );
    let p = profile(&events);
    assert_eq!(p.iteration_end_bytes, vec![100, 0]);
}

// ---------------------------------------------------------------------------------------
// Outside any phase.

#[test]
fn outside_any_phase_in_the_loop() {
    // id 1: freed within the iteration -> temporaries; id 2: freed after it -> workspace;
    // id 3: never freed -> workspace.
    let events = [
        IterationStart(0),
        a(1, 10),
        a(2, 20),
        a(3, 40),
        f(1),
        IterationEnd,
        f(2),
    ];
    assert_eq!(
        categories(&events),
        [
            Category::Temporaries,
            Category::Workspace,
            Category::Workspace
        ]
    );
    let p = profile(&events);
    assert_eq!(p.peak_bytes, 70);
    assert_eq!(p.peak_phase, None);
    assert_eq!(p.peak_iteration, Some(0));
    assert_eq!(
        p.at_peak,
        bytes(&[(Category::Temporaries, 10), (Category::Workspace, 60)])
    );
}

#[test]
fn outside_any_phase_and_outside_the_loop() {
    // Before the loop: freed before the test ends -> temporaries; alive at the end -> workspace.
    let events = [a(1, 10), a(2, 20), IterationStart(0), IterationEnd, f(1)];
    assert_eq!(
        categories(&events),
        [Category::Temporaries, Category::Workspace]
    );
    let p = profile(&events);
    assert_eq!(p.peak_phase, None);
    assert_eq!(p.peak_iteration, None);
}

// ---------------------------------------------------------------------------------------
// Explicit tags.

#[test_case(Phase::Params, Category::Inputs; "params tagged inputs")]
#[test_case(Phase::Forward, Category::Parameters; "forward tagged parameters")]
#[test_case(Phase::Backward, Category::Workspace; "backward tagged workspace")]
#[test_case(Phase::OptimizerStep, Category::Untracked; "optimizer_step tagged untracked")]
fn an_explicit_tag_wins_over_every_rule(phase: Phase, tag: Category) {
    // id 1 would be a temporary, id 2 the phase's survivor, id 3 (forward) workspace.
    let events = [
        IterationStart(0),
        PhaseStart(phase),
        TagPush(tag),
        a(1, 1),
        f(1),
        a(2, 2),
        a(3, 4),
        TagPop,
        PhaseEnd,
        f(2),
        IterationEnd,
    ];
    assert_eq!(categories(&events), [tag, tag, tag]);
    let p = profile(&events);
    // Live: 1, then 0, then 2, then 6: the peak is 6 bytes, all tagged.
    assert_eq!(p.peak_bytes, 6);
    assert_eq!(p.at_peak, only(tag, 6));
    assert_eq!(p.category_peaks, only(tag, 6));
}

#[test]
fn a_tag_pushed_outside_any_phase_applies_inside_later_phases() {
    let events = [
        TagPush(Category::Inputs),
        PhaseStart(Phase::Forward),
        a(1, 5),
        PhaseEnd,
        TagPop,
    ];
    assert_eq!(categories(&events), [Category::Inputs]);
}

#[test]
fn nested_tags_innermost_wins_and_pop_restores_the_outer_one() {
    let events = [
        IterationStart(0),
        PhaseStart(Phase::Forward),
        TagPush(Category::Workspace),
        a(1, 1),
        TagPush(Category::Parameters),
        a(2, 2),
        TagPush(Category::Gradients),
        a(3, 4),
        TagPop,
        a(4, 8),
        TagPop,
        a(5, 16),
        TagPop,
        a(6, 32),
        f(6),
        PhaseEnd,
        f(1),
        f(2),
        f(3),
        f(4),
        f(5),
        IterationEnd,
    ];
    assert_eq!(
        categories(&events),
        [
            Category::Workspace,
            Category::Parameters,
            Category::Gradients,
            Category::Parameters,
            Category::Workspace,
            // untagged again: freed inside forward
            Category::Temporaries,
        ]
    );
    let p = profile(&events);
    // 1+2+4+8+16+32 = 63 at the peak.
    assert_eq!(p.peak_bytes, 63);
    assert_eq!(
        p.at_peak,
        bytes(&[
            (Category::Workspace, 17),
            (Category::Parameters, 10),
            (Category::Gradients, 4),
            (Category::Temporaries, 32),
        ])
    );
}

// ---------------------------------------------------------------------------------------
// Baseline: frees of memory allocated before recording started.

#[test]
fn frees_of_unknown_ids_are_baseline_and_never_underflow() {
    let events = [
        f(77),
        IterationStart(0),
        PhaseStart(Phase::Forward),
        f(78),
        a(1, 100),
        f(79),
        PhaseEnd,
        f(1),
        f(1), // a double free: the id is no longer live, ignored like the baseline
        IterationEnd,
        IterationStart(1),
        a(2, 30),
        f(80),
        IterationEnd,
    ];
    let p = profile(&events);
    assert_eq!(p.peak_bytes, 100);
    assert_eq!(p.iteration_end_bytes, vec![0, 30]);
    assert_eq!(p.allocations, 2);
    assert_eq!(p.baseline_bytes, 0);
    assert_eq!(p.phases, vec![record(Phase::Forward, Some(0), 0, 100, 100)]);
}

#[test]
fn a_stream_of_only_baseline_frees_is_empty() {
    let p = profile(&[f(1), f(2), f(3)]);
    assert_eq!(p.peak_bytes, 0);
    assert_eq!(p.at_peak, CategoryBytes::default());
    assert_eq!(p.category_peaks, CategoryBytes::default());
    assert_eq!(p.allocations, 0);
    assert_eq!(p.iterations, 0);
    assert_eq!(p.peak_phase, None);
    assert_eq!(p.peak_iteration, None);
}

// ---------------------------------------------------------------------------------------
// A whole training step: peak, breakdown at the peak, category peaks, phase records.

/// Set-up, then two iterations of inputs/forward/backward/optimizer_step.
///
/// Live totals (worked by hand):
/// - params: +1000 (id 1) -> 1000; optimizer_init: +2000 (id 2) -> 3000
/// - iteration 0: inputs +300 -> 3300; forward +500 (act) 3800, +50 (tmp) 3850, -50 3800,
///   +64 (workspace, never freed) 3864; backward +1000 (grads) 4864, +200 (tmp) 5064,
///   -200 4864, -500 (act) 4364; optimizer_step +100 4464, -100 4364; free grads 3364,
///   free inputs 3064.
/// - iteration 1: inputs 3364; forward 3864, 3914, 3864; backward 4864, 5114 (the peak),
///   4864, 4364; optimizer_step 4464, 4364; frees -> 3064.
fn training_step() -> Vec<Event> {
    vec![
        PhaseStart(Phase::Params),
        a(1, 1000),
        PhaseEnd,
        PhaseStart(Phase::OptimizerInit),
        a(2, 2000),
        PhaseEnd,
        IterationStart(0),
        PhaseStart(Phase::Inputs),
        a(10, 300),
        PhaseEnd,
        PhaseStart(Phase::Forward),
        a(11, 500),
        a(12, 50),
        f(12),
        a(13, 64),
        PhaseEnd,
        PhaseStart(Phase::Backward),
        a(14, 1000),
        a(15, 200),
        f(15),
        f(11),
        PhaseEnd,
        PhaseStart(Phase::OptimizerStep),
        a(16, 100),
        f(16),
        PhaseEnd,
        f(14),
        f(10),
        IterationEnd,
        IterationStart(1),
        PhaseStart(Phase::Inputs),
        a(20, 300),
        PhaseEnd,
        PhaseStart(Phase::Forward),
        a(21, 500),
        a(22, 50),
        f(22),
        PhaseEnd,
        PhaseStart(Phase::Backward),
        a(24, 1000),
        a(25, 250),
        f(25),
        f(21),
        PhaseEnd,
        PhaseStart(Phase::OptimizerStep),
        a(26, 100),
        f(26),
        PhaseEnd,
        f(24),
        f(20),
        IterationEnd,
    ]
}

#[test]
fn training_step_classifies_every_allocation() {
    use Category::*;
    assert_eq!(
        categories(&training_step()),
        [
            Parameters,     // 1
            OptimizerState, // 2
            Inputs,         // 10
            Activations,    // 11
            Temporaries,    // 12
            Workspace,      // 13
            Gradients,      // 14
            Temporaries,    // 15
            Temporaries,    // 16
            Inputs,         // 20
            Activations,    // 21
            Temporaries,    // 22
            Gradients,      // 24
            Temporaries,    // 25
            Temporaries,    // 26
        ]
    );
}

#[test]
fn training_step_peak_and_its_breakdown() {
    let p = profile(&training_step());
    assert_eq!(p.peak_bytes, 5114);
    assert_eq!(p.peak_phase, Some(Phase::Backward));
    assert_eq!(p.peak_iteration, Some(1));
    let expected = bytes(&[
        (Category::Parameters, 1000),
        (Category::OptimizerState, 2000),
        (Category::Inputs, 300),
        (Category::Activations, 500),
        (Category::Workspace, 64),
        (Category::Gradients, 1000),
        (Category::Temporaries, 250),
    ]);
    assert_eq!(p.at_peak, expected);
    assert_eq!(p.at_peak.total(), p.peak_bytes);
    assert_eq!(p.iterations, 2);
    assert_eq!(p.allocations, 15);
}

#[test]
fn training_step_category_peaks() {
    let p = profile(&training_step());
    // Temporaries never overlap; the largest single one is 250.
    let expected = bytes(&[
        (Category::Parameters, 1000),
        (Category::OptimizerState, 2000),
        (Category::Inputs, 300),
        (Category::Activations, 500),
        (Category::Workspace, 64),
        (Category::Gradients, 1000),
        (Category::Temporaries, 250),
    ]);
    assert_eq!(p.category_peaks, expected);
}

#[test]
fn training_step_phase_records() {
    let p = profile(&training_step());
    assert_eq!(
        p.phases,
        vec![
            record(Phase::Params, None, 0, 1000, 1000),
            record(Phase::OptimizerInit, None, 1000, 3000, 3000),
            record(Phase::Inputs, Some(0), 3000, 3300, 3300),
            record(Phase::Forward, Some(0), 3300, 3864, 3864),
            record(Phase::Backward, Some(0), 3864, 5064, 4364),
            record(Phase::OptimizerStep, Some(0), 4364, 4464, 4364),
            record(Phase::Inputs, Some(1), 3064, 3364, 3364),
            record(Phase::Forward, Some(1), 3364, 3914, 3864),
            record(Phase::Backward, Some(1), 3864, 5114, 4364),
            record(Phase::OptimizerStep, Some(1), 4364, 4464, 4364),
        ]
    );
    assert_eq!(p.iteration_end_bytes, vec![3064, 3064]);
    assert_eq!(p.leak_bytes_per_iteration, 0);
    assert!(p.leak_sites.is_empty());
}

#[test]
fn training_step_steady_state_keeps_set_up_and_the_last_iteration() {
    let p = profile(&training_step());
    assert_eq!(
        p.steady_state_phases(),
        vec![
            record(Phase::Params, None, 0, 1000, 1000),
            record(Phase::OptimizerInit, None, 1000, 3000, 3000),
            record(Phase::Inputs, Some(1), 3064, 3364, 3364),
            record(Phase::Forward, Some(1), 3364, 3914, 3864),
            record(Phase::Backward, Some(1), 3864, 5114, 4364),
            record(Phase::OptimizerStep, Some(1), 4364, 4464, 4364),
        ]
    );
}

#[test]
fn steady_state_with_no_loop_keeps_every_phase() {
    let events = [
        PhaseStart(Phase::Params),
        a(1, 10),
        PhaseEnd,
        PhaseStart(Phase::Forward),
        a(2, 5),
        f(2),
        PhaseEnd,
    ];
    let p = profile(&events);
    assert_eq!(
        p.steady_state_phases(),
        vec![
            record(Phase::Params, None, 0, 10, 10),
            record(Phase::Forward, None, 10, 15, 10),
        ]
    );
}

#[test]
fn steady_state_of_three_iterations_keeps_only_iteration_two() {
    let mut events = vec![PhaseStart(Phase::Params), a(1, 10), PhaseEnd];
    for i in 0..3u32 {
        let id = 100 + u64::from(i);
        events.extend([
            IterationStart(i),
            PhaseStart(Phase::Forward),
            a(id, 7),
            PhaseEnd,
            f(id),
            IterationEnd,
        ]);
    }
    let p = profile(&events);
    assert_eq!(p.phases.len(), 4);
    assert_eq!(
        p.steady_state_phases(),
        vec![
            record(Phase::Params, None, 0, 10, 10),
            record(Phase::Forward, Some(2), 10, 17, 17),
        ]
    );
}

#[test]
fn category_peaks_can_happen_away_from_the_total_peak() {
    // params: 1000 kept, 4000 temporary (total 5000, freed); forward: 4500 -> total 5500.
    let events = [
        PhaseStart(Phase::Params),
        a(1, 1000),
        a(2, 4000),
        f(2),
        PhaseEnd,
        IterationStart(0),
        PhaseStart(Phase::Forward),
        a(3, 4500),
        PhaseEnd,
        f(3),
        IterationEnd,
    ];
    let p = profile(&events);
    assert_eq!(p.peak_bytes, 5500);
    assert_eq!(p.peak_phase, Some(Phase::Forward));
    assert_eq!(p.peak_iteration, Some(0));
    assert_eq!(
        p.at_peak,
        bytes(&[(Category::Parameters, 1000), (Category::Activations, 4500)])
    );
    assert_eq!(
        p.category_peaks,
        bytes(&[
            (Category::Parameters, 1000),
            (Category::Temporaries, 4000),
            (Category::Activations, 4500),
        ])
    );
}

#[test]
fn the_first_time_the_peak_is_reached_is_the_one_reported() {
    // 600 in iteration 0's forward, then exactly 600 again in iteration 1's backward.
    let events = [
        IterationStart(0),
        PhaseStart(Phase::Forward),
        a(1, 600),
        f(1),
        PhaseEnd,
        IterationEnd,
        IterationStart(1),
        PhaseStart(Phase::Backward),
        a(2, 600),
        PhaseEnd,
        f(2),
        IterationEnd,
    ];
    let p = profile(&events);
    assert_eq!(p.peak_bytes, 600);
    assert_eq!(p.peak_phase, Some(Phase::Forward));
    assert_eq!(p.peak_iteration, Some(0));
    assert_eq!(p.at_peak, only(Category::Temporaries, 600));
}

#[test]
fn the_peak_phase_is_the_innermost_running_phase() {
    let events = [
        PhaseStart(Phase::Params),
        a(1, 10),
        PhaseStart(Phase::Inputs),
        a(2, 20),
        PhaseEnd,
        PhaseEnd,
    ];
    let p = profile(&events);
    assert_eq!(p.peak_bytes, 30);
    assert_eq!(p.peak_phase, Some(Phase::Inputs));
    // Outside the loop and never released: the batch is workspace.
    assert_eq!(
        categories(&events),
        [Category::Parameters, Category::Workspace]
    );
    // The outer run's peak includes its nested run's allocations.
    assert_eq!(
        p.phases,
        vec![
            record(Phase::Params, None, 0, 30, 30),
            record(Phase::Inputs, None, 10, 30, 30),
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Leaks.

/// Three iterations; iteration 0 keeps 4096 bytes of lazy optimizer state (warm-up);
/// every iteration retains `leak` bytes allocated in `phase` (`None`: outside phases).
fn leaky(phase: Option<Phase>, leak: u64) -> Vec<Event> {
    let mut events = vec![PhaseStart(Phase::Params), a(1, 1 << 20), PhaseEnd];
    for i in 0..3u32 {
        let base = 100 * (u64::from(i) + 1);
        events.push(IterationStart(i));
        events.extend([PhaseStart(Phase::Inputs), a(base, 256), PhaseEnd]);
        events.extend([PhaseStart(Phase::Forward), a(base + 1, 512), PhaseEnd]);
        if i == 0 {
            events.extend([
                PhaseStart(Phase::OptimizerStep),
                a(base + 2, 4096),
                PhaseEnd,
            ]);
        }
        match phase {
            Some(p) => events.extend([PhaseStart(p), a(base + 3, leak), PhaseEnd]),
            None => events.push(a(base + 3, leak)),
        }
        events.extend([f(base + 1), f(base), IterationEnd]);
    }
    events
}

#[test_case(Some(Phase::Forward), Category::Workspace; "forward graph kept alive")]
#[test_case(Some(Phase::Backward), Category::Workspace; "gradients accumulated")]
#[test_case(Some(Phase::Inputs), Category::Workspace; "batches kept")]
#[test_case(Some(Phase::OptimizerStep), Category::OptimizerState; "optimizer history")]
#[test_case(None, Category::Workspace; "outside any phase")]
fn a_leak_is_reported_per_iteration_with_its_site(phase: Option<Phase>, category: Category) {
    let p = profile(&leaky(phase, 3000));
    // Ends: 1 MiB + 4096 + 3000, then +3000 twice.
    let base = (1 << 20) + 4096;
    assert_eq!(
        p.iteration_end_bytes,
        vec![base + 3000, base + 6000, base + 9000]
    );
    assert_eq!(p.leak_bytes_per_iteration, 3000);
    assert_eq!(
        p.leak_sites,
        vec![LeakSite {
            category,
            phase,
            bytes_per_iteration: 3000
        }]
    );
}

#[test]
fn warm_up_growth_in_iteration_zero_is_not_a_leak() {
    let p = profile(&leaky(Some(Phase::Forward), 0));
    let base = (1 << 20) + 4096;
    assert_eq!(p.iteration_end_bytes, vec![base, base, base]);
    assert_eq!(p.leak_bytes_per_iteration, 0);
    assert!(p.leak_sites.is_empty());
}

#[test]
fn growth_that_stops_is_not_a_leak() {
    // Iteration 1 keeps 100 bytes once, iteration 2 keeps nothing.
    let events = [
        IterationStart(0),
        IterationEnd,
        IterationStart(1),
        a(1, 100),
        IterationEnd,
        IterationStart(2),
        IterationEnd,
    ];
    let p = profile(&events);
    assert_eq!(p.iteration_end_bytes, vec![0, 100, 100]);
    assert_eq!(p.leak_bytes_per_iteration, 0);
    assert!(p.leak_sites.is_empty());
}

#[test]
fn uneven_growth_reports_the_smallest_step() {
    // Steps: +300 then +100: the leak that repeats is at least 100 per iteration.
    let events = [
        IterationStart(0),
        IterationEnd,
        IterationStart(1),
        PhaseStart(Phase::Forward),
        a(1, 300),
        PhaseEnd,
        IterationEnd,
        IterationStart(2),
        PhaseStart(Phase::Forward),
        a(2, 100),
        PhaseEnd,
        IterationEnd,
    ];
    let p = profile(&events);
    assert_eq!(p.iteration_end_bytes, vec![0, 300, 400]);
    assert_eq!(p.leak_bytes_per_iteration, 100);
    assert_eq!(p.leak_sites.len(), 1);
    assert_eq!(p.leak_sites[0].category, Category::Workspace);
    assert_eq!(p.leak_sites[0].phase, Some(Phase::Forward));
}

#[test]
fn leak_sites_are_sorted_largest_first() {
    // Each of iterations 1 and 2 keeps 10 bytes made in backward and 50 made in forward:
    // both outlive their iteration (workspace), told apart by their phase.
    let mut events = Vec::new();
    for i in 0..3u32 {
        let id = 10 * u64::from(i);
        events.push(IterationStart(i));
        if i > 0 {
            events.extend([PhaseStart(Phase::Backward), a(id, 10), PhaseEnd]);
            events.extend([PhaseStart(Phase::Forward), a(id + 1, 50), PhaseEnd]);
        }
        events.push(IterationEnd);
    }
    let p = profile(&events);
    assert_eq!(p.leak_bytes_per_iteration, 60);
    assert_eq!(
        p.leak_sites,
        vec![
            LeakSite {
                category: Category::Workspace,
                phase: Some(Phase::Forward),
                bytes_per_iteration: 50
            },
            LeakSite {
                category: Category::Workspace,
                phase: Some(Phase::Backward),
                bytes_per_iteration: 10
            },
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Id reuse and unclosed phases.

#[test]
fn an_id_reused_while_live_frees_the_previous_allocation() {
    // id 1 (100 B) is reallocated as 40 B inside params without a free: the first one was
    // freed before params ended -> temporary; the second survives -> parameters. id 2 is
    // made outside any phase and never freed -> workspace.
    let events = [
        PhaseStart(Phase::Params),
        a(1, 100),
        a(1, 40),
        PhaseEnd,
        IterationStart(0),
        a(2, 10),
        f(1), // frees the 40-byte allocation, not the 100-byte one again
        IterationEnd,
    ];
    assert_eq!(
        categories(&events),
        [
            Category::Temporaries,
            Category::Parameters,
            Category::Workspace
        ]
    );
    let p = profile(&events);
    // Live: 100, then 40 (the old one is released before the new one counts), 50, 10.
    assert_eq!(p.peak_bytes, 100);
    assert_eq!(p.at_peak, only(Category::Temporaries, 100));
    assert_eq!(
        p.category_peaks,
        bytes(&[
            (Category::Temporaries, 100),
            (Category::Parameters, 40),
            (Category::Workspace, 10),
        ])
    );
    assert_eq!(p.phases, vec![record(Phase::Params, None, 0, 100, 40)]);
    assert_eq!(p.iteration_end_bytes, vec![10]);
    assert_eq!(p.allocations, 3);
}

#[test]
fn phases_left_open_are_closed_at_the_end_of_the_stream() {
    // The test panicked inside forward (nested in an optimizer_step run) in iteration 0.
    let events = [
        PhaseStart(Phase::Params),
        a(1, 1000),
        PhaseEnd,
        IterationStart(0),
        PhaseStart(Phase::OptimizerStep),
        a(2, 30),
        PhaseStart(Phase::Forward),
        a(3, 100),
        a(4, 50),
        f(4),
    ];
    let p = profile(&events);
    assert_eq!(
        p.phases,
        vec![
            record(Phase::Params, None, 0, 1000, 1000),
            record(Phase::OptimizerStep, Some(0), 1000, 1180, 1130),
            record(Phase::Forward, Some(0), 1030, 1180, 1130),
        ]
    );
    // The open iteration is closed too.
    assert_eq!(p.iteration_end_bytes, vec![1130]);
    assert_eq!(p.iterations, 1);
    assert_eq!(p.peak_bytes, 1180);
    assert_eq!(p.peak_phase, Some(Phase::Forward));
    // id 2 survives its (open) phase; id 3 is alive at the end -> workspace; id 4 was freed
    // before its phase "ended" at the end of the stream -> temporaries.
    assert_eq!(
        categories(&events),
        [
            Category::Parameters,
            Category::OptimizerState,
            Category::Workspace,
            Category::Temporaries
        ]
    );
}

#[test]
fn an_allocation_freed_after_its_phase_was_abandoned_is_a_temporary() {
    // params never ends: everything until the end of the stream is "before it ended".
    let events = [PhaseStart(Phase::Params), a(1, 8), a(2, 16), f(1)];
    assert_eq!(
        categories(&events),
        [Category::Temporaries, Category::Parameters]
    );
    let p = profile(&events);
    assert_eq!(p.phases, vec![record(Phase::Params, None, 0, 24, 16)]);
}

// ---------------------------------------------------------------------------------------
// Resizes (`realloc`): the block keeps the phase, iteration and tag it was first
// allocated under; when it moves, both copies count until the old one is released.

fn r(from: u64, to: u64, bytes: u64) -> Event {
    Event::Realloc { from, to, bytes }
}

#[test]
fn a_block_resized_in_place_keeps_its_first_phase_and_counts_once() {
    // 100 B made in params, grown in place to 300 B in forward, shrunk to 50 B in backward.
    let events = [
        PhaseStart(Phase::Params),
        a(1, 100),
        PhaseEnd,
        IterationStart(0),
        PhaseStart(Phase::Forward),
        r(1, 1, 300),
        PhaseEnd,
        PhaseStart(Phase::Backward),
        r(1, 1, 50),
        PhaseEnd,
        IterationEnd,
    ];
    assert_eq!(categories(&events), [Category::Parameters]);
    let p = profile(&events);
    assert_eq!(p.allocations, 1);
    // One copy at a time: 100, 300, 50.
    assert_eq!(p.peak_bytes, 300);
    assert_eq!(p.peak_phase, Some(Phase::Forward));
    assert_eq!(p.at_peak, only(Category::Parameters, 300));
    assert_eq!(p.category_peaks, only(Category::Parameters, 300));
    assert_eq!(
        p.phases,
        vec![
            record(Phase::Params, None, 0, 100, 100),
            record(Phase::Forward, Some(0), 100, 300, 300),
            record(Phase::Backward, Some(0), 300, 300, 50),
        ]
    );
}

#[test]
fn a_block_that_moves_counts_both_copies_at_that_moment() {
    // 100 B of parameters moved to a new address as 300 B: 400 B exist for a moment.
    let events = [
        PhaseStart(Phase::Params),
        a(1, 100),
        PhaseEnd,
        IterationStart(0),
        PhaseStart(Phase::Forward),
        r(1, 2, 300),
        a(3, 10),
        f(3),
        PhaseEnd,
        IterationEnd,
        f(2), // released under its new id
    ];
    assert_eq!(
        categories(&events),
        [Category::Parameters, Category::Temporaries]
    );
    let p = profile(&events);
    assert_eq!(p.peak_bytes, 400);
    assert_eq!(p.peak_phase, Some(Phase::Forward));
    assert_eq!(p.at_peak, only(Category::Parameters, 400));
    assert_eq!(
        p.category_peaks,
        bytes(&[(Category::Parameters, 400), (Category::Temporaries, 10)])
    );
    // After the move 300 B are alive; +10 B of temporaries stay below the peak.
    assert_eq!(p.phases[1], record(Phase::Forward, Some(0), 100, 400, 300));
    assert_eq!(p.iteration_end_bytes, vec![300]);
}

#[test]
fn a_vector_grown_through_a_phase_is_judged_once_by_where_it_started() {
    // A buffer started in forward, moved twice while growing, released in backward: one
    // activation (not two temporaries and an activation), charged to forward.
    let events = [
        IterationStart(0),
        PhaseStart(Phase::Forward),
        a(1, 16),
        r(1, 2, 32),
        r(2, 3, 64),
        PhaseEnd,
        PhaseStart(Phase::Backward),
        a(4, 8),
        f(3),
        PhaseEnd,
        f(4),
        IterationEnd,
    ];
    assert_eq!(
        categories(&events),
        [Category::Activations, Category::Gradients]
    );
    let p = profile(&events);
    assert_eq!(p.allocations, 2);
    // Moves: 16, 16+32=48 then 32, 32+64=96 then 64; backward: 72.
    assert_eq!(p.peak_bytes, 96);
    assert_eq!(p.at_peak, only(Category::Activations, 96));
    assert_eq!(
        p.phases,
        vec![
            record(Phase::Forward, Some(0), 0, 96, 64),
            record(Phase::Backward, Some(0), 64, 72, 8),
        ]
    );
}

#[test]
fn a_tagged_block_keeps_its_tag_when_resized_outside_the_tag() {
    let events = [
        IterationStart(0),
        PhaseStart(Phase::Forward),
        TagPush(Category::Inputs),
        a(1, 10),
        TagPop,
        r(1, 2, 20),
        PhaseEnd,
        f(2),
        IterationEnd,
    ];
    assert_eq!(categories(&events), [Category::Inputs]);
}

#[test]
fn resizing_a_baseline_block_is_a_new_allocation_of_the_new_size() {
    // id 9 was allocated before recording: only the new 300 B count, made in backward.
    let events = [
        IterationStart(0),
        PhaseStart(Phase::Backward),
        r(9, 10, 300),
        PhaseEnd,
        f(10),
        IterationEnd,
    ];
    assert_eq!(categories(&events), [Category::Gradients]);
    let p = profile(&events);
    assert_eq!(p.allocations, 1);
    assert_eq!(p.peak_bytes, 300);
    assert_eq!(p.category_peaks, only(Category::Gradients, 300));
}

#[test]
fn a_block_moved_onto_a_live_id_releases_that_allocation_first() {
    // id 2 (50 B) was freed without the probe seeing it; id 1 moves onto its address.
    let events = [
        PhaseStart(Phase::Params),
        a(1, 100),
        a(2, 50),
        r(1, 2, 200),
        PhaseEnd,
    ];
    assert_eq!(
        categories(&events),
        [Category::Parameters, Category::Temporaries]
    );
    let p = profile(&events);
    // 150, then 100 (id 2 released), then 100 + 200 = 300 for a moment, then 200.
    assert_eq!(p.peak_bytes, 300);
    assert_eq!(p.at_peak, bytes(&[(Category::Parameters, 300)]));
    assert_eq!(p.phases, vec![record(Phase::Params, None, 0, 300, 200)]);
}

// ---------------------------------------------------------------------------------------
// Lazily created parameters: made in the first forward pass, released with the model.

fn lazy(in_params: bool) -> Vec<Event> {
    let weights = 1 << 20;
    let mut events = vec![PhaseStart(Phase::Params)];
    if in_params {
        events.push(a(1, weights));
    }
    events.push(PhaseEnd);
    for i in 0..2u32 {
        events.extend([IterationStart(i), PhaseStart(Phase::Forward)]);
        if i == 0 && !in_params {
            events.push(a(1, weights));
        }
        if i == 0 {
            // A process-wide cache: never released.
            events.push(a(2, 512 * 1024));
        }
        events.extend([a(10 + u64::from(i), 100), PhaseEnd, f(10 + u64::from(i))]);
        events.push(IterationEnd);
    }
    events.push(f(1)); // the model is dropped when the test returns
    events
}

#[test]
fn parameters_made_in_the_first_forward_pass_are_noticed() {
    let p = profile(&lazy(false));
    assert_eq!(p.category_peaks[Category::Parameters], 0);
    assert_eq!(
        p.category_peaks[Category::Workspace],
        (1 << 20) + 512 * 1024
    );
    // The cache is never released: only the weights look like lazy parameters.
    assert_eq!(p.first_forward_kept_bytes, 1 << 20);
    let hints = p.hints();
    assert_eq!(hints.len(), 1, "{hints:?}");
    assert!(
        hints[0].contains("initialize parameters lazily"),
        "{}",
        hints[0]
    );
}

#[test]
fn parameters_made_in_params_get_no_hint() {
    let p = profile(&lazy(true));
    assert_eq!(p.category_peaks[Category::Parameters], 1 << 20);
    assert_eq!(p.first_forward_kept_bytes, 0);
    assert!(p.hints().is_empty());
}

/// CPU-only memory (gemm's slabs) is measured apart: in no category, not in the peak
/// or the phase figures, whatever the tag; a resize keeps it CPU-only; its own peak is
/// the most alive at once.
#[test]
fn cpu_only_memory_is_measured_apart() {
    let slab = |id, bytes| Event::CpuOnlyAlloc { id, bytes };
    let events = [
        PhaseStart(Phase::Params),
        a(1, 1000), // a parameter
        PhaseEnd,
        IterationStart(0),
        PhaseStart(Phase::Forward),
        TagPush(Category::Activations),
        slab(2, 4096), // a slab, kept: no category even under a tag
        TagPop,
        a(3, 500),     // an activation
        slab(4, 2048), // a packing buffer, released within the phase
        f(4),
        PhaseEnd,
        PhaseStart(Phase::Backward),
        Event::Realloc {
            from: 2,
            to: 5,
            bytes: 8192,
        }, // the slab grows: both copies for a moment, still CPU-only
        f(3),
        PhaseEnd,
        IterationEnd,
    ];
    let p = profile(&events);
    assert_eq!(p.peak_bytes, 1500); // 1000 + 500
    assert_eq!(
        p.at_peak,
        bytes(&[(Category::Parameters, 1000), (Category::Activations, 500)])
    );
    assert_eq!(p.category_peaks[Category::Workspace], 0);
    assert_eq!(p.category_peaks[Category::Temporaries], 0);
    // 4096 + 2048 alive at once in forward, then 8192 after the resize.
    assert_eq!(p.cpu_only_peak_bytes, 8192);
    assert!(
        p.phases.iter().all(|r| r.peak_bytes <= 1500),
        "{:?}",
        p.phases
    );
    // The CUDA pool model never sees them: aligned to 256 B, 1000 → 1024, 500 → 512.
    let pool = vramtest_model::pool::replay(&events, &vramtest_model::pool::CudaPool::default());
    assert_eq!(pool.allocated_bytes, 1024 + 512);
}

// ---------------------------------------------------------------------------------------
// Each phase's own peak per category: what a sweep predicts maxima over time from.

#[test]
fn each_phase_keeps_its_own_peak_per_category() {
    let events = [
        PhaseStart(Phase::Params),
        a(1, 1000), // a parameter: alive to the end
        PhaseEnd,
        IterationStart(0),
        PhaseStart(Phase::Forward),
        a(2, 300), // scores: a temporary of the forward pass
        f(2),
        a(3, 500), // an activation, kept for backward
        PhaseEnd,
        PhaseStart(Phase::Backward),
        a(4, 700), // scratch: a temporary of the backward pass
        f(4),
        f(3),
        PhaseEnd,
        IterationEnd,
    ];
    let p = profile(&events);
    let of = |phase: Phase| {
        p.phase_category_peaks
            .iter()
            .find(|(q, _)| *q == phase)
            .map(|(_, b)| *b)
            .unwrap_or_else(|| panic!("{phase} has peaks"))
    };
    assert_eq!(p.phase_category_peaks.len(), 3);
    assert_eq!(of(Phase::Params), only(Category::Parameters, 1000));
    // In forward the scores (300) and later the activation (500) are each at most
    // this live; they never coexist.
    assert_eq!(
        of(Phase::Forward),
        bytes(&[
            (Category::Parameters, 1000),
            (Category::Temporaries, 300),
            (Category::Activations, 500)
        ])
    );
    assert_eq!(
        of(Phase::Backward),
        bytes(&[
            (Category::Parameters, 1000),
            (Category::Temporaries, 700),
            (Category::Activations, 500)
        ])
    );
    assert_eq!(p.category_peaks[Category::Temporaries], 700);
}

// ---------------------------------------------------------------------------------------
// Each phase's moments: the total at the moment each category that changes in the phase
// first reaches its own most there.

/// A step whose backward pass first frees the activations, then makes the gradients:
/// its peak is its start (activations) or its end (gradients), whichever is larger.
fn free_then_grow(iteration: u32, activation: u64, gradient: u64, first: u64) -> Vec<Event> {
    vec![
        IterationStart(iteration),
        PhaseStart(Phase::Forward),
        a(first, activation), // an activation, kept for backward
        PhaseEnd,
        PhaseStart(Phase::Backward),
        f(first),
        a(first + 1, 200), // scratch: a temporary of the backward pass
        f(first + 1),
        a(first + 2, gradient), // a gradient, released after the step
        PhaseEnd,
        f(first + 2),
        IterationEnd,
    ]
}

/// `phase`'s moments in `p`, if it has any.
fn moments_of(p: &vramtest_model::Profile, phase: Phase) -> Option<Vec<(Category, u64)>> {
    (p.phase_moments.iter())
        .find(|(q, _)| *q == phase)
        .map(|(_, m)| m.clone())
}

/// The backward pass's moments of [`free_then_grow`] with 500 B of activation and 300 B
/// of gradient, beside 1000 B of parameters: activations are at their most (500) at the
/// start, with the parameters: 1500. The scratch (200) is at its most alone with the
/// parameters: 1200. The gradient (300) at the end: 1300. The parameters never change
/// in backward: no moment.
const FREE_THEN_GROW_BACKWARD: [(Category, u64); 3] = [
    (Category::Gradients, 1300),
    (Category::Activations, 1500),
    (Category::Temporaries, 1200),
];

#[test]
fn a_backward_pass_that_frees_first_has_its_start_and_its_end_as_moments() {
    let mut events = vec![PhaseStart(Phase::Params), a(1, 1000), PhaseEnd];
    events.extend(free_then_grow(0, 500, 300, 10));
    let p = profile(&events);
    assert_eq!(
        moments_of(&p, Phase::Backward).expect("backward has moments"),
        FREE_THEN_GROW_BACKWARD
    );
    let peak = (p.phases.iter())
        .filter(|r| r.phase == Phase::Backward)
        .map(|r| r.peak_bytes)
        .max();
    assert_eq!(peak, Some(1500), "the phase's peak is its largest moment");
}

/// An activation grown by a move-resize at the end of the forward pass: both copies
/// live for an instant, then the old one is released, which no observation follows.
/// The backward pass starts from the bytes after that release, so its start moment is
/// its peak (1500), not the instant before (1600), and the phase splits into moments.
#[test]
fn a_phase_starts_from_the_bytes_after_a_resize_before_it() {
    let mut events = vec![PhaseStart(Phase::Params), a(1, 1000), PhaseEnd];
    let mut step = free_then_grow(0, 500, 300, 10);
    // The forward pass makes its activation at 100 B, then moves it to 500 B.
    step[2] = a(9, 100);
    step.insert(3, r(9, 10, 500));
    events.extend(step);
    let p = profile(&events);
    assert_eq!(
        moments_of(&p, Phase::Backward).expect("backward has moments"),
        FREE_THEN_GROW_BACKWARD
    );
    let record = (p.phases.iter())
        .find(|r| r.phase == Phase::Backward)
        .unwrap();
    assert_eq!((record.start_bytes, record.peak_bytes), (1500, 1500));
    // The forward pass saw both copies: 1600 at its peak.
    let forward = (p.phases.iter())
        .find(|r| r.phase == Phase::Forward)
        .unwrap();
    assert_eq!(forward.peak_bytes, 1600);
}

#[test]
fn a_phases_moments_are_its_last_iterations() {
    // Iteration 0 keeps a larger activation than iteration 1; the snapshot keeps the
    // last iteration's phases, and so do the moments.
    let mut events = vec![PhaseStart(Phase::Params), a(1, 1000), PhaseEnd];
    events.extend(free_then_grow(0, 900, 300, 10));
    events.extend(free_then_grow(1, 500, 300, 20));
    let p = profile(&events);
    assert_eq!(
        moments_of(&p, Phase::Backward).unwrap()[1],
        (Category::Activations, 1500)
    );
    // The parameters' phase ran outside the loop: kept, its one moment the parameters'.
    assert_eq!(
        moments_of(&p, Phase::Params),
        Some(vec![(Category::Parameters, 1000)])
    );
}
