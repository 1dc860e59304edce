//! `[workspace.metadata.vramtest]` and `[package.metadata.vramtest]`: validated from
//! their JSON form (what `cargo metadata` reports, or a manifest parsed as TOML), merged
//! (the package wins, key by key) and turned into the harness's [`Config`]. Shared by
//! `cargo vramtest` and the test harness, so both read the same settings the same way.
//!
//! ```toml
//! [package.metadata.vramtest]
//! iterations = 3
//! device = "cpu"            # cpu | cuda | auto
//! budget = "22GiB"          # hard ceiling on the peak
//! tolerance = "+2% | 1MiB"  # the peak and every category
//! limits = { activations = "+5%", leak = "0" }
//! ```

use crate::report::Config;
use crate::{Category, Limit, parse_bytes};
use serde_json::Value;
use std::collections::BTreeMap;

/// The `device` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSetting {
    Cpu,
    Cuda,
    Auto,
}

impl DeviceSetting {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceSetting::Cpu => "cpu",
            DeviceSetting::Cuda => "cuda",
            DeviceSetting::Auto => "auto",
        }
    }

    /// Every setting, in the order help texts list them.
    pub const ALL: [DeviceSetting; 3] =
        [DeviceSetting::Cpu, DeviceSetting::Cuda, DeviceSetting::Auto];
}

impl std::fmt::Display for DeviceSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A device name that is not `cpu`, `cuda` or `auto`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown device `{0}` (hint: use cpu, cuda or auto)")]
pub struct UnknownDevice(pub String);

impl std::str::FromStr for DeviceSetting {
    type Err = UnknownDevice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DeviceSetting::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| UnknownDevice(s.to_owned()))
    }
}

/// The keys a `vramtest` table may hold.
const KEYS: &str = "iterations, device, budget, tolerance, limits";

/// The keys of `limits`.
const LIMIT_KEYS: &str = "tolerance, peak, leak, parameters, gradients, optimizer_state, activations, inputs, temporaries, workspace, untracked";

/// One `vramtest` metadata table, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub iterations: Option<u32>,
    pub device: Option<DeviceSetting>,
    pub budget: Option<u64>,
    /// Every category's and the peak's limit, unless `limits` names them.
    pub tolerance: Option<Limit>,
    /// Limits by key: `peak`, `leak` or a category.
    pub limits: BTreeMap<String, Limit>,
}

/// A key of a `vramtest` table that is unknown or has a bad value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: {message}")]
pub struct ConfigError {
    /// The offending key, dotted (`limits.activations`), or empty for the table itself.
    pub key: String,
    pub message: String,
}

fn bad(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
    }
}

impl Settings {
    /// Validates the JSON form of a `vramtest` table (`null`: no table).
    pub fn parse(value: &Value) -> Result<Settings, ConfigError> {
        let table = match value {
            Value::Null => return Ok(Settings::default()),
            Value::Object(t) => t,
            other => {
                return Err(bad(
                    "vramtest",
                    format!("expected a table, found {}", kind(other)),
                ));
            }
        };
        let mut s = Settings::default();
        for (key, value) in table {
            match key.as_str() {
                "iterations" => s.iterations = Some(iterations(value)?),
                "device" => s.device = Some(device(value)?),
                "budget" => s.budget = Some(budget(value)?),
                "tolerance" => s.tolerance = Some(limit("tolerance", value)?),
                "limits" => {
                    let Value::Object(limits) = value else {
                        return Err(bad(
                            "limits",
                            format!(
                                "expected a table like {{ activations = \"+5%\" }}, found {}",
                                kind(value)
                            ),
                        ));
                    };
                    for (k, v) in limits {
                        let dotted = format!("limits.{k}");
                        let l = limit(&dotted, v)?;
                        match k.as_str() {
                            "tolerance" => s.tolerance = Some(l),
                            "peak" | "leak" => {
                                s.limits.insert(k.clone(), l);
                            }
                            other if other.parse::<Category>().is_ok() => {
                                s.limits.insert(k.clone(), l);
                            }
                            _ => {
                                return Err(bad(
                                    dotted,
                                    format!("unknown limit (expected one of: {LIMIT_KEYS})"),
                                ));
                            }
                        }
                    }
                }
                _ => return Err(bad(key, format!("unknown key (expected one of: {KEYS})"))),
            }
        }
        Ok(s)
    }

    /// These settings with `over`'s keys taking precedence (a package over its
    /// workspace). Limits merge key by key.
    pub fn overridden_by(mut self, over: &Settings) -> Settings {
        self.iterations = over.iterations.or(self.iterations);
        self.device = over.device.or(self.device);
        self.budget = over.budget.or(self.budget);
        if over.tolerance.is_some() {
            // A package's tolerance replaces the workspace's per-key limits too: it is
            // the package's statement of how tight everything is.
            self.tolerance = over.tolerance;
            self.limits.clear();
        }
        self.limits
            .extend(over.limits.iter().map(|(k, v)| (k.clone(), *v)));
        self
    }

