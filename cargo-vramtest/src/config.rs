//! The `vramtest` metadata tables: the shared parser lives in `vramtest_model::config`,
//! where the test harness reads the same settings under plain `cargo test`.

pub use vramtest_model::config::*;
