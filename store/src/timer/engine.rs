//! The timer itself (Java 5.3.3's `TimerMessageStore`), over the wheel, the log and the
//! checkpoint:
//!
//! - **Enqueue**: the timer reads the timer topic's queue 0 from its queue offset, as a consumer
//!   would (the [`TimerArrivals`] dispatcher wakes it when a record lands there). A message due
//!   before the write time (the current slot) is released at once; any other gets a unit in the
//!   log, linked to the previous unit of its slot, and the slot's last position and count move.
//!   A message due beyond the roll window gets a unit in a slot inside it, marked rolled: when
//!   that slot comes it is put back into the timer topic, to be taken in again (Java's rolling).
//! - **Dequeue** (on a master only): slot by slot up to the write time, the slot's units are
//!   walked back from its last one; delete markers first, whose `topic+uniqKey` cancel the
//!   messages they name; then the others, oldest first, each put into its real topic and queue
//!   (or, rolled, back into the timer topic) with `TIMER_ENQUEUE_MS`, `TIMER_DEQUEUE_MS` and
//!   `TIMER_ROLL_TIMES` as Java adds them. Only then does the read time move past the slot.
//! - **Never early**: a message due at `t` lies in the slot of `t` rounded down to the precision
//!   (one slot earlier when `t` is on a boundary, as admission rounds it), and that slot is read
//!   only once the write time, the current time rounded down, has passed it.
//! - **Once**: the checkpoint holds the read time and the queue offset up to which everything was
//!   done. Whatever was released beyond them was stored no earlier than that read time (nothing is
//!   released early, and a release the queue offset does not cover came after the checkpoint
//!   that holds the read time). So after a crash, and when a slave becomes master with its
//!   master's read time, the releases stored since that time are found through the tails of the
//!   consume queues (by their `TIMER_DEQUEUE_MS`) and not made again. Java releases them again.
//! - **Bounded**: pending timers live in the wheel and the log only; memory holds one slot's
//!   units at a time while it is released.

use bytes::Bytes;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use remoting::clock::now_ms;
use remoting::service::{Service, Waker};
use tracing::{info, warn};

use super::checkpoint::{CheckpointValues, TimerCheckpoint};
use super::log::{TimerLog, Unit, UNIT_SIZE};
use super::metrics::TimerMetrics;
use super::wheel::{Slot, TimerWheel, WheelSyncer};
use super::{delete_key, java_string_hash, TimerEvents, MAGIC_ROLL, TIMER_BLANK_SLOTS, TIMER_TOPIC, TIMER_WHEEL_TTL_DAY};
use crate::config::{BrokerRole, MessageStoreConfig};
use crate::dispatch::{DispatchRequest, Dispatcher};
use crate::message::properties;
use crate::message::record::{decode_record, DecodedRecord, RecordAt};
use crate::message::MessageToStore;
use crate::store::MessageStore;

/// A slot's releases unanswered at once at most.
const RELEASES_IN_FLIGHT: usize = 256;

/// What a put of a released message came to (Java's `PUT_OK`, `PUT_NEED_RETRY`, `PUT_NO_RETRY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    Ok,
    Retry,
    Drop,
}

/// Where released messages go: the broker's put pipeline (which counts them as Java counts the
/// timer's puts). `rolled` puts go back into the timer topic.
pub trait TimerSink: Send + Sync {
    fn put(&self, msg: &MessageToStore, rolled: bool) -> PutOutcome;
    /// As `put`, answering through `done`, so many releases can be in flight (in DLedger mode
    /// each waits for its quorum).
    fn put_then(&self, msg: &MessageToStore, rolled: bool, done: Box<dyn FnOnce(PutOutcome) + Send>) {
        done(self.put(msg, rolled));
    }
}

/// Wakes the enqueue loop when a record lands in the timer topic.
pub struct TimerArrivals {
    waker: OnceLock<Waker>,
}

impl Dispatcher for TimerArrivals {
    fn dispatch(&self, request: &DispatchRequest<'_>) {
        if request.topic() == TIMER_TOPIC {
            if let Some(waker) = self.waker.get() {
                waker.wake();
            }
        }
    }

    fn runs_on_recovery(&self) -> bool {
        false
    }
}

/// A release as the commit log shows it: where it went and which timer it was.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Released {
    topic: String,
    queue_id: i32,
    uniq_key: String,
    out_ms: String,
    roll_times: String,
}

impl Released {
    fn of(topic: &str, queue_id: i32, props: &str) -> Option<Released> {
        Some(Released {
            topic: topic.to_owned(),
            queue_id,
            uniq_key: properties::get(props, properties::UNIQ_KEY)?.to_owned(),
            out_ms: properties::get(props, properties::TIMER_OUT_MS)?.to_owned(),
            roll_times: properties::get(props, properties::TIMER_ROLL_TIMES).unwrap_or("").to_owned(),
        })
    }
}

/// The timer's moving state, under one lock: enqueue and dequeue agree on the write time through
/// it, so a unit is never added to a slot the dequeue has passed.
struct State {
    wheel: TimerWheel,
    curr_read_ms: i64,
    curr_write_ms: i64,
    /// Every slot before it was released (Java `commitReadTimeMs`).
    commit_read_ms: i64,
    curr_queue_offset: i64,
    /// Every timer-topic message before it is in the wheel or released (Java `commitQueueOffset`).
    commit_queue_offset: i64,
    /// Timers in slots from the read time on (Java's `getAllNum`, kept as a count).
    pending: i64,
    last_version_read_ms: i64,
    last_version_queue_offset: i64,
}

