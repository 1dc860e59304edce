//! Each phase's moments: for every category whose live bytes change within a phase, the
//! total at the moment that category first reached its own peak in the phase
//! ([`crate::profile::Profile::phase_moments`]).
//!
//! A phase's peak is a maximum over time. In the backward pass of a small model it may
//! come at the start, while the forward pass's activations are still alive; in a large
//! one at the end, when the gradients are; in between, when the logits' gradient is.
//! Each such moment is a sum of tensors, a polynomial of the axes, where the maximum
//! of them is not: a sweep fits each moment on its own and predicts the phase as their
//! maximum ([`crate::sweep`]).

use crate::category::{Category, Phase};

const N: usize = Category::ALL.len();

/// One category's course through a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Course {
    /// Its fewest live bytes in the phase.
    least: u64,
    /// Its most.
    most: u64,
    /// The total at the moment it first reached its most: one instant, whose live
    /// blocks are a sum of tensors. (The highest total over every instant it held its
    /// most would be a maximum again: gradients stay complete while the rest of a
    /// backward pass comes and goes.)
    total_at_most: u64,
}

impl Course {
    fn observe(&mut self, live: u64, total: u64) {
        self.least = self.least.min(live);
        if live > self.most {
            self.most = live;
            self.total_at_most = total;
        }
    }

    /// This course, then `other` after it.
    fn merge(self, other: Course) -> Course {
        let total_at_most = if other.most > self.most {
            other.total_at_most
        } else {
            self.total_at_most
        };
        Course {
            least: self.least.min(other.least),
            most: self.most.max(other.most),
            total_at_most,
        }
    }
}

/// The moments of the phases the steady state keeps: those run outside the loop and
/// in its last iteration (as [`crate::profile::Profile::steady_state_phases`]).
#[derive(Debug, Default)]
pub(super) struct Moments {
    /// Each phase, whether it ran inside the loop, and each category's course.
    entries: Vec<(Phase, bool, [Course; N])>,
    in_loop: bool,
}

impl Moments {
    /// A phase started, with `live` the bytes as they stand at its start (after a
    /// move-resize's release, which no observation follows): its start is one of its
    /// moments (a backward pass that first frees peaks there).
    pub(super) fn start(&mut self, phase: Phase, live: &[u64; N]) {
        let in_loop = self.in_loop;
        self.observe_in(phase, in_loop, live);
    }

    /// An iteration started: the phases of the one before are no longer the last's.
    pub(super) fn iteration_start(&mut self) {
        self.entries.retain(|(_, in_loop, _)| !in_loop);
        self.in_loop = true;
    }

    /// The loop's iteration ended.
    pub(super) fn iteration_end(&mut self) {
        self.in_loop = false;
    }

    /// An observation of the live bytes per category, inside `phase` (the innermost
    /// open) or outside every phase.
    pub(super) fn observe(&mut self, phase: Option<Phase>, live: &[u64; N]) {
        if let Some(phase) = phase {
            let in_loop = self.in_loop;
            self.observe_in(phase, in_loop, live);
        }
    }

    fn observe_in(&mut self, phase: Phase, in_loop: bool, live: &[u64; N]) {
        let total: u64 = live.iter().sum();
        let entry = self
            .entries
            .iter_mut()
            .find(|(p, l, _)| *p == phase && *l == in_loop);
        match entry {
            Some((_, _, courses)) => {
                for (course, &bytes) in courses.iter_mut().zip(live) {
                    course.observe(bytes, total);
                }
            }
            None => {
                let courses = live.map(|bytes| Course {
                    least: bytes,
                    most: bytes,
                    total_at_most: total,
                });
                self.entries.push((phase, in_loop, courses));
            }
        }
    }

    /// Each phase's moments, phases in order: the categories whose bytes changed within
    /// it, each with the total at the moment it first reached its most.
    pub(super) fn finish(self) -> Vec<(Phase, Vec<(Category, u64)>)> {
        let mut merged: Vec<(Phase, [Course; N])> = Vec::new();
        for (phase, _, courses) in self.entries {
            match merged.iter_mut().find(|(p, _)| *p == phase) {
                Some((_, into)) => {
                    for (a, b) in into.iter_mut().zip(courses) {
                        *a = a.merge(b);
                    }
                }
                None => merged.push((phase, courses)),
            }
        }
        merged.sort_by_key(|(p, _)| *p);
        merged
            .into_iter()
            .map(|(phase, courses)| {
                let moments = Category::ALL
                    .into_iter()
                    .zip(courses)
                    .filter(|(_, c)| c.most > c.least)
                    .map(|(category, c)| (category, c.total_at_most))
                    .collect();
                (phase, moments)
            })
            .collect()
    }
}
