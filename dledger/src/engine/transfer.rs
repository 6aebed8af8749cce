//! Leadership transfer (`DLedgerServer.handleLeadershipTransfer`, the elector's
//! `handleLeadershipTransfer` / `handleTakeLeadership` / `TakeLeadershipTask`) and the preferred
//! leader check (`checkPreferredLeader`, every second).
//!
//! The leader marks itself transferring (appends fail LEADER_TRANSFERRING) and asks the
//! transferee to take over at `term + 1`. The transferee waits up to
//! `leadershipTransferWaitTimeout` to catch up with the leader's last index (Java sleeps in 10 ms
//! steps on an RPC thread; here a waiting record checked on every step), then campaigns; it
//! answers when it becomes leader (SUCCESS) or follower (TAKE_LEADERSHIP_FAILED). The leader
//! passes the answer on to the admin and clears the transfer unless it worked.

use crate::log::{RaftLog, TermStore};
use crate::protocol::{Base, Code, LeadershipTransferRequest, LeadershipTransferResponse, PeerMessage};

use super::outbox::Sent;
use super::{Action, Engine, Role, SendFailed};

const PREFERRED_CHECK_INTERVAL_MS: u64 = 1_000;

#[derive(Debug)]
pub(super) struct Transfer {
    next_preferred_check: u64,
    /// Transferee: requests waiting for our log to catch up.
    catching_up: Vec<CatchUp>,
    /// Transferee: the request to answer once our campaign ends (`TakeLeadershipTask`).
    take_task: Option<u64>,
    /// Old leader: the hand-over we started, until we follow a leader, lead again, or it failed.
    pub handed: Option<HandedOver>,
}

/// A hand-over this member started as leader: the transferee campaigns for `term` (ours + 1);
/// we wait for it until `until` instead of campaigning ourselves.
#[derive(Debug, Clone, Copy)]
pub(super) struct HandedOver {
    pub term: i64,
    pub until: u64,
}

#[derive(Debug)]
struct CatchUp {
    token: u64,
    req: LeadershipTransferRequest,
    since: u64,
}

impl Transfer {
    pub fn new(now: u64) -> Transfer {
        Transfer { next_preferred_check: now + PREFERRED_CHECK_INTERVAL_MS, catching_up: Vec::new(), take_task: None, handed: None }
    }
}

fn fresh(term: i64, code: Code) -> LeadershipTransferResponse {
    LeadershipTransferResponse { base: Base { term, code, ..Base::default() } }
}

impl<L: RaftLog, T: TermStore> Engine<L, T> {
    pub(super) fn on_transfer_request(&mut self, now: u64, token: u64, req: LeadershipTransferRequest) {
        let me = Some(self.s.self_id.as_str());
        let refused = if let Some(code) = self.precheck(&req.base) {
            Some(code)
        } else if req.transfer_id.as_deref() == me {
            // The leader, told by an admin.
            let transferee = req.transferee_id.clone().unwrap_or_default();
            let behind = self.log.end_index() - self.q.watermark(req.base.term, &transferee);
            if !self.s.is_peer(Some(&transferee)) {
                Some(Code::UNKNOWN_MEMBER)
            } else if self.m.term != req.base.term {
                Some(Code::INCONSISTENT_TERM)
            } else if self.m.role != Role::Leader {
                Some(Code::NOT_LEADER)
            } else if behind >= self.s.max_leadership_transfer_wait_index {
                Some(Code::FALL_BEHIND_TOO_MUCH)
            } else {
                self.start_transfer(now, req.base.term, &transferee, Some(token));
                None
            }
        } else if req.transferee_id.as_deref() == me {
            // The transferee, asked by the leader.
            if req.transfer_id.is_none() || req.transfer_id != self.m.leader_id {
                Some(Code::INCONSISTENT_LEADER)
            } else {
                self.tr.catching_up.push(CatchUp { token, req: req.clone(), since: now });
                self.run_catch_ups(now);
                None
            }
        } else {
            self.out.reply(token, PeerMessage::LeadershipTransferResponse(fresh(self.m.term, Code::UNEXPECTED_ARGUMENT)));
            None
        };
        if let Some(code) = refused {
            let resp = LeadershipTransferResponse { base: self.error_base(&req.base, code) };
            self.out.reply(token, PeerMessage::LeadershipTransferResponse(resp));
        }
    }

