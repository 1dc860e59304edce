//! The module tree of one crate, read from its root file through every `mod` it
//! declares, and what each module names: its items, its imports (`use`, renames and
//! globs included) and every path it writes (in code, in macro calls, in attributes).
//!
//! A module here is a Rust module: a file, or an inline `mod name { .. }` inside one.
//! Items and imports inside function bodies count as their module's (a superset of
//! what the compiler sees, so nothing it reads is missed). Test-only modules
//! (`#[cfg(test)] mod tests`) are left out, with the files they load.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::{self, Visit};
use syn::{Attribute, Item, ItemMod, Meta, UseTree};

use crate::attrs::{is_macro_export, is_test_only, path_attr};
use crate::error::{Error, parse_file};

/// One crate: its files and modules. Module 0 is the crate root.
#[derive(Debug, Default)]
pub struct Crate {
    /// The crate's files; a module's `file` indexes this.
    pub files: Vec<PathBuf>,
    /// The crate's modules, the root first.
    pub modules: Vec<Module>,
    /// Files and folders of test-only modules, which are not read.
    pub test_paths: Vec<PathBuf>,
}

/// One module (a file or an inline module) and what it names.
#[derive(Debug, Default)]
pub struct Module {
    /// The file the module is written in (an index into [`Crate::files`]).
    pub file: usize,
    /// The enclosing module; `None` for the crate root.
    pub parent: Option<usize>,
    /// Child modules by name.
    pub children: HashMap<String, usize>,
    /// Names of the values and macros defined here (functions, constants, statics,
    /// `macro_rules!`): a path ends at one.
    pub items: HashSet<String>,
    /// Names of the types and traits defined here: a path can go on into one
    /// (`Type::new`, `Enum::Variant`).
    pub types: HashSet<String>,
    /// Names brought in by `use`, each with the path(s) it stands for.
    pub imports: HashMap<String, Vec<Vec<String>>>,
    /// The paths of glob imports (`use path::*`).
    pub globs: Vec<Vec<String>>,
    /// Every path the module writes.
    pub refs: Vec<Ref>,
}

/// A path a module writes, and where.
#[derive(Debug, Clone)]
pub struct Ref {
    /// The path's segments (`["crate", "output", "html", "render"]`).
    pub segments: Vec<String>,
    /// Its line in the module's file.
    pub line: usize,
    /// Whether it is the path of a `use` (else a path in code, a macro call or an
    /// attribute).
    pub is_use: bool,
}

impl Crate {
    /// Reads the crate whose root file (`lib.rs`, `main.rs`, `bin/x.rs`) is `root`.
    pub fn load(root: &Path) -> Result<Crate, Error> {
        let mut krate = Crate::default();
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        krate.load_file(root, None, dir)?;
        Ok(krate)
    }

    fn new_module(&mut self, file: usize, parent: Option<usize>) -> usize {
        self.modules.push(Module {
            file,
            parent,
            ..Module::default()
        });
        self.modules.len() - 1
    }

    fn load_file(
        &mut self,
        path: &Path,
        parent: Option<usize>,
        mod_dir: PathBuf,
    ) -> Result<usize, Error> {
        let ast = parse_file(path)?;
        let file = self.files.len();
        self.files.push(path.to_path_buf());
        let module = self.new_module(file, parent);
        let mut collector = Collector {
            krate: self,
            path: path.to_path_buf(),
            file,
            module,
            mod_dir,
            inline_depth: 0,
            error: None,
        };
        collector.visit_file(&ast);
        match collector.error {
            Some(e) => Err(e),
            None => Ok(module),
        }
    }
}

/// Walks one file's syntax tree, filling in the modules it holds.
struct Collector<'a> {
    krate: &'a mut Crate,
    path: PathBuf,
    file: usize,
    module: usize,
    /// Where the files of the current module's children are.
    mod_dir: PathBuf,
    /// How many inline modules deep the walk is.
    inline_depth: usize,
    error: Option<Error>,
}