/// Numbers for `brokerStatus`, GET_TIMER_* and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerProgress {
    pub curr_read_ms: i64,
    pub commit_read_ms: i64,
    pub curr_write_ms: i64,
    pub queue_offset: i64,
    pub commit_queue_offset: i64,
    pub max_queue_offset: i64,
    pub pending: i64,
    pub enqueued: u64,
    pub dequeued: u64,
}

pub struct TimerStore {
    store: Arc<MessageStore>,
    config: MessageStoreConfig,
    precision: i64,
    slots_total: i64,
    roll_window_slots: i64,
    state: Mutex<State>,
    /// Appended under the state lock, with the slot that links the unit; read without it (a
    /// unit once written does not change).
    log: TimerLog,
    /// Syncs the wheel outside the state lock (see [`TimerStore::flush`]).
    wheel_sync: WheelSyncer,
    checkpoint: Mutex<TimerCheckpoint>,
    metrics: TimerMetrics,
    arrivals: Arc<TimerArrivals>,
    /// Releases found in the commit log after a crash or a promotion, not to be made again.
    released: Mutex<HashSet<Released>>,
    /// A read time from which releases are to be looked for before the next release (set by
    /// recovery and by a promotion; taken by whichever loop runs first, the other waits).
    rescan: Mutex<Option<i64>>,
    sink: OnceLock<Arc<dyn TimerSink>>,
    /// Whether this broker releases timers (a master; Java `shouldRunningDequeue`).
    dequeue_on: AtomicBool,
    /// Bumped when `dequeue_on` changes, so a release pass that saw it change does not move on.
    role_epoch: AtomicU64,
    services: Mutex<Vec<Service>>,
    enqueued: AtomicU64,
    dequeued: AtomicU64,
    started_ms: AtomicU64,
    /// Enqueue and release rates over the last flush interval (Java's `PerfCounter` TPS).
    rates: Mutex<Rates>,
    /// The observer of enqueues and releases (the broker's metrics), if any.
    events: OnceLock<Arc<dyn TimerEvents>>,
}

#[derive(Default)]
struct Rates {
    at_ms: i64,
    enqueued: u64,
    dequeued: u64,
    enqueue_tps: f32,
    dequeue_tps: f32,
}

/// Java's `TimerMessageStore.getTimerWheelPath` and `getTimerLogPath`, and the broker's
/// `BrokerPathConfigHelper` paths of the checkpoint and metrics.
pub fn wheel_path(config: &MessageStoreConfig) -> PathBuf {
    config.root_dir().join("timerwheel")
}

pub fn log_dir(config: &MessageStoreConfig) -> PathBuf {
    config.root_dir().join("timerlog")
}

pub fn checkpoint_path(config: &MessageStoreConfig) -> PathBuf {
    config.root_dir().join("config").join("timercheck")
}

pub fn metrics_path(config: &MessageStoreConfig) -> PathBuf {
    config.root_dir().join("config").join("timermetrics")
}

#[derive(Debug, thiserror::Error)]
pub enum TimerOpenError {
    #[error("timer wheel: {0}")]
    Wheel(std::io::Error),
    #[error("timer log: {0}")]
    Log(crate::mapped_file_queue::LoadError),
    #[error("timer checkpoint: {0}")]
    Checkpoint(std::io::Error),
}

impl TimerStore {
    /// Opens the timer's files next to `store`'s and recovers them as Java's `recover` does.
    /// Register [`TimerStore::arrivals`] as a dispatcher before the store starts.
    pub fn open(store: Arc<MessageStore>) -> Result<Arc<TimerStore>, TimerOpenError> {
        let config = store.config().clone();
        let precision = config.timer_precision();
        let slots_total = TIMER_WHEEL_TTL_DAY * 24 * 3600;
        let roll_window_slots = if config.timer_roll_window_slot > slots_total - TIMER_BLANK_SLOTS || config.timer_roll_window_slot < 2 {
            slots_total - TIMER_BLANK_SLOTS
        } else {
            config.timer_roll_window_slot
        };
        let wheel = TimerWheel::open(&wheel_path(&config), slots_total, precision).map_err(TimerOpenError::Wheel)?;
        let wheel_sync = wheel.syncer().map_err(TimerOpenError::Wheel)?;
        let log = TimerLog::open(log_dir(&config), config.mapped_file_size_timer_log).map_err(TimerOpenError::Log)?;
        let checkpoint = TimerCheckpoint::open(&checkpoint_path(&config)).map_err(TimerOpenError::Checkpoint)?;
        let metrics = TimerMetrics::load(&metrics_path(&config));
        let state = State {
            wheel,
            curr_read_ms: 0,
            curr_write_ms: 0,
            commit_read_ms: 0,
            curr_queue_offset: 0,
            commit_queue_offset: 0,
            pending: 0,
            last_version_read_ms: 0,
            last_version_queue_offset: 0,
        };
        let timer = TimerStore {
            store,
            config,
            precision,
            slots_total,
            roll_window_slots,
            state: Mutex::new(state),
            log,
            wheel_sync,
            checkpoint: Mutex::new(checkpoint),
            metrics,
            arrivals: Arc::new(TimerArrivals { waker: OnceLock::new() }),
            released: Mutex::new(HashSet::new()),
            rescan: Mutex::new(None),
            sink: OnceLock::new(),
            dequeue_on: AtomicBool::new(false),
            role_epoch: AtomicU64::new(0),
            services: Mutex::new(Vec::new()),
            enqueued: AtomicU64::new(0),
            dequeued: AtomicU64::new(0),
            started_ms: AtomicU64::new(0),
            rates: Mutex::new(Rates::default()),
            events: OnceLock::new(),
        };
        timer.recover();
        Ok(Arc::new(timer))
    }

