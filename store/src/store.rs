//! `MessageStore` (Java `DefaultMessageStore`): opens a store directory, recovers it, appends,
//! dispatches new commit-log records into consume queues and the index, serves reads, and shuts
//! down leaving what a Java broker expects (flushed files, a current checkpoint, no abort file).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use remoting::service::{Service, ServiceContext, Waker};
use tracing::{error, info, warn};

use crate::checkpoint::Checkpoint;
use crate::cleanup;
use crate::commit_log::{AppendLog, CommitLog, PutCallback, PutMessageResult};
use crate::config::{BrokerRole, MessageStoreConfig};
use crate::consume_queue::ConsumeQueue;
use crate::dispatch::{AlreadyStarted, ArrivalNotice, BuildConsumeQueue, BuildIndex, DispatchList, Dispatcher};
use crate::dledger_log::{self, EntryAt, EntryLog};
use crate::index::{IndexConfig, IndexService};
use crate::lock::StoreLock;
use crate::message::record::{decode_record, DecodedRecord, RecordAt};
use crate::message::MessageToStore;
use crate::queues::ConsumeQueues;
use crate::recovery::{self, RecoveryReport};
use remoting::protocol::name::TopicName;

pub use crate::dispatch::{ArrivalListener, SCHEDULE_TOPIC};
pub(crate) use crate::error::io_err;
pub use crate::error::StoreError;
const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";

/// Java's `manualDeleteFileSeveralTimes`: how many cleanup passes a manual delete lasts.
const MANUAL_DELETE_PASSES: u32 = 20;

/// Told after every append to the commit log (replication wakes on it).
pub type AppendListener = Arc<dyn Fn() + Send + Sync>;

/// Java's `GetMessageStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetMessageStatus {
    Found,
    NoMatchedMessage,
    MessageWasRemoving,
    OffsetFoundNull,
    OffsetOverflowBadly,
    OffsetOverflowOne,
    OffsetTooSmall,
    NoMatchedLogicQueue,
    NoMessageInQueue,
}

