//! The snapshot file: insta's format (a YAML header between `---` lines, then the
//! content) with a pretty JSON body of integer byte counts.
//!
//! ```text
//! ---
//! source: tests/vram.rs
//! description: "vramtest: peak memory of mlp_adamw by category"
//! expression: mlp_adamw
//! info:
//!   device: "cpu"
//!   fidelity: "exact"
//!   tool: "vramtest 0.1.0"
//! ---
//! { "schema": 1, ... }   (2 when a sweep fits a phase as its moments)
//! ```
//!
//! Everything volatile (device name, driver, tool version) lives in the header's `info`,
//! which comparisons ignore; the body is deterministic for a deterministic program.

mod header;
pub mod migrate;

pub use header::{CpuFingerprint, Header, HeaderError, Info};

use crate::category::{Category, Phase};
use crate::profile::{CategoryBytes, Fidelity, PhaseRecord, Profile};
use crate::sweep::Sweep;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The newest body format this version reads and writes. Bump it when the body changes
/// incompatibly, with a step in [`migrate::MIGRATIONS`] that reads the bodies of the
/// schema before (and [`READS_AS_WRITTEN_SINCE`] with it).
///
/// A body is written in the oldest schema that holds it whole ([`Body::written_schema`]):
/// schema 1, unless its sweep fits a phase as its moments ([`MOMENTS_SCHEMA`]).
pub const SCHEMA: u32 = 2;

/// The schema of a body whose sweep fits a phase as its moments
/// ([`crate::sweep::Figure::PhaseMoment`]). A release before moments reads a moment's
/// fit as a figure it does not know and drops it: the phase falls out of its predicted
/// peak, which comes out too low without a word. Written as schema 2, such a body is
/// one that release refuses ("newer than this version's"); every other body stays
/// schema 1, which it reads as before.
pub const MOMENTS_SCHEMA: u32 = 2;

/// The oldest schema whose bodies this version reads as they were written: each
/// schema since only added what an older release must refuse (schema 2: a phase's
/// moments). Older bodies take the steps of [`migrate::MIGRATIONS`] up to it.
pub const READS_AS_WRITTEN_SINCE: u32 = 1;

/// The kind of device a snapshot was taken on; part of its file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceClass {
    /// The CPU: the process's heap allocations.
    Cpu,
    /// A CUDA device.
    Cuda,
}

impl DeviceClass {
    /// The class's name in snapshot file names and headers (`cpu`).
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceClass::Cpu => "cpu",
            DeviceClass::Cuda => "cuda",
        }
    }
}