    /// Sets the observer of enqueues and releases (once; later calls are ignored).
    pub fn set_events(&self, events: Arc<dyn TimerEvents>) {
        let _ = self.events.set(events);
    }

    /// The dispatcher that wakes the enqueue loop.
    pub fn arrivals(&self) -> Arc<dyn Dispatcher> {
        self.arrivals.clone()
    }

    pub fn precision_ms(&self) -> i64 {
        self.precision
    }

    pub fn metrics(&self) -> &TimerMetrics {
        &self.metrics
    }

    fn format(&self, ms: i64) -> i64 {
        ms / self.precision * self.precision
    }

    /// The oldest read time the wheel can still hold (Java's bound in `recover`): a read time
    /// from a fresh checkpoint, or a master's that had not written one yet, starts there.
    fn oldest_read_ms(&self) -> i64 {
        self.format(now_ms()) - self.slots_total * self.precision + TIMER_BLANK_SLOTS * self.precision
    }

    /// Java's `recover`: the log's tail is walked from a segment before its last flushed end and
    /// every good unit re-linked into its slot; the log is cut after the last good unit; the
    /// queue offset continues after the message of the last unit (or from the checkpoint); the
    /// read time is the checkpoint's, no older than the wheel can hold.
    fn recover(&self) {
        let cp = self.checkpoint.lock().values;
        let mut guard = self.state.lock();
        let s = &mut *guard;
        let file_size = self.log.file_size() as i64;
        let begin = (cp.last_timer_log_flush_pos - file_size).max(0);
        let end = {
            let (log, wheel) = (&self.log, &mut s.wheel);
            log.recover(begin, true, |pos, unit| wheel.revise_slot(unit.delayed_ms(), None, Some(pos), true))
        };
        let queue_offset = self.queue_offset_after(&self.log, end).map_or(cp.last_timer_queue_offset, |o| o + 1);
        let mut queue_offset = queue_offset.min(cp.master_timer_queue_offset);
        if let Some(cq) = self.store.find_queue(TIMER_TOPIC, 0) {
            queue_offset = queue_offset.clamp(cq.min_offset(), cq.max_offset().max(cq.min_offset()));
        }
        let read_ms = cp.last_read_time_ms.max(self.oldest_read_ms());
        let min_first = s.wheel.check_phy_pos(read_ms, end);
        if min_first < end {
            warn!(min_first, end, "timer wheel points past the timer log; re-linking from there");
            let (log, wheel) = (&self.log, &mut s.wheel);
            log.recover(min_first, false, |pos, unit| wheel.revise_slot(unit.delayed_ms(), None, Some(pos), true));
        }
        s.curr_queue_offset = queue_offset;
        s.commit_queue_offset = queue_offset;
        s.curr_read_ms = read_ms;
        s.commit_read_ms = read_ms;
        s.pending = s.wheel.all_num(read_ms);
        s.last_version_read_ms = read_ms;
        s.last_version_queue_offset = queue_offset;
        *self.rescan.lock() = Some(cp.last_read_time_ms);
        info!(read_ms, queue_offset, log_end = end, pending = s.pending, "timer recovered");
    }

    /// The timer-topic queue offset of the message of the last unit before `end` (Java
    /// `reviseQueueOffset`, checked against the consume queue).
    fn queue_offset_after(&self, log: &TimerLog, end: i64) -> Option<i64> {
        let unit = log.unit_at(end - UNIT_SIZE as i64)?;
        let bytes = self.store.look_message_by_offset(unit.offset_py)?;
        let Ok(RecordAt::Record(record)) = decode_record(&bytes, false) else { return None };
        let cq = self.store.find_queue(TIMER_TOPIC, record.queue_id)?;
        let mut at = record.queue_offset;
        for _ in 0..20_000 {
            if at < cq.min_offset() {
                break;
            }
            if cq.get(at).is_some_and(|u| u.phy_offset == unit.offset_py && u.size == unit.size_py) {
                return Some(at);
            }
            at -= 1;
        }
        Some(record.queue_offset)
    }

