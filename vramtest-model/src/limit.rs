//! How much a figure may grow before a test fails: a relative and an absolute slack
//! ([`Limit`]), and the names a limit is set under ([`LimitKey`]).

use crate::bytes::{HumanBytes, parse_bytes};
use crate::category::Category;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Allowed growth of a byte figure. Written `+2% | 1MiB`: a change fails only when it
/// exceeds *both* slacks, i.e. when it grows by more than `max(2% of old, 1 MiB)`. Small
/// figures are protected from percentage noise by the absolute part, large ones from
/// allocator noise by the relative part. `0` allows no growth at all; `allow` allows any.
///
/// The `leak` limit is a ceiling instead: the bytes a loop may keep per iteration, with
/// the percentage taken of the test's peak (see [`Limit::LEAK`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(into = "String")]
pub struct Limit {
    /// Allowed relative growth, in percent of the old value.
    pub percent: f64,
    /// Allowed absolute growth, in bytes.
    pub bytes: u64,
}

impl Limit {
    /// No growth allowed.
    pub const EXACT: Limit = Limit {
        percent: 0.0,
        bytes: 0,
    };

    /// The default for every category and for the peak: `+1%`, with no absolute
    /// floor. The figures are deterministic (the same bytes on every run and every
    /// machine: repeated runs of the fixtures differ by 0 B), so a floor would only
    /// hide real changes: the floor of 64 KiB this default had let a small model's
    /// optimizer state grow by 97.6% unnoticed. Without one, a category that grows by
    /// a quarter fails whatever its size.
    pub const DEFAULT: Limit = Limit {
        percent: 1.0,
        bytes: 0,
    };

    /// The default for `untracked` (driver context, library handles): `+10% | 16MiB`.
    pub const UNTRACKED: Limit = Limit {
        percent: 10.0,
        bytes: 16 * 1024 * 1024,
    };

    /// The default for a CUDA pool's reserved bytes (`reserved`): `+5% | 8MiB`. Wider
    /// than a category's, as the pool reserves in granules (2 MiB) and how much it
    /// keeps depends on the order of frees and synchronizes, not only on the program's
    /// tensors; narrower than `untracked`'s, which holds other processes too.
    pub const RESERVED: Limit = Limit {
        percent: 5.0,
        bytes: 8 * 1024 * 1024,
    };

    /// The default for CPU-only memory (`cpu_only`) on the machine its snapshot was
    /// recorded on: `+50% | 4MiB`. CPU-only memory is chiefly gemm's packing slabs, one
    /// per rayon thread that ran a product, each sized from the L2 cache (1-2 MiB on
    /// most CPUs): on the same CPU with the same threads they repeat, but a thread that
    /// happened to steal no product keeps none. The floor covers two such slabs, the
    /// share a few more on a many-core machine; a tensor hidden in 128-byte-aligned
    /// blocks that doubles, or grows 64-fold, does not fit in it.
    pub const CPU_ONLY: Limit = Limit {
        percent: 50.0,
        bytes: 4 * 1024 * 1024,
    };

    /// The default leak ceiling: a loop may keep at most `max(0.1% of the peak, 64 KiB)`
    /// per iteration, whatever the snapshot holds.
    pub const LEAK: Limit = Limit {
        percent: 0.1,
        bytes: 64 * 1024,
    };

    /// Any change is allowed (written `allow`).
    pub const ALLOW: Limit = Limit {
        percent: f64::INFINITY,
        bytes: u64::MAX,
    };

    /// Whether this is [`Limit::ALLOW`].
    pub fn is_allow(&self) -> bool {
        self.bytes == u64::MAX
    }

    /// The largest change from `old` that stays within this limit, in bytes.
    pub fn slack(&self, old: u64) -> u64 {
        if self.is_allow() {
            return u64::MAX;
        }
        let relative = (old as f64 * self.percent / 100.0).floor() as u64;
        relative.max(self.bytes)
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_allow() {
            return f.write_str("allow");
        }
        match (self.percent != 0.0, self.bytes != 0) {
            (true, true) => write!(f, "+{}% | {}", self.percent, HumanBytes(self.bytes)),
            (true, false) => write!(f, "+{}%", self.percent),
            (false, true) => write!(f, "+{}", HumanBytes(self.bytes)),
            (false, false) => f.write_str("0 (exact)"),
        }
    }
}

