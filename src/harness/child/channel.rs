//! The child's end of its result channel: taken before the test's code runs (so a
//! program the step starts does not inherit it), written once when the test ends.

use crate::harness::fd::FdError;
use crate::harness::protocol::ResultChannel;
use std::io::Write;
use std::path::PathBuf;

/// Where this child writes its result.
pub(super) enum ResultSink {
    /// The pipe's write end the parent handed down.
    Pipe(std::fs::File),
    /// A file in the run's private directory.
    File(PathBuf),
}

impl ResultSink {
    /// Takes the channel the invocation names. `Err`: the descriptor is not open here
    /// (the binary was started by hand with a made-up one).
    pub(super) fn open(channel: &ResultChannel) -> Result<ResultSink, FdError> {
        match channel {
            ResultChannel::File(path) => Ok(ResultSink::File(path.clone())),
            ResultChannel::Fd(fd) => crate::harness::fd::take(*fd, "result").map(ResultSink::Pipe),
        }
    }

    /// Writes the result and closes the channel.
    pub(super) fn write(self, bytes: &[u8]) -> Result<(), SinkError> {
        match self {
            ResultSink::Pipe(mut file) => file.write_all(bytes).map_err(SinkError::Pipe),
            ResultSink::File(path) => {
                std::fs::write(&path, bytes).map_err(|source| SinkError::File { path, source })
            }
        }
    }
}

/// A result that cannot be written.
#[derive(Debug, thiserror::Error)]
pub(super) enum SinkError {
    #[error("cannot write the result to the parent's pipe: {0}")]
    Pipe(std::io::Error),
    #[error("cannot write the result to {}: {source}", path.display())]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
}
