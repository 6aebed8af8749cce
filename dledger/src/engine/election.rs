//! Leader election (`DLedgerLeaderElector`): the vote rules in Java's order, candidate rounds,
//! heartbeats both ways, and the timeouts that turn a follower or a leader back into a candidate.
//!
//! Java runs this on its `StateMaintainer` thread, which blocks for a whole vote round (up to
//! 2 s + rand(maxVoteIntervalMs)) or heartbeat round (up to `heartBeatTimeIntervalMs`) and sleeps
//! 10 ms between passes. Here a round is a struct that answers fill in; it ends when Java's latch
//! would open or at its deadline, and the next pass waits 10 ms.

use std::collections::BTreeMap;

use crate::log::{RaftLog, TermStore};
use crate::protocol::{Base, Code, HeartBeatRequest, HeartBeatResponse, PeerMessage, VoteRequest, VoteResponse, VoteResult};

use super::clock::elapsed;
use super::outbox::Sent;
use super::{Engine, Role, SendFailed};

/// `VoteResponse.ParseResult`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ParseResult {
    WaitToRevote,
    RevoteImmediately,
    Passed,
    WaitToVoteNext,
}

/// Java's fixed part of the time a candidate waits for votes.
const VOTE_WAIT_BASE_MS: u64 = 2_000;
/// The state maintainer's sleep between passes.
pub(super) const MAINTAIN_PAUSE_MS: u64 = 10;

#[derive(Debug)]
pub(super) struct Election {
    pub last_leader_heartbeat: u64,
    /// `lastSendHeartBeatTime`; `None` is Java's -1 (send at once).
    pub last_send_heartbeat: Option<u64>,
    /// `lastSuccHeartBeatTime`: never reset on election, as in Java.
    pub last_succ_heartbeat: Option<u64>,
    pub next_vote_at: u64,
    pub need_increase_term: bool,
    pub last_parse: ParseResult,
    pub vote_round: Option<VoteRound>,
    pub heartbeat_round: Option<HeartBeatRound>,
    rounds: u64,
    resume_at: u64,
    /// `peersLiveTable`: who answered the last heartbeat (cleared on election).
    pub peers_live: BTreeMap<String, bool>,
}

impl Election {
    pub fn new(now: u64) -> Election {
        Election {
            last_leader_heartbeat: now,
            last_send_heartbeat: None,
            last_succ_heartbeat: None,
            next_vote_at: 0,
            need_increase_term: false,
            last_parse: ParseResult::WaitToRevote,
            vote_round: None,
            heartbeat_round: None,
            rounds: 0,
            resume_at: 0,
            peers_live: BTreeMap::new(),
        }
    }
}

/// The counters of one round of votes (`maintainAsCandidate`).
#[derive(Debug)]
pub(super) struct VoteRound {
    id: u64,
    term: i64,
    deadline: u64,
    all: usize,
    valid: usize,
    accepted: usize,
    not_ready: usize,
    bigger_ledger: usize,
    already_has_leader: bool,
    known_max_term: i64,
}

/// The counters of one round of heartbeats (`sendHeartbeats`); this node counts as one success.
#[derive(Debug)]
pub(super) struct HeartBeatRound {
    id: u64,
    term: i64,
    deadline: u64,
    all: usize,
    succ: usize,
    not_ready: usize,
    max_term: i64,
    inconsistent_leader: bool,
}

impl<L: RaftLog, T: TermStore> Engine<L, T> {
    pub(super) fn on_vote_request(&mut self, now: u64, token: u64, req: VoteRequest) {
        let resp = match self.precheck(&req.base) {
            Some(code) => VoteResponse { base: self.error_base(&req.base, code), vote_result: VoteResult::Unknown },
            None => self.handle_vote(now, &req, false),
        };
        self.out.reply(token, PeerMessage::VoteResponse(resp));
    }

