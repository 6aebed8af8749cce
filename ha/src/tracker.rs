//! Who has what: the pure structure behind SYNC_MASTER. Slaves' positions come in (bytes sent to
//! a connection, offsets it reports), put requests come in as waiters (a record's end offset and a
//! deadline), and out come the waiters whose records enough slaves now hold, or whose time ran out.
//! No threads, sockets or clocks: the HA service feeds it and answers what it releases.
//!
//! **A slave is credited only with bytes this master sent it.** Java counts the largest offset any
//! connection reports, so any TCP client writing a big number to the HA port "acknowledges"
//! everything (apache/rocketmq#3015). Here a connection covers a record only if the record lies in
//! the range this connection was sent: after its first report (where it started) and up to both
//! what it reports and what was written to it. A report beyond what was sent is ignored, and said
//! so. A Java slave reports only what it received, so it sees no difference.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// One connection from a slave.
pub type SlaveId = u64;

/// What SYNC_MASTER asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncPolicy {
    /// Slaves that must hold a record before its put is answered (at least 1).
    pub slaves_needed: usize,
    /// Java's `haSlaveFallbehindMax`: a slave further behind than this is "not available".
    pub fallbehind_max_bytes: i64,
    /// Java's `slaveTimeout`.
    pub timeout: Duration,
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Enough slaves hold the record.
    Replicated,
    /// No slave connected, or the best one is too far behind (SLAVE_NOT_AVAILABLE).
    SlaveNotAvailable,
    /// Not replicated within the timeout (FLUSH_SLAVE_TIMEOUT).
    TimedOut,
}

#[derive(Clone, Copy, Debug, Default)]
struct Slave {
    /// Where the transfer on this connection started (set by the master once it knows).
    start: Option<i64>,
    /// End of the bytes written to this connection.
    sent: i64,
    /// What it holds, as far as this master can vouch for: `min(reported, sent)`.
    acked: i64,
}

impl Slave {
    /// Whether this connection vouches for a record ending at `end`.
    fn covers(&self, end: i64) -> bool {
        self.start.is_some_and(|start| start < end && end <= self.acked)
    }
}

/// What a report did.
#[derive(Debug)]
pub struct Reported<W> {
    /// Waiters now answered.
    pub released: Vec<(W, Outcome)>,
    /// The slave reported more than it was sent (ignored beyond what was sent).
    pub beyond_sent: bool,
}

pub struct Tracker<W> {
    policy: SyncPolicy,
    slaves: HashMap<SlaveId, Slave>,
    /// Waiting puts by (end offset, arrival number).
    waiters: BTreeMap<(i64, u64), (Instant, W)>,
    /// The same puts by (deadline, arrival number), for timeouts.
    deadlines: BTreeMap<(Instant, u64), i64>,
    arrivals: u64,
}

impl<W> Tracker<W> {
    pub fn new(policy: SyncPolicy) -> Self {
        let policy = SyncPolicy { slaves_needed: policy.slaves_needed.max(1), ..policy };
        Tracker { policy, slaves: HashMap::new(), waiters: BTreeMap::new(), deadlines: BTreeMap::new(), arrivals: 0 }
    }

    pub fn policy(&self) -> SyncPolicy {
        self.policy
    }

    pub fn connected(&mut self, id: SlaveId) {
        self.slaves.insert(id, Slave::default());
    }

    /// A connection went away. Its waiters keep waiting: another slave (or this one, back) may
    /// still hold their records in time.
    pub fn disconnected(&mut self, id: SlaveId) {
        self.slaves.remove(&id);
    }

    pub fn slave_count(&self) -> usize {
        self.slaves.len()
    }

    /// The master sends connection `id` its bytes from `from` on (the slave's first report, or
    /// the start of the master's last segment for a slave that reported 0). Bytes before `from`
    /// are only the slave's claim, so they are never credited.
    pub fn transfer_starts(&mut self, id: SlaveId, from: i64) {
        if let Some(slave) = self.slaves.get_mut(&id) {
            *slave = Slave { start: Some(from), sent: from, acked: from };
        }
    }

