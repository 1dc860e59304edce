//! `cargo vramtest list`: the tests with their target, package, snapshot status and
//! shard. Builds the tests to list them, runs none.

use super::{find_tests, package_env, user_env};
use crate::cli::{ExecArgs, ListArgs, MessageFormat};
use crate::error::Result;
use crate::{discover, output, snapshots};

pub fn execute(args: &ListArgs) -> Result<u8> {
    let user = user_env()?;
    let ws = discover::discover(&args.selection, args.build.cargo_flags())?;
    let env = package_env(&ws, &ExecArgs::default(), &user);
    let tests: Vec<output::list::Listed> = find_tests(&ws, &args.build, &args.filter, &env)?
        .into_iter()
        .map(|(case, shard)| output::list::Listed {
            snapshots: snapshots::status(&case.binary.package_dir, &case.binary.target, &case.name),
            case,
            shard,
        })
        .collect();
    match args.message_format {
        MessageFormat::Json => print!("{}", output::list::render_json(&tests)),
        MessageFormat::Human => {
            anstream::print!("{}", output::list::render(&tests, args.filter.partition))
        }
    }
    Ok(0)
}
