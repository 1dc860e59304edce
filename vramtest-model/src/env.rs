//! Every environment switch of vramtest, in one place: [`HarnessEnv`] reads them all
//! ([`HarnessEnv::from_env`]) and writes them back ([`HarnessEnv::to_vars`]).
//! `cargo vramtest` reads the user's environment, adds what its command line and the
//! packages' settings decide, and hands each test binary the variables; the harness
//! reads them back with the same code, so both accept and reject the same values and no
//! variable name is typed twice.

use crate::axes::Point;
use crate::settings::{DeviceSetting, Settings, SettingsErrors};
use crate::sweep::{PointError, parse_point};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// `VRAMTEST_CONFIG`: the settings `cargo vramtest` read from the metadata, in their
/// JSON form ([`Settings::to_json`]).
pub const CONFIG: &str = "VRAMTEST_CONFIG";
/// `VRAMTEST_DEVICE=cpu|cuda|auto`.
pub const DEVICE: &str = "VRAMTEST_DEVICE";
/// `VRAMTEST_UPDATE=always|new|no|auto` (insta's names too).
pub const UPDATE: &str = "VRAMTEST_UPDATE";
/// insta's `INSTA_UPDATE`, read when `VRAMTEST_UPDATE` is unset.
pub const INSTA_UPDATE: &str = "INSTA_UPDATE";
/// `VRAMTEST_CHECK=1`: check mode.
pub const CHECK: &str = "VRAMTEST_CHECK";
/// `VRAMTEST_STRICT=1`: any difference fails.
pub const STRICT: &str = "VRAMTEST_STRICT";
/// `VRAMTEST_SITES=0|auto|always`.
pub const SITES: &str = "VRAMTEST_SITES";
/// `VRAMTEST_TIMEOUT=<seconds>`.
pub const TIMEOUT: &str = "VRAMTEST_TIMEOUT";
/// `VRAMTEST_SITES_TIMEOUT=<seconds>`.
pub const SITES_TIMEOUT: &str = "VRAMTEST_SITES_TIMEOUT";
/// `VRAMTEST_REPORT_DIR`: where `cargo vramtest` wants one JSON report per test.
pub const REPORT_DIR: &str = "VRAMTEST_REPORT_DIR";
/// `VRAMTEST_REPORT_FD=N`: a pipe's write end, inherited under descriptor `N`, into
/// which the harness writes its reports as JSON lines (what `cargo vramtest` sets on
/// Unix: no file a test's process could reach).
pub const REPORT_FD: &str = "VRAMTEST_REPORT_FD";
/// `VRAMTEST_PROGRESS=1`: with `VRAMTEST_REPORT_FD`, the harness also writes each point's
/// start and end into the pipe, for `cargo vramtest`'s progress (what it sets; a
/// `cargo vramtest` that does not set it gets reports alone).
pub const PROGRESS: &str = "VRAMTEST_PROGRESS";
/// `VRAMTEST_STARTED_BY=PID`: the `cargo vramtest` process that started this test
/// binary (what it sets). The harness writes nothing once its parent is another process:
/// that `cargo vramtest` is gone (killed), and nobody reads what the run would write.
pub const STARTED_BY: &str = "VRAMTEST_STARTED_BY";
/// insta's `INSTA_SNAPSHOT_REFERENCES_FILE`.
pub const REFERENCES: &str = "INSTA_SNAPSHOT_REFERENCES_FILE";
/// `VRAMTEST_MEASURE_AT=layers=6,seq=48,batch=8`: measure each selected test's step once
/// at that point of its named axes instead of judging it (what `cargo vramtest measure`
/// sets).
pub const MEASURE_AT: &str = "VRAMTEST_MEASURE_AT";
/// `VRAMTEST_MEASURE_LEVELS={"precision":"bf16"}`: with `VRAMTEST_MEASURE_AT`, the level of
/// each categorical axis the step is measured at, as a JSON object (a level is any
/// string).
pub const MEASURE_LEVELS: &str = "VRAMTEST_MEASURE_LEVELS";

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

impl Update {
    /// The name `VRAMTEST_UPDATE` takes for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Update::Always => "always",
            Update::New => "new",
            Update::No => "no",
        }
    }
}

