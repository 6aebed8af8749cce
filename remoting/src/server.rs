//! The server: accept loop, one [`connection`](crate::connection) per socket, and the dispatcher
//! that maps each request code to a processor and the bounded pool it runs on. Besides sockets, a
//! server serves any byte stream handed to [`RemotingServer::serve_stream`] (one end of a
//! `tokio::io::duplex`, so tests drive it in-process), with the same bounds, listener and metrics;
//! [`RemotingServer::in_process`] is a server with no socket at all.
//!
//! Request path: frame -> registry lookup by code -> unknown code: REQUEST_CODE_NOT_SUPPORTED;
//! processor rejects or pool full (by jobs or bytes): SYSTEM_BUSY -> otherwise run on the pool ->
//! response through [`Reply`] (the request's opaque and serialize type), unless it was oneway.
//! A processor that answers later keeps a [`Reply`] made from the request.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::code::{RequestCode, ResponseCode};
use crate::command::{RemotingCommand, SerializeType, CURRENT_VERSION, FLAG_RESPONSE};
use crate::connection::{self, ConnectionConfig, Endpoints, InFlight, InboundHandler, Side};
use crate::header::HeaderError;
use crate::metrics::rpc::{RpcRecord, RpcResult, SharedRpcObserver};
use crate::pool::{BusinessPool, Refusal};

pub use crate::connection::Channel;

/// A failed request, turned into a response with this code and remark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessError {
    pub code: ResponseCode,
    pub remark: String,
}

impl ProcessError {
    pub fn new(code: ResponseCode, remark: impl Into<String>) -> Self {
        ProcessError { code, remark: remark.into() }
    }

    pub fn system(remark: impl Into<String>) -> Self {
        ProcessError::new(ResponseCode::SYSTEM_ERROR, remark)
    }
}

impl From<HeaderError> for ProcessError {
    fn from(e: HeaderError) -> Self {
        ProcessError::system(e.to_string())
    }
}

/// `Ok(Some(response))` answers now; `Ok(None)` means answered later (or never, for oneway
/// requests), through a [`Reply`] the processor made from the request; `Err` becomes an error
/// response.
pub type ProcessResult = Result<Option<RemotingCommand>, ProcessError>;

pub trait RequestProcessor: Send + Sync + 'static {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult;

    /// Java's `rejectRequest()`: when true, the request is answered SYSTEM_BUSY without running.
    fn reject(&self) -> bool {
        false
    }

    /// Whether every answer of this processor is small (a header and no body, as a send's): its
    /// requests then count against the connection's small-answer limit, not the count that bounds
    /// large answers ([`InFlight::answer_is_small`]), so pipelined sends do not pause the reading
    /// of the pulls behind them.
    fn answers_are_small(&self) -> bool {
        false
    }

    /// Whether a request with this code may run where it was read, on the connection's reader
    /// (an async runtime thread), when its pool is idle ([`BusinessPool::run_in_place`]): only
    /// for processing that never blocks, that is CPU work and memory, with any answer that
    /// depends on the disk, a replica or a timer sent later through a [`Reply`].
    fn runs_in_place(&self, _request: &RemotingCommand) -> bool {
        false
    }
}

/// Told when connections go away, e.g. so the name server can forget a broker at once.
pub trait ConnectionListener: Send + Sync + 'static {
    fn on_close(&self, channel: &Channel);
}

#[derive(Clone)]
struct Route {
    processor: Arc<dyn RequestProcessor>,
    pool: Arc<BusinessPool>,
}

/// Which processor and pool serve which request code. Registering is one line per code.
#[derive(Default)]
pub struct ProcessorRegistry {
    routes: HashMap<i32, Route>,
    default: Option<Route>,
    listener: Option<Arc<dyn ConnectionListener>>,
    rpc_observer: Option<SharedRpcObserver>,
}

