//! The leader's push to one follower (`EntryDispatcher`): COMPARE until the logs agree, TRUNCATE
//! the follower's tail, then APPEND from there (one entry per request, or batches of at least
//! `maxBatchPushSize` bytes), a COMMIT when idle, resends after `maxPushTimeOutMs`, and the
//! throttle for a follower far behind.
//!
//! Java runs one thread per follower that loops every millisecond and blocks up to 3 s on each
//! COMPARE and TRUNCATE. Here the dispatcher is a struct: [`Dispatcher::run`] does what one pass
//! of the loop would, and an answer to a COMPARE or TRUNCATE continues where the blocked thread
//! would have.

use std::collections::BTreeMap;

use crate::entry::Entry;
use crate::log::RaftLog;
use crate::protocol::{Base, Code, PeerMessage, PushEntryRequest, PushEntryResponse, PushType};

use super::clock::elapsed;
use super::outbox::{Outbox, PushSent, Sent};
use super::quorum::Quorum;
use super::settings::Settings;
use super::{JavaQuirks, SendFailed};

/// Java's `maxPendingSize`: APPEND requests in flight per follower (fixed in 0.3.1.2).
pub(super) const MAX_IN_FLIGHT: usize = 1_000;
/// After an error the thread sleeps this long and starts again from COMPARE.
const ERROR_PAUSE_MS: u64 = 500;
/// A COMMIT goes out when nothing was pushed for longer than this.
const COMMIT_PUSH_INTERVAL_MS: u64 = 1_000;
/// How often acknowledged entries are swept out of the in-flight table.
const LEAK_CHECK_INTERVAL_MS: u64 = 1_000;

/// What a dispatcher may touch: the leader's log, the outbox and the watermarks.
pub(super) struct PushCtx<'a, L> {
    pub now: u64,
    pub s: &'a Settings,
    pub log: &'a L,
    pub out: &'a mut Outbox,
    pub q: &'a mut Quorum,
    pub quirks: JavaQuirks,
}

/// `utils.Quota`: bytes sampled within the current second.
#[derive(Debug, Default)]
struct Quota {
    second: u64,
    bytes: i64,
}

impl Quota {
    fn sample(&mut self, now: u64, bytes: i64) {
        if self.second != now / 1000 {
            self.second = now / 1000;
            self.bytes = 0;
        }
        self.bytes += bytes;
    }

    fn exhausted(&self, now: u64, max: i64) -> bool {
        self.second == now / 1000 && self.bytes >= max
    }
}

#[derive(Debug)]
pub(super) struct Dispatcher {
    pub peer: String,
    pub state: PushType,
    /// The term this dispatcher last synchronised with (Java's `term`/`leaderId` pair: while we
    /// lead, the leader is always us).
    term: Option<i64>,
    compare_index: i64,
    write_index: i64,
    /// The COMPARE or TRUNCATE Java's thread would be blocked on.
    waiting: Option<u64>,
    /// A COMPARE sent at the follower's watermark, to check it still holds what it acknowledged.
    probing: Option<i64>,
    /// That check failed in this comparison: the follower lost entries (power loss).
    probe_failed: bool,
    sleep_until: u64,
    /// Single APPENDs in flight: index -> when sent.
    pending: BTreeMap<i64, u64>,
    /// Batch APPENDs in flight: first index -> (when sent, count).
    batch_pending: BTreeMap<i64, (u64, i32)>,
    /// The batch being filled.
    batch: Vec<Entry>,
    batch_bytes: usize,
    last_push_commit: Option<u64>,
    last_check_leak: u64,
    quota: Quota,
}

/// How a pass of the APPEND loop ended for one index.
enum Pushed {
    Sent,
    /// Moved to COMPARE (the index is below the log's begin).
    Skipped,
    /// Quota spent or an error: stop the pass without moving on.
    Stopped,
}

impl Dispatcher {
    pub fn new(peer: &str, now: u64) -> Dispatcher {
        Dispatcher {
            peer: peer.to_owned(),
            state: PushType::Compare,
            term: None,
            compare_index: -1,
            write_index: -1,
            waiting: None,
            probing: None,
            probe_failed: false,
            sleep_until: 0,
            pending: BTreeMap::new(),
            batch_pending: BTreeMap::new(),
            batch: Vec::new(),
            batch_bytes: 0,
            last_push_commit: None,
            last_check_leak: now,
            quota: Quota::default(),
        }
    }

