//! One test measured in this process: on the CPU heap, or on a CUDA device; either
//! way a [`ChildResult`]. Each backend's [`Backend`] impl is here.

use super::backend::Backend;
use super::{site_capture, timeline};
use crate::harness::protocol::{ChildResult, Invocation};
use crate::harness::registry::TestDef;
use crate::probe::heap;
use crate::step::{Device, Step};
use std::path::Path;
use vramtest_model::pool;
use vramtest_model::snapshot::Info;

impl Backend for heap::Heap {
    fn measure(&self, def: &TestDef, invocation: &Invocation, package_dir: &Path) -> ChildResult {
        heap(def, invocation, package_dir)
    }
}

impl Backend for crate::probe::cuda::Cuda {
    fn measure(&self, def: &TestDef, invocation: &Invocation, _package_dir: &Path) -> ChildResult {
        cuda(def, self.ordinal, invocation)
    }
}

/// The CPU time this process has used so far (user and system, every thread), in
/// microseconds; `None` where it cannot be read.
#[cfg(unix)]
fn cpu_micros() -> Option<u64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the `rusage` it is pointed at; read only on success.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return None;
        }
        usage.assume_init()
    };
    let micros = |t: libc::timeval| {
        u64::try_from(t.tv_sec)
            .ok()?
            .checked_mul(1_000_000)?
            .checked_add(u64::try_from(t.tv_usec).ok()?)
    };
    micros(usage.ru_utime)?.checked_add(micros(usage.ru_stime)?)
}

#[cfg(not(unix))]
fn cpu_micros() -> Option<u64> {
    None
}

/// The CPU time used since `started` (a [`cpu_micros`] reading): what the step took.
fn cpu_since(started: Option<u64>) -> Option<u64> {
    cpu_micros()?.checked_sub(started?)
}

/// The `tool` of a snapshot's info.
fn tool() -> String {
    format!("vramtest {}", env!("CARGO_PKG_VERSION"))
}

/// Measures `def` on the CPU heap (capturing call sites as the invocation asks).
fn heap(def: &TestDef, invocation: &Invocation, package_dir: &Path) -> ChildResult {
    if !heap::installed() {
        return ChildResult::Failed {
            message: "the counting allocator is not installed (hint: end the test file with `vramtest::main!();`, which installs it)".into(),
        };
    }
    let plan = match site_capture::prepare(&invocation.sites) {
        Ok(plan) => plan,
        Err(e) => {
            return ChildResult::Failed {
                message: e.to_string(),
            };
        }
    };
    let mut step = Step::new(Device::Cpu, invocation.iterations).with_point(
        invocation.point.batch,
        &invocation.point.axes,
        &invocation.point.levels,
    );
    let started = cpu_micros();
    let outcome = def.run(&mut step, heap::start);
    let events = heap::stop();
    let cpu_micros = cpu_since(started);
    let baseline = match outcome {
        Ok(baseline) => baseline,
        Err(failed) => {
            return ChildResult::Failed {
                message: failed.to_string(),
            };
        }
    };
    let (mut profile, timeline) =
        timeline::profile_and_timeline(&events, vramtest_chart::DEFAULT_MAX_POINTS);
    profile.baseline_bytes = baseline;
    let sites = site_capture::outcome(
        &invocation.sites,
        plan.as_ref(),
        &events,
        package_dir,
        def.name,
    );
    // The pool model as the package's metadata sets it (`pool_alignment`, `pool_granule`),
    // read as the parent reads it (the parent checked the environment already).
    let model = vramtest_model::env::HarnessEnv::from_env()
        .ok()
        .and_then(|env| crate::manifests::of_run(&env, package_dir).ok())
        .map(|s| s.cuda_pool())
        .unwrap_or_default();
    let pool = pool::replay_by_phase(&events, &model);
    ChildResult::Measured {
        unread_axes: step.unread_axes(),
        cpu_micros,
        device_bytes: None,
        timeline: Some(Box::new(timeline)),
        sites,
        pool: Some(pool),
        info: Box::new(Info {
            device: "cpu".into(),
            fidelity: profile.fidelity,
            tool: tool(),
            driver: None,
            cuda: None,
            sites: Vec::new(),
            gradient_check: profile.gradient_check.clone(),
            machine: Some(super::machine::fingerprint(invocation.threads)),
        }),
        profile: Box::new(profile),
    }
}

