//! What the user sees while cargo builds and tests run: an indicatif bar on a terminal,
//! plain lines otherwise (CI logs). Both go to stderr, so stdout holds only the results
//! (and only JSON with `--message-format json`).
//!
//! While tests run, progress counts points, as nextest counts tests: every test is one
//! point until its harness says how many its sweep has (a line in its report pipe,
//! [`PointProgress`]), and a point is done when its process ends. On a terminal the bar
//! shows points done out of the total, the time elapsed and an estimate of the time
//! left; elsewhere a `PROGRESS` line says the same at every tenth of the points and at
//! least every 30 seconds. A point running a minute or more is said (`SLOW`), once a
//! minute. [`Tracker`] decides all of it from the events and a clock it is given.

mod tracker;

pub use tracker::{Event, Tracker};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use vramtest_model::progress::PointProgress;

/// How progress is shown.
enum Mode {
    /// A live bar on a terminal.
    Bar(ProgressBar),
    /// Plain lines on stderr.
    Lines,
}

pub struct Progress {
    mode: Mode,
    /// The thread that tracks the tests' points while they run, and how to reach it.
    tracking: Mutex<Option<(Sender<Event>, JoinHandle<()>)>>,
}

/// Where the readers of the tests' report pipes send the points' progress; a
/// [`Live::none`] sends nowhere.
#[derive(Clone)]
pub struct Live(Option<Sender<Event>>);

impl Live {
    /// Progress nobody shows.
    #[cfg(test)]
    pub fn none() -> Live {
        Live(None)
    }

    /// A point of the test `name` of the binary `binary_id` (`package::target`).
    pub fn point(&self, binary_id: &str, progress: PointProgress) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(Event::Point {
                key: format!("{binary_id}::{}", progress.test),
                point: progress.point,
                total: progress.total,
                state: progress.state,
            });
        }
    }
}

impl Progress {
    /// A bar when stderr is a terminal, lines otherwise.
    pub fn new() -> Progress {
        let mode = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(120));
            Mode::Bar(bar)
        } else {
            Mode::Lines
        };
        Progress {
            mode,
            tracking: Mutex::new(None),
        }
    }

    pub fn is_bar(&self) -> bool {
        matches!(self.mode, Mode::Bar(_))
    }

    /// A spinner with a message (the build).
    pub fn spin(&self, message: impl Into<String>) {
        if let Mode::Bar(bar) = &self.mode {
            bar.set_style(
                ProgressStyle::with_template("{spinner:.cyan} {msg}").expect("a valid template"),
            );
            bar.set_message(message.into());
        }
    }

    /// Starts tracking the points of the tests `keys` (`package::target::test`, those
    /// that run): a bar of points, or `PROGRESS` lines.
    pub fn start(&self, keys: Vec<String>, prefix: &str) {
        if let Mode::Bar(bar) = &self.mode {
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix:>10.cyan.bold} [{bar:25}] {pos}/{len} points {elapsed} {wide_msg}",
                )
                .expect("a valid template")
                .progress_chars("=> "),
            );
            bar.set_prefix(prefix.to_owned());
            bar.set_length(keys.len() as u64);
            bar.set_position(0);
        }
        let (tx, rx) = channel();
        let bar = match &self.mode {
            Mode::Bar(bar) => Some(bar.clone()),
            Mode::Lines => None,
        };
        let tracker = Tracker::new(keys);
        let thread = std::thread::spawn(move || track(tracker, &rx, bar));
        let mut tracking = self.tracking.lock().unwrap_or_else(|e| e.into_inner());
        *tracking = Some((tx, thread));
    }

    /// Where the report pipes' readers send the points' progress.
    pub fn live(&self) -> Live {
        let tracking = self.tracking.lock().unwrap_or_else(|e| e.into_inner());
        Live(tracking.as_ref().map(|(tx, _)| tx.clone()))
    }

    pub fn set_message(&self, message: impl Into<String>) {
        if let Mode::Bar(bar) = &self.mode {
            bar.set_message(message.into());
        }
    }

    /// The test `key` ended: every point of it is done.
    pub fn test_ended(&self, key: String) {
        if let Some((tx, _)) = &*self.tracking.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = tx.send(Event::TestEnded { key });
        }
    }

    /// A line above the bar, or on stderr.
    pub fn println(&self, line: impl AsRef<str>) {
        match &self.mode {
            Mode::Bar(bar) => bar.suspend(|| anstream::eprintln!("{}", line.as_ref())),
            Mode::Lines => anstream::eprintln!("{}", line.as_ref()),
        }
    }

    /// A line shown only without a bar (what the bar already shows on a terminal).
    pub fn log(&self, line: impl AsRef<str>) {
        if let Mode::Lines = self.mode {
            anstream::eprintln!("{}", line.as_ref());
        }
    }

    /// Ends the tracking (its last lines said) and the bar.
    pub fn finish(&self) {
        let tracking = self
            .tracking
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((tx, thread)) = tracking {
            let _ = tx.send(Event::Finish);
            drop(tx);
            let _ = thread.join();
        }
        if let Mode::Bar(bar) = &self.mode {
            bar.finish_and_clear();
        }
    }
}

/// The tracking thread: applies the events as they come, and at least once a second
/// says what is due, until [`Event::Finish`] (or every sender is gone).
fn track(mut tracker: Tracker, rx: &Receiver<Event>, bar: Option<ProgressBar>) {
    let start = Instant::now();
    loop {
        let event = rx.recv_timeout(Duration::from_secs(1));
        let now = start.elapsed();
        let finished = match event {
            Ok(Event::Finish) | Err(RecvTimeoutError::Disconnected) => true,
            Ok(event) => {
                tracker.apply(now, event);
                false
            }
            Err(RecvTimeoutError::Timeout) => false,
        };
        let lines = tracker.due(now);
        match &bar {
            Some(bar) => {
                let (done, total) = tracker.counts();
                bar.set_length(total);
                bar.set_position(done);
                bar.set_message(tracker.estimate(now));
                // On a terminal only the slow points get a line; the bar is the rest.
                for line in lines.iter().filter(|l| l.slow) {
                    bar.suspend(|| anstream::eprintln!("{}", line.text));
                }
            }
            None => {
                for line in &lines {
                    anstream::eprintln!("{}", line.text);
                }
            }
        }
        if finished {
            return;
        }
    }
}
