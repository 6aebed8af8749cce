//! The follower's side of the push (`EntryHandler`): APPENDs are parked by their first index and
//! applied strictly in order, each followed by its commit index; COMPARE, TRUNCATE and COMMIT are
//! handled as they come; once a second, parked APPENDs already in the log are answered and the
//! lowest one stuck behind a gap for a second is failed so that the leader compares again.
//!
//! Java queues COMPARE/TRUNCATE/COMMIT in a 1 024-slot queue for its handler thread and answers
//! PUSH_REQUEST_IS_FULL when it is full; here they are handled on arrival, so that queue never
//! holds anything. Java's map of parked APPENDs has no bound; here it holds at most
//! [`MAX_PARKED`] requests (a leader keeps at most 1 000 in flight) and answers
//! PUSH_REQUEST_IS_FULL past that.
//!
//! Java's store checks that an APPEND or TRUNCATE comes from the leader we follow, in our term,
//! while we are a follower. Its COMPARE handler and its answer to parked APPENDs already in the
//! log check neither (differs from 0.3.1.2): a leader of an old term could then count a member
//! that already follows a newer leader, and commit an entry that the newer term overwrites. The
//! engine answers such a COMPARE INCONSISTENT_TERM / INCONSISTENT_LEADER (a Java leader treats any
//! code but SUCCESS and INCONSISTENT_STATE as an error and compares again after 500 ms), and such
//! a parked APPEND INCONSISTENT_STATE.

use std::collections::BTreeMap;

use crate::log::RaftLog;
use crate::protocol::{Base, Code, PeerMessage, PushEntryRequest, PushEntryResponse, PushType};

use super::outbox::Outbox;
use super::{Action, JavaQuirks, Role};

/// Parked APPENDs at most (Java: unbounded; its leaders keep at most 1 000 in flight).
pub(super) const MAX_PARKED: usize = 1_024;
/// A parked APPEND is "timed out" after this long (Java's `TimeoutFuture(1000)`).
const PARKED_TIMEOUT_MS: u64 = 1_000;
/// How often the parked APPENDs are looked over.
const ABNORMAL_CHECK_INTERVAL_MS: u64 = 1_000;

/// What the entry handler may touch.
pub(super) struct FollowerCtx<'a, L> {
    pub now: u64,
    pub log: &'a mut L,
    pub out: &'a mut Outbox,
    pub role: Role,
    pub term: i64,
    pub leader: Option<&'a str>,
    /// The 0.3.1.2 behaviours a test put back.
    pub quirks: JavaQuirks,
}

impl<L: RaftLog> FollowerCtx<'_, L> {
    /// Whether a request comes from the leader we follow, in our term.
    fn check_from_our_leader(&self, req: &PushEntryRequest) -> Result<(), Code> {
        if self.role != Role::Follower {
            Err(Code::NOT_FOLLOWER)
        } else if req.base.term != self.term {
            Err(Code::INCONSISTENT_TERM)
        } else if req.base.leader_id.as_deref() != self.leader || self.leader.is_none() {
            Err(Code::INCONSISTENT_LEADER)
        } else {
            Ok(())
        }
    }

    /// `buildResponse`: the request's group and term, its first index and count (not for
    /// COMMIT), and our log's begin and end now.
    fn answer(&mut self, token: u64, req: &PushEntryRequest, code: Code) {
        let commit = req.kind == PushType::Commit;
        let resp = PushEntryResponse {
            base: Base { group: req.base.group.clone(), term: req.base.term, code, ..Base::default() },
            index: if commit { None } else { Some(first_index(req)) },
            begin_index: self.log.begin_index(),
            end_index: self.log.end_index(),
            count: if commit { 0 } else { i32::try_from(req.entries.len()).unwrap_or(i32::MAX) },
        };
        self.out.reply(token, PeerMessage::PushResponse(resp));
    }

    /// A request refused before any handler (`DLedgerServer`'s catch): the request's base with the
    /// code and our leader, nothing else.
    fn reject(&mut self, token: u64, req: &PushEntryRequest, code: Code) {
        let resp = PushEntryResponse {
            base: Base { code, leader_id: self.leader.map(str::to_owned), ..req.base.clone() },
            index: None,
            begin_index: 0,
            end_index: 0,
            count: 0,
        };
        self.out.reply(token, PeerMessage::PushResponse(resp));
    }

    /// `updateCommittedIndex(term, index)` as the store does it: ignored for an older term, -1,
    /// an empty log, below the begin or the current value; clamped to our end, and here to what
    /// is known to be the leader's (`upto`).
    fn update_committed(&mut self, term: i64, index: i64, upto: i64) {
        let end = self.log.end_index();
        if index == -1 || end == -1 || term < self.term || index < self.log.begin_index() {
            return;
        }
        let index = index.min(end).min(upto);
        if index > self.log.committed_index() {
            self.log.update_committed(term, index);
        }
    }
}

