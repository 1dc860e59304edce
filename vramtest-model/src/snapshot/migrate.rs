//! Reading bodies of earlier schemas. A change to the body that older files lack (a
//! category added, a key renamed) bumps [`super::SCHEMA`], sets
//! [`super::READS_AS_WRITTEN_SINCE`] to it, and adds one [`Migration`] to
//! [`MIGRATIONS`]: the step that turns a body of the schema before into one of the new
//! schema, on the parsed JSON, before the strict reading. Each step taken leaves a
//! note, which the run shows beside the file. (A schema that only adds what an older
//! release must refuse, as schema 2's phase moments, needs no step: its bodies and
//! those before it read as written.)

use crate::category::Category;
use serde_json::{Map, Value};

/// One step: a body of schema `from` as one of schema `from + 1`.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The schema the step reads.
    pub from: u32,
    /// What the step did, for the note (`untracked did not exist: read as 0 B`).
    pub note: &'static str,
    /// The change, on the body's JSON object (its `schema` key is set after it).
    pub apply: fn(&mut Map<String, Value>),
}

/// The steps from each older schema this version still reads up to
/// [`super::READS_AS_WRITTEN_SINCE`], oldest first. Empty: schema 1 is the first, and
/// schema 2 reads schema 1's bodies as written.
pub const MIGRATIONS: &[Migration] = &[];

/// A body of schema `from` as a body of schema `to`, by `steps`, with the note of each
/// step taken, in order: the body itself with no note when `from` is `to`. `None` when
/// no chain of steps leads from `from` to `to` (a schema older than the oldest step,
/// or newer than `to`).
pub fn migrate(
    steps: &[Migration],
    mut body: Value,
    from: u32,
    to: u32,
) -> Option<(Value, Vec<&'static str>)> {
    let mut schema = from;
    let mut notes = Vec::new();
    while schema < to {
        let step = steps.iter().find(|s| s.from == schema)?;
        let object = body.as_object_mut()?;
        (step.apply)(object);
        schema += 1;
        object.insert("schema".to_owned(), schema.into());
        notes.push(step.note);
    }
    (schema == to).then_some((body, notes))
}

/// For a step that adds a category: a body written before `category` existed holds
/// 0 B of it, at the peak and at its own peak.
pub fn add_category(body: &mut Map<String, Value>, category: Category) {
    for key in ["at_peak", "category_peaks"] {
        if let Some(Value::Object(bytes)) = body.get_mut(key) {
            bytes
                .entry(category.as_str())
                .or_insert_with(|| Value::from(0u64));
        }
    }
}