/// A limit that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid limit `{input}`: {reason} (hint: write `+2% | 1MiB`, `+5%`, `256KiB`, `0` or `allow`)"
)]
pub struct ParseLimitError {
    /// The text that was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl FromStr for Limit {
    type Err = ParseLimitError;
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| ParseLimitError {
            input: input.to_owned(),
            reason,
        };
        if input.trim() == "allow" {
            return Ok(Limit::ALLOW);
        }
        let mut limit = Limit::EXACT;
        let (mut saw_percent, mut saw_bytes) = (false, false);
        for part in input.split('|') {
            let part = part.trim();
            let part = part.strip_prefix('+').unwrap_or(part).trim();
            if part.is_empty() {
                return Err(err("empty part".into()));
            }
            if let Some(pct) = part.strip_suffix('%') {
                if saw_percent {
                    return Err(err("two percentages".into()));
                }
                saw_percent = true;
                limit.percent = pct
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|p| p.is_finite() && *p >= 0.0)
                    .ok_or_else(|| err(format!("`{pct}%` is not a percentage")))?;
            } else {
                if saw_bytes {
                    return Err(err("two byte sizes".into()));
                }
                saw_bytes = true;
                limit.bytes = parse_bytes(part).map_err(|e| err(e.reason.to_owned()))?;
            }
        }
        Ok(limit)
    }
}

/// Reads a limit as written (`"+2% | 1MiB"`), or the bare number `0` (no growth): the
/// one reading of a limit, for the settings, a snapshot and the attribute alike.
impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Limit;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a limit like \"+2% | 1MiB\", \"+5%\", \"allow\" or 0")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Limit, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Limit, E> {
                match n {
                    0 => Ok(Limit::EXACT),
                    n => Err(E::invalid_value(serde::de::Unexpected::Unsigned(n), &self)),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Limit, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(n), &self)),
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl From<Limit> for String {
    fn from(l: Limit) -> String {
        if l.is_allow() {
            return "allow".into();
        }
        match (l.percent != 0.0, l.bytes != 0) {
            (false, false) => "0".into(),
            (true, false) => format!("+{}%", l.percent),
            (false, true) => format!("{}", l.bytes),
            (true, true) => format!("+{}% | {}", l.percent, l.bytes),
        }
    }
}

/// The name a limit is set under: a key of `limits` in the `vramtest` metadata, or a
/// `#[vramtest]` option. [`Policy::set`](crate::Policy::set) says what each one sets.
/// Ordered as [`LimitKey::ALL`] lists them: `tolerance` first, so a map of limits by key
/// applies it before the keys that refine it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LimitKey {
    /// `tolerance`: the peak and every category but `untracked`.
    Tolerance,
    /// `peak`: the total peak.
    Peak,
    /// `reserved`: a CUDA pool's reserved peak.
    Reserved,
    /// `leak`: the leak ceiling.
    Leak,
    /// `cpu_only`: CPU-only memory (not compared without it).
    CpuOnly,
    /// A category's name (`activations`): that category's own peak.
    Category(Category),
}

impl LimitKey {
    /// Every key, in the order messages list them: the keys of their own, then every
    /// category under its own name, as [`Category::ALL`] lists them.
    pub const ALL: [LimitKey; 5 + Category::ALL.len()] = {
        const OWN: [LimitKey; 5] = [
            LimitKey::Tolerance,
            LimitKey::Peak,
            LimitKey::Reserved,
            LimitKey::Leak,
            LimitKey::CpuOnly,
        ];
        let mut all = [LimitKey::Tolerance; 5 + Category::ALL.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = if i < OWN.len() {
                OWN[i]
            } else {
                LimitKey::Category(Category::ALL[i - OWN.len()])
            };
            i += 1;
        }
        all
    };

    /// The key as written: `tolerance`, `peak`, `reserved`, `leak`, `cpu_only` or a
    /// category's name.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKey::Tolerance => "tolerance",
            LimitKey::Peak => "peak",
            LimitKey::Reserved => "reserved",
            LimitKey::Leak => "leak",
            LimitKey::CpuOnly => "cpu_only",
            LimitKey::Category(c) => c.as_str(),
        }
    }

    /// Every key's name, comma-separated, for messages that list the valid ones.
    pub fn names() -> String {
        LimitKey::ALL.map(LimitKey::as_str).join(", ")
    }
}

impl fmt::Display for LimitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a [`LimitKey`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown limit `{0}` (expected one of: {names})", names = LimitKey::names())]
pub struct UnknownLimitKey(pub String);

impl FromStr for LimitKey {
    type Err = UnknownLimitKey;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LimitKey::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownLimitKey(s.to_owned()))
    }
}

