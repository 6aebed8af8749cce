//! The DLedger 0.3.1.2 member as a pure state machine: no threads, sockets or clocks. The driver
//! hands in ticks (its clock reading), requests from peers, answers to the requests the engine
//! sent, and local proposals; each call returns [`Action`]s: messages to send, replies, role
//! changes, commit advances, answers to proposals, and when to tick next. The log ([`RaftLog`])
//! and the persisted term and vote ([`TermStore`]) are written inline through their traits, so
//! the same engine runs over the file store in a server and over memory in the simulation. What
//! is done with the actions is written once too ([`effects`]): the server and the simulation
//! differ only in the world they plug in.
//!
//! The parts are Java's: the member state and role changes ([`member`]), the elector ([`election`]),
//! one push state machine per follower ([`dispatcher`]), the follower's entry handler
//! ([`follower`]), the quorum of acknowledgements and commit ([`quorum`]), leadership transfer and
//! preferred leaders ([`transfer`]). Where 0.3.1.2 is unsafe (each place says how and why), the
//! engine keeps the wire format and fixes the rule; [`JavaQuirks`] switches the old rules back on
//! for tests only, to run them against the simulation's oracle.

mod clock;
mod dispatcher;
pub mod effects;
mod election;
mod follower;
mod member;
mod outbox;
mod quorum;
mod settings;
mod transfer;

#[cfg(test)]
mod tests;

use bytes::Bytes;

use crate::config::{DLedgerConfig, PeersError};
use crate::log::{LogError, RaftLog, TermStore};
use crate::protocol::{AppendEntryResponse, Base, Code, PeerMessage};

use clock::Clock;
pub(crate) use clock::Rng;
use dispatcher::{Dispatcher, PushCtx};
use election::Election;
use follower::{EntryHandler, FollowerCtx};
use member::MemberState;
use outbox::{Outbox, Sent};
use quorum::Quorum;
use settings::Settings;
use transfer::Transfer;

pub use effects::{Effects, Waiting};
pub use outbox::RPC_TIMEOUT_MS;

/// `MemberState.Role` (Java's UNKNOWN is never held).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Candidate,
    Leader,
    Follower,
}

/// What the driver must do after a call, in order ([`Waiting::carry_out`] does it against the
/// driver's [`Effects`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this request to the peer `to`; report its answer, or that it failed, with
    /// [`Engine::on_response`] and the same token.
    Send { to: String, token: u64, msg: PeerMessage },
    /// Answer the request that [`Engine::on_request`] received with this token.
    Reply { token: u64, msg: PeerMessage },
    /// The request received with this token will never be answered (Java drops it too: parked
    /// APPENDs cleared by a COMPARE or TRUNCATE, a take-leadership request replaced by a newer
    /// one). The caller of a Java peer times out after 3 s; release whatever holds the reply.
    NoReply { token: u64 },
    /// The member state changed (`RoleChangeHandler.handle`): the role, the member's term and
    /// the leader it follows (itself when leader, none while candidate).
    RoleChanged { role: Role, term: i64, leader_id: Option<String> },
    /// The log's committed index grew to `index` (it never shrinks while the process lives).
    Committed { index: i64 },
    /// The answer to a proposal: SUCCESS with the index, pos and term of its (last) entry, or
    /// 0.3.1.2's codes. `positions` holds the pos of every entry of the proposal (what a batch
    /// caller reads from `BatchAppendFuture.getPositions`); empty when nothing was appended.
    Answer { token: u64, response: AppendEntryResponse, positions: Vec<i64> },
    /// Call [`Engine::tick`] when the driver's clock reads `at_ms` (earlier is harmless). The last
    /// action of every call.
    WakeAt { at_ms: u64 },
}

/// A request the driver could not deliver, or whose answer never came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendFailed;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Peers(#[from] PeersError),
    #[error("invalid config: {0}")]
    Config(String),
}

