//! `cargo vramtest show TEST`: one snapshot's tables and what fits, its timeline as an
//! SVG (`--svg`), or where its memory was allocated (`--sites`, which re-runs it).

use super::{find_tests, package_env, user_env, write_file};
use crate::case::TestCase;
use crate::cli::{ExecArgs, FilterArgs, ShowArgs};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::{discover, output, recorded, runner, snapshots};
use std::io::IsTerminal;
use vramtest_model::axes::Point;
use vramtest_model::env::{SitesWhen, Update};
use vramtest_model::levers::{LeverAxes, LeverVariant, show_variant};
use vramtest_model::report::TestReport;
use vramtest_model::settings::DeviceSetting;

pub fn execute(args: &ShowArgs) -> Result<u8> {
    if args.sites {
        return show_sites(args);
    }
    let ws = discover::discover(&args.selection, Vec::new())?;
    let files = snapshots::scan(&ws)?;
    let chosen =
        snapshots::find(&files, &args.test, args.pending).map_err(|message| Error::Selection {
            message: format!("{message} in {}", ws.root.display()),
        })?;
    if args.svg.is_some() && chosen.len() > 1 {
        return Err(Error::Selection {
            message: format!(
                "`{}` names {} snapshots and --svg draws one (hint: name one test, and `@cpu` or `@cuda` by way of --device runs)",
                args.test,
                chosen.len()
            ),
        });
    }
    if let Some(at) = &args.at {
        if args.levers || args.fit_on.is_some() {
            return show_levers(args, at, &ws, &chosen);
        }
        return show_prediction(args, at, &ws, &chosen);
    }
    for (i, file) in chosen.iter().enumerate() {
        // Listed a moment ago, but a concurrent accept or reject may have removed it.
        let parsed = vramtest_model::snapshot::read(&file.path)?.ok_or_else(|| Error::Io {
            path: file.path.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the file is gone (removed since it was listed)",
            ),
        })?;
        if matches!(args.message_format, crate::cli::MessageFormat::Json) {
            let name = format!("{}::{}::{}", file.package, file.target, file.test);
            let path = file.path.display().to_string();
            let object =
                output::snapshot_json::object(&name, &file.class, &path, file.pending, &parsed);
            println!("{object}");
            continue;
        }
        if i > 0 {
            println!();
        }
        anstream::print!("{}", output::table::render_snapshot(&file.path, &parsed));
        let settings = package_settings(&ws, &file.package);
        let draw = output::fits::Drawing {
            unicode: unicode_terminal(),
        };
        let timeline = recorded::timeline(&ws.target_dir, &file.committed());
        let totals = timeline.as_ref().map(|t| t.totals());
        let prediction = recorded::prediction(&ws.target_dir, &file.committed());
        let gpu = output::fits::Gpu {
            reserve: settings.reserve,
            allowance: settings.allowance(),
            prediction: prediction.as_ref(),
        };
        print!(
            "{}{}",
            output::fits::render(&parsed.body, &gpu, totals.as_deref(), draw),
            output::snapshot_json::gradient_section(&parsed)
        );
        if let Some(path) = &args.svg {
            let name = format!("{}::{}::{}", file.package, file.target, file.test);
            let timeline = timeline.ok_or_else(|| Error::NoTimeline {
                test: name.clone(),
                target_dir: ws.target_dir.clone(),
            })?;
            let options = vramtest_chart::SvgOptions {
                title: Some(format!("{name} ({})", file.class)),
                ..Default::default()
            };
            write_file(path, &vramtest_chart::svg(&timeline, &options))?;
            println!("\ntimeline written: {}", path.display());
        }
    }
    Ok(0)
}

