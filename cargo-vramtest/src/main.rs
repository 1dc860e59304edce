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
mod cli;
mod config;
mod device;
mod discover;
mod error;
mod output;
mod partition;
mod progress;
mod recorded;
mod review;
mod run;
mod select;
mod snapshots;

use cli::{
    Cli, ColorArg, Command, ExecArgs, FilterArgs, ListArgs, MessageFormat, RunArgs, ShowArgs,
    SnapshotArgs,
};
use discover::Workspace;
use error::{Error, Result};
use output::{Run, Summary};
use progress::Progress;
use run::{PackageEnv, TestCase};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;
use vramtest_model::config::DeviceSetting;
use vramtest_model::env;

fn main() -> ExitCode {
    let cli = Cli::from_env();
    anstream::ColorChoice::write_global(color_choice(cli.color));
    match execute(cli.into_command()) {
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

/// cargo's `--color` for its messages on our stderr.
fn cargo_color() -> &'static str {
    match anstream::AutoStream::choice(&std::io::stderr()) {
        anstream::ColorChoice::Never => "never",
        _ => "always",
    }
}

fn execute(command: Command) -> Result<u8> {
    match command {
        Command::Run(args) => run_tests(&args),
        Command::List(args) => list(&args),
        Command::Review(args) => review(&args),
        Command::Accept(args) => accept_or_reject(&args, true),
        Command::Reject(args) => accept_or_reject(&args, false),
        Command::Show(args) => show(&args),
    }
}

/// Rejects an environment switch with a value outside its set (`VRAMTEST_UPDATE`,
/// `INSTA_UPDATE`, `VRAMTEST_DEVICE`, `VRAMTEST_CONFIG`) before anything is built:
/// the harness would reject it in every test, or worse, read it differently.
fn validate_env() -> Result<()> {
    env::validate().map_err(|message| Error::Environment { message })
}

/// `VRAMTEST_DEVICE`, once [`validate_env`] has accepted it.
fn env_device() -> Option<DeviceSetting> {
    env::device().ok().flatten()
}

/// The `VRAMTEST_*` variables for each package's tests.
fn package_env(ws: &Workspace, exec: &ExecArgs) -> PackageEnv {
    let inherited_device = env_device().is_some();
    ws.packages
        .iter()
        .map(|p| {
            let mut vars = vec![(
                env::CONFIG.to_owned(),
                serde_json::to_string(&p.settings.to_harness()).expect("configs serialize"),
            )];
            if exec.check || env::is_ci() {
                vars.push(("VRAMTEST_CHECK".into(), "1".into()));
            }
            if exec.strict {
                vars.push(("VRAMTEST_STRICT".into(), "1".into()));
            }
            let device = exec
                .device
                .or(p.settings.device.filter(|_| !inherited_device));
            if let Some(d) = device {
                vars.push(("VRAMTEST_DEVICE".into(), d.as_str().into()));
            }
            (p.name.clone(), vars)
        })
        .collect()
}

/// The device the run measures on, for the default of `-j`.
fn run_device(ws: &Workspace, exec: &ExecArgs) -> DeviceSetting {
    if let Some(d) = exec.device {
        return d;
    }
    if let Some(d) = env_device() {
        return d;
    }
    let devices: Vec<Option<DeviceSetting>> =
        ws.packages.iter().map(|p| p.settings.device).collect();
    if devices.iter().all(|d| *d == Some(DeviceSetting::Cpu)) {
        DeviceSetting::Cpu
    } else if devices.contains(&Some(DeviceSetting::Cuda)) {
        DeviceSetting::Cuda
    } else {
        DeviceSetting::Auto
    }
}

/// Discovers, builds and lists the tests; applies the filters and the partition.
/// Returns each selected test with its shard.
fn select_tests(
    ws: &Workspace,
    build: &cli::BuildArgs,
    filter: &FilterArgs,
    env: &PackageEnv,
) -> Result<Vec<(TestCase, Option<u64>)>> {
    let progress = Progress::new();
    let binaries = build::build(ws, build, cargo_color(), &progress)?;
    let all = run::list(&binaries, env)?;
    let names: Vec<select::TestName<'_>> = all.iter().map(TestCase::test_name).collect();
    if let Some(typo) = select::unmatched(&names, &filter.filters, filter.exact).first() {
        return Err(Error::NoMatch {
            filter: (*typo).to_owned(),
            among: format!("the tests of {}", ws.root.display()),
            closest: select::closest(&names, typo),
        });
    }
    let cases: Vec<TestCase> = all
        .iter()
        .filter(|c| run::matches(c, &filter.filters, filter.exact))
        .cloned()
        .collect();
    let Some(partition) = filter.partition else {
        return Ok(cases.into_iter().map(|c| (c, None)).collect());
    };
    Ok(partition
        .select(cases)
        .into_iter()
        .map(|(c, s)| (c, Some(s)))
        .collect())
}

fn run_tests(args: &RunArgs) -> Result<u8> {
    validate_env()?;
    let ws = discover::discover(&args.selection, args.build.cargo_flags())?;
    device::preflight(run_device(&ws, &args.exec))?;
    let env = package_env(&ws, &args.exec);
    let cases: Vec<TestCase> = select_tests(&ws, &args.build, &args.filter, &env)?
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    if cases.is_empty() {
        anstream::eprintln!("warning: no test to run");
    }
    let jobs = args
        .exec
        .jobs
        .map(usize::from)
        .unwrap_or_else(|| run::default_jobs(run_device(&ws, &args.exec)));
    let progress = Progress::new();
    let start = Instant::now();
    let outcomes = run::run(&cases, &env, jobs, &progress)?;
    let run = Run {
        outcomes: &outcomes,
        duration: start.elapsed(),
    };
    let summary = Summary::of(&outcomes);
    let github = output::github::active();
    match args.report.message_format {
        MessageFormat::Human => anstream::print!("{}", output::table::render(run, &summary)),
        MessageFormat::Json => print!("{}", output::json::render(run, &summary)),
    }
    // A report that cannot be written does not hide the verdict: the table and the
    // annotations still print, then the failures to write, and the run exits 2.
    let mut unwritten = Vec::new();
    if let Some(path) = &args.report.junit {
        unwritten.extend(write_file(path, &output::junit::render(run)).err());
    }
    let markdown = output::markdown::render(run, &summary);
    if let Some(path) = &args.report.markdown {
        unwritten.extend(write_file(path, &markdown).err());
    }
    if let Some(path) = &args.report.html {
        let title = format!("cargo vramtest: {}", ws.root.display());
        let page = output::html::render(run, &title, |o| {
            // Only a test measured in this run: an older timeline would mislead.
            o.report.body.as_ref()?;
            let snap = o
                .case
                .binary
                .package_dir
                .join(o.report.snapshot.as_deref()?);
            recorded::timeline(&ws.target_dir, &snap)
        });
        unwritten.extend(write_file(path, &page).err());
    }
    if github {
        let base = output::github::base(&ws.root);
        for line in output::github::annotations(run, &base) {
            // stdout is for JSON lines in json mode; the runner reads both streams.
            match args.report.message_format {
                MessageFormat::Human => println!("{line}"),
                MessageFormat::Json => eprintln!("{line}"),
            }
        }
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
            unwritten.extend(append_file(std::path::Path::new(&path), &markdown).err());
        }
    }
    for e in &unwritten {
        let red = anstyle::Style::new()
            .fg_color(Some(anstyle::AnsiColor::Red.into()))
            .bold();
        anstream::eprintln!("{red}error{red:#}: {e}");
    }
    if unwritten.is_empty() {
        Ok(summary.exit_code)
    } else {
        Ok(REPORT_NOT_WRITTEN.max(summary.exit_code))
    }
}

