//! The settings of a run: `[workspace.metadata.vramtest]` and
//! `[package.metadata.vramtest]`, read from their JSON form (what `cargo metadata`
//! reports, or a manifest parsed as TOML) by serde, merged (the package wins, key by
//! key, then a test's attribute) and turned into the [`Policy`] a result is held to.
//! Shared by `cargo vramtest` and the test harness, so both read the same settings the
//! same way; the first hands its reading to the second in the same JSON form
//! ([`Settings::to_json`], carried by [`crate::env::HarnessEnv`]).
//!
//! ```toml
//! [package.metadata.vramtest]
//! iterations = 3
//! device = "cpu"            # cpu | cuda | auto
//! budget = "22GiB"          # hard ceiling on the peak
//! axial_budget = "8GiB"     # the most a sweep's axial point may need (unset: 10% of the grid's peaks shared; "0": none)
//! cuda_context = "512MiB"   # device memory a GPU run adds besides the pool's
//! cublas_workspace = "32MiB"
//! tolerance = "+2% | 1MiB"  # the peak and every category but untracked
//! limits = { activations = "+5%", leak = "0" }
//! ```
//!
//! Each key is named once, in [`SettingsTable`]; what a value may be is its type's to say
//! ([`ByteSize`], [`PowerOfTwo`], [`IterationCount`], [`DeviceSetting`], [`Limit`],
//! [`LimitKey`]).

use crate::bytes::ByteSize;
use crate::{Limit, LimitKey, Policy};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use toml::de::{DeTable, DeValue};

/// The `device` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSetting {
    /// Measure on the CPU, every heap allocation.
    Cpu,
    /// Measure on a CUDA device.
    Cuda,
    /// A CUDA device where one is usable, else the CPU.
    Auto,
}

impl DeviceSetting {
    /// The setting's name in a manifest and on the command line (`cpu`).
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

impl fmt::Display for DeviceSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

impl Serialize for DeviceSetting {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for DeviceSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = DeviceSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"cpu\", \"cuda\" or \"auto\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<DeviceSetting, E> {
                s.parse()
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Str(s), &self))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// The `iterations` setting: a whole number, at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct IterationCount(pub u32);

impl<'de> Deserialize<'de> for IterationCount {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = IterationCount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number of at least 1")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<IterationCount, E> {
                u32::try_from(n)
                    .ok()
                    .filter(|&n| n >= 1)
                    .map(IterationCount)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Unsigned(n), &self))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<IterationCount, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(n), &self)),
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A pool model's alignment or granule: a [`ByteSize`] that is a power of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct PowerOfTwo(pub u64);

impl<'de> Deserialize<'de> for PowerOfTwo {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ByteSize(bytes) = ByteSize::deserialize(deserializer)?;
        if bytes.is_power_of_two() {
            Ok(PowerOfTwo(bytes))
        } else {
            Err(serde::de::Error::custom(format_args!(
                "expected a power of two like 512 or \"2MiB\", found {bytes}"
            )))
        }
    }
}

/// The `limits` table: a [`Limit`] per [`LimitKey`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Limits(pub BTreeMap<LimitKey, Limit>);

impl<'de> Deserialize<'de> for Limits {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Limits;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table like { activations = \"+5%\" }")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Limits, A::Error> {
                let mut limits = BTreeMap::new();
                while let Some((key, limit)) = map.next_entry::<LimitKey, Limit>()? {
                    limits.insert(key, limit);
                }
                Ok(Limits(limits))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// One `vramtest` table as written: every key it may hold, each named here once. A key
/// that is absent (or `null`: an earlier `cargo vramtest` wrote one for a setting it
/// did not have) is `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table of settings like { iterations = 3 }"
)]
pub struct SettingsTable {
    /// Iterations of the training loop for tests that do not set them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<IterationCount>,
    /// The device to measure on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceSetting>,
    /// Hard ceiling on the peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<ByteSize>,
    /// The most a sweep's axial point may be predicted to need (`"0"`: none measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axial_budget: Option<ByteSize>,
    /// What a GPU needs besides the measured tensors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve: Option<ByteSize>,
    /// The CUDA context's device memory in a GPU prediction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_context: Option<ByteSize>,
    /// The cuBLAS workspace in a GPU prediction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cublas_workspace: Option<ByteSize>,
    /// The CUDA pool model's allocation alignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_alignment: Option<PowerOfTwo>,
    /// The CUDA pool model's reservation granule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_granule: Option<PowerOfTwo>,
    /// The peak and every category but `untracked` (also `limits.tolerance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<Limit>,
    /// The limits named, by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
}

