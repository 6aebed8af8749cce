//! The client side: connections cached by address (reconnected when they close), sync, async and
//! oneway invocations. Server-initiated requests on these connections go to an [`InboundHandler`];
//! the default one answers them REQUEST_CODE_NOT_SUPPORTED, as a Java client does for codes it lacks.
//!
//! A connection need not be a socket: [`client_channel`] makes one over any byte stream, and
//! [`RemotingClient::attach_stream`] puts such a connection behind an address, so code that
//! calls an address can be driven in-process over `tokio::io::duplex`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::command::RemotingCommand;
use crate::connection::{self, Channel, ChannelError, ConnectionConfig, Endpoints, InFlight, InboundHandler, Side};
use crate::server::{not_supported, Reply};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("connecting to {addr} took longer than {timeout:?}")]
    ConnectTimeout { addr: String, timeout: Duration },
    #[error(transparent)]
    Channel(#[from] ChannelError),
}

#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Java's `connectTimeoutMillis` default.
    pub connect_timeout: Duration,
    pub connection: ConnectionConfig,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig { connect_timeout: Duration::from_secs(3), connection: ConnectionConfig::default() }
    }
}

struct RefuseRequests;

impl InboundHandler for RefuseRequests {
    fn on_request(&self, channel: &Channel, request: RemotingCommand, _: InFlight) {
        Reply::to(channel, &request).send(not_supported(&request));
    }
}

/// A client connection over any byte stream (e.g. one end of `tokio::io::duplex` whose other end
/// a server serves), reporting `endpoints` as its addresses. Requests the peer sends on it are
/// answered REQUEST_CODE_NOT_SUPPORTED. Must be called inside a tokio runtime.
pub fn client_channel<S>(stream: S, endpoints: Endpoints, config: &ConnectionConfig) -> Channel
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    connection::spawn_stream(stream, endpoints, config, Side::Client, Arc::new(RefuseRequests))
}

pub struct RemotingClient {
    config: ClientConfig,
    channels: Mutex<HashMap<String, Channel>>,
    handler: Arc<dyn InboundHandler>,
}

impl RemotingClient {
    pub fn new(config: ClientConfig) -> Self {
        Self::with_handler(config, Arc::new(RefuseRequests))
    }

    pub fn with_handler(config: ClientConfig, handler: Arc<dyn InboundHandler>) -> Self {
        RemotingClient { config, channels: Mutex::new(HashMap::new()), handler }
    }

    /// The open channel to `addr` (`host:port`), connecting if there is none.
    pub async fn channel(&self, addr: &str) -> Result<Channel, ClientError> {
        if let Some(channel) = self.channels.lock().get(addr).filter(|c| !c.is_closed()) {
            return Ok(channel.clone());
        }
        let timeout = self.config.connect_timeout;
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(source)) => return Err(ClientError::Connect { addr: addr.to_owned(), source }),
            Err(_) => return Err(ClientError::ConnectTimeout { addr: addr.to_owned(), timeout }),
        };
        let channel = connection::spawn(stream, &self.config.connection, Side::Client, self.handler.clone())
            .map_err(|source| ClientError::Connect { addr: addr.to_owned(), source })?;
        // Two callers may have connected at once; keep the first live one.
        let mut channels = self.channels.lock();
        match channels.get(addr).filter(|c| !c.is_closed()) {
            Some(existing) => {
                channel.close();
                Ok(existing.clone())
            }
            None => {
                channels.insert(addr.to_owned(), channel.clone());
                Ok(channel)
            }
        }
    }

    /// Makes a connection over `stream` (with this client's handler and limits) the one used for
    /// `addr`, replacing any other: calls to `addr` then go over the stream until it closes, after
    /// which the next call dials `addr` over TCP as usual. Must be called inside a tokio runtime.
    pub fn attach_stream<S>(&self, addr: &str, stream: S, endpoints: Endpoints) -> Channel
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let channel = connection::spawn_stream(stream, endpoints, &self.config.connection, Side::Client, self.handler.clone());
        if let Some(previous) = self.channels.lock().insert(addr.to_owned(), channel.clone()) {
            previous.close();
        }
        channel
    }

    /// Sends `request` and waits up to `timeout` for its response.
    pub async fn invoke(&self, addr: &str, request: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, ClientError> {
        let channel = self.channel(addr).await?;
        let result = channel.invoke(request, timeout).await;
        if matches!(result, Err(ChannelError::Closed(_))) {
            self.close_channel(addr);
        }
        Ok(result?)
    }

    /// Sends `request` marked oneway.
    pub async fn invoke_oneway(&self, addr: &str, request: RemotingCommand) -> Result<(), ClientError> {
        Ok(self.channel(addr).await?.invoke_oneway(request)?)
    }

    /// Sends `request` and calls `callback` with the outcome from a runtime task.
    pub fn invoke_async<F>(self: &Arc<Self>, addr: String, request: RemotingCommand, timeout: Duration, callback: F)
    where
        F: FnOnce(Result<RemotingCommand, ClientError>) + Send + 'static,
    {
        let client = self.clone();
        tokio::spawn(async move { callback(client.invoke(&addr, request, timeout).await) });
    }

    /// Closes and forgets the connection to `addr`, if any.
    pub fn close_channel(&self, addr: &str) {
        if let Some(channel) = self.channels.lock().remove(addr) {
            channel.close();
        }
    }

    /// Closes every connection.
    pub fn shutdown(&self) {
        for (_, channel) in self.channels.lock().drain() {
            channel.close();
        }
    }
}