    /// Starts the loops; `dequeue` when this broker is the master.
    pub fn start(self: &Arc<Self>, sink: Arc<dyn TimerSink>, dequeue: bool) -> std::io::Result<()> {
        let _ = self.sink.set(sink);
        self.dequeue_on.store(dequeue, Ordering::Release);
        self.started_ms.store(now_ms().max(0) as u64, Ordering::Release);
        let idle = Duration::from_millis((100 * self.precision / 1000).max(10) as u64);
        let mut services = self.services.lock();

        let timer = self.clone();
        let enqueue = Service::spawn("TimerEnqueueService", move |cx| {
            while !timer.ready() {
                if !cx.wait(Duration::from_millis(20)) {
                    return;
                }
            }
            loop {
                while !cx.is_stopped() && timer.enqueue_batch() {}
                if !cx.wait(idle) {
                    return;
                }
            }
        })?;
        let _ = self.arrivals.waker.set(enqueue.waker());
        services.push(enqueue);

        let timer = self.clone();
        services.push(Service::spawn("TimerDequeueService", move |cx| {
            while !timer.ready() {
                if !cx.wait(Duration::from_millis(20)) {
                    return;
                }
            }
            loop {
                while !cx.is_stopped() && timer.dequeue_slot() >= 0 {}
                // Sleep to just past the next slot boundary.
                let now = now_ms();
                let next = timer.format(now) + timer.precision;
                let wait = ((next - now) as u64).clamp(1, idle.as_millis() as u64 * 10);
                if !cx.wait(Duration::from_millis(wait)) {
                    return;
                }
            }
        })?);

        let timer = self.clone();
        let flush_every = Duration::from_millis(self.config.timer_flush_interval_ms.max(10));
        services.push(Service::every("TimerFlushService", flush_every, true, move || timer.flush())?);

        let timer = self.clone();
        services.push(Service::every("TimerCleanService", Duration::from_secs(30), false, move || {
            let min = timer.store.min_phy_offset();
            let deleted = {
                let _appends = timer.state.lock();
                timer.log.delete_expired(min)
            };
            if deleted > 0 {
                info!(deleted, "timer log segments below the commit log deleted");
            }
        })?);
        let timer = self.clone();
        let mut last_check_ms = 0;
        services.push(Service::every("TimerCheckMetricsService", Duration::from_secs(45 * 60), false, move || {
            let config = &timer.config;
            let hour = crate::clock::local_hour();
            let now = now_ms();
            // Java's rule: at an hour `timerCheckMetricsWhen` names, at most once in 70 minutes.
            if config.timer_enable_check_metrics && crate::clock::hour_named(&config.timer_check_metrics_when, hour) && now - last_check_ms > 70 * 60 * 1000 {
                last_check_ms = now;
                timer.revise_metrics();
                info!(took_ms = now_ms() - now, "timer metrics checked");
            }
        })?);
        info!(dequeue, "timer started");
        Ok(())
    }

    /// Stops the loops and writes the checkpoint.
    pub fn shutdown(&self) {
        let services: Vec<Service> = std::mem::take(&mut *self.services.lock());
        for s in &services {
            s.stop();
        }
        self.flush();
    }

    /// Whether releases may start: the dispatcher has caught up (so the consume queues show
    /// every release made before a crash) and `disappearTimeAfterStart` has passed.
    fn ready(&self) -> bool {
        if !self.store.dispatched_all() {
            return false;
        }
        let delay = self.config.disappear_time_after_start;
        delay <= 0 || now_ms() >= self.started_ms.load(Ordering::Acquire) as i64 + delay
    }

    /// Before a release: when recovery or a promotion asked for it, finds the releases stored
    /// since the read time it gave (less two slots and a second for clocks that step) so that they
    /// are not made again.
    fn catch_up_releases(&self) {
        let mut rescan = self.rescan.lock();
        if let Some(read_ms) = rescan.take() {
            // Nor was anything released before the oldest timer message still queued (a store
            // that never had one, or a fresh checkpoint, then needs no scan of every queue).
            let Some(oldest_timer) = self.store.earliest_message_time(TIMER_TOPIC, 0) else { return };
            let since = (read_ms - 2 * self.precision - 1000).max(oldest_timer);
            let found = self.releases_since(since);
            info!(since, found = found.len(), "timer releases already stored found; they are not made again");
            self.released.lock().extend(found);
        }
    }

    /// Releases stored at or after `since_ms`, found through the tails of the consume queues.
    fn releases_since(&self, since_ms: i64) -> HashSet<Released> {
        let mut found = HashSet::new();
        for cq in self.store.queues() {
            let mut at = cq.max_offset() - 1;
            while at >= cq.min_offset() {
                let Some(unit) = cq.get(at) else { break };
                let Some(bytes) = self.store.look_message_by_offset(unit.phy_offset) else { break };
                let Ok(RecordAt::Record(r)) = decode_record(&bytes, false) else { break };
                if r.store_timestamp < since_ms {
                    break;
                }
                if r.property(properties::TIMER_DEQUEUE_MS).is_some() {
                    if let Some(key) = Released::of(r.topic, r.queue_id, r.properties) {
                        found.insert(key);
                    }
                }
                at -= 1;
            }
        }
        found
    }

    /// Sets whether this broker releases timers (it became master, or stopped being one). As
    /// Java's `checkBrokerRole`, a new master continues from the checkpoint's read time.
    pub fn set_dequeue(&self, on: bool) {
        // The state and the rescan are set before the flag turns on, so a loop that sees the
        // flag also sees the read time and finds the releases already made before its first.
        let cp = self.checkpoint.lock().values;
        let mut s = self.state.lock();
        if self.dequeue_on.load(Ordering::Acquire) == on {
            return;
        }
        if on {
            s.curr_queue_offset = s.curr_queue_offset.min(cp.master_timer_queue_offset);
            s.commit_queue_offset = s.curr_queue_offset;
            s.curr_read_ms = cp.last_read_time_ms.max(self.oldest_read_ms());
            s.commit_read_ms = s.curr_read_ms;
            s.pending = s.wheel.all_num(s.curr_read_ms);
            *self.rescan.lock() = Some(s.curr_read_ms);
        }
        self.role_epoch.fetch_add(1, Ordering::AcqRel);
        self.dequeue_on.store(on, Ordering::Release);
    }

    fn is_slave(&self) -> bool {
        self.store.role() == BrokerRole::Slave
    }

