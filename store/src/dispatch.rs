//! Dispatch: what is done with each new commit-log record, as Java's `CommitLogDispatcher` list.
//!
//! The dispatcher thread (`ReputMessageService`) reads every record the commit log makes
//! readable, in log order, and hands it as a [`DispatchRequest`] to each [`Dispatcher`] of the
//! store's [`DispatchList`], in list order: the consume queue ([`BuildConsumeQueue`]), the index
//! ([`BuildIndex`], when enabled), then the long-polling arrival notice ([`ArrivalNotice`]).
//! More can be given at open ([`crate::store::MessageStore::open_with_dispatchers`], then they see
//! recovery too) or added before the store starts ([`crate::store::MessageStore::add_dispatcher`]):
//! the 5.x timer wheel and POP consumption hook in here.
//!
//! Recovery after a crash re-dispatches the records it walks through the same list, as Java's
//! `recoverAbnormally` calls `doDispatch` for each; only the dispatchers whose
//! [`Dispatcher::runs_on_recovery`] is true see them (Java notifies arrivals from the reput
//! service only, outside its list, so the arrival notice does not run on recovery).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use indexmap::IndexMap;
use parking_lot::{Mutex, RwLock};
use remoting::protocol::name::TopicName;
use tracing::error;

use crate::checkpoint::Checkpoint;
use crate::config::MessageStoreConfig;
use crate::consume_queue::CqUnit;
use crate::index::{IndexError, IndexRecord, IndexService};
use crate::message::record::{DecodedRecord, TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE};
use crate::message::{properties, tags_code};
use crate::queues::ConsumeQueues;

/// The delay-level topic: its consume queues hold the delivery time in place of the tags code.
pub use remoting::protocol::system_topic::SCHEDULE as SCHEDULE_TOPIC;

/// Told, at the end of each dispatch pass, of the messages each consume queue received in it (long
/// polling wakes on it): topic, queue id, and per message in queue order the queue's next offset
/// and the message's tags code. One call per queue per pass, not per message: a pass over many
/// appends wakes each queue's parked requests once.
pub type ArrivalListener = Arc<dyn Fn(&str, i32, &[Arrival]) + Send + Sync>;

/// One message's arrival in its consume queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The queue's next offset once the message is in.
    pub max_offset: i64,
    pub tags_code: i64,
}

/// One commit-log record as the dispatchers see it (Java's `DispatchRequest`).
pub struct DispatchRequest<'a> {
    /// The stored record: topic, queue id and offset, store time, flags, properties.
    pub record: &'a DecodedRecord<'a>,
    /// Where the record starts in the commit log.
    pub phy_offset: i64,
    /// The tags' hash code, or for a delayed message its delivery time (what the consume queue
    /// stores).
    pub tags_code: i64,
    /// The `KEYS` and `UNIQ_KEY` properties, read with the tags in one pass over the properties.
    keys: Option<&'a str>,
    uniq_key: Option<&'a str>,
}

impl DispatchRequest<'_> {
    pub fn topic(&self) -> &str {
        self.record.topic
    }

    pub fn queue_id(&self) -> i32 {
        self.record.queue_id
    }

    pub fn queue_offset(&self) -> i64 {
        self.record.queue_offset
    }

    /// The record's size in the commit log.
    pub fn size(&self) -> i32 {
        self.record.store_size
    }

    pub fn store_timestamp(&self) -> i64 {
        self.record.store_timestamp
    }

    pub fn transaction_type(&self) -> i32 {
        self.record.transaction_type()
    }

    /// Whether the record takes a consume-queue unit (not a half or rolled-back transaction).
    pub fn is_queued(&self) -> bool {
        let tx = self.transaction_type();
        tx == TRANSACTION_NOT_TYPE || tx == TRANSACTION_COMMIT_TYPE
    }

    pub fn property(&self, name: &str) -> Option<&str> {
        self.record.property(name)
    }

    pub fn keys(&self) -> Option<&str> {
        self.keys
    }

    pub fn uniq_key(&self) -> Option<&str> {
        self.uniq_key
    }
}

/// Something done with every new commit-log record (Java's `CommitLogDispatcher`). Called on the
/// dispatcher thread, once per record, in log order; a dispatcher must not block for long, as the
/// next record waits for it.
pub trait Dispatcher: Send + Sync {
    fn dispatch(&self, request: &DispatchRequest<'_>);

    /// Whether recovery after a crash re-runs this dispatcher over the records it walks.
    fn runs_on_recovery(&self) -> bool {
        true
    }

    /// The end of a pass of the dispatcher thread over newly readable records (not called on
    /// recovery): what a dispatcher gathers per pass it hands on here.
    fn end_of_pass(&self) {}
}

#[derive(Debug, thiserror::Error)]
#[error("dispatchers are added before the store starts")]
pub struct AlreadyStarted;

/// The ordered dispatchers of a store.
pub struct DispatchList {
    entries: RwLock<Vec<Arc<dyn Dispatcher>>>,
    sealed: AtomicBool,
    /// `messageDelayLevel` in milliseconds (read once: the config does not change).
    delay_levels_ms: Vec<u64>,
}

impl DispatchList {
    pub(crate) fn new(config: &MessageStoreConfig) -> DispatchList {
        DispatchList { entries: RwLock::new(Vec::new()), sealed: AtomicBool::new(false), delay_levels_ms: config.delay_levels_ms() }
    }

