//! The command line: cargo's conventions for selecting and building packages, libtest's
//! for filtering tests, nextest's for partitions. Every flag is documented where it is
//! defined; `--help` shows these comments.

use crate::case::RunIgnored;
use crate::partition::Partition;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use vramtest_model::settings::DeviceSetting;
use vramtest_model::sweep::Shard;

/// The exit codes, shown after `--help`. The book's CLI page is generated from it.
pub const EXIT_CODES: &str = "\
Exit codes:
  0    every test passed (an improvement or a change within its limits passes)
  1    a memory regression, a failing or crashing test, a missing snapshot in check
       mode, or a new result left pending for review (.snap.new)
  2    a usage, configuration or snapshot-format error, a filter that matches no
       test, or a report (--junit, --markdown, --html, the job summary) that could
       not be written (the table and annotations are printed first); the message
       names the file, and the line where there is one
  101  the build failed; cargo's own messages are shown as cargo printed them";

/// The exit codes of `merge`, shown after its `--help`.
pub const MERGE_EXIT_CODES: &str = "\
Exit codes:
  0    every test of every shard passed
  1    a shard had a failing test (a regression, a failing or crashing test, a missing
       snapshot, a result left pending)
  2    a shard had an error (a snapshot-format error), a shard's report is missing,
       empty, truncated, unreadable or of a report schema this release does not read,
       the shards disagree (the same test in two, another cargo-vramtest version,
       snapshot schema, or partition), or a report could not be written; the message
       names the file";

/// The exit codes of `measure`, shown after its `--help`.
pub const MEASURE_EXIT_CODES: &str = "\
Exit codes:
  0    every tensor category (parameters, gradients, optimizer_state, activations,
       inputs, temporaries) whose fit is not flagged is within 3% of the measurement,
       and the peak within 5% (workspace, untracked and a category under 1% of the
       peak are shown, not held): the verdict `held`
  1    a prediction missed (the verdict `missed`), or the step failed or crashed
  2    a usage error: no such test, no committed snapshot, a snapshot without a sweep
       over named axes, an --at that leaves out an axis, names an unknown one or gives
       a value that is not a positive integer; nothing is run or written
  101  the build failed";

/// Run `#[vramtest]` peak-memory tests across a workspace, and review their snapshots.
///
/// `cargo vramtest` builds the workspace's test targets that use vramtest, runs every
/// test in a process of its own, compares each peak (broken down by category) with the
/// snapshot committed beside the test, and reports one table for the whole run. A
/// plain libtest target is never run.
#[derive(Debug, Parser)]
#[command(
    name = "cargo-vramtest",
    bin_name = "cargo vramtest",
    version,
    after_help = EXIT_CODES,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Coloring: auto, always or never. `auto` honours NO_COLOR and CARGO_TERM_COLOR
    /// and colors only a terminal.
    #[arg(long, value_enum, value_name = "WHEN", global = true)]
    pub color: Option<ColorArg>,

    #[command(subcommand)]
    pub command: Option<Command>,

    /// `cargo vramtest [OPTIONS]` is `cargo vramtest run [OPTIONS]`.
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build, run and judge every test (the default subcommand).
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// List the tests with their target, package, snapshot status (and shard).
    List(ListArgs),
    /// Review pending results (.snap.new) one by one: accept, reject or skip. Without a
    /// terminal, print every diff and exit 1 when pending files exist.
    Review(SnapshotArgs),
    /// Accept pending results: rename every .snap.new to .snap (only those matching
    /// the filters, when given).
    Accept(SnapshotArgs),
    /// Reject pending results: delete every .snap.new (only those matching the
    /// filters, when given).
    Reject(SnapshotArgs),
    /// Show one test's snapshot: its peak, per-category and per-phase tables.
    Show(ShowArgs),
    /// Measure one point of a test's sweep over named axes (its step run once, in one
    /// process, at exactly that point) and print it against what the committed
    /// snapshot's sweep predicts there (`show TEST --at`), every category and the peak.
    /// Writes nothing.
    #[command(after_help = MEASURE_EXIT_CODES)]
    Measure(MeasureArgs),
    /// Merge the JSON reports of a run's shards (`--message-format json`, one file per
    /// shard) into what one run writes: the table (or JSON lines), --junit, --markdown,
    /// --html and the exit code.
    #[command(after_help = MERGE_EXIT_CODES)]
    Merge(MergeArgs),
}

