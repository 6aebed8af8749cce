//! Pop's buffer merge, `enablePopBufferMerge=true` (Java 5.3.3's `PopBufferMergeService`).
//!
//! A pop's check point is held in memory instead of being written to the revive topic at once;
//! the acks (and the ack half of a change of invisible time) of a held check point only mark its
//! bits. A check point whose messages are all acked before it has to be written is dropped: it
//! and its acks never reach the revive topic. One that is not (it stayed `popCkStayBufferTime`,
//! or its revive time is less than `popCkStayBufferTimeOut` away, or the service stops) is
//! written with an ack record for each bit it has, and the revive service takes it as any other.
//!
//! While check points are held, the queue's consumer offset is not committed past any of them:
//! each pop queues its next offset per queue (`topic@group@queueId`), and a pass commits the
//! queue's offsets in order, each once its check point is written (or needs no writing: all
//! acked). A pop reads from the last queued offset. So a broker that stops writes what it holds
//! and commits; one that dies loses held check points but not their messages (their offset was
//! not committed: they are handed out again).
//!
//! The requests only take the state's mutex for a map operation; everything written is written
//! by the service's own thread ([`run`], every 5 ms as Java). Sizes are bounded as Java bounds
//! them (`popCkMaxBufferSize` check points, `popCkOffsetMaxQueueSize` offsets per queue); past
//! them, and for a check point too close to its revive time, a pop writes its check point itself.
//!
//! A check point the buffer does not hold (the merge is off, the default; or it would not take
//! it) is written by its pop, as Java's `addCkJustOffset`: held here as `just_offset` while its
//! put is in flight, so the pop hands its messages out without waiting for the disk, a slave
//! or a quorum, the queue's next pops read past them, and the offset is committed in order once
//! the put is settled ([`BufferMerge::settle`], from the store's callback). A put the store
//! refuses outright withholds the pop's messages; one that fails later is written again by the
//! passes, as Java retries it.
//!
//! Differs from Java on purpose: the pop's own put never waits (Java's waits unless
//! `appendCkAsync`); a check point the pop cannot append withholds its messages (Java hands them
//! out and retries the put); this thread sleeps while the merge is off and nothing is held
//! (Java passes every 5 ms whatever the switch); an ack and the pass that writes its check point
//! take one mutex, so an ack is never marked on a check point already dropped (Java relies on
//! time margins); the service writes on its own thread whatever `appendCkAsync`/`appendAckAsync`
//! say; the stop neither sleeps 2 s first (the servers are already down) nor loops without bound.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use remoting::service::{ServiceContext, Waker};

use crate::config::LiveConfig;
use remoting::protocol::name::{GroupName, TopicName};

use crate::metrics::pop::ReviveKind;
use crate::pop::formats::{AckMsg, BatchAckMsg, PopCheckPoint, ReviveMessage};
use crate::pop::names::SPLIT;
use crate::put::Origin;

/// Java's pass interval.
pub const SCAN_INTERVAL: Duration = Duration::from_millis(5);
/// How often an idle service (merge off, nothing held) looks at its switch again.
const IDLE_INTERVAL: Duration = Duration::from_millis(100);
/// How long a slave sleeps between clears (Java: `interval * 200 * 5`).
const SLAVE_INTERVAL: Duration = Duration::from_secs(5);
/// Passes between two garbage scans (Java's `countOfSecond30`).
const GARBAGE_EVERY: u64 = 30_000 / 5;
/// An offset queue not popped for this long is dropped (Java's `minute5`).
const IDLE_QUEUE_MS: i64 = 5 * 60 * 1000;
/// Java's margin: a check point or an ack this close to the limits is not taken.
const ADD_MARGIN_MS: i64 = 1500;
/// The passes the stopping service makes to write and commit what it holds (Java loops until
/// empty; a put that keeps failing must not hang the shutdown).
const FINAL_PASSES: usize = 400;

/// What the service writes and commits through (the broker's pop service; a fake in tests).
pub trait MergeSink {
    /// Stores `ck` in revive queue `revive_qid`; whether it is stored.
    fn put_ck(&self, ck: &PopCheckPoint, revive_qid: i32) -> bool;
    /// Stores the ack of message `index` of `ck`, due at its revive time; whether it is stored.
    fn put_ack(&self, ck: &PopCheckPoint, revive_qid: i32, index: u8) -> bool;
    /// Stores the acks of messages `indexes` of `ck` as one batch ack (`enablePopBatchAck`).
    fn put_batch_ack(&self, ck: &PopCheckPoint, revive_qid: i32, indexes: &[u8]) -> bool;
    /// Commits the queue's offset; false while a pop holds the queue (tried at the next pass).
    fn commit_offset(&self, topic: &str, group: &str, queue_id: i32, offset: i64) -> bool;
    /// Whether the topic and the group still exist (their offsets are dropped otherwise).
    fn exists(&self, topic: &str, group: &str) -> bool;
}

