//! The book's reference pages that are generated from the code, so that they cannot go
//! stale: the command line (clap's long help of every subcommand), the exit codes and
//! the environment variables. The test compares each page under
//! `docs/src/reference/generated/` with what the code says today and fails, naming the
//! file and the command that rewrites it; with `VRAMTEST_UPDATE_BOOK=1` it writes them.
//!
//! It also checks the hand-written pages it cannot generate against the code: every
//! key of the `vramtest` metadata tables is documented on the metadata page.

use crate::cli::{Cli, EXIT_CODES, MEASURE_EXIT_CODES, MERGE_EXIT_CODES};
use clap::CommandFactory;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What rewrites the generated pages.
const REGENERATE: &str =
    "VRAMTEST_UPDATE_BOOK=1 cargo test -p cargo-vramtest --bin cargo-vramtest book";

/// The width clap wraps the help at, whatever the terminal.
const HELP_WIDTH: usize = 100;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cargo-vramtest sits in the workspace")
        .to_path_buf()
}

fn generated_dir() -> PathBuf {
    repo().join("docs/src/reference/generated")
}

/// The header of every generated page: where it comes from and how to rewrite it.
fn header(from: &str) -> String {
    format!(
        "<!-- Generated from {from} by cargo-vramtest/src/book.rs: do not edit.\n     Rewrite with `{REGENERATE}`. -->\n"
    )
}

/// A fenced text block; the help holds no fence of its own.
fn text_block(out: &mut String, text: &str) {
    out.push_str("```text\n");
    out.push_str(text.trim_end());
    out.push_str("\n```\n");
}

/// `cargo vramtest --help`, then `--help` of each subcommand, as clap prints them.
fn cli_page() -> String {
    let mut cmd = Cli::command().term_width(HELP_WIDTH);
    cmd.build();
    let mut out = header("clap's long help (cargo-vramtest/src/cli.rs)");
    out.push_str("\n### cargo vramtest\n\n");
    text_block(&mut out, &cmd.render_long_help().to_string());
    // clap's own `help` subcommand says nothing `--help` does not.
    for sub in cmd.get_subcommands_mut().filter(|s| s.get_name() != "help") {
        let name = sub.get_name().to_owned();
        let _ = write!(out, "\n### cargo vramtest {name}\n\n");
        text_block(&mut out, &sub.render_long_help().to_string());
    }
    out
}

/// The exit codes of `run` (and every other command), `merge` and `measure`.
fn exit_codes_page() -> String {
    let mut out = header("the exit codes of cargo-vramtest/src/cli.rs");
    for (title, codes) in [
        ("cargo vramtest, run and every other command", EXIT_CODES),
        ("cargo vramtest merge", MERGE_EXIT_CODES),
        ("cargo vramtest measure", MEASURE_EXIT_CODES),
    ] {
        let _ = write!(out, "\n### {title}\n\n");
        let body = codes.strip_prefix("Exit codes:\n").unwrap_or(codes);
        text_block(&mut out, body);
    }
    out
}

/// The `///` comment right above the first line of the file at `path` (in the
/// repository) that starts with `item`, as markdown.
fn doc_above(path: &str, item: &str) -> Vec<String> {
    let source = std::fs::read_to_string(repo().join(path)).unwrap();
    let lines: Vec<&str> = source.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with(item))
        .unwrap_or_else(|| panic!("{path} has no line starting with `{item}`"));
    let start = lines[..at]
        .iter()
        .rposition(|l| !l.trim_start().starts_with("///"))
        .map_or(0, |i| i + 1);
    lines[start..at]
        .iter()
        .map(|line| {
            let text = line.trim_start().trim_start_matches("///");
            text.strip_prefix(' ').unwrap_or(text).to_owned()
        })
        .collect()
}

