//! `cargo vramtest review`: each pending result beside its snapshot: what moved (under
//! the package's configured limits, as the harness judges it), the diff of the two
//! files, then accept, reject or skip. Without a terminal it only prints, and exits 1
//! while pending files exist.

use crate::cli::SnapshotArgs;
use crate::discover;
use crate::error::{Error, Result};
use crate::output::table::color_diff;
use crate::snapshots::{self, SnapshotFile};
use anstyle::Style;
use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write};
use vramtest_model::snapshot;
use vramtest_model::{HumanBytes, Movement, Policy, compare};

pub fn execute(args: &SnapshotArgs) -> Result<u8> {
    let ws = discover::discover(&args.selection, Vec::new())?;
    let files = snapshots::pending(&ws, &args.filters, args.exact)?;
    if files.is_empty() {
        println!("no pending results (.snap.new) to review");
        return Ok(0);
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let mut stdin = std::io::stdin().lock();
    let mut stdout = anstream::stdout();
    // The package's `vramtest` metadata, judged as the harness judges it (the settings
    // `cargo vramtest` hands it, over the defaults). A test's own attribute options are
    // not known without building it, and do not apply here.
    let policy_of = |file: &SnapshotFile| -> Result<Policy> {
        let package = ws.packages.iter().find(|p| p.name == file.package);
        Ok(package.map(|p| p.settings.policy()).unwrap_or_default())
    };
    let tally = review_files(&files, &policy_of, interactive, &mut stdin, &mut stdout)?;
    if interactive {
        println!(
            "{} accepted, {} rejected, {} skipped",
            tally.accepted, tally.rejected, tally.skipped
        );
        Ok(0)
    } else {
        println!(
            "{} pending result(s); accept them with `cargo vramtest accept` or review them on a terminal",
            files.len()
        );
        Ok(1)
    }
}

/// What happened to the pending files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub accepted: usize,
    pub rejected: usize,
    pub skipped: usize,
}

/// One pending file, described for a reviewer: a header, the figures that moved under
/// `policy`, and the diff against the committed snapshot (or the whole file when there
/// is none). An unreadable pending file is an error naming it.
fn describe(file: &SnapshotFile, index: usize, total: usize, policy: &Policy) -> Result<String> {
    let bold = Style::new().bold();
    let mut out = format!(
        "{bold}Reviewing [{}/{}] {}{bold:#}\n  pending: {}\n",
        index + 1,
        total,
        file.label(),
        file.path.display()
    );
    let new_text = std::fs::read_to_string(&file.path).map_err(Error::io(&file.path))?;
    let committed = file.committed();
    let old_text = std::fs::read_to_string(&committed).ok();
    let new = snapshot::parse(&new_text);
    let old = old_text.as_deref().map(snapshot::parse);
    match (&old, &new) {
        (_, Err(e)) => {
            let _ = writeln!(out, "  the pending file is malformed: {e}");
        }
        (None, Ok(n)) => {
            let _ = writeln!(
                out,
                "  new snapshot: peak {}",
                HumanBytes(n.body.peak_bytes)
            );
        }
        (Some(Err(e)), Ok(_)) => {
            let _ = writeln!(
                out,
                "  the committed snapshot {} is malformed: {e}",
                committed.display()
            );
        }
        (Some(Ok(o)), Ok(n)) => {
            let cmp = compare(&o.body, &n.body, policy);
            if let Some((peak, budget)) = cmp.over_budget {
                let _ = writeln!(
                    out,
                    "  over budget: peak {} over the budget {}",
                    HumanBytes(peak),
                    HumanBytes(budget)
                );
            }
            if cmp.findings.is_empty() {
                out += "  no figure changed\n";
            }
            for f in &cmp.findings {
                let mark = match f.movement {
                    Movement::Regressed => "grew",
                    Movement::Improved => "shrank",
                    Movement::Within => "within",
                };
                let _ = writeln!(out, "  {mark:>6}  {f}");
            }
            for note in &cmp.notes {
                let _ = writeln!(out, "  {note}");
            }
        }
    }
    out.push('\n');
    let old_text = old_text.unwrap_or_default();
    let diff = similar::TextDiff::from_lines(&old_text, &new_text)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("old: {}", committed.display()),
            &format!("new: {}", file.path.display()),
        )
        .to_string();
    out += &color_diff(&diff);
    Ok(out)
}

