//! Both checks over source folders.

use std::path::{Path, PathBuf};

use crate::cycles::{Cycle, Edge, cycles, edges};
use crate::error::{Error, parse_file};
use crate::layers::{ModuleCycle, module_cycles};
use crate::long::{LongFn, long_functions};
use crate::tree::Crate;

/// What the checks found.
#[derive(Debug, Default)]
pub struct Findings {
    /// Import cycles, per crate.
    pub cycles: Vec<Cycle>,
    /// Cycles between sibling modules, each with everything under it, per crate.
    pub module_cycles: Vec<ModuleCycle>,
    /// Every use of one file by another (the first path that makes it), per crate.
    pub edges: Vec<Edge>,
    /// Functions over the limit outside tests, longest first.
    pub long: Vec<LongFn>,
}

/// Checks the crates whose source folders are `dirs` (each holds `lib.rs`, `main.rs`
/// or `bin/`): their import cycles, and their functions over `max_lines` lines. Every
/// `.rs` file under a folder is read for long functions, except those of test-only
/// modules.
pub fn check(dirs: &[PathBuf], max_lines: usize) -> Result<Findings, Error> {
    let mut findings = Findings::default();
    for dir in dirs {
        let roots = crate_roots(dir)?;
        let mut test_paths = Vec::new();
        for root in &roots {
            let krate = Crate::load(root)?;
            findings.cycles.extend(cycles(&krate));
            findings.module_cycles.extend(module_cycles(&krate));
            findings
                .edges
                .extend(
                    edges(&krate)
                        .into_iter()
                        .map(|((from, to), (line, path))| Edge {
                            from: krate.files[from].clone(),
                            to: krate.files[to].clone(),
                            line,
                            path,
                        }),
                );
            test_paths.extend(krate.test_paths);
        }
        for file in rust_files(dir)? {
            if test_paths.iter().any(|t| file.starts_with(t)) {
                continue;
            }
            findings
                .long
                .extend(long_functions(&file, &parse_file(&file)?, max_lines));
        }
    }
    findings
        .long
        .sort_by(|a, b| (b.lines, &a.file, a.line).cmp(&(a.lines, &b.file, b.line)));
    Ok(findings)
}

/// The crate roots of a source folder: `lib.rs`, `main.rs`, `bin/*.rs`, `bin/*/main.rs`.
fn crate_roots(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    if !dir.is_dir() {
        return Err(Error::new(dir, None, "not a folder"));
    }
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect();
    let bin = dir.join("bin");
    if bin.is_dir() {
        for entry in read_dir(&bin)? {
            if entry.extension().is_some_and(|e| e == "rs") {
                roots.push(entry);
            } else if entry.join("main.rs").is_file() {
                roots.push(entry.join("main.rs"));
            }
        }
    }
    if roots.is_empty() {
        return Err(Error::new(
            dir,
            None,
            "no crate here: no lib.rs, main.rs or bin/",
        ));
    }
    Ok(roots)
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::new(dir, None, format!("cannot list: {e}")))?;
    let mut out = entries
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::new(dir, None, format!("cannot list: {e}")))?;
    out.sort();
    Ok(out)
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for entry in read_dir(dir)? {
        if entry.is_dir() {
            out.extend(rust_files(&entry)?);
        } else if entry.extension().is_some_and(|e| e == "rs") {
            out.push(entry);
        }
    }
    Ok(out)
}
