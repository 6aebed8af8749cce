//! Pop consumption as Java 5.3.3 serves it without the KV service (off by default): POP_MESSAGE (`PopMessageProcessor`), ACK_MESSAGE (`AckMessageProcessor`) and
//! CHANGE_MESSAGE_INVISIBLETIME (`ChangeInvisibleTimeProcessor`).
//!
//! A pop hands out messages and writes a check point (`ck`) into the revive topic as a timer
//! message due one second before the messages' invisible time ends; an ack writes an `ack` record
//! due when it ends. The revive service ([`super::revive`]) reads both as the timer releases them
//! and puts every message whose check point found no ack into the group's pop retry topic. All
//! of it is in the commit log, so a restart, a failover or Java's broker on the same store
//! continues it. An orderly pop keeps its state in [`OrderInfoManager`] instead and commits the
//! queue's offset as messages are acked.
//!
//! A pop hands its messages out without waiting for its check point's put: the put's answer
//! comes back through [`BufferMerge`], which commits the queue's offset in order once it is
//! stored. With `enablePopBufferMerge=true` check points, acks and offset commits go through it
//! too (see [`super::merge`]): a check point acked in time is never written.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use parking_lot::Mutex;
use remoting::header::HeaderError;
use remoting::protocol::heartbeat::SubscriptionData;
use remoting::protocol::name::{GroupName, TopicName};
use remoting::protocol::perm;
use remoting::protocol::topic::TopicConfig;
use remoting::server::{Channel, Reply};
use remoting::{RemotingCommand, ResponseCode};
use store::commit_log::PutMessageResult;
use store::message::record::{decode_record, encode_record, RecordAt, StampedFields};
use store::message::{java_string_hash, properties, MessageToStore};
use store::store::{GetMessageResult, GetMessageStatus, MessageStore};

use crate::broker::FAQ_SUFFIX;
use crate::config::LiveConfig;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::metrics::pop::ReviveKind;
use crate::parking::{Parked, ParkingLot, QueueKey};
use crate::pop::extra_info::RetryMarker;
use crate::pop::extra_info::{append_msg_offset_info, append_start_offset_info, ExtraInfo, ExtraInfoFields};
use crate::pop::formats::{AckMsg, BatchAckMsg, BatchAckRequestBody, PopCheckPoint, ReviveMessage};
use crate::pop::headers::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader, PopMessageRequestHeader, PopMessageResponseHeader,
};
use crate::pop::names::{self, POP_ORDER_REVIVE_QUEUE};
use crate::popping::merge::{BufferMerge, Storing};
use crate::popping::order::OrderInfoManager;
use crate::put::{Origin, PutPipeline};
use crate::stats_manager::BrokerStatsManager;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

/// Java's `maxMsgNums` bound for one pop.
const MAX_POP_NUMS: i32 = 32;
/// Java's `PopAckConstants.retryQueueNum`: a pop retry topic has one queue.
const RETRY_QUEUE_NUM: i32 = 1;
/// The longest a pop is parked, whatever it asks.
const MAX_POLL: Duration = Duration::from_secs(120);
/// Java's `ConsumeInitMode.MIN` (`MAX` is 1): a group without an offset starts at the queue's
/// first message.
const CONSUME_INIT_MODE_MIN: i32 = 0;
/// Java's `MessageConst.PROPERTY_FIRST_POP_TIME`.
pub const FIRST_POP_TIME: &str = "1ST_POP_TIME";

/// A pop parked until a message arrives for its topic or its poll time ends.
pub struct ParkedPop {
    pub request: RemotingCommand,
    pub channel: Channel,
    pub deadline: Instant,
    pub parked_at: Instant,
}

impl Parked for ParkedPop {
    fn channel(&self) -> &Channel {
        &self.channel
    }

    fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Any arrival wakes a pop (it runs again and looks); the periodic check, which knows no
    /// arrival (`None`), wakes it only at its deadline.
    fn satisfied_by(&self, _max_offset: i64, tags_code: Option<i64>) -> bool {
        tags_code.is_some()
    }

    /// The request as its frame's length (its expression is in its header).
    fn size_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + remoting::codec::frame_size_estimate(&self.request)
    }
}

pub type PopParking = ParkingLot<ParkedPop>;

/// Held while one pop reads a queue for a group (Java's `QueueLockManager`): another pop of the
/// same queue and group skips it instead of handing out the same messages.
#[derive(Default)]
pub struct QueueLocks(Mutex<HashSet<String>>);

pub struct QueueLock<'a> {
    locks: &'a QueueLocks,
    key: String,
}

impl QueueLocks {
    /// The lock of `key`, or `None` while another holds it. The set's mutex is released before a
    /// lock is made: a `QueueLock` dropped under it would take it again (and free the key of the
    /// holder).
    pub fn try_lock(&self, key: String) -> Option<QueueLock<'_>> {
        let inserted = self.0.lock().insert(key.clone());
        inserted.then(|| QueueLock { locks: self, key })
    }
}

impl QueueLocks {
    /// Waits for the lock, as Java's orderly ack and change of invisible time spin on it (a pop
    /// holds it only while it reads the queue).
    pub fn lock(&self, key: String) -> QueueLock<'_> {
        loop {
            if let Some(lock) = self.try_lock(key.clone()) {
                return lock;
            }
            std::thread::yield_now();
        }
    }
}

impl Drop for QueueLock<'_> {
    fn drop(&mut self) {
        self.locks.0.lock().remove(&self.key);
    }
}

fn lock_key(topic: &str, group: &str, queue_id: i32) -> String {
    super::merge::lock_key(topic, group, queue_id)
}

/// What a pop reads and writes through.
pub struct PopService {
    pub config: LiveConfig,
    pub store: Arc<MessageStore>,
    pub put: Arc<PutPipeline>,
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub offsets: Arc<ConsumerOffsetManager>,
    pub order: Arc<OrderInfoManager>,
    pub broker_stats: Arc<BrokerStatsManager>,
    pub store_host: SocketAddr,
    pub locks: QueueLocks,
    ck_counter: AtomicU64,
    /// Where pops wait; unset (pops answered at once) until the broker builds it.
    pub parking: OnceLock<Arc<PopParking>>,
    /// Pop's metrics families (revive puts).
    pub metrics: Arc<crate::metrics::BrokerMetrics>,
    /// The revive service's progress per revive queue.
    pub revive_progress: super::revive::ReviveProgress,
    /// Where NOTIFICATION requests wait (Java's second `PopLongPollingService`), on the same
    /// budget as parked pulls and pops.
    pub notifications: OnceLock<Arc<PopParking>>,
    /// The buffer merge of `enablePopBufferMerge` (holds nothing while it is off).
    pub merge: Arc<BufferMerge>,
}

