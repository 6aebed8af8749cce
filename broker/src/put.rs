//! The put pipeline: every message the broker stores goes through [`PutPipeline`].
//!
//! - **What is put** ([`Origin`]): a producer's send or batch (a prepared message already turned
//!   into its half), a consumer's send-back (retry or DLQ), a reply, a due delayed message, a
//!   committed transaction, a half message put back for its next check, a transaction op record.
//!   The rewrites Java applies before storing are made here, by origin ([`PutPipeline::rewrite`]):
//!   a prepared send becomes its half message, a send or send-back with a delay level goes to the
//!   schedule topic (Java's commit-log hook).
//! - **How long it waits** ([`Wait`]): decided in one place from the store (SYNC_FLUSH, the
//!   role, a DLedger commit log), the origin (a reply never waits for slaves) and the message
//!   (`WAIT=false`). A put that waits is answered by the service that learns the result (the
//!   flush service, the HA service of a SYNC_MASTER, the DLedger quorum) through the request's
//!   [`Reply`], so no pool thread is held.
//! - **What is counted** ([`PutObserver`]): once per put, from the store's result, into
//!   `StoreStats` (runtime info), `BrokerStatsManager` (VIEW_BROKER_STATS_DATA, `statsAll`) and
//!   `BrokerMetrics` (Prometheus), with each origin counted as Java 5.3.3 counts it. No caller
//!   records a counter of its own.
//!
//! The pipeline holds narrow handles (the store, the replication waiter, the observer), so a test
//! builds it over a store in a temporary directory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use remoting::server::Reply;
use remoting::RemotingCommand;
use store::commit_log::{PutMessageResult, PutStatus};
use store::config::{BrokerRole, FlushDiskType};
use store::message::record::{SYSFLAG_TRANSACTION_MASK, TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE};
use store::message::{properties, MessageToStore};
use store::store::MessageStore;
use store::timer::{PutOutcome, TimerSink, TimerStore};

use crate::metrics::BrokerMetrics;
use crate::stats::StoreStats;
use crate::stats_manager::BrokerStatsManager;
use crate::topic_config::system_topic;
pub use ha::tracker::Outcome;

/// Where a put comes from: what it waits for and what it counts depend on it.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    /// A producer's SEND_MESSAGE(_V2) or SEND_BATCH_MESSAGE; `message_type` is its metrics label,
    /// `half_for` the real topic of a prepared message (stored as its half).
    Send { message_type: &'static str, half_for: Option<String>, batch: bool },
    /// A replier's SEND_REPLY_MESSAGE(_V2), stored in the reply topic.
    Reply { message_type: &'static str },
    /// CONSUMER_SEND_MSG_BACK: `group` failed a message first sent to `back_topic`.
    SendBack { group: String, back_topic: String },
    /// A due delayed message put back into its real topic by the schedule service.
    DelayedDelivery,
    /// A committed transaction's message put into its real topic; `born_ms` when the producer made it.
    Commit { born_ms: i64 },
    /// A half message put back for its next check.
    HalfPutBack,
    /// An op record marking a half message done.
    TransactionOp,
    /// RECALL_MESSAGE's delete marker, admitted into the timer like a timer message.
    Recall,
    /// A timer message the store's timer released into its real topic, or (`rolled`) put back
    /// into the timer topic for its next turn.
    TimerRelease { rolled: bool },
    /// Pop's check point of the messages a pop handed out (revive topic, through the timer).
    PopCheckPoint,
    /// Pop's ack record (revive topic, through the timer).
    PopAck,
    /// A popped message not acked in time, put into its group's pop retry topic.
    PopRevive,
}

impl Origin {
    /// Whether a SYNC_MASTER's put waits for its slaves. Java's reply ignores a slave timeout or
    /// absence (the reply counts as stored), so waiting could only delay the same answer.
    fn waits_for_slaves(&self) -> bool {
        matches!(self, Origin::Send { .. } | Origin::SendBack { .. })
    }
}

/// How long a put waits before it is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Answered once appended (ASYNC_FLUSH, `WAIT=false`, or a slave-less origin on a master).
    Appended,
    /// Answered once flushed (SYNC_FLUSH) or, on a DLedger commit log, once the group's quorum
    /// holds it (whatever the message asks, as Java's `DLedgerCommitLog`).
    Stored,
    /// Answered once flushed as the flush type asks, then once the slaves hold it (SYNC_MASTER).
    Replicated,
}

