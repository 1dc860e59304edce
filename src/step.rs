//! `Step`: what a `#[vramtest]` function receives to mark the phases of its training step.

use crate::probe;
use vramtest_model::{Category, Event, Phase};

/// The device a test runs on. Map it to your framework's device
/// (`candle_core::Device::Cpu`, `Device::new_cuda(n)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// The CPU: the heap is measured.
    Cpu,
    /// CUDA device `n`: device memory is measured.
    Cuda(usize),
}

impl Device {
    /// Which snapshots the device's results go to.
    pub(crate) fn class(self) -> vramtest_model::DeviceClass {
        match self {
            Device::Cpu => vramtest_model::DeviceClass::Cpu,
            Device::Cuda(_) => vramtest_model::DeviceClass::Cuda,
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// A device name that is not `cpu` or `cuda:N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown device `{0}` (hint: `cpu` or `cuda:N`)")]
pub struct ParseDeviceError(pub String);

/// Reads what [`Display`](std::fmt::Display) writes: `cpu` or `cuda:N`.
impl std::str::FromStr for Device {
    type Err = ParseDeviceError;
    fn from_str(s: &str) -> Result<Device, ParseDeviceError> {
        match s {
            "cpu" => Ok(Device::Cpu),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| ParseDeviceError(other.to_owned())),
        }
    }
}

/// The handle a `#[vramtest]` function marks its training step with.
///
/// Each phase method runs its closure and returns its result unchanged; the memory
/// allocated inside is attributed by the classification rule (the book's "The categories
/// and the classification rule", `docs/src/guide/categories.md`):
/// survivors of `params` are parameters, of `forward` activations, and so on.
#[derive(Debug)]
pub struct Step {
    device: Device,
    iterations: u32,
    batch: usize,
    /// `(axis, value)` of a sweep over named axes; empty otherwise.
    axes: Vec<(String, usize)>,
    /// `(axis, level)` of the sweep's categorical axes; empty without them.
    levels: Vec<(String, String)>,
    /// Which of `axes`, then of `levels`, the step read (bit `i` for `axes[i]`, bit
    /// `axes.len() + j` for `levels[j]`), so that an axis the step never reads fails
    /// instead of fitting a constant. A `Cell`: reading an axis inside a measured phase
    /// allocates nothing.
    read: std::cell::Cell<u64>,
}

impl Step {
    pub(crate) fn new(device: Device, iterations: u32) -> Step {
        Step {
            device,
            iterations,
            batch: 1,
            axes: Vec::new(),
            levels: Vec::new(),
            read: std::cell::Cell::new(0),
        }
    }

    /// The same step for one point of a sweep.
    pub(crate) fn with_point(
        mut self,
        batch: usize,
        axes: &[(String, usize)],
        levels: &[(String, String)],
    ) -> Step {
        self.batch = batch;
        self.axes = axes.to_vec();
        self.levels = levels.to_vec();
        self
    }

    /// The device this run measures.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The batch size of this run: one of the attribute's `batch = [..]` values (or
    /// its `batch` axis in `axes(..)`), each measured in a process of its own; 1 for a
    /// test without one.
    pub fn batch(&self) -> usize {
        self.mark("batch");
        self.batch
    }

    /// Notes that the step read `name`, when it is one of the axes.
    fn mark(&self, name: &str) {
        let i = self.axes.iter().position(|(k, _)| k == name).or_else(|| {
            self.levels
                .iter()
                .position(|(k, _)| k == name)
                .map(|j| self.axes.len() + j)
        });
        if let Some(i) = i {
            self.read
                .set(self.read.get() | 1u64.checked_shl(i as u32).unwrap_or(0));
        }
    }

    /// The axes of this run the step never read (`t.axis`, `t.batch`, `t.variant`),
    /// the numeric ones first.
    pub(crate) fn unread_axes(&self) -> Vec<String> {
        let read = self.read.get();
        self.axes
            .iter()
            .map(|(k, _)| k)
            .chain(self.levels.iter().map(|(k, _)| k))
            .enumerate()
            .filter(|&(i, _)| read & 1u64.checked_shl(i as u32).unwrap_or(0) == 0)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// The level of the named categorical axis in this run: one of the levels the
    /// attribute's `axes(name = ["..", ..])` lists (the first is the baseline), every
    /// combination of levels running the numeric grid.
    ///
    /// # Panics
    ///
    /// When the test declares no categorical axis of that name (none at all, or a
    /// numeric one): the message names the axis and the declared ones (the test fails
    /// with it).
    pub fn variant(&self, name: &str) -> &str {
        if let Some((_, level)) = self.levels.iter().find(|(k, _)| k == name) {
            self.mark(name);
            return level;
        }
        let declared: Vec<&str> = self.levels.iter().map(|(k, _)| k.as_str()).collect();
        let declared = if declared.is_empty() {
            "none".to_owned()
        } else {
            declared.join(", ")
        };
        if name == "batch" || self.axes.iter().any(|(k, _)| k == name) {
            panic!(
                "t.variant(\"{name}\"): `{name}` is a numeric axis (read it with t.axis(\"{name}\"); categorical axes: {declared})"
            );
        }
        panic!(
            "t.variant(\"{name}\"): the test declares no categorical axis `{name}` (categorical axes: {declared}; hint: add it to #[vramtest(axes({name} = [\"..\", ..]))])"
        )
    }

    /// The value of the named axis in this run: one of the values the attribute's
    /// `axes(name = [..])` lists, each point of the grid measured in a process of its
    /// own. `t.axis("batch")` is `t.batch()`, declared or not.
    ///
    /// # Panics
    ///
    /// When the test declares no axis of that name: the message names the axis and
    /// the declared ones (the test fails with it).
    pub fn axis(&self, name: &str) -> usize {
        if let Some(&(_, v)) = self.axes.iter().find(|(k, _)| k == name) {
            self.mark(name);
            return v;
        }
        if name == "batch" {
            return self.batch;
        }
        let declared: Vec<&str> = self.axes.iter().map(|(k, _)| k.as_str()).collect();
        panic!(
            "t.axis(\"{name}\"): the test declares no axis `{name}` (declared: {}; hint: add it to #[vramtest(axes({name} = [..]))])",
            if declared.is_empty() {
                "none".to_owned()
            } else {
                declared.join(", ")
            }
        )
    }

    /// Builds the model: survivors are `parameters`.
    pub fn params<T>(&self, f: impl FnOnce() -> T) -> T {
        phase(Phase::Params, f)
    }

    /// Builds the optimizer: survivors are `optimizer_state`.
    pub fn optimizer_init<T>(&self, f: impl FnOnce() -> T) -> T {
        phase(Phase::OptimizerInit, f)
    }

    /// Loads a batch: survivors are `inputs`.
    pub fn inputs<T>(&self, f: impl FnOnce() -> T) -> T {
        phase(Phase::Inputs, f)
    }

    /// The forward pass and loss: survivors freed within the iteration are
    /// `activations`; those that outlive it are `workspace` (caches, scratch buffers).
    pub fn forward<T>(&self, f: impl FnOnce() -> T) -> T {
        phase(Phase::Forward, f)
    }

    /// The backward pass: survivors are `gradients`.
    pub fn backward<T>(&self, f: impl FnOnce() -> T) -> T {
        phase(Phase::Backward, f)
    }

    /// The optimizer update: survivors are `optimizer_state` (lazily created moments).
    pub fn optimizer_step<T>(&self, f: impl FnOnce() -> T) -> T {
        phase(Phase::OptimizerStep, f)
    }

    /// Charges everything allocated inside `f` to `category`, whatever the phase.
    pub fn tag<T>(&self, category: Category, f: impl FnOnce() -> T) -> T {
        probe::mark(Event::TagPush(category));
        let _end = Guard(Event::TagPop);
        f()
    }

    /// A handle for reporting device allocations made directly on cudarc, so a CUDA
    /// run measures every allocation (`fidelity: exact`) instead of reading the memory
    /// pool at phase boundaries (`fidelity: phase`).
    pub fn cuda_tracker(&self) -> crate::CudaTracker {
        crate::CudaTracker::new()
    }

    /// The training loop: `for _ in t.iterations() { .. }`. Yields the iteration number
    /// (0 is the warm-up). It does not borrow the `Step`, so the body can call its
    /// phase methods; each `next()` marks an iteration boundary.
    pub fn iterations(&self) -> Iterations {
        Iterations {
            next: 0,
            total: self.iterations,
            open: false,
        }
    }
}

/// Runs `f` as one run of `phase`; the phase ends even if `f` panics.
fn phase<T>(phase: Phase, f: impl FnOnce() -> T) -> T {
    probe::mark(Event::PhaseStart(phase));
    let _end = Guard(Event::PhaseEnd);
    f()
}

/// Records its marker when dropped.
struct Guard(Event);

impl Drop for Guard {
    fn drop(&mut self) {
        probe::mark(self.0);
    }
}

/// The iterator returned by [`Step::iterations`].
#[derive(Debug)]
pub struct Iterations {
    next: u32,
    total: u32,
    open: bool,
}

impl Iterator for Iterations {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.open {
            probe::mark(Event::IterationEnd);
            self.open = false;
        }
        if self.next >= self.total {
            return None;
        }
        let n = self.next;
        self.next += 1;
        probe::mark(Event::IterationStart(n));
        self.open = true;
        Some(n)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.total - self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Iterations {}

impl Drop for Iterations {
    /// A loop left with `break` or `?` still closes its iteration.
    fn drop(&mut self) {
        if self.open {
            probe::mark(Event::IterationEnd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Device, Step};
    use test_case::test_case;

    fn point() -> Step {
        Step::new(Device::Cpu, 1).with_point(
            4,
            &[("seq".into(), 16), ("batch".into(), 4)],
            &[
                ("precision".into(), "bf16".into()),
                ("checkpointing".into(), "off".into()),
            ],
        )
    }

    #[test]
    fn a_variant_reads_this_points_level_and_counts_as_read() {
        let t = point();
        assert_eq!(
            t.unread_axes(),
            ["seq", "batch", "precision", "checkpointing"]
        );
        assert_eq!(t.variant("precision"), "bf16");
        assert_eq!(t.unread_axes(), ["seq", "batch", "checkpointing"]);
        assert_eq!(t.axis("seq"), 16);
        assert_eq!(t.batch(), 4);
        assert_eq!(t.variant("checkpointing"), "off");
        assert!(t.unread_axes().is_empty());
    }

    #[test_case("dtype", "no categorical axis `dtype` (categorical axes: precision, checkpointing"; "an undeclared axis")]
    #[test_case("seq", "`seq` is a numeric axis"; "a numeric axis")]
    #[test_case("batch", "`batch` is a numeric axis"; "the batch")]
    fn a_variant_of_another_axis_fails_naming_it(name: &str, needle: &str) {
        let t = point();
        let e =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.variant(name).to_owned()))
                .unwrap_err();
        let message = e.downcast_ref::<String>().unwrap();
        assert!(message.contains(needle), "{message}");
        assert!(
            message.starts_with(&format!("t.variant(\"{name}\")")),
            "{message}"
        );
    }

    #[test]
    fn a_device_reads_back_what_it_displays() {
        for device in [Device::Cpu, Device::Cuda(0), Device::Cuda(7)] {
            assert_eq!(device.to_string().parse::<Device>(), Ok(device));
        }
        assert_eq!("cuda:3".parse::<Device>(), Ok(Device::Cuda(3)));
    }

    #[test_case("tpu"; "another device")]
    #[test_case("cuda"; "no ordinal")]
    #[test_case("cuda:"; "an empty ordinal")]
    #[test_case("cuda:-1"; "a negative ordinal")]
    #[test_case("CPU"; "upper case")]
    fn an_unknown_device_is_named(text: &str) {
        let e = text.parse::<Device>().unwrap_err();
        assert_eq!(e, super::ParseDeviceError(text.to_owned()));
        assert!(
            e.to_string()
                .starts_with(&format!("unknown device `{text}`")),
            "{e}"
        );
    }
}
