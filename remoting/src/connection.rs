//! One TCP connection, server-accepted or client-dialled: a reader task that decodes frames, a
//! single writer task that owns the socket's write half, and the table of requests this side sent
//! and still awaits (keyed by opaque). [`Channel`] is the cheap handle everyone else holds.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite};
use tracing::{debug, info_span, warn, Instrument};

use crate::codec::RemotingCodec;
use crate::command::RemotingCommand;

/// What the reader does with what it receives. Responses to our own requests never reach it.
pub trait InboundHandler: Send + Sync + 'static {
    /// A request (or oneway request) from the peer.
    fn on_request(&self, channel: &Channel, request: RemotingCommand);
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

/// Connection settings shared by server and client.
#[derive(Clone, Debug)]
pub struct ConnectionConfig {
    pub max_frame_bytes: usize,
    /// Close after this long without traffic in either direction (Java's 120 s idle handler).
    pub idle_timeout: Duration,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig { max_frame_bytes: crate::codec::DEFAULT_MAX_FRAME_BYTES, idle_timeout: Duration::from_secs(120) }
    }
}

enum Outbound {
    Frame(RemotingCommand),
    Close,
}

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
    tx: mpsc::UnboundedSender<Outbound>,
    pending: Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>,
    closed: AtomicBool,
    started: Instant,
    /// Milliseconds since `started` of the last frame read or written.
    last_activity_ms: AtomicU64,
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

    pub fn remote_addr(&self) -> SocketAddr {
        self.shared.remote
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Queues a frame for the writer. Never blocks, so it may be called from pool threads and
    /// async tasks alike.
    pub fn send(&self, cmd: RemotingCommand) -> Result<(), ChannelError> {
        if self.is_closed() {
            return Err(ChannelError::Closed(self.shared.remote));
        }
        self.shared.tx.send(Outbound::Frame(cmd)).map_err(|_| ChannelError::Closed(self.shared.remote))
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

/// Starts the reader and writer tasks for `stream` and returns the channel.
pub fn spawn(stream: TcpStream, config: &ConnectionConfig, handler: Arc<dyn InboundHandler>) -> std::io::Result<Channel> {
    let remote = stream.peer_addr()?;
    let local = stream.local_addr()?;
    let _ = stream.set_nodelay(true);
    let (read_half, write_half) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let channel = Channel {
        shared: Arc::new(Shared {
            id: NEXT_CHANNEL_ID.fetch_add(1, Ordering::Relaxed),
            remote,
            local,
            tx,
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            started: Instant::now(),
            last_activity_ms: AtomicU64::new(0),
        }),
    };
    let span = info_span!("conn", peer = %remote, id = channel.id());
    let codec = RemotingCodec::new(config.max_frame_bytes);
    tokio::spawn(write_loop(channel.clone(), FramedWrite::new(write_half, codec.clone()), rx).instrument(span.clone()));
    tokio::spawn(read_loop(channel.clone(), FramedRead::new(read_half, codec), config.idle_timeout, handler).instrument(span));
    Ok(channel)
}

async fn write_loop(
    channel: Channel,
    mut sink: FramedWrite<tokio::net::tcp::OwnedWriteHalf, RemotingCodec>,
    mut rx: mpsc::UnboundedReceiver<Outbound>,
) {
    while let Some(out) = rx.recv().await {
        let Outbound::Frame(cmd) = out else { break };
        // Batch whatever else is already queued into one flush.
        let mut result = sink.feed(cmd).await;
        while result.is_ok() {
            match rx.try_recv() {
                Ok(Outbound::Frame(cmd)) => result = sink.feed(cmd).await,
                Ok(Outbound::Close) => {
                    let _ = SinkExt::<RemotingCommand>::flush(&mut sink).await;
                    return finish(&channel);
                }
                Err(_) => break,
            }
        }
        if let Err(e) = result.and(SinkExt::<RemotingCommand>::flush(&mut sink).await) {
            // An unencodable command (e.g. over the frame limit) or a dead socket: the peer cannot
            // be kept in a consistent state, so the connection ends.
            warn!(error = %e, "write failed; closing connection");
            break;
        }
        channel.touch();
    }
    let _ = SinkExt::<RemotingCommand>::close(&mut sink).await;
    finish(&channel);
}

fn finish(channel: &Channel) {
    channel.mark_closed();
}

async fn read_loop(
    channel: Channel,
    mut frames: FramedRead<tokio::net::tcp::OwnedReadHalf, RemotingCodec>,
    idle_timeout: Duration,
    handler: Arc<dyn InboundHandler>,
) {
    loop {
        let wait = idle_timeout.saturating_sub(channel.idle_for());
        if wait.is_zero() {
            debug!("idle for {:?}; closing", idle_timeout);
            break;
        }
        let frame = tokio::select! {
            frame = frames.next() => frame,
            _ = tokio::time::sleep(wait) => continue,
        };
        match frame {
            Some(Ok(cmd)) => {
                channel.touch();
                if cmd.is_response() {
                    channel.complete(cmd);
                } else {
                    handler.on_request(&channel, cmd);
                }
            }
            Some(Err(e)) => {
                warn!(error = %e, "undecodable frame; closing connection");
                break;
            }
            None => break,
        }
        if channel.is_closed() {
            break;
        }
    }
    channel.close();
    channel.mark_closed();
    // Fail every waiter at once instead of letting each run into its timeout.
    channel.shared.pending.lock().clear();
    handler.on_close(&channel);
}