/// Waits for a SYNC_MASTER's slaves (the HA service's [`ha::master::Replication`]).
pub trait ReplicaWaiter: Send + Sync {
    /// Calls `done` exactly once with what the slaves did about the bytes before `end`.
    fn wait(&self, end: i64, done: Box<dyn FnOnce(Outcome) + Send>);
}

impl ReplicaWaiter for ha::master::Replication {
    fn wait(&self, end: i64, done: Box<dyn FnOnce(Outcome) + Send>) {
        ha::master::Replication::wait(self, end, done);
    }
}

/// Where an answer made later goes: the request's [`Reply`] (a test may collect it instead).
pub trait Answer: Send + 'static {
    fn send(self, response: RemotingCommand);
}

impl Answer for Reply {
    fn send(self, response: RemotingCommand) {
        Reply::send(self, response);
    }
}

/// Feeds the store stats, the stats manager and the metrics from one event per put.
pub struct PutObserver {
    pub stats: Arc<StoreStats>,
    pub broker_stats: Arc<BrokerStatsManager>,
    pub metrics: Arc<BrokerMetrics>,
}

/// Java's `MixAll.SCHEDULE_CONSUMER_GROUP`: the group a delivered delayed message is counted as
/// read by, out of the schedule topic.
pub const SCHEDULE_CONSUMER_GROUP: &str = "SCHEDULE_CONSUMER";

impl PutObserver {
    /// One put of `messages` into `topic` (the topic stored into: the half, schedule, retry or
    /// DLQ topic when the pipeline rewrote it), from the request to the store's result.
    ///
    /// As Java: the store counts every put (its `StoreStatsService`); the stats manager and the
    /// metrics count by origin: sends and replies once stored (a flush timeout is stored), a
    /// delayed delivery under its real topic and as read from the schedule topic, a send-back as
    /// sent back (and under the schedule topic when it waits there), a commit and a half put back
    /// under their topics; op records are not counted. (Java can turn the delayed-delivery counts
    /// off with `enableScheduleMessageStats`, on by default; this broker has no such key.)
    pub fn on_put(&self, origin: &Origin, topic: &str, messages: usize, result: &PutMessageResult, elapsed: Duration) {
        let bytes = result.append.as_ref().map_or(0, |a| a.wrote_bytes);
        self.stats.on_put_done(elapsed, bytes, result.is_ok());
        if result.is_ok() {
            self.stats.on_put(messages);
        }
        let put_ok = result.is_ok() && result.append.is_some();
        let stored = put_ok || (result.status == PutStatus::FlushDiskTimeout && result.append.is_some());
        match origin {
            Origin::Send { message_type, half_for, .. } if stored => {
                self.broker_stats.on_put(topic, messages, bytes);
                self.metrics.on_put(topic, message_type, messages, bytes);
                if let Some(real_topic) = half_for {
                    self.metrics.on_half(real_topic);
                }
            }
            Origin::Reply { message_type } if stored => {
                self.broker_stats.on_put(topic, messages, bytes);
                self.metrics.on_put(topic, message_type, messages, bytes);
            }
            Origin::SendBack { group, back_topic } if put_ok => {
                if topic == system_topic::SCHEDULE {
                    self.broker_stats.on_topic_put(topic, messages, bytes);
                }
                self.broker_stats.on_send_back(group, back_topic);
            }
            Origin::DelayedDelivery if put_ok => {
                self.broker_stats.on_group_get(SCHEDULE_CONSUMER_GROUP, system_topic::SCHEDULE, messages, bytes);
                self.broker_stats.on_put(topic, messages, bytes);
                self.metrics.on_delayed_delivery(topic, bytes);
            }
            Origin::Commit { born_ms } if put_ok => {
                self.broker_stats.on_put(topic, messages, bytes);
                self.metrics.on_commit(topic, *born_ms);
            }
            Origin::HalfPutBack if put_ok => self.broker_stats.on_put(topic, messages, bytes),
            // Java's timer `doPut`: the topic's put counts and size, the broker's puts.
            Origin::TimerRelease { .. } | Origin::Recall if put_ok => self.broker_stats.on_put(topic, messages, bytes),
            // Java's `reviveRetry`: the retry topic's put counts and size.
            Origin::PopRevive if put_ok => self.broker_stats.on_put(topic, messages, bytes),
            _ => {}
        }
    }
}

