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
