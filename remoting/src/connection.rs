//! One connection, server-accepted or client-dialled: a reader task that decodes frames, a
//! single writer task that owns the stream's write half, and the table of requests this side sent
//! and still awaits (keyed by opaque). [`Channel`] is the cheap handle everyone else holds.
//!
//! The stream is any `AsyncRead + AsyncWrite` byte stream: a TCP socket ([`spawn`]) or, for
//! tests that drive a server in-process, one end of a `tokio::io::duplex` ([`spawn_stream`]).
//! What lives in the same process as the server (the broker's gRPC front) uses a
//! [`command_pipe`] instead: the same tasks carry the commands themselves, never encoded.
//! All get the same tasks, bounds and idle close.
//!
//! Memory per connection is bounded by bytes, in both directions:
//! - out: what is queued for the writer is counted from [`Channel::send`] until written. A server
//!   stops reading requests above the high water mark and resumes at the low one, so a peer that
//!   does not read cannot make us produce more answers; past the hard limit (which deferred
//!   answers and server pushes can reach) the connection is closed and its queue dropped.
//! - in: requests read and not yet finished by their processor are counted, in bytes and in
//!   number ([`InFlight`]); above either limit the reader pauses, so one pipelining client cannot
//!   park unbounded bytes in pools, nor be owed more answers than the write queue can take.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures::{Sink, SinkExt, Stream, StreamExt};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_util::codec::{Decoder, FramedRead};
use tokio_util::sync::{CancellationToken, PollSender};
use tracing::{debug, info_span, warn, Instrument};

use crate::codec::{CodecError, RemotingCodec};
use crate::command::RemotingCommand;

/// What the reader does with what it receives. Responses to our own requests never reach it.
pub trait InboundHandler: Send + Sync + 'static {
    /// A request (or oneway request) from the peer. `in_flight` is the request's place in the
    /// connection's in-flight count and bytes: keep it until the request is finished (e.g. move
    /// it into the pool job, dropped after the answer is queued), since the reader pauses while
    /// too many are held.
    fn on_request(&self, channel: &Channel, request: RemotingCommand, in_flight: InFlight);
    /// The connection is gone (peer closed, decode error, idle, or local close).
    fn on_close(&self, _channel: &Channel) {}
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ChannelError {
    #[error("connection to {0} is closed")]
    Closed(SocketAddr),
    #[error("no response from {addr} within {timeout:?} (opaque {opaque})")]
    Timeout { addr: SocketAddr, timeout: Duration, opaque: i32 },
}

pub const DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK_BYTES: usize = 8 * 1024 * 1024;
pub const DEFAULT_WRITE_BUFFER_LOW_WATER_MARK_BYTES: usize = 4 * 1024 * 1024;
pub const DEFAULT_WRITE_QUEUE_LIMIT_BYTES: usize = 64 * 1024 * 1024;
pub const DEFAULT_IN_FLIGHT_LIMIT_BYTES: usize = 64 * 1024 * 1024;
/// Requests of one connection in processing at once. The answers owed to requests already read
/// are what the write queue cannot see coming: without a count, a burst of small requests (pulls)
/// read before their large answers land can owe far past the hard limit and close a peer that
/// reads. With it, the queue stays under the high mark plus this many answers (128 pulls of
/// 256 KiB: 32 MiB, under the 64 MiB limit), and a pool thread is never short of work.
pub const DEFAULT_IN_FLIGHT_LIMIT_REQUESTS: usize = 128;
/// Requests of one connection in processing at once whose answers are small (a send's: a header
/// and no body; see [`InFlight::answer_is_small`]). They are not held to
/// [`DEFAULT_IN_FLIGHT_LIMIT_REQUESTS`], which bounds large answers: a client that pipelines 1,024
/// async sends on the connection its consumer pulls on (the Java client shares one per broker)
/// would otherwise pause the reader on sends and leave its pulls unread behind them, while Java
/// reads them into their own pool. 8,192 answers of a few hundred bytes stay far below the write
/// queue's limit.
pub const DEFAULT_IN_FLIGHT_LIMIT_SMALL_ANSWERS: usize = 8192;

