//! `DLedgerConfig` of 0.3.1.2: every key with Java's name and default, and the peers list.

use remoting::java_config;

java_config! {
    /// Java's `DLedgerConfig` fields, in declaration order.
    pub struct DLedgerConfig {
        pub group: String = "group" => "default".to_owned(),
        pub self_id: String = "selfId" => "n0".to_owned(),
        /// `id-host:port;id-host:port;...` (the id is the text before the first `-`).
        pub peers: String = "peers" => "n0-localhost:20911".to_owned(),
        pub store_base_dir: String = "storeBaseDir" => "/tmp/dledgerstore".to_owned(),
        pub read_only_data_store_dirs: String = "readOnlyDataStoreDirs" => String::new(),
        pub peer_push_throttle_point: usize = "peerPushThrottlePoint" => 300 * 1024 * 1024,
        pub peer_push_quota: usize = "peerPushQuota" => 20 * 1024 * 1024,
        /// FILE or MEMORY.
        pub store_type: String = "storeType" => "FILE".to_owned(),
        /// Empty: `<storeBaseDir>/dledger-<selfId>/data`.
        pub data_store_path: String = "dataStorePath" => String::new(),
        pub max_pending_requests_num: usize = "maxPendingRequestsNum" => 10_000,
        pub max_wait_ack_time_ms: u64 = "maxWaitAckTimeMs" => 2_500,
        pub max_push_time_out_ms: u64 = "maxPushTimeOutMs" => 1_000,
        pub enable_leader_elector: bool = "enableLeaderElector" => true,
        pub heart_beat_time_interval_ms: u64 = "heartBeatTimeIntervalMs" => 2_000,
        pub max_heart_beat_leak: u32 = "maxHeartBeatLeak" => 3,
        pub min_vote_interval_ms: u64 = "minVoteIntervalMs" => 300,
        pub max_vote_interval_ms: u64 = "maxVoteIntervalMs" => 1_000,
        pub file_reserved_hours: u64 = "fileReservedHours" => 72,
        pub delete_when: String = "deleteWhen" => "04".to_owned(),
        pub disk_space_ratio_to_check_expired: f64 = "diskSpaceRatioToCheckExpired" => 0.70,
        pub disk_space_ratio_to_force_clean: f64 = "diskSpaceRatioToForceClean" => 0.85,
        pub enable_disk_force_clean: bool = "enableDiskForceClean" => true,
        pub flush_file_interval_ms: u64 = "flushFileInterval" => 10,
        pub check_point_interval_ms: u64 = "checkPointInterval" => 3_000,
        pub mapped_file_size_for_entry_data: usize = "mappedFileSizeForEntryData" => 1024 * 1024 * 1024,
        pub mapped_file_size_for_entry_index: usize = "mappedFileSizeForEntryIndex" => 32 * 5 * 1024 * 1024,
        pub enable_push_to_follower: bool = "enablePushToFollower" => true,
        /// `;`-separated ids.
        pub preferred_leader_ids: String = "preferredLeaderIds" => String::new(),
        pub max_leadership_transfer_wait_index: i64 = "maxLeadershipTransferWaitIndex" => 1_000,
        pub min_take_leadership_vote_interval_ms: u64 = "minTakeLeadershipVoteIntervalMs" => 30,
        pub max_take_leadership_vote_interval_ms: u64 = "maxTakeLeadershipVoteIntervalMs" => 100,
        pub enable_batch_push: bool = "isEnableBatchPush" => false,
        pub max_batch_push_size: usize = "maxBatchPushSize" => 4 * 1024,
        pub leadership_transfer_wait_timeout_ms: u64 = "leadershipTransferWaitTimeout" => 1_000,
    }
}

/// One member of the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub id: String,
    pub addr: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeersError {
    #[error("peer {0:?} is not id-host:port")]
    Malformed(String),
    #[error("peer id {0} appears twice")]
    Duplicate(String),
    #[error("selfId {self_id} is not among the peers {peers}")]
    SelfMissing { self_id: String, peers: String },
}

/// Java's parsing of `peers`: entries split at `;`, the id before the first `-`.
pub fn parse_peers(peers: &str) -> Result<Vec<Peer>, PeersError> {
    let mut out: Vec<Peer> = Vec::new();
    for item in peers.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((id, addr)) = item.split_once('-') else { return Err(PeersError::Malformed(item.to_owned())) };
        if id.is_empty() || !addr.contains(':') {
            return Err(PeersError::Malformed(item.to_owned()));
        }
        if out.iter().any(|p| p.id == id) {
            return Err(PeersError::Duplicate(id.to_owned()));
        }
        out.push(Peer { id: id.to_owned(), addr: addr.to_owned() });
    }
    Ok(out)
}

impl DLedgerConfig {
    /// The peers, checked to include this node.
    pub fn peer_list(&self) -> Result<Vec<Peer>, PeersError> {
        let peers = parse_peers(&self.peers)?;
        if !peers.iter().any(|p| p.id == self.self_id) {
            return Err(PeersError::SelfMissing { self_id: self.self_id.clone(), peers: self.peers.clone() });
        }
        Ok(peers)
    }

    /// `<storeBaseDir>/dledger-<selfId>`, where Java keeps `checkpoint`, `currterm` and `index/`.
    pub fn node_dir(&self) -> std::path::PathBuf {
        std::path::Path::new(&self.store_base_dir).join(format!("dledger-{}", self.self_id))
    }

    pub fn data_dir(&self) -> std::path::PathBuf {
        if self.data_store_path.is_empty() {
            self.node_dir().join("data")
        } else {
            std::path::PathBuf::from(&self.data_store_path)
        }
    }

    pub fn index_dir(&self) -> std::path::PathBuf {
        self.node_dir().join("index")
    }

    pub fn preferred_leaders(&self) -> Vec<String> {
        self.preferred_leader_ids.split(';').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_as_java_splits_them() {
        let peers = parse_peers("n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-localhost:40913").unwrap();
        assert_eq!(peers.len(), 3);
        assert_eq!(peers[2], Peer { id: "n2".into(), addr: "localhost:40913".into() });
        assert!(parse_peers("n0:127.0.0.1:1").is_err());
        assert!(parse_peers("n0-a:1;n0-b:2").is_err());
        let c = DLedgerConfig { self_id: "n9".into(), peers: "n0-a:1".into(), ..Default::default() };
        assert!(c.peer_list().is_err());
        let c = DLedgerConfig::default();
        assert_eq!(c.node_dir(), std::path::PathBuf::from("/tmp/dledgerstore/dledger-n0"));
        assert_eq!(c.data_dir(), c.node_dir().join("data"));
    }
}
