//! Functions over a line limit, outside tests: free functions, methods and trait
//! methods with a body, nested ones included, counted from the line of `fn` (or of
//! its visibility) to the line of the closing brace; attributes and doc comments do
//! not count. Test-only modules (`#[cfg(test)] mod tests { .. }`) are left out, and
//! so is nothing else: items after a test module are read like any other.

use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use crate::attrs::is_test_only;

/// A function over the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongFn {
    /// Its length in lines.
    pub lines: usize,
    /// The file.
    pub file: PathBuf,
    /// The line of its `fn` (or visibility).
    pub line: usize,
    /// Its name (`Type::name` for a method).
    pub name: String,
}

/// The functions of one parsed file that are longer than `max_lines`.
pub fn long_functions(file: &Path, ast: &syn::File, max_lines: usize) -> Vec<LongFn> {
    let mut finder = Finder {
        file,
        max_lines,
        owner: None,
        out: Vec::new(),
    };
    finder.visit_file(ast);
    finder.out
}

struct Finder<'a> {
    file: &'a Path,
    max_lines: usize,
    /// The type or trait whose methods are being read.
    owner: Option<String>,
    out: Vec<LongFn>,
}

impl Finder<'_> {
    fn measure(&mut self, start: proc_macro2::Span, name: &syn::Ident, block: &syn::Block) {
        let first = start.start().line;
        let last = block.brace_token.span.close().end().line;
        let lines = last + 1 - first;
        if lines > self.max_lines {
            let name = match &self.owner {
                Some(owner) => format!("{owner}::{name}"),
                None => name.to_string(),
            };
            self.out.push(LongFn {
                lines,
                file: self.file.to_path_buf(),
                line: first,
                name,
            });
        }
    }

    fn with_owner(&mut self, owner: Option<String>, f: impl FnOnce(&mut Self)) {
        let saved = std::mem::replace(&mut self.owner, owner);
        f(self);
        self.owner = saved;
    }
}

/// Where a function starts: its visibility if it has one, else its signature.
fn start(vis: &syn::Visibility, sig: &syn::Signature) -> proc_macro2::Span {
    match vis {
        syn::Visibility::Inherited => sig.span(),
        _ => vis.span(),
    }
}

/// The last segment of a type's path (`Runner` for `impl<'a> crate::Runner<'a>`).
fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(start(&f.vis, &f.sig), &f.sig.ident, &f.block);
        self.with_owner(None, |s| visit::visit_item_fn(s, f));
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        self.with_owner(type_name(&i.self_ty), |s| visit::visit_item_impl(s, i));
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.with_owner(Some(t.ident.to_string()), |s| visit::visit_item_trait(s, t));
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let begin = match (&f.vis, &f.defaultness) {
            (syn::Visibility::Inherited, Some(d)) => d.span,
            _ => start(&f.vis, &f.sig),
        };
        self.measure(begin, &f.sig.ident, &f.block);
        self.with_owner(None, |s| visit::visit_impl_item_fn(s, f));
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.measure(f.sig.span(), &f.sig.ident, block);
        }
        self.with_owner(None, |s| visit::visit_trait_item_fn(s, f));
    }
}