/// `show TEST --at ..`: each chosen snapshot's sweep over named axes predicts the
/// configuration, for each combination of levels `--at` leaves open (every one when it
/// names none); every problem is an error naming the snapshot and the axis, before
/// anything is printed.
fn show_prediction(
    args: &ShowArgs,
    at: &str,
    ws: &discover::Workspace,
    chosen: &[&snapshots::SnapshotFile],
) -> Result<u8> {
    use output::predict::{Request, answer, human, json};
    let shard = args.shard.map(vramtest_model::sweep::Shard::from);
    let mut out = Vec::new();
    for file in chosen {
        let fail = |message: String| Error::Prediction {
            snapshot: file.path.clone(),
            message,
        };
        let (name, sweep) = read_sweep(file)?;
        let (axes, point, fixed) = parse_at(file, &name, &sweep, at)?;
        if let Some(axis) = &args.solve {
            axes.check_solve(axis)
                .map_err(|e| fail(format!("{name}: {e}")))?;
        }
        let request = Request {
            at: point,
            solve: args.solve.clone(),
            ranks: args.ranks.map(|r| (r, shard)),
        };
        let settings = package_settings(ws, &file.package);
        let baseline = axes.baseline();
        for (variant, own) in combinations(file, &name, &sweep, &axes, &fixed)? {
            let mut a = answer(
                own,
                &request,
                settings.allowance().bytes(),
                settings.cuda_pool().granularity,
            )
            .map_err(|e| fail(format!("{name}: {e}")))?;
            if !variant.is_empty() {
                let is_baseline = variant == baseline;
                a.variant = Some((variant, is_baseline));
            }
            out.push(match args.message_format {
                crate::cli::MessageFormat::Json => format!("{}\n", json(&name, &a)),
                crate::cli::MessageFormat::Human => human(&name, own, &a),
            });
        }
    }
    let json = matches!(args.message_format, crate::cli::MessageFormat::Json);
    print!("{}", out.join(if json { "" } else { "\n" }));
    Ok(0)
}

/// `--at` read against a snapshot's sweep: its categorical axes, the numeric point and
/// the levels it fixes; an unknown level is an error naming the axis and its levels.
fn parse_at(
    file: &snapshots::SnapshotFile,
    name: &str,
    sweep: &vramtest_model::sweep::Sweep,
    at: &str,
) -> Result<(LeverAxes, Point, LeverVariant)> {
    let fail = |e: vramtest_model::levers::LeverError| Error::Prediction {
        snapshot: file.path.clone(),
        message: format!("{name}: {e}"),
    };
    let axes = LeverAxes::new(sweep.levels.clone()).map_err(fail)?;
    // An axis the sweep has neither as a numeric nor as a categorical axis, whatever
    // its value (`precision=bf16` on a sweep without levels).
    let unknown = at
        .split(',')
        .filter_map(|part| Some(part.split_once('=')?.0.trim()))
        .find(|a| !a.is_empty() && !sweep.axes.contains_key(*a) && !sweep.levels.contains_key(*a));
    if let Some(axis) = unknown {
        let known = |names: Vec<&String>| match names.is_empty() {
            true => "none".to_owned(),
            false => names
                .into_iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        return Err(Error::Prediction {
            snapshot: file.path.clone(),
            message: format!(
                "{name}: --at: unknown axis `{axis}` (the sweep's numeric axes: {}; its categorical axes: {})",
                known(sweep.axes.keys().collect()),
                known(sweep.levels.keys().collect())
            ),
        });
    }
    let (point, fixed) = axes.parse_at(at).map_err(fail)?;
    Ok((axes, point, fixed))
}

/// The combinations of levels that agree with `fixed`, each with its own fit; an error
/// naming the snapshot when one was not measured (an edited snapshot).
fn combinations<'a>(
    file: &snapshots::SnapshotFile,
    name: &str,
    sweep: &'a vramtest_model::sweep::Sweep,
    axes: &LeverAxes,
    fixed: &LeverVariant,
) -> Result<Vec<(LeverVariant, &'a vramtest_model::sweep::Sweep)>> {
    let fail = |message: String| Error::Prediction {
        snapshot: file.path.clone(),
        message: format!("{name}: {message}"),
    };
    let matching = axes.matching(fixed).map_err(|e| fail(e.to_string()))?;
    matching
        .into_iter()
        .map(|variant| match sweep.variant(&variant) {
            Some(own) => Ok((variant, own)),
            None => Err(fail(format!(
                "the snapshot holds no fit of the combination {} (hint: record the test again)",
                show_variant(&variant)
            ))),
        })
        .collect()
}

