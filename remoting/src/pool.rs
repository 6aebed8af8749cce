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

/// What answers a queued job that will not run: called with why, instead of the job.
type Refuse = Box<dyn FnOnce(Refusal) + Send + 'static>;

/// Why a job did not run (told to the job's refusal, see [`BusinessPool::try_execute_or_refuse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The queue was full (by jobs or bytes) when the job came.
    Full,
    /// The pool was shut down when the job came.
    ShutDown,
    /// The job waited `waited_ms` in the queue, at least the limit it was held to
    /// ([`BusinessPool::refuse_waiting_at_least`], Java's `cleanExpiredRequestInQueue`); `queued`
    /// jobs were left waiting after it was taken out.
    WaitedTooLong { waited_ms: u64, queued: usize },
    /// The job was taken off the head of the queue by [`BusinessPool::refuse_head`] (Java's
    /// page-cache-busy clean of the send queue) after waiting `waited_ms`; `queued` were left.
    Evicted { waited_ms: u64, queued: usize },
}

/// One queued job: the bytes it was admitted with, when it was queued, the job, and what answers
/// it if it is refused before it runs (jobs without one are never taken out early).
struct Queued {
    bytes: usize,
    at: std::time::Instant,
    job: Job,
    refuse: Option<Refuse>,
}

/// Default byte capacity of one pool's queue: room for 64 maximal sends (4 MiB bodies), far more
/// than a healthy broker queues, while a handful of pools stay within a few GiB.
pub const DEFAULT_QUEUE_CAPACITY_BYTES: usize = 256 * 1024 * 1024;

/// Jobs behind one lock, idle workers asleep on a condition variable: an idle worker costs
/// nothing. (A channel that spins and yields before it parks burned a fifth of a core with the
/// twenty idle pull workers Java's defaults give.)
struct Queue {
    jobs: VecDeque<Queued>,
    capacity: usize,
    bytes: usize,
    capacity_bytes: usize,
    open: bool,
    /// The pool's threads: at most this many jobs run at once, on workers or in place.
    threads: usize,
    /// Jobs running now: on a worker, or in place on the caller's thread ([`InPlace`]).
    running: usize,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Wakes idle worker threads (a pool of threads).
    ready: Condvar,
    /// Wakes idle tasks (a pool drained on an async runtime, [`BusinessPool::on_runtime`]).
    tasks: Option<Tasks>,
}

/// The tasks that drain a pool on an async runtime.
struct Tasks {
    wake: tokio::sync::Notify,
    /// Tasks still running; [`BusinessPool::shutdown`] waits for none.
    alive: Mutex<usize>,
    gone: Condvar,
}

/// Jobs a task runs before it lets the runtime's other tasks (the connections' readers) run.
const TASK_BUDGET: usize = 16;

/// ... or request bytes: a task's turn of large jobs (batch sends) ends sooner, so a consumer's
/// pulls, read and answered between two turns, take about the messages a turn appends and keep
/// up with the producers on a saturated runtime thread. A budget of jobs alone let 16 sends of
/// 16 messages (256 KiB) through per turn, as many messages as 8 pulls of 32 take: the consumer
/// (one pull in flight per queue, as Java's push consumer) fell behind. 64 KiB kept it up at the
/// same send rate (`scripts/bench.sh` c'); 32 KiB cost a sixth of the sends.
const TASK_BUDGET_BYTES: usize = 64 * 1024;

/// What a task finds when it looks for a job.
enum Next {
    /// A job and the bytes of its request.
    Job(Job, usize),
    /// Nothing it may take now: wait to be woken.
    Wait,
    /// Shut down and drained.
    Done,
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

impl Queue {
    fn new(capacity: usize, capacity_bytes: usize, threads: usize) -> Queue {
        Queue { jobs: VecDeque::new(), capacity: capacity.max(1), bytes: 0, capacity_bytes, open: true, threads: threads.max(1), running: 0 }
    }

