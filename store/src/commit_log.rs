//! The commit log: every message of every topic, appended in one address space of segment files.
//!
//! Appending: records are encoded outside the lock; under it the writer assigns the queue offset,
//! physical offset and store time, rolls to a new file when a record (plus the 8-byte end marker)
//! does not fit, and copies the record in. Flushing follows `flushDiskType`: SYNC_FLUSH callers
//! wait for the group commit that covers their bytes ([`crate::group_commit`], driven by
//! the `flush` module), ASYNC_FLUSH flushes on a timer. A flush error stops writes for good (until
//! a restart).

use bytes::Bytes;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use remoting::service::{Service, ServiceContext, Waker};
use tracing::{debug, error};

use crate::allocate::{AllocateConfig, AllocateService};
use crate::config::{FlushDiskType, MessageStoreConfig};
use crate::flush::FlushControl;
use crate::mapped_file::{FileSync, MappedFile, Msync, PREFAULT_WINDOW_BYTES};
use crate::mapped_file_queue::{LoadError, MappedFileQueue};
use crate::message::offset_message_id;
use crate::message::properties;
use crate::message::record::{
    encode_record, EncodedRecord, MessageToStore, RecordError, StampedFields, MAGIC_BLANK, MAX_V1_TOPIC_BYTES, SYSFLAG_TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE,
};
use crate::transient_pool::TransientStorePool;

pub use crate::clock::now_ms;
pub use crate::put::{AppendResult, PutCallback, PutMessageResult, PutStatus};

/// A record must leave room for the end-of-file marker.
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;

/// Why a slave's append of its master's bytes was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicatedAppendError {
    #[error("the bytes start at {offset}, but the commit log ends at {end}")]
    NotAtEnd { offset: i64, end: i64 },
    #[error("{len} bytes at {offset} do not fit the {room} bytes left in its commit-log file")]
    DoesNotFit { offset: i64, len: usize, room: usize },
    #[error("{0}")]
    Refused(String),
}

/// The append path of the store. The file-based [`CommitLog`] implements it; the DLedger commit
/// log will too, so the broker's put path does not change when a store switches to Raft.
pub trait AppendLog: Send + Sync {
    /// Appends one message or a batch (one topic and queue) and applies the flush policy.
    fn append(&self, msgs: &[MessageToStore]) -> PutMessageResult;
    /// As [`AppendLog::append`], but hands the result to `done` instead of blocking the caller
    /// until the flush policy is met (a SYNC_FLUSH caller's thread is free while the disk works).
    fn append_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        done(self.append(msgs));
    }
    /// As [`AppendLog::append`], answered once appended whatever the flush policy (Java's
    /// `waitStoreMsgOK=false` set outside the properties, as the timer puts its releases). A
    /// DLedger log still answers once its quorum holds the entry.
    fn append_no_wait(&self, msgs: &[MessageToStore]) -> PutMessageResult {
        self.append(msgs)
    }
    /// As [`AppendLog::append_no_wait`], with the result handed to `done`: a DLedger log answers
    /// from its member once the quorum holds the entry, so a caller (the timer's releases) can
    /// keep many appends in flight instead of waiting for each quorum in turn.
    fn append_no_wait_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        done(self.append_no_wait(msgs));
    }
    /// The first readable physical offset.
    fn min_offset(&self) -> i64;
    /// The end of readable data.
    fn max_offset(&self) -> i64;
    /// `size` readable bytes at `offset`.
    fn read_bytes(&self, offset: i64, size: usize) -> Option<Bytes>;
}

