//! Group commit for SYNC_FLUSH as a pure state machine: who waits for which flushed offset, and
//! what each event answers. No threads, no clock reads, no IO: the caller feeds events (a waiter
//! appended with its end offset and deadline, the flushed offset advanced, a tick with the time,
//! a flush failure, stop) and gets back a [`Step`]: the waiters to acknowledge, those that timed
//! out, those failed by a flush error, those refused because too many already wait, and the next
//! instant to tick at. The driver (`flush`) owns the threads and runs the callbacks.
//!
//! Rules:
//! - a waiter is acknowledged once the flushed offset reaches its end, and times out when a tick
//!   at or after its deadline finds it still uncovered;
//! - a flush failure fails every waiter and, for good, every later append: after an msync error
//!   Linux marks the pages clean, so a later "successful" msync proves nothing about them;
//! - at most `max_waiters` wait; an append beyond that is answered at once (`busy`). The record is
//!   already in the commit log by then, so the honest answer is "stored, flush not confirmed"
//!   (the driver maps it to FLUSH_DISK_TIMEOUT, which a Java producer does not retry, so no
//!   duplicate is sent); refusing after the fact would claim nothing was stored;
//! - after stop nothing more can be flushed: whatever waits, and later appends that are not
//!   already covered, time out.

use std::time::Instant;

/// What one event answers. Each list keeps arrival order.
#[derive(Debug, PartialEq, Eq)]
pub struct Step<T> {
    /// Covered by the flushed offset: acknowledge (PUT_OK).
    pub acked: Vec<T>,
    /// Past their deadline, or still waiting at stop (FLUSH_DISK_TIMEOUT).
    pub timed_out: Vec<T>,
    /// Failed by a flush error: their bytes may never reach the disk.
    pub failed: Vec<T>,
    /// Refused because `max_waiters` already wait.
    pub busy: Vec<T>,
    /// The earliest deadline still pending: the driver must tick no later than this.
    pub next_deadline: Option<Instant>,
}

impl<T> Step<T> {
    fn empty(next_deadline: Option<Instant>) -> Step<T> {
        Step { acked: Vec::new(), timed_out: Vec::new(), failed: Vec::new(), busy: Vec::new(), next_deadline }
    }

    /// Whether nobody is answered by this step.
    pub fn answers_nobody(&self) -> bool {
        self.acked.is_empty() && self.timed_out.is_empty() && self.failed.is_empty() && self.busy.is_empty()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Open,
    /// A flush failed; nothing is ever acknowledged again.
    Failed,
    /// The flusher stopped; nothing more will be flushed.
    Stopped,
}

struct Pending<T> {
    end: u64,
    deadline: Instant,
    waiter: T,
}

pub struct GroupCommit<T> {
    pending: Vec<Pending<T>>,
    flushed: u64,
    phase: Phase,
    max_waiters: usize,
}

impl<T> GroupCommit<T> {
    /// A machine whose data is flushed up to `flushed`, holding at most `max_waiters` (at least 1).
    pub fn new(flushed: u64, max_waiters: usize) -> GroupCommit<T> {
        GroupCommit { pending: Vec::new(), flushed, phase: Phase::Open, max_waiters: max_waiters.max(1) }
    }

    pub fn flushed(&self) -> u64 {
        self.flushed
    }

    pub fn is_failed(&self) -> bool {
        self.phase == Phase::Failed
    }

    /// How many wait.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Sets the flushed offset (recovery, before any waiter exists); it may move back here only.
    pub fn reset_flushed(&mut self, flushed: u64) {
        self.flushed = flushed;
    }

    /// A put whose records end at `end` waits for the flush until `deadline`.
    pub fn append(&mut self, waiter: T, end: u64, deadline: Instant) -> Step<T> {
        let mut step = Step::empty(None);
        match self.phase {
            Phase::Failed => step.failed.push(waiter),
            _ if end <= self.flushed => step.acked.push(waiter),
            Phase::Stopped => step.timed_out.push(waiter),
            Phase::Open if self.pending.len() >= self.max_waiters => step.busy.push(waiter),
            Phase::Open => self.pending.push(Pending { end, deadline, waiter }),
        }
        step.next_deadline = self.next_deadline();
        step
    }

