//! The gradient check's reading of a stream (see [`crate::gradient_check`]): what a
//! run sets [`Profile::gradient_check`](crate::profile::Profile::gradient_check) to.

use crate::category::{Category, Phase};
use crate::gradient_check::{Cause, Finding};
use crate::ledger::{Event, LiveChangeKind, NO_BLOCK, Tape};
use std::collections::{BTreeMap, HashMap};

/// A live block, as the check reads it.
#[derive(Debug, Clone, Copy)]
struct Block {
    bytes: u64,
    category: Category,
    /// The phase it was made in, and whether that was in the last iteration.
    phase: Option<Phase>,
    last_iteration: bool,
}

/// Where the walk is, from the markers.
#[derive(Default)]
struct Position {
    phases: Vec<Phase>,
    iteration: Option<u32>,
    last: Option<u32>,
}

impl Position {
    fn in_last(&self) -> bool {
        self.iteration.is_some() && self.iteration == self.last
    }
}

/// The causes the stream shows, in [`Cause::ALL`] order (empty: none, or no backward).
pub fn check(events: &[Event]) -> Vec<Finding> {
    of_tape(&Tape::read(events))
}

fn of_tape(tape: &Tape) -> Vec<Finding> {
    let last = tape.markers.iter().rev().find_map(|m| match m.event {
        Event::IterationStart(n) => Some(n),
        _ => None,
    });
    let mut pos = Position {
        last,
        ..Position::default()
    };
    let mut live: HashMap<u32, Block> = HashMap::new();
    // The blocks alive when the last iteration's backward ended.
    let mut at_end: Option<Vec<Block>> = None;
    let mut releases = Releases::default();
    let marker = |marker: Event,
                  pos: &mut Position,
                  live: &HashMap<u32, Block>,
                  at_end: &mut Option<Vec<Block>>| {
        match marker {
            Event::PhaseStart(p) => pos.phases.push(p),
            Event::PhaseEnd => {
                let ended = pos.phases.pop();
                if ended == Some(Phase::Backward) && pos.in_last() && at_end.is_none() {
                    *at_end = Some(live.values().copied().collect());
                }
            }
            Event::IterationStart(n) => pos.iteration = Some(n),
            Event::IterationEnd => pos.iteration = None,
            _ => {}
        }
    };
    let mut markers = tape.markers.iter().peekable();
    let mut k = 0usize;
    for change in &tape.changes {
        while let Some(m) = markers.next_if(|m| m.observations_before <= k) {
            releases.cut();
            marker(m.event, &mut pos, &live, &mut at_end);
        }
        match change.kind {
            LiveChangeKind::Made => {
                releases.cut();
                if change.block != NO_BLOCK {
                    let block = live.entry(change.block).or_insert(Block {
                        bytes: 0,
                        category: tape.categories[change.block as usize],
                        phase: pos.phases.last().copied(),
                        last_iteration: pos.in_last(),
                    });
                    block.bytes = change.bytes;
                }
            }
            LiveChangeKind::Released => {
                if let (Some(block), Some(_)) = (live.remove(&change.block), &at_end) {
                    releases.run.push(block);
                }
            }
            LiveChangeKind::Resized => {}
        }
        k += usize::from(change.observe);
    }
    releases.cut();
    for m in markers {
        marker(m.event, &mut pos, &live, &mut at_end);
    }
    let Some(at_end) = at_end else {
        return Vec::new();
    };
    findings(&at_end, &releases.kept)
}

/// The runs of releases after the last backward: forward blocks released among
/// gradient blocks.
#[derive(Default)]
struct Releases {
    run: Vec<Block>,
    /// Forward blocks released between two gradient blocks of one run.
    kept: Vec<Block>,
}

impl Releases {
    /// Ends the current run of releases (an allocation or a marker came).
    fn cut(&mut self) {
        let is_gradient = |b: &Block| b.category == Category::Gradients && b.last_iteration;
        let first = self.run.iter().position(is_gradient);
        let last = self.run.iter().rposition(is_gradient);
        if let (Some(first), Some(last)) = (first, last) {
            self.kept.extend(
                self.run[first..last]
                    .iter()
                    .copied()
                    .filter(|b| b.last_iteration && b.phase == Some(Phase::Forward)),
            );
        }
        self.run.clear();
    }
}

/// `(size, count)` of `blocks`, largest size first.
fn sizes(blocks: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut by: BTreeMap<u64, u64> = BTreeMap::new();
    for b in blocks {
        *by.entry(b).or_default() += 1;
    }
    by.into_iter().rev().collect()
}

