//! The serving side: DLedger's request codes on a remoting server, as `DLedgerRpcNettyService`
//! and `DLedgerServer` (0.3.1.2) answer them.
//!
//! Per request, on the pool it was registered with:
//! 1. the body is decoded ([`crate::wire`]); a body Java could not parse either is answered as
//!    Java's remoting layer answers the exception: SYSTEM_ERROR (1) with a remark, no body;
//! 2. the member checks every Java handler starts with: `remoteId` must be this node
//!    (else UNKNOWN_MEMBER 401), then `group` this group (else UNKNOWN_GROUP 400). The error
//!    answer is Java's: the request's base fields copied, the code, and `leaderId` = the leader
//!    this node believes in ([`DLedgerHandler::leader_id`]), other fields at their defaults;
//! 3. the request goes to [`DLedgerHandler::handle`] with a [`Responder`] for its answer, now or
//!    later. Every answer has remoting code 200 (DLedger's SUCCESS); the outcome is the body's
//!    `code`.
//!
//! PULL (51003) is registered, as in Java, and never served: Java's `handlePull` returns null,
//! `processRequest` dereferences it, and the remoting layer answers the NullPointerException with
//! SYSTEM_ERROR. We answer the same (after the same body parse), without asking the handler.
//! Codes DLedger never registered are the remoting layer's: REQUEST_CODE_NOT_SUPPORTED.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;

use remoting::command::CURRENT_VERSION;
use remoting::pool::BusinessPool;
use remoting::server::{Channel, ProcessError, ProcessResult, ProcessorRegistry, RemotingServer, Reply, RequestProcessor, ServerConfig};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tracing::debug;

use super::{RpcRequest, RpcResponse};
use crate::protocol::*;
use crate::wire::{decode, encode, PullEntriesRequest};

/// Who this node is: the two things every request is checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub group: String,
    pub self_id: String,
}

/// The answer to one DLedger request, given once, now or later (it may move into the engine).
/// [`Responder::send`] consumes it. Dropped unsent, the request is never answered and the
/// requester times out, as when a Java handler's future completes exceptionally.
pub struct Responder<R: RpcResponse> {
    reply: Option<Reply>,
    _response: PhantomData<fn(R)>,
}

impl<R: RpcResponse> std::fmt::Debug for Responder<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder").field("reply", &self.reply).finish()
    }
}

impl<R: RpcResponse> Responder<R> {
    fn new(reply: Reply) -> Self {
        Responder { reply: Some(reply), _response: PhantomData }
    }

    /// The connection the request came on.
    pub fn channel(&self) -> Option<&Channel> {
        self.reply.as_ref().map(Reply::channel)
    }

    /// Answers with `response`: remoting code 200, the body its JSON.
    pub fn send(mut self, response: R) {
        if let Some(reply) = self.reply.take() {
            reply.send(dledger_response(&response));
        }
    }

    /// What Java's remoting layer answers when a handler throws something other than a
    /// `DLedgerException` (a NullPointerException on a missing field): SYSTEM_ERROR, the remark,
    /// no body.
    pub fn system_error(mut self, remark: impl Into<String>) {
        if let Some(reply) = self.reply.take() {
            reply.error(ResponseCode::SYSTEM_ERROR, remark);
        }
    }

    /// Java's error answer (`copyBaseInfo(request)`, the code, `leaderId`): the request's base
    /// fields, `code`, and the leader this node believes in; the rest at Java's defaults.
    pub fn fail(self, request: &Base, code: Code, leader_id: Option<String>) {
        let base = Base { code, leader_id, ..request.clone() };
        self.send(R::with_base(base));
    }
}

impl<R: RpcResponse> Drop for Responder<R> {
    fn drop(&mut self) {
        if let Some(reply) = &self.reply {
            if !reply.is_oneway() {
                debug!(opaque = reply.opaque(), "DLedger request dropped unanswered; the requester will time out");
            }
        }
    }
}