impl Collector<'_> {
    fn current(&mut self) -> &mut Module {
        &mut self.krate.modules[self.module]
    }

    fn add_ref(&mut self, segments: Vec<String>, line: usize, is_use: bool) {
        self.current().refs.push(Ref {
            segments,
            line,
            is_use,
        });
    }

    /// The file of `mod name;` and the folder of its children.
    fn child_file(&self, m: &ItemMod, name: &str) -> Result<(PathBuf, PathBuf), Error> {
        let line = Some(m.ident.span().start().line);
        if let Some(p) = path_attr(&m.attrs) {
            if self.inline_depth > 0 {
                return Err(Error::new(
                    &self.path,
                    line,
                    format!("`#[path]` on `mod {name};` inside an inline module is not supported"),
                ));
            }
            let file = self.path.parent().unwrap_or(Path::new(".")).join(p);
            let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
            return Ok((file, dir));
        }
        let flat = self.mod_dir.join(format!("{name}.rs"));
        let nested = self.mod_dir.join(name).join("mod.rs");
        match (flat.is_file(), nested.is_file()) {
            (true, false) => Ok((flat, self.mod_dir.join(name))),
            (false, true) => Ok((nested, self.mod_dir.join(name))),
            (true, true) => Err(Error::new(
                &self.path,
                line,
                format!(
                    "`mod {name};` has two files: {} and {}",
                    flat.display(),
                    nested.display()
                ),
            )),
            (false, false) => Err(Error::new(
                &self.path,
                line,
                format!(
                    "`mod {name};` has no file: neither {} nor {} exists",
                    flat.display(),
                    nested.display()
                ),
            )),
        }
    }

    fn test_module(&mut self, m: &ItemMod, name: &str) {
        if m.content.is_none() {
            let paths = match path_attr(&m.attrs) {
                Some(p) => vec![self.path.parent().unwrap_or(Path::new(".")).join(p)],
                None => vec![
                    self.mod_dir.join(format!("{name}.rs")),
                    self.mod_dir.join(name),
                ],
            };
            self.krate.test_paths.extend(paths);
        }
    }

    fn inline_module(&mut self, m: &ItemMod, name: String, items: &[Item]) {
        let child = self.krate.new_module(self.file, Some(self.module));
        self.current().children.insert(name.clone(), child);
        let saved_module = std::mem::replace(&mut self.module, child);
        let child_dir = self.mod_dir.join(name);
        let saved_dir = std::mem::replace(&mut self.mod_dir, child_dir);
        self.inline_depth += 1;
        for attr in &m.attrs {
            self.visit_attribute(attr);
        }
        for item in items {
            self.visit_item(item);
        }
        self.inline_depth -= 1;
        self.module = saved_module;
        self.mod_dir = saved_dir;
    }

    fn file_module(&mut self, m: &ItemMod, name: String) {
        let loaded = self
            .child_file(m, &name)
            .and_then(|(file, dir)| self.krate.load_file(&file, Some(self.module), dir));
        match loaded {
            Ok(child) => {
                self.current().children.insert(name, child);
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Records the names and paths of `use prefix::tree`.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &UseTree) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(ident(&p.ident));
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            UseTree::Name(n) => {
                let name = ident(&n.ident);
                self.import(prefix, &name, Some(&name), n.ident.span().start().line);
            }
            UseTree::Rename(r) => {
                let rename = ident(&r.rename);
                let bound = (rename != "_").then_some(rename.as_str());
                self.import(prefix, &ident(&r.ident), bound, r.ident.span().start().line);
            }
            UseTree::Glob(g) => {
                let line = g.star_token.span.start().line;
                self.current().globs.push(prefix.clone());
                self.add_ref(prefix.clone(), line, true);
            }
            UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    /// `use prefix::name as bound` (`bound` is `None` for `as _`).
    fn import(&mut self, prefix: &[String], name: &str, bound: Option<&str>, line: usize) {
        let mut path = prefix.to_vec();
        // `use a::b::{self}` imports `b`.
        let bound = match (name, bound) {
            ("self", Some("self")) => prefix.last().map(String::as_str),
            (_, bound) => bound,
        };
        if name != "self" {
            path.push(name.to_string());
        }
        if path.is_empty() {
            return;
        }
        if let Some(bound) = bound {
            let bound = bound.to_string();
            self.current()
                .imports
                .entry(bound)
                .or_default()
                .push(path.clone());
        }
        self.add_ref(path, line, true);
    }

    fn define(&mut self, name: String) {
        self.current().items.insert(name);
    }

    fn define_type(&mut self, name: String) {
        self.current().types.insert(name);
    }

    fn scan(&mut self, tokens: TokenStream) {
        let mut found = Vec::new();
        scan_tokens(tokens, &mut found);
        for (segments, line) in found {
            self.add_ref(segments, line, false);
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if self.error.is_some() {
            return;
        }
        match item {
            Item::Const(i) => self.define(ident(&i.ident)),
            Item::Fn(i) => self.define(ident(&i.sig.ident)),
            Item::Static(i) => self.define(ident(&i.ident)),
            Item::Enum(i) => self.define_type(ident(&i.ident)),
            Item::Struct(i) => self.define_type(ident(&i.ident)),
            Item::Trait(i) => self.define_type(ident(&i.ident)),
            Item::TraitAlias(i) => self.define_type(ident(&i.ident)),
            Item::Type(i) => self.define_type(ident(&i.ident)),
            Item::Union(i) => self.define_type(ident(&i.ident)),
            Item::Macro(i) => {
                if let Some(name) = &i.ident {
                    self.define(ident(name));
                    if is_macro_export(&i.attrs) {
                        self.krate.modules[0].items.insert(ident(name));
                    }
                }
            }
            Item::ForeignMod(i) => {
                for foreign in &i.items {
                    match foreign {
                        syn::ForeignItem::Fn(f) => self.define(ident(&f.sig.ident)),
                        syn::ForeignItem::Static(s) => self.define(ident(&s.ident)),
                        syn::ForeignItem::Type(t) => self.define_type(ident(&t.ident)),
                        _ => {}
                    }
                }
            }
            Item::Use(u) => {
                for attr in &u.attrs {
                    self.visit_attribute(attr);
                }
                // `use ::name` is an outside crate.
                if u.leading_colon.is_none() {
                    self.use_tree(&mut Vec::new(), &u.tree);
                }
                return;
            }
            _ => {}
        }
        visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast ItemMod) {
        let name = ident(&m.ident);
        if is_test_only(&m.attrs) {
            self.test_module(m, &name);
            return;
        }
        match &m.content {
            Some((_, items)) => self.inline_module(m, name, items),
            None => {
                for attr in &m.attrs {
                    self.visit_attribute(attr);
                }
                self.file_module(m, name)
            }
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none()
            && let Some(first) = path.segments.first()
        {
            let segments = path.segments.iter().map(|s| ident(&s.ident)).collect();
            self.add_ref(segments, first.ident.span().start().line, false);
        }
        visit::visit_path(self, path);
    }

    // `pub(crate)`, `pub(super)`: who may see an item, not a path it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        self.scan(mac.tokens.clone());
    }

    fn visit_attribute(&mut self, attr: &'ast Attribute) {
        if attr.path().is_ident("doc") {
            return;
        }
        visit::visit_attribute(self, attr);
        match &attr.meta {
            Meta::List(list) => self.scan(list.tokens.clone()),
            Meta::NameValue(nv) => {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
                {
                    let line = s.span().start().line;
                    if let Some(segments) = path_in_string(&s.value()) {
                        self.add_ref(segments, line, false);
                    }
                }
            }
            Meta::Path(_) => {}
        }
    }
}

/// An identifier as written, without `r#`.
pub fn ident(id: &proc_macro2::Ident) -> String {
    let s = id.to_string();
    s.strip_prefix("r#").map(str::to_string).unwrap_or(s)
}

/// A string that is a path of two segments or more (`"crate::settings::default"`, as
/// serde's `default = ".."` takes), as segments.
fn path_in_string(text: &str) -> Option<Vec<String>> {
    let path = syn::parse_str::<syn::Path>(text).ok()?;
    (path.leading_colon.is_none() && path.segments.len() >= 2)
        .then(|| path.segments.iter().map(|s| ident(&s.ident)).collect())
}

/// The paths of two segments or more in tokens no parser reads as code (the inside of
/// a macro call or an attribute): `a::b::c` sequences and strings that hold one, each
/// with its line. `$crate::x` counts as `crate::x`; `::x` (an outside crate) and
/// `.a` (a field) do not count.
pub fn scan_tokens(tokens: TokenStream, out: &mut Vec<(Vec<String>, usize)>) {
    let tts: Vec<TokenTree> = tokens.into_iter().collect();
    let is_colon = |t: Option<&TokenTree>, spacing: Option<Spacing>| match t {
        Some(TokenTree::Punct(p)) => p.as_char() == ':' && spacing.is_none_or(|s| p.spacing() == s),
        _ => false,
    };
    let mut i = 0;
    while i < tts.len() {
        match &tts[i] {
            TokenTree::Group(g) => scan_tokens(g.stream(), out),
            TokenTree::Literal(lit) => {
                if let Ok(s) = syn::parse_str::<syn::LitStr>(&lit.to_string())
                    && let Some(segments) = path_in_string(&s.value())
                {
                    out.push((segments, lit.span().start().line));
                }
            }
            TokenTree::Ident(id) => {
                let after_colons = i >= 1 && is_colon(tts.get(i - 1), None);
                let after_dot =
                    i >= 1 && matches!(&tts[i - 1], TokenTree::Punct(p) if p.as_char() == '.');
                let mut segments = vec![ident(id)];
                let mut j = i + 1;
                while is_colon(tts.get(j), Some(Spacing::Joint)) && is_colon(tts.get(j + 1), None) {
                    match tts.get(j + 2) {
                        Some(TokenTree::Ident(next)) => {
                            segments.push(ident(next));
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if !after_colons && !after_dot && segments.len() >= 2 {
                    out.push((segments, id.span().start().line));
                }
                i = j;
                continue;
            }
            TokenTree::Punct(_) => {}
        }
        i += 1;
    }
}