impl fmt::Display for DeviceClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a reviewer judges: the snapshot's body. Key order is the file's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Body {
    /// The body's format version: in the file, the oldest schema that reads it whole
    /// ([`Body::written_schema`]); once read, this version's ([`SCHEMA`]).
    pub schema: u32,
    /// The kind of device measured.
    pub device_class: DeviceClass,
    /// How the figures were measured (every allocation, or phase watermarks).
    pub fidelity: Fidelity,
    /// Iterations the training loop ran.
    pub iterations: u32,
    /// The highest live total over the whole test, in bytes (baseline excluded).
    pub peak_bytes: u64,
    /// On a CUDA device with a memory pool: the pool's highest *reserved* bytes above
    /// its start (`RESERVED_MEM_HIGH`), beside the allocated `peak_bytes`; what it
    /// holds beyond the allocated bytes at the peak is fragmentation and the pool's
    /// rounding to its granule ([`Body::fragmentation_bytes`]). Judged by the limit
    /// `reserved`. Absent for CPU results (and devices without pools), so their
    /// snapshots read and write byte for byte as before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
    // `null` is a value; a missing key is an error (serde would default it to None).
    /// The phase running at the peak (`null`: outside any phase).
    #[serde(deserialize_with = "Option::deserialize")]
    pub peak_phase: Option<Phase>,
    /// The iteration running at the peak (`null`: before the loop).
    #[serde(deserialize_with = "Option::deserialize")]
    pub peak_iteration: Option<u32>,
    /// The bytes of each category at the moment of the peak; they sum to `peak_bytes`.
    pub at_peak: CategoryBytes,
    /// Each category's own highest live bytes.
    pub category_peaks: CategoryBytes,
    /// The set-up phases and the phases of the last iteration.
    pub phases: Vec<PhaseRecord>,
    /// Growth of live bytes per iteration after the warm-up (0 without a leak).
    pub leak_bytes_per_iteration: u64,
    /// On the CPU: the highest live bytes of CPU-only memory (gemm's packing buffers
    /// and the like: memory a GPU would never hold), measured apart from the categories
    /// and the peak above. It depends on the CPU (its caches, its instruction set), so it
    /// is compared on the machine the snapshot was recorded on, elsewhere only when a
    /// `cpu_only` limit is set. Absent for device results; a CPU
    /// snapshot without it was recorded before CPU-only memory was kept apart (its
    /// `workspace` and peak still hold it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_only: Option<u64>,
    /// A sweep's memory model, over named axes (`axes(..)`) or over the one axis
    /// `batch` (`#[vramtest(batch = [..])]`); the keys above then describe the sweep's
    /// first point. Absent without a sweep, so snapshots written before sweeps existed
    /// read unchanged. A batch sweep's older shape (a line per figure) reads too,
    /// migrated ([`Sweep::migrated`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::sweep::deserialize_scaling"
    )]
    pub scaling: Option<Sweep>,
}

impl Body {
    /// The snapshot body of a measured profile.
    pub fn from_profile(profile: &Profile, device_class: DeviceClass) -> Body {
        Body {
            schema: SCHEMA,
            device_class,
            fidelity: profile.fidelity,
            iterations: profile.iterations,
            peak_bytes: profile.peak_bytes,
            reserved_bytes: match device_class {
                DeviceClass::Cuda => profile.reserved_peak_bytes,
                DeviceClass::Cpu => None,
            },
            peak_phase: profile.peak_phase,
            peak_iteration: profile.peak_iteration,
            at_peak: profile.at_peak,
            category_peaks: profile.category_peaks,
            phases: profile.steady_state_phases(),
            leak_bytes_per_iteration: profile.leak_bytes_per_iteration,
            cpu_only: match device_class {
                DeviceClass::Cpu => Some(profile.cpu_only_peak_bytes),
                DeviceClass::Cuda => None,
            },
            scaling: None,
        }
    }

    /// The sweep, if the body holds one.
    pub fn sweep(&self) -> Option<&Sweep> {
        self.scaling.as_ref()
    }

    /// CPU-only memory larger than the tensor categories' own peaks together
    /// ([`Category::TENSORS`]): `(cpu_only, tensors)`. It likely holds tensors a library
    /// aligned to 128 B or more (faer, aligned-vec), which only the snapshot's machine
    /// compares; `None` otherwise and for device results.
    pub fn cpu_only_over_tensors(&self) -> Option<(u64, u64)> {
        let cpu_only = self.cpu_only?;
        let tensors = Category::TENSORS
            .iter()
            .map(|&c| self.category_peaks[c])
            .fold(0u64, u64::saturating_add);
        (cpu_only > tensors).then_some((cpu_only, tensors))
    }

    /// Whether this is a CPU snapshot recorded before CPU-only memory was kept apart:
    /// its `workspace`, temporaries and peak still hold gemm's packing buffers.
    pub fn predates_cpu_only(&self) -> bool {
        self.device_class == DeviceClass::Cpu && self.cpu_only.is_none()
    }

    /// Reserved but not allocated at the peak: `reserved_bytes` less the bytes the
    /// pool had allocated then (the peak without `untracked`, which is memory outside
    /// the pool). `None` without `reserved_bytes`.
    pub fn fragmentation_bytes(&self) -> Option<u64> {
        let allocated = self
            .peak_bytes
            .saturating_sub(self.at_peak[Category::Untracked]);
        self.reserved_bytes.map(|r| r.saturating_sub(allocated))
    }

