//! The measurement model of vramtest: pure data in, data out.
//!
//! - [`ledger`] turns a probe's event stream into a [`Profile`] (the classification
//!   rule lives in [`ledger::classify`]);
//! - [`snapshot`] is the file format shared by the test harness and `cargo vramtest`;
//! - [`device`] decides the device a run measures on, for the harness and the CLI;
//! - [`settings`] reads the `vramtest` metadata tables and merges them into the
//!   [`Policy`] a result is held to; [`LimitKey`] names each limit;
//! - [`policy`] decides whether a new result regressed against a snapshot;
//! - [`axes`] fits figures measured over a grid of named axes as sums of monomials,
//!   which predict configurations too large to run;
//! - [`axial`] chooses the points that measure a sweep's target one axis at a time;
//! - [`pool`] replays a stream through a model of CUDA's stream-ordered pool: what a
//!   CPU run would allocate and reserve on a GPU;
//! - [`doubt`] carries the flags of the fits a predicted figure rests on, and calls a
//!   prediction with a category over its own peak impossible.
//!
//! Nothing here touches a device; only [`snapshot::read`] and
//! [`snapshot::write_atomic`] touch the file system, and only [`mod@env`] reads the
//! environment.
//!
//! It is a part of [vramtest](https://crates.io/crates/vramtest), shared by the test
//! harness and `cargo vramtest`; a user's tests depend on `vramtest`, not on this crate.
//! How the pieces fit: the book's design part, <https://cargo-vramtest.github.io/cargo-vramtest/>
//! ("The harness pipeline").

#![deny(missing_docs)]

pub mod axes;
pub mod axial;
pub mod bytes;
pub mod category;
pub mod cpu_time;
pub mod device;
pub mod doubt;
pub mod env;
pub mod explain;
pub mod fit;
pub mod gradient_check;
pub mod gradient_reading;
pub mod ledger;
pub mod levers;
pub mod limit;
pub mod parallel;
pub mod policy;
pub mod pool;
pub mod profile;
pub mod progress;
pub mod refit;
pub mod regimes;
pub mod report;
pub mod settings;
pub mod sites;
pub mod snapshot;
pub mod sweep;
pub mod workflow;

pub use bytes::{HumanBytes, HumanDelta, parse_bytes};
pub use category::{Category, Phase};
pub use ledger::{Event, profile};
pub use limit::{Limit, LimitKey};
pub use policy::{Comparison, Finding, Movement, Policy, Subject, Verdict, compare};
pub use profile::{CategoryBytes, Fidelity, LeakSite, PhaseRecord, Profile};
pub use snapshot::{Body, DeviceClass, Snapshot};
