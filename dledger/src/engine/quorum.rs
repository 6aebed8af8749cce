//! Acknowledgements and commit on the leader (`QuorumAckChecker` and the pending append
//! futures of `DLedgerEntryPusher`).
//!
//! Each follower has a watermark per term: the last index it is known to hold as the leader does
//! (raised by answered APPENDs and by a COMPARE or TRUNCATE that settled its log); the leader's
//! own is its last index. The quorum index is the `n/2`-th highest.
//!
//! **Commit rule (differs from 0.3.1.2).** Java commits the quorum index whatever the term of the
//! entry there. That is Raft's figure-8 bug: a new leader that pushes an entry of an earlier term
//! to a majority commits it, although a candidate with a later last term can still win and
//! overwrite it. We commit the quorum index only when its entry is of the current term (Raft
//! §5.4.2), or else the highest index that *every* member holds (which no later leader can lack:
//! each voter holds it, and so does every candidate). Proposals are answered only for committed
//! entries. Nothing on the wire changes: followers learn the same kind of commit index, only
//! sometimes later. Consequence for the broker: a new leader whose log ends in entries of earlier
//! terms commits them only after an entry of its own term reaches a quorum (or all members ack);
//! RocketMQ's role-change handler waits for `ledgerEnd == committedIndex` before taking writes, so
//! the broker must append an entry of its own when it wins with such a tail and a member is down.

use std::collections::BTreeMap;

use crate::log::RaftLog;
use crate::protocol::{AppendEntryResponse, Base, Code};

use super::outbox::Outbox;
use super::settings::Settings;
use super::Action;

#[derive(Debug)]
pub(super) struct Quorum {
    /// The term of the watermarks (Java keeps one map per term and drops the others).
    term: i64,
    /// The first index of the current term in our log: entries from here on are ours to commit
    /// by counting.
    term_start: i64,
    watermarks: BTreeMap<String, i64>,
    /// Proposals waiting for their (last) entry: index -> waiter, all of `pending_term`.
    pending: BTreeMap<i64, Waiter>,
    pending_term: i64,
}

#[derive(Debug)]
struct Waiter {
    token: u64,
    pos: i64,
    positions: Vec<i64>,
    created: u64,
    /// Answered WAIT_QUORUM_ACK_TIMEOUT, but kept: Java leaves a timed-out future in its map, so
    /// it still counts towards `maxPendingRequestsNum` until committed or the term changes.
    timed_out: bool,
}