    /// `handleVote`: the rules in 0.3.1.2's order. The answer copies the request's base and
    /// carries our term (our ledger end term for REJECT_TERM_SMALL_THAN_LEDGER).
    pub(super) fn handle_vote(&mut self, now: u64, req: &VoteRequest, is_self: bool) -> VoteResponse {
        let answer = |term: i64, result: VoteResult| VoteResponse { base: Base { term, ..req.base.clone() }, vote_result: result };
        let term = self.m.term;
        // 1. The candidate must be a member, and not us unless we vote for ourselves.
        let Some(candidate) = req.base.leader_id.as_deref().filter(|c| self.s.is_peer(Some(c))) else {
            return answer(term, VoteResult::RejectUnknownLeader);
        };
        if !is_self && candidate == self.s.self_id {
            return answer(term, VoteResult::RejectUnexpectedLeader);
        }
        // 2. Its log must be at least as up to date as ours.
        let (end_index, end_term) = (self.log.end_index(), self.log.end_term());
        if req.ledger_end_term < end_term {
            return answer(term, VoteResult::RejectExpiredLedgerTerm);
        }
        if req.ledger_end_term == end_term && req.ledger_end_index < end_index {
            return answer(term, VoteResult::RejectSmallLedgerEndIndex);
        }
        // 3. The term: older is refused; ours needs our vote free or already its; a newer one makes
        //    us a candidate that will take it in its next round, without a vote now.
        if req.base.term < term {
            return answer(term, VoteResult::RejectExpiredVoteTerm);
        }
        if req.base.term == term {
            if let Some(voted) = self.m.vote_for.as_deref() {
                if voted != candidate {
                    return if self.m.leader_id.is_some() {
                        answer(term, VoteResult::RejectAlreadyHasLeader)
                    } else {
                        answer(term, VoteResult::RejectAlreadyVoted)
                    };
                }
            }
        } else {
            self.become_candidate(now, req.base.term);
            self.el.need_increase_term = true;
            return answer(self.m.term, VoteResult::RejectTermNotReady);
        }
        // 4. A term below our last entry's cannot lead.
        if req.base.term < end_term {
            return answer(end_term, VoteResult::RejectTermSmallThanLedger);
        }
        // 5. A preferred node taking leadership keeps its term for itself.
        if !is_self && self.is_taking_leadership() && req.ledger_end_term == end_term && end_index >= req.ledger_end_index {
            return answer(term, VoteResult::RejectTakingLeadership);
        }
        // 6. The vote, on disk before it is given.
        if !self.record_vote(candidate) {
            return VoteResponse { base: Base { term, code: Code::DISK_ERROR, ..req.base.clone() }, vote_result: VoteResult::Unknown };
        }
        answer(term, VoteResult::Accept)
    }

    pub(super) fn on_heartbeat_request(&mut self, now: u64, token: u64, req: HeartBeatRequest) {
        let resp = match self.precheck(&req.base) {
            Some(code) => HeartBeatResponse { base: self.error_base(&req.base, code) },
            None => self.handle_heartbeat(now, &req),
        };
        self.out.reply(token, PeerMessage::HeartBeatResponse(resp));
    }

    /// `handleHeartBeat`. Java answers with a fresh response object: only code and term.
    fn handle_heartbeat(&mut self, now: u64, req: &HeartBeatRequest) -> HeartBeatResponse {
        let fresh = |term: i64, code: Code| HeartBeatResponse { base: Base { term, code, ..Base::default() } };
        let term = self.m.term;
        let Some(leader) = req.base.leader_id.as_deref().filter(|l| self.s.is_peer(Some(l))) else {
            return fresh(term, Code::UNKNOWN_MEMBER);
        };
        if leader == self.s.self_id {
            return fresh(term, Code::UNEXPECTED_MEMBER);
        }
        if req.base.term < term {
            return fresh(term, Code::EXPIRED_TERM);
        }
        if req.base.term == term {
            return match self.m.leader_id.as_deref() {
                Some(known) if known == leader => {
                    self.el.last_leader_heartbeat = now;
                    fresh(-1, Code::SUCCESS)
                }
                None => {
                    self.become_follower(now, term, leader);
                    fresh(-1, Code::SUCCESS)
                }
                Some(_) => fresh(-1, Code::INCONSISTENT_LEADER),
            };
        }
        // Not in 0.3.1.2: a member that handed the leadership over follows the new leader at
        // once. With Java's rule (candidate, TERM_NOT_READY, the next round takes the term) it
        // campaigns again after a vote interval, before the next heartbeat, and can push the
        // transferee out (the simulation's hand-over scenario finds it).
        if self.waiting_for_handover(now).is_some() && self.take_term(req.base.term) {
            self.become_follower(now, req.base.term, leader);
            return fresh(-1, Code::SUCCESS);
        }
        // A newer term: become a candidate first and let the next round take the term.
        self.become_candidate(now, req.base.term);
        self.el.need_increase_term = true;
        fresh(-1, Code::TERM_NOT_READY)
    }