    /// `checkAndFreshState`: a new term (or a first election) starts over from COMPARE. A
    /// COMPARE or TRUNCATE of the old term is forgotten (Java's blocked thread would act on it
    /// with the new term's values).
    ///
    /// The comparison restarts from our last entry (differs from 0.3.1.2): Java's
    /// `changeState(COMPARE)` keeps `compareIndex` unless it leaves APPEND, so a dispatcher that
    /// was comparing when an earlier leadership ended resumes at that old index, finds the logs
    /// equal there and truncates everything after it on the follower, committed entries included.
    pub fn refresh<L: RaftLog>(&mut self, cx: &mut PushCtx<L>, term: i64) {
        if self.term != Some(term) {
            self.term = Some(term);
            self.waiting = None;
            self.change_state(cx, -1, PushType::Compare);
            if !cx.quirks.keep_compare_index {
                self.compare_index = -1;
            }
        }
    }

    fn term(&self) -> i64 {
        self.term.unwrap_or(-1)
    }

    /// One pass of the dispatcher's loop (`doWork`); only called while we lead.
    pub fn run<L: RaftLog>(&mut self, cx: &mut PushCtx<L>) {
        if cx.now < self.sleep_until {
            return;
        }
        match self.state {
            PushType::Append if cx.s.batch_push => self.do_batch_append(cx),
            PushType::Append => self.do_append(cx),
            _ => self.do_compare(cx),
        }
    }

    /// `changeState`.
    fn change_state<L: RaftLog>(&mut self, cx: &mut PushCtx<L>, index: i64, target: PushType) {
        if target != PushType::Compare || self.state == PushType::Append {
            self.probing = None;
            self.probe_failed = false;
        }
        match target {
            PushType::Append => {
                self.compare_index = -1;
                cx.q.update_watermark(self.term(), &self.peer, index);
                self.write_index = index + 1;
                self.batch.clear();
                self.batch_bytes = 0;
            }
            PushType::Compare => {
                // Only leaving APPEND forgets the position and what was in flight.
                if self.state == PushType::Append {
                    self.compare_index = -1;
                    self.pending.clear();
                    self.batch_pending.clear();
                }
            }
            PushType::Truncate => self.compare_index = -1,
            PushType::Commit => {}
        }
        self.state = target;
    }

    /// The `catch` of `doWork`: back to COMPARE after a pause. Java then compares again at the
    /// same index; here the comparison starts over from our last entry (differs from 0.3.1.2): a
    /// follower that was away may come back holding more of our log, and a match found below it
    /// would truncate entries it holds, committed ones included.
    fn fail<L: RaftLog>(&mut self, cx: &mut PushCtx<L>) {
        self.waiting = None;
        self.change_state(cx, -1, PushType::Compare);
        if !cx.quirks.keep_compare_index {
            self.compare_index = -1;
        }
        self.sleep_until = cx.now + ERROR_PAUSE_MS;
    }

    fn push<L: RaftLog>(&mut self, cx: &mut PushCtx<L>, kind: PushType, entries: Vec<Entry>, batch: bool) -> u64 {
        let first = entries.first().map_or(-1, |e| e.index);
        let count = i32::try_from(entries.len()).unwrap_or(i32::MAX);
        let req = PushEntryRequest {
            base: Base {
                group: cx.s.group.clone(),
                remote_id: Some(self.peer.clone()),
                local_id: Some(cx.s.self_id.clone()),
                leader_id: Some(cx.s.self_id.clone()),
                term: self.term(),
                code: Code::SUCCESS,
            },
            commit_index: cx.log.committed_index(),
            kind,
            entries,
            batch,
        };
        let sent = PushSent { peer: self.peer.clone(), term: self.term(), kind, batch, first, count };
        cx.out.send(cx.now, &self.peer, PeerMessage::Push(req), Sent::Push(sent))
    }

    /// `doCompare`: send the leader's entry at `compareIndex` (first the leader's last entry).
    fn do_compare<L: RaftLog>(&mut self, cx: &mut PushCtx<L>) {
        if self.waiting.is_some() || !matches!(self.state, PushType::Compare | PushType::Truncate) {
            return;
        }
        let (begin, end) = (cx.log.begin_index(), cx.log.end_index());
        if self.compare_index == -1 && end == -1 {
            return; // nothing to compare until the leader has an entry
        }
        if self.compare_index == -1 || self.compare_index > end || self.compare_index < begin {
            self.compare_index = end;
        }
        let Some(entry) = cx.log.get(self.compare_index) else { return self.fail(cx) };
        self.waiting = Some(self.push(cx, PushType::Compare, vec![entry], false));
    }