/// One `vramtest` metadata table, validated; or several merged
/// ([`Settings::overridden_by`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Iterations of the training loop for tests that do not set them.
    pub iterations: Option<u32>,
    /// The device to measure on.
    pub device: Option<DeviceSetting>,
    /// Hard ceiling on the peak, in bytes.
    pub budget: Option<u64>,
    /// The most a sweep's axial point ([`crate::axial`]) may be predicted to need, in
    /// bytes; 0 measures none; unset, the points share
    /// [`crate::axial::DEFAULT_SHARE_PERCENT`] of the grid's measured peaks.
    pub axial_budget: Option<u64>,
    /// What a GPU needs besides the measured tensors (CUDA context, libraries), taken
    /// off each memory size before `cargo vramtest show` says what batch fits.
    /// It replaces `cuda_context` and `cublas_workspace` when set.
    pub reserve: Option<u64>,
    /// The CUDA context's device memory in a GPU prediction (see
    /// [`crate::pool::DEFAULT_CUDA_CONTEXT`]).
    pub cuda_context: Option<u64>,
    /// The cuBLAS workspace in a GPU prediction (see
    /// [`crate::pool::DEFAULT_CUBLAS_WORKSPACE`]).
    pub cublas_workspace: Option<u64>,
    /// The CUDA pool model's allocation alignment (see
    /// [`crate::pool::DEFAULT_ALIGNMENT`]; the GPU bundle's probe measures it).
    pub pool_alignment: Option<u64>,
    /// The CUDA pool model's reservation granule (see
    /// [`crate::pool::DEFAULT_GRANULARITY`]; the GPU bundle's probe measures it).
    pub pool_granule: Option<u64>,
    /// The limits named, by key: `tolerance` (written at the top of the table or in
    /// `limits`), `peak`, `reserved`, `leak`, `cpu_only` or a category.
    pub limits: BTreeMap<LimitKey, Limit>,
}

impl From<SettingsTable> for Settings {
    fn from(t: SettingsTable) -> Settings {
        let mut limits = t.limits.unwrap_or_default().0;
        if let Some(tolerance) = t.tolerance {
            limits.insert(LimitKey::Tolerance, tolerance);
        }
        Settings {
            iterations: t.iterations.map(|i| i.0),
            device: t.device,
            budget: t.budget.map(u64::from),
            axial_budget: t.axial_budget.map(u64::from),
            reserve: t.reserve.map(u64::from),
            cuda_context: t.cuda_context.map(u64::from),
            cublas_workspace: t.cublas_workspace.map(u64::from),
            pool_alignment: t.pool_alignment.map(|p| p.0),
            pool_granule: t.pool_granule.map(|p| p.0),
            limits,
        }
    }
}

impl From<&Settings> for SettingsTable {
    /// The table that reads back to `s`, every limit under `limits`.
    fn from(s: &Settings) -> SettingsTable {
        SettingsTable {
            iterations: s.iterations.map(IterationCount),
            device: s.device,
            budget: s.budget.map(ByteSize),
            axial_budget: s.axial_budget.map(ByteSize),
            reserve: s.reserve.map(ByteSize),
            cuda_context: s.cuda_context.map(ByteSize),
            cublas_workspace: s.cublas_workspace.map(ByteSize),
            pool_alignment: s.pool_alignment.map(PowerOfTwo),
            pool_granule: s.pool_granule.map(PowerOfTwo),
            tolerance: None,
            limits: (!s.limits.is_empty()).then(|| Limits(s.limits.clone())),
        }
    }
}