    /// The schema the body is written in: the oldest that reads it whole
    /// ([`MOMENTS_SCHEMA`] when its sweep, or a variant's, fits a phase as its moments;
    /// else 1, which releases before moments read as before).
    pub fn written_schema(&self) -> u32 {
        let moments = self.scaling.as_ref().is_some_and(|s| {
            std::iter::once(s)
                .chain(s.variants.iter().map(|v| &v.sweep))
                .any(Sweep::has_moments)
        });
        // Never below the oldest schema this version writes (a later incompatible
        // change raises it past the moments' schema).
        if moments {
            MOMENTS_SCHEMA.max(READS_AS_WRITTEN_SINCE)
        } else {
            READS_AS_WRITTEN_SINCE
        }
    }

    /// The body as it appears in the file: pretty JSON, one trailing newline, in the
    /// oldest schema that reads it whole ([`Body::written_schema`]).
    pub fn to_text(&self) -> String {
        let written = Body {
            schema: self.written_schema(),
            ..self.clone()
        };
        let mut s = serde_json::to_string_pretty(&written).expect("a Body always serializes");
        s.push('\n');
        s
    }
}

/// A whole snapshot file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The test's source file, relative to its crate (`tests/vram.rs`).
    pub source: String,
    /// The test's name (insta's `expression`).
    pub test: String,
    /// The header's volatile metadata (never compared).
    pub info: Info,
    /// The body a reviewer judges.
    pub body: Body,
}

impl Snapshot {
    /// The file's header: insta's keys, with the test's name as its `expression`.
    pub fn header(&self) -> Header {
        Header {
            source: self.source.clone(),
            assertion_line: None,
            description: Some(format!(
                "vramtest: peak memory of {} on {}, by category",
                self.test, self.body.device_class
            )),
            expression: Some(self.test.clone()),
            info: Some(self.info.clone()),
        }
    }

    /// Renders the file, header first.
    pub fn to_text(&self) -> String {
        format!(
            "---\n{}---\n{}",
            self.header().to_yaml(),
            self.body.to_text()
        )
    }
}

#[cfg(test)]
mod timeline_tests {
    use super::*;

    #[test]
    fn a_timeline_path_is_the_same_before_and_after_the_snapshot_and_its_directory_exist() {
        let dir = tempfile::tempdir().unwrap();
        let target = Path::new("/t");
        let snap = path_for(dir.path(), "vram", "mod::mlp", DeviceClass::Cpu);
        let before = timeline_path(target, &snap);
        std::fs::create_dir_all(snap.parent().unwrap()).unwrap();
        assert_eq!(timeline_path(target, &snap), before);
        // And once the snapshot itself is written (a first run under `always` keeps
        // its timeline after writing it; `show` looks it up beside the file).
        std::fs::write(&snap, "---").unwrap();
        assert_eq!(timeline_path(target, &snap), before, "with the file");
        assert!(before.starts_with("/t/vramtest/timelines"));
        let name = before.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("vram__mod__mlp@cpu-") && name.ends_with(".json"),
            "{name}"
        );
        let other = path_for(
            &dir.path().join("other"),
            "vram",
            "mod::mlp",
            DeviceClass::Cpu,
        );
        assert_ne!(timeline_path(target, &other), before, "another package");
        let prediction = prediction_path(target, &snap);
        assert!(prediction.starts_with("/t/vramtest/predictions"));
        assert_eq!(prediction.file_name(), before.file_name());
    }
}