/// Java's merge key of a check point: topic, group, queue, start offset, pop time and broker
/// name run together.
fn ck_key(ck: &PopCheckPoint) -> String {
    key(ck.topic.as_deref(), ck.cid.as_deref(), ck.queue_id, ck.start_offset, ck.pop_time, ck.broker_name.as_deref())
}

fn ack_key(ack: &AckMsg) -> String {
    key(ack.topic.as_deref(), ack.consumer_group.as_deref(), ack.queue_id, ack.start_offset, ack.pop_time, ack.broker_name.as_deref())
}

fn key(topic: Option<&str>, group: Option<&str>, queue_id: i32, start_offset: i64, pop_time: i64, broker_name: Option<&str>) -> String {
    let n = |s: Option<&str>| s.unwrap_or("null").to_owned();
    format!("{}{}{queue_id}{start_offset}{pop_time}{}", n(topic), n(group), n(broker_name))
}

/// The offset queue's key (Java's lock key).
pub fn lock_key(topic: &str, group: &str, queue_id: i32) -> String {
    format!("{topic}{SPLIT}{group}{SPLIT}{queue_id}")
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CkState {
    NotStored,
    /// The service's thread is writing it.
    Storing,
    Stored,
}

/// A held check point.
struct Held {
    ck: PopCheckPoint,
    revive_qid: i32,
    merge_key: String,
    /// Messages acked (bit i: message i).
    acked: u32,
    /// Acks written to the revive topic.
    stored_acks: u32,
    state: CkState,
    /// Java's `justOffset`: written by its pop (asynchronously), held only so that its offset
    /// waits for it; acks are not merged into it.
    just_offset: bool,
}

impl Held {
    fn mask(&self) -> u32 {
        match self.ck.num {
            n if n <= 0 => 0,
            n if n >= 32 => u32::MAX,
            n => (1u32 << n) - 1,
        }
    }

    /// Java's `isCkDone`: every message acked.
    fn all_acked(&self) -> bool {
        self.acked & self.mask() == self.mask()
    }

    /// Java's `isCkDoneForFinish` with the check point stored: nothing left to write.
    fn written(&self) -> bool {
        self.state == CkState::Stored && (self.acked ^ self.stored_acks) & self.mask() == 0
    }

    /// Done with: dropped from the buffer, its offset free to commit.
    fn done(&self) -> bool {
        if self.just_offset {
            return self.state == CkState::Stored;
        }
        self.all_acked() || self.written()
    }
}

/// What [`BufferMerge::add_storing`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storing {
    /// Held as check point `id` until its put is settled.
    Added(u64),
    /// The same check point is held: the pop hands nothing out.
    Conflict,
    /// As many are held as the buffer may hold: the pop writes its check point and waits.
    Full,
}

/// One pop's next offset, waiting in its queue's order.
struct Pending {
    /// The held check point it waits for; none when its check point is already stored (or the
    /// pop found nothing to hand out).
    held: Option<u64>,
    next_begin_offset: i64,
}

struct OffsetQueue {
    topic: String,
    group: String,
    queue_id: i32,
    pending: VecDeque<Pending>,
    /// The last pop time queued (Java's `QueueWithTime`).
    time: i64,
}

#[derive(Default)]
struct State {
    next_id: u64,
    by_key: HashMap<String, u64>,
    held: HashMap<u64, Held>,
    offsets: HashMap<String, OffsetQueue>,
}

impl State {
    fn queue(&mut self, topic: &str, group: &str, queue_id: i32) -> &mut OffsetQueue {
        self.offsets.entry(lock_key(topic, group, queue_id)).or_insert_with(|| OffsetQueue {
            topic: topic.to_owned(),
            group: group.to_owned(),
            queue_id,
            pending: VecDeque::new(),
            time: 0,
        })
    }

    /// Holds `ck` under `merge_key` and queues its pop's next offset behind it: a check point
    /// the buffer writes (`just_offset` false), or one its pop is writing (`Storing`).
    fn hold(&mut self, ck: &PopCheckPoint, revive_qid: i32, merge_key: String, next_begin_offset: i64, just_offset: bool) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.by_key.insert(merge_key.clone(), id);
        let state = if just_offset { CkState::Storing } else { CkState::NotStored };
        self.held.insert(id, Held { ck: ck.clone(), revive_qid, merge_key, acked: 0, stored_acks: 0, state, just_offset });
        let q = self.queue(ck.topic.as_deref().unwrap_or(""), ck.cid.as_deref().unwrap_or(""), ck.queue_id);
        q.time = ck.pop_time;
        q.pending.push_back(Pending { held: Some(id), next_begin_offset });
        id
    }

    fn offsets_len(&self) -> usize {
        self.offsets.values().map(|q| q.pending.len()).sum()
    }

    fn remove(&mut self, id: u64) {
        if let Some(h) = self.held.remove(&id) {
            self.by_key.remove(&h.merge_key);
        }
    }
}