/// Connection settings shared by server and client. Limits of 0 mean the default.
#[derive(Clone, Debug)]
pub struct ConnectionConfig {
    pub max_frame_bytes: usize,
    /// Close after this long without traffic in either direction (Java's 120 s idle handler).
    pub idle_timeout: Duration,
    /// Above this many bytes queued for the writer, a server stops reading the socket's requests
    /// (Netty's unwritable channel) until the queue drains to the low water mark. The broker's
    /// `writeBufferHighWaterMark` / `writeBufferLowWaterMark` map onto these two; Java's 0 there
    /// means Netty's 64/32 KiB, which only flip `isWritable`, whereas ours pause the reader, so
    /// 0 maps to our defaults (8/4 MiB).
    pub write_buffer_high_water_mark_bytes: usize,
    /// Reading resumes at or below this (clamped to the high water mark).
    pub write_buffer_low_water_mark_bytes: usize,
    /// Above this many queued bytes the peer is not reading: the connection is closed and its
    /// queue dropped. At least one maximal frame above the high water mark. Answers to what was
    /// read stay under the high mark plus `in_flight_limit_requests` answers, so what gets here
    /// is mostly deferred answers and server pushes to a peer that stopped reading.
    pub write_queue_limit_bytes: usize,
    /// The reader pauses while the requests it has read and their processors have not finished
    /// hold more than this (at least one maximal frame). A request parked to be answered later
    /// (long polling, flush or replica acks) is finished for this count and the next.
    pub in_flight_limit_bytes: usize,
    /// ... or while this many such requests are in processing (those with large answers).
    pub in_flight_limit_requests: usize,
    /// ... or while this many requests with small answers are ([`InFlight::answer_is_small`]).
    pub in_flight_limit_small_answers: usize,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            max_frame_bytes: crate::codec::DEFAULT_MAX_FRAME_BYTES,
            idle_timeout: Duration::from_secs(120),
            write_buffer_high_water_mark_bytes: DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK_BYTES,
            write_buffer_low_water_mark_bytes: DEFAULT_WRITE_BUFFER_LOW_WATER_MARK_BYTES,
            write_queue_limit_bytes: DEFAULT_WRITE_QUEUE_LIMIT_BYTES,
            in_flight_limit_bytes: DEFAULT_IN_FLIGHT_LIMIT_BYTES,
            in_flight_limit_requests: DEFAULT_IN_FLIGHT_LIMIT_REQUESTS,
            in_flight_limit_small_answers: DEFAULT_IN_FLIGHT_LIMIT_SMALL_ANSWERS,
        }
    }
}

/// The byte limits of one connection, with defaults for zeros and the clamps applied.
#[derive(Clone, Copy, Debug)]
struct Limits {
    high: usize,
    low: usize,
    hard: usize,
    in_flight: usize,
    in_flight_requests: usize,
    in_flight_small_answers: usize,
}

impl Limits {
    fn of(config: &ConnectionConfig) -> Limits {
        let or = |v: usize, default: usize| if v == 0 { default } else { v };
        let high = or(config.write_buffer_high_water_mark_bytes, DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK_BYTES);
        let low = or(config.write_buffer_low_water_mark_bytes, DEFAULT_WRITE_BUFFER_LOW_WATER_MARK_BYTES).min(high);
        let hard = or(config.write_queue_limit_bytes, DEFAULT_WRITE_QUEUE_LIMIT_BYTES).max(config.max_frame_bytes.saturating_add(high));
        let in_flight = or(config.in_flight_limit_bytes, DEFAULT_IN_FLIGHT_LIMIT_BYTES).max(config.max_frame_bytes);
        let in_flight_requests = or(config.in_flight_limit_requests, DEFAULT_IN_FLIGHT_LIMIT_REQUESTS);
        let in_flight_small_answers = or(config.in_flight_limit_small_answers, DEFAULT_IN_FLIGHT_LIMIT_SMALL_ANSWERS);
        Limits { high, low, hard, in_flight, in_flight_requests, in_flight_small_answers }
    }
}

/// Which end of the socket we are. Only a server pauses reading while its peer does not read: a
/// client must keep reading, since the responses it reads are what drain its own requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Server,
    Client,
}

/// A frame queued for the writer, with the bytes it was accounted at.
enum Outbound {
    Frame { cmd: RemotingCommand, bytes: usize },
    Close,
}

/// A writer batch stops growing at this many bytes, so its bytes are released (and a paused
/// reader resumed) while a busy queue keeps refilling.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// Process-wide request ids, as Java's JVM-wide counter.
static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(1);

