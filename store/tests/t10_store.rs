//! The store through its public API: append, dispatch, read, query, restart, recovery.

use std::sync::Arc;

use bytes::Bytes;
use store::commit_log::PutStatus;
use store::config::{FlushDiskType, MessageStoreConfig};
use store::message::record::{decode_record, RecordAt};
use store::message::MessageToStore;
use store::store::{GetMessageStatus, MessageStore};

fn config(dir: &std::path::Path) -> MessageStoreConfig {
    MessageStoreConfig {
        store_path_root_dir: dir.to_string_lossy().into_owned(),
        mapped_file_size_commit_log: 64 * 1024,
        mapped_file_size_consume_queue: 100 * 20,
        max_hash_slot_num: 1000,
        max_index_num: 4000,
        flush_interval_commit_log_ms: 10,
        flush_interval_consume_queue_ms: 10,
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
        properties: format!("TAGS\u{1}Tag{}\u{2}KEYS\u{1}key-{i} shared\u{2}UNIQ_KEY\u{1}{i:032X}\u{2}", i % 4),
    }
}

fn open(cfg: MessageStoreConfig) -> Arc<MessageStore> {
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    store
}

/// Waits (bounded) until the dispatcher has built the queues for everything appended.
fn wait_dispatched(store: &MessageStore) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.dispatch_behind_bytes() > 0 {
        assert!(std::time::Instant::now() < deadline, "dispatch never caught up");
        std::thread::yield_now();
    }
}

/// Every message of every queue, read back in queue order.
fn read_all(store: &MessageStore, n: usize) -> Vec<(String, i32, i64, i32)> {
    let mut out = Vec::new();
    for t in 0..3 {
        for q in 0..2 {
            let topic = format!("T{t}");
            let mut offset = 0;
            loop {
                let r = store.get_message(&topic, q, offset, 32, |_| true);
                if r.status != GetMessageStatus::Found {
                    break;
                }
                for bytes in &r.messages {
                    let RecordAt::Record(rec) = decode_record(bytes, true).unwrap() else { panic!() };
                    out.push((rec.topic.to_owned(), rec.queue_id, rec.queue_offset, rec.flag));
                }
                offset = r.next_begin_offset;
            }
        }
    }
    assert!(out.len() <= n);
    out
}

#[test]
fn messages_come_back_in_queue_order_across_file_rolls_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let n = 600;
    let store = open(config(dir.path()));
    for i in 0..n {
        let r = store.put_message(&message(i));
        assert_eq!(r.status, PutStatus::PutOk, "{:?}", r.remark);
    }
    wait_dispatched(&store);
    let before = read_all(&store, n);
    assert_eq!(before.len(), n);
    assert!(store.commit_log().files().files().len() > 3, "files should have rolled");
    for (topic, queue, offset, flag) in &before {
        let i = *flag as usize;
        assert_eq!((topic.clone(), *queue), (format!("T{}", i % 3), (i % 2) as i32));
        let expected_offset = (0..i).filter(|j| j % 6 == i % 6).count() as i64;
        assert_eq!(*offset, expected_offset);
    }
    store.shutdown();
    drop(store);
    assert!(!dir.path().join("abort").exists());

    let store = open(config(dir.path()));
    assert_eq!(read_all(&store, n), before);
    // Appends continue with the next queue offsets.
    let r = store.put_message(&message(n));
    assert_eq!(r.append.unwrap().logics_offset, (n / 6) as i64);
    store.shutdown();
}

#[test]
fn keys_and_unique_keys_are_found_through_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for i in 0..50 {
        store.put_message(&message(i));
    }
    wait_dispatched(&store);
    let found = store.query_message("T1", "key-7", 32, 0, i64::MAX);
    assert_eq!(found.messages.len(), 1);
    let found = store.query_message("T1", &format!("{:032X}", 7), 32, 0, i64::MAX);
    assert_eq!(found.messages.len(), 1);
    let shared = store.query_message("T0", "shared", 32, 0, i64::MAX);
    assert_eq!(shared.messages.len(), (0..50).filter(|i| i % 3 == 0).count());
    store.shutdown();
}

/// A store holding 12 dispatched messages, all in T0 queue 0.
fn twelve_in_one_queue(dir: &std::path::Path) -> Arc<MessageStore> {
    let store = open(config(dir));
    for i in 0..12 {
        store.put_message(&message(i * 6));
    }
    wait_dispatched(&store);
    store
}

