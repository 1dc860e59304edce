//! Axis ticks: round steps in binary byte units (`0`, `64 MiB`, `128 MiB`) and in counts.

/// Binary units, smallest first.
const UNITS: [(u64, &str); 5] = [
    (1, "B"),
    (1 << 10, "KiB"),
    (1 << 20, "MiB"),
    (1 << 30, "GiB"),
    (1 << 40, "TiB"),
];

/// A byte axis from zero: its top, the unit its labels use, and the ticks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ByteAxis {
    /// The axis ends here (bytes); at least the largest value shown.
    pub top: u64,
    /// Bytes per label unit and the unit's name.
    pub unit: (u64, &'static str),
    /// `(bytes, label)` from zero to `top`.
    pub ticks: Vec<(u64, String)>,
}

/// The largest binary unit not above `max` (`B` for anything under 1 KiB).
pub(crate) fn unit_for(max: u64) -> (u64, &'static str) {
    UNITS
        .into_iter()
        .rev()
        .find(|&(size, _)| max >= size)
        .unwrap_or(UNITS[0])
}

/// A round step (1, 2 or 5 times a power of ten) that cuts `span` into at most
/// about `intervals` pieces.
pub(crate) fn nice_step(span: f64, intervals: usize) -> f64 {
    let raw = span / intervals.max(1) as f64;
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// Digits after the decimal point that a step of `step` needs.
pub(crate) fn decimals(step: f64) -> usize {
    if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    }
}

/// Ticks for bytes from zero to at least `max`, about five intervals, in one unit.
pub(crate) fn byte_axis(max: u64) -> ByteAxis {
    let unit = unit_for(max);
    let in_units = max as f64 / unit.0 as f64;
    let mut step = nice_step(in_units, 5);
    if unit.0 == 1 {
        step = step.max(1.0);
    }
    let intervals = ((in_units / step).ceil() as u64).max(1);
    let places = decimals(step);
    let ticks = (0..=intervals)
        .map(|i| {
            let value = i as f64 * step;
            let bytes = (value * unit.0 as f64).round() as u64;
            let label = if i == 0 {
                "0".to_owned()
            } else {
                format!("{value:.places$} {}", unit.1)
            };
            (bytes, label)
        })
        .collect::<Vec<_>>();
    let top = ticks.last().map_or(1, |t| t.0).max(1);
    ByteAxis { top, unit, ticks }
}

/// Round integer ticks inside `[start, end]`, about `intervals` of them.
pub(crate) fn count_ticks(start: u64, end: u64, intervals: usize) -> Vec<u64> {
    let step = nice_step(end.saturating_sub(start) as f64, intervals).max(1.0) as u64;
    let first = start.div_ceil(step) * step;
    (0..)
        .map(|i| first + i * step)
        .take_while(|&t| t <= end)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    #[test_case(0, 1, &["0", "1 B"])]
    #[test_case(700, 800, &["0", "200 B", "400 B", "600 B", "800 B"])]
    #[test_case(1536, 1536, &["0", "0.5 KiB", "1.0 KiB", "1.5 KiB"])]
    #[test_case(3 * KIB, 3 * KIB, &["0", "1 KiB", "2 KiB", "3 KiB"])]
    #[test_case(196 * MIB, 200 * MIB, &["0", "50 MiB", "100 MiB", "150 MiB", "200 MiB"])]
    #[test_case(22 * GIB, 25 * GIB, &["0", "5 GiB", "10 GiB", "15 GiB", "20 GiB", "25 GiB"])]
    #[test_case(MIB + 1, 3 * MIB / 2, &["0", "0.5 MiB", "1.0 MiB", "1.5 MiB"])]
    fn byte_ticks_are_round_in_binary_units(max: u64, top: u64, labels: &[&str]) {
        let axis = byte_axis(max);
        assert_eq!(axis.top, top);
        assert!(axis.top >= max);
        let got: Vec<&str> = axis.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(got, labels);
    }

    #[test]
    fn byte_ticks_step_evenly_and_cover_the_maximum() {
        for max in [1, 3, 999, 1024, 5000, 123_456_789, 40 * GIB + 7] {
            let axis = byte_axis(max);
            assert!(
                axis.ticks.len() >= 2 && axis.ticks.len() <= 12,
                "{max}: {axis:?}"
            );
            let steps: Vec<u64> = axis.ticks.windows(2).map(|w| w[1].0 - w[0].0).collect();
            let (lo, hi) = (steps.iter().min().unwrap(), steps.iter().max().unwrap());
            assert!(hi - lo <= 1, "{max}: uneven {steps:?}");
            assert!(axis.top >= max);
        }
    }

    #[test_case(0, 100, &[0, 20, 40, 60, 80, 100])]
    #[test_case(3, 17, &[5, 10, 15])]
    #[test_case(5, 5, &[5])]
    #[test_case(0, 3, &[0, 1, 2, 3])]
    fn count_ticks_are_round(start: u64, end: u64, expected: &[u64]) {
        assert_eq!(count_ticks(start, end, 5), expected);
    }
}