/// A check point the pass writes (with the acks it has).
struct Flush {
    id: u64,
    ck: PopCheckPoint,
    revive_qid: i32,
    store_ck: bool,
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub cks_written: usize,
    pub acks_written: usize,
    pub offsets_committed: usize,
    pub elapsed_ms: u64,
}

/// The buffer: held check points and the queues' pending offsets. Requests call the `add_*`,
/// [`latest_offset`](Self::latest_offset) and [`clear_offsets`](Self::clear_offsets); the
/// service's thread calls [`pass`](Self::pass).
pub struct BufferMerge {
    config: LiveConfig,
    state: Mutex<State>,
    /// Java's `serving`: false while stopping, or after a pass that took too long (until what
    /// is held is written).
    serving: AtomicBool,
    /// Set while the service sleeps its idle interval (the merge off, nothing held): a settled
    /// put then wakes it, so the offset is committed within a pass, not an idle interval.
    idle: AtomicBool,
    waker: OnceLock<Waker>,
}

impl BufferMerge {
    pub fn new(config: LiveConfig) -> BufferMerge {
        BufferMerge { config, state: Mutex::new(State::default()), serving: AtomicBool::new(true), idle: AtomicBool::new(false), waker: OnceLock::new() }
    }

    /// Whether a pop of this queue goes through the buffer: the merge is on, or offsets of the
    /// queue still wait (it was on; they must be committed in order).
    pub fn takes(&self, lock_key: &str) -> bool {
        self.config.load().enable_pop_buffer_merge || self.state.lock().offsets.get(lock_key).is_some_and(|q| !q.pending.is_empty())
    }

    /// Java's `addCk`: holds a pop's check point; false when the merge is off or stopping, the
    /// check point is due too soon, the buffer or the queue's offsets are full, or the same
    /// check point is held (the pop then writes it: [`Self::add_stored`]).
    pub fn add_ck(&self, ck: &PopCheckPoint, revive_qid: i32, next_begin_offset: i64, now_ms: i64) -> bool {
        let c = self.config.load();
        if !c.enable_pop_buffer_merge || !self.serving.load(Ordering::Acquire) {
            return false;
        }
        if ck.revive_time().wrapping_sub(now_ms) < i64::from(c.pop_ck_stay_buffer_time_out) + ADD_MARGIN_MS {
            return false;
        }
        let (topic, group) = (ck.topic.as_deref().unwrap_or(""), ck.cid.as_deref().unwrap_or(""));
        let mut s = self.state.lock();
        if s.held.len() > usize::try_from(c.pop_ck_max_buffer_size).unwrap_or(0) {
            tracing::warn!(held = s.held.len(), "pop buffer full: the check point is written at once");
            return false;
        }
        let max_queue = usize::try_from(c.pop_ck_offset_max_queue_size).unwrap_or(0);
        if s.offsets.get(&lock_key(topic, group, ck.queue_id)).is_some_and(|q| q.pending.len() >= max_queue) {
            return false;
        }
        let merge_key = ck_key(ck);
        if s.by_key.contains_key(&merge_key) {
            tracing::warn!(merge_key, "pop buffer: the same check point is held");
            return false;
        }
        s.hold(ck, revive_qid, merge_key, next_begin_offset, false);
        true
    }

    /// Java's `addCkJustOffset` with the put in flight: the pop is writing `ck` itself and hands
    /// its messages out at once; the queue's offset moves past them (for the next pops at once,
    /// committed once the check point is stored: [`Self::settle`]; one the store failed to take
    /// is written again by the passes). Refused when the same check point is held (Java refuses
    /// such a pop) or when as many are in flight as the buffer may hold (the pop then writes
    /// and waits).
    pub fn add_storing(&self, ck: &PopCheckPoint, revive_qid: i32, next_begin_offset: i64) -> Storing {
        let cap = usize::try_from(self.config.load().pop_ck_max_buffer_size).unwrap_or(0);
        let merge_key = ck_key(ck);
        let mut s = self.state.lock();
        if s.by_key.contains_key(&merge_key) {
            tracing::warn!(merge_key, "pop buffer: the same check point is held");
            return Storing::Conflict;
        }
        if s.held.len() >= cap {
            return Storing::Full;
        }
        Storing::Added(s.hold(ck, revive_qid, merge_key, next_begin_offset, true))
    }

    /// What the put of an [`Self::add_storing`] check point came to (false: the passes write it
    /// again).
    pub fn settle(&self, id: u64, stored: bool) {
        if let Some(h) = self.state.lock().held.get_mut(&id) {
            if h.state == CkState::Storing {
                h.state = if stored { CkState::Stored } else { CkState::NotStored };
            }
        }
        if self.idle.load(Ordering::Acquire) {
            if let Some(w) = self.waker.get() {
                w.wake();
            }
        }
    }

