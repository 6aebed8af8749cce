//! SYNC_FLUSH under a bad disk, through the store API and the commit log's msync seam: a hanging
//! msync still answers FLUSH_DISK_TIMEOUT on time, a failing one fails the waiters and stops
//! writes, a panicking callback harms nobody else, and the waiter cap holds.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use store::commit_log::{PutMessageResult, PutStatus};
use store::config::{FlushDiskType, MessageStoreConfig};
use store::mapped_file::{FileSync, MappedFile};
use store::message::MessageToStore;
use store::store::{GetMessageStatus, MessageStore};

/// How late an answer may come after its deadline on a loaded two-core machine.
const MARGIN: Duration = Duration::from_secs(3);

fn config(dir: &std::path::Path, timeout_ms: u64) -> MessageStoreConfig {
    MessageStoreConfig {
        store_path_root_dir: dir.to_string_lossy().into_owned(),
        mapped_file_size_commit_log: 64 * 1024,
        mapped_file_size_consume_queue: 100 * 20,
        max_hash_slot_num: 1000,
        max_index_num: 4000,
        flush_disk_type: FlushDiskType::SyncFlush,
        sync_flush_timeout_ms: timeout_ms,
        ..Default::default()
    }
}

fn message(i: usize) -> MessageToStore {
    MessageToStore {
        topic: "Flush".into(),
        queue_id: 0,
        flag: i as i32,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from(vec![b'x'; 200]),
        properties: String::new(),
    }
}

fn open(cfg: MessageStoreConfig) -> Arc<MessageStore> {
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    store
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Works,
    Hangs,
    Fails,
}

/// A disk whose msync works, hangs (until the mode changes) or fails with EIO.
struct FaultyDisk {
    mode: Mutex<Mode>,
    changed: Condvar,
    calls: AtomicUsize,
}

impl FileSync for FaultyDisk {
    fn sync_range(&self, file: &MappedFile, start: usize, len: usize) -> io::Result<()> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut mode = self.mode.lock().unwrap();
        while *mode == Mode::Hangs {
            mode = self.changed.wait(mode).unwrap();
        }
        match *mode {
            Mode::Fails => Err(io::Error::from_raw_os_error(5)),
            _ => file.msync_range(start, len),
        }
    }
}

/// The installed disk; dropping it lets a hung msync return, so the store can shut down.
struct Disk(Arc<FaultyDisk>);

impl Disk {
    fn install(store: &MessageStore, mode: Mode) -> Disk {
        let disk = Arc::new(FaultyDisk { mode: Mutex::new(mode), changed: Condvar::new(), calls: AtomicUsize::new(0) });
        store.commit_log().set_file_sync(disk.clone());
        Disk(disk)
    }

    fn set(&self, mode: Mode) {
        *self.0.mode.lock().unwrap() = mode;
        self.0.changed.notify_all();
    }

    /// Waits (bounded) until the flusher is inside msync.
    fn wait_until_called(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.0.calls.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline, "the flusher never called msync");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.set(Mode::Works);
    }
}

/// `put_messages_then`, with the answer and the time it came delivered to a channel.
fn put_then(store: &MessageStore, i: usize) -> Receiver<(PutMessageResult, Instant)> {
    let (tx, rx) = channel();
    store.put_messages_then(&[message(i)], Box::new(move |r| tx.send((r, Instant::now())).unwrap()));
    rx
}

fn remark(r: &PutMessageResult) -> &str {
    r.remark.as_deref().unwrap_or("")
}

#[test]
fn a_hanging_msync_answers_a_blocking_put_flush_disk_timeout_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let timeout = Duration::from_millis(400);
    let store = open(config(dir.path(), 400));
    let disk = Disk::install(&store, Mode::Hangs);
    let started = Instant::now();
    let r = store.put_message(&message(0));
    let waited = started.elapsed();
    assert_eq!(r.status, PutStatus::FlushDiskTimeout, "{:?}", r.remark);
    assert!(r.append.is_some(), "the record is stored; only its flush is unconfirmed");
    assert!(waited >= timeout, "answered after {waited:?}, before the {timeout:?} deadline");
    assert!(waited < timeout + MARGIN, "answered only after {waited:?}");
    assert!(remark(&r).contains("syncFlushTimeout"), "{}", remark(&r));
    disk.set(Mode::Works);
    assert_eq!(store.put_message(&message(1)).status, PutStatus::PutOk, "a disk that recovers from a hang serves again");
    store.shutdown();
}

