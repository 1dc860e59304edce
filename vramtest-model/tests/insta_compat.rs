//! Our snapshot files are insta snapshots, proven with insta's own code: insta's reader
//! (`insta::Snapshot::from_file`, what `cargo insta review` and `pending-snapshots` use)
//! reads every kind of file the harness writes, and our reader reads the files insta
//! itself writes (`Snapshot::save`, which `cargo insta accept` uses to rewrite a
//! pending file as the snapshot).
//!
//! Every case runs with and without a batch sweep's `scaling` key.

use insta::TextSnapshotKind;
use insta::internals::{Content, TextSnapshotContents};
use std::path::{Path, PathBuf};
use test_case::test_case;
use vramtest_model::axes::Grid;
use vramtest_model::sites::{Site, SiteKey};
use vramtest_model::snapshot::{self, Info};
use vramtest_model::sweep::{GridRun, Sweep};
use vramtest_model::{
    Body, Category, CategoryBytes, DeviceClass, Fidelity, Phase, PhaseRecord, Snapshot,
};

/// A batch sweep's model, as `#[vramtest(batch = [32, 64, 128], budget = ..)]` records
/// it: a sweep over the one axis `batch`, fitted from points on known lines.
fn scaling() -> Sweep {
    let grid = Grid::new([("batch", vec![32, 64, 128])]).unwrap();
    let runs: Vec<GridRun> = [32u64, 64, 128]
        .map(|b| {
            let category_peaks = CategoryBytes::from([
                (Category::Activations, 5_372 + 6_360 * b),
                (Category::Inputs, 504 + 3_140 * b),
                (Category::Workspace, 3_689_458 - 11_703 * b),
            ]);
            GridRun {
                point: [("batch".to_owned(), b)].into(),
                peak_bytes: 10_168_114 + 9_253 * b,
                category_peaks,
                phase_peaks: Default::default(),
                phase_temporaries: Default::default(),
                phase_moments: Default::default(),
                peak_outside_phases: true,
                pool: None,
            }
        })
        .into();
    Sweep::fit(&grid, &runs).unwrap()
}

/// A body with every key filled in, as a measurement on `class` would give, with a
/// sweep's `scaling` key or without.
fn body_of(class: DeviceClass, sweep: bool) -> Body {
    Body {
        scaling: sweep.then(scaling),
        ..body(class)
    }
}

/// A body with every key filled in, as a measurement on `class` would give.
fn body(class: DeviceClass) -> Body {
    let at_peak = CategoryBytes::from([
        (Category::Parameters, 1_629_948),
        (Category::Gradients, 3_412_695),
        (Category::OptimizerState, 3_258_512),
        (Category::Activations, 412_412),
        (Category::Inputs, 201_464),
        (Category::Temporaries, 22_482_432),
        (Category::Workspace, 2_116_232),
        (
            Category::Untracked,
            if class == DeviceClass::Cuda {
                8_388_608
            } else {
                0
            },
        ),
    ]);
    let mut category_peaks = at_peak;
    category_peaks[Category::Temporaries] += 4096;
    Body {
        schema: snapshot::SCHEMA,
        device_class: class,
        fidelity: match class {
            DeviceClass::Cpu => Fidelity::Exact,
            DeviceClass::Cuda => Fidelity::Phase,
        },
        iterations: 3,
        peak_bytes: at_peak.total(),
        // The pool's reserved peak, 34 MiB: on a device only.
        reserved_bytes: (class == DeviceClass::Cuda).then_some(35_651_584),
        peak_phase: Some(Phase::OptimizerStep),
        peak_iteration: Some(0),
        at_peak,
        category_peaks,
        phases: vec![
            PhaseRecord {
                phase: Phase::Params,
                iteration: None,
                start_bytes: 0,
                peak_bytes: 1_629_948,
                end_bytes: 1_629_948,
            },
            PhaseRecord {
                phase: Phase::Forward,
                iteration: Some(2),
                start_bytes: 8_000_000,
                peak_bytes: 8_412_412,
                end_bytes: 8_400_000,
            },
        ],
        leak_bytes_per_iteration: 0,
        cpu_only: None,
        scaling: None,
    }
}

fn info(class: DeviceClass) -> Info {
    match class {
        DeviceClass::Cpu => Info {
            device: "cpu".into(),
            fidelity: Fidelity::Exact,
            tool: "vramtest 0.1.0".into(),
            driver: None,
            cuda: None,
            sites: sites(),
            gradient_check: Vec::new(),
            machine: Some(vramtest_model::snapshot::CpuFingerprint {
                cpu: "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz".into(),
                isa: "avx512".into(),
                caches: "L1d 48 KiB, L2 2048 KiB, L3 107520 KiB".into(),
                threads: 2,
            }),
        },
        DeviceClass::Cuda => Info {
            device: "NVIDIA H100 80GB HBM3".into(),
            fidelity: Fidelity::Phase,
            tool: "vramtest 0.1.0".into(),
            driver: Some("550.54.15".into()),
            cuda: Some("12.4".into()),
            sites: Vec::new(),
            gradient_check: Vec::new(),
            machine: None,
        },
    }
}

