//! The snapshot file format (README, "Snapshots"): insta's header, a strict pretty-JSON body,
//! error messages with line numbers, file naming and atomic writes.

#[path = "../../tests/common/required.rs"]
mod required;

use std::path::{Path, PathBuf};
use test_case::test_case;
use vramtest_model::snapshot::{self, FileError, Info, ParseError, SCHEMA, migrate};
use vramtest_model::{
    Body, Category, CategoryBytes, DeviceClass, Fidelity, Phase, PhaseRecord, Snapshot,
};

/// A complete snapshot file, written by hand. Line numbers are in the margin comments
/// of [`VALID_LINES`]; the malformed cases below edit single lines of it.
const VALID_LINES: [&str; 55] = [
    "---",                                                                     // 1
    "source: \"tests/vram.rs\"",                                               // 2
    "description: \"vramtest: peak memory of mlp_adamw on cpu, by category\"", // 3
    "expression: \"mlp_adamw\"",                                               // 4
    "info:",                                                                   // 5
    "  device: \"cpu\"",                                                       // 6
    "  fidelity: \"exact\"",                                                   // 7
    "  tool: \"vramtest 0.1.0\"",                                              // 8
    "---",                                                                     // 9
    "{",                                                                       // 10
    "  \"schema\": 1,",                                                        // 11
    "  \"device_class\": \"cpu\",",                                            // 12
    "  \"fidelity\": \"exact\",",                                              // 13
    "  \"iterations\": 3,",                                                    // 14
    "  \"peak_bytes\": 5114,",                                                 // 15
    "  \"peak_phase\": \"backward\",",                                         // 16
    "  \"peak_iteration\": 2,",                                                // 17
    "  \"at_peak\": {",                                                        // 18
    "    \"parameters\": 1000,",                                               // 19
    "    \"gradients\": 1000,",                                                // 20
    "    \"optimizer_state\": 2000,",                                          // 21
    "    \"activations\": 500,",                                               // 22
    "    \"inputs\": 300,",                                                    // 23
    "    \"temporaries\": 250,",                                               // 24
    "    \"workspace\": 64,",                                                  // 25
    "    \"untracked\": 0",                                                    // 26
    "  },",                                                                    // 27
    "  \"category_peaks\": {",                                                 // 28
    "    \"parameters\": 1000,",                                               // 29
    "    \"gradients\": 1000,",                                                // 30
    "    \"optimizer_state\": 2000,",                                          // 31
    "    \"activations\": 500,",                                               // 32
    "    \"inputs\": 300,",                                                    // 33
    "    \"temporaries\": 4000,",                                              // 34
    "    \"workspace\": 64,",                                                  // 35
    "    \"untracked\": 0",                                                    // 36
    "  },",                                                                    // 37
    "  \"phases\": [",                                                         // 38
    "    {",                                                                   // 39
    "      \"phase\": \"params\",",                                            // 40
    "      \"iteration\": null,",                                              // 41
    "      \"start_bytes\": 0,",                                               // 42
    "      \"peak_bytes\": 1000,",                                             // 43
    "      \"end_bytes\": 1000",                                               // 44
    "    },",                                                                  // 45
    "    {",                                                                   // 46
    "      \"phase\": \"backward\",",                                          // 47
    "      \"iteration\": 2,",                                                 // 48
    "      \"start_bytes\": 3864,",                                            // 49
    "      \"peak_bytes\": 5114,",                                             // 50
    "      \"end_bytes\": 4364",                                               // 51
    "    }",                                                                   // 52
    "  ],",                                                                    // 53
    "  \"leak_bytes_per_iteration\": 0",                                       // 54
    "}",                                                                       // 55
];

fn join(lines: &[&str]) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

fn valid_text() -> String {
    join(&VALID_LINES)
}

/// The body that [`VALID_LINES`] spells out.
fn valid_body() -> Body {
    let at_peak = CategoryBytes::from([
        (Category::Parameters, 1000),
        (Category::Gradients, 1000),
        (Category::OptimizerState, 2000),
        (Category::Activations, 500),
        (Category::Inputs, 300),
        (Category::Temporaries, 250),
        (Category::Workspace, 64),
        (Category::Untracked, 0),
    ]);
    Body {
        // Written as schema 1 (it fits no phase as moments), read as this version's.
        schema: SCHEMA,
        device_class: DeviceClass::Cpu,
        fidelity: Fidelity::Exact,
        iterations: 3,
        peak_bytes: 5114,
        reserved_bytes: None,
        peak_phase: Some(Phase::Backward),
        peak_iteration: Some(2),
        at_peak,
        category_peaks: {
            let mut peaks = at_peak;
            peaks[Category::Temporaries] = 4000;
            peaks
        },
        phases: vec![
            PhaseRecord {
                phase: Phase::Params,
                iteration: None,
                start_bytes: 0,
                peak_bytes: 1000,
                end_bytes: 1000,
            },
            PhaseRecord {
                phase: Phase::Backward,
                iteration: Some(2),
                start_bytes: 3864,
                peak_bytes: 5114,
                end_bytes: 4364,
            },
        ],
        leak_bytes_per_iteration: 0,
        cpu_only: None,
        scaling: None,
    }
}

fn valid_snapshot() -> Snapshot {
    Snapshot {
        source: "tests/vram.rs".into(),
        test: "mlp_adamw".into(),
        info: Info {
            device: "cpu".into(),
            fidelity: Fidelity::Exact,
            tool: "vramtest 0.1.0".into(),
            driver: None,
            cuda: None,
            sites: Vec::new(),
            gradient_check: Vec::new(),
            machine: None,
        },
        body: valid_body(),
    }
}