impl ProcessorRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, code: RequestCode, processor: Arc<dyn RequestProcessor>, pool: &Arc<BusinessPool>) {
        self.routes.insert(code.0, Route { processor, pool: pool.clone() });
    }

    /// The processor for codes without their own entry (Java's default processor). Codes it
    /// does not know should be answered with [`not_supported`].
    pub fn set_default(&mut self, processor: Arc<dyn RequestProcessor>, pool: &Arc<BusinessPool>) {
        self.default = Some(Route { processor, pool: pool.clone() });
    }

    pub fn set_connection_listener(&mut self, listener: Arc<dyn ConnectionListener>) {
        self.listener = Some(listener);
    }

    /// Who is told of every response the server sends (see [`Reply::send`]).
    pub fn set_rpc_observer(&mut self, observer: SharedRpcObserver) {
        self.rpc_observer = Some(observer);
    }

    /// The same processors, pools and listener, without `codes`: Java's broker serves its fast
    /// (VIP) port this way, everything but pulls.
    pub fn clone_without(&self, codes: &[RequestCode]) -> ProcessorRegistry {
        ProcessorRegistry {
            routes: self.routes.iter().filter(|(code, _)| !codes.iter().any(|c| c.0 == **code)).map(|(code, route)| (*code, route.clone())).collect(),
            default: self.default.clone(),
            listener: self.listener.clone(),
            rpc_observer: self.rpc_observer.clone(),
        }
    }

    /// The same processors, pools and listener for `codes` only; any other code is not
    /// supported (the proxy's remoting port serves a broker's codes this way).
    pub fn clone_only(&self, codes: &[RequestCode]) -> ProcessorRegistry {
        ProcessorRegistry {
            routes: self.routes.iter().filter(|(code, _)| codes.iter().any(|c| c.0 == **code)).map(|(code, route)| (*code, route.clone())).collect(),
            default: None,
            listener: self.listener.clone(),
            rpc_observer: self.rpc_observer.clone(),
        }
    }

    /// Serves each of `codes` with `wrap` of its processor, on the same pool (the proxy's remoting
    /// port checks a send's message type before the broker's send processor runs).
    pub fn wrap(&mut self, codes: &[RequestCode], wrap: impl Fn(Arc<dyn RequestProcessor>) -> Arc<dyn RequestProcessor>) {
        for code in codes {
            if let Some(route) = self.routes.get_mut(&code.0) {
                route.processor = wrap(route.processor.clone());
            }
        }
    }

    fn pools(&self) -> Vec<Arc<BusinessPool>> {
        let mut pools: Vec<Arc<BusinessPool>> = Vec::new();
        for route in self.routes.values().chain(self.default.iter()) {
            if !pools.iter().any(|p| Arc::ptr_eq(p, &route.pool)) {
                pools.push(route.pool.clone());
            }
        }
        pools
    }
}

/// Java's answer to an unknown request code.
pub fn not_supported(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::error_response(request, ResponseCode::REQUEST_CODE_NOT_SUPPORTED, format!(" request type {} not supported", request.code))
}

const BUSY_REJECT_REMARK: &str = "[REJECTREQUEST]system busy, start flow control for a while";
const BUSY_OVERLOAD_REMARK: &str = "[OVERLOAD]system busy, start flow control for a while";

/// The remark of a request its pool did not run: full (Java's `NettyRemotingAbstract`), or taken
/// out of the queue by the broker's fast failure (Java's `BrokerFastFailure`, word for word).
pub fn refusal_remark(why: Refusal) -> String {
    match why {
        Refusal::Full | Refusal::ShutDown => BUSY_OVERLOAD_REMARK.to_owned(),
        Refusal::WaitedTooLong { waited_ms, queued } => {
            format!("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {waited_ms}ms, size of queue: {queued}")
        }
        Refusal::Evicted { waited_ms, queued } => {
            format!("[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {waited_ms}ms, size of queue: {queued}")
        }
    }
}

struct Dispatcher {
    registry: ProcessorRegistry,
    /// Limits of each connection, and how many may be open at once.
    connection_config: ConnectionConfig,
    max_connections: usize,
    connections: Mutex<HashMap<u64, Channel>>,
    /// Once set, requests still arriving on open connections are no longer read into pools.
    draining: CancellationToken,
}

/// The answer to one request, to be given now or later: the channel plus what a response takes
/// from its request (opaque, serialize type, oneway). Create it before the request moves, e.g.
/// into a long-poll table or a flush callback; [`Reply::send`] consumes it, so a request is
/// answered at most once. Every response the server sends goes through here.
#[derive(Debug)]
pub struct Reply {
    channel: Channel,
    opaque: i32,
    serialize_type: SerializeType,
    oneway: bool,
    /// For the request-latency record: the request's code, when it arrived, whether it was parked.
    request_code: i32,
    started: std::time::Instant,
    long_polling: bool,
}

impl Reply {
    pub fn to(channel: &Channel, request: &RemotingCommand) -> Reply {
        Reply {
            channel: channel.clone(),
            opaque: request.opaque,
            serialize_type: request.serialize_type,
            oneway: request.is_oneway(),
            request_code: request.code,
            started: std::time::Instant::now(),
            long_polling: false,
        }
    }