    /// The rest of `doCompare` once the follower answered.
    fn on_compare<L: RaftLog>(&mut self, cx: &mut PushCtx<L>, r: Result<PushEntryResponse, SendFailed>) {
        let Ok(r) = r else { return self.fail(cx) };
        if r.base.code != Code::SUCCESS && r.base.code != Code::INCONSISTENT_STATE {
            return self.fail(cx);
        }
        let (begin, end) = (cx.log.begin_index(), cx.log.end_index());
        let probed = self.probing.take() == Some(self.compare_index);
        let mut truncate_index = -1;
        if r.base.code == Code::SUCCESS {
            if self.compare_index == r.end_index {
                // Equal here and nothing after: append from the next one.
                self.change_state(cx, self.compare_index, PushType::Append);
                return self.run(cx);
            }
            // Equal here, but the follower has more. Java truncates here; but if the follower
            // acknowledged more of ours in this term (an APPEND landed while this COMPARE was on
            // its way), cutting here would drop entries the quorum already counts (differs from
            // 0.3.1.2). Check that it still holds ours at its watermark and cut there instead.
            let acked = cx.q.watermark(self.term(), &self.peer);
            let probe = !self.probe_failed && !cx.quirks.truncate_below_acked;
            if probe && acked > self.compare_index && acked <= r.end_index && acked <= end {
                self.compare_index = acked;
                self.probing = Some(acked);
                return self.do_compare(cx);
            }
            truncate_index = self.compare_index;
        } else if probed {
            // It no longer holds what it acknowledged: walk down as Java does.
            self.probe_failed = true;
            self.compare_index -= 1;
        } else if r.end_index < begin || r.begin_index > end || self.compare_index < r.begin_index {
            truncate_index = begin; // no overlap: start the follower over from our first entry
        } else if self.compare_index > r.end_index {
            self.compare_index = r.end_index;
        } else {
            self.compare_index -= 1;
        }
        if self.compare_index < begin {
            truncate_index = begin;
        }
        if truncate_index != -1 {
            self.change_state(cx, truncate_index, PushType::Truncate);
            let Some(entry) = cx.log.get(truncate_index) else { return self.fail(cx) };
            self.waiting = Some(self.push(cx, PushType::Truncate, vec![entry], false));
        } else {
            self.do_compare(cx);
        }
    }

    /// `doTruncate`'s answer: only SUCCESS moves on, to APPEND after the truncated entry.
    fn on_truncate<L: RaftLog>(&mut self, cx: &mut PushCtx<L>, index: i64, r: Result<PushEntryResponse, SendFailed>) {
        match r {
            Ok(r) if r.base.code == Code::SUCCESS => {
                self.last_push_commit = Some(cx.now);
                self.change_state(cx, index, PushType::Append);
                self.run(cx);
            }
            _ => self.fail(cx),
        }
    }

    /// The answer to any push this dispatcher sent. `current` says whether it belongs to the term
    /// we lead now; answers of other terms only clear their in-flight entry.
    pub fn on_response<L: RaftLog>(&mut self, cx: &mut PushCtx<L>, token: u64, sent: &PushSent, r: Result<PushEntryResponse, SendFailed>, current: bool) {
        let current = current && self.term == Some(sent.term);
        match sent.kind {
            PushType::Compare | PushType::Truncate => {
                if self.waiting != Some(token) {
                    return;
                }
                self.waiting = None;
                if !current {
                    // Answered while we did not lead: compare again if we lead this term again.
                    self.change_state(cx, -1, PushType::Compare);
                    return;
                }
                if sent.kind == PushType::Compare {
                    self.on_compare(cx, r);
                } else {
                    self.on_truncate(cx, sent.first, r);
                }
            }
            PushType::Append => {
                let Ok(r) = r else { return };
                if r.base.code == Code::SUCCESS {
                    let acked = if sent.batch {
                        self.batch_pending.remove(&sent.first);
                        if sent.count == 0 {
                            sent.first
                        } else {
                            sent.first + i64::from(sent.count) - 1
                        }
                    } else {
                        self.pending.remove(&sent.first);
                        sent.first
                    };
                    // Java raises the watermark of the answer's term whatever our role: a leader
                    // re-elected in the same term keeps it (the quorum ignores other terms).
                    cx.q.update_watermark(sent.term, &self.peer, acked);
                } else if r.base.code == Code::INCONSISTENT_STATE && current {
                    self.change_state(cx, -1, PushType::Compare);
                }
            }
            // Answers to COMMIT are ignored.
            PushType::Commit => {}
        }
    }

