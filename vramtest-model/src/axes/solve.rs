//! Exact least squares on big integers: the normal equations, their fraction-free
//! (Bareiss) Gauss–Jordan elimination, and a point's fitted value and leverage, from
//! which its leave-one-out miss comes (`residual / (1 − leverage)`).

use super::border::Eliminated;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, ToPrimitive, Zero};

pub(super) fn dot(a: &[BigInt], b: &[BigInt]) -> BigInt {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// [`dot`] in machine words, `None` when it overflows 128 bits.
pub(super) fn small_dot(a: &[u64], b: &[u64]) -> Option<u128> {
    let mut sum = 0u128;
    for i in 0..a.len().min(b.len()) {
        sum = sum.checked_add(u128::from(a[i]) * u128::from(b[i]))?;
    }
    Some(sum)
}

/// The normal equations of `k` columns, augmented for [`gauss_jordan`]: row `r` holds
/// `XᵀX[r][..]`, then row `r` of the identity (which becomes the inverse), then
/// `Xᵀy[r]`.
pub(super) fn normal_equations(
    k: usize,
    gram: impl Fn(usize, usize) -> BigInt,
    xty: impl Fn(usize) -> BigInt,
) -> Vec<Vec<BigInt>> {
    (0..k)
        .map(|r| {
            let mut row: Vec<BigInt> = (0..k).map(|c| gram(r, c)).collect();
            row.extend((0..k).map(|c| BigInt::from(u8::from(c == r))));
            row.push(xty(r));
            row
        })
        .collect()
}

/// Fraction-free (Bareiss) Gauss–Jordan elimination of the `k` first columns of `m`
/// (a symmetric positive semi-definite block, so no pivoting: a zero pivot means a
/// singular block). Returns the last pivot `D`; the block becomes `D·I` and every
/// other column `D·` its solution. `None` when singular.
pub(super) fn gauss_jordan(m: &mut [Vec<BigInt>], k: usize) -> Option<BigInt> {
    let mut previous = BigInt::one();
    for p in 0..k {
        if m[p][p].is_zero() {
            return None;
        }
        let pivot_row = m[p].clone();
        let pivot = &pivot_row[p];
        for (r, row) in m.iter_mut().enumerate() {
            if r == p {
                continue;
            }
            let factor = std::mem::take(&mut row[p]);
            // Most entries off the pivot's row and column are 0 on both sides (the
            // eliminated columns, the identity's columns not yet reached): they stay 0,
            // and a product with a 0 is not computed.
            for (c, (x, q)) in row.iter_mut().zip(&pivot_row).enumerate() {
                let keep = !x.is_zero();
                let subtract = !(factor.is_zero() || q.is_zero());
                *x = match (keep, subtract) {
                    _ if c == p => continue,
                    (false, false) => continue,
                    (true, false) => pivot * &*x / &previous,
                    (false, true) => -(&factor * q) / &previous,
                    (true, true) => (pivot * &*x - &factor * q) / &previous,
                };
            }
        }
        previous = pivot.clone();
    }
    Some(previous)
}

/// The reduced normal equations of `k` columns after [`gauss_jordan`] (`m` was
/// `[XᵀX | I | Xᵀy]`), `None` when singular.
pub(super) fn eliminated_from_scratch(mut m: Vec<Vec<BigInt>>, k: usize) -> Option<Eliminated> {
    let det = gauss_jordan(&mut m, k)?;
    Some(Eliminated {
        det,
        adjugate: m.iter().map(|row| row[k..2 * k].to_vec()).collect(),
        solution: m
            .into_iter()
            .map(|mut row| row.swap_remove(2 * k))
            .collect(),
    })
}

/// A point's value in a column: a machine word where every value of the column fits
/// one, so that a product with it is a word's multiply-add, not a product of two big
/// integers.
#[derive(Clone, Copy)]
pub(super) enum ColumnValue<'a> {
    Small(u64),
    Big(&'a BigInt),
}

impl ColumnValue<'_> {
    fn times(self, b: &BigInt) -> BigInt {
        match self {
            ColumnValue::Small(v) => b * v,
            ColumnValue::Big(v) => v * b,
        }
    }

    fn is_zero(self) -> bool {
        match self {
            ColumnValue::Small(v) => v == 0,
            ColumnValue::Big(v) => v.is_zero(),
        }
    }
}