impl Serialize for LimitKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for LimitKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("+2% | 1MiB", 2.0, 1 << 20)]
    #[test_case("2%|1MiB", 2.0, 1 << 20)]
    #[test_case("1MiB | +2%", 2.0, 1 << 20)]
    #[test_case("+5%", 5.0, 0)]
    #[test_case("256KiB", 0.0, 256 * 1024)]
    #[test_case("0", 0.0, 0)]
    #[test_case("+0.5% | 4096", 0.5, 4096)]
    #[test_case("allow", f64::INFINITY, u64::MAX)]
    #[test_case(" allow ", f64::INFINITY, u64::MAX)]
    fn parses(input: &str, percent: f64, bytes: u64) {
        assert_eq!(input.parse::<Limit>().unwrap(), Limit { percent, bytes });
    }

    #[test_case(""; "empty")]
    #[test_case("+2% |"; "trailing bar")]
    #[test_case("2% | 3%"; "two percentages")]
    #[test_case("1MiB | 2MiB"; "two sizes")]
    #[test_case("-3%"; "negative")]
    #[test_case("lots"; "words")]
    #[test_case("allow | 1MiB"; "allow with a size")]
    #[test_case("Allow"; "allow is lower case")]
    fn rejects(input: &str) {
        let e = input.parse::<Limit>().unwrap_err();
        assert!(e.to_string().contains("hint:"), "{e}");
    }

    #[test]
    fn slack_is_the_larger_of_the_two() {
        let l: Limit = "+2% | 1MiB".parse().unwrap();
        assert_eq!(l.slack(0), 1 << 20);
        assert_eq!(l.slack(100 << 20), 2 << 20);
        assert_eq!(Limit::EXACT.slack(1 << 30), 0);
        assert_eq!(Limit::ALLOW.slack(0), u64::MAX);
        assert_eq!(Limit::ALLOW.slack(1 << 40), u64::MAX);
        // The leak ceiling: 64 KiB up to a 64 MiB peak, then 0.1% of it.
        assert_eq!(Limit::LEAK.slack(1 << 20), 64 * 1024);
        assert_eq!(Limit::LEAK.slack(1_000_000_000), 1_000_000);
    }

    #[test]
    fn string_form_round_trips() {
        for s in ["+2% | 1MiB", "+5%", "256KiB", "0", "allow"] {
            let l: Limit = s.parse().unwrap();
            let back: Limit = String::from(l).parse().unwrap();
            assert_eq!(l, back);
        }
    }

    /// Deserialized as the settings and a snapshot write a limit: its text, or `0`.
    #[test_case(serde_json::json!("+2% | 1MiB"), Ok(Limit { percent: 2.0, bytes: 1 << 20 }))]
    #[test_case(serde_json::json!("allow"), Ok(Limit::ALLOW))]
    #[test_case(serde_json::json!(0), Ok(Limit::EXACT); "a bare zero")]
    #[test_case(serde_json::json!(3), Err("invalid value: integer `3`"); "another number")]
    #[test_case(serde_json::json!(-1), Err("invalid value: integer `-1`"); "a negative number")]
    #[test_case(serde_json::json!("-3%"), Err("invalid limit `-3%`"); "a bad text")]
    #[test_case(serde_json::json!(true), Err("invalid type: boolean `true`"); "a boolean")]
    fn deserializes(value: serde_json::Value, expected: Result<Limit, &str>) {
        let got = serde_json::from_value::<Limit>(value).map_err(|e| e.to_string());
        match (got, expected) {
            (Ok(got), Ok(expected)) => assert_eq!(got, expected),
            (Err(got), Err(needle)) => assert!(got.starts_with(needle), "{got}"),
            (got, expected) => panic!("{got:?} against {expected:?}"),
        }
    }

    #[test]
    fn a_limit_key_deserializes_from_its_name_only() {
        for key in LimitKey::ALL {
            let json = serde_json::to_value(key).unwrap();
            assert_eq!(json, serde_json::json!(key.as_str()));
            assert_eq!(serde_json::from_value::<LimitKey>(json).unwrap(), key);
        }
        let e = serde_json::from_value::<LimitKey>(serde_json::json!("activation")).unwrap_err();
        assert!(
            e.to_string().starts_with("unknown limit `activation`"),
            "{e}"
        );
    }

    #[test]
    fn every_limit_key_reads_back_its_name() {
        for key in LimitKey::ALL {
            assert_eq!(key.to_string().parse::<LimitKey>(), Ok(key));
        }
        // Every category is a key, under its own name.
        for c in Category::ALL {
            assert_eq!(c.as_str().parse::<LimitKey>(), Ok(LimitKey::Category(c)));
        }
        let mut sorted = LimitKey::ALL;
        sorted.sort();
        assert_eq!(sorted, LimitKey::ALL, "ALL is in the keys' order");
    }

    #[test_case("activation"; "singular")]
    #[test_case("Peak"; "capitalised")]
    #[test_case("budget"; "a setting, not a limit")]
    #[test_case(""; "empty")]
    fn an_unknown_limit_key_is_named_with_the_valid_ones(key: &str) {
        let e = key.parse::<LimitKey>().unwrap_err();
        assert_eq!(e, UnknownLimitKey(key.to_owned()));
        let message = e.to_string();
        assert!(
            message.starts_with(&format!("unknown limit `{key}` (expected one of: ")),
            "{message}"
        );
        for valid in LimitKey::ALL {
            assert!(message.contains(valid.as_str()), "{message}");
        }
    }
}
