//! What the far-point tests share: a fixture's test run and `measure`'s JSON, read as
//! the predicted and measured figures they compare.

use super::{Fixture, Ran};
use serde_json::Value;
use vramtest_model::Category;
use vramtest_model::report::TestReport;
use vramtest_model::sweep::Estimate;

/// `|predicted − measured| / measured`, in percent.
pub fn off(predicted: u64, measured: u64) -> f64 {
    (predicted as f64 - measured as f64).abs() / measured as f64 * 100.0
}

/// Runs the test `name` of the copy's `vram` target in its test binary on the CPU
/// (`cargo test`), writing nothing unless `envs` says otherwise; returns its report.
pub fn vram_test(f: &Fixture, name: &str, envs: &[(&str, &str)]) -> TestReport {
    vram_test_with(f, name, &[], envs)
}

/// [`vram_test`] with the harness's arguments `args` besides the test's name
/// (`--include-ignored`).
pub fn vram_test_with(f: &Fixture, name: &str, args: &[&str], envs: &[(&str, &str)]) -> TestReport {
    let reports = tempfile::tempdir().unwrap();
    let mut test = vec!["test", "--test", "vram", "--", name, "--exact"];
    test.extend(args);
    let out = f
        .cargo(&test)
        .env("VRAMTEST_REPORT_DIR", reports.path())
        .env("VRAMTEST_DEVICE", "cpu")
        .env("VRAMTEST_UPDATE", "no")
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    let ran = Ran::from(out);
    let file = reports.path().join(format!("vram__{name}.json"));
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", file.display(), ran.text()));
    serde_json::from_str(&text).unwrap()
}

/// The flagged fits of `predicted` besides the pool's figures (which have their own
/// fallbacks) and `workspace` (no tensor): each one a prediction not to be trusted.
pub fn flagged_tensor_fits(predicted: &Estimate) -> Vec<&String> {
    predicted
        .flagged
        .iter()
        .filter(|f| !f.starts_with("allocated") && !f.starts_with("reserved"))
        .filter(|f| *f != "workspace")
        .collect()
}

/// `args` (a `measure` or `show` command) with `--message-format json`: the run and
/// the one object it printed.
pub fn run_json(f: &Fixture, args: &[&str]) -> (Ran, Value) {
    let mut json = args.to_vec();
    json.extend(["--message-format", "json"]);
    let ran = f.run(&json, &[]);
    let v = serde_json::from_str(ran.stdout.trim())
        .unwrap_or_else(|e| panic!("{}: {e}: {}", args.join(" "), ran.text()));
    (ran, v)
}

/// Category `c`'s bytes on one side (`measured`, `predicted`) of `measure`'s JSON.
pub fn bytes(side: &Value, c: Category) -> u64 {
    side["category_bytes"][c.as_str()]
        .as_u64()
        .unwrap_or_else(|| panic!("no {c} in {side}"))
}
