//! A child process per test: started with its [`Invocation`] on the command line,
//! writing its result into a pipe only it holds, its output drained while it runs, and
//! its whole process group killed when it outlives `VRAMTEST_TIMEOUT`.

use crate::harness::protocol::{ChildResult, Invocation, ResultChannel, RunPoint, SitesMode};
use crate::harness::registry::{CANONICAL_THREADS, TestDef};
use crate::step::Device;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// How long output is drained after a child ended, for a grandchild that still holds
/// its pipes: then the output read so far is taken and the rest left behind.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How the children of one run are started: whether their output is captured, and
/// when they are killed.
pub(super) struct Spawner {
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
    /// What the child reads on its standard input (a call-sites plan); else none.
    pub stdin: Option<Vec<u8>>,
}

/// The child's output under a heading, to append to a message (nothing when it is empty).
pub(super) fn output_section(output: &str) -> String {
    if output.trim().is_empty() {
        String::new()
    } else {
        format!("\n---- output ----\n{}", output.trim())
    }
}

/// A child that could not be run to a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum SpawnError {
    #[error("cannot find the test binary: {0}")]
    Exe(String),
    #[error("cannot open a pipe for the result: {0}")]
    Pipe(String),
    #[allow(dead_code, reason = "the result channel is a file off Unix only")]
    #[error("cannot create a temporary directory for the result: {0}")]
    TempDir(String),
    #[error("cannot start the test: {0}")]
    Start(String),
    #[error("cannot wait for the test: {0}")]
    Wait(String),
    /// The child outlived its timeout and was killed: what the caller says of it.
    #[error("{0}")]
    TimedOut(String),
    #[error("the test's result is unreadable: {0}")]
    Unreadable(String),
    #[error(
        "the test's result channel held more than one result: a copy of its process (forked by the step?) returned from the step too, or another process wrote into it"
    )]
    TwoResults,
}

/// How a child ended: the result it wrote (none when it died before it could), its
/// output, and how its process ended.
pub(super) struct Ended {
    pub(super) result: Option<ChildResult>,
    pub(super) output: String,
    /// `None` when the process ended cleanly (exit 0, no signal); else how it ended
    /// (`exit status: 1`, `signal: 6 (SIGABRT)`). A verdict needs both a result and a
    /// clean exit: a process that dies after writing its result has not passed.
    pub(super) unclean: Option<String>,
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
    ) -> Result<Ended, SpawnError> {
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
            stdin: None,
        };
        self.spawn(&launch, &timed_out)
    }

    /// Starts `launch` in a child process and waits for its result; a timeout fails
    /// with `timed_out_message` (given the child's output).
    pub(super) fn spawn(
        &self,
        launch: &Launch,
        timed_out_message: &dyn Fn(&str) -> String,
    ) -> Result<Ended, SpawnError> {
        let Launch {
            name,
            def,
            device,
            point,
            ref sites,
            timeout,
            ref stdin,
        } = *launch;
        let exe = std::env::current_exe().map_err(|e| SpawnError::Exe(e.to_string()))?;
        let channel = Channel::open()?;
        let invocation = Invocation {
            test: name.to_owned(),
            device,
            iterations: def.options.iterations.unwrap_or(self.iterations),
            result: channel.for_child(),
            point: point.clone(),
            threads: def.options.threads.unwrap_or(CANONICAL_THREADS),
            sites: sites.clone(),
        };
        let mut cmd = Command::new(exe);
        cmd.args(invocation.to_args())
            .env(
                crate::harness::protocol::RESULT_VAR,
                invocation.result.to_arg(),
            )
            .stdin(Stdio::null());
        // Per-thread buffers and the split of work follow the thread count: every pool
        // gets the invocation's, whatever the user's environment says.
        for var in crate::harness::child::threads::POOL_VARIABLES {
            cmd.env(var, invocation.threads.to_string());
        }
        // Where this run's reports go is the harness's business, not the test's.
        cmd.env_remove(vramtest_model::env::REPORT_DIR);
        cmd.env_remove(vramtest_model::env::STARTED_BY);
        let finished = run_process(cmd, !self.nocapture, timeout, channel, stdin.clone())?;
        let Some(status) = finished.status else {
            return Err(SpawnError::TimedOut(timed_out_message(&finished.output)));
        };
        Ok(Ended {
            result: parse_result(&finished.result)?,
            output: finished.output,
            unclean: (!status.success()).then(|| status.to_string()),
        })
    }
}

