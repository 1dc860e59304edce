//! A child process per test: started with its [`Invocation`] on the command line,
//! writing its result into the run's private directory, its output drained while it
//! runs, and its whole process group killed when it outlives `VRAMTEST_TIMEOUT`.

use crate::harness::protocol::{ChildResult, Invocation, RunPoint, SitesMode};
use crate::harness::registry::{CANONICAL_THREADS, TestDef};
use crate::step::Device;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// How long output is drained after a child ended, for a grandchild that still holds
/// its pipes: then the output read so far is taken and the rest left behind.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Where the children of one run write their results: a fresh directory with a random
/// name that only this user can enter, so no other process can plant a link where a
/// result goes; removed with the run.
pub(super) struct ResultDir(tempfile::TempDir);

impl ResultDir {
    pub(super) fn new() -> Result<ResultDir, String> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("vramtest-");
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
        builder
            .tempdir()
            .map(ResultDir)
            .map_err(|e| format!("cannot create a temporary directory for results: {e}"))
    }

    /// The result file of `test`.
    pub(super) fn file_for(&self, test: &str) -> PathBuf {
        self.0
            .path()
            .join(format!("{}.json", test.replace("::", "__")))
    }
}

/// How the children of one run are started: where they write their results, whether
/// their output is captured, and when they are killed.
pub(super) struct Spawner {
    pub(super) results: ResultDir,
    /// `--nocapture`: the children's output goes straight to the terminal.
    pub(super) nocapture: bool,
    /// `VRAMTEST_TIMEOUT`.
    pub(super) timeout: Option<Duration>,
    /// `VRAMTEST_SITES_TIMEOUT`: the call sites' re-runs, all together.
    pub(super) sites_timeout: Duration,
    /// The iterations of a test whose attribute sets none (the settings', else the
    /// default).
    pub(super) iterations: u32,
    /// How many children of one sweep run at once (`--test-threads`, `-j`).
    pub(super) jobs: usize,
}

/// One child to start: which test, at which batch size, on which device, in which
/// call-sites mode, and when to kill it.
pub(super) struct Launch<'a> {
    pub name: &'a str,
    pub def: &'a TestDef,
    pub device: Device,
    pub point: &'a RunPoint,
    pub sites: SitesMode,
    pub timeout: Option<Duration>,
}

/// The child's output under a heading, to append to a message (nothing when it is empty).
pub(super) fn output_section(output: &str) -> String {
    if output.trim().is_empty() {
        String::new()
    } else {
        format!("\n---- output ----\n{}", output.trim())
    }
}

impl Spawner {
    /// Measures the test in a fresh process: a clean heap, a clean CUDA context, and a
    /// crash that takes down only itself.
    pub(super) fn measure(
        &self,
        name: &str,
        def: &TestDef,
        device: Device,
        point: &RunPoint,
    ) -> Result<(Option<ChildResult>, String), String> {
        let timeout = self.timeout;
        let timed_out = |output: &str| {
            format!(
                "{name} timed out after {:.0?} (VRAMTEST_TIMEOUT) and was killed{}",
                timeout.unwrap_or_default(),
                output_section(output)
            )
        };
        let launch = Launch {
            name,
            def,
            device,
            point,
            sites: SitesMode::Off,
            timeout,
        };
        self.spawn(&launch, &timed_out)
    }

    /// Starts `launch` in a child process and waits for its result; a timeout fails
    /// with `timed_out_message` (given the child's output).
    pub(super) fn spawn(
        &self,
        launch: &Launch,
        timed_out_message: &dyn Fn(&str) -> String,
    ) -> Result<(Option<ChildResult>, String), String> {
        let Launch {
            name,
            def,
            device,
            point,
            ref sites,
            timeout,
        } = *launch;
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find the test binary: {e}"))?;
        let invocation = Invocation {
            test: name.to_owned(),
            device,
            iterations: def.options.iterations.unwrap_or(self.iterations),
            result: self
                .results
                .file_for(&format!("{name}@{}", point.label("-"))),
            point: point.clone(),
            threads: def.options.threads.unwrap_or(CANONICAL_THREADS),
            sites: sites.clone(),
        };
        let result_path = &invocation.result;
        let _ = std::fs::remove_file(result_path);
        let mut cmd = Command::new(exe);
        cmd.args(invocation.to_args()).stdin(Stdio::null());
        // Per-thread buffers and the split of work follow the thread count: every pool
        // gets the invocation's, whatever the user's environment says.
        for var in crate::harness::child::threads::POOL_VARIABLES {
            cmd.env(var, invocation.threads.to_string());
        }
        let (output, timed_out) = run_process(cmd, !self.nocapture, timeout)?;
        if timed_out {
            let _ = std::fs::remove_file(result_path);
            return Err(timed_out_message(&output));
        }
        Ok((read_result(result_path)?, output))
    }
}