/// What the rewrite made of a put that its answer may need: for a single message admitted into the
/// timer, its real topic, due time and unique key (a 5.3.x send answers with a recall handle).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rewritten {
    pub timer: Option<TimerAdmitted>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerAdmitted {
    pub real_topic: String,
    pub out_ms: i64,
    pub uniq_key: Option<String>,
}

impl Rewritten {
    fn of(msgs: &[MessageToStore]) -> Rewritten {
        let [msg] = msgs else { return Rewritten::default() };
        if msg.topic != store::timer::TIMER_TOPIC {
            return Rewritten::default();
        }
        let p = &msg.properties;
        let timer = properties::get(p, properties::REAL_TOPIC).zip(properties::get(p, properties::TIMER_OUT_MS).and_then(|t| t.parse().ok())).map(
            |(real_topic, out_ms)| TimerAdmitted {
                real_topic: real_topic.to_owned(),
                out_ms,
                uniq_key: properties::get(p, properties::UNIQ_KEY).map(str::to_owned),
            },
        );
        Rewritten { timer }
    }
}

/// The one way into the store.
pub struct PutPipeline {
    store: Arc<MessageStore>,
    /// The 5.x timer (admission asks it for flow control); none with `timerWheelEnable=false`.
    timer: std::sync::OnceLock<Arc<TimerStore>>,
    /// A master's slaves (none on a slave, in DLedger mode, or without an HA service).
    replicas: Option<Arc<dyn ReplicaWaiter>>,
    observer: Arc<PutObserver>,
}

impl PutPipeline {
    pub fn new(store: Arc<MessageStore>, replicas: Option<Arc<dyn ReplicaWaiter>>, observer: Arc<PutObserver>) -> PutPipeline {
        PutPipeline { store, timer: std::sync::OnceLock::new(), replicas, observer }
    }

    /// Gives admission the timer (once, before the broker serves).
    pub fn set_timer(&self, timer: Arc<TimerStore>) {
        let _ = self.timer.set(timer);
    }

    pub fn observer(&self) -> &Arc<PutObserver> {
        &self.observer
    }

