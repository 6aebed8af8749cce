//! A DLedger member as a running service, Java's `DLedgerServer`: the pure [`Engine`] on a thread
//! of its own ([`driver`]), fed by the RPC server ([`handler`]), its peers' answers, local appends
//! and its timer, over the [`FileStore`] and its `currterm` file.
//!
//! Nothing waits per request: an RPC's [`Responder`](crate::rpc::Responder) or a local caller's
//! channel is parked with the engine's token and answered when the engine says so (a quorum
//! acknowledged, a vote was decided, a parked push was applied).

mod driver;
mod handler;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::info;

use crate::config::{DLedgerConfig, Peer, PeersError};
use crate::engine::{Engine, EngineError, Role};
use crate::entry::Entry;
use crate::protocol::{AppendEntryResponse, Code, LeadershipTransferResponse};
use crate::rpc::{DLedgerRpcServer, Member, PeerClient, PeerClientConfig};
use crate::store::{FileStore, StoreError, TermFile};

use driver::Input;

/// Inputs queued for the engine's thread before new requests are refused: RPCs from peers and
/// clients and local appends (peers' answers have a queue of their own, bounded by the requests
/// in flight).
pub const INPUT_QUEUE_CAPACITY: usize = 16_384;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Peers(#[from] PeersError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("cannot start the engine thread: {0}")]
    Thread(std::io::Error),
}

/// What the member is now, as its role-change handler would learn it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    pub role: Role,
    pub term: i64,
    /// The leader it follows (itself when leading; none while a candidate).
    pub leader_id: Option<String>,
    pub committed_index: i64,
    pub end_index: i64,
}

/// The answer to a local append: the engine's response and the pos of every entry appended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    pub response: AppendEntryResponse,
    pub positions: Vec<i64>,
}

/// The member stopped before it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the DLedger member is shut down")]
pub struct Stopped;

/// Why [`NodeHandle::try_append`] did not take an append.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AppendRefused {
    #[error("the DLedger member's input queue is full")]
    QueueFull,
    #[error("the DLedger member is shut down")]
    Stopped,
}

/// How in-process callers (the broker's commit log) talk to a running member. Cheap to clone.
#[derive(Clone)]
pub struct NodeHandle {
    inputs: mpsc::Sender<Input>,
    status: watch::Receiver<NodeStatus>,
}

impl NodeHandle {
    /// Appends `bodies` as one batch when this member leads (Java's `handleAppend` with a
    /// `BatchAppendEntryRequest` for several); answered once a quorum has the last entry, or with
    /// 0.3.1.2's codes.
    pub async fn append(&self, bodies: Vec<Bytes>) -> Result<AppendOutcome, Stopped> {
        let (tx, rx) = oneshot::channel();
        self.inputs.send(Input::Append { bodies, answer: driver::AnswerTo::Local(tx) }).await.map_err(|_| Stopped)?;
        rx.await.map_err(|_| Stopped)
    }

    /// As [`NodeHandle::append`], without waiting: `done` is called on the engine's thread with the
    /// answer. Refused at once (and `done` dropped) when the input queue is full or the member
    /// stopped, so a caller never blocks here.
    pub fn try_append(&self, bodies: Vec<Bytes>, done: Box<dyn FnOnce(AppendOutcome) + Send>) -> Result<(), AppendRefused> {
        self.inputs.try_send(Input::Append { bodies, answer: driver::AnswerTo::Callback(done) }).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => AppendRefused::QueueFull,
            mpsc::error::TrySendError::Closed(_) => AppendRefused::Stopped,
        })
    }

    /// The entry at `index` of this member's log, whatever its role (no leader check: this is
    /// the in-process read, not the GET RPC). `Err(code)` as Java's store check answers.
    pub async fn read(&self, index: i64) -> Result<Result<Entry, Code>, Stopped> {
        let (tx, rx) = oneshot::channel();
        self.inputs.send(Input::Read { index, answer: tx }).await.map_err(|_| Stopped)?;
        rx.await.map_err(|_| Stopped)
    }

    /// Asks this member, the leader, to hand leadership to `transferee` (what Java's
    /// `DLedgerClient.leadershipTransfer` asks of the leader).
    pub async fn transfer_leadership(&self, transferee: &str) -> Result<LeadershipTransferResponse, Stopped> {
        let (tx, rx) = oneshot::channel();
        self.inputs.send(Input::Transfer { transferee: transferee.to_owned(), answer: tx }).await.map_err(|_| Stopped)?;
        rx.await.map_err(|_| Stopped)
    }

    pub fn status(&self) -> NodeStatus {
        self.status.borrow().clone()
    }

    /// A receiver that sees every change of role, term, leader and commit index.
    pub fn watch(&self) -> watch::Receiver<NodeStatus> {
        self.status.clone()
    }
}