impl GetMessageStatus {
    /// The Java enum name (pull responses carry it as their remark).
    pub fn name(self) -> &'static str {
        match self {
            GetMessageStatus::Found => "FOUND",
            GetMessageStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetMessageStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetMessageStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetMessageStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetMessageStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetMessageStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetMessageStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetMessageStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

#[derive(Clone, Debug)]
pub struct GetMessageResult {
    pub status: GetMessageStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    /// Each message's stored record bytes.
    pub messages: Vec<Vec<u8>>,
    /// Queue offset of each message.
    pub queue_offsets: Vec<i64>,
    pub buffer_total_size: usize,
    pub suggest_pulling_from_slave: bool,
}

/// Messages found by key.
#[derive(Clone, Debug, Default)]
pub struct QueryMessageResult {
    pub messages: Vec<Vec<u8>>,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phyoffset: i64,
}

pub struct MessageStore {
    pub(crate) config: Arc<MessageStoreConfig>,
    pub(crate) commit_log: Arc<CommitLog>,
    pub(crate) queues: Arc<ConsumeQueues>,
    pub(crate) checkpoint: Arc<Checkpoint>,
    pub(crate) index: Option<Arc<IndexService>>,
    reput_from: AtomicI64,
    /// What is done with each new record, in order (consume queue, index, arrival notice, ...).
    pub(crate) dispatchers: DispatchList,
    arrival: Arc<ArrivalNotice>,
    running: AtomicBool,
    /// Wakes the dispatcher (set at start).
    reput_waker: OnceLock<Waker>,
    append_listener: OnceLock<AppendListener>,
    /// Set while the dispatcher waits, so puts only pay for a wake-up when one is needed.
    reput_sleeping: AtomicBool,
    services: Mutex<StoreServices>,
    recovery: Mutex<RecoveryReport>,
    _lock: StoreLock,
    total_memory_bytes: u64,
    /// Set by the cleanup pass when the disk is above the warning level: writes are refused.
    disk_full: AtomicBool,
    /// Cleaning passes left that delete expired files whatever the hour (Java's
    /// `manualDeleteFileSeveralTimes`, set by DELETE_EXPIRED_COMMITLOG).
    manual_delete_passes: AtomicU32,
    /// The role now (a DLedger broker's changes with its member's); `BrokerRole` as a byte.
    role: AtomicU8,
    /// Set when DLedger holds the commit log (`enableDLegerCommitLog`).
    pub(crate) dledger: Option<DLedgerMode>,
    /// The cleaning rules now (`config`'s at open, then whatever the broker sets).
    clean_policy: Mutex<cleanup::CleanPolicy>,
}

/// A store whose commit log DLedger holds (see [`crate::dledger_log`]).
pub(crate) struct DLedgerMode {
    pub(crate) log: Arc<dyn EntryLog>,
    /// Java's `dividedCommitlogOffset`: below it, the plain commit log of before the switch.
    pub(crate) divided: AtomicI64,
    appender: OnceLock<Arc<dyn AppendLog>>,
    /// The log's first offset at the last cleaning pass (queues and index follow its deletions).
    cleaned_below: AtomicI64,
}

fn role_byte(role: BrokerRole) -> u8 {
    match role {
        BrokerRole::AsyncMaster => 0,
        BrokerRole::SyncMaster => 1,
        BrokerRole::Slave => 2,
    }
}

impl MessageStore {
    /// Takes the store lock, loads every file and recovers (normally, or after a crash when the
    /// abort file is present). Nothing runs until [`MessageStore::start`].
    pub fn open(config: MessageStoreConfig) -> Result<Arc<MessageStore>, StoreError> {
        Self::open_inner(config, None)
    }

    /// As [`MessageStore::open`], for a store whose commit log DLedger holds: `log` is the
    /// member's data, already recovered. On the first start over a plain commit log, recovery
    /// seals the old log and starts `log` after it (Java's upgrade). Appends are refused until
    /// [`MessageStore::set_appender`].
    pub fn open_dledger(config: MessageStoreConfig, log: Arc<dyn EntryLog>) -> Result<Arc<MessageStore>, StoreError> {
        Self::open_inner(config, Some(log))
    }

    fn open_inner(config: MessageStoreConfig, dledger: Option<Arc<dyn EntryLog>>) -> Result<Arc<MessageStore>, StoreError> {
        let config = Arc::new(config);
        let root = config.root_dir();
        std::fs::create_dir_all(&root).map_err(io_err(format!("cannot create {}", root.display())))?;
        let lock = StoreLock::acquire(&root.join("lock"))?;
        // As Java, the commit-log and queue folders exist from the start (tools measure the disk there).
        for dir in [config.commit_log_dir(), config.consume_queue_dir()] {
            std::fs::create_dir_all(&dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
        }
        let last_exit_ok = !abort_path(&root).exists();
        info!(root = %root.display(), last_exit_ok, "opening store");

        let commit_log = Arc::new(CommitLog::new(config.clone()).map_err(io_err("cannot allocate the transient store pool"))?);
        commit_log.load()?;
        let queues = Arc::new(ConsumeQueues::load(&config)?);
        let checkpoint = Arc::new(Checkpoint::open(&root.join("checkpoint")).map_err(io_err("cannot open checkpoint"))?);
        let index = if config.message_index_enable {
            let index_config =
                IndexConfig { max_hash_slot_num: config.max_hash_slot_num, max_index_num: config.max_index_num, max_msgs_num_batch: config.max_msgs_num_batch };
            let index = IndexService::new(&root, index_config).map_err(|e| StoreError::Index(e.to_string()))?;
            index.load(last_exit_ok, checkpoint.index_msg_timestamp()).map_err(|e| StoreError::Index(e.to_string()))?;
            Some(Arc::new(index))
        } else {
            None
        };
        let role = AtomicU8::new(role_byte(config.broker_role));
        // Java's order: the consume queue, the index, then (outside Java's list) long polling.
        let dispatchers = DispatchList::new(&config);
        let arrival = Arc::new(ArrivalNotice::new(queues.clone()));
        let _ = dispatchers.add_last(Arc::new(BuildConsumeQueue { queues: queues.clone(), checkpoint: checkpoint.clone() }));
        if let Some(index) = &index {
            let _ = dispatchers.add_last(Arc::new(BuildIndex { index: index.clone(), checkpoint: checkpoint.clone() }));
        }
        let _ = dispatchers.add_last(arrival.clone());
        let clean_policy = Mutex::new(cleanup::CleanPolicy::of(&config));
        let store = Arc::new(MessageStore {
            clean_policy,
            config,
            commit_log,
            queues,
            checkpoint,
            index,
            reput_from: AtomicI64::new(0),
            dispatchers,
            arrival,
            running: AtomicBool::new(false),
            reput_waker: OnceLock::new(),
            append_listener: OnceLock::new(),
            reput_sleeping: AtomicBool::new(false),
            services: Mutex::new(StoreServices::default()),
            recovery: Mutex::new(RecoveryReport::default()),
            _lock: lock,
            total_memory_bytes: total_memory_bytes(),
            disk_full: AtomicBool::new(false),
            manual_delete_passes: AtomicU32::new(0),
            role,
            dledger: dledger.map(|log| DLedgerMode { log, divided: AtomicI64::new(-1), appender: OnceLock::new(), cleaned_below: AtomicI64::new(0) }),
        });
        let report = match &store.dledger {
            Some(d) => recovery::recover_dledger(&store, d, last_exit_ok)?,
            None => recovery::recover(&store, last_exit_ok),
        };
        store.reput_from.store(report.dispatch_from, Ordering::Release);
        *store.recovery.lock() = report;
        Ok(store)
    }

    /// What recovery found and did when the store was opened.
    pub fn recovery(&self) -> RecoveryReport {
        self.recovery.lock().clone()
    }

    pub fn config(&self) -> &MessageStoreConfig {
        &self.config
    }

    /// Sets what the arrival notice (the last built-in dispatcher) tells of each queued record.
    pub fn set_arrival_listener(&self, listener: ArrivalListener) {
        self.arrival.set_listener(listener);
    }

    /// Adds a dispatcher after the others (Java's `addDispatcher`); refused once the store
    /// started. It sees every record dispatched from then on; recovery ran at open, before it.
    pub fn add_dispatcher(&self, dispatcher: Arc<dyn Dispatcher>) -> Result<(), AlreadyStarted> {
        self.dispatchers.add_last(dispatcher)
    }

    /// Adds a dispatcher before the others (as Java's broker puts its filter bitmap first).
    pub fn add_dispatcher_first(&self, dispatcher: Arc<dyn Dispatcher>) -> Result<(), AlreadyStarted> {
        self.dispatchers.add_first(dispatcher)
    }

    /// Starts the allocation, commit, flush, dispatch, queue-flush and cleanup services, then
    /// creates the abort file (present while running, as in Java). Dispatches the backlog before
    /// returning.
    pub fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        self.dispatchers.seal();
        self.running.store(true, Ordering::Release);
        self.dispatch_available();
        self.commit_log.start_allocation().map_err(io_err("cannot start the allocation service"))?;
        let checkpoint = self.checkpoint.clone();
        self.commit_log.start_services(move |ts| checkpoint.set_physic_msg_timestamp(ts)).map_err(io_err("cannot start the commit-log services"))?;
        let mut services = self.services.lock();
        let me = self.clone();
        let reput = Service::spawn("ReputMessageService", move |cx| me.run_reput(cx)).map_err(io_err("cannot start the dispatcher"))?;
        let _ = self.reput_waker.set(reput.waker());
        services.reput = Some(reput);
        services.queue_flush = Some(self.start_queue_flush().map_err(io_err("cannot start the consume-queue flusher"))?);
        let me = self.clone();
        let interval = Duration::from_millis(self.config.clean_resource_interval_ms.max(10));
        services.cleanup = Some(Service::every("CleanResourceService", interval, false, move || me.clean_now()).map_err(io_err("cannot start the cleaner"))?);
        drop(services);
        let abort = abort_path(&self.config.root_dir());
        File::create(&abort).map_err(io_err(format!("cannot create {}", abort.display())))?;
        Ok(())
    }

    /// Appends one message.
    pub fn put_message(&self, msg: &MessageToStore) -> PutMessageResult {
        self.put_messages(std::slice::from_ref(msg))
    }

    /// Appends a batch (one topic and queue).
    pub fn put_messages(&self, msgs: &[MessageToStore]) -> PutMessageResult {
        if let Some(refused) = self.refuse_put() {
            return refused;
        }
        let Some(appender) = self.appender() else { return Self::no_appender() };
        let result = appender.append(msgs);
        self.wake_dispatch();
        self.appended();
        result
    }

    /// As [`MessageStore::put_messages`], with the result handed to `done`; under SYNC_FLUSH
    /// from the flush service once the records are on disk, so the caller's thread is not held.
    pub fn put_messages_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        if let Some(refused) = self.refuse_put() {
            return done(refused);
        }
        let Some(appender) = self.appender() else { return done(Self::no_appender()) };
        appender.append_then(msgs, done);
        self.wake_dispatch();
        self.appended();
    }

    fn no_appender() -> PutMessageResult {
        PutMessageResult::failed(crate::commit_log::PutStatus::ServiceNotAvailable, "the DLedger commit log is not started")
    }

    fn refuse_put(&self) -> Option<PutMessageResult> {
        use crate::commit_log::PutStatus::ServiceNotAvailable;
        if !self.running.load(Ordering::Acquire) {
            return Some(PutMessageResult::failed(ServiceNotAvailable, "message store is not running"));
        }
        if self.role() == BrokerRole::Slave {
            return Some(PutMessageResult::failed(ServiceNotAvailable, "the broker is a slave"));
        }
        if self.disk_full.load(Ordering::Acquire) {
            return Some(PutMessageResult::failed(ServiceNotAvailable, "the disk is full; writes are refused until space is freed"));
        }
        None
    }

    fn wake_dispatch(&self) {
        if self.reput_sleeping.load(Ordering::Acquire) {
            if let Some(reput) = self.reput_waker.get() {
                reput.wake();
            }
        }
    }

    /// The dispatcher: catches up, then sleeps at most 1 ms, woken early by a put that sees it
    /// sleeping (a put while it works costs nothing).
    fn run_reput(&self, cx: &ServiceContext) {
        loop {
            let seen = self.max_phy_offset();
            if self.dispatch_available() {
                continue;
            }
            self.reput_sleeping.store(true, Ordering::Release);
            // Re-check after raising the flag: a put that saw the flag clear has already appended.
            // A wake-up between here and the wait is not lost (the service keeps it). Bytes that
            // could not be dispatched (a slave's partial record, waiting for its next frame) are
            // not new: sleep rather than spin on them.
            let idle = self.max_phy_offset() <= self.reput_from.load(Ordering::Acquire).max(seen);
            let running = if idle { cx.wait(Duration::from_millis(1)) } else { !cx.is_stopped() };
            self.reput_sleeping.store(false, Ordering::Release);
            if !running {
                break;
            }
        }
    }

    /// Dispatches every complete record past the reput offset. Returns whether it did any work.
    pub(crate) fn dispatch_available(&self) -> bool {
        let mut did = false;
        loop {
            let mut from = self.reput_from.load(Ordering::Acquire);
            if let Some(d) = &self.dledger {
                let divided = d.divided.load(Ordering::Acquire);
                if from >= divided || self.commit_log.files().is_empty() {
                    return self.dispatch_entries(d) || did;
                }
            }
            let min = self.commit_log.min_offset();
            if from < min {
                from = min;
            }
            if from >= self.commit_log.max_offset() {
                if let Some(d) = &self.dledger {
                    // The sealed old log ends at the divided offset: DLedger's data follows.
                    self.reput_from.store(from.max(d.divided.load(Ordering::Acquire)), Ordering::Release);
                    continue;
                }
                self.reput_from.store(from, Ordering::Release);
                return did;
            }
            let Some((file, pos)) = self.commit_log.locate(from) else { return did };
            let Some(bytes) = file.read_from(pos) else { return did };
            // Only bytes read up to the file's end make a blank or an undecodable record final. A
            // slave appends its master's frames, which end anywhere inside a record, and may fill
            // the file between this read and a later look at it: a partial record seen then is
            // not corruption, and the blank's tail may still be coming.
            let to_file_end = pos + bytes.len() == file.size();
            let mut at = 0;
            while at < bytes.len() {
                match decode_record(&bytes[at..], false) {
                    Ok(RecordAt::Record(record)) => {
                        self.dispatch(&record, file.from_offset() as i64 + (pos + at) as i64);
                        at += record.store_size as usize;
                    }
                    Ok(RecordAt::Blank) => {
                        if to_file_end {
                            at = file.size() - pos;
                        }
                        break;
                    }
                    Err(e) => {
                        if to_file_end {
                            error!(offset = file.from_offset() as i64 + (pos + at) as i64, error = %e, "undecodable record; skipping the rest of the file");
                            at = file.size() - pos;
                        }
                        break;
                    }
                }
            }
            if at == 0 {
                return did;
            }
            did = true;
            self.reput_from.store(from + at as i64, Ordering::Release);
        }
    }

    /// Dispatches the committed DLedger entries past the reput offset: the record in each (at
    /// pos + 48), the blank at a segment's end skipped. Returns whether it did any work.
    fn dispatch_entries(&self, d: &DLedgerMode) -> bool {
        let mut did = false;
        loop {
            let from = self.reput_from.load(Ordering::Acquire).max(d.log.min_offset());
            let committed = d.log.committed_end();
            if from >= committed {
                self.reput_from.store(from, Ordering::Release);
                return did;
            }
            let Some(bytes) = d.log.read(from, dledger_log::DISPATCH_READ_BYTES, committed) else {
                // Past the written bytes of a full segment: the next one starts at its end.
                match d.log.segment_end(from) {
                    Some(end) if end > from && end <= committed => {
                        self.reput_from.store(end, Ordering::Release);
                        continue;
                    }
                    _ => return did,
                }
            };
            let mut at = 0;
            let mut next = None;
            while at < bytes.len() {
                match dledger_log::entry_at(&bytes[at..]) {
                    EntryAt::Entry { size, body } => {
                        let offset = from + (at + dledger_log::ENTRY_BODY_OFFSET) as i64;
                        match decode_record(body, false) {
                            Ok(RecordAt::Record(record)) => self.dispatch(&record, offset),
                            Ok(RecordAt::Blank) => error!(offset, "a DLedger entry holds a commit-log blank; skipped"),
                            Err(e) => error!(offset, error = %e, "a DLedger entry holds no commit-log record; skipped"),
                        }
                        at += size;
                    }
                    EntryAt::Blank => {
                        next = d.log.segment_end(from + at as i64);
                        break;
                    }
                    EntryAt::Incomplete => break,
                    EntryAt::Invalid(size) => {
                        // Committed bytes are whole entries: this is damage. Skip to the next segment.
                        error!(offset = from + at as i64, size, "invalid DLedger entry header; skipping the rest of the segment");
                        next = d.log.segment_end(from + at as i64);
                        break;
                    }
                }
            }
            let to = next.unwrap_or(from + at as i64);
            if to <= from {
                return did;
            }
            did = true;
            self.reput_from.store(to, Ordering::Release);
        }
    }

    /// Hands one new record to the dispatchers; a slave (not in DLedger mode) first notes its
    /// store time, which its checkpoint's physic time follows.
    pub(crate) fn dispatch(&self, record: &DecodedRecord<'_>, phy_offset: i64) {
        self.note_slave_store_time(record);
        self.dispatchers.dispatch(record, phy_offset);
    }

    /// Recovery's re-dispatch of a record after a crash (the dispatchers that run on recovery).
    pub(crate) fn redispatch(&self, record: &DecodedRecord<'_>, phy_offset: i64) {
        self.note_slave_store_time(record);
        self.dispatchers.redispatch(record, phy_offset);
    }

    fn note_slave_store_time(&self, record: &DecodedRecord<'_>) {
        if self.dledger.is_none() && self.role() == BrokerRole::Slave {
            self.commit_log.note_store_timestamp(record.store_timestamp);
        }
    }

    /// Deletes every consume queue of a topic (DELETE_TOPIC_IN_BROKER); the commit log keeps the
    /// records until they expire, as in Java. Only a real folder that is a direct child of
    /// `consumequeue/` and carries the topic's name is removed (never a symlink's target).
    pub fn delete_topic(&self, topic: &TopicName) {
        self.queues.delete_topic(topic);
    }

    /// Every topic that has a consume queue.
    pub fn topics(&self) -> Vec<String> {
        self.queues.topics()
    }

    pub fn find_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues.find(topic, queue_id)
    }

