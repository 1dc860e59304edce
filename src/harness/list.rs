//! What a test binary holds: the registered `#[vramtest]` functions under the names
//! libtest and nextest see, and `--list` output that follows nextest's rules for
//! custom harnesses.

use super::TestDef;
use libtest_mimic::{Arguments, Trial};
use std::process::ExitCode;

fn test_name(def: &TestDef) -> String {
    // `module_path!()` starts with the crate; names are relative to it.
    match def.module.split_once("::") {
        Some((_, rest)) => format!("{rest}::{}", def.name),
        None => def.name.to_owned(),
    }
}

pub(super) fn registered() -> Vec<(String, &'static TestDef)> {
    let mut tests: Vec<_> = inventory::iter::<TestDef>
        .into_iter()
        .map(|d| (test_name(d), d))
        .collect();
    tests.sort_by(|a, b| a.0.cmp(&b.0));
    tests
}

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