/// A key of a `vramtest` table that is unknown or has a bad value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: {message}")]
pub struct SettingsError {
    /// The offending key, dotted (`limits.activations`), or `vramtest` for the table
    /// itself.
    pub key: String,
    /// What is wrong with it, as its type says.
    pub message: String,
}

/// Every bad key of a `vramtest` table (at least one), in the order the table was read;
/// [`SettingsErrors::in_file_order`] puts them in the manifest's order, with their lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsErrors(pub Vec<SettingsError>);

impl fmt::Display for SettingsErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SettingsErrors {}

impl SettingsErrors {
    /// The errors in the order their keys appear in `manifest`'s table `table`
    /// (`package.metadata.vramtest`), each with its key's 1-based line; an error whose
    /// key cannot be found keeps its place after those that can.
    pub fn in_file_order(
        &self,
        manifest: &str,
        table: &str,
    ) -> Vec<(Option<usize>, &SettingsError)> {
        let mut located: Vec<(Option<usize>, &SettingsError)> = self
            .0
            .iter()
            .map(|e| (key_offset(manifest, table, &e.key), e))
            .collect();
        located.sort_by_key(|(offset, _)| offset.unwrap_or(usize::MAX));
        located
            .into_iter()
            .map(|(offset, e)| (offset.map(|o| line_of(manifest, o)), e))
            .collect()
    }
}

impl Settings {
    /// Reads the JSON form of a `vramtest` table (`null`: no table) as a [`SettingsTable`].
    /// Every bad key is reported, not only the first serde stops at: each key is read
    /// again on its own, and each limit of `limits`.
    pub fn parse(value: &Value) -> Result<Settings, SettingsErrors> {
        match value {
            Value::Null => return Ok(Settings::default()),
            Value::Object(_) => {}
            // serde would read an array as the fields in order: a table is a table.
            other => {
                let e = <serde_json::Error as serde::de::Error>::invalid_type(
                    unexpected(other),
                    &"a table of settings like { iterations = 3 }",
                );
                return Err(SettingsErrors(vec![bad("vramtest", &e)]));
            }
        }
        match SettingsTable::deserialize(value) {
            Ok(table) => Ok(table.into()),
            Err(first) => Err(SettingsErrors(every_error(value, first))),
        }
    }

    /// The JSON form [`Settings::parse`] reads back to these settings: a `vramtest`
    /// table, every limit under `limits`. What `cargo vramtest` hands the harness.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(SettingsTable::from(self)).expect("settings are plain data")
    }

    /// These settings with `over`'s keys taking precedence (a package over its
    /// workspace, a test's attribute over both), key by key: `over`'s `tolerance`
    /// replaces only the tolerance, and `limits` merge category by category, so a
    /// limit named at any level is kept unless a more specific level names it too.
    pub fn overridden_by(mut self, over: &Settings) -> Settings {
        self.iterations = over.iterations.or(self.iterations);
        self.device = over.device.or(self.device);
        self.budget = over.budget.or(self.budget);
        self.axial_budget = over.axial_budget.or(self.axial_budget);
        self.reserve = over.reserve.or(self.reserve);
        self.cuda_context = over.cuda_context.or(self.cuda_context);
        self.cublas_workspace = over.cublas_workspace.or(self.cublas_workspace);
        self.pool_alignment = over.pool_alignment.or(self.pool_alignment);
        self.pool_granule = over.pool_granule.or(self.pool_granule);
        self.limits.extend(&over.limits);
        self
    }

    /// What a GPU needs besides the pool's memory in a prediction: `reserve` when set,
    /// else the CUDA context and the cuBLAS workspace.
    pub fn allowance(&self) -> crate::pool::Allowance {
        crate::pool::Allowance::from_settings(
            self.reserve,
            self.cuda_context,
            self.cublas_workspace,
        )
    }

    /// The CUDA pool model a GPU prediction replays through: `pool_alignment` and
    /// `pool_granule` where set, else the documented or assumed defaults.
    pub fn cuda_pool(&self) -> crate::pool::CudaPool {
        let default = crate::pool::CudaPool::default();
        crate::pool::CudaPool {
            alignment: self.pool_alignment.unwrap_or(default.alignment),
            granularity: self.pool_granule.unwrap_or(default.granularity),
        }
    }

    /// The limits these settings hold a result to: the defaults, with every named
    /// limit set by [`Policy::set_all`] (the tolerance first, so the peak and every
    /// category but `untracked` take it unless named themselves; the reserved bytes and
    /// the leak follow only their own names), and the budget.
    pub fn policy(&self) -> Policy {
        let mut policy = Policy {
            budget: self.budget,
            ..Policy::default()
        };
        policy.set_all(self.limits.iter().map(|(k, l)| (*k, *l)));
        policy
    }
}

