//! What a run measured over time: live bytes per category at each point of the step,
//! the phases and iterations it went through, and its peak.
//!
//! A timeline is volatile (event counts change with any allocator or library
//! update), so it is stored beside a run's report, never in a snapshot.

use serde::{Deserialize, Serialize};
use vramtest_model::{Category, CategoryBytes, Phase};

/// The most points a stored timeline keeps: enough for any picture, small as JSON.
pub const DEFAULT_MAX_POINTS: usize = 2_000;

/// What the x axis counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XAxis {
    /// Allocation and free events, in the order the probe saw them (exact probes).
    Event,
    /// Samples of a device's memory counters (watermark probes).
    Sample,
}

impl XAxis {
    /// The axis title in pictures.
    pub fn label(self) -> &'static str {
        match self {
            XAxis::Event => "allocation event",
            XAxis::Sample => "sample",
        }
    }
}

/// Live bytes per category from `x` until the next point.
///
/// In JSON a point is compact, `[x, [parameters, gradients, ...]]` with the bytes in
/// [`Category::ALL`] order: a timeline holds thousands of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "PointRepr", into = "PointRepr")]
pub struct TimelinePoint {
    /// The position on the x axis (see [`XAxis`]).
    pub x: u64,
    /// Live bytes per category there.
    pub live: CategoryBytes,
}

#[derive(Serialize, Deserialize)]
struct PointRepr(u64, [u64; Category::ALL.len()]);

impl From<TimelinePoint> for PointRepr {
    fn from(p: TimelinePoint) -> Self {
        PointRepr(p.x, Category::ALL.map(|c| p.live[c]))
    }
}

impl From<PointRepr> for TimelinePoint {
    fn from(PointRepr(x, bytes): PointRepr) -> Self {
        let mut live = CategoryBytes::default();
        for c in Category::ALL {
            live[c] = bytes[c.index()];
        }
        TimelinePoint { x, live }
    }
}

impl TimelinePoint {
    /// Live bytes over all categories.
    pub fn total(&self) -> u64 {
        self.live.total()
    }
}

/// One run of one phase: `[start, end)` on the x axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PhaseSpan {
    /// The phase that ran.
    pub phase: Phase,
    /// The loop iteration, or `None` for set-up phases run before the loop.
    pub iteration: Option<u32>,
    /// Where it started on the x axis.
    pub start: u64,
    /// Where it ended on the x axis (exclusive).
    pub end: u64,
}

/// One loop iteration: `[start, end)` on the x axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IterationSpan {
    /// The iteration's number, from 0 (the warm-up).
    pub number: u32,
    /// Where it started on the x axis.
    pub start: u64,
    /// Where it ended on the x axis (exclusive).
    pub end: u64,
}

/// The highest live total and where it happened, from the full-resolution samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Peak {
    /// Where on the x axis.
    pub x: u64,
    /// The live total there.
    pub total: u64,
    /// The breakdown at the peak; sums to `total`.
    pub live: CategoryBytes,
}

/// Live bytes per category over a test, downsampled for pictures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// What the x axis counts.
    pub x_axis: XAxis,
    /// In ascending `x`; at most the `max_points` it was built with.
    pub points: Vec<TimelinePoint>,
    /// The phase runs, by start.
    pub phases: Vec<PhaseSpan>,
    /// The loop iterations, in order.
    pub iterations: Vec<IterationSpan>,
    /// Found before downsampling: exact, and always one of `points`.
    pub peak: Peak,
}

impl Timeline {
    /// A timeline from full-resolution `samples` (ascending `x`): the peak is found
    /// over all of them, then they are cut down to at most `max_points` with
    /// [`downsample`] (use [`DEFAULT_MAX_POINTS`]).
    pub fn new(
        x_axis: XAxis,
        samples: &[TimelinePoint],
        phases: Vec<PhaseSpan>,
        iterations: Vec<IterationSpan>,
        max_points: usize,
    ) -> Timeline {
        Timeline {
            x_axis,
            points: downsample(samples, max_points),
            phases,
            iterations,
            peak: peak(samples).unwrap_or_default(),
        }
    }

