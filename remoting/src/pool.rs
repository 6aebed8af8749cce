//! A bounded business pool: a fixed set of worker threads behind a bounded queue, as Java's
//! `ThreadPoolExecutor` with a `LinkedBlockingQueue(capacity)`. A full queue is reported to the
//! caller at once, so the server can answer SYSTEM_BUSY instead of queueing without bound.

use std::collections::VecDeque;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Jobs behind one lock, idle workers asleep on a condition variable: an idle worker costs
/// nothing. (A channel that spins and yields before it parks burned a fifth of a core with the
/// twenty idle pull workers Java's defaults give.)
struct Queue {
    jobs: VecDeque<Job>,
    capacity: usize,
    open: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
}

pub struct BusinessPool {
    name: String,
    shared: std::sync::Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// Why a job was not queued.
#[derive(Debug, PartialEq, Eq)]
pub enum Rejected {
    Full,
    ShutDown,
}

impl Shared {
    /// The next job, or None once the pool is shut down and drained.
    fn next(&self) -> Option<Job> {
        let mut queue = self.queue.lock();
        loop {
            if let Some(job) = queue.jobs.pop_front() {
                return Some(job);
            }
            if !queue.open {
                return None;
            }
            self.ready.wait(&mut queue);
        }
    }
}

impl BusinessPool {
    pub fn new(name: &str, threads: usize, queue_capacity: usize) -> std::io::Result<BusinessPool> {
        let shared = std::sync::Arc::new(Shared {
            queue: Mutex::new(Queue { jobs: VecDeque::new(), capacity: queue_capacity.max(1), open: true }),
            ready: Condvar::new(),
        });
        let mut workers = Vec::with_capacity(threads.max(1));
        for i in 0..threads.max(1) {
            let shared = shared.clone();
            workers.push(std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || {
                // Runs until the pool is shut down and the queue is drained.
                while let Some(job) = shared.next() {
                    job();
                }
            })?);
        }
        Ok(BusinessPool { name: name.to_owned(), shared, workers: Mutex::new(workers) })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of jobs waiting for a worker.
    pub fn queued(&self) -> usize {
        self.shared.queue.lock().jobs.len()
    }

    pub fn try_execute(&self, job: impl FnOnce() + Send + 'static) -> Result<(), Rejected> {
        let mut queue = self.shared.queue.lock();
        if !queue.open {
            return Err(Rejected::ShutDown);
        }
        if queue.jobs.len() >= queue.capacity {
            return Err(Rejected::Full);
        }
        queue.jobs.push_back(Box::new(job));
        drop(queue);
        self.shared.ready.notify_one();
        Ok(())
    }

    /// Stops taking jobs, lets the workers finish every queued one, and waits for them. Blocking.
    pub fn shutdown(&self) {
        self.shared.queue.lock().open = false;
        self.shared.ready.notify_all();
        for worker in self.workers.lock().drain(..) {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    use super::*;

    #[test]
    fn a_full_queue_rejects_at_once_and_shutdown_drains_what_was_queued() {
        let pool = BusinessPool::new("t", 1, 2).unwrap();
        let gate = Arc::new(Barrier::new(2));
        let done = Arc::new(AtomicUsize::new(0));
        let g = gate.clone();
        pool.try_execute(move || {
            g.wait();
        })
        .unwrap();
        // The worker is now blocked; wait until it took the first job off the queue.
        while pool.queued() > 0 {
            std::thread::yield_now();
        }
        for _ in 0..2 {
            let d = done.clone();
            pool.try_execute(move || {
                d.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        assert_eq!(pool.try_execute(|| {}), Err(Rejected::Full));
        gate.wait();
        pool.shutdown();
        assert_eq!(done.load(Ordering::SeqCst), 2);
        assert_eq!(pool.try_execute(|| {}), Err(Rejected::ShutDown));
    }
}