/// Which packages of the workspace to look at.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Package selection")]
pub struct Selection {
    /// Only this package (repeatable). Without -p, every workspace member that uses
    /// vramtest.
    #[arg(short = 'p', long = "package", value_name = "SPEC")]
    pub packages: Vec<String>,

    /// Every workspace member (the default without -p; with it, -p is ignored, as
    /// cargo does).
    #[arg(long)]
    pub workspace: bool,

    /// Leave this package out (repeatable; needs --workspace, as in cargo).
    #[arg(long, value_name = "SPEC", requires = "workspace")]
    pub exclude: Vec<String>,

    /// Only this test target (repeatable), as cargo's --test: a `[[test]]` with
    /// `harness = false`, in every selected package that has one. A name that is no
    /// vramtest target of the selected packages is an error listing those there are.
    #[arg(long = "test", value_name = "NAME", help_heading = "Target selection")]
    pub tests: Vec<String>,

    /// Only the library's tests, as cargo's --lib: a library whose `[lib]` says
    /// `harness = false` and that ends with `#[cfg(test)] vramtest::main!();`. With
    /// --test, both. Without either, every vramtest target.
    #[arg(long, help_heading = "Target selection")]
    pub lib: bool,

    /// Path to the Cargo.toml of the workspace or package to test.
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
}

/// How to build the test targets (passed to `cargo test --no-run`).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Build")]
pub struct BuildArgs {
    /// Features to activate, comma- or space-separated (repeatable).
    #[arg(short = 'F', long, value_name = "FEATURES")]
    pub features: Vec<String>,

    /// Activate every feature of the selected packages.
    #[arg(long)]
    pub all_features: bool,

    /// Do not activate the `default` feature.
    #[arg(long)]
    pub no_default_features: bool,

    /// Build the tests in release mode (cargo's `--release`).
    #[arg(long)]
    pub release: bool,

    /// Require Cargo.lock to be up to date (cargo's `--locked`).
    #[arg(long)]
    pub locked: bool,

    /// Run without accessing the network (cargo's `--offline`).
    #[arg(long)]
    pub offline: bool,

    /// Both --locked and --offline (cargo's `--frozen`).
    #[arg(long)]
    pub frozen: bool,
}

impl BuildArgs {
    /// The flags that cargo's commands share (`--locked`, `--offline`, `--frozen`).
    pub fn cargo_flags(&self) -> Vec<String> {
        [
            (self.locked, "--locked"),
            (self.offline, "--offline"),
            (self.frozen, "--frozen"),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, flag)| flag.to_owned())
        .collect()
    }

    /// The flags of `cargo test --no-run`: the features (comma- or space-separated,
    /// joined into one `--features`), the profile, then [`BuildArgs::cargo_flags`].
    pub fn test_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        let features: Vec<&str> = self
            .features
            .iter()
            .flat_map(|f| f.split([',', ' ']))
            .filter(|f| !f.is_empty())
            .collect();
        if !features.is_empty() {
            flags.push("--features".into());
            flags.push(features.join(","));
        }
        for (on, flag) in [
            (self.all_features, "--all-features"),
            (self.no_default_features, "--no-default-features"),
            (self.release, "--release"),
        ] {
            if on {
                flags.push(flag.to_owned());
            }
        }
        flags.extend(self.cargo_flags());
        flags
    }
}

/// Which tests to run.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Test selection")]
pub struct FilterArgs {
    /// Only tests whose name contains one of these strings: libtest's rule, applied to
    /// the full name the table prints (`package::target::test`), so `target::test` and
    /// the bare name match too. A filter that matches no test is an error.
    #[arg(value_name = "FILTERS")]
    pub filters: Vec<String>,

    /// Match filters against whole names only: `package::target::test`,
    /// `target::test` or the bare test name.
    #[arg(long)]
    pub exact: bool,

    /// Run one shard of the tests, like nextest: `hash:M/N` (by a hash of the test's
    /// name; stable when tests come and go), `slice:M/N` (round-robin over the sorted
    /// list of every binary's tests) or `count:M/N` (round-robin within each binary).
    /// Ignored tests are dropped first, as nextest does.
    #[arg(long, value_name = "KIND:M/N")]
    pub partition: Option<Partition>,

