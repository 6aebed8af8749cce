//! The engine's thread: the one owner of the [`Engine`], its store and its `currterm` file. It
//! takes inputs (RPCs, local appends, peers' answers, its own timer), feeds them to the engine
//! and carries out the actions: sending to peers (as tasks on the server's runtime, whose answers
//! come back on a queue of their own), answering parked requests, publishing the member's status.
//!
//! A thread rather than a task because the engine writes the store and fsyncs `currterm` inline,
//! which must not stall the runtime's workers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info, warn};

use super::{AppendOutcome, NodeStatus};
use crate::config::Peer;
use crate::engine::{Action, Effects, Engine, Role, SendFailed, Waiting};
use crate::entry::Entry;
use crate::log::RaftLog;
use crate::protocol::*;
use crate::rpc::{PeerClient, Responder};
use crate::store::{FileStore, TermFile};

/// What the engine's thread is asked to do.
pub(super) enum Input {
    /// A peer's (or a client's) request the engine answers: VOTE, HEART_BEAT, PUSH,
    /// LEADERSHIP_TRANSFER.
    Request {
        msg: PeerMessage,
        reply: Pending,
    },
    Append {
        bodies: Vec<Bytes>,
        answer: AnswerTo,
    },
    /// The GET RPC: leader only, one entry.
    Get {
        request: GetEntriesRequest,
        reply: Responder<GetEntriesResponse>,
    },
    /// An in-process read, any role.
    Read {
        index: i64,
        answer: oneshot::Sender<Result<Entry, Code>>,
    },
    Transfer {
        transferee: String,
        answer: oneshot::Sender<LeadershipTransferResponse>,
    },
    Shutdown,
}

/// A request waiting for the engine's [`Action::Reply`].
pub(super) enum Pending {
    Vote(Responder<VoteResponse>),
    HeartBeat(Responder<HeartBeatResponse>),
    Push(Responder<PushEntryResponse>),
    Transfer(Responder<LeadershipTransferResponse>),
    LocalTransfer(oneshot::Sender<LeadershipTransferResponse>),
}

impl Pending {
    fn answer(self, msg: PeerMessage) {
        match (self, msg) {
            (Pending::Vote(r), PeerMessage::VoteResponse(m)) => r.send(m),
            (Pending::HeartBeat(r), PeerMessage::HeartBeatResponse(m)) => r.send(m),
            (Pending::Push(r), PeerMessage::PushResponse(m)) => r.send(m),
            (Pending::Transfer(r), PeerMessage::LeadershipTransferResponse(m)) => r.send(m),
            (Pending::LocalTransfer(tx), PeerMessage::LeadershipTransferResponse(m)) => {
                let _ = tx.send(m);
            }
            (_, msg) => warn!(?msg, "engine answered a request with a response of another kind; dropped"),
        }
    }
}

/// Who waits for an append's [`Action::Answer`].
pub(super) enum AnswerTo {
    Rpc(Responder<AppendEntryResponse>),
    Local(oneshot::Sender<AppendOutcome>),
    /// Called on the engine's thread with the answer (the broker's deferred send replies).
    Callback(Box<dyn FnOnce(AppendOutcome) + Send>),
}

/// A peer's answer (or the failure to get one) to a request the engine sent.
struct PeerAnswer {
    token: u64,
    result: Result<PeerMessage, SendFailed>,
}

/// Milliseconds since the member started (plus one, so 0 never appears): monotonic, so a wall
/// clock stepped back does not stall timers.
pub(super) struct MonotonicClock(Instant);

impl MonotonicClock {
    pub(super) fn new() -> Self {
        MonotonicClock(Instant::now())
    }

    pub(super) fn now_ms(&self) -> u64 {
        self.0.elapsed().as_millis() as u64 + 1
    }
}

pub(super) struct Driver {
    engine: Engine<FileStore, TermFile>,
    clock: MonotonicClock,
    next_token: u64,
    /// Requests and appends parked until the engine answers them.
    waiting: Waiting<Pending, AnswerTo>,
    world: World,
    answers_rx: mpsc::UnboundedReceiver<PeerAnswer>,
}

/// What the engine's actions reach: the peers, the published status, the timer. The actions are
/// carried out by [`Waiting::carry_out`], the code the simulation runs too.
struct World {
    peers: HashMap<String, String>,
    client: Arc<PeerClient>,
    runtime: tokio::runtime::Handle,
    status: watch::Sender<NodeStatus>,
    answers_tx: mpsc::UnboundedSender<PeerAnswer>,
    wake_at: u64,
}