/// Checks a message against the store's limits and encodes its record, answering a refusal as
/// the put's result.
pub fn check_and_encode(msg: &MessageToStore, max_message_size: usize) -> Result<EncodedRecord, PutMessageResult> {
    if msg.topic.len() > MAX_V1_TOPIC_BYTES {
        // As Java 4.9: a longer topic would need a v2 record, which 4.9 and Go cannot read.
        return Err(PutMessageResult::failed(
            PutStatus::MessageIllegal,
            format!("topic of {} bytes exceeds the limit of {MAX_V1_TOPIC_BYTES} bytes", msg.topic.len()),
        ));
    }
    if msg.body.len() > max_message_size {
        return Err(PutMessageResult::failed(
            PutStatus::MessageIllegal,
            format!("message body of {} bytes exceeds maxMessageSize {max_message_size}", msg.body.len()),
        ));
    }
    encode_record(msg).map_err(|e| match e {
        RecordError::PropertiesTooLong { .. } => PutMessageResult::failed(PutStatus::PropertiesSizeExceeded, e.to_string()),
        other => PutMessageResult::failed(PutStatus::MessageIllegal, other.to_string()),
    })
}

impl AppendLog for CommitLog {
    fn append(&self, msgs: &[MessageToStore]) -> PutMessageResult {
        self.put(msgs)
    }
    fn append_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        self.put_then(msgs, done)
    }
    fn append_no_wait(&self, msgs: &[MessageToStore]) -> PutMessageResult {
        if let Some(refused) = self.refuse_put() {
            return refused;
        }
        match self.append_records(msgs) {
            Ok((append, _, _)) => {
                self.wake_flusher();
                PutMessageResult { status: PutStatus::PutOk, append: Some(append), remark: None }
            }
            Err(failed) => failed,
        }
    }
    fn min_offset(&self) -> i64 {
        CommitLog::min_offset(self)
    }
    fn max_offset(&self) -> i64 {
        CommitLog::max_offset(self)
    }
    fn read_bytes(&self, offset: i64, size: usize) -> Option<Bytes> {
        CommitLog::read_bytes(self, offset, size)
    }
}

/// The writer's state, guarded by the append lock.
struct Writer {
    /// Next queue offset per topic and queue id (Java's `topicQueueTable`), nested so the hot
    /// path looks up by `&str` without building a key.
    queue_offsets: HashMap<String, HashMap<i32, i64>>,
}

impl Writer {
    fn next_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.queue_offsets.get(topic).and_then(|q| q.get(&queue_id)).copied().unwrap_or(0)
    }

    fn set_next_offset(&mut self, topic: &str, queue_id: i32, offset: i64) {
        match self.queue_offsets.get_mut(topic) {
            Some(queues) => {
                queues.insert(queue_id, offset);
            }
            None => {
                self.queue_offsets.insert(topic.to_owned(), HashMap::from([(queue_id, offset)]));
            }
        }
    }
}

pub struct CommitLog {
    files: MappedFileQueue,
    writer: Mutex<Writer>,
    config: Arc<MessageStoreConfig>,
    /// The keys followed at once (`maxMessageSize`, the flush interval and least pages).
    tunables: Arc<crate::config::Tunables>,
    /// SYNC_FLUSH waiters and the flush-failure latch.
    control: Arc<FlushControl>,
    /// How flushes force bytes to disk: msync, except through the test seam.
    file_sync: RwLock<Arc<dyn FileSync>>,
    /// Wakes the flush service; puts use it only when the flusher waits to be woken (SYNC_FLUSH,
    /// or ASYNC_FLUSH with `flushCommitLogTimed=false`); a timed flusher just sleeps, as in Java.
    flusher: OnceLock<Waker>,
    flusher_wakes: bool,
    /// Wakes the pre-fault service, which keeps the active file pre-faulted ahead of the writer.
    prefaulter: OnceLock<Waker>,
    /// A wake-up of the pre-faulter is pending (so a put wakes it once per step, not per put).
    prefault_requested: AtomicBool,
    /// Set while the services run; puts are refused outside that window.
    accepting: AtomicBool,
    services: Mutex<Services>,
    /// Store time of the last record appended (the checkpoint's physic time after a flush).
    last_store_timestamp: AtomicI64,
    /// When the put holding the append lock took it (ms), 0 while no put holds it: Java's
    /// `beginTimeInLock`, which `isOSPageCacheBusy` reads.
    begin_time_in_lock_ms: AtomicI64,
    pool: Option<Arc<TransientStorePool>>,
    allocator: Mutex<Option<Arc<AllocateService>>>,
    /// One committer at a time (the commit service, or shutdown).
    commit_lock: Mutex<()>,
}