    /// The categories that hold any bytes at any point (or at the peak), in
    /// [`Category::ALL`] order: the series a picture draws.
    pub fn categories(&self) -> Vec<Category> {
        Category::ALL
            .into_iter()
            .filter(|&c| self.peak.live[c] > 0 || self.points.iter().any(|p| p.live[c] > 0))
            .collect()
    }

    /// The live total at each point, for a sparkline.
    pub fn totals(&self) -> Vec<u64> {
        self.points.iter().map(TimelinePoint::total).collect()
    }

    /// The x range covered by points, phases and iterations: `[start, end)`, where the
    /// last point lasts one unit. `(0, 1)` for an empty timeline.
    pub fn x_range(&self) -> (u64, u64) {
        let starts = self
            .points
            .iter()
            .map(|p| p.x)
            .chain(self.phases.iter().map(|s| s.start))
            .chain(self.iterations.iter().map(|s| s.start));
        let ends = self
            .points
            .iter()
            .map(|p| p.x + 1)
            .chain(self.phases.iter().map(|s| s.end))
            .chain(self.iterations.iter().map(|s| s.end));
        let start = starts.min().unwrap_or(0);
        let end = ends.max().unwrap_or(1).max(start + 1);
        (start, end)
    }
}

/// The first sample with the highest live total (`None` without samples).
pub fn peak(samples: &[TimelinePoint]) -> Option<Peak> {
    let index = first_max_index(samples)?;
    let p = samples[index];
    Some(Peak {
        x: p.x,
        total: p.total(),
        live: p.live,
    })
}

/// At most `max_points` of `samples`, in order, that keep the shape: the samples are
/// cut into `max_points / 2` equal buckets and each bucket keeps its lowest and its
/// highest total (one point when they coincide, or when `max_points` is 1). So no
/// spike and no dip is lost, the first sample with the highest total (the peak) is
/// always kept, and every point returned is a real sample: no total is invented.
/// Returns the samples unchanged when they already fit, and nothing for `max_points`
/// 0.
pub fn downsample(samples: &[TimelinePoint], max_points: usize) -> Vec<TimelinePoint> {
    if samples.len() <= max_points {
        return samples.to_vec();
    }
    if max_points == 0 {
        return Vec::new();
    }
    let buckets = (max_points / 2).max(1);
    let keep_lows = max_points >= 2;
    let n = samples.len();
    let bound = |b: usize| (b as u128 * n as u128 / buckets as u128) as usize;
    let mut out = Vec::with_capacity(max_points);
    for b in 0..buckets {
        let (lo, hi) = (bound(b), bound(b + 1));
        let bucket = &samples[lo..hi];
        // n > max_points >= buckets: every bucket holds at least one sample.
        let high = first_max_index(bucket).expect("bucket is not empty");
        let low = first_min_index(bucket).expect("bucket is not empty");
        if keep_lows && low != high {
            let (a, b) = (low.min(high), low.max(high));
            out.push(bucket[a]);
            out.push(bucket[b]);
        } else {
            out.push(bucket[high]);
        }
    }
    out
}

/// [`downsample`] for samples that arrive one at a time, when their number is known
/// in advance: it holds two points per bucket instead of every sample, so a stream of
/// millions of allocation events becomes a timeline in constant memory. Fed the same
/// samples, it returns exactly what [`downsample`] returns.
#[derive(Debug, Clone)]
pub struct Downsampler {
    n: usize,
    max_points: usize,
    buckets: usize,
    seen: usize,
    bucket: usize,
    /// The current bucket's first lowest and first highest sample.
    low: Option<TimelinePoint>,
    high: Option<TimelinePoint>,
    /// Every sample, while they still fit in `max_points`.
    all: Vec<TimelinePoint>,
    out: Vec<TimelinePoint>,
    peak: Option<TimelinePoint>,
}

impl Downsampler {
    /// A downsampler for `n` samples kept to at most `max_points`.
    pub fn new(n: usize, max_points: usize) -> Downsampler {
        Downsampler {
            n,
            max_points,
            buckets: (max_points / 2).max(1),
            seen: 0,
            bucket: 0,
            low: None,
            high: None,
            all: Vec::new(),
            out: Vec::with_capacity(max_points.min(n)),
            peak: None,
        }
    }

