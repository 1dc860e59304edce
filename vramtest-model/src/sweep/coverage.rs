//! Whether a sweep's `variants` cover exactly the product of its `levels`: every
//! combination of levels but the baseline once, and nothing else. A snapshot whose
//! variants lack a combination (deleted, lost in a merge, renamed to a level it does
//! not list) would leave that lever unjudged; one that holds a combination of levels
//! it does not list judges nothing the run measures. Either is a changed sweep: it
//! fails until the snapshot is accepted again.

use super::{Sweep, show_variant};
use std::collections::{BTreeMap, BTreeSet};

/// A combination of levels: each categorical axis at one of its levels.
type Variant = BTreeMap<String, String>;

/// What a sweep's `variants` lack, hold beyond, or hold twice of the product of its
/// `levels` (the baseline combination, this sweep's own fit, excluded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Combinations of the levels with no fit.
    pub missing: Vec<Variant>,
    /// Fits of combinations that are not one of the levels' (or are the baseline's).
    pub extra: Vec<Variant>,
    /// Combinations fitted more than once.
    pub repeated: Vec<Variant>,
}

impl Coverage {
    /// Whether the variants are exactly the product of the levels.
    pub fn is_exact(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.repeated.is_empty()
    }

    /// `no fit for `ckpt=blocks`; `ckpt=twice` is no combination of its levels`.
    fn describe(&self) -> String {
        let list = |vs: &[Variant]| {
            vs.iter()
                .map(|v| format!("`{}`", show_variant(v)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!("no fit for {}", list(&self.missing)));
        }
        if !self.extra.is_empty() {
            parts.push(format!(
                "a fit for {}, no combination of its levels but the baseline",
                list(&self.extra)
            ));
        }
        if !self.repeated.is_empty() {
            parts.push(format!("{} fitted twice", list(&self.repeated)));
        }
        parts.join("; ")
    }
}

/// Every combination of `levels` (the last axis, in name order, varying fastest).
fn product(levels: &BTreeMap<String, Vec<String>>) -> Vec<Variant> {
    let mut out = vec![Variant::new()];
    for (axis, values) in levels {
        out = out
            .into_iter()
            .flat_map(|partial| {
                values.iter().map(move |level| {
                    let mut v = partial.clone();
                    v.insert(axis.clone(), level.clone());
                    v
                })
            })
            .collect();
    }
    out
}

impl Sweep {
    /// How this sweep's `variants` cover the product of its `levels`.
    pub fn coverage(&self) -> Coverage {
        let baseline = self.combinations().swap_remove(0).0;
        let wanted: BTreeSet<Variant> = product(&self.levels)
            .into_iter()
            .filter(|v| *v != baseline)
            .collect();
        let mut seen = BTreeSet::new();
        let mut out = Coverage::default();
        for v in self.variants.iter().map(|v| &v.variant) {
            if !wanted.contains(v) {
                if !out.extra.contains(v) {
                    out.extra.push(v.clone());
                }
            } else if !seen.insert(v.clone()) && !out.repeated.contains(v) {
                out.repeated.push(v.clone());
            }
        }
        out.missing = product(&self.levels)
            .into_iter()
            .filter(|v| wanted.contains(v) && !seen.contains(v))
            .collect();
        out
    }