/// `show TEST --at .. --levers` and `--fit-on SIZE`: each chosen snapshot's lever
/// table at the configuration, or what of it fits the size. Every problem (a malformed
/// size, no sweep, an unknown axis or level) is an error before anything is printed.
fn show_levers(
    args: &ShowArgs,
    at: &str,
    ws: &discover::Workspace,
    chosen: &[&snapshots::SnapshotFile],
) -> Result<u8> {
    use output::levers::{LeverRequest, build, human, human_fit_on};
    let fit_on = args
        .fit_on
        .as_deref()
        .map(vramtest_model::levers::parse_fit_on)
        .transpose()
        .map_err(|e| Error::Selection {
            message: e.to_string(),
        })?;
    let json = matches!(args.message_format, crate::cli::MessageFormat::Json);
    let mut out = Vec::new();
    for file in chosen {
        let (name, sweep) = read_sweep(file)?;
        let (_, point, levels) = parse_at(file, &name, &sweep, at)?;
        let request = LeverRequest {
            at: point,
            levels,
            ranks: args.ranks,
            shard: args.shard.map(vramtest_model::sweep::Shard::from),
            fit_on,
        };
        let settings = package_settings(ws, &file.package);
        let table = build(
            &sweep,
            &request,
            settings.allowance().bytes(),
            settings.cuda_pool().granularity,
        )
        .map_err(|e| Error::Prediction {
            snapshot: file.path.clone(),
            message: format!("{name}: {e}"),
        })?;
        let text = match (fit_on, json) {
            (None, false) => human(&name, &table),
            (None, true) => format!("{}\n", to_json(&table)),
            (Some(memory), false) => human_fit_on(&name, &table, &table.fit_on(memory)),
            (Some(memory), true) => format!("{}\n", to_json(&table.fit_on(memory))),
        };
        out.push(text);
    }
    print!("{}", out.join(if json { "" } else { "\n" }));
    Ok(0)
}

fn to_json(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).expect("the lever table always serializes")
}

/// A chosen snapshot's name (`package::target::test (class)`) and its sweep; an error
/// naming the snapshot when it holds none.
fn read_sweep(file: &snapshots::SnapshotFile) -> Result<(String, vramtest_model::sweep::Sweep)> {
    let fail = |message: String| Error::Prediction {
        snapshot: file.path.clone(),
        message,
    };
    let parsed = vramtest_model::snapshot::read(&file.path)?
        .ok_or_else(|| fail("the file is gone (removed since it was listed)".into()))?;
    let name = format!(
        "{}::{}::{} ({})",
        file.package, file.target, file.test, file.class
    );
    let sweep = parsed.body.sweep().cloned().ok_or_else(|| {
        fail(format!(
            "{name} holds no sweep, so --at has nothing to predict from (hint: `#[vramtest(axes(seq = [16, 32, 48], ..))]` with `t.axis(\"seq\")`, or a batch sweep, `#[vramtest(batch = [32, 64, 128])]` with `t.batch()`)"
        ))
    })?;
    Ok((name, sweep))
}

/// The settings of the workspace's package `name` (the defaults when it has none).
pub(super) fn package_settings(
    ws: &discover::Workspace,
    name: &str,
) -> vramtest_model::settings::Settings {
    ws.packages
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.settings.clone())
        .unwrap_or_default()
}

/// Whether to draw with Unicode blocks: a terminal that has not asked for plain
/// output (`NO_COLOR`, `TERM=dumb`).
fn unicode_terminal() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// `show TEST --sites`: builds the test, re-runs it on the CPU with call sites on, and
/// prints them. Nothing is written: the run is in check mode.
fn show_sites(args: &ShowArgs) -> Result<u8> {
    let user = user_env()?;
    let ws = discover::discover(&args.selection, args.build.cargo_flags())?;
    let exec = ExecArgs {
        device: Some(DeviceSetting::Cpu),
        check: true,
        ..ExecArgs::default()
    };
    let mut env = package_env(&ws, &exec, &user);
    for package in env.values_mut() {
        package.sites = SitesWhen::Always;
        package.update = Some(Update::No);
    }
    let filter = FilterArgs {
        filters: vec![args.test.clone()],
        ..FilterArgs::default()
    };
    let cases: Vec<TestCase> = find_tests(&ws, &args.build, &filter, &env)?
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    let case = the_one_test(&args.test, cases)?;
    let progress = Progress::new();
    // On the CPU: one slot, pinned to no GPU.
    let outcomes = runner::run(std::slice::from_ref(&case), &env, &[None], &progress)?;
    let report = &outcomes.first().expect("one outcome per test case").report;
    let Some(sites) = &report.sites else {
        return Err(Error::NoSites {
            test: case.full_name(),
            message: why_no_sites(report),
        });
    };
    print!(
        "{}",
        output::site_listing::render(&case.full_name(), report.body.as_ref(), sites)
    );
    Ok(0)
}