    /// One batch of the timer topic into the wheel; true when there was something.
    fn enqueue_batch(&self) -> bool {
        if self.config.timer_stop_enqueue {
            return false;
        }
        self.catch_up_releases();
        // Fixed for the batch: a batch begun before this broker became master releases nothing
        // at once (the releases made before are not known to it yet).
        let releasing = self.dequeue_on.load(Ordering::Acquire);
        let Some(cq) = self.store.find_queue(TIMER_TOPIC, 0) else {
            self.move_write_time();
            return false;
        };
        let (mut offset, master_offset) = {
            let mut s = self.state.lock();
            // The write time is now for what this batch enqueues. Only the dequeue loop moved it,
            // and only on a master: after a start the enqueue loop could run first and place
            // every unit against a write time of 0 (a roll into a slot decades back, released
            // days late), and on a slave it stayed 0 for good.
            self.move_write_time_locked(&mut s);
            if s.curr_queue_offset < cq.min_offset() {
                warn!(offset = s.curr_queue_offset, min = cq.min_offset(), "timer queue offset below the queue; moved up");
                s.curr_queue_offset = cq.min_offset();
            }
            (s.curr_queue_offset, self.checkpoint.lock().values.master_timer_queue_offset)
        };
        let slave = self.is_slave() && !releasing;
        let mut did = 0;
        while did < 256 {
            if slave && offset >= master_offset {
                break;
            }
            let Some(unit) = cq.get(offset) else { break };
            if let Some(bytes) = self.store.look_message_by_offset(unit.phy_offset) {
                match decode_record(&bytes, false) {
                    Ok(RecordAt::Record(record)) => {
                        if !self.enqueue_one(&record, unit.phy_offset, unit.size, releasing) {
                            // The release failed for good reasons to retry: stay on this message.
                            break;
                        }
                    }
                    _ => warn!(offset, phy = unit.phy_offset, "timer message unreadable; skipped"),
                }
            } else {
                warn!(offset, phy = unit.phy_offset, "timer message missing from the commit log; skipped");
            }
            offset += 1;
            did += 1;
            self.state.lock().curr_queue_offset = offset;
        }
        let mut s = self.state.lock();
        s.commit_queue_offset = offset;
        self.move_write_time_locked(&mut s);
        did > 0
    }

    /// Takes one timer message: into the wheel, or released at once when already due.
    /// False when a due release could not be made (retry later).
    fn enqueue_one(&self, record: &DecodedRecord<'_>, offset_py: i64, size_py: i32, releasing: bool) -> bool {
        let Some(out_ms) = record.property(properties::TIMER_OUT_MS).and_then(|t| t.trim().parse::<i64>().ok()) else {
            warn!(offset_py, "timer message without a valid TIMER_OUT_MS; skipped");
            return true;
        };
        let real_topic = record.property(properties::REAL_TOPIC).unwrap_or("");
        if let Some(events) = self.events.get() {
            events.on_fetched(real_topic, (out_ms - record.born_timestamp) / 1000, record.store_timestamp);
            events.on_enqueue(real_topic);
        }
        let is_delete = record.property(properties::TIMER_DEL_UNIQKEY).is_some();
        {
            let mut s = self.state.lock();
            let due_now = releasing && out_ms < s.curr_write_ms;
            if !due_now {
                let write_ms = s.curr_write_ms;
                let (delayed, magic) = super::place(write_ms, out_ms, is_delete, self.roll_window_slots, self.precision);
                let slot = s.wheel.slot(delayed);
                let unit = Unit {
                    prev_pos: slot.last_pos,
                    magic,
                    enqueue_ms: write_ms,
                    delay_ms: (delayed - write_ms) as i32,
                    offset_py,
                    size_py,
                    topic_hash: java_string_hash(real_topic),
                };
                match self.log.append(&unit) {
                    Ok(pos) => {
                        let num = if is_delete { slot.num - 1 } else { slot.num + 1 };
                        let first = if slot.first_pos == -1 { pos } else { slot.first_pos };
                        let slot_magic = if slot.is_empty() { 0 } else { slot.magic };
                        s.wheel.put_slot(delayed, first, pos, num, slot_magic);
                        s.pending += if is_delete { -1 } else { 1 };
                        drop(s);
                        self.add_metric(real_topic, record.property(properties::TIMER_ENQUEUE_MS), if is_delete { -1 } else { 1 });
                        self.enqueued.fetch_add(1, Ordering::Relaxed);
                        return true;
                    }
                    Err(e) => {
                        warn!(error = %e, "timer log append failed; will retry");
                        return false;
                    }
                }
            }
        }
        // Due already: released now, never entered (Java marks TIMER_ENQUEUE_MS = Long.MAX).
        self.enqueued.fetch_add(1, Ordering::Relaxed);
        if is_delete {
            return true; // a delete marker is never put (Java: PUT_NO_RETRY)
        }
        self.release(record, i64::MAX, false)
    }

    fn add_metric(&self, real_topic: &str, enqueue_ms: Option<&str>, delta: i64) {
        if real_topic.is_empty() || enqueue_ms.and_then(|e| e.parse::<i64>().ok()) == Some(i64::MAX) {
            return;
        }
        self.metrics.add(real_topic, delta, now_ms());
    }

    fn move_write_time(&self) {
        let mut s = self.state.lock();
        self.move_write_time_locked(&mut s);
    }

    fn move_write_time_locked(&self, s: &mut State) {
        let now = self.format(now_ms());
        if s.curr_write_ms < now {
            s.curr_write_ms = now;
        }
    }

