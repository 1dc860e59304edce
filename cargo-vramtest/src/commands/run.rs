//! `cargo vramtest [run]`: builds and runs the tests, then hands the run's view to the
//! reports the flags ask for (the table or JSON lines, `--junit`, `--markdown`,
//! `--html`, GitHub's annotations and job summary).

use super::{find_tests, package_env, run_device, user_env};
use crate::case::TestCase;
use crate::cli::RunArgs;
use crate::discover;
use crate::error::Result;
use crate::output::{Origin, RunView, sinks};
use crate::progress::Progress;
use crate::runner::Devices;
use crate::{device, runner};
use std::time::Instant;

pub fn execute(args: &RunArgs) -> Result<u8> {
    let user = user_env()?;
    let ws = discover::discover(&args.selection, args.build.cargo_flags())?;
    let env = package_env(&ws, &args.exec, &user);
    let gpus = device::preflight(run_device(&env))?;
    let cases: Vec<TestCase> = find_tests(&ws, &args.build, &args.filter, &env)?
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    if cases.is_empty() {
        anstream::eprintln!("warning: no test to run");
    }
    let devices = match gpus {
        0 => Devices::Cpu,
        n => Devices::gpus(n, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()),
    };
    let slots = devices.slots(args.exec.jobs.map(usize::from));
    let progress = Progress::new();
    let start = Instant::now();
    let outcomes = runner::run(&cases, &env, &slots, &progress)?;
    let origin = Origin::Run {
        root: ws.root.clone(),
        target_dir: ws.target_dir.clone(),
    };
    let mut view = RunView::new(outcomes, start.elapsed(), origin);
    view.partition = args.filter.partition.map(|p| p.to_string());
    Ok(sinks::deliver(&view, &sinks::sinks(&args.report)))
}