/// `column` in machine words, when every value fits one.
pub(super) fn small(column: &[BigInt]) -> Option<Vec<u64>> {
    column.iter().map(ToPrimitive::to_u64).collect()
}

/// Point `i`'s values in `columns` (`small` their machine-word copies).
pub(super) fn entries<'a>(
    columns: &[&'a Vec<BigInt>],
    small: &[Option<&Vec<u64>>],
    i: usize,
) -> Vec<ColumnValue<'a>> {
    (columns.iter().zip(small))
        .map(|(c, s)| match s {
            Some(s) => ColumnValue::Small(s[i]),
            None => ColumnValue::Big(&c[i]),
        })
        .collect()
}

/// The fitted value and leverage, both scaled by the determinant, of the point whose
/// values are `x`, from the reduced normal equations `e`: what a held-out refit of that
/// point is computed from.
pub(super) fn fitted_and_leverage(x: &[ColumnValue], e: &Eliminated) -> (BigInt, BigInt) {
    (fitted(x, e), leverage(x, e))
}

/// The fitted value, scaled by the determinant (see [`fitted_and_leverage`]).
pub(super) fn fitted(x: &[ColumnValue], e: &Eliminated) -> BigInt {
    x.iter().zip(&e.solution).map(|(v, b)| v.times(b)).sum()
}

/// The leverage, scaled by the determinant (see [`fitted_and_leverage`]).
///
/// `xᵀ·adj·x` over the point's nonzero entries `x` (a counting axis's offsets are 0 at
/// most points), each product off the diagonal taken once and doubled: `adj` is
/// symmetric.
pub(super) fn leverage(x: &[ColumnValue], e: &Eliminated) -> BigInt {
    let x: Vec<(usize, ColumnValue)> = (x.iter().copied().enumerate())
        .filter(|(_, v)| !v.is_zero())
        .collect();
    let mut sum = BigInt::zero();
    for (at, &(j, xj)) in x.iter().enumerate() {
        let row = &e.adjugate[j];
        let off: BigInt = x[at + 1..].iter().map(|&(l, xl)| xl.times(&row[l])).sum();
        sum += xj.times(&(xj.times(&row[j]) + (off << 1)));
    }
    sum
}

/// Each point's signed leave-one-out miss in bytes under the least-squares fit of
/// `columns` to `y`; `None` when the normal equations are singular or a point has
/// leverage 1 (its held-out refit is undetermined).
pub(super) fn held_out_misses(columns: Vec<Vec<BigInt>>, y: &[BigInt]) -> Option<Vec<BigRational>> {
    let k = columns.len();
    let m = normal_equations(
        k,
        |r, c| dot(&columns[r], &columns[c]),
        |r| dot(&columns[r], y),
    );
    let e = eliminated_from_scratch(m, k)?;
    let d = &e.det;
    let small: Vec<Option<Vec<u64>>> = columns.iter().map(|c| small(c)).collect();
    let small: Vec<Option<&Vec<u64>>> = small.iter().map(Option::as_ref).collect();
    let columns: Vec<&Vec<BigInt>> = columns.iter().collect();
    (0..y.len())
        .map(|i| {
            let (fitted, leverage) = fitted_and_leverage(&entries(&columns, &small, i), &e);
            let denominator = d - leverage;
            (!denominator.is_zero()).then(|| BigRational::new(d * &y[i] - fitted, denominator))
        })
        .collect()
}