/// When the harness captures call sites (`VRAMTEST_SITES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SitesWhen {
    /// Never (`0`, `off`, `false`).
    Off,
    /// For a regression measured on the CPU, and for a test's first result, to be
    /// written with them (unset, `auto`, `1`): the default.
    #[default]
    OnRegression,
    /// For every test measured on the CPU (`always`; what `show --sites` sets).
    Always,
}

impl SitesWhen {
    /// The name `VRAMTEST_SITES` takes for it.
    pub fn as_str(self) -> &'static str {
        match self {
            SitesWhen::Off => "0",
            SitesWhen::OnRegression => "auto",
            SitesWhen::Always => "always",
        }
    }
}

/// The longest timeout `VRAMTEST_TIMEOUT` and `VRAMTEST_SITES_TIMEOUT` take: 365 days
/// in seconds. Past it a deadline would overflow the clock (`1e300` seconds is no time
/// on any clock); a year is as good as none for a test.
pub const MAX_TIMEOUT_SECS: u32 = 365 * 24 * 3600;

/// The default of `VRAMTEST_SITES_TIMEOUT`: two minutes.
pub const DEFAULT_SITES_TIMEOUT: Duration = Duration::from_secs(120);

/// Every switch the harness reads, typed. `cargo vramtest` builds one per package
/// ([`HarnessEnv::to_vars`] for its test binaries); the harness reads it back
/// ([`HarnessEnv::from_env`]). A field left at its default writes no variable.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HarnessEnv {
    /// The settings `cargo vramtest` read (`VRAMTEST_CONFIG`); `None` under plain
    /// `cargo test`, where the harness reads the manifests itself.
    pub settings: Option<Settings>,
    /// The device asked for (`VRAMTEST_DEVICE`); `None`: the settings decide
    /// ([`HarnessEnv::device_for`]).
    pub device: Option<DeviceSetting>,
    /// The update mode asked for (`VRAMTEST_UPDATE`, else `INSTA_UPDATE`); `None`:
    /// `auto` ([`HarnessEnv::update`] says what it comes to).
    pub update: Option<Update>,
    /// Check mode: write nothing; a missing snapshot fails. On under CI (any marker of
    /// [`on_ci`]) or with `VRAMTEST_CHECK=1`.
    pub check: bool,
    /// `VRAMTEST_STRICT=1`: any difference fails.
    pub strict: bool,
    /// When call sites are captured (`VRAMTEST_SITES`).
    pub sites: SitesWhen,
    /// `VRAMTEST_TIMEOUT`: a test still running after this long is killed and fails;
    /// `None` (the default): no limit.
    pub timeout: Option<Duration>,
    /// `VRAMTEST_SITES_TIMEOUT`: how long capturing call sites may take, all re-runs
    /// together; `None`: [`DEFAULT_SITES_TIMEOUT`].
    pub sites_timeout: Option<Duration>,
    /// Where to write one JSON report per test (`VRAMTEST_REPORT_DIR`).
    pub report_dir: Option<PathBuf>,
    /// The descriptor to write the reports into, one JSON line each
    /// (`VRAMTEST_REPORT_FD`; over `report_dir` when both are set).
    pub report_fd: Option<i32>,
    /// `VRAMTEST_PROGRESS=1`: the points' progress goes into the report pipe too.
    pub progress: bool,
    /// The process id of the `cargo vramtest` that started this binary
    /// (`VRAMTEST_STARTED_BY`).
    pub started_by: Option<u32>,
    /// insta's list of referenced snapshots (`INSTA_SNAPSHOT_REFERENCES_FILE`), so
    /// `cargo insta test --unreferenced=reject` keeps ours.
    pub references: Option<PathBuf>,
    /// `VRAMTEST_MEASURE_AT`: the point of a sweep over named axes at which each
    /// selected test is measured once (one process, no call sites), its measurement
    /// written into its report and nothing judged against, or written beside, its
    /// snapshot; `None`: tests are run and judged.
    pub measure_at: Option<Point>,
    /// `VRAMTEST_MEASURE_LEVELS`: with `measure_at`, each categorical axis's level
    /// (empty: none).
    pub measure_levels: BTreeMap<String, String>,
}

