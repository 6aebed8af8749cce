//! The commit log: every message of every topic, appended in one address space of segment files.
//!
//! Appending: records are encoded outside the lock; under it the writer assigns the queue offset,
//! physical offset and store time, rolls to a new file when a record (plus the 8-byte end marker)
//! does not fit, and copies the record in. Flushing follows `flushDiskType`: SYNC_FLUSH callers
//! wait for the group commit that covers their bytes, ASYNC_FLUSH flushes on a timer.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};
use tracing::{error, warn};

use crate::allocate::{AllocateConfig, AllocateService};
use crate::config::{FlushDiskType, MessageStoreConfig};
use crate::transient_pool::TransientStorePool;
use crate::mapped_file::MappedFile;
use crate::mapped_file_queue::{LoadError, MappedFileQueue};
use crate::message::properties;
use crate::message::record::{
    encode_record, EncodedRecord, MessageToStore, RecordError, StampedFields, MAGIC_BLANK, MAX_V1_TOPIC_BYTES, TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE, SYSFLAG_TRANSACTION_MASK,
};
use crate::message::offset_message_id;

/// A record must leave room for the end-of-file marker.
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutStatus {
    PutOk,
    FlushDiskTimeout,
    CreateMappedFileFailed,
    MessageIllegal,
    PropertiesSizeExceeded,
    ServiceNotAvailable,
    UnknownError,
}

/// Where an append landed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendResult {
    /// Physical offset of the first record.
    pub wrote_offset: i64,
    pub wrote_bytes: usize,
    /// Offset message ids, one per record.
    pub msg_ids: Vec<String>,
    pub store_timestamp: i64,
    /// Queue offset of the first record.
    pub logics_offset: i64,
    pub msg_num: usize,
}

/// Receives the result of a put whose acknowledgement waits for a flush.
pub type PutCallback = Box<dyn FnOnce(PutMessageResult) + Send>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutMessageResult {
    pub status: PutStatus,
    pub append: Option<AppendResult>,
    /// A human-readable reason for a failed status.
    pub remark: Option<String>,
}

impl PutMessageResult {
    pub fn failed(status: PutStatus, remark: impl Into<String>) -> Self {
        PutMessageResult { status, append: None, remark: Some(remark.into()) }
    }

    pub fn is_ok(&self) -> bool {
        self.status == PutStatus::PutOk
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
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
    /// The first readable physical offset.
    fn min_offset(&self) -> i64;
    /// The end of readable data.
    fn max_offset(&self) -> i64;
    /// `size` readable bytes at `offset`.
    fn read_bytes(&self, offset: i64, size: usize) -> Option<Vec<u8>>;
}

impl AppendLog for CommitLog {
    fn append(&self, msgs: &[MessageToStore]) -> PutMessageResult {
        self.put(msgs)
    }
    fn append_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        self.put_then(msgs, done)
    }
    fn min_offset(&self) -> i64 {
        CommitLog::min_offset(self)
    }
    fn max_offset(&self) -> i64 {
        CommitLog::max_offset(self)
    }
    fn read_bytes(&self, offset: i64, size: usize) -> Option<Vec<u8>> {
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

/// Group commit for SYNC_FLUSH and the wake-up of the timed flusher, around one watermark.
#[derive(Default)]
struct FlushState {
    requested: u64,
    flushed: u64,
    stopped: bool,
    /// SYNC_FLUSH puts acknowledged by callback once a flush covers `end`.
    waiters: Vec<FlushWaiter>,
}

struct FlushWaiter {
    end: u64,
    deadline: Instant,
    append: AppendResult,
    done: PutCallback,
}

impl FlushWaiter {
    fn finish(self, status: PutStatus) {
        if status != PutStatus::PutOk {
            warn!(end = self.end, "sync flush timed out");
        }
        (self.done)(PutMessageResult { status, append: Some(self.append), remark: None });
    }
}

impl FlushState {
    /// Takes the waiters a flush to `self.flushed` covers, and those past their deadline.
    fn take_finished(&mut self, now: Instant) -> Vec<(FlushWaiter, PutStatus)> {
        if self.waiters.is_empty() {
            return Vec::new();
        }
        let flushed = self.flushed;
        let stopped = self.stopped;
        let (done, waiting): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.waiters).into_iter().partition(|w| w.end <= flushed || w.deadline <= now || stopped);
        self.waiters = waiting;
        done.into_iter()
            .map(|w| {
                let status = if w.end <= flushed { PutStatus::PutOk } else { PutStatus::FlushDiskTimeout };
                (w, status)
            })
            .collect()
    }
}

fn finish_all(finished: Vec<(FlushWaiter, PutStatus)>) {
    for (waiter, status) in finished {
        waiter.finish(status);
    }
}

pub struct CommitLog {
    files: MappedFileQueue,
    writer: Mutex<Writer>,
    config: Arc<MessageStoreConfig>,
    flush_state: Mutex<FlushState>,
    flush_wanted: Condvar,
    flush_done: Condvar,
    /// Store time of the last record appended (the checkpoint's physic time after a flush).
    last_store_timestamp: AtomicI64,
    pool: Option<Arc<TransientStorePool>>,
    allocator: Mutex<Option<Arc<AllocateService>>>,
    /// One committer at a time (the commit service, or shutdown).
    commit_lock: Mutex<()>,
}

impl CommitLog {
    pub fn new(config: Arc<MessageStoreConfig>) -> io::Result<CommitLog> {
        let pool = if config.transient_store_pool_in_use() {
            Some(Arc::new(TransientStorePool::new(config.transient_store_pool_size, config.mapped_file_size_commit_log)?))
        } else {
            None
        };
        Ok(CommitLog {
            files: MappedFileQueue::new(config.commit_log_dir(), config.mapped_file_size_commit_log),
            writer: Mutex::new(Writer { queue_offsets: HashMap::new() }),
            config,
            flush_state: Mutex::new(FlushState::default()),
            flush_wanted: Condvar::new(),
            flush_done: Condvar::new(),
            last_store_timestamp: AtomicI64::new(0),
            pool,
            allocator: Mutex::new(None),
            commit_lock: Mutex::new(()),
        })
    }

