//! The names practitioners reason about: where memory goes (`Category`) and
//! when it was allocated (`Phase`). Their serialized names are a stable contract.

use enum_map::Enum;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Declares [`Category`] from one list: each category's doc and its stable name, in
/// report order. The enum, [`Category::ALL`], [`Category::as_str`], the serialized names
/// and the per-category map ([`crate::CategoryBytes`], an [`enum_map::EnumMap`]) all
/// follow from it.
macro_rules! categories {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal,)+) => {
        /// Where a byte of memory is charged. The serialized names never change:
        /// snapshots committed in users' repositories depend on them.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Enum,
        )]
        pub enum Category {
            $($(#[doc = $doc])* #[serde(rename = $name)] $variant,)+
        }

        impl Category {
            /// Every category, in report order.
            pub const ALL: [Category; [$($name),+].len()] = [$(Category::$variant),+];

            /// The stable serialized name (`optimizer_state`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Category::$variant => $name,)+
                }
            }
        }
    };
}

// A new category is one entry here (with its doc); then the compiler asks for its color
// (`vramtest-chart`'s color table). Besides: the rule that charges bytes to it (the
// ledger, or `Phase::survivor_category`), whether it holds tensors (`TENSORS` below),
// and a step that reads the snapshots written before it (`SCHEMA` bumped, and
// `snapshot::migrate::MIGRATIONS` with `migrate::add_category`).
categories! {
    /// Model weights and biases (allocated in the `params` phase).
    Parameters => "parameters",
    /// Gradients: `backward` survivors released within their iteration.
    Gradients => "gradients",
    /// Optimizer state: moments, master copies (`optimizer_init` / `optimizer_step` survivors).
    OptimizerState => "optimizer_state",
    /// Forward-pass survivors that are released within their iteration.
    Activations => "activations",
    /// The batch: `inputs` survivors released within their iteration.
    Inputs => "inputs",
    /// Anything freed before the phase that allocated it ended.
    Temporaries => "temporaries",
    /// Long-lived scratch space and caches: survivors of `inputs`, `forward`, `backward`
    /// and untagged work outside phases that outlive their iteration (a gemm packing
    /// buffer, a cuBLAS workspace).
    Workspace => "workspace",
    /// Memory the probe did not see allocated: on a GPU, driver-used minus tracked.
    Untracked => "untracked",
}

impl Category {
    /// The categories that hold tensors: what a prediction is held to (`workspace`
    /// and `untracked` hold none: shown, never gated by `cargo vramtest measure`).
    pub const TENSORS: [Category; 6] = [
        Category::Parameters,
        Category::Gradients,
        Category::OptimizerState,
        Category::Activations,
        Category::Inputs,
        Category::Temporaries,
    ];

    /// Position in [`Category::ALL`]; handy for fixed-size per-category arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown category or phase name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{name}` (expected one of: {expected})")]
pub struct UnknownName {
    /// "category" or "phase".
    pub kind: &'static str,
    /// What was given.
    pub name: String,
    /// The accepted names, comma-separated.
    pub expected: String,
}

impl FromStr for Category {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Category::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownName {
                kind: "category",
                name: s.to_owned(),
                expected: Category::ALL.map(Category::as_str).join(", "),
            })
    }
}

/// The phases of a training step, as marked by the `Step` methods of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// `Step::params`: build the model.
    Params,
    /// `Step::optimizer_init`: build the optimizer.
    OptimizerInit,
    /// `Step::inputs`: load a batch.
    Inputs,
    /// `Step::forward`: the forward pass and loss.
    Forward,
    /// `Step::backward`: the backward pass.
    Backward,
    /// `Step::optimizer_step`: apply the update.
    OptimizerStep,
}

impl Phase {
    /// Every phase, in the order a training step runs them.
    pub const ALL: [Phase; 6] = [
        Phase::Params,
        Phase::OptimizerInit,
        Phase::Inputs,
        Phase::Forward,
        Phase::Backward,
        Phase::OptimizerStep,
    ];

    /// The stable serialized name (`optimizer_step`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Params => "params",
            Phase::OptimizerInit => "optimizer_init",
            Phase::Inputs => "inputs",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::OptimizerStep => "optimizer_step",
        }
    }

    /// The category of this phase's survivors when they are released within their
    /// iteration (those of `inputs`, `forward` and `backward` that outlive it are
    /// `workspace`).
    pub fn survivor_category(self) -> Category {
        match self {
            Phase::Params => Category::Parameters,
            Phase::OptimizerInit | Phase::OptimizerStep => Category::OptimizerState,
            Phase::Inputs => Category::Inputs,
            Phase::Forward => Category::Activations,
            Phase::Backward => Category::Gradients,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Phase {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Phase::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownName {
                kind: "phase",
                name: s.to_owned(),
                expected: Phase::ALL.map(Phase::as_str).join(", "),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde_and_from_str() {
        for c in Category::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(c.as_str().parse::<Category>().unwrap(), c);
            assert_eq!(Category::ALL[c.index()], c);
        }
        for p in Phase::ALL {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.as_str()));
            assert_eq!(p.as_str().parse::<Phase>().unwrap(), p);
        }
    }

    #[test]
    fn unknown_names_list_the_expected_ones() {
        let err = "activation".parse::<Category>().unwrap_err();
        assert!(err.to_string().contains("unknown category `activation`"));
        assert!(err.to_string().contains("activations"));
    }
}
