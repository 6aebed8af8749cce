//! What a driver does with the engine's [`Action`]s, written once for the server and the
//! simulation. [`Waiting`] holds what waits for the engine by token (requests handed to
//! [`Engine::on_request`](super::Engine::on_request), proposals handed to
//! [`Engine::propose`](super::Engine::propose)); [`Waiting::carry_out`] runs a call's actions in
//! order against an [`Effects`]: it matches each reply, dropped request and answer to what waits
//! for it and hands the rest (sends, role changes, commits, the next wake-up) on. The server's
//! driver implements [`Effects`] over its peer connections, channels and timer; the simulation
//! over its simulated network, clients and oracle. So the simulation checks the code path the
//! server runs, and only the outside world differs.

use std::collections::BTreeMap;

use super::{Action, Role};
use crate::protocol::{AppendEntryResponse, PeerMessage};

/// The world one member's actions reach. Every method is called in the order of the actions.
pub trait Effects {
    /// What waits for the answer to a request (a peer's RPC, an admin's transfer).
    type Request;
    /// What waits for the answer to a proposal.
    type Proposal;
    /// What stops carrying out the rest (the simulation's alarms); the server's is
    /// [`std::convert::Infallible`].
    type Error;

    /// Send `msg` to the peer `to`; its answer (or failure) goes back to the engine with `token`.
    fn send(&mut self, to: String, token: u64, msg: PeerMessage) -> Result<(), Self::Error>;
    /// Answer the request that waited.
    fn reply(&mut self, request: Self::Request, msg: PeerMessage) -> Result<(), Self::Error>;
    /// The request will never be answered (see [`Action::NoReply`]); by default it is dropped,
    /// which releases what held it.
    fn no_reply(&mut self, request: Self::Request) -> Result<(), Self::Error> {
        drop(request);
        Ok(())
    }
    /// Answer the proposal that waited with `token`.
    fn answer(&mut self, token: u64, proposal: Self::Proposal, response: AppendEntryResponse, positions: Vec<i64>) -> Result<(), Self::Error>;
    fn role_changed(&mut self, role: Role, term: i64, leader_id: Option<String>) -> Result<(), Self::Error>;
    fn committed(&mut self, index: i64) -> Result<(), Self::Error>;
    /// Tick the engine when the clock reads `at_ms`.
    fn wake_at(&mut self, at_ms: u64) -> Result<(), Self::Error>;
    /// `action` (`reply`, `no-reply` or `answer`) named a token nothing waits for.
    fn unknown(&mut self, action: &'static str, token: u64) -> Result<(), Self::Error>;
}

/// What waits for one member's engine, by token. The tokens are the caller's: unique among what
/// waits at once. One per engine: a restarted engine starts with none (its old tokens mean nothing).
pub struct Waiting<R, P> {
    requests: BTreeMap<u64, R>,
    proposals: BTreeMap<u64, P>,
}

impl<R, P> Default for Waiting<R, P> {
    fn default() -> Self {
        Waiting { requests: BTreeMap::new(), proposals: BTreeMap::new() }
    }
}

impl<R, P> Waiting<R, P> {
    pub fn new() -> Self {
        Self::default()
    }

    /// `request` waits for the engine's reply to the request handed in with `token`.
    pub fn park_request(&mut self, token: u64, request: R) {
        self.requests.insert(token, request);
    }

    /// `proposal` waits for the engine's answer to the proposal handed in with `token`.
    pub fn park_proposal(&mut self, token: u64, proposal: P) {
        self.proposals.insert(token, proposal);
    }

    /// The proposals not answered yet, by token.
    pub fn proposals(&self) -> impl Iterator<Item = (u64, &P)> {
        self.proposals.iter().map(|(&t, p)| (t, p))
    }

    pub fn has_proposals(&self) -> bool {
        !self.proposals.is_empty()
    }

    /// Forgets every waiting request (their connections are gone).
    pub fn clear_requests(&mut self) {
        self.requests.clear();
    }

