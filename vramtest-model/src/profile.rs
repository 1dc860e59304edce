//! What a measurement produces: the peak, its breakdown, and per-phase figures.

use crate::bytes::HumanBytes;
use crate::category::{Category, Phase};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Index, IndexMut};

/// The least long-lived first-forward memory that makes [`Profile::hints`] suspect lazily
/// created parameters.
pub const LAZY_HINT_MIN_BYTES: u64 = 256 * 1024;

/// Bytes per category, one field per [`Category`], serialized in report order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CategoryBytes {
    /// Tensors that hold the model's weights.
    pub parameters: u64,
    /// Gradients kept for the optimizer.
    pub gradients: u64,
    /// The optimizer's own state (momentum, variance, master copies).
    pub optimizer_state: u64,
    /// What the forward pass keeps for the backward pass.
    pub activations: u64,
    /// The batch (and its labels).
    pub inputs: u64,
    /// Freed within the phase that allocated it.
    pub temporaries: u64,
    /// Library scratch and caches that outlive their iteration.
    pub workspace: u64,
    /// Device memory the probe did not see (context, library handles).
    pub untracked: u64,
}

impl CategoryBytes {
    /// The sum over all categories.
    pub fn total(&self) -> u64 {
        Category::ALL.iter().map(|&c| self[c]).sum()
    }

    /// `(category, bytes)` pairs in report order.
    pub fn iter(&self) -> impl Iterator<Item = (Category, u64)> + '_ {
        Category::ALL.into_iter().map(move |c| (c, self[c]))
    }
}

impl Index<Category> for CategoryBytes {
    type Output = u64;
    fn index(&self, c: Category) -> &u64 {
        match c {
            Category::Parameters => &self.parameters,
            Category::Gradients => &self.gradients,
            Category::OptimizerState => &self.optimizer_state,
            Category::Activations => &self.activations,
            Category::Inputs => &self.inputs,
            Category::Temporaries => &self.temporaries,
            Category::Workspace => &self.workspace,
            Category::Untracked => &self.untracked,
        }
    }
}

impl IndexMut<Category> for CategoryBytes {
    fn index_mut(&mut self, c: Category) -> &mut u64 {
        match c {
            Category::Parameters => &mut self.parameters,
            Category::Gradients => &mut self.gradients,
            Category::OptimizerState => &mut self.optimizer_state,
            Category::Activations => &mut self.activations,
            Category::Inputs => &mut self.inputs,
            Category::Temporaries => &mut self.temporaries,
            Category::Workspace => &mut self.workspace,
            Category::Untracked => &mut self.untracked,
        }
    }
}

/// How closely the probe saw the program's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fidelity {
    /// Every allocation and free was observed (CPU heap, tracked CUDA allocations).
    #[default]
    Exact,
    /// Only phase-boundary watermarks were read (a CUDA memory pool).
    Phase,
}

impl fmt::Display for Fidelity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fidelity::Exact => "exact",
            Fidelity::Phase => "phase",
        })
    }
}

/// Live bytes around one run of one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseRecord {
    /// The phase.
    pub phase: Phase,
    /// The loop iteration, or `None` for set-up phases run before `t.iterations()`.
    #[serde(deserialize_with = "Option::deserialize")]
    pub iteration: Option<u32>,
    /// Live bytes when it started.
    pub start_bytes: u64,
    /// The highest live bytes while it ran.
    pub peak_bytes: u64,
    /// Live bytes when it ended.
    pub end_bytes: u64,
}

/// Memory that kept growing from one iteration to the next, grouped by where it was
/// allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeakSite {
    /// The category the leaked blocks belong to.
    pub category: Category,
    /// `None`: allocated outside any phase.
    pub phase: Option<Phase>,
    /// Bytes retained per iteration (after the warm-up iteration).
    pub bytes_per_iteration: u64,
}