/// The result a child wrote: nothing (it died before it could), or exactly one
/// result. Two results mean two processes returned from the step (the step forked).
fn parse_result(bytes: &[u8]) -> Result<Option<ChildResult>, SpawnError> {
    let mut results = serde_json::Deserializer::from_slice(bytes).into_iter::<ChildResult>();
    let first = match results.next() {
        None => return Ok(None),
        Some(r) => r.map_err(|e| SpawnError::Unreadable(e.to_string()))?,
    };
    match results.next() {
        None => Ok(Some(first)),
        Some(_) => Err(SpawnError::TwoResults),
    }
}

/// One child's result channel, parent side.
enum Channel {
    /// A pipe: the parent reads one end while the child runs; the child inherits the
    /// other, which no other process is handed.
    #[cfg(unix)]
    Pipe(std::io::PipeReader, std::io::PipeWriter),
    /// A file in a private directory of its own (mode 0700, a random name), read once
    /// the child has ended; removed with the channel.
    #[cfg(not(unix))]
    File(tempfile::TempDir, std::path::PathBuf),
}

impl Channel {
    #[cfg(unix)]
    fn open() -> Result<Channel, SpawnError> {
        // Both ends close on exec: only the child this channel is for gets the write
        // end (`fd::hand_down`), whichever thread starts another child meanwhile.
        let (reader, writer) = std::io::pipe().map_err(|e| SpawnError::Pipe(e.to_string()))?;
        Ok(Channel::Pipe(reader, writer))
    }

    #[cfg(not(unix))]
    fn open() -> Result<Channel, SpawnError> {
        let dir = tempfile::Builder::new()
            .prefix("vramtest-")
            .tempdir()
            .map_err(|e| SpawnError::TempDir(e.to_string()))?;
        let path = dir.path().join("result.json");
        Ok(Channel::File(dir, path))
    }

    fn for_child(&self) -> ResultChannel {
        match self {
            #[cfg(unix)]
            Channel::Pipe(_, writer) => ResultChannel::Fd(std::os::fd::AsRawFd::as_raw_fd(writer)),
            #[cfg(not(unix))]
            Channel::File(_, path) => ResultChannel::File(path.clone()),
        }
    }
}

/// A child's end: its output, its exit status (`None`: it timed out and was killed),
/// and the bytes of its result channel.
struct Finished {
    output: String,
    status: Option<std::process::ExitStatus>,
    result: Vec<u8>,
}