fn findings(at_end: &[Block], kept: &[Block]) -> Vec<Finding> {
    let params: Vec<u64> = at_end
        .iter()
        .filter(|b| b.category == Category::Parameters)
        .map(|b| b.bytes)
        .collect();
    let grads: Vec<u64> = at_end
        .iter()
        .filter(|b| {
            b.category == Category::Gradients
                && b.last_iteration
                && b.phase == Some(Phase::Backward)
        })
        .map(|b| b.bytes)
        .collect();
    if params.is_empty() || grads.is_empty() {
        return Vec::new();
    }
    // Match sizes as multisets.
    let mut unmatched: BTreeMap<u64, i64> = BTreeMap::new();
    for &p in &params {
        *unmatched.entry(p).or_default() += 1;
    }
    let mut foreign = Vec::new();
    for &g in &grads {
        match unmatched.get_mut(&g) {
            Some(n) if *n > 0 => *n -= 1,
            _ => foreign.push(g),
        }
    }
    let mut out = Vec::new();
    let (param_bytes, grad_bytes): (u64, u64) = (params.iter().sum(), grads.iter().sum());
    let without: Vec<u64> = unmatched
        .iter()
        .flat_map(|(&size, &n)| std::iter::repeat_n(size, n.max(0) as usize))
        .collect();
    if grad_bytes < param_bytes && !without.is_empty() {
        out.push(Finding {
            cause: Cause::WeightsWithoutGradients,
            bytes: without.iter().sum(),
            sizes: sizes(without),
        });
    }
    if !foreign.is_empty() {
        out.push(Finding {
            cause: Cause::GradientsOfNonParameters,
            bytes: foreign.iter().sum(),
            sizes: sizes(foreign),
        });
    }
    if !kept.is_empty() {
        out.push(Finding {
            cause: Cause::GradientGraphKept,
            bytes: kept.iter().map(|b| b.bytes).sum(),
            sizes: sizes(kept.iter().map(|b| b.bytes)),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use Event::*;

    /// A step: parameters of `params` sizes (ids 1..), then two iterations whose
    /// forward makes `acts` (ids 100..) and whose backward makes `grads` (ids 200..);
    /// after backward the gradients are dropped, then the activations, unless
    /// `graph_kept`, where each activation is released between two gradients.
    fn step(params: &[u64], acts: &[u64], grads: &[u64], graph_kept: bool) -> Vec<Event> {
        let mut e = vec![PhaseStart(Phase::Params)];
        for (i, &b) in params.iter().enumerate() {
            e.push(Alloc {
                id: 1 + i as u64,
                bytes: b,
            });
        }
        e.push(PhaseEnd);
        for it in 0..2u32 {
            let base = u64::from(it) * 1000;
            e.push(IterationStart(it));
            e.push(PhaseStart(Phase::Forward));
            for (i, &b) in acts.iter().enumerate() {
                e.push(Alloc {
                    id: base + 100 + i as u64,
                    bytes: b,
                });
            }
            e.push(PhaseEnd);
            e.push(PhaseStart(Phase::Backward));
            for (i, &b) in grads.iter().enumerate() {
                e.push(Alloc {
                    id: base + 200 + i as u64,
                    bytes: b,
                });
            }
            e.push(PhaseEnd);
            let g_ids: Vec<u64> = (0..grads.len()).map(|i| base + 200 + i as u64).collect();
            let a_ids: Vec<u64> = (0..acts.len()).map(|i| base + 100 + i as u64).collect();
            if graph_kept {
                // Each gradient, then the forward blocks its graph held.
                for (i, g) in g_ids.iter().enumerate() {
                    e.push(Free { id: *g });
                    if i == 0 {
                        e.extend(a_ids.iter().map(|&id| Free { id }));
                    }
                }
            } else {
                e.extend(g_ids.iter().map(|&id| Free { id }));
                e.extend(a_ids.iter().map(|&id| Free { id }));
            }
            e.push(IterationEnd);
        }
        e
    }

    #[test]
    fn one_gradient_per_weight_has_no_cause() {
        let e = step(&[4096, 64], &[8192], &[64, 4096], false);
        assert_eq!(check(&e), []);
    }

    #[test]
    fn weights_without_gradients_name_their_sizes() {
        // Three weights of 4 KiB and one of 1 KiB; only one 4 KiB weight trains.
        let e = step(&[4096, 4096, 4096, 1024], &[8192], &[4096], false);
        let f = check(&e);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].cause, Cause::WeightsWithoutGradients);
        assert_eq!(f[0].bytes, 2 * 4096 + 1024);
        assert_eq!(f[0].sizes, [(4096, 2), (1024, 1)]);
        assert_eq!(
            f[0].evidence(),
            "9.00 KiB of parameters get no gradient (parameter blocks of 4.00 KiB × 2, 1.00 KiB × 1)"
        );
        assert!(f[0].line().contains("fix: if these weights should train, replace the ops without a backward (candle: `RmsNorm::forward_diff`"), "{}", f[0].line());
    }

    #[test]
    fn gradients_of_non_parameters_are_the_blocks_of_no_parameter_size() {
        // Both weights train; a mask of 300 B and a rope table's view of 700 B get a
        // gradient too.
        let e = step(&[4096, 64], &[8192], &[4096, 64, 300, 700], false);
        let f = check(&e);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].cause, Cause::GradientsOfNonParameters);
        assert_eq!(
            (f[0].bytes, f[0].sizes.clone()),
            (1000, vec![(700, 1), (300, 1)])
        );
    }

    #[test]
    fn a_kept_graph_is_the_forward_blocks_released_among_the_gradients() {
        let e = step(&[4096], &[8192, 2048], &[4096, 512], true);
        let f = check(&e);
        let kept = f
            .iter()
            .find(|f| f.cause == Cause::GradientGraphKept)
            .unwrap_or_else(|| panic!("{f:?}"));
        assert_eq!(kept.bytes, 8192 + 2048);
        // The graph's own backward block of 512 B matches no parameter.
        assert_eq!(f[0].cause, Cause::GradientsOfNonParameters);
        assert_eq!(f[0].bytes, 512);
        // Released after the gradients, not among them: not kept by them.
        let e = step(&[4096], &[8192, 2048], &[4096, 512], false);
        assert!(
            check(&e)
                .iter()
                .all(|f| f.cause != Cause::GradientGraphKept)
        );
    }

    #[test]
    fn no_backward_no_cause() {
        let e = step(&[4096], &[8192], &[], false);
        assert_eq!(check(&e), []);
    }
}