impl Quorum {
    pub fn new<'a>(others: impl Iterator<Item = &'a String>) -> Quorum {
        Quorum { term: -1, term_start: 0, watermarks: others.map(|p| (p.clone(), -1)).collect(), pending: BTreeMap::new(), pending_term: -1 }
    }

    pub fn term(&self) -> i64 {
        self.term
    }

    #[cfg(test)]
    pub fn term_start(&self) -> i64 {
        self.term_start
    }

    /// `getPeerWaterMark(term, peer)`: -1 for a term we do not count.
    pub fn watermark(&self, term: i64, peer: &str) -> i64 {
        if term != self.term {
            return -1;
        }
        self.watermarks.get(peer).copied().unwrap_or(-1)
    }

    /// `updatePeerWaterMark`: watermarks only rise.
    pub fn update_watermark(&mut self, term: i64, peer: &str, index: i64) {
        if term != self.term {
            return;
        }
        if let Some(w) = self.watermarks.get_mut(peer) {
            *w = (*w).max(index);
        }
    }

    /// On election: fresh watermarks for a new term (a re-election in the same term keeps them,
    /// as Java's per-term map does), and where this term's entries start in our log.
    pub fn start_term<L: RaftLog>(&mut self, term: i64, log: &L) {
        if self.term != term {
            self.term = term;
            self.watermarks.values_mut().for_each(|w| *w = -1);
        }
        // Entries of this term may already be there after a restart within the term.
        let mut start = log.end_index() + 1;
        while start > log.begin_index().max(0) && log.get(start - 1).is_some_and(|e| e.term == term) {
            start -= 1;
        }
        self.term_start = start;
    }

    /// `isPendingFull`: more than `maxPendingRequestsNum` waiting in this term.
    pub fn pending_full(&self, term: i64, max: usize) -> bool {
        self.pending_term == term && self.pending.len() > max
    }

    /// `waitAck`.
    pub fn wait_ack(&mut self, term: i64, index: i64, token: u64, pos: i64, positions: Vec<i64>, now: u64) {
        debug_assert_eq!(term, self.pending_term, "term_changed runs before a proposal waits");
        self.pending.insert(index, Waiter { token, pos, positions, created: now, timed_out: false });
    }

    /// The term moved on: whatever waits in the old one is answered TERM_CHANGED (Java does it
    /// only once this node leads again; a deposed leader's waiters would otherwise wait for ever).
    pub fn term_changed(&mut self, term: i64, leader_id: Option<&str>, s: &Settings, out: &mut Outbox) {
        if self.pending_term == term {
            return;
        }
        for (index, w) in std::mem::take(&mut self.pending) {
            if !w.timed_out {
                out.actions.push(Action::Answer {
                    token: w.token,
                    response: AppendEntryResponse {
                        base: Base { group: s.group.clone(), leader_id: leader_id.map(str::to_owned), code: Code::TERM_CHANGED, ..Base::default() },
                        index,
                        pos: -1,
                    },
                    positions: Vec::new(),
                });
            }
        }
        self.pending_term = term;
    }

    /// `quorumIndex = sorted[n/2]` over the watermarks, highest first; our own is our last index.
    pub fn quorum_index<L: RaftLog>(&self, log: &L) -> (i64, i64) {
        let mut marks: Vec<i64> = self.watermarks.values().copied().collect();
        marks.push(log.end_index());
        marks.sort_unstable_by(|a, b| b.cmp(a));
        (marks[marks.len() / 2], marks[marks.len() - 1])
    }

    /// The quorum checker's pass: raise the commit index (see the module doc for the rule) and
    /// answer the proposals it covers.
    pub fn advance_commit<L: RaftLog>(&mut self, log: &mut L, s: &Settings, by_counting: bool, out: &mut Outbox) {
        let (quorum_index, all_hold) = self.quorum_index(log);
        let target = if by_counting || quorum_index >= self.term_start { quorum_index } else { all_hold };
        if target >= 0 && target > log.committed_index() {
            log.update_committed(self.term, target);
        }
        let committed = log.committed_index();
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > committed {
                break;
            }
            let (index, w) = entry.remove_entry();
            if w.timed_out {
                continue;
            }
            out.actions.push(Self::answer(self.pending_term, s, w.token, Code::SUCCESS, index, w.pos, w.positions));
        }
    }

    /// `checkResponseFuturesTimeout`: WAIT_QUORUM_ACK_TIMEOUT after `maxWaitAckTimeMs`. Java
    /// looks only at the run of waiters right after the quorum index, so a batch (whose inner
    /// entries have no waiter) never times out there, and only while leading; here every waiter
    /// times out, leader or not.
    pub fn time_out(&mut self, now: u64, s: &Settings, out: &mut Outbox) {
        for (&index, w) in self.pending.iter_mut() {
            if w.timed_out {
                continue;
            }
            if now.saturating_sub(w.created) < s.max_wait_ack_ms {
                break; // created in index order
            }
            w.timed_out = true;
            out.actions.push(Self::answer(self.pending_term, s, w.token, Code::WAIT_QUORUM_ACK_TIMEOUT, index, -1, Vec::new()));
        }
    }

    /// The answer to a proposal of ours, as the leader of `term` (the one it waited in).
    fn answer(term: i64, s: &Settings, token: u64, code: Code, index: i64, pos: i64, positions: Vec<i64>) -> Action {
        Action::Answer {
            token,
            response: AppendEntryResponse {
                base: Base { group: s.group.clone(), term, leader_id: Some(s.self_id.clone()), code, ..Base::default() },
                index,
                pos,
            },
            positions,
        }
    }

    pub fn wake(&self, s: &Settings) -> Option<u64> {
        self.pending.values().find(|w| !w.timed_out).map(|w| w.created + s.max_wait_ack_ms)
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
}
