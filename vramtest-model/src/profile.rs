//! What a measurement produces: the peak, its breakdown, and per-phase figures.

use crate::bytes::HumanBytes;
use crate::category::{Category, Phase};
use enum_map::EnumMap;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Index, IndexMut};

/// The least long-lived first-forward memory that makes [`Profile::hints`] suspect lazily
/// created parameters.
pub const LAZY_HINT_MIN_BYTES: u64 = 256 * 1024;

/// Bytes per category: a map indexed by [`Category`] (`bytes[Category::Activations]`),
/// serialized as an object keyed by the categories' names in report order. Reading is
/// strict, as for a struct: every category once, no other key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct CategoryBytes(EnumMap<Category, u64>);

impl CategoryBytes {
    /// Each category's bytes from `f`.
    pub fn from_fn(f: impl FnMut(Category) -> u64) -> CategoryBytes {
        CategoryBytes(EnumMap::from_fn(f))
    }

    /// The sum over all categories.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// `(category, bytes)` pairs in report order.
    pub fn iter(&self) -> impl Iterator<Item = (Category, u64)> + '_ {
        self.0.iter().map(|(c, &b)| (c, b))
    }
}

/// The categories named, the others 0.
impl<const N: usize> From<[(Category, u64); N]> for CategoryBytes {
    fn from(pairs: [(Category, u64); N]) -> CategoryBytes {
        pairs.into_iter().collect()
    }
}

/// The categories given (the last of a repeated one), the others 0.
impl FromIterator<(Category, u64)> for CategoryBytes {
    fn from_iter<I: IntoIterator<Item = (Category, u64)>>(pairs: I) -> CategoryBytes {
        let mut bytes = CategoryBytes::default();
        for (c, b) in pairs {
            bytes[c] = b;
        }
        bytes
    }
}

impl Index<Category> for CategoryBytes {
    type Output = u64;
    fn index(&self, c: Category) -> &u64 {
        &self.0[c]
    }
}

impl IndexMut<Category> for CategoryBytes {
    fn index_mut(&mut self, c: Category) -> &mut u64 {
        &mut self.0[c]
    }
}

impl<'de> Deserialize<'de> for CategoryBytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(StrictCategories)
    }
}

/// Reads a [`CategoryBytes`] object as serde's derive reads a struct with
/// `deny_unknown_fields`: an unknown, repeated or missing category is an error naming it.
struct StrictCategories;

impl<'de> Visitor<'de> for StrictCategories {
    type Value = CategoryBytes;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with the bytes of each category")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CategoryBytes, A::Error> {
        const NAMES: [&str; Category::ALL.len()] = {
            let mut names = [""; Category::ALL.len()];
            let mut i = 0;
            while i < names.len() {
                names[i] = Category::ALL[i].as_str();
                i += 1;
            }
            names
        };
        let mut seen: EnumMap<Category, Option<u64>> = EnumMap::default();
        while let Some(key) = map.next_key::<String>()? {
            let category: Category = key
                .parse()
                .map_err(|_| de::Error::unknown_field(&key, &NAMES))?;
            if seen[category].is_some() {
                return Err(de::Error::duplicate_field(category.as_str()));
            }
            seen[category] = Some(map.next_value()?);
        }
        let mut bytes = CategoryBytes::default();
        for (category, value) in seen {
            bytes[category] = value.ok_or_else(|| de::Error::missing_field(category.as_str()))?;
        }
        Ok(bytes)
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
    /// Each phase's moments (over the phases [`Profile::steady_state_phases`] keeps):
    /// for every category whose live bytes change within the phase, the total at the
    /// moment it first reached its own most there. The phase's peak is the largest of them
    /// when it comes at such a moment (at the start of a backward pass that first
    /// frees, at its end when the gradients are all alive): a sweep fits each on its
    /// own and predicts the phase as their maximum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_moments: Vec<(Phase, Vec<(Category, u64)>)>,
    /// The gradient check's causes, from the blocks alive when the last backward ended
    /// (see [`crate::gradient_check`]): empty when gradients are one per weight, or
    /// without a backward. Set by the run from its stream
    /// ([`crate::gradient_reading::check`]), not by the ledger.
    #[serde(default)]
    pub gradient_check: Vec<crate::gradient_check::Finding>,
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
        let parameters = self.category_peaks[Category::Parameters];
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

#[cfg(test)]
mod category_bytes_tests {
    use super::*;

    #[test]
    fn an_object_of_every_category_once_reads_and_writes_in_report_order() {
        let bytes = CategoryBytes::from_fn(|c| 10 * c.index() as u64 + 1);
        let text = serde_json::to_string(&bytes).unwrap();
        let names: Vec<String> = Category::ALL
            .iter()
            .map(|c| format!("\"{c}\":{}", 10 * c.index() + 1))
            .collect();
        assert_eq!(text, format!("{{{}}}", names.join(",")));
        assert_eq!(serde_json::from_str::<CategoryBytes>(&text).unwrap(), bytes);
        assert_eq!(
            bytes.total(),
            Category::ALL
                .iter()
                .map(|c| 10 * c.index() as u64 + 1)
                .sum::<u64>()
        );
    }

    #[test]
    fn a_repeated_unknown_or_missing_category_is_an_error_naming_it() {
        let all = serde_json::to_value(CategoryBytes::default()).unwrap();
        let text = serde_json::to_string(&all).unwrap();
        let repeated = text.replacen('{', "{\"inputs\":1,", 1);
        let err = serde_json::from_str::<CategoryBytes>(&repeated).unwrap_err();
        assert!(
            err.to_string().contains("duplicate field `inputs`"),
            "{err}"
        );
        let unknown = text.replacen('{', "{\"vram\":1,", 1);
        let err = serde_json::from_str::<CategoryBytes>(&unknown).unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown field `vram`, expected one of `parameters`"),
            "{err}"
        );
        let mut missing = all.clone();
        missing.as_object_mut().unwrap().remove("workspace");
        let err = serde_json::from_value::<CategoryBytes>(missing).unwrap_err();
        assert!(
            err.to_string().contains("missing field `workspace`"),
            "{err}"
        );
    }
}
