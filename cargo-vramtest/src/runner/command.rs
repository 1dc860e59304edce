//! The one way a test binary is started, whether to list its tests ([`super::list`]),
//! to run one test ([`super::execute`]) or a batch of them ([`super::batch`]): set up
//! as `cargo test` sets it up, with the package's switches, bound to this process's
//! life, and (for a run) with a report pipe only that process holds.
//!
//! Bound to this process's life: a `cargo vramtest` killed by a CI timeout, the OOM
//! killer or `kill` must not leave a harness behind that goes on measuring and then
//! writes snapshots nobody asked for. On Linux the binary gets `SIGKILL` when the thread
//! that started it ends (`PR_SET_PDEATHSIG`; each thread that starts a test binary waits
//! for it, so that is when this process ends); and every harness is told which process
//! started it (`VRAMTEST_STARTED_BY`), so it writes nothing once its parent is another
//! (the check also covers a parent that died before the signal was armed, and systems
//! without `PR_SET_PDEATHSIG`).

use crate::case::Binary;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use vramtest_model::env::HarnessEnv;

/// The environment for the tests of each package, by package name.
pub type PackageEnv = BTreeMap<String, HarnessEnv>;

/// What the tests of `binary`'s package get.
pub(super) fn harness_env(env: &PackageEnv, binary: &Binary) -> HarnessEnv {
    env.get(&binary.package).cloned().unwrap_or_default()
}

/// A command for a test binary, set up as `cargo test` would run it, with `env`, that
/// ends with this process (see the module's documentation).
pub(super) fn command(binary: &Binary, env: &HarnessEnv) -> Command {
    let mut cmd = Command::new(&binary.path);
    cmd.current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env("CARGO_PKG_NAME", &binary.package)
        .env("CARGO_PKG_VERSION", &binary.package_version)
        .stdin(Stdio::null());
    cmd.envs(env.to_vars());
    cmd.env(
        vramtest_model::env::STARTED_BY,
        std::process::id().to_string(),
    );
    if env.measure_at.is_none() {
        // A point the user's shell sets is `measure`'s to hand down, never a run's.
        cmd.env_remove(vramtest_model::env::MEASURE_AT);
    }
    // Dynamic libraries of the build (a `dylib` dependency) next to the binary.
    if let Some(deps) = binary.path.parent() {
        let var = dylib_path_var();
        let mut paths = vec![deps.to_path_buf()];
        if let Some(profile) = deps.parent() {
            paths.push(profile.to_path_buf());
        }
        paths.extend(std::env::var_os(var).iter().flat_map(std::env::split_paths));
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env(var, joined);
        }
    }
    die_with_this_process(&mut cmd);
    cmd
}

/// Linux: the started process gets `SIGKILL` when the thread that started it ends,
/// and does not start at all if this process is already gone.
#[cfg(target_os = "linux")]
fn die_with_this_process(cmd: &mut Command) {
    // Read before the fork: in the child, getppid() must still be this process.
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: runs in the forked child before exec and calls only prctl(2) and
    // getppid(2), which are async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between the fork and the prctl: then the
            // signal never comes, and the child is someone else's.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("cargo vramtest is gone"));
            }
            Ok(())
        });
    }
}

/// Elsewhere the harness's own check of its parent (`VRAMTEST_STARTED_BY`) is what
/// stops it writing.
#[cfg(not(target_os = "linux"))]
fn die_with_this_process(_cmd: &mut Command) {}

fn dylib_path_var() -> &'static str {
    if cfg!(windows) {
        "PATH"
    } else if cfg!(target_os = "macos") {
        "DYLD_FALLBACK_LIBRARY_PATH"
    } else {
        "LD_LIBRARY_PATH"
    }
}

/// Spawns the command `make` builds from `env` with the write end of a fresh pipe
/// handed down as its report pipe (`VRAMTEST_REPORT_FD`, with the points' progress:
/// `VRAMTEST_PROGRESS`), open in that process alone;
/// returns the process and the pipe's read end, which ends once the harness is done.
#[cfg(unix)]
pub(super) fn spawn_reporting(
    env: HarnessEnv,
    make: impl FnOnce(&HarnessEnv) -> std::process::Command,
) -> std::io::Result<(std::process::Child, std::io::PipeReader)> {
    use std::os::fd::AsRawFd as _;
    let (reader, writer) = std::io::pipe()?;
    let fd = writer.as_raw_fd();
    let mut cmd = make(&HarnessEnv {
        report_fd: Some(fd),
        progress: true,
        ..env
    });
    // SAFETY: runs in the forked child before exec and calls only fcntl(2), which is
    // async-signal-safe: the pipe's write end stays open across exec in this child
    // alone (both ends are close-on-exec everywhere else).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            match libc::fcntl(fd, libc::F_SETFD, 0) {
                -1 => Err(std::io::Error::last_os_error()),
                _ => Ok(()),
            }
        });
    }
    let spawned = cmd.spawn();
    // The pipe closes once the harness is done with it.
    drop((cmd, writer));
    Ok((spawned?, reader))
}