// ---------------------------------------------------------------------------------------
// Writing and reading back.

#[test]
fn the_hand_written_file_parses_to_the_expected_body() {
    let parsed = snapshot::parse(&valid_text()).unwrap();
    assert_eq!(parsed.body, valid_body());
    // Quoted scalars read as plain ones would.
    assert_eq!(parsed.header, valid_snapshot().header());
    assert_eq!(parsed.test(), Some("mlp_adamw"));
}

#[test]
fn the_body_is_written_as_pretty_json_in_the_designs_key_order() {
    assert_eq!(valid_body().to_text(), join(&VALID_LINES[9..]));
}

#[test]
fn to_text_round_trips_through_parse() {
    let snap = valid_snapshot();
    let text = snap.to_text();
    assert_eq!(snapshot::parse(&text).unwrap().body, snap.body);
    // The body part is exactly the body's own text.
    assert!(text.ends_with(&snap.body.to_text()));
}

/// A sweep of one axis with a peak fit and `extra`, a figure fitted as `100 × batch`.
fn sweep_with(extra: &str) -> vramtest_model::sweep::Sweep {
    let fit = r#"{"terms": [{"coefficient": "100", "monomial": "batch"}], "loo_error_ppm": 0}"#;
    serde_json::from_str(&format!(
        r#"{{"axes": {{"batch": [1, 2]}}, "figures": {{"peak": {fit}, "{extra}": {fit}}}}}"#
    ))
    .unwrap()
}

/// A release before moments drops a moment's fit it cannot name, and predicts the
/// phase's peak too low: a body that fits a phase as its moments, in its sweep or in a
/// lever's variant, is written as schema 2, which such a release refuses; every other
/// body stays schema 1, which it reads. Both read back here as this version's.
#[test]
fn a_body_with_moments_is_written_in_a_schema_older_releases_refuse() {
    let schema_of = |body: &Body| {
        let v: serde_json::Value = serde_json::from_str(&body.to_text()).unwrap();
        v["schema"].as_u64().unwrap()
    };
    let plain = valid_body();
    assert_eq!(schema_of(&plain), 1);

    let mut whole = valid_body();
    whole.scaling = Some(sweep_with("phase backward"));
    assert_eq!(schema_of(&whole), 1);

    let mut moments = valid_body();
    moments.scaling = Some(sweep_with("phase backward when gradients peak"));
    assert_eq!(schema_of(&moments), u64::from(snapshot::MOMENTS_SCHEMA));
    assert_eq!(snapshot::MOMENTS_SCHEMA, 2);

    let mut in_a_variant = whole.clone();
    let sweep = in_a_variant.scaling.as_mut().unwrap();
    sweep
        .levels
        .insert("precision".into(), vec!["f32".into(), "bf16".into()]);
    sweep.variants.push(vramtest_model::sweep::VariantSweep {
        variant: [("precision".to_owned(), "bf16".to_owned())].into(),
        sweep: sweep_with("phase backward when activations peak"),
        saving: None,
        cpu_time_ratio: Default::default(),
    });
    assert_eq!(schema_of(&in_a_variant), 2);

    for body in [plain, whole, moments, in_a_variant] {
        let mut snap = valid_snapshot();
        snap.body = body;
        let parsed = snapshot::parse(&snap.to_text()).unwrap();
        assert_eq!(parsed.body, snap.body);
        assert_eq!(parsed.body.schema, SCHEMA);
        assert!(parsed.migrated.is_empty());
    }
    // What a release of schema 1 says of such a file: newer than its own.
    let mut newer: Vec<&str> = VALID_LINES.to_vec();
    newer[10] = "  \"schema\": 3,";
    let e = snapshot::parse(&join(&newer)).unwrap_err().to_string();
    assert!(
        e.contains("newer than this version's") && e.contains("upgrade"),
        "{e}"
    );
}

#[test]
fn a_cuda_snapshot_with_every_optional_field_round_trips() {
    let mut snap = valid_snapshot();
    snap.test = "models::conv::resnet \"tiny\"".into();
    snap.info = Info {
        device: "NVIDIA A100-SXM4-80GB".into(),
        fidelity: Fidelity::Phase,
        tool: "vramtest 0.1.0".into(),
        driver: Some("570.86.15".into()),
        cuda: Some("12.8".into()),
        sites: Vec::new(),
        gradient_check: Vec::new(),
        machine: None,
    };
    snap.body.device_class = DeviceClass::Cuda;
    snap.body.fidelity = Fidelity::Phase;
    snap.body.peak_phase = None;
    snap.body.peak_iteration = None;
    snap.body.phases.clear();
    snap.body.leak_bytes_per_iteration = u64::MAX;
    let text = snap.to_text();
    let parsed = snapshot::parse(&text).unwrap();
    assert_eq!(parsed.body, snap.body);
    assert!(text.contains("\n  driver: 570.86.15\n"), "{text}");
    assert!(text.contains("\n  cuda: \"12.8\"\n"), "{text}");
    assert_eq!(parsed.header, snap.header());
    assert_eq!(parsed.test(), Some(snap.test.as_str()));
    // A quote in the test name does not break the header.
    assert!(
        text.contains("expression: \"models::conv::resnet \\\"tiny\\\"\"\n"),
        "{text}"
    );
}