    /// The request arrived at `started` (a reply made after the request waited, e.g. parked).
    pub fn since(mut self, started: std::time::Instant) -> Reply {
        self.started = started;
        self
    }

    /// The request was parked before this answer (Java's `isSuspended`, the `is_long_polling` label).
    pub fn after_long_polling(mut self) -> Reply {
        self.long_polling = true;
        self
    }

    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    pub fn opaque(&self) -> i32 {
        self.opaque
    }

    pub fn is_oneway(&self) -> bool {
        self.oneway
    }

    /// Sends `response` with the request's opaque and serialize type and the RESPONSE flag;
    /// nothing for a oneway request. A closed connection drops it (the requester has gone).
    pub fn send(self, mut response: RemotingCommand) {
        let code = response.code;
        if self.oneway {
            return self.record(code, RpcResult::Oneway);
        }
        response.opaque = self.opaque;
        response.flag |= FLAG_RESPONSE;
        response.serialize_type = self.serialize_type;
        let result = match self.channel.send(response) {
            Ok(()) => RpcResult::Success,
            Err(e) => {
                debug!(error = %e, "response not sent");
                RpcResult::WriteChannelFailed
            }
        };
        self.record(code, result);
    }

    fn record(&self, response_code: i32, result: RpcResult) {
        if let Some(observer) = self.channel.rpc_observer() {
            let record = RpcRecord { request_code: self.request_code, response_code, long_polling: self.long_polling, result, elapsed: self.started.elapsed() };
            observer.on_rpc(&record);
        }
    }

    /// Answers with `code` and `remark`.
    pub fn error(self, code: ResponseCode, remark: impl Into<String>) {
        let response = RemotingCommand { code: code.0, version: CURRENT_VERSION, remark: Some(remark.into()), ..Default::default() };
        self.send(response);
    }
}

impl InboundHandler for Dispatcher {
    fn on_request(&self, channel: &Channel, request: RemotingCommand, mut in_flight: InFlight) {
        if self.draining.is_cancelled() {
            return;
        }
        let reply = Reply::to(channel, &request);
        let code = request.code;
        let Some(route) = self.registry.routes.get(&code).or(self.registry.default.as_ref()).cloned() else {
            warn!(code, "request code not supported");
            return reply.send(not_supported(&request));
        };
        if route.processor.reject() {
            return reply.error(ResponseCode::SYSTEM_BUSY, BUSY_REJECT_REMARK);
        }
        if route.processor.answers_are_small() {
            in_flight.answer_is_small();
        }
        let processor = route.processor.clone();
        let in_place = processor.runs_in_place(&request);
        let job_bytes = in_flight.bytes();
        let busy = Reply::to(channel, &request);
        let job = move || {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| processor.process(reply.channel(), request)));
            match outcome {
                Ok(Ok(Some(response))) => reply.send(response),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => reply.error(e.code, e.remark),
                Err(_) => {
                    error!(code, "processor panicked");
                    reply.error(ResponseCode::SYSTEM_ERROR, "internal error while processing the request");
                }
            }
            // The request is finished: its bytes no longer hold the reader back.
            drop(in_flight);
        };
        // Run to completion on the reader's thread when the processor never blocks and its pool
        // would start the job at once anyway: no hand-off to a worker and back.
        if in_place {
            if let Some(place) = route.pool.run_in_place() {
                job();
                drop(place);
                return;
            }
        }
        let pool = route.pool.clone();
        let refuse = move |why: Refusal| {
            if matches!(why, Refusal::Full | Refusal::ShutDown) {
                warn!(code, pool = pool.name(), ?why, "pool cannot take the request; answering SYSTEM_BUSY");
            }
            busy.error(ResponseCode::SYSTEM_BUSY, refusal_remark(why));
        };
        let _ = route.pool.try_execute_or_refuse(job_bytes, job, refuse);
    }

    fn on_close(&self, channel: &Channel) {
        self.connections.lock().remove(&channel.id());
        if let Some(listener) = &self.registry.listener {
            listener.on_close(channel);
        }
    }
}

/// Connections a server serves at once by default. Java has no cap and accepts until it runs out
/// of file descriptors, which then also locks out the admin tools and the name server's brokers.
/// 10,000 is far above what one broker or name server serves (each client process holds one
/// connection to it) and below the usual 65,536-descriptor limit, so a connection flood meets
/// this cap first and accept keeps working.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// Server settings: where to listen and the per-connection limits.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen_addr: SocketAddr,
    pub connection: ConnectionConfig,
    /// How long a graceful shutdown waits for queued requests to finish.
    pub drain_timeout: Duration,
    /// Past this many open connections a new one is closed as soon as it is accepted.
    pub max_connections: usize,
}