/// A CHANGE_MESSAGE_INVISIBLETIME answer as Java's: every answer carries the response header,
/// zeros where Java leaves its fields unset, and Java's default remark where it sets none (the
/// 5.3.3 client decodes the header before it looks at the code, so an answer without it fails
/// the call instead of reporting `NO_EXIST`).
fn with_change_defaults(mut response: RemotingCommand) -> RemotingCommand {
    if response.ext_fields.as_ref().is_none_or(|f| f.get("popTime").is_none()) {
        response = response.with_header(&ChangeInvisibleTimeResponseHeader { pop_time: 0, invisible_time: 0, revive_qid: 0 });
    }
    if response.remark.is_none() {
        response = response.with_remark(remoting::command::UNSET_REMARK);
    }
    response
}

/// An ack to store before its answer.
struct AckPut {
    record: ReviveMessage,
    group: String,
    topic: String,
    answer: RemotingCommand,
}

/// What one pop collects across the queues it reads.
struct Collected {
    messages: Vec<bytes::Bytes>,
    bytes: usize,
    rest: i64,
    start_offset_info: String,
    msg_offset_info: String,
    order_count_info: String,
}

/// How one pop filters.
enum Filter {
    Tags(SubscriptionData),
    Sql(Arc<crate::filter::Expr>),
}