/// The options of `#[vramtest]`, as the attribute's own documentation lists them.
fn attributes_page() -> String {
    let doc = doc_above("vramtest-macros/src/lib.rs", "#[proc_macro_attribute]");
    let mut out = header("the documentation of `#[vramtest]` (vramtest-macros/src/lib.rs)");
    out.push('\n');
    for line in doc {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The classification rule, as `ledger::classify` documents the code that applies it:
/// its numbered list, without the first line that names it.
fn classification_page() -> String {
    let doc = doc_above("vramtest-model/src/ledger.rs", "pub fn classify(");
    let list = doc
        .iter()
        .position(|l| l.starts_with("1. "))
        .expect("ledger::classify's comment lists the rule from `1. `");
    let mut out = header("the documentation of `ledger::classify` (vramtest-model/src/ledger.rs)");
    out.push('\n');
    for line in &doc[list..] {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// One environment variable: its name and the doc comment of its constant.
#[derive(Debug, PartialEq)]
struct Variable {
    name: String,
    doc: String,
}

/// Every `pub const X: &str = "NAME";` of `source` with its `///` comment, in order.
fn variables(source: &str) -> Vec<Variable> {
    let mut found = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    for line in source.lines() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix("///") {
            doc.push(text.trim());
            continue;
        }
        if let Some(rest) = line.strip_prefix("pub const ")
            && let Some((_, value)) = rest.split_once(": &str = \"")
            && let Some(name) = value.strip_suffix("\";")
        {
            found.push(Variable {
                name: name.to_owned(),
                doc: doc.join(" "),
            });
        }
        doc.clear();
    }
    found
}

/// The quoted strings of the `POOL_VARIABLES` array in `source`.
fn pool_variables(source: &str) -> Vec<String> {
    let start = source
        .find("const POOL_VARIABLES")
        .expect("src/harness/child/threads.rs defines POOL_VARIABLES");
    let list = &source[start..];
    let list = &list[list.find('=').unwrap()..list.find("];").unwrap()];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The variables `HarnessEnv` reads (vramtest-model/src/env.rs) and the thread-pool
/// variables the harness sets for every measured process.
fn environment_page() -> String {
    let read = |path: &str| {
        std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let vars = variables(&read("vramtest-model/src/env.rs"));
    assert!(
        vars.iter().any(|v| v.name == "VRAMTEST_UPDATE"),
        "no VRAMTEST_UPDATE among the constants of vramtest-model/src/env.rs: {vars:?}"
    );
    let mut out = header("vramtest-model/src/env.rs and src/harness/child/threads.rs");
    out.push_str(
        "\nEvery variable `HarnessEnv` reads, as its constant documents it. `cargo vramtest` \
         sets those it decides (from its flags and the metadata) for each test binary; \
         under plain `cargo test` the harness reads your environment.\n\n\
         | variable | what it does |\n| --- | --- |\n",
    );
    for v in &vars {
        // Intra-doc links (`[`Settings::to_json`]`) read as plain code in the book.
        let doc = v
            .doc
            .replace("[`", "`")
            .replace("`]", "`")
            .replace('|', "\\|");
        let _ = writeln!(out, "| `{}` | {doc} |", v.name);
    }
    let pools = pool_variables(&read("src/harness/child/threads.rs"));
    let names: Vec<String> = pools.iter().map(|p| format!("`{p}`")).collect();
    let _ = write!(
        out,
        "\nSet by the harness for every measured process, to its thread count (2, or the \
         attribute's `threads = N`), whatever your environment says: {}.\n",
        names.join(", ")
    );
    out
}

/// Each generated page: its file name and its contents.
fn pages() -> Vec<(&'static str, String)> {
    vec![
        ("cli.md", cli_page()),
        ("exit-codes.md", exit_codes_page()),
        ("environment.md", environment_page()),
        ("attributes.md", attributes_page()),
        ("classification.md", classification_page()),
    ]
}

#[test]
fn book_reference_pages_are_current() {
    let dir = generated_dir();
    let update = std::env::var_os("VRAMTEST_UPDATE_BOOK").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (name, contents) in pages() {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &contents).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != contents {
            stale.push(format!("docs/src/reference/generated/{name}"));
        }
    }
    assert!(
        stale.is_empty(),
        "the book's generated reference differs from the code: {}; rewrite with `{REGENERATE}` and commit",
        stale.join(", ")
    );
}

#[test]
fn the_metadata_page_documents_every_key() {
    let settings = std::fs::read_to_string(repo().join("vramtest-model/src/settings.rs")).unwrap();
    // The keys are the fields of the table serde reads (each key is named there once).
    let table = settings
        .split_once("pub struct SettingsTable {")
        .and_then(|(_, rest)| rest.split_once("\n}\n"))
        .map(|(body, _)| body)
        .expect("vramtest-model/src/settings.rs defines SettingsTable");
    let keys: Vec<&str> = table
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .collect();
    assert!(keys.len() >= 8, "SettingsTable's keys: {keys:?}");
    let page = std::fs::read_to_string(repo().join("docs/src/reference/metadata.md")).unwrap();
    let missing: Vec<&str> = keys
        .into_iter()
        .filter(|k| !page.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/src/reference/metadata.md does not document {missing:?}"
    );
}

#[test]
fn the_metadata_example_is_read_as_the_harness_reads_it() {
    let path = repo().join("docs/src/reference/metadata-example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let doc: toml::Table = toml::from_str(&text).unwrap();
    let table = &doc["workspace"]["metadata"]["vramtest"];
    let json = serde_json::to_value(table).unwrap();
    let settings = vramtest_model::settings::Settings::parse(&json)
        .unwrap_or_else(|e| panic!("docs/src/reference/metadata-example.toml: {e}"));
    assert_eq!(settings.iterations, Some(3), "{settings:?}");
}

#[test]
fn variables_are_read_with_their_comments() {
    let source = "/// `A=1`: a.\n/// More.\npub const A: &str = \"VRAMTEST_A\";\nconst B: u8 = 1;\n/// c\npub const C: &str = \"C\";\n";
    assert_eq!(
        variables(source),
        [
            Variable {
                name: "VRAMTEST_A".into(),
                doc: "`A=1`: a. More.".into()
            },
            Variable {
                name: "C".into(),
                doc: "c".into()
            }
        ]
    );
    assert_eq!(
        pool_variables("pub(crate) const POOL_VARIABLES: [&str; 2] = [\n \"X\",\n \"Y\",\n];"),
        ["X", "Y"]
    );
}