    /// `doAppend`: push every entry up to our end, at most [`MAX_IN_FLIGHT`] unanswered.
    fn do_append<L: RaftLog>(&mut self, cx: &mut PushCtx<L>) {
        while self.state == PushType::Append {
            if self.write_index > cx.log.end_index() {
                self.do_commit(cx);
                self.resend_single(cx);
                return;
            }
            if self.pending.len() >= MAX_IN_FLIGHT || elapsed(cx.now, Some(self.last_check_leak)) > LEAK_CHECK_INTERVAL_MS {
                let wm = cx.q.watermark(self.term(), &self.peer);
                self.pending.retain(|&i, _| i >= wm);
                self.last_check_leak = cx.now;
            }
            if self.pending.len() >= MAX_IN_FLIGHT {
                self.resend_single(cx);
                return;
            }
            match self.append_one(cx, self.write_index) {
                Pushed::Sent | Pushed::Skipped => self.write_index += 1,
                Pushed::Stopped => return,
            }
        }
    }

    /// `doAppendInner`.
    fn append_one<L: RaftLog>(&mut self, cx: &mut PushCtx<L>, index: i64) -> Pushed {
        let Some(entry) = cx.log.get(index) else {
            if index < cx.log.begin_index() {
                // Our begin moved past it: find the follower's place again.
                self.change_state(cx, -1, PushType::Compare);
                return Pushed::Skipped;
            }
            self.fail(cx);
            return Pushed::Stopped;
        };
        if self.throttled(cx, &entry) {
            return Pushed::Stopped;
        }
        self.push(cx, PushType::Append, vec![entry], false);
        self.pending.insert(index, cx.now);
        self.last_push_commit = Some(cx.now);
        Pushed::Sent
    }

    /// `checkQuotaAndWait`: a follower more than [`MAX_IN_FLIGHT`] entries and
    /// `peerPushThrottlePoint` bytes behind gets at most `peerPushQuota` bytes a second. Java
    /// samples the entry and then sleeps; here a spent second stops the pass until the next one,
    /// before the entry is sent.
    fn throttled<L: RaftLog>(&mut self, cx: &mut PushCtx<L>, entry: &Entry) -> bool {
        let end = cx.log.end_index();
        if end - entry.index <= MAX_IN_FLIGHT as i64 {
            return false;
        }
        let wrote = cx.log.get(end).map_or(0, |e| e.pos + e.size() as i64);
        if wrote - entry.pos < cx.s.push_throttle_point_bytes {
            return false;
        }
        if self.quota.exhausted(cx.now, cx.s.push_quota_bytes_per_s) {
            self.sleep_until = (cx.now / 1000 + 1) * 1000;
            return true;
        }
        self.quota.sample(cx.now, entry.size() as i64);
        false
    }

    /// `doCommit`: tell an idle follower the commit index.
    fn do_commit<L: RaftLog>(&mut self, cx: &mut PushCtx<L>) {
        if elapsed(cx.now, self.last_push_commit) > COMMIT_PUSH_INTERVAL_MS {
            self.push(cx, PushType::Commit, Vec::new(), false);
            self.last_push_commit = Some(cx.now);
        }
    }

    /// `doCheckAppendResponse`: resend the entry after the watermark if unanswered too long.
    fn resend_single<L: RaftLog>(&mut self, cx: &mut PushCtx<L>) {
        let next = cx.q.watermark(self.term(), &self.peer) + 1;
        if let Some(&sent) = self.pending.get(&next) {
            if cx.now.saturating_sub(sent) > cx.s.max_push_timeout_ms {
                self.append_one(cx, next);
            }
        }
    }

