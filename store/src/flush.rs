//! Driving the group commit ([`GroupCommit`]): who tells it what, and who answers the puts.
//!
//! Three kinds of thread touch it, each for one reason:
//! - the commit log's flush service (`CommitLogFlush`) is the only caller of msync. After each
//!   flush it reports the flushed offset ([`FlushControl::advance`], acknowledging the waiters it
//!   covers) or the error ([`FlushControl::fail`], failing them and latching the failure);
//! - the deadline timer (`GroupCommitTimer`, SYNC_FLUSH only) sleeps until the earliest pending
//!   deadline and ticks the machine. It never touches the disk, so a hung msync cannot hold back
//!   a FLUSH_DISK_TIMEOUT: the flusher may be stuck in the kernel while the timer answers;
//! - appenders register waiters ([`FlushControl::wait`]) and wake the timer only when their
//!   deadline is earlier than the one it sleeps until (with one `syncFlushTimeout` for all, that
//!   is when the timer is idle), so a steady stream of puts costs the timer about one wake-up per
//!   timeout period.
//!
//! The simpler alternative of a flusher that fires deadlines while a second thread does the
//! blocking msync would need a hand-off per flush; the timer only sleeps. Callbacks run on the
//! thread whose event answered them, after the lock is released and inside `catch_unwind`, so a
//! slow or panicking callback neither blocks the others' events nor kills the flusher.
//!
//! A flush failure is latched for good ([`FlushControl::failure`]): the commit log then refuses
//! puts, and only a restart (recovery, which re-reads and CRC-checks what is on disk) clears it, as
//! a Java broker must be restarted after an IO error.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use remoting::service::{Service, Waker};
use tracing::{error, warn};

use crate::group_commit::{GroupCommit, Step};
use crate::put::{AppendResult, PutCallback, PutMessageResult, PutStatus};

/// The timer's sleep while nobody waits (it is woken when somebody does; this only bounds it).
const IDLE_TICK: Duration = Duration::from_secs(60);

/// A SYNC_FLUSH put waiting for its flush.
struct Waiter {
    append: AppendResult,
    done: PutCallback,
}

struct Shared {
    machine: GroupCommit<Waiter>,
    /// The deadline the timer sleeps until; None while it is idle (or not running).
    timer_armed: Option<Instant>,
}

pub(crate) struct FlushControl {
    shared: Mutex<Shared>,
    timeout: Duration,
    max_waiters: usize,
    /// The first flush error, once one happened.
    failure: OnceLock<String>,
    timer: Mutex<Option<Waker>>,
}

impl FlushControl {
    pub(crate) fn new(timeout: Duration, max_waiters: usize) -> FlushControl {
        FlushControl {
            shared: Mutex::new(Shared { machine: GroupCommit::new(0, max_waiters), timer_armed: None }),
            timeout,
            max_waiters: max_waiters.max(1),
            failure: OnceLock::new(),
            timer: Mutex::new(None),
        }
    }

    /// Starts the deadline timer.
    pub(crate) fn start_timer(self: &Arc<Self>) -> io::Result<Service> {
        let me = self.clone();
        let service = Service::spawn("GroupCommitTimer", move |cx| loop {
            let (step, next) = {
                let mut shared = me.shared.lock();
                let step = shared.machine.tick(Instant::now());
                shared.timer_armed = step.next_deadline;
                let next = step.next_deadline;
                (step, next)
            };
            me.deliver(step);
            let sleep = next.map_or(IDLE_TICK, |d| d.saturating_duration_since(Instant::now()));
            if !cx.wait(sleep) {
                break;
            }
        })?;
        *self.timer.lock() = Some(service.waker());
        Ok(service)
    }

    /// Registers a put whose records end at `end`; `done` is called once a flush covers them,
    /// at the deadline, on a flush failure, or at once when the waiter cap is reached.
    pub(crate) fn wait(&self, end: u64, append: AppendResult, done: PutCallback) {
        let (step, wake_timer) = {
            let mut shared = self.shared.lock();
            // Read under the lock, so deadlines are in registration order, as the machine keeps them.
            let deadline = Instant::now() + self.timeout;
            let step = shared.machine.append(Waiter { append, done }, end, deadline);
            let wake = step.next_deadline.is_some_and(|d| shared.timer_armed.is_none_or(|armed| d < armed));
            if wake {
                shared.timer_armed = step.next_deadline;
            }
            (step, wake)
        };
        if wake_timer {
            if let Some(timer) = self.timer.lock().as_ref() {
                timer.wake();
            }
        }
        self.deliver(step);
    }

    /// A flush reached `flushed`. Returns whether the watermark moved (it never does after a
    /// failure).
    pub(crate) fn advance(&self, flushed: u64) -> bool {
        let (step, moved) = {
            let mut shared = self.shared.lock();
            let before = shared.machine.flushed();
            let step = shared.machine.advance(flushed);
            (step, shared.machine.flushed() > before)
        };
        self.deliver(step);
        moved
    }

    /// A flush failed: latch it and fail every waiter.
    pub(crate) fn fail(&self, e: &io::Error) {
        if self.failure.set(e.to_string()).is_ok() {
            error!(error = %e, "commit-log flush failed: puts are refused until the store is restarted (recovery)");
        }
        let step = self.shared.lock().machine.fail();
        self.deliver(step);
    }

    /// The flush error that stopped writes, if any.
    pub(crate) fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// Sets the watermark after recovery, before any waiter exists.
    pub(crate) fn reset_flushed(&self, offset: u64) {
        self.shared.lock().machine.reset_flushed(offset);
    }

    /// Nothing will be flushed any more (after the flusher's last flush): whatever still waits
    /// times out, as will later puts.
    pub(crate) fn stop(&self) {
        let step = self.shared.lock().machine.stop();
        self.deliver(step);
    }

    /// Runs the callbacks of one step; the lock is not held.
    fn deliver(&self, step: Step<Waiter>) {
        if step.answers_nobody() {
            return;
        }
        for waiter in step.acked {
            finish(waiter, PutStatus::PutOk, None);
        }
        if !step.timed_out.is_empty() {
            warn!(puts = step.timed_out.len(), timeout_ms = self.timeout.as_millis() as u64, "sync flush timed out");
            for waiter in step.timed_out {
                let remark = format!("the flush did not complete within syncFlushTimeout ({} ms)", self.timeout.as_millis());
                finish(waiter, PutStatus::FlushDiskTimeout, Some(remark));
            }
        }
        for waiter in step.failed {
            let reason = self.failure().unwrap_or("unknown error");
            // Stored but perhaps never on disk: the same answer as a timeout, with the cause.
            finish(waiter, PutStatus::FlushDiskTimeout, Some(format!("commit-log flush failed: {reason}")));
        }
        if !step.busy.is_empty() {
            warn!(puts = step.busy.len(), max_waiters = self.max_waiters, "too many puts wait for the flush; answered at once");
            for waiter in step.busy {
                let remark = format!("{} puts already wait for the flush (syncFlushMaxWaiters)", self.max_waiters);
                finish(waiter, PutStatus::FlushDiskTimeout, Some(remark));
            }
        }
    }
}

/// Calls a waiter's callback; a panic in it is logged and goes no further.
fn finish(waiter: Waiter, status: PutStatus, remark: Option<String>) {
    let Waiter { append, done } = waiter;
    let result = PutMessageResult { status, append: Some(append), remark };
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || done(result))) {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic".to_owned());
        error!(panic = %message, "a put callback panicked; carrying on");
    }
}