    /// Every consume queue, by topic and queue id.
    pub fn queues(&self) -> Vec<Arc<ConsumeQueue>> {
        self.queues.all()
    }

    /// The consume-queue flusher: `flush(least pages)` every interval, a thorough flush with the
    /// checkpoint every `flushConsumeQueueThoroughInterval`. Its last flush is shutdown's, after the
    /// dispatcher caught up.
    fn start_queue_flush(self: &Arc<Self>) -> std::io::Result<Service> {
        let interval = Duration::from_millis(self.config.flush_interval_consume_queue_ms.max(1));
        let thorough = Duration::from_millis(self.config.flush_consume_queue_thorough_interval_ms);
        let mut last_thorough = Instant::now();
        let me = self.clone();
        Service::every("FlushConsumeQueueService", interval, false, move || {
            let full = last_thorough.elapsed() >= thorough;
            if full {
                last_thorough = Instant::now();
            }
            me.flush_queues(if full { 0 } else { me.config.flush_consume_queue_least_pages }, full);
        })
    }

    /// Flushes the queues; a thorough flush also writes the checkpoint, with the logics time
    /// taken before flushing so the file never claims more than is on disk.
    fn flush_queues(&self, least_pages: usize, write_checkpoint: bool) {
        let logics = self.checkpoint.logics_msg_timestamp();
        for cq in self.queues() {
            if let Err(e) = cq.flush(least_pages) {
                error!(topic = cq.topic(), queue = cq.queue_id(), error = %e, "consume queue flush failed");
            }
        }
        if write_checkpoint {
            self.checkpoint.set_logics_msg_timestamp(logics);
            if let Err(e) = self.checkpoint.flush() {
                error!(error = %e, "checkpoint write failed");
            }
        }
    }