    /// The elector's `handleLeadershipTransfer`: mark the transfer and ask the transferee.
    fn start_transfer(&mut self, now: u64, term: i64, transferee: &str, admin: Option<u64>) {
        let refused = if self.m.term != term {
            Some(Code::INCONSISTENT_TERM)
        } else if self.m.role != Role::Leader {
            Some(Code::NOT_LEADER)
        } else if self.m.transferee.is_some() || transferee == self.s.self_id {
            // Java would send the request to itself and get LEADER_TRANSFERRING back.
            Some(Code::LEADER_TRANSFERRING)
        } else {
            None
        };
        if let Some(code) = refused {
            if let Some(token) = admin {
                self.out.reply(token, PeerMessage::LeadershipTransferResponse(fresh(self.m.term, code)));
            }
            return;
        }
        self.m.transferee = Some(transferee.to_owned());
        if !self.quirks.handover_forgotten {
            // The transferee may wait `leadershipTransferWaitTimeout` to catch up, then campaigns
            // after at most a vote interval and sends heartbeats at once once elected.
            let until = now
                + self.s.leadership_transfer_wait_timeout_ms
                + self.s.max_take_leadership_vote_interval_ms.max(self.s.max_vote_interval_ms)
                + self.s.heartbeat_leak_ms();
            self.tr.handed = Some(HandedOver { term: term + 1, until });
        }
        let request = LeadershipTransferRequest {
            base: Base {
                group: self.s.group.clone(),
                remote_id: Some(transferee.to_owned()),
                local_id: Some(self.s.self_id.clone()),
                leader_id: self.m.leader_id.clone(),
                term,
                code: Code::SUCCESS,
            },
            transfer_id: Some(self.s.self_id.clone()),
            transferee_id: Some(transferee.to_owned()),
            take_leadership_ledger_index: self.log.end_index(),
        };
        let msg = PeerMessage::LeadershipTransfer(request.clone());
        self.out.send(now, transferee, msg, Sent::TakeLeadership { admin, request });
    }

    /// The transferee answered (or not): the transfer ends unless it worked, and the admin hears
    /// the transferee's answer.
    pub(super) fn on_take_leadership_response(
        &mut self,
        _now: u64,
        admin: Option<u64>,
        request: LeadershipTransferRequest,
        result: Result<PeerMessage, SendFailed>,
    ) {
        let resp = match result {
            Ok(PeerMessage::LeadershipTransferResponse(r)) => r,
            _ => LeadershipTransferResponse { base: Base { code: Code::NETWORK_ERROR, ..request.base.clone() } },
        };
        let still_ours = self.m.term == request.base.term && self.m.transferee.is_some();
        if (resp.base.code != Code::SUCCESS || still_ours) && self.m.role == Role::Leader {
            self.m.transferee = None;
        }
        if resp.base.code != Code::SUCCESS {
            // The transferee did not take over: nobody to wait for.
            self.tr.handed = None;
        }
        if let Some(token) = admin {
            self.out.reply(token, PeerMessage::LeadershipTransferResponse(resp));
        }
    }

    /// Transferees waiting to catch up: campaign once caught up, give up after the timeout.
    fn run_catch_ups(&mut self, now: u64) {
        let end = self.log.end_index();
        for w in std::mem::take(&mut self.tr.catching_up) {
            if w.req.take_leadership_ledger_index - end <= 0 {
                self.take_leadership(now, w.token, &w.req);
            } else if now.saturating_sub(w.since) > self.s.leadership_transfer_wait_timeout_ms {
                let resp = LeadershipTransferResponse { base: self.error_base(&w.req.base, Code::TAKE_LEADERSHIP_FAILED) };
                self.out.reply(w.token, PeerMessage::LeadershipTransferResponse(resp));
            } else {
                self.tr.catching_up.push(w);
            }
        }
    }