    /// The pop's own put of check point `id` failed before it answered: the check point and
    /// its offset are forgotten (its messages are not handed out), unless a pass is already
    /// writing it again. Whether they were.
    pub fn withdraw_failed(&self, id: u64) -> bool {
        let mut s = self.state.lock();
        let Some(h) = s.held.get(&id) else { return false };
        if h.state != CkState::NotStored {
            return false;
        }
        let key = lock_key(h.ck.topic.as_deref().unwrap_or(""), h.ck.cid.as_deref().unwrap_or(""), h.ck.queue_id);
        s.remove(id);
        if let Some(q) = s.offsets.get_mut(&key) {
            q.pending.retain(|p| p.held != Some(id));
        }
        true
    }

    /// Whether a check point with the same key is held (Java refuses such a pop).
    pub fn holds(&self, ck: &PopCheckPoint) -> bool {
        self.state.lock().by_key.contains_key(&ck_key(ck))
    }

    /// Java's `addCkJustOffset` (the pop wrote its check point) and `addCkMock` (it found nothing
    /// and moves on to `next_begin_offset`): the offset is committed once those queued before it are.
    pub fn add_stored(&self, topic: &str, group: &str, queue_id: i32, pop_time: i64, next_begin_offset: i64) {
        let mut s = self.state.lock();
        let q = s.queue(topic, group, queue_id);
        q.time = pop_time;
        q.pending.push_back(Pending { held: None, next_begin_offset });
    }

    /// Java's `addAk`: marks the acked messages of a held check point (`offsets`: the acked queue
    /// offsets, one for an ack, several for a batch); false when it is not held (or about to be
    /// written), and the caller writes the ack.
    pub fn add_ack(&self, ack: &AckMsg, offsets: &[i64], batch: bool, now_ms: i64) -> bool {
        let c = self.config.load();
        if !c.enable_pop_buffer_merge || !self.serving.load(Ordering::Acquire) {
            return false;
        }
        let mut s = self.state.lock();
        let Some(id) = s.by_key.get(&ack_key(ack)).copied() else { return false };
        let Some(h) = s.held.get_mut(&id).filter(|h| !h.just_offset) else { return false };
        if h.ck.revive_time().wrapping_sub(now_ms) < i64::from(c.pop_ck_stay_buffer_time_out) + ADD_MARGIN_MS {
            return false;
        }
        if now_ms.wrapping_sub(h.ck.pop_time) > i64::from(c.pop_ck_stay_buffer_time) - ADD_MARGIN_MS {
            return false;
        }
        for &offset in offsets {
            match h.ck.index_of_ack(offset).filter(|i| *i < 32) {
                Some(i) => h.acked |= 1 << i,
                // Java logs it; a single ack is then taken as done (not written), as Java does.
                None => tracing::error!(offset, ck = ?h.ck, batch, "pop buffer: an ack of no message of its check point"),
            }
        }
        true
    }

    /// Java's `getLatestOffset`: the next offset of the queue's last pop still pending.
    pub fn latest_offset(&self, lock_key: &str) -> Option<i64> {
        self.state.lock().offsets.get(lock_key)?.pending.back().map(|p| p.next_begin_offset)
    }

    /// Java's `clearOffsetQueue`: a reset offset forgets the queue's pending offsets.
    pub fn clear_offsets(&self, lock_key: &str) {
        self.state.lock().offsets.remove(lock_key);
    }