/// A switch with a value outside its set: each names the variable, its value and the
/// values it takes.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// `VRAMTEST_CONFIG` is not JSON.
    #[error("{CONFIG} is not a valid configuration: {0}")]
    ConfigJson(serde_json::Error),
    /// `VRAMTEST_CONFIG` holds bad settings.
    #[error("{CONFIG}: {0}")]
    Config(SettingsErrors),
    /// `VRAMTEST_DEVICE` names no device.
    #[error("{DEVICE}={0}: unknown device (hint: use cpu, cuda or auto)")]
    Device(String),
    /// `VRAMTEST_UPDATE` or `INSTA_UPDATE` names no mode.
    #[error("{var}={value}: unknown mode (hint: use always, new, no or auto)")]
    Update {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// `VRAMTEST_SITES` names no mode.
    #[error("{SITES}={0}: unknown mode (hint: use 0 to turn call sites off, always, or auto)")]
    Sites(String),
    /// A timeout that is not a number of seconds above 0 and up to [`MAX_TIMEOUT_SECS`].
    #[error(
        "{var}={value}: not a number of seconds above 0 and at most {MAX_TIMEOUT_SECS} \
         (365 days) (hint: {var}={example})"
    )]
    Seconds {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// A value it takes.
        example: u32,
    },
    /// `VRAMTEST_STARTED_BY` is not a process id.
    #[error("{STARTED_BY}={0}: not a process id (cargo vramtest sets it; hint: unset it)")]
    StartedBy(String),
    /// `VRAMTEST_REPORT_FD` is not a descriptor past standard error.
    #[error("{REPORT_FD}={0}: not a descriptor number above 2")]
    ReportFd(String),
    /// `VRAMTEST_MEASURE_AT` is not a point.
    #[error("{MEASURE_AT}={value}: {error}")]
    MeasureAt {
        /// Its value.
        value: String,
        /// Why it is not a point.
        error: PointError,
    },
    /// `VRAMTEST_MEASURE_LEVELS` is not a JSON object of strings.
    #[error(
        "{MEASURE_LEVELS}={value}: not a JSON object of levels ({error}; hint: {MEASURE_LEVELS}='{{\"precision\":\"bf16\"}}')"
    )]
    MeasureLevels {
        /// Its value.
        value: String,
        /// Why it is not an object of strings.
        error: serde_json::Error,
    },
}

impl HarnessEnv {
    /// Reads every switch from the process's environment. An error names the variable,
    /// its value and the values it takes.
    pub fn from_env() -> Result<HarnessEnv, EnvError> {
        HarnessEnv::from_lookup(|name| std::env::var_os(name))
    }

    /// Reads every switch through `var`, which gives a variable's value or `None` when
    /// it is unset (a value that is not UTF-8 counts as unset, but for the paths).
    pub fn from_lookup(var: impl Fn(&str) -> Option<OsString>) -> Result<HarnessEnv, EnvError> {
        let text = |name: &str| var(name).and_then(|v| v.into_string().ok());
        let flag =
            |name: &str| text(name).is_some_and(|v| !matches!(v.as_str(), "" | "0" | "false"));
        let is_ci = on_ci(&var);
        let path = |name: &str| var(name).map(PathBuf::from);
        Ok(HarnessEnv {
            settings: settings(text(CONFIG))?,
            device: device(text(DEVICE))?,
            update: match text(UPDATE) {
                Some(v) => update(UPDATE, &v)?,
                None => update(INSTA_UPDATE, &text(INSTA_UPDATE).unwrap_or_default())?,
            },
            check: flag(CHECK) || is_ci,
            strict: flag(STRICT),
            sites: sites(text(SITES))?,
            timeout: seconds(TIMEOUT, text(TIMEOUT), 600)?,
            sites_timeout: seconds(SITES_TIMEOUT, text(SITES_TIMEOUT), 300)?,
            report_dir: path(REPORT_DIR),
            report_fd: report_fd(text(REPORT_FD))?,
            progress: flag(PROGRESS),
            started_by: started_by(text(STARTED_BY))?,
            references: path(REFERENCES),
            measure_at: text(MEASURE_AT)
                .filter(|v| !v.trim().is_empty())
                .map(|v| parse_point(&v).map_err(|error| EnvError::MeasureAt { value: v, error }))
                .transpose()?,
            measure_levels: text(MEASURE_LEVELS)
                .filter(|v| !v.trim().is_empty())
                .map(|v| {
                    serde_json::from_str(&v)
                        .map_err(|error| EnvError::MeasureLevels { value: v, error })
                })
                .transpose()?
                .unwrap_or_default(),
        })
    }