    /// Starts the allocation service that pre-creates (and optionally warms) the next file.
    pub fn start_allocation(&self) -> io::Result<()> {
        let c = &self.config;
        let warm_up = c.warm_mapped_file_enable.then(|| {
            (c.flush_disk_type == FlushDiskType::SyncFlush).then_some(c.flush_least_pages_when_warm_mapped_file)
        });
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

    /// Copies pool buffers into their files; wakes the flusher when bytes moved.
    pub fn commit(&self, least_pages: usize) {
        let _one_committer = self.commit_lock.lock();
        if self.files.commit(least_pages) {
            self.flush_wanted.notify_one();
        }
    }

    /// The commit loop (transient pool only); runs until [`CommitLog::stop_flush`].
    pub fn run_commit_service(&self) {
        let interval = Duration::from_millis(self.config.commit_interval_commit_log_ms.max(1));
        let thorough = Duration::from_millis(self.config.commit_commit_log_thorough_interval_ms);
        let mut last_thorough = Instant::now();
        while !self.flush_state.lock().stopped {
            std::thread::sleep(interval);
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

    /// Copies `size` bytes at `offset`, if readable.
    pub fn read_bytes(&self, offset: i64, size: usize) -> Option<Vec<u8>> {
        let (file, pos) = self.locate(offset)?;
        file.read(pos, size).map(<[u8]>::to_vec)
    }

    pub fn put_message(&self, msg: &MessageToStore) -> PutMessageResult {
        self.put(std::slice::from_ref(msg))
    }

    /// Appends one message, or a batch (all of one topic and queue, stored back to back in one
    /// file with consecutive queue offsets).
    pub fn put(&self, msgs: &[MessageToStore]) -> PutMessageResult {
        match self.append_records(msgs) {
            Ok((append, end, wait)) => PutMessageResult { status: self.await_flush(end, wait), append: Some(append), remark: None },
            Err(failed) => failed,
        }
    }

    /// As [`CommitLog::put`], acknowledging through `done`: at once, or (SYNC_FLUSH) from the
    /// flush service once a flush covers the records.
    pub fn put_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        let (append, end, wait) = match self.append_records(msgs) {
            Ok(appended) => appended,
            Err(failed) => return done(failed),
        };
        let mut state = self.request_flush(end);
        let status = if !self.waits_for_flush(wait) || state.flushed >= end {
            PutStatus::PutOk
        } else if state.stopped {
            PutStatus::FlushDiskTimeout
        } else {
            let deadline = Instant::now() + Duration::from_millis(self.config.sync_flush_timeout_ms);
            state.waiters.push(FlushWaiter { end, deadline, append, done });
            return;
        };
        drop(state);
        done(PutMessageResult { status, append: Some(append), remark: None })
    }

    /// Asks the flusher to reach `end`; returns the flush state, still locked.
    fn request_flush(&self, end: u64) -> parking_lot::MutexGuard<'_, FlushState> {
        let mut state = self.flush_state.lock();
        state.requested = state.requested.max(end);
        self.flush_wanted.notify_one();
        state
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
            AppendResult { wrote_offset, wrote_bytes: total, msg_ids, store_timestamp, logics_offset, msg_num: records.len() }
        };

        let end = (append.wrote_offset as u64) + append.wrote_bytes as u64;
        let wait = first.properties.is_empty() || properties::get(&first.properties, properties::WAIT) != Some("false");
        Ok((append, end, wait))
    }

