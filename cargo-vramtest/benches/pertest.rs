//! What each test costs `cargo vramtest` over `cargo test`: 40 tiny `#[vramtest]`
//! tests (a copy of `fixtures/vec-model` whose `vram` target holds nothing else), built
//! once, then `cargo vramtest` and `cargo test --test vram` on the same built target,
//! alternately, several rounds. The target is 1.2× on the medians.
//!
//! The machine may be shared and busy, so each command's CPU time (user + system of
//! it and every process it waited for, from `getrusage(RUSAGE_CHILDREN)`) is reported
//! beside its wall time, with a ratio for each.
//!
//! `cargo bench -p cargo-vramtest --bench pertest` (set `VRAMTEST_BENCH_ROUNDS` for
//! more rounds; `VRAMTEST_BENCH_TESTS` for another number of tests).

#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code)]
mod support;

use common::Fixture;
use std::process::Command;
use std::time::{Duration, Instant};
use support::rounds;

/// The target ratio of `cargo vramtest` to `cargo test`.
const TARGET: f64 = 1.2;

/// One tiny step: parameters, an input, one forward pass.
fn step(i: usize) -> String {
    format!(
        r#"
#[vramtest]
fn tiny_{i:02}(t: &mut Step) -> vramtest::Result<()> {{
    let model = t.params(Linear::new);
    let x = t.inputs(batch);
    let _acts = t.forward(|| model.forward(&x));
    Ok(())
}}
"#
    )
}

fn main() {
    let tests: usize = std::env::var("VRAMTEST_BENCH_TESTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let f = Fixture::vec_model("bench-pertest");
    f.drop_test_target("cpu_only");
    f.drop_test_target("axes");
    let mut source =
        String::from("use vec_model::{Linear, batch};\nuse vramtest::{Step, vramtest};\n");
    for i in 0..tests {
        source += &step(i);
    }
    source += "\nvramtest::main!();\n";
    std::fs::write(f.dir.join("tests").join("vram.rs"), source).unwrap();
    // Build, and write the snapshots both runs compare with.
    let ran = f.run(&[], &[("VRAMTEST_UPDATE", "always")]);
    assert_eq!(ran.code, 0, "{}", ran.text());

    let cargo_test = || f.cargo(&["test", "--test", "vram"]);
    let vramtest = || f.command(&[], &[]);

    // Warm both paths once (cargo's fingerprints, the page cache).
    measure(cargo_test());
    measure(vramtest());

    let mut plain = Vec::new();
    let mut ours = Vec::new();
    for round in 1..=rounds() {
        let a = measure(cargo_test());
        let b = measure(vramtest());
        println!(
            "round {round}: cargo test {:>6.3}s (CPU {:>6.3}s)   cargo vramtest {:>6.3}s (CPU {:>6.3}s)   ({:.3}× wall, {:.3}× CPU)",
            a.wall.as_secs_f64(),
            a.cpu.as_secs_f64(),
            b.wall.as_secs_f64(),
            b.cpu.as_secs_f64(),
            b.wall.as_secs_f64() / a.wall.as_secs_f64(),
            b.cpu.as_secs_f64() / a.cpu.as_secs_f64(),
        );
        plain.push(a);
        ours.push(b);
    }
    let (a_wall, b_wall) = (median(&plain, |c| c.wall), median(&ours, |c| c.wall));
    let (a_cpu, b_cpu) = (median(&plain, |c| c.cpu), median(&ours, |c| c.cpu));
    let wall = b_wall.as_secs_f64() / a_wall.as_secs_f64();
    let cpu = b_cpu.as_secs_f64() / a_cpu.as_secs_f64();
    let verdict = |r: f64| if r <= TARGET { "ok" } else { "OVER TARGET" };
    println!(
        "{tests} tests, median of {}: cargo test {:.3}s (CPU {:.3}s), cargo vramtest {:.3}s (CPU {:.3}s): \
         {wall:.3}× wall {}, {cpu:.3}× CPU {} (target ≤ {TARGET}×)",
        plain.len(),
        a_wall.as_secs_f64(),
        a_cpu.as_secs_f64(),
        b_wall.as_secs_f64(),
        b_cpu.as_secs_f64(),
        verdict(wall),
        verdict(cpu),
    );
}

/// What one command cost.
struct Cost {
    wall: Duration,
    /// User + system time of the command and everything it waited for.
    cpu: Duration,
}

/// Runs `cmd` to completion (it must pass) and returns its wall and CPU time.
fn measure(mut cmd: Command) -> Cost {
    let before = children_cpu();
    let start = Instant::now();
    let out = cmd.output().expect("the command runs");
    let wall = start.elapsed();
    let cpu = children_cpu().saturating_sub(before);
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Cost { wall, cpu }
}

/// User + system time of every child this process waited for, so far.
#[cfg(unix)]
fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage), 0);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// No `getrusage` here: the CPU columns read zero.
#[cfg(not(unix))]
fn children_cpu() -> Duration {
    Duration::ZERO
}

fn median(costs: &[Cost], of: impl Fn(&Cost) -> Duration) -> Duration {
    let mut samples: Vec<Duration> = costs.iter().map(of).collect();
    samples.sort();
    samples[samples.len() / 2]
}