    /// Replaces the cleaning rules; the next pass follows them.
    pub fn set_clean_policy(&self, policy: cleanup::CleanPolicy) {
        *self.clean_policy.lock() = policy;
    }

    /// One cleaning pass now (the cleanup service's tick).
    fn clean_now(&self) {
        let hour = chrono::Timelike::hour(&chrono::Local::now());
        let ratio = cleanup::disk_used_ratio(&self.config.commit_log_dir());
        self.clean_once(std::time::SystemTime::now(), hour, ratio);
    }

    /// One cleaning pass with the given clock, hour of day and disk usage; returns how many
    /// commit-log files were deleted.
    pub fn clean_once(&self, now: std::time::SystemTime, hour: u32, disk_used_ratio: f64) -> usize {
        let policy = self.clean_policy.lock().clone();
        let mut decision = cleanup::decide(&policy, hour, disk_used_ratio);
        let manual = self.manual_delete_passes.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
        decision.delete |= manual;
        if decision.disk_full != self.disk_full.swap(decision.disk_full, Ordering::AcqRel) {
            warn!(disk_used_ratio, full = decision.disk_full, "disk-full state changed");
        }
        // DLedger deletes its own data files: the queues and index follow its first offset.
        let dledger_moved = self.dledger.as_ref().is_some_and(|d| {
            let min = self.min_phy_offset();
            d.cleaned_below.swap(min, Ordering::AcqRel) < min
        });
        let deleted = if decision.delete {
            let reserved = Duration::from_secs(policy.file_reserved_time_hours * 3600);
            self.commit_log.files().delete_expired(now, reserved, decision.force)
        } else {
            0
        };
        cleanup::log_deleted("commit-log", deleted);
        if deleted > 0 || dledger_moved {
            let min = self.min_phy_offset();
            let queues: usize = self.queues().iter().map(|cq| cq.delete_expired(min)).sum();
            cleanup::log_deleted("consume-queue", queues);
            if let Some(index) = &self.index {
                cleanup::log_deleted("index", index.delete_files_below(min));
            }
        }
        deleted
    }