fn first_index(req: &PushEntryRequest) -> i64 {
    req.entries.first().map_or(-1, |e| e.index)
}

fn last_index(req: &PushEntryRequest) -> i64 {
    req.entries.last().map_or(-1, |e| e.index)
}

#[derive(Debug)]
struct Parked {
    token: u64,
    req: PushEntryRequest,
    since: u64,
}

#[derive(Debug)]
pub(super) struct EntryHandler {
    parked: BTreeMap<i64, Parked>,
    last_check: u64,
    /// Our log up to here is known to be the current leader's (see the module doc).
    verified: i64,
    /// The (term, leader) `verified` is about.
    verified_for: Option<(i64, String)>,
    /// The lowest index at or below our commit index where a COMPARE found our entry differs
    /// from a leader's (`i64::MAX`: none): our committed prefix is not the group's from there
    /// (a power loss beyond what the group tolerates), so it is no longer kept against TRUNCATE.
    diverged: i64,
}

impl EntryHandler {
    pub fn new(now: u64) -> EntryHandler {
        EntryHandler { parked: BTreeMap::new(), last_check: now, verified: -1, verified_for: None, diverged: i64::MAX }
    }

    /// A new leader (or term, or a restart) knows nothing of our log yet.
    fn sync_leader<L: RaftLog>(&mut self, cx: &FollowerCtx<L>) {
        if cx.role != Role::Follower {
            return;
        }
        let current = (cx.term, cx.leader.unwrap_or_default());
        if self.verified_for.as_ref().map(|(t, l)| (*t, l.as_str())) != Some(current) {
            self.verified_for = Some((current.0, current.1.to_owned()));
            self.verified = -1;
        }
    }

    /// How far a commit index from the leader may reach in our log.
    fn commit_cap<L: RaftLog>(&self, cx: &FollowerCtx<L>) -> i64 {
        if !cx.quirks.append_without_prefix {
            self.verified
        } else {
            i64::MAX
        }
    }

    /// `handlePush`, after `DLedgerServer`'s checks.
    pub fn on_push<L: RaftLog>(&mut self, cx: &mut FollowerCtx<L>, token: u64, req: PushEntryRequest) {
        self.sync_leader(cx);
        match req.kind {
            PushType::Append => {
                let index = first_index(&req);
                if req.entries.is_empty() {
                    cx.reject(token, &req, Code::UNEXPECTED_ARGUMENT);
                } else if self.parked.contains_key(&index) {
                    cx.answer(token, &req, Code::REPEATED_PUSH);
                } else if cx.role == Role::Follower && last_index(&req) <= cx.log.end_index() {
                    // Already in our log (the leader missed our answer and resends). Java parks
                    // it and answers on its next once-a-second look, so a leader whose watermark
                    // lags catches up one entry a second; the answer is the same, only sooner.
                    let code = self.covered(cx, &req);
                    cx.answer(token, &req, code);
                } else if self.parked.len() >= MAX_PARKED {
                    cx.answer(token, &req, Code::PUSH_REQUEST_IS_FULL);
                } else {
                    self.parked.insert(index, Parked { token, req, since: cx.now });
                }
            }
            PushType::Commit => {
                if cx.role != Role::Follower {
                    cx.answer(token, &req, Code::NOT_FOLLOWER);
                } else {
                    let cap = self.commit_cap(cx);
                    cx.update_committed(req.base.term, req.commit_index, cap);
                    cx.answer(token, &req, Code::SUCCESS);
                }
            }
            PushType::Compare | PushType::Truncate => {
                if req.entries.is_empty() {
                    return cx.reject(token, &req, Code::UNEXPECTED_ARGUMENT);
                }
                // A new comparison makes every parked APPEND moot; Java drops them unanswered.
                for (_, p) in std::mem::take(&mut self.parked) {
                    cx.out.actions.push(Action::NoReply { token: p.token });
                }
                if cx.role != Role::Follower {
                    cx.answer(token, &req, Code::NOT_FOLLOWER);
                } else if req.kind == PushType::Compare {
                    self.compare(cx, token, &req);
                } else {
                    self.truncate(cx, token, &req);
                }
            }
        }
        self.apply(cx);
    }