/// The commit log's background services, stopped in this order.
#[derive(Default)]
struct Services {
    /// Transient pool only: copies buffers into their files.
    commit: Option<Service>,
    /// Calls msync (see [`crate::flush`]).
    flush: Option<Service>,
    /// SYNC_FLUSH only: fires the waiters' deadlines.
    timer: Option<Service>,
    /// Keeps the active file pre-faulted ahead of the writer.
    prefault: Option<Service>,
}

impl CommitLog {
    /// The keys this log follows at once.
    pub fn tunables(&self) -> &Arc<crate::config::Tunables> {
        &self.tunables
    }

    pub fn new(config: Arc<MessageStoreConfig>) -> io::Result<CommitLog> {
        let pool = if config.transient_store_pool_in_use() {
            Some(Arc::new(TransientStorePool::new(config.transient_store_pool_size, config.mapped_file_size_commit_log)?))
        } else {
            None
        };
        let timeout = Duration::from_millis(config.sync_flush_timeout_ms);
        let flusher_wakes = config.flush_disk_type == FlushDiskType::SyncFlush || !config.flush_commit_log_timed;
        Ok(CommitLog {
            files: MappedFileQueue::new(config.commit_log_dir(), config.mapped_file_size_commit_log),
            writer: Mutex::new(Writer { queue_offsets: HashMap::new() }),
            tunables: Arc::new(crate::config::Tunables::new(&config)),
            control: Arc::new(FlushControl::new(timeout, config.sync_flush_max_waiters)),
            file_sync: RwLock::new(Arc::new(Msync)),
            flusher: OnceLock::new(),
            flusher_wakes,
            prefaulter: OnceLock::new(),
            prefault_requested: AtomicBool::new(false),
            accepting: AtomicBool::new(false),
            services: Mutex::new(Services::default()),
            config,
            last_store_timestamp: AtomicI64::new(0),
            begin_time_in_lock_ms: AtomicI64::new(0),
            pool,
            allocator: Mutex::new(None),
            commit_lock: Mutex::new(()),
        })
    }

    /// Test seam: flushes force bytes through `sync` instead of msync, so a test can make the
    /// disk hang or fail. Production never calls it; the default is [`Msync`].
    #[doc(hidden)]
    pub fn set_file_sync(&self, sync: Arc<dyn FileSync>) {
        *self.file_sync.write() = sync;
    }

    /// The flush error that stopped writes, if one happened. Puts are refused from then on; a
    /// restart, whose recovery re-reads (and CRC-checks) what reached the disk, clears it.
    pub fn flush_failure(&self) -> Option<&str> {
        self.control.failure()
    }

    /// Starts the allocation service that pre-creates (and optionally warms) the next file.
    pub fn start_allocation(&self) -> io::Result<()> {
        let c = &self.config;
        let warm_up = c.warm_mapped_file_enable.then(|| (c.flush_disk_type == FlushDiskType::SyncFlush).then_some(c.flush_least_pages_when_warm_mapped_file));
        let service = AllocateService::start(AllocateConfig {
            dir: c.commit_log_dir(),
            file_size: c.mapped_file_size_commit_log,
            pool: self.pool.clone(),
            fast_fail_without_buffer: c.fast_fail_if_no_buffer_in_store_pool,
            warm_up,
        })?;
        let allocate = service.clone();
        self.files.set_allocator(Some(Arc::new(move |offset| allocate.allocate(offset))));
        *self.allocator.lock() = Some(service);
        Ok(())
    }

    pub fn uses_transient_pool(&self) -> bool {
        self.pool.is_some()
    }

    /// Free buffers of the transient pool (0 without a pool).
    pub fn transient_pool_available(&self) -> usize {
        self.pool.as_ref().map_or(0, |p| p.available())
    }