    /// Java's `executeDeleteFilesManually`: the next passes of the cleanup service delete the
    /// expired files (older than `fileReservedTime`) whatever `deleteWhen` says.
    pub fn delete_expired_files_manually(&self) {
        self.manual_delete_passes.store(MANUAL_DELETE_PASSES, Ordering::Release);
    }

    /// Java's `cleanExpiredConsumerQueue`: destroys every queue (but the delay queues') whose
    /// last message lies wholly below the commit log's first offset, so its records are gone.
    /// Returns how many queues were destroyed.
    pub fn clean_expired_consume_queues(&self) -> usize {
        self.queues.destroy_expired(self.min_phy_offset(), &[SCHEDULE_TOPIC])
    }

    /// Java's `cleanUnusedTopic`: destroys the queues of every topic not in `keep` (the topic
    /// configs), except the delay and transaction-op queues, which have no config of their own.
    /// Returns how many topics were cleaned.
    pub fn clean_unused_topics(&self, keep: &std::collections::HashSet<String>) -> usize {
        self.queues.destroy_unused(keep, &[SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC])
    }

    /// Whether writes are refused because the disk is full.
    pub fn is_disk_full(&self) -> bool {
        self.disk_full.load(Ordering::Acquire)
    }

    /// Reads messages of a queue from `offset`, with Java's batch limits and offset rules.
    /// `filter` sees each unit's tags code.
    pub fn get_message(&self, topic: &str, queue_id: i32, offset: i64, max_msg_nums: usize, filter: impl Fn(i64) -> bool) -> GetMessageResult {
        self.get_message_filtered(topic, queue_id, offset, max_msg_nums, filter, |_| true)
    }