    fn bound(&self, b: usize) -> usize {
        (b as u128 * self.n as u128 / self.buckets as u128) as usize
    }

    /// Takes the next sample (samples past the announced `n` are ignored).
    pub fn push(&mut self, p: TimelinePoint) {
        if self.seen >= self.n {
            return;
        }
        self.seen += 1;
        if self.peak.is_none_or(|q| p.total() > q.total()) {
            self.peak = Some(p);
        }
        if self.n <= self.max_points {
            self.all.push(p);
            return;
        }
        if self.max_points == 0 {
            return;
        }
        if self.low.is_none_or(|q| p.total() < q.total()) {
            self.low = Some(p);
        }
        if self.high.is_none_or(|q| p.total() > q.total()) {
            self.high = Some(p);
        }
        if self.seen == self.bound(self.bucket + 1) {
            self.close_bucket();
        }
    }

    fn close_bucket(&mut self) {
        let (Some(low), Some(high)) = (self.low.take(), self.high.take()) else {
            return;
        };
        let keep_lows = self.max_points >= 2;
        if keep_lows && low.x != high.x {
            let (a, b) = if low.x < high.x {
                (low, high)
            } else {
                (high, low)
            };
            self.out.push(a);
            self.out.push(b);
        } else {
            self.out.push(high);
        }
        self.bucket += 1;
    }

    /// The kept points and the first sample with the highest total.
    pub fn finish(self) -> (Vec<TimelinePoint>, Option<Peak>) {
        let peak = self.peak.map(|p| Peak {
            x: p.x,
            total: p.total(),
            live: p.live,
        });
        if self.n <= self.max_points {
            return (self.all, peak);
        }
        (self.out, peak)
    }
}

fn first_max_index(samples: &[TimelinePoint]) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for (i, p) in samples.iter().enumerate() {
        let total = p.total();
        if best.is_none_or(|(_, t)| total > t) {
            best = Some((i, total));
        }
    }
    best.map(|(i, _)| i)
}