#[test]
fn pull_offsets_follow_javas_rules() {
    let dir = tempfile::tempdir().unwrap();
    let store = twelve_in_one_queue(dir.path());
    let at_end = store.get_message("T0", 0, 12, 32, |_| true);
    assert_eq!((at_end.status, at_end.next_begin_offset), (GetMessageStatus::OffsetOverflowOne, 12));
    let beyond = store.get_message("T0", 0, 20, 32, |_| true);
    assert_eq!((beyond.status, beyond.next_begin_offset), (GetMessageStatus::OffsetOverflowBadly, 12), "back to the end, as Java 4.9.7 and 5.x");
    let unknown = store.get_message("Nope", 0, 0, 32, |_| true);
    assert_eq!(unknown.status, GetMessageStatus::NoMatchedLogicQueue);
    let none_match = store.get_message("T0", 0, 0, 32, |_| false);
    assert_eq!((none_match.status, none_match.next_begin_offset), (GetMessageStatus::NoMatchedMessage, 12));
    let limited = store.get_message("T0", 0, 0, 5, |_| true);
    assert_eq!((limited.messages.len(), limited.next_begin_offset), (5, 5));
    store.shutdown();
}

#[test]
fn a_read_is_recent_when_it_starts_near_the_end_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = twelve_in_one_queue(dir.path());
    let last = store.bytes_behind_end("T0", 0, 11).unwrap();
    let first = store.bytes_behind_end("T0", 0, 0).unwrap();
    assert!(last > 0 && first > last, "older messages lie further behind: {first} vs {last}");
    assert_eq!(first, store.max_phy_offset() - store.min_phy_offset());
    assert_eq!(store.bytes_behind_end("T0", 0, 12), None, "nothing there yet");
    assert_eq!(store.bytes_behind_end("Nope", 0, 0), None);
    assert!(store.reads_in_memory("T0", 0, 0) && store.reads_in_memory("T0", 0, 12) && store.reads_in_memory("Nope", 0, 0));
    store.shutdown();
}

#[test]
fn bad_messages_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(MessageStoreConfig { max_message_size: 1024, ..config(dir.path()) });
    let before = store.commit_log().max_offset();
    let mut big = message(0);
    big.body = Bytes::from(vec![0u8; 1025]);
    let mut long_props = message(0);
    long_props.properties = "x".repeat(40_000);
    let mut long_topic = message(0);
    long_topic.topic = "t".repeat(128);
    assert_eq!(store.put_message(&big).status, PutStatus::MessageIllegal);
    assert_eq!(store.put_message(&long_props).status, PutStatus::PropertiesSizeExceeded);
    assert_eq!(store.put_message(&long_topic).status, PutStatus::MessageIllegal);
    assert_eq!(store.commit_log().max_offset(), before);
    store.shutdown();
}

#[test]
fn sync_flush_acknowledges_after_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(MessageStoreConfig { flush_disk_type: FlushDiskType::SyncFlush, ..config(dir.path()) });
    for i in 0..20 {
        let r = store.put_message(&message(i));
        assert_eq!(r.status, PutStatus::PutOk);
        let a = r.append.unwrap();
        assert!(store.commit_log().flushed_offset() >= a.wrote_offset + a.wrote_bytes as i64);
    }
    store.shutdown();
}

#[test]
fn sync_flush_callbacks_come_after_the_flush_that_covers_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(open(MessageStoreConfig { flush_disk_type: FlushDiskType::SyncFlush, ..config(dir.path()) }));
    let (tx, rx) = std::sync::mpsc::channel();
    // Many puts in flight at once from few threads: none waits, and each answer covers its records.
    for i in 0..64 {
        let tx = tx.clone();
        let s = store.clone();
        store.put_messages_then(
            &[message(i)],
            Box::new(move |r| {
                let a = r.append.clone().unwrap();
                let covered = s.commit_log().flushed_offset() >= a.wrote_offset + a.wrote_bytes as i64;
                tx.send((r.status, covered)).unwrap();
            }),
        );
    }
    for _ in 0..64 {
        let (status, covered) = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(status, PutStatus::PutOk);
        assert!(covered, "acknowledged before the flush covered it");
    }
    store.shutdown();
}