/// The result a child wrote, removed once read; `None` when it wrote none (it died
/// before it could).
fn read_result(path: &Path) -> Result<Option<ChildResult>, String> {
    let Ok(bytes) = std::fs::read(path) else {
        return Ok(None);
    };
    let _ = std::fs::remove_file(path);
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        format!(
            "the test's result file {} is unreadable: {e}",
            path.display()
        )
    })
}

/// Runs a child to its end, or kills it after `timeout`; returns its output (when
/// captured) and whether it timed out. Output is drained while waiting, so a chatty
/// child never blocks on a full pipe. The child leads a process group of its own: a
/// timeout kills the whole group. Output is read until the pipes close, or for
/// [`DRAIN_GRACE`] more when something the child started still holds them.
fn run_process(
    mut cmd: Command,
    capture: bool,
    timeout: Option<Duration>,
) -> Result<(String, bool), String> {
    use wait_timeout::ChildExt;
    if capture {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the test: {e}"))?;
    let out = Drain::start(child.stdout.take().map(|p| Box::new(p) as _));
    let err = Drain::start(child.stderr.take().map(|p| Box::new(p) as _));
    let status = match timeout {
        Some(t) => child.wait_timeout(t),
        None => child.wait().map(Some),
    }
    .map_err(|e| format!("cannot wait for the test: {e}"))?;
    let timed_out = status.is_none();
    if timed_out {
        // Still running, so not reaped: its pid (the group's id) cannot have been
        // reused by another process.
        kill_group(&mut child);
        let _ = child.wait();
    }
    let mut text = String::from_utf8_lossy(&out.finish()).into_owned();
    text += &String::from_utf8_lossy(&err.finish());
    match status {
        Some(s) if !capture => text = format!("(output shown above; exit status: {s})"),
        Some(s) if !s.success() => text += &format!("\n(exit status: {s})"),
        _ => {}
    }
    Ok((text, timed_out))
}

/// Kills the child's process group: the child and everything it started that did not
/// leave the group. Only for a child that has not been reaped yet.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(pgid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals the group the child leads (it
        // was started with `process_group(0)`); no memory is involved.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// A thread that reads one pipe to its end.
struct Drain {
    bytes: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Drain {
    fn start(pipe: Option<Box<dyn Read + Send>>) -> Drain {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        let sink = Arc::clone(&bytes);
        std::thread::spawn(move || {
            if let Some(mut p) = pipe {
                let mut buf = [0u8; 8192];
                while let Ok(n @ 1..) = p.read(&mut buf) {
                    sink.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend_from_slice(&buf[..n]);
                }
            }
            let _ = tx.send(());
        });
        Drain { bytes, done }
    }

    /// The output read until the pipe closed, or until [`DRAIN_GRACE`] passed (a
    /// process outside the child's group still holds the pipe open).
    fn finish(self) -> Vec<u8> {
        let _ = self.done.recv_timeout(DRAIN_GRACE);
        std::mem::take(&mut *self.bytes.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_writes_results_in_a_private_directory_of_its_own() {
        let (a, b) = (ResultDir::new().unwrap(), ResultDir::new().unwrap());
        let file = a.file_for("tagged::explicit_tag");
        let dir = file.parent().unwrap().to_path_buf();
        assert_eq!(file.file_name().unwrap(), "tagged__explicit_tag.json");
        assert_ne!(dir, std::env::temp_dir(), "the shared temporary directory");
        assert_ne!(dir, b.file_for("x").parent().unwrap());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        }
        drop(a);
        assert!(!dir.exists(), "removed with the run");
    }

    #[cfg(unix)]
    #[test]
    fn a_timeout_kills_the_group_and_does_not_wait_for_a_grandchild_holding_the_pipes() {
        // The child starts a grandchild that inherits its output pipes, and hangs.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 60 & echo \"grandchild $!\"; sleep 60"]);
        let start = std::time::Instant::now();
        let (output, timed_out) = run_process(cmd, true, Some(Duration::from_millis(500))).unwrap();
        assert!(timed_out);
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "waited {:?} for the grandchild",
            start.elapsed()
        );
        let pid = output
            .lines()
            .find_map(|l| l.strip_prefix("grandchild "))
            .unwrap_or_else(|| panic!("{output}"));
        #[cfg(target_os = "linux")]
        {
            // Killed with the group: gone, or a zombie waiting for init to reap it.
            let alive = || {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                    !state.starts_with('Z') && !state.starts_with('X')
                })
            };
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while alive() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(!alive(), "the grandchild {pid} still runs");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_child_that_ends_is_not_waited_for_because_of_a_grandchild_holding_the_pipes() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 60 & echo \"grandchild $!\""]);
        let start = std::time::Instant::now();
        let (output, timed_out) = run_process(cmd, true, None).unwrap();
        let elapsed = start.elapsed();
        if let Some(pid) = output.lines().find_map(|l| l.strip_prefix("grandchild ")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        assert!(!timed_out);
        assert!(output.contains("grandchild "), "{output}");
        assert!(
            elapsed < DRAIN_GRACE + Duration::from_secs(10),
            "waited {elapsed:?} for the grandchild"
        );
    }
}