/// Every error of a table serde refused (`first`: what it stopped at): each key read
/// on its own as a one-key [`SettingsTable`], and each limit of a `limits` table as a one-limit
/// one, so that one bad key does not hide the next.
fn every_error(value: &Value, first: serde_json::Error) -> Vec<SettingsError> {
    let Value::Object(table) = value else {
        unreachable!("only a table is read key by key")
    };
    let alone = |key: &str, value: &Value| {
        let one = Value::Object(serde_json::Map::from_iter([(
            key.to_owned(),
            value.clone(),
        )]));
        SettingsTable::deserialize(&one).err()
    };
    let mut errors = Vec::new();
    for (key, value) in table {
        let Some(e) = alone(key, value) else { continue };
        match value {
            Value::Object(limits) if key == "limits" => {
                errors.extend(limits.iter().filter_map(|(k, v)| {
                    let limit = Value::Object(serde_json::Map::from_iter([(k.clone(), v.clone())]));
                    alone(key, &limit).map(|e| bad(format!("limits.{k}"), &e))
                }))
            }
            _ => errors.push(bad(key.as_str(), &e)),
        }
    }
    if errors.is_empty() {
        // Not expected (a table is bad only through a key), but never an empty list.
        errors.push(bad("vramtest", &first));
    }
    errors
}

/// What a value is, for a message that it is the wrong kind.
fn unexpected(value: &Value) -> serde::de::Unexpected<'_> {
    use serde::de::Unexpected;
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(_) => Unexpected::Other("a number"),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

fn bad(key: impl Into<String>, error: &serde_json::Error) -> SettingsError {
    SettingsError {
        key: key.into(),
        message: error.to_string(),
    }
}

/// The 1-based line of `key` (possibly dotted, `limits.activations`) in the TOML table
/// `table` (`package.metadata.vramtest`) of a manifest's text, for error messages, from
/// the TOML parser's spans. Falls back to the table's line, then to `None` (no such
/// table, or text that is not TOML).
pub fn key_line(manifest: &str, table: &str, key: &str) -> Option<usize> {
    key_offset(manifest, table, key).map(|offset| line_of(manifest, offset))
}

