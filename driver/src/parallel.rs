//! Whole-corpus commands share one shape: load every code object of a set of
//! files, then work on them from a shared queue on a few threads.

use std::path::PathBuf;
use std::sync::Mutex;

use crate::stages::load::{self, CodeObject};

/// The code objects for `target` (all when `None`) in `files`, each with the
/// file it came from.
pub fn load_code_objects(files: &[PathBuf], target: Option<&str>) -> Result<Vec<(PathBuf, CodeObject)>, crate::Error> {
    let mut code_objects = Vec::new();
    for file in files {
        for code_object in load::load_for_target(file, target)?.code_objects {
            code_objects.push((file.clone(), code_object));
        }
    }
    Ok(code_objects)
}

/// Calls `work` once per item on `jobs` threads; items are taken from the end.
pub fn for_each_on_threads<T: Send>(items: Vec<T>, jobs: usize, work: impl Fn(T) + Sync) {
    let queue = Mutex::new(items);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let Some(item) = queue.lock().expect("queue").pop() else {
                    break;
                };
                work(item);
            });
        }
    });
}

/// [`for_each_on_threads`], starting an item only while the `cost` (an
/// estimate of its memory) of those running stays within `budget`; one
/// runs whatever its cost. Among the items left, the last that fits goes
/// first. Memory then stays bounded by the largest items, not by how many
/// threads take large ones at once.
pub fn for_each_within_budget<T: Send>(
    items: Vec<T>,
    jobs: usize,
    budget: u64,
    cost: impl Fn(&T) -> u64 + Sync,
    work: impl Fn(T) + Sync,
) {
    let state = Mutex::new((items, 0u64));
    let freed = std::sync::Condvar::new();
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let (item, taken) = {
                    let mut guard = state.lock().expect("queue");
                    loop {
                        let (queue, running) = &mut *guard;
                        if queue.is_empty() {
                            return;
                        }
                        let fits = queue.iter().rposition(|item| *running == 0 || *running + cost(item) <= budget);
                        if let Some(at) = fits {
                            let item = queue.remove(at);
                            let taken = cost(&item);
                            *running += taken;
                            break (item, taken);
                        }
                        guard = freed.wait(guard).expect("queue");
                    }
                };
                work(item);
                state.lock().expect("queue").1 -= taken;
                freed.notify_all();
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_over_the_budget_never_run_together() {
        let running = std::sync::atomic::AtomicU64::new(0);
        let most = std::sync::atomic::AtomicU64::new(0);
        let done = Mutex::new(Vec::new());
        let items: Vec<u64> = vec![5, 1, 5, 1, 1, 5, 2];
        for_each_within_budget(
            items,
            4,
            6,
            |cost| *cost,
            |cost| {
                use std::sync::atomic::Ordering::SeqCst;
                let now = running.fetch_add(cost, SeqCst) + cost;
                most.fetch_max(now, SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(20));
                running.fetch_sub(cost, SeqCst);
                done.lock().unwrap().push(cost);
            },
        );
        assert!(most.load(std::sync::atomic::Ordering::SeqCst) <= 6);
        let mut done = done.into_inner().unwrap();
        done.sort_unstable();
        assert_eq!(done, vec![1, 1, 1, 2, 5, 5, 5]);
    }

    #[test]
    fn an_item_over_the_whole_budget_still_runs_alone() {
        let done = Mutex::new(0);
        for_each_within_budget(vec![10u64, 10], 2, 3, |cost| *cost, |_| *done.lock().unwrap() += 1);
        assert_eq!(done.into_inner().unwrap(), 2);
    }
}

/// How much memory the items worked on at once may take (estimated; one
/// runs whatever its size): `GPUINSTR_MEMORY_BUDGET` bytes (a number, or
/// with a K, M or G suffix), else 3 GiB.
pub fn memory_budget() -> Result<u64, String> {
    const DEFAULT: u64 = 3 << 30;
    match std::env::var("GPUINSTR_MEMORY_BUDGET") {
        Ok(text) => parse_budget(&text)
            .ok_or_else(|| format!("`{text}` is not a size: give bytes, or a number with K, M or G (like 2G)")),
        Err(_) => Ok(DEFAULT),
    }
}

/// `3G`, `512M`, `4096`: bytes.
fn parse_budget(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return None,
    };
    digits.parse::<u64>().ok().filter(|n| *n > 0).map(|n| n.saturating_mul(scale))
}

#[cfg(test)]
mod budget_tests {
    #[test]
    fn budgets_are_sizes() {
        assert_eq!(super::parse_budget("2G"), Some(2 << 30));
        assert_eq!(super::parse_budget(" 512 MiB "), Some(512 << 20));
        assert_eq!(super::parse_budget("4096"), Some(4096));
        assert_eq!(super::parse_budget("lots"), None);
        assert_eq!(super::parse_budget("2T"), None);
        assert_eq!(super::parse_budget("0"), None);
    }
}
