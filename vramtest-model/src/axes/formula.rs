//! Monomials of the axes, terms and formulas: a figure's bytes as a function of the
//! axes, with exact rational coefficients, and how a snapshot stores them.

use super::grid::{AxesError, Point, is_name};
use crate::bytes::HumanBytes;
use num_bigint::BigInt;
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A product of axes, each to a power 1 or 2 (`batch·seq²`); the empty product is the
/// constant 1. Written and stored as its factors joined by `·`, a square as `²`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Monomial {
    powers: Vec<(String, u8)>,
}

impl Monomial {
    /// The constant monomial 1.
    pub fn constant() -> Monomial {
        Monomial::default()
    }

    /// A monomial of these axes and powers (powers of 0 are left out).
    pub fn new<S: Into<String>>(powers: impl IntoIterator<Item = (S, u8)>) -> Monomial {
        Monomial {
            powers: powers
                .into_iter()
                .filter(|(_, p)| *p > 0)
                .map(|(s, p)| (s.into(), p))
                .collect(),
        }
    }

    /// Each axis and its power, in order (none for the constant).
    pub fn powers(&self) -> &[(String, u8)] {
        &self.powers
    }

    /// The sum of the powers.
    pub fn degree(&self) -> u32 {
        self.powers.iter().map(|(_, p)| u32::from(*p)).sum()
    }

    /// The monomial's value at `point`.
    pub fn eval(&self, point: &Point) -> Result<BigInt, AxesError> {
        // In u128 while it fits (every grid's monomials do; big integers cost an
        // allocation a product), in big integers past that.
        let mut small = 1u128;
        let mut big: Option<BigInt> = None;
        for (axis, power) in &self.powers {
            let v = point.get(axis).ok_or_else(|| AxesError::MissingAxis {
                axis: axis.clone(),
                known: self.names(),
            })?;
            let power = u32::from(*power);
            let product = u128::from(*v)
                .checked_pow(power)
                .and_then(|f| f.checked_mul(small));
            match (&mut big, product) {
                (None, Some(p)) => small = p,
                (None, None) => big = Some(BigInt::from(small) * BigInt::from(*v).pow(power)),
                (Some(b), _) => *b *= BigInt::from(*v).pow(power),
            }
        }
        Ok(big.unwrap_or_else(|| BigInt::from(small)))
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self.powers.iter().map(|(a, _)| a.as_str()).collect();
        names.join(", ")
    }
}

impl fmt::Display for Monomial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.powers.is_empty() {
            return f.write_str("1");
        }
        for (i, (axis, power)) in self.powers.iter().enumerate() {
            if i > 0 {
                f.write_str("·")?;
            }
            f.write_str(axis)?;
            if *power == 2 {
                f.write_str("²")?;
            }
        }
        Ok(())
    }
}

impl FromStr for Monomial {
    type Err = AxesError;

    fn from_str(text: &str) -> Result<Monomial, AxesError> {
        let bad = |reason| AxesError::BadMonomial {
            text: text.to_owned(),
            reason,
        };
        if text == "1" {
            return Ok(Monomial::constant());
        }
        let mut powers: Vec<(String, u8)> = Vec::new();
        for factor in text.split('·') {
            let (name, power) = match factor.strip_suffix('²') {
                Some(name) => (name, 2),
                None => (factor, 1),
            };
            if !is_name(name) {
                return Err(bad("a factor is not an axis name"));
            }
            if powers.iter().any(|(a, _)| a == name) {
                return Err(bad("an axis appears twice"));
            }
            powers.push((name.to_owned(), power));
        }
        Ok(Monomial { powers })
    }
}

impl Serialize for Monomial {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Monomial {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Monomial, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

mod rational_text {
    //! A big rational stored as the text `n` or `n/d`.
    use super::{AxesError, BigRational};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(r: &BigRational, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(r)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BigRational, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|_| serde::de::Error::custom(AxesError::BadCoefficient { text }))
    }
}

/// `coefficient × monomial`, the coefficient in bytes (an exact rational).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Term {
    /// Bytes per unit of the monomial.
    #[serde(with = "rational_text")]
    pub coefficient: BigRational,
    /// The product of axes it multiplies.
    pub monomial: Monomial,
}

/// A sum of terms: a figure's bytes as a function of the axes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Formula {
    /// The terms, constant first, then by degree (highest first).
    pub terms: Vec<Term>,
}

impl Formula {
    /// The exact value at `point`.
    pub fn eval(&self, point: &Point) -> Result<BigRational, AxesError> {
        let (numerator, denominator) = self.fraction(point)?;
        Ok(BigRational::new(numerator, denominator))
    }

    /// The value at `point` as an unreduced fraction, its denominator positive: summed
    /// over one running denominator, since a fit's coefficients mostly share theirs and
    /// a reduction per term is most of the cost.
    fn fraction(&self, point: &Point) -> Result<(BigInt, BigInt), AxesError> {
        let (mut numerator, mut denominator) = (BigInt::zero(), BigInt::one());
        for term in &self.terms {
            let (n, d) = (term.coefficient.numer(), term.coefficient.denom());
            let value = n * term.monomial.eval(point)?;
            if *d == denominator {
                numerator += value;
            } else {
                numerator = numerator * d + value * &denominator;
                denominator *= d;
            }
        }
        Ok((numerator, denominator))
    }

    /// The value at `point` rounded up to whole bytes; 0 where the formula is negative.
    pub fn bytes(&self, point: &Point) -> Result<u64, AxesError> {
        // Rounded up without reducing the fraction (a gcd, most of a prediction's
        // cost unoptimized): ⌈n/d⌉ = −⌊−n/d⌋ for d > 0.
        let (numerator, denominator) = self.fraction(point)?;
        let up = -(-numerator).div_floor(&denominator);
        if up.is_negative() {
            return Ok(0);
        }
        up.to_u64().ok_or_else(|| AxesError::TooLarge {
            bytes: up.to_string(),
        })
    }
}

/// A coefficient in people's units: whole bytes via [`HumanBytes`], a fraction of a
/// byte with two decimals.
fn human_coefficient(c: &BigRational) -> String {
    let a = c.abs();
    if a.is_integer() || a >= BigRational::from_integer(1024.into()) {
        return match a.round().to_integer().to_u64() {
            Some(n) => HumanBytes(n).to_string(),
            None => format!("{} B", a.round()),
        };
    }
    let hundredths = (a * BigRational::from_integer(100.into()))
        .round()
        .to_integer();
    let (units, cents) = (&hundredths / 100, &hundredths % 100);
    format!("{units}.{cents:0>2} B")
}

impl fmt::Display for Formula {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0 B");
        }
        for (i, term) in self.terms.iter().enumerate() {
            let negative = term.coefficient.is_negative();
            match (i, negative) {
                (0, true) => f.write_str("-")?,
                (0, false) => {}
                (_, true) => f.write_str(" - ")?,
                (_, false) => f.write_str(" + ")?,
            }
            f.write_str(&human_coefficient(&term.coefficient))?;
            if term.monomial.degree() > 0 {
                write!(f, " × {}", term.monomial)?;
            }
        }
        Ok(())
    }
}