impl Driver {
    pub(super) fn new(
        engine: Engine<FileStore, TermFile>,
        clock: MonotonicClock,
        peers: Vec<Peer>,
        client: Arc<PeerClient>,
        runtime: tokio::runtime::Handle,
        status: watch::Sender<NodeStatus>,
    ) -> Driver {
        let (answers_tx, answers_rx) = mpsc::unbounded_channel();
        let world = World { peers: peers.into_iter().map(|p| (p.id, p.addr)).collect(), client, runtime, status, answers_tx, wake_at: 0 };
        Driver { engine, clock, next_token: 1, waiting: Waiting::new(), world, answers_rx }
    }

    /// Runs until [`Input::Shutdown`] or until every sender is gone, then shuts the store.
    pub(super) fn run(mut self, inputs: mpsc::Receiver<Input>) {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_time().build() {
            Ok(rt) => rt,
            Err(e) => {
                warn!(error = %e, "no timer runtime for the dledger engine; member not running");
                return;
            }
        };
        rt.block_on(self.serve(inputs));
        let (store, _terms) = self.engine.into_parts();
        if let Err(e) = store.shutdown() {
            warn!(error = %e, "dledger store shutdown failed");
        }
    }

    async fn serve(&mut self, mut inputs: mpsc::Receiver<Input>) {
        let actions = self.engine.tick(self.clock.now_ms());
        self.carry_out(actions);
        loop {
            let wake = self.world.wake_at.saturating_sub(self.clock.now_ms());
            tokio::select! {
                biased;
                Some(answer) = self.answers_rx.recv() => {
                    let actions = self.engine.on_response(self.clock.now_ms(), answer.token, answer.result);
                    self.carry_out(actions);
                }
                input = inputs.recv() => match input {
                    None | Some(Input::Shutdown) => return,
                    Some(input) => self.take(input),
                },
                _ = tokio::time::sleep(Duration::from_millis(wake)) => {
                    let actions = self.engine.tick(self.clock.now_ms());
                    self.carry_out(actions);
                }
            }
        }
    }

    fn token(&mut self) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        token
    }

    fn take(&mut self, input: Input) {
        let now = self.clock.now_ms();
        let actions = match input {
            Input::Request { msg, reply } => {
                let token = self.token();
                self.waiting.park_request(token, reply);
                self.engine.on_request(now, token, msg)
            }
            Input::Append { bodies, answer } => {
                let token = self.token();
                self.waiting.park_proposal(token, answer);
                self.engine.propose(now, token, bodies)
            }
            Input::Transfer { transferee, answer } => {
                let token = self.token();
                self.waiting.park_request(token, Pending::LocalTransfer(answer));
                self.engine.transfer_leadership(now, token, &transferee)
            }
            Input::Get { request, reply } => {
                self.get(request, reply);
                return;
            }
            Input::Read { index, answer } => {
                let _ = answer.send(read(self.engine.log(), index));
                return;
            }
            Input::Shutdown => return,
        };
        self.carry_out(actions);
    }

    /// Java's `handleGet`: NOT_LEADER unless leading, then the store's index checks; the success
    /// answer carries only the group and the entry.
    fn get(&self, request: GetEntriesRequest, reply: Responder<GetEntriesResponse>) {
        let leader_id = self.engine.leader_id().map(str::to_owned);
        if self.engine.role() != Role::Leader {
            return reply.fail(&request.base, Code::NOT_LEADER, leader_id);
        }
        // Java unboxes a null `beginIndex` and the NullPointerException reaches the remoting layer.
        let Some(index) = request.begin_index else {
            return reply.system_error("java.lang.NullPointerException");
        };
        match read(self.engine.log(), index) {
            Ok(entry) => reply.send(GetEntriesResponse { base: Base { group: request.base.group.clone(), ..Base::default() }, entries: vec![entry] }),
            Err(code) => reply.fail(&request.base, code, leader_id),
        }
    }

    /// The engine's actions, carried out by the code the simulation runs too.
    fn carry_out(&mut self, actions: Vec<Action>) {
        let mut world = WorldOf { engine: &self.engine, world: &mut self.world };
        match self.waiting.carry_out(actions, &mut world) {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }
}

