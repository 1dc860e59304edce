//! What a run leaves beside its results for later pictures and predictions: the
//! timeline of each measured test and, for a CPU run, its GPU prediction, under
//! cargo's target directory (never in a snapshot: they are volatile). The harness
//! writes them; `show`, `show --svg` and `--html` read them.

use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use vramtest_chart::Timeline;

/// The timeline recorded for the result that belongs to `snap` (a `.snap` path), when
/// a run left one that can be read.
pub fn timeline(target_dir: &Path, snap: &Path) -> Option<Timeline> {
    read(vramtest_model::snapshot::timeline_path(target_dir, snap))
}

/// The GPU prediction recorded for the CPU result that belongs to `snap`, when a run
/// left one that can be read.
pub fn prediction(target_dir: &Path, snap: &Path) -> Option<vramtest_model::pool::Prediction> {
    read(vramtest_model::snapshot::prediction_path(target_dir, snap))
}

/// The JSON at `path`, when it is there and reads as a `T`.
fn read<T: DeserializeOwned>(path: PathBuf) -> Option<T> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}