    /// (offsets pending, check points held): Java's two buffer gauges.
    pub fn sizes(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.offsets_len(), s.held.len())
    }

    fn is_empty(&self) -> bool {
        let s = self.state.lock();
        s.held.is_empty() && s.offsets.values().all(|q| q.pending.is_empty())
    }

    /// A slave holds nothing (Java clears its buffers while the broker is not a master).
    fn clear(&self) {
        *self.state.lock() = State::default();
    }

    /// One pass (Java's `scan`, and `scanGarbage` when `garbage`): drops what is all acked,
    /// writes what has to be written, commits the offsets now free, in each queue's order.
    pub fn pass(&self, sink: &dyn MergeSink, now_ms: i64, garbage: bool) -> Pass {
        let started = Instant::now();
        let c = self.config.load();
        let (stay, stay_out) = (i64::from(c.pop_ck_stay_buffer_time), i64::from(c.pop_ck_stay_buffer_time_out));
        let serving = self.serving.load(Ordering::Acquire);
        let mut pass = Pass::default();
        // What to write, chosen under the mutex, written without it.
        let mut flush = Vec::new();
        {
            let mut s = self.state.lock();
            let State { by_key, held, .. } = &mut *s;
            held.retain(|&id, h| {
                if h.done() {
                    by_key.remove(&h.merge_key);
                    return false;
                }
                let due = h.just_offset || !serving || h.ck.revive_time().wrapping_sub(now_ms) < stay_out || now_ms.wrapping_sub(h.ck.pop_time) > stay;
                if due && h.state != CkState::Storing {
                    let store_ck = h.state == CkState::NotStored;
                    if store_ck {
                        h.state = CkState::Storing;
                    }
                    flush.push(Flush { id, ck: h.ck.clone(), revive_qid: h.revive_qid, store_ck });
                }
                true
            });
        }
        for f in flush {
            self.flush(sink, f, c.enable_pop_batch_ack, &mut pass);
        }
        {
            let mut s = self.state.lock();
            let State { held, offsets, .. } = &mut *s;
            for q in offsets.values_mut() {
                while let Some(p) = q.pending.front() {
                    if p.held.and_then(|id| held.get(&id)).is_some_and(|h| !h.done()) {
                        break;
                    }
                    if p.next_begin_offset >= 0 && !sink.commit_offset(&q.topic, &q.group, q.queue_id, p.next_begin_offset) {
                        break;
                    }
                    pass.offsets_committed += 1;
                    q.pending.pop_front();
                }
            }
            if garbage {
                offsets.retain(|key, q| {
                    let keep = sink.exists(&q.topic, &q.group) && now_ms.wrapping_sub(q.time) <= IDLE_QUEUE_MS;
                    if !keep {
                        tracing::info!(key, "pop buffer: offsets of a gone or idle queue dropped");
                    }
                    keep
                });
            }
        }
        pass.elapsed_ms = started.elapsed().as_millis() as u64;
        if pass.elapsed_ms as i64 > stay_out - 1000 {
            // Java stops taking new check points until what it holds is written.
            tracing::warn!(elapsed_ms = pass.elapsed_ms, "pop buffer pass too long: holding nothing new until written");
            self.serving.store(false, Ordering::Release);
        }
        pass
    }

    /// Writes a due check point (unless written) and the acks it has that are not.
    fn flush(&self, sink: &dyn MergeSink, f: Flush, batch: bool, pass: &mut Pass) {
        if f.store_ck {
            let stored = sink.put_ck(&f.ck, f.revive_qid);
            if let Some(h) = self.state.lock().held.get_mut(&f.id) {
                h.state = if stored { CkState::Stored } else { CkState::NotStored };
            }
            if !stored {
                tracing::error!(ck = ?f.ck, "pop buffer: the check point could not be written; tried again");
                return;
            }
            pass.cks_written += 1;
        }
        let Some(unwritten) = self.state.lock().held.get(&f.id).map(|h| h.acked & !h.stored_acks & h.mask()) else { return };
        let indexes: Vec<u8> = (0..32u8).filter(|i| unwritten & (1 << i) != 0).collect();
        let mut written = 0u32;
        if batch {
            if !indexes.is_empty() && sink.put_batch_ack(&f.ck, f.revive_qid, &indexes) {
                written = unwritten;
            }
        } else {
            for &i in &indexes {
                if sink.put_ack(&f.ck, f.revive_qid, i) {
                    written |= 1 << i;
                }
            }
        }
        pass.acks_written += written.count_ones() as usize;
        let mut s = self.state.lock();
        let done = s.held.get_mut(&f.id).is_some_and(|h| {
            h.stored_acks |= written;
            h.written()
        });
        if done {
            s.remove(f.id);
        }
    }

    /// Java's `run` loop end: takes nothing new, and writes and commits all it holds.
    fn drain(&self, sink: &dyn MergeSink, now: impl Fn() -> i64) {
        self.serving.store(false, Ordering::Release);
        for _ in 0..FINAL_PASSES {
            if self.is_empty() {
                return;
            }
            self.pass(sink, now(), false);
            std::thread::sleep(SCAN_INTERVAL);
        }
        let (offsets, held) = self.sizes();
        tracing::error!(offsets, held, "pop buffer: stopped with check points or offsets not written");
    }
}

/// The service's thread (Java's `PopBufferMergeService.run`): a pass every 5 ms while the merge is
/// on or anything is held, nothing on a slave; at the stop, what is held is written and committed.
pub fn run(pop: &super::service::PopService, cx: &ServiceContext) {
    let merge = &pop.merge;
    let _ = merge.waker.set(cx.waker());
    let mut passes: u64 = 0;
    let mut wait = SCAN_INTERVAL;
    let is_slave = || pop.store.role() == store::config::BrokerRole::Slave && !pop.config.load().enable_slave_acting_master;
    while cx.wait(wait) {
        if is_slave() {
            merge.clear();
            wait = SLAVE_INTERVAL;
            continue;
        }
        if !pop.config.load().enable_pop_buffer_merge && merge.is_empty() {
            merge.idle.store(true, Ordering::Release);
            // An entry added before the flag was seen is caught by this look.
            if merge.is_empty() {
                wait = IDLE_INTERVAL;
                continue;
            }
        }
        merge.idle.store(false, Ordering::Release);
        wait = SCAN_INTERVAL;
        let pass = merge.pass(pop, super::service::now_ms(), passes.is_multiple_of(GARBAGE_EVERY));
        pop.metrics.on_pop_buffer_pass(pass.elapsed_ms);
        passes += 1;
        if !merge.serving.load(Ordering::Acquire) && merge.is_empty() {
            merge.serving.store(true, Ordering::Release);
        }
    }
    if !is_slave() {
        merge.drain(pop, super::service::now_ms);
    }
}