#[test]
fn a_hanging_msync_answers_a_callback_put_flush_disk_timeout_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let timeout = Duration::from_millis(400);
    let store = open(config(dir.path(), 400));
    let disk = Disk::install(&store, Mode::Hangs);
    let started = Instant::now();
    let answers: Vec<_> = (0..5).map(|i| put_then(&store, i)).collect();
    assert!(started.elapsed() < timeout, "put_then must not hold the caller while the disk hangs");
    disk.wait_until_called();
    for rx in answers {
        let (r, at) = rx.recv_timeout(timeout + MARGIN).expect("a put under a hung disk was never answered");
        assert_eq!(r.status, PutStatus::FlushDiskTimeout);
        assert!(at - started >= timeout, "answered after {:?}, before the deadline", at - started);
    }
    drop(disk);
    store.shutdown();
}

#[test]
fn a_failing_msync_fails_the_waiters_and_refuses_later_puts_while_reads_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path(), 10_000));
    assert_eq!(store.put_message(&message(0)).status, PutStatus::PutOk);
    let disk = Disk::install(&store, Mode::Hangs);
    let answers: Vec<_> = (1..6).map(|i| put_then(&store, i)).collect();
    disk.wait_until_called();
    disk.set(Mode::Fails);
    for rx in answers {
        let (r, _) = rx.recv_timeout(Duration::from_secs(5)).expect("a waiter was not failed by the flush error");
        assert_eq!(r.status, PutStatus::FlushDiskTimeout, "a failed flush must not acknowledge");
        assert!(remark(&r).contains("flush failed") && remark(&r).contains("os error 5"), "{}", remark(&r));
    }
    assert!(store.commit_log().flush_failure().is_some());

    // A disk that "works" again proves nothing about the lost pages: writes stay refused.
    disk.set(Mode::Works);
    let end = store.commit_log().max_offset();
    let refused = store.put_message(&message(6));
    assert_eq!(refused.status, PutStatus::ServiceNotAvailable);
    assert!(remark(&refused).contains("os error 5") && remark(&refused).contains("restarted"), "{}", remark(&refused));
    let (r, _) = put_then(&store, 7).recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(r.status, PutStatus::ServiceNotAvailable);
    assert_eq!(store.commit_log().max_offset(), end, "a refused put writes nothing");

    // The store stays readable.
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.dispatch_behind_bytes() > 0 {
        assert!(Instant::now() < deadline, "dispatch never caught up");
        std::thread::sleep(Duration::from_millis(1));
    }
    let read = store.get_message("Flush", 0, 0, 32, |_| true);
    assert_eq!((read.status, read.messages.len()), (GetMessageStatus::Found, 6));
    store.shutdown();
    assert!(dir.path().join("abort").exists(), "after a flush error the next start must recover as after a crash");
}

#[test]
fn a_failing_msync_stops_writes_under_async_flush_too() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = MessageStoreConfig {
        flush_disk_type: FlushDiskType::AsyncFlush,
        flush_interval_commit_log_ms: 5,
        flush_commit_log_least_pages: 0,
        ..config(dir.path(), 1000)
    };
    let store = open(cfg);
    let _disk = Disk::install(&store, Mode::Fails);
    assert_eq!(store.put_message(&message(0)).status, PutStatus::PutOk, "async puts do not wait for the flush");
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.commit_log().flush_failure().is_none() {
        assert!(Instant::now() < deadline, "the timed flush never ran");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(store.put_message(&message(1)).status, PutStatus::ServiceNotAvailable);
    store.shutdown();
}

#[test]
fn a_panicking_callback_does_not_stop_later_sync_flush_acks() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path(), 5000));
    for i in 0..3 {
        store.put_messages_then(&[message(i)], Box::new(|_| panic!("a careless callback")));
    }
    let answers: Vec<_> = (3..23).map(|i| put_then(&store, i)).collect();
    for rx in answers {
        let (r, _) = rx.recv_timeout(Duration::from_secs(10)).expect("the flusher died with the callback");
        assert_eq!(r.status, PutStatus::PutOk);
    }
    assert_eq!(store.put_message(&message(23)).status, PutStatus::PutOk);
    store.shutdown();
}

#[test]
fn puts_beyond_the_waiter_cap_are_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let timeout = Duration::from_millis(600);
    let store = open(MessageStoreConfig { sync_flush_max_waiters: 3, ..config(dir.path(), 600) });
    let disk = Disk::install(&store, Mode::Hangs);
    let started = Instant::now();
    let answers: Vec<_> = (0..10).map(|i| put_then(&store, i)).collect();
    let mut busy = 0;
    let mut timed_out = 0;
    for rx in answers {
        let (r, at) = rx.recv_timeout(timeout + MARGIN).expect("a put was never answered");
        assert_eq!(r.status, PutStatus::FlushDiskTimeout);
        if remark(&r).contains("syncFlushMaxWaiters") {
            assert!(at - started < timeout, "a put beyond the cap must be answered at once");
            busy += 1;
        } else {
            assert!(at - started >= timeout, "a waiter within the cap was answered before its deadline");
            timed_out += 1;
        }
    }
    assert_eq!((busy, timed_out), (7, 3));
    drop(disk);
    store.shutdown();
}