fn first_min_index(samples: &[TimelinePoint]) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for (i, p) in samples.iter().enumerate() {
        let total = p.total();
        if best.is_none_or(|(_, t)| total < t) {
            best = Some((i, total));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn point(x: u64, activations: u64, parameters: u64) -> TimelinePoint {
        let mut live = CategoryBytes::default();
        live[Category::Activations] = activations;
        live[Category::Parameters] = parameters;
        TimelinePoint { x, live }
    }

    fn samples_strategy() -> impl Strategy<Value = Vec<TimelinePoint>> {
        prop::collection::vec((0u64..1 << 30, 0u64..1 << 20), 0..3_000).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (a, p))| point(i as u64, a, p))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn downsampling_keeps_at_most_n_real_points_in_order_and_the_peak(
            samples in samples_strategy(),
            max_points in 1usize..300,
        ) {
            let out = downsample(&samples, max_points);
            prop_assert!(out.len() <= max_points);
            if samples.len() <= max_points {
                prop_assert_eq!(&out, &samples);
            }
            // Every point is a real sample, in ascending x, none twice.
            prop_assert!(out.windows(2).all(|w| w[0].x < w[1].x));
            for p in &out {
                prop_assert_eq!(samples[p.x as usize], *p);
            }
            let true_max = samples.iter().map(TimelinePoint::total).max();
            prop_assert_eq!(out.iter().map(TimelinePoint::total).max(), true_max);
            if let Some(peak) = peak(&samples) {
                prop_assert!(out.iter().any(|p| p.x == peak.x && p.total() == peak.total));
            }
        }

        #[test]
        fn the_streaming_downsampler_returns_what_downsample_returns(
            samples in samples_strategy(),
            max_points in 0usize..300,
        ) {
            let mut d = Downsampler::new(samples.len(), max_points);
            for &p in &samples {
                d.push(p);
            }
            let (points, top) = d.finish();
            prop_assert_eq!(points, downsample(&samples, max_points));
            prop_assert_eq!(top, peak(&samples));
        }

        #[test]
        fn every_bucket_keeps_its_highest_total(
            samples in samples_strategy(),
            max_points in 2usize..300,
        ) {
            prop_assume!(samples.len() > max_points);
            let out = downsample(&samples, max_points);
            let buckets = max_points / 2;
            let n = samples.len();
            for b in 0..buckets {
                let bucket = &samples[b * n / buckets..(b + 1) * n / buckets];
                let high = bucket.iter().map(TimelinePoint::total).max().unwrap();
                let kept = out.iter().filter(|p| {
                    let i = p.x as usize;
                    i >= b * n / buckets && i < (b + 1) * n / buckets
                });
                prop_assert_eq!(kept.map(TimelinePoint::total).max(), Some(high));
            }
        }

        #[test]
        fn a_timeline_built_from_samples_holds_the_exact_peak(samples in samples_strategy()) {
            let t = Timeline::new(XAxis::Event, &samples, vec![], vec![], DEFAULT_MAX_POINTS);
            prop_assert!(t.points.len() <= DEFAULT_MAX_POINTS);
            let true_max = samples.iter().map(TimelinePoint::total).max().unwrap_or(0);
            prop_assert_eq!(t.peak.total, true_max);
            prop_assert_eq!(t.peak.live.total(), true_max);
            prop_assert!(t.points.iter().all(|p| p.total() <= true_max));
            if !samples.is_empty() {
                prop_assert!(t.points.iter().any(|p| p.x == t.peak.x && p.total() == true_max));
            }
        }
    }

    #[test]
    fn a_single_spike_among_many_survives_a_cut_to_ten_points() {
        let mut samples: Vec<TimelinePoint> = (0..100_000).map(|i| point(i, 1000, 10)).collect();
        samples[77_777].live[Category::Activations] = 5_000_000;
        samples[12_345].live[Category::Activations] = 0;
        let out = downsample(&samples, 10);
        assert!(out.len() <= 10);
        assert!(out.iter().any(|p| p.x == 77_777 && p.total() == 5_000_010));
        assert!(
            out.iter().any(|p| p.x == 12_345 && p.total() == 10),
            "the dip is kept"
        );
    }

    #[test]
    fn the_first_of_equal_peaks_is_the_peak() {
        let samples = [
            point(0, 1, 0),
            point(1, 9, 0),
            point(2, 9, 0),
            point(3, 2, 0),
        ];
        assert_eq!(peak(&samples).unwrap().x, 1);
        assert_eq!(peak(&[]), None);
        let out = downsample(&samples, 1);
        assert_eq!(out, vec![samples[1]]);
        assert!(downsample(&samples, 0).is_empty());
    }

    #[test]
    fn categories_and_range_come_from_the_data() {
        let t = Timeline::new(
            XAxis::Event,
            &[point(3, 0, 5), point(4, 7, 5)],
            vec![PhaseSpan {
                phase: Phase::Forward,
                iteration: Some(0),
                start: 2,
                end: 9,
            }],
            vec![],
            DEFAULT_MAX_POINTS,
        );
        assert_eq!(
            t.categories(),
            vec![Category::Parameters, Category::Activations]
        );
        assert_eq!(t.x_range(), (2, 9));
        assert_eq!(t.totals(), vec![5, 12]);
        let empty = Timeline::new(XAxis::Sample, &[], vec![], vec![], 10);
        assert_eq!(empty.x_range(), (0, 1));
        assert!(empty.categories().is_empty());
    }

    #[test]
    fn json_round_trip() {
        let t = Timeline::new(
            XAxis::Event,
            &[point(0, 1, 2), point(1, 3, 2)],
            vec![PhaseSpan {
                phase: Phase::Backward,
                iteration: None,
                start: 0,
                end: 2,
            }],
            vec![IterationSpan {
                number: 0,
                start: 0,
                end: 2,
            }],
            DEFAULT_MAX_POINTS,
        );
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.contains("\"x_axis\":\"event\""), "{json}");
        assert!(
            json.contains("\"points\":[[0,[2,0,0,1,0,0,0,0]],[1,[2,0,0,3,0,0,0,0]]]"),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Timeline>(&json).unwrap(), t);
    }
}
