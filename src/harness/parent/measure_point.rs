//! One point of a sweep over named axes, measured (`VRAMTEST_MEASURE_AT`, what
//! `cargo vramtest measure` sets, with `VRAMTEST_MEASURE_LEVELS` for a test with
//! categorical axes): each selected test's step runs once, in one child process, at
//! exactly that point and those levels, without call sites. Nothing is judged against the
//! snapshot and nothing is written beside it: the measured body goes into the test's
//! report, marked with the point (`measured_at`), for `cargo vramtest` to set against
//! its prediction.

use super::checkout::relative_source;
use super::grid;
use super::spawn::output_section;
use super::trial::RunContext;
use crate::harness::protocol::{ChildResult, RunPoint};
use crate::harness::registry::TestDef;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::process::ExitCode;
use std::sync::Arc;
use vramtest_model::axes::Point;
use vramtest_model::levers::{LeverError, LeverVariant, show_variant};
use vramtest_model::report::{Details, Status, TestReport};
use vramtest_model::sweep::show_point;
use vramtest_model::{Body, HumanBytes};

/// Runs the tests `args` selects, each measured at `at` and `levels`. An ignored test
/// is measured too: naming it with a point is asking for it.
pub(super) fn run(
    args: &Arguments,
    tests: Vec<(String, &'static TestDef)>,
    context: Arc<RunContext>,
    at: Point,
    levels: LeverVariant,
) -> ExitCode {
    let at = Arc::new(At { point: at, levels });
    let trials = tests
        .into_iter()
        .map(|(name, def)| {
            let (context, at) = (Arc::clone(&context), Arc::clone(&at));
            Trial::ignorable_test(name.clone(), move || measure(&context, &name, def, &at))
        })
        .collect();
    libtest_mimic::run(args, trials).exit_code()
}

/// Where a step is measured: a point of its numeric axes and a level of each of its
/// categorical axes.
struct At {
    point: Point,
    levels: LeverVariant,
}

impl At {
    /// `layers=6, seq=48` (with `, precision=bf16` for levels).
    fn show(&self) -> String {
        let point = show_point(&self.point);
        if self.levels.is_empty() {
            point
        } else {
            format!("{point}, {}", show_variant(&self.levels))
        }
    }
}

/// How a measurement did not happen.
enum NotMeasured {
    /// The test does not run here (no device, a device it does not support, or it
    /// skipped itself).
    Skipped(String),
    /// A bad point, or a child that failed; with the child's output when it ran.
    Failed(String, Option<String>),
}

/// Measures `name` at `at` and writes its report: `Passed` with the measured body, or
/// why not.
fn measure(context: &RunContext, name: &str, def: &TestDef, at: &At) -> Result<Completion, Failed> {
    let class = Some(context.device.class());
    let mut report = TestReport {
        source: relative_source(&context.target, def.file),
        line: def.line,
        device_class: class,
        notes: context.notes.clone(),
        measured_at: Some(at.point.clone()),
        ..TestReport::new(&context.target.name, name, Status::Failed)
    };
    let outcome = match context.skip_reason(def, class) {
        Some(reason) => Err(NotMeasured::Skipped(reason)),
        None => run_point(context, name, def, context.device, at),
    };
    match outcome {
        Ok((body, details)) => {
            report.details = Some(details);
            report.status = Status::Passed;
            report.message = format!(
                "measured at {}: peak {} (nothing compared with the snapshot, nothing written)",
                at.show(),
                HumanBytes(body.peak_bytes)
            );
            report.body = Some(body);
        }
        Err(NotMeasured::Skipped(reason)) => {
            report.status = Status::Ignored;
            report.ignore(&reason);
        }
        Err(NotMeasured::Failed(message, output)) => {
            report.message = message;
            report.output = output;
        }
    }
    if let Some(reports) = &context.outputs.reports {
        reports.write(&report);
    }
    match report.status {
        Status::Passed => {
            println!("{name}: {}", report.message);
            Ok(Completion::Completed)
        }
        Status::Ignored => Ok(Completion::ignored_with(
            report.ignore_reason.unwrap_or_default(),
        )),
        _ => Err(Failed::from(
            report.message + &output_section(report.output.as_deref().unwrap_or("")),
        )),
    }
}

/// The step of `def` run once at `at`, in a child process of its own: its body, and
/// the details a sweep's point keeps beside it (a CPU run's CUDA pool model, which
/// `cargo vramtest measure` sets against the predicted pool).
fn run_point(
    context: &RunContext,
    name: &str,
    def: &TestDef,
    device: crate::step::Device,
    at: &At,
) -> Result<(Body, Details), NotMeasured> {
    let point = run_point_of(def, &at.point, &at.levels)
        .map_err(|e| NotMeasured::Failed(format!("{name}: {e}"), None))?;
    let label = grid::label(name, def, &point);
    let ended = context
        .spawner
        .measure(name, def, device, &point)
        .map_err(|e| NotMeasured::Failed(e.to_string(), None))?;
    let message = match (ended.result, ended.unclean) {
        (Some(ChildResult::Measured { profile, pool, .. }), None) => {
            let details = Details::of_profile(&profile, pool.map(|r| r.peaks));
            return Ok((Body::from_profile(&profile, device.class()), details));
        }
        (Some(ChildResult::Ignored { reason }), None) => return Err(NotMeasured::Skipped(reason)),
        (Some(ChildResult::Failed { message }), None) => format!("{label} failed: {message}"),
        (Some(_), Some(how)) => format!(
            "{label} wrote its result, then its process ended with {how}: a measurement needs a clean exit"
        ),
        (None, Some(how)) => format!("{label} crashed before reporting a result ({how})"),
        (None, None) => format!(
            "{label} ended before reporting a result (exit status: 0): the step ended its own process"
        ),
    };
    Err(NotMeasured::Failed(message, Some(ended.output)))
}

/// Why a point cannot be measured on a test; each names the axis and the test's axes.
#[derive(Debug, PartialEq, Eq)]
enum MeasurePointError {
    /// The test declares no named axes.
    NoAxes,
    /// The point names an axis the test does not declare.
    Unknown { axis: String, known: String },
    /// The point leaves out an axis of the test.
    Missing { axis: String, known: String },
    /// A value that does not fit the platform's `usize`.
    TooLarge { axis: String, value: u64 },
    /// Levels that are not one of the test's combinations (an unknown categorical
    /// axis or level, or one left out).
    Levels(LeverError),
}

impl std::fmt::Display for MeasurePointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MeasurePointError::NoAxes => write!(
                f,
                "no named axes, so there is no point to measure (hint: `#[vramtest(axes(seq = [16, 32, 48], ..))]` with `t.axis(\"seq\")`)"
            ),
            MeasurePointError::Unknown { axis, known } => {
                write!(f, "unknown axis `{axis}` (the test's axes: {known})")
            }
            MeasurePointError::Missing { axis, known } => {
                write!(f, "no value for axis `{axis}` (the test's axes: {known})")
            }
            MeasurePointError::TooLarge { axis, value } => {
                write!(f, "axis `{axis}`: {value} is too large")
            }
            MeasurePointError::Levels(e) => write!(f, "{e}"),
        }
    }
}