    /// The variables that hand these switches to a test binary:
    /// [`HarnessEnv::from_lookup`] over them reads back what this holds.
    pub fn to_vars(&self) -> Vec<(&'static str, OsString)> {
        let mut vars: Vec<(&'static str, OsString)> = Vec::new();
        let mut put = |name: &'static str, value: Option<String>| {
            if let Some(v) = value {
                vars.push((name, v.into()));
            }
        };
        put(
            CONFIG,
            self.settings.as_ref().map(|s| s.to_json().to_string()),
        );
        put(DEVICE, self.device.map(|d| d.as_str().to_owned()));
        put(UPDATE, self.update.map(|u| u.as_str().to_owned()));
        put(CHECK, self.check.then(|| "1".to_owned()));
        put(STRICT, self.strict.then(|| "1".to_owned()));
        put(
            SITES,
            (self.sites != SitesWhen::default()).then(|| self.sites.as_str().to_owned()),
        );
        let secs = |d: Duration| d.as_secs_f64().to_string();
        put(TIMEOUT, self.timeout.map(secs));
        put(SITES_TIMEOUT, self.sites_timeout.map(secs));
        put(REPORT_FD, self.report_fd.map(|fd| fd.to_string()));
        put(PROGRESS, self.progress.then(|| "1".to_owned()));
        put(STARTED_BY, self.started_by.map(|pid| pid.to_string()));
        put(MEASURE_AT, self.measure_at.as_ref().map(show_at));
        put(
            MEASURE_LEVELS,
            (!self.measure_levels.is_empty())
                .then(|| serde_json::to_string(&self.measure_levels).expect("strings serialize")),
        );
        for (name, path) in [
            (REPORT_DIR, &self.report_dir),
            (REFERENCES, &self.references),
        ] {
            if let Some(p) = path {
                vars.push((name, p.clone().into_os_string()));
            }
        }
        vars
    }

    /// The device a run measures on, decided in this one place: the one asked for in
    /// the environment (or by `cargo vramtest`, which decides it here for each package
    /// and hands it over), else the settings' `device`, else `auto` (CUDA when a device
    /// is present, else the CPU).
    pub fn device_for(&self, settings: &Settings) -> DeviceSetting {
        self.device
            .or(settings.device)
            .unwrap_or(DeviceSetting::Auto)
    }

    /// The effective update mode. `auto` (the default) is `new` locally and `no` in
    /// check mode (CI). In check mode an explicit `new` still writes `.snap.new` files
    /// (for a CI artifact a reviewer can accept), but `.snap` files are never written.
    pub fn update(&self) -> Update {
        match (self.check, self.update) {
            (true, Some(Update::New)) => Update::New,
            (true, _) => Update::No,
            (false, explicit) => explicit.unwrap_or(Update::New),
        }
    }

    /// How long capturing call sites may take ([`DEFAULT_SITES_TIMEOUT`] unless set).
    pub fn sites_timeout(&self) -> Duration {
        self.sites_timeout.unwrap_or(DEFAULT_SITES_TIMEOUT)
    }
}

/// `layers=6,seq=48`: a point as `VRAMTEST_MEASURE_AT` takes it.
fn show_at(point: &Point) -> String {
    let parts: Vec<String> = point.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(",")
}

/// `VRAMTEST_REPORT_FD`: a descriptor number past standard error.
/// `VRAMTEST_STARTED_BY`: a process id (above 1: no test binary is started by init).
fn started_by(value: Option<String>) -> Result<Option<u32>, EnvError> {
    value
        .filter(|v| !v.trim().is_empty())
        .map(|v| match v.trim().parse() {
            Ok(pid) if pid > 1 => Ok(pid),
            _ => Err(EnvError::StartedBy(v)),
        })
        .transpose()
}

fn report_fd(value: Option<String>) -> Result<Option<i32>, EnvError> {
    value
        .map(|v| match v.parse() {
            Ok(fd) if fd > 2 => Ok(fd),
            _ => Err(EnvError::ReportFd(v)),
        })
        .transpose()
}

/// `VRAMTEST_CONFIG`: the settings' JSON form, checked as the metadata is.
fn settings(value: Option<String>) -> Result<Option<Settings>, EnvError> {
    match value {
        Some(json) if !json.trim().is_empty() => {
            let value = serde_json::from_str(&json).map_err(EnvError::ConfigJson)?;
            Settings::parse(&value).map(Some).map_err(EnvError::Config)
        }
        _ => Ok(None),
    }
}

