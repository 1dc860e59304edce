//! The settings of a run: `[workspace.metadata.vramtest]` and
//! `[package.metadata.vramtest]`, validated from their JSON form (what `cargo metadata`
//! reports, or a manifest parsed as TOML), merged (the package wins, key by key, then a
//! test's attribute) and turned into the [`Policy`] a result is held to. Shared by
//! `cargo vramtest` and the test harness, so both read the same settings the same way;
//! the first hands its reading to the second in the same JSON form
//! ([`Settings::to_json`], carried by [`crate::env::HarnessEnv`]).
//!
//! ```toml
//! [package.metadata.vramtest]
//! iterations = 3
//! device = "cpu"            # cpu | cuda | auto
//! budget = "22GiB"          # hard ceiling on the peak
//! cuda_context = "512MiB"   # device memory a GPU run adds besides the pool's
//! cublas_workspace = "32MiB"
//! tolerance = "+2% | 1MiB"  # the peak and every category but untracked
//! limits = { activations = "+5%", leak = "0" }
//! ```

use crate::{Limit, LimitKey, Policy, parse_bytes};
use serde_json::Value;
use std::collections::BTreeMap;
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
const KEYS: &str = "iterations, device, budget, reserve, cuda_context, cublas_workspace, pool_alignment, pool_granule, tolerance, limits";

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

/// A key of a `vramtest` table that is unknown or has a bad value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: {message}")]
pub struct SettingsError {
    /// The offending key, dotted (`limits.activations`), or empty for the table itself.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

/// Every bad key of a `vramtest` table (at least one), in the order the table was read;
/// [`SettingsErrors::in_file_order`] puts them in the manifest's order, with their lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsErrors(pub Vec<SettingsError>);

impl std::fmt::Display for SettingsErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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

fn bad(key: impl Into<String>, message: impl Into<String>) -> SettingsError {
    SettingsError {
        key: key.into(),
        message: message.into(),
    }
}

impl Settings {
    /// Validates the JSON form of a `vramtest` table (`null`: no table). A key whose
    /// value is `null` counts as absent (TOML has no null; an earlier `cargo vramtest`
    /// wrote one for a setting it did not have).
    /// Every bad key is reported, not only the first.
    pub fn parse(value: &Value) -> Result<Settings, SettingsErrors> {
        let table = match value {
            Value::Null => return Ok(Settings::default()),
            Value::Object(t) => t,
            other => {
                return Err(SettingsErrors(vec![bad(
                    "vramtest",
                    format!("expected a table, found {}", kind(other)),
                )]));
            }
        };
        let mut s = Settings::default();
        let mut errors = Vec::new();
        for (key, value) in table.iter().filter(|(_, v)| !v.is_null()) {
            if let Err(e) = s.set(key, value) {
                errors.extend(e);
            }
        }
        if errors.is_empty() {
            Ok(s)
        } else {
            Err(SettingsErrors(errors))
        }
    }

    /// Sets the top-level `key` from `value`, or says what is wrong with it (a `limits`
    /// table: with each of its bad keys).
    fn set(&mut self, key: &str, value: &Value) -> Result<(), Vec<SettingsError>> {
        let one = |e: SettingsError| vec![e];
        match key {
            "iterations" => self.iterations = Some(iterations(value).map_err(one)?),
            "device" => self.device = Some(device(value).map_err(one)?),
            "budget" => self.budget = Some(byte_size(key, value).map_err(one)?),
            "reserve" => self.reserve = Some(byte_size(key, value).map_err(one)?),
            "cuda_context" => self.cuda_context = Some(byte_size(key, value).map_err(one)?),
            "cublas_workspace" => self.cublas_workspace = Some(byte_size(key, value).map_err(one)?),
            "pool_alignment" => self.pool_alignment = Some(pool_unit(key, value).map_err(one)?),
            "pool_granule" => self.pool_granule = Some(pool_unit(key, value).map_err(one)?),
            "tolerance" => {
                let l = limit(key, value).map_err(one)?;
                self.limits.insert(LimitKey::Tolerance, l);
            }
            "limits" => self.limits.extend(limits(value)?),
            _ => {
                return Err(one(bad(
                    key,
                    format!("unknown key (expected one of: {KEYS})"),
                )));
            }
        }
        Ok(())
    }