    /// Bytes up to `end` were written to connection `id`.
    pub fn sent(&mut self, id: SlaveId, end: i64) {
        if let Some(slave) = self.slaves.get_mut(&id) {
            slave.sent = slave.sent.max(end);
        }
    }

    /// Connection `id` reports holding everything below `offset`.
    pub fn reported(&mut self, id: SlaveId, offset: i64) -> Reported<W> {
        let nothing = Reported { released: Vec::new(), beyond_sent: false };
        let Some(slave) = self.slaves.get_mut(&id) else { return nothing };
        let Some(start) = slave.start else { return nothing };
        let beyond_sent = offset > slave.sent;
        slave.acked = slave.acked.max(offset.min(slave.sent));
        let (from, to) = (start, slave.acked);
        if to <= from {
            return Reported { released: Vec::new(), beyond_sent };
        }
        // (from, to]: an empty or reversed range would panic in BTreeMap::range, hence the check.
        let candidates: Vec<(i64, u64)> = self.waiters.range((from + 1, 0)..=(to, u64::MAX)).map(|(k, _)| *k).collect();
        let mut released = Vec::new();
        for key in candidates {
            if self.holders(key.0) >= self.policy.slaves_needed {
                if let Some((deadline, waiter)) = self.waiters.remove(&key) {
                    self.deadlines.remove(&(deadline, key.1));
                    released.push((waiter, Outcome::Replicated));
                }
            }
        }
        Reported { released, beyond_sent }
    }

    /// How many connections vouch for a record ending at `end`.
    fn holders(&self, end: i64) -> usize {
        self.slaves.values().filter(|s| s.covers(end)).count()
    }

    /// The furthest any slave is known to hold.
    pub fn max_acked(&self) -> i64 {
        self.slaves.values().map(|s| s.acked).max().unwrap_or(0)
    }

    /// A put whose record ends at `end` waits for its slaves. Answered at once (`Some`) when no
    /// slave can take it (Java's `isSlaveOK` precheck) or when enough already hold it.
    pub fn wait(&mut self, end: i64, now: Instant, waiter: W) -> Option<(W, Outcome)> {
        if self.slaves.is_empty() || end - self.max_acked() >= self.policy.fallbehind_max_bytes {
            return Some((waiter, Outcome::SlaveNotAvailable));
        }
        if self.holders(end) >= self.policy.slaves_needed {
            return Some((waiter, Outcome::Replicated));
        }
        let deadline = now + self.policy.timeout;
        self.arrivals += 1;
        self.waiters.insert((end, self.arrivals), (deadline, waiter));
        self.deadlines.insert((deadline, self.arrivals), end);
        None
    }

    /// The waiters whose deadline has passed.
    pub fn tick(&mut self, now: Instant) -> Vec<(W, Outcome)> {
        let due: Vec<(Instant, u64)> = self.deadlines.range(..=(now, u64::MAX)).map(|(k, _)| *k).collect();
        let mut out = Vec::with_capacity(due.len());
        for key in due {
            if let Some(end) = self.deadlines.remove(&key) {
                if let Some((_, waiter)) = self.waiters.remove(&(end, key.1)) {
                    out.push((waiter, Outcome::TimedOut));
                }
            }
        }
        out
    }

