//! `vramtest-archcheck [--max-lines N] SRC_DIR...`: prints the import cycles between
//! the modules of each crate and the functions over N lines (100 by default) outside
//! tests; exits 1 if there is any, 2 if a file cannot be read. `--edges` also prints
//! every use of one file by another, with the path that makes it.

use std::path::PathBuf;
use std::process::ExitCode;

use vramtest_archcheck::check;

const USAGE: &str = "usage: vramtest-archcheck [--max-lines N] [--edges] SRC_DIR...";

fn main() -> ExitCode {
    let mut max_lines = 100;
    let mut show_edges = false;
    let mut dirs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--max-lines" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => max_lines = n,
                None => return usage("--max-lines takes a number of lines"),
            },
            "--edges" => show_edges = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            flag if flag.starts_with('-') => return usage(&format!("unknown option {flag}")),
            dir => dirs.push(PathBuf::from(dir)),
        }
    }
    if dirs.is_empty() {
        return usage("no source folder given");
    }
    let findings = match check(&dirs, max_lines) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if show_edges {
        for e in &findings.edges {
            println!("{e}");
        }
    }
    let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let shown = shown.join(" ");
    for cycle in &findings.cycles {
        let files: Vec<String> = cycle
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        println!("cycle: {}", files.join(" <-> "));
        for edge in &cycle.edges {
            println!("  {edge}");
        }
    }
    println!("{} import cycle(s) in {shown}", findings.cycles.len());
    for cycle in &findings.module_cycles {
        println!("module cycle: {}", cycle.modules.join(" <-> "));
        for edge in &cycle.edges {
            println!("  {edge}");
        }
    }
    println!(
        "{} cycle(s) between modules in {shown}",
        findings.module_cycles.len()
    );
    for f in &findings.long {
        println!(
            "{} lines: {}:{} fn {}",
            f.lines,
            f.file.display(),
            f.line,
            f.name
        );
    }
    println!(
        "{} function(s) over {max_lines} lines in {shown}",
        findings.long.len()
    );
    if findings.cycles.is_empty() && findings.module_cycles.is_empty() && findings.long.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("error: {problem}\n{USAGE}");
    ExitCode::from(2)
}