/// 0.3.1.2 behaviours the engine deliberately does not have, each of which the simulation shows
/// to break an invariant. They exist only so that tests can put one back and see the oracle catch
/// it; never set them outside tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JavaQuirks {
    /// Leader: commit the quorum index whatever the term of its entry (`QuorumAckChecker`).
    pub commit_by_counting: bool,
    /// Follower: answer COMPARE, and APPENDs already in the log, without checking the request's
    /// term and leader (`handleDoCompare`, `checkAppendFuture`).
    pub compare_ignores_term: bool,
    /// Follower: apply an APPEND at the end of whatever the log holds, and take a commit index up
    /// to the log's end (`handleDoAppend`, `updateCommittedIndex`).
    pub append_without_prefix: bool,
    /// Follower: a TRUNCATE cuts right after its entry; leader: truncate where a COMPARE matched
    /// even below what the follower acknowledged (`handleDoTruncate`, `doCompare`).
    pub truncate_below_acked: bool,
    /// Leader: a new term's comparison resumes at the previous term's `compareIndex`
    /// (`changeState(COMPARE)` outside APPEND). The follower's own guard (a TRUNCATE keeps
    /// committed and same-term entries) now hides it from the simulation; it is put back for
    /// the leader's side only.
    pub keep_compare_index: bool,
    /// A restarted member whose last term may have been its own campaigns in it again (the
    /// first round keeps the persisted term).
    pub same_term_after_restart: bool,
    /// A leader that handed the leadership over forgets it once it steps down: it campaigns as
    /// any candidate, and answers the transferee's first heartbeat TERM_NOT_READY (0.3.1.2's
    /// rules; ours steps down earlier than Java, on the transferee's newer term).
    pub handover_forgotten: bool,
}

/// One DLedger member: the election, the pushes to each follower, the follower's entry handler,
/// the quorum of acknowledgements and leadership transfer, over the store `L` and the `currterm`
/// store `T`. Every input takes the driver's clock reading and returns the actions to carry out.
pub struct Engine<L, T> {
    s: Settings,
    log: L,
    terms: T,
    clock: Clock,
    rng: Rng,
    m: MemberState,
    el: Election,
    tr: Transfer,
    dispatchers: Vec<Dispatcher>,
    handler: EntryHandler,
    q: Quorum,
    out: Outbox,
    reported_role: Option<(Role, i64, Option<String>)>,
    reported_commit: i64,
    quirks: JavaQuirks,
}

impl<L: RaftLog, T: TermStore> Engine<L, T> {
    /// A member starting as CANDIDATE in its persisted term (Java's `MemberState` + elector +
    /// pusher). `seed` drives the vote intervals; pass a random one in production. Call
    /// [`Engine::tick`] to start: the first vote round goes out at once.
    pub fn new(config: &DLedgerConfig, log: L, terms: T, seed: u64, now_ms: u64) -> Result<Engine<L, T>, EngineError> {
        let s = Settings::from_config(config)?;
        let (term, vote_for) = terms.load();
        let clock = Clock::new(now_ms);
        let now = 0;
        let dispatchers = s.others().map(|p| Dispatcher::new(p, now)).collect();
        let q = Quorum::new(s.others());
        let reported_commit = log.committed_index();
        // A member that may have led in its persisted term must not lead in it again: a power
        // loss may have taken entries it wrote in that term, and leading again it would write
        // other entries at the same indexes with the same term (differs from 0.3.1.2, whose
        // first round keeps the term). Leaders record their own id as the vote (see
        // `become_leader`), so "voted for itself" covers every term it may have led.
        let mut el = Election::new(now);
        if vote_for.as_deref() == Some(s.self_id.as_str()) {
            el.last_parse = election::ParseResult::WaitToVoteNext;
        }
        Ok(Engine {
            m: MemberState::new(term, vote_for),
            el,
            tr: Transfer::new(now),
            handler: EntryHandler::new(now),
            dispatchers,
            q,
            s,
            log,
            terms,
            clock,
            rng: Rng::new(seed),
            out: Outbox::new(),
            reported_role: None,
            reported_commit,
            quirks: JavaQuirks::default(),
        })
    }