    /// Which ignored tests (`#[vramtest(ignore)]`) run, as in nextest: `default`
    /// (none: each is reported ignored), `only` (those alone) or `all` (with the
    /// rest). Chosen before `--partition` shards the tests.
    #[arg(long, value_enum, value_name = "WHICH", default_value_t)]
    pub run_ignored: RunIgnored,
}

/// How to run and judge the tests (passed to the harness through the environment).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Running")]
pub struct ExecArgs {
    /// The device to measure on (VRAMTEST_DEVICE): cpu, cuda, or auto (CUDA when a
    /// device is present, else the CPU heap). Overrides `device` in the metadata.
    #[arg(long, value_name = "DEVICE", value_parser = device_parser())]
    pub device: Option<DeviceSetting>,

    /// Check mode (VRAMTEST_CHECK=1): never write a .snap file; a missing snapshot
    /// fails. The default under CI (CI set and not empty/0/false, TF_BUILD set, or
    /// GITHUB_ACTIONS=true; any one marker is enough).
    /// With VRAMTEST_UPDATE=new, new results still go to .snap.new files (for a CI
    /// artifact a reviewer can accept); otherwise nothing is written.
    #[arg(long)]
    pub check: bool,

    /// Fail on any difference from the snapshot, shrinking included (VRAMTEST_STRICT=1).
    #[arg(long)]
    pub strict: bool,

    /// Tests to run at once. Default: the available cores on the CPU; on GPUs one per
    /// visible device, each test pinned to its own with CUDA_VISIBLE_DEVICES (tests
    /// that share a GPU would see each other's memory), and never more than that.
    #[arg(short = 'j', long = "jobs", value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
}

/// What to write besides the table.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Reports")]
pub struct ReportArgs {
    /// `human` (a table, then one block per failure) or `json` (one object per line
    /// on stdout: each test's report, then a summary; see the crate docs).
    #[arg(long, value_enum, value_name = "FMT", default_value_t)]
    pub message_format: MessageFormat,

    /// Write a JUnit XML report to PATH.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,

    /// Write a markdown report (a pull-request comment body) to PATH.
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,

    /// Write a self-contained HTML report (summary, per-test timelines, old against
    /// new per category, diffs) to PATH; it opens from a downloaded CI artifact.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub build: BuildArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub exec: ExecArgs,
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub build: BuildArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// `human` (a table) or `json` (one object per test per line).
    #[arg(long, value_enum, value_name = "FMT", default_value_t)]
    pub message_format: MessageFormat,
}