    /// What the harness reads from `VRAMTEST_CONFIG`. `tolerance` is expanded into the
    /// peak and every category that `limits` does not name, so the result does not
    /// depend on the order in which the harness applies keys.
    pub fn to_harness(&self) -> Config {
        let mut limits = self.limits.clone();
        if let Some(t) = self.tolerance {
            let keys = std::iter::once("peak").chain(Category::ALL.iter().map(|c| c.as_str()));
            for key in keys {
                limits.entry(key.to_owned()).or_insert(t);
            }
        }
        Config {
            iterations: self.iterations,
            limits,
            budget: self.budget,
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

fn iterations(v: &Value) -> Result<u32, ConfigError> {
    v.as_u64()
        .filter(|n| (1..=u32::MAX as u64).contains(n))
        .map(|n| n as u32)
        .ok_or_else(|| {
            bad(
                "iterations",
                format!("expected a whole number of at least 1, found {v}"),
            )
        })
}

fn device(v: &Value) -> Result<DeviceSetting, ConfigError> {
    match v.as_str() {
        Some("cpu") => Ok(DeviceSetting::Cpu),
        Some("cuda") => Ok(DeviceSetting::Cuda),
        Some("auto") => Ok(DeviceSetting::Auto),
        _ => Err(bad(
            "device",
            format!("expected \"cpu\", \"cuda\" or \"auto\", found {v}"),
        )),
    }
}

fn budget(v: &Value) -> Result<u64, ConfigError> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| bad("budget", format!("expected a byte count, found {n}"))),
        Value::String(s) => parse_bytes(s).map_err(|e| bad("budget", e.to_string())),
        other => Err(bad(
            "budget",
            format!("expected a byte size like \"22GiB\", found {}", kind(other)),
        )),
    }
}

fn limit(key: &str, v: &Value) -> Result<Limit, ConfigError> {
    match v {
        Value::String(s) => s.parse::<Limit>().map_err(|e| bad(key, e.to_string())),
        // `0` as a bare number: no growth.
        Value::Number(n) if n.as_u64() == Some(0) => Ok(Limit::EXACT),
        other => Err(bad(
            key,
            format!(
                "expected a limit like \"+2% | 1MiB\", found {}",
                kind(other)
            ),
        )),
    }
}