pub fn next_opaque() -> i32 {
    NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed)
}

static NEXT_CHANNEL_ID: AtomicU64 = AtomicU64::new(1);

struct Shared {
    id: u64,
    remote: SocketAddr,
    local: SocketAddr,
    side: Side,
    limits: Limits,
    tx: mpsc::UnboundedSender<Outbound>,
    pending: Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>,
    closed: AtomicBool,
    /// Cancelled to end the connection now: both tasks stop and what is queued is dropped.
    abort: CancellationToken,
    /// Bytes of frames queued for the writer or in its unflushed batch.
    outbound_bytes: AtomicUsize,
    /// Bytes and number of requests read and not yet finished by their processor.
    in_flight_bytes: AtomicUsize,
    in_flight_requests: AtomicUsize,
    /// Of those, the requests whose answers are small.
    in_flight_small_answers: AtomicUsize,
    reading_paused: AtomicBool,
    /// Wakes a paused reader when a count falls to where reading may resume.
    resume: Notify,
    started: Instant,
    /// Milliseconds since `started` of the last frame read or written.
    last_activity_ms: AtomicU64,
    /// Told of each response sent on a server connection (request latency metrics).
    rpc_observer: std::sync::OnceLock<crate::metrics::rpc::SharedRpcObserver>,
}

impl Shared {
    fn release_outbound(&self, bytes: usize) {
        let before = self.outbound_bytes.fetch_sub(bytes, Ordering::AcqRel);
        if before > self.limits.low && before - bytes <= self.limits.low {
            self.resume.notify_one();
        }
    }

    fn hold_in_flight(self: &Arc<Self>, bytes: usize) -> InFlight {
        self.in_flight_bytes.fetch_add(bytes, Ordering::SeqCst);
        self.in_flight_requests.fetch_add(1, Ordering::SeqCst);
        InFlight { shared: self.clone(), bytes, small_answer: false }
    }

    fn release_in_flight(&self, bytes: usize, small_answer: bool) {
        self.in_flight_bytes.fetch_sub(bytes, Ordering::SeqCst);
        if small_answer {
            self.in_flight_small_answers.fetch_sub(1, Ordering::SeqCst);
        }
        self.in_flight_requests.fetch_sub(1, Ordering::SeqCst);
        self.resume_if_readable();
    }

    /// Wakes a paused reader that may read again. (The flag and the counts are SeqCst: a release
    /// that sees the reader not yet paused is seen by the reader's own check after it paused.)
    fn resume_if_readable(&self) {
        if self.reading_paused.load(Ordering::SeqCst) && !self.must_pause(true) {
            self.resume.notify_one();
        }
    }

    /// Whether the reader should stop before its next frame: with hysteresis for the write
    /// queue (stop above the high mark, resume at the low one), as Netty's writability.
    fn must_pause(&self, paused: bool) -> bool {
        let outbound = self.outbound_bytes.load(Ordering::Acquire);
        let write_mark = if paused { self.limits.low } else { self.limits.high };
        (self.side == Side::Server && outbound > write_mark)
            || self.in_flight_bytes.load(Ordering::SeqCst) > self.limits.in_flight
            || self.large_answers_in_flight() >= self.limits.in_flight_requests
            || self.in_flight_small_answers.load(Ordering::SeqCst) >= self.limits.in_flight_small_answers
    }

    /// Requests in processing whose answers may be large (all but the small ones).
    fn large_answers_in_flight(&self) -> usize {
        let small = self.in_flight_small_answers.load(Ordering::SeqCst);
        self.in_flight_requests.load(Ordering::SeqCst).saturating_sub(small)
    }
}

/// A request's place in its connection's in-flight count and bytes, given back when dropped.
pub struct InFlight {
    shared: Arc<Shared>,
    bytes: usize,
    small_answer: bool,
}

impl InFlight {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The request's answer is small (a header, no body: a send's): it counts against
    /// `in_flight_limit_small_answers` instead of `in_flight_limit_requests`. Call it before
    /// [`InboundHandler::on_request`] returns, as the reader decides whether to pause after that.
    pub fn answer_is_small(&mut self) {
        if !self.small_answer {
            self.small_answer = true;
            self.shared.in_flight_small_answers.fetch_add(1, Ordering::SeqCst);
            self.shared.resume_if_readable();
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared.release_in_flight(self.bytes, self.small_answer);
    }
}