/// Measures `def` on CUDA device `ordinal`.
#[cfg(feature = "cuda")]
fn cuda(def: &TestDef, ordinal: usize, invocation: &Invocation) -> ChildResult {
    use crate::cuda_tracker::{failed_request, unavailable};
    use crate::probe::cuda;
    if let Err(e) = cuda::first_device() {
        return ChildResult::Ignored { reason: e.reason };
    }
    let mut step = Step::new(Device::Cuda(ordinal), invocation.iterations).with_point(
        invocation.point.batch,
        &invocation.point.axes,
        &invocation.point.levels,
    );
    let cpu_started = cpu_micros();
    let started = def.run(&mut step, || cuda::start(ordinal));
    let (session, error) = cuda::stop();
    let cpu_micros = cpu_since(cpu_started);
    match started {
        Err(_) if unavailable().is_some() => ChildResult::Ignored {
            reason: unavailable().unwrap_or_default(),
        },
        // Out of memory on the device inside the step (an error or a panic): the
        // breakdown up to the failure, the failed request and the blocks alive then,
        // not the bare error. No call sites on a device: the report says how to find
        // them on the CPU.
        Err(failed)
            if failed_request().is_some()
                || vramtest_cuda::is_out_of_memory(&failed.to_string()) =>
        {
            let detail = match session {
                Some(s) => s
                    .out_of_memory(failed_request())
                    .for_test(&invocation.test)
                    .to_string(),
                None => "the CUDA probe was not running: no breakdown".to_owned(),
            };
            ChildResult::Failed {
                message: format!("{failed}\n{detail}"),
            }
        }
        Err(failed) => ChildResult::Failed {
            message: failed.to_string(),
        },
        Ok(Err(message)) => ChildResult::Failed {
            message: format!("cannot start the CUDA probe: {message}"),
        },
        Ok(Ok(())) => match (error, session) {
            (Some(e), _) => ChildResult::Failed {
                message: format!("the CUDA probe failed: {e}"),
            },
            (None, None) => ChildResult::Failed {
                message: "the CUDA probe was lost".into(),
            },
            (None, Some(session)) => finish_cuda(session, step.unread_axes(), cpu_micros),
        },
    }
}

/// The result of a CUDA session whose step ran to its end.
#[cfg(feature = "cuda")]
fn finish_cuda(
    session: crate::probe::cuda::Session,
    unread_axes: Vec<String>,
    cpu_micros: Option<u64>,
) -> ChildResult {
    let report = match session.finish() {
        Ok(report) => report,
        Err(e) => {
            return ChildResult::Failed {
                message: format!("the CUDA probe failed: {e}"),
            };
        }
    };
    if let Some(why) = &report.fallback {
        println!("note: {why}");
    }
    println!(
        "boundary overhead {:.1}% ({} syncs); reserved peak {} B",
        report.boundary_overhead_share() * 100.0,
        report.boundaries,
        report.profile.reserved_peak_bytes.unwrap_or(0)
    );
    ChildResult::Measured {
        unread_axes,
        cpu_micros,
        device_bytes: Some(report.device.total_bytes),
        timeline: None,
        sites: None,
        pool: None,
        info: Box::new(Info {
            device: report.device.name.clone(),
            fidelity: report.profile.fidelity,
            tool: tool(),
            driver: report.device.driver_version.clone(),
            cuda: report.device.cuda_version.clone(),
            sites: Vec::new(),
            gradient_check: report.profile.gradient_check.clone(),
            machine: None,
        }),
        profile: Box::new(report.profile),
    }
}

/// Built without the `cuda` feature: a CUDA test is ignored.
#[cfg(not(feature = "cuda"))]
fn cuda(_def: &TestDef, _ordinal: usize, _invocation: &Invocation) -> ChildResult {
    ChildResult::Ignored {
        reason: crate::probe::cuda::first_device().unwrap_err().reason,
    }
}