/// The remoting frame of a DLedger answer: code 200 always, the body its JSON.
fn dledger_response<R: RpcResponse>(response: &R) -> RemotingCommand {
    RemotingCommand { code: Code::SUCCESS.0, version: CURRENT_VERSION, ..Default::default() }.with_body(encode(response))
}

/// One request that passed the member checks, with the means to answer it.
#[derive(Debug)]
pub enum Call {
    Metadata(MetadataRequest, Responder<MetadataResponse>),
    Append(AppendEntryRequest, Responder<AppendEntryResponse>),
    Get(GetEntriesRequest, Responder<GetEntriesResponse>),
    Vote(VoteRequest, Responder<VoteResponse>),
    HeartBeat(HeartBeatRequest, Responder<HeartBeatResponse>),
    Push(PushEntryRequest, Responder<PushEntryResponse>),
    LeadershipTransfer(LeadershipTransferRequest, Responder<LeadershipTransferResponse>),
}

impl Call {
    /// The request code's name (`DLedgerRequestCode`).
    pub fn name(&self) -> &'static str {
        match self {
            Call::Metadata(..) => MetadataRequest::NAME,
            Call::Append(..) => AppendEntryRequest::NAME,
            Call::Get(..) => GetEntriesRequest::NAME,
            Call::Vote(..) => VoteRequest::NAME,
            Call::HeartBeat(..) => HeartBeatRequest::NAME,
            Call::Push(..) => PushEntryRequest::NAME,
            Call::LeadershipTransfer(..) => LeadershipTransferRequest::NAME,
        }
    }

    /// The request's base fields.
    pub fn base(&self) -> &Base {
        match self {
            Call::Metadata(r, _) => &r.base,
            Call::Append(r, _) => &r.base,
            Call::Get(r, _) => &r.base,
            Call::Vote(r, _) => &r.base,
            Call::HeartBeat(r, _) => &r.base,
            Call::Push(r, _) => &r.base,
            Call::LeadershipTransfer(r, _) => &r.base,
        }
    }
}

/// What answers the DLedger requests of one member: the engine's driver.
pub trait DLedgerHandler: Send + Sync + 'static {
    /// The leader this node believes in now (`MemberState.getLeaderId`), for the error answers
    /// the transport gives itself.
    fn leader_id(&self) -> Option<String>;

    /// A request addressed to this member of this group. Runs on the server's pool: answer
    /// through the responder now, or keep it and answer later; do not block.
    fn handle(&self, call: Call);
}

struct DLedgerProcessor {
    member: Member,
    handler: Arc<dyn DLedgerHandler>,
}

/// Every code Java's `DLedgerRpcNettyService.registerProcessor` registers.
pub const REGISTERED_CODES: [i32; 8] = [
    request_code::METADATA,
    request_code::APPEND,
    request_code::GET,
    request_code::PULL,
    request_code::PUSH,
    request_code::VOTE,
    request_code::HEART_BEAT,
    request_code::LEADERSHIP_TRANSFER,
];

/// Registers DLedger's request codes on `registry`, served by `handler` as `member` on `pool`.
pub fn register(registry: &mut ProcessorRegistry, member: Member, handler: Arc<dyn DLedgerHandler>, pool: &Arc<BusinessPool>) {
    let processor: Arc<dyn RequestProcessor> = Arc::new(DLedgerProcessor { member, handler });
    for code in REGISTERED_CODES {
        registry.register(RequestCode(code), processor.clone(), pool);
    }
}

/// The remark of Java's answer to PULL: `exceptionSimpleDesc` of the NullPointerException thrown
/// where `processRequest` dereferences `handlePull`'s null future, as 0.3.1.2 on JDK 17 writes it
/// (with remoting 4.9.4 and 5.3.3 alike; JDK 8 has no message after the class name).
pub const PULL_REMARK: &str = "java.lang.NullPointerException: Cannot invoke \"java.util.concurrent.CompletableFuture.whenCompleteAsync(java.util.function.BiConsumer, java.util.concurrent.Executor)\" because \"future\" is null, io.openmessaging.storage.dledger.DLedgerRpcNettyService.processRequest(DLedgerRpcNettyService.java:356)";

