//! Every way `cargo vramtest` can stop before it reaches a verdict, with the exit code
//! each one maps to. The error types of the modules this one wraps live here too
//! ([`disagree`], [`TestTablesError`]), so that `error` uses no module that uses it.

pub mod disagree;

use std::path::PathBuf;

/// An error that ends the command. Messages name the file involved and end with a
/// `(hint: …)` where there is something better to type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `cargo metadata` failed (a broken manifest, an unknown package): cargo's own
    /// message where it printed one.
    #[error("cargo metadata failed: {}", metadata_failure(.0))]
    Metadata(#[source] cargo_metadata::Error),

    /// An environment switch has a value outside its set (`VRAMTEST_UPDATE=sometimes`,
    /// `VRAMTEST_DEVICE=tpu`); the message names the variable and the values it takes.
    #[error("{message}")]
    Environment { message: String },

    /// A `[*.metadata.vramtest]` table has unknown keys or bad values: every one, in the
    /// manifest's order, each on a line of its own with its line number where known.
    #[error("{}", config_lines(.manifest, .table, .problems))]
    Config {
        manifest: PathBuf,
        /// The table's dotted name (`package.metadata.vramtest`).
        table: &'static str,
        problems: Vec<(Option<usize>, vramtest_model::settings::SettingsError)>,
    },

    /// A manifest's `[[test]]` targets could not be read.
    #[error("{path}: {source}")]
    Manifest {
        path: PathBuf,
        #[source]
        source: TestTablesError,
    },

    /// No package in the selection has a test target that uses vramtest.
    #[error(
        "no vramtest test target in {workspace} (hint: add `vramtest` to [dev-dependencies] and a `[[test]]` with `harness = false` that ends with `vramtest::main!();`)"
    )]
    NoTargets { workspace: PathBuf },

    /// `-p NAME` named a package that is not a workspace member.
    #[error(
        "package `{name}` is not a member of the workspace {workspace} (hint: members are: {members})"
    )]
    UnknownPackage {
        name: String,
        workspace: PathBuf,
        members: String,
    },

    /// `--test NAME` or `--lib` found no vramtest target in the selected packages.
    #[error("{wanted}: {why} (hint: the vramtest targets there are: {available})")]
    UnknownTarget {
        /// The flag as typed: `--test vrm`, `--lib`.
        wanted: String,
        why: String,
        /// `package: --test vram, vec_model (--lib)` per package.
        available: String,
    },

    /// cargo could not build the test targets; its own messages were shown above.
    #[error("the build failed (cargo's messages are above)")]
    Build,

    /// A program could not be started or talked to.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },

    /// A test binary did not list its tests.
    #[error("{binary}: cannot list its tests: {message}")]
    List { binary: PathBuf, message: String },

    /// A test binary's harness wrote a report of a schema this cargo-vramtest does not
    /// read: the tests were built with another release of vramtest.
    #[error(
        "{}: its harness wrote {error} ({report}) (hint: build the tests with the vramtest release of this cargo-vramtest)",
        .binary.display()
    )]
    ReportSchema {
        binary: PathBuf,
        /// Where the report came from: its file, or the report pipe.
        report: String,
        error: vramtest_model::report::UnknownSchema,
    },

    /// Tests of one package whose snapshots would be one file: each would overwrite
    /// the other's and be judged against its figures.
    #[error("{}: {}", .package_dir.display(), .shared.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    SharedSnapshot {
        package_dir: PathBuf,
        shared: Vec<vramtest_model::snapshot::SharedFile>,
    },

    /// A snapshot file is malformed.
    #[error("{}", .0)]
    Snapshot(#[from] vramtest_model::snapshot::FileError),

    /// A filter names no test: a typo must not pass as an empty, green run.
    #[error("no test matches `{filter}` in {among} (hint: {})", suggest(.closest))]
    NoMatch {
        filter: String,
        /// Where the tests were looked for (`the tests of /w`).
        among: String,
        /// The closest names, best first.
        closest: Vec<String>,
    },

    /// `show TEST` matched nothing, or more than one test.
    #[error("{message}")]
    Selection { message: String },

    /// `show --svg` for a test that no run has recorded in this target directory.
    #[error(
        "no recorded run of {test} under {target_dir} (hint: run it first: `cargo vramtest {test}`)"
    )]
    NoTimeline { test: String, target_dir: PathBuf },

    /// `show --sites`: the re-run of the test did not give call sites.
    #[error("no call sites for {test}: {message}")]
    NoSites { test: String, message: String },

    /// A report (`--junit`, `--markdown`, `--html`, the job summary) could not be written. The
    /// run's verdict was printed before it.
    #[error(
        "cannot write the report {path}: {source} (hint: its directory must be creatable and writable; the verdict above stands)"
    )]
    Report {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// `merge`: the shards' reports contradict each other (the same test in two,
    /// another version, schema or partition); the message names the files.
    #[error("cannot merge the shards: {0}")]
    Shards(#[from] disagree::ShardsDisagree),

    /// `show --at`: a configuration the snapshot's sweep cannot predict (no sweep over
    /// named axes, an unknown or missing axis); the message names the axis.
    #[error("{snapshot}: {message}")]
    Prediction { snapshot: PathBuf, message: String },

    /// `measure`: the harness did not measure the point (the test does not run on this
    /// device, or the binary's harness is of a release that does not measure points).
    #[error("{test} was not measured: {message}")]
    NotMeasured { test: String, message: String },

    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The process exit code for this error: 101 for a failed build (cargo's own code),
    /// 2 for everything else (usage, configuration, snapshot format, I/O).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Build => 101,
            _ => 2,
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}

/// `did you mean a, b?` and where to see every name.
fn suggest(closest: &[String]) -> String {
    let list = "`cargo vramtest list` shows every test";
    if closest.is_empty() {
        list.to_owned()
    } else {
        format!("did you mean {}? {list}", closest.join(", "))
    }
}

/// cargo's message (its standard error, trimmed) where `cargo metadata` ran and failed,
/// else why it could not run or be read.
fn metadata_failure(error: &cargo_metadata::Error) -> String {
    match error {
        cargo_metadata::Error::CargoMetadata { stderr } => stderr.trim().to_owned(),
        other => other.to_string(),
    }
}

/// A line per problem of a manifest's `vramtest` table, each starting with its location
/// and the table's name.
fn config_lines(
    manifest: &std::path::Path,
    table: &str,
    problems: &[(Option<usize>, vramtest_model::settings::SettingsError)],
) -> String {
    problems
        .iter()
        .map(|(line, e)| format!("{}: [{table}] {e}", location(manifest, *line)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `path` or `path:line`, the form editors and CI annotations understand.
fn location(path: &std::path::Path, line: Option<usize>) -> String {
    match line {
        Some(line) => format!("{}:{line}", path.display()),
        None => path.display().to_string(),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a manifest's `[[test]]` targets could not be read (`discover::test_tables`).
#[derive(Debug, thiserror::Error)]
pub enum TestTablesError {
    /// The manifest is not TOML.
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// `test` is there but not an array of tables.
    #[error("`test` must be an array of tables ([[test]])")]
    NotAnArray,
}