/// A snapshot file that is not what it should be. Displayed `line N: what is wrong`;
/// [`ParseError::line`] and [`ParseError::reason`] give the two apart.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// The file does not start with a `---` line and a `source:` key.
    NoHeader,
    /// The file is not UTF-8 text.
    NotUtf8 {
        /// The line of the first byte that is not UTF-8 (from 1).
        line: usize,
    },
    /// The header has no closing `---` line.
    UnclosedHeader {
        /// The file's last line (from 1).
        line: usize,
    },
    /// The header is not readable YAML, or lacks its `source`.
    Header {
        /// The line of the error (from 1).
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The body is not valid JSON or not a valid body.
    Body {
        /// The line of the error (from 1).
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The body's `schema` is not the one this version reads.
    Schema {
        /// The line of the `schema` key (from 1).
        line: usize,
        /// The schema the file has.
        found: u64,
    },
    /// The body's figures contradict each other (no measurement gives them): the
    /// categories at the peak do not sum to the peak, a category's own peak is below
    /// its bytes at the peak, or a phase peaks above the peak.
    Inconsistent {
        /// The line of the field at fault (from 1).
        line: usize,
        /// The field (`at_peak`, `category_peaks.activations`, `phases`).
        field: String,
        /// What contradicts what.
        message: String,
    },
}

impl ParseError {
    /// The line of the file the error is on (from 1).
    pub fn line(&self) -> usize {
        match self {
            ParseError::NoHeader => 1,
            ParseError::UnclosedHeader { line }
            | ParseError::NotUtf8 { line }
            | ParseError::Header { line, .. }
            | ParseError::Body { line, .. }
            | ParseError::Schema { line, .. }
            | ParseError::Inconsistent { line, .. } => *line,
        }
    }

    /// What is wrong, without the line.
    pub fn reason(&self) -> String {
        match self {
            ParseError::NoHeader => {
                "not a snapshot file: it must start with `---` and a `source:` line".to_owned()
            }
            ParseError::NotUtf8 { .. } => {
                "not UTF-8 text (hint: a snapshot file is UTF-8; re-create it)".to_owned()
            }
            ParseError::UnclosedHeader { .. } => {
                "the header is never closed by a `---` line".to_owned()
            }
            ParseError::Header { message, .. } => format!(
                "invalid snapshot header: {message} (hint: the header is YAML, as insta writes it)"
            ),
            ParseError::Body { message, .. } => format!("invalid snapshot body: {message}"),
            ParseError::Schema { found, .. } if *found < u64::from(SCHEMA) => format!(
                "snapshot schema {found} is older than this version's (schema {SCHEMA}), which no longer reads it (hint: re-create the snapshot: delete it and run the test)"
            ),
            ParseError::Schema { found, .. } => format!(
                "snapshot schema {found} is newer than this version's (schema {SCHEMA}) (hint: upgrade vramtest, or re-create the snapshot)"
            ),
            ParseError::Inconsistent { field, message, .. } => format!(
                "`{field}` contradicts the rest of the body: {message} (hint: a snapshot is written by a run, never by hand; re-create it)"
            ),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line(), self.reason())
    }
}

impl std::error::Error for ParseError {}

/// What parsing keeps: the header (shown, never compared) and the body (compared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The header, parsed.
    pub header: Header,
    /// The header's lines between the `---` lines, as written: what `show` shows
    /// (keys this version does not read included). Never read back.
    pub header_lines: String,
    /// The body, parsed, in this version's schema.
    pub body: Body,
    /// The notes of the migration steps the body took from the schema it was written
    /// in ([`migrate::MIGRATIONS`]); empty for a body of this version's schema.
    pub migrated: Vec<&'static str>,
}

