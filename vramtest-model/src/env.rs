//! Every environment switch of vramtest, in one place, read by the test harness and by
//! `cargo vramtest` alike (so both accept and reject the same values).

use crate::settings::{DeviceSetting, Settings};
use std::path::PathBuf;

/// What may be written when a result differs from its snapshot (`VRAMTEST_UPDATE`,
/// falling back to `INSTA_UPDATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// Overwrite `.snap` files with new results (`always`, insta's `force`).
    Always,
    /// Write `.snap.new` beside the snapshot for review (`new`; `auto` off CI).
    New,
    /// Write nothing (`no`; `auto` on CI; `--check`).
    No,
}

/// The effective update mode. `auto` (the default) is `new` locally and `no` in check
/// mode (CI). In check mode an explicit `new` still writes `.snap.new` files (for a CI
/// artifact a reviewer can accept), but `.snap` files are never written.
pub fn update() -> Result<Update, String> {
    let (var, value) = match std::env::var("VRAMTEST_UPDATE") {
        Ok(v) => ("VRAMTEST_UPDATE", v),
        Err(_) => (
            "INSTA_UPDATE",
            std::env::var("INSTA_UPDATE").unwrap_or_default(),
        ),
    };
    let explicit = match value.as_str() {
        "" | "auto" => None,
        "always" | "force" => Some(Update::Always),
        "new" | "unseen" => Some(Update::New),
        "no" => Some(Update::No),
        other => {
            return Err(format!(
                "{var}={other}: unknown mode (hint: use always, new, no or auto)"
            ));
        }
    };
    Ok(match (check(), explicit) {
        (true, Some(Update::New)) => Update::New,
        (true, _) => Update::No,
        (false, explicit) => explicit.unwrap_or(Update::New),
    })
}

/// Check mode: write nothing; a missing snapshot fails. On under CI (insta's rule:
/// `CI` set and not `false`/`0`/empty, or `TF_BUILD` set) or with `VRAMTEST_CHECK=1`.
pub fn check() -> bool {
    flag("VRAMTEST_CHECK") || is_ci()
}

/// insta's CI detection.
pub fn is_ci() -> bool {
    match std::env::var("CI") {
        Ok(v) => !matches!(v.as_str(), "" | "0" | "false"),
        Err(_) => std::env::var_os("TF_BUILD").is_some(),
    }
}

/// `VRAMTEST_STRICT=1`: any difference fails.
pub fn strict() -> bool {
    flag("VRAMTEST_STRICT")
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

/// `VRAMTEST_DEVICE=cpu|cuda|auto`; `None` when unset (then the settings decide, and
/// `auto` is the default: CUDA when a device is present, else the CPU).
pub fn device() -> Result<Option<DeviceSetting>, String> {
    match std::env::var("VRAMTEST_DEVICE")
        .unwrap_or_default()
        .as_str()
    {
        "" => Ok(None),
        "auto" => Ok(Some(DeviceSetting::Auto)),
        "cpu" => Ok(Some(DeviceSetting::Cpu)),
        "cuda" => Ok(Some(DeviceSetting::Cuda)),
        other => Err(format!(
            "VRAMTEST_DEVICE={other}: unknown device (hint: use cpu, cuda or auto)"
        )),
    }
}

/// The name of the variable that carries resolved settings (their JSON form,
/// [`Settings::to_json`]) from `cargo vramtest` to the harness.
pub const CONFIG: &str = "VRAMTEST_CONFIG";

/// Settings from `cargo vramtest` (`VRAMTEST_CONFIG`); `None` when unset.
pub fn config() -> Result<Option<Settings>, String> {
    match std::env::var(CONFIG) {
        Ok(json) if !json.trim().is_empty() => {
            let value = serde_json::from_str(&json)
                .map_err(|e| format!("{CONFIG} is not a valid configuration: {e}"))?;
            Settings::parse(&value)
                .map(Some)
                .map_err(|e| format!("{CONFIG}: {e}"))
        }
        _ => Ok(None),
    }
}

/// Where `cargo vramtest` wants one JSON report per test (`VRAMTEST_REPORT_DIR`).
pub fn report_dir() -> Option<PathBuf> {
    std::env::var_os("VRAMTEST_REPORT_DIR").map(PathBuf::from)
}

/// insta's list of referenced snapshots (`INSTA_SNAPSHOT_REFERENCES_FILE`), so
/// `cargo insta test --unreferenced=reject` keeps ours.
pub fn references_file() -> Option<PathBuf> {
    std::env::var_os("INSTA_SNAPSHOT_REFERENCES_FILE").map(PathBuf::from)
}

/// `VRAMTEST_TIMEOUT=<seconds>`: a test still running after this long is killed and
/// fails. `None` (the default): no limit.
pub fn timeout() -> Result<Option<std::time::Duration>, String> {
    seconds("VRAMTEST_TIMEOUT", 600)
}

/// A positive number of seconds in `var`; `None` when it is unset or empty. The error
/// suggests `example`.
fn seconds(var: &str, example: u32) -> Result<Option<std::time::Duration>, String> {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Some(std::time::Duration::from_secs_f64(s)))
            .ok_or_else(|| format!("{var}={v}: not a number of seconds (hint: {var}={example})")),
        _ => Ok(None),
    }
}

/// When the harness captures call sites (`VRAMTEST_SITES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SitesWhen {
    /// Never (`0`, `off`, `false`).
    Off,
    /// For a regression measured on the CPU (unset, `auto`, `1`): the default.
    OnRegression,
    /// For every test measured on the CPU (`always`; what `show --sites` sets).
    Always,
}

/// `VRAMTEST_SITES`: see [`SitesWhen`].
pub fn sites() -> Result<SitesWhen, String> {
    match std::env::var("VRAMTEST_SITES").unwrap_or_default().as_str() {
        "" | "auto" | "1" | "on" | "true" => Ok(SitesWhen::OnRegression),
        "0" | "off" | "false" => Ok(SitesWhen::Off),
        "always" => Ok(SitesWhen::Always),
        other => Err(format!(
            "VRAMTEST_SITES={other}: unknown mode (hint: use 0 to turn call sites off, always, or auto)"
        )),
    }
}

/// How long capturing call sites may take, all re-runs together
/// (`VRAMTEST_SITES_TIMEOUT=<seconds>`, default [`DEFAULT_SITES_TIMEOUT`]).
pub fn sites_timeout() -> Result<std::time::Duration, String> {
    Ok(seconds("VRAMTEST_SITES_TIMEOUT", 300)?.unwrap_or(DEFAULT_SITES_TIMEOUT))
}

/// The default of `VRAMTEST_SITES_TIMEOUT`: two minutes.
pub const DEFAULT_SITES_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Checks every switch that has a fixed set of values (`VRAMTEST_UPDATE`/`INSTA_UPDATE`,
/// `VRAMTEST_DEVICE`, `VRAMTEST_CONFIG`), so a front end can reject a typo up front.
pub fn validate() -> Result<(), String> {
    update()?;
    device()?;
    config()?;
    timeout()?;
    sites()?;
    sites_timeout()?;
    Ok(())
}
