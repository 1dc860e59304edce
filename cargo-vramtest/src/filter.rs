//! Which tests a filter names: one rule for `run`, `list`, `accept`, `reject`, `review`
//! and `show`, so a name the table prints is a name every command takes.
//!
//! A test answers to three names: `package::target::test` (what the table prints),
//! `target::test` and the bare test name (`mlp_adamw`, `nested::mlp_sgd`). A filter
//! matches a test when it is a part of its full name (libtest's substring rule, which
//! covers the two shorter names), or, with `--exact`, when it is one of the three.

/// The three names of one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestName<'a> {
    pub package: &'a str,
    /// The cargo target name (`vram`).
    pub target: &'a str,
    /// The test's name in its binary (`mlp_adamw`, `nested::mlp_sgd`).
    pub test: &'a str,
}

impl TestName<'_> {
    /// `package::target::test`.
    pub fn full(&self) -> String {
        format!("{}::{}::{}", self.package, self.target, self.test)
    }

    /// `target::test`.
    pub fn in_target(&self) -> String {
        format!("{}::{}", self.target, self.test)
    }

    /// Whether `filter` names this test.
    pub fn matches(&self, filter: &str, exact: bool) -> bool {
        if exact {
            self.test == filter || self.in_target() == filter || self.full() == filter
        } else {
            self.full().contains(filter)
        }
    }

    /// Whether any of `filters` names this test; every test matches no filter at all.
    pub fn matches_any(&self, filters: &[String], exact: bool) -> bool {
        filters.is_empty() || filters.iter().any(|f| self.matches(f, exact))
    }
}

/// The filters that name none of `names`, in the order given.
pub fn unmatched<'f>(names: &[TestName<'_>], filters: &'f [String], exact: bool) -> Vec<&'f str> {
    filters
        .iter()
        .filter(|f| !names.iter().any(|n| n.matches(f, exact)))
        .map(String::as_str)
        .collect()
}

/// The most similar score a name needs to be suggested (Jaro-Winkler, as clap's
/// "did you mean" uses Jaro).
const SIMILAR: f64 = 0.7;

/// Up to three full names closest to `filter`, best first: each test is scored by the
/// closest of its three names.
pub fn closest(names: &[TestName<'_>], filter: &str) -> Vec<String> {
    let mut scored: Vec<(f64, String)> = names
        .iter()
        .map(|n| {
            let score = [n.test.to_owned(), n.in_target(), n.full()]
                .iter()
                .map(|form| strsim::jaro_winkler(filter, form))
                .fold(0.0, f64::max);
            (score, n.full())
        })
        .filter(|(score, _)| *score >= SIMILAR)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut out: Vec<String> = Vec::new();
    for (_, name) in scored {
        if !out.contains(&name) {
            out.push(name);
        }
        if out.len() == 3 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    const ADAMW: TestName = TestName {
        package: "candle-mlp",
        target: "vram",
        test: "mlp_adamw",
    };

    #[test_case("candle-mlp::vram::mlp_adamw", false, true; "the name the table prints")]
    #[test_case("candle-mlp::vram::mlp_adamw", true, true; "the name the table prints, exact")]
    #[test_case("vram::mlp_adamw", false, true; "target and test")]
    #[test_case("vram::mlp_adamw", true, true; "target and test, exact")]
    #[test_case("mlp_adamw", true, true; "bare name, exact")]
    #[test_case("adam", false, true; "a part of the name")]
    #[test_case("candle-mlp::vram", false, true; "package and target")]
    #[test_case("candle-mlp", false, true; "package")]
    #[test_case("adam", true, false; "exact needs a whole name")]
    #[test_case("candle-mlp::vram", true, false; "exact: a binary is not a test")]
    #[test_case("other::vram::mlp_adamw", false, false; "another package")]
    #[test_case("vram::mlp_sgd", false, false; "another test")]
    fn one_rule_for_every_command(filter: &str, exact: bool, expected: bool) {
        assert_eq!(ADAMW.matches(filter, exact), expected);
    }

    #[test]
    fn no_filter_matches_everything() {
        assert!(ADAMW.matches_any(&[], true));
        let filters = ["sgd".to_owned(), "adamw".to_owned()];
        assert!(ADAMW.matches_any(&filters, false));
    }

    #[test]
    fn names_the_filters_that_match_nothing() {
        let sgd = TestName {
            test: "mlp_sgd",
            ..ADAMW
        };
        let filters: Vec<String> = ["adamw", "no_such_test", "sgd", "mlp_adamv"]
            .map(String::from)
            .into();
        assert_eq!(
            unmatched(&[ADAMW, sgd], &filters, false),
            ["no_such_test", "mlp_adamv"]
        );
    }

    #[test_case("mlp_adamv", &["candle-mlp::vram::mlp_adamw", "candle-mlp::vram::mlp_sgd"]; "a typo")]
    #[test_case("vram::mlp_sdg", &["candle-mlp::vram::mlp_sgd", "candle-mlp::vram::mlp_adamw"]; "a typo after the target")]
    #[test_case("zzzz", &[]; "nothing alike")]
    fn suggests_the_closest_names(filter: &str, expected: &[&str]) {
        let sgd = TestName {
            test: "mlp_sgd",
            ..ADAMW
        };
        let conv = TestName {
            package: "conv",
            target: "mem",
            test: "resnet",
        };
        assert_eq!(closest(&[conv, sgd, ADAMW], filter), expected);
    }
}
