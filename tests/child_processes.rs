//! The child processes of the harness, seen from a test that starts processes of its
//! own (`tests/fixtures/spawner`): nothing of the harness's child mode reaches them,
//! and a timeout ends them all without waiting on their pipes.

mod common;

use common::{build_vram_target, repo_root, run};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use vramtest_model::report::Status;

fn spawner() -> (PathBuf, PathBuf) {
    let dir = repo_root().join("tests").join("fixtures").join("spawner");
    let exe = build_vram_target(&dir);
    (dir, exe)
}

#[test]
fn a_process_the_test_starts_does_not_inherit_the_child_mode() {
    let (dir, exe) = spawner();
    let r = run(&dir, &exe, &["spawns_a_process", "--exact"], &[]);
    let report = r.report("spawns_a_process");
    assert_ne!(report.status, Status::Failed, "{}", r.text());
    assert!(report.body.is_some(), "{}", r.text());
}

#[test]
fn a_timeout_kills_the_grandchildren_and_does_not_wait_for_their_pipes() {
    let (dir, exe) = spawner();
    let scratch = common::scratch_dir("grandchild");
    let pid_file = scratch.path().join("pid");
    let start = Instant::now();
    let r = run(
        &dir,
        &exe,
        &["hangs_with_a_grandchild", "--exact"],
        &[
            ("VRAMTEST_TIMEOUT", "2"),
            ("SPAWNER_HANG", pid_file.to_str().unwrap()),
        ],
    );
    // The grandchild sleeps 60 s holding the pipes; the run must not wait for it.
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "the run took {:?}:\n{}",
        start.elapsed(),
        r.text()
    );
    let report = r.report("hangs_with_a_grandchild");
    assert_eq!(report.status, Status::Failed, "{}", r.text());
    assert!(report.message.contains("timed out"), "{}", report.message);
    let pid = std::fs::read_to_string(&pid_file).expect("the grandchild was started");
    #[cfg(target_os = "linux")]
    {
        // Killed with the child's process group: gone, or a zombie left for init.
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                !state.starts_with('Z') && !state.starts_with('X')
            })
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!alive(), "the grandchild {pid} still runs");
    }
    let _ = pid;
}