    /// The JSON form [`Settings::parse`] reads back to these settings: a `vramtest`
    /// table, every limit under `limits`. What `cargo vramtest` hands the harness.
    pub fn to_json(&self) -> Value {
        let mut table = serde_json::Map::new();
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(v) = value {
                table.insert(key.to_owned(), v);
            }
        };
        put("iterations", self.iterations.map(Value::from));
        put("device", self.device.map(|d| Value::from(d.as_str())));
        put("budget", self.budget.map(Value::from));
        put("reserve", self.reserve.map(Value::from));
        put("cuda_context", self.cuda_context.map(Value::from));
        put("cublas_workspace", self.cublas_workspace.map(Value::from));
        put("pool_alignment", self.pool_alignment.map(Value::from));
        put("pool_granule", self.pool_granule.map(Value::from));
        let limits: serde_json::Map<String, Value> = self
            .limits
            .iter()
            .map(|(k, l)| (k.as_str().to_owned(), Value::from(String::from(*l))))
            .collect();
        put(
            "limits",
            (!limits.is_empty()).then_some(Value::Object(limits)),
        );
        Value::Object(table)
    }

    /// These settings with `over`'s keys taking precedence (a package over its
    /// workspace, a test's attribute over both), key by key: `over`'s `tolerance`
    /// replaces only the tolerance, and `limits` merge category by category, so a
    /// limit named at any level is kept unless a more specific level names it too.
    pub fn overridden_by(mut self, over: &Settings) -> Settings {
        self.iterations = over.iterations.or(self.iterations);
        self.device = over.device.or(self.device);
        self.budget = over.budget.or(self.budget);
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

/// The `limits` table: a limit per key, or every bad one.
fn limits(value: &Value) -> Result<Vec<(LimitKey, Limit)>, Vec<SettingsError>> {
    let Value::Object(limits) = value else {
        return Err(vec![bad(
            "limits",
            format!(
                "expected a table like {{ activations = \"+5%\" }}, found {}",
                kind(value)
            ),
        )]);
    };
    let (good, bad_keys): (Vec<_>, Vec<_>) = limits
        .iter()
        .map(|(k, v)| {
            let dotted = format!("limits.{k}");
            let key = k.parse::<LimitKey>().map_err(|_| {
                bad(
                    &dotted,
                    format!("unknown limit (expected one of: {})", LimitKey::names()),
                )
            })?;
            Ok((key, limit(&dotted, v)?))
        })
        .partition(Result::is_ok);
    if bad_keys.is_empty() {
        Ok(good.into_iter().filter_map(Result::ok).collect())
    } else {
        Err(bad_keys.into_iter().filter_map(Result::err).collect())
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

fn iterations(v: &Value) -> Result<u32, SettingsError> {
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

fn device(v: &Value) -> Result<DeviceSetting, SettingsError> {
    match v.as_str().map(str::parse) {
        Some(Ok(device)) => Ok(device),
        _ => Err(bad(
            "device",
            format!("expected \"cpu\", \"cuda\" or \"auto\", found {v}"),
        )),
    }
}

fn byte_size(key: &str, v: &Value) -> Result<u64, SettingsError> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| bad(key, format!("expected a byte count, found {n}"))),
        Value::String(s) => parse_bytes(s).map_err(|e| bad(key, e.to_string())),
        other => Err(bad(
            key,
            format!("expected a byte size like \"22GiB\", found {}", kind(other)),
        )),
    }
}

/// A pool model's alignment or granule: a byte size that is a power of two.
fn pool_unit(key: &str, v: &Value) -> Result<u64, SettingsError> {
    let bytes = byte_size(key, v)?;
    if bytes.is_power_of_two() {
        Ok(bytes)
    } else {
        Err(bad(
            key,
            format!("expected a power of two like 512 or \"2MiB\", found {bytes}"),
        ))
    }
}

fn limit(key: &str, v: &Value) -> Result<Limit, SettingsError> {
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
    #[test_case(json!({"budget": true}), "budget", "a boolean"; "budget as a boolean")]
    #[test_case(json!({"reserve": "much"}), "reserve", "hint:"; "reserve not a size")]
    #[test_case(json!({"cuda_context": "big"}), "cuda_context", "hint:"; "context not a size")]
    #[test_case(json!({"cublas_workspace": -4}), "cublas_workspace", "byte count"; "negative workspace")]
    #[test_case(json!({"tolerance": "-3%"}), "tolerance", "invalid limit"; "negative tolerance")]
    #[test_case(json!({"tolerance": 5}), "tolerance", "a number"; "tolerance as a number")]
    #[test_case(json!({"limits": "+5%"}), "limits", "expected a table"; "limits not a table")]
    #[test_case(json!({"limits": {"activation": "+5%"}}), "limits.activation", "unknown limit"; "misspelt category")]
    #[test_case(json!({"limits": {"activations": "5 parsecs"}}), "limits.activations", "invalid limit"; "bad limit")]
    #[test_case(json!({"iteration": 3}), "iteration", "unknown key"; "misspelt key")]
    #[test_case(json!({"budgets": "1GiB"}), "budgets", "expected one of: iterations, device"; "unknown key lists the known ones")]
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
