//! The error type a `#[vramtest]` function returns.

use std::fmt;

/// Any error a training step can raise. `?` converts every
/// `std::error::Error + Send + Sync + 'static` (candle's and burn's included).
pub struct Error(Box<dyn std::error::Error + Send + Sync + 'static>);

/// What a `#[vramtest]` function returns.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error from a message.
    pub fn msg(message: impl fmt::Display) -> Error {
        Error(message.to_string().into())
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Error {
    fn from(e: E) -> Self {
        Error(Box::new(e))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Error {
    /// The error and its chain of sources, one per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, "\n  caused by: {s}")?;
            source = s.source();
        }
        Ok(())
    }
}