/// A CUDA body keeps the pool's reserved peak beside the allocated one, right after
/// `peak_bytes`; a CPU body has no such key (its text is what it was before the key
/// existed), and a CUDA body written before it reads as `None`.
#[test]
fn a_cuda_body_keeps_reserved_bytes_after_the_peak() {
    let mut body = valid_body();
    body.device_class = DeviceClass::Cuda;
    body.fidelity = Fidelity::Phase;
    body.reserved_bytes = Some(6144);
    let text = body.to_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[5], "  \"peak_bytes\": 5114,", "{text}");
    assert_eq!(lines[6], "  \"reserved_bytes\": 6144,", "{text}");
    let snap = Snapshot {
        body: body.clone(),
        ..valid_snapshot()
    };
    assert_eq!(snapshot::parse(&snap.to_text()).unwrap().body, body);
    // Reserved beyond what was allocated at the peak (no untracked here).
    assert_eq!(body.fragmentation_bytes(), Some(6144 - 5114));

    // The same body without the key: as a snapshot written before it existed.
    body.reserved_bytes = None;
    let old = body.to_text();
    assert!(!old.contains("reserved_bytes"), "{old}");
    let old_snap = Snapshot {
        body: body.clone(),
        ..valid_snapshot()
    };
    assert_eq!(snapshot::parse(&old_snap.to_text()).unwrap().body, body);
    assert_eq!(body.fragmentation_bytes(), None);
    // A CPU body never writes it.
    assert!(!valid_text().contains("reserved_bytes"));
}

#[test]
fn the_header_follows_instas_rules() {
    let text = valid_snapshot().to_text();
    // insta only recognises a file that starts like this.
    assert!(text.starts_with("---\nsource:"), "{text}");
    let header: Vec<&str> = text.lines().skip(1).take_while(|l| *l != "---").collect();
    let top_level: Vec<&str> = header
        .iter()
        .filter(|l| !l.starts_with(' '))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(top_level, ["source", "description", "expression", "info"]);
    // Everything volatile is nested under `info`.
    let info_at = header.iter().position(|l| *l == "info:").unwrap();
    let nested: Vec<&str> = header[info_at + 1..]
        .iter()
        .map(|l| l.trim_start().split(':').next().unwrap())
        .collect();
    assert_eq!(nested, ["device", "fidelity", "tool"]);
    assert!(header[info_at + 1..].iter().all(|l| l.starts_with("  ")));
    // Plain scalars, as `cargo insta accept` writes them: accepting does not churn.
    assert_eq!(header[0], "source: tests/vram.rs");
    assert_eq!(header[2], "expression: mlp_adamw");
    assert!(header[1].contains("mlp_adamw") && header[1].contains("cpu"));
}

#[test]
fn a_file_rewritten_by_cargo_insta_accept_still_parses() {
    // insta rewrites the header its own way: unquoted scalars, its own key order inside
    // `info`, an extra `snapshot_kind`, and the contents without a trailing newline.
    let mut lines = vec![
        "---",
        "source: tests/vram.rs",
        "description: \"vramtest: peak memory of mlp_adamw on cpu, by category\"",
        "expression: mlp_adamw",
        "info:",
        "  fidelity: exact",
        "  device: cpu",
        "  tool: vramtest 0.1.0",
        "snapshot_kind: text",
        "---",
    ];
    lines.extend_from_slice(&VALID_LINES[9..]);
    let text = lines.join("\n");
    assert!(!text.ends_with('\n'));
    let parsed = snapshot::parse(&text).unwrap();
    assert_eq!(parsed.body, valid_body());
    // Its header reads as ours: `snapshot_kind` is read past, `info`'s order does
    // not matter.
    assert_eq!(parsed.header, valid_snapshot().header());
}

#[test]
fn a_pending_file_with_an_assertion_line_parses() {
    let mut lines = vec!["---", "source: tests/vram.rs", "assertion_line: 42"];
    lines.extend_from_slice(&VALID_LINES[2..]);
    assert_eq!(snapshot::parse(&join(&lines)).unwrap().body, valid_body());
}

#[test]
fn crlf_line_endings_and_a_bom_are_accepted() {
    let crlf = valid_text().replace('\n', "\r\n");
    assert_eq!(snapshot::parse(&crlf).unwrap().body, valid_body());
    let bom = format!("\u{feff}{}", valid_text());
    assert_eq!(snapshot::parse(&bom).unwrap().body, valid_body());
}

// ---------------------------------------------------------------------------------------
// Malformed files: each error names the line where the problem is.

