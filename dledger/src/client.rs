//! A DLedger client: the calls of Java's `DLedgerClient` (0.3.1.2) — append, get, metadata,
//! leadership transfer — against a group given by its peers string.
//!
//! Leader discovery is Java's: METADATA answers name the leader (`leaderId`, whatever their
//! `code`: Java's client looks at nothing else) and the peers, which are merged into ours. An
//! append or get goes to the known leader; a NOT_LEADER answer makes the client forget it, find
//! the leader again and send once more, to the new leader; a failed call makes it forget the
//! leader too. Differences from Java, which runs a MetadataUpdater thread every 3 s and starts by
//! assuming the first peer leads: we find the leader when a call needs one, asking every peer at
//! once and taking the first answer that names one, within Java's 1 500 ms wait for metadata.
//!
//! Errors: where Java returns a response with METADATA_ERROR (no leader found) or INTERNAL_ERROR
//! (the call failed), we return [`ClientError::NoLeader`] and [`ClientError::Rpc`]; every answer
//! that came back, whatever its `code`, is `Ok`.

use std::time::Duration;

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use parking_lot::Mutex;

use crate::config::{parse_peers, Peer, PeersError};
use crate::protocol::*;
use crate::rpc::{PeerClient, PeerClientConfig, RpcError, RpcRequest};

/// How long Java's client waits for metadata (`waitOnUpdatingMetadata(1500, ...)`).
pub const METADATA_WAIT: Duration = Duration::from_millis(1_500);
/// Java's client gives LEADERSHIP_TRANSFER 10 s (the transferee answers once it leads).
pub const LEADERSHIP_TRANSFER_TIMEOUT: Duration = Duration::from_millis(10_000);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Peers(#[from] PeersError),
    #[error("the peers string names no peer")]
    NoPeers,
    #[error("no member of group {group} names a leader")]
    NoLeader { group: String },
    #[error("{peer_id} is not a known peer")]
    UnknownPeer { peer_id: String },
    #[error("{peer_id}: {source}")]
    Rpc { peer_id: String, source: RpcError },
}

pub struct DLedgerClient {
    group: String,
    /// In the order of the peers string; METADATA adds or moves addresses.
    peers: Mutex<Vec<Peer>>,
    leader: Mutex<Option<String>>,
    rpc: PeerClient,
}

impl DLedgerClient {
    /// A client of `group`, whose members are `peers` (`n0-host:port;n1-host:port`).
    pub fn new(group: &str, peers: &str) -> Result<DLedgerClient, ClientError> {
        Self::with_config(group, peers, PeerClientConfig::default())
    }