    /// Releases one slot: -1 when there is nothing to do (caught up, not the master, stopped),
    /// 0 for an empty slot, 1 for a slot released.
    fn dequeue_slot(&self) -> i32 {
        // A slave's read time follows its master's through `sync_from_master`.
        if self.config.timer_stop_dequeue || !self.dequeue_on.load(Ordering::Acquire) {
            return -1;
        }
        let epoch = self.role_epoch.load(Ordering::Acquire);
        self.catch_up_releases();
        let (read_ms, slot, units) = {
            let mut s = self.state.lock();
            self.move_write_time_locked(&mut s);
            if s.curr_read_ms >= s.curr_write_ms {
                return -1;
            }
            let read_ms = s.curr_read_ms;
            let slot = s.wheel.slot(read_ms);
            if slot.is_empty() {
                self.move_read_time(&mut s, 0);
                return 0;
            }
            let units = self.slot_units(&self.log, &slot);
            (read_ms, slot, units)
        };
        let mut deletes = HashSet::new();
        for unit in units.iter().filter(|u| u.is_delete_marker()) {
            if let Some(key) = self.message_at(unit).and_then(|b| {
                let Ok(RecordAt::Record(r)) = decode_record(&b, false) else { return None };
                r.property(properties::TIMER_DEL_UNIQKEY).map(str::to_owned)
            }) {
                deletes.insert(key);
            }
        }
        let Some(sink) = self.sink.get() else { return -1 };
        // The slot's releases go out with up to RELEASES_IN_FLIGHT unanswered (in DLedger mode
        // each waits for its quorum); the read time moves only once every one is answered.
        let (answer, answers) = std::sync::mpsc::channel::<(MessageToStore, bool, PutOutcome)>();
        let mut in_flight = 0usize;
        let mut unsettled = Vec::new();
        let mut settle = |(msg, rolled, outcome): (MessageToStore, bool, PutOutcome)| {
            if outcome == PutOutcome::Retry {
                unsettled.push((msg, rolled));
            } else {
                self.put_out(&msg, rolled, Some(outcome));
            }
        };
        let mut role_changed = false;
        for unit in units.iter().rev().filter(|u| !u.is_delete_marker()) {
            if self.role_epoch.load(Ordering::Acquire) != epoch || !self.dequeue_on.load(Ordering::Acquire) {
                role_changed = true;
                break;
            }
            let Some(bytes) = self.message_at(unit) else {
                warn!(offset_py = unit.offset_py, "timer message missing from the commit log; not released");
                continue;
            };
            let Ok(RecordAt::Record(record)) = decode_record(&bytes, false) else { continue };
            let deleted = record.property(properties::UNIQ_KEY).is_some_and(|uniq| {
                let topic = record.property(properties::REAL_TOPIC).unwrap_or("");
                deletes.contains(&delete_key(topic, uniq))
            });
            if deleted {
                continue;
            }
            let rolled = unit.magic & MAGIC_ROLL != 0;
            self.add_metric(record.property(properties::REAL_TOPIC).unwrap_or(""), record.property(properties::TIMER_ENQUEUE_MS), -1);
            let Some(msg) = self.releasable(&record, unit.enqueue_ms, rolled) else { continue };
            while in_flight >= RELEASES_IN_FLIGHT {
                // Every put is answered once (a stopped DLedger member answers as stopped).
                let Ok(answered) = answers.recv() else { break };
                in_flight -= 1;
                settle(answered);
            }
            in_flight += 1;
            let answer = answer.clone();
            let kept = msg.clone();
            sink.put_then(&msg, rolled, Box::new(move |outcome| drop(answer.send((kept, rolled, outcome)))));
        }
        drop(answer);
        for answered in answers.iter().take(in_flight) {
            settle(answered);
        }
        if role_changed {
            return -1;
        }
        for (msg, rolled) in unsettled {
            while !self.put_out(&msg, rolled, Some(PutOutcome::Retry)) {
                if self.role_epoch.load(Ordering::Acquire) != epoch {
                    return -1;
                }
                std::thread::sleep(Duration::from_millis((500 * self.precision / 1000) as u64));
            }
        }
        if self.role_epoch.load(Ordering::Acquire) != epoch {
            return -1;
        }
        let mut s = self.state.lock();
        if s.curr_read_ms == read_ms {
            self.move_read_time(&mut s, slot.num as i64);
        }
        1
    }

    fn move_read_time(&self, s: &mut State, released: i64) {
        s.curr_read_ms += self.precision;
        s.commit_read_ms = s.curr_read_ms;
        s.pending = (s.pending - released).max(0);
    }

    /// The units of a slot, last added first, by their back links (bounded by the log: a link
    /// must point backwards). Every unit must be due in this slot: after a crash that left the
    /// wheel ahead of the log, a slot's link may point where the log has since written another
    /// slot's unit, and following it would release that one early.
    fn slot_units(&self, log: &TimerLog, slot: &Slot) -> Vec<Unit> {
        let mut units = Vec::new();
        let mut pos = slot.last_pos;
        while pos >= 0 {
            let Some(unit) = log.unit_at(pos) else { break };
            if self.format(unit.delayed_ms()) != slot.time_ms {
                warn!(pos, slot_ms = slot.time_ms, unit_ms = unit.delayed_ms(), "timer log link leads to another slot's unit; slot cut there");
                break;
            }
            units.push(unit);
            if unit.prev_pos >= pos {
                warn!(pos, prev = unit.prev_pos, "timer log link points forward; slot cut there");
                break;
            }
            pos = unit.prev_pos;
        }
        units
    }

    fn message_at(&self, unit: &Unit) -> Option<Bytes> {
        self.store.read_phy(unit.offset_py, usize::try_from(unit.size_py).ok()?)
    }

    /// Puts one message out (Java `convert` + `doPut`): into its real topic and queue, or when
    /// `rolled` back into the timer topic; false when it should be retried. Gives up after three
    /// failures unless `timerEnableRetryUntilSuccess`, as Java.
    fn release(&self, record: &DecodedRecord<'_>, enqueue_ms: i64, rolled: bool) -> bool {
        let Some(msg) = self.releasable(record, enqueue_ms, rolled) else { return true };
        self.put_out(&msg, rolled, None)
    }