/// Parses a snapshot file's text. The header is read as insta reads it (YAML; keys it
/// does not know and an `info` it cannot read are passed over, as `cargo insta accept`
/// may have rewritten them); the body is parsed strictly.
pub fn parse(text: &str) -> Result<Parsed, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err(ParseError::NoHeader);
    }
    let mut header = String::new();
    let mut offset = first.len();
    let mut line = 1;
    let mut closed = false;
    for l in lines {
        line += 1;
        offset += l.len();
        if l.trim_end() == "---" {
            closed = true;
            break;
        }
        header.push_str(l);
    }
    if !header.starts_with("source:") {
        return Err(ParseError::NoHeader);
    }
    if !closed {
        return Err(ParseError::UnclosedHeader { line });
    }
    // The header's first line is the file's second.
    let header_lines = header;
    let header = Header::from_yaml(&header_lines).map_err(|e| ParseError::Header {
        line: 1 + e.line,
        message: e.message,
    })?;
    let body_text = &text[offset..];
    // serde_json counts a missing value at the end as the line after the last one.
    let last_line = 1 + text.matches('\n').count();
    let body_line = |e: &serde_json::Error| (line + e.line()).min(last_line);
    let (body, migrated) = read_body(body_text, line, body_line)?;
    if let Err((field, message)) = consistency(&body) {
        // The body starts after `line`.
        return Err(ParseError::Inconsistent {
            line: line + 1 + field_line(body_text, &field),
            field,
            message,
        });
    }
    Ok(Parsed {
        header,
        header_lines,
        body,
        migrated,
    })
}

/// The line (from 0) of a body's field given by its path (`phases`,
/// `scaling.variants[1].saving.peak_bytes`): each key searched after the one before
/// it, the `n`th element of a list by the `n`th occurrence of the key after it; the
/// last key found where one is not.
fn field_line(body_text: &str, field: &str) -> usize {
    let lines: Vec<&str> = body_text.lines().collect();
    let mut at = 0;
    let mut skip = 0;
    for segment in field.split('.') {
        let (key, index) = match segment.split_once('[') {
            Some((key, rest)) => (key, rest.trim_end_matches(']').parse().unwrap_or(0)),
            None => (segment, 0),
        };
        let quoted = format!("\"{key}\"");
        let found = (at..lines.len())
            .filter(|&i| lines[i].contains(&quoted))
            .nth(skip);
        match found {
            Some(i) => at = i,
            None => break,
        }
        skip = index;
    }
    at
}

/// The body after the header's closing line `line`, strictly, with the notes of the
/// migration steps it took from its schema to [`SCHEMA`] (none for a current body).
/// `body_line`: the file line of a JSON error.
fn read_body(
    body_text: &str,
    line: usize,
    body_line: impl Fn(&serde_json::Error) -> usize,
) -> Result<(Body, Vec<&'static str>), ParseError> {
    let invalid = |e: serde_json::Error| ParseError::Body {
        line: body_line(&e),
        message: e.to_string(),
    };
    // Check the schema first, so a future format gets a precise message.
    let value: serde_json::Value = serde_json::from_str(body_text).map_err(invalid)?;
    // The file line holding the `schema` key (the body starts after `line`).
    let schema_line = line
        + 1
        + body_text
            .lines()
            .position(|l| l.contains("\"schema\""))
            .unwrap_or(0);
    let Some(found) = value.get("schema").and_then(|v| v.as_u64()) else {
        return Err(ParseError::Body {
            line: line + 1,
            message: "missing integer `schema`".into(),
        });
    };
    if (u64::from(READS_AS_WRITTEN_SINCE)..=u64::from(SCHEMA)).contains(&found) {
        // Read from the text, so that an error names its line.
        let body: Body = serde_json::from_str(body_text).map_err(invalid)?;
        return Ok((
            Body {
                schema: SCHEMA,
                ..body
            },
            Vec::new(),
        ));
    }
    let (value, notes) = u32::try_from(found)
        .ok()
        .and_then(|from| migrate::migrate(migrate::MIGRATIONS, value, from, READS_AS_WRITTEN_SINCE))
        .ok_or(ParseError::Schema {
            line: schema_line,
            found,
        })?;
    let body: Body = serde_json::from_value(value).map_err(|e| ParseError::Body {
        line: schema_line,
        message: format!("{e} (after migrating from schema {found})"),
    })?;
    Ok((
        Body {
            schema: SCHEMA,
            ..body
        },
        notes,
    ))
}