impl ServerConfig {
    pub fn new(listen_addr: SocketAddr) -> Self {
        ServerConfig { listen_addr, connection: ConnectionConfig::default(), drain_timeout: Duration::from_secs(10), max_connections: DEFAULT_MAX_CONNECTIONS }
    }
}

/// A running server. Dropping it does not stop it; call [`RemotingServer::shutdown`].
pub struct RemotingServer {
    local_addr: SocketAddr,
    dispatcher: Arc<Dispatcher>,
    stop_accepting: CancellationToken,
    /// None for an in-process server, which has no socket.
    accept_task: Option<JoinHandle<()>>,
    drain_timeout: Duration,
}

impl RemotingServer {
    /// Binds and starts accepting. Must be called inside a tokio runtime.
    pub async fn start(config: ServerConfig, registry: ProcessorRegistry) -> std::io::Result<RemotingServer> {
        let listener = TcpListener::bind(config.listen_addr).await?;
        let local_addr = listener.local_addr()?;
        let mut server = RemotingServer::in_process(ServerConfig { listen_addr: local_addr, ..config }, registry);
        server.accept_task = Some(tokio::spawn(accept_loop(listener, server.dispatcher.clone(), server.stop_accepting.clone())));
        info!(%local_addr, "remoting server listening");
        Ok(server)
    }

    /// A server that listens on no socket and serves only the streams given to
    /// [`RemotingServer::serve_stream`]; `config.listen_addr` is the local address its
    /// connections report.
    pub fn in_process(config: ServerConfig, registry: ProcessorRegistry) -> RemotingServer {
        let dispatcher = Arc::new(Dispatcher {
            registry,
            connection_config: config.connection,
            max_connections: config.max_connections,
            connections: Mutex::new(HashMap::new()),
            draining: CancellationToken::new(),
        });
        RemotingServer {
            local_addr: config.listen_addr,
            dispatcher,
            stop_accepting: CancellationToken::new(),
            accept_task: None,
            drain_timeout: config.drain_timeout,
        }
    }

    /// Serves one connection over `stream` (e.g. one end of `tokio::io::duplex`) as if accepted
    /// from `peer`: the same dispatcher, per-connection bounds, idle close, connection listener
    /// and metrics observer as a socket's, and counted against `max_connections` (past it the
    /// stream is dropped, as an accepted socket is closed, and the error says so). Must be called
    /// inside a tokio runtime.
    pub fn serve_stream<S>(&self, stream: S, peer: SocketAddr) -> std::io::Result<Channel>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        self.acceptor().serve_stream(stream, peer)
    }

    /// Serves one end of a [`connection::command_pipe`] (commands handed over unencoded) as a
    /// connection from `peer`, as [`RemotingServer::serve_stream`] serves a byte stream.
    pub fn serve_commands(&self, pipe: connection::CommandPipe, peer: SocketAddr) -> std::io::Result<Channel> {
        self.acceptor().serve_commands(pipe, peer)
    }

    /// A handle that serves in-process streams as this server's connections (`serve_stream`),
    /// for what lives beside the server and outlives the borrow (the broker's gRPC front).
    pub fn acceptor(&self) -> StreamAcceptor {
        StreamAcceptor { dispatcher: self.dispatcher.clone(), local_addr: self.local_addr }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Open connections right now.
    pub fn channels(&self) -> Vec<Channel> {
        self.dispatcher.connections.lock().values().cloned().collect()
    }

    pub fn connection_count(&self) -> usize {
        self.dispatcher.connections.lock().len()
    }

    /// Bytes queued for writing, over every open connection.
    pub fn queued_outbound_bytes(&self) -> usize {
        self.dispatcher.connections.lock().values().map(Channel::queued_outbound_bytes).sum()
    }

    /// Bytes of requests read and not yet finished, over every open connection.
    pub fn in_flight_bytes(&self) -> usize {
        self.dispatcher.connections.lock().values().map(Channel::in_flight_bytes).sum()
    }

    /// Graceful shutdown: stop accepting and reading new requests, let the pools finish what they
    /// hold (their responses are written), then close every connection.
    pub async fn shutdown(self) {
        self.stop_accepting.cancel();
        if let Some(accept_task) = self.accept_task {
            let _ = accept_task.await;
        }
        self.dispatcher.draining.cancel();
        let pools = self.dispatcher.registry.pools();
        let drain = tokio::task::spawn_blocking(move || pools.iter().for_each(|p| p.shutdown()));
        if tokio::time::timeout(self.drain_timeout, drain).await.is_err() {
            warn!("requests still running after {:?}; closing connections anyway", self.drain_timeout);
        }
        let open: Vec<Channel> = self.dispatcher.connections.lock().values().cloned().collect();
        for channel in open {
            channel.close();
        }
        info!(local_addr = %self.local_addr, "remoting server stopped");
    }
}