    /// `doBatchAppend`.
    fn do_batch_append<L: RaftLog>(&mut self, cx: &mut PushCtx<L>) {
        while self.state == PushType::Append {
            if self.write_index > cx.log.end_index() {
                if !self.batch.is_empty() {
                    self.send_batch(cx);
                }
                self.do_commit(cx);
                self.resend_batch(cx);
                return;
            }
            if self.batch_pending.len() >= MAX_IN_FLIGHT || elapsed(cx.now, Some(self.last_check_leak)) > LEAK_CHECK_INTERVAL_MS {
                let wm = cx.q.watermark(self.term(), &self.peer);
                self.batch_pending.retain(|&first, &mut (_, count)| first + i64::from(count) - 1 > wm);
                self.last_check_leak = cx.now;
            }
            if self.batch_pending.len() >= MAX_IN_FLIGHT {
                self.resend_batch(cx);
                return;
            }
            let Some(entry) = cx.log.get(self.write_index) else {
                if self.write_index < cx.log.begin_index() {
                    self.change_state(cx, -1, PushType::Compare);
                    self.write_index += 1;
                } else {
                    self.fail(cx);
                }
                return;
            };
            self.batch_bytes += entry.size();
            self.batch.push(entry);
            if self.batch_bytes >= cx.s.max_batch_push_bytes {
                self.send_batch(cx);
            }
            self.write_index += 1;
        }
    }

    fn send_batch<L: RaftLog>(&mut self, cx: &mut PushCtx<L>) {
        let entries = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        self.send_batch_of(cx, entries);
    }

    fn send_batch_of<L: RaftLog>(&mut self, cx: &mut PushCtx<L>, entries: Vec<Entry>) {
        let Some(first) = entries.first().map(|e| e.index) else { return };
        let count = i32::try_from(entries.len()).unwrap_or(i32::MAX);
        self.push(cx, PushType::Append, entries, true);
        self.batch_pending.insert(first, (cx.now, count));
        self.last_push_commit = Some(cx.now);
    }

    /// `doCheckBatchAppendResponse`: resend the batch after the watermark if unanswered too long.
    /// Java rebuilds it in the batch being filled and so drops entries gathered but not sent yet
    /// (they then reach the follower only after a COMPARE); here the resend is its own request.
    fn resend_batch<L: RaftLog>(&mut self, cx: &mut PushCtx<L>) {
        let first = cx.q.watermark(self.term(), &self.peer) + 1;
        let Some(&(sent, count)) = self.batch_pending.get(&first) else { return };
        if cx.now.saturating_sub(sent) <= cx.s.max_push_timeout_ms {
            return;
        }
        let mut entries = Vec::with_capacity(count.max(0) as usize);
        for index in first..first + i64::from(count) {
            match cx.log.get(index) {
                Some(e) => entries.push(e),
                None => return self.fail(cx),
            }
        }
        self.send_batch_of(cx, entries);
    }

    pub fn debug(&self, q: &Quorum) -> String {
        format!(
            "{} {:?} cmp {} write {} wm {} waiting {:?} sleep {} pending {:?}",
            self.peer,
            self.state,
            self.compare_index,
            self.write_index,
            q.watermark(self.term(), &self.peer),
            self.waiting,
            self.sleep_until,
            self.pending.keys().take(5).collect::<Vec<_>>()
        )
    }

    /// When this dispatcher next has something to do on its own (answers wake it anyway).
    pub fn wake<L: RaftLog>(&self, now: u64, s: &Settings, log: &L, q: &Quorum) -> Option<u64> {
        if self.sleep_until > now {
            return Some(self.sleep_until);
        }
        match self.state {
            PushType::Append => {
                let wm = q.watermark(self.term(), &self.peer);
                let resend = if s.batch_push { self.batch_pending.get(&(wm + 1)).map(|&(t, _)| t) } else { self.pending.get(&(wm + 1)).copied() }
                    .map(|t| t + s.max_push_timeout_ms + 1);
                let in_flight = if s.batch_push { self.batch_pending.len() } else { self.pending.len() };
                let other = if self.write_index > log.end_index() {
                    Some(self.last_push_commit.map_or(now, |t| t + COMMIT_PUSH_INTERVAL_MS + 1))
                } else if in_flight >= MAX_IN_FLIGHT {
                    Some(self.last_check_leak + LEAK_CHECK_INTERVAL_MS + 1)
                } else {
                    Some(now)
                };
                [resend, other].into_iter().flatten().min()
            }
            _ if self.waiting.is_some() => None,
            _ if self.compare_index == -1 && log.end_index() == -1 => None,
            _ => Some(now),
        }
    }
}