    /// `handleTakeLeadership`: campaign for the next term at once.
    fn take_leadership(&mut self, now: u64, token: u64, req: &LeadershipTransferRequest) {
        if self.m.term != req.base.term {
            self.out.reply(token, PeerMessage::LeadershipTransferResponse(fresh(self.m.term, Code::INCONSISTENT_TERM)));
            return;
        }
        let target = req.base.term + 1;
        self.m.term_to_take_leadership = target;
        if let Some(old) = self.tr.take_task.replace(token) {
            // Java replaces the task's future; the older caller is never answered.
            self.out.actions.push(Action::NoReply { token: old });
        }
        self.become_candidate(now, target);
        self.el.need_increase_term = true;
    }

    /// `TakeLeadershipTask.check`, on every role change.
    pub(super) fn take_leadership_check(&mut self, _now: u64, term: i64, role: Role) {
        let target = self.m.term_to_take_leadership;
        if target == -1 || self.tr.take_task.is_none() {
            return;
        }
        let code = if term > target {
            Code::EXPIRED_TERM
        } else if term == target {
            match role {
                Role::Leader => Code::SUCCESS,
                Role::Follower => Code::TAKE_LEADERSHIP_FAILED,
                Role::Candidate => return,
            }
        } else if role == Role::Follower {
            // A heartbeat of the old term can arrive before our term moved.
            Code::TAKE_LEADERSHIP_FAILED
        } else {
            Code::INTERNAL_ERROR
        };
        if let Some(token) = self.tr.take_task.take() {
            self.out.reply(token, PeerMessage::LeadershipTransferResponse(fresh(term, code)));
        }
        self.m.term_to_take_leadership = -1;
    }

    /// Timers of this part: catch-up waits, and the preferred-leader check.
    pub(super) fn run_transfers(&mut self, now: u64) {
        if !self.tr.catching_up.is_empty() {
            self.run_catch_ups(now);
        }
        if now >= self.tr.next_preferred_check {
            while self.tr.next_preferred_check <= now {
                self.tr.next_preferred_check += PREFERRED_CHECK_INTERVAL_MS;
            }
            self.check_preferred_leader(now);
        }
    }

    /// `checkPreferredLeader`: a leader that is not preferred hands over to the live preferred
    /// member least behind, if less than `maxLeadershipTransferWaitIndex` behind.
    fn check_preferred_leader(&mut self, now: u64) {
        let Some(preferred) = self.s.preferred_leaders.clone() else { return };
        if self.m.role != Role::Leader || self.m.transferee.is_some() || preferred.contains(&self.s.self_id) {
            return;
        }
        let end = self.log.end_index();
        let mut best: Option<(i64, &String)> = None;
        for id in &preferred {
            if !self.s.is_peer(Some(id)) || self.el.peers_live.get(id) != Some(&true) {
                continue;
            }
            let behind = end - self.q.watermark(self.m.term, id);
            if best.is_none_or(|(b, _)| behind < b) {
                best = Some((behind, id));
            }
        }
        if let Some((behind, id)) = best {
            if behind < self.s.max_leadership_transfer_wait_index {
                let id = id.clone();
                self.start_transfer(now, self.m.term, &id, None);
            }
        }
    }

    /// The hand-over we wait for, if any: we handed over to its `to` for its `term`, we have not
    /// moved past that term, and its time is not up.
    pub(super) fn waiting_for_handover(&self, now: u64) -> Option<&HandedOver> {
        self.tr.handed.as_ref().filter(|h| self.m.term <= h.term && now < h.until)
    }

    pub(super) fn transfer_wake(&self) -> Option<u64> {
        let catch_up = self.tr.catching_up.iter().map(|w| w.since + self.s.leadership_transfer_wait_timeout_ms + 1).min();
        let preferred = (self.s.preferred_leaders.is_some() && self.m.role == Role::Leader).then_some(self.tr.next_preferred_check);
        [catch_up, preferred].into_iter().flatten().min()
    }
}