    /// `handleDoCompare`: SUCCESS when our entry at that index equals the leader's (and then our
    /// log up to there is the leader's).
    fn compare<L: RaftLog>(&mut self, cx: &mut FollowerCtx<L>, token: u64, req: &PushEntryRequest) {
        if !cx.quirks.compare_ignores_term {
            if let Err(code) = cx.check_from_our_leader(req) {
                return cx.answer(token, req, code);
            }
        }
        let entry = &req.entries[0];
        let equal = cx.log.get(entry.index).as_ref() == Some(entry);
        if equal && cx.check_from_our_leader(req).is_ok() {
            self.verified = self.verified.max(entry.index);
        }
        if !equal && entry.index <= cx.log.committed_index() && cx.log.get(entry.index).is_some() {
            self.diverged = self.diverged.min(entry.index);
        }
        cx.answer(token, req, if equal { Code::SUCCESS } else { Code::INCONSISTENT_STATE });
    }

    /// `handleDoTruncate`: keep our entry if equal (else write the leader's), drop what follows.
    /// Entries we know to be the leader's are not dropped (differs from 0.3.1.2, see module doc):
    /// the leader may already count them. They are: what this leader verified, entries of the
    /// request's term (only its leader writes them, and with the prefix check before every APPEND
    /// all of our log up to such an entry is the leader's) and our committed prefix (every
    /// leader holds it), unless a COMPARE showed it differs. A TRUNCATE is not idempotent: a
    /// delayed or duplicated one that arrives after APPENDs (or after a restart forgot what was
    /// verified) would otherwise cut entries that are acknowledged, even committed.
    fn truncate<L: RaftLog>(&mut self, cx: &mut FollowerCtx<L>, token: u64, req: &PushEntryRequest) {
        let entry = &req.entries[0];
        if cx.check_from_our_leader(req).is_err() {
            return cx.answer(token, req, Code::INCONSISTENT_STATE);
        }
        let keep_to = if cx.quirks.truncate_below_acked {
            entry.index
        } else {
            let end = cx.log.end_index();
            let same_term = cx.log.get(end).filter(|e| e.term == req.base.term).map_or(-1, |_| end);
            let committed = cx.log.committed_index().min(self.diverged.saturating_sub(1));
            self.verified.max(same_term).max(committed).min(end).max(entry.index)
        };
        let result = if keep_to > entry.index && cx.log.get(entry.index).as_ref() == Some(entry) {
            // Cut after the last verified entry instead: it is the leader's too.
            match cx.log.get(keep_to) {
                Some(last) => cx.log.truncate(&last),
                None => cx.log.truncate(entry),
            }
        } else {
            cx.log.truncate(entry)
        };
        let end = cx.log.end_index();
        if end < self.diverged {
            self.diverged = i64::MAX;
        }
        if result.is_ok() && (end == entry.index || end == keep_to) {
            self.verified = end;
            cx.answer(token, req, Code::SUCCESS);
            let cap = self.commit_cap(cx);
            cx.update_committed(req.base.term, req.commit_index, cap);
        } else {
            self.verified = self.verified.min(end);
            cx.answer(token, req, Code::INCONSISTENT_STATE);
        }
    }

