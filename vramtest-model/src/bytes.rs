//! Byte counts for people: `1.5 MiB` in messages, `64KiB` in configuration.

use std::fmt;

/// A byte count that displays human-readably (`512 B`, `1.50 MiB`, `22.00 GiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanBytes(pub u64);

impl fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
        let n = self.0;
        if n < 1024 {
            return write!(f, "{n} B");
        }
        let mut value = n as f64 / 1024.0;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        write!(f, "{value:.2} {}", UNITS[unit])
    }
}

/// An exact count with its thousands grouped (`1,048,576`); honours a width
/// (`{:>15}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grouped(pub u64);

impl fmt::Display for Grouped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.0.to_string();
        let mut out = String::new();
        for (i, d) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(d);
        }
        f.pad(&out)
    }
}

/// A signed byte delta that displays with its sign (`+1.00 MiB`, `-512 B`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDelta(pub i128);

impl fmt::Display for HumanDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { '-' } else { '+' };
        write!(f, "{sign}{}", HumanBytes(self.0.unsigned_abs() as u64))
    }
}

/// A byte size that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid byte size `{input}`: {reason} (hint: write a number with an optional unit, like `64KiB`, `1.5MiB`, `22GiB` or `4096`)"
)]
pub struct ParseBytesError {
    /// The text that was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Parses `4096`, `64KiB`, `1.5 MiB`, `22GiB`, `10MB` (decimal units are accepted too).
pub fn parse_bytes(input: &str) -> Result<u64, ParseBytesError> {
    let err = |reason| ParseBytesError {
        input: input.to_owned(),
        reason,
    };
    let s = input.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    if number.is_empty() {
        return Err(err("no number"));
    }
    let value: f64 = number.parse().map_err(|_| err("not a number"))?;
    let multiplier: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return Err(err("unknown unit")),
    };
    let bytes = value * multiplier;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(err("too large"));
    }
    if bytes.fract() != 0.0 && multiplier == 1.0 {
        return Err(err("a byte count must be whole"));
    }
    Ok(bytes.round() as u64)
}

/// A byte size as settings write it: a count (`4096`) or a number with a unit
/// (`"64KiB"`, `"22GiB"`; see [`parse_bytes`]). Written back as a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl From<ByteSize> for u64 {
    fn from(size: ByteSize) -> u64 {
        size.0
    }
}

impl<'de> serde::Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a byte size like \"22GiB\" or a byte count like 4096")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ByteSize, E> {
                parse_bytes(s).map(ByteSize).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<ByteSize, E> {
                u64::try_from(n)
                    .map(ByteSize)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(n), &self))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case(0, "0")]
    #[test_case(999, "999")]
    #[test_case(1000, "1,000")]
    #[test_case(1_048_576, "1,048,576")]
    #[test_case(u64::MAX, "18,446,744,073,709,551,615")]
    fn grouped(n: u64, shown: &str) {
        assert_eq!(Grouped(n).to_string(), shown);
    }

    #[test]
    fn grouped_honours_a_width() {
        assert_eq!(format!("[{:>9}]", Grouped(1_048_576)), "[1,048,576]");
        assert_eq!(format!("[{:>12}]", Grouped(1_048_576)), "[   1,048,576]");
    }

    #[test_case(0, "0 B")]
    #[test_case(1023, "1023 B")]
    #[test_case(1024, "1.00 KiB")]
    #[test_case(1536 * 1024, "1.50 MiB")]
    #[test_case(205_520_896, "196.00 MiB")]
    #[test_case(22 * 1024 * 1024 * 1024, "22.00 GiB")]
    fn formats(n: u64, expected: &str) {
        assert_eq!(HumanBytes(n).to_string(), expected);
    }

    #[test]
    fn deltas_carry_their_sign() {
        assert_eq!(HumanDelta(-512).to_string(), "-512 B");
        assert_eq!(HumanDelta(1 << 20).to_string(), "+1.00 MiB");
    }

    #[test_case("4096", 4096)]
    #[test_case("64KiB", 65536)]
    #[test_case(" 1.5 MiB ", 1_572_864)]
    #[test_case("22GiB", 22 * (1 << 30))]
    #[test_case("10MB", 10_000_000)]
    #[test_case("0", 0)]
    fn parses(input: &str, expected: u64) {
        assert_eq!(parse_bytes(input).unwrap(), expected);
    }

    #[test_case(serde_json::json!("64KiB"), Ok(64 * 1024))]
    #[test_case(serde_json::json!(4096), Ok(4096))]
    #[test_case(serde_json::json!(-1), Err("invalid value: integer `-1`"); "negative")]
    #[test_case(serde_json::json!(1.5), Err("invalid type: floating point `1.5`"); "a fraction")]
    #[test_case(serde_json::json!("lots"), Err("invalid byte size `lots`"); "not a size")]
    fn byte_sizes_deserialize(value: serde_json::Value, expected: Result<u64, &str>) {
        let got = serde_json::from_value::<ByteSize>(value).map_err(|e| e.to_string());
        match (got, expected) {
            (Ok(got), Ok(expected)) => assert_eq!(got, ByteSize(expected)),
            (Err(got), Err(needle)) => assert!(got.starts_with(needle), "{got}"),
            (got, expected) => panic!("{got:?} against {expected:?}"),
        }
    }

    #[test_case("", "no number")]
    #[test_case("MiB", "no number")]
    #[test_case("12 parsecs", "unknown unit")]
    #[test_case("1.2.3KiB", "not a number")]
    #[test_case("1.5", "a byte count must be whole")]
    #[test_case("99999999999TiB", "too large")]
    fn rejects(input: &str, reason: &str) {
        let e = parse_bytes(input).unwrap_err();
        assert_eq!(e.reason, reason);
        assert!(e.to_string().contains(&format!("`{input}`")));
        assert!(e.to_string().contains("hint:"));
    }
}