    /// `maintainState`: one pass of the state maintainer.
    pub(super) fn maintain_election(&mut self, now: u64) {
        if !self.s.leader_elector {
            return;
        }
        match self.m.role {
            Role::Leader => self.maintain_as_leader(now),
            Role::Follower => self.maintain_as_follower(now),
            Role::Candidate => self.maintain_as_candidate(now),
        }
    }

    fn maintain_as_leader(&mut self, now: u64) {
        if let Some(round) = &self.el.heartbeat_round {
            if now >= round.deadline {
                self.finish_heartbeat_round(now);
            }
            return;
        }
        if now < self.el.resume_at {
            return;
        }
        if elapsed(now, self.el.last_send_heartbeat) > self.s.heartbeat_interval_ms {
            self.el.last_send_heartbeat = Some(now);
            self.start_heartbeat_round(now);
        }
    }

    /// Java checks `> 2 * interval` and then `> maxHeartBeatLeak * interval`.
    fn follower_timeout_ms(&self) -> u64 {
        self.s.heartbeat_interval_ms.saturating_mul(self.s.max_heartbeat_leak.max(2))
    }

    fn maintain_as_follower(&mut self, now: u64) {
        if elapsed(now, Some(self.el.last_leader_heartbeat)) > self.follower_timeout_ms() {
            self.become_candidate(now, self.m.term);
        }
    }

    fn maintain_as_candidate(&mut self, now: u64) {
        if let Some(round) = &self.el.vote_round {
            if now >= round.deadline {
                self.finish_vote_round(now);
            }
            return;
        }
        if now < self.el.resume_at || (now < self.el.next_vote_at && !self.el.need_increase_term) {
            return;
        }
        if !self.el.need_increase_term {
            // Not in 0.3.1.2: a member that handed the leadership over does not campaign while
            // the transferee takes it (it steps down as soon as it learns the transferee's term,
            // often before the transferee asked for its vote); it waits for its heartbeat.
            if let Some(until) = self.waiting_for_handover(now).map(|h| h.until) {
                self.el.next_vote_at = self.el.next_vote_at.max(until);
                return;
            }
        }
        let term = if self.el.last_parse == ParseResult::WaitToVoteNext || self.el.need_increase_term {
            let Some(term) = self.next_term() else {
                // The new term could not be persisted: try again after an interval.
                self.el.next_vote_at = self.next_vote_time(now);
                return;
            };
            self.el.last_parse = ParseResult::WaitToRevote;
            term
        } else {
            self.m.term
        };
        if self.el.need_increase_term {
            // A bump asked for by a newer term only moves the term; votes wait an interval.
            self.el.next_vote_at = self.next_vote_time(now);
            self.el.need_increase_term = false;
            self.el.resume_at = now + MAINTAIN_PAUSE_MS;
            return;
        }
        self.start_vote_round(now, term);
    }

    /// `isTakingLeadership`: a preferred node campaigning for the term it was handed.
    pub(super) fn is_taking_leadership(&self) -> bool {
        self.s.preferred_leaders.as_ref().is_some_and(|p| self.m.term_to_take_leadership == self.m.term && p.contains(&self.s.self_id))
    }

    /// `getNextTimeToRequestVote`.
    fn next_vote_time(&mut self, now: u64) -> u64 {
        let (min, max) = if self.is_taking_leadership() {
            (self.s.min_take_leadership_vote_interval_ms, self.s.max_take_leadership_vote_interval_ms)
        } else {
            (self.s.min_vote_interval_ms, self.s.max_vote_interval_ms)
        };
        now + min + self.rng.below(max - min)
    }

