//! Who is connected: consumers and producers by group, one entry per connection (not per
//! client id), dropped when the connection closes or sends no heartbeat for 120 s.

pub mod consumer_manager;
pub mod producer_manager;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use remoting::connection::ChannelError;
use remoting::server::Channel;
use remoting::{LanguageCode, RemotingCommand};

/// Java's `channelExpiredTimeout`.
pub const CHANNEL_EXPIRED_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// A connected client as the broker calls it back (NOTIFY_CONSUMER_IDS_CHANGED,
/// CHECK_TRANSACTION_STATE, the consumer relays, replies): a remoting connection today; a gRPC
/// stream can be one by translating these commands, as Java's proxy does with its channels.
pub trait ClientChannel: std::fmt::Debug + Send + Sync + 'static {
    /// Unique among the broker's live connections.
    fn id(&self) -> u64;
    fn remote_addr(&self) -> SocketAddr;
    fn is_closed(&self) -> bool;
    /// Closes the connection once what is queued is written.
    fn close(&self);
    /// Sends a request the client does not answer.
    fn invoke_oneway(&self, request: RemotingCommand) -> Result<(), ChannelError>;
    /// Sends a request and waits for the client's answer.
    fn invoke(&self, request: RemotingCommand, timeout: Duration) -> BoxFuture<'_, Result<RemotingCommand, ChannelError>>;
}

pub type SharedClientChannel = Arc<dyn ClientChannel>;

impl ClientChannel for Channel {
    fn id(&self) -> u64 {
        Channel::id(self)
    }

    fn remote_addr(&self) -> SocketAddr {
        Channel::remote_addr(self)
    }

    fn is_closed(&self) -> bool {
        Channel::is_closed(self)
    }

    fn close(&self) {
        Channel::close(self)
    }

    fn invoke_oneway(&self, request: RemotingCommand) -> Result<(), ChannelError> {
        Channel::invoke_oneway(self, request)
    }

    fn invoke(&self, request: RemotingCommand, timeout: Duration) -> BoxFuture<'_, Result<RemotingCommand, ChannelError>> {
        Box::pin(Channel::invoke(self, request, timeout))
    }
}

/// One client connection as its heartbeats describe it.
#[derive(Clone, Debug)]
pub struct ClientChannelInfo {
    pub channel: SharedClientChannel,
    pub client_id: String,
    pub language: LanguageCode,
    pub version: i32,
    pub last_update: Instant,
}