    /// A snapshot's sweep whose variants are not exactly the product of its levels, in
    /// words (`None` when they are): the changed sweep a run reports.
    pub fn uncovered(&self) -> Option<String> {
        let coverage = self.coverage();
        (!coverage.is_exact()).then(|| {
            format!(
                "the snapshot's variants do not cover its levels ({}): {}; the sweep changed: accept the snapshot again",
                super::show_levels(&self.levels),
                coverage.describe()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_time::CpuTimeRatio;
    use crate::sweep::VariantSweep;

    fn variant(pairs: &[(&str, &str)]) -> Variant {
        pairs
            .iter()
            .map(|(a, l)| ((*a).to_owned(), (*l).to_owned()))
            .collect()
    }

    /// A sweep with `levels` and a (figureless) fit for each of `variants`.
    fn sweep(levels: &[(&str, &[&str])], variants: &[Variant]) -> Sweep {
        let empty = Sweep {
            axes: BTreeMap::new(),
            figures: BTreeMap::new(),
            target: None,
            levels: BTreeMap::new(),
            variants: Vec::new(),
            axial: Vec::new(),
            fitted_without: Default::default(),
            migrated: false,
        };
        Sweep {
            levels: levels
                .iter()
                .map(|(a, ls)| {
                    (
                        (*a).to_owned(),
                        ls.iter().map(|l| (*l).to_owned()).collect(),
                    )
                })
                .collect(),
            variants: variants
                .iter()
                .map(|v| VariantSweep {
                    variant: v.clone(),
                    sweep: empty.clone(),
                    saving: None,
                    cpu_time_ratio: CpuTimeRatio::default(),
                })
                .collect(),
            ..empty.clone()
        }
    }

    #[test]
    fn every_combination_but_the_baseline_once_is_exact() {
        let levels: &[(&str, &[&str])] = &[("ckpt", &["off", "blocks"]), ("p", &["f32", "bf16"])];
        // The product, computed here: 2 × 2 combinations, the baseline left out.
        let all = [
            variant(&[("ckpt", "off"), ("p", "bf16")]),
            variant(&[("ckpt", "blocks"), ("p", "f32")]),
            variant(&[("ckpt", "blocks"), ("p", "bf16")]),
        ];
        assert!(sweep(levels, &all).coverage().is_exact());
        assert_eq!(sweep(levels, &all).uncovered(), None);
        assert!(sweep(&[], &[]).coverage().is_exact());
    }

    #[test]
    fn a_missing_an_extra_or_a_repeated_combination_is_named() {
        let levels: &[(&str, &[&str])] = &[("ckpt", &["off", "blocks"])];
        let blocks = variant(&[("ckpt", "blocks")]);
        let renamed = variant(&[("ckpt", "block")]);
        let baseline = variant(&[("ckpt", "off")]);

        let gap = sweep(levels, &[]).coverage();
        assert_eq!(gap.missing, std::slice::from_ref(&blocks));
        let said = sweep(levels, &[]).uncovered().unwrap();
        assert!(
            said.contains("(ckpt [\"off\", \"blocks\"]): no fit for `ckpt=blocks`"),
            "{said}"
        );
        assert!(said.contains("accept the snapshot again"), "{said}");

        let gap = sweep(levels, std::slice::from_ref(&renamed)).coverage();
        assert_eq!(
            (gap.missing, gap.extra),
            (vec![blocks.clone()], vec![renamed])
        );
        let said = sweep(levels, &[variant(&[("ckpt", "block")])])
            .uncovered()
            .unwrap();
        assert!(
            said.contains("a fit for `ckpt=block`, no combination"),
            "{said}"
        );

        // The baseline is this sweep's own fit: as a variant it is one too many.
        let gap = sweep(levels, &[blocks.clone(), baseline.clone()]).coverage();
        assert_eq!((gap.missing.len(), gap.extra), (0, vec![baseline]));

        let gap = sweep(levels, &[blocks.clone(), blocks.clone()]).coverage();
        assert_eq!((gap.missing.len(), gap.repeated), (0, vec![blocks.clone()]));

        // A variant with an axis the levels do not list.
        let other = variant(&[("ckpt", "blocks"), ("p", "bf16")]);
        let gap = sweep(levels, &[blocks, other.clone()]).coverage();
        assert_eq!(gap.extra, [other]);
        // Variants without levels.
        let gap = sweep(&[], &[variant(&[("ckpt", "blocks")])]).coverage();
        assert_eq!(gap.extra.len(), 1);
    }
}