/// Call sites as a run that captured them keeps them: names with `<`, `>`, `:`, spaces
/// and quotes, a site whose operation is unknown.
fn sites() -> Vec<(Category, Vec<Site>)> {
    let site = |bytes, location: &str, operation: Option<&str>| Site {
        bytes,
        count: 2,
        key: SiteKey {
            operation: operation.map(str::to_owned),
            location: Some(location.to_owned()),
            callers: None,
        },
    };
    vec![
        (
            Category::Activations,
            vec![
                site(
                    524_288,
                    "src/lib.rs:79",
                    Some("candle_core::tensor::Tensor::cat"),
                ),
                site(
                    131_072,
                    "src/model's.rs:12",
                    Some(
                        "<candle_core::tensor::Tensor as core::ops::arith::Add<&candle_core::tensor::Tensor>>::add",
                    ),
                ),
            ],
        ),
        (
            Category::Temporaries,
            vec![site(64, "tests/vram.rs:30", None)],
        ),
    ]
}

/// A scratch directory of its own for each case.
fn scratch(case: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "vramtest-insta-compat-{case}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `snap` where and how the harness does: `path_for`, `.snap.new` beside it
/// when pending, `write_atomic` of `to_text`.
fn write_like_the_harness(dir: &Path, snap: &Snapshot, pending: bool) -> PathBuf {
    let committed = snapshot::path_for(dir, "vram", &snap.test, snap.body.device_class);
    let path = if pending {
        snapshot::pending_path(&committed)
    } else {
        committed
    };
    snapshot::write_atomic(&path, &snap.to_text()).unwrap();
    path
}

/// The `info` map as insta read it: key → string.
/// `sites` becomes one entry per category, its lines joined by newlines.
fn info_of(content: Option<&Content>) -> Vec<(String, String)> {
    let Some(Content::Map(entries)) = content.map(Content::resolve_inner) else {
        panic!("info is not a map: {content:?}");
    };
    let mut out = Vec::new();
    for (k, v) in entries {
        let key = k.as_str().expect("string keys").to_owned();
        if key != "sites" {
            let value = match v.resolve_inner() {
                Content::String(s) => s.clone(),
                Content::U64(n) => n.to_string(),
                Content::I64(n) => n.to_string(),
                other => panic!("{key}: not a string or an integer: {other:?}"),
            };
            out.push((key, value));
            continue;
        }
        let Content::Map(categories) = v.resolve_inner() else {
            panic!("sites is not a map: {v:?}");
        };
        for (category, lines) in categories {
            let Content::Seq(lines) = lines.resolve_inner() else {
                panic!("the sites of {category:?} are not a list: {lines:?}");
            };
            let lines: Vec<&str> = lines
                .iter()
                .map(|l| l.as_str().expect("string lines"))
                .collect();
            out.push((
                format!("sites.{}", category.as_str().expect("string keys")),
                lines.join("\n"),
            ));
        }
    }
    out
}

fn expected_info(info: &Info) -> Vec<(String, String)> {
    let mut out = vec![
        ("device".to_owned(), info.device.clone()),
        ("fidelity".to_owned(), info.fidelity.to_string()),
        ("tool".to_owned(), info.tool.clone()),
    ];
    if let Some(d) = &info.driver {
        out.push(("driver".into(), d.clone()));
    }
    if let Some(c) = &info.cuda {
        out.push(("cuda".into(), c.clone()));
    }
    if let Some(m) = &info.machine {
        out.push(("cpu".into(), m.cpu.clone()));
        out.push(("isa".into(), m.isa.clone()));
        out.push(("caches".into(), m.caches.clone()));
        out.push(("threads".into(), m.threads.to_string()));
    }
    for (category, sites) in &info.sites {
        let lines: Vec<String> = sites.iter().map(Site::to_line).collect();
        out.push((format!("sites.{category}"), lines.join("\n")));
    }
    out
}

#[test_case(DeviceClass::Cpu, "mlp_adamw", false, false; "cpu snapshot")]
#[test_case(DeviceClass::Cpu, "mlp_adamw", true, false; "cpu pending result")]
#[test_case(DeviceClass::Cuda, "mlp_adamw", false, false; "cuda snapshot with driver info")]
#[test_case(DeviceClass::Cuda, "mlp_adamw", true, false; "cuda pending result with driver info")]
#[test_case(DeviceClass::Cpu, "nested::mlp_sgd", false, false; "a test in a module")]
#[test_case(DeviceClass::Cpu, "mlp_sgd_sweep", false, true; "cpu snapshot of a batch sweep")]
#[test_case(DeviceClass::Cpu, "mlp_sgd_sweep", true, true; "cpu pending result of a batch sweep")]
#[test_case(DeviceClass::Cuda, "mlp_sgd_sweep", false, true; "cuda snapshot of a batch sweep")]
fn insta_reads_what_the_harness_writes(class: DeviceClass, test: &str, pending: bool, sweep: bool) {
    let dir = scratch(&format!(
        "read-{class}-{}-{pending}-{sweep}",
        test.replace("::", "_")
    ));
    let snap = Snapshot {
        source: "tests/vram.rs".into(),
        test: test.into(),
        info: info(class),
        body: body_of(class, sweep),
    };
    assert_eq!(snap.body.to_text().contains("\"scaling\""), sweep);
    assert_eq!(
        snap.body
            .to_text()
            .contains("\"reserved_bytes\": 35651584,"),
        class == DeviceClass::Cuda
    );
    let path = write_like_the_harness(&dir, &snap, pending);

    let read = insta::Snapshot::from_file(&path)
        .unwrap_or_else(|e| panic!("insta cannot read {}: {e}", path.display()));
    let meta = read.metadata();
    assert_eq!(meta.source(), Some("tests/vram.rs"));
    assert_eq!(meta.expression(), Some(test));
    assert_eq!(
        meta.description(),
        Some(format!("vramtest: peak memory of {test} on {class}, by category").as_str())
    );
    assert_eq!(meta.assertion_line(), None);
    assert_eq!(info_of(meta.private_info()), expected_info(&snap.info));

    // The contents, as text, are our body byte for byte (insta's reader drops the
    // file's last newline).
    let ours = snap.body.to_text();
    let text = read.contents().as_text().expect("a text snapshot");
    assert!(
        text.matches_fully(&TextSnapshotContents::new(
            ours.strip_suffix('\n').unwrap().to_owned(),
            TextSnapshotKind::File
        )),
        "insta read:\n{text}\nours:\n{ours}"
    );
    assert_eq!(format!("{text}\n"), ours);

    // insta names a snapshot by its file as it names its own: the module path (the
    // target, then the test's modules), then the name (with the device class).
    let (modules, name) = match test.rsplit_once("::") {
        Some((modules, name)) => (format!("vram__{}", modules.replace("::", "__")), name),
        None => ("vram".to_owned(), test),
    };
    assert_eq!(read.module_name(), modules);
    let suffix = if pending { ".snap" } else { "" };
    assert_eq!(
        read.snapshot_name(),
        Some(format!("{name}@{class}{suffix}").as_str())
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test_case(DeviceClass::Cpu, false; "cpu")]
#[test_case(DeviceClass::Cuda, false; "cuda")]
#[test_case(DeviceClass::Cpu, true; "cpu batch sweep")]
fn we_read_what_insta_writes(class: DeviceClass, sweep: bool) {
    let dir = scratch(&format!("write-{class}-{sweep}"));
    let snap = Snapshot {
        source: "tests/vram.rs".into(),
        test: "mlp_adamw".into(),
        info: info(class),
        body: body_of(class, sweep),
    };
    let pending = write_like_the_harness(&dir, &snap, true);

    // `cargo insta accept`: insta reads the pending file and writes the snapshot with
    // its own serializer (header keys in its order, its quoting).
    let committed = pending.with_extension("");
    insta::Snapshot::from_file(&pending)
        .unwrap()
        .save(&committed)
        .unwrap();
    let parsed = snapshot::read(&committed)
        .unwrap()
        .expect("the file exists");
    assert_eq!(parsed.body, snap.body);
    // The header reads back as the one that was written, `info` included.
    assert_eq!(parsed.header, snap.header());
    assert_eq!(parsed.sites(), snap.info.sites.as_slice());
    assert_eq!(parsed.machine(), snap.info.machine.as_ref());
    // insta writes the header as we do: accepting does not churn the file.
    assert_eq!(std::fs::read_to_string(&committed).unwrap(), snap.to_text());

    // A pending file as insta writes it carries `assertion_line`, and `info` may hold
    // keys we never wrote: keys the header does not know are read past, the body is read strictly.
    let insta_pending = snap
        .to_text()
        .replacen(
            "source: tests/vram.rs\n",
            "source: tests/vram.rs\nassertion_line: 42\n",
            1,
        )
        .replacen("info:\n", "info:\n  runner: gpu-7\n", 1);
    assert!(
        insta_pending.contains("assertion_line: 42\n"),
        "{insta_pending}"
    );
    let parsed = snapshot::parse(&insta_pending).unwrap();
    assert_eq!(parsed.body, snap.body);
    assert_eq!(parsed.header.assertion_line, Some(42));
    assert_eq!(parsed.header.info, Some(snap.info.clone()));
    // insta itself agrees this is one of its files.
    let file = dir.join("vram__with_line@cpu.snap.new");
    std::fs::write(&file, &insta_pending).unwrap();
    let read = insta::Snapshot::from_file(&file).unwrap();
    assert_eq!(read.metadata().assertion_line(), Some(42));
    std::fs::remove_dir_all(dir).unwrap();
}
