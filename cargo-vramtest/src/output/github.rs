//! Under GitHub Actions (`GITHUB_ACTIONS=true`): an `::error` workflow command per
//! failing test, at the test function's line (a malformed snapshot: at the snapshot's
//! line), and a `::notice` per improvement (a run's only: each shard's job printed its
//! own before a merge). The markdown report goes to the job summary
//! (`$GITHUB_STEP_SUMMARY`, [`super::sinks`]).

use super::{Origin, RunView, Sink};
use crate::case::Outcome;
use std::path::{Path, PathBuf};
use vramtest_model::report::Status;

/// Whether we run under GitHub Actions.
pub fn active() -> bool {
    vramtest_model::workflow::github_actions()
}

/// A workflow command's message: `%`, `\r` and `\n` escaped (GitHub's toolkit rules).
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: as data, plus `:` and `,`.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

pub use vramtest_model::workflow::inert;

/// `::error file=…,line=…,title=…::message`.
pub fn command(
    level: &str,
    file: Option<&str>,
    line: Option<usize>,
    title: &str,
    message: &str,
) -> String {
    let mut props = Vec::new();
    if let Some(file) = file {
        props.push(format!("file={}", escape_property(file)));
        if let Some(line) = line.filter(|&l| l > 0) {
            props.push(format!("line={line}"));
        }
    }
    props.push(format!("title={}", escape_property(title)));
    format!("::{level} {}::{}", props.join(","), escape_data(message))
}

/// The annotations of a run. Paths are relative to `base`: the repository
/// (`$GITHUB_WORKSPACE`) when the workspace is inside it, else the workspace root.
pub fn annotations(outcomes: &[Outcome], base: &Path) -> Vec<String> {
    outcomes
        .iter()
        .filter_map(|o| annotation(o, base))
        .collect()
}

fn annotation(o: &Outcome, base: &Path) -> Option<String> {
    let r = &o.report;
    let level = if o.fails() {
        "error"
    } else if r.status == Status::Improved {
        "notice"
    } else {
        return None;
    };
    let (file, line) = match (&r.snapshot, r.status) {
        (Some(snap), Status::SnapshotError) => {
            let line = vramtest_model::snapshot::read(snap)
                .err()
                .and_then(|e| e.line());
            (Some(snap.clone()), line)
        }
        _ if r.source.is_empty() => (None, None),
        _ => (
            Some(o.case.binary.package_dir.join(&r.source)),
            Some(r.line as usize),
        ),
    };
    let file = file.map(|f| relative(&f, base));
    let title = format!("{}: {}", o.case.full_name(), super::status_label(r));
    Some(command(
        level,
        file.as_deref(),
        line,
        &title,
        r.message.trim_end(),
    ))
}

/// `path` relative to `base`, with forward slashes; `path` itself when outside it.
fn relative(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .map(PathBuf::from)
        .unwrap_or_else(|_| path.to_owned())
        .to_string_lossy()
        .replace('\\', "/")
}

/// The annotations of a run's failures (a merge has none: each shard's job printed
/// its own), one line each, on stdout, or on stderr when stdout holds JSON lines.
pub struct Annotations {
    pub on_stdout: bool,
}

impl Sink for Annotations {
    fn write(&self, view: &RunView) -> crate::error::Result<()> {
        if let Origin::Run { root, .. } = &view.origin {
            for line in annotations(&view.outcomes, &base(root)) {
                if self.on_stdout {
                    println!("{line}");
                } else {
                    eprintln!("{line}");
                }
            }
        }
        Ok(())
    }
}

/// The base of annotation paths: `$GITHUB_WORKSPACE` when `root` is inside it.
pub fn base(root: &Path) -> PathBuf {
    std::env::var_os("GITHUB_WORKSPACE")
        .map(PathBuf::from)
        .and_then(|gw| gw.canonicalize().ok())
        .filter(|gw| root.canonicalize().is_ok_and(|r| r.starts_with(gw)))
        .unwrap_or_else(|| root.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::*;
    use test_case::test_case;
    use vramtest_model::workflow::inert_with;

    #[test_case("plain", "plain", "plain")]
    #[test_case("100%", "100%25", "100%25")]
    #[test_case("a\nb\r\nc", "a%0Ab%0D%0Ac", "a%0Ab%0D%0Ac")]
    #[test_case("k: v, w", "k: v, w", "k%3A v%2C w")]
    #[test_case("%0A", "%250A", "%250A"; "an escape is not unescaped")]
    fn escapes(input: &str, data: &str, property: &str) {
        assert_eq!(escape_data(input), data);
        assert_eq!(escape_property(input), property);
    }

    #[test]
    fn a_command() {
        assert_eq!(
            command(
                "error",
                Some("crates/a,b/tests/vram.rs"),
                Some(15),
                "t: regressed",
                "x: 1 → 2\n50%"
            ),
            "::error file=crates/a%2Cb/tests/vram.rs,line=15,title=t%3A regressed::x: 1 → 2%0A50%25"
        );
        assert_eq!(
            command("notice", None, Some(3), "t", "m"),
            "::notice title=t::m"
        );
    }

    #[test]
    fn inert_text_stops_commands_with_a_token_it_does_not_hold() {
        let text = "::error::boom\n::add-mask::secret\n";
        let a = inert(text);
        let b = inert(text);
        let token = a
            .strip_prefix("::stop-commands::")
            .and_then(|rest| rest.split_once('\n'))
            .map(|(t, _)| t.to_owned())
            .expect("starts by stopping commands");
        assert_eq!(a, inert_with(text, &token));
        assert_eq!(
            inert_with(text, "T"),
            "::stop-commands::T\n::error::boom\n::add-mask::secret\n::T::\n"
        );
        assert_eq!(inert_with("x", "T"), "::stop-commands::T\nx\n::T::\n");
        // Random: another call picks another token, so a test cannot print the end.
        assert_ne!(a, b);
        assert!(token.len() > 20 && !text.contains(&token), "{token}");
    }

    #[test]
    fn one_annotation_per_failure_at_the_tests_line() {
        let outcomes = mixed();
        let lines = annotations(&outcomes, Path::new("/w"));
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(lines[0].starts_with(
            "::error file=mlp/tests/vram.rs,line=15,title=mlp%3A%3Avram%3A%3Aadamw%3A regressed::memory regression in adamw (cpu)%0A"
        ));
        assert!(lines[1].starts_with(
            "::notice file=mlp/tests/vram.rs,line=15,title=mlp%3A%3Avram%3A%3Asmall%3A improved::"
        ));
        assert!(lines[2].contains("title=mlp%3A%3Avram%3A%3Afresh%3A new (pending)"));
        assert!(lines[3].contains("out of memory, 100%25"));
        insta::assert_snapshot!(lines.join("\n"));
    }
}