/// A handle to a live connection. Clones share the connection.
#[derive(Clone)]
pub struct Channel {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Channel#{}({})", self.shared.id, self.shared.remote)
    }
}

impl PartialEq for Channel {
    fn eq(&self, other: &Self) -> bool {
        self.shared.id == other.shared.id
    }
}
impl Eq for Channel {}
impl std::hash::Hash for Channel {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.shared.id.hash(state)
    }
}

impl Channel {
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// Sets who is told of the responses sent here (once; later calls are ignored).
    pub fn set_rpc_observer(&self, observer: crate::metrics::rpc::SharedRpcObserver) {
        let _ = self.shared.rpc_observer.set(observer);
    }

    pub(crate) fn rpc_observer(&self) -> Option<&crate::metrics::rpc::SharedRpcObserver> {
        self.shared.rpc_observer.get()
    }

    pub fn remote_addr(&self) -> SocketAddr {
        self.shared.remote
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Bytes queued for the writer and not yet written.
    pub fn queued_outbound_bytes(&self) -> usize {
        self.shared.outbound_bytes.load(Ordering::Acquire)
    }

    /// Bytes of requests read from this connection that their processors have not finished.
    pub fn in_flight_bytes(&self) -> usize {
        self.shared.in_flight_bytes.load(Ordering::Acquire)
    }

    /// Requests read from this connection that their processors have not finished.
    pub fn in_flight_requests(&self) -> usize {
        self.shared.in_flight_requests.load(Ordering::Acquire)
    }

    /// Whether the reader is paused because the peer does not read or too much is in flight.
    pub fn is_reading_paused(&self) -> bool {
        self.shared.reading_paused.load(Ordering::Acquire)
    }

    /// Queues a frame for the writer. Never blocks, so it may be called from pool threads and
    /// async tasks alike. A frame that takes the queue past its hard limit closes the connection.
    pub fn send(&self, cmd: RemotingCommand) -> Result<(), ChannelError> {
        if self.is_closed() {
            return Err(ChannelError::Closed(self.shared.remote));
        }
        let shared = &self.shared;
        let bytes = crate::codec::frame_size_estimate(&cmd);
        let queued = shared.outbound_bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
        if queued > shared.limits.hard {
            shared.release_outbound(bytes);
            if !shared.abort.is_cancelled() {
                warn!(queued_bytes = queued, limit_bytes = shared.limits.hard, "peer is not reading; closing the connection and dropping its queue");
            }
            self.abort();
            return Err(ChannelError::Closed(shared.remote));
        }
        // Once the writer is gone the frame comes back here and its bytes with it.
        shared.tx.send(Outbound::Frame { cmd, bytes }).map_err(|_| {
            shared.release_outbound(bytes);
            ChannelError::Closed(shared.remote)
        })
    }

    /// Sends a request and waits for the response with the same opaque.
    pub async fn invoke(&self, mut request: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, ChannelError> {
        request.opaque = next_opaque();
        let opaque = request.opaque;
        let (done, response) = oneshot::channel();
        self.shared.pending.lock().insert(opaque, done);
        if let Err(e) = self.send(request) {
            self.shared.pending.lock().remove(&opaque);
            return Err(e);
        }
        match tokio::time::timeout(timeout, response).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(ChannelError::Closed(self.shared.remote)),
            Err(_) => {
                self.shared.pending.lock().remove(&opaque);
                Err(ChannelError::Timeout { addr: self.shared.remote, timeout, opaque })
            }
        }
    }

    /// Sends a request marked oneway; nothing comes back.
    pub fn invoke_oneway(&self, mut request: RemotingCommand) -> Result<(), ChannelError> {
        request.opaque = next_opaque();
        self.send(request.mark_oneway())
    }

    /// Closes the connection once what is already queued has been written.
    pub fn close(&self) {
        let _ = self.shared.tx.send(Outbound::Close);
    }

    /// Closes the connection now, dropping whatever is still queued.
    pub fn abort(&self) {
        self.mark_closed();
        self.shared.abort.cancel();
    }

    fn touch(&self) {
        let ms = self.shared.started.elapsed().as_millis() as u64;
        self.shared.last_activity_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.shared.last_activity_ms.load(Ordering::Relaxed));
        self.shared.started.elapsed().saturating_sub(last)
    }

