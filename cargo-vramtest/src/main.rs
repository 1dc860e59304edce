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
//! ```
//!
//! Exit codes: 0 every test passed; 1 a memory regression, a failing or crashing
//! test, a missing snapshot in check mode, or a new result pending review; 2 a usage,
//! configuration or snapshot-format error, a filter that matches no test, or a report
//! that could not be written (after the table and annotations); 101 the build failed.
//!
//! `--message-format json` prints one JSON object per line (`"format_version": 1`):
//! each test's report (`"type": "test"`), then a summary (`"type": "summary"`); see
//! [`output::json`]. `--junit PATH` and `--markdown PATH` write reports; under GitHub
//! Actions, failures become `::error` annotations at the test's line and the markdown
//! report is appended to the job summary.
//!
//! Configuration: `[workspace.metadata.vramtest]` and `[package.metadata.vramtest]`
//! (keys `iterations`, `device`, `budget`, `tolerance`, `limits`); see [`config`].

mod build;
mod case;
mod cli;
mod commands;
mod config;
mod device;
mod discover;
mod error;
mod filter;
mod output;
mod partition;
mod progress;
mod recorded;
mod runner;
mod snapshots;

use cli::{Cli, ColorArg, Command};
use commands::{accept, list, review, run, show};
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
    }
}