    pub fn with_config(group: &str, peers: &str, config: PeerClientConfig) -> Result<DLedgerClient, ClientError> {
        let peers = parse_peers(peers)?;
        if peers.is_empty() {
            return Err(ClientError::NoPeers);
        }
        Ok(DLedgerClient { group: group.to_owned(), peers: Mutex::new(peers), leader: Mutex::new(None), rpc: PeerClient::new(config) })
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    /// The leader as last learnt, if any.
    pub fn leader_id(&self) -> Option<String> {
        self.leader.lock().clone()
    }

    pub fn peers(&self) -> Vec<Peer> {
        self.peers.lock().clone()
    }

    fn request_base(&self, remote_id: &str) -> Base {
        Base { group: self.group.clone(), remote_id: Some(remote_id.to_owned()), ..Base::default() }
    }

    fn addr_of(&self, peer_id: &str) -> Result<String, ClientError> {
        let peers = self.peers.lock();
        peers.iter().find(|p| p.id == peer_id).map(|p| p.addr.clone()).ok_or_else(|| ClientError::UnknownPeer { peer_id: peer_id.to_owned() })
    }

    /// What a METADATA answer teaches, as Java's MetadataUpdater takes it: only an answer
    /// naming a leader counts, and then its peers are merged.
    fn learn(&self, response: &MetadataResponse) -> Option<String> {
        let leader = response.base.leader_id.clone()?;
        let mut peers = self.peers.lock();
        for (id, addr) in &response.peers {
            match peers.iter_mut().find(|p| p.id == *id) {
                Some(p) => p.addr.clone_from(addr),
                None => peers.push(Peer { id: id.clone(), addr: addr.clone() }),
            }
        }
        drop(peers);
        *self.leader.lock() = Some(leader.clone());
        Some(leader)
    }

    /// Asks `peer_id` for METADATA, and learns the leader and peers from the answer.
    pub async fn metadata(&self, peer_id: &str) -> Result<MetadataResponse, ClientError> {
        let request = MetadataRequest { base: self.request_base(peer_id) };
        let response = self.call(peer_id, &request, self.rpc.config().timeout).await?;
        self.learn(&response);
        Ok(response)
    }

    /// Finds the leader afresh: asks every peer for METADATA at once and takes the first answer
    /// that names a leader, within [`METADATA_WAIT`]. `None` if none did.
    pub async fn refresh_leader(&self) -> Option<String> {
        *self.leader.lock() = None;
        let peers = self.peers();
        let mut asks: FuturesUnordered<_> = peers
            .iter()
            .map(|peer| async move {
                let request = MetadataRequest { base: self.request_base(&peer.id) };
                self.rpc.call_with_timeout(&peer.addr, &request, METADATA_WAIT).await
            })
            .collect();
        while let Some(answer) = asks.next().await {
            match answer {
                Ok(response) => {
                    if let Some(leader) = self.learn(&response) {
                        return Some(leader);
                    }
                }
                Err(e) => tracing::debug!(error = %e, "metadata from a peer failed"),
            }
        }
        None
    }

    async fn call<Q: RpcRequest>(&self, peer_id: &str, request: &Q, timeout: Duration) -> Result<Q::Response, ClientError> {
        let addr = self.addr_of(peer_id)?;
        match self.rpc.call_with_timeout(&addr, request, timeout).await {
            Ok(response) => Ok(response),
            Err(source) => {
                // Java's `needFreshMetadata()`.
                *self.leader.lock() = None;
                Err(ClientError::Rpc { peer_id: peer_id.to_owned(), source })
            }
        }
    }

    /// Sends `request` to the leader; once more to a new leader after NOT_LEADER.
    async fn to_leader<Q: RpcRequest>(&self, mut request: Q) -> Result<Q::Response, ClientError> {
        let leader = match self.leader_id() {
            Some(leader) => leader,
            None => self.refresh_leader().await.ok_or_else(|| ClientError::NoLeader { group: self.group.clone() })?,
        };
        request.base_mut().remote_id = Some(leader.clone());
        let timeout = self.rpc.config().timeout;
        let response = self.call(&leader, &request, timeout).await?;
        if response_code::<Q>(&response) != Code::NOT_LEADER {
            return Ok(response);
        }
        match self.refresh_leader().await {
            Some(new_leader) => {
                request.base_mut().remote_id = Some(new_leader.clone());
                self.call(&new_leader, &request, timeout).await
            }
            // As Java: the NOT_LEADER answer is the answer.
            None => Ok(response),
        }
    }

    /// Appends `body` as one entry through the leader (answered once a quorum has it).
    pub async fn append(&self, body: impl Into<Bytes>) -> Result<AppendEntryResponse, ClientError> {
        let request = AppendEntryRequest { base: self.request_base(""), body: body.into() };
        self.to_leader(request).await
    }

    /// The entry at `index`, from the leader.
    pub async fn get(&self, index: i64) -> Result<GetEntriesResponse, ClientError> {
        let request = GetEntriesRequest { base: self.request_base(""), begin_index: Some(index), max_size: 0, index_list: None };
        self.to_leader(request).await
    }

    /// Asks the leader `cur_leader_id` to hand leadership at `term` to `transferee_id`; the answer
    /// comes once the transferee leads or gave up (Java waits up to 10 s).
    pub async fn leadership_transfer(&self, cur_leader_id: &str, transferee_id: &str, term: i64) -> Result<LeadershipTransferResponse, ClientError> {
        let request = LeadershipTransferRequest {
            base: Base { term, ..self.request_base(cur_leader_id) },
            transfer_id: Some(cur_leader_id.to_owned()),
            transferee_id: Some(transferee_id.to_owned()),
            take_leadership_ledger_index: 0,
        };
        self.call(cur_leader_id, &request, LEADERSHIP_TRANSFER_TIMEOUT).await
    }

    /// Closes every connection.
    pub fn shutdown(&self) {
        self.rpc.shutdown();
    }
}

fn response_code<Q: RpcRequest>(response: &Q::Response) -> Code {
    crate::rpc::RpcResponse::base(response).code
}