/// The broker's side: the revive topic through the timer (as the pop's own writes), the
/// consumer offsets under the queue's pop lock (a pop reading the queue defers the commit).
impl MergeSink for super::service::PopService {
    fn put_ck(&self, ck: &PopCheckPoint, revive_qid: i32) -> bool {
        let result = self.put_revive(&ReviveMessage::check_point(ck, &self.revive_topic(), revive_qid), Origin::PopCheckPoint);
        self.metrics.on_revive_put(ck.cid.as_deref().unwrap_or(""), ck.topic.as_deref().unwrap_or(""), ReviveKind::Ck, result.status);
        super::service::stored(&result)
    }

    fn put_ack(&self, ck: &PopCheckPoint, revive_qid: i32, index: u8) -> bool {
        // The index came from the check point's own offsets: it always names a message.
        let Some(ack_offset) = ck.ack_offset_by_index(index) else { return true };
        let ack = AckMsg { ack_offset, ..ack_of_ck(ck) };
        let result = self.put_revive(&ReviveMessage::buffered_ack(&ack, &self.revive_topic(), revive_qid, ck.revive_time()), Origin::PopAck);
        self.metrics.on_revive_put(ck.cid.as_deref().unwrap_or(""), ck.topic.as_deref().unwrap_or(""), ReviveKind::Ack, result.status);
        super::service::stored(&result)
    }

    /// As Java's `putBatchAckToStore`: `ao` 0 and no broker name (the revive service takes its
    /// own), and no count in the revive metrics.
    fn put_batch_ack(&self, ck: &PopCheckPoint, revive_qid: i32, indexes: &[u8]) -> bool {
        let batch = BatchAckMsg {
            ack: AckMsg { ack_offset: 0, broker_name: None, ..ack_of_ck(ck) },
            ack_offset_list: indexes.iter().filter_map(|&i| ck.ack_offset_by_index(i)).collect(),
        };
        let result = self.put_revive(&ReviveMessage::buffered_batch_ack(&batch, &self.revive_topic(), revive_qid, ck.revive_time()), Origin::PopAck);
        super::service::stored(&result)
    }

    fn commit_offset(&self, topic: &str, group: &str, queue_id: i32, offset: i64) -> bool {
        let (Ok(t), Ok(g)) = (TopicName::new(topic), GroupName::new(group)) else { return true };
        let Some(_lock) = self.locks.try_lock(lock_key(topic, group, queue_id)) else { return false };
        self.offsets.commit_offset("PopBufferMergeService", &g, &t, queue_id, offset);
        true
    }

    fn exists(&self, topic: &str, group: &str) -> bool {
        self.topics.contains(topic) && self.groups.select(group).is_some()
    }
}

