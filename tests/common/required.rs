//! Tests that need a tool from outside Rust (chromium, strace, a C compiler). Where the
//! tool is missing they skip and say, on stderr, what they skipped. Where the tool's
//! variable is set (`.ci/run` sets one per tool: `VRAMTEST_REQUIRE_CHROMIUM`,
//! `VRAMTEST_REQUIRE_STRACE`, `VRAMTEST_REQUIRE_CC`), a missing tool fails the test
//! with the tool's name instead: CI never passes a test that did not run. Included with
//! `#[path]` by the test crates that need it.

#![allow(dead_code)] // each test crate uses some of the tools

/// A tool some tests need.
pub struct Tool {
    /// Its name, as the failure and the skip message say it.
    pub name: &'static str,
    /// The variable under which a missing tool fails the test.
    pub variable: &'static str,
    /// How to get it.
    pub hint: &'static str,
}

/// The headless browser of the HTML report's tests.
pub const CHROMIUM: Tool = Tool {
    name: "chromium",
    variable: "VRAMTEST_REQUIRE_CHROMIUM",
    hint: "run .ci/install-chromium.sh",
};

/// The tracer of the snapshot writer's durability test.
pub const STRACE: Tool = Tool {
    name: "strace",
    variable: "VRAMTEST_REQUIRE_STRACE",
    hint: "apt-get install strace",
};

/// The C compiler that builds the fake CUDA drivers.
pub const CC: Tool = Tool {
    name: "cc",
    variable: "VRAMTEST_REQUIRE_CC",
    hint: "apt-get install gcc",
};

impl Tool {
    /// `what` is not run because the tool cannot be used (`why`): fails where the tool
    /// is required, else says what was skipped, on stderr past the test harness's
    /// capture (so that `cargo test` shows it beside the passing test).
    pub fn skip(&self, what: &str, why: &str) {
        assert!(
            std::env::var_os(self.variable).is_none(),
            "{}: {why}; {} is set, so {what} must run ({})",
            self.name,
            self.variable,
            self.hint
        );
        let line = format!("skipped {what}: {}: {why} ({})\n", self.name, self.hint);
        // `eprintln!` would be captured with the test's output and shown only on failure.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
}