/// Whether a body's figures can come from one measurement: the categories at the peak
/// sum to the peak; each category's own peak is at least its bytes at the peak; no
/// phase peaks above the peak; each lever's recorded saving is the one its fits
/// predict. `Err`: the field at fault, and why.
fn consistency(body: &Body) -> Result<(), (String, String)> {
    let sum = body
        .at_peak
        .iter()
        .map(|(_, b)| u128::from(b))
        .sum::<u128>();
    if sum != u128::from(body.peak_bytes) {
        return Err((
            "at_peak".into(),
            format!(
                "its categories sum to {sum} B, not to peak_bytes {} B",
                body.peak_bytes
            ),
        ));
    }
    for (category, at_peak) in body.at_peak.iter() {
        let own = body.category_peaks[category];
        if own < at_peak {
            return Err((
                format!("category_peaks.{category}"),
                format!("{own} B, below its {at_peak} B at the peak"),
            ));
        }
    }
    if let Some(sweep) = body.sweep() {
        sweep.check_savings()?;
    }
    if let Some(phase) = body.phases.iter().find(|p| p.peak_bytes > body.peak_bytes) {
        return Err((
            "phases".into(),
            format!(
                "phase {} peaks at {} B, above peak_bytes {} B",
                phase.phase, phase.peak_bytes, body.peak_bytes
            ),
        ));
    }
    Ok(())
}

impl Parsed {
    /// The test the snapshot was written for (its header's `expression`, as
    /// [`Snapshot::to_text`] writes it); `None` in a file without one.
    pub fn test(&self) -> Option<&str> {
        self.header.expression.as_deref()
    }

    /// The call sites its header's `info` keeps (empty without any).
    pub fn sites(&self) -> &[(crate::Category, Vec<crate::sites::Site>)] {
        self.header
            .info
            .as_ref()
            .map_or(&[], |i| i.sites.as_slice())
    }

    /// The machine its header's `info` names (CPU results).
    pub fn machine(&self) -> Option<&CpuFingerprint> {
        self.header.info.as_ref()?.machine.as_ref()
    }
}

/// Two tests whose snapshots would be one file (`::` and `__` both become `__`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedFile {
    /// The file's name, for any device class (`vram__x__y@<class>.snap`).
    pub file: String,
    /// The first test, as `target::test`.
    pub first: String,
    /// The second.
    pub second: String,
}