    fn start_vote_round(&mut self, now: u64, term: i64) {
        self.el.rounds += 1;
        let id = self.el.rounds;
        let deadline = now + VOTE_WAIT_BASE_MS + self.rng.below(self.s.max_vote_interval_ms);
        self.el.vote_round = Some(VoteRound {
            id,
            term,
            deadline,
            all: 0,
            valid: 0,
            accepted: 0,
            not_ready: 0,
            bigger_ledger: 0,
            already_has_leader: false,
            known_max_term: term,
        });
        let (end_index, end_term) = (self.log.end_index(), self.log.end_term());
        for peer in self.s.peers.clone() {
            let req = VoteRequest {
                base: Base {
                    group: self.s.group.clone(),
                    remote_id: Some(peer.clone()),
                    local_id: Some(self.s.self_id.clone()),
                    leader_id: Some(self.s.self_id.clone()),
                    term,
                    code: Code::SUCCESS,
                },
                ledger_end_index: end_index,
                ledger_end_term: end_term,
            };
            if peer == self.s.self_id {
                let resp = self.handle_vote(now, &req, true);
                self.count_vote(now, id, &resp);
            } else {
                self.out.send(now, &peer, PeerMessage::Vote(req), Sent::Vote { round: id });
            }
        }
    }

    /// A network failure counts as Java's empty `VoteResponse`: UNKNOWN, not a valid vote.
    pub(super) fn on_vote_response(&mut self, now: u64, round: u64, result: Result<PeerMessage, SendFailed>) {
        let resp = match result {
            Ok(PeerMessage::VoteResponse(r)) => r,
            _ => VoteResponse { base: Base::default(), vote_result: VoteResult::Unknown },
        };
        self.count_vote(now, round, &resp);
    }

    fn count_vote(&mut self, now: u64, round: u64, resp: &VoteResponse) {
        let Some(r) = self.el.vote_round.as_mut().filter(|r| r.id == round) else { return };
        if resp.vote_result != VoteResult::Unknown {
            r.valid += 1;
        }
        match resp.vote_result {
            VoteResult::Accept => r.accepted += 1,
            VoteResult::RejectAlreadyHasLeader => r.already_has_leader = true,
            VoteResult::RejectTermSmallThanLedger | VoteResult::RejectExpiredVoteTerm => {
                r.known_max_term = r.known_max_term.max(resp.base.term);
            }
            VoteResult::RejectExpiredLedgerTerm | VoteResult::RejectSmallLedgerEndIndex => r.bigger_ledger += 1,
            VoteResult::RejectTermNotReady => r.not_ready += 1,
            _ => {}
        }
        r.all += 1;
        let quorum = |n: usize| n > self.s.peers.len() / 2;
        if r.already_has_leader || quorum(r.accepted) || quorum(r.accepted + r.not_ready) || r.all == self.s.peers.len() {
            self.finish_vote_round(now);
        }
    }

    /// The end of `maintainAsCandidate`: what the answers mean, in Java's order.
    fn finish_vote_round(&mut self, now: u64) {
        let Some(r) = self.el.vote_round.take() else { return };
        self.el.resume_at = now + MAINTAIN_PAUSE_MS;
        let parse = if r.known_max_term > r.term {
            self.el.next_vote_at = self.next_vote_time(now);
            self.el.last_parse = ParseResult::WaitToVoteNext;
            self.become_candidate(now, r.known_max_term);
            return;
        } else if r.already_has_leader {
            self.el.next_vote_at = self.next_vote_time(now) + self.s.heartbeat_leak_ms();
            ParseResult::WaitToRevote
        } else if !self.s.is_quorum(r.valid) {
            self.el.next_vote_at = self.next_vote_time(now);
            ParseResult::WaitToRevote
        } else if !self.s.is_quorum(r.valid - r.bigger_ledger) {
            self.el.next_vote_at = self.next_vote_time(now) + self.s.max_vote_interval_ms;
            ParseResult::WaitToRevote
        } else if self.s.is_quorum(r.accepted) {
            ParseResult::Passed
        } else if self.s.is_quorum(r.accepted + r.not_ready) {
            ParseResult::RevoteImmediately
        } else {
            self.el.next_vote_at = self.next_vote_time(now);
            ParseResult::WaitToVoteNext
        };
        self.el.last_parse = parse;
        if parse == ParseResult::Passed {
            self.become_leader(now, r.term);
        }
    }