#[derive(Debug, Clone, Args)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Only pending files of tests whose name contains one of these strings (the rule
    /// of `run`: `package::target::test`, `target::test` or the bare name). A filter
    /// that matches no snapshot file is an error.
    #[arg(value_name = "FILTERS")]
    pub filters: Vec<String>,
    /// Match filters against whole names only: `package::target::test`,
    /// `target::test` or the bare test name.
    #[arg(long)]
    pub exact: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// The test: `package::target::test` as the table prints it, `target::test` or the
    /// bare name (`mlp_adamw`); a unique part of it will do.
    #[arg(value_name = "TEST")]
    pub test: String,
    /// Show the pending result (.snap.new) instead of the committed snapshot.
    #[arg(long)]
    pub pending: bool,
    /// Also draw the last recorded run of the test as a stacked-area SVG timeline (live
    /// bytes per category over the step, phases shaded, the peak marked) to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Where each category's memory was allocated: builds the test, re-runs it on the
    /// CPU capturing stack traces of the blocks alive at the peak (and at each
    /// category's own peak), and prints per category the top call sites: bytes, blocks,
    /// your line (file:line) and the library operation. Writes no snapshot.
    #[arg(long, conflicts_with_all = ["pending", "svg"])]
    pub sites: bool,
    /// Predict a configuration from the test's sweep over named axes
    /// (`#[vramtest(axes(..))]`): every category, the peak, the CUDA allocated and
    /// reserved bytes, and whether it fits each common GPU memory size. Every numeric
    /// axis gets a value: `--at layers=32,seq=4096,batch=8`; a categorical axis may get
    /// a level (`precision=bf16`), and each combination of levels left open is
    /// predicted from its own fit, one after the other.
    #[arg(long, value_name = "AXIS=N,..", conflicts_with_all = ["sites", "svg"])]
    pub at: Option<String>,
    /// With --at: the largest value of a numeric AXIS that fits each memory size, the
    /// other axes from --at (AXIS itself may be left out of it), for each combination
    /// of levels.
    #[arg(long, value_name = "AXIS", requires = "at")]
    pub solve: Option<String>,
    /// With --at: per-GPU figures for N data-parallel ranks (the batch in --at is per
    /// rank); with --shard, the model states sharded by ZeRO stage. A projection.
    #[arg(long, value_name = "N", requires = "at", value_parser = clap::value_parser!(u64).range(1..))]
    pub ranks: Option<u64>,
    /// With --ranks: zero1 shards the optimizer state, zero2 also the gradients, zero3
    /// (FSDP full shard) also the parameters, one layer's gathered at a time.
    #[arg(long, value_name = "STAGE", requires = "ranks", value_enum)]
    pub shard: Option<ShardArg>,
    /// With --at: the lever table. One row per measured combination of the sweep's
    /// categorical axes (those agreeing with the levels --at names, and the baseline;
    /// a sweep without them: its measured baseline) and the levers projected from each,
    /// each with its formula: gradient accumulation to the batch in --at (when the sweep
    /// has a `batch` axis, one row per micro-batch the memory sizes call for), the
    /// optimizer's moments in 8 bits, and ZeRO-1/2/3 with --ranks (only --shard's stage
    /// when given). Each row: the categories, the peak, the CUDA allocated and reserved
    /// bytes, the saving against the baseline, the CPU step time relative to it and
    /// what fits each common GPU memory size.
    #[arg(long, requires = "at", conflicts_with_all = ["solve", "fit_on"])]
    pub levers: bool,
    /// With --at: the rows of the lever table (see --levers) that fit SIZE (`24GiB`,
    /// `80 GB`; the unit written out) with the allowance for the CUDA context set aside, cheapest first (the
    /// CPU time ratio, then fewer levers); when none does, the closest and by how much
    /// it misses.
    #[arg(long, value_name = "SIZE", requires = "at", conflicts_with = "solve")]
    pub fit_on: Option<String>,
    /// `json` prints one object per snapshot, a line each: its figures (`at_peak`,
    /// `category_peaks`, `phases`, …), `sites`, `hints` and `checks` (the gradient
    /// check with its `cause` and `fix`). With --at: one per snapshot and combination
    /// of levels (`at`, `variant`, `category_bytes`, `peak_bytes`, `allocated_bytes`,
    /// `reserved_bytes`, `fits`, `loo_error`, `terms`); with --levers the table (`at`, `levers`, `projections`); with
    /// --fit-on the answer (`memory_bytes`, `allowance_bytes`, `fitting`, `closest`).
    #[arg(long, value_enum, default_value_t = MessageFormat::Human, conflicts_with = "svg")]
    pub message_format: MessageFormat,
    #[command(flatten)]
    pub build: BuildArgs,
}

#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// The test, named as for `show`: `package::target::test`, `target::test`, the bare
    /// name, or a unique part of it. It needs a committed snapshot with a sweep over
    /// named axes; an ignored test is measured too.
    #[arg(value_name = "TEST")]
    pub test: String,
    /// The point to measure: every axis of the test, `--at layers=6,seq=48,batch=8`,
    /// and a level of each categorical one (`--at layers=6,seq=48,precision=bf16`).
    #[arg(long, value_name = "AXIS=N,..", required = true)]
    pub at: String,
    /// The device to measure on (cpu, cuda, or auto: CUDA when a device is present,
    /// else the CPU heap). Overrides `device` in the metadata.
    #[arg(long, value_name = "DEVICE", value_parser = device_parser())]
    pub device: Option<DeviceSetting>,
    /// `json` prints one object: `at`, `measured` and `predicted` (each
    /// `category_bytes` and `peak_bytes`), and `error` (each figure's
    /// (predicted − measured) / measured).
    #[arg(long, value_enum, value_name = "FMT", default_value_t)]
    pub message_format: MessageFormat,
    #[command(flatten)]
    pub build: BuildArgs,
}