impl Filter {
    fn read(&self, store: &MessageStore, topic: &str, queue_id: i32, offset: i64, max: usize) -> GetMessageResult {
        match self {
            Filter::Tags(sub) => store.get_message(topic, queue_id, offset, max, |code| sub.matches_tags_code(code)),
            Filter::Sql(expr) => store.get_message_filtered(topic, queue_id, offset, max, |_| true, |r| crate::filter::record_matches(expr, r)),
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    remoting::clock::now_ms()
}

impl crate::metrics::pop::ReviveLag for PopService {
    fn behind(&self, queue_id: i32, now_ms: i64) -> (i64, i64) {
        self.revive_progress.behind(self, queue_id, now_ms)
    }

    fn buffered(&self) -> (i64, i64) {
        let (offsets, cks) = self.merge.sizes();
        (offsets as i64, cks as i64)
    }
}

impl PopService {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: LiveConfig,
        store: Arc<MessageStore>,
        put: Arc<PutPipeline>,
        topics: Arc<TopicConfigManager>,
        groups: Arc<SubscriptionGroupManager>,
        offsets: Arc<ConsumerOffsetManager>,
        order: Arc<OrderInfoManager>,
        broker_stats: Arc<BrokerStatsManager>,
        metrics: Arc<crate::metrics::BrokerMetrics>,
        store_host: SocketAddr,
    ) -> PopService {
        PopService {
            merge: Arc::new(BufferMerge::new(config.clone())),
            config,
            store,
            put,
            topics,
            groups,
            offsets,
            order,
            broker_stats,
            store_host,
            locks: QueueLocks::default(),
            ck_counter: AtomicU64::new(0),
            parking: OnceLock::new(),
            notifications: OnceLock::new(),
            metrics,
            revive_progress: Default::default(),
        }
    }

    /// 0..100, for Java's `random.nextInt(100)` (which queue a pop starts at, whether it reads
    /// the retry topic first).
    pub(crate) fn random_percent(&self) -> i32 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let mixed = u64::from(nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.ck_counter.load(Ordering::Relaxed).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        ((mixed >> 33) % 100) as i32
    }

    pub fn revive_topic(&self) -> String {
        names::revive_topic(&self.config.load().broker_cluster_name)
    }

    /// POP_MESSAGE again, as a woken pop runs (it may be parked again).
    pub fn pop_again(&self, channel: &Channel, request: RemotingCommand) -> Option<RemotingCommand> {
        self.pop(channel, request, true)
    }

    /// POP_MESSAGE. `may_park`: a pop that finds nothing may wait until its poll time (`None`:
    /// parked, answered by its wake).
    pub fn pop(&self, channel: &Channel, mut request: RemotingCommand, may_park: bool) -> Option<RemotingCommand> {
        let config = self.config.load();
        // Java fills in a missing or zero born time before decoding.
        if let Some(ext) = request.ext_fields.as_mut() {
            if ext.get("bornTime").is_none_or(|b| b == "0") {
                ext.insert("bornTime".into(), now_ms().to_string());
            }
        }
        let err = |request: &RemotingCommand, code, remark: String| Some(pop_error(request, code, remark));
        let h: PopMessageRequestHeader = match request.decode_header() {
            Ok(h) => h,
            Err(e @ HeaderError::Rejected { field: "consumerGroup", .. }) => {
                return err(&request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group [{e}] does not exist, {FAQ_SUFFIX}"))
            }
            Err(e) => return err(&request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let ip = &config.broker_ip1;
        if now_ms() - h.born_time - h.poll_time > 500 {
            return err(&request, ResponseCode::POLLING_TIMEOUT, format!("the broker[{ip}] pop message is timeout too much"));
        }
        if !perm::is_readable(config.broker_permission) {
            return err(&request, ResponseCode::NO_PERMISSION, format!("the broker[{ip}] pop message is forbidden"));
        }
        if h.max_msg_nums > MAX_POP_NUMS {
            return err(&request, ResponseCode::INVALID_PARAMETER, format!("the broker[{ip}] pop message's num is greater than 32"));
        }
        if !self.store.config().timer_wheel_enable {
            return err(&request, ResponseCode::SYSTEM_ERROR, format!("the broker[{ip}] pop message is forbidden because timerWheelEnable is false"));
        }
        let Some(topic) = self.topics.select(h.topic.as_str()) else {
            return err(&request, ResponseCode::TOPIC_NOT_EXIST, format!("topic[{}] not exist, apply first please! {FAQ_SUFFIX}", h.topic));
        };
        if !perm::is_readable(topic.perm) {
            return err(&request, ResponseCode::NO_PERMISSION, format!("the topic[{}] peeking message is forbidden", h.topic));
        }
        if h.queue_id >= topic.read_queue_nums {
            return err(
                &request,
                ResponseCode::INVALID_PARAMETER,
                format!(
                    "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[/{}]",
                    h.queue_id,
                    h.topic,
                    topic.read_queue_nums,
                    channel.remote_addr()
                ),
            );
        }
        let Some(group) = self.groups.find_or_create(&h.consumer_group, config.auto_create_subscription_group) else {
            return err(
                &request,
                ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("subscription group [{}] does not exist, {FAQ_SUFFIX}", h.consumer_group),
            );
        };
        if !group.consume_enable {
            return err(&request, ResponseCode::NO_PERMISSION, format!("subscription group no permission, {}", h.consumer_group));
        }
        let filter = match self.filter(&h, config.enable_property_filter) {
            Ok(f) => f,
            Err(()) => return err(&request, ResponseCode::SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed".into()),
        };

        let order = h.order == Some(true);
        let revive_qid = if order {
            POP_ORDER_REVIVE_QUEUE
        } else {
            let queues = u64::try_from(config.revive_queue_num.max(1)).unwrap_or(1);
            (self.ck_counter.fetch_add(1, Ordering::Relaxed) % queues) as i32
        };
        let random_q = self.random_percent();
        let need_retry = random_q < config.pop_from_retry_probability;
        let retry_v1 = config.enable_retry_topic_v2 && config.retrieve_message_from_pop_retry_topic_v1 && random_q % 2 == 0;
        let retry_topic = if retry_v1 {
            names::pop_retry_topic_v1(h.topic.as_str(), h.consumer_group.as_str())
        } else {
            names::pop_retry_topic(h.topic.as_str(), h.consumer_group.as_str(), config.enable_retry_topic_v2)
        };
        let pop_time = now_ms();
        // Read before looking: an arrival (or an orderly ack's unblocking) after it wakes this pop
        // even if it comes before the pop is parked.
        let seen = self.parking.get().map_or(0, |lot| lot.arrivals());
        let mut got = Collected {
            messages: Vec::new(),
            bytes: 0,
            rest: 0,
            start_offset_info: String::new(),
            msg_offset_info: String::new(),
            order_count_info: String::new(),
        };
        let ctx = PopCtx { h: &h, revive_qid, pop_time, filter: &filter, order, broker_name: &config.broker_name };
        if need_retry && !order {
            self.pop_from_topic(&ctx, &retry_topic, true, random_q, &mut got);
        }
        if h.queue_id < 0 {
            self.pop_from_topic_config(&ctx, &topic, false, random_q, &mut got);
        } else {
            self.pop_from_queue(&ctx, h.topic.as_str(), false, h.queue_id, &mut got);
        }
        if !need_retry && !order && (got.messages.len() as i32) < h.max_msg_nums {
            self.pop_from_topic(&ctx, &retry_topic, true, random_q, &mut got);
        }

        let code = if !got.messages.is_empty() {
            ResponseCode::SUCCESS
        } else if may_park && h.poll_time > 0 {
            match self.park(channel, request, &h, &config, seen) {
                Ok(()) => return None,
                Err((r, code)) => {
                    request = *r;
                    code
                }
            }
        } else {
            ResponseCode::POLLING_TIMEOUT
        };
        let status = if code == ResponseCode::SUCCESS { "FOUND" } else { "NO_MESSAGE_IN_QUEUE" };
        let header = PopMessageResponseHeader {
            pop_time,
            invisible_time: h.invisible_time,
            revive_qid,
            rest_num: got.rest,
            start_offset_info: Some(got.start_offset_info),
            msg_offset_info: Some(got.msg_offset_info),
            order_count_info: order.then_some(got.order_count_info),
        };
        let mut response = RemotingCommand::response_to(&request, code).with_remark(status).with_header(&header);
        if code == ResponseCode::SUCCESS {
            let mut body = BytesMut::with_capacity(got.bytes);
            for m in &got.messages {
                body.extend_from_slice(m);
            }
            response = response.with_body(body.freeze());
        }
        Some(response)
    }

    fn filter(&self, h: &PopMessageRequestHeader, enable_property_filter: bool) -> Result<Filter, ()> {
        let exp = h.exp.as_deref().filter(|e| !e.is_empty());
        let exp_type = h.exp_type.as_deref().unwrap_or("TAG");
        let Some(exp) = exp else {
            return Ok(Filter::Tags(SubscriptionData::from_expression(h.topic.as_str(), "*", java_string_hash)));
        };
        if crate::filter::is_tag_type(exp_type) {
            return Ok(Filter::Tags(SubscriptionData::from_expression(h.topic.as_str(), exp, java_string_hash)));
        }
        let sub = crate::filter::subscription_of_pull(h.topic.as_str(), exp_type, exp, 0).map_err(|_| ())?;
        match crate::filter::pull_filter_shared(enable_property_filter, &sub).map_err(|_| ())? {
            Some(expr) => Ok(Filter::Sql(expr)),
            None => Ok(Filter::Tags(sub)),
        }
    }

    /// Parks a pop that found nothing until an arrival or its poll time; refused with Java's
    /// POLLING_FULL when the lot is full.
    #[allow(clippy::result_large_err)]
    fn park(
        &self,
        channel: &Channel,
        request: RemotingCommand,
        h: &PopMessageRequestHeader,
        config: &crate::config::BrokerConfig,
        seen: u64,
    ) -> Result<(), (Box<RemotingCommand>, ResponseCode)> {
        let Some(lot) = self.parking.get() else { return Err((Box::new(request), ResponseCode::POLLING_TIMEOUT)) };
        let key = QueueKey::new(h.topic.as_str(), h.queue_id);
        park_on(lot, channel, request, key, h.born_time.saturating_add(h.poll_time), config.max_pop_polling_size, seen)
    }

    fn pop_from_topic(&self, ctx: &PopCtx<'_>, topic: &str, is_retry: bool, random_q: i32, got: &mut Collected) {
        if let Some(config) = self.topics.select(topic) {
            self.pop_from_topic_config(ctx, &config, is_retry, random_q, got);
        }
    }

    fn pop_from_topic_config(&self, ctx: &PopCtx<'_>, topic: &TopicConfig, is_retry: bool, random_q: i32, got: &mut Collected) {
        let queues = topic.read_queue_nums;
        for i in 0..queues {
            let queue_id = (random_q + i) % queues;
            self.pop_from_queue(ctx, &topic.topic_name, is_retry, queue_id, got);
        }
    }

    /// Java's `popMsgFromQueue`: what one queue gives this pop.
    fn pop_from_queue(&self, ctx: &PopCtx<'_>, topic: &str, is_retry: bool, queue_id: i32, got: &mut Collected) {
        let h = ctx.h;
        let group = h.consumer_group.as_str();
        let Ok(topic_name) = TopicName::new(topic) else { return };
        let offset = self.pop_offset(&topic_name, &h.consumer_group, queue_id, h.init_mode, false);
        let Some(_lock) = self.locks.try_lock(lock_key(topic, group, queue_id)) else {
            if !ctx.order {
                got.rest += self.store.max_offset_in_queue(topic, queue_id) - offset;
            }
            return;
        };
        let mut offset = self.pop_offset(&topic_name, &h.consumer_group, queue_id, h.init_mode, true);
        if ctx.order && self.order.check_block(h.attempt_id.as_deref(), topic, group, queue_id, h.invisible_time, now_ms()) {
            return;
        }
        let have = got.messages.len();
        let want = usize::try_from(h.max_msg_nums).unwrap_or(0);
        if have >= want {
            got.rest += self.store.max_offset_in_queue(topic, queue_id) - offset;
            return;
        }
        let mut r = ctx.filter.read(&self.store, topic, queue_id, offset, want - have);
        if matches!(r.status, GetMessageStatus::OffsetTooSmall | GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetFoundNull) {
            // The stored offset is out of the queue: start again where the store says.
            self.offsets.commit_offset("pop", &h.consumer_group, &topic_name, queue_id, r.next_begin_offset);
            offset = r.next_begin_offset;
            r = ctx.filter.read(&self.store, topic, queue_id, offset, want - have);
        }
        if !r.messages.is_empty() {
            self.broker_stats.on_get(group, topic, r.messages.len(), r.buffer_total_size);
            if ctx.order {
                self.order.update(
                    h.attempt_id.as_deref(),
                    topic,
                    group,
                    queue_id,
                    ctx.pop_time,
                    h.invisible_time,
                    &r.queue_offsets,
                    now_ms(),
                    &mut got.order_count_info,
                );
                self.offsets.commit_offset("pop", &h.consumer_group, &topic_name, queue_id, offset);
            } else if !self.append_check_point(ctx, &topic_name, queue_id, offset, &r) {
                got.rest += r.messages.len() as i64;
                return;
            }
            append_start_offset_info(&mut got.start_offset_info, topic, queue_id, offset);
            append_msg_offset_info(&mut got.msg_offset_info, topic, queue_id, &r.queue_offsets);
        } else if matches!(
            r.status,
            GetMessageStatus::NoMatchedMessage
                | GetMessageStatus::OffsetFoundNull
                | GetMessageStatus::MessageWasRemoving
                | GetMessageStatus::NoMatchedLogicQueue
        ) && r.next_begin_offset > -1
        {
            if !ctx.order && self.merge.takes(&lock_key(topic, group, queue_id)) {
                // Java's `addCkMock`: committed after the offsets queued before it.
                self.merge.add_stored(topic, group, queue_id, ctx.pop_time, r.next_begin_offset);
            } else {
                self.offsets.commit_offset("pop", &h.consumer_group, &topic_name, queue_id, r.next_begin_offset);
            }
        }
        got.rest += r.max_offset - r.next_begin_offset;
        let return_actual = self.config.load().pop_response_return_actual_retry_topic;
        for (bytes, queue_offset) in r.messages.into_iter().zip(r.queue_offsets) {
            let bytes = if is_retry && !return_actual { self.as_original_topic(ctx, bytes, offset, queue_offset) } else { Some(bytes) };
            if let Some(bytes) = bytes {
                got.bytes += bytes.len();
                got.messages.push(bytes);
            }
        }
    }

    /// A retry message handed out under the topic the consumer popped, its receipt handle in
    /// `POP_CK` (Java re-encodes it so, unless `popResponseReturnActualRetryTopic`).
    fn as_original_topic(&self, ctx: &PopCtx<'_>, bytes: bytes::Bytes, ck_offset: i64, queue_offset: i64) -> Option<bytes::Bytes> {
        let Ok(RecordAt::Record(r)) = decode_record(&bytes, false) else { return None };
        let extra = ExtraInfo::new(ck_offset, ctx.pop_time, ctx.h.invisible_time, ctx.revive_qid, r.topic, ctx.broker_name, r.queue_id, Some(queue_offset));
        let mut msg = r.to_message();
        let mut props = properties::parse(&msg.properties);
        props.entry(names::PROPERTY_POP_CK.to_owned()).or_insert_with(|| extra.to_string());
        msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        msg.topic = ctx.h.topic.as_str().to_owned();
        let mut record = encode_record(&msg).ok()?;
        record.stamp(StampedFields { queue_offset, physical_offset: r.physical_offset, store_timestamp: r.store_timestamp });
        Some(record.bytes.into())
    }

    /// `getPopOffset`: the group's offset, or its first offset (committed when `init`), or the
    /// next offset of the buffer merge's last pending pop when further; with `init`, a
    /// server-side reset is taken (Java's `resetPopOffset`: the queue's order block and pending
    /// offsets go).
    fn pop_offset(&self, topic: &TopicName, group: &GroupName, queue_id: i32, init_mode: i32, init: bool) -> i64 {
        if init {
            if let Some(reset) = self.offsets.take_reset_offset(group.as_str(), topic.as_str(), queue_id) {
                self.order.clear_block(topic.as_str(), group.as_str(), queue_id);
                self.merge.clear_offsets(&lock_key(topic.as_str(), group.as_str(), queue_id));
                self.offsets.commit_offset("ResetPopOffset", group, topic, queue_id, reset);
                return reset;
            }
        }
        let offset = self.committed_pop_offset(topic, group, queue_id, init_mode, init);
        match self.merge.latest_offset(&lock_key(topic.as_str(), group.as_str(), queue_id)) {
            Some(buffered) => buffered.max(offset),
            None => offset,
        }
    }

    /// The group's offset, or its first offset (committed when `init`).
    fn committed_pop_offset(&self, topic: &TopicName, group: &GroupName, queue_id: i32, init_mode: i32, init: bool) -> i64 {
        if let Some(offset) = self.offsets.query_offset(group.as_str(), topic.as_str(), queue_id).filter(|o| *o >= 0) {
            return offset;
        }
        let t = topic.as_str();
        let offset = if init_mode == CONSUME_INIT_MODE_MIN || t.starts_with(names::RETRY_GROUP_TOPIC_PREFIX) {
            self.store.min_offset_in_queue(t, queue_id)
        } else if self.config.load().init_pop_offset_by_check_msg_in_mem
            && self.store.min_offset_in_queue(t, queue_id) <= 0
            && self.first_in_memory(t, queue_id)
        {
            0
        } else {
            (self.store.max_offset_in_queue(t, queue_id) - 1).max(0)
        };
        if init {
            self.offsets.commit_offset("getPopOffset", group, topic, queue_id, offset);
        }
        offset
    }

    /// Java's `checkInMemByConsumeOffset(topic, queue, 0, 1)`.
    fn first_in_memory(&self, topic: &str, queue_id: i32) -> bool {
        let r = self.store.get_message(topic, queue_id, 0, 1, |_| true);
        r.status == GetMessageStatus::Found && !r.suggest_pulling_from_slave
    }

    /// `appendCheckPoint`: the check point of this pop's messages from one queue, held by the
    /// buffer merge when it takes it; else stored in the revive topic as a timer message by this
    /// pop without waiting for the store's answer (Java's `addCkJustOffset`), the queue's offset
    /// committed past the messages in order once it is stored. False when the messages are not
    /// handed out.
    fn append_check_point(&self, ctx: &PopCtx<'_>, topic_name: &TopicName, queue_id: i32, offset: i64, r: &GetMessageResult) -> bool {
        let topic = topic_name.as_str();
        let mut ck = PopCheckPoint {
            start_offset: offset,
            pop_time: ctx.pop_time,
            invisible_time: ctx.h.invisible_time,
            bit_map: 0,
            num: r.messages.len() as i8,
            queue_id,
            topic: Some(topic.to_owned()),
            cid: Some(ctx.h.consumer_group.as_str().to_owned()),
            broker_name: Some(ctx.broker_name.to_owned()),
            ..PopCheckPoint::default()
        };
        for queue_offset in &r.queue_offsets {
            ck.add_diff((queue_offset - offset) as i32);
        }
        let group = ctx.h.consumer_group.as_str();
        if self.merge.add_ck(&ck, ctx.revive_qid, r.next_begin_offset, now_ms()) {
            return true;
        }
        let record = ReviveMessage::check_point(&ck, &self.revive_topic(), ctx.revive_qid);
        match self.merge.add_storing(&ck, ctx.revive_qid, r.next_begin_offset) {
            Storing::Added(id) => {
                let (merge, metrics) = (self.merge.clone(), self.metrics.clone());
                let (g, t) = (group.to_owned(), topic.to_owned());
                self.put_revive_then(&record, Origin::PopCheckPoint, move |result| {
                    metrics.on_revive_put(&g, &t, ReviveKind::Ck, result.status);
                    merge.settle(id, stored(&result));
                });
                // Refused before anything was appended: nothing is handed out, as Java's
                // synchronous put would have it.
                !self.merge.withdraw_failed(id)
            }
            Storing::Conflict => false,
            Storing::Full => {
                let result = self.put_revive(&record, Origin::PopCheckPoint);
                self.metrics.on_revive_put(group, topic, ReviveKind::Ck, result.status);
                if !stored(&result) {
                    return false;
                }
                if self.merge.takes(&lock_key(topic, group, queue_id)) {
                    // Java's `addCkJustOffset`: committed after the offsets queued before it.
                    self.merge.add_stored(topic, group, queue_id, ctx.pop_time, r.next_begin_offset);
                } else {
                    self.offsets.commit_offset("pop", &ctx.h.consumer_group, topic_name, queue_id, r.next_begin_offset);
                }
                true
            }
        }
    }

    /// Stores a revive-topic record through the timer, as Java's escape bridge does.
    pub fn put_revive(&self, m: &ReviveMessage, origin: Origin) -> PutMessageResult {
        self.put.put_rewritten(self.revive_record(m), origin)
    }

    /// As [`Self::put_revive`], answered through `done` (under SYNC_FLUSH once on disk; in
    /// DLedger mode once a quorum has it) so the calling thread never waits.
    pub fn put_revive_then(&self, m: &ReviveMessage, origin: Origin, done: impl FnOnce(PutMessageResult) + Send + 'static) {
        self.put.put_rewritten_then(self.revive_record(m), origin, done)
    }

    fn revive_record(&self, m: &ReviveMessage) -> MessageToStore {
        let props = m.properties();
        MessageToStore {
            topic: m.topic.clone(),
            queue_id: m.queue_id,
            flag: 0,
            sys_flag: 0,
            born_timestamp: now_ms(),
            born_host: self.store_host,
            store_host: self.store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: bytes::Bytes::from(m.body.clone()),
            properties: properties::serialize(props.iter().map(|(k, v)| (*k, v.as_str()))),
        }
    }

    /// The topic and queue an ack or a change of invisible time names must exist, answered as
    /// Java's processors answer both (TOPIC_NOT_EXIST, MESSAGE_ILLEGAL).
    fn check_acked_queue(&self, channel: &Channel, request: &RemotingCommand, topic: &str, queue_id: i32) -> Result<(), Box<RemotingCommand>> {
        let Some(config) = self.topics.select(topic) else {
            return Err(Box::new(RemotingCommand::error_response(
                request,
                ResponseCode::TOPIC_NOT_EXIST,
                format!("topic[{topic}] not exist, apply first please! {FAQ_SUFFIX}"),
            )));
        };
        if queue_id >= config.read_queue_nums || queue_id < 0 {
            return Err(Box::new(RemotingCommand::error_response(
                request,
                ResponseCode::MESSAGE_ILLEGAL,
                format!(
                    "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[/{}]",
                    config.read_queue_nums,
                    channel.remote_addr()
                ),
            )));
        }
        Ok(())
    }

    /// ACK_MESSAGE: answered once the ack record is stored as the store's flush policy says
    /// (`None`: answered later, by the store's callback), as Java's synchronous put answers it;
    /// the answer does not depend on the put's status (Java logs a failure).
    pub fn ack(&self, channel: &Channel, request: &RemotingCommand) -> Option<RemotingCommand> {
        let put = match self.ack_inner(channel, request) {
            Ok(response) => return Some(response),
            Err(put) => *put,
        };
        let (metrics, group, topic, answer) = (self.metrics.clone(), put.group, put.topic, put.answer);
        self.put.put_and_answer(vec![self.revive_record(&put.record)], Origin::PopAck, Reply::to(channel, request), move |result, _, _| {
            metrics.on_revive_put(&group, &topic, ReviveKind::Ack, result.status);
            if !stored(&result) {
                tracing::error!(?result.status, "put ack msg error");
            }
            answer
        })
    }

    /// An ack answered at once (`Ok`), or the record to store before the answer.
    fn ack_inner(&self, channel: &Channel, request: &RemotingCommand) -> Result<RemotingCommand, Box<AckPut>> {
        let h: AckMessageRequestHeader = match request.decode_header() {
            Ok(h) => h,
            Err(e) => return Ok(RemotingCommand::error_response(request, ResponseCode::SYSTEM_ERROR, e.to_string())),
        };
        let topic = h.topic.as_str();
        if let Err(refused) = self.check_acked_queue(channel, request, topic, h.queue_id) {
            return Ok(*refused);
        }
        let (min, max) = (self.store.min_offset_in_queue(topic, h.queue_id), self.store.max_offset_in_queue(topic, h.queue_id));
        if h.offset < min || h.offset > max {
            return Ok(RemotingCommand::error_response(
                request,
                ResponseCode::NO_MESSAGE,
                format!("offset is illegal, key:{topic}@{}, commit:{}, store:{min}~{max}", h.queue_id, h.offset),
            ));
        }
        let fields = ExtraInfoFields::split(&h.extra_info);
        let parsed = (|| {
            Ok::<_, crate::pop::PopFormatError>((
                fields.revive_qid()?,
                fields.ck_queue_offset()?,
                fields.pop_time()?,
                fields.invisible_time()?,
                fields.broker_name()?,
            ))
        })();
        let (revive_qid, start_offset, pop_time, invisible_time, broker_name) = match parsed {
            Ok(p) => p,
            Err(e) => return Ok(RemotingCommand::error_response(request, ResponseCode::SYSTEM_ERROR, e.to_string())),
        };
        let mut response = RemotingCommand::response_to(request, ResponseCode::SUCCESS);
        if revive_qid == POP_ORDER_REVIVE_QUEUE {
            if let Some((code, remark)) = self.ack_orderly(channel, &h.consumer_group, &h.topic, h.queue_id, h.offset, pop_time, invisible_time) {
                response = RemotingCommand::error_response(request, code, remark);
            }
            return Ok(response);
        }
        let ack = AckMsg {
            ack_offset: h.offset,
            broker_name: Some(broker_name.to_owned()),
            consumer_group: Some(h.consumer_group.as_str().to_owned()),
            pop_time,
            queue_id: h.queue_id,
            start_offset,
            topic: Some(topic.to_owned()),
        };
        if self.merge.add_ack(&ack, &[h.offset], false, now_ms()) {
            return Ok(response);
        }
        Err(Box::new(AckPut {
            record: ReviveMessage::ack(&ack, &self.revive_topic(), revive_qid, invisible_time),
            group: h.consumer_group.as_str().to_owned(),
            topic: topic.to_owned(),
            answer: response,
        }))
    }

    /// BATCH_ACK_MESSAGE: each check point's acks as one `bAck` record (orderly ones committed
    /// one by one); offsets outside their queue are left out, as Java does.
    /// Answered once every record is stored as the flush policy says (`None`: answered later,
    /// by the last put's callback).
    pub fn batch_ack(&self, channel: &Channel, request: &RemotingCommand) -> Option<RemotingCommand> {
        let body = match request.body.as_ref().map(|b| BatchAckRequestBody::decode(b)) {
            Some(Ok(body)) => body,
            Some(Err(e)) => return Some(RemotingCommand::error_response(request, ResponseCode::SYSTEM_ERROR, e.to_string())),
            None => BatchAckRequestBody::default(),
        };
        let acks = body.acks.unwrap_or_default();
        if acks.is_empty() {
            return Some(RemotingCommand::response_to(request, ResponseCode::NO_MESSAGE));
        }
        let mut puts = Vec::new();
        let mut response = RemotingCommand::response_to(request, ResponseCode::SUCCESS);
        for b in &acks {
            let (Some(group), Some(topic)) = (b.consumer_group.as_deref(), b.topic.as_deref()) else { continue };
            let topic = RetryMarker::parse_lenient(b.retry.as_deref().unwrap_or("")).real_topic(topic, group);
            let (Ok(group_name), Ok(topic_name)) = (GroupName::new(group), TopicName::new(&topic)) else { continue };
            let bits = match b.set_bits() {
                Ok(bits) => bits,
                Err(e) => return Some(RemotingCommand::error_response(request, ResponseCode::SYSTEM_ERROR, e.to_string())),
            };
            let (min, max) = (self.store.min_offset_in_queue(&topic, b.queue_id), self.store.max_offset_in_queue(&topic, b.queue_id));
            let mut list = Vec::new();
            for bit in bits {
                let offset = b.start_offset + i64::from(bit);
                if offset < min || offset > max {
                    continue;
                }
                if b.revive_queue_id == POP_ORDER_REVIVE_QUEUE {
                    if let Some((code, remark)) = self.ack_orderly(channel, &group_name, &topic_name, b.queue_id, offset, b.pop_time, b.invisible_time) {
                        response = RemotingCommand::error_response(request, code, remark);
                    }
                } else {
                    list.push(offset);
                }
            }
            if b.revive_queue_id == POP_ORDER_REVIVE_QUEUE || list.is_empty() {
                continue;
            }
            let batch = BatchAckMsg {
                ack: AckMsg {
                    ack_offset: -1,
                    broker_name: body.broker_name.clone(),
                    consumer_group: Some(group.to_owned()),
                    pop_time: b.pop_time,
                    queue_id: b.queue_id,
                    start_offset: b.start_offset,
                    topic: Some(topic.clone()),
                },
                ack_offset_list: list,
            };
            if self.merge.add_ack(&batch.ack, &batch.ack_offset_list, true, now_ms()) {
                continue;
            }
            puts.push((ReviveMessage::batch_ack(&batch, &self.revive_topic(), b.revive_queue_id, b.invisible_time), group.to_owned(), topic.clone()));
        }
        if puts.is_empty() {
            return Some(response);
        }
        // Each record put at once; the last put to settle answers.
        let answer = Arc::new(parking_lot::Mutex::new((puts.len(), Some((Reply::to(channel, request), response)))));
        for (record, group, topic) in puts {
            let (answer, metrics) = (answer.clone(), self.metrics.clone());
            self.put_revive_then(&record, Origin::PopAck, move |result| {
                metrics.on_revive_put(&group, &topic, ReviveKind::Ack, result.status);
                if !stored(&result) {
                    tracing::error!(?result.status, "put batch ack msg error");
                }
                let mut a = answer.lock();
                a.0 -= 1;
                if a.0 == 0 {
                    if let Some((reply, response)) = a.1.take() {
                        drop(a);
                        reply.send(response);
                    }
                }
            });
        }
        None
    }

    /// `ackOrderly`: commits the queue's offset up to the first message not yet acked.
    #[allow(clippy::too_many_arguments)]
    fn ack_orderly(
        &self,
        channel: &Channel,
        group: &GroupName,
        topic: &TopicName,
        queue_id: i32,
        ack_offset: i64,
        pop_time: i64,
        invisible_time: i64,
    ) -> Option<(ResponseCode, String)> {
        let (g, t) = (group.as_str(), topic.as_str());
        let key = lock_key(t, g, queue_id);
        let lock = self.locks.lock(key.clone());
        let old = self.offsets.query_offset(g, t, queue_id).unwrap_or(-1);
        if ack_offset < old {
            return None;
        }
        let next = self.order.commit_and_next(t, g, queue_id, ack_offset, pop_time);
        if next > -1 {
            self.offsets.commit_offset(&channel.remote_addr().to_string(), group, topic, queue_id, next);
            if !self.order.check_block(None, t, g, queue_id, invisible_time, now_ms()) {
                // Woken once the queue's lock is free: a pop woken while it is held would skip the
                // queue as another's and park again with nothing left to wake it.
                drop(lock);
                self.wake(t, queue_id);
            }
        } else if next == -1 {
            return Some((
                ResponseCode::MESSAGE_ILLEGAL,
                format!("offset is illegal, key:{key}, old:{old}, commit:{ack_offset}, next:{next}, /{}", channel.remote_addr()),
            ));
        }
        None
    }

    /// The lots of parked pops and parked notifications.
    fn lots(&self) -> impl Iterator<Item = &Arc<PopParking>> {
        self.parking.get().into_iter().chain(self.notifications.get())
    }

    /// Wakes the pops and notifications parked on a topic (any queue, and the queue).
    pub fn wake(&self, topic: &str, queue_id: i32) {
        let now = Instant::now();
        for lot in self.lots() {
            lot.notify_arriving(&QueueKey::new(topic, -1), i64::MAX, Some(0), now);
            lot.notify_arriving(&QueueKey::new(topic, queue_id), i64::MAX, Some(0), now);
        }
    }

    /// A message arrived on `topic`: pops and notifications of it wake, and of its normal topic
    /// when it is a pop retry topic (`%RETRY%group_topic` is ambiguous with underscores: each
    /// reading is woken).
    pub fn on_arrival(&self, topic: &str, queue_id: i32) {
        if self.lots().all(|lot| lot.held_count() == 0) {
            // Nobody to wake, but a pop looking now must learn of it when it parks.
            self.lots().for_each(|lot| lot.note_arrival());
            return;
        }
        self.wake(topic, queue_id);
        if let Some(rest) = topic.strip_prefix(names::RETRY_GROUP_TOPIC_PREFIX) {
            if names::is_pop_retry_topic_v2(topic) {
                self.wake(&names::parse_normal_topic_v2(topic), -1);
            } else {
                for (i, _) in rest.match_indices('_') {
                    self.wake(&rest[i + 1..], -1);
                }
            }
        }
    }

    /// CHANGE_MESSAGE_INVISIBLETIME, every answer completed as Java's ([`with_change_defaults`]).
    /// The new check point is stored first, then the old one's ack (merged into it when the
    /// buffer holds it), and the answer sent once both are stored as the flush policy says
    /// (`None`: answered later, from the store's callbacks), as Java 5.3.3 chains its futures.
    pub fn change_invisible_time(&self, channel: &Channel, request: &RemotingCommand) -> Option<RemotingCommand> {
        self.change_invisible_time_inner(channel, request).map(with_change_defaults)
    }

    fn change_invisible_time_inner(&self, channel: &Channel, request: &RemotingCommand) -> Option<RemotingCommand> {
        let h: ChangeInvisibleTimeRequestHeader = match request.decode_header() {
            Ok(h) => h,
            Err(e) => return Some(RemotingCommand::error_response(request, ResponseCode::SYSTEM_ERROR, e.to_string())),
        };
        let topic = h.topic.as_str();
        if let Err(refused) = self.check_acked_queue(channel, request, topic, h.queue_id) {
            return Some(*refused);
        }
        let (min, max) = (self.store.min_offset_in_queue(topic, h.queue_id), self.store.max_offset_in_queue(topic, h.queue_id));
        if h.offset < min || h.offset >= max {
            return Some(RemotingCommand::response_to(request, ResponseCode::NO_MESSAGE));
        }
        let extra = match ExtraInfo::parse(&h.extra_info) {
            Ok(e) => e,
            Err(e) => return Some(RemotingCommand::error_response(request, ResponseCode::SYSTEM_ERROR, e.to_string())),
        };
        let (group, g) = (&h.consumer_group, h.consumer_group.as_str());
        if extra.is_order() {
            let respond = |invisible_time| {
                RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_header(&ChangeInvisibleTimeResponseHeader {
                    pop_time: extra.pop_time,
                    invisible_time,
                    revive_qid: extra.revive_qid,
                })
            };
            let _lock = self.locks.lock(lock_key(topic, g, h.queue_id));
            let old = self.offsets.query_offset(g, topic, h.queue_id).unwrap_or(-1);
            if h.offset < old {
                return Some(RemotingCommand::response_to(request, ResponseCode::SUCCESS));
            }
            let next_visible = now_ms() + h.invisible_time;
            self.order.update_next_visible_time(topic, g, h.queue_id, h.offset, extra.pop_time, next_visible);
            return Some(respond(next_visible - extra.pop_time));
        }
        let now = now_ms();
        let mut ck = PopCheckPoint {
            start_offset: h.offset,
            pop_time: now,
            invisible_time: h.invisible_time,
            num: 1,
            queue_id: h.queue_id,
            topic: Some(topic.to_owned()),
            cid: Some(g.to_owned()),
            broker_name: Some(extra.broker_name.clone()),
            ..PopCheckPoint::default()
        };
        ck.add_diff(0);
        let ack = AckMsg {
            ack_offset: h.offset,
            broker_name: Some(extra.broker_name.clone()),
            consumer_group: Some(group.as_str().to_owned()),
            pop_time: extra.pop_time,
            queue_id: h.queue_id,
            start_offset: extra.ck_queue_offset,
            topic: Some(topic.to_owned()),
        };
        let ack_record = self.revive_record(&ReviveMessage::ack(&ack, &self.revive_topic(), extra.revive_qid, extra.invisible_time));
        let ok = RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_header(&ChangeInvisibleTimeResponseHeader {
            pop_time: now,
            invisible_time: h.invisible_time,
            revive_qid: extra.revive_qid,
        });
        let failed = RemotingCommand::response_to(request, ResponseCode::SYSTEM_ERROR);
        let (reply, metrics, merge, put) = (Reply::to(channel, request), self.metrics.clone(), self.merge.clone(), self.put.clone());
        let (g, t) = (g.to_owned(), topic.to_owned());
        self.put_revive_then(&ReviveMessage::check_point(&ck, &self.revive_topic(), extra.revive_qid), Origin::PopCheckPoint, move |result| {
            metrics.on_revive_put(&g, &t, ReviveKind::Ck, result.status);
            if !stored(&result) {
                return reply.send(with_change_defaults(failed));
            }
            // The old check point's ack: merged when the buffer holds it, else stored.
            if merge.add_ack(&ack, &[ack.ack_offset], false, now_ms()) {
                return reply.send(with_change_defaults(ok));
            }
            put.put_rewritten_then(ack_record, Origin::PopAck, move |result| {
                metrics.on_revive_put(&g, &t, ReviveKind::Ack, result.status);
                if !stored(&result) {
                    tracing::error!(?result.status, "change invisible, put ack msg fail");
                }
                reply.send(with_change_defaults(ok));
            });
        });
        None
    }

    /// Java's `addRetryTopicIfNotExist`: a pop retry topic with one queue, the group's offset on
    /// it started at 0.
    pub fn ensure_retry_topic(&self, topic: &str, group: &str) {
        if self.topics.contains(topic) {
            return;
        }
        let (Ok(name), Ok(group)) = (TopicName::new(topic), GroupName::new(group)) else { return };
        let config = TopicConfig { read_queue_nums: RETRY_QUEUE_NUM, write_queue_nums: RETRY_QUEUE_NUM, perm: 6, ..TopicConfig::new(topic) };
        if let Err(e) = self.topics.update(&name, config) {
            tracing::error!(topic, error = %e, "cannot create the pop retry topic");
            return;
        }
        if self.offsets.query_offset(group.as_str(), topic, 0).is_none_or(|o| o < 0) {
            self.offsets.commit_offset("initPopRetryOffset", &group, &name, 0, 0);
        }
    }
}

/// A refused pop as Java answers it: its response header's numbers (0) come along, so the 5.3.3
/// client, which decodes the header of a POLLING_TIMEOUT answer, reads it as "nothing found".
pub(crate) fn pop_error(request: &RemotingCommand, code: ResponseCode, remark: String) -> RemotingCommand {
    RemotingCommand::error_response(request, code, remark).with_header(&PopMessageResponseHeader {
        pop_time: 0,
        invisible_time: 0,
        revive_qid: 0,
        rest_num: 0,
        start_offset_info: None,
        msg_offset_info: None,
        order_count_info: None,
    })
}

/// Parks a request on `lot` until an arrival on `key` (or since `seen`, the lot's arrivals read
/// before the request looked) or `expires_ms` (Java's `bornTime +
/// pollTime`, at most [`MAX_POLL`] away); refused with the code Java answers: POLLING_TIMEOUT when
/// its time is already up, POLLING_FULL when `max` requests of the kind wait or the shared budget
/// is spent.
#[allow(clippy::result_large_err)]
pub(crate) fn park_on(
    lot: &PopParking,
    channel: &Channel,
    request: RemotingCommand,
    key: QueueKey,
    expires_ms: i64,
    max: usize,
    seen: u64,
) -> Result<(), (Box<RemotingCommand>, ResponseCode)> {
    if lot.held_count() >= max {
        return Err((Box::new(request), ResponseCode::POLLING_FULL));
    }
    let wait = Duration::from_millis(u64::try_from(expires_ms - now_ms()).unwrap_or(0)).min(MAX_POLL);
    if wait.is_zero() {
        return Err((Box::new(request), ResponseCode::POLLING_TIMEOUT));
    }
    let now = Instant::now();
    let parked = ParkedPop { request, channel: channel.clone(), deadline: now + wait, parked_at: now };
    lot.park_since(key, parked, seen).map_err(|refused| (Box::new(refused.1.request), ResponseCode::POLLING_FULL))
}

/// Java's put statuses that count as stored for pop's records.
pub fn stored(result: &PutMessageResult) -> bool {
    use store::commit_log::PutStatus;
    matches!(result.status, PutStatus::PutOk | PutStatus::FlushDiskTimeout) && result.append.is_some()
}

struct PopCtx<'a> {
    h: &'a PopMessageRequestHeader,
    revive_qid: i32,
    pop_time: i64,
    filter: &'a Filter,
    order: bool,
    broker_name: &'a str,
}

#[cfg(test)]
mod queue_lock_tests {
    use super::QueueLocks;

    /// A second try on a held key fails at once and leaves the holder's lock in place (once the
    /// refused lock was made and dropped under the set's mutex: a self-deadlock of the pop pool).
    #[test]
    fn a_held_key_is_refused_without_freeing_it() {
        let locks = QueueLocks::default();
        let held = locks.try_lock("T@G@0".into());
        assert!(held.is_some());
        assert!(locks.try_lock("T@G@0".into()).is_none());
        assert!(locks.try_lock("T@G@0".into()).is_none(), "still held by the first");
        assert!(locks.try_lock("T@G@1".into()).is_some(), "another key is free");
        drop(held);
        assert!(locks.try_lock("T@G@0".into()).is_some(), "free once the holder let go");
    }
}