    /// As [`MessageStore::get_message`], with a second filter on each stored record read (Java's
    /// `isMatchedByCommitLog`, which SQL92 filters need: they look at the properties).
    pub fn get_message_filtered(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: usize,
        filter: impl Fn(i64) -> bool,
        record_filter: impl Fn(&[u8]) -> bool,
    ) -> GetMessageResult {
        let max_offset_py = self.max_phy_offset();
        let mut r = GetMessageResult {
            status: GetMessageStatus::NoMatchedLogicQueue,
            next_begin_offset: 0,
            min_offset: 0,
            max_offset: 0,
            messages: Vec::new(),
            queue_offsets: Vec::new(),
            buffer_total_size: 0,
            suggest_pulling_from_slave: false,
        };
        let Some(cq) = self.find_queue(topic, queue_id) else { return r };
        r.min_offset = cq.min_offset();
        r.max_offset = cq.max_offset();
        if r.max_offset == 0 {
            r.status = GetMessageStatus::NoMessageInQueue;
            return r;
        }
        if offset < r.min_offset {
            r.status = GetMessageStatus::OffsetTooSmall;
            r.next_begin_offset = r.min_offset;
            return r;
        }
        if offset == r.max_offset {
            r.status = GetMessageStatus::OffsetOverflowOne;
            r.next_begin_offset = offset;
            return r;
        }
        if offset > r.max_offset {
            r.status = GetMessageStatus::OffsetOverflowBadly;
            // Java 4.9.7 and 5.x: back to the queue's end (before 4.9.4 an empty-minimum queue sent
            // the consumer to 0, so it consumed everything again).
            r.next_begin_offset = r.max_offset;
            return r;
        }
        let max_filter_count = 16_000.max(max_msg_nums * 20);
        let Some(units) = cq.units_from(offset, max_filter_count) else {
            r.status = GetMessageStatus::OffsetFoundNull;
            r.next_begin_offset = cq.roll_next_file(offset);
            return r;
        };
        r.status = GetMessageStatus::NoMatchedMessage;
        let memory = (self.total_memory_bytes as f64 * self.config.access_message_in_memory_max_ratio as f64 / 100.0) as i64;
        let mut next_phy_file_start = i64::MIN;
        let mut max_phy_pulling = 0;
        let mut examined = 0;
        for (i, unit) in units.iter().enumerate() {
            examined = i;
            max_phy_pulling = unit.phy_offset;
            if next_phy_file_start != i64::MIN && unit.phy_offset < next_phy_file_start {
                examined = i + 1;
                continue;
            }
            let in_disk = max_offset_py - unit.phy_offset > memory;
            if self.batch_full(unit.size as usize, max_msg_nums, r.buffer_total_size, r.messages.len(), in_disk) {
                break;
            }
            examined = i + 1;
            if !filter(unit.tags_code) {
                if r.buffer_total_size == 0 {
                    r.status = GetMessageStatus::NoMatchedMessage;
                }
                continue;
            }
            match self.read_phy(unit.phy_offset, unit.size as usize) {
                Some(bytes) if !record_filter(&bytes) => {
                    if r.buffer_total_size == 0 {
                        r.status = GetMessageStatus::NoMatchedMessage;
                    }
                }
                Some(bytes) => {
                    r.buffer_total_size += bytes.len();
                    r.messages.push(bytes);
                    r.queue_offsets.push(offset + i as i64);
                    r.status = GetMessageStatus::Found;
                    next_phy_file_start = i64::MIN;
                }
                None => {
                    if r.buffer_total_size == 0 {
                        r.status = GetMessageStatus::MessageWasRemoving;
                    }
                    let file_size = self.config.mapped_file_size_commit_log as i64;
                    next_phy_file_start = unit.phy_offset + file_size - unit.phy_offset % file_size;
                }
            }
        }
        r.next_begin_offset = offset + examined as i64;
        r.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory;
        r
    }