    fn mark_closed(&self) {
        self.shared.closed.store(true, Ordering::Release);
    }

    fn complete(&self, response: RemotingCommand) {
        match self.shared.pending.lock().remove(&response.opaque) {
            Some(waiter) => {
                let _ = waiter.send(response);
            }
            None => debug!(opaque = response.opaque, "response for an unknown or expired request dropped"),
        }
    }
}

/// Starts the reader and writer tasks for a TCP `stream` and returns the channel.
pub fn spawn(stream: TcpStream, config: &ConnectionConfig, side: Side, handler: Arc<dyn InboundHandler>) -> std::io::Result<Channel> {
    let remote = stream.peer_addr()?;
    let local = stream.local_addr()?;
    let _ = stream.set_nodelay(true);
    // The owned halves of a socket need no lock between reader and writer.
    let (read_half, write_half) = stream.into_split();
    Ok(start_io(read_half, write_half, Endpoints { remote, local }, config, side, handler))
}

/// The addresses a connection reports as its peer's and its own. A socket has real ones; an
/// in-process stream is given them, and everything that names a peer (client tables, born
/// hosts, logs) sees these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    pub remote: SocketAddr,
    pub local: SocketAddr,
}

/// Starts the reader and writer tasks for any byte stream (e.g. one end of
/// `tokio::io::duplex`) and returns the channel: the same tasks, bounds and idle close as a
/// socket's. Must be called inside a tokio runtime.
pub fn spawn_stream<S>(stream: S, endpoints: Endpoints, config: &ConnectionConfig, side: Side, handler: Arc<dyn InboundHandler>) -> Channel
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (read_half, write_half) = tokio::io::split(stream);
    start_io(read_half, write_half, endpoints, config, side, handler)
}

/// Commands one end of a [`command_pipe`] holds in its queue to the other, at most. (Their bytes
/// are bounded as a socket's are: by the sender's write queue, and the receiver's in-flight
/// limits, which stop it taking more.)
const PIPE_COMMANDS: usize = 256;

/// One end of an in-process connection that carries [`RemotingCommand`]s as they are: nothing is
/// encoded or decoded between the two ends. Made in pairs by [`command_pipe`].
pub struct CommandPipe {
    tx: mpsc::Sender<RemotingCommand>,
    rx: mpsc::Receiver<RemotingCommand>,
}

/// Both ends of an in-process command connection: give one to [`spawn_commands`] (or a server's
/// `serve_commands`) and the other to the peer.
pub fn command_pipe() -> (CommandPipe, CommandPipe) {
    let (a_tx, b_rx) = mpsc::channel(PIPE_COMMANDS);
    let (b_tx, a_rx) = mpsc::channel(PIPE_COMMANDS);
    (CommandPipe { tx: a_tx, rx: a_rx }, CommandPipe { tx: b_tx, rx: b_rx })
}

/// Starts the reader and writer tasks over one end of a [`command_pipe`]: the same tasks, bounds
/// and idle close as a socket's, with commands counted at the bytes they would take on the wire
/// and held to the same frame limit. Must be called inside a tokio runtime.
pub fn spawn_commands(pipe: CommandPipe, endpoints: Endpoints, config: &ConnectionConfig, side: Side, handler: Arc<dyn InboundHandler>) -> Channel {
    let CommandPipe { tx, mut rx } = pipe;
    let max_bytes = config.max_frame_bytes;
    let frames = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).map(move |cmd| {
        let bytes = crate::codec::frame_size_estimate(&cmd);
        Ok((cmd, bytes))
    });
    let sink = PollSender::new(tx).sink_map_err(|_| CodecError::Io(std::io::ErrorKind::BrokenPipe.into())).with(move |mut cmd: RemotingCommand| {
        let bytes = crate::codec::frame_size_estimate(&cmd);
        // The peer reads the body as one, as it would have from a socket.
        cmd.flatten_body();
        futures::future::ready(if bytes > max_bytes { Err(CodecError::FrameTooLarge { frame_bytes: bytes as u64, max_bytes }) } else { Ok(cmd) })
    });
    start(Box::pin(frames), Box::pin(sink), endpoints, config, side, handler)
}