    fn check_and_encode(&self, msg: &MessageToStore) -> Result<EncodedRecord, PutMessageResult> {
        if msg.topic.len() > MAX_V1_TOPIC_BYTES {
            // As Java 4.9: a longer topic would need a v2 record, which 4.9 and Go cannot read.
            return Err(PutMessageResult::failed(
                PutStatus::MessageIllegal,
                format!("topic of {} bytes exceeds the limit of {MAX_V1_TOPIC_BYTES} bytes", msg.topic.len()),
            ));
        }
        if msg.body.len() > self.config.max_message_size {
            return Err(PutMessageResult::failed(
                PutStatus::MessageIllegal,
                format!("message body of {} bytes exceeds maxMessageSize {}", msg.body.len(), self.config.max_message_size),
            ));
        }
        encode_record(msg).map_err(|e| match e {
            RecordError::PropertiesTooLong { .. } => PutMessageResult::failed(PutStatus::PropertiesSizeExceeded, e.to_string()),
            other => PutMessageResult::failed(PutStatus::MessageIllegal, other.to_string()),
        })
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

    /// SYNC_FLUSH: waits until a flush covers `end` (FLUSH_DISK_TIMEOUT after `syncFlushTimeout`).
    /// ASYNC_FLUSH, or a message with WAIT=false: only nudges the flusher.
    fn await_flush(&self, end: u64, wait: bool) -> PutStatus {
        let mut state = self.request_flush(end);
        if !self.waits_for_flush(wait) {
            return PutStatus::PutOk;
        }
        let deadline = Instant::now() + Duration::from_millis(self.config.sync_flush_timeout_ms);
        while state.flushed < end && !state.stopped {
            if self.flush_done.wait_until(&mut state, deadline).timed_out() {
                break;
            }
        }
        if state.flushed >= end {
            PutStatus::PutOk
        } else {
            warn!(end, flushed = state.flushed, "sync flush timed out");
            PutStatus::FlushDiskTimeout
        }
    }

    /// The flush loop; run on its own thread until [`CommitLog::stop_flush`]. Calls `on_flushed`
    /// with the store time of the newest flushed record after each flush that moved.
    pub fn run_flush_service(&self, on_flushed: impl Fn(i64)) {
        let sync = self.config.flush_disk_type == FlushDiskType::SyncFlush;
        let interval = Duration::from_millis(if sync { 10 } else { self.config.flush_interval_commit_log_ms.max(1) });
        let thorough = Duration::from_millis(self.config.flush_commit_log_thorough_interval_ms);
        let mut last_thorough = Instant::now();
        loop {
            {
                let mut state = self.flush_state.lock();
                if state.stopped {
                    break;
                }
                if sync || !self.config.flush_commit_log_timed {
                    if state.requested <= state.flushed {
                        self.flush_wanted.wait_for(&mut state, interval);
                    }
                } else {
                    drop(state);
                    std::thread::sleep(interval);
                }
            }
            let least_pages = if sync || last_thorough.elapsed() >= thorough {
                last_thorough = Instant::now();
                0
            } else {
                self.config.flush_commit_log_least_pages
            };
            self.flush_now(least_pages, &on_flushed);
        }
        // Java retries the final flush up to ten times.
        self.commit(0);
        for _ in 0..10 {
            if self.flush_now(0, &on_flushed) {
                break;
            }
        }
        let finished = self.flush_state.lock().take_finished(Instant::now());
        finish_all(finished);
    }

    /// One flush; true when everything written is on disk.
    fn flush_now(&self, least_pages: usize, on_flushed: &impl Fn(i64)) -> bool {
        let timestamp = self.last_store_timestamp.load(Ordering::Acquire);
        match self.files.flush(least_pages) {
            Ok(flushed) => {
                let mut state = self.flush_state.lock();
                if flushed > state.flushed {
                    state.flushed = flushed;
                    if least_pages == 0 && timestamp > 0 {
                        on_flushed(timestamp);
                    }
                }
                let finished = state.take_finished(Instant::now());
                drop(state);
                self.flush_done.notify_all();
                finish_all(finished);
                flushed >= self.files.max_offset()
            }
            Err(e) => {
                error!(error = %e, "commit-log flush failed");
                let finished = self.flush_state.lock().take_finished(Instant::now());
                finish_all(finished);
                false
            }
        }
    }

    /// Sets the flushed watermark after recovery.
    pub fn set_flushed(&self, offset: u64) {
        let mut state = self.flush_state.lock();
        state.flushed = offset;
        state.requested = offset;
    }

    pub fn stop_flush(&self) {
        self.flush_state.lock().stopped = true;
        self.flush_wanted.notify_all();
        self.flush_done.notify_all();
    }

    /// Store time of the newest appended record.
    pub fn last_store_timestamp(&self) -> i64 {
        self.last_store_timestamp.load(Ordering::Acquire)
    }
}