/// The 1-based line of the byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// [`key_line`]'s byte offset: where `key` starts (or the nearest table that holds it).
fn key_offset(manifest: &str, table: &str, key: &str) -> Option<usize> {
    let document = DeTable::parse(manifest).ok()?;
    let mut current = document.get_ref();
    let mut table_span = document.span();
    for part in table.split('.') {
        let (k, v) = current.iter().find(|(k, _)| k.get_ref() == part)?;
        let DeValue::Table(t) = v.get_ref() else {
            return None;
        };
        table_span = k.span();
        current = t;
    }
    let mut best = table_span.start;
    for part in key.split('.') {
        let Some((k, v)) = current.iter().find(|(k, _)| k.get_ref() == part) else {
            break;
        };
        best = k.span().start;
        let DeValue::Table(t) = v.get_ref() else {
            break;
        };
        current = t;
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Category, Subject};
    use serde_json::json;
    use test_case::test_case;

    fn limit(s: &str) -> Limit {
        s.parse().unwrap()
    }

    fn key(s: &str) -> LimitKey {
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
            "reserve": "1.5GiB",
            "cuda_context": "300MiB",
            "cublas_workspace": "4MiB",
            "tolerance": "+2% | 1MiB",
            "limits": { "activations": "+5%", "leak": "0", "peak": 0 }
        }))
        .unwrap();
        assert_eq!(s.iterations, Some(5));
        assert_eq!(s.device, Some(DeviceSetting::Cuda));
        assert_eq!(s.budget, Some(22 << 30));
        assert_eq!(s.reserve, Some(3 << 29));
        assert_eq!(s.cuda_context, Some(300 << 20));
        assert_eq!(s.cublas_workspace, Some(4 << 20));
        assert_eq!(s.limits[&LimitKey::Tolerance], limit("+2% | 1MiB"));
        assert_eq!(s.limits[&key("activations")], limit("+5%"));
        assert_eq!(s.limits[&LimitKey::Leak], Limit::EXACT);
        assert_eq!(s.limits[&LimitKey::Peak], Limit::EXACT);
    }

    #[test_case(json!({"iterations": 0}), "iterations", "at least 1"; "zero iterations")]
    #[test_case(json!({"iterations": "3"}), "iterations", "whole number"; "iterations as a string")]
    #[test_case(json!({"device": "tpu"}), "device", "\"cpu\", \"cuda\" or \"auto\""; "unknown device")]
    #[test_case(json!({"budget": "lots"}), "budget", "hint:"; "budget not a size")]
    #[test_case(json!({"budget": -1}), "budget", "byte count"; "negative budget")]
    #[test_case(json!({"budget": true}), "budget", "boolean `true`"; "budget as a boolean")]
    #[test_case(json!({"reserve": "much"}), "reserve", "hint:"; "reserve not a size")]
    #[test_case(json!({"cuda_context": "big"}), "cuda_context", "hint:"; "context not a size")]
    #[test_case(json!({"cublas_workspace": -4}), "cublas_workspace", "byte count"; "negative workspace")]
    #[test_case(json!({"tolerance": "-3%"}), "tolerance", "invalid limit"; "negative tolerance")]
    #[test_case(json!({"tolerance": 5}), "tolerance", "integer `5`, expected a limit like"; "tolerance as a number")]
    #[test_case(json!({"limits": "+5%"}), "limits", "expected a table"; "limits not a table")]
    #[test_case(json!({"limits": {"activation": "+5%"}}), "limits.activation", "unknown limit"; "misspelt category")]
    #[test_case(json!({"limits": {"activations": "5 parsecs"}}), "limits.activations", "invalid limit"; "bad limit")]
    #[test_case(json!({"iteration": 3}), "iteration", "unknown field `iteration`"; "misspelt key")]
    #[test_case(json!({"budgets": "1GiB"}), "budgets", "expected one of `iterations`, `device`, `budget`, `axial_budget`, `reserve`, `cuda_context`, `cublas_workspace`, `pool_alignment`, `pool_granule`, `tolerance`, `limits`"; "unknown key lists the known ones")]
    #[test_case(json!({"pool_granule": "3MiB"}), "pool_granule", "power of two"; "granule not a power of two")]
    #[test_case(json!({"iterations": 5_000_000_000u64}), "iterations", "at least 1"; "iterations too many")]
    #[test_case(json!({"limits": {"peak": 7}}), "limits.peak", "integer `7`"; "a bare limit other than 0")]
    #[test_case(json!(["cpu"]), "vramtest", "expected a table"; "not a table")]
    fn rejects(value: Value, key: &str, needle: &str) {
        let errors = Settings::parse(&value).unwrap_err();
        let [e] = errors.0.as_slice() else {
            panic!("one error: {errors}")
        };
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
        assert_eq!(merged.limits[&key("activations")], limit("+9%"));
        assert_eq!(merged.limits[&key("gradients")], limit("+1%"));
    }

    #[test]
    fn a_reserve_anywhere_replaces_the_context_and_workspace_terms() {
        use crate::pool::{Allowance, DEFAULT_CUBLAS_WORKSPACE, DeviceTerms};
        let ws = Settings::parse(&json!({ "reserve": "2GiB" })).unwrap();
        let pkg = Settings::parse(&json!({ "cuda_context": "300MiB" })).unwrap();
        assert_eq!(
            ws.clone().overridden_by(&pkg).allowance(),
            Allowance::Reserve(2 << 30)
        );
        assert_eq!(
            pkg.allowance(),
            Allowance::Terms(DeviceTerms {
                cuda_context: 300 << 20,
                cublas_workspace: DEFAULT_CUBLAS_WORKSPACE,
            })
        );
    }

    #[test]
    fn tolerance_fills_every_limit_not_named_but_untracked_and_leak() {
        let s = Settings::parse(&json!({
            "tolerance": "+3%", "limits": { "activations": "+5%" }
        }))
        .unwrap();
        let p = s.policy();
        assert_eq!(p.categories[Category::Activations.index()], limit("+5%"));
        assert_eq!(p.peak, limit("+3%"));
        assert_eq!(p.categories[Category::Workspace.index()], limit("+3%"));
        assert_eq!(p.categories[Category::Untracked.index()], Limit::UNTRACKED);
        assert_eq!(p.leak, Policy::default().leak);
        // The harness reads the same settings back from `VRAMTEST_CONFIG`.
        let json = serde_json::to_string(&s.to_json()).unwrap();
        let back = Settings::parse(&serde_json::from_str(&json).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    /// The public `Policy::set` gives `tolerance` the meaning the settings give it: the
    /// peak and every category but `untracked`, and nothing else.
    #[test]
    fn tolerance_means_one_thing_in_the_settings_and_in_policy_set() {
        let l = limit("+7% | 3MiB");
        let from_settings = level(json!({ "tolerance": "+7% | 3MiB" })).policy();
        let mut set = Policy::default();
        set.set(LimitKey::Tolerance, l);
        assert_eq!(from_settings, set);
        // Worked out independently of both: the defaults with the peak and the seven
        // categories other than untracked replaced.
        let mut expected = Policy {
            peak: l,
            ..Policy::default()
        };
        for c in Category::ALL
            .into_iter()
            .filter(|&c| c != Category::Untracked)
        {
            expected.categories[c.index()] = l;
        }
        assert_eq!(set, expected);
        assert_eq!(
            set.categories[Category::Untracked.index()],
            Limit::UNTRACKED
        );
    }

    #[test]
    fn the_json_form_reads_back_to_the_same_settings() {
        let every_key = level(json!({
            "iterations": 4, "device": "auto", "budget": "3GiB", "reserve": "1GiB",
            "cuda_context": "300MiB", "cublas_workspace": "8MiB", "pool_alignment": 1024,
            "pool_granule": "4MiB", "tolerance": "+2% | 1MiB",
            "limits": { "activations": "allow", "leak": 0, "cpu_only": "+10%", "peak": "+3%" }
        }));
        for s in [Settings::default(), every_key] {
            assert_eq!(Settings::parse(&s.to_json()).unwrap(), s);
        }
    }

    #[test]
    fn a_configuration_of_an_earlier_cargo_vramtest_still_reads() {
        // Its `VRAMTEST_CONFIG`: null for what it did not set, the tolerance in `limits`.
        let old = json!({ "iterations": null, "budget": null, "limits": { "tolerance": "+5%", "leak": "0" } });
        let s = Settings::parse(&old).unwrap();
        assert_eq!(s.iterations, None);
        assert_eq!(s.limits[&LimitKey::Tolerance], limit("+5%"));
        assert_eq!(s.limits[&LimitKey::Leak], Limit::EXACT);
    }

    /// One level of settings, as a table.
    fn level(value: Value) -> Settings {
        Settings::parse(&value).unwrap()
    }

    #[test_case(
        &[json!({"limits": {"activations": "+400%", "peak": "+400%"}}), json!({"tolerance": "+1% | 1KiB"})],
        &[("activations", "+400%"), ("peak", "+400%"), ("gradients", "+1% | 1KiB"), ("untracked", "+10% | 16MiB")];
        "a package tolerance keeps the workspace's named limits"
    )]
    #[test_case(
        &[json!({"tolerance": "+2% | 1MiB"})],
        &[("peak", "+2% | 1MiB"), ("untracked", "+10% | 16MiB")];
        "a looser tolerance does not tighten untracked"
    )]
    #[test_case(
        &[json!({"tolerance": "+50%"}), json!({"limits": {"untracked": "+20% | 32MiB"}})],
        &[("untracked", "+20% | 32MiB"), ("inputs", "+50%")];
        "untracked follows only its own name"
    )]
    #[test_case(
        &[json!({"tolerance": "+5%"}), json!({"tolerance": "+7%"})],
        &[("peak", "+7%"), ("parameters", "+7%")];
        "the more specific tolerance wins"
    )]
    #[test_case(
        &[json!({"limits": {"activations": "+9%"}}), json!({"limits": {"gradients": "+2%"}}), json!({"tolerance": "+30%", "limits": {"leak": "0"}})],
        &[("activations", "+9%"), ("gradients", "+2%"), ("inputs", "+30%"), ("leak", "0")];
        "workspace, package and attribute merge category by category"
    )]
    #[test_case(
        &[json!({"tolerance": "+1%"})],
        &[("peak", "+1%"), ("reserved", "+5% | 8MiB")];
        "a tolerance leaves reserved at its default"
    )]
    #[test_case(
        &[json!({"limits": {"reserved": "+20% | 64MiB"}}), json!({"tolerance": "+2%"})],
        &[("reserved", "+20% | 64MiB"), ("untracked", "+10% | 16MiB"), ("peak", "+2%")];
        "reserved follows only its own name"
    )]
    #[test_case(
        &[json!({"limits": {"activations": "+1%"}}), json!({"limits": {"activations": "+3%"}})],
        &[("activations", "+3%")];
        "a name at a more specific level wins"
    )]
    fn levels_merge_key_by_key(levels: &[Value], expected: &[(&str, &str)]) {
        let merged = levels.iter().fold(Settings::default(), |acc, v| {
            acc.overridden_by(&level(v.clone()))
        });
        // The same through `VRAMTEST_CONFIG`, as under `cargo vramtest`.
        let through_env = Settings::parse(&merged.to_json()).unwrap();
        for settings in [&merged, &through_env] {
            let p = settings.policy();
            for (key, text) in expected {
                let got = p.limit(Subject::try_from((*key).to_owned()).unwrap());
                assert_eq!(got, limit(text), "{key}");
            }
        }
    }

    #[test]
    fn an_unknown_limit_names_itself_and_every_valid_key() {
        let errors = Settings::parse(&json!({ "limits": { "activation": "+5%" } })).unwrap_err();
        let e = &errors.0[0];
        assert_eq!(e.key, "limits.activation");
        for valid in LimitKey::ALL {
            assert!(e.message.contains(valid.as_str()), "{e}");
        }
    }

    #[test]
    fn a_package_tolerance_does_not_fail_what_the_workspace_allows() {
        // Workspace: activations may grow 400%; package: a tight tolerance. Activations
        // growing by 200% pass (the README's promise: the package wins key by key).
        let ws = level(json!({"limits": {"activations": "+400%", "peak": "+400%"}}));
        let pkg = level(json!({"tolerance": "+1% | 1KiB"}));
        let old = 1u64 << 20;
        let new = 3 * old;
        let p = ws.overridden_by(&pkg).policy();
        let slack = p.categories[Category::Activations.index()].slack(old);
        assert!(new - old <= slack, "{} > {slack}", new - old);
    }

    const MANIFEST: &str = r#"[package]