fn start_io<R, W>(read_half: R, write_half: W, endpoints: Endpoints, config: &ConnectionConfig, side: Side, handler: Arc<dyn InboundHandler>) -> Channel
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let codec = RemotingCodec::new(config.max_frame_bytes);
    start(FramedRead::new(read_half, SizedFrames(codec.clone())), crate::writer::FrameWriter::new(write_half, codec), endpoints, config, side, handler)
}

fn start<T, S>(frames: T, sink: S, endpoints: Endpoints, config: &ConnectionConfig, side: Side, handler: Arc<dyn InboundHandler>) -> Channel
where
    T: Stream<Item = Result<(RemotingCommand, usize), CodecError>> + Send + Unpin + 'static,
    S: Sink<RemotingCommand, Error = CodecError> + Send + Unpin + 'static,
{
    let Endpoints { remote, local } = endpoints;
    let (tx, rx) = mpsc::unbounded_channel();
    let channel = Channel {
        shared: Arc::new(Shared {
            id: NEXT_CHANNEL_ID.fetch_add(1, Ordering::Relaxed),
            remote,
            local,
            side,
            limits: Limits::of(config),
            tx,
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            abort: CancellationToken::new(),
            outbound_bytes: AtomicUsize::new(0),
            in_flight_bytes: AtomicUsize::new(0),
            in_flight_requests: AtomicUsize::new(0),
            in_flight_small_answers: AtomicUsize::new(0),
            reading_paused: AtomicBool::new(false),
            resume: Notify::new(),
            started: Instant::now(),
            last_activity_ms: AtomicU64::new(0),
            rpc_observer: std::sync::OnceLock::new(),
        }),
    };
    let span = info_span!("conn", peer = %remote, id = channel.id());
    tokio::spawn(write_loop(channel.clone(), sink, rx).instrument(span.clone()));
    tokio::spawn(read_loop(channel.clone(), frames, config.idle_timeout, handler).instrument(span));
    channel
}

async fn write_loop<S: Sink<RemotingCommand, Error = CodecError> + Unpin>(channel: Channel, mut sink: S, mut rx: mpsc::UnboundedReceiver<Outbound>) {
    let shared = channel.shared.clone();
    loop {
        let next = tokio::select! {
            biased;
            _ = shared.abort.cancelled() => break,
            next = rx.recv() => next,
        };
        let Some(Outbound::Frame { cmd, bytes }) = next else {
            // A requested close: write what is buffered, then end.
            tokio::select! {
                biased;
                _ = shared.abort.cancelled() => {}
                _ = SinkExt::<RemotingCommand>::close(&mut sink) => {}
            }
            break;
        };
        let mut batch = Batch { bytes, close: false };
        let written = tokio::select! {
            biased;
            _ = shared.abort.cancelled() => Ok(()),
            written = write_batch(&mut sink, &mut rx, cmd, &mut batch) => written,
        };
        shared.release_outbound(batch.bytes);
        if let Err(e) = written {
            // An unencodable command (e.g. over the frame limit) or a dead socket: the peer cannot
            // be kept in a consistent state, so the connection ends.
            warn!(error = %e, "write failed; closing connection");
            break;
        }
        if batch.close || shared.abort.is_cancelled() {
            break;
        }
        channel.touch();
    }
    channel.abort();
    // Give back the bytes of what will never be written; `recv` after `close` also waits for
    // sends already under way, so none is missed.
    rx.close();
    while let Some(out) = rx.recv().await {
        if let Outbound::Frame { bytes, .. } = out {
            shared.release_outbound(bytes);
        }
    }
}

struct Batch {
    /// Accounted bytes of the frames taken off the queue so far.
    bytes: usize,
    /// A close request ended the batch.
    close: bool,
}

/// Writes `first` and whatever else is already queued (up to [`WRITE_BATCH_BYTES`]) with one flush.
async fn write_batch<S: Sink<RemotingCommand, Error = CodecError> + Unpin>(
    sink: &mut S,
    rx: &mut mpsc::UnboundedReceiver<Outbound>,
    first: RemotingCommand,
    batch: &mut Batch,
) -> Result<(), CodecError> {
    sink.feed(first).await?;
    while batch.bytes < WRITE_BATCH_BYTES {
        match rx.try_recv() {
            Ok(Outbound::Frame { cmd, bytes }) => {
                batch.bytes += bytes;
                sink.feed(cmd).await?;
            }
            Ok(Outbound::Close) => {
                batch.close = true;
                break;
            }
            Err(_) => break,
        }
    }
    SinkExt::<RemotingCommand>::flush(sink).await
}