    #[doc(hidden)]
    pub fn with_java_quirks(mut self, quirks: JavaQuirks) -> Self {
        self.quirks = quirks;
        if quirks.same_term_after_restart {
            self.el.last_parse = election::ParseResult::WaitToRevote;
        }
        self
    }

    /// Time passed: run whatever timers are due.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Action> {
        let now = self.clock.advance(now_ms);
        self.step(now);
        self.finish(now)
    }

    /// A request from a peer (VOTE, HEART_BEAT, PUSH, LEADERSHIP_TRANSFER; an admin's transfer
    /// request too). Its answer is a later [`Action::Reply`] with `token` (or [`Action::NoReply`]).
    pub fn on_request(&mut self, now_ms: u64, token: u64, msg: PeerMessage) -> Vec<Action> {
        let now = self.clock.advance(now_ms);
        match msg {
            PeerMessage::Vote(req) => self.on_vote_request(now, token, req),
            PeerMessage::HeartBeat(req) => self.on_heartbeat_request(now, token, req),
            PeerMessage::Push(req) => self.on_push_request(now, token, req),
            PeerMessage::LeadershipTransfer(req) => self.on_transfer_request(now, token, req),
            // A response is not a request: nothing to answer.
            _ => self.out.actions.push(Action::NoReply { token }),
        }
        self.step(now);
        self.finish(now)
    }

    /// The answer to a request this engine sent (`Err` when it could not be delivered or timed
    /// out). Unknown and repeated tokens are ignored.
    pub fn on_response(&mut self, now_ms: u64, token: u64, result: Result<PeerMessage, SendFailed>) -> Vec<Action> {
        let now = self.clock.advance(now_ms);
        if let Some(sent) = self.out.take(token) {
            self.route_response(now, token, sent, result);
        }
        self.step(now);
        self.finish(now)
    }

    /// A client's append (`handleAppend`): one body, or several appended as one batch whose last
    /// entry is waited for. Answered by [`Action::Answer`] with `token`.
    pub fn propose(&mut self, now_ms: u64, token: u64, bodies: Vec<Bytes>) -> Vec<Action> {
        let now = self.clock.advance(now_ms);
        self.append_proposal(now, token, bodies);
        self.step(now);
        self.finish(now)
    }

    /// An admin asks this node (the leader) to hand leadership to `transferee`; answered by
    /// [`Action::Reply`] with `token` and a `LeadershipTransferResponse`.
    pub fn transfer_leadership(&mut self, now_ms: u64, token: u64, transferee: &str) -> Vec<Action> {
        let req = crate::protocol::LeadershipTransferRequest {
            base: Base {
                group: self.s.group.clone(),
                remote_id: Some(self.s.self_id.clone()),
                local_id: None,
                leader_id: None,
                term: self.m.term,
                code: Code::SUCCESS,
            },
            transfer_id: Some(self.s.self_id.clone()),
            transferee_id: Some(transferee.to_owned()),
            take_leadership_ledger_index: -1,
        };
        self.on_request(now_ms, token, PeerMessage::LeadershipTransfer(req))
    }

    pub fn role(&self) -> Role {
        self.m.role
    }

    /// The member's current (persisted) term.
    pub fn term(&self) -> i64 {
        self.m.term
    }

    pub fn voted_for(&self) -> Option<&str> {
        self.m.vote_for.as_deref()
    }

    pub fn leader_id(&self) -> Option<&str> {
        self.m.leader_id.as_deref()
    }

    pub fn self_id(&self) -> &str {
        &self.s.self_id
    }

    /// The leadership transfer in progress on this leader, if any (appends are refused meanwhile).
    pub fn transferee(&self) -> Option<&str> {
        self.m.transferee.as_deref()
    }

    pub fn log(&self) -> &L {
        &self.log
    }

    /// The store, for the driver's own upkeep (flushing). Changing the log's contents behind the
    /// engine's back breaks it.
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }

    /// The `currterm` store, for the driver's upkeep (and fault injection in tests).
    pub fn terms_mut(&mut self) -> &mut T {
        &mut self.terms
    }

    pub fn into_parts(self) -> (L, T) {
        (self.log, self.terms)
    }

    /// APPENDs parked by the follower's entry handler, waiting for the entries before them.
    pub fn parked_appends(&self) -> usize {
        self.handler.parked()
    }

    /// Proposals waiting for their quorum (timed-out ones included until committed or the term
    /// changes, as Java counts them towards `maxPendingRequestsNum`).
    pub fn pending_proposals(&self) -> usize {
        self.q.pending_len()
    }

    /// The push state of each follower, for traces.
    #[doc(hidden)]
    pub fn debug_pushes(&self) -> String {
        self.dispatchers.iter().map(|d| d.debug(&self.q)).collect::<Vec<_>>().join("; ")
    }

    /// Requests sent and not yet answered or timed out.
    pub fn outstanding_requests(&self) -> usize {
        self.out.outstanding()
    }

    fn route_response(&mut self, now: u64, token: u64, sent: Sent, result: Result<PeerMessage, SendFailed>) {
        match sent {
            Sent::Vote { round } => self.on_vote_response(now, round, result),
            Sent::HeartBeat { round, peer } => self.on_heartbeat_response(now, round, &peer, result),
            Sent::Push(push) => {
                let response = match result {
                    Ok(PeerMessage::PushResponse(r)) => Ok(r),
                    _ => Err(SendFailed),
                };
                let term = self.m.term;
                let leading = self.m.role == Role::Leader;
                if let Some(d) = self.dispatchers.iter_mut().find(|d| d.peer == push.peer) {
                    let mut cx = PushCtx { now, s: &self.s, log: &self.log, out: &mut self.out, q: &mut self.q, quirks: self.quirks };
                    d.on_response(&mut cx, token, &push, response, leading && term == push.term);
                }
            }
            Sent::TakeLeadership { admin, request } => self.on_take_leadership_response(now, admin, request, result),
        }
    }

    /// Everything Java's threads would do now: time out requests, keep the member state (elector),
    /// finish transfers, apply parked appends (entry handler), push (dispatchers), count acks
    /// (quorum checker). Repeated until nothing more happens, so the next thing is a timer.
    fn step(&mut self, now: u64) {
        for (token, sent) in self.out.expire(now) {
            self.route_response(now, token, sent, Err(SendFailed));
        }
        self.maintain_election(now);
        self.run_entry_handler(now);
        self.run_transfers(now);
        self.run_dispatchers(now);
        self.run_quorum(now);
    }

    fn on_push_request(&mut self, now: u64, token: u64, req: crate::protocol::PushEntryRequest) {
        if let Some(code) = self.precheck(&req.base) {
            let resp = crate::protocol::PushEntryResponse { base: self.error_base(&req.base, code), index: None, begin_index: 0, end_index: 0, count: 0 };
            self.out.reply(token, PeerMessage::PushResponse(resp));
            return;
        }
        let mut cx = FollowerCtx {
            now,
            log: &mut self.log,
            out: &mut self.out,
            role: self.m.role,
            term: self.m.term,
            leader: self.m.leader_id.as_deref(),
            quirks: self.quirks,
        };
        self.handler.on_push(&mut cx, token, req);
    }

    fn run_entry_handler(&mut self, now: u64) {
        let mut cx = FollowerCtx {
            now,
            log: &mut self.log,
            out: &mut self.out,
            role: self.m.role,
            term: self.m.term,
            leader: self.m.leader_id.as_deref(),
            quirks: self.quirks,
        };
        self.handler.run(&mut cx);
    }

    fn run_dispatchers(&mut self, now: u64) {
        if self.m.role != Role::Leader {
            return;
        }
        // A new leader pushes only once its first heartbeats are out (at most the elector's 10 ms
        // pause later): a COMPARE that reaches a voter before the heartbeat that makes it a
        // follower is refused, and the dispatcher then pauses 500 ms (Java races the same way).
        if self.s.leader_elector && self.el.last_send_heartbeat.is_none() {
            return;
        }
        let term = self.m.term;
        let mut cx = PushCtx { now, s: &self.s, log: &self.log, out: &mut self.out, q: &mut self.q, quirks: self.quirks };
        for d in &mut self.dispatchers {
            d.refresh(&mut cx, term);
            d.run(&mut cx);
        }
    }

    fn run_quorum(&mut self, now: u64) {
        if self.m.role == Role::Leader && self.q.term() == self.m.term {
            self.q.advance_commit(&mut self.log, &self.s, self.quirks.commit_by_counting, &mut self.out);
        }
        self.q.time_out(now, &self.s, &mut self.out);
    }

    fn append_proposal(&mut self, now: u64, token: u64, bodies: Vec<Bytes>) {
        let refuse = |e: &Self, code: Code, leader_id: Option<String>| Action::Answer {
            token,
            response: AppendEntryResponse { base: Base { group: e.s.group.clone(), term: e.m.term, leader_id, code, ..Base::default() }, index: -1, pos: -1 },
            positions: Vec::new(),
        };
        let code = if bodies.is_empty() {
            Some(Code::REQUEST_WITH_EMPTY_BODYS)
        } else if self.m.role != Role::Leader {
            Some(Code::NOT_LEADER)
        } else if self.m.transferee.is_some() {
            Some(Code::LEADER_TRANSFERRING)
        } else if self.q.pending_full(self.m.term, self.s.max_pending_requests) {
            let a = refuse(self, Code::LEADER_PENDING_FULL, Some(self.s.self_id.clone()));
            self.out.actions.push(a);
            return;
        } else {
            None
        };
        if let Some(code) = code {
            let a = refuse(self, code, self.m.leader_id.clone());
            self.out.actions.push(a);
            return;
        }
        self.q.term_changed(self.m.term, self.m.leader_id.as_deref(), &self.s, &mut self.out);
        let mut positions = Vec::with_capacity(bodies.len());
        let mut last = None;
        for body in bodies {
            match self.log.append_as_leader(self.m.term, body) {
                Ok(entry) => {
                    positions.push(entry.pos);
                    last = Some(entry);
                }
                Err(e) => {
                    // Entries already appended stay, without a waiter (as Java's batch loop).
                    let code = if e == LogError::DiskFull { Code::DISK_FULL } else { Code::DISK_ERROR };
                    let a = refuse(self, code, self.m.leader_id.clone());
                    self.out.actions.push(a);
                    return;
                }
            }
        }
        if let Some(entry) = last {
            self.q.wait_ack(self.m.term, entry.index, token, entry.pos, positions, now);
        }
    }

    /// Reports what changed and when to call again.
    fn finish(&mut self, now: u64) -> Vec<Action> {
        let committed = self.log.committed_index();
        if committed > self.reported_commit {
            self.reported_commit = committed;
            self.out.actions.push(Action::Committed { index: committed });
        }
        let wake = self.next_wake(now).max(now + 1);
        self.out.actions.push(Action::WakeAt { at_ms: self.clock.external(wake) });
        std::mem::take(&mut self.out.actions)
    }

    fn next_wake(&self, now: u64) -> u64 {
        let mut wake = now + 60_000;
        let mut consider = |t: Option<u64>| {
            if let Some(t) = t {
                wake = wake.min(t);
            }
        };
        consider(self.out.next_deadline());
        consider(self.election_wake(now));
        consider(self.transfer_wake());
        consider(self.handler.wake(self.m.role));
        consider(self.q.wake(&self.s));
        if self.m.role == Role::Leader {
            for d in &self.dispatchers {
                consider(d.wake(now, &self.s, &self.log, &self.q));
            }
        }
        wake
    }

    /// The base of an error answer to a request (`copyBaseInfo` + code + our leader).
    fn error_base(&self, req: &Base, code: Code) -> Base {
        Base { code, leader_id: self.m.leader_id.clone(), ..req.clone() }
    }

    /// `DLedgerServer`'s checks before any handler: addressed to us, in our group.
    fn precheck(&self, req: &Base) -> Option<Code> {
        if req.remote_id.as_deref() != Some(self.s.self_id.as_str()) {
            Some(Code::UNKNOWN_MEMBER)
        } else if req.group != self.s.group {
            Some(Code::UNKNOWN_GROUP)
        } else {
            None
        }
    }
}
