//! # cargo vramtest
//!
//! Runs the `#[vramtest]` peak-memory tests of a workspace and reports them: discovers
//! the test targets that use vramtest (`harness = false` targets of packages that
//! depend on `vramtest`), builds them with `cargo test --no-run`, runs every test in
//! a process of its own, and prints one table for the run, then one block per failure.
//!
//! ```text
//! cargo vramtest [run] [OPTIONS] [FILTERS]...   build, run and judge (the default)
//! cargo vramtest list [--partition hash:1/2]    tests, targets, packages, snapshots
//! cargo vramtest review                         accept / reject / skip each .snap.new
//! cargo vramtest accept [FILTERS]...            .snap.new → .snap
//! cargo vramtest reject [FILTERS]...            delete .snap.new
//! cargo vramtest show TEST                      one snapshot's tables
//! cargo vramtest measure TEST --at AXIS=N,..    one point measured against its prediction
//! cargo vramtest merge SHARD.jsonl...           the shards' JSON reports as one run's reports
//! ```
//!
//! This file parses the command line ([`cli`]) and hands it to the subcommand's module
//! in [`commands`]; the exit codes are [`cli::EXIT_CODES`], the JSON lines are
//! described in [`output::json`], the configuration keys in `vramtest_model::settings`.
//!
//! For users: the book, <https://cargo-vramtest.github.io/cargo-vramtest/>, has every command, flag, exit code and
//! output format ("CLI and exit codes", generated from this crate's `--help`).

#[cfg(test)]
mod book;
mod build;
mod case;
mod cli;
mod commands;
mod device;
mod discover;
mod error;
/// Scripts the unit tests write and run (fake test binaries), free of the "Text file
/// busy" race; shared with the end-to-end tests.
#[cfg(test)]
#[path = "../../tests/common/executable.rs"]
mod executable;
mod filter;
mod output;
mod partition;
mod progress;
mod recorded;
mod runner;
mod shards;
mod snapshots;

use cli::{Cli, ColorArg, Command};
use commands::{accept, list, measure, merge, review, run, show};
use error::Result;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::from_env();
    anstream::ColorChoice::write_global(color_choice(cli.color));
    match dispatch(cli.into_command()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let red = anstyle::Style::new()
                .fg_color(Some(anstyle::AnsiColor::Red.into()))
                .bold();
            anstream::eprintln!("{red}error{red:#}: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// `--color`, else `CARGO_TERM_COLOR`, else auto (which honours `NO_COLOR` and colors
/// only a terminal).
fn color_choice(flag: Option<ColorArg>) -> anstream::ColorChoice {
    let from_env = || match std::env::var("CARGO_TERM_COLOR").as_deref() {
        Ok("always") => Some(ColorArg::Always),
        Ok("never") => Some(ColorArg::Never),
        _ => None,
    };
    match flag.or_else(from_env) {
        Some(ColorArg::Always) => anstream::ColorChoice::Always,
        Some(ColorArg::Never) => anstream::ColorChoice::Never,
        Some(ColorArg::Auto) | None => anstream::ColorChoice::Auto,
    }
}

fn dispatch(command: Command) -> Result<u8> {
    match command {
        Command::Run(args) => run::execute(&args),
        Command::List(args) => list::execute(&args),
        Command::Review(args) => review::execute(&args),
        Command::Accept(args) => accept::accept(&args),
        Command::Reject(args) => accept::reject(&args),
        Command::Show(args) => show::execute(&args),
        Command::Measure(args) => measure::execute(&args),
        Command::Merge(args) => merge::execute(&args),
    }
}
