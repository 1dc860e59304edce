//! Points done out of the total, the time elapsed and left, and which point runs long:
//! decided from the events and the time each call is given (the time since the tests
//! started), so that it is tested without waiting.

use std::collections::BTreeMap;
use std::time::Duration;
use vramtest_model::progress::PointState;

/// A line at least this often without a bar, whatever the points do.
pub const EVERY: Duration = Duration::from_secs(30);
/// A point running this long is said, and again after each such period.
pub const SLOW: Duration = Duration::from_secs(60);

/// What the tracker hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A point of the test `key` (`package::target::test`) starts or ended; `total`
    /// is how many points the test has.
    Point {
        key: String,
        point: String,
        total: u32,
        state: PointState,
    },
    /// The test `key` ended: its points are all done, whether or not they ran.
    TestEnded { key: String },
    /// The tests are over.
    Finish,
}

/// A line to show: a `PROGRESS` summary or a `SLOW` point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    /// A slow point's line (shown above the bar on a terminal too).
    pub slow: bool,
}

#[derive(Debug, Clone, Copy)]
struct Points {
    total: u64,
    done: u64,
}

#[derive(Debug)]
struct Running {
    since: Duration,
    /// How many [`SLOW`] periods were said.
    said: u32,
}

/// The progress of a run's points.
#[derive(Debug)]
pub struct Tracker {
    tests: BTreeMap<String, Points>,
    /// The points running, by test and point, with when each started.
    running: BTreeMap<(String, String), Running>,
    /// When the last summary was said, and the tenth of the points it said.
    last: Option<(Duration, u64)>,
}

impl Tracker {
    /// The tests `keys`, one point each until their harness says more.
    pub fn new(keys: Vec<String>) -> Tracker {
        Tracker {
            tests: keys
                .into_iter()
                .map(|k| (k, Points { total: 1, done: 0 }))
                .collect(),
            running: BTreeMap::new(),
            last: None,
        }
    }

    /// Takes in what happened at `now`. A test not tracked (an ignored one) is left
    /// out.
    pub fn apply(&mut self, now: Duration, event: Event) {
        match event {
            Event::Point {
                key,
                point,
                total,
                state,
            } => {
                let Some(points) = self.tests.get_mut(&key) else {
                    return;
                };
                points.total = u64::from(total).max(points.done).max(1);
                match state {
                    PointState::Started => {
                        self.running.insert(
                            (key, point),
                            Running {
                                since: now,
                                said: 0,
                            },
                        );
                    }
                    PointState::Ended => {
                        if self.running.remove(&(key, point)).is_some() {
                            points.done = (points.done + 1).min(points.total);
                        }
                    }
                }
            }
            Event::TestEnded { key } => {
                if let Some(points) = self.tests.get_mut(&key) {
                    points.done = points.total;
                }
                self.running.retain(|(k, _), _| *k != key);
            }
            Event::Finish => {}
        }
    }

    /// Points done and in all.
    pub fn counts(&self) -> (u64, u64) {
        self.tests
            .values()
            .fold((0, 0), |(d, t), p| (d + p.done, t + p.total))
    }

    /// `about 5m 10s left`, from the pace so far; empty before the first point ends,
    /// and under a second.
    pub fn estimate(&self, now: Duration) -> String {
        let (done, total) = self.counts();
        if done == 0 || done >= total {
            return String::new();
        }
        let left = now.mul_f64((total - done) as f64 / done as f64);
        match left.as_secs() {
            0 => String::new(),
            _ => format!("about {} left", clock(left)),
        }
    }

    /// The lines due at `now`: each point that has run another [`SLOW`] period, then a
    /// summary when the points crossed a tenth of the total since the last one, or
    /// [`EVERY`] has passed.
    pub fn due(&mut self, now: Duration) -> Vec<Line> {
        let mut lines = Vec::new();
        for ((key, point), running) in &mut self.running {
            let ran = now.saturating_sub(running.since);
            let periods = (ran.as_secs() / SLOW.as_secs()) as u32;
            if periods > running.said {
                running.said = periods;
                let what = match point.is_empty() {
                    true => key.clone(),
                    false => format!("{key}: point {point}"),
                };
                let text = format!(
                    "{:>14} [>{:>7.2}s] {what} running for {}",
                    "SLOW",
                    ran.as_secs_f64(),
                    clock(Duration::from_secs(ran.as_secs()))
                );
                lines.push(Line { text, slow: true });
            }
        }
        let (done, total) = self.counts();
        let tenth = done * 10 / total.max(1);
        let due = match self.last {
            None => done > 0,
            Some((at, said)) => tenth > said || now.saturating_sub(at) >= EVERY,
        };
        if due {
            self.last = Some((now, tenth));
            let estimate = match self.estimate(now) {
                e if e.is_empty() => String::new(),
                e => format!(", {e}"),
            };
            let text = format!(
                "{:>14} [{:>7.2}s] {done}/{total} points{estimate}",
                "PROGRESS",
                now.as_secs_f64()
            );
            lines.push(Line { text, slow: false });
        }
        lines
    }
}

