//! The full-size prediction on a real model (`fixtures/candle-transformer`): a decoder in
//! candle swept over batch, sequence, layers and hidden size, its figures predicted at
//! a configuration at least twice outside the grid on layers and sequence length, and
//! that configuration measured directly with `cargo vramtest measure`. Every tensor
//! category must be within 3% of the measurement, the peak within 5%.

mod common;

use common::{Fixture, Ran, assert_code};
use serde_json::Value;
use vramtest_model::axes::Point;
use vramtest_model::pool::DEFAULT_GRANULARITY;
use vramtest_model::report::{Status, TestReport};
use vramtest_model::{Body, Category};

/// The configuration predicted and measured: 3× the grid's layers, 2× its sequence.
const AT: [(&str, u64); 4] = [("batch", 2), ("hidden", 32), ("layers", 6), ("seq", 320)];

/// The categories that hold tensors, each held to 3%.
const TENSORS: [Category; 6] = Category::TENSORS;

/// `|predicted − measured| / measured`, in percent.
fn off(predicted: u64, measured: u64) -> f64 {
    (predicted as f64 - measured as f64).abs() / measured as f64 * 100.0
}

/// Runs `decoder` in the copy's test binary on the CPU (`cargo test`), writing nothing
/// unless `envs` says otherwise; returns its report.
fn decoder(f: &Fixture, envs: &[(&str, &str)]) -> TestReport {
    let reports = tempfile::tempdir().unwrap();
    let out = f
        .cargo(&["test", "--test", "vram", "--", "decoder", "--exact"])
        .env("VRAMTEST_REPORT_DIR", reports.path())
        .env("VRAMTEST_DEVICE", "cpu")
        .env("VRAMTEST_UPDATE", "no")
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    let ran = Ran::from(out);
    let file = reports.path().join("vram__decoder.json");
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", file.display(), ran.text()));
    serde_json::from_str(&text).unwrap()
}

/// Category `c`'s bytes on one side (`measured`, `predicted`) of `measure`'s JSON.
fn bytes(side: &Value, c: Category) -> u64 {
    side["category_bytes"][c.as_str()]
        .as_u64()
        .unwrap_or_else(|| panic!("no {c} in {side}"))
}

