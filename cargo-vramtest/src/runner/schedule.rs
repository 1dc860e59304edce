//! Scheduling: the slots tests run in (every core, or one GPU each) and the workers
//! that hand the tests out to them, one at a time per slot.

use std::sync::atomic::{AtomicUsize, Ordering};

/// What the tests of a run hold while they run: nothing on the CPU, or a GPU each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    Cpu,
    /// The GPUs, each as its process is pinned to it (`CUDA_VISIBLE_DEVICES=<id>`).
    Gpus(Vec<String>),
}

impl Devices {
    /// The `count` GPUs the driver shows this process. Without `CUDA_VISIBLE_DEVICES`
    /// they are `0`..`count`; with it (`visible`, "2,5"), its first `count` entries, as
    /// written (an index, a UUID, a MIG id): the driver applies the variable in each test
    /// process again, so an entry must never be renumbered.
    pub fn gpus(count: usize, visible: Option<&str>) -> Devices {
        let ids = match visible {
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .take(count)
                .map(str::to_owned)
                .collect(),
            None => (0..count).map(|i| i.to_string()).collect(),
        };
        Devices::Gpus(ids)
    }

    /// One slot per test that may run at once, `jobs` at most (`-j`): on the CPU `jobs`
    /// slots (default: every core), none pinned; on GPUs one per device, pinned to it
    /// (tests that share a GPU would see each other's memory). Never empty.
    pub fn slots(&self, jobs: Option<usize>) -> Vec<Option<String>> {
        let slots: Vec<Option<String>> = match self {
            Devices::Cpu => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                vec![None; jobs.unwrap_or(cores)]
            }
            Devices::Gpus(ids) => ids
                .iter()
                .take(jobs.unwrap_or(usize::MAX))
                .cloned()
                .map(Some)
                .collect(),
        };
        if slots.is_empty() { vec![None] } else { slots }
    }
}

/// Runs `work` on every item, one worker per slot: each worker takes the next item no
/// one has taken and runs it with its own slot, then the next, so two items never hold
/// one slot at once and at most `slots.len()` run together. `done` gets each result
/// with its item's index, on the calling thread, as they come.
pub fn schedule<T: Sync, S: Sync, R: Send>(
    items: &[T],
    slots: &[S],
    work: impl Fn(usize, &T, &S) -> R + Sync,
    mut done: impl FnMut(usize, R),
) {
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        for slot in slots.iter().take(items.len()) {
            let tx = tx.clone();
            let (next, work) = (&next, &work);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(item) = items.get(i) else { break };
                    if tx.send((i, work(i, item, slot))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, result) in rx {
            done(i, result);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case(3, None, &["0", "1", "2"]; "all devices by index")]
    #[test_case(2, Some("2,5"), &["2", "5"]; "the entries the user listed")]
    #[test_case(1, Some("5,2,x"), &["5"]; "as many as the driver sees")]
    #[test_case(2, Some(" GPU-8f2a, MIG-1 "), &["GPU-8f2a", "MIG-1"]; "uuids as written")]
    fn gpus_are_named_as_the_driver_takes_them(count: usize, visible: Option<&str>, ids: &[&str]) {
        let ids = ids.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(Devices::gpus(count, visible), Devices::Gpus(ids));
    }

    #[test]
    fn one_slot_per_gpu_pinned_and_jobs_only_lower_it() {
        let gpus = Devices::gpus(3, None);
        let pinned = |ids: &[&str]| -> Vec<Option<String>> {
            ids.iter().map(|s| Some((*s).to_owned())).collect()
        };
        assert_eq!(gpus.slots(None), pinned(&["0", "1", "2"]));
        assert_eq!(gpus.slots(Some(2)), pinned(&["0", "1"]));
        assert_eq!(gpus.slots(Some(8)), pinned(&["0", "1", "2"]));
        assert_eq!(Devices::Cpu.slots(Some(5)), vec![None; 5]);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(Devices::Cpu.slots(None), vec![None; cores]);
        assert_eq!(Devices::Gpus(Vec::new()).slots(None), [None]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// With M items and N slots: every item runs once, two items never hold one slot
        /// at once, and at most N run together.
        #[test]
        fn no_two_items_ever_share_a_slot(
            items in proptest::collection::vec(0u64..300, 0..24),
            n in 1usize..6,
        ) {
            use std::sync::Mutex;
            let slots: Vec<usize> = (0..n).collect();
            let busy = Mutex::new(vec![false; n]);
            let running = AtomicUsize::new(0);
            let most = AtomicUsize::new(0);
            let mut seen = vec![0; items.len()];
            schedule(
                &items,
                &slots,
                |i, micros, slot| {
                    let clash = std::mem::replace(&mut busy.lock().unwrap()[*slot], true);
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_micros(*micros));
                    running.fetch_sub(1, Ordering::SeqCst);
                    busy.lock().unwrap()[*slot] = false;
                    (i, clash)
                },
                |i, (j, clash)| {
                    assert_eq!(i, j);
                    assert!(!clash, "item {i} took a slot in use");
                    seen[i] += 1;
                },
            );
            proptest::prop_assert!(seen.iter().all(|&k| k == 1), "{seen:?}");
            proptest::prop_assert!(most.load(Ordering::SeqCst) <= n);
        }
    }
}
