//! `--list`: the registered `#[vramtest]` functions, listed the way libtest lists
//! tests and under nextest's rules for custom harnesses.

use crate::harness::registry::TestDef;
use libtest_mimic::{Arguments, Trial};
use std::process::ExitCode;

/// `--list`: fast and side-effect free (nextest lists every binary).
pub(super) fn list(args: &Arguments, tests: &[(String, &'static TestDef)]) -> ExitCode {
    let trials = tests
        .iter()
        .map(|(name, def)| {
            Trial::test(name.clone(), || Ok(())).with_ignored_flag(def.options.ignore.is_some())
        })
        .collect();
    libtest_mimic::run(args, trials).exit_code()
}