    /// The message a release puts, or none when there is nothing to put: it cannot be made, or
    /// (after a crash or a promotion) the commit log already holds it.
    fn releasable(&self, record: &DecodedRecord<'_>, enqueue_ms: i64, rolled: bool) -> Option<MessageToStore> {
        let msg = self.convert(record, enqueue_ms, rolled)?;
        if let Some(key) = Released::of(&msg.topic, msg.queue_id, &msg.properties) {
            if self.released.lock().remove(&key) {
                info!(topic = %msg.topic, uniq = %key.uniq_key, "timer release already in the commit log; not made again");
                return None;
            }
        }
        if let Some(events) = self.events.get() {
            events.on_dequeue(record.property(properties::REAL_TOPIC).unwrap_or(""));
        }
        Some(msg)
    }

    /// Puts `msg` until it is stored or given up (see [`TimerStore::release`]), starting from
    /// the outcome of a put already made, if any; false when it should be retried later.
    fn put_out(&self, msg: &MessageToStore, rolled: bool, first: Option<PutOutcome>) -> bool {
        let Some(sink) = self.sink.get() else { return false };
        let mut failures = 0;
        let mut outcome = first;
        loop {
            match outcome.take().unwrap_or_else(|| sink.put(msg, rolled)) {
                PutOutcome::Ok => {
                    self.dequeued.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                PutOutcome::Drop => {
                    warn!(topic = %msg.topic, "timer message refused for good; dropped");
                    return true;
                }
                PutOutcome::Retry => {
                    failures += 1;
                    if !self.config.timer_enable_retry_until_success && failures >= 3 {
                        warn!(topic = %msg.topic, failures, "timer message not released after retries; dropped");
                        return true;
                    }
                    if !self.dequeue_on.load(Ordering::Acquire) {
                        return false;
                    }
                    std::thread::sleep(Duration::from_millis((500 * self.precision / 1000) as u64));
                }
            }
        }
    }

    /// The message to put for a release (Java `convert` and `convertMessage`).
    fn convert(&self, record: &DecodedRecord<'_>, enqueue_ms: i64, rolled: bool) -> Option<MessageToStore> {
        let mut props = properties::parse(record.properties);
        if enqueue_ms != -1 {
            props.insert(properties::TIMER_ENQUEUE_MS.to_owned(), enqueue_ms.to_string());
        }
        if rolled {
            let times = props.get(properties::TIMER_ROLL_TIMES).and_then(|t| t.parse::<i64>().ok()).unwrap_or(0) + 1;
            props.insert(properties::TIMER_ROLL_TIMES.to_owned(), times.to_string());
        }
        props.insert(properties::TIMER_DEQUEUE_MS.to_owned(), now_ms().to_string());
        let mut msg = record.to_message();
        if !rolled {
            let topic = props.shift_remove(properties::REAL_TOPIC);
            let queue = props.shift_remove(properties::REAL_QID).and_then(|q| q.parse::<i32>().ok());
            match (topic, queue) {
                (Some(topic), Some(queue)) if remoting::protocol::name::TopicName::new(&topic).is_ok() && (0..=u16::MAX as i32).contains(&queue) => {
                    msg.topic = topic;
                    msg.queue_id = queue;
                }
                _ => {
                    warn!(offset = record.physical_offset, "timer message names no valid real topic and queue; not released");
                    return None;
                }
            }
        }
        msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        Some(msg)
    }

    /// Java `prepareTimerCheckPoint` and the flush service's pass: the log, the wheel, then the
    /// checkpoint (which never claims more than what is on disk before it), then the metrics.
    /// The progress is taken under the state lock; the disk is synced after it is let go, so
    /// enqueue and release do not wait for the disk (what they write meanwhile is synced too,
    /// or by the next pass; the checkpoint names only what was done before the progress taken).
    pub fn flush(&self) {
        self.sample_rates();
        let dequeueing = self.dequeue_on.load(Ordering::Acquire);
        let (read_ms, queue_offset, new_version) = {
            let mut s = self.state.lock();
            let moved = s.commit_read_ms != s.last_version_read_ms || s.commit_queue_offset != s.last_version_queue_offset;
            if dequeueing && moved {
                (s.last_version_read_ms, s.last_version_queue_offset) = (s.commit_read_ms, s.commit_queue_offset);
            }
            (s.commit_read_ms, s.commit_queue_offset, dequeueing && moved)
        };
        // The files the checkpoint speaks of are made durable before it is written.
        if let Err(e) = self.log.flush() {
            warn!(error = %e, "timer log flush failed");
            return;
        }
        if let Err(e) = self.wheel_sync.sync() {
            warn!(error = %e, "timer wheel flush failed");
            return;
        }
        {
            let mut cp = self.checkpoint.lock();
            let v = &mut cp.values;
            v.last_timer_log_flush_pos = self.log.flushed_offset();
            v.last_read_time_ms = read_ms;
            if dequeueing {
                v.master_timer_queue_offset = queue_offset;
                if new_version {
                    v.data_version.next(0, now_ms());
                }
            }
            v.last_timer_queue_offset = queue_offset.min(v.master_timer_queue_offset);
            if let Err(e) = cp.flush() {
                warn!(error = %e, "timer checkpoint flush failed");
            }
        }
        if let Err(e) = self.metrics.persist() {
            warn!(error = %e, "timer metrics not written");
        }
    }

    /// Java's `checkAndReviseMetrics`: counts again, from the pending units of the log, the
    /// topics whose count is small enough for that (`timerMetricSmallThreshold`), so a count
    /// that drifted (a crash between a unit and its metric, a dropped release) comes right.
    /// The log is read without the state lock, from the first unit of the oldest pending slot.
    pub fn revise_metrics(&self) {
        let mut recount = self.metrics.recount(self.config.timer_metric_small_threshold);
        if recount.is_empty() {
            return;
        }
        let (read_ms, begin) = {
            let s = self.state.lock();
            // Java asks for slots whose last unit lies beyond position 0, which misses a slot
            // whose only unit is the log's very first; -1 counts that one too.
            (s.curr_read_ms, s.wheel.check_phy_pos(s.curr_read_ms, -1))
        };
        if begin != i64::MAX {
            self.log.recover(begin, false, |pos, unit| {
                if pos >= begin && unit.delayed_ms() >= read_ms {
                    recount.count(unit.topic_hash, unit.is_delete_marker(), || self.real_topic_of(unit));
                }
            });
        }
        self.metrics.apply(recount, now_ms());
    }

    fn real_topic_of(&self, unit: &Unit) -> Option<String> {
        let bytes = self.message_at(unit)?;
        let Ok(RecordAt::Record(r)) = decode_record(&bytes, false) else { return None };
        r.property(properties::REAL_TOPIC).map(str::to_owned)
    }

    fn sample_rates(&self) {
        let now = now_ms();
        let (enqueued, dequeued) = (self.enqueued.load(Ordering::Relaxed), self.dequeued.load(Ordering::Relaxed));
        let mut r = self.rates.lock();
        let elapsed = now - r.at_ms;
        if r.at_ms > 0 && elapsed > 0 {
            r.enqueue_tps = (enqueued - r.enqueued) as f32 * 1000.0 / elapsed as f32;
            r.dequeue_tps = (dequeued - r.dequeued) as f32 * 1000.0 / elapsed as f32;
        }
        (r.at_ms, r.enqueued, r.dequeued) = (now, enqueued, dequeued);
    }

    /// `brokerStatus`'s timer keys as Java 5.3.3 reports them: `timerReadBehind` (seconds the
    /// read time is behind the clock), `timerOffsetBehind` (timer-topic messages not yet taken),
    /// `timerCongestNum` (pending timers), `timerEnqueueTps`, `timerDequeueTps`.
    pub fn status(&self) -> [(&'static str, String); 5] {
        let p = self.progress();
        let r = self.rates.lock();
        [
            ("timerReadBehind", ((now_ms() - p.curr_read_ms) / 1000).to_string()),
            ("timerOffsetBehind", (p.max_queue_offset - p.queue_offset).to_string()),
            ("timerCongestNum", p.pending.to_string()),
            ("timerEnqueueTps", format!("{:?}", r.enqueue_tps)),
            ("timerDequeueTps", format!("{:?}", r.dequeue_tps)),
        ]
    }

    /// The checkpoint as GET_TIMER_CHECK_POINT answers it.
    pub fn checkpoint_values(&self) -> CheckpointValues {
        self.checkpoint.lock().values
    }

    /// A slave takes its master's checkpoint (5.x `SlaveSynchronize.syncTimerCheckPoint`): the
    /// master's queue offset bounds what the slave takes into its wheel, its read time is where
    /// the slave would continue as master.
    /// Ignored while this broker releases timers itself (Java syncs only when not dequeueing).
    pub fn sync_from_master(&self, master: CheckpointValues) {
        if self.dequeue_on.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.state.lock();
        let mut cp = self.checkpoint.lock();
        cp.values.master_timer_queue_offset = master.master_timer_queue_offset;
        cp.values.last_read_time_ms = master.last_read_time_ms;
        cp.values.data_version = master.data_version;
        s.curr_read_ms = master.last_read_time_ms.max(self.oldest_read_ms());
        s.commit_read_ms = s.curr_read_ms;
        s.pending = s.wheel.all_num(s.curr_read_ms);
    }

    /// Whether this broker releases timers.
    pub fn is_dequeueing(&self) -> bool {
        self.dequeue_on.load(Ordering::Acquire)
    }

    pub fn progress(&self) -> TimerProgress {
        let s = self.state.lock();
        TimerProgress {
            curr_read_ms: s.curr_read_ms,
            commit_read_ms: s.commit_read_ms,
            curr_write_ms: s.curr_write_ms,
            queue_offset: s.curr_queue_offset,
            commit_queue_offset: s.commit_queue_offset,
            max_queue_offset: self.store.find_queue(TIMER_TOPIC, 0).map_or(0, |cq| cq.max_offset()),
            pending: s.pending,
            enqueued: self.enqueued.load(Ordering::Relaxed),
            dequeued: self.dequeued.load(Ordering::Relaxed),
        }
    }

    /// Timers in the slot of `deliver_ms` (Java `getCongestNum`).
    pub fn congest_num(&self, deliver_ms: i64) -> i64 {
        self.state.lock().wheel.slot(deliver_ms).num as i64
    }

    /// Java `isReject`: flow control when a slot holds more than `timerCongestNumEachSlot`
    /// (certain at twice that, random in between).
    pub fn is_reject(&self, deliver_ms: i64) -> bool {
        let limit = self.config.timer_congest_num_each_slot;
        let congest = self.congest_num(deliver_ms);
        if congest <= limit {
            return false;
        }
        if congest >= limit.saturating_mul(2) {
            return true;
        }
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let roll = (nanos.wrapping_mul(2_654_435_761) % 1000) as f64;
        roll > 1000.0 * (congest - limit) as f64 / (limit as f64 + 0.1)
    }
}
