//! A snapshot file's header, between its `---` lines: insta's `MetaData` keys
//! (`source`, `assertion_line`, `description`, `expression`, `info`) as one typed
//! value. Serde says which keys there are and in what order; [`Header::to_yaml`]
//! writes them the way `cargo insta accept` rewrites a file (so accepting does not
//! churn it) and [`Header::from_yaml`] reads them back with a YAML parser.

use crate::category::Category;
use crate::profile::Fidelity;
use crate::sites::Site;
use serde::{Deserialize, Deserializer, Serialize};
use serde_yaml_ng::{Mapping, Value};
use std::fmt;

/// A snapshot file's header. The keys are insta's, in its order; keys insta may add
/// that this type does not know (`snapshot_kind`, `input_file`) are read past.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Header {
    /// The test's source file, relative to its crate (`tests/vram.rs`).
    pub source: String,
    /// The line of the assertion: insta writes it into pending files; the harness
    /// never does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assertion_line: Option<u32>,
    /// What the snapshot holds, for a reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The test's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// The volatile metadata; `None` when the file has none, or none this version can
    /// read (`info` is never worth failing a test over).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_info"
    )]
    pub info: Option<Info>,
}

impl Header {
    /// The header's lines (without the `---` around them), as `cargo insta accept`
    /// writes them: nested maps indented by two spaces, list items as `- item`,
    /// scalars plain when that is unambiguous.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        match serde_yaml_ng::to_value(self).expect("a header always serializes") {
            Value::Mapping(map) => write_map(&map, 0, &mut out),
            other => out += &scalar(&other),
        }
        out
    }

    /// Reads a header's lines. Its `source` is required; unknown keys are read past.
    pub fn from_yaml(text: &str) -> Result<Header, HeaderError> {
        serde_yaml_ng::from_str(text).map_err(|e| HeaderError {
            line: e.location().map_or(1, |l| l.line()),
            message: without_marks(&e.to_string()),
        })
    }
}

/// A YAML error's message without its ` at line L column C` marks: they count from
/// the header's first line, not the file's, and the error carries the line apart.
fn without_marks(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find(" at line ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + " at line ".len()..];
        let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let line = digits(after);
        match after[line..].strip_prefix(" column ") {
            Some(column) if line > 0 && digits(column) > 0 => rest = &column[digits(column)..],
            _ => {
                out.push_str(" at line ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A header that is not readable YAML, or lacks what a header must have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the header: {message}")]
pub struct HeaderError {
    /// The line within the header (from 1: the line after the first `---`).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// `info` as far as it reads: a map this version cannot read at all is `None`.
fn lenient_info<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Info>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(Info::deserialize(value).ok())
}

/// The lines of `map`'s entries at `indent` spaces.
fn write_map(map: &Mapping, indent: usize, out: &mut String) {
    for (key, value) in map {
        out.extend(std::iter::repeat_n(' ', indent));
        out.push_str(&scalar(key));
        out.push(':');
        match value {
            Value::Mapping(inner) if !inner.is_empty() => {
                out.push('\n');
                write_map(inner, indent + 2, out);
            }
            Value::Sequence(items) if !items.is_empty() => {
                out.push('\n');
                for item in items {
                    out.extend(std::iter::repeat_n(' ', indent + 2));
                    out.push_str("- ");
                    out.push_str(&scalar(item));
                    out.push('\n');
                }
            }
            other => {
                out.push(' ');
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

/// One value on one line: a scalar as insta writes it, anything else in JSON's flow
/// form (which is YAML too).
fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => yaml_str(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "~".to_owned(),
        other => serde_json::to_string(other).expect("a YAML value serializes as JSON"),
    }
}

/// A YAML string scalar, written the way `cargo insta accept` rewrites it (so accepting
/// does not churn the header): plain when that is unambiguous, else JSON's quoted form,
/// which is valid YAML.
pub(super) fn yaml_str(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '@' | '-' | ' ' | '(' | ')')
        })
        && !s.starts_with([' ', '-', '.', '@'])
        && !s.ends_with(' ')
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~"
        )
        && s.parse::<f64>().is_err();
    if plain {
        s.to_owned()
    } else {
        serde_json::to_string(s).expect("strings serialize")
    }
}

/// The header's volatile metadata. Lives under insta's `info` key, which `cargo insta`
/// keeps when it rewrites a file. Its keys, in the file's order: `device`, `fidelity`,
/// `tool`, then `driver` and `cuda` where there are some, the machine's `cpu`, `isa`,
/// `caches` and `threads` for CPU results, and `sites` when a run captured them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Info {
    /// `cpu`, or the GPU's name.
    pub device: String,
    /// How the figures were measured (`exact` or `phase`).
    pub fidelity: Fidelity,
    /// `vramtest <version>`.
    pub tool: String,
    /// GPU driver version, where there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// CUDA version, where there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// For CPU results: the machine that measured them (CPU, instruction set, caches,
    /// threads), which CPU-only memory depends on. Its keys sit in `info` itself; `None`
    /// unless all four are there.
    #[serde(flatten)]
    pub machine: Option<CpuFingerprint>,
    /// The top call sites of each category at the peak, when the run captured them
    /// (`cargo vramtest show --sites`, a regression): what a later failure compares its
    /// own sites with. Volatile, like the rest of `info`: never compared. Kept as a map
    /// from category to [`Site::to_line`] lines; unknown categories and unreadable
    /// lines are read past.
    #[serde(skip_serializing_if = "Vec::is_empty", with = "sites_by_category")]
    pub sites: Vec<(Category, Vec<Site>)>,
    /// The gradient check's causes when the result was measured
    /// ([`crate::gradient_check`]), one line each
    /// ([`Finding::to_line`](crate::gradient_check::Finding::to_line)), so `show` names
    /// them for any snapshot. Volatile: never compared; unreadable lines are read past.
    #[serde(skip_serializing_if = "Vec::is_empty", with = "finding_lines")]
    pub gradient_check: Vec<crate::gradient_check::Finding>,
}

/// `info.gradient_check`: a list of [`Finding::to_line`](crate::gradient_check::Finding::to_line) lines.
mod finding_lines {
    use crate::gradient_check::Finding;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(found: &[Finding], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(found.iter().map(Finding::to_line))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Finding>, D::Error> {
        let lines = Vec::<serde_yaml_ng::Value>::deserialize(d)?;
        Ok(lines
            .iter()
            .filter_map(|l| Finding::from_line(l.as_str()?))
            .collect())
    }
}

/// `info.sites`: a map from each category to its sites' one-line forms, in order.
mod sites_by_category {
    use super::{Category, Site};
    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub(super) fn serialize<S: Serializer>(
        sites: &[(Category, Vec<Site>)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(sites.len()))?;
        for (category, sites) in sites {
            let lines: Vec<String> = sites.iter().map(Site::to_line).collect();
            map.serialize_entry(category, &lines)?;
        }
        map.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(Category, Vec<Site>)>, D::Error> {
        d.deserialize_map(ByCategory)
    }

    struct ByCategory;

    impl<'de> Visitor<'de> for ByCategory {
        type Value = Vec<(Category, Vec<Site>)>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map from categories to lists of call sites")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                let lines: Vec<String> = map.next_value()?;
                if let Ok(category) = key.parse::<Category>() {
                    let sites = lines.iter().filter_map(|l| Site::from_line(l)).collect();
                    out.push((category, sites));
                }
            }
            Ok(out)
        }
    }
}

/// Where a CPU result was measured. CPU-only memory (gemm's packing buffers) follows
/// the CPU's caches and instruction set; the gated figures do not.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuFingerprint {
    /// The CPU's model name.
    pub cpu: String,
    /// The widest SIMD instruction set: `avx512`, `avx2`, `sse2`, `neon`.
    pub isa: String,
    /// The cache sizes: `L1d 48 KiB, L2 2048 KiB, L3 107520 KiB`.
    pub caches: String,
    /// The CPU threads the measured process ran with.
    pub threads: u32,
}