fn device(value: Option<String>) -> Result<Option<DeviceSetting>, EnvError> {
    match value.as_deref().unwrap_or_default() {
        "" => Ok(None),
        other => other
            .parse()
            .map(Some)
            .map_err(|_| EnvError::Device(other.to_owned())),
    }
}

/// An update mode in `var` (`VRAMTEST_UPDATE` or `INSTA_UPDATE`); `None`: auto.
fn update(var: &'static str, value: &str) -> Result<Option<Update>, EnvError> {
    match value {
        "" | "auto" => Ok(None),
        "always" | "force" => Ok(Some(Update::Always)),
        "new" | "unseen" => Ok(Some(Update::New)),
        "no" => Ok(Some(Update::No)),
        other => Err(EnvError::Update {
            var,
            value: other.to_owned(),
        }),
    }
}

fn sites(value: Option<String>) -> Result<SitesWhen, EnvError> {
    match value.as_deref().unwrap_or_default() {
        "" | "auto" | "1" | "on" | "true" => Ok(SitesWhen::OnRegression),
        "0" | "off" | "false" => Ok(SitesWhen::Off),
        "always" => Ok(SitesWhen::Always),
        other => Err(EnvError::Sites(other.to_owned())),
    }
}

/// Whether any CI marker the tool knows is set, read through `var`: `CI` set and not
/// `false`/`0`/empty (insta's rule), `TF_BUILD` set (Azure Pipelines, insta's rule too)
/// or `GITHUB_ACTIONS=true` (GitHub Actions, whose annotations the tool writes). Each
/// counts on its own: `CI=false` does not outvote another marker, so no mix of them
/// writes a snapshot in CI.
pub fn on_ci(var: impl Fn(&str) -> Option<OsString>) -> bool {
    let text = |name: &str| var(name).map(|v| v.to_string_lossy().into_owned());
    text("CI").is_some_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
        || var("TF_BUILD").is_some()
        || text("GITHUB_ACTIONS").is_some_and(|v| v == "true")
}