    fn batch_full(&self, size: usize, max_msg_nums: usize, total: usize, count: usize, in_disk: bool) -> bool {
        if total == 0 || count == 0 {
            return false;
        }
        if max_msg_nums <= count {
            return true;
        }
        let (max_bytes, max_count) = if in_disk {
            (self.config.max_transfer_bytes_on_message_in_disk, self.config.max_transfer_count_on_message_in_disk)
        } else {
            (self.config.max_transfer_bytes_on_message_in_memory, self.config.max_transfer_count_on_message_in_memory)
        };
        total + size > max_bytes || count > max_count.saturating_sub(1)
    }

    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.find_queue(topic, queue_id).map_or(0, |cq| cq.max_offset())
    }

    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.find_queue(topic, queue_id).map_or(0, |cq| cq.min_offset())
    }

    /// The record at physical offset `offset` (Java `lookMessageByOffset`).
    pub fn look_message_by_offset(&self, offset: i64) -> Option<Vec<u8>> {
        let size_bytes = self.read_phy(offset, 4)?;
        let size = i32::from_be_bytes(size_bytes.try_into().ok()?);
        if size <= 0 {
            return None;
        }
        self.read_phy(offset, size as usize)
    }

    /// Store time of the record at `offset` of size `size`.
    pub fn store_time_at(&self, offset: i64, size: i32) -> Option<i64> {
        let bytes = self.read_phy(offset, usize::try_from(size).ok()?)?;
        match decode_record(&bytes, false).ok()? {
            RecordAt::Record(r) => Some(r.store_timestamp),
            RecordAt::Blank => None,
        }
    }

    /// Queue offset of the first message stored at or after `timestamp`.
    pub fn offset_in_queue_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> i64 {
        self.find_queue(topic, queue_id).map_or(0, |cq| cq.offset_by_time(timestamp, |o, s| self.store_time_at(o, s)))
    }

    /// Store time of the message at a queue offset.
    pub fn message_store_timestamp(&self, topic: &str, queue_id: i32, queue_offset: i64) -> Option<i64> {
        let unit = self.find_queue(topic, queue_id)?.get(queue_offset)?;
        self.store_time_at(unit.phy_offset, unit.size)
    }

    pub fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        self.message_store_timestamp(topic, queue_id, self.min_offset_in_queue(topic, queue_id))
    }

    /// Messages found by key in the index (Java `queryMessage`).
    pub fn query_message(&self, topic: &str, key: &str, max_num: usize, begin: i64, end: i64) -> QueryMessageResult {
        let Some(index) = &self.index else { return QueryMessageResult::default() };
        let found = index.query(topic, key, max_num, begin, end);
        let mut result = QueryMessageResult {
            messages: Vec::new(),
            index_last_update_timestamp: found.index_last_update_timestamp,
            index_last_update_phyoffset: found.index_last_update_phyoffset,
        };
        for offset in found.phy_offsets {
            if let Some(bytes) = self.look_message_by_offset(offset) {
                result.messages.push(bytes);
            }
        }
        result
    }

    pub fn commit_log(&self) -> &CommitLog {
        &self.commit_log
    }

    /// Java's `CommitLog.scanFileAndSetReadMode` (SET_COMMITLOG_READ_MODE): advises every
    /// commit-log file there is now, MADV_RANDOM or MADV_NORMAL; files made later keep the
    /// kernel's default, as in Java. In DLedger mode these are the files of the plain log before
    /// the member's (Java's DLedger commit log leaves its own files alone too). Returns the files
    /// the kernel refused, which Java logs and ignores.
    pub fn set_commit_log_read_ahead(&self, random: bool) -> usize {
        let mut refused = 0;
        for file in self.commit_log.files().files() {
            if let Err(e) = file.set_read_ahead(random) {
                warn!(error = %e, random, "madvise of a commit-log file failed");
                refused += 1;
            }
        }
        info!(random, "commit-log read-ahead mode set");
        refused
    }

    /// The append path puts go through: the commit log, or in DLedger mode what the broker set
    /// (none before it did).
    pub fn appender(&self) -> Option<&dyn AppendLog> {
        match &self.dledger {
            Some(d) => d.appender.get().map(|a| a.as_ref()),
            None => Some(self.commit_log.as_ref()),
        }
    }

    /// Sets the DLedger-mode append path (once; ignored for a plain store).
    pub fn set_appender(&self, appender: Arc<dyn AppendLog>) {
        if let Some(d) = &self.dledger {
            let _ = d.appender.set(appender);
        }
    }

    /// Whether DLedger holds the commit log.
    pub fn is_dledger(&self) -> bool {
        self.dledger.is_some()
    }

    /// Java's `dividedCommitlogOffset` (-1 when DLedger holds everything or is off).
    pub fn divided_offset(&self) -> i64 {
        self.dledger.as_ref().map_or(-1, |d| d.divided.load(Ordering::Acquire))
    }

    /// The role the store acts in now.
    pub fn role(&self) -> BrokerRole {
        match self.role.load(Ordering::Acquire) {
            0 => BrokerRole::AsyncMaster,
            1 => BrokerRole::SyncMaster,
            _ => BrokerRole::Slave,
        }
    }

    /// A DLedger broker's role follows its member's.
    pub fn set_role(&self, role: BrokerRole) {
        self.role.store(role_byte(role), Ordering::Release);
    }

    /// The first readable physical offset (Java `getMinPhyOffset`).
    pub fn min_phy_offset(&self) -> i64 {
        match &self.dledger {
            Some(d) if self.commit_log.files().is_empty() => d.log.min_offset(),
            _ => self.commit_log.min_offset(),
        }
    }

    /// The end of readable data (Java `getMaxPhyOffset`): in DLedger mode, what is committed.
    pub fn max_phy_offset(&self) -> i64 {
        match &self.dledger {
            Some(d) => dledger_log::readable_end(d.log.as_ref()).max(self.commit_log.max_offset()),
            None => self.commit_log.max_offset(),
        }
    }

    /// `size` readable bytes at physical offset `offset`.
    pub fn read_phy(&self, offset: i64, size: usize) -> Option<Vec<u8>> {
        match &self.dledger {
            Some(d) if offset >= d.divided.load(Ordering::Acquire) => {
                let bytes = d.log.read(offset, size, d.log.committed_end())?;
                (bytes.len() == size).then_some(bytes)
            }
            _ => self.commit_log.read_bytes(offset, size),
        }
    }

    /// The next queue offset of every queue, from the consume queues (Java's
    /// `recoverTopicQueueTable`; a new DLedger leader rebuilds its table from it).
    pub fn queue_offset_table(&self) -> HashMap<String, HashMap<i32, i64>> {
        self.queues.offset_table()
    }

    /// Whether the dispatcher has caught up with everything readable.
    pub fn dispatched_all(&self) -> bool {
        self.dispatch_behind_bytes() == 0
    }

    /// Wakes the dispatcher (a DLedger commit made more readable).
    pub fn wake_dispatcher(&self) {
        if let Some(reput) = self.reput_waker.get() {
            reput.wake();
        }
    }

    /// Up to `max` raw commit-log bytes from `offset`, never past what is readable in its file
    /// (what HA replication ships to slaves; Java `getCommitLogData`, cut to the batch size).
    pub fn commit_log_data(&self, offset: i64, max: usize) -> Option<Vec<u8>> {
        let (file, pos) = self.commit_log.locate(offset)?;
        file.read_from(pos).filter(|b| !b.is_empty()).map(|b| b[..b.len().min(max)].to_vec())
    }

    /// A slave appends its master's bytes at its end (see [`CommitLog::append_replicated`]) and
    /// wakes the dispatcher, which builds the consume queues and index from them.
    pub fn append_replicated(&self, offset: i64, bytes: &[u8]) -> Result<i64, crate::commit_log::ReplicatedAppendError> {
        if !self.running.load(Ordering::Acquire) {
            return Err(crate::commit_log::ReplicatedAppendError::Refused("message store is not running".into()));
        }
        let end = self.commit_log.append_replicated(offset, bytes)?;
        self.wake_dispatch();
        Ok(end)
    }

    /// Told after every append (HA writers wake on it).
    pub fn set_append_listener(&self, listener: AppendListener) {
        let _ = self.append_listener.set(listener);
    }

    fn appended(&self) {
        if let Some(listener) = self.append_listener.get() {
            listener();
        }
    }

    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// How far the dispatcher is behind the commit log, in bytes.
    pub fn dispatch_behind_bytes(&self) -> i64 {
        (self.max_phy_offset() - self.reput_from.load(Ordering::Acquire)).max(0)
    }

    /// Stops everything and leaves the directory as a cleanly stopped Java broker would. Order:
    /// cleanup; the commit log's committer, flusher and group commit (every SYNC_FLUSH put is
    /// answered); allocation; the dispatcher, then a catch-up of its backlog; the queue flusher,
    /// then the last queue flush and the checkpoint; the index; the abort file.
    pub fn shutdown(&self) {
        if !self.running.swap(false, Ordering::AcqRel) {
            return;
        }
        let services = std::mem::take(&mut *self.services.lock());
        if let Some(cleanup) = services.cleanup {
            cleanup.stop();
        }
        self.commit_log.stop_services();
        self.commit_log.stop_allocation();
        if let Some(reput) = services.reput {
            reput.stop();
        }
        // Catch the dispatcher up (Java waits up to 5 s), then flush queues and the checkpoint.
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.dispatch_behind_bytes() > 0 && Instant::now() < deadline {
            if !self.dispatch_available() {
                break;
            }
        }
        if let Some(queue_flush) = services.queue_flush {
            queue_flush.stop();
        }
        self.flush_queues(0, true);
        if let Some(index) = &self.index {
            if let Err(e) = index.shutdown() {
                error!(error = %e, "index flush failed at shutdown");
            }
        }
        if let Err(e) = self.checkpoint.flush() {
            error!(error = %e, "checkpoint write failed at shutdown");
        }
        if let Some(reason) = self.commit_log.flush_failure() {
            // As Java keeps it when the store is not writable: the next start recovers from the
            // checkpoint and re-checks what reached the disk.
            warn!(error = reason, "the commit-log flush failed; keeping the abort file so the next start recovers");
        } else if self.dispatch_behind_bytes() == 0 {
            let abort = abort_path(&self.config.root_dir());
            if let Err(e) = std::fs::remove_file(&abort) {
                warn!(path = %abort.display(), error = %e, "cannot remove abort file");
            }
        } else {
            warn!("dispatch still behind at shutdown; keeping the abort file so the next start recovers");
        }
        info!("store shut down");
    }
}

/// The store's own services (the commit log holds its committer, flusher and timer).
#[derive(Default)]
struct StoreServices {
    reput: Option<Service>,
    queue_flush: Option<Service>,
    cleanup: Option<Service>,
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        if self.running.load(Ordering::Acquire) {
            self.shutdown();
        }
    }
}

pub(crate) fn abort_path(root: &Path) -> PathBuf {
    root.join("abort")
}

/// Physical memory, for Java's "is this message still in memory" estimate.
fn total_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(8 * 1024 * 1024 * 1024)
}