    fn start_heartbeat_round(&mut self, now: u64) {
        self.el.rounds += 1;
        let id = self.el.rounds;
        let term = self.m.term;
        self.el.heartbeat_round = Some(HeartBeatRound {
            id,
            term,
            deadline: now + self.s.heartbeat_interval_ms,
            all: 1,
            succ: 1,
            not_ready: 0,
            max_term: -1,
            inconsistent_leader: false,
        });
        let others: Vec<String> = self.s.others().cloned().collect();
        if others.is_empty() {
            self.finish_heartbeat_round(now);
            return;
        }
        for peer in others {
            let req = HeartBeatRequest {
                base: Base {
                    group: self.s.group.clone(),
                    remote_id: Some(peer.clone()),
                    local_id: Some(self.s.self_id.clone()),
                    leader_id: self.m.leader_id.clone(),
                    term,
                    code: Code::SUCCESS,
                },
            };
            self.out.send(now, &peer, PeerMessage::HeartBeat(req), Sent::HeartBeat { round: id, peer: peer.clone() });
        }
    }

    pub(super) fn on_heartbeat_response(&mut self, now: u64, round: u64, peer: &str, result: Result<PeerMessage, SendFailed>) {
        let (code, term) = match result {
            Ok(PeerMessage::HeartBeatResponse(r)) => (r.base.code, r.base.term),
            _ => (Code::NETWORK_ERROR, -1),
        };
        // Late answers still say who is alive (the preferred-leader check reads this).
        self.el.peers_live.insert(peer.to_owned(), code != Code::NETWORK_ERROR);
        // Not in 0.3.1.2, which looks at a newer term only when a round missed its quorum (and a
        // round ends as soon as it has one, so the answer is often not even counted): a leader
        // told of a newer term steps down at once. Otherwise a member that took a newer term
        // while cut off, and whose log is shorter (every vote it asks for is refused), stays a
        // candidate for ever next to a leader that keeps its quorum, and is never caught up
        // (openmessaging/dledger#85 and #325; found by t70_chaos).
        if code == Code::EXPIRED_TERM && term > self.m.term && self.m.role == Role::Leader {
            self.el.heartbeat_round = None;
            self.el.resume_at = now + MAINTAIN_PAUSE_MS;
            self.become_candidate(now, term);
            self.el.need_increase_term = true;
            return;
        }
        let Some(r) = self.el.heartbeat_round.as_mut().filter(|r| r.id == round) else { return };
        match code {
            Code::SUCCESS => r.succ += 1,
            Code::EXPIRED_TERM => r.max_term = term,
            Code::INCONSISTENT_LEADER => r.inconsistent_leader = true,
            Code::TERM_NOT_READY => r.not_ready += 1,
            _ => {}
        }
        r.all += 1;
        let quorum = |n: usize| n > self.s.peers.len() / 2;
        if quorum(r.succ) || quorum(r.succ + r.not_ready) || r.all == self.s.peers.len() {
            self.finish_heartbeat_round(now);
        }
    }

    /// The end of `sendHeartbeats`: a quorum keeps the lease; almost a quorum (terms not ready
    /// yet) retries at once; a newer term or another leader steps down; so does a lease older
    /// than `maxHeartBeatLeak` intervals.
    fn finish_heartbeat_round(&mut self, now: u64) {
        let Some(r) = self.el.heartbeat_round.take() else { return };
        self.el.resume_at = now + MAINTAIN_PAUSE_MS;
        if self.s.is_quorum(r.succ) {
            self.el.last_succ_heartbeat = Some(now);
        } else if self.s.is_quorum(r.succ + r.not_ready) {
            self.el.last_send_heartbeat = None;
        } else if r.max_term > r.term {
            self.become_candidate(now, r.max_term);
        } else if r.inconsistent_leader || elapsed(now, self.el.last_succ_heartbeat) > self.s.heartbeat_leak_ms() {
            self.become_candidate(now, r.term);
        }
    }

    /// When the state maintainer next has something to do.
    pub(super) fn election_wake(&self, now: u64) -> Option<u64> {
        if !self.s.leader_elector {
            return None;
        }
        let resume = self.el.resume_at;
        Some(match self.m.role {
            Role::Leader => match &self.el.heartbeat_round {
                Some(r) => r.deadline,
                None => resume.max(self.el.last_send_heartbeat.map_or(now, |t| t + self.s.heartbeat_interval_ms + 1)),
            },
            Role::Follower => self.el.last_leader_heartbeat + self.follower_timeout_ms() + 1,
            Role::Candidate => match &self.el.vote_round {
                Some(r) => r.deadline,
                None if self.el.need_increase_term => resume.max(now),
                None => resume.max(self.el.next_vote_at),
            },
        })
    }
}