    /// What Java does to a message before storing it, by origin (5.3.3's put hooks): a prepared
    /// send (not a batch) becomes its half message; any other single send with timer properties
    /// goes to the timer topic ([`crate::timer::admit`], which may refuse it), and a send-back's
    /// and a committed transaction's likewise; those with a positive `DELAY` go to the schedule
    /// topic, levels above the highest clamped to it. Recall markers and pop's records go through
    /// the timer only. A batch, a reply and the broker's other puts are stored as they are.
    pub fn rewrite(&self, origin: &Origin, msgs: &mut [MessageToStore]) -> Result<(), PutMessageResult> {
        let levels = self.store.config().delay_levels_ms().len();
        for msg in msgs {
            match origin {
                Origin::Send { batch: false, half_for: Some(_), .. } => to_half(msg),
                Origin::Send { batch: false, half_for: None, .. } | Origin::SendBack { .. } | Origin::Commit { .. } => {
                    self.admit_timer(msg)?;
                    apply_delay(msg, levels);
                }
                Origin::Recall | Origin::PopCheckPoint | Origin::PopAck | Origin::PopRevive => self.admit_timer(msg)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn admit_timer(&self, msg: &mut MessageToStore) -> Result<(), PutMessageResult> {
        crate::timer::admit(msg, self.store.config(), self.timer.get().map(Arc::as_ref), remoting::clock::now_ms())
    }

    /// What a put of `msgs` from `origin` waits for.
    pub fn wait_for(&self, origin: &Origin, msgs: &[MessageToStore]) -> Wait {
        // Java's `isWaitStoreMsgOK`: unless the first message says WAIT=false.
        let asks = msgs.first().is_none_or(|m| properties::get(&m.properties, properties::WAIT) != Some("false"));
        let dledger = self.store.is_dledger();
        if !dledger && asks && origin.waits_for_slaves() && self.store.role() == BrokerRole::SyncMaster {
            Wait::Replicated
        } else if dledger || (asks && self.store.config().flush_disk_type == FlushDiskType::SyncFlush) {
            Wait::Stored
        } else {
            Wait::Appended
        }
    }

    /// Rewrites `msgs` as their origin asks ([`PutPipeline::rewrite`]), stores them and answers
    /// with `respond(result, what the slaves did)`: returned at once when nothing is waited for,
    /// else sent later through `answer` by the service that learns the result, so the caller's
    /// thread is free for the next request and one flush covers many.
    pub fn put_and_answer<A: Answer>(
        &self,
        mut msgs: Vec<MessageToStore>,
        origin: Origin,
        answer: A,
        respond: impl FnOnce(PutMessageResult, Option<Outcome>, Rewritten) -> RemotingCommand + Send + 'static,
    ) -> Option<RemotingCommand> {
        if let Err(refused) = self.rewrite(&origin, &mut msgs) {
            return Some(respond(refused, None, Rewritten::default()));
        }
        let rewritten = Rewritten::of(&msgs);
        let respond = move |result, outcome| respond(result, outcome, rewritten);
        let msgs = msgs.as_slice();
        let started = Instant::now();
        let (topic, count) = (msgs.first().map(|m| m.topic.clone()).unwrap_or_default(), msgs.len());
        let wait = self.wait_for(&origin, msgs);
        let observer = self.observer.clone();
        let observe = move |result: &PutMessageResult| observer.on_put(&origin, &topic, count, result, started.elapsed());
        if wait == Wait::Appended {
            let result = self.store.put_messages(msgs);
            observe(&result);
            return Some(respond(result, None));
        }
        let replicas = if wait == Wait::Replicated { Some(self.replicas.clone()) } else { None };
        self.store.put_messages_then(
            msgs,
            Box::new(move |result| {
                let end = result.append.as_ref().map(|a| a.wrote_offset + a.wrote_bytes as i64);
                match (replicas, end) {
                    (Some(Some(replicas)), Some(end)) if result.is_ok() => replicas.wait(
                        end,
                        Box::new(move |outcome| {
                            observe(&result);
                            answer.send(respond(result, Some(outcome)));
                        }),
                    ),
                    (Some(None), Some(_)) if result.is_ok() => {
                        observe(&result);
                        answer.send(respond(result, Some(Outcome::SlaveNotAvailable)));
                    }
                    _ => {
                        observe(&result);
                        answer.send(respond(result, None));
                    }
                }
            }),
        );
        None
    }

    /// Stores `msgs` and hands the result to `done` once the put waited as [`PutPipeline::wait_for`]
    /// says, without the slaves (for origins that do not wait for them).
    pub fn put_then(&self, msgs: &[MessageToStore], origin: Origin, done: impl FnOnce(PutMessageResult) + Send + 'static) {
        let started = Instant::now();
        let (topic, count) = (msgs.first().map(|m| m.topic.clone()).unwrap_or_default(), msgs.len());
        let observer = self.observer.clone();
        self.store.put_messages_then(
            msgs,
            Box::new(move |result| {
                observer.on_put(&origin, &topic, count, &result, started.elapsed());
                done(result);
            }),
        );
    }

    /// Stores one message answered once appended, whatever the flush policy (the timer's
    /// releases, as Java's timer puts with `waitStoreMsgOK=false`).
    pub fn put_no_wait(&self, msg: &MessageToStore, origin: Origin) -> PutMessageResult {
        let started = Instant::now();
        let result = self.store.put_message_no_wait(msg);
        self.observer.on_put(&origin, &msg.topic, 1, &result, started.elapsed());
        result
    }

    /// As [`PutPipeline::put_no_wait`], the result handed to `done` (in DLedger mode once the
    /// quorum holds it, from the member's thread).
    pub fn put_no_wait_then(&self, msg: &MessageToStore, origin: Origin, done: Box<dyn FnOnce(&PutMessageResult) + Send>) {
        let started = Instant::now();
        let observer = self.observer.clone();
        let topic = msg.topic.clone();
        self.store.put_message_no_wait_then(
            msg,
            Box::new(move |result| {
                observer.on_put(&origin, &topic, 1, &result, started.elapsed());
                done(&result);
            }),
        );
    }

    /// Stores one message from a broker service after its origin's rewrite ([`PutPipeline::rewrite`]:
    /// a committed transaction's timer or delay, pop's records through the timer), as Java's
    /// services put through the store's hooks; the store waits as the message's `WAIT` says.
    pub fn put_rewritten(&self, mut msg: MessageToStore, origin: Origin) -> PutMessageResult {
        if let Err(refused) = self.rewrite(&origin, std::slice::from_mut(&mut msg)) {
            return refused;
        }
        self.put(&msg, origin)
    }

    /// As [`PutPipeline::put_rewritten`], answered through `done` ([`PutPipeline::put_then`]).
    pub fn put_rewritten_then(&self, mut msg: MessageToStore, origin: Origin, done: impl FnOnce(PutMessageResult) + Send + 'static) {
        if let Err(refused) = self.rewrite(&origin, std::slice::from_mut(&mut msg)) {
            return done(refused);
        }
        self.put_then(std::slice::from_ref(&msg), origin, done)
    }

    /// Stores one message from a broker service (delayed delivery, transactions) on the calling
    /// thread; the store waits as the message's `WAIT` says (the services store with WAIT=false).
    pub fn put(&self, msg: &MessageToStore, origin: Origin) -> PutMessageResult {
        let started = Instant::now();
        let result = self.store.put_message(msg);
        self.observer.on_put(&origin, &msg.topic, 1, &result, started.elapsed());
        result
    }
}

/// The timer's releases go through the put pipeline, as Java's timer puts through its store.
pub struct TimerReleases(pub Arc<PutPipeline>);

impl TimerSink for TimerReleases {
    fn put(&self, msg: &MessageToStore, rolled: bool) -> PutOutcome {
        release_outcome(&self.0.put_no_wait(msg, Origin::TimerRelease { rolled }))
    }

    fn put_then(&self, msg: &MessageToStore, rolled: bool, done: Box<dyn FnOnce(PutOutcome) + Send>) {
        self.0.put_no_wait_then(msg, Origin::TimerRelease { rolled }, Box::new(move |result| done(release_outcome(result))));
    }
}

/// What a release's put came to, for the timer: refusals for good are dropped, the rest retried.
fn release_outcome(result: &PutMessageResult) -> PutOutcome {
    match result.status {
        PutStatus::PutOk => PutOutcome::Ok,
        PutStatus::MessageIllegal
        | PutStatus::PropertiesSizeExceeded
        | PutStatus::WheelTimerNotEnable
        | PutStatus::WheelTimerMsgIllegal
        | PutStatus::WheelTimerFlowControl => PutOutcome::Drop,
        PutStatus::ServiceNotAvailable
        | PutStatus::FlushDiskTimeout
        | PutStatus::OsPageCacheBusy
        | PutStatus::CreateMappedFileFailed
        | PutStatus::UnknownError => PutOutcome::Retry,
    }
}

/// Turns a prepared message into its half message (Java `parseHalfMessageInner`): stored in the
/// half topic's queue 0, its real topic and queue in properties, its transaction flag cleared.
fn to_half(msg: &mut MessageToStore) {
    let mut props = properties::parse(&msg.properties);
    props.insert(properties::REAL_TOPIC.to_owned(), msg.topic.clone());
    props.insert(properties::REAL_QID.to_owned(), msg.queue_id.to_string());
    msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    msg.sys_flag = (msg.sys_flag & !SYSFLAG_TRANSACTION_MASK) | TRANSACTION_NOT_TYPE;
    msg.topic = system_topic::TRANS_HALF.to_owned();
    msg.queue_id = 0;
}

/// Rewrites a message with a positive `DELAY` into the schedule topic, as Java's commit log does
/// before storing: queue `level - 1`, its real topic and queue in properties. Levels above the
/// highest clamp to it; a prepared or rolled-back message is not delayed.
fn apply_delay(msg: &mut MessageToStore, max_level: usize) {
    let tx = msg.sys_flag & SYSFLAG_TRANSACTION_MASK;
    if tx != TRANSACTION_NOT_TYPE && tx != TRANSACTION_COMMIT_TYPE {
        return;
    }
    let Some(level) = properties::get(&msg.properties, properties::DELAY).and_then(|d| d.trim().parse::<usize>().ok()) else { return };
    if level == 0 || max_level == 0 {
        return;
    }
    let level = level.min(max_level);
    let mut props = properties::parse(&msg.properties);
    props.insert(properties::DELAY.to_owned(), level.to_string());
    props.insert(properties::REAL_TOPIC.to_owned(), msg.topic.clone());
    props.insert(properties::REAL_QID.to_owned(), msg.queue_id.to_string());
    msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    msg.topic = system_topic::SCHEDULE.to_owned();
    msg.queue_id = (level - 1) as i32;
}

#[cfg(test)]
#[path = "put_tests.rs"]
mod tests;