impl DLedgerProcessor {
    fn serve<Q: RpcRequest>(&self, request: &RemotingCommand, reply: Reply, wrap: fn(Q, Responder<Q::Response>) -> Call) -> ProcessResult {
        let body: Q = decode(request.body_bytes()).map_err(|e| ProcessError::system(e.to_string()))?;
        let responder = Responder::new(reply);
        let base = body.base();
        if base.remote_id.as_deref() != Some(self.member.self_id.as_str()) {
            debug!(code = Q::NAME, remote_id = ?base.remote_id, self_id = %self.member.self_id, "request for another member");
            responder.fail(base, Code::UNKNOWN_MEMBER, self.handler.leader_id());
            return Ok(None);
        }
        if base.group != self.member.group {
            debug!(code = Q::NAME, group = %base.group, "request for another group");
            responder.fail(base, Code::UNKNOWN_GROUP, self.handler.leader_id());
            return Ok(None);
        }
        self.handler.handle(wrap(body, responder));
        Ok(None)
    }
}

impl RequestProcessor for DLedgerProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let reply = Reply::to(channel, &request);
        match request.code {
            request_code::METADATA => self.serve(&request, reply, Call::Metadata),
            request_code::APPEND => self.serve(&request, reply, Call::Append),
            request_code::GET => self.serve(&request, reply, Call::Get),
            request_code::VOTE => self.serve(&request, reply, Call::Vote),
            request_code::HEART_BEAT => self.serve(&request, reply, Call::HeartBeat),
            request_code::PUSH => self.serve(&request, reply, Call::Push),
            request_code::LEADERSHIP_TRANSFER => self.serve(&request, reply, Call::LeadershipTransfer),
            request_code::PULL => {
                // fastjson parses a missing body to null, which fails the same way.
                if !request.body_bytes().is_empty() {
                    decode::<PullEntriesRequest>(request.body_bytes()).map_err(|e| ProcessError::system(e.to_string()))?;
                }
                Err(ProcessError::system(PULL_REMARK))
            }
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

/// The threads of the pool DLedger's requests run on: Java registers them without an executor,
/// so they run on the remoting server's public executor, 4 threads by default.
pub const POOL_THREADS: usize = 4;
/// Jobs the pool queues before answering SYSTEM_BUSY (Java's queue is unbounded): room for a
/// leader's 1 000 pushes in flight from each of many followers, plus votes and heartbeats.
pub const POOL_QUEUE_CAPACITY: usize = 16_384;

/// A remoting server of its own serving one member, as `DLedgerRpcNettyService` listens on the
/// port of `selfId` in `peers`.
pub struct DLedgerRpcServer {
    server: RemotingServer,
}

impl DLedgerRpcServer {
    /// Binds `listen_addr` and serves `member` with `handler`. Must be called inside a tokio runtime.
    pub async fn start(listen_addr: SocketAddr, member: Member, handler: Arc<dyn DLedgerHandler>) -> std::io::Result<DLedgerRpcServer> {
        let pool = Arc::new(BusinessPool::new("DLedgerRpc", POOL_THREADS, POOL_QUEUE_CAPACITY)?);
        let mut registry = ProcessorRegistry::new();
        register(&mut registry, member, handler, &pool);
        let server = RemotingServer::start(ServerConfig::new(listen_addr), registry).await?;
        Ok(DLedgerRpcServer { server })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn remoting(&self) -> &RemotingServer {
        &self.server
    }

    /// Stops accepting, lets the requests in the pool finish, closes the connections.
    pub async fn shutdown(self) {
        self.server.shutdown().await
    }
}
