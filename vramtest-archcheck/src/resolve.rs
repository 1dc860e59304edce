//! Where a path lands: the module whose file defines what it names. A name a module
//! imports (`use`, `pub use`, a rename, a glob) is followed to where it is defined.

use crate::tree::Crate;

/// How deep imports are followed (a glob import of a module that imports back ends
/// here).
const MAX_DEPTH: usize = 24;

/// What a name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// A module (a path can go on into it).
    Module(usize),
    /// A value or macro defined in a module (a function, a constant): a path ends
    /// there.
    Item(usize),
    /// A type or trait defined in a module, or a name the module does not define that
    /// the checks see (`module::generated_by_a_macro`): the rest of a path is inside
    /// it (`Type::new`, `Enum::Variant`).
    Inside(usize),
}

impl Binding {
    /// The module that defines what the binding names.
    pub fn module(self) -> usize {
        match self {
            Binding::Module(m) | Binding::Item(m) | Binding::Inside(m) => m,
        }
    }
}

impl Crate {
    /// What `segments`, written in module `from`, stand for: several bindings where a
    /// name is both a module and an item (or is imported twice); none where the path
    /// leaves the crate (`std::..`, a dependency) or is a local variable.
    pub fn resolve(&self, from: usize, segments: &[String]) -> Vec<Binding> {
        self.resolve_at(from, segments, 0)
    }

    fn resolve_at(&self, from: usize, segments: &[String], depth: usize) -> Vec<Binding> {
        let Some(first) = segments.first() else {
            return Vec::new();
        };
        let mut rest = &segments[1..];
        let mut current = match first.as_str() {
            "crate" => vec![Binding::Module(0)],
            "self" | "super" => {
                let mut module = from;
                let mut leading = segments;
                while let Some(seg) = leading.first() {
                    match seg.as_str() {
                        "self" => {}
                        "super" => match self.modules[module].parent {
                            Some(parent) => module = parent,
                            None => return Vec::new(),
                        },
                        _ => break,
                    }
                    leading = &leading[1..];
                }
                rest = leading;
                vec![Binding::Module(module)]
            }
            "Self" => return Vec::new(),
            name => self.lookup(from, name, depth),
        };
        for seg in rest {
            let mut next = Vec::new();
            for binding in &current {
                match *binding {
                    Binding::Module(m) => {
                        let found = self.lookup(m, seg, depth);
                        if found.is_empty() {
                            next.push(Binding::Inside(m));
                        }
                        next.extend(found);
                    }
                    inside @ Binding::Inside(_) => next.push(inside),
                    // A function or a constant has nothing inside: this binding was
                    // the other namespace's (`profile` the module, not `profile` the
                    // function).
                    Binding::Item(_) => {}
                }
            }
            next.dedup();
            current = next;
        }
        current
    }

    /// What `name` stands for inside module `module`: a child module, an item, an
    /// import (followed), or a name a glob import brings.
    pub fn lookup(&self, module: usize, name: &str, depth: usize) -> Vec<Binding> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let m = &self.modules[module];
        let mut out = Vec::new();
        if let Some(&child) = m.children.get(name) {
            out.push(Binding::Module(child));
        }
        if m.items.contains(name) {
            out.push(Binding::Item(module));
        }
        if m.types.contains(name) {
            out.push(Binding::Inside(module));
        }
        for path in m.imports.get(name).into_iter().flatten() {
            out.extend(self.resolve_at(module, path, depth + 1));
        }
        if out.is_empty() {
            for glob in &m.globs {
                for binding in self.resolve_at(module, glob, depth + 1) {
                    if let Binding::Module(g) = binding {
                        out.extend(self.lookup(g, name, depth + 1));
                    }
                }
            }
        }
        out.dedup();
        out
    }
}
