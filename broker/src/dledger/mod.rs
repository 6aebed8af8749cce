//! The broker in DLedger mode (`enableDLegerCommitLog=true`, Java's `DLedgerCommitLog` and
//! `DLedgerRoleChangeHandler`): the commit log is a DLedger member's log, replicated to a quorum
//! of the group before a send is answered, and the broker's role follows the member's.
//!
//! - [`commit_log`]: the append path (one entry per record, stamped by the leader's append hook)
//!   and the member's data as the store reads it;
//! - [`role`]: leader -> master, follower or candidate -> slave.
//!
//! Start order: the member's store is opened (recovered) first, then the message store over it
//! (which, on the first start over a plain commit log, seals the old log and starts DLedger's data
//! after it), then the member; the classic HA service is not started.

pub mod commit_log;
pub mod role;

use std::sync::{Arc, Weak};

use dledger::config::DLedgerConfig;
use dledger::server::DLedgerServer;
use dledger::store::{FileStore, TermFile};
use store::config::MessageStoreConfig;
use store::store::MessageStore;
use tracing::info;

use commit_log::{DLedgerCommitLog, DataLog, QueueOffsets};

#[derive(Debug, thiserror::Error)]
pub enum DLedgerStartError {
    #[error("dLegerSelfId {0:?} must be a letter followed by a number (n0, n1, ...): the broker's id is derived from it")]
    SelfId(String),
    #[error("dLegerSelfId {self_id:?} is not one of the dLegerPeers {peers:?}")]
    NotAPeer { self_id: String, peers: String },
    #[error("DLedger store: {0}")]
    Store(#[from] dledger::store::StoreError),
    #[error("store: {0}")]
    MessageStore(#[from] store::store::StoreError),
    #[error("DLedger member: {0}")]
    Server(#[from] dledger::server::ServerError),
    #[error("DLedger peers: {0}")]
    Peers(#[from] dledger::config::PeersError),
}

/// What Java's `DLedgerCommitLog` constructor hands DLedger from the broker's store config.
pub fn member_config(c: &MessageStoreConfig) -> DLedgerConfig {
    DLedgerConfig {
        group: c.d_leger_group.clone(),
        self_id: c.d_leger_self_id.clone(),
        peers: c.d_leger_peers.clone(),
        store_base_dir: c.store_path_root_dir.clone(),
        data_store_path: c.store_path_dledger_commit_log.clone(),
        mapped_file_size_for_entry_data: c.mapped_file_size_commit_log,
        delete_when: c.delete_when.clone(),
        file_reserved_hours: c.file_reserved_time_hours + 1,
        preferred_leader_ids: c.preferred_leader_id.clone(),
        enable_batch_push: c.enable_batch_push,
        disk_space_ratio_to_check_expired: f64::from(c.disk_max_used_space_ratio) / 100.0,
        ..DLedgerConfig::default()
    }
}

/// The broker id of a slave in DLedger mode: `n0` -> 1, `n1` -> 2 (Java's `getId() `, with 0
/// taken as 1).
pub fn slave_broker_id(self_id: &str) -> Result<i64, DLedgerStartError> {
    let mut chars = self_id.chars();
    let number = chars.next().filter(char::is_ascii_alphabetic).map(|_| chars.as_str());
    match number.and_then(|n| n.parse::<i64>().ok()).filter(|n| *n >= 0) {
        Some(n) => Ok((n + 1).max(1)),
        None => Err(DLedgerStartError::SelfId(self_id.to_owned())),
    }
}

/// The member's store and term file, opened and recovered, and the message store over them.
pub struct Opened {
    config: DLedgerConfig,
    files: FileStore,
    terms: TermFile,
    offsets: Arc<QueueOffsets>,
    pub slave_id: i64,
}

/// Opens the member's store, then the message store over it. Blocking (recovery reads files).
pub fn open(store_config: &MessageStoreConfig) -> Result<(Arc<MessageStore>, Opened), DLedgerStartError> {
    let config = member_config(store_config);
    let slave_id = slave_broker_id(&config.self_id)?;
    if !config.peer_list().map_err(DLedgerStartError::from)?.iter().any(|p| p.id == config.self_id) {
        return Err(DLedgerStartError::NotAPeer { self_id: config.self_id.clone(), peers: config.peers.clone() });
    }
    let terms = TermFile::open(&config).map_err(DLedgerStartError::from)?;
    let files = FileStore::open(&config, terms.current_term()).map_err(DLedgerStartError::from)?;
    let offsets = Arc::new(QueueOffsets::default());
    let hook_offsets = offsets.clone();
    files.add_append_hook(Box::new(move |body, entry| hook_offsets.stamp(body, entry.pos)));
    let store = MessageStore::open_dledger(store_config.clone(), Arc::new(DataLog(files.reader())))?;
    let weak: Weak<MessageStore> = Arc::downgrade(&store);
    files.set_commit_listener(Box::new(move |_| {
        if let Some(store) = weak.upgrade() {
            store.wake_dispatcher();
        }
    }));
    // As Java: DLedger deletes nothing of its own while the old commit log still has files.
    if !store.commit_log().files().is_empty() {
        files.set_clean_space_enabled(false);
    }
    info!(group = %config.group, self_id = %config.self_id, divided = store.divided_offset(), "DLedger commit log opened");
    Ok((store, Opened { config, files, terms, offsets, slave_id }))
}

/// A running member, the broker's commit log.
pub struct Member {
    pub server: DLedgerServer,
    pub offsets: Arc<QueueOffsets>,
    pub slave_id: i64,
}

/// Starts the member and gives the store its append path.
pub async fn start(opened: Opened, store: &Arc<MessageStore>, max_message_size: usize) -> Result<Member, DLedgerStartError> {
    let Opened { config, files, terms, offsets, slave_id } = opened;
    let reader = files.reader();
    let segment_size = config.mapped_file_size_for_entry_data;
    let server = DLedgerServer::start_with(config, files, terms).await?;
    store.set_appender(Arc::new(DLedgerCommitLog::new(server.handle(), reader, max_message_size, segment_size)));
    Ok(Member { server, offsets, slave_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_id_comes_from_the_self_id_as_java_derives_it() {
        assert_eq!(slave_broker_id("n0").unwrap(), 1);
        assert_eq!(slave_broker_id("n1").unwrap(), 2);
        assert_eq!(slave_broker_id("a12").unwrap(), 13);
        for bad in ["", "n", "0", "nx", "n-1", "11"] {
            assert!(slave_broker_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_member_gets_the_brokers_settings_as_java_passes_them() {
        let c = MessageStoreConfig {
            d_leger_group: "g".into(),
            d_leger_self_id: "n1".into(),
            d_leger_peers: "n0-127.0.0.1:1;n1-127.0.0.1:2".into(),
            store_path_root_dir: "/s".into(),
            mapped_file_size_commit_log: 4 << 20,
            file_reserved_time_hours: 48,
            disk_max_used_space_ratio: 80,
            ..Default::default()
        };
        let m = member_config(&c);
        assert_eq!((m.group.as_str(), m.self_id.as_str(), m.store_base_dir.as_str()), ("g", "n1", "/s"));
        assert_eq!((m.mapped_file_size_for_entry_data, m.file_reserved_hours), (4 << 20, 49));
        assert!((m.disk_space_ratio_to_check_expired - 0.8).abs() < 1e-9);
        assert_eq!(m.node_dir(), std::path::PathBuf::from("/s/dledger-n1"));
    }
}