#[test]
fn a_batch_is_stored_with_consecutive_queue_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let batch: Vec<MessageToStore> = (0..10).map(|i| MessageToStore { topic: "B".into(), queue_id: 1, ..message(i) }).collect();
    let r = store.put_messages(&batch);
    let a = r.append.unwrap();
    assert_eq!((a.logics_offset, a.msg_num, a.msg_ids.len()), (0, 10, 10));
    wait_dispatched(&store);
    assert_eq!(store.max_offset_in_queue("B", 1), 10);
    store.shutdown();
}

#[test]
fn a_second_process_on_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    // fcntl locks exclude other processes (as a Java broker would be), so try from a child.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_store-append-probe")).arg(dir.path()).arg("0").output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Lock failed, MQ already started"), "{stderr}");
    store.shutdown();
}

#[test]
fn the_transient_pool_recycles_buffers_across_file_rolls_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = MessageStoreConfig { transient_store_pool_enable: true, transient_store_pool_size: 3, commit_interval_commit_log_ms: 5, ..config(dir.path()) };
    let store = open(cfg.clone());
    assert!(store.commit_log().uses_transient_pool());
    let n = 600;
    for i in 0..n {
        assert_eq!(store.put_message(&message(i)).status, PutStatus::PutOk);
    }
    wait_dispatched(&store);
    // Every message is readable once the commit service copied it into the file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while read_all(&store, n).len() < n {
        assert!(std::time::Instant::now() < deadline, "committed data never became readable");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(store.commit_log().files().files().len() > 3, "files should have rolled");
    assert!(store.commit_log().transient_pool_available() >= 1, "full files return their buffers");
    store.shutdown();
    drop(store);
    let store = open(cfg);
    assert_eq!(read_all(&store, n).len(), n);
    store.shutdown();
}

#[test]
fn the_next_file_is_created_ahead_and_no_spare_is_left_after_a_clean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(MessageStoreConfig { warm_mapped_file_enable: true, ..config(dir.path()) });
    store.put_message(&message(0));
    let spare = dir.path().join("commitlog").join(format!("{:020}", 64 * 1024));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !spare.exists() {
        assert!(std::time::Instant::now() < deadline, "the next file was not created ahead");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    store.shutdown();
    assert!(!spare.exists(), "a clean shutdown removes the spare file, as Java does");
    assert_eq!(std::fs::read_dir(dir.path().join("commitlog")).unwrap().count(), 1);
}

#[test]
fn expired_files_are_cleaned_and_readers_move_to_the_new_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for i in 0..600 {
        store.put_message(&message(i));
    }
    wait_dispatched(&store);
    let files = store.commit_log().files().files().len();
    assert!(files > 3);
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(100 * 3600);
    assert_eq!(store.clean_once(later, 5, 0.1), 0, "not the hour and the disk has room");
    let deleted = store.clean_once(later, 4, 0.1);
    assert_eq!(deleted, (files - 1).min(10));
    let min = store.commit_log().min_offset();
    assert!(min > 0);
    let cq_min = store.min_offset_in_queue("T0", 0);
    assert!(cq_min > 0, "queue minimum follows the commit log");
    let r = store.get_message("T0", 0, 0, 32, |_| true);
    assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::OffsetTooSmall, cq_min));
    let r = store.get_message("T0", 0, cq_min, 32, |_| true);
    assert_eq!(r.status, GetMessageStatus::Found);
    store.shutdown();
}

#[test]
fn a_nearly_full_disk_refuses_writes_until_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let now = std::time::SystemTime::now();
    store.clean_once(now, 5, 0.95);
    assert!(store.is_disk_full());
    let r = store.put_message(&message(0));
    assert_eq!(r.status, PutStatus::ServiceNotAvailable);
    assert!(r.remark.unwrap().contains("disk is full"));
    store.clean_once(now, 5, 0.5);
    assert_eq!(store.put_message(&message(0)).status, PutStatus::PutOk);
    store.shutdown();
}