/// The child's point for `at` and `levels`: every named axis of `def`, then every
/// categorical one, each in the attribute's order.
fn run_point_of(
    def: &TestDef,
    at: &Point,
    levels: &LeverVariant,
) -> Result<RunPoint, MeasurePointError> {
    let axes = def.options.axes;
    if axes.is_empty() {
        return Err(MeasurePointError::NoAxes);
    }
    let names: Vec<&str> = axes.iter().map(|&(k, _)| k).collect();
    let known = names.join(", ");
    if let Some(unknown) = at.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(MeasurePointError::Unknown {
            axis: unknown.clone(),
            known,
        });
    }
    let values = names
        .iter()
        .map(|&axis| {
            let axis = axis.to_owned();
            let Some(&value) = at.get(&axis) else {
                return Err(MeasurePointError::Missing {
                    axis,
                    known: known.clone(),
                });
            };
            let value = usize::try_from(value).map_err(|_| MeasurePointError::TooLarge {
                axis: axis.clone(),
                value,
            })?;
            Ok((axis, value))
        })
        .collect::<Result<Vec<_>, MeasurePointError>>()?;
    grid::lever_axes(def)
        .check(levels)
        .map_err(MeasurePointError::Levels)?;
    Ok(RunPoint::axes(values).with_levels(grid::in_attribute_order(def, levels)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(axes: &'static [(&'static str, &'static [usize])]) -> TestDef {
        TestDef::over(axes)
    }

    fn at(pairs: &[(&str, u64)]) -> Point {
        pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    fn none() -> LeverVariant {
        LeverVariant::new()
    }

    fn levels(pairs: &[(&str, &str)]) -> LeverVariant {
        pairs
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// A test over `seq` with two categorical axes.
    fn with_levels() -> TestDef {
        let mut d = def(&[("seq", &[4, 8])]);
        d.options.levels = &[
            ("precision", &["f32", "bf16"]),
            ("checkpointing", &["off", "blocks"]),
        ];
        d
    }

    #[test]
    fn the_levels_go_with_the_point_in_the_attributes_order() {
        let d = with_levels();
        let chosen = levels(&[("checkpointing", "blocks"), ("precision", "bf16")]);
        let point = run_point_of(&d, &at(&[("seq", 48)]), &chosen).unwrap();
        assert_eq!(
            point,
            RunPoint::axes(vec![("seq".into(), 48)]).with_levels(vec![
                ("precision".into(), "bf16".into()),
                ("checkpointing".into(), "blocks".into()),
            ])
        );
    }

    #[test]
    fn bad_levels_name_the_axis_and_its_levels() {
        let d = with_levels();
        let seq = at(&[("seq", 48)]);
        let err = |l: &[(&str, &str)]| run_point_of(&d, &seq, &levels(l)).unwrap_err().to_string();
        assert_eq!(
            err(&[("precision", "fp8"), ("checkpointing", "off")]),
            "axis `precision` has no level `fp8` (its levels: f32, bf16)"
        );
        assert_eq!(
            err(&[("precision", "f32")]),
            "the combination `precision=f32` leaves out the categorical axis `checkpointing`"
        );
        assert!(
            err(&[
                ("precision", "f32"),
                ("checkpointing", "off"),
                ("zero", "1")
            ])
            .starts_with("`zero` is not a categorical axis"),
        );
        // A test without categorical axes takes no levels.
        let plain = def(&[("seq", &[4, 8])]);
        let e = run_point_of(&plain, &seq, &levels(&[("precision", "f32")])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("`precision` is not a categorical axis"),
            "{e}"
        );
    }

    #[test]
    fn the_point_names_every_axis_in_the_attributes_order() {
        let d = def(&[("seq", &[4, 8]), ("batch", &[1, 2])]);
        let point = run_point_of(&d, &at(&[("batch", 8), ("seq", 48)]), &none()).unwrap();
        assert_eq!(
            point,
            RunPoint::axes(vec![("seq".into(), 48), ("batch".into(), 8)])
        );
        assert_eq!(point.batch, 8);
    }

    #[test]
    fn a_bad_point_names_the_axis_and_the_tests_axes() {
        let d = def(&[("seq", &[4, 8]), ("batch", &[1, 2])]);
        let missing = run_point_of(&d, &at(&[("seq", 48)]), &none()).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "no value for axis `batch` (the test's axes: seq, batch)"
        );
        let unknown = run_point_of(&d, &at(&[("seq", 4), ("batch", 1), ("heads", 2)]), &none());
        assert_eq!(
            unknown.unwrap_err().to_string(),
            "unknown axis `heads` (the test's axes: seq, batch)"
        );
        let none = run_point_of(&def(&[]), &at(&[("seq", 4)]), &none()).unwrap_err();
        assert_eq!(none, MeasurePointError::NoAxes);
    }
}
