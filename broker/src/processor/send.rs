//! SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE (Java `SendMessageProcessor`).

use bytes::{Buf, Bytes};
use remoting::header::HeaderError;
use remoting::protocol::broker::{ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
use remoting::protocol::name::GroupName;
use remoting::protocol::perm;
use remoting::protocol::topic::TopicConfig;
use remoting::server::{Channel, ProcessResult, Reply, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use store::commit_log::{PutMessageResult, PutStatus};
use store::message::record::{decode_record, RecordAt, SYSFLAG_TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE};
use store::message::{offset_message_id, properties, MessageToStore};

use crate::broker::FAQ_SUFFIX;
use crate::config::BrokerConfig;
use crate::handles::SendContext;
use crate::put::Origin;
use crate::replication::Outcome;
use crate::topic_config::system_topic;
use crate::transaction;

pub struct SendProcessor {
    pub ctx: SendContext,
}

impl RequestProcessor for SendProcessor {
    /// Java's `SendMessageProcessor.rejectRequest`: while the page cache is busy (a put has held
    /// the append lock past `osPageCacheBusyTimeOutMills`), sends are answered SYSTEM_BUSY
    /// `[REJECTREQUEST]` without running.
    fn reject(&self) -> bool {
        self.ctx.store.is_os_page_cache_busy()
    }

    /// Every answer is a send's header (SEND_OK and the rest, or an error with a remark).
    fn answers_are_small(&self) -> bool {
        true
    }

    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        if request.request_code() == RequestCode::CONSUMER_SEND_MSG_BACK {
            return Ok(self.send_back(channel, &request));
        }
        let header: SendMessageRequestHeader = match request.request_code() {
            RequestCode::SEND_MESSAGE => request.decode_header()?,
            _ => request.decode_header::<SendMessageRequestHeaderV2>()?.into(),
        };
        let batch = request.request_code() == RequestCode::SEND_BATCH_MESSAGE;
        Ok(self.send(channel, &request, header, batch).map(|response| decorate(&self.ctx.config(), response)))
    }
}

/// What every send response carries besides its header.
pub(crate) fn decorate(config: &BrokerConfig, response: RemotingCommand) -> RemotingCommand {
    response.with_ext(MSG_REGION, config.region_id.clone()).with_ext(TRACE_ON, config.trace_on.to_string())
}

/// What the answer to a send needs once the store has a result.
struct SendReply {
    request: RemotingCommand,
    queue_id: i32,
    transaction_id: Option<String>,
}

impl SendReply {
    /// The answer, from the store's result and, on a SYNC_MASTER, what the slaves did. As Java
    /// combines them, a replica failure wins over the flush result.
    fn response(self, result: PutMessageResult, replica: Option<Outcome>, recall_handle: Option<String>) -> RemotingCommand {
        let err = |code, remark: String| RemotingCommand::error_response(&self.request, code, remark);
        let code = match result.status {
            PutStatus::PutOk => ResponseCode::SUCCESS,
            PutStatus::FlushDiskTimeout => ResponseCode::FLUSH_DISK_TIMEOUT,
            PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded => ResponseCode::MESSAGE_ILLEGAL,
            PutStatus::ServiceNotAvailable => {
                let reason = result.remark.unwrap_or_default();
                return err(ResponseCode::SERVICE_NOT_AVAILABLE, format!("{SERVICE_NOT_AVAILABLE_REMARK}: {reason}"));
            }
            PutStatus::CreateMappedFileFailed => {
                return err(ResponseCode::SYSTEM_ERROR, "create mapped file failed, server is busy or broken.".into());
            }
            PutStatus::OsPageCacheBusy => {
                return err(ResponseCode::SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while".into());
            }
            PutStatus::UnknownError => return err(ResponseCode::SYSTEM_ERROR, result.remark.unwrap_or_else(|| "UNKNOWN_ERROR".into())),
            // The timer's refusals carry Java's remarks (`crate::timer`).
            PutStatus::WheelTimerMsgIllegal => return err(ResponseCode::MESSAGE_ILLEGAL, result.remark.unwrap_or_default()),
            PutStatus::WheelTimerNotEnable | PutStatus::WheelTimerFlowControl => return err(ResponseCode::SYSTEM_ERROR, result.remark.unwrap_or_default()),
        };
        let code = match replica {
            None | Some(Outcome::Replicated) => code,
            Some(Outcome::SlaveNotAvailable) => ResponseCode::SLAVE_NOT_AVAILABLE,
            Some(Outcome::TimedOut) => ResponseCode::FLUSH_SLAVE_TIMEOUT,
        };
        match result.append {
            Some(a) => RemotingCommand::response_to(&self.request, code).with_header(&SendMessageResponseHeader {
                msg_id: a.msg_ids.join(","),
                queue_id: self.queue_id,
                queue_offset: a.logics_offset,
                transaction_id: self.transaction_id,
                recall_handle,
            }),
            None => err(code, result.remark.unwrap_or_default()),
        }
    }
}

/// Java's words for SERVICE_NOT_AVAILABLE; the store's own reason follows.
const SERVICE_NOT_AVAILABLE_REMARK: &str =
    "service not available now. It may be caused by one of the following reasons: the broker's disk is full, messages are put to the slave, message store has been shut down, etc.";

impl SendProcessor {
    /// The answer to a send, or None when the flush service will send it.
    fn send(&self, channel: &Channel, request: &RemotingCommand, h: SendMessageRequestHeader, batch: bool) -> Option<RemotingCommand> {
        let b = &self.ctx;
        let err = |code, remark: String| Some(RemotingCommand::error_response(request, code, remark));
        let (_, queue_id) = match msg_check(b, channel, &h) {
            Ok(checked) => checked,
            Err((code, remark)) => return err(code, remark),
        };
        let prepared = h.sys_flag & SYSFLAG_TRANSACTION_MASK == TRANSACTION_PREPARED_TYPE;
        if prepared && b.config().reject_transaction_message {
            return err(ResponseCode::NO_PERMISSION, format!("the broker[{}] sending transaction message is forbidden", b.config().broker_ip1));
        }
        let sent = h.properties.as_deref().unwrap_or("");
        let message_type = crate::metrics::message_type(sent);
        let config = b.config();
        let trace_on = config.trace_on.to_string();
        let props = properties::with_set(sent, &[(MSG_REGION, &config.region_id), (TRACE_ON, &trace_on), ("CLUSTER", &config.broker_cluster_name)]);
        let base = MessageToStore {
            topic: h.topic.to_string(),
            queue_id,
            flag: h.flag,
            sys_flag: h.sys_flag,
            born_timestamp: h.born_timestamp,
            born_host: channel.remote_addr(),
            store_host: b.store_host,
            reconsume_times: h.reconsume_times.unwrap_or(0),
            prepared_transaction_offset: 0,
            body: request.body.clone().unwrap_or_default(),
            properties: props,
        };
        let msgs = if batch {
            match split_batch(&base) {
                Ok(msgs) => msgs,
                Err(remark) => return err(ResponseCode::MESSAGE_ILLEGAL, remark),
            }
        } else {
            let mut msg = base;
            if prepared {
                transaction::ensure_topics(&b.topics);
            } else if let Err((code, remark)) = self.retry_or_dlq(&mut msg, &h, request.version) {
                return err(code, remark);
            }
            vec![msg]
        };
        let reply = SendReply {
            request: skeleton(request),
            queue_id,
            // As 5.x: a half message's transaction id is its UNIQ_KEY.
            transaction_id: if prepared { properties::get(sent, properties::UNIQ_KEY).map(str::to_owned) } else { None },
        };
        // The pipeline stores a prepared message as its half, a delayed one in the schedule topic.
        let origin = Origin::Send { message_type, half_for: prepared.then(|| h.topic.to_string()), batch };
        let config = b.config.clone();
        b.put.put_and_answer(msgs, origin, Reply::to(channel, request), move |result, replica, rewritten| {
            let config = config.load();
            // 5.3.x: a timer message's answer carries the handle that recalls it (not a batch's).
            let recall = rewritten
                .timer
                .filter(|t| !batch && !t.real_topic.starts_with(system_topic::RETRY_GROUP_TOPIC_PREFIX))
                .map(|t| crate::timer::recall_handle(&t.real_topic, &config.broker_name, t.out_ms + 1, t.uniq_key.as_deref().unwrap_or("null")));
            decorate(&config, reply.response(result, replica, recall))
        })
    }

    /// A send to `%RETRY%group` that used up its reconsume times goes to `%DLQ%group` instead
    /// (Java `handleRetryAndDLQ`).
    fn retry_or_dlq(&self, msg: &mut MessageToStore, h: &SendMessageRequestHeader, version: i32) -> Result<(), (ResponseCode, String)> {
        let b = &self.ctx;
        let Some(group) = h.topic.strip_prefix(system_topic::RETRY_GROUP_TOPIC_PREFIX) else { return Ok(()) };
        let (Ok(group), Some(config)) = (GroupName::new(group), b.groups.select(group)) else {
            return Err((ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group not exist, {group} {FAQ_SUFFIX}")));
        };
        let max = match h.max_reconsume_times {
            Some(max) if version >= VERSION_3_4_9 => max,
            _ => config.retry_max_times,
        };
        if h.reconsume_times.unwrap_or(0) >= max {
            let dlq = group.dlq_topic().map_err(|e| (ResponseCode::SYSTEM_ERROR, e.to_string()))?;
            b.topics.create_topic_in_send_message_back_method(&dlq, 1, perm::READ | perm::WRITE, 0);
            msg.topic = dlq.into_string();
            msg.queue_id = 0;
            set_property(msg, properties::DELAY, "0");
        }
        Ok(())
    }

    /// CONSUMER_SEND_MSG_BACK: a message the consumer failed goes to `%RETRY%group` with the next
    /// delay level, or to `%DLQ%group` after the maximum reconsume times (Java
    /// `asyncConsumerSendMsgBack`).
    fn send_back(&self, channel: &Channel, request: &RemotingCommand) -> Option<RemotingCommand> {
        let b = &self.ctx;
        let err = |code, remark: String| Some(RemotingCommand::error_response(request, code, remark));
        let h: ConsumerSendMsgBackRequestHeader = match request.decode_header() {
            Ok(h) => h,
            // Java cannot find (nor create) a group with an illegal name.
            Err(e @ HeaderError::Rejected { field: "group", .. }) => {
                return err(ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group not exist, {e} {FAQ_SUFFIX}"))
            }
            Err(e) => return err(ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let Some(group) = b.groups.find_or_create(&h.group, b.config().auto_create_subscription_group) else {
            return err(ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group not exist, {} {FAQ_SUFFIX}", h.group));
        };
        if !b.is_writeable() {
            return err(ResponseCode::NO_PERMISSION, format!("the broker[{}] sending message is forbidden", b.config().broker_ip1));
        }
        if group.retry_queue_nums <= 0 {
            return Some(RemotingCommand::response_to(request, ResponseCode::SUCCESS));
        }
        let (Ok(retry_topic), Ok(dlq_topic)) = (h.group.retry_topic(), h.group.dlq_topic()) else {
            return err(ResponseCode::SYSTEM_ERROR, format!("the group [{}] is too long for its retry topic", h.group));
        };
        let mut topic = retry_topic;
        let mut queue_id = random_queue(group.retry_queue_nums);
        let sys_flag = if h.unit_mode == Some(true) { remoting::protocol::topic_sys_flag::UNIT_SUB } else { 0 };
        let retry = b.topics.create_topic_in_send_message_back_method(&topic, group.retry_queue_nums, perm::READ | perm::WRITE, sys_flag);
        if !perm::is_writeable(retry.config().perm) {
            return err(ResponseCode::NO_PERMISSION, format!("the topic[{topic}] sending message is forbidden"));
        }
        let Some(bytes) = b.store.look_message_by_offset(h.offset) else {
            return err(ResponseCode::SYSTEM_ERROR, format!("look message by offset failed, {}", h.offset));
        };
        let Ok(RecordAt::Record(original)) = decode_record(&bytes, false) else {
            return err(ResponseCode::SYSTEM_ERROR, format!("look message by offset failed, {}", h.offset));
        };
        let mut props = properties::parse(original.properties);
        props.entry("RETRY_TOPIC".to_owned()).or_insert_with(|| original.topic.to_owned());
        // Java stores WAIT=false here and so acknowledges before a SYNC flush; the consumer
        // takes the answer as "stored", so ours waits as for any send.
        props.shift_remove(properties::WAIT);
        let max = match h.max_reconsume_times {
            Some(max) if request.version >= VERSION_3_4_9 => max,
            _ => group.retry_max_times,
        };
        let delay_level = if original.reconsume_times >= max || h.delay_level < 0 {
            b.metrics.on_send_to_dlq(&h.group, h.origin_topic.as_deref().unwrap_or(original.topic));
            topic = dlq_topic;
            queue_id = 0;
            b.topics.create_topic_in_send_message_back_method(&topic, 1, perm::READ | perm::WRITE, 0);
            0
        } else if h.delay_level == 0 {
            3 + original.reconsume_times
        } else {
            h.delay_level
        };
        props.insert(properties::DELAY.to_owned(), delay_level.to_string());
        let origin = offset_message_id(original.store_host, original.physical_offset);
        props.entry("ORIGIN_MESSAGE_ID".to_owned()).or_insert(origin);
        let mut msg = original.to_message();
        msg.topic = topic.into_string();
        msg.queue_id = queue_id;
        msg.prepared_transaction_offset = 0;
        msg.reconsume_times = original.reconsume_times + 1;
        msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let answer_to = skeleton(request);
        // As Java: counted under the message's own topic (its first one for a retry).
        let back_topic = props.get("RETRY_TOPIC").cloned().unwrap_or_else(|| original.topic.to_owned());
        let origin = Origin::SendBack { group: h.group.to_string(), back_topic };
        // The pipeline puts it in the schedule topic for its delay level. As Java's send-back: the
        // store's result decides; the slaves' is not asked for.
        b.put.put_and_answer(vec![msg], origin, Reply::to(channel, request), move |r, _, _| match r.status {
            PutStatus::PutOk => RemotingCommand::response_to(&answer_to, ResponseCode::SUCCESS),
            status => RemotingCommand::error_response(&answer_to, ResponseCode::SYSTEM_ERROR, format!("{status:?}")),
        })
    }
}

/// Java's `msgCheck`, shared by sends and replies: the broker takes writes, the topic may be sent
/// to and exists (or is auto-created), and the queue id is in range. Gives the topic's config and
/// the queue to write (a random one when the producer left it to the broker).
pub(crate) fn msg_check(b: &SendContext, channel: &Channel, h: &SendMessageRequestHeader) -> Result<(TopicConfig, i32), (ResponseCode, String)> {
    if !b.is_writeable() {
        return Err((ResponseCode::NO_PERMISSION, format!("the broker[{}] sending message is forbidden", b.config().broker_ip1)));
    }
    // The topic's characters and length were checked when the header was decoded (TopicName).
    if h.topic == system_topic::AUTO_CREATE_TEMPLATE {
        return Err((ResponseCode::SYSTEM_ERROR, format!("the topic[{}] is conflict with system topic.", h.topic)));
    }
    if system_topic::is_not_allowed_send(&h.topic) {
        return Err((ResponseCode::NO_PERMISSION, format!("Sending message to topic[{}] is forbidden.", h.topic)));
    }
    let Some(topic) = topic_config(b, channel, h) else {
        return Err((ResponseCode::TOPIC_NOT_EXIST, format!("topic[{}] not exist, apply first please!{FAQ_SUFFIX}", h.topic)));
    };
    let max_queues = topic.write_queue_nums.max(topic.read_queue_nums);
    let queue_id = if h.queue_id < 0 { random_queue(topic.write_queue_nums) } else { h.queue_id };
    if queue_id >= max_queues {
        return Err((ResponseCode::SYSTEM_ERROR, format!("request queueId[{queue_id}] is illegal, {topic:?} Producer: {}", channel.remote_addr())));
    }
    Ok((topic, queue_id))
}

/// The topic's config, auto-creating it from its template (or as a retry topic) as Java does;
/// a new topic is registered with the name servers at once.
fn topic_config(b: &SendContext, channel: &Channel, h: &SendMessageRequestHeader) -> Option<TopicConfig> {
    if let Some(tc) = b.topics.select(&h.topic) {
        return Some(tc);
    }
    let remote = channel.remote_addr().to_string();
    // As Java, asked even when auto-creation is off: the template then loses INHERIT.
    let auto_create = b.config().auto_create_topic_enable;
    let mut obtained = b.topics.create_topic_in_send_message_method(&h.topic, &h.default_topic, &remote, h.default_topic_queue_nums, 0, auto_create);
    if obtained.is_none() && h.topic.starts_with(system_topic::RETRY_GROUP_TOPIC_PREFIX) {
        obtained = Some(b.topics.create_topic_in_send_message_back_method(&h.topic, 1, perm::READ | perm::WRITE, 0));
    }
    let obtained = obtained?;
    if obtained.was_created() {
        b.membership.register_soon(true);
    }
    Some(obtained.into_config())
}

/// What Java 5.x's `buildMsgContext` adds to every message a producer sends (and so what it stores
/// and pushes): the broker's region and trace switch. The 5.x client's consume-trace hook skips
/// messages without a region, so without these no consumer trace is ever written.
pub(crate) fn add_region_and_trace_switch(config: &BrokerConfig, props: &str) -> String {
    properties::with_set(props, &[(MSG_REGION, &config.region_id), (TRACE_ON, &config.trace_on.to_string())])
}

/// Java's `MessageConst.PROPERTY_MSG_REGION` and `PROPERTY_TRACE_SWITCH`.
pub(crate) const MSG_REGION: &str = "MSG_REGION";
pub(crate) const TRACE_ON: &str = "TRACE_ON";

/// What a response takes from its request (code, version, opaque, flag, serialize type), without
/// the body and header fields, for an answer built later.
pub(crate) fn skeleton(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand {
        code: request.code,
        version: request.version,
        opaque: request.opaque,
        flag: request.flag,
        serialize_type: request.serialize_type,
        ..Default::default()
    }
}

/// Brokers honour `maxReconsumeTimes` from clients at least this new (Java `V3_4_9`).
const VERSION_3_4_9: i32 = 121;

fn set_property(msg: &mut MessageToStore, name: &str, value: &str) {
    let mut props = properties::parse(&msg.properties);
    props.insert(name.to_owned(), value.to_owned());
    msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
}

fn random_queue(write_queue_nums: i32) -> i32 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    (nanos % write_queue_nums.max(1) as u32) as i32
}

/// The entries of a SEND_BATCH_MESSAGE body: `TOTALSIZE i32 | MAGIC i32 | BODYCRC i32 | FLAG i32 |
/// BODYLEN i32 + body | PROPLEN i16 + properties`. Each becomes a message sharing the request's
/// topic, queue and hosts; we do not append the wrapper's properties (its UNIQ_KEY would
/// override every inner one, Java issue #9416).
fn split_batch(base: &MessageToStore) -> Result<Vec<MessageToStore>, String> {
    let mut buf: Bytes = base.body.clone();
    // What the broker adds to the wrapper, Java 5.x appends to every inner message.
    let added: Vec<(&str, &str)> =
        [MSG_REGION, TRACE_ON, "CLUSTER"].iter().filter_map(|name| properties::get(&base.properties, name).map(|v| (*name, v))).collect();
    let mut out = Vec::new();
    while buf.has_remaining() {
        if buf.remaining() < 22 {
            return Err("batch body is truncated".into());
        }
        let total = buf.get_i32();
        let _magic = buf.get_i32();
        let _crc = buf.get_i32();
        let flag = buf.get_i32();
        let body_len = usize::try_from(buf.get_i32()).map_err(|_| "negative body length in batch")?;
        if buf.remaining() < body_len + 2 {
            return Err("batch entry body is truncated".into());
        }
        let body = buf.split_to(body_len);
        let props_len = usize::try_from(buf.get_i16()).map_err(|_| "negative properties length in batch")?;
        if buf.remaining() < props_len {
            return Err("batch entry properties are truncated".into());
        }
        let props = buf.split_to(props_len);
        let props = std::str::from_utf8(&props).map_err(|_| "batch entry properties are not UTF-8")?;
        if total as usize != 20 + body_len + 2 + props_len {
            return Err(format!("batch entry size {total} does not match its content"));
        }
        out.push(MessageToStore {
            topic: base.topic.clone(),
            queue_id: base.queue_id,
            flag,
            sys_flag: base.sys_flag,
            born_timestamp: base.born_timestamp,
            born_host: base.born_host,
            store_host: base.store_host,
            reconsume_times: base.reconsume_times,
            prepared_transaction_offset: base.prepared_transaction_offset,
            body,
            // Rewritten in one pass (the map round trip's result, without the map).
            properties: properties::with_set(props, &added),
        });
    }
    if out.is_empty() {
        return Err("empty batch".into());
    }
    Ok(out)
}

#[cfg(test)]
#[path = "send_tests.rs"]
mod tests;
