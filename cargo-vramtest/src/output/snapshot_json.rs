//! `show TEST --message-format json` without `--at`: one object per snapshot with its
//! categories, phases, call sites, hints and the checks against the formulas, the
//! gradient check with its cause; and the gradient check's section of `show`'s text.

use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use vramtest_model::Category;
use vramtest_model::explain;
use vramtest_model::gradient_check::Finding;
use vramtest_model::snapshot::Parsed;

/// The object of one snapshot: `test` (`package::target::test`), `class`,
/// `snapshot` (its path), `pending`, the body's figures, `sites`, `hints` and
/// `checks`.
pub fn object(test: &str, class: &str, path: &str, pending: bool, parsed: &Parsed) -> Value {
    let body = &parsed.body;
    let mut figures = match serde_json::to_value(body) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    // What `show --at` answers for a sweep; this object is the measured figures.
    figures.remove("scaling");
    let findings: &[Finding] = parsed
        .header
        .info
        .as_ref()
        .map_or(&[], |i| i.gradient_check.as_slice());
    let sites: Map<String, Value> = parsed
        .sites()
        .iter()
        .map(|(category, sites)| {
            (
                category.as_str().to_owned(),
                sites
                    .iter()
                    .map(|s| {
                        json!({
                            "bytes": s.bytes,
                            "count": s.count,
                            "location": s.key.location,
                            "operation": s.key.operation,
                            "callers": s.key.callers,
                        })
                    })
                    .collect(),
            )
        })
        .collect();
    let mut out = Map::new();
    out.insert("test".into(), json!(test));
    out.insert("class".into(), json!(class));
    out.insert("snapshot".into(), json!(path));
    out.insert("pending".into(), json!(pending));
    out.extend(figures);
    out.insert("sites".into(), Value::Object(sites));
    out.insert("hints".into(), json!(super::fits::hints(body)));
    out.insert("checks".into(), Value::Array(checks(body, findings)));
    Value::Object(out)
}

/// The checks against the formulas; the gradients' with its `cause` (the largest
/// finding's name, `null` without one), its `fix` and every finding in `causes`.
fn checks(body: &vramtest_model::Body, findings: &[Finding]) -> Vec<Value> {
    explain::ratios(&body.category_peaks)
        .iter()
        .map(|r| {
            let mine: Vec<&Finding> = if r.category == Category::Gradients {
                findings.iter().collect()
            } else {
                Vec::new()
            };
            let main = mine.iter().max_by_key(|f| f.bytes);
            json!({
                "category": r.category.as_str(),
                "base": r.base.as_str(),
                "multiple": r.multiple,
                "meaning": r.meaning,
                "check": r.drift || !mine.is_empty(),
                "cause": main.map(|f| f.cause.as_str()),
                "fix": main.map(|f| f.cause.fix()),
                "causes": mine
                    .iter()
                    .map(|f| json!({
                        "cause": f.cause.as_str(),
                        "bytes": f.bytes,
                        "sizes": f.sizes.iter().map(|(bytes, count)| json!({"bytes": bytes, "count": count})).collect::<Vec<_>>(),
                        "evidence": f.evidence(),
                        "fix": f.cause.fix(),
                    }))
                    .collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// `show`'s section of the gradient check's causes (empty without any).
pub fn gradient_section(parsed: &Parsed) -> String {
    let Some(info) = parsed.header.info.as_ref() else {
        return String::new();
    };
    if info.gradient_check.is_empty() {
        return String::new();
    }
    let mut out = String::from("\ngradient check\n");
    for f in &info.gradient_check {
        let _ = writeln!(out, "  {}: {}", f.cause, f.evidence());
        let _ = writeln!(out, "    fix: {}", f.cause.fix());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramtest_model::gradient_check::Cause;
    use vramtest_model::ledger::{self, Event};
    use vramtest_model::{Body, DeviceClass, Phase, Snapshot, snapshot};

    /// A snapshot of a step whose 1 KiB weight gets a gradient, beside one of 3 KiB for
    /// a tensor that is no parameter, written and read back as a file.
    fn parsed() -> Parsed {
        let mut events = vec![
            Event::PhaseStart(Phase::Params),
            Event::Alloc { id: 1, bytes: 1024 },
            Event::PhaseEnd,
        ];
        for i in 0..2u32 {
            let id = 100 + u64::from(i) * 10;
            events.extend([
                Event::IterationStart(i),
                Event::PhaseStart(Phase::Backward),
                Event::Alloc { id, bytes: 1024 },
                Event::Alloc {
                    id: id + 1,
                    bytes: 3072,
                },
                Event::PhaseEnd,
                Event::Free { id },
                Event::Free { id: id + 1 },
                Event::IterationEnd,
            ]);
        }
        let mut profile = ledger::profile(&events);
        profile.gradient_check = vramtest_model::gradient_reading::check(&events);
        let snap = Snapshot {
            source: "tests/vram.rs".into(),
            test: "t".into(),
            info: snapshot::Info {
                gradient_check: profile.gradient_check.clone(),
                ..snapshot::Info::default()
            },
            body: Body::from_profile(&profile, DeviceClass::Cpu),
        };
        snapshot::parse(&snap.to_text()).unwrap()
    }

    #[test]
    fn the_object_has_the_figures_and_the_gradient_check_s_cause() {
        let p = parsed();
        assert!(
            p.header
                .info
                .as_ref()
                .is_some_and(|i| i.gradient_check.len() == 1),
            "the file keeps the finding"
        );
        let v = object("pkg::vram::t", "cpu", "tests/snapshots/x.snap", false, &p);
        assert_eq!(v["test"], "pkg::vram::t");
        assert_eq!(v["peak_bytes"], json!(p.body.peak_bytes));
        assert_eq!(v["category_peaks"]["gradients"], json!(4096));
        assert_eq!(v["category_peaks"]["parameters"], json!(1024));
        assert!(v["phases"].as_array().is_some_and(|a| !a.is_empty()), "{v}");
        let g = &v["checks"][0];
        assert_eq!(g["category"], "gradients");
        assert_eq!(g["multiple"], json!(4.0));
        assert_eq!(g["cause"], "gradients_of_non_parameters");
        assert_eq!(g["fix"], Cause::GradientsOfNonParameters.fix());
        assert_eq!(g["causes"][0]["bytes"], json!(3072));
        assert_eq!(
            g["causes"][0]["sizes"],
            json!([{"bytes": 3072, "count": 1}])
        );
        assert_eq!(v["checks"][1]["cause"], Value::Null);
        let text = gradient_section(&p);
        assert!(
            text.starts_with("\ngradient check\n  gradients_of_non_parameters: 3.00 KiB of gradients match no parameter's size"),
            "{text}"
        );
        assert!(text.contains("\n    fix: remove the gradients"), "{text}");
    }
}