/// `1h 02m`, `2m 03s`, `45s`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn point(key: &str, point: &str, total: u32, state: PointState) -> Event {
        Event::Point {
            key: key.into(),
            point: point.into(),
            total,
            state,
        }
    }

    fn texts(lines: Vec<Line>) -> Vec<String> {
        lines.into_iter().map(|l| l.text).collect()
    }

    #[test]
    fn a_sweep_counts_its_points_and_says_each_tenth() {
        let mut t = Tracker::new(vec!["p::t::plain".into(), "p::t::sweep".into()]);
        assert_eq!(t.counts(), (0, 2), "a test is one point until told more");
        assert!(
            t.due(secs(0)).is_empty(),
            "nothing to say before a point ends"
        );
        // The sweep says it has 19 points: 20 in all.
        t.apply(
            secs(0),
            point("p::t::sweep", "batch=1", 19, PointState::Started),
        );
        assert_eq!(t.counts(), (0, 20));
        let mut said = Vec::new();
        for i in 0..19u64 {
            let label = format!("batch={}", i + 1);
            t.apply(
                secs(i),
                point("p::t::sweep", &label, 19, PointState::Started),
            );
            t.apply(
                secs(i + 1),
                point("p::t::sweep", &label, 19, PointState::Ended),
            );
            said.extend(texts(t.due(secs(i + 1))));
        }
        // One point a second: a line at the first, then at 2, 4, .. 18 (each tenth).
        assert_eq!(said.len(), 10, "{said:#?}");
        assert_eq!(
            said[0],
            "      PROGRESS [   1.00s] 1/20 points, about 19s left"
        );
        assert_eq!(
            said[9],
            "      PROGRESS [  18.00s] 18/20 points, about 2s left"
        );
        t.apply(
            secs(20),
            Event::TestEnded {
                key: "p::t::plain".into(),
            },
        );
        assert_eq!(
            texts(t.due(secs(20))),
            ["      PROGRESS [  20.00s] 20/20 points"]
        );
    }

    #[test]
    fn a_line_every_30_seconds_and_a_slow_point_once_a_minute() {
        let mut t = Tracker::new(vec!["p::sweep::s".into()]);
        t.apply(
            secs(0),
            point("p::sweep::s", "batch=1", 100, PointState::Started),
        );
        t.apply(
            secs(3),
            point("p::sweep::s", "batch=1", 100, PointState::Ended),
        );
        t.apply(
            secs(3),
            point("p::sweep::s", "batch=256", 100, PointState::Started),
        );
        assert_eq!(
            texts(t.due(secs(3))),
            ["      PROGRESS [   3.00s] 1/100 points, about 4m 57s left"]
        );
        assert!(t.due(secs(32)).is_empty(), "29 s since the last line");
        assert_eq!(
            texts(t.due(secs(33))),
            ["      PROGRESS [  33.00s] 1/100 points, about 54m 27s left"]
        );
        assert!(t.due(secs(62)).is_empty(), "the point has run 59 s");
        assert_eq!(
            texts(t.due(secs(63))),
            [
                "          SLOW [>  60.00s] p::sweep::s: point batch=256 running for 1m 00s",
                "      PROGRESS [  63.00s] 1/100 points, about 1h 43m left",
            ]
        );
        assert!(t.due(secs(90)).is_empty(), "said once per minute");
        let slow: Vec<bool> = t.due(secs(123)).iter().map(|l| l.slow).collect();
        assert_eq!(slow, [true, false], "again at two minutes");
        // A test that ended takes its running points with it.
        t.apply(
            secs(124),
            Event::TestEnded {
                key: "p::sweep::s".into(),
            },
        );
        assert_eq!(t.counts(), (100, 100));
        assert_eq!(t.estimate(secs(124)), "");
    }

    #[test]
    fn a_test_without_a_sweep_is_named_alone_and_others_are_left_out() {
        let mut t = Tracker::new(vec!["p::t::one".into()]);
        t.apply(secs(0), point("p::t::one", "", 1, PointState::Started));
        t.apply(secs(0), point("p::t::ignored", "", 1, PointState::Started));
        assert_eq!(t.counts(), (0, 1));
        assert_eq!(
            texts(t.due(secs(61))),
            ["          SLOW [>  61.00s] p::t::one running for 1m 01s"]
        );
    }

    #[test]
    fn clocks() {
        assert_eq!(clock(secs(45)), "45s");
        assert_eq!(clock(secs(123)), "2m 03s");
        assert_eq!(clock(secs(3720)), "1h 02m");
    }
}
