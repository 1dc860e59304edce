//! The timeline of a measured step (never in a snapshot: it is volatile): live bytes
//! per category over the step, downsampled, with the phase and iteration spans, for
//! `cargo vramtest show --svg` and the HTML report.

use vramtest_chart::{Downsampler, IterationSpan, PhaseSpan, Timeline, TimelinePoint, XAxis};
use vramtest_model::Profile;
use vramtest_model::ledger::{self, Event};

/// The profile of an event stream (with the gradient check's causes) and its timeline, at most `max_points` points,
/// x = event index, from one replay of the stream.
pub(super) fn profile_and_timeline(events: &[Event], max_points: usize) -> (Profile, Timeline) {
    let samples = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Alloc { .. } | Event::Free { .. } | Event::Realloc { .. }
            )
        })
        .count();
    let mut down = Downsampler::new(samples, max_points);
    let mut profile = ledger::profile_observing(events, |at, live| {
        down.push(TimelinePoint {
            x: at as u64,
            live: *live,
        })
    });
    profile.gradient_check = vramtest_model::gradient_reading::check(events);
    let (points, peak) = down.finish();
    let (phases, iterations) = spans(events);
    let timeline = Timeline {
        x_axis: XAxis::Event,
        points,
        phases,
        iterations,
        peak: peak.unwrap_or_default(),
    };
    (profile, timeline)
}

/// The phase runs and loop iterations of a stream, by event index. One that never
/// ended (the test returned early or panicked) ends with the stream.
fn spans(events: &[Event]) -> (Vec<PhaseSpan>, Vec<IterationSpan>) {
    let end = events.len() as u64;
    let mut phases = Vec::new();
    let mut open_phases: Vec<(vramtest_model::Phase, Option<u32>, u64)> = Vec::new();
    let mut iterations = Vec::new();
    let mut iteration: Option<(u32, u64)> = None;
    for (at, event) in events.iter().enumerate() {
        let at = at as u64;
        match *event {
            Event::PhaseStart(phase) => open_phases.push((phase, iteration.map(|i| i.0), at)),
            Event::PhaseEnd => {
                if let Some((phase, iteration, start)) = open_phases.pop() {
                    phases.push(PhaseSpan {
                        phase,
                        iteration,
                        start,
                        end: at,
                    });
                }
            }
            Event::IterationStart(n) => iteration = Some((n, at)),
            Event::IterationEnd => {
                if let Some((number, start)) = iteration.take() {
                    iterations.push(IterationSpan {
                        number,
                        start,
                        end: at,
                    });
                }
            }
            _ => {}
        }
    }
    for (phase, iteration, start) in open_phases.into_iter().rev() {
        phases.push(PhaseSpan {
            phase,
            iteration,
            start,
            end,
        });
    }
    if let Some((number, start)) = iteration {
        iterations.push(IterationSpan { number, start, end });
    }
    phases.sort_by_key(|p| p.start);
    (phases, iterations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_model::Phase;

    #[test]
    fn spans_follow_the_phase_and_iteration_markers() {
        let events = [
            Event::PhaseStart(Phase::Params),
            Event::Alloc { id: 1, bytes: 8 },
            Event::PhaseEnd,
            Event::IterationStart(0),
            Event::PhaseStart(Phase::Forward),
            Event::Alloc { id: 2, bytes: 4 },
            Event::PhaseEnd,
            Event::IterationEnd,
            Event::IterationStart(1),
            Event::PhaseStart(Phase::Backward),
        ];
        let (phases, iterations) = spans(&events);
        assert_eq!(
            phases,
            vec![
                PhaseSpan {
                    phase: Phase::Params,
                    iteration: None,
                    start: 0,
                    end: 2
                },
                PhaseSpan {
                    phase: Phase::Forward,
                    iteration: Some(0),
                    start: 4,
                    end: 6
                },
                PhaseSpan {
                    phase: Phase::Backward,
                    iteration: Some(1),
                    start: 9,
                    end: 10
                },
            ]
        );
        assert_eq!(
            iterations,
            vec![
                IterationSpan {
                    number: 0,
                    start: 3,
                    end: 7
                },
                IterationSpan {
                    number: 1,
                    start: 8,
                    end: 10
                },
            ]
        );
    }
}