    /// A flush reached `flushed`. Offsets never move back; after a failure nothing is acknowledged.
    pub fn advance(&mut self, flushed: u64) -> Step<T> {
        if self.phase == Phase::Failed || flushed <= self.flushed {
            return Step::empty(self.next_deadline());
        }
        self.flushed = flushed;
        let acked = self.take_where(|p| p.end <= flushed);
        Step { acked, ..Step::empty(self.next_deadline()) }
    }

    /// The time is `now`: waiters whose deadline is at or before it time out.
    pub fn tick(&mut self, now: Instant) -> Step<T> {
        let timed_out = self.take_where(|p| p.deadline <= now);
        Step { timed_out, ..Step::empty(self.next_deadline()) }
    }

    /// A flush failed: every waiter fails, and so will every later append.
    pub fn fail(&mut self) -> Step<T> {
        self.phase = Phase::Failed;
        let failed = self.take_where(|_| true);
        Step { failed, ..Step::empty(None) }
    }

    /// The flusher stopped (after its last flush): whatever still waits times out.
    pub fn stop(&mut self) -> Step<T> {
        if self.phase == Phase::Open {
            self.phase = Phase::Stopped;
        }
        let timed_out = self.take_where(|_| true);
        Step { timed_out, ..Step::empty(None) }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.pending.iter().map(|p| p.deadline).min()
    }

