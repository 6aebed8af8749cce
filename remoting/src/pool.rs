//! A bounded business pool: a fixed set of worker threads behind a bounded queue, as Java's
//! `ThreadPoolExecutor` with a `LinkedBlockingQueue(capacity)`. A full queue is reported to the
//! caller at once, so the server can answer SYSTEM_BUSY instead of queueing without bound.
//!
//! The queue is bounded twice: by jobs (Java's capacity) and by the bytes the jobs hold (their
//! requests), because Java's large counts alone allow 10,000 sends of 4 MiB, some 40 GiB.

use std::collections::VecDeque;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Default byte capacity of one pool's queue: room for 64 maximal sends (4 MiB bodies), far more
/// than a healthy broker queues, while a handful of pools stay within a few GiB.
pub const DEFAULT_QUEUE_CAPACITY_BYTES: usize = 256 * 1024 * 1024;

/// Jobs behind one lock, idle workers asleep on a condition variable: an idle worker costs
/// nothing. (A channel that spins and yields before it parks burned a fifth of a core with the
/// twenty idle pull workers Java's defaults give.)
struct Queue {
    /// Each job with the bytes it was admitted with and when it was queued.
    jobs: VecDeque<(usize, std::time::Instant, Job)>,
    capacity: usize,
    bytes: usize,
    capacity_bytes: usize,
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
            if let Some((bytes, _, job)) = queue.jobs.pop_front() {
                queue.bytes -= bytes;
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
    /// A pool whose queue holds `queue_capacity` jobs and [`DEFAULT_QUEUE_CAPACITY_BYTES`].
    pub fn new(name: &str, threads: usize, queue_capacity: usize) -> std::io::Result<BusinessPool> {
        Self::with_capacity_bytes(name, threads, queue_capacity, DEFAULT_QUEUE_CAPACITY_BYTES)
    }

    /// A pool whose queue holds at most `queue_capacity` jobs and `queue_capacity_bytes` bytes.
    pub fn with_capacity_bytes(name: &str, threads: usize, queue_capacity: usize, queue_capacity_bytes: usize) -> std::io::Result<BusinessPool> {
        let queue = Queue { jobs: VecDeque::new(), capacity: queue_capacity.max(1), bytes: 0, capacity_bytes: queue_capacity_bytes, open: true };
        let shared = std::sync::Arc::new(Shared { queue: Mutex::new(queue), ready: Condvar::new() });
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

    /// How long the oldest waiting job has waited, in ms (0 with none): Java's
    /// `headSlowTimeMills`, which brokerStatus reports per pool.
    pub fn head_wait_ms(&self) -> u64 {
        self.shared.queue.lock().jobs.front().map_or(0, |(_, at, _)| at.elapsed().as_millis() as u64)
    }

    /// Bytes held by the jobs waiting for a worker.
    pub fn queued_bytes(&self) -> usize {
        self.shared.queue.lock().bytes
    }

    /// Queues `job`, which holds `job_bytes` (its request's size), or says at once why not. A job
    /// is `Full` when the queue already holds its count or the job would take it past its bytes;
    /// an empty queue takes any job, so a capacity below one request cannot refuse it forever.
    pub fn try_execute(&self, job_bytes: usize, job: impl FnOnce() + Send + 'static) -> Result<(), Rejected> {
        let mut queue = self.shared.queue.lock();
        if !queue.open {
            return Err(Rejected::ShutDown);
        }
        let over_bytes = !queue.jobs.is_empty() && queue.bytes.saturating_add(job_bytes) > queue.capacity_bytes;
        if queue.jobs.len() >= queue.capacity || over_bytes {
            return Err(Rejected::Full);
        }
        queue.bytes += job_bytes;
        queue.jobs.push_back((job_bytes, std::time::Instant::now(), Box::new(job)));
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
        pool.try_execute(0, move || {
            g.wait();
        })
        .unwrap();
        // The worker is now blocked; wait until it took the first job off the queue.
        while pool.queued() > 0 {
            std::thread::yield_now();
        }
        for _ in 0..2 {
            let d = done.clone();
            pool.try_execute(0, move || {
                d.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        assert_eq!(pool.try_execute(0, || {}), Err(Rejected::Full));
        gate.wait();
        pool.shutdown();
        assert_eq!(done.load(Ordering::SeqCst), 2);
        assert_eq!(pool.try_execute(0, || {}), Err(Rejected::ShutDown));
    }

    #[test]
    fn jobs_past_the_byte_capacity_are_full_but_an_empty_queue_takes_any_job() {
        let pool = BusinessPool::with_capacity_bytes("t", 1, 100, 1000).unwrap();
        let gate = Arc::new(Barrier::new(2));
        let g = gate.clone();
        pool.try_execute(10, move || {
            g.wait();
        })
        .unwrap();
        while pool.queued() > 0 {
            std::thread::yield_now();
        }
        assert_eq!(pool.queued_bytes(), 0, "a running job no longer counts");
        pool.try_execute(400, || {}).unwrap();
        pool.try_execute(500, || {}).unwrap();
        assert_eq!(pool.queued_bytes(), 900);
        assert_eq!(pool.try_execute(200, || {}), Err(Rejected::Full));
        gate.wait();
        while pool.queued() > 0 {
            std::thread::yield_now();
        }
        assert_eq!(pool.queued_bytes(), 0);
        pool.try_execute(1500, || {}).unwrap();
        pool.shutdown();
        assert_eq!(pool.queued_bytes(), 0);
    }
}
