//! A bounded business pool: a fixed set of worker threads behind a bounded queue, as Java's
//! `ThreadPoolExecutor` with a `LinkedBlockingQueue(capacity)`. A full queue is reported to the
//! caller at once, so the server can answer SYSTEM_BUSY instead of queueing without bound.

use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Sender, TrySendError};
use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send + 'static>;

pub struct BusinessPool {
    name: String,
    queue: Mutex<Option<Sender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// Why a job was not queued.
#[derive(Debug, PartialEq, Eq)]
pub enum Rejected {
    Full,
    ShutDown,
}

impl BusinessPool {
    pub fn new(name: &str, threads: usize, queue_capacity: usize) -> std::io::Result<BusinessPool> {
        let (tx, rx) = bounded::<Job>(queue_capacity.max(1));
        let mut workers = Vec::with_capacity(threads.max(1));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            workers.push(std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || {
                // Runs until the pool is shut down and the queue is drained.
                for job in rx {
                    job();
                }
            })?);
        }
        Ok(BusinessPool { name: name.to_owned(), queue: Mutex::new(Some(tx)), workers: Mutex::new(workers) })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of jobs waiting for a worker.
    pub fn queued(&self) -> usize {
        self.queue.lock().as_ref().map_or(0, Sender::len)
    }

    pub fn try_execute(&self, job: impl FnOnce() + Send + 'static) -> Result<(), Rejected> {
        let queue = self.queue.lock();
        let Some(tx) = queue.as_ref() else { return Err(Rejected::ShutDown) };
        tx.try_send(Box::new(job)).map_err(|e| match e {
            TrySendError::Full(_) => Rejected::Full,
            TrySendError::Disconnected(_) => Rejected::ShutDown,
        })
    }

    /// Stops taking jobs, lets the workers finish every queued one, and waits for them. Blocking.
    pub fn shutdown(&self) {
        self.queue.lock().take();
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
