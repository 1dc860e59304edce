//! Import cycles between the files of a crate: file A uses file B when a path A writes
//! lands in a module B defines. Each cycle comes with the paths that make it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::resolve::Binding;
use crate::tree::Crate;

/// Why one file uses another: the first path that lands there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The file that writes the path.
    pub from: PathBuf,
    /// The file the path lands in.
    pub to: PathBuf,
    /// The line of the path in `from`.
    pub line: usize,
    /// The path as written (`output::html::render`).
    pub path: String,
}

impl std::fmt::Display for Edge {
    /// `src/a.rs:3 `b::f` -> src/b.rs`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{} `{}` -> {}",
            self.from.display(),
            self.line,
            self.path,
            self.to.display()
        )
    }
}

/// Files of one crate that use each other, in a loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// Every file of the strongly connected component, sorted.
    pub files: Vec<PathBuf>,
    /// One loop through some of them, as edges (the last one returns to the first).
    pub edges: Vec<Edge>,
}

/// The edges between the files of a crate: for each pair, the first path that makes it.
pub fn edges(krate: &Crate) -> BTreeMap<(usize, usize), (usize, String)> {
    let mut out = BTreeMap::new();
    for (id, module) in krate.modules.iter().enumerate() {
        for r in &module.refs {
            let single = r.segments.len() == 1 && !r.is_use;
            for binding in krate.resolve(id, &r.segments) {
                // A lone name in code is a value or a type, never a module: a local
                // variable named like a child module is not a use of it.
                if single && matches!(binding, Binding::Module(_)) {
                    continue;
                }
                let to = krate.modules[binding.module()].file;
                if to != module.file {
                    out.entry((module.file, to))
                        .or_insert_with(|| (r.line, r.segments.join("::")));
                }
            }
        }
    }
    out
}

/// The import cycles of a crate.
pub fn cycles(krate: &Crate) -> Vec<Cycle> {
    let edges = edges(krate);
    let n = krate.files.len();
    let mut next = vec![Vec::new(); n];
    for &(a, b) in edges.keys() {
        next[a].push(b);
    }
    let mut out: Vec<Cycle> = components(&next)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|component| {
            let mut files: Vec<PathBuf> =
                component.iter().map(|&f| krate.files[f].clone()).collect();
            files.sort();
            let loop_ = one_loop(&next, &component)
                .windows(2)
                .map(|w| {
                    let (line, path) = edges[&(w[0], w[1])].clone();
                    Edge {
                        from: krate.files[w[0]].clone(),
                        to: krate.files[w[1]].clone(),
                        line,
                        path,
                    }
                })
                .collect();
            Cycle {
                files,
                edges: loop_,
            }
        })
        .collect();
    out.sort_by(|a, b| a.files.cmp(&b.files));
    out
}

/// Strongly connected components (Tarjan's algorithm, without recursion).
pub(crate) fn components(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = next.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut counter = 0;
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        // (node, position in its successor list)
        let mut work = vec![(start, 0)];
        index[start] = counter;
        low[start] = counter;
        counter += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            if let Some(&w) = next[v].get(*pos) {
                *pos += 1;
                if index[w] == usize::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(component);
            }
        }
    }
    out
}

/// A shortest loop from the component's smallest file back to itself, as the list of
/// files it passes (first and last the same).
pub(crate) fn one_loop(next: &[Vec<usize>], component: &[usize]) -> Vec<usize> {
    let start = *component.iter().min().expect("a component has a file");
    let mut came_from = vec![usize::MAX; next.len()];
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &next[v] {
            if !component.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![start, v];
                let mut at = v;
                while at != start {
                    at = came_from[at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if came_from[w] == usize::MAX {
                came_from[w] = v;
                queue.push_back(w);
            }
        }
    }
    vec![start]
}