/// Reviews `files`, each judged under `policy(file)`. With `interactive`, asks for each
/// (`a`ccept, `r`eject, `s`kip; end of input skips the rest); otherwise only prints.
fn review_files(
    files: &[SnapshotFile],
    policy: &dyn Fn(&SnapshotFile) -> Result<Policy>,
    interactive: bool,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<Tally> {
    let mut tally = Tally::default();
    let io = |e| Error::io("<stdout>")(e);
    for (i, file) in files.iter().enumerate() {
        let text = describe(file, i, files.len(), &policy(file)?)?;
        write!(out, "{text}").map_err(io)?;
        if !interactive {
            tally.skipped += 1;
            writeln!(out).map_err(io)?;
            continue;
        }
        loop {
            write!(out, "\n  a accept · r reject · s skip > ").map_err(io)?;
            out.flush().map_err(io)?;
            let mut answer = String::new();
            let read = input.read_line(&mut answer).map_err(Error::io("<stdin>"))?;
            match answer.trim() {
                "a" | "accept" => {
                    let to = snapshots::accept(file)?;
                    writeln!(out, "  accepted: {}\n", to.display()).map_err(io)?;
                    tally.accepted += 1;
                }
                "r" | "reject" => {
                    snapshots::reject(file)?;
                    writeln!(out, "  rejected\n").map_err(io)?;
                    tally.rejected += 1;
                }
                "s" | "skip" | "" => {
                    writeln!(out, "  skipped\n").map_err(io)?;
                    tally.skipped += 1;
                }
                _ => continue,
            }
            if read == 0 {
                // End of input: skip what is left.
                tally.skipped += files.len() - i - 1;
                return Ok(tally);
            }
            break;
        }
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anstream::adapter::strip_str;

    const SNAP: &str = include_str!("../../tests/data/mlp_adamw@cpu.snap");

    fn setup(name: &str, old: Option<&str>, new: &str) -> (PathBuf, SnapshotFile) {
        let dir = std::env::temp_dir().join(format!(
            "cargo-vramtest-review-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("vram__t@cpu.snap.new");
        std::fs::write(&path, new).unwrap();
        if let Some(old) = old {
            std::fs::write(dir.join("vram__t@cpu.snap"), old).unwrap();
        }
        let file = SnapshotFile {
            path,
            package: "p".into(),
            target: "vram".into(),
            test: "t".into(),
            class: "cpu".into(),
            pending: true,
        };
        (dir, file)
    }

    use std::path::PathBuf;

    fn default(_: &SnapshotFile) -> Result<Policy> {
        Ok(Policy::default())
    }

    /// The snapshot with ten times its activations, at the peak and in their own
    /// peak, and the peak grown by as much: a result a run could write.
    fn ten_times_the_activations() -> String {
        let peak = 33513695;
        let more = 4124120 - 412412;
        SNAP.replace("\"activations\": 412412", "\"activations\": 4124120")
            .replace(
                &format!("\"peak_bytes\": {peak},"),
                &format!("\"peak_bytes\": {},", peak + more),
            )
    }

    #[test]
    fn judges_with_the_packages_limits() {
        // activations grow 10×: past the default limit, within a package's +1000%.
        let bigger = ten_times_the_activations();
        let (dir, file) = setup("policy", Some(SNAP), &bigger);
        let settings = vramtest_model::settings::Settings::parse(&serde_json::json!({
            "limits": { "activations": "+1000%" }
        }))
        .unwrap();
        let configured = settings.policy();
        let text = strip_str(&describe(&file, 0, 1, &configured).unwrap()).to_string();
        assert!(
            text.contains("within  activations: 402.75 KiB → 3.93 MiB"),
            "{text}"
        );
        assert!(!text.contains("grew  activations"), "{text}");
        // A budget from the metadata applies too.
        let settings =
            vramtest_model::settings::Settings::parse(&serde_json::json!({ "budget": "1KiB" }))
                .unwrap();
        let budget = settings.policy();
        let text = strip_str(&describe(&file, 0, 1, &budget).unwrap()).to_string();
        assert!(
            text.contains("over budget: peak 35.50 MiB over the budget 1.00 KiB"),
            "{text}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn describes_what_moved_and_the_diff() {
        let bigger = ten_times_the_activations();
        let (dir, file) = setup("describe", Some(SNAP), &bigger);
        let text = strip_str(&describe(&file, 0, 2, &Policy::default()).unwrap()).to_string();
        assert!(
            text.starts_with("Reviewing [1/2] p::vram::t (cpu)"),
            "{text}"
        );
        assert!(
            text.contains("grew  activations: 402.75 KiB → 3.93 MiB"),
            "{text}"
        );
        assert!(text.contains("-    \"activations\": 412412,"));
        assert!(text.contains("+    \"activations\": 4124120,"));
        insta::assert_snapshot!(text.replace(&dir.display().to_string(), "<dir>"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_figure_the_snapshot_lacks_is_noted_not_judged() {
        let peak = "  \"peak_bytes\": 33513695,\n";
        assert!(SNAP.contains(peak));
        let with_reserved =
            SNAP.replacen(peak, &format!("{peak}  \"reserved_bytes\": 41943040,\n"), 1);
        let (dir, file) = setup("reserved", Some(SNAP), &with_reserved);
        let text = strip_str(&describe(&file, 0, 1, &Policy::default()).unwrap()).to_string();
        assert!(text.contains("  no figure changed\n"), "{text}");
        assert!(
            text.contains(
                "  note: reserved: the snapshot has no reserved bytes (written before they were recorded), this run 40.00 MiB: not compared"
            ),
            "{text}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unreadable_pending_file_is_an_error_naming_it() {
        let (dir, file) = setup("unreadable", Some(SNAP), SNAP);
        std::fs::remove_file(&file.path).unwrap();
        let e = describe(&file, 0, 1, &Policy::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("{}: ", file.path.display())), "{e}");
        let e = review_files(
            std::slice::from_ref(&file),
            &default,
            false,
            &mut "".as_bytes(),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("vram__t@cpu.snap.new"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn accepts_rejects_and_skips_on_answers() {
        let (dir, file) = setup("answers", None, SNAP);
        let mut out = Vec::new();
        let tally = review_files(
            std::slice::from_ref(&file),
            &default,
            true,
            &mut "what\na\n".as_bytes(),
            &mut out,
        )
        .unwrap();
        assert_eq!(tally.accepted, 1);
        assert!(dir.join("vram__t@cpu.snap").exists());
        assert!(!file.path.exists());

        std::fs::write(&file.path, SNAP).unwrap();
        let tally = review_files(
            std::slice::from_ref(&file),
            &default,
            true,
            &mut "r\n".as_bytes(),
            &mut out,
        )
        .unwrap();
        assert_eq!(tally.rejected, 1);
        assert!(!file.path.exists());

        std::fs::write(&file.path, SNAP).unwrap();
        let files = [file.clone(), file.clone()];
        let tally = review_files(&files, &default, true, &mut "".as_bytes(), &mut out).unwrap();
        assert_eq!(tally.skipped, 2, "end of input skips the rest");
        let tally = review_files(&files, &default, false, &mut "a\n".as_bytes(), &mut out).unwrap();
        assert_eq!(tally.skipped, 2, "without a terminal nothing is asked");
        assert!(file.path.exists());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