/// The exit code of a run whose report (`--junit`, `--markdown`, `--html`, the job summary)
/// could not be written, whatever the verdict: CI must not take a missing report for
/// a pass.
const REPORT_NOT_WRITTEN: u8 = 2;

fn write_file(path: &std::path::Path, text: &str) -> Result<()> {
    let report = |source| Error::Report {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(report)?;
    }
    std::fs::write(path, text).map_err(report)
}

fn append_file(path: &std::path::Path, text: &str) -> Result<()> {
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

fn list(args: &ListArgs) -> Result<u8> {
    validate_env()?;
    let ws = discover::discover(&args.selection, args.build.cargo_flags())?;
    let env = package_env(&ws, &ExecArgs::default());
    let tests: Vec<output::list::Listed> = select_tests(&ws, &args.build, &args.filter, &env)?
        .into_iter()
        .map(|(case, shard)| output::list::Listed {
            snapshots: snapshots::status(&case.binary.package_dir, &case.binary.target, &case.name),
            case,
            shard,
        })
        .collect();
    match args.message_format {
        MessageFormat::Json => print!("{}", output::list::render_json(&tests)),
        MessageFormat::Human => {
            anstream::print!("{}", output::list::render(&tests, args.filter.partition))
        }
    }
    Ok(0)
}

fn review(args: &SnapshotArgs) -> Result<u8> {
    let ws = discover::discover(&args.selection, Vec::new())?;
    let files = snapshots::pending(&ws, &args.filters, args.exact)?;
    if files.is_empty() {
        println!("no pending results (.snap.new) to review");
        return Ok(0);
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let mut stdin = std::io::stdin().lock();
    let mut stdout = anstream::stdout();
    let policy = |file: &snapshots::SnapshotFile| -> Result<vramtest_model::Policy> {
        let package = ws.packages.iter().find(|p| p.name == file.package);
        let config = package.map(|p| p.settings.to_harness()).unwrap_or_default();
        review::policy(&config).map_err(|e| Error::Config {
            manifest: package.map_or(ws.manifest.clone(), |p| p.dir.join("Cargo.toml")),
            line: None,
            message: e.to_string(),
        })
    };
    let tally = review::review(&files, &policy, interactive, &mut stdin, &mut stdout)?;
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

fn accept_or_reject(args: &SnapshotArgs, accept: bool) -> Result<u8> {
    let ws = discover::discover(&args.selection, Vec::new())?;
    let files = snapshots::pending(&ws, &args.filters, args.exact)?;
    if files.is_empty() {
        let verb = if accept { "accept" } else { "reject" };
        println!("no pending results (.snap.new) to {verb}");
    }
    for file in &files {
        if accept {
            let to = snapshots::accept(file)?;
            println!("accepted {} → {}", file.label(), to.display());
        } else {
            snapshots::reject(file)?;
            println!("rejected {} ({})", file.label(), file.path.display());
        }
    }
    Ok(0)
}

/// Whether to draw with Unicode blocks: a terminal that has not asked for plain
/// output (`NO_COLOR`, `TERM=dumb`).
fn unicode_terminal() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

fn show(args: &ShowArgs) -> Result<u8> {
    if args.sites {
        return show_sites(args);
    }
    let ws = discover::discover(&args.selection, Vec::new())?;
    let files = snapshots::scan(&ws)?;
    let chosen =
        snapshots::find(&files, &args.test, args.pending).map_err(|message| Error::Selection {
            message: format!("{message} in {}", ws.root.display()),
        })?;
    if args.svg.is_some() && chosen.len() > 1 {
        return Err(Error::Selection {
            message: format!(
                "`{}` names {} snapshots and --svg draws one (hint: name one test, and `@cpu` or `@cuda` by way of --device runs)",
                args.test,
                chosen.len()
            ),
        });
    }
    for (i, file) in chosen.iter().enumerate() {
        // Listed a moment ago, but a concurrent accept or reject may have removed it.
        let parsed = vramtest_model::snapshot::read(&file.path)?.ok_or_else(|| Error::Io {
            path: file.path.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the file is gone (removed since it was listed)",
            ),
        })?;
        if i > 0 {
            println!();
        }
        anstream::print!("{}", output::table::render_snapshot(&file.path, &parsed));
        let reserve = ws
            .packages
            .iter()
            .find(|p| p.name == file.package)
            .and_then(|p| p.settings.reserve);
        let draw = output::fits::Drawing {
            unicode: unicode_terminal(),
        };
        let timeline = recorded::timeline(&ws.target_dir, &file.committed());
        let totals = timeline.as_ref().map(|t| t.totals());
        print!(
            "{}",
            output::fits::render(&parsed.body, reserve, totals.as_deref(), draw)
        );
        if let Some(path) = &args.svg {
            let name = format!("{}::{}::{}", file.package, file.target, file.test);
            let timeline = timeline.ok_or_else(|| Error::NoTimeline {
                test: name.clone(),
                target_dir: ws.target_dir.clone(),
            })?;
            let options = vramtest_chart::SvgOptions {
                title: Some(format!("{name} ({})", file.class)),
                ..Default::default()
            };
            write_file(path, &vramtest_chart::svg(&timeline, &options))?;
            println!("\ntimeline written: {}", path.display());
        }
    }
    Ok(0)
}

/// `show TEST --sites`: builds the test, re-runs it on the CPU with call sites on, and
/// prints them. Nothing is written: the run is in check mode.
fn show_sites(args: &ShowArgs) -> Result<u8> {
    validate_env()?;
    let ws = discover::discover(&args.selection, args.build.cargo_flags())?;
    let exec = ExecArgs {
        device: Some(DeviceSetting::Cpu),
        check: true,
        ..ExecArgs::default()
    };
    let mut env = package_env(&ws, &exec);
    for vars in env.values_mut() {
        vars.retain(|(k, _)| k != "VRAMTEST_UPDATE");
        vars.push(("VRAMTEST_SITES".into(), "always".into()));
        vars.push(("VRAMTEST_UPDATE".into(), "no".into()));
    }
    let filter = FilterArgs {
        filters: vec![args.test.clone()],
        ..FilterArgs::default()
    };
    let mut cases: Vec<TestCase> = select_tests(&ws, &args.build, &filter, &env)?
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    if cases.len() > 1 {
        // A name that is also part of other names: a whole-name match wins.
        let exact: Vec<TestCase> = cases
            .iter()
            .filter(|c| {
                c.test_name()
                    .matches_any(std::slice::from_ref(&args.test), true)
            })
            .cloned()
            .collect();
        if exact.len() == 1 {
            cases = exact;
        }
    }
    let case = match cases.as_slice() {
        [case] => case.clone(),
        _ => {
            let names: Vec<String> = cases.iter().map(TestCase::full_name).collect();
            return Err(Error::Selection {
                message: format!(
                    "`{}` names {} tests and --sites re-runs one (hint: name one of: {})",
                    args.test,
                    cases.len(),
                    names.join(", ")
                ),
            });
        }
    };
    let progress = Progress::new();
    let outcomes = run::run(std::slice::from_ref(&case), &env, 1, &progress)?;
    let report = &outcomes.first().expect("one outcome per test case").report;
    let Some(sites) = &report.sites else {
        let lines = || report.message.lines().map(str::trim);
        let why = lines()
            .find(|l| l.starts_with("call sites:"))
            .or_else(|| lines().next())
            .unwrap_or("");
        return Err(Error::NoSites {
            test: case.full_name(),
            message: if why.is_empty() {
                format!("the re-run ended {:?}", report.status)
            } else {
                why.to_owned()
            },
        });
    };
    print!(
        "{}",
        output::sites::render(&case.full_name(), report.body.as_ref(), sites)
    );
    Ok(0)
}