/// The 1-based line of `key` (possibly dotted, `limits.activations`) in the TOML table
/// `table` (`package.metadata.vramtest`) of a manifest's text, for error messages.
/// Best effort: falls back to the table's header line, then to `None`.
pub fn key_line(manifest: &str, table: &str, key: &str) -> Option<usize> {
    let (parent, leaf) = match key.split_once('.') {
        Some((p, l)) => (Some(p), l),
        None => (None, key),
    };
    let mut current = String::new();
    let mut header = None;
    let mut parent_line = None;
    for (i, raw) in manifest.lines().enumerate() {
        let line = raw.trim();
        if let Some(h) = line.strip_prefix('[') {
            current = h
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .replace([' ', '"'], "");
            if current == table {
                header = Some(i + 1);
            }
            continue;
        }
        let Some((lhs, _)) = line.split_once('=') else {
            continue;
        };
        let lhs = lhs.trim().replace([' ', '"'], "");
        let in_table = current == table;
        let in_sub = parent.is_some_and(|p| current == format!("{table}.{p}"));
        let hit = match parent {
            None => in_table && lhs == leaf,
            Some(p) => (in_table && lhs == format!("{p}.{leaf}")) || (in_sub && lhs == leaf),
        };
        if hit {
            return Some(i + 1);
        }
        if in_table && parent == Some(lhs.as_str()) {
            // `limits = { activations = "+5%" }`: the inline table's line.
            parent_line = Some(i + 1);
        }
    }
    parent_line.or(header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use test_case::test_case;

    fn limit(s: &str) -> Limit {
        s.parse().unwrap()
    }

    #[test]
    fn no_table_is_the_default() {
        assert_eq!(Settings::parse(&Value::Null).unwrap(), Settings::default());
    }

    #[test]
    fn every_key_parses() {
        let s = Settings::parse(&json!({
            "iterations": 5,
            "device": "cuda",
            "budget": "22GiB",
            "tolerance": "+2% | 1MiB",
            "limits": { "activations": "+5%", "leak": "0", "peak": 0 }
        }))
        .unwrap();
        assert_eq!(s.iterations, Some(5));
        assert_eq!(s.device, Some(DeviceSetting::Cuda));
        assert_eq!(s.budget, Some(22 << 30));
        assert_eq!(s.tolerance, Some(limit("+2% | 1MiB")));
        assert_eq!(s.limits["activations"], limit("+5%"));
        assert_eq!(s.limits["leak"], Limit::EXACT);
        assert_eq!(s.limits["peak"], Limit::EXACT);
    }

    #[test_case(json!({"iterations": 0}), "iterations", "at least 1"; "zero iterations")]
    #[test_case(json!({"iterations": "3"}), "iterations", "whole number"; "iterations as a string")]
    #[test_case(json!({"device": "tpu"}), "device", "\"cpu\", \"cuda\" or \"auto\""; "unknown device")]
    #[test_case(json!({"budget": "lots"}), "budget", "hint:"; "budget not a size")]
    #[test_case(json!({"budget": -1}), "budget", "byte count"; "negative budget")]
    #[test_case(json!({"budget": true}), "budget", "a boolean"; "budget as a boolean")]
    #[test_case(json!({"tolerance": "-3%"}), "tolerance", "invalid limit"; "negative tolerance")]
    #[test_case(json!({"tolerance": 5}), "tolerance", "a number"; "tolerance as a number")]
    #[test_case(json!({"limits": "+5%"}), "limits", "expected a table"; "limits not a table")]
    #[test_case(json!({"limits": {"activation": "+5%"}}), "limits.activation", "unknown limit"; "misspelt category")]
    #[test_case(json!({"limits": {"activations": "5 parsecs"}}), "limits.activations", "invalid limit"; "bad limit")]
    #[test_case(json!({"iteration": 3}), "iteration", "unknown key"; "misspelt key")]
    #[test_case(json!({"budgets": "1GiB"}), "budgets", "expected one of: iterations, device"; "unknown key lists the known ones")]
    #[test_case(json!(["cpu"]), "vramtest", "expected a table"; "not a table")]
    fn rejects(value: Value, key: &str, needle: &str) {
        let e = Settings::parse(&value).unwrap_err();
        assert_eq!(e.key, key);
        assert!(e.message.contains(needle), "{e}");
    }

    #[test]
    fn the_package_wins_key_by_key() {
        let ws = Settings::parse(&json!({
            "iterations": 3, "device": "cpu", "budget": 100,
            "limits": { "activations": "+5%", "gradients": "+1%" }
        }))
        .unwrap();
        let pkg = Settings::parse(&json!({
            "iterations": 7, "limits": { "activations": "+9%" }
        }))
        .unwrap();
        let merged = ws.overridden_by(&pkg);
        assert_eq!(merged.iterations, Some(7));
        assert_eq!(merged.device, Some(DeviceSetting::Cpu));
        assert_eq!(merged.budget, Some(100));
        assert_eq!(merged.limits["activations"], limit("+9%"));
        assert_eq!(merged.limits["gradients"], limit("+1%"));
    }

    #[test]
    fn tolerance_fills_every_limit_not_named() {
        let s = Settings::parse(&json!({
            "tolerance": "+3%", "limits": { "activations": "+5%" }
        }))
        .unwrap();
        let c = s.to_harness();
        assert_eq!(c.limits["activations"], limit("+5%"));
        assert_eq!(c.limits["peak"], limit("+3%"));
        assert_eq!(c.limits["workspace"], limit("+3%"));
        assert_eq!(c.limits["untracked"], limit("+3%"));
        assert!(!c.limits.contains_key("leak"));
        assert!(!c.limits.contains_key("tolerance"));
        // The harness reads it back.
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Config>(&json).unwrap(), c);
    }

    const MANIFEST: &str = r#"[package]
name = "x"

[package.metadata.vramtest]
iterations = 0
limits = { activations = "lots" }

[package.metadata.vramtest.limits]
gradients = "+1%"

[workspace.metadata.vramtest]
"budget" = "x"
limits.peak = "y"
"#;

    #[test_case("package.metadata.vramtest", "iterations", Some(5))]
    #[test_case("package.metadata.vramtest", "limits.activations", Some(6))]
    #[test_case("package.metadata.vramtest", "limits.gradients", Some(9))]
    #[test_case("package.metadata.vramtest", "device", Some(4); "missing key: the header")]
    #[test_case("workspace.metadata.vramtest", "budget", Some(12))]
    #[test_case("workspace.metadata.vramtest", "limits.peak", Some(13))]
    #[test_case("package.metadata.other", "x", None)]
    fn finds_the_line(table: &str, key: &str, line: Option<usize>) {
        assert_eq!(key_line(MANIFEST, table, key), line);
    }
}