name = "x"

[package.metadata.vramtest]
iterations = 0
limits = { activations = "lots" }

[workspace.metadata.vramtest]
"budget" = "x"

[workspace.metadata.vramtest.limits]
gradients = "+1%"
peak = "y"
"#;

    #[test_case(MANIFEST, "package.metadata.vramtest", "iterations", Some(5))]
    #[test_case(MANIFEST, "package.metadata.vramtest", "limits.activations", Some(6))]
    #[test_case(MANIFEST, "package.metadata.vramtest", "device", Some(4); "missing key: the header")]
    #[test_case(MANIFEST, "package.metadata.vramtest", "limits.inputs", Some(6); "missing limit: the limits table")]
    #[test_case(MANIFEST, "workspace.metadata.vramtest", "budget", Some(9); "a quoted key")]
    #[test_case(MANIFEST, "workspace.metadata.vramtest", "limits.gradients", Some(12); "a sub-table")]
    #[test_case(MANIFEST, "workspace.metadata.vramtest", "limits.peak", Some(13))]
    #[test_case(MANIFEST, "package.metadata.other", "x", None)]
    #[test_case("[package.metadata.vramtest]\nx = 1\nlimits.peak = \"y\"\n", "package.metadata.vramtest", "limits.peak", Some(3); "a dotted key")]
    #[test_case("[package.metadata]\nvramtest = { iterations = 0 }\n", "package.metadata.vramtest", "iterations", Some(2); "an inline table")]
    #[test_case("[package.metadata.vramtest]\n  iterations   =   0 # x = 1\n", "package.metadata.vramtest", "iterations", Some(2); "spaces and a comment")]
    #[test_case("[package\nname = 1", "package", "name", None; "not TOML")]
    fn finds_the_line(manifest: &str, table: &str, key: &str, line: Option<usize>) {
        assert_eq!(key_line(manifest, table, key), line);
    }

    /// Every bad key of a table, in the manifest's order, each with its key path and line.
    #[test_case(
        "[package.metadata.vramtest]\ntolerance = \"x\"\nbudget = \"1GiB\"\niteration = 3\ndevice = \"tpu\"\n",
        &[("tolerance", 2), ("iteration", 4), ("device", 5)];
        "top-level keys, not alphabetical"
    )]
    #[test_case(
        "[package.metadata.vramtest]\nlimits = { peak = \"q\", activation = \"+5%\" }\nbudget = \"lots\"\n",
        &[("limits.peak", 2), ("limits.activation", 2), ("budget", 3)];
        "an inline limits table, by column"
    )]
    #[test_case(
        "[package.metadata.vramtest]\npool_granule = 3\n\n[package.metadata.vramtest.limits]\nleak = \"?\"\ngradients = \"+1%\"\nwhatever = \"+1%\"\n",
        &[("pool_granule", 2), ("limits.leak", 5), ("limits.whatever", 7)];
        "a limits sub-table"
    )]
    fn reports_every_bad_key_in_file_order(manifest: &str, expected: &[(&str, usize)]) {
        let table: toml::Table = toml::from_str(manifest).unwrap();
        let value = serde_json::to_value(&table["package"]["metadata"]["vramtest"]).unwrap();
        let errors = Settings::parse(&value).unwrap_err();
        let got: Vec<(&str, usize)> = errors
            .in_file_order(manifest, "package.metadata.vramtest")
            .into_iter()
            .map(|(line, e)| (e.key.as_str(), line.unwrap()))
            .collect();
        assert_eq!(got, expected, "{errors}");
    }

    /// The pool model's alignment and granule come from the metadata when set (the GPU
    /// bundle's probe measures both), and must be powers of two.
    #[test]
    fn pool_alignment_and_granule_are_settable() {
        let s = Settings::parse(&serde_json::json!({
            "pool_alignment": 512,
            "pool_granule": "4MiB",
        }))
        .unwrap();
        assert_eq!(
            s.cuda_pool(),
            crate::pool::CudaPool {
                alignment: 512,
                granularity: 4 << 20
            }
        );
        assert_eq!(
            Settings::default().cuda_pool(),
            crate::pool::CudaPool::default()
        );
        // Package over workspace, key by key.
        let workspace = Settings::parse(&serde_json::json!({ "pool_granule": "1MiB" })).unwrap();
        let package = Settings::parse(&serde_json::json!({ "pool_alignment": 1024 })).unwrap();
        let merged = workspace.overridden_by(&package).cuda_pool();
        assert_eq!((merged.alignment, merged.granularity), (1024, 1 << 20));
        let errors = Settings::parse(&serde_json::json!({ "pool_alignment": 300 })).unwrap_err();
        let err = &errors.0[0];
        assert_eq!(err.key, "pool_alignment");
        assert!(err.message.contains("power of two"), "{err}");
    }
}