/// The world as one call's actions see it: with the engine, read to publish its status.
struct WorldOf<'a> {
    engine: &'a Engine<FileStore, TermFile>,
    world: &'a mut World,
}

impl WorldOf<'_> {
    fn publish(&self) {
        let status = NodeStatus {
            role: self.engine.role(),
            term: self.engine.term(),
            leader_id: self.engine.leader_id().map(str::to_owned),
            committed_index: self.engine.log().committed_index(),
            end_index: self.engine.log().end_index(),
        };
        self.world.status.send_if_modified(|old| {
            let changed = *old != status;
            *old = status;
            changed
        });
    }
}

impl Effects for WorldOf<'_> {
    type Request = Pending;
    type Proposal = AnswerTo;
    type Error = Infallible;

    /// A task on the server's runtime; its answer comes back on the answers queue.
    fn send(&mut self, to: String, token: u64, msg: PeerMessage) -> Result<(), Infallible> {
        let answers = self.world.answers_tx.clone();
        let Some(addr) = self.world.peers.get(&to).cloned() else {
            let _ = answers.send(PeerAnswer { token, result: Err(SendFailed) });
            return Ok(());
        };
        let client = self.world.client.clone();
        self.world.runtime.spawn(async move {
            let result = call(&client, &addr, msg).await;
            let _ = answers.send(PeerAnswer { token, result });
        });
        Ok(())
    }

    fn reply(&mut self, request: Pending, msg: PeerMessage) -> Result<(), Infallible> {
        request.answer(msg);
        Ok(())
    }

    fn answer(&mut self, _token: u64, proposal: AnswerTo, response: AppendEntryResponse, positions: Vec<i64>) -> Result<(), Infallible> {
        match proposal {
            AnswerTo::Rpc(reply) => reply.send(response),
            AnswerTo::Local(tx) => {
                let _ = tx.send(AppendOutcome { response, positions });
            }
            AnswerTo::Callback(done) => done(AppendOutcome { response, positions }),
        }
        Ok(())
    }

    fn role_changed(&mut self, role: Role, term: i64, leader_id: Option<String>) -> Result<(), Infallible> {
        info!(self_id = self.engine.self_id(), ?role, term, leader_id = ?leader_id, "dledger role changed");
        self.publish();
        Ok(())
    }

    fn committed(&mut self, _index: i64) -> Result<(), Infallible> {
        self.publish();
        Ok(())
    }

    fn wake_at(&mut self, at_ms: u64) -> Result<(), Infallible> {
        self.world.wake_at = at_ms;
        Ok(())
    }

    /// Its caller is gone (answered already, or dropped with the request).
    fn unknown(&mut self, action: &'static str, token: u64) -> Result<(), Infallible> {
        debug!(action, token, "the engine named a request or append no longer waiting");
        Ok(())
    }
}

/// Java's store read with its index checks (`indexCheck`, then DISK_ERROR for what it cannot read).
fn read(log: &FileStore, index: i64) -> Result<Entry, Code> {
    if index < 0 {
        return Err(Code::INDEX_OUT_OF_RANGE);
    }
    if index < log.begin_index() {
        return Err(Code::INDEX_LESS_THAN_LOCAL_BEGIN);
    }
    if index > log.end_index() {
        return Err(Code::INDEX_OUT_OF_RANGE);
    }
    log.get(index).ok_or(Code::DISK_ERROR)
}

/// One request to a peer and its typed answer.
async fn call(client: &PeerClient, addr: &str, msg: PeerMessage) -> Result<PeerMessage, SendFailed> {
    let result = match msg {
        PeerMessage::Vote(r) => client.call(addr, &r).await.map(PeerMessage::VoteResponse),
        PeerMessage::HeartBeat(r) => client.call(addr, &r).await.map(PeerMessage::HeartBeatResponse),
        PeerMessage::Push(r) => client.call(addr, &r).await.map(PeerMessage::PushResponse),
        PeerMessage::LeadershipTransfer(r) => client.call(addr, &r).await.map(PeerMessage::LeadershipTransferResponse),
        other => {
            warn!(msg = ?other, "the engine asked to send a response as a request");
            return Err(SendFailed);
        }
    };
    result.map_err(|e| {
        debug!(error = %e, "peer call failed");
        SendFailed
    })
}