    /// Adds `dispatcher` after the others; refused once the store started.
    pub fn add_last(&self, dispatcher: Arc<dyn Dispatcher>) -> Result<(), AlreadyStarted> {
        let mut entries = self.entries.write();
        if self.sealed.load(Ordering::Acquire) {
            return Err(AlreadyStarted);
        }
        entries.push(dispatcher);
        Ok(())
    }

    /// Adds `dispatcher` before the others (as Java's broker puts its filter bitmap first);
    /// refused once the store started.
    pub fn add_first(&self, dispatcher: Arc<dyn Dispatcher>) -> Result<(), AlreadyStarted> {
        let mut entries = self.entries.write();
        if self.sealed.load(Ordering::Acquire) {
            return Err(AlreadyStarted);
        }
        entries.insert(0, dispatcher);
        Ok(())
    }

    /// How many dispatchers there are.
    pub fn len(&self) -> usize {
        self.entries.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.read().is_empty()
    }

    /// No more dispatchers from now on (the store starts).
    pub(crate) fn seal(&self) {
        let _entries = self.entries.write();
        self.sealed.store(true, Ordering::Release);
    }

    /// Hands a new record to every dispatcher, in order.
    pub(crate) fn dispatch(&self, record: &DecodedRecord<'_>, phy_offset: i64) {
        let request = self.request(record, phy_offset);
        for dispatcher in self.entries.read().iter() {
            dispatcher.dispatch(&request);
        }
    }

    /// Ends a pass of the dispatcher thread (see [`Dispatcher::end_of_pass`]).
    pub(crate) fn end_of_pass(&self) {
        for dispatcher in self.entries.read().iter() {
            dispatcher.end_of_pass();
        }
    }

    /// Hands a record recovery walks after a crash to the dispatchers that run on recovery.
    pub(crate) fn redispatch(&self, record: &DecodedRecord<'_>, phy_offset: i64) {
        let request = self.request(record, phy_offset);
        for dispatcher in self.entries.read().iter().filter(|d| d.runs_on_recovery()) {
            dispatcher.dispatch(&request);
        }
    }

    /// A record as the dispatchers see it: the properties they all read are looked up once.
    fn request<'a>(&self, record: &'a DecodedRecord<'a>, phy_offset: i64) -> DispatchRequest<'a> {
        let [tags, keys, uniq_key, delay] =
            properties::get_each(record.properties, [properties::TAGS, properties::KEYS, properties::UNIQ_KEY, properties::DELAY]);
        DispatchRequest { record, phy_offset, tags_code: self.tags_code_of(record, tags, delay), keys, uniq_key }
    }