/// Java's `retryGetAndCreateIndexFile`: three tries a second apart, then the index-file error
/// flag, which makes the store not writable. Ours clears it when a cleaning pass can create a
/// file again (Java's stays until a restart).
#[test]
fn when_no_index_file_can_be_created_writes_are_refused_until_one_can() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let index_dir = dir.path().join("index");
    let _ = std::fs::remove_dir_all(&index_dir);
    std::fs::write(&index_dir, b"a file where the index directory goes").unwrap();
    let started = std::time::Instant::now();
    assert_eq!(store.put_message(&message(0)).status, PutStatus::PutOk);
    wait_dispatched(&store);
    assert!(started.elapsed() >= std::time::Duration::from_secs(2), "three tries, a second apart");
    let r = store.put_message(&message(1));
    assert_eq!(r.status, PutStatus::ServiceNotAvailable);
    assert!(r.remark.unwrap().contains("index file"));
    // The record went into its consume queue all the same; only its keys are not indexed.
    assert_eq!(store.get_message("T0", 0, 0, 32, |_| true).status, GetMessageStatus::Found);
    let now = std::time::SystemTime::now();
    store.clean_once(now, 5, 0.5);
    assert_eq!(store.put_message(&message(1)).status, PutStatus::ServiceNotAvailable, "still no room for a file");
    std::fs::remove_file(&index_dir).unwrap();
    store.clean_once(now, 5, 0.5);
    assert_eq!(store.put_message(&message(1)).status, PutStatus::PutOk);
    wait_dispatched(&store);
    assert_eq!(store.query_message("T1", "key-1", 32, 0, i64::MAX).messages.len(), 1);
    assert!(store.query_message("T0", "key-0", 32, 0, i64::MAX).messages.is_empty(), "put while the index had failed");
    store.shutdown();
}

#[test]
fn raw_commit_log_ranges_are_served_for_replication() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let a = store.put_message(&message(1)).append.unwrap();
    let b = store.put_message(&message(2)).append.unwrap();
    let data = store.commit_log_data(a.wrote_offset, usize::MAX).unwrap();
    assert_eq!(data.len(), a.wrote_bytes + b.wrote_bytes);
    let Ok(RecordAt::Record(first)) = decode_record(&data, true) else { panic!() };
    assert_eq!(first.flag, 1);
    assert_eq!(store.commit_log_data(a.wrote_offset, 10).map(|d| d.len()), Some(10), "cut to the batch size");
    assert!(store.commit_log_data(b.wrote_offset + b.wrote_bytes as i64, usize::MAX).is_none());
    store.shutdown();
}

#[test]
fn a_clean_restart_truncates_no_consume_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for i in 0..600 {
        assert_eq!(store.put_message(&message(i)).status, PutStatus::PutOk);
    }
    wait_dispatched(&store);
    let end = store.commit_log().max_offset();
    let queue_ends: Vec<(String, i32, i64)> = {
        let mut q: Vec<_> = store.queues().iter().map(|cq| (cq.topic().to_owned(), cq.queue_id(), cq.max_offset())).collect();
        q.sort();
        q
    };
    store.shutdown();
    drop(store);

    let store = MessageStore::open(config(dir.path())).unwrap();
    let report = store.recovery();
    assert!(report.last_exit_ok);
    assert!(!report.queues_truncated, "the queues of a clean stop end exactly at the commit log's end");
    assert_eq!((report.commit_log_end, report.dispatch_from), (end, end));
    let mut after: Vec<_> = store.queues().iter().map(|cq| (cq.topic().to_owned(), cq.queue_id(), cq.max_offset())).collect();
    after.sort();
    assert_eq!(after, queue_ends);
}

/// Bytes of each commit-log file after its last record (and end marker) are zero.
fn assert_zero_past_the_last_record(store: &MessageStore) {
    for file in store.commit_log().files().files() {
        let bytes = file.raw(0, file.size()).unwrap();
        let mut pos = 0;
        loop {
            match decode_record(&bytes[pos..], false) {
                Ok(RecordAt::Record(r)) => pos += r.store_size as usize,
                Ok(RecordAt::Blank) => {
                    pos += 8;
                    break;
                }
                Err(_) => break,
            }
        }
        let stale = bytes[pos..].iter().position(|b| *b != 0);
        assert_eq!(stale, None, "{}: non-zero bytes after the last record at {pos}", file.path().display());
    }
}

