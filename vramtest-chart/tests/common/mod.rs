//! A training step played as an allocation event stream, for pictures whose expected
//! figures follow from arithmetic on the step's sizes.

#![allow(dead_code)]

use vramtest_chart::{
    DEFAULT_MAX_POINTS, HtmlReport, IterationSpan, PhaseSpan, TestEnd, TestEntry, Timeline,
    TimelinePoint, XAxis,
};
use vramtest_model::{Category, CategoryBytes, Phase};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;

/// The step's sizes: a 4-layer model with one parameter tensor, one gradient, two
/// optimizer moments per layer, and a batch.
pub const LAYERS: u64 = 4;
pub const PARAM: u64 = MIB;
pub const MOMENT: u64 = 2 * MIB;
pub const INPUT: u64 = 512 * KIB;
pub const ACTIVATION: u64 = 2 * MIB;
pub const SCRATCH: u64 = MIB;
pub const UPDATE_TEMP: u64 = 3 * MIB;

/// The peak, by hand: the last forward op of the second iteration, while its scratch
/// buffer is still alive and the first iteration's gradients are kept.
pub const EXPECTED_PEAK: u64 =
    LAYERS * PARAM + 2 * LAYERS * MOMENT + INPUT + LAYERS * ACTIVATION + LAYERS * PARAM + SCRATCH;

/// Records live bytes per category after every event.
#[derive(Default)]
pub struct Step {
    live: CategoryBytes,
    pub samples: Vec<TimelinePoint>,
    pub phases: Vec<PhaseSpan>,
    pub iterations: Vec<IterationSpan>,
    open_phase: Option<(Phase, Option<u32>, u64)>,
    iteration: Option<(u32, u64)>,
}

impl Step {
    fn now(&self) -> u64 {
        self.samples.len() as u64
    }

    pub fn alloc(&mut self, category: Category, bytes: u64) {
        self.live[category] += bytes;
        self.samples.push(TimelinePoint {
            x: self.now(),
            live: self.live,
        });
    }

    pub fn free(&mut self, category: Category, bytes: u64) {
        self.live[category] -= bytes;
        self.samples.push(TimelinePoint {
            x: self.now(),
            live: self.live,
        });
    }

    pub fn phase(&mut self, phase: Phase) {
        self.end_phase();
        let iteration = self.iteration.map(|(n, _)| n);
        self.open_phase = Some((phase, iteration, self.now()));
    }

    fn end_phase(&mut self) {
        if let Some((phase, iteration, start)) = self.open_phase.take() {
            self.phases.push(PhaseSpan {
                phase,
                iteration,
                start,
                end: self.now(),
            });
        }
    }

    pub fn iteration(&mut self, number: u32) {
        self.end_iteration();
        self.iteration = Some((number, self.now()));
    }

    fn end_iteration(&mut self) {
        self.end_phase();
        if let Some((number, start)) = self.iteration.take() {
            self.iterations.push(IterationSpan {
                number,
                start,
                end: self.now(),
            });
        }
    }

    pub fn finish(mut self, max_points: usize) -> Timeline {
        self.end_iteration();
        Timeline::new(
            XAxis::Event,
            &self.samples,
            self.phases,
            self.iterations,
            max_points,
        )
    }
}

/// Two iterations of the step; gradients are allocated in the first backward pass
/// and kept.
pub fn training_step() -> Step {
    use Category::*;
    let mut t = Step::default();
    t.phase(Phase::Params);
    for _ in 0..LAYERS {
        t.alloc(Parameters, PARAM);
    }
    t.phase(Phase::OptimizerInit);
    for _ in 0..2 * LAYERS {
        t.alloc(OptimizerState, MOMENT);
    }
    for i in 0..2 {
        t.iteration(i);
        t.phase(Phase::Inputs);
        t.alloc(Inputs, INPUT);
        t.phase(Phase::Forward);
        for _ in 0..LAYERS {
            t.alloc(Temporaries, SCRATCH);
            t.alloc(Activations, ACTIVATION);
            t.free(Temporaries, SCRATCH);
        }
        t.phase(Phase::Backward);
        for _ in 0..LAYERS {
            if i == 0 {
                t.alloc(Gradients, PARAM);
            }
            t.free(Activations, ACTIVATION);
        }
        t.phase(Phase::OptimizerStep);
        t.alloc(Temporaries, UPDATE_TEMP);
        t.free(Temporaries, UPDATE_TEMP);
        t.free(Inputs, INPUT);
    }
    t
}

pub fn training_timeline() -> Timeline {
    training_step().finish(DEFAULT_MAX_POINTS)
}

/// What a run of two tests looks like: one that passed, one whose activations grew.
pub fn example_report() -> HtmlReport {
    let timeline = training_timeline();
    let at_peak = timeline.peak.live;
    let mut grown = at_peak;
    grown[Category::Activations] += 2 * ACTIVATION;
    let mut old_params_only = CategoryBytes::default();
    old_params_only[Category::Parameters] = LAYERS * PARAM;
    HtmlReport {
        title: "cargo vramtest: example".to_owned(),
        tests: vec![
            TestEntry {
                name: "mlp_step".to_owned(),
                status: TestEnd::Passed,
                old: Some(at_peak),
                new: Some(at_peak),
                peak_old: Some(at_peak.total()),
                peak_new: Some(at_peak.total()),
                cpu_only_old: None,
                cpu_only_new: None,
                diff: None,
                fit: None,
                hints: None,
                timeline: Some(timeline.clone()),
            },
            TestEntry {
                name: "mlp_step_bloated <script>alert(1)</script>".to_owned(),
                status: TestEnd::Failed,
                old: Some(at_peak),
                new: Some(grown),
                peak_old: Some(at_peak.total()),
                peak_new: Some(grown.total()),
                cpu_only_old: None,
                cpu_only_new: None,
                diff: Some(
                    " peak: 33.50 MiB\n-activations: 8.00 MiB\n+activations: 12.00 MiB\n+<script>alert('diff')</script> & more\n"
                        .to_owned(),
                ),
                fit: Some("bytes = 4.00 MiB + 2.00 MiB × batch (r² = 1.000)".to_owned()),
                hints: Some("activations grew by 4.00 MiB: is a tensor kept alive?".to_owned()),
                timeline: Some(timeline),
            },
            TestEntry {
                name: "cuda_step".to_owned(),
                status: TestEnd::Ignored,
                old: Some(old_params_only),
                new: None,
                peak_old: Some(LAYERS * PARAM),
                peak_new: None,
                cpu_only_old: None,
                cpu_only_new: None,
                diff: None,
                fit: None,
                hints: None,
                timeline: None,
            },
        ],
    }
}