#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// The shards' reports: each shard's `cargo vramtest --message-format json` output,
    /// one file per shard. A shard of the partition that no file holds is named in
    /// every report written, and the merge exits 2.
    #[arg(value_name = "FILES", required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

/// `--device`: the metadata's own type, so the flag and the `device` key take the same
/// values and mean the same thing.
fn device_parser() -> impl clap::builder::TypedValueParser<Value = DeviceSetting> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(DeviceSetting::ALL.map(DeviceSetting::as_str))
        .map(|s| s.parse().expect("one of the possible values"))
}

/// `--shard`: a ZeRO stage, named as `vramtest_model::sweep::Shard` displays it. The
/// variants carry no doc comments, so `--help` lists the names on one line as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShardArg {
    Zero1,
    Zero2,
    Zero3,
}

impl From<ShardArg> for Shard {
    fn from(arg: ShardArg) -> Shard {
        match arg {
            ShardArg::Zero1 => Shard::Zero1,
            ShardArg::Zero2 => Shard::Zero2,
            ShardArg::Zero3 => Shard::Zero3,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum MessageFormat {
    #[default]
    Human,
    Json,
}

impl Cli {
    /// Parses the process's arguments. Cargo runs `cargo-vramtest vramtest …`; the
    /// extra `vramtest` is dropped, so `cargo-vramtest …` works the same.
    pub fn from_env() -> Cli {
        Cli::parse_from(strip_subcommand_name(std::env::args_os()))
    }

    /// The subcommand to run, `run` when none was named.
    pub fn into_command(self) -> Command {
        self.command.unwrap_or(Command::Run(self.run))
    }
}

/// Drops cargo's `vramtest` argument from `cargo-vramtest vramtest …`.
pub fn strip_subcommand_name<I, T>(args: I) -> Vec<std::ffi::OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    let mut args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).is_some_and(|a| a == "vramtest") {
        args.remove(1);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(strip_subcommand_name(args.iter().copied())).unwrap()
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn shard_names_are_the_stages_names() {
        for arg in ShardArg::value_variants() {
            let name = arg.to_possible_value().expect("no variant is skipped");
            assert_eq!(name.get_name(), Shard::from(*arg).to_string());
        }
    }

    #[test]
    fn cargo_passes_the_subcommand_name() {
        let via_cargo = parse(&["cargo-vramtest", "vramtest", "-p", "a", "mlp"]);
        let direct = parse(&["cargo-vramtest", "-p", "a", "mlp"]);
        for cli in [via_cargo, direct] {
            let Command::Run(run) = cli.into_command() else {
                panic!("run is the default")
            };
            assert_eq!(run.selection.packages, ["a"]);
            assert_eq!(run.filter.filters, ["mlp"]);
        }
    }

    #[test]
    fn subcommands_take_the_common_flags() {
        let cli = parse(&[
            "cargo-vramtest",
            "vramtest",
            "list",
            "--partition",
            "hash:1/2",
            "--manifest-path",
            "x/Cargo.toml",
            "--color",
            "never",
        ]);
        assert_eq!(cli.color, Some(ColorArg::Never));
        let Command::List(list) = cli.into_command() else {
            panic!("list")
        };
        assert!(list.filter.partition.is_some());
        assert_eq!(
            list.selection.manifest_path,
            Some(PathBuf::from("x/Cargo.toml"))
        );
    }

    #[test]
    fn run_flags() {
        let cli = parse(&[
            "cargo-vramtest",
            "run",
            "--check",
            "--strict",
            "--device",
            "cuda",
            "-j",
            "3",
            "--message-format",
            "json",
            "--junit",
            "j.xml",
            "--markdown",
            "m.md",
            "--features",
            "a,b",
            "--release",
        ]);
        let Command::Run(run) = cli.into_command() else {
            panic!("run")
        };
        assert!(run.exec.check && run.exec.strict);
        assert_eq!(run.exec.device, Some(DeviceSetting::Cuda));
        assert_eq!(run.exec.jobs, Some(3));
        assert_eq!(run.report.message_format, MessageFormat::Json);
        assert_eq!(run.build.features, ["a,b"]);
        assert!(run.build.release);
    }

    #[test]
    fn build_flags_become_cargos_flags() {
        let build = BuildArgs {
            features: vec!["x,y".into(), "z".into()],
            all_features: false,
            no_default_features: true,
            release: true,
            locked: true,
            ..BuildArgs::default()
        };
        assert_eq!(
            build.test_flags().join(" "),
            "--features x,y,z --no-default-features --release --locked"
        );
        assert_eq!(build.cargo_flags(), ["--locked"]);
        let none = BuildArgs {
            features: vec![", ".into()],
            ..BuildArgs::default()
        };
        assert!(none.test_flags().is_empty());
    }

    #[test]
    fn the_flag_and_the_metadata_share_one_device_type() {
        for device in DeviceSetting::ALL {
            let name = device.as_str();
            let Command::Run(run) = parse(&["cargo-vramtest", "--device", name]).into_command()
            else {
                panic!("run")
            };
            let from_metadata =
                vramtest_model::settings::Settings::parse(&serde_json::json!({ "device": name }))
                    .unwrap()
                    .device;
            assert_eq!(run.exec.device, from_metadata, "{name}");
            assert_eq!(name.parse::<DeviceSetting>(), Ok(device));
            assert_eq!(device.to_string(), name);
        }
        let help = Cli::command().render_long_help().to_string();
        assert!(
            help.contains("[possible values: cpu, cuda, auto]"),
            "{help}"
        );
    }

    #[test]
    fn merge_takes_files_and_the_report_flags() {
        let cli = parse(&[
            "cargo-vramtest",
            "vramtest",
            "merge",
            "a.jsonl",
            "b.jsonl",
            "--junit",
            "j.xml",
            "--markdown",
            "m.md",
            "--html",
            "r.html",
            "--message-format",
            "json",
        ]);
        let Command::Merge(merge) = cli.into_command() else {
            panic!("merge")
        };
        assert_eq!(merge.files, [PathBuf::from("a.jsonl"), "b.jsonl".into()]);
        assert_eq!(merge.report.junit, Some("j.xml".into()));
        assert_eq!(merge.report.markdown, Some("m.md".into()));
        assert_eq!(merge.report.html, Some("r.html".into()));
        assert_eq!(merge.report.message_format, MessageFormat::Json);
        let none = Cli::try_parse_from(["cargo-vramtest", "merge"]).unwrap_err();
        assert_eq!(none.exit_code(), 2, "a merge needs files");
    }

    #[test]
    fn measure_takes_a_test_a_point_and_the_format() {
        let cli = parse(&[
            "cargo-vramtest",
            "vramtest",
            "measure",
            "transformer_like",
            "--at",
            "layers=6,seq=48,batch=8",
            "--message-format",
            "json",
            "--device",
            "cpu",
        ]);
        let Command::Measure(m) = cli.into_command() else {
            panic!("measure")
        };
        assert_eq!(m.test, "transformer_like");
        assert_eq!(m.at, "layers=6,seq=48,batch=8");
        assert_eq!(m.message_format, MessageFormat::Json);
        assert_eq!(m.device, Some(DeviceSetting::Cpu));
        let no_point = Cli::try_parse_from(["cargo-vramtest", "measure", "t"]).unwrap_err();
        assert_eq!(no_point.exit_code(), 2, "measure needs --at");
    }

    #[test]
    fn usage_errors_are_exit_code_2() {
        for bad in [
            &["cargo-vramtest", "-j", "0"][..],
            &["cargo-vramtest", "--partition", "hash:3/2"],
            &["cargo-vramtest", "--device", "tpu"],
            &["cargo-vramtest", "show"],
        ] {
            let e = Cli::try_parse_from(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn help_says_what_check_mode_still_writes() {
        let help = Cli::command().render_long_help().to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(help.contains("never write a .snap file"), "{help}");
        assert!(
            help.contains("With VRAMTEST_UPDATE=new, new results still go to .snap.new files"),
            "{help}"
        );
    }

    #[test]
    fn help_documents_the_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit codes:"));
        assert!(help.contains("101"));
        assert!(help.contains("a report (--junit, --markdown, --html, the job summary)"));
    }
}
