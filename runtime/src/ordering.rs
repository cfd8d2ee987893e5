//! What orders dispatches of different queues, as the program asked: a
//! barrier-AND packet waiting on a signal that a packet of another queue
//! completes orders everything after it on its queue after everything up
//! to that packet on the other one. HIP makes a launch on the legacy
//! default stream wait for the other blocking streams so: a dispatch
//! submitted while theirs are still in flight does not run at the same
//! time as them, and mixes none of their tool data.

use std::collections::HashMap;

/// A queue (ROCr's handle) and a dispatch (the runtime's id, increasing
/// in submission order).
type Queue = u64;
type DispatchId = u64;

#[derive(Debug, Default)]
pub struct Ordering {
    /// A completion signal → the queue of the packet that completes it
    /// (its last use), and the last dispatch observed on that queue before
    /// that packet completes.
    covers: HashMap<u64, (Queue, DispatchId)>,
    /// The last dispatch observed on each queue.
    last: HashMap<Queue, DispatchId>,
    /// (waiting queue, other queue) → what the waiting queue runs next
    /// comes after the other queue's dispatches up to this one.
    waited: HashMap<(Queue, Queue), DispatchId>,
}

impl Ordering {
    /// A barrier-AND packet on `queue` waits on `signals`.
    pub fn waits(&mut self, queue: Queue, signals: &[u64]) {
        for signal in signals.iter().filter(|&&s| s != 0) {
            if let Some(&(other, upto)) = self.covers.get(signal) {
                if other != queue {
                    let waited = self.waited.entry((queue, other)).or_default();
                    *waited = (*waited).max(upto);
                }
            }
        }
    }

    /// Dispatch `id` was observed on `queue`.
    pub fn dispatched(&mut self, queue: Queue, id: DispatchId) {
        self.last.insert(queue, id);
    }

    /// A packet on `queue` completes `signal` once everything before it on
    /// the queue has (AQL packets complete in order here: the runtime sets
    /// the barrier bit on what it rewrites).
    pub fn completes(&mut self, queue: Queue, signal: u64) {
        if signal != 0 {
            self.covers.insert(signal, (queue, self.last.get(&queue).copied().unwrap_or(0)));
        }
    }

    /// Whether what `queue` runs next comes after dispatch `id` of `other`.
    pub fn after(&self, queue: Queue, other: Queue, id: DispatchId) -> bool {
        self.waited.get(&(queue, other)).is_some_and(|&upto| id <= upto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_on_another_queues_signal_orders_what_follows_after_what_came_before_it() {
        let (a, b, null) = (1, 2, 3);
        let mut ordering = Ordering::default();
        ordering.dispatched(a, 1);
        ordering.completes(a, 0xa1);
        ordering.dispatched(b, 2);
        ordering.completes(b, 0xb1);
        // Nothing orders the null stream's next dispatch yet.
        assert!(!ordering.after(null, a, 1));
        ordering.waits(null, &[0xa1, 0xb1, 0, 0, 0]);
        assert!(ordering.after(null, a, 1) && ordering.after(null, b, 2));
        // A later dispatch on `a` is not covered by that wait.
        ordering.dispatched(a, 4);
        assert!(!ordering.after(null, a, 4));
        // A signal used again covers its last use.
        ordering.completes(a, 0xa1);
        ordering.waits(null, &[0xa1]);
        assert!(ordering.after(null, a, 4));
        // Waiting on one's own queue's signal says nothing of others.
        ordering.waits(b, &[0xb1]);
        assert!(!ordering.after(b, a, 1));
    }
}