/// The fields an ack of `ck` shares with it.
fn ack_of_ck(ck: &PopCheckPoint) -> AckMsg {
    AckMsg {
        ack_offset: 0,
        start_offset: ck.start_offset,
        consumer_group: ck.cid.clone(),
        topic: ck.topic.clone(),
        queue_id: ck.queue_id,
        pop_time: ck.pop_time,
        broker_name: ck.broker_name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::sync::Arc;

    use super::*;
    use crate::config::BrokerConfig;

    /// Records what the service writes and commits.
    #[derive(Default)]
    struct Sink {
        cks: RefCell<Vec<i64>>,
        acks: RefCell<Vec<(i64, u8)>>,
        batches: RefCell<Vec<Vec<u8>>>,
        commits: RefCell<Vec<i64>>,
        fail_ck: RefCell<bool>,
        busy: RefCell<bool>,
    }

    impl MergeSink for Sink {
        fn put_ck(&self, ck: &PopCheckPoint, _: i32) -> bool {
            if *self.fail_ck.borrow() {
                return false;
            }
            self.cks.borrow_mut().push(ck.start_offset);
            true
        }
        fn put_ack(&self, ck: &PopCheckPoint, _: i32, index: u8) -> bool {
            self.acks.borrow_mut().push((ck.start_offset, index));
            true
        }
        fn put_batch_ack(&self, _: &PopCheckPoint, _: i32, indexes: &[u8]) -> bool {
            self.batches.borrow_mut().push(indexes.to_vec());
            true
        }
        fn commit_offset(&self, _: &str, _: &str, _: i32, offset: i64) -> bool {
            if *self.busy.borrow() {
                return false;
            }
            self.commits.borrow_mut().push(offset);
            true
        }
        fn exists(&self, _: &str, _: &str) -> bool {
            true
        }
    }

    fn merge(edit: impl FnOnce(&mut BrokerConfig)) -> BufferMerge {
        let mut c = BrokerConfig { enable_pop_buffer_merge: true, ..BrokerConfig::default() };
        edit(&mut c);
        BufferMerge::new(Arc::new(arc_swap::ArcSwap::from_pointee(c)))
    }

    const T0: i64 = 1_000_000;

    fn ck(start: i64, num: i8, invisible: i64) -> PopCheckPoint {
        let mut ck = PopCheckPoint {
            start_offset: start,
            pop_time: T0,
            invisible_time: invisible,
            num,
            queue_id: 0,
            topic: Some("T".into()),
            cid: Some("G".into()),
            broker_name: Some("b".into()),
            ..PopCheckPoint::default()
        };
        for i in 0..num {
            ck.add_diff(i32::from(i));
        }
        ck
    }

    fn ack_of(ck: &PopCheckPoint, offset: i64) -> AckMsg {
        AckMsg {
            ack_offset: offset,
            start_offset: ck.start_offset,
            consumer_group: ck.cid.clone(),
            topic: ck.topic.clone(),
            queue_id: ck.queue_id,
            pop_time: ck.pop_time,
            broker_name: ck.broker_name.clone(),
        }
    }

    #[test]
    fn a_check_point_acked_in_time_is_never_written_and_its_offset_is_committed() {
        let m = merge(|_| {});
        let sink = Sink::default();
        let c = ck(10, 2, 30_000);
        assert!(m.add_ck(&c, 0, 12, T0));
        assert_eq!(m.latest_offset(&lock_key("T", "G", 0)), Some(12));
        assert_eq!(m.sizes(), (1, 1));
        m.pass(&sink, T0 + 5, false);
        assert!(sink.commits.borrow().is_empty(), "not committed while held and not acked");
        assert!(m.add_ack(&ack_of(&c, 10), &[10], false, T0 + 100));
        assert!(m.add_ack(&ack_of(&c, 11), &[11], false, T0 + 200));
        m.pass(&sink, T0 + 300, false);
        assert!(sink.cks.borrow().is_empty() && sink.acks.borrow().is_empty());
        assert_eq!(*sink.commits.borrow(), [12]);
        assert_eq!(m.sizes(), (0, 0));
        assert!(!m.add_ack(&ack_of(&c, 10), &[10], false, T0 + 400), "no longer held: the caller writes it");
    }

    #[test]
    fn a_check_point_not_acked_in_time_is_written_with_its_acks_then_committed() {
        let m = merge(|_| {});
        let sink = Sink::default();
        let first = ck(10, 3, 60_000);
        let second = ck(13, 1, 60_000);
        assert!(m.add_ck(&first, 0, 13, T0));
        assert!(m.add_ck(&PopCheckPoint { pop_time: T0 + 1, ..second.clone() }, 0, 14, T0 + 1));
        assert!(!m.add_ck(&PopCheckPoint { pop_time: T0 + 1, ..second }, 0, 14, T0 + 1), "same key held");
        assert!(m.add_ack(&ack_of(&first, 11), &[11], false, T0 + 10));
        // Within the stay time: nothing written, nothing committed.
        m.pass(&sink, T0 + 9_000, false);
        assert!(sink.cks.borrow().is_empty() && sink.commits.borrow().is_empty());
        // Past it: both written, the first with its one ack, offsets committed in order.
        m.pass(&sink, T0 + 10_100, false);
        let mut cks = sink.cks.borrow().clone();
        cks.sort_unstable();
        assert_eq!(cks, [10, 13], "written in no particular order, as Java's map");
        assert_eq!(*sink.acks.borrow(), [(10, 1)]);
        assert_eq!(*sink.commits.borrow(), [13, 14]);
        assert_eq!(m.sizes(), (0, 0));
    }

    #[test]
    fn offsets_wait_in_order_for_a_check_point_not_written() {
        let m = merge(|_| {});
        let sink = Sink::default();
        assert!(m.add_ck(&ck(10, 1, 60_000), 0, 11, T0));
        m.add_stored("T", "G", 0, T0, 15);
        *sink.fail_ck.borrow_mut() = true;
        m.pass(&sink, T0 + 20_000, false);
        assert!(sink.commits.borrow().is_empty(), "nothing past a check point not stored");
        assert_eq!(m.latest_offset(&lock_key("T", "G", 0)), Some(15));
        *sink.fail_ck.borrow_mut() = false;
        *sink.busy.borrow_mut() = true;
        m.pass(&sink, T0 + 20_005, false);
        assert!(sink.commits.borrow().is_empty(), "the queue is busy: next pass");
        *sink.busy.borrow_mut() = false;
        m.pass(&sink, T0 + 20_010, false);
        assert_eq!(*sink.commits.borrow(), [11, 15]);
    }

    #[test]
    fn the_bounds_and_the_margins_send_the_pop_to_write_itself() {
        let m = merge(|c| {
            c.pop_ck_max_buffer_size = 1;
            c.pop_ck_offset_max_queue_size = 3;
        });
        assert!(!m.add_ck(&ck(0, 1, 4_000), 0, 1, T0), "due within stayBufferTimeOut + 1.5 s");
        assert!(m.add_ck(&ck(0, 1, 60_000), 0, 1, T0));
        assert!(m.add_ck(&ck(1, 1, 60_000), 0, 2, T0));
        assert!(!m.add_ck(&ck(2, 1, 60_000), 0, 3, T0), "more than popCkMaxBufferSize held");
        let m = merge(|c| c.pop_ck_offset_max_queue_size = 2);
        assert!(m.add_ck(&ck(0, 1, 60_000), 0, 1, T0));
        m.add_stored("T", "G", 0, T0, 2);
        assert!(!m.add_ck(&ck(2, 1, 60_000), 0, 3, T0), "the queue's offsets are full");
        let c = ck(0, 1, 60_000);
        assert!(!m.add_ack(&ack_of(&c, 0), &[0], false, T0 + 8_600), "past the stay time less 1.5 s");
        let off = merge(|c| c.enable_pop_buffer_merge = false);
        assert!(!off.add_ck(&ck(0, 1, 60_000), 0, 1, T0));
    }

    #[test]
    fn a_batch_ack_marks_its_bits_and_a_stopping_buffer_writes_all_as_one_batch() {
        let m = merge(|c| c.enable_pop_batch_ack = true);
        let sink = Sink::default();
        let c = ck(0, 4, 60_000);
        assert!(m.add_ck(&c, 0, 4, T0));
        assert!(m.add_ack(&ack_of(&c, -1), &[0, 2], true, T0 + 10));
        m.drain(&sink, || T0 + 20);
        assert_eq!(*sink.cks.borrow(), [0]);
        assert_eq!(*sink.batches.borrow(), [vec![0u8, 2]]);
        assert_eq!(*sink.commits.borrow(), [4]);
        assert!(!m.add_ck(&ck(4, 1, 60_000), 0, 5, T0 + 30), "stopped: takes nothing new");
    }

    #[test]
    fn a_check_point_its_pop_writes_holds_its_offset_until_the_put_settles() {
        let m = merge(|c| c.enable_pop_buffer_merge = false);
        let sink = Sink::default();
        let c = ck(10, 2, 60_000);
        let Storing::Added(id) = m.add_storing(&c, 0, 12) else { panic!("not added") };
        assert_eq!(m.add_storing(&c, 0, 12), Storing::Conflict, "the same check point in flight");
        assert_eq!(m.latest_offset(&lock_key("T", "G", 0)), Some(12), "the next pop reads past it at once");
        m.add_stored("T", "G", 0, T0, 15);
        m.pass(&sink, T0 + 5, false);
        assert!(sink.commits.borrow().is_empty() && sink.cks.borrow().is_empty(), "in flight: neither written again nor committed");
        assert!(!m.add_ack(&ack_of(&c, 10), &[10], false, T0 + 6), "its acks are written by the caller");
        assert!(!m.withdraw_failed(id), "in flight: not withdrawn");
        m.settle(id, true);
        m.pass(&sink, T0 + 10, false);
        assert!(sink.cks.borrow().is_empty());
        assert_eq!(*sink.commits.borrow(), [12, 15]);
        assert_eq!(m.sizes(), (0, 0));
    }

    #[test]
    fn a_put_refused_at_once_is_withdrawn_and_one_failed_later_is_written_again() {
        let m = merge(|c| c.enable_pop_buffer_merge = false);
        let sink = Sink::default();
        let Storing::Added(id) = m.add_storing(&ck(10, 1, 60_000), 0, 11) else { panic!("not added") };
        m.settle(id, false);
        assert!(m.withdraw_failed(id));
        assert_eq!((m.latest_offset(&lock_key("T", "G", 0)), m.sizes()), (None, (0, 0)), "as if never popped");
        let Storing::Added(id) = m.add_storing(&ck(10, 1, 60_000), 0, 11) else { panic!("not added") };
        m.add_stored("T", "G", 0, T0, 13);
        m.settle(id, false);
        m.pass(&sink, T0 + 5, false);
        assert_eq!(*sink.cks.borrow(), [10], "written again by the pass");
        m.pass(&sink, T0 + 10, false);
        assert_eq!(*sink.commits.borrow(), [11, 13]);
        assert_eq!(m.sizes(), (0, 0));
        let full = merge(|c| c.pop_ck_max_buffer_size = 1);
        assert!(matches!(full.add_storing(&ck(0, 1, 60_000), 0, 1), Storing::Added(_)));
        assert_eq!(full.add_storing(&ck(1, 1, 60_000), 0, 2), Storing::Full, "bounded as the buffer");
    }
}
