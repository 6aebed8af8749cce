//! PEEK_MESSAGE (`PeekMessageProcessor`): the messages a pop would find, read without a check
//! point, an offset commit or a wait; and the checks Java's peek, notification and polling-info
//! processors share (the broker and the topic readable, the queue within the topic, the group
//! there and allowed to consume).

use bytes::BytesMut;
use remoting::protocol::name::GroupName;
use remoting::protocol::perm;
use remoting::protocol::topic::TopicConfig;
use remoting::server::Channel;
use remoting::{RemotingCommand, ResponseCode};
use store::store::GetMessageStatus;

use super::service::{pop_error, PopService};
use crate::broker::FAQ_SUFFIX;
use crate::pop::headers::{PeekMessageRequestHeader, PopMessageResponseHeader};
use crate::pop::names;

/// The remark of Java's answer to a request whose topic or group is `null` (its tables are
/// `ConcurrentHashMap`s): `exceptionSimpleDesc` without the JDK's own message and stack frame.
pub(crate) const JAVA_NULL_POINTER: &str = "java.lang.NullPointerException";

/// What a peek collects across the queues it reads.
#[derive(Default)]
struct Peeked {
    messages: Vec<bytes::Bytes>,
    bytes: usize,
    rest: i64,
}

impl PopService {
    /// The checks of Java's peek, notification and polling-info processors, in their order and
    /// with their remarks: the topic's config when all pass. A topic or group the request does not
    /// name is looked up as Java looks up `null` in its tables: a NullPointerException, answered
    /// SYSTEM_ERROR (thrown, so without the response header the other refusals carry).
    pub(crate) fn check_readable(
        &self,
        channel: &Channel,
        topic: Option<&str>,
        queue_id: i32,
        group: Option<&str>,
    ) -> Result<TopicConfig, (ResponseCode, String)> {
        let config = self.config.load();
        if !perm::is_readable(config.broker_permission) {
            return Err((ResponseCode::NO_PERMISSION, format!("the broker[{}] peeking message is forbidden", config.broker_ip1)));
        }
        let null = || (ResponseCode::SYSTEM_ERROR, JAVA_NULL_POINTER.to_owned());
        let topic = topic.ok_or_else(null)?;
        let Some(topic_config) = self.topics.select(topic) else {
            return Err((ResponseCode::TOPIC_NOT_EXIST, format!("topic[{topic}] not exist, apply first please! {FAQ_SUFFIX}")));
        };
        if !perm::is_readable(topic_config.perm) {
            return Err((ResponseCode::NO_PERMISSION, format!("the topic[{topic}] peeking message is forbidden")));
        }
        if queue_id >= topic_config.read_queue_nums {
            return Err((
                ResponseCode::INVALID_PARAMETER,
                format!(
                    "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[/{}]",
                    topic_config.read_queue_nums,
                    channel.remote_addr()
                ),
            ));
        }
        // Java looks the group up (creating it when `autoCreateSubscriptionGroup`): a name no
        // group can have is a group that does not exist.
        let group = group.ok_or_else(null)?;
        let found = GroupName::new(group).ok().and_then(|g| self.groups.find_or_create(&g, config.auto_create_subscription_group));
        let Some(group_config) = found else {
            return Err((ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group [{group}] does not exist, {FAQ_SUFFIX}")));
        };
        if !group_config.consume_enable {
            return Err((ResponseCode::NO_PERMISSION, format!("subscription group no permission, {group}")));
        }
        Ok(topic_config)
    }

    /// Java's `getPopOffset` of the peek and notification processors: the group's offset, or
    /// the queue's first (nothing committed), or further the next offset of the buffer merge's
    /// last pending pop (its offsets wait there until committed).
    pub(crate) fn peek_offset(&self, topic: &str, group: &str, queue_id: i32) -> i64 {
        let offset = match self.offsets.query_offset(group, topic, queue_id) {
            Some(offset) if offset >= 0 => offset,
            _ => self.store.min_offset_in_queue(topic, queue_id),
        };
        let pending = self.merge.latest_offset(&crate::popping::merge::lock_key(topic, group, queue_id));
        pending.map_or(offset, |p| p.max(offset))
    }

    /// PEEK_MESSAGE. Answered at once (Java's peek never waits): SUCCESS `FOUND` with the
    /// messages as stored (a retry topic's under its own name), or PULL_NOT_FOUND
    /// `NO_MESSAGE_IN_QUEUE`; `restNum` counts what the queues read hold past the group's offset.
    pub fn peek(&self, channel: &Channel, request: &RemotingCommand) -> RemotingCommand {
        let h = PeekMessageRequestHeader::read_as_java(request);
        let topic = match self.check_readable(channel, h.topic.as_deref(), h.queue_id, h.consumer_group.as_deref()) {
            Ok(t) => t,
            Err((code, remark)) if code == ResponseCode::SYSTEM_ERROR => return RemotingCommand::error_response(request, code, remark),
            Err((code, remark)) => return pop_error(request, code, remark),
        };
        let group = h.consumer_group.as_deref().unwrap_or_default();
        // Java sizes its result by `maxMsgNums` here: a negative one throws.
        let Ok(want) = usize::try_from(h.max_msg_nums) else {
            return RemotingCommand::error_response(
                request,
                ResponseCode::SYSTEM_ERROR,
                format!("java.lang.IllegalArgumentException: Illegal Capacity: {}", h.max_msg_nums),
            );
        };
        let config = self.config.load();
        let random_q = self.random_percent();
        let need_retry = random_q % 5 == 0;
        let retry_topic = names::pop_retry_topic(&topic.topic_name, group, config.enable_retry_topic_v2);
        let mut got = Peeked::default();
        let peek_topic = |name: &str, got: &mut Peeked| {
            if let Some(t) = self.topics.select(name) {
                for i in 0..t.read_queue_nums {
                    self.peek_queue(name, group, (random_q + i) % t.read_queue_nums, want, got);
                }
            }
        };
        if need_retry {
            peek_topic(&retry_topic, &mut got);
        }
        if h.queue_id < 0 {
            for i in 0..topic.read_queue_nums {
                self.peek_queue(&topic.topic_name, group, (random_q + i) % topic.read_queue_nums, want, &mut got);
            }
        } else {
            self.peek_queue(&topic.topic_name, group, h.queue_id, want, &mut got);
        }
        if !need_retry && got.messages.len() < want {
            peek_topic(&retry_topic, &mut got);
        }
        let header = PopMessageResponseHeader {
            pop_time: 0,
            invisible_time: 0,
            revive_qid: 0,
            rest_num: got.rest,
            start_offset_info: None,
            msg_offset_info: None,
            order_count_info: None,
        };
        if got.messages.is_empty() {
            return RemotingCommand::response_to(request, ResponseCode::PULL_NOT_FOUND).with_remark("NO_MESSAGE_IN_QUEUE").with_header(&header);
        }
        self.broker_stats.on_get(group, &topic.topic_name, got.messages.len(), got.bytes);
        let mut body = BytesMut::with_capacity(got.bytes);
        for m in &got.messages {
            body.extend_from_slice(m);
        }
        RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_remark("FOUND").with_header(&header).with_body(body.freeze())
    }

    /// Java's `peekMsgFromQueue`: the queue's rest counted, then up to what the peek still wants.
    fn peek_queue(&self, topic: &str, group: &str, queue_id: i32, want: usize, got: &mut Peeked) {
        let offset = self.peek_offset(topic, group, queue_id);
        got.rest += self.store.max_offset_in_queue(topic, queue_id) - offset;
        if got.messages.len() >= want {
            return;
        }
        let max = want - got.messages.len();
        let mut r = self.store.get_message(topic, queue_id, offset, max, |_| true);
        if matches!(r.status, GetMessageStatus::OffsetTooSmall | GetMessageStatus::OffsetOverflowBadly) {
            r = self.store.get_message(topic, queue_id, r.next_begin_offset, max, |_| true);
        }
        for m in r.messages {
            got.bytes += m.len();
            got.messages.push(m);
        }
    }
}
