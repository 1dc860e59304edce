//! The CPU thread count of a measured process, fixed by construction: the parent sets
//! every thread-pool variable the supported frameworks read to the invocation's count
//! ([`POOL_VARIABLES`]); the child checks that it got exactly that, starting rayon's
//! global pool before the probe starts so the pool's own bookkeeping is part of the
//! baseline, never of the step.

/// The variables the thread pools of the supported frameworks read: rayon's (candle,
/// burn and gemm run on it), candle's own (the parallelism it hands gemm), and those
/// of OpenMP and the BLAS libraries a framework may link.
pub(crate) const POOL_VARIABLES: [&str; 7] = [
    "RAYON_NUM_THREADS",
    "CANDLE_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
];

/// Checks that this process runs with `threads` CPU threads: every variable of
/// [`POOL_VARIABLES`] says so, and rayon's global pool, started now if nothing started
/// it yet, has exactly that many workers.
pub(crate) fn pin(threads: u32) -> Result<(), ThreadsError> {
    let expected = threads.to_string();
    for var in POOL_VARIABLES {
        let found = std::env::var(var).ok();
        if found.as_deref() != Some(expected.as_str()) {
            return Err(ThreadsError::Variable {
                threads,
                var,
                found: found.map_or("unset".to_owned(), |v| format!("`{v}`")),
            });
        }
    }
    let pool = rayon_core::current_num_threads();
    // Workers start asynchronously and allocate as they start (their names, their
    // queues): wait until every one of them has run a job, so none of that lands in
    // the step's figures.
    rayon_core::broadcast(|_| ());
    if pool != threads as usize {
        return Err(ThreadsError::Pool { threads, pool });
    }
    Ok(())
}

/// A measured process that does not run with the thread count it was given.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ThreadsError {
    #[error(
        "the measured process should run with {threads} CPU threads, but {var} is {found} (the harness sets it; was the test binary started by hand?)"
    )]
    Variable {
        threads: u32,
        var: &'static str,
        /// The variable's value, quoted, or `unset`.
        found: String,
    },
    #[error(
        "the measured process should run with {threads} CPU threads, but rayon's global pool has {pool} (something built it before the test ran)"
    )]
    Pool { threads: u32, pool: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_that_disagrees_is_named() {
        // This test process was not started by the harness: its variables are not set
        // to 3 (the test runner does not set RAYON_NUM_THREADS to 3).
        let e = pin(3).unwrap_err().to_string();
        assert!(
            POOL_VARIABLES.iter().any(|v| e.contains(v)),
            "names the variable: {e}"
        );
        assert!(e.contains("3 CPU threads"), "{e}");
    }
}