#[test]
fn files_on_reused_transient_pool_buffers_hold_zeros_past_their_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = MessageStoreConfig { transient_store_pool_enable: true, transient_store_pool_size: 2, commit_interval_commit_log_ms: 1, ..config(dir.path()) };
    let store = open(cfg);
    for i in 0..1200 {
        assert_eq!(store.put_message(&message(i)).status, PutStatus::PutOk);
        if i % 50 == 0 {
            // Let the committer finish full files so their buffers return and are lent again.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    store.shutdown();
    assert!(store.commit_log().files().files().len() > 6, "files should have rolled past the pool's two buffers");
    assert_zero_past_the_last_record(&store);
}

#[test]
fn a_manual_delete_cleans_expired_files_whatever_the_hour() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for i in 0..600 {
        store.put_message(&message(i));
    }
    wait_dispatched(&store);
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(100 * 3600);
    assert_eq!(store.clean_once(later, 5, 0.1), 0, "not the hour and the disk has room");
    store.delete_expired_files_manually();
    assert!(store.clean_once(later, 5, 0.1) > 0, "DELETE_EXPIRED_COMMITLOG deletes at any hour");
    store.shutdown();
}

#[test]
fn queues_whose_messages_are_all_deleted_are_destroyed_and_the_others_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for i in 0..20 {
        store.put_message(&MessageToStore { topic: "OLD".into(), ..message(i) });
    }
    for i in 0..600 {
        store.put_message(&message(i));
    }
    wait_dispatched(&store);
    assert_eq!(store.clean_expired_consume_queues(), 0, "nothing is expired yet");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(100 * 3600);
    assert!(store.clean_once(later, 4, 0.1) > 0);
    assert!(store.find_queue("OLD", 0).is_some(), "the cleaning pass keeps a queue's last file");
    assert!(store.clean_expired_consume_queues() >= 1);
    assert!(store.find_queue("OLD", 0).is_none(), "every message of OLD is gone: its queue too");
    assert!(store.find_queue("T0", 0).is_some() && store.find_queue("T2", 1).is_some());
    store.shutdown();
}

#[test]
fn topics_without_a_config_lose_their_queues() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for i in 0..30 {
        store.put_message(&message(i));
    }
    wait_dispatched(&store);
    let keep: std::collections::HashSet<String> = ["T0".to_owned(), "T1".to_owned()].into();
    assert_eq!(store.clean_unused_topics(&keep), 1);
    assert!(store.find_queue("T2", 0).is_none());
    assert!(store.find_queue("T0", 0).is_some() && store.find_queue("T1", 1).is_some());
    store.shutdown();
}

/// A dispatcher that records what it is handed.
struct Recorder {
    seen: std::sync::Mutex<Vec<(String, i32, i64, i64)>>,
}

impl store::dispatch::Dispatcher for Recorder {
    fn dispatch(&self, request: &store::dispatch::DispatchRequest<'_>) {
        self.seen.lock().unwrap().push((request.topic().to_owned(), request.queue_id(), request.queue_offset(), request.phy_offset));
    }
}

#[test]
fn an_added_dispatcher_sees_every_record_in_log_order_after_the_consume_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    let recorder = Arc::new(Recorder { seen: std::sync::Mutex::new(Vec::new()) });
    store.add_dispatcher(recorder.clone()).unwrap();
    store.start().unwrap();
    let mut offsets = Vec::new();
    for i in 0..50 {
        let result = store.put_message(&message(i));
        assert_eq!(result.status, PutStatus::PutOk);
        offsets.push(result.append.unwrap().wrote_offset);
    }
    wait_dispatched(&store);
    let seen = recorder.seen.lock().unwrap().clone();
    assert_eq!(seen.iter().map(|s| s.3).collect::<Vec<_>>(), offsets, "every record, once, in log order");
    for (topic, queue_id, queue_offset, _) in &seen {
        // The consume queue ran first: the unit is there when a later dispatcher looks.
        assert!(store.max_offset_in_queue(topic, *queue_id) > *queue_offset);
    }
    store.shutdown();
}

#[test]
fn dispatchers_are_added_before_the_store_starts_and_refused_after() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let recorder = Arc::new(Recorder { seen: std::sync::Mutex::new(Vec::new()) });
    assert!(store.add_dispatcher(recorder.clone()).is_err());
    assert!(store.add_dispatcher_first(recorder).is_err());
    store.shutdown();
}