impl fmt::Display for CpuFingerprint {
    /// `AMD EPYC 7B13 (avx2; L1d 32 KiB, L2 512 KiB, L3 32768 KiB), 2 threads`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}; {}), {} thread{}",
            self.cpu,
            self.isa,
            self.caches,
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_scalars_are_plain_only_when_unambiguous() {
        for (input, expected) in [
            ("tests/vram.rs", "tests/vram.rs"),
            ("vramtest 0.1.0", "vramtest 0.1.0"),
            ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
            ("a, b", "\"a, b\""),
            ("key: value", "\"key: value\""),
            ("true", "\"true\""),
            ("12.8", "\"12.8\""),
            ("", "\"\""),
            ("-x", "\"-x\""),
            ("#comment", "\"#comment\""),
        ] {
            assert_eq!(yaml_str(input), expected, "{input}");
            // And a YAML parser reads it back as the same string.
            let back: String = serde_yaml_ng::from_str(&yaml_str(input)).unwrap();
            assert_eq!(back, input);
        }
    }

    #[test]
    fn an_unreadable_info_is_none_and_the_rest_still_reads() {
        let text = "source: tests/vram.rs\nexpression: t\ninfo:\n  fidelity: sometimes\n";
        let header = Header::from_yaml(text).unwrap();
        assert_eq!(header.expression.as_deref(), Some("t"));
        assert_eq!(header.info, None);
    }

    #[test]
    fn a_partial_machine_is_none_and_unknown_sites_are_read_past() {
        let text = "source: s\ninfo:\n  device: cpu\n  fidelity: exact\n  tool: x\n  cpu: c\n  isa: avx2\n  sites:\n    vram:\n      - \"1 | 1 | a.rs:1 | -\"\n    inputs:\n      - \"2 | 1 | b.rs:2 | -\"\n      - not a site\n";
        let info = Header::from_yaml(text).unwrap().info.unwrap();
        assert_eq!(info.machine, None, "threads and caches are missing");
        assert_eq!(info.sites.len(), 1);
        assert_eq!(info.sites[0].0, Category::Inputs);
        assert_eq!(info.sites[0].1.len(), 1);
        assert_eq!(info.sites[0].1[0].bytes, 2);
    }

    #[test]
    fn a_header_without_source_or_not_yaml_is_an_error_at_its_line() {
        let err = Header::from_yaml("expression: t\n").unwrap_err();
        assert!(err.message.contains("missing field `source`"), "{err}");
        let err = Header::from_yaml("source: s\nexpression: [1]\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(err.message.contains("expression"), "{err}");
        assert!(!err.message.contains("at line"), "{err}");
        let err = Header::from_yaml("source: s\nexpression: \"t\ninfo: x\n").unwrap_err();
        assert!(!err.message.contains("at line"), "{err}");
        assert_eq!(
            without_marks("a at line 5 column 12, b at line 1 column 2 at line x"),
            "a, b at line x"
        );
    }
}