async fn accept_loop(listener: TcpListener, dispatcher: Arc<Dispatcher>, stop: CancellationToken) {
    let max_connections = dispatcher.max_connections;
    let mut refused = RefusalLog::default();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.cancelled() => return,
        };
        match accepted {
            Ok((stream, peer)) if dispatcher.connections.lock().len() >= max_connections => {
                drop(stream);
                refused.note(peer, max_connections);
            }
            Ok((stream, peer)) => serve(stream, peer, &dispatcher),
            Err(e) => {
                // Typically EMFILE; back off instead of spinning.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn serve(stream: TcpStream, peer: SocketAddr, dispatcher: &Arc<Dispatcher>) {
    match connection::spawn(stream, &dispatcher.connection_config, Side::Server, dispatcher.clone()) {
        Ok(channel) => {
            debug!(%peer, "connection accepted");
            dispatcher.admit(&channel);
        }
        Err(e) => debug!(%peer, error = %e, "connection lost while setting up"),
    }
}

impl Dispatcher {
    /// Lists a new connection and gives it the metrics observer.
    fn admit(&self, channel: &Channel) {
        if let Some(observer) = &self.registry.rpc_observer {
            channel.set_rpc_observer(observer.clone());
        }
        let mut connections = self.connections.lock();
        connections.insert(channel.id(), channel.clone());
        // It may have closed before it was listed, when `on_close` found nothing to remove;
        // `closed` is set before `on_close` runs, so this catches it.
        if channel.is_closed() {
            connections.remove(&channel.id());
        }
    }
}

/// Warns about refused connections at most once per interval, with how many there were, so a
/// connection flood cannot flood the log too.
#[derive(Default)]
struct RefusalLog {
    last_warning: Option<std::time::Instant>,
    unreported: u64,
}

impl RefusalLog {
    const INTERVAL: Duration = Duration::from_secs(10);

    fn note(&mut self, peer: SocketAddr, max_connections: usize) {
        self.unreported += 1;
        if self.last_warning.is_some_and(|at| at.elapsed() < Self::INTERVAL) {
            return;
        }
        warn!(%peer, max_connections, refused = self.unreported, "too many connections; closing new ones at once");
        self.last_warning = Some(std::time::Instant::now());
        self.unreported = 0;
    }
}

/// Serves in-process streams as connections of a [`RemotingServer`] (see
/// [`RemotingServer::serve_stream`]); cloned from the server by [`RemotingServer::acceptor`].
#[derive(Clone)]
pub struct StreamAcceptor {
    dispatcher: Arc<Dispatcher>,
    local_addr: SocketAddr,
}

impl StreamAcceptor {
    /// The server's address (the local end of the connections it serves).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// As [`RemotingServer::serve_stream`].
    pub fn serve_stream<S>(&self, stream: S, peer: SocketAddr) -> std::io::Result<Channel>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        self.admit(peer, |endpoints, config, handler| connection::spawn_stream(stream, endpoints, config, Side::Server, handler))
    }

    /// Serves one end of a [`connection::command_pipe`] as a connection from `peer`: as
    /// [`StreamAcceptor::serve_stream`], with the commands handed over as they are, not encoded.
    pub fn serve_commands(&self, pipe: connection::CommandPipe, peer: SocketAddr) -> std::io::Result<Channel> {
        self.admit(peer, |endpoints, config, handler| connection::spawn_commands(pipe, endpoints, config, Side::Server, handler))
    }

    fn admit(&self, peer: SocketAddr, spawn: impl FnOnce(Endpoints, &ConnectionConfig, Arc<dyn InboundHandler>) -> Channel) -> std::io::Result<Channel> {
        let dispatcher = &self.dispatcher;
        if dispatcher.connections.lock().len() >= dispatcher.max_connections {
            let refused = format!("{} connections open, the most this server takes", dispatcher.max_connections);
            return Err(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, refused));
        }
        let endpoints = Endpoints { remote: peer, local: self.local_addr };
        let channel = spawn(endpoints, &dispatcher.connection_config, dispatcher.clone());
        dispatcher.admit(&channel);
        Ok(channel)
    }
}