    /// The head job, counted as running, if fewer than `threads` run (workers, tasks and jobs
    /// run in place alike).
    fn take(&mut self) -> Option<(Job, usize)> {
        if self.running >= self.threads {
            return None;
        }
        let queued = self.jobs.pop_front()?;
        self.bytes -= queued.bytes;
        self.running += 1;
        Some((queued.job, queued.bytes))
    }
}

impl Shared {
    /// The next job, or None once the pool is shut down and drained; `finished_one` when the
    /// worker comes back from running a job. A job is taken only while fewer than `threads` run,
    /// counting those run in place.
    fn next(&self, finished_one: bool) -> Option<Job> {
        let mut queue = self.queue.lock();
        if finished_one {
            queue.running -= 1;
        }
        loop {
            if let Some((job, _)) = queue.take() {
                return Some(job);
            }
            if !queue.open && queue.jobs.is_empty() {
                return None;
            }
            self.ready.wait(&mut queue);
        }
    }
}

impl Shared {
    /// Wakes one idle worker or task: a job was queued, or a running place given back.
    fn wake_one(&self) {
        match &self.tasks {
            Some(tasks) => tasks.wake.notify_one(),
            None => {
                self.ready.notify_one();
            }
        }
    }

    /// A task's next job, as [`Shared::next`] without waiting.
    fn try_next(&self, finished_one: bool) -> Next {
        let mut queue = self.queue.lock();
        if finished_one {
            queue.running -= 1;
        }
        if let Some((job, bytes)) = queue.take() {
            return Next::Job(job, bytes);
        }
        if !queue.open && queue.jobs.is_empty() {
            Next::Done
        } else {
            Next::Wait
        }
    }

    /// One task of a pool drained on a runtime: runs jobs from the queue, at most [`TASK_BUDGET`]
    /// of them or [`TASK_BUDGET_BYTES`] of their requests before it yields, so a connection's
    /// reader keeps reading (and serving the pulls that run where they are read) while sends
    /// queue here, as Java's pull threads run beside its send thread.
    async fn drain(self: std::sync::Arc<Self>) {
        struct Gone(std::sync::Arc<Shared>);
        impl Drop for Gone {
            // Also when the runtime drops the task unfinished: shutdown must not wait for it.
            fn drop(&mut self) {
                if let Some(tasks) = &self.0.tasks {
                    *tasks.alive.lock() -= 1;
                    tasks.gone.notify_all();
                }
            }
        }
        let gone = Gone(self);
        let shared = &gone.0;
        let Some(tasks) = &shared.tasks else { return };
        let mut finished_one = false;
        loop {
            let mut ran = 0;
            let mut ran_bytes = 0usize;
            let budget_spent = loop {
                match shared.try_next(finished_one) {
                    Next::Job(job, bytes) => {
                        job();
                        finished_one = true;
                        ran += 1;
                        ran_bytes += bytes;
                        if ran == TASK_BUDGET || ran_bytes >= TASK_BUDGET_BYTES {
                            break true;
                        }
                    }
                    Next::Wait => break false,
                    Next::Done => return,
                }
                // `try_next` gave the running place back.
            };
            if budget_spent {
                // Give the place back before yielding, so the pool's bound counts running jobs only.
                shared.queue.lock().running -= 1;
                finished_one = false;
                tokio::task::yield_now().await;
            } else {
                finished_one = false;
                tasks.wake.notified().await;
            }
        }
    }
}

/// A place among a pool's running jobs, taken by a caller that runs one job on its own thread
/// ([`BusinessPool::run_in_place`]); given back when dropped.
pub struct InPlace<'a> {
    shared: &'a Shared,
}