/// The one test `--sites` re-runs among those `test` names: the only one, or the only
/// one it names whole (a name that is also part of other names).
fn the_one_test(test: &str, mut cases: Vec<TestCase>) -> Result<TestCase> {
    if cases.len() > 1 {
        let exact: Vec<TestCase> = cases
            .iter()
            .filter(|c| c.matches(&[test.to_owned()], true))
            .cloned()
            .collect();
        if exact.len() == 1 {
            cases = exact;
        }
    }
    match <[TestCase; 1]>::try_from(cases) {
        Ok([case]) => Ok(case),
        Err(cases) => {
            let names: Vec<String> = cases.iter().map(TestCase::full_name).collect();
            Err(Error::Selection {
                message: format!(
                    "`{test}` names {} tests and --sites re-runs one (hint: name one of: {})",
                    cases.len(),
                    names.join(", ")
                ),
            })
        }
    }
}

/// Why a re-run gave no call sites: the harness's reason, else the first line of the
/// report's message, else how the re-run ended.
fn why_no_sites(report: &TestReport) -> String {
    if let Some(error) = &report.sites_error {
        return format!("call sites: {error}");
    }
    match report.message.lines().map(str::trim).next() {
        Some(line) if !line.is_empty() => line.to_owned(),
        _ => format!("the re-run ended {:?}", report.status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Binary;
    use std::sync::Arc;
    use vramtest_model::report::Status;

    #[test]
    fn no_sites_says_the_harnesss_reason() {
        let mut report = TestReport::new("vram", "t", Status::Regressed);
        report.message = "memory regression in t (cpu)\n  call sites: a note".into();
        report.sites_error = Some("cut short after 1s (VRAMTEST_SITES_TIMEOUT)".into());
        assert_eq!(
            why_no_sites(&report),
            "call sites: cut short after 1s (VRAMTEST_SITES_TIMEOUT)"
        );
    }

    #[test]
    fn without_a_reason_no_sites_says_how_the_rerun_ended() {
        // A line that reads like a call-sites error is only message text.
        let mut report = TestReport::new("vram", "t", Status::Failed);
        report.message = "  t failed: panicked: boom\ncall sites: not a reason".into();
        assert_eq!(why_no_sites(&report), "t failed: panicked: boom");
        report.message = String::new();
        assert_eq!(why_no_sites(&report), "the re-run ended Failed");
    }

    fn cases(names: &[&str]) -> Vec<TestCase> {
        let binary = Arc::new(Binary {
            package: "p".into(),
            target: "vram".into(),
            path: "/x".into(),
            package_dir: "/".into(),
            package_version: "0.1.0".into(),
        });
        names
            .iter()
            .map(|name| TestCase {
                binary: Arc::clone(&binary),
                name: (*name).into(),
                ignored: false,
                include_ignored: false,
            })
            .collect()
    }

    #[test]
    fn sites_rerun_one_test_a_whole_name_wins() {
        let one = the_one_test("mlp", cases(&["mlp", "mlp_sgd"])).unwrap();
        assert_eq!(one.name, "mlp");
        let e = the_one_test("mlp_", cases(&["mlp_adamw", "mlp_sgd"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`mlp_` names 2 tests and --sites re-runs one (hint: name one of: p::vram::mlp_adamw, p::vram::mlp_sgd)"
        );
        assert!(the_one_test("x", Vec::new()).is_err());
    }
}