/// Runs a child to its end, or kills it after `timeout`. Output and result are drained
/// while waiting, so a chatty child never blocks on a full pipe. The child leads a
/// process group of its own: a timeout kills the whole group. Pipes are read until they
/// close, or for [`DRAIN_GRACE`] more when something the child started still holds
/// them.
fn run_process(
    mut cmd: Command,
    capture: bool,
    timeout: Option<Duration>,
    channel: Channel,
    stdin: Option<Vec<u8>>,
) -> Result<Finished, SpawnError> {
    use wait_timeout::ChildExt;
    if capture {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    #[cfg(unix)]
    let Channel::Pipe(reader, writer) = channel;
    #[cfg(unix)]
    crate::harness::fd::hand_down(&mut cmd, std::os::fd::AsRawFd::as_raw_fd(&writer));
    let spawned = cmd.spawn();
    // The parent's copy of the write end goes at once: the pipe then closes when the
    // child (and whatever it started) is done with it.
    #[cfg(unix)]
    drop((cmd, writer));
    let mut child = spawned.map_err(|e| SpawnError::Start(e.to_string()))?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // Written from a thread, closed when done: the child reads it to its end.
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut pipe, &bytes);
        });
    }
    let out = Drain::start(child.stdout.take().map(|p| Box::new(p) as _));
    let err = Drain::start(child.stderr.take().map(|p| Box::new(p) as _));
    #[cfg(unix)]
    let result = Drain::start(Some(Box::new(reader)));
    let status = match timeout {
        Some(t) => child.wait_timeout(t),
        None => child.wait().map(Some),
    }
    .map_err(|e| SpawnError::Wait(e.to_string()))?;
    if status.is_none() {
        // Still running, so not reaped: its pid (the group's id) cannot have been
        // reused by another process.
        kill_group(&mut child);
        let _ = child.wait();
    }
    let mut text = String::from_utf8_lossy(&out.finish()).into_owned();
    text += &String::from_utf8_lossy(&err.finish());
    match status {
        Some(s) if !capture => text = format!("(output shown above; exit status: {s})"),
        Some(s) if !s.success() => text += &format!("\n({s})"),
        _ => {}
    }
    #[cfg(unix)]
    let result = result.finish();
    #[cfg(not(unix))]
    let result = match channel {
        Channel::File(_dir, path) => std::fs::read(&path).unwrap_or_default(),
    };
    Ok(Finished {
        output: text,
        status,
        result,
    })
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

    fn no_result() -> Channel {
        Channel::open().unwrap()
    }

    #[cfg(unix)]
    #[test]
    fn the_child_alone_writes_into_its_result_pipe() {
        let channel = no_result();
        let ResultChannel::Fd(fd) = channel.for_child() else {
            panic!("a pipe on Unix")
        };
        // A sibling started meanwhile (as another test's child would be) does not
        // inherit the write end: it cannot write to that descriptor.
        let sibling = Command::new("sh")
            .args(["-c", &format!("echo spoofed >&{fd}")])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(!sibling.success(), "the sibling wrote to descriptor {fd}");
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            &format!(r#"printf '{{"Ignored":{{"reason":"mine"}}}}' >&{fd}"#),
        ]);
        let f = run_process(cmd, true, None, channel, None).unwrap();
        assert!(f.status.unwrap().success(), "{}", f.output);
        match parse_result(&f.result).unwrap() {
            Some(ChildResult::Ignored { reason }) => assert_eq!(reason, "mine"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn two_results_in_one_channel_are_an_error_and_none_is_no_result() {
        let one = serde_json::to_vec(&ChildResult::Ignored { reason: "x".into() }).unwrap();
        let two = [one.clone(), one.clone()].concat();
        assert!(parse_result(&one).unwrap().is_some());
        assert!(parse_result(b"").unwrap().is_none());
        let e = parse_result(&two).unwrap_err();
        assert_eq!(e, SpawnError::TwoResults);
        assert!(e.to_string().contains("more than one result"), "{e}");
        let e = parse_result(b"{\"Ignored\":").unwrap_err();
        assert!(matches!(e, SpawnError::Unreadable(_)), "{e}");
        assert!(e.to_string().contains("unreadable"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_timeout_kills_the_group_and_does_not_wait_for_a_grandchild_holding_the_pipes() {
        // The child starts a grandchild that inherits its output pipes, and hangs.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 60 & echo \"grandchild $!\"; sleep 60"]);
        let start = std::time::Instant::now();
        let f = run_process(
            cmd,
            true,
            Some(Duration::from_millis(500)),
            no_result(),
            None,
        )
        .unwrap();
        let (output, timed_out) = (f.output, f.status.is_none());
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
        let f = run_process(cmd, true, None, no_result(), None).unwrap();
        let (output, timed_out) = (f.output, f.status.is_none());
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