impl fmt::Display for SharedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` and `{}` would share the snapshot file tests/snapshots/{} (hint: rename one of them)",
            self.first, self.second, self.file
        )
    }
}

/// Every pair of `(target, test)` whose snapshot files would be one, in the order the
/// tests are given (each later test paired with the first that takes its file).
pub fn shared_files<'a>(tests: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<SharedFile> {
    let mut taken: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut shared = Vec::new();
    for (target, test) in tests {
        let stem = format!("{target}__{}", test.replace("::", "__"));
        let name = format!("{target}::{test}");
        match taken.get(&stem) {
            Some(first) if *first != name => shared.push(SharedFile {
                file: format!("{stem}@<device>.snap"),
                first: first.clone(),
                second: name,
            }),
            Some(_) => {}
            None => {
                taken.insert(stem, name);
            }
        }
    }
    shared
}

/// `<crate>/tests/snapshots/<target>__<test>@<class>.snap`; `::` in test names becomes `__`.
pub fn path_for(crate_dir: &Path, target: &str, test: &str, class: DeviceClass) -> PathBuf {
    crate_dir.join("tests").join("snapshots").join(format!(
        "{target}__{}@{class}.snap",
        test.replace("::", "__")
    ))
}

/// Where a run keeps the timeline of the result that belongs to `snap` (a snapshot
/// path from [`path_for`]): `<target-dir>/vramtest/timelines/<name>-<hash>.json`. The
/// timeline is volatile (it never goes into a snapshot); the harness writes it and
/// `cargo vramtest show --svg` and `--html` read it. The hash of the canonical
/// snapshot path keeps two packages' same-named tests apart.
pub fn timeline_path(target_dir: &Path, snap: &Path) -> PathBuf {
    kept_path(target_dir, snap, "timelines")
}

/// Where a run keeps the GPU prediction of the result that belongs to `snap`
/// ([`crate::pool::Prediction`]): beside its timeline, under
/// `<target-dir>/vramtest/predictions/`, named the same way. Volatile like the timeline.
pub fn prediction_path(target_dir: &Path, snap: &Path) -> PathBuf {
    kept_path(target_dir, snap, "predictions")
}

/// `<target-dir>/vramtest/<folder>/<name>-<hash>.json` for the result of `snap`.
fn kept_path(target_dir: &Path, snap: &Path, folder: &str) -> PathBuf {
    // The nearest existing ancestor, canonical, then the rest as given: the snapshot
    // directory may not exist yet on a first run.
    let canonical = snap
        .ancestors()
        .find_map(|a| {
            let rest = snap.strip_prefix(a).ok()?;
            let canonical = a.canonicalize().ok()?;
            // Joining an empty rest would add a trailing separator, and another hash.
            Some(if rest.as_os_str().is_empty() {
                canonical
            } else {
                canonical.join(rest)
            })
        })
        .unwrap_or_else(|| snap.to_path_buf());
    // FNV-1a, 64 bits: stable across builds and platforms (std's hasher is not).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in canonical.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let stem = snap
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".snap").to_owned())
        .unwrap_or_default();
    target_dir
        .join("vramtest")
        .join(folder)
        .join(format!("{stem}-{hash:016x}.json"))
}

/// The pending file beside a snapshot: `<name>.snap.new`.
pub fn pending_path(snap: &Path) -> PathBuf {
    let mut s = snap.as_os_str().to_owned();
    s.push(".new");
    PathBuf::from(s)
}

/// A snapshot file that could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The snapshot file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file's text is not a valid snapshot: `path:line: what is wrong`, the form
    /// editors and CI annotations understand.
    #[error("{path}:{}: {}", .source.line(), .source.reason())]
    Parse {
        /// The snapshot file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: ParseError,
    },
}

impl FileError {
    /// The file involved.
    pub fn path(&self) -> &Path {
        match self {
            FileError::Io { path, .. } | FileError::Parse { path, .. } => path,
        }
    }

    /// The line within the file, when the error has one.
    pub fn line(&self) -> Option<usize> {
        match self {
            FileError::Parse { source, .. } => Some(source.line()),
            FileError::Io { .. } => None,
        }
    }
}

/// Reads and parses a snapshot file; `Ok(None)` when it does not exist.
pub fn read(path: &Path) -> Result<Option<Parsed>, FileError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(FileError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    parse_bytes(&bytes)
        .map(Some)
        .map_err(|source| FileError::Parse {
            path: path.to_owned(),
            source,
        })
}

/// [`parse`] for a file's bytes: text that is not UTF-8 is an error at the line of
/// the first byte that is not.
pub fn parse_bytes(bytes: &[u8]) -> Result<Parsed, ParseError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text),
        Err(e) => Err(ParseError::NotUtf8 {
            line: 1 + bytes[..e.valid_up_to()]
                .iter()
                .filter(|b| **b == b'\n')
                .count(),
        }),
    }
}

/// Writes `text` to `path` atomically: a temporary file in the same directory, flushed,
/// then renamed over the target, and the directory flushed so that the rename itself
/// survives a power cut. A crash leaves the old file or the new one, never half.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), FileError> {
    let io = |source| FileError::Io {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A random name beside the target (removed again if anything fails).
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    // A file like any other (0666 less the umask), not tempfile's private 0600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = builder.tempfile_in(dir).map_err(io)?;
    tmp.write_all(text.as_bytes()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    sync_dir(dir).map_err(io)
}

/// Flushes a directory's entries to disk (Unix; elsewhere a rename is as durable as
/// the file system makes it).
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}
