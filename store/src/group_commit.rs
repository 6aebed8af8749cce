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
//!
//! Cost: O(1) amortised per waiter. Waiters wait in arrival order, and both their ends and their
//! deadlines are non-decreasing along it: appends are ordered, so a later put ends later, and the
//! timeout is one fixed `syncFlushTimeout`, so a later put's deadline is later. Every event then
//! looks only at the front: a flush acknowledges the waiters in front up to the first it does not
//! cover, a tick times out those in front up to the first whose deadline is still ahead, and the
//! next deadline is the front's. The machine keeps the order true itself: two appenders register
//! just after their appends, outside the append lock, so the later append can register first; a
//! waiter whose end or deadline is below the last one's takes the last one's (it is then answered
//! by the flush that covers both, or times out with it: never acknowledged before its own bytes
//! are flushed).

use std::collections::VecDeque;
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
    /// In arrival order; `end` and `deadline` non-decreasing front to back.
    pending: VecDeque<Pending<T>>,
    flushed: u64,
    phase: Phase,
    max_waiters: usize,
}

impl<T> GroupCommit<T> {
    /// A machine whose data is flushed up to `flushed`, holding at most `max_waiters` (at least 1).
    pub fn new(flushed: u64, max_waiters: usize) -> GroupCommit<T> {
        GroupCommit { pending: VecDeque::new(), flushed, phase: Phase::Open, max_waiters: max_waiters.max(1) }
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

    /// A put whose records end at `end` waits for the flush until `deadline` (both raised to the
    /// last waiter's if below, see the module's notes).
    pub fn append(&mut self, waiter: T, end: u64, deadline: Instant) -> Step<T> {
        let mut step = Step::empty(None);
        match self.phase {
            Phase::Failed => step.failed.push(waiter),
            _ if end <= self.flushed => step.acked.push(waiter),
            Phase::Stopped => step.timed_out.push(waiter),
            Phase::Open if self.pending.len() >= self.max_waiters => step.busy.push(waiter),
            Phase::Open => {
                let (end, deadline) = match self.pending.back() {
                    Some(last) => (end.max(last.end), deadline.max(last.deadline)),
                    None => (end, deadline),
                };
                self.pending.push_back(Pending { end, deadline, waiter });
            }
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
        let acked = self.take_front_while(|p| p.end <= flushed);
        Step { acked, ..Step::empty(self.next_deadline()) }
    }

    /// The time is `now`: waiters whose deadline is at or before it time out.
    pub fn tick(&mut self, now: Instant) -> Step<T> {
        let timed_out = self.take_front_while(|p| p.deadline <= now);
        Step { timed_out, ..Step::empty(self.next_deadline()) }
    }

    /// A flush failed: every waiter fails, and so will every later append.
    pub fn fail(&mut self) -> Step<T> {
        self.phase = Phase::Failed;
        let failed = self.take_all();
        Step { failed, ..Step::empty(None) }
    }

    /// The flusher stopped (after its last flush): whatever still waits times out.
    pub fn stop(&mut self) -> Step<T> {
        if self.phase == Phase::Open {
            self.phase = Phase::Stopped;
        }
        let timed_out = self.take_all();
        Step { timed_out, ..Step::empty(None) }
    }

    /// The front's deadline: the earliest, as deadlines are non-decreasing.
    fn next_deadline(&self) -> Option<Instant> {
        self.pending.front().map(|p| p.deadline)
    }

    /// Removes the waiters in front while `pred` holds, in order: O(taken + 1).
    fn take_front_while(&mut self, pred: impl Fn(&Pending<T>) -> bool) -> Vec<T> {
        let mut taken = Vec::new();
        while self.pending.front().is_some_and(&pred) {
            if let Some(p) = self.pending.pop_front() {
                taken.push(p.waiter);
            }
        }
        taken
    }

    fn take_all(&mut self) -> Vec<T> {
        self.pending.drain(..).map(|p| p.waiter).collect()
    }

    /// Whether ends and deadlines are non-decreasing front to back (what every event relies on).
    #[cfg(test)]
    fn is_monotone(&self) -> bool {
        self.pending.iter().zip(self.pending.iter().skip(1)).all(|(a, b)| a.end <= b.end && a.deadline <= b.deadline)
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
        gc.append("a", 120, at(t, 10));
        gc.append("b", 200, at(t, 11));
        gc.append("late", 300, at(t, 12));
        let step = gc.advance(250);
        assert_eq!((step.acked, step.timed_out, step.failed), (vec!["a", "b"], vec![], vec![]));
        assert_eq!(step.next_deadline, Some(at(t, 12)));
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
    fn the_next_deadline_is_the_oldest_waiters() {
        let (mut gc, t) = machine();
        gc.append("a", 150, at(t, 20));
        assert_eq!(gc.append("b", 160, at(t, 30)).next_deadline, Some(at(t, 20)));
        assert_eq!(gc.advance(150).next_deadline, Some(at(t, 30)));
        assert_eq!(gc.advance(160).next_deadline, None);
    }

    #[test]
    fn a_waiter_that_registers_after_a_later_append_waits_and_times_out_with_it() {
        let (mut gc, t) = machine();
        gc.append("later append", 200, at(t, 20));
        // Registered second, though its bytes come first: it takes the end and deadline before it.
        assert_eq!(gc.append("earlier append", 150, at(t, 10)).next_deadline, Some(at(t, 20)));
        assert!(gc.is_monotone());
        assert!(gc.advance(150).answers_nobody(), "the front is not covered, so nothing behind it is looked at");
        assert!(gc.tick(at(t, 10)).answers_nobody());
        assert_eq!(gc.advance(200).acked, vec!["later append", "earlier append"]);
    }

    #[test]
    fn ends_and_deadlines_stay_monotone_and_no_waiter_is_acknowledged_before_its_own_end() {
        // A fixed pseudo-random run: appends with ends and deadlines a little out of order,
        // flushes and ticks moving forward.
        let t = Instant::now();
        let mut gc: GroupCommit<(u64, u64)> = GroupCommit::new(0, 64);
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        let (mut written, mut flushed, mut now) = (0u64, 0u64, 0u64);
        for _ in 0..10_000 {
            match next(4) {
                0 | 1 => {
                    written += 1 + next(100);
                    // Another appender's bytes may come before this one registers.
                    let end = written.saturating_sub(next(3) * 50);
                    let deadline = now + 40 - next(3);
                    let step = gc.append((end, deadline), end, at(t, deadline));
                    assert!(step.acked.iter().all(|(end, _)| *end <= gc.flushed()));
                }
                2 => {
                    flushed = (flushed + next(300)).min(written);
                    let step = gc.advance(flushed);
                    assert!(step.acked.iter().all(|(end, _)| *end <= flushed), "acknowledged before its bytes were flushed");
                }
                _ => {
                    now += next(10);
                    let step = gc.tick(at(t, now));
                    assert!(step.timed_out.iter().all(|(_, deadline)| *deadline <= now), "timed out before its deadline");
                    assert!(step.next_deadline.is_none_or(|d| d > at(t, now)));
                }
            }
            assert!(gc.is_monotone());
        }
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
