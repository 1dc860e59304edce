//! What stops a check: a file that cannot be read or parsed, a module whose file is
//! missing.

use std::fmt;
use std::path::{Path, PathBuf};

/// A file the checks could not read, with the line where that is known.
#[derive(Debug)]
pub struct Error {
    /// The file that is wrong.
    pub file: PathBuf,
    /// Its line (1-based), where the problem has one.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl Error {
    /// An error in `file` at `line` (if any).
    pub fn new(file: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        Error {
            file: file.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file.display(), line, self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for Error {}

/// Reads and parses one Rust source file.
pub fn parse_file(path: &Path) -> Result<syn::File, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::new(path, None, format!("cannot read: {e}")))?;
    syn::parse_file(&text).map_err(|e| {
        let line = e.span().start().line;
        Error::new(path, Some(line), format!("cannot parse: {e}"))
    })
}