#[test]
fn a_dispatcher_given_at_open_sees_what_recovery_re_dispatches_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for i in 0..50 {
        assert_eq!(store.put_message(&message(i)).status, PutStatus::PutOk);
    }
    wait_dispatched(&store);
    store.shutdown();
    drop(store);
    // The abort file a crash leaves behind.
    std::fs::File::create(dir.path().join("abort")).unwrap();

    let recorder = Arc::new(Recorder { seen: std::sync::Mutex::new(Vec::new()) });
    let store = MessageStore::open_with_dispatchers(config(dir.path()), vec![recorder.clone()]).unwrap();
    assert!(!store.recovery().last_exit_ok);
    let seen = recorder.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 50, "recovery re-dispatched every record of the walked files to it");
    assert!(seen.windows(2).all(|w| w[0].3 < w[1].3), "in log order");
}

/// The pre-fault service keeps the active commit-log file faulted in a window ahead of the
/// writer (the writer appends into pages already mapped), and leaves files that append into a
/// transient-pool buffer alone.
#[test]
fn the_active_commit_log_file_is_kept_prefaulted_ahead_of_the_writer() {
    use store::mapped_file::{PREFAULT_STEP_BYTES, PREFAULT_WINDOW_BYTES};
    for pool in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let size = 32 << 20;
        let store = open(MessageStoreConfig {
            mapped_file_size_commit_log: size,
            transient_store_pool_enable: pool,
            transient_store_pool_size: 2,
            ..config(dir.path())
        });
        // ~7 MiB: past the first step of the window the allocation service pre-faulted.
        for i in 0..10_000 {
            assert_eq!(store.put_message(&message(i)).status, PutStatus::PutOk);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let file = store.commit_log().files().last().unwrap();
            let (wrote, prefaulted) = (file.wrote_position(), file.prefaulted_position());
            if pool {
                assert!(file.uses_write_buffer());
                assert_eq!(prefaulted, 0, "a file appending into a pool buffer was pre-faulted");
                break;
            }
            assert!(wrote > PREFAULT_STEP_BYTES);
            if prefaulted >= wrote + PREFAULT_WINDOW_BYTES - PREFAULT_STEP_BYTES {
                assert!(prefaulted <= wrote + PREFAULT_WINDOW_BYTES + 4096, "one window ahead, no more: {prefaulted} for {wrote}");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the window never moved ahead of {wrote} (pre-faulted to {prefaulted})");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        store.shutdown();
    }
}

#[test]
fn long_polling_hears_of_every_arrival_once_per_queue_and_pass_in_queue_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    type Heard = Vec<(String, i32, Vec<store::store::Arrival>)>;
    let heard: Arc<std::sync::Mutex<Heard>> = Arc::default();
    let h = heard.clone();
    store.set_arrival_listener(Arc::new(move |topic, queue_id, arrivals| h.lock().unwrap().push((topic.to_owned(), queue_id, arrivals.to_vec()))));
    store.start().unwrap();
    for i in 0..40 {
        assert_eq!(store.put_message(&message(i)).status, PutStatus::PutOk);
    }
    // A batch is appended at once: one pass sees it all, and its queue hears of it in one call.
    let batch: Vec<MessageToStore> = (0..10).map(|i| MessageToStore { topic: "B".into(), queue_id: 1, ..message(i) }).collect();
    store.put_messages(&batch).append.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while heard.lock().unwrap().iter().map(|h| h.2.len()).sum::<usize>() < 50 {
        assert!(std::time::Instant::now() < deadline, "arrivals never all heard");
        std::thread::yield_now();
    }
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.iter().filter(|h| h.0 == "B").map(|h| h.2.len()).collect::<Vec<_>>(), vec![10]);
    // Per queue: every message once, its next offset in order, with its tags code.
    let mut by_queue: std::collections::BTreeMap<(String, i32), Vec<store::store::Arrival>> = Default::default();
    for (topic, queue_id, arrivals) in heard {
        by_queue.entry((topic, queue_id)).or_default().extend(arrivals);
    }
    for ((topic, queue_id), arrivals) in &by_queue {
        let offsets: Vec<i64> = arrivals.iter().map(|a| a.max_offset).collect();
        assert_eq!(offsets, (1..=arrivals.len() as i64).collect::<Vec<_>>(), "{topic}-{queue_id}");
    }
    let t0q0: Vec<i64> = by_queue[&("T0".to_owned(), 0)].iter().map(|a| a.tags_code).collect();
    let expected: Vec<i64> = (0..40).filter(|i| i % 3 == 0 && i % 2 == 0).map(|i| store::message::tags_code(Some(&format!("Tag{}", i % 4)))).collect();
    assert_eq!(t0q0, expected);
    store.shutdown();
}