/// A number of seconds in `var`, above 0 and at most [`MAX_TIMEOUT_SECS`]; `None` when
/// it is unset or empty. The error names the range and suggests `example`.
fn seconds(
    var: &'static str,
    value: Option<String>,
    example: u32,
) -> Result<Option<Duration>, EnvError> {
    match value {
        Some(v) if !v.trim().is_empty() => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| *s > 0.0 && *s <= f64::from(MAX_TIMEOUT_SECS))
            .map(|s| Some(Duration::from_secs_f64(s)))
            .ok_or(EnvError::Seconds {
                var,
                value: v,
                example,
            }),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;
    use test_case::test_case;

    fn read(vars: &[(&str, &str)]) -> Result<HarnessEnv, EnvError> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        HarnessEnv::from_lookup(|name| vars.get(name).cloned())
    }

    fn round_trip(env: &HarnessEnv) -> HarnessEnv {
        let vars: HashMap<&str, OsString> = env.to_vars().into_iter().collect();
        HarnessEnv::from_lookup(|name| vars.get(name).cloned()).unwrap()
    }

    #[test]
    fn every_switch_reads_back_what_it_writes() {
        let settings = Settings::parse(&json!({
            "iterations": 5, "device": "cpu", "budget": "1GiB", "pool_granule": "4MiB",
            "tolerance": "+2% | 1MiB", "limits": { "activations": "+5%", "leak": "allow" }
        }))
        .unwrap();
        let full = HarnessEnv {
            settings: Some(settings),
            device: Some(DeviceSetting::Cuda),
            update: Some(Update::Always),
            check: true,
            strict: true,
            sites: SitesWhen::Always,
            timeout: Some(Duration::from_millis(1500)),
            sites_timeout: Some(Duration::from_secs(300)),
            report_dir: Some(PathBuf::from("reports/one test")),
            report_fd: Some(7),
            progress: true,
            started_by: Some(4242),
            references: Some(PathBuf::from("refs.txt")),
            measure_at: Some(Point::from([
                ("layers".to_owned(), 6),
                ("seq".to_owned(), 48),
            ])),
            measure_levels: BTreeMap::from([
                ("precision".to_owned(), "bf16".to_owned()),
                ("note".to_owned(), "a, b=\"c\"".to_owned()),
            ]),
        };
        for env in [
            HarnessEnv::default(),
            HarnessEnv {
                sites: SitesWhen::OnRegression,
                ..full.clone()
            },
            full.clone(),
            HarnessEnv {
                update: Some(Update::New),
                sites: SitesWhen::Off,
                device: Some(DeviceSetting::Auto),
                ..HarnessEnv::default()
            },
            HarnessEnv {
                update: Some(Update::No),
                check: false,
                ..full
            },
        ] {
            assert_eq!(round_trip(&env), env);
        }
        // Nothing set writes nothing: the child reads the defaults.
        assert!(HarnessEnv::default().to_vars().is_empty());
    }

    #[test]
    fn the_device_is_decided_in_one_place() {
        let on = |device: Option<DeviceSetting>| HarnessEnv {
            device,
            ..HarnessEnv::default()
        };
        let cpu = Settings {
            device: Some(DeviceSetting::Cpu),
            ..Settings::default()
        };
        // The environment over the settings, the settings over `auto`.
        assert_eq!(
            on(Some(DeviceSetting::Cuda)).device_for(&cpu),
            DeviceSetting::Cuda
        );
        assert_eq!(on(None).device_for(&cpu), DeviceSetting::Cpu);
        assert_eq!(
            on(None).device_for(&Settings::default()),
            DeviceSetting::Auto
        );
    }

    #[test_case(&[], None, Update::New; "auto off CI is new")]
    #[test_case(&[("CI", "true")], None, Update::No; "auto on CI is no")]
    #[test_case(&[("TF_BUILD", "True")], None, Update::No; "azure is CI")]
    #[test_case(&[("CI", "false")], None, Update::New; "CI false is not CI")]
    #[test_case(&[("GITHUB_ACTIONS", "true")], None, Update::No; "github actions is CI")]
    #[test_case(&[("GITHUB_ACTIONS", "true"), ("CI", "false"), ("VRAMTEST_UPDATE", "always")], Some(Update::Always), Update::No; "CI false does not outvote github actions")]
    #[test_case(&[("TF_BUILD", "True"), ("CI", "0"), ("VRAMTEST_UPDATE", "always")], Some(Update::Always), Update::No; "CI 0 does not outvote azure")]
    #[test_case(&[("GITHUB_ACTIONS", "false")], None, Update::New; "github actions false is not CI")]
    #[test_case(&[("VRAMTEST_CHECK", "1"), ("VRAMTEST_UPDATE", "always")], Some(Update::Always), Update::No; "check never writes snap files")]
    #[test_case(&[("CI", "1"), ("INSTA_UPDATE", "new")], Some(Update::New), Update::New; "check keeps an explicit new")]
    #[test_case(&[("INSTA_UPDATE", "force")], Some(Update::Always), Update::Always; "insta's names")]
    #[test_case(&[("INSTA_UPDATE", "always"), ("VRAMTEST_UPDATE", "no")], Some(Update::No), Update::No; "ours over insta's")]
    #[test_case(&[("INSTA_UPDATE", "always"), ("VRAMTEST_UPDATE", "")], None, Update::New; "ours set empty is auto")]
    fn the_update_mode(vars: &[(&str, &str)], asked: Option<Update>, effective: Update) {
        let env = read(vars).unwrap();
        assert_eq!((env.update, env.update()), (asked, effective));
        // Handed on, the same mode.
        assert_eq!(round_trip(&env).update(), effective);
    }

    #[test_case(&[("VRAMTEST_UPDATE", "sometimes")], "VRAMTEST_UPDATE=sometimes: unknown mode"; "update")]
    #[test_case(&[("INSTA_UPDATE", "x")], "INSTA_UPDATE=x: unknown mode"; "insta update")]
    #[test_case(&[("VRAMTEST_DEVICE", "tpu")], "VRAMTEST_DEVICE=tpu: unknown device"; "device")]
    #[test_case(&[("VRAMTEST_SITES", "sometimes")], "VRAMTEST_SITES=sometimes: unknown mode"; "sites")]
    #[test_case(&[("VRAMTEST_TIMEOUT", "-1")], "VRAMTEST_TIMEOUT=-1: not a number of seconds"; "timeout")]
    #[test_case(&[("VRAMTEST_REPORT_FD", "1")], "VRAMTEST_REPORT_FD=1: not a descriptor number above 2"; "report to stdout")]
    #[test_case(&[("VRAMTEST_SITES_TIMEOUT", "soon")], "VRAMTEST_SITES_TIMEOUT=soon: not a number"; "sites timeout")]
    #[test_case(&[("VRAMTEST_STARTED_BY", "me")], "VRAMTEST_STARTED_BY=me: not a process id"; "started by no pid")]
    #[test_case(&[("VRAMTEST_STARTED_BY", "1")], "VRAMTEST_STARTED_BY=1: not a process id"; "started by init")]
    #[test_case(&[("VRAMTEST_TIMEOUT", "1e300")], "VRAMTEST_TIMEOUT=1e300: not a number of seconds above 0 and at most 31536000 (365 days)"; "timeout past any clock")]
    #[test_case(&[("VRAMTEST_SITES_TIMEOUT", "18446744073709551616")], "VRAMTEST_SITES_TIMEOUT=18446744073709551616: not a number of seconds above 0 and at most 31536000"; "sites timeout past u64")]
    #[test_case(&[("VRAMTEST_TIMEOUT", "31536000.5")], "VRAMTEST_TIMEOUT=31536000.5: not a number of seconds above 0"; "timeout just past a year")]
    #[test_case(&[("VRAMTEST_TIMEOUT", "inf")], "VRAMTEST_TIMEOUT=inf: not a number of seconds"; "infinite timeout")]
    #[test_case(&[("VRAMTEST_TIMEOUT", "NaN")], "VRAMTEST_TIMEOUT=NaN: not a number of seconds"; "nan timeout")]
    #[test_case(&[("VRAMTEST_MEASURE_AT", "seq=0")], "VRAMTEST_MEASURE_AT=seq=0: axis `seq`: the value must be at least 1"; "measure at zero")]
    #[test_case(&[("VRAMTEST_MEASURE_AT", "seq")], "VRAMTEST_MEASURE_AT=seq: `seq` is not `axis=value`"; "measure at no value")]
    #[test_case(&[("VRAMTEST_MEASURE_LEVELS", "precision=bf16")], "VRAMTEST_MEASURE_LEVELS=precision=bf16: not a JSON object of levels"; "measure levels not JSON")]
    #[test_case(&[("VRAMTEST_MEASURE_LEVELS", r#"{"precision": 16}"#)], "VRAMTEST_MEASURE_LEVELS={\"precision\": 16}: not a JSON object of levels"; "measure levels not strings")]
    #[test_case(&[("VRAMTEST_CONFIG", "{")], "VRAMTEST_CONFIG is not a valid configuration"; "config not JSON")]
    #[test_case(&[("VRAMTEST_CONFIG", r#"{"limits": {"activation": "+5%"}}"#)], "VRAMTEST_CONFIG: `limits.activation`: unknown limit"; "config with a bad key")]
    fn a_bad_value_names_its_variable(vars: &[(&str, &str)], needle: &str) {
        let e = read(vars).unwrap_err().to_string();
        assert!(e.starts_with(needle), "{e}");
    }

    #[test]
    fn the_longest_timeout_is_a_deadline_on_this_clock() {
        let longest = MAX_TIMEOUT_SECS.to_string();
        let env = read(&[(TIMEOUT, &longest), (SITES_TIMEOUT, &longest)]).unwrap();
        let now = std::time::Instant::now();
        for t in [env.timeout.unwrap(), env.sites_timeout()] {
            assert_eq!(t, Duration::from_secs(365 * 24 * 3600));
            assert!(now.checked_add(t).is_some());
        }
        assert_eq!(round_trip(&env), env);
    }

    #[test]
    fn unset_and_empty_switches_are_the_defaults() {
        let empty: Vec<(&str, &str)> = [
            CONFIG,
            DEVICE,
            UPDATE,
            CHECK,
            STRICT,
            SITES,
            TIMEOUT,
            MEASURE_AT,
            MEASURE_LEVELS,
        ]
        .into_iter()
        .map(|name| (name, ""))
        .collect();
        assert_eq!(read(&empty).unwrap(), HarnessEnv::default());
        assert_eq!(read(&[]).unwrap(), HarnessEnv::default());
        assert_eq!(HarnessEnv::default().sites_timeout(), DEFAULT_SITES_TIMEOUT);
    }
}