/// An edit of [`VALID_LINES`] (line numbers are 1-based, as in the margin).
#[derive(Debug, Clone, Copy)]
enum Edit {
    /// The whole file.
    Text(&'static str),
    /// Only lines `from..=to`.
    Keep(usize, usize),
    Replace(usize, &'static str),
    Remove(usize),
    InsertAfter(usize, &'static str),
}

fn edited(edit: Edit) -> String {
    let mut lines: Vec<&str> = VALID_LINES.to_vec();
    match edit {
        Edit::Text(t) => return t.to_owned(),
        Edit::Keep(from, to) => lines = lines[from - 1..to].to_vec(),
        Edit::Replace(n, l) => lines[n - 1] = l,
        Edit::Remove(n) => {
            lines.remove(n - 1);
        }
        Edit::InsertAfter(n, l) => lines.insert(n, l),
    }
    join(&lines)
}

#[test_case(Edit::Text(""), 1, &["not a snapshot file"]; "empty file")]
#[test_case(Edit::Keep(10, 55), 1, &["not a snapshot file", "`---`"]; "no header")]
#[test_case(Edit::Remove(2), 1, &["not a snapshot file", "`source:`"]; "no source line")]
#[test_case(Edit::Keep(1, 8), 8, &["never closed"]; "header not closed")]
#[test_case(Edit::Keep(1, 2), 2, &["never closed"]; "header not closed after source")]
#[test_case(Edit::Replace(4, "expression: mlp_adamw: x"), 4, &["invalid snapshot header", "hint:"]; "header not yaml")]
#[test_case(Edit::Replace(2, "source: [1, 2]"), 2, &["invalid snapshot header", "source"]; "header source not a string")]
#[test_case(Edit::Replace(10, "this is not json"), 10, &["invalid snapshot body", "expected"]; "not json")]
#[test_case(Edit::InsertAfter(11, "  \"comment\": \"hi\","), 12, &["unknown field `comment`"]; "unknown key")]
#[test_case(Edit::InsertAfter(19, "    \"vram\": 5,"), 20, &["unknown field `vram`"]; "unknown category")]
#[test_case(Edit::Remove(15), 54, &["missing field `peak_bytes`"]; "missing key at the object end")]
#[test_case(Edit::Remove(25), 26, &["missing field `workspace`"]; "missing nested key")]
#[test_case(Edit::Replace(15, "  \"peak_bytes\": \"5114\","), 15, &["invalid type: string \"5114\"", "u64"]; "string for an integer")]
#[test_case(Edit::Replace(15, "  \"peak_bytes\": 5114.5,"), 15, &["invalid type: floating point"]; "fraction of a byte")]
#[test_case(Edit::Replace(23, "    \"inputs\": -300,"), 23, &["-300", "u64"]; "negative bytes")]
#[test_case(Edit::Replace(47, "      \"phase\": \"backwards\","), 47, &["unknown variant `backwards`"]; "unknown phase")]
#[test_case(Edit::Replace(11, "  \"schema\": 3,"), 11, &["schema 3 is newer", "(schema 2)", "hint: upgrade"]; "schema 3")]
#[test_case(Edit::Remove(11), 10, &["missing integer `schema`"]; "schema missing")]
#[test_case(Edit::Replace(11, "  \"schema\": 0,"), 11, &["schema 0 is older", "re-create"]; "schema 0")]
#[test_case(Edit::Replace(15, "  \"peak_bytes\": 18446744073709551615,"), 18, &["`at_peak`", "sum to 5114 B", "not to peak_bytes 18446744073709551615 B"]; "an impossible peak")]
#[test_case(Edit::Replace(32, "    \"activations\": 400,"), 32, &["`category_peaks.activations`", "400 B, below its 500 B at the peak"]; "a category's peak below its bytes at the peak")]
#[test_case(Edit::Replace(50, "      \"peak_bytes\": 6000,"), 38, &["`phases`", "phase backward peaks at 6000 B, above peak_bytes 5114 B"]; "a phase above the peak")]
fn malformed_files_name_the_line(edit: Edit, line: usize, needles: &[&str]) {
    let text = edited(edit);
    let err = snapshot::parse(&text).unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("line {line}: ")),
        "expected line {line}: {message}\n---\n{text}"
    );
    for needle in needles {
        assert!(message.contains(needle), "missing {needle:?} in: {message}");
    }
}

#[test]
fn the_error_kinds_are_distinct() {
    assert_eq!(snapshot::parse("").unwrap_err(), ParseError::NoHeader);
    assert_eq!(
        snapshot::parse(&edited(Edit::Keep(1, 8))).unwrap_err(),
        ParseError::UnclosedHeader { line: 8 }
    );
    assert!(matches!(
        snapshot::parse(&edited(Edit::Replace(11, "  \"schema\": 7,"))).unwrap_err(),
        ParseError::Schema { found: 7, .. }
    ));
    assert!(matches!(
        snapshot::parse(&edited(Edit::Replace(14, "  \"iterations\": [],"))).unwrap_err(),
        ParseError::Body { line: 14, .. }
    ));
}

// `peak_phase`, `peak_iteration` and a phase's `iteration` may be null, but the keys are
// part of the format: a body without one is not a body this version wrote, and the parser
// is strict. (serde's derive silently reads an absent `Option` field as `None`.)
#[test_case(16, "peak_phase"; "peak_phase")]
#[test_case(17, "peak_iteration"; "peak_iteration")]
#[test_case(41, "iteration"; "a phase's iteration")]
fn a_missing_nullable_key_is_an_error_too(line: usize, key: &str) {
    let text = edited(Edit::Remove(line));
    match snapshot::parse(&text) {
        Ok(parsed) => panic!(
            "a body without `{key}` was accepted (read as {:?} / {:?})",
            parsed.body.peak_phase, parsed.body.peak_iteration
        ),
        Err(e) => assert!(
            e.to_string().contains(&format!("missing field `{key}`")),
            "{e}"
        ),
    }
}

// ---------------------------------------------------------------------------------------
// File names.

#[test_case("vram", "mlp_adamw", DeviceClass::Cpu, "vram__mlp_adamw@cpu.snap")]
#[test_case("vram", "mlp_adamw", DeviceClass::Cuda, "vram__mlp_adamw@cuda.snap")]
#[test_case("memory", "models::conv::resnet", DeviceClass::Cpu, "memory__models__conv__resnet@cpu.snap"; "module path")]
fn path_for_names_the_snapshot(target: &str, test: &str, class: DeviceClass, file: &str) {
    let crate_dir = Path::new("/src/user-crate");
    let expected: PathBuf = ["/src/user-crate", "tests", "snapshots", file]
        .iter()
        .collect();
    assert_eq!(snapshot::path_for(crate_dir, target, test, class), expected);
}

#[test]
fn pending_path_appends_new() {
    let snap = Path::new("/c/tests/snapshots/vram__mlp@cpu.snap");
    assert_eq!(
        snapshot::pending_path(snap),
        PathBuf::from("/c/tests/snapshots/vram__mlp@cpu.snap.new")
    );
}

// ---------------------------------------------------------------------------------------
// The file system.

/// A fresh scratch directory, removed when dropped.
struct Scratch(PathBuf, #[allow(dead_code)] tempfile::TempDir);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix(&format!("vramtest-model-test-{name}-"))
            .tempdir()
            .unwrap();
        Scratch(dir.path().to_owned(), dir)
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn write_atomic_creates_directories_writes_and_overwrites() {
    let scratch = Scratch::new("write");
    let dir = scratch.0.join("crate").join("tests").join("snapshots");
    assert!(!dir.exists());
    let path = dir.join("vram__mlp@cpu.snap");

    snapshot::write_atomic(&path, "first\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "first\n");
    assert_eq!(names_in(&dir), ["vram__mlp@cpu.snap"]);

    snapshot::write_atomic(&path, "second, longer than the first\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "second, longer than the first\n"
    );
    snapshot::write_atomic(&path, "3\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "3\n");
    // No temporary file is left beside it.
    assert_eq!(names_in(&dir), ["vram__mlp@cpu.snap"]);
}

#[test]
fn write_atomic_then_read_gives_the_snapshot_back() {
    let scratch = Scratch::new("read");
    let path = snapshot::path_for(&scratch.0, "vram", "a::b", DeviceClass::Cpu);
    assert!(snapshot::read(&path).unwrap().is_none());
    let snap = valid_snapshot();
    snapshot::write_atomic(&path, &snap.to_text()).unwrap();
    let parsed = snapshot::read(&path).unwrap().unwrap();
    assert_eq!(parsed.body, snap.body);
    assert_eq!(names_in(path.parent().unwrap()), ["vram__a__b@cpu.snap"]);
}

#[test]
fn write_atomic_fails_cleanly_when_the_target_is_a_directory() {
    let scratch = Scratch::new("dir-target");
    let path = scratch.0.join("taken.snap");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("inside"), "x").unwrap();
    let err = snapshot::write_atomic(&path, "text").unwrap_err();
    assert_eq!(err.path(), path.as_path());
    assert!(err.to_string().starts_with(&path.display().to_string()));
    // The temporary file was removed again.
    assert_eq!(names_in(&scratch.0), ["taken.snap"]);
}

#[test]
fn read_reports_path_and_line_of_a_malformed_file() {
    let scratch = Scratch::new("malformed");
    let path = scratch.0.join("vram__x@cpu.snap");
    std::fs::write(
        &path,
        edited(Edit::Replace(15, "  \"peak_bytes\": \"big\",")),
    )
    .unwrap();
    let err = snapshot::read(&path).unwrap_err();
    assert_eq!(err.line(), Some(15));
    assert!(matches!(err, FileError::Parse { .. }));
    let message = err.to_string();
    let prefix = format!("{}:15: invalid snapshot body", path.display());
    assert!(message.starts_with(&prefix), "{message}");
}

#[test]
fn a_file_that_is_not_utf8_is_an_error_at_its_line() {
    let scratch = Scratch::new("latin1");
    let path = scratch.0.join("vram__x@cpu.snap");
    let mut bytes = valid_text().into_bytes();
    // Line 3 (the description) gets a Latin-1 byte.
    let at = valid_text().find("vramtest:").unwrap();
    bytes[at] = 0xE9;
    std::fs::write(&path, &bytes).unwrap();
    let err = snapshot::read(&path).unwrap_err();
    assert_eq!(err.line(), Some(3));
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3: not UTF-8", path.display())),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn write_atomic_gives_the_file_the_usual_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("mode");
    let plain = scratch.0.join("plain");
    std::fs::write(&plain, "x").unwrap();
    let path = scratch.0.join("vram__x@cpu.snap");
    snapshot::write_atomic(&path, "x").unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), mode(&plain));
}

/// With `VRAMTEST_WRITE_ATOMIC_TO=<path>`: one `write_atomic`, for the system-call
/// trace of the test below.
#[test]
#[ignore = "run by write_atomic_flushes_the_directory_after_the_rename"]
fn write_atomic_once() {
    if let Some(path) = std::env::var_os("VRAMTEST_WRITE_ATOMIC_TO") {
        snapshot::write_atomic(Path::new(&path), "x\n").unwrap();
    }
}

/// The rename is durable only once the directory is flushed: a `fsync` follows the
/// rename. Traced with strace (skipped where it is not installed or cannot trace,
/// failed there where `VRAMTEST_REQUIRE_STRACE` is set, as in CI).
#[cfg(target_os = "linux")]
#[test]
fn write_atomic_flushes_the_directory_after_the_rename() {
    use std::process::Command;
    let what = "the directory flush check of write_atomic";
    if !Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        required::STRACE.skip(what, "`strace -V` does not run");
        return;
    }
    let scratch = Scratch::new("fsync");
    let path = scratch.0.join("vram__x@cpu.snap");
    let out = Command::new("strace")
        .args([
            "-f",
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2",
        ])
        .arg(std::env::current_exe().unwrap())
        .args([
            "write_atomic_once",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env("VRAMTEST_WRITE_ATOMIC_TO", &path)
        .output()
        .unwrap();
    let trace = String::from_utf8_lossy(&out.stderr);
    if trace.contains("PTRACE_TRACEME") || trace.contains("Operation not permitted") {
        required::STRACE.skip(what, &format!("it cannot trace here:\n{trace}"));
        return;
    }
    assert!(out.status.success(), "{trace}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "x\n");
    let calls: Vec<&str> = trace
        .lines()
        .filter_map(|l| {
            ["fsync(", "fdatasync(", "rename"]
                .iter()
                .find(|c| l.contains(**c))
                .copied()
        })
        .collect();
    let rename = calls
        .iter()
        .rposition(|c| *c == "rename")
        .unwrap_or_else(|| panic!("no rename:\n{trace}"));
    assert!(
        calls[..rename].iter().any(|c| c.starts_with("f")),
        "the file is not flushed before the rename:\n{trace}"
    );
    assert!(
        calls[rename + 1..].iter().any(|c| c.starts_with("f")),
        "the directory is not flushed after the rename:\n{trace}"
    );
}

// ---------------------------------------------------------------------------------------
// Properties: whatever the bytes, the parser answers with a snapshot or an error that
// names the file and a line of it; it never panics.

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Lines in `bytes`, counting a last line without a newline.
    fn lines(bytes: &[u8]) -> usize {
        bytes.iter().filter(|b| **b == b'\n').count() + 1
    }

    /// Parses `bytes` from a file and checks the answer.
    fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vram__x@cpu.snap");
        std::fs::write(&path, bytes).unwrap();
        match snapshot::read(&path) {
            Ok(Some(_)) => {}
            Ok(None) => prop_assert!(false, "the file exists"),
            Err(e) => {
                let line = e.line();
                prop_assert!(
                    line.is_some_and(|l| (1..=lines(bytes)).contains(&l)),
                    "line {line:?} of {} for {e}",
                    lines(bytes)
                );
                let prefix = format!("{}:{}:", path.display(), line.unwrap());
                prop_assert!(e.to_string().starts_with(&prefix), "{e}");
            }
        }
        Ok(())
    }

    /// A change to a valid file's bytes.
    #[derive(Debug, Clone)]
    enum Mutation {
        Flip(usize, u8),
        Insert(usize, Vec<u8>),
        Delete(usize, usize),
        Truncate(usize),
        DuplicateLine(usize),
        SwapLines(usize, usize),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
            (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
                .prop_map(|(i, b)| Mutation::Insert(i, b)),
            (any::<usize>(), 1..40usize).prop_map(|(i, n)| Mutation::Delete(i, n)),
            any::<usize>().prop_map(Mutation::Truncate),
            any::<usize>().prop_map(Mutation::DuplicateLine),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        ]
    }

    fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
        match m {
            Mutation::Flip(i, b) => {
                let i = at(*i, bytes.len());
                if let Some(x) = bytes.get_mut(i) {
                    *x = *b;
                }
            }
            Mutation::Insert(i, new) => {
                let i = at(*i, bytes.len() + 1);
                bytes.splice(i..i, new.iter().copied());
            }
            Mutation::Delete(i, n) => {
                let i = at(*i, bytes.len());
                let end = (i + n).min(bytes.len());
                bytes.drain(i..end);
            }
            Mutation::Truncate(n) => bytes.truncate(at(*n, bytes.len() + 1)),
            Mutation::DuplicateLine(i) | Mutation::SwapLines(i, _) => {
                let mut lines: Vec<Vec<u8>> = bytes
                    .split_inclusive(|b| *b == b'\n')
                    .map(<[u8]>::to_vec)
                    .collect();
                let i = at(*i, lines.len());
                // Nothing to swap or duplicate once the text is gone.
                match m {
                    _ if lines.is_empty() => {}
                    Mutation::SwapLines(_, j) => {
                        let j = at(*j, lines.len());
                        lines.swap(i, j);
                    }
                    _ => lines.insert(i, lines[i].clone()),
                }
                *bytes = lines.concat();
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn arbitrary_bytes_are_a_snapshot_or_an_error_at_a_line(
            bytes in prop::collection::vec(any::<u8>(), 0..512)
        ) {
            check(&bytes)?;
        }

        #[test]
        fn arbitrary_text_after_a_valid_header_is_an_error_at_a_line(
            body in "[ -~\n]{0,300}"
        ) {
            let text = valid_text();
            let header_end = text.find("---\n{").unwrap() + 4;
            check(format!("{}{body}", &text[..header_end]).as_bytes())?;
        }

        #[test]
        fn mutated_valid_snapshots_are_a_snapshot_or_an_error_at_a_line(
            mutations in prop::collection::vec(mutation(), 1..4)
        ) {
            let mut bytes = valid_text().into_bytes();
            for m in &mutations {
                apply(&mut bytes, m);
            }
            check(&bytes)?;
        }
    }
}

// ---------------------------------------------------------------------------------------
// The committed snapshots.

/// The harness's snapshot files committed in this repository, each with whether this
/// version wrote it: the fixtures' (`true`), and the CLI tests' data, written by an
/// earlier release that quoted every header scalar (`false`).
fn committed_snapshots() -> Vec<(PathBuf, bool)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<(PathBuf, bool)> = std::fs::read_dir(root.join("fixtures"))
        .unwrap()
        .map(|e| (e.unwrap().path().join("tests").join("snapshots"), true))
        .collect();
    dirs.push((
        root.join("cargo-vramtest").join("tests").join("data"),
        false,
    ));
    let mut files: Vec<(PathBuf, bool)> = dirs
        .iter()
        .filter_map(|(d, current)| Some((std::fs::read_dir(d).ok()?, *current)))
        .flat_map(|(entries, current)| entries.map(move |e| (e.unwrap().path(), current)))
        .filter(|(p, _)| p.extension().is_some_and(|x| x == "snap"))
        .collect();
    files.sort();
    files
}

/// Each committed snapshot reads into a typed header and a body that give the same
/// header again, and the fixtures' files byte for byte: a run that writes the same
/// figures leaves the file as it is.
#[test]
fn every_committed_snapshot_is_written_again_byte_for_byte() {
    let files = committed_snapshots();
    assert!(
        files.iter().filter(|(_, current)| *current).count() >= 10,
        "{files:?}"
    );
    assert!(files.iter().any(|(_, current)| !current), "{files:?}");
    for (path, current) in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let parsed = snapshot::read(&path)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap();
        let header = parsed.header.clone();
        let again = Snapshot {
            source: header.source,
            test: header.expression.expect("an expression"),
            info: header.info.expect("an info"),
            body: parsed.body.clone(),
        };
        assert_eq!(again.header(), parsed.header, "{}", path.display());
        // A batch sweep's older `scaling` reads migrated, and is written in today's shape
        // (only when a run writes the file anyway): the same body read back.
        let migrated = parsed.body.sweep().is_some_and(|s| s.migrated);
        if current && !migrated {
            assert_eq!(again.to_text(), text, "{}", path.display());
        } else {
            // The same header in today's quoting, or a migrated body in today's shape.
            assert_ne!(again.to_text(), text, "{}", path.display());
            let reread = snapshot::parse(&again.to_text()).unwrap();
            let mut body = parsed.body;
            if let Some(sweep) = body.scaling.as_mut() {
                sweep.migrated = false;
            }
            assert_eq!((reread.header, reread.body), (parsed.header, body));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Migrating bodies of earlier schemas.

/// A body of this version's schema reads as it is, with no note.
#[test]
fn a_current_body_takes_no_migration_step() {
    let parsed = snapshot::parse(&valid_text()).unwrap();
    assert!(parsed.migrated.is_empty());
    let value: serde_json::Value = serde_json::from_str(&valid_body().to_text()).unwrap();
    let (same, notes) =
        migrate::migrate(migrate::MIGRATIONS, value.clone(), SCHEMA, SCHEMA).unwrap();
    assert_eq!((same, notes), (value, Vec::new()));
}

/// Every schema this version reads reaches this version's, one step at a time.
#[test]
fn the_migration_steps_form_a_chain_to_this_schema() {
    for (i, step) in migrate::MIGRATIONS.iter().enumerate() {
        assert_eq!(
            step.from + (migrate::MIGRATIONS.len() - i) as u32,
            snapshot::READS_AS_WRITTEN_SINCE
        );
    }
}

/// A category added after a snapshot was written: the step that adds it reads the older
/// body with 0 B of it, says so, and the strict reading then takes the body. Shown with
/// `untracked` playing the new category, in a body of a schema before this one.
#[test]
fn a_body_written_before_a_category_existed_reads_with_0_for_it() {
    const NOTE: &str = "`untracked` did not exist yet: read as 0 B";
    let steps = [migrate::Migration {
        from: SCHEMA - 1,
        note: NOTE,
        apply: |body| migrate::add_category(body, Category::Untracked),
    }];
    // The valid body without `untracked`, as the schema before would have written it.
    let mut older: serde_json::Value = serde_json::from_str(&valid_body().to_text()).unwrap();
    older["schema"] = (SCHEMA - 1).into();
    for key in ["at_peak", "category_peaks"] {
        older[key].as_object_mut().unwrap().remove("untracked");
    }
    // Without the step, the strict reading refuses it, naming the category.
    let strict = serde_json::from_value::<Body>(older.clone()).unwrap_err();
    assert!(
        strict.to_string().contains("missing field `untracked`"),
        "{strict}"
    );

    let (migrated, notes) = migrate::migrate(&steps, older.clone(), SCHEMA - 1, SCHEMA).unwrap();
    assert_eq!(notes, [NOTE]);
    let body: Body = serde_json::from_value(migrated).unwrap();
    assert_eq!(body.at_peak[Category::Untracked], 0);
    assert_eq!(body.category_peaks[Category::Untracked], 0);
    // Everything else is the body as written (whose `untracked` was 0 already).
    assert_eq!(body, valid_body());
    // The step does not overwrite a category the body has.
    let mut with = older.clone();
    with["at_peak"]["untracked"] = 7.into();
    let (kept, _) = migrate::migrate(&steps, with, SCHEMA - 1, SCHEMA).unwrap();
    assert_eq!(kept["at_peak"]["untracked"], 7);
    // A schema without a step from it, or newer than this one, has no way here.
    assert!(migrate::migrate(&[], older.clone(), SCHEMA - 1, SCHEMA).is_none());
    assert!(migrate::migrate(&steps, older, SCHEMA + 1, SCHEMA).is_none());
}

/// The repository's root.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The committed snapshots that keep levers' savings.
const WITH_SAVINGS: [&str; 2] = [
    "fixtures/burn-transformer/tests/snapshots/vram__checkpointing@cpu.snap",
    "fixtures/candle-transformer/tests/snapshots/vram__levers@cpu.snap",
];

/// `text` with its JSON body rewritten by `edit` (the header kept).
fn edit_body(text: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let close = text[4..].find("\n---\n").unwrap() + 4 + 5;
    let (header, body) = text.split_at(close);
    let mut value: serde_json::Value = serde_json::from_str(body).unwrap();
    edit(&mut value);
    format!(
        "{header}{}\n",
        serde_json::to_string_pretty(&value).unwrap()
    )
}

/// Every `.snap` under `dir`, outside build directories.
fn snap_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() && name != "target" && name != ".git" {
            snap_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "snap") {
            out.push(path);
        }
    }
}

#[test]
fn every_committed_snapshot_reads_and_each_saving_is_its_fits() {
    let mut files = Vec::new();
    snap_files(&repo_root().join("fixtures"), &mut files);
    let mut savings = 0;
    for path in &files {
        let parsed = snapshot::read(path)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap();
        let Some(sweep) = parsed.body.sweep() else {
            continue;
        };
        for v in &sweep.variants {
            let Some(recorded) = &v.saving else { continue };
            let fitted = sweep.saving_of(&v.sweep, &recorded.at).unwrap();
            assert_eq!(recorded, &fitted, "{}", path.display());
            savings += 1;
        }
    }
    assert!(savings >= WITH_SAVINGS.len(), "{savings}");
}

#[test]
fn a_saving_that_contradicts_the_fits_is_an_error_naming_the_field() {
    for rel in WITH_SAVINGS {
        let text = std::fs::read_to_string(repo_root().join(rel)).unwrap();
        let sweep = snapshot::parse(&text).unwrap().body.scaling.unwrap();
        let v = &sweep.variants[0];
        let recorded = v.saving.clone().unwrap();
        let fitted = sweep.saving_of(&v.sweep, &recorded.at).unwrap();
        // The lever's saving zeroed by hand: the peak's, then a category's.
        let largest = Category::ALL
            .into_iter()
            .max_by_key(|c| fitted.of(Some(*c)).0.unsigned_abs())
            .unwrap();
        for (key, name, bytes) in [
            ("peak_bytes", "peak_bytes".to_owned(), fitted.peak_bytes),
            (
                "category_bytes",
                format!("category_bytes.{largest}"),
                fitted.of(Some(largest)).0,
            ),
        ] {
            let edited = edit_body(&text, |b| {
                let saving = &mut b["scaling"]["variants"][0]["saving"];
                match key {
                    "peak_bytes" => saving[key] = 0.into(),
                    _ => saving[key][largest.as_str()] = 0.into(),
                }
            });
            let err = snapshot::parse(&edited).unwrap_err();
            let ParseError::Inconsistent {
                field,
                message,
                line,
            } = &err
            else {
                panic!("{rel}: {err}")
            };
            assert_eq!(field, &format!("scaling.variants[0].saving.{name}"));
            assert!(
                message.starts_with(&format!(
                    "0 B, but the snapshot's own fits give {bytes} B at ("
                )),
                "{message}"
            );
            // The line of the zeroed figure.
            let shown = edited.lines().nth(line - 1).unwrap();
            let leaf = name.rsplit('.').next().unwrap();
            assert!(shown.contains(&format!("\"{leaf}\": 0")), "{line}: {shown}");
        }
        // Within 1% of the baseline's peak, a figure an older release rounded
        // otherwise still reads.
        let edited = edit_body(&text, |b| {
            let saving = &mut b["scaling"]["variants"][0]["saving"];
            saving["peak_bytes"] = (fitted.peak_bytes + 1).into();
        });
        snapshot::parse(&edited).unwrap();
        // A point with an axis the sweep does not have.
        let edited = edit_body(&text, |b| {
            b["scaling"]["variants"][0]["saving"]["at"]["depth"] = 4.into();
        });
        let err = snapshot::parse(&edited).unwrap_err();
        assert!(
            matches!(&err, ParseError::Inconsistent { field, .. } if field == "scaling.variants[0].saving.at"),
            "{err}"
        );
    }
}

#[test]
fn a_cpu_time_ratio_out_of_range_is_an_error_naming_the_field() {
    let text = std::fs::read_to_string(repo_root().join(WITH_SAVINGS[0])).unwrap();
    for (bad, shown) in [
        (serde_json::json!(1e308), "1e308"),
        (0.into(), "0"),
        ((-1.5).into(), "-1.5"),
    ] {
        let edited = edit_body(&text, |b| {
            b["scaling"]["variants"][0]["cpu_time_ratio"] = bad;
        });
        let err = snapshot::parse(&edited).unwrap_err();
        let ParseError::Inconsistent { field, message, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(field, "scaling.variants[0].cpu_time_ratio");
        assert!(
            message.starts_with(&format!("{shown} is no CPU time ratio"))
                && message.contains("between 0.001 and 1000"),
            "{message}"
        );
        let at = edited.lines().nth(err.line() - 1).unwrap();
        assert!(at.contains("\"cpu_time_ratio\""), "{}: {at}", err.line());
    }
}