impl Drop for InPlace<'_> {
    fn drop(&mut self) {
        let mut queue = self.shared.queue.lock();
        queue.running -= 1;
        let waiting = !queue.jobs.is_empty();
        drop(queue);
        if waiting {
            // A job queued while this one held the last place: a worker may take it now.
            self.shared.wake_one();
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
        let queue = Queue::new(queue_capacity, queue_capacity_bytes, threads);
        let shared = std::sync::Arc::new(Shared { queue: Mutex::new(queue), ready: Condvar::new(), tasks: None });
        let mut workers = Vec::with_capacity(threads.max(1));
        for i in 0..threads.max(1) {
            let shared = shared.clone();
            workers.push(std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || {
                // Runs until the pool is shut down and the queue is drained.
                let mut finished_one = false;
                while let Some(job) = shared.next(finished_one) {
                    job();
                    finished_one = true;
                }
            })?);
        }
        Ok(BusinessPool { name: name.to_owned(), shared, workers: Mutex::new(workers) })
    }

    /// A pool drained by `tasks` tasks on the async runtime `runtime` instead of threads, for
    /// jobs that never block (see [`crate::server::RequestProcessor::runs_in_place`]): a job
    /// runs on the thread that read its request, without a hand-off to a worker thread and
    /// back, while the queue keeps every rule of a pool of threads (its bounds, SYSTEM_BUSY when
    /// full, the fast failure of jobs that waited too long). At most `tasks` jobs run at once.
    pub fn on_runtime(name: &str, tasks: usize, queue_capacity: usize, runtime: &tokio::runtime::Handle) -> BusinessPool {
        let tasks = tasks.max(1);
        let queue = Queue::new(queue_capacity, DEFAULT_QUEUE_CAPACITY_BYTES, tasks);
        let drainers = Tasks { wake: tokio::sync::Notify::new(), alive: Mutex::new(tasks), gone: Condvar::new() };
        let shared = std::sync::Arc::new(Shared { queue: Mutex::new(queue), ready: Condvar::new(), tasks: Some(drainers) });
        for _ in 0..tasks {
            runtime.spawn(shared.clone().drain());
        }
        BusinessPool { name: name.to_owned(), shared, workers: Mutex::new(Vec::new()) }
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
        self.shared.queue.lock().jobs.front().map_or(0, |q| q.at.elapsed().as_millis() as u64)
    }

    /// Bytes held by the jobs waiting for a worker.
    pub fn queued_bytes(&self) -> usize {
        self.shared.queue.lock().bytes
    }

    /// A place to run one job on the caller's own thread, if the pool is idle enough that a
    /// worker would start it at once: nothing is queued (so it overtakes no one) and fewer than
    /// the pool's threads are running. While held it counts as a running job, so the pool's
    /// bound on jobs at once holds. This spares a request the hand-off to a worker and back
    /// when nothing waits; a busy pool queues, and its queue's rules (SYSTEM_BUSY when full,
    /// the fast failure of jobs that waited too long) apply as before.
    pub fn run_in_place(&self) -> Option<InPlace<'_>> {
        let mut queue = self.shared.queue.lock();
        if !queue.open || !queue.jobs.is_empty() || queue.running >= queue.threads {
            return None;
        }
        queue.running += 1;
        Some(InPlace { shared: &self.shared })
    }

    /// Queues `job`, which holds `job_bytes` (its request's size), or says at once why not. A job
    /// is `Full` when the queue already holds its count or the job would take it past its bytes;
    /// an empty queue takes any job, so a capacity below one request cannot refuse it forever.
    pub fn try_execute(&self, job_bytes: usize, job: impl FnOnce() + Send + 'static) -> Result<(), Rejected> {
        self.push(job_bytes, Box::new(job), None).map_err(|(rejected, _)| rejected)
    }

    /// As [`BusinessPool::try_execute`], with `refuse` to answer the job instead of running it:
    /// called at once (with [`Refusal::Full`] or [`Refusal::ShutDown`]) when the job is not
    /// queued, or later if the job is taken out of the queue before it runs
    /// ([`BusinessPool::refuse_waiting_at_least`], [`BusinessPool::refuse_head`]). Exactly one
    /// of `job` and `refuse` runs, unless the pool is dropped with jobs queued.
    pub fn try_execute_or_refuse(
        &self,
        job_bytes: usize,
        job: impl FnOnce() + Send + 'static,
        refuse: impl FnOnce(Refusal) + Send + 'static,
    ) -> Result<(), Rejected> {
        match self.push(job_bytes, Box::new(job), Some(Box::new(refuse))) {
            Ok(()) => Ok(()),
            Err((rejected, refuse)) => {
                if let Some(refuse) = refuse {
                    refuse(match rejected {
                        Rejected::Full => Refusal::Full,
                        Rejected::ShutDown => Refusal::ShutDown,
                    });
                }
                Err(rejected)
            }
        }
    }

    fn push(&self, job_bytes: usize, job: Job, refuse: Option<Refuse>) -> Result<(), (Rejected, Option<Refuse>)> {
        let mut queue = self.shared.queue.lock();
        if !queue.open {
            return Err((Rejected::ShutDown, refuse));
        }
        let over_bytes = !queue.jobs.is_empty() && queue.bytes.saturating_add(job_bytes) > queue.capacity_bytes;
        if queue.jobs.len() >= queue.capacity || over_bytes {
            return Err((Rejected::Full, refuse));
        }
        queue.bytes += job_bytes;
        queue.jobs.push_back(Queued { bytes: job_bytes, at: std::time::Instant::now(), job, refuse });
        drop(queue);
        self.shared.wake_one();
        Ok(())
    }

    /// Takes the head of the queue out while it has waited at least `max_wait` and can be refused,
    /// and refuses each with [`Refusal::WaitedTooLong`] (Java's `BrokerFastFailure`
    /// `cleanExpiredRequestInQueue`: from the head, stopping at the first job younger than the
    /// limit or one that cannot be answered). Returns how many were refused. The refusals run on
    /// the caller's thread, outside the queue's lock.
    pub fn refuse_waiting_at_least(&self, max_wait: std::time::Duration) -> usize {
        let mut refused = 0;
        loop {
            let taken = {
                let mut queue = self.shared.queue.lock();
                let waited = match queue.jobs.front() {
                    Some(head) if head.refuse.is_some() => head.at.elapsed(),
                    _ => break,
                };
                if waited < max_wait {
                    break;
                }
                Self::take_head(&mut queue).map(|(q, left)| (q, waited, left))
            };
            let Some((queued, waited, left)) = taken else { break };
            Self::refuse(queued, Refusal::WaitedTooLong { waited_ms: waited.as_millis() as u64, queued: left });
            refused += 1;
        }
        refused
    }

    /// Takes the head of the queue out, if it can be refused, and refuses it with
    /// [`Refusal::Evicted`]. Returns whether one was (Java's page-cache-busy clean polls the send
    /// queue's head while the page cache stays busy).
    pub fn refuse_head(&self) -> bool {
        let taken = {
            let mut queue = self.shared.queue.lock();
            match queue.jobs.front() {
                Some(head) if head.refuse.is_some() => Self::take_head(&mut queue),
                _ => None,
            }
        };
        let Some((queued, left)) = taken else { return false };
        let waited_ms = queued.at.elapsed().as_millis() as u64;
        Self::refuse(queued, Refusal::Evicted { waited_ms, queued: left });
        true
    }

    /// The head job and how many are left behind it. Lock held.
    fn take_head(queue: &mut Queue) -> Option<(Queued, usize)> {
        let head = queue.jobs.pop_front()?;
        queue.bytes -= head.bytes;
        Some((head, queue.jobs.len()))
    }

    /// Answers a job taken out of the queue: the job is dropped first (what it holds, such as
    /// the connection's in-flight count, is released), then its refusal runs.
    fn refuse(queued: Queued, why: Refusal) {
        let Queued { job, refuse, .. } = queued;
        drop(job);
        if let Some(refuse) = refuse {
            refuse(why);
        }
    }

    /// Stops taking jobs, lets the workers finish every queued one, and waits for them. Blocking.
    pub fn shutdown(&self) {
        self.shared.queue.lock().open = false;
        self.shared.ready.notify_all();
        for worker in self.workers.lock().drain(..) {
            let _ = worker.join();
        }
        if let Some(tasks) = &self.shared.tasks {
            // Each task drains what is left and ends; call this off the runtime's threads.
            let mut alive = tasks.alive.lock();
            while *alive > 0 {
                tasks.wake.notify_waiters();
                tasks.wake.notify_one();
                tasks.gone.wait_for(&mut alive, std::time::Duration::from_millis(10));
            }
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

    /// A pool whose one worker is held until the returned barrier is passed, with nothing queued.
    fn held_pool(capacity: usize) -> (BusinessPool, Arc<Barrier>) {
        let pool = BusinessPool::new("t", 1, capacity).unwrap();
        let gate = Arc::new(Barrier::new(2));
        let g = gate.clone();
        pool.try_execute(0, move || {
            g.wait();
        })
        .unwrap();
        while pool.queued() > 0 {
            std::thread::yield_now();
        }
        (pool, gate)
    }

    #[test]
    fn jobs_that_waited_past_the_limit_are_refused_from_the_head_and_the_rest_run() {
        let (pool, gate) = held_pool(16);
        let ran = Arc::new(AtomicUsize::new(0));
        let refusals = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..3 {
            let (r, f) = (ran.clone(), refusals.clone());
            pool.try_execute_or_refuse(
                10,
                move || {
                    r.fetch_add(1, Ordering::SeqCst);
                },
                move |why| f.lock().push(why),
            )
            .unwrap();
        }
        // A plain job stops the clean, as a task Java cannot answer does.
        pool.try_execute(10, || {}).unwrap();
        let (r, f) = (ran.clone(), refusals.clone());
        pool.try_execute_or_refuse(
            10,
            move || {
                r.fetch_add(1, Ordering::SeqCst);
            },
            move |why| f.lock().push(why),
        )
        .unwrap();
        assert_eq!(pool.refuse_waiting_at_least(std::time::Duration::from_secs(3600)), 0, "none waited an hour");
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(pool.refuse_waiting_at_least(std::time::Duration::from_millis(5)), 3);
        let seen = refusals.lock().clone();
        assert_eq!(seen.len(), 3);
        for (i, why) in seen.iter().enumerate() {
            match why {
                Refusal::WaitedTooLong { waited_ms, queued } => {
                    assert!(*waited_ms >= 5);
                    assert_eq!(*queued, 4 - i, "the jobs left behind it");
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(pool.queued(), 2);
        assert_eq!(pool.queued_bytes(), 20);
        gate.wait();
        pool.shutdown();
        assert_eq!(ran.load(Ordering::SeqCst), 1, "only the job behind the plain one ran");
    }

    #[test]
    fn a_refusable_job_is_refused_at_once_when_the_queue_is_full_and_the_head_can_be_evicted() {
        let (pool, gate) = held_pool(1);
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let f = refusals.clone();
        pool.try_execute_or_refuse(0, || {}, move |why| f.lock().push(why)).unwrap();
        let f = refusals.clone();
        assert_eq!(pool.try_execute_or_refuse(0, || {}, move |why| f.lock().push(why)), Err(Rejected::Full));
        assert_eq!(refusals.lock().as_slice(), &[Refusal::Full]);
        assert!(pool.refuse_head());
        assert!(matches!(refusals.lock()[1], Refusal::Evicted { queued: 0, .. }));
        assert!(!pool.refuse_head(), "nothing left");
        gate.wait();
        pool.shutdown();
    }

    #[test]
    fn a_job_runs_in_place_only_while_nothing_is_queued_and_a_place_is_free() {
        let pool = BusinessPool::new("t", 2, 16).unwrap();
        let first = pool.run_in_place().expect("an idle pool gives a place");
        let second = pool.run_in_place().expect("two threads, two places");
        assert!(pool.run_in_place().is_none(), "both places are taken");
        // A queued job waits for a place: the workers do not run more than the pool's threads.
        // The job holds its place until the test lets it go, so the place it frees cannot be
        // mistaken for the one it took.
        let ran = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(std::sync::Barrier::new(2));
        let (r, g) = (ran.clone(), release.clone());
        pool.try_execute(0, move || {
            r.fetch_add(1, Ordering::SeqCst);
            g.wait();
        })
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "no place for it yet");
        drop(first);
        assert!(pool.run_in_place().is_none(), "a queued job is not overtaken");
        while ran.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        assert!(pool.run_in_place().is_none(), "the job holds the freed place while it runs");
        release.wait();
        drop(second);
        pool.shutdown();
        assert!(pool.run_in_place().is_none(), "a shut pool gives no place");
    }

    #[test]
    fn a_pool_on_a_runtime_runs_its_jobs_there_one_at_a_time_per_task_and_drains_at_shutdown() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        let pool = Arc::new(BusinessPool::on_runtime("t", 1, 10_000, runtime.handle()));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let on_runtime = Arc::new(AtomicUsize::new(0));
        for _ in 0..200 {
            let (running, most, done, on_runtime) = (running.clone(), most.clone(), done.clone(), on_runtime.clone());
            pool.try_execute(10, move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                if tokio::runtime::Handle::try_current().is_ok() {
                    on_runtime.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
                running.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        pool.shutdown();
        assert_eq!(done.load(Ordering::SeqCst), 200, "shutdown waits for every queued job");
        assert_eq!(on_runtime.load(Ordering::SeqCst), 200, "every job ran on the runtime");
        assert_eq!(most.load(Ordering::SeqCst), 1, "one task: one job at a time");
        assert_eq!(pool.try_execute(0, || {}), Err(Rejected::ShutDown));
    }

    /// The longest run of jobs the pool's task ran between two turns of another task that
    /// yields after each step, for `jobs` jobs of `bytes` each.
    fn longest_turn(jobs: usize, bytes: usize) -> usize {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let pool = BusinessPool::on_runtime("t", 1, 10_000, runtime.handle());
        let log = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..jobs {
            let log = log.clone();
            pool.try_execute(bytes, move || log.lock().push(true)).unwrap();
        }
        let other = log.clone();
        runtime.block_on(async move {
            while other.lock().iter().filter(|job| **job).count() < jobs {
                other.lock().push(false);
                tokio::task::yield_now().await;
            }
        });
        // Dropped first: an undriven runtime's task could not see the shutdown.
        drop(runtime);
        pool.shutdown();
        let log = log.lock();
        log.split(|job| !*job).map(<[bool]>::len).max().unwrap_or(0)
    }

    #[test]
    fn a_task_yields_after_its_budget_of_jobs_or_of_request_bytes() {
        assert_eq!(longest_turn(64, 10), TASK_BUDGET, "small jobs: the budget of jobs");
        assert_eq!(longest_turn(16, 32 * 1024), 2, "jobs of 32 KiB: two make the 64 KiB");
        assert_eq!(longest_turn(4, 1 << 20), 1, "a job larger than the budget runs alone");
    }

    #[test]
    fn a_pool_on_a_runtime_keeps_the_queue_rules_of_a_pool_of_threads() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        // The runtime is not driven yet: its task cannot run, so what is queued stays queued.
        let pool = BusinessPool::on_runtime("t", 1, 2, runtime.handle());
        let refusals = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..2 {
            let f = refusals.clone();
            pool.try_execute_or_refuse(0, || {}, move |why| f.lock().push(why)).unwrap();
        }
        let f = refusals.clone();
        assert_eq!(pool.try_execute_or_refuse(0, || {}, move |why| f.lock().push(why)), Err(Rejected::Full));
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(pool.refuse_waiting_at_least(std::time::Duration::from_millis(5)), 2, "the fast failure takes them out");
        assert!(matches!(refusals.lock()[..], [Refusal::Full, Refusal::WaitedTooLong { .. }, Refusal::WaitedTooLong { .. }]));
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        pool.try_execute(0, move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        runtime.block_on(async {
            while ran.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
        });
        drop(runtime);
        // The runtime dropped its task: shutdown does not wait for it.
        pool.shutdown();
    }
}
