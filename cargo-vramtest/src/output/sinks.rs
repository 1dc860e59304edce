//! The one seam between a run and its reports: [`sinks`] turns the command line's
//! report flags into a list of [`Sink`]s, and [`deliver`] hands the run's
//! [`RunView`] to each in turn. A format is a module of its own with a pure
//! `render(&RunView) -> String`; a report written to a file needs no sink of its own
//! ([`ToFile`]).

use super::{RunView, Sink};
use crate::cli::{MessageFormat, ReportArgs};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The reports the flags ask for, in the order they are written: the message format
/// on stdout, the problems on stderr, the report files, then, under GitHub Actions,
/// the annotations and the job summary.
pub fn sinks(args: &ReportArgs) -> Vec<Box<dyn Sink>> {
    let mut sinks: Vec<Box<dyn Sink>> = match args.message_format {
        MessageFormat::Human => vec![Box::new(super::table::Terminal)],
        MessageFormat::Json => vec![Box::new(super::json::Stdout)],
    };
    sinks.push(Box::new(Problems));
    sinks.extend(ToFile::boxed(&args.junit, super::junit::render));
    sinks.extend(ToFile::boxed(&args.markdown, super::markdown::render));
    sinks.extend(ToFile::boxed(&args.html, super::html::render));
    if super::github::active() {
        // stdout is for JSON lines in json mode; the runner reads both streams.
        let on_stdout = args.message_format == MessageFormat::Human;
        sinks.push(Box::new(super::github::Annotations { on_stdout }));
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
            let render = super::markdown::render;
            sinks.push(Box::new(AppendTo {
                path: path.into(),
                render,
            }));
        }
    }
    sinks
}

/// Writes every report of `view`, then says on stderr which could not be written.
/// Returns the exit code: the run's, or 2 when a report is missing.
pub fn deliver(view: &RunView, sinks: &[Box<dyn Sink>]) -> u8 {
    let unwritten: Vec<Error> = sinks.iter().filter_map(|s| s.write(view).err()).collect();
    // A report that cannot be written does not hide the verdict: the table and the
    // annotations still print, then the failures to write, and the run exits 2.
    for e in &unwritten {
        error_line(&e.to_string());
    }
    if unwritten.is_empty() {
        view.summary.exit_code
    } else {
        REPORT_NOT_WRITTEN.max(view.summary.exit_code)
    }
}

/// The exit code of a run whose report (`--junit`, `--markdown`, `--html`, the job
/// summary) could not be written, whatever the verdict.
const REPORT_NOT_WRITTEN: u8 = 2;

/// `error: …` on stderr, `error` in bold red where color is on.
fn error_line(message: &str) {
    let red = anstyle::Style::new()
        .fg_color(Some(anstyle::AnsiColor::Red.into()))
        .bold();
    anstream::eprintln!("{red}error{red:#}: {message}");
}

/// The problems of the run (a shard `merge` could not read), one `error:` line each
/// on stderr, right after the table.
struct Problems;

impl Sink for Problems {
    fn write(&self, view: &RunView) -> Result<()> {
        for problem in &view.problems {
            error_line(problem);
        }
        Ok(())
    }
}

/// A report written whole to a file: `render` draws it from the view.
pub struct ToFile {
    pub path: PathBuf,
    pub render: fn(&RunView) -> String,
}

impl ToFile {
    /// The sink of a `--FORMAT PATH` flag: none when the flag is not given.
    pub fn boxed(path: &Option<PathBuf>, render: fn(&RunView) -> String) -> Option<Box<dyn Sink>> {
        let path = path.clone()?;
        Some(Box::new(ToFile { path, render }))
    }
}

impl Sink for ToFile {
    fn write(&self, view: &RunView) -> Result<()> {
        write_file(&self.path, &(self.render)(view))
    }
}

/// A report appended to a file (GitHub's job summary), a newline after it.
pub struct AppendTo {
    pub path: PathBuf,
    pub render: fn(&RunView) -> String,
}

impl Sink for AppendTo {
    fn write(&self, view: &RunView) -> Result<()> {
        append_file(&self.path, &(self.render)(view))
    }
}

/// Writes `text` to a report file, creating its directory; atomically (a temporary
/// file renamed over the target), so a reader never sees half a report.
pub fn write_file(path: &Path, text: &str) -> Result<()> {
    use vramtest_model::snapshot::{FileError, write_atomic};
    write_atomic(path, text).map_err(|e| match e {
        FileError::Io { source, .. } => Error::Report {
            path: path.to_owned(),
            source,
        },
        other => Error::Snapshot(other),
    })
}

/// Appends `text` and a newline to a report file (the job summary).
pub fn append_file(path: &Path, text: &str) -> Result<()> {
    use std::io::Write as _;
    let report = |source| Error::Report {
        path: path.to_owned(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(report)?;
    writeln!(f, "{text}").map_err(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::{mixed, outcome, view};
    use crate::output::{github, html, junit, markdown};
    use std::time::Duration;
    use vramtest_model::report::Status;

    #[test]
    fn each_report_flag_writes_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join("reports").join(name);
        let run = view(&mixed(), Duration::from_secs(2));
        let args = ReportArgs {
            junit: Some(at("junit.xml")),
            markdown: Some(at("pr.md")),
            html: Some(at("run.html")),
            ..ReportArgs::default()
        };
        let listed = sinks(&args);
        // The message format, the problems, the three files, and GitHub's when active.
        let github = usize::from(github::active());
        assert_eq!(listed.len(), 5 + github);
        for sink in &listed[2..5] {
            sink.write(&run).unwrap();
        }
        let read = |name| std::fs::read_to_string(at(name)).unwrap();
        assert_eq!(read("junit.xml"), junit::render(&run));
        assert_eq!(read("pr.md"), markdown::render(&run));
        assert_eq!(read("run.html"), html::render(&run));
        assert_eq!(sinks(&ReportArgs::default()).len(), 2 + github);
    }

    #[test]
    fn a_report_that_cannot_be_written_exits_2() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let to = |path: PathBuf| -> Vec<Box<dyn Sink>> {
            vec![Box::new(ToFile {
                path,
                render: markdown::render,
            })]
        };
        let passing = view(&[outcome("sgd", Status::Passed)], Duration::ZERO);
        let failing = view(&[outcome("adamw", Status::Regressed)], Duration::ZERO);
        assert_eq!(deliver(&passing, &to(dir.path().join("pr.md"))), 0);
        assert_eq!(deliver(&failing, &to(dir.path().join("pr.md"))), 1);
        // A directory cannot be made under a file.
        assert_eq!(deliver(&passing, &to(file.join("pr.md"))), 2);
        assert_eq!(deliver(&failing, &to(file.join("pr.md"))), 2);
        assert!(
            ToFile {
                path: file.join("pr.md"),
                render: markdown::render
            }
            .write(&passing)
            .is_err()
        );
    }
}
