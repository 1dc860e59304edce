//! `cargo vramtest accept` and `reject`: every pending result (`.snap.new`) that the
//! filters name becomes the snapshot, or is deleted. No build is needed.

use crate::cli::SnapshotArgs;
use crate::error::Result;
use crate::{discover, snapshots};

/// `accept`: `.snap.new` → `.snap`.
pub fn accept(args: &SnapshotArgs) -> Result<u8> {
    settle(args, true)
}

/// `reject`: deletes the `.snap.new` files.
pub fn reject(args: &SnapshotArgs) -> Result<u8> {
    settle(args, false)
}

fn settle(args: &SnapshotArgs, accept: bool) -> Result<u8> {
    let ws = discover::discover(&args.selection, Vec::new())?;
    let files = snapshots::pending(&ws, &args.filters, args.exact)?;
    if files.is_empty() {
        let verb = if accept { "accept" } else { "reject" };
        println!("no pending results (.snap.new) to {verb}");
    }
    for file in &files {
        if accept {
            let to = snapshots::accept(file)?;
            println!("accepted {} → {}", file.label(), to.display());
        } else {
            snapshots::reject(file)?;
            println!("rejected {} ({})", file.label(), file.path.display());
        }
    }
    Ok(0)
}