    /// The handler thread's loop, for what it does on its own: apply parked APPENDs in order and
    /// look them over once a second. Only a follower applies anything.
    pub fn run<L: RaftLog>(&mut self, cx: &mut FollowerCtx<L>) {
        self.sync_leader(cx);
        self.apply(cx);
        if cx.role == Role::Follower && cx.now.saturating_sub(self.last_check) >= ABNORMAL_CHECK_INTERVAL_MS {
            self.last_check = cx.now;
            self.check_parked(cx);
        }
    }

    /// Apply the parked APPEND at our end + 1 while there is one (`handleDoAppend`,
    /// `handleDoBatchAppend`). A failure is answered INCONSISTENT_STATE (what Java's catch-all
    /// answers for NOT_FOLLOWER, INCONSISTENT_TERM/LEADER/INDEX, DISK_FULL and a wrong pos).
    /// An APPEND continues the leader's log only if all of ours is known to be the leader's
    /// (differs from 0.3.1.2, see module doc); otherwise INCONSISTENT_STATE sends the leader to
    /// COMPARE first.
    fn apply<L: RaftLog>(&mut self, cx: &mut FollowerCtx<L>) {
        if cx.role != Role::Follower {
            return;
        }
        while let Some(p) = self.parked.remove(&(cx.log.end_index() + 1)) {
            let connected = cx.quirks.append_without_prefix || self.verified == cx.log.end_index();
            let mut ok = connected && cx.check_from_our_leader(&p.req).is_ok();
            for entry in &p.req.entries {
                if !ok {
                    break;
                }
                ok = cx.log.append_as_follower(entry).is_ok();
                if ok {
                    self.verified = entry.index;
                }
            }
            if ok {
                cx.answer(p.token, &p.req, Code::SUCCESS);
                let cap = self.commit_cap(cx);
                cx.update_committed(p.req.base.term, p.req.commit_index, cap);
            } else {
                cx.answer(p.token, &p.req, Code::INCONSISTENT_STATE);
            }
        }
    }

    /// `checkAppendFuture`: answer parked APPENDs our log already covers (SUCCESS if equal: the
    /// leader's answer was lost), then fail the lowest one parked for a second behind a gap.
    /// Java leaves the failed one parked, so later passes pick the same one again and fail
    /// nothing new; here it is dropped, so a lost answer cannot stall the leader for good.
    fn check_parked<L: RaftLog>(&mut self, cx: &mut FollowerCtx<L>) {
        let end = cx.log.end_index();
        let mut stuck = None;
        let firsts: Vec<i64> = self.parked.keys().copied().collect();
        for first in firsts {
            let Some(p) = self.parked.get(&first) else { continue };
            if last_index(&p.req) <= end {
                if let Some(p) = self.parked.remove(&first) {
                    let code = self.covered(cx, &p.req);
                    cx.answer(p.token, &p.req, code);
                }
                continue;
            }
            if first == end + 1 {
                return;
            }
            if stuck.is_none() && cx.now.saturating_sub(p.since) >= PARKED_TIMEOUT_MS {
                stuck = Some(first);
            }
        }
        if let Some(p) = stuck.and_then(|first| self.parked.remove(&first)) {
            cx.answer(p.token, &p.req, Code::INCONSISTENT_STATE);
        }
    }

    /// The answer to an APPEND whose entries our log already covers: SUCCESS if they are the
    /// ones we hold (and, unlike 0.3.1.2, it comes from the leader we follow in our term).
    fn covered<L: RaftLog>(&mut self, cx: &FollowerCtx<L>, req: &PushEntryRequest) -> Code {
        let from_leader = cx.check_from_our_leader(req).is_ok();
        let held = req.entries.iter().all(|e| cx.log.get(e.index).as_ref() == Some(e));
        if held && from_leader {
            // Equal entries have equal prefixes: all of our log up to there is the leader's.
            self.verified = self.verified.max(last_index(req));
        }
        if held && (from_leader || cx.quirks.compare_ignores_term) {
            Code::SUCCESS
        } else {
            Code::INCONSISTENT_STATE
        }
    }

    pub fn wake(&self, role: Role) -> Option<u64> {
        if role == Role::Follower && !self.parked.is_empty() {
            Some(self.last_check + ABNORMAL_CHECK_INTERVAL_MS)
        } else {
            None
        }
    }

    pub fn parked(&self) -> usize {
        self.parked.len()
    }
}