/// The result of one measured test. Deterministic for a deterministic program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// How the figures were measured.
    pub fidelity: Fidelity,
    /// Iterations the loop ran (`t.iterations()`).
    pub iterations: u32,
    /// The highest live total over the whole test (baseline excluded).
    pub peak_bytes: u64,
    /// The phase running at the peak (`None`: outside any phase).
    pub peak_phase: Option<Phase>,
    /// The iteration running at the peak (`None`: before the loop).
    pub peak_iteration: Option<u32>,
    /// The breakdown at the moment of the peak; sums to `peak_bytes`.
    pub at_peak: CategoryBytes,
    /// Each category's own highest live value.
    pub category_peaks: CategoryBytes,
    /// Every phase run, in order.
    pub phases: Vec<PhaseRecord>,
    /// Live bytes at the end of each iteration.
    pub iteration_end_bytes: Vec<u64>,
    /// Growth of live bytes per iteration after the warm-up (0 when it does not keep growing).
    pub leak_bytes_per_iteration: u64,
    /// Where leaked bytes were allocated (empty when there is no leak).
    pub leak_sites: Vec<LeakSite>,
    /// Allocations observed.
    pub allocations: u64,
    /// Bytes already alive when the test started: reported apart, never charged.
    pub baseline_bytes: u64,
    /// For pooled GPU memory: the highest reserved (not only used) bytes.
    pub reserved_peak_bytes: Option<u64>,
    /// Bytes first allocated in the forward pass of the first iteration, kept past the
    /// loop and released after it, with the test's own state (untagged `workspace`; a
    /// process-wide cache is never released): large when a framework creates its
    /// parameters lazily, on first use (burn does). See [`Profile::hints`].
    #[serde(default)]
    pub first_forward_kept_bytes: u64,
    /// On a GPU: device memory the probe saw allocated without it being reported (pool
    /// allocations beside tracked ones), which made the run `phase` instead of `exact`.
    /// A lower bound: between two boundary samples only the pool's high-water mark is
    /// known, which is compared with the most tracked bytes live in the interval, even
    /// when those were freed before the unreported allocation.
    #[serde(default)]
    pub not_seen_bytes: Option<u64>,
    /// The highest live bytes of CPU-only memory over the test (gemm's packing
    /// buffers and the like, see [`crate::Event::CpuOnlyAlloc`]): measured apart, in no
    /// category, not in `peak_bytes`. 0 on a GPU.
    #[serde(default)]
    pub cpu_only_peak_bytes: u64,
    /// Each phase's own highest live bytes per category (over every run of the phase,
    /// counted in the innermost phase open): what a sweep over named axes predicts a
    /// figure that is a maximum over time from, phase by phase.
    #[serde(default)]
    pub phase_category_peaks: Vec<(Phase, CategoryBytes)>,
}

impl Profile {
    /// Advice about how the test marks its phases, for the person reading the result:
    /// today, parameters that look created lazily in the first forward pass.
    pub fn hints(&self) -> Vec<String> {
        let mut hints = Vec::new();
        if let Some(not_seen) = self.not_seen_bytes {
            hints.push(format!(
                "note: fidelity {}: at least {} of the pool's memory was allocated without being reported through `t.cuda_tracker()`, so the figures come from the pool's watermarks; report every allocation (or build with the `cupti` feature) for exact figures",
                self.fidelity,
                HumanBytes(not_seen)
            ));
        }
        let lazy = self.first_forward_kept_bytes;
        let parameters = self.category_peaks.parameters;
        if lazy >= LAZY_HINT_MIN_BYTES && parameters < lazy / 4 {
            hints.push(format!(
                "hint: `parameters` is {} but {} allocated in the first forward pass lived as long as the model (charged to `workspace`): \
                 the framework seems to initialize parameters lazily, on first use (burn does). \
                 Touch every parameter inside `t.params` so they are created there (the guide, Framework notes: \"Lazy parameters in burn\")",
                HumanBytes(parameters),
                HumanBytes(lazy),
            ));
        }
        hints
    }

    /// The phase records of the last iteration, after the set-up phases: what a
    /// snapshot keeps.
    pub fn steady_state_phases(&self) -> Vec<PhaseRecord> {
        let last = self.phases.iter().filter_map(|p| p.iteration).max();
        self.phases
            .iter()
            .filter(|p| p.iteration.is_none() || p.iteration == last)
            .copied()
            .collect()
    }
}
