//! The error type a `#[vramtest]` function returns.

use std::error::Error as StdError;
use std::fmt;

/// Any error a training step can raise. `?` converts every
/// `std::error::Error + Send + Sync + 'static` (candle's and burn's included); a
/// `Box<dyn Error + Send + Sync>` goes through [`Error::from_boxed`].
///
/// Like `anyhow::Error`, it cannot implement `std::error::Error` itself: that impl
/// would overlap with the conversion `?` uses (`From<E: Error>`, which would then
/// include `From<Error> for Error`). It converts into the standard boxes instead, and
/// derefs to the error inside:
///
/// ```
/// fn helper() -> vramtest::Result<()> {
///     Err(vramtest::Error::msg("the data loader ran dry"))
/// }
///
/// fn caller() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     helper()?; // or `anyhow::Error::from_boxed(e.into())` for anyhow
///     Ok(())
/// }
/// # assert_eq!(caller().unwrap_err().to_string(), "the data loader ran dry");
/// ```
pub struct Error(Box<dyn StdError + Send + Sync + 'static>);

/// What a `#[vramtest]` function returns.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error from a message.
    pub fn msg(message: impl fmt::Display) -> Error {
        Error(message.to_string().into())
    }

    /// An error from a boxed one (`.map_err(vramtest::Error::from_boxed)?`; anyhow's
    /// errors convert into such a box).
    pub fn from_boxed(error: Box<dyn StdError + Send + Sync + 'static>) -> Error {
        Error(error)
    }
}

impl<E: StdError + Send + Sync + 'static> From<E> for Error {
    fn from(e: E) -> Self {
        Error(Box::new(e))
    }
}

impl From<Error> for Box<dyn StdError + Send + Sync + 'static> {
    fn from(e: Error) -> Self {
        e.0
    }
}

impl From<Error> for Box<dyn StdError + 'static> {
    fn from(e: Error) -> Self {
        e.0
    }
}

impl std::ops::Deref for Error {
    type Target = dyn StdError + Send + Sync + 'static;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl AsRef<dyn StdError + Send + Sync + 'static> for Error {
    fn as_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.0
    }
}

impl AsRef<dyn StdError + 'static> for Error {
    fn as_ref(&self) -> &(dyn StdError + 'static) {
        &*self.0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Io(std::io::Error);
    impl fmt::Display for Io {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("cannot read the batch")
        }
    }
    impl StdError for Io {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    fn step() -> crate::Result<()> {
        Err(Io(std::io::Error::other("disk gone")))?
    }

    #[test]
    fn converts_into_the_standard_boxes_with_its_sources() {
        fn boxed() -> std::result::Result<(), Box<dyn StdError>> {
            step()?;
            Ok(())
        }
        fn boxed_send() -> std::result::Result<(), Box<dyn StdError + Send + Sync>> {
            step()?;
            Ok(())
        }
        let e = boxed().unwrap_err();
        assert_eq!(e.to_string(), "cannot read the batch");
        assert_eq!(e.source().unwrap().to_string(), "disk gone");
        assert!(boxed_send().unwrap_err().downcast_ref::<Io>().is_some());
    }

    #[test]
    fn takes_a_boxed_error() {
        fn library() -> std::result::Result<(), Box<dyn StdError + Send + Sync>> {
            Err("the loss went NaN".into())
        }
        fn test_body() -> crate::Result<()> {
            library().map_err(Error::from_boxed)?;
            Ok(())
        }
        assert_eq!(test_body().unwrap_err().to_string(), "the loss went NaN");
    }

    #[test]
    fn derefs_to_the_error_inside() {
        let e = step().unwrap_err();
        let inner: &(dyn StdError + Send + Sync) = &*e;
        assert_eq!(inner.source().unwrap().to_string(), "disk gone");
        assert!(e.downcast_ref::<Io>().is_some());
        assert_eq!(
            e.to_string(),
            "cannot read the batch\n  caused by: disk gone"
        );
    }
}