    /// Carries out one engine call's actions, in order, against `fx`. Stops at the first error.
    pub fn carry_out<E: Effects<Request = R, Proposal = P>>(&mut self, actions: Vec<Action>, fx: &mut E) -> Result<(), E::Error> {
        for action in actions {
            match action {
                Action::Send { to, token, msg } => fx.send(to, token, msg)?,
                Action::Reply { token, msg } => match self.requests.remove(&token) {
                    Some(request) => fx.reply(request, msg)?,
                    None => fx.unknown("reply", token)?,
                },
                Action::NoReply { token } => match self.requests.remove(&token) {
                    Some(request) => fx.no_reply(request)?,
                    None => fx.unknown("no-reply", token)?,
                },
                Action::Answer { token, response, positions } => match self.proposals.remove(&token) {
                    Some(proposal) => fx.answer(token, proposal, response, positions)?,
                    None => fx.unknown("answer", token)?,
                },
                Action::RoleChanged { role, term, leader_id } => fx.role_changed(role, term, leader_id)?,
                Action::Committed { index } => fx.committed(index)?,
                Action::WakeAt { at_ms } => fx.wake_at(at_ms)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Base, Code, HeartBeatResponse};

    /// Records what it is told, as strings.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl Effects for Log {
        type Request = &'static str;
        type Proposal = &'static str;
        type Error = String;

        fn send(&mut self, to: String, token: u64, _msg: PeerMessage) -> Result<(), String> {
            self.0.push(format!("send {token} to {to}"));
            Ok(())
        }
        fn reply(&mut self, request: &'static str, _msg: PeerMessage) -> Result<(), String> {
            self.0.push(format!("reply to {request}"));
            Ok(())
        }
        fn no_reply(&mut self, request: &'static str) -> Result<(), String> {
            self.0.push(format!("release {request}"));
            Ok(())
        }
        fn answer(&mut self, token: u64, proposal: &'static str, response: AppendEntryResponse, _positions: Vec<i64>) -> Result<(), String> {
            self.0.push(format!("answer {token} {proposal}: {}", response.base.code.0));
            Ok(())
        }
        fn role_changed(&mut self, role: Role, term: i64, _leader_id: Option<String>) -> Result<(), String> {
            self.0.push(format!("{role:?} in {term}"));
            Ok(())
        }
        fn committed(&mut self, index: i64) -> Result<(), String> {
            self.0.push(format!("committed {index}"));
            Ok(())
        }
        fn wake_at(&mut self, at_ms: u64) -> Result<(), String> {
            self.0.push(format!("wake at {at_ms}"));
            Ok(())
        }
        fn unknown(&mut self, action: &'static str, token: u64) -> Result<(), String> {
            Err(format!("{action} for unknown token {token}"))
        }
    }

    fn heartbeat_answer() -> PeerMessage {
        PeerMessage::HeartBeatResponse(HeartBeatResponse { base: Base::default() })
    }

    fn answer(token: u64) -> Action {
        Action::Answer { token, response: AppendEntryResponse { base: Base { code: Code::SUCCESS, ..Base::default() }, index: 0, pos: 0 }, positions: vec![0] }
    }

    #[test]
    fn actions_reach_what_waits_for_their_token_in_order() {
        let mut waiting = Waiting::new();
        waiting.park_request(1, "heartbeat from n1");
        waiting.park_request(2, "push from n1");
        waiting.park_proposal(7, "client");
        let actions = vec![
            Action::RoleChanged { role: Role::Follower, term: 3, leader_id: Some("n1".into()) },
            Action::Reply { token: 1, msg: heartbeat_answer() },
            Action::NoReply { token: 2 },
            answer(7),
            Action::Committed { index: 4 },
            Action::WakeAt { at_ms: 99 },
        ];
        let mut log = Log::default();
        waiting.carry_out(actions, &mut log).unwrap();
        assert_eq!(log.0, ["Follower in 3", "reply to heartbeat from n1", "release push from n1", "answer 7 client: 200", "committed 4", "wake at 99"]);
        assert!(!waiting.has_proposals());
    }

    #[test]
    fn a_token_is_answered_once_and_a_second_answer_is_unknown() {
        let mut waiting = Waiting::new();
        waiting.park_request(1, "heartbeat");
        waiting.park_proposal(1, "client");
        let mut log = Log::default();
        waiting.carry_out(vec![Action::Reply { token: 1, msg: heartbeat_answer() }, answer(1)], &mut log).unwrap();
        assert_eq!(waiting.carry_out(vec![Action::Reply { token: 1, msg: heartbeat_answer() }], &mut log), Err("reply for unknown token 1".into()));
        assert_eq!(waiting.carry_out(vec![answer(1), Action::WakeAt { at_ms: 5 }], &mut log), Err("answer for unknown token 1".into()));
        assert_eq!(log.0.last().map(String::as_str), Some("answer 1 client: 200"), "nothing after the error is carried out");
    }
}
