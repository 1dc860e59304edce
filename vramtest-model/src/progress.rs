//! The progress of a test's points while it runs: a line the harness writes into the
//! report pipe before and after each point of a sweep (one point for a test without
//! one), so that `cargo vramtest` can show points done out of the total while a long
//! sweep runs. It is never a verdict: a line of this shape is not read as a report.

use serde::{Deserialize, Serialize};

/// One point of a test starting or ending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointProgress {
    /// The test's name in its binary.
    pub test: String,
    /// The point: `batch=2 seq=16 precision=bf16`, `batch=256`; empty for a test
    /// without a sweep.
    pub point: String,
    /// How many points the test has.
    pub total: u32,
    /// Whether the point starts or ended.
    pub state: PointState,
}

/// Where a point is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PointState {
    /// Its process is about to start.
    Started,
    /// Its process ended (whatever its result).
    Ended,
}

/// A progress line's JSON: `{"point_progress": {..}}`, a key no report has.
#[derive(Serialize, Deserialize)]
struct Line {
    point_progress: PointProgress,
}

impl PointProgress {
    /// The line written into the report pipe, newline included.
    pub fn to_line(&self) -> String {
        let line = Line {
            point_progress: self.clone(),
        };
        format!(
            "{}\n",
            serde_json::to_string(&line).expect("progress serializes")
        )
    }

    /// The progress a line of the report pipe holds, `None` for any other line (a
    /// report).
    pub fn from_line(line: &[u8]) -> Option<PointProgress> {
        let line = line.trim_ascii();
        if !line.starts_with(br#"{"point_progress""#) {
            return None;
        }
        serde_json::from_slice::<Line>(line)
            .ok()
            .map(|l| l.point_progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_round_trips_and_a_report_is_no_progress() {
        let p = PointProgress {
            test: "sweep".into(),
            point: "batch=256".into(),
            total: 4,
            state: PointState::Started,
        };
        let line = p.to_line();
        assert_eq!(
            line,
            "{\"point_progress\":{\"test\":\"sweep\",\"point\":\"batch=256\",\"total\":4,\"state\":\"started\"}}\n"
        );
        assert_eq!(PointProgress::from_line(line.as_bytes()), Some(p));
        assert_eq!(
            PointProgress::from_line(br#"{"schema":1,"test":"x"}"#),
            None
        );
    }
}