    /// The tags code of a record; for delayed messages Java stores the delivery time instead.
    fn tags_code_of(&self, record: &DecodedRecord<'_>, tags: Option<&str>, delay: Option<&str>) -> i64 {
        if record.topic == SCHEDULE_TOPIC {
            if let Some(level) = delay.and_then(|d| d.parse::<usize>().ok()) {
                let levels = &self.delay_levels_ms;
                let level = level.clamp(1, levels.len().max(1));
                return record.store_timestamp + levels.get(level - 1).map_or(1000, |ms| *ms as i64);
            }
        }
        tags_code(tags)
    }
}

/// Java's `CommitLogDispatcherBuildConsumeQueue`: a queued record's unit into its consume queue,
/// and the checkpoint's logics time.
pub struct BuildConsumeQueue {
    pub(crate) queues: Arc<ConsumeQueues>,
    pub(crate) checkpoint: Arc<Checkpoint>,
}

impl Dispatcher for BuildConsumeQueue {
    fn dispatch(&self, request: &DispatchRequest<'_>) {
        if !request.is_queued() {
            return;
        }
        let Some(cq) = queue_for_record(&self.queues, request) else { return };
        let unit = CqUnit { phy_offset: request.phy_offset, size: request.size(), tags_code: request.tags_code };
        if let Err(e) = cq.put(request.queue_offset(), unit) {
            error!(topic = request.topic(), queue = request.queue_id(), error = %e, "consume queue put failed");
        }
        self.checkpoint.set_logics_msg_timestamp(request.store_timestamp());
    }
}

/// The consume queue a record belongs in. A record whose topic or queue id could not name a
/// folder under `consumequeue/` (a log written by something that did not validate) gets no
/// queue: it stays in the commit log and the index, and is reported.
fn queue_for_record(queues: &ConsumeQueues, request: &DispatchRequest<'_>) -> Option<Arc<crate::consume_queue::ConsumeQueue>> {
    let queue_id = u16::try_from(request.queue_id()).ok();
    match (TopicName::new(request.topic()), queue_id) {
        (Ok(topic), Some(queue_id)) => Some(queues.find_or_create(&topic, queue_id)),
        (topic, _) => {
            error!(
                phy_offset = request.phy_offset,
                topic = request.topic(),
                queue = request.queue_id(),
                valid_topic = topic.is_ok(),
                "record names no valid consume queue; not dispatched"
            );
            None
        }
    }
}

/// Java's `CommitLogDispatcherBuildIndex`: the record's keys and unique key into the index; when
/// an index file fills, the checkpoint's index time, written at once.
pub struct BuildIndex {
    pub(crate) index: Arc<IndexService>,
    pub(crate) checkpoint: Arc<Checkpoint>,
}

impl Dispatcher for BuildIndex {
    fn dispatch(&self, request: &DispatchRequest<'_>) {
        let tx = request.transaction_type();
        if tx == TRANSACTION_ROLLBACK_TYPE {
            return;
        }
        let built = self.index.build_index(&IndexRecord {
            topic: request.topic(),
            physical_offset: request.phy_offset,
            store_timestamp: request.store_timestamp(),
            transaction_type: tx,
            keys: request.keys(),
            uniq_key: request.uniq_key(),
        });
        let full_at = built.unwrap_or_else(|e| {
            // `Failed` was logged once, when it began.
            if !matches!(e, IndexError::Failed) {
                error!(error = %e, "index build failed");
            }
            None
        });
        if let Some(end_timestamp) = full_at {
            self.checkpoint.set_index_msg_timestamp(end_timestamp);
            if let Err(e) = self.checkpoint.flush() {
                error!(error = %e, "checkpoint write failed");
            }
        }
    }
}

/// Long polling's wake-up (Java's `notifyMessageArriveIfNecessary`): gathers the records of a
/// pass that went into a consume queue, by queue, and tells the listener at the pass's end, or
/// sooner when [`MAX_GATHERED_ARRIVALS`] are held (a pass over a long backlog).
pub struct ArrivalNotice {
    listener: RwLock<Option<ArrivalListener>>,
    queues: Arc<ConsumeQueues>,
    pending: Mutex<Gathered>,
}

/// Arrivals held before they are told, whatever the pass's length.
pub const MAX_GATHERED_ARRIVALS: usize = 4096;

/// A pass's arrivals by topic and queue id, in the order their queues first received one.
#[derive(Default)]
struct Gathered {
    by_queue: IndexMap<(String, i32), Vec<Arrival>>,
    count: usize,
}

/// A borrowed `(topic, queue id)` key: hashes as the owned tuple does, so a pass's lookups do
/// not allocate.
#[derive(Hash)]
struct QueueRef<'a>(&'a str, i32);

impl indexmap::Equivalent<(String, i32)> for QueueRef<'_> {
    fn equivalent(&self, key: &(String, i32)) -> bool {
        self.0 == key.0 && self.1 == key.1
    }
}

impl ArrivalNotice {
    pub(crate) fn new(queues: Arc<ConsumeQueues>) -> ArrivalNotice {
        ArrivalNotice { listener: RwLock::new(None), queues, pending: Mutex::new(Gathered::default()) }
    }

    pub(crate) fn set_listener(&self, listener: ArrivalListener) {
        *self.listener.write() = Some(listener);
    }

    /// Tells the listener what was gathered, one call per queue.
    fn tell(&self) {
        let gathered = std::mem::take(&mut *self.pending.lock());
        let Some(listener) = self.listener.read().clone() else { return };
        for ((topic, queue_id), arrivals) in &gathered.by_queue {
            // The consume queue's dispatcher ran first: a queued record with a valid name has its queue.
            if self.queues.find(topic, *queue_id).is_some() {
                listener(topic, *queue_id, arrivals);
            }
        }
    }
}

impl Dispatcher for ArrivalNotice {
    fn dispatch(&self, request: &DispatchRequest<'_>) {
        if !request.is_queued() || self.listener.read().is_none() {
            return;
        }
        let arrival = Arrival { max_offset: request.queue_offset() + 1, tags_code: request.tags_code };
        let full = {
            let mut pending = self.pending.lock();
            match pending.by_queue.get_mut(&QueueRef(request.topic(), request.queue_id())) {
                Some(arrivals) => arrivals.push(arrival),
                None => {
                    pending.by_queue.insert((request.topic().to_owned(), request.queue_id()), vec![arrival]);
                }
            }
            pending.count += 1;
            pending.count >= MAX_GATHERED_ARRIVALS
        };
        if full {
            self.tell();
        }
    }

    fn end_of_pass(&self) {
        self.tell();
    }

    fn runs_on_recovery(&self) -> bool {
        false
    }
}
