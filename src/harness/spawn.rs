//! A child process per test: started with the child-mode environment, its output
//! drained while it runs, killed when it outlives `VRAMTEST_TIMEOUT`.

use super::child::ChildResult;
use super::parent::Run;
use crate::env;
use crate::step::Device;
use std::process::{Command, Stdio};

impl Run {
    /// Runs the test in a fresh process: a clean heap, a clean CUDA context, and a
    /// crash that takes down only itself.
    pub(super) fn spawn_child(
        &self,
        name: &str,
        device: Device,
    ) -> Result<(Option<ChildResult>, String), String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find the test binary: {e}"))?;
        let result_path = std::env::temp_dir().join(format!(
            "vramtest-{}-{}.json",
            std::process::id(),
            name.replace("::", "__")
        ));
        let _ = std::fs::remove_file(&result_path);
        let mut cmd = Command::new(exe);
        cmd.env(env::CHILD_TEST, name)
            .env(env::CHILD_RESULT, &result_path)
            .env(env::CHILD_DEVICE, device.to_string())
            .env(
                env::CONFIG,
                serde_json::to_string(&self.config).expect("configs serialize"),
            )
            .stdin(Stdio::null());
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            // Per-thread buffers (gemm packing) scale with the thread count: pin it so
            // figures do not depend on the machine's cores.
            cmd.env("RAYON_NUM_THREADS", "2");
        }
        let (output, timed_out) = run_process(cmd, !self.nocapture, self.timeout)?;
        if timed_out {
            let _ = std::fs::remove_file(&result_path);
            return Err(format!(
                "{name} timed out after {:.0?} (VRAMTEST_TIMEOUT) and was killed{}",
                self.timeout.unwrap_or_default(),
                if output.trim().is_empty() {
                    String::new()
                } else {
                    format!("\n---- output ----\n{}", output.trim())
                }
            ));
        }
        let result = match std::fs::read(&result_path) {
            Ok(bytes) => {
                let _ = std::fs::remove_file(&result_path);
                Some(serde_json::from_slice(&bytes).map_err(|e| {
                    format!(
                        "the test's result file {} is unreadable: {e}",
                        result_path.display()
                    )
                })?)
            }
            // No file: the child died before it could write one.
            Err(_) => None,
        };
        Ok((result, output))
    }
}

/// Runs a child to its end, or kills it after `timeout`; returns its output (when
/// captured) and whether it timed out. Output is drained while waiting, so a chatty
/// child never blocks on a full pipe.
fn run_process(
    mut cmd: Command,
    capture: bool,
    timeout: Option<std::time::Duration>,
) -> Result<(String, bool), String> {
    use std::io::Read;
    use wait_timeout::ChildExt;
    if capture {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the test: {e}"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let wait = |child: &mut std::process::Child| match timeout {
        Some(t) => child.wait_timeout(t),
        None => child.wait().map(Some),
    };
    let status = wait(&mut child).map_err(|e| format!("cannot wait for the test: {e}"))?;
    let timed_out = status.is_none();
    if timed_out {
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut text = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
    text += &String::from_utf8_lossy(&err.join().unwrap_or_default());
    match status {
        Some(s) if !capture => text = format!("(output shown above; exit status: {s})"),
        Some(s) if !s.success() => text += &format!("\n(exit status: {s})"),
        _ => {}
    }
    Ok((text, timed_out))
}