/// A running member: its RPC server, its engine thread and its store.
pub struct DLedgerServer {
    handle: NodeHandle,
    rpc: DLedgerRpcServer,
    thread: Option<std::thread::JoinHandle<()>>,
    peers: Arc<PeerClient>,
    local_addr: SocketAddr,
}

impl DLedgerServer {
    /// Opens the store of `config` (recovering it) and starts the member. Must be called inside a
    /// multi-threaded tokio runtime: peer calls run on it.
    pub async fn start(config: DLedgerConfig) -> Result<DLedgerServer, ServerError> {
        let terms = TermFile::open(&config)?;
        let store = FileStore::open(&config, terms.current_term())?;
        Self::start_with(config, store, terms).await
    }

    /// Starts the member over a store the caller opened (to add append hooks first).
    pub async fn start_with(config: DLedgerConfig, store: FileStore, terms: TermFile) -> Result<DLedgerServer, ServerError> {
        let peer_list = config.peer_list()?;
        let self_addr = peer_list.iter().find(|p| p.id == config.self_id).map(|p| p.addr.clone()).unwrap_or_default();
        let listen = resolve(&self_addr).await.map_err(|source| ServerError::Listen { addr: self_addr.clone(), source })?;
        store.start()?;
        let seed = seed();
        let clock = driver::MonotonicClock::new();
        let engine = Engine::new(&config, store, terms, seed, clock.now_ms())?;
        let initial = NodeStatus {
            role: engine.role(),
            term: engine.term(),
            leader_id: engine.leader_id().map(str::to_owned),
            committed_index: crate::log::RaftLog::committed_index(engine.log()),
            end_index: crate::log::RaftLog::end_index(engine.log()),
        };
        let (status_tx, status_rx) = watch::channel(initial);
        let (inputs_tx, inputs_rx) = mpsc::channel(INPUT_QUEUE_CAPACITY);
        let peers = Arc::new(PeerClient::new(PeerClientConfig::default()));
        let handle = NodeHandle { inputs: inputs_tx, status: status_rx };
        let member = Member { group: config.group.clone(), self_id: config.self_id.clone() };
        let rpc_handler = Arc::new(handler::Handler::new(member.clone(), &peer_list, handle.clone()));
        let rpc =
            DLedgerRpcServer::start(listen, member.clone(), rpc_handler).await.map_err(|source| ServerError::Listen { addr: listen.to_string(), source })?;
        let local_addr = rpc.local_addr();
        let runtime = tokio::runtime::Handle::current();
        let driver = driver::Driver::new(engine, clock, peer_list, peers.clone(), runtime, status_tx);
        let thread =
            std::thread::Builder::new().name(format!("DLedger-{}", member.self_id)).spawn(move || driver.run(inputs_rx)).map_err(ServerError::Thread)?;
        info!(group = %member.group, self_id = %member.self_id, %local_addr, "dledger member started");
        Ok(DLedgerServer { handle, rpc, thread: Some(thread), peers, local_addr })
    }

    pub fn handle(&self) -> NodeHandle {
        self.handle.clone()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops serving, stops the engine and shuts the store (flush, checkpoint). Parked requests
    /// are dropped unanswered, as Java's shutdown leaves them.
    pub async fn shutdown(mut self) {
        self.rpc.shutdown().await;
        let _ = self.handle.inputs.send(Input::Shutdown).await;
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        self.peers.shutdown();
    }
}

/// Java listens on the port of its own entry in `peers` (on every interface); we listen on that
/// entry's address, so a member given a loopback address stays on loopback.
async fn resolve(addr: &str) -> std::io::Result<SocketAddr> {
    tokio::net::lookup_host(addr).await?.next().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("{addr} resolves to nothing")))
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// The peers as Java's `MemberState.getPeerMap` lists them.
fn peer_map(peers: &[Peer]) -> std::collections::BTreeMap<String, String> {
    peers.iter().map(|p| (p.id.clone(), p.addr.clone())).collect()
}
