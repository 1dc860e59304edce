//! The gradient check's causes: what the blocks of the last iteration say about a
//! gradient figure off one gradient per weight, named so a user can act on it, each
//! with its fix.
//!
//! Read from the stream, at the end of the last iteration's `backward` (the gradients
//! the optimizer gets):
//!
//! - [`Cause::WeightsWithoutGradients`]: the gradient bytes are below the parameters',
//!   and some parameter sizes have no gradient block of their size (an op without a
//!   backward cut the graph, or the weights are frozen);
//! - [`Cause::GradientsOfNonParameters`]: gradient blocks whose size matches no
//!   parameter's (the gradients of inputs, masks and tables that are no parameter);
//! - [`Cause::GradientGraphKept`]: blocks made in the iteration's `forward` that are
//!   released among the gradients' own blocks, after backward, in one run of releases
//!   with no allocation between: dropping the gradients is what freed them, so the
//!   gradients held the graph alive.
//!
//! Sizes are matched as multisets: a parameter of 4 KiB is matched by one gradient
//! block of 4 KiB. The stream is read by [`crate::gradient_reading::check`].

use crate::bytes::HumanBytes;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What the gradient check found, named for a user to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Gradient bytes below the parameters', and parameter sizes without a gradient.
    WeightsWithoutGradients,
    /// Gradient blocks whose sizes match no parameter.
    GradientsOfNonParameters,
    /// Blocks made in forward that the gradients keep alive after backward.
    GradientGraphKept,
}

impl Cause {
    /// Every cause, in the order they are reported.
    pub const ALL: [Cause; 3] = [
        Cause::WeightsWithoutGradients,
        Cause::GradientsOfNonParameters,
        Cause::GradientGraphKept,
    ];

    /// The serialized name (`weights_without_gradients`).
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::WeightsWithoutGradients => "weights_without_gradients",
            Cause::GradientsOfNonParameters => "gradients_of_non_parameters",
            Cause::GradientGraphKept => "gradient_graph_kept",
        }
    }

    /// The cause a name gives, if any.
    pub fn parse(name: &str) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The fix, in one sentence.
    pub fn fix(self) -> &'static str {
        match self {
            Cause::WeightsWithoutGradients => {
                "if these weights should train, replace the ops without a backward (candle: `RmsNorm::forward_diff` for the fused `rms_norm`, `candle_nn::ops::softmax(x, D::Minus1)` for `softmax_last_dim`, `rotary_emb::rope_slow` for `rope`); if they are frozen on purpose, nothing to do"
            }
            Cause::GradientsOfNonParameters => {
                "remove the gradients of tensors that are no parameter before the optimizer step (candle: `grads.remove(&tensor)`), or, where they cannot be reached (broadcast views of masks and rope tables), copy only the parameters' gradients into a fresh store"
            }
            Cause::GradientGraphKept => {
                "detach each parameter's gradient into a fresh store after backward (candle: `fresh.insert(var, grads.get(var).unwrap().detach())` into a `GradStore::new()`), so the backward graph is released before the optimizer step"
            }
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One cause with its evidence: the bytes concerned and their block sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The cause.
    pub cause: Cause,
    /// The bytes concerned: parameter bytes without a gradient, gradient bytes of no
    /// parameter, forward bytes the gradients kept.
    pub bytes: u64,
    /// `(block size, count)`, largest size first.
    pub sizes: Vec<(u64, u64)>,
}

/// How many sizes a finding's line names before `…`.
const SIZES_SHOWN: usize = 4;

impl Finding {
    /// The evidence in words: `4.00 KiB of parameters have no gradient (blocks of
    /// 2.00 KiB × 2)`.
    pub fn evidence(&self) -> String {
        let mut sizes: Vec<String> = self
            .sizes
            .iter()
            .take(SIZES_SHOWN)
            .map(|&(size, count)| format!("{} × {count}", HumanBytes(size)))
            .collect();
        if self.sizes.len() > SIZES_SHOWN {
            sizes.push(format!("{} more sizes", self.sizes.len() - SIZES_SHOWN));
        }
        let sizes = sizes.join(", ");
        let bytes = HumanBytes(self.bytes);
        match self.cause {
            Cause::WeightsWithoutGradients => {
                format!("{bytes} of parameters get no gradient (parameter blocks of {sizes})")
            }
            Cause::GradientsOfNonParameters => format!(
                "{bytes} of gradients match no parameter's size (gradient blocks of {sizes})"
            ),
            Cause::GradientGraphKept => format!(
                "{bytes} made in forward are released with the gradients, after backward (blocks of {sizes})"
            ),
        }
    }

    /// `gradient check: CAUSE: evidence; fix: sentence`, as a message says it.
    pub fn line(&self) -> String {
        format!(
            "gradient check: {}: {}; fix: {}",
            self.cause,
            self.evidence(),
            self.cause.fix()
        )
    }

    /// The one-line form a snapshot's `info` keeps: `cause | bytes | size×count, …`.
    pub fn to_line(&self) -> String {
        let sizes: Vec<String> = self
            .sizes
            .iter()
            .map(|(size, count)| format!("{size}x{count}"))
            .collect();
        format!("{} | {} | {}", self.cause, self.bytes, sizes.join(", "))
    }

    /// Reads [`Finding::to_line`]'s form back.
    pub fn from_line(line: &str) -> Option<Finding> {
        let mut parts = line.splitn(3, " | ");
        let cause = Cause::parse(parts.next()?.trim())?;
        let bytes = parts.next()?.trim().parse().ok()?;
        let sizes = parts
            .next()
            .unwrap_or("")
            .split(", ")
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                let (size, count) = s.trim().split_once('x')?;
                Some((size.parse().ok()?, count.parse().ok()?))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Finding {
            cause,
            bytes,
            sizes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_names_parse() {
        let f = Finding {
            cause: Cause::GradientsOfNonParameters,
            bytes: 1000,
            sizes: vec![(700, 1), (300, 1)],
        };
        assert_eq!(
            f.to_line(),
            "gradients_of_non_parameters | 1000 | 700x1, 300x1"
        );
        assert_eq!(Finding::from_line(&f.to_line()), Some(f));
        assert_eq!(Finding::from_line("no_such_cause | 1 | 1x1"), None);
        for c in Cause::ALL {
            assert_eq!(Cause::parse(c.as_str()), Some(c));
        }
    }
}
