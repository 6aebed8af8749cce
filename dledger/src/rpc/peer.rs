//! The calling side: a typed DLedger request to a peer's address and its typed answer, as
//! `DLedgerRpcNettyService` sends them (a JSON-header request without ext fields, the body the
//! request's JSON, 3 000 ms to answer).
//!
//! Connections are cached per address and dialled again once closed (the remoting client), so a
//! peer that restarts is reached again by the next call. Requests in flight per address are
//! bounded (Java bounds its async invocations with a semaphore too): a call waits for a slot
//! within its own timeout, then fails [`RpcError::TooManyInFlight`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use remoting::client::{ClientConfig, ClientError, RemotingClient};
use remoting::connection::ChannelError;
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tokio::sync::Semaphore;

use super::RpcRequest;
use crate::protocol::Code;
use crate::wire::{decode, encode, WireError};

/// Java's timeout for every peer RPC (`invokeAsync(..., 3000, ...)`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(3_000);
/// Requests in flight to one peer: a leader's push window (1 000 appends) plus room for votes,
/// heartbeats and client calls.
pub const DEFAULT_MAX_IN_FLIGHT_PER_PEER: usize = 2_048;

#[derive(Clone, Debug)]
pub struct PeerClientConfig {
    pub timeout: Duration,
    pub max_in_flight_per_peer: usize,
    pub client: ClientConfig,
}

impl Default for PeerClientConfig {
    fn default() -> Self {
        PeerClientConfig { timeout: DEFAULT_TIMEOUT, max_in_flight_per_peer: DEFAULT_MAX_IN_FLIGHT_PER_PEER, client: ClientConfig::default() }
    }
}

/// Why a call produced no DLedger answer. (Java's callers turn all of these into
/// NETWORK_ERROR, or an UNKNOWN vote.)
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("{limit} requests to {addr} already in flight for {waited:?}")]
    TooManyInFlight { addr: String, limit: usize, waited: Duration },
    #[error("{name} to {addr}: no answer within {timeout:?}")]
    Timeout { name: &'static str, addr: String, timeout: Duration },
    #[error("{name} to {addr}: {source}")]
    Connection { name: &'static str, addr: String, source: ClientError },
    /// The remoting layer answered instead of DLedger (SYSTEM_ERROR for a body it could not
    /// handle or for PULL, REQUEST_CODE_NOT_SUPPORTED, SYSTEM_BUSY).
    #[error("{name} to {addr} refused by the remoting layer: {code:?} {remark:?}")]
    Refused { name: &'static str, addr: String, code: ResponseCode, remark: Option<String> },
    #[error("{name} to {addr}: {source}")]
    BadResponse { name: &'static str, addr: String, source: WireError },
}

/// Sends DLedger requests to peers.
pub struct PeerClient {
    config: PeerClientConfig,
    remoting: RemotingClient,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl PeerClient {
    pub fn new(config: PeerClientConfig) -> PeerClient {
        let remoting = RemotingClient::new(config.client.clone());
        PeerClient { config, remoting, slots: Mutex::new(HashMap::new()) }
    }

    pub fn config(&self) -> &PeerClientConfig {
        &self.config
    }

    /// Sends `request` to `addr` (`host:port`) and waits up to the configured timeout for the
    /// answer.
    pub async fn call<Q: RpcRequest>(&self, addr: &str, request: &Q) -> Result<Q::Response, RpcError> {
        self.call_with_timeout(addr, request, self.config.timeout).await
    }

    /// As [`PeerClient::call`], with its own timeout (Java's client gives LEADERSHIP_TRANSFER 10 s).
    pub async fn call_with_timeout<Q: RpcRequest>(&self, addr: &str, request: &Q, timeout: Duration) -> Result<Q::Response, RpcError> {
        let response = self.invoke(addr, Q::CODE, Q::NAME, encode(request), timeout).await?;
        if response.code != Code::SUCCESS.0 {
            return Err(RpcError::Refused { name: Q::NAME, addr: addr.to_owned(), code: response.response_code(), remark: response.remark });
        }
        decode(response.body_bytes()).map_err(|source| RpcError::BadResponse { name: Q::NAME, addr: addr.to_owned(), source })
    }

    /// Sends a request with this code and body and returns the remoting response as it came
    /// (for tools and tests that look at the bytes).
    pub async fn call_raw(&self, addr: &str, code: i32, body: Vec<u8>, timeout: Duration) -> Result<RemotingCommand, RpcError> {
        self.invoke(addr, code, "request", body, timeout).await
    }

    async fn invoke(&self, addr: &str, code: i32, name: &'static str, body: Vec<u8>, timeout: Duration) -> Result<RemotingCommand, RpcError> {
        let started = Instant::now();
        let slots = self.slots(addr);
        let _slot = match tokio::time::timeout(timeout, slots.acquire_owned()).await {
            Ok(Ok(slot)) => slot,
            // The semaphore is never closed; a timeout is the only way here.
            _ => return Err(RpcError::TooManyInFlight { addr: addr.to_owned(), limit: self.config.max_in_flight_per_peer, waited: timeout }),
        };
        let timed_out = || RpcError::Timeout { name, addr: addr.to_owned(), timeout };
        let remaining = timeout.checked_sub(started.elapsed()).ok_or_else(timed_out)?;
        let channel = match tokio::time::timeout(remaining, self.remoting.channel(addr)).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(source)) => return Err(RpcError::Connection { name, addr: addr.to_owned(), source }),
            Err(_) => return Err(timed_out()),
        };
        let remaining = timeout.checked_sub(started.elapsed()).ok_or_else(timed_out)?;
        let request = RemotingCommand::request(RequestCode(code)).with_body(body);
        match channel.invoke(request, remaining).await {
            Ok(response) => Ok(response),
            Err(ChannelError::Timeout { .. }) => Err(timed_out()),
            Err(e @ ChannelError::Closed(_)) => {
                self.remoting.close_channel(addr);
                Err(RpcError::Connection { name, addr: addr.to_owned(), source: ClientError::Channel(e) })
            }
        }
    }

    fn slots(&self, addr: &str) -> Arc<Semaphore> {
        let mut slots = self.slots.lock();
        slots.entry(addr.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.config.max_in_flight_per_peer.max(1)))).clone()
    }

    /// Requests to `addr` in flight now.
    pub fn in_flight(&self, addr: &str) -> usize {
        let limit = self.config.max_in_flight_per_peer.max(1);
        self.slots.lock().get(addr).map_or(0, |s| limit - s.available_permits())
    }

    /// Closes the connection to `addr`; the next call dials again.
    pub fn disconnect(&self, addr: &str) {
        self.remoting.close_channel(addr);
    }

    /// Closes every connection.
    pub fn shutdown(&self) {
        self.remoting.shutdown();
    }
}