/// The codec's frames with the bytes each took on the wire, which the reader counts in flight.
struct SizedFrames(RemotingCodec);

impl Decoder for SizedFrames {
    type Item = (RemotingCommand, usize);
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, CodecError> {
        let before = src.len();
        Ok(self.0.decode(src)?.map(|cmd| (cmd, before - src.len())))
    }
}

async fn read_loop<T>(channel: Channel, mut frames: T, idle_timeout: Duration, handler: Arc<dyn InboundHandler>)
where
    T: Stream<Item = Result<(RemotingCommand, usize), CodecError>> + Unpin,
{
    let shared = channel.shared.clone();
    loop {
        if shared.must_pause(false) && !wait_until_readable(&channel, idle_timeout).await {
            break;
        }
        let wait = idle_timeout.saturating_sub(channel.idle_for());
        if wait.is_zero() {
            debug!("idle for {:?}; closing", idle_timeout);
            break;
        }
        let frame = tokio::select! {
            biased;
            _ = shared.abort.cancelled() => break,
            frame = frames.next() => frame,
            _ = tokio::time::sleep(wait) => continue,
        };
        match frame {
            Some(Ok((cmd, bytes))) => {
                channel.touch();
                if cmd.is_response() {
                    channel.complete(cmd);
                } else {
                    handler.on_request(&channel, cmd, shared.hold_in_flight(bytes));
                }
            }
            Some(Err(e)) => {
                warn!(error = %e, "undecodable frame; closing connection");
                break;
            }
            None => break,
        }
    }
    // As Netty's close: whatever is still queued is dropped, so a peer that stopped reading
    // cannot hold the writer (and its queue) after the reader is gone.
    channel.abort();
    // Fail every waiter at once instead of letting each run into its timeout.
    shared.pending.lock().clear();
    handler.on_close(&channel);
}

/// Waits while the reader must stay paused; false when the connection closes or idles meanwhile.
async fn wait_until_readable(channel: &Channel, idle_timeout: Duration) -> bool {
    let shared = &channel.shared;
    shared.reading_paused.store(true, Ordering::SeqCst);
    debug!(outbound_bytes = channel.queued_outbound_bytes(), in_flight_bytes = channel.in_flight_bytes(), "reading paused");
    let readable = loop {
        // Created before the check, so a release between the check and the wait is not missed
        // (`notify_one` leaves a permit).
        let resumed = shared.resume.notified();
        if !shared.must_pause(true) {
            break true;
        }
        let wait = idle_timeout.saturating_sub(channel.idle_for());
        if wait.is_zero() {
            debug!("paused and idle for {:?}; closing", idle_timeout);
            break false;
        }
        tokio::select! {
            biased;
            _ = shared.abort.cancelled() => break false,
            _ = resumed => {}
            _ = tokio::time::sleep(wait) => {}
        }
    };
    shared.reading_paused.store(false, Ordering::SeqCst);
    readable
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_limits_take_the_defaults_and_the_clamps_keep_them_consistent() {
        let zeros = ConnectionConfig {
            write_buffer_high_water_mark_bytes: 0,
            write_buffer_low_water_mark_bytes: 0,
            write_queue_limit_bytes: 0,
            in_flight_limit_bytes: 0,
            in_flight_limit_requests: 0,
            ..ConnectionConfig::default()
        };
        let l = Limits::of(&zeros);
        assert_eq!((l.high, l.low, l.hard, l.in_flight, l.in_flight_requests), (8 << 20, 4 << 20, 64 << 20, 64 << 20, 128));

        let odd = ConnectionConfig {
            write_buffer_high_water_mark_bytes: 1 << 20,
            write_buffer_low_water_mark_bytes: 2 << 20,
            write_queue_limit_bytes: 1 << 20,
            in_flight_limit_bytes: 1,
            ..ConnectionConfig::default()
        };
        let l = Limits::of(&odd);
        assert_eq!(l.low, l.high, "low is clamped to high");
        assert_eq!(l.hard, (16 << 20) + (1 << 20), "hard is at least a maximal frame above high");
        assert_eq!(l.in_flight, 16 << 20, "in flight holds at least one maximal frame");
    }
}
