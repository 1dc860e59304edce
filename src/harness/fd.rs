//! Descriptors a process is handed down by the one that started it (a child's result
//! pipe, the harness's report pipe from `cargo vramtest`): taken once, and closed on
//! exec, so no program started afterwards inherits them.

/// An inherited descriptor that cannot be taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FdError {
    /// Not open in this process.
    #[error(
        "the {what} descriptor {fd} is not open in this process (it is handed down by the process that starts this one)"
    )]
    NotOpen { what: &'static str, fd: i32 },
    /// Not a Unix process.
    #[allow(
        dead_code,
        reason = "built on Unix too, where descriptors are handed down"
    )]
    #[error("the {what} descriptor {fd}: descriptors are handed down on Unix only")]
    NotUnix { what: &'static str, fd: i32 },
}

/// Takes ownership of the inherited descriptor `fd` (the `what` pipe). `Err`: it is
/// not open in this process (a command line or variable made up by hand).
#[cfg(unix)]
pub(crate) fn take(fd: i32, what: &'static str) -> Result<std::fs::File, FdError> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl(2) on a descriptor number only reads and sets its flags; a number
    // that is not open fails with EBADF, checked before the descriptor is owned.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags == -1 {
        return Err(FdError::NotOpen { what, fd });
    }
    // SAFETY: as above; close-on-exec keeps it from programs started later.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    // SAFETY: the descriptor is open, and nothing else in this process owns it: it was
    // handed down for this one use.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// Descriptors are handed down on Unix only.
#[cfg(not(unix))]
pub(crate) fn take(fd: i32, what: &'static str) -> Result<std::fs::File, FdError> {
    Err(FdError::NotUnix { what, fd })
}

/// Lets the child `cmd` starts inherit `fd`: its close-on-exec flag is cleared in the
/// child alone, between fork and exec, so no other process started meanwhile (by
/// another thread) inherits it.
#[cfg(unix)]
pub(crate) fn hand_down(cmd: &mut std::process::Command, fd: i32) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and calls only fcntl(2),
    // which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