    /// Java's `remainHowManyDataToCommit`: written into pool buffers, not yet in the files.
    pub fn uncommitted_bytes(&self) -> u64 {
        if self.pool.is_some() {
            self.files.uncommitted_bytes()
        } else {
            0
        }
    }

    /// Copies pool buffers into their files; wakes the flusher when bytes moved.
    pub fn commit(&self, least_pages: usize) {
        let _one_committer = self.commit_lock.lock();
        if self.files.commit(least_pages) {
            self.wake_flusher();
        }
    }

    /// Starts the commit (transient pool), flush and deadline-timer services; `on_flushed` gets
    /// the store time of the newest flushed record after each complete flush that moved.
    pub fn start_services(self: &Arc<Self>, on_flushed: impl Fn(i64) + Send + 'static) -> io::Result<()> {
        let mut services = self.services.lock();
        if self.uses_transient_pool() {
            let me = self.clone();
            services.commit = Some(Service::spawn("CommitRealTimeService", move |cx| me.run_commit(cx))?);
        }
        let me = self.clone();
        let flush = Service::spawn("CommitLogFlush", move |cx| me.run_flush(cx, &on_flushed))?;
        let _ = self.flusher.set(flush.waker());
        services.flush = Some(flush);
        if self.config.flush_disk_type == FlushDiskType::SyncFlush {
            services.timer = Some(self.control.start_timer()?);
        }
        let me = self.clone();
        let prefault = Service::spawn("CommitLogPrefault", move |cx| me.run_prefault(cx))?;
        let _ = self.prefaulter.set(prefault.waker());
        services.prefault = Some(prefault);
        self.accepting.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops the services in order: the committer (last commit), the flusher (last flush, up to
    /// ten tries, acknowledging what it covers), then the group commit (whatever still waits
    /// times out) and its timer. A flusher stuck in a hung msync holds this up, as in Java.
    pub fn stop_services(&self) {
        self.accepting.store(false, Ordering::Release);
        let services = std::mem::take(&mut *self.services.lock());
        if let Some(commit) = services.commit {
            commit.stop();
        }
        if let Some(flush) = services.flush {
            flush.stop();
        }
        self.control.stop();
        if let Some(timer) = services.timer {
            timer.stop();
        }
        if let Some(prefault) = services.prefault {
            prefault.stop();
        }
    }

    /// The pre-fault loop: whenever a put finds the writer about to leave the pre-faulted window
    /// (and once a second), tops the active file's window up to [`PREFAULT_WINDOW_BYTES`] beyond
    /// the write position, off the append path. Page faults on first write to each page of the
    /// mapping otherwise happen under the append lock (a profile of send saturation put ~12 % of
    /// the broker's CPU there). Not a config key: Java has none for it (`warmMapedFileEnable`
    /// warms whole files and stays as it is); it changes no byte of any file, and costs at most
    /// one window of page cache ahead of the writer. Appends into transient-pool buffers leave the
    /// mapping alone, and then so does this (see [`MappedFile::prefault_ahead`]).
    fn run_prefault(&self, cx: &ServiceContext) {
        while cx.wait(Duration::from_secs(1)) {
            // Cleared before the work, so a put that finds the window short again meanwhile wakes
            // another round.
            self.prefault_requested.store(false, Ordering::Release);
            if let Some(file) = self.files.last() {
                if let Err(e) = file.prefault_ahead(PREFAULT_WINDOW_BYTES) {
                    debug!(path = %file.path().display(), error = %e, "pre-faulting the commit log failed");
                }
            }
        }
    }

    /// Wakes the pre-faulter when `file` (just appended to) nears the end of its pre-faulted
    /// window; at most once until the pre-faulter has run.
    fn prefault_if_due(&self, file: &MappedFile) {
        if file.prefault_due() && !self.prefault_requested.swap(true, Ordering::AcqRel) {
            if let Some(prefaulter) = self.prefaulter.get() {
                prefaulter.wake();
            }
        }
    }

    /// The commit loop (transient pool only).
    fn run_commit(&self, cx: &ServiceContext) {
        let interval = Duration::from_millis(self.config.commit_interval_commit_log_ms.max(1));
        let thorough = Duration::from_millis(self.config.commit_commit_log_thorough_interval_ms);
        let mut last_thorough = Instant::now();
        while cx.wait(interval) {
            let least = if last_thorough.elapsed() >= thorough {
                last_thorough = Instant::now();
                0
            } else {
                self.config.commit_commit_log_least_pages
            };
            self.commit(least);
        }
        self.commit(0);
    }

    /// Stops the allocation service, deleting any file it created ahead.
    pub fn stop_allocation(&self) {
        self.files.set_allocator(None);
        if let Some(service) = self.allocator.lock().take() {
            service.shutdown();
        }
    }

    pub fn load(&self) -> Result<(), LoadError> {
        self.files.load()
    }

    pub fn files(&self) -> &MappedFileQueue {
        &self.files
    }

    pub fn min_offset(&self) -> i64 {
        self.files.min_offset() as i64
    }

    pub fn max_offset(&self) -> i64 {
        self.files.max_offset() as i64
    }

    pub fn flushed_offset(&self) -> i64 {
        self.files.flushed_offset() as i64
    }

    /// Sets the next queue offsets after recovery: topic -> queue id -> offset.
    pub fn set_queue_offsets(&self, offsets: HashMap<String, HashMap<i32, i64>>) {
        self.writer.lock().queue_offsets = offsets;
    }

    /// The file and in-file position holding `offset`.
    pub fn locate(&self, offset: i64) -> Option<(Arc<MappedFile>, usize)> {
        let offset = u64::try_from(offset).ok()?;
        let file = self.files.find(offset)?;
        let pos = (offset - file.from_offset()) as usize;
        Some((file, pos))
    }

    /// `size` bytes at `offset`, if readable, sharing the mapping (no copy).
    pub fn read_bytes(&self, offset: i64, size: usize) -> Option<Bytes> {
        let (file, pos) = self.locate(offset)?;
        file.read_shared(pos, size)
    }

    pub fn put_message(&self, msg: &MessageToStore) -> PutMessageResult {
        self.put(std::slice::from_ref(msg))
    }

    /// Appends one message, or a batch (all of one topic and queue, stored back to back in one
    /// file with consecutive queue offsets). Under SYNC_FLUSH the caller blocks until a flush
    /// covers the records, or FLUSH_DISK_TIMEOUT after `syncFlushTimeout`.
    pub fn put(&self, msgs: &[MessageToStore]) -> PutMessageResult {
        if let Some(refused) = self.refuse_put() {
            return refused;
        }
        match self.append_records(msgs) {
            Ok((append, _, wait)) if !self.waits_for_flush(wait) => {
                self.wake_flusher();
                PutMessageResult { status: PutStatus::PutOk, append: Some(append), remark: None }
            }
            Ok((append, end, _)) => self.await_flush(end, append),
            Err(failed) => failed,
        }
    }

    /// As [`CommitLog::put`], acknowledging through `done`: at once, or (SYNC_FLUSH) from the
    /// flush service once a flush covers the records (or from the deadline timer, or on a flush
    /// failure), so the caller's thread is never held by the disk.
    pub fn put_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        if let Some(refused) = self.refuse_put() {
            return done(refused);
        }
        match self.append_records(msgs) {
            Ok((append, _, wait)) if !self.waits_for_flush(wait) => {
                self.wake_flusher();
                done(PutMessageResult { status: PutStatus::PutOk, append: Some(append), remark: None })
            }
            Ok((append, end, _)) => {
                self.control.wait(end, append, done);
                self.wake_flusher();
            }
            Err(failed) => done(failed),
        }
    }

    /// The blocking form of a SYNC_FLUSH wait: the same group-commit waiter as `put_then`, whose
    /// callback hands the answer to this thread. The machine answers every waiter (flush, timer,
    /// failure or stop), so the receive ends.
    fn await_flush(&self, end: u64, append: AppendResult) -> PutMessageResult {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.control.wait(
            end,
            append,
            Box::new(move |result| {
                let _ = answer.send(result);
            }),
        );
        self.wake_flusher();
        answered.recv().unwrap_or_else(|_| PutMessageResult::failed(PutStatus::FlushDiskTimeout, "the flush service dropped the put unanswered"))
    }

    /// A slave appends its master's bytes, as they came, at its own end (Java's `appendData`):
    /// no parsing, no CRC; the dispatcher reads the records from them. `offset` must be the end of
    /// the log, or any offset while the log is empty (the first file then starts at the segment
    /// holding it). The bytes must fit the segment they start in: a master never sends a chunk
    /// across a segment boundary. Returns the new end.
    pub fn append_replicated(&self, offset: i64, bytes: &[u8]) -> Result<i64, ReplicatedAppendError> {
        if let Some(refused) = self.refuse_put() {
            return Err(ReplicatedAppendError::Refused(refused.remark.unwrap_or_default()));
        }
        let start = u64::try_from(offset).map_err(|_| ReplicatedAppendError::NotAtEnd { offset, end: self.max_offset() })?;
        let _writer = self.writer.lock();
        let end = self.files.max_offset();
        if !self.files.is_empty() && start != end {
            return Err(ReplicatedAppendError::NotAtEnd { offset, end: end as i64 });
        }
        let file = self.files.last_or_create(start).map_err(|e| ReplicatedAppendError::Refused(format!("cannot create a commit-log file: {e}")))?;
        if file.from_offset() + file.wrote_position() as u64 != start {
            return Err(ReplicatedAppendError::NotAtEnd { offset, end: (file.from_offset() + file.wrote_position() as u64) as i64 });
        }
        if bytes.len() > file.remaining() {
            return Err(ReplicatedAppendError::DoesNotFit { offset, len: bytes.len(), room: file.remaining() });
        }
        if !file.append(bytes) {
            return Err(ReplicatedAppendError::Refused("commit-log file lost its room".into()));
        }
        if file.remaining() == 0 {
            file.mark_full();
        }
        drop(_writer);
        self.prefault_if_due(&file);
        self.wake_flusher();
        Ok(self.max_offset())
    }

    /// A slave learns its records' store times from the dispatcher (it appends raw bytes); the
    /// flusher stamps the checkpoint with the newest one it covered, as for a master's puts.
    pub fn note_store_timestamp(&self, store_timestamp: i64) {
        self.last_store_timestamp.fetch_max(store_timestamp, Ordering::AcqRel);
    }

    /// Puts are refused after a flush failure (the store stays readable) and while the services
    /// do not run (before start, after shutdown).
    fn refuse_put(&self) -> Option<PutMessageResult> {
        if let Some(reason) = self.control.failure() {
            return Some(PutMessageResult::failed(
                PutStatus::ServiceNotAvailable,
                format!("commit-log flush failed ({reason}); writes are refused until the store is restarted"),
            ));
        }
        if !self.accepting.load(Ordering::Acquire) {
            return Some(PutMessageResult::failed(PutStatus::ServiceNotAvailable, "the commit log's flush service is not running"));
        }
        None
    }

    fn wake_flusher(&self) {
        if self.flusher_wakes {
            if let Some(flusher) = self.flusher.get() {
                flusher.wake();
            }
        }
    }

    /// SYNC_FLUSH acknowledges after the flush, unless the message said WAIT=false.
    fn waits_for_flush(&self, wait: bool) -> bool {
        self.config.flush_disk_type == FlushDiskType::SyncFlush && wait
    }

    /// Encodes and appends the records under the writer lock; returns what was appended, the
    /// end offset a flush must reach, and whether the put waits for it (WAIT is not false).
    fn append_records(&self, msgs: &[MessageToStore]) -> Result<(AppendResult, u64, bool), PutMessageResult> {
        let Some(first) = msgs.first() else {
            return Err(PutMessageResult::failed(PutStatus::MessageIllegal, "empty batch"));
        };
        let mut records = Vec::with_capacity(msgs.len());
        for msg in msgs {
            match self.check_and_encode(msg) {
                Ok(record) => records.push(record),
                Err(result) => return Err(result),
            }
        }
        let total: usize = records.iter().map(EncodedRecord::len).sum();
        if total + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log {
            return Err(PutMessageResult::failed(PutStatus::MessageIllegal, format!("{total} bytes cannot fit one commit-log file")));
        }
        let tx_type = first.sys_flag & SYSFLAG_TRANSACTION_MASK;
        // Half and rolled-back transaction records take no queue offset, as in Java.
        let takes_queue_offset = tx_type != TRANSACTION_PREPARED_TYPE && tx_type != TRANSACTION_ROLLBACK_TYPE;

        let append = {
            let mut writer = self.writer.lock();
            let _in_lock = InLock::since(&self.begin_time_in_lock_ms, now_ms());
            let file = match self.file_with_room(total) {
                Ok(file) => file,
                Err(e) => {
                    error!(error = %e, "cannot create a commit-log file");
                    return Err(PutMessageResult::failed(PutStatus::CreateMappedFileFailed, format!("create mapped file failed: {e}")));
                }
            };
            let mut queue_offset = if takes_queue_offset { writer.next_offset(&first.topic, first.queue_id) } else { 0 };
            let store_timestamp = now_ms();
            let wrote_offset = (file.from_offset() + file.wrote_position() as u64) as i64;
            let logics_offset = queue_offset;
            let mut physical = wrote_offset;
            let mut msg_ids = Vec::with_capacity(records.len());
            for (record, msg) in records.iter_mut().zip(msgs) {
                record.stamp(StampedFields { queue_offset, physical_offset: physical, store_timestamp });
                msg_ids.push(offset_message_id(msg.store_host, physical));
                physical += record.len() as i64;
                if takes_queue_offset {
                    queue_offset += 1;
                }
            }
            let appended = file.append_with(total, |buf| {
                let mut at = 0;
                for record in &records {
                    buf[at..at + record.len()].copy_from_slice(&record.bytes);
                    at += record.len();
                }
            });
            if !appended {
                return Err(PutMessageResult::failed(PutStatus::UnknownError, "commit-log file lost its room"));
            }
            if takes_queue_offset {
                writer.set_next_offset(&first.topic, first.queue_id, queue_offset);
            }
            self.last_store_timestamp.store(store_timestamp, Ordering::Release);
            (AppendResult { wrote_offset, wrote_bytes: total, msg_ids, store_timestamp, logics_offset, msg_num: records.len() }, file)
        };
        let (append, file) = append;
        self.prefault_if_due(&file);

        let end = (append.wrote_offset as u64) + append.wrote_bytes as u64;
        let wait = first.properties.is_empty() || properties::get(&first.properties, properties::WAIT) != Some("false");
        Ok((append, end, wait))
    }

    /// Java's `isOSPageCacheBusy`: the put holding the append lock has held it longer than
    /// `osPageCacheBusyTimeOutMills` (a page fault or a slow disk under the mapping).
    pub fn is_os_page_cache_busy(&self) -> bool {
        page_cache_busy(self.begin_time_in_lock_ms.load(Ordering::Acquire), now_ms(), self.tunables.os_page_cache_busy_timeout_ms())
    }

    fn check_and_encode(&self, msg: &MessageToStore) -> Result<EncodedRecord, PutMessageResult> {
        check_and_encode(msg, self.tunables.max_message_size())
    }

    /// The last file if `len` bytes plus the end marker fit, else a fresh one after writing the
    /// end marker into the full one. Append lock held.
    fn file_with_room(&self, len: usize) -> io::Result<Arc<MappedFile>> {
        let file = self.files.last_or_create(0)?;
        if len + END_FILE_MIN_BLANK_LENGTH <= file.remaining() {
            return Ok(file);
        }
        let remaining = file.remaining();
        let mut marker = [0u8; 8];
        marker[0..4].copy_from_slice(&(remaining as i32).to_be_bytes());
        marker[4..8].copy_from_slice(&MAGIC_BLANK.to_be_bytes());
        if remaining >= 8 {
            file.append(&marker);
        }
        file.mark_full();
        self.files.last_or_create(0)
    }

    /// The flush loop: SYNC_FLUSH flushes whenever woken by a put (or every 10 ms), ASYNC_FLUSH
    /// every `flushIntervalCommitLog` with least pages and a thorough flush every 10 s. At stop:
    /// a last commit and flush, retried up to ten times as Java does.
    fn run_flush(&self, cx: &ServiceContext, on_flushed: &dyn Fn(i64)) {
        let sync = self.config.flush_disk_type == FlushDiskType::SyncFlush;
        // Read on each round, as Java's FlushRealTimeService does.
        let interval = || Duration::from_millis(if sync { 10 } else { self.tunables.flush_interval_commit_log_ms().max(1) });
        let thorough = Duration::from_millis(self.config.flush_commit_log_thorough_interval_ms);
        let mut last_thorough = Instant::now();
        while cx.wait(interval()) {
            let least_pages = if sync || last_thorough.elapsed() >= thorough {
                last_thorough = Instant::now();
                0
            } else {
                self.tunables.flush_commit_log_least_pages()
            };
            self.flush_once(least_pages, on_flushed);
        }
        self.commit(0);
        for _ in 0..10 {
            if self.flush_once(0, on_flushed) {
                break;
            }
        }
    }

    /// One flush; true when nothing is left to do (everything written is on disk, or a flush
    /// failed, after which nothing is flushed again: a later msync "success" proves nothing,
    /// since Linux marks the failed pages clean).
    fn flush_once(&self, least_pages: usize, on_flushed: &dyn Fn(i64)) -> bool {
        if self.control.failure().is_some() {
            return true;
        }
        let timestamp = self.last_store_timestamp.load(Ordering::Acquire);
        let sync = self.file_sync.read().clone();
        match self.files.flush_with(least_pages, sync.as_ref()) {
            Ok(flushed) => {
                if self.control.advance(flushed) && least_pages == 0 && timestamp > 0 {
                    on_flushed(timestamp);
                }
                flushed >= self.files.max_offset()
            }
            Err(e) => {
                self.control.fail(&e);
                true
            }
        }
    }

    /// Sets the flushed watermark after recovery.
    pub fn set_flushed(&self, offset: u64) {
        self.control.reset_flushed(offset);
    }

    /// Store time of the newest appended record.
    pub fn last_store_timestamp(&self) -> i64 {
        self.last_store_timestamp.load(Ordering::Acquire)
    }
}

/// Whether a put that took the append lock at `begin_ms` (0: none holds it) makes the page cache
/// busy at `now_ms`: held longer than `timeout_ms`, and a plausible time (Java's bound of
/// 10,000,000 ms, which the idle 0 exceeds).
fn page_cache_busy(begin_ms: i64, now_ms: i64, timeout_ms: u64) -> bool {
    let held_ms = now_ms.saturating_sub(begin_ms);
    held_ms < 10_000_000 && held_ms > timeout_ms.min(i64::MAX as u64) as i64
}

/// Marks the append lock held from `at` until dropped (Java sets `beginTimeInLock` after taking
/// the lock and zeroes it before letting go).
struct InLock<'a>(&'a AtomicI64);

impl<'a> InLock<'a> {
    fn since(clock: &'a AtomicI64, at: i64) -> InLock<'a> {
        clock.store(at, Ordering::Release);
        InLock(clock)
    }
}

impl Drop for InLock<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod page_cache_tests {
    use super::page_cache_busy;

    #[test]
    fn the_page_cache_is_busy_only_while_a_put_holds_the_lock_past_the_limit() {
        let now = 1_700_000_000_000;
        assert!(!page_cache_busy(0, now, 1_000), "no put holds the lock");
        assert!(!page_cache_busy(now - 1_000, now, 1_000), "held exactly the limit");
        assert!(page_cache_busy(now - 1_001, now, 1_000));
        assert!(!page_cache_busy(now + 5, now, 1_000), "a clock step back is not busy");
    }
}
