//! What a run leaves beside its results for later pictures: the timeline of each
//! measured test, under cargo's target directory (never in a snapshot: it is
//! volatile). The harness writes it; `show --svg` and `--html` read it.

use std::path::Path;
use vramtest_chart::Timeline;

/// The timeline recorded for the result that belongs to `snap` (a `.snap` path), when
/// a run left one that can be read.
pub fn timeline(target_dir: &Path, snap: &Path) -> Option<Timeline> {
    let path = vramtest_model::snapshot::timeline_path(target_dir, snap);
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}
