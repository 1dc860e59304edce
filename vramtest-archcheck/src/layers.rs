//! Cycles between sibling modules, each taken whole with everything under it: `harness`
//! uses `probe` (its `child` calls the probe) while `probe` uses `harness` (a type of
//! its `registry`). No file uses a file that uses it back, so [`crate::cycles`] sees no
//! loop, yet the two modules depend on each other: neither can be understood, tested or
//! moved without the other. Every module's children are checked this way, at every
//! depth.

use std::collections::BTreeMap;

use crate::cycles::{Edge, components, edges, one_loop};
use crate::tree::Crate;

/// Sibling modules that use each other, counting what lies under each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleCycle {
    /// The modules of the loop, as paths from the crate root (`harness`, `probe`),
    /// sorted.
    pub modules: Vec<String>,
    /// For each step of one loop, the first use that makes it (the last returns to the
    /// first module).
    pub edges: Vec<Edge>,
}

/// The cycles between sibling modules of `krate`.
pub fn module_cycles(krate: &Crate) -> Vec<ModuleCycle> {
    let file_edges = edges(krate);
    let owner = file_owners(krate);
    let mut out = Vec::new();
    for (parent, module) in krate.modules.iter().enumerate() {
        if module.children.len() < 2 {
            continue;
        }
        let mut kids: Vec<usize> = module.children.values().copied().collect();
        kids.sort();
        // The child of `parent` whose subtree holds each file, if any.
        let under = |file: usize| -> Option<usize> {
            let mut m = owner[file]?;
            loop {
                let up = krate.modules[m].parent?;
                if up == parent {
                    return kids.iter().position(|&k| k == m);
                }
                m = up;
            }
        };
        let mut between: BTreeMap<(usize, usize), (usize, usize, usize, String)> = BTreeMap::new();
        for (&(from, to), (line, path)) in &file_edges {
            if let (Some(a), Some(b)) = (under(from), under(to))
                && a != b
            {
                between
                    .entry((a, b))
                    .or_insert_with(|| (from, to, *line, path.clone()));
            }
        }
        let mut next = vec![Vec::new(); kids.len()];
        for &(a, b) in between.keys() {
            next[a].push(b);
        }
        for component in components(&next).into_iter().filter(|c| c.len() > 1) {
            let mut modules: Vec<String> = component
                .iter()
                .map(|&k| module_path(krate, kids[k]))
                .collect();
            modules.sort();
            let edges = one_loop(&next, &component)
                .windows(2)
                .map(|w| {
                    let (from, to, line, path) = between[&(w[0], w[1])].clone();
                    Edge {
                        from: krate.files[from].clone(),
                        to: krate.files[to].clone(),
                        line,
                        path,
                    }
                })
                .collect();
            out.push(ModuleCycle { modules, edges });
        }
    }
    out.sort_by(|a, b| a.modules.cmp(&b.modules));
    out
}

/// For each file, the module it is the file of (the outermost module written in it).
fn file_owners(krate: &Crate) -> Vec<Option<usize>> {
    let mut owner = vec![None; krate.files.len()];
    for (id, module) in krate.modules.iter().enumerate() {
        let slot = &mut owner[module.file];
        let outer = match *slot {
            None => true,
            Some(m) => depth(krate, id) < depth(krate, m),
        };
        if outer {
            *slot = Some(id);
        }
    }
    owner
}

fn depth(krate: &Crate, mut module: usize) -> usize {
    let mut d = 0;
    while let Some(up) = krate.modules[module].parent {
        module = up;
        d += 1;
    }
    d
}

/// `harness::child`: the names from the crate root down to `module`.
fn module_path(krate: &Crate, module: usize) -> String {
    let mut names = Vec::new();
    let mut m = module;
    while let Some(up) = krate.modules[m].parent {
        if let Some((name, _)) = krate.modules[up].children.iter().find(|&(_, &c)| c == m) {
            names.push(name.clone());
        }
        m = up;
    }
    names.reverse();
    names.join("::")
}
