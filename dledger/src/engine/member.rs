//! The member state (`MemberState`): role, term, vote, leader, and the role changes of
//! `DLedgerLeaderElector` (`changeRoleToCandidate/Follower/Leader`), which every other part
//! observes.
//!
//! The term moves only in [`Engine::next_term`] (a candidate's new round), as in Java:
//! `changeToCandidate(higher)` only remembers the higher term (`knownMaxTermInGroup`) for the next
//! round; the one exception is a member that handed the leadership over, which takes the
//! transferee's term from its heartbeat ([`Engine::take_term`]). The term and vote reach the [`TermStore`] before they count: a vote is answered ACCEPT
//! only once persisted, and a round in a new term starts only once that term is persisted (Java
//! logs a failed `persistTerm` and goes on).

use crate::log::{RaftLog, TermStore};

use super::election::ParseResult;
use super::{Action, Engine, Role};

#[derive(Clone, Debug)]
pub(super) struct MemberState {
    pub role: Role,
    pub term: i64,
    pub vote_for: Option<String>,
    pub leader_id: Option<String>,
    /// `knownMaxTermInGroup`: the highest term seen, taken by the next `nextTerm`.
    pub known_max_term: i64,
    /// Set on a leader while it hands leadership over; appends are refused meanwhile.
    pub transferee: Option<String>,
    /// Set on a transferee: the term it campaigns for (-1: none).
    pub term_to_take_leadership: i64,
}

impl MemberState {
    pub fn new(term: i64, vote_for: Option<String>) -> MemberState {
        MemberState { role: Role::Candidate, term, vote_for, leader_id: None, known_max_term: -1, transferee: None, term_to_take_leadership: -1 }
    }
}

impl<L: RaftLog, T: TermStore> Engine<L, T> {
    /// `MemberState.nextTerm`: the highest term seen if above ours, else ours + 1, with no vote.
    /// `None` (nothing changed) when it could not be persisted.
    pub(super) fn next_term(&mut self) -> Option<i64> {
        let next = if self.m.known_max_term > self.m.term { self.m.known_max_term } else { self.m.term + 1 };
        if self.terms.persist(next, None).is_err() {
            return None;
        }
        self.m.term = next;
        self.m.vote_for = None;
        // Proposals of the old term can no longer be acknowledged in it.
        self.q.term_changed(next, self.m.leader_id.as_deref(), &self.s, &mut self.out);
        Some(next)
    }

    /// Moves to the higher `term` at once, with no vote (not in 0.3.1.2, where only
    /// [`Engine::next_term`] moves the term). False (nothing changed) when it could not be
    /// persisted.
    pub(super) fn take_term(&mut self, term: i64) -> bool {
        debug_assert!(term > self.m.term);
        if self.terms.persist(term, None).is_err() {
            return false;
        }
        self.m.term = term;
        self.m.vote_for = None;
        self.m.known_max_term = self.m.known_max_term.max(term);
        self.q.term_changed(term, self.m.leader_id.as_deref(), &self.s, &mut self.out);
        true
    }

    /// `setCurrVoteFor`, persisted first; false when the store refused.
    pub(super) fn record_vote(&mut self, candidate: &str) -> bool {
        if self.terms.persist(self.m.term, Some(candidate)).is_err() {
            return false;
        }
        self.m.vote_for = Some(candidate.to_owned());
        true
    }

    /// `changeRoleToCandidate(term)`: ignored below our term; otherwise candidate, no leader, no
    /// transfer, and `term` remembered for the next round.
    pub(super) fn become_candidate(&mut self, now: u64, term: i64) {
        if term < self.m.term {
            return;
        }
        self.m.known_max_term = self.m.known_max_term.max(term);
        self.m.role = Role::Candidate;
        self.m.leader_id = None;
        self.m.transferee = None;
        self.role_changed(now, term, Role::Candidate);
    }

    /// `changeRoleToFollower(term, leader)`; callers hold `term == self.m.term`.
    pub(super) fn become_follower(&mut self, now: u64, term: i64, leader: &str) {
        debug_assert_eq!(term, self.m.term);
        self.el.last_parse = ParseResult::WaitToRevote;
        self.m.role = Role::Follower;
        self.m.leader_id = Some(leader.to_owned());
        self.m.transferee = None;
        self.tr.handed = None;
        self.el.last_leader_heartbeat = now;
        self.role_changed(now, term, Role::Follower);
    }

    /// `changeRoleToLeader(term)`: only if the term is still ours. A leader elected without its
    /// own vote records itself as the vote first, so that a restart knows it may have led here.
    pub(super) fn become_leader(&mut self, now: u64, term: i64) {
        if self.m.term != term {
            return;
        }
        if !self.quirks.same_term_after_restart && self.m.vote_for.as_deref() != Some(self.s.self_id.as_str()) {
            let me = self.s.self_id.clone();
            if !self.record_vote(&me) {
                return;
            }
        }
        self.m.role = Role::Leader;
        self.m.leader_id = Some(self.s.self_id.clone());
        self.tr.handed = None;
        self.el.peers_live.clear();
        self.el.last_send_heartbeat = None;
        self.q.start_term(term, &self.log);
        self.role_changed(now, term, Role::Leader);
    }

    /// `handleRoleChange`: the take-leadership task looks at every change; the driver hears of
    /// changes of role, term or leader. A round of votes or heartbeats belongs to the role that
    /// started it and ends with it.
    fn role_changed(&mut self, now: u64, term: i64, role: Role) {
        self.el.vote_round = None;
        self.el.heartbeat_round = None;
        self.take_leadership_check(now, term, role);
        let state = (self.m.role, self.m.term, self.m.leader_id.clone());
        if self.reported_role.as_ref() != Some(&state) {
            self.reported_role = Some(state);
            self.out.actions.push(Action::RoleChanged { role: self.m.role, term: self.m.term, leader_id: self.m.leader_id.clone() });
        }
    }
}
