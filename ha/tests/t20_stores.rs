//! A master store and a slave store, replicated over the HA port: the slave's commit log is the
//! master's, byte for byte, across segments, and its dispatcher builds the same consume queues.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ha::log::ReplicatedLog;
use ha::master::{HaMaster, MasterConfig};
use ha::slave::{HaSlave, SlaveConfig};
use ha::tracker::SyncPolicy;
use store::config::{BrokerRole, MessageStoreConfig};
use store::message::MessageToStore;
use store::store::MessageStore;

fn config(dir: &std::path::Path, role: BrokerRole) -> MessageStoreConfig {
    MessageStoreConfig {
        store_path_root_dir: dir.to_string_lossy().into_owned(),
        mapped_file_size_commit_log: 64 * 1024,
        mapped_file_size_consume_queue: 100 * 20,
        max_hash_slot_num: 1000,
        max_index_num: 4000,
        broker_role: role,
        ..Default::default()
    }
}

fn message(i: usize) -> MessageToStore {
    MessageToStore {
        topic: format!("T{}", i % 3),
        queue_id: (i % 2) as i32,
        flag: i as i32,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000 + i as i64,
        born_host: "127.0.0.1:40000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from(vec![(i % 251) as u8; 100 + i % 900]),
        properties: format!("TAGS\u{1}Tag{}\u{2}UNIQ_KEY\u{1}{i:032X}\u{2}", i % 4),
    }
}

fn open(cfg: MessageStoreConfig) -> Arc<MessageStore> {
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    store
}

fn commit_log_bytes(store: &MessageStore) -> Vec<u8> {
    let (min, max) = (store.commit_log().min_offset(), store.commit_log().max_offset());
    let mut out = Vec::new();
    let mut at = min;
    while at < max {
        let chunk = store.commit_log_data(at, 1 << 20).unwrap();
        at += chunk.len() as i64;
        out.extend(chunk);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slave_store_holds_its_masters_commit_log_and_builds_its_queues() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master_store = open(config(md.path(), BrokerRole::SyncMaster));
    let slave_store = open(config(sd.path(), BrokerRole::Slave));
    let master = HaMaster::start(
        MasterConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            transfer_batch_bytes: 32 * 1024,
            heartbeat_interval: Duration::from_secs(5),
            housekeeping_interval: Duration::from_secs(20),
            policy: SyncPolicy { slaves_needed: 1, fallbehind_max_bytes: 256 << 20, timeout: Duration::from_secs(3) },
        },
        master_store.clone(),
    )
    .await
    .unwrap();
    let replication = master.replication();
    let on_append = replication.clone();
    master_store.set_append_listener(Arc::new(move || on_append.on_append()));
    let slave = HaSlave::start(slave_store.clone(), SlaveConfig::default());
    slave.set_master(Some(master.local_addr().to_string()));
    // 300 messages over several 64 KiB segments; the slave joins with an empty store.
    for i in 0..300 {
        assert!(master_store.put_message(&message(i)).is_ok());
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while slave_store.max_offset() < master_store.commit_log().max_offset() {
        assert!(Instant::now() < deadline, "the slave never caught up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A new slave starts at the master's last segment (Java's rule); from there, byte for byte.
    let master_bytes = commit_log_bytes(&master_store);
    let slave_bytes = commit_log_bytes(&slave_store);
    let skip = (slave_store.commit_log().min_offset() - master_store.commit_log().min_offset()) as usize;
    assert_eq!(&master_bytes[skip..], &slave_bytes[..]);
    // Both dispatchers must be done before the queues are compared (the master's may lag too).
    while slave_store.dispatch_behind_bytes() > 0 || master_store.dispatch_behind_bytes() > 0 {
        assert!(Instant::now() < deadline, "the stores never dispatched");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for t in 0..3 {
        for q in 0..2 {
            let topic = format!("T{t}");
            assert_eq!(slave_store.max_offset_in_queue(&topic, q), master_store.max_offset_in_queue(&topic, q), "{topic}/{q}");
        }
    }
    slave.shutdown().await;
    master.shutdown().await;
    slave_store.shutdown();
    master_store.shutdown();
}

/// A slave receives records cut anywhere (a frame ends where the batch size says, not at a record
/// end), so its dispatcher regularly sees a partial record at the end of what it read. When the
/// rest arrives and fills the segment before the dispatcher looks again, the partial record is
/// not corruption: the dispatcher must read on, not skip the rest of the segment.
#[test]
fn a_slave_dispatches_every_record_when_frames_cut_records_at_segment_ends() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master_store = open(config(md.path(), BrokerRole::SyncMaster));
    let slave_store = open(config(sd.path(), BrokerRole::Slave));
    for i in 0..3000 {
        assert!(master_store.put_message(&message(i)).is_ok());
    }
    let end = master_store.commit_log().max_offset();
    assert!(end > 25 * 64 * 1024, "the test wants many segment ends: {end}");
    // Small frames, as a master catching a slave up sends them, never across a segment end.
    let mut at = 0;
    while at < end {
        let chunk = master_store.read_at(at, 997).unwrap();
        at = slave_store.append_at(at, &chunk).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while slave_store.dispatch_behind_bytes() > 0 || master_store.dispatch_behind_bytes() > 0 {
        assert!(Instant::now() < deadline, "the stores never dispatched");
        std::thread::sleep(Duration::from_millis(10));
    }
    for t in 0..3 {
        for q in 0..2 {
            let topic = format!("T{t}");
            assert_eq!(slave_store.max_offset_in_queue(&topic, q), master_store.max_offset_in_queue(&topic, q), "{topic}/{q}");
        }
    }
    slave_store.shutdown();
    master_store.shutdown();
}
