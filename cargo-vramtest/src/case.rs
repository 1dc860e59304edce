//! The tests a run knows of: the built test binaries, the tests listed in them, and
//! what each one gave. Every other module speaks of tests in these types.

use crate::filter::TestName;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use vramtest_model::report::TestReport;

/// A built test executable of one vramtest target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    pub package: String,
    /// The cargo target name (`vram`).
    pub target: String,
    pub path: PathBuf,
    /// The package's directory: the working directory of its tests.
    pub package_dir: PathBuf,
    pub package_version: String,
}

impl Binary {
    /// nextest's binary id: `package::target`.
    pub fn id(&self) -> String {
        format!("{}::{}", self.package, self.target)
    }
}

/// One test of one binary.
#[derive(Debug, Clone)]
pub struct TestCase {
    pub binary: Arc<Binary>,
    pub name: String,
    /// The harness skips it (`#[vramtest(ignore)]`) and reports it ignored.
    pub ignored: bool,
    /// An ignored test the user asked for (`--run-ignored only|all`): its binary runs
    /// it with `--include-ignored`.
    pub include_ignored: bool,
}

/// `--run-ignored`: which ignored tests run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RunIgnored {
    /// Skip them, each reported ignored.
    #[default]
    Default,
    /// Run the ignored tests alone.
    Only,
    /// Run the ignored tests with the rest.
    All,
}

/// `--run-ignored`, as nextest spells it: which of `cases` run, and how.
pub fn choose_ignored(cases: Vec<TestCase>, which: RunIgnored) -> Vec<TestCase> {
    let take = |mut c: TestCase| {
        if c.ignored {
            c.ignored = false;
            c.include_ignored = true;
        }
        c
    };
    match which {
        RunIgnored::Default => cases,
        RunIgnored::Only => cases.into_iter().filter(|c| c.ignored).map(take).collect(),
        RunIgnored::All => cases.into_iter().map(take).collect(),
    }
}

impl TestCase {
    /// `package::target::test`.
    pub fn full_name(&self) -> String {
        format!("{}::{}", self.binary.id(), self.name)
    }

    /// The names filters match.
    pub fn test_name(&self) -> TestName<'_> {
        TestName {
            package: &self.binary.package,
            target: &self.binary.target,
            test: &self.name,
        }
    }

    /// Whether any of `filters` names this test (every test, when there is none); see
    /// [`crate::filter`].
    pub fn matches(&self, filters: &[String], exact: bool) -> bool {
        self.test_name().matches_any(filters, exact)
    }
}

/// A test's result.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub case: TestCase,
    pub report: TestReport,
    pub duration: Duration,
}

impl Outcome {
    /// Whether this result fails the run: a failing status, or a new result left
    /// pending for review (as insta does).
    pub fn fails(&self) -> bool {
        self.report.fails()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use test_case::test_case;

    /// A test case of a `vram` target named `name`.
    pub(crate) fn case(name: &str) -> TestCase {
        TestCase {
            binary: Arc::new(Binary {
                package: "pkg".into(),
                target: "vram".into(),
                path: "/x".into(),
                package_dir: "/".into(),
                package_version: "0.1.0".into(),
            }),
            name: name.into(),
            ignored: false,
            include_ignored: false,
        }
    }

    #[test_case(&[], false, true; "no filter")]
    #[test_case(&["adam"], false, true; "substring")]
    #[test_case(&["sgd", "adam"], false, true; "any filter")]
    #[test_case(&["adam"], true, false; "exact needs the whole name")]
    #[test_case(&["mlp_adamw"], true, true; "exact")]
    #[test_case(&["pkg::vram::mlp_adamw"], true, true; "full name")]
    #[test_case(&["pkg::vram"], false, true; "binary id")]
    #[test_case(&["vram::mlp_adamw"], true, true; "target and name, exact")]
    #[test_case(&["sgd"], false, false; "no match")]
    fn filters(filters: &[&str], exact: bool, expected: bool) {
        let filters: Vec<String> = filters.iter().map(|s| s.to_string()).collect();
        assert_eq!(case("mlp_adamw").matches(&filters, exact), expected);
    }
}