    /// When the next waiter times out.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.keys().next().map(|(deadline, _)| *deadline)
    }

    pub fn waiting(&self) -> usize {
        self.waiters.len()
    }

    /// Every waiter, answered as timed out (the service is stopping).
    pub fn drain(&mut self) -> Vec<(W, Outcome)> {
        self.deadlines.clear();
        std::mem::take(&mut self.waiters).into_values().map(|(_, w)| (w, Outcome::TimedOut)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(slaves_needed: usize) -> SyncPolicy {
        SyncPolicy { slaves_needed, fallbehind_max_bytes: 1000, timeout: Duration::from_secs(3) }
    }

    fn ids<W: Copy>(released: &[(W, Outcome)]) -> Vec<W> {
        released.iter().map(|(w, _)| *w).collect()
    }

    #[test]
    fn without_a_slave_a_put_is_answered_slave_not_available_at_once() {
        let mut t: Tracker<u32> = Tracker::new(policy(1));
        assert_eq!(t.wait(100, Instant::now(), 1), Some((1, Outcome::SlaveNotAvailable)));
        assert_eq!(t.waiting(), 0);
    }

    #[test]
    fn a_slave_too_far_behind_is_not_available() {
        let mut t: Tracker<u32> = Tracker::new(policy(1));
        t.connected(7);
        t.transfer_starts(7, 0);
        assert_eq!(t.wait(1000, Instant::now(), 1), Some((1, Outcome::SlaveNotAvailable)));
        assert_eq!(t.wait(999, Instant::now(), 2), None);
    }

    #[test]
    fn a_waiter_is_released_when_its_slave_reports_the_bytes_it_was_sent() {
        let now = Instant::now();
        let mut t: Tracker<u32> = Tracker::new(policy(1));
        t.connected(1);
        assert!(t.reported(1, 100).released.is_empty(), "nothing is credited before the transfer starts");
        t.transfer_starts(1, 100);
        assert_eq!(t.wait(150, now, 10), None);
        assert_eq!(t.wait(200, now, 20), None);
        t.sent(1, 180);
        let r = t.reported(1, 180);
        assert_eq!((ids(&r.released), r.beyond_sent), (vec![10], false));
        t.sent(1, 300);
        assert_eq!(ids(&t.reported(1, 300).released), vec![20]);
        assert_eq!(t.waiting(), 0);
    }

    #[test]
    fn a_report_beyond_what_was_sent_acknowledges_nothing_more() {
        let now = Instant::now();
        let mut t: Tracker<u32> = Tracker::new(policy(1));
        // A stray client that claims to hold everything from the start.
        t.connected(1);
        t.transfer_starts(1, 0);
        assert_eq!(t.wait(500, now, 1), None);
        let r = t.reported(1, i64::MAX);
        assert!(r.released.is_empty() && r.beyond_sent);
        // And one whose first report claims a huge offset starts there, so vouches for nothing below.
        t.connected(2);
        t.transfer_starts(2, 1 << 40);
        assert!(t.reported(2, (1 << 40) + 10).released.is_empty());
        assert_eq!(t.tick(now + Duration::from_secs(3)), vec![(1, Outcome::TimedOut)]);
    }

    #[test]
    fn two_slaves_needed_means_both_hold_the_record() {
        let now = Instant::now();
        let mut t: Tracker<u32> = Tracker::new(policy(2));
        for id in [1, 2] {
            t.connected(id);
            t.transfer_starts(id, 0);
        }
        assert_eq!(t.wait(64, now, 1), None);
        t.sent(1, 64);
        assert!(t.reported(1, 64).released.is_empty());
        t.sent(2, 64);
        assert_eq!(ids(&t.reported(2, 64).released), vec![1]);
    }

    #[test]
    fn waiters_time_out_in_deadline_order_and_a_disconnect_does_not_answer_them() {
        let now = Instant::now();
        let mut t: Tracker<u32> = Tracker::new(policy(1));
        t.connected(1);
        t.transfer_starts(1, 0);
        t.wait(10, now, 1);
        t.wait(20, now + Duration::from_millis(5), 2);
        t.disconnected(1);
        assert_eq!(t.waiting(), 2);
        assert_eq!(t.next_deadline(), Some(now + Duration::from_secs(3)));
        assert!(t.tick(now + Duration::from_millis(2999)).is_empty());
        assert_eq!(t.tick(now + Duration::from_secs(3)), vec![(1, Outcome::TimedOut)]);
        assert_eq!(t.tick(now + Duration::from_secs(4)), vec![(2, Outcome::TimedOut)]);
    }

    #[test]
    fn a_record_already_held_is_answered_at_once() {
        let mut t: Tracker<u32> = Tracker::new(policy(1));
        t.connected(1);
        t.transfer_starts(1, 0);
        t.sent(1, 100);
        t.reported(1, 100);
        assert_eq!(t.wait(80, Instant::now(), 5), Some((5, Outcome::Replicated)));
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Connect(u8),
        Disconnect(u8),
        Start(u8, u16),
        Send(u8, u16),
        Report(u8, u16),
        Wait(u16),
        Tick(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..3).prop_map(Op::Connect),
            (0u8..3).prop_map(Op::Disconnect),
            (0u8..3, any::<u16>()).prop_map(|(s, o)| Op::Start(s, o)),
            (0u8..3, any::<u16>()).prop_map(|(s, o)| Op::Send(s, o)),
            (0u8..3, any::<u16>()).prop_map(|(s, o)| Op::Report(s, o)),
            any::<u16>().prop_map(Op::Wait),
            (0u16..5000).prop_map(Op::Tick),
        ]
    }

    proptest! {
        /// Whatever the slaves claim, a put is released as replicated only if, at that moment,
        /// enough connections were sent the bytes up to its end (from where their transfer
        /// started) and reported holding them; and every put is answered exactly once.
        #[test]
        fn only_sent_and_reported_bytes_release_a_put(ops in proptest::collection::vec(op(), 1..200), needed in 1usize..3) {
            let policy = SyncPolicy { slaves_needed: needed, fallbehind_max_bytes: i64::MAX, timeout: Duration::from_millis(1000) };
            let mut t: Tracker<(u64, i64)> = Tracker::new(policy);
            // The oracle: per slave, (start, sent, vouched), where vouched only grows by a report
            // of bytes already sent at the time of the report.
            let mut model: HashMap<SlaveId, (Option<i64>, i64, i64)> = HashMap::new();
            let (mut now, mut next_id, mut answered) = (Instant::now(), 0u64, std::collections::HashSet::new());
            let mut check = |released: Vec<((u64, i64), Outcome)>, model: &HashMap<SlaveId, (Option<i64>, i64, i64)>| {
                for ((id, end), outcome) in released {
                    prop_assert!(answered.insert(id), "put {} answered twice", id);
                    if outcome == Outcome::Replicated {
                        let holders = model.values().filter(|(start, _, vouched)| start.is_some_and(|s| s < end) && end <= *vouched).count();
                        prop_assert!(holders >= needed, "put ending at {} released with {} holders", end, holders);
                    }
                }
                Ok(())
            };
            for op in ops {
                match op {
                    Op::Connect(s) => { t.connected(s as u64); model.insert(s as u64, (None, 0, 0)); }
                    Op::Disconnect(s) => { t.disconnected(s as u64); model.remove(&(s as u64)); }
                    Op::Start(s, o) => if let Some(m) = model.get_mut(&(s as u64)) { t.transfer_starts(s as u64, o as i64); *m = (Some(o as i64), o as i64, o as i64); },
                    Op::Send(s, o) => if let Some(m) = model.get_mut(&(s as u64)) { t.sent(s as u64, o as i64); m.1 = m.1.max(o as i64); },
                    Op::Report(s, o) => {
                        if let Some(m) = model.get_mut(&(s as u64)) { m.2 = m.2.max((o as i64).min(m.1)); }
                        let r = t.reported(s as u64, o as i64);
                        check(r.released, &model)?;
                    }
                    Op::Wait(end) => {
                        next_id += 1;
                        if let Some(done) = t.wait(end as i64, now, (next_id, end as i64)) { check(vec![done], &model)?; }
                    }
                    Op::Tick(ms) => { now += Duration::from_millis(ms as u64); check(t.tick(now), &model)?; }
                }
            }
            check(t.drain(), &model)?;
            prop_assert_eq!(answered.len() as u64, next_id, "every put is answered");
        }
    }
}