    /// Removes the waiters matching `pred`, keeping the order of both parts. O(waiting), which
    /// `max_waiters` bounds.
    fn take_where(&mut self, pred: impl Fn(&Pending<T>) -> bool) -> Vec<T> {
        if !self.pending.iter().any(&pred) {
            return Vec::new();
        }
        let mut taken = Vec::new();
        let mut kept = Vec::with_capacity(self.pending.len());
        for p in std::mem::take(&mut self.pending) {
            if pred(&p) {
                taken.push(p.waiter);
            } else {
                kept.push(p);
            }
        }
        self.pending = kept;
        taken
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    fn machine() -> (GroupCommit<&'static str>, Instant) {
        (GroupCommit::new(100, 3), Instant::now())
    }

    #[test]
    fn a_waiter_waits_until_a_flush_covers_its_end() {
        let (mut gc, t) = machine();
        let step = gc.append("a", 150, at(t, 5000));
        assert!(step.answers_nobody());
        assert_eq!(step.next_deadline, Some(at(t, 5000)));
        assert!(gc.advance(149).answers_nobody(), "a flush short of the end acknowledges nothing");
        let step = gc.advance(150);
        assert_eq!(step.acked, vec!["a"]);
        assert_eq!(step.next_deadline, None);
        assert_eq!(gc.waiting(), 0);
    }

    #[test]
    fn a_waiter_already_covered_is_acknowledged_at_once() {
        let (mut gc, t) = machine();
        assert_eq!(gc.append("a", 100, at(t, 5000)).acked, vec!["a"]);
        assert_eq!(gc.waiting(), 0);
    }

    #[test]
    fn a_flush_acknowledges_exactly_the_waiters_it_covers_in_arrival_order() {
        let (mut gc, t) = machine();
        gc.append("late", 300, at(t, 10));
        gc.append("b", 200, at(t, 11));
        gc.append("a", 120, at(t, 12));
        let step = gc.advance(250);
        assert_eq!((step.acked, step.timed_out, step.failed), (vec!["b", "a"], vec![], vec![]));
        assert_eq!(step.next_deadline, Some(at(t, 10)));
        assert_eq!(gc.flushed(), 250);
    }

    #[test]
    fn a_waiter_times_out_at_its_deadline_and_not_before() {
        let (mut gc, t) = machine();
        gc.append("a", 150, at(t, 5000));
        gc.append("b", 160, at(t, 5003));
        let early = gc.tick(at(t, 4999));
        assert!(early.answers_nobody());
        assert_eq!(early.next_deadline, Some(at(t, 5000)));
        let due = gc.tick(at(t, 5000));
        assert_eq!(due.timed_out, vec!["a"]);
        assert_eq!(due.next_deadline, Some(at(t, 5003)));
        assert_eq!(gc.tick(at(t, 9000)).timed_out, vec!["b"]);
    }

    #[test]
    fn a_timed_out_waiter_is_not_acknowledged_again_by_a_later_flush() {
        let (mut gc, t) = machine();
        gc.append("a", 150, at(t, 10));
        assert_eq!(gc.tick(at(t, 10)).timed_out, vec!["a"]);
        assert!(gc.advance(1000).answers_nobody());
    }

    #[test]
    fn the_next_deadline_is_the_earliest_pending_one_whatever_the_arrival_order() {
        let (mut gc, t) = machine();
        gc.append("a", 150, at(t, 30));
        assert_eq!(gc.append("b", 160, at(t, 20)).next_deadline, Some(at(t, 20)));
        assert_eq!(gc.advance(160).next_deadline, None);
    }

    #[test]
    fn a_flush_failure_fails_every_waiter_and_every_later_append() {
        let (mut gc, t) = machine();
        gc.append("a", 150, at(t, 10));
        gc.append("b", 160, at(t, 10));
        let step = gc.fail();
        assert_eq!((step.failed, step.acked, step.next_deadline), (vec!["a", "b"], vec![], None));
        assert!(gc.is_failed());
        // Even an end below the old flushed offset: the machine no longer vouches for anything new.
        assert_eq!(gc.append("c", 50, at(t, 10)).failed, vec!["c"]);
        assert_eq!(gc.append("d", 500, at(t, 10)).failed, vec!["d"]);
        assert_eq!(gc.waiting(), 0);
    }

    #[test]
    fn a_flush_that_succeeds_after_a_failure_acknowledges_nothing() {
        let (mut gc, t) = machine();
        gc.fail();
        assert!(gc.advance(10_000).answers_nobody());
        assert_eq!(gc.flushed(), 100, "the watermark stays where the last trustworthy flush left it");
        assert_eq!(gc.append("a", 200, at(t, 10)).failed, vec!["a"]);
    }

    #[test]
    fn appends_beyond_the_cap_are_answered_busy_at_once() {
        let (mut gc, t) = machine();
        for w in ["a", "b", "c"] {
            assert!(gc.append(w, 200, at(t, 10)).answers_nobody());
        }
        let step = gc.append("d", 200, at(t, 10));
        assert_eq!(step.busy, vec!["d"]);
        assert_eq!(gc.waiting(), 3);
        // A covered append needs no slot.
        assert_eq!(gc.append("e", 90, at(t, 10)).acked, vec!["e"]);
        gc.advance(200);
        assert!(gc.append("f", 300, at(t, 10)).answers_nobody(), "slots free up when waiters are answered");
    }

    #[test]
    fn stop_times_out_whatever_still_waits_and_every_later_uncovered_append() {
        let (mut gc, t) = machine();
        gc.append("a", 150, at(t, 10));
        assert_eq!(gc.stop().timed_out, vec!["a"]);
        assert_eq!(gc.append("b", 150, at(t, 10)).timed_out, vec!["b"]);
        assert_eq!(gc.append("c", 100, at(t, 10)).acked, vec!["c"]);
    }

    #[test]
    fn a_failure_after_stop_still_fails_later_appends() {
        let (mut gc, t) = machine();
        gc.stop();
        gc.fail();
        assert_eq!(gc.append("a", 100, at(t, 10)).failed, vec!["a"]);
        assert!(gc.stop().answers_nobody());
        assert_eq!(gc.append("b", 100, at(t, 10)).failed, vec!["b"], "stop does not clear a failure");
    }

    #[test]
    fn the_flushed_offset_never_moves_back() {
        let (mut gc, t) = machine();
        gc.append("a", 100 + 1, at(t, 10));
        assert!(gc.advance(50).answers_nobody());
        assert_eq!(gc.flushed(), 100);
    }
}
