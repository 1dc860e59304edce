//! The old figures come from the snapshot the result was judged against, read before
//! the run wrote anything: under `VRAMTEST_UPDATE=always` a changed figure is written
//! over the snapshot, and the reports (JSON lines, the HTML page, a merge of the JSON)
//! still show what the snapshot held, not the new figures. On a copy of
//! `fixtures/vec-model`.

mod common;

use common::{Fixture, assert_code};
use serde_json::Value;
use std::path::Path;
use vramtest_model::snapshot;
use vramtest_model::{Body, Category, HumanBytes};

/// The committed body with 64 KiB fewer activations: what an older snapshot held.
fn slimmer(body: &Body) -> Body {
    const LESS: u64 = 64 << 10;
    let mut old = body.clone();
    old.at_peak[Category::Activations] -= LESS;
    old.category_peaks[Category::Activations] -= LESS;
    old.peak_bytes -= LESS;
    for phase in &mut old.phases {
        phase.peak_bytes = phase.peak_bytes.min(old.peak_bytes);
    }
    old
}

/// Rewrites the snapshot at `path` with `body`, its header as it was.
fn rewrite(path: &Path, body: &Body) {
    let text = std::fs::read_to_string(path).unwrap();
    let header_end = text.match_indices("---\n").nth(1).unwrap().0 + "---\n".len();
    std::fs::write(path, format!("{}{}", &text[..header_end], body.to_text())).unwrap();
    assert_eq!(snapshot::read(path).unwrap().unwrap().body, *body);
}

/// The HTML row of `category` in the old-against-new table: (snapshot, this run).
fn category_row(page: &str, category: &str) -> (String, String) {
    let row = page
        .lines()
        .find(|l| l.contains(&format!("</span>{category}</td>")))
        .unwrap_or_else(|| panic!("no {category} row in {page}"));
    let cells: Vec<&str> = row
        .split("<td class=\"num\">")
        .skip(1)
        .map(|c| c.split("</td>").next().unwrap())
        .collect();
    (cells[0].to_owned(), cells[1].to_owned())
}

/// The `"type": "test"` line of `name` in JSON lines.
fn test_line(stdout: &str, name: &str) -> Value {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "test" && v["test"] == name)
        .unwrap_or_else(|| panic!("no line for {name} in {stdout}"))
}

#[test]
fn under_update_always_the_reports_show_the_snapshot_the_result_replaced() {
    let f = Fixture::vec_model("old-figures");
    assert_code(
        &f.run(&["linear_adam"], &[("VRAMTEST_UPDATE", "always")]),
        0,
    );
    let snap = f.snapshots().join("vram__linear_adam@cpu.snap");
    let measured = snapshot::read(&snap).unwrap().unwrap().body;
    let old = slimmer(&measured);
    rewrite(&snap, &old);

    let out = f.dir.join("out");
    let (html, merged_html) = (out.join("run.html"), out.join("merged.html"));
    let ran = f.run(
        &[
            "linear_adam",
            "--message-format",
            "json",
            "--html",
            html.to_str().unwrap(),
        ],
        &[("VRAMTEST_UPDATE", "always")],
    );
    assert_code(&ran, 0);
    // The run did write the new figures over the snapshot.
    let written = snapshot::read(&snap).unwrap().unwrap().body;
    assert_eq!(written, measured, "the snapshot holds this run's figures");

    // JSON: the old body and peak are the snapshot's before the run.
    let line = test_line(&ran.stdout, "linear_adam");
    assert_eq!(line["status"], "passed", "{line}");
    let old_body: Body = serde_json::from_value(line["old_body"].clone()).unwrap();
    assert_eq!(old_body, old, "old_body is what the snapshot held");
    assert_eq!(line["old_peak_bytes"], old.peak_bytes);
    let new_body: Body = serde_json::from_value(line["body"].clone()).unwrap();
    assert_eq!(new_body, measured);

    // HTML: the snapshot column shows the old activations, the run's column the new.
    let expected = (
        HumanBytes(old.category_peaks[Category::Activations]).to_string(),
        HumanBytes(measured.category_peaks[Category::Activations]).to_string(),
    );
    assert_ne!(expected.0, expected.1);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(category_row(&page, "activations"), expected);

    // A merge of the JSON lines draws the same figures: they travel in the report.
    let shard = out.join("run.jsonl");
    std::fs::write(&shard, &ran.stdout).unwrap();
    let merged = f.run(
        &[
            "merge",
            shard.to_str().unwrap(),
            "--html",
            merged_html.to_str().unwrap(),
        ],
        &[],
    );
    assert_code(&merged, 0);
    let page = std::fs::read_to_string(&merged_html).unwrap();
    assert_eq!(category_row(&page, "activations"), expected);
}