#[test]
#[ignore = "slow, builds candle and runs 37 processes: cargo test -p cargo-vramtest --test candle_transformer -- --ignored"]
fn a_configuration_outside_the_grid_is_predicted_within_3_percent() {
    let f = Fixture::copy(
        &common::repo().join("fixtures").join("candle-transformer"),
        "candle-transformer",
    );

    // The sweep, fitted in the test binary as a user's run fits it, and committed.
    let report = decoder(&f, &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(report.status, Status::New, "{}", report.message);
    let snap = f.snapshots().join("vram__decoder@cpu.snap");
    let swept: Body = vramtest_model::snapshot::read(&snap).unwrap().unwrap().body;
    let sweep = swept.sweep().expect("a sweep over named axes");
    let at: Point = AT.iter().map(|&(k, v)| (k.to_owned(), v)).collect();
    for axis in ["layers", "seq"] {
        let largest = sweep.axes[axis].iter().max().unwrap();
        assert!(
            at[axis] >= 2 * largest,
            "{axis} {} is not 2× outside the grid (up to {largest})",
            at[axis]
        );
    }
    let predicted = sweep.estimate(&at, DEFAULT_GRANULARITY).unwrap();
    // The pool's figures have their own fallbacks; `workspace` holds no tensor (see
    // below), and its bytes come and go with the batch and sequence with no polynomial
    // behind them: a fit through every one of its (batch, seq) combinations is flagged
    // as interpolating, which is right. Every other figure must be trusted.
    let trusted: Vec<&String> = predicted
        .flagged
        .iter()
        .filter(|f| !f.starts_with("allocated") && !f.starts_with("reserved"))
        .filter(|f| *f != "workspace")
        .collect();
    assert!(
        trusted.is_empty(),
        "flagged fits: {trusted:?}\n{:#?}",
        predicted.terms
    );

    // The same configuration, measured: one process, nothing written.
    let text = AT
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let before = std::fs::read_to_string(&snap).unwrap();
    let args = ["measure", "decoder", "--at", &text, "--device", "cpu"];
    let json: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--message-format", "json"])
        .collect();
    let ran = f.run(&json, &[]);
    let v: Value =
        serde_json::from_str(ran.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", ran.text()));
    assert_eq!(std::fs::read_to_string(&snap).unwrap(), before);
    assert_eq!(f.snapshot_files(), ["vram__decoder@cpu.snap"]);

    // The prediction `measure` shows is the snapshot's; the verdict is checked here
    // from the figures.
    for c in Category::ALL {
        assert_eq!(
            bytes(&v["predicted"], c),
            predicted.category_bytes[&c],
            "{c}"
        );
    }
    assert_eq!(v["predicted"]["peak_bytes"], predicted.peak_bytes);
    let mut table = format!(
        "{:<16} {:>12} {:>12} {:>7}\n",
        "", "measured", "predicted", "off"
    );
    let mut misses = Vec::new();
    for c in Category::ALL {
        let (m, p) = (bytes(&v["measured"], c), bytes(&v["predicted"], c));
        table += &format!(
            "{:<16} {m:>12} {p:>12} {:>6.3}%\n",
            c.as_str(),
            if m == 0 { 0.0 } else { off(p, m) }
        );
        if m == 0 && p != 0 {
            misses.push(format!("{c}: measured 0, predicted {p} B"));
        }
        if TENSORS.contains(&c) && m > 0 && off(p, m) > 3.0 {
            misses.push(format!("{c}: off by {:.2}%", off(p, m)));
        }
    }
    let m = v["measured"]["peak_bytes"].as_u64().unwrap();
    let p = predicted.peak_bytes;
    table += &format!("{:<16} {m:>12} {p:>12} {:>6.3}%\n", "peak", off(p, m));
    if off(p, m) > 5.0 {
        misses.push(format!("peak: off by {:.2}%", off(p, m)));
    }
    // `workspace` holds no tensor: crossbeam's queue blocks of rayon's pool, which
    // candle hands work to, a few KiB whatever the model. It stays negligible, measured
    // and predicted.
    let workspace = bytes(&v["measured"], Category::Workspace)
        .max(predicted.category_bytes[&Category::Workspace]);
    if workspace * 10_000 > m {
        misses.push(format!(
            "workspace: {workspace} B is over 0.01% of the peak"
        ));
    }
    eprintln!("at {text}:\n{table}");
    assert!(
        misses.is_empty(),
        "{}\n{table}\nformulas: {:#?}",
        misses.join("\n"),
        predicted.terms
    );
    // Within every limit, `measure` exits 0, and its table says so.
    assert_code(&ran, 0);
    let human = f.run(&args, &[]);
    assert_code(&human, 0);
    eprintln!("{}", human.stdout);
    assert!(
        human.stdout.contains("the prediction holds"),
        "{}",
        human.text()
    );

    // Two more activations kept per layer: against the snapshot the sweep just wrote,
    // the target gate fails on activations and names the term that grew, one that
    // grows with every layer.
    let report = decoder(&f, &[("CANDLE_TRANSFORMER_BLOAT", "activations")]);
    assert_eq!(report.status, Status::Regressed, "{}", report.message);
    let target = sweep.target.as_ref().expect("the fixture names a target");
    let line = report
        .message
        .lines()
        .find(|l| l.contains("activations") && l.contains("target ("))
        .unwrap_or_else(|| panic!("no target line for activations:\n{}", report.message));
    eprintln!("{line}");
    let grew = line
        .rsplit_once("activations: ")
        .map(|(_, why)| why)
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        grew.starts_with('+') && grew.contains("batch·seq·layers·hidden"),
        "the term that grew is per layer, per token, per hidden unit: {line}"
    );
    assert!(
        line.contains(&vramtest_model::sweep::show_point(&target.at)),
        "{line}"
    );
}
