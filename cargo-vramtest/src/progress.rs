//! What the user sees while cargo builds and tests run: an indicatif bar on a terminal,
//! one plain line per event otherwise (CI logs). Both go to stderr, so stdout holds
//! only the results (and only JSON with `--message-format json`).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

pub enum Progress {
    /// A live bar on a terminal.
    Bar(ProgressBar),
    /// Plain lines on stderr.
    Lines,
}

impl Progress {
    /// A bar when stderr is a terminal, lines otherwise.
    pub fn new() -> Progress {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(120));
            Progress::Bar(bar)
        } else {
            Progress::Lines
        }
    }

    pub fn is_bar(&self) -> bool {
        matches!(self, Progress::Bar(_))
    }

    /// A spinner with a message (the build).
    pub fn spin(&self, message: impl Into<String>) {
        if let Progress::Bar(bar) = self {
            bar.set_style(
                ProgressStyle::with_template("{spinner:.cyan} {msg}").expect("a valid template"),
            );
            bar.set_message(message.into());
        }
    }

    /// A bar of `len` steps (the tests).
    pub fn start(&self, len: u64, prefix: &str) {
        if let Progress::Bar(bar) = self {
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix:>10.cyan.bold} [{bar:25}] {pos}/{len} {elapsed} {wide_msg}",
                )
                .expect("a valid template")
                .progress_chars("=> "),
            );
            bar.set_prefix(prefix.to_owned());
            bar.set_length(len);
            bar.set_position(0);
        }
    }

    pub fn set_message(&self, message: impl Into<String>) {
        if let Progress::Bar(bar) = self {
            bar.set_message(message.into());
        }
    }

    pub fn inc(&self) {
        if let Progress::Bar(bar) = self {
            bar.inc(1);
        }
    }

    /// A line above the bar, or on stderr.
    pub fn println(&self, line: impl AsRef<str>) {
        match self {
            Progress::Bar(bar) => bar.suspend(|| anstream::eprintln!("{}", line.as_ref())),
            Progress::Lines => anstream::eprintln!("{}", line.as_ref()),
        }
    }

    /// A line shown only without a bar (what the bar already shows on a terminal).
    pub fn log(&self, line: impl AsRef<str>) {
        if let Progress::Lines = self {
            anstream::eprintln!("{}", line.as_ref());
        }
    }

    pub fn finish(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}
