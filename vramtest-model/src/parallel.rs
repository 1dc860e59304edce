//! Independent pieces of work on a few threads, the results in the items' order: a
//! sweep's child processes (at most `-j` at once) and its figures' fits.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of every item, on at most `workers` threads (at least one) that each take the
/// next item not yet taken; the results in the items' order.
pub fn map<T: Sync, R: Send>(items: &[T], workers: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = f(item);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every item was taken"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_item_once_in_order_whatever_the_workers() {
        let items: Vec<u64> = (0..50).collect();
        for workers in [0, 1, 3, 64] {
            assert_eq!(
                super::map(&items, workers, |&i| i * i),
                items.iter().map(|i| i * i).collect::<Vec<_>>(),
                "{workers} workers"
            );
        }
        assert!(super::map(&[] as &[u64], 4, |&i| i).is_empty());
    }
}
