//! The architecture checks of the vramtest workspace, on a real Rust parser (syn):
//!
//! - no import cycle between the files of a crate ([`cycles`]): a file uses another
//!   when a path it writes lands in a module the other defines, wherever the path is
//!   (a `use`, code, a macro call, an attribute, after a test module, inside an inline
//!   module) and however it is spelled (a child or imported module's name, a rename, a
//!   glob, `self`/`super`, a `pub use` re-export followed to its definition);
//! - no cycle between sibling modules taken whole, each with everything under it
//!   ([`layers`]): `harness` → `harness::child` → `probe` → `harness::registry` is one,
//!   though no two files use each other;
//! - no function over a line limit outside tests ([`long`]).
//!
//! [`check()`] runs both over source folders (`src`, `cargo-vramtest/src`); the
//! `vramtest-archcheck` binary prints what it finds.

pub mod attrs;
pub mod check;
pub mod cycles;
pub mod error;
pub mod layers;
pub mod long;
pub mod resolve;
pub mod tree;

pub use check::{Findings, check};
pub use cycles::Cycle;
pub use error::Error;
pub use layers::ModuleCycle;
pub use long::LongFn;
