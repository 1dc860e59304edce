//! The HTML report renders in a real browser: Debian's `chromium`, headless, opening
//! the page from a file as someone would after downloading the CI artifact. Skipped,
//! with a message, where chromium is not installed (`.ci/install-chromium.sh`); failed
//! there where `VRAMTEST_REQUIRE_CHROMIUM` is set, as in CI.

mod common;

#[path = "support/headless.rs"]
mod headless;

use headless::{chromium, console_messages, find_chromium};
use vramtest_chart::html_report;

/// Width and height from a PNG's header.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.len() > 24, "not a PNG: {} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG signature");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let Some(browser) = find_chromium("the browser test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, html_report(&common::example_report())).unwrap();

    let png = dir.path().join("report.png");
    let shot = chromium(
        &browser,
        &page,
        &format!("--screenshot={}", png.display()),
        dir.path(),
    );
    let bytes = std::fs::read(&png).expect("chromium wrote a screenshot");
    assert_eq!(png_size(&bytes), (1200, 900));
    // A blank page compresses to a few kilobytes; charts and tables do not.
    assert!(
        bytes.len() > 20_000,
        "screenshot is {} bytes: nothing drawn?",
        bytes.len()
    );
    assert_eq!(console_messages(&shot.stderr), Vec::<&str>::new());

    let dom = chromium(&browser, &page, "--dump-dom", dir.path());
    assert_eq!(console_messages(&dom.stderr), Vec::<&str>::new());
    assert_eq!(
        dom.stdout.matches("<svg").count(),
        2,
        "one timeline per test that has one"
    );
    assert!(dom.stdout.contains("data-category=\"activations\""));
    assert!(dom.stdout.contains("peak 33.50 MiB"));
    assert!(!dom.stdout.contains("<script"));
}

/// The console check above can fail: a page with a script error and a blocked load
/// is caught.
#[test]
fn the_console_check_catches_a_broken_page() {
    let Some(browser) = find_chromium("the browser test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("broken.html");
    let report = html_report(&common::example_report());
    let broken = report.replace(
        "</body>",
        "<img src=\"https://example.invalid/x.png\"><script>throw new Error('boom')</script></body>",
    );
    std::fs::write(&page, broken).unwrap();
    let run = chromium(&browser, &page, "--dump-dom", dir.path());
    let messages = console_messages(&run.stderr);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("Content Security Policy")),
        "{messages:?}"
    );
}
