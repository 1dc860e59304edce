//! `--junit PATH`: a JUnit XML report for CI test dashboards. One suite per test
//! binary (`package::target`), one case per test; a failing test carries its message,
//! the snapshot diff and the test's output; each case records its peak as a property.

use super::RunView;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::collections::BTreeMap;
use vramtest_model::report::Status;

/// The XML text of a run: its tests, then, when the run has problems (a shard `merge`
/// could not read), a suite `cargo-vramtest merge` with one error case per problem,
/// so a dashboard cannot show a merged run as complete.
pub fn render(view: &RunView) -> String {
    let mut suites: BTreeMap<String, TestSuite> = BTreeMap::new();
    for o in &view.outcomes {
        let r = &o.report;
        let mut status = match r.status {
            Status::Ignored => TestCaseStatus::skipped(),
            _ if o.fails() => {
                let kind = match r.status {
                    // The run could not judge the test: an error, not a failure.
                    Status::SnapshotError => NonSuccessKind::Error,
                    _ => NonSuccessKind::Failure,
                };
                TestCaseStatus::non_success(kind)
            }
            _ => TestCaseStatus::success(),
        };
        if r.status == Status::Ignored {
            // JUnit's `<skipped message="…">`: the reason, where there is one.
            status.set_message(r.ignore_reason.as_deref().unwrap_or("ignored"));
        } else if !matches!(status, TestCaseStatus::Success { .. }) {
            status.set_message(r.message.lines().next().unwrap_or(r.status.as_str()));
            status.set_type(r.status.as_str());
            let mut description = r.message.clone();
            if let Some(diff) = &r.diff {
                description += "\n\n";
                description += diff;
            }
            status.set_description(description);
        }
        let mut case = TestCase::new(r.test.as_str(), status);
        case.set_classname(o.case.binary.id())
            .set_time(o.duration)
            .add_property(Property::new("status", r.status.as_str()));
        if let Some(body) = &r.body {
            case.add_property(Property::new("peak_bytes", body.peak_bytes.to_string()));
        }
        if let Some(old) = r.old_peak_bytes {
            case.add_property(Property::new("old_peak_bytes", old.to_string()));
        }
        if let Some(output) = &r.output {
            case.set_system_out(output.as_str());
        }
        suites
            .entry(o.case.binary.id())
            .or_insert_with_key(|id| TestSuite::new(id.as_str()))
            .add_test_case(case);
    }
    let mut report = Report::new("cargo-vramtest");
    report
        .set_time(view.duration)
        .add_test_suites(suites.into_values());
    if !view.problems.is_empty() {
        let mut suite = TestSuite::new("cargo-vramtest merge");
        for (i, problem) in view.problems.iter().enumerate() {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
            status.set_message(problem.as_str()).set_type("merge");
            suite.add_test_case(TestCase::new(format!("problem {}", i + 1), status));
        }
        report.add_test_suite(suite);
    }
    report.to_string().expect("a JUnit report serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::*;
    use std::time::Duration;

    #[test]
    fn a_case_per_test_a_suite_per_binary() {
        let outcomes = mixed();
        let xml = render(&view(&outcomes, Duration::from_secs(3)));
        let report = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(report.name.as_str(), "cargo-vramtest");
        assert_eq!(report.tests, 6);
        assert_eq!(report.failures, 3, "regressed, failed and pending new");
        assert_eq!(report.test_suites.len(), 1);
        let suite = &report.test_suites[0];
        assert_eq!(suite.name.as_str(), "mlp::vram");
        let adamw = &suite.test_cases[0];
        assert_eq!(adamw.name.as_str(), "adamw");
        assert!(xml.contains("peak_bytes"));
        assert!(xml.contains("activations: 2.00 MiB"));
        assert!(xml.contains("6291456"));
        // Text that needs escaping survives.
        assert!(xml.contains("out of memory, 100%"));
        // An ignored test is skipped, with its reason.
        let slow = &suite.test_cases[5];
        assert_eq!(slow.name.as_str(), "slow");
        assert!(
            matches!(&slow.status, TestCaseStatus::Skipped { message: Some(m), .. }
                if m.as_str() == "no CUDA driver (vramtest was built without its `cuda` feature)"),
            "{:?}",
            slow.status
        );
        insta::assert_snapshot!(xml);
    }

    #[test]
    fn a_merge_problem_is_an_error_case() {
        let outcomes = [outcome("sgd", Status::Passed)];
        let mut run = view(&outcomes, Duration::from_secs(3));
        let plain = render(&run);
        let problem = "shard hash:2/2: no report".to_owned();
        run.problems = vec![problem.clone()];
        let xml = render(&run);
        let report = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!((report.tests, report.errors), (2, 1));
        let suite = &report.test_suites[1];
        assert_eq!(suite.name.as_str(), "cargo-vramtest merge");
        assert!(
            matches!(&suite.test_cases[0].status, TestCaseStatus::NonSuccess { message: Some(m), .. }
                if m.as_str() == problem),
            "{:?}",
            suite.test_cases[0].status
        );
        // Without problems, no such suite.
        let plain = Report::deserialize_from_str(&plain).unwrap();
        assert_eq!(
            (plain.tests, plain.errors, plain.test_suites.len()),
            (1, 0, 1)
        );
    }
}
