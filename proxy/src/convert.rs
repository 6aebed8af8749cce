//! gRPC messages to the broker's message properties and back, receipt handles, and the hashes
//! Java's proxy picks queues with.

use std::collections::HashMap;

use md5::{Digest as _, Md5};
use store::message::properties;

use crate::config::ProxyConfig;
use crate::pb;
use crate::pb::Code;

/// Message property names (Java's `MessageConst`), as the store names them.
pub use store::message::properties as names;

/// Java's `MessageConst.STRING_HASH_SET`: property names a user may not set, and that are not
/// shown as user properties.
const SYSTEM_PROPERTIES: &[&str] = &[
    "TRACE_ON",
    "MSG_REGION",
    "KEYS",
    "TAGS",
    "WAIT",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "TRAN_MSG",
    "PGROUP",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "BUYER_ID",
    "ORIGIN_MESSAGE_ID",
    "TRANSFER_FLAG",
    "CORRECTION_FLAG",
    "MQ2_FLAG",
    "RECONSUME_TIME",
    "UNIQ_KEY",
    "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME",
    "POP_CK",
    "POP_CK_OFFSET",
    "1ST_POP_TIME",
    "TRAN_PREPARED_QUEUE_OFFSET",
    "DUP_INFO",
    "EXTEND_UNIQ_INFO",
    "INSTANCE_ID",
    "CORRELATION_ID",
    "REPLY_TO_CLIENT",
    "TTL",
    "ARRIVE_TIME",
    "PUSH_REPLY_TIME",
    "CLUSTER",
    "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET",
    "TIMER_DELAY_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS",
    "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES",
    "TIMER_OUT_MS",
    "TIMER_DEL_UNIQKEY",
    "TIMER_DELAY_LEVEL",
    "__BORNHOST",
    "BORN_TIMESTAMP",
    "DLQ_ORIGIN_TOPIC",
    "DLQ_ORIGIN_MESSAGE_ID",
    "__CRC32#",
];

pub fn is_system_property(name: &str) -> bool {
    SYSTEM_PROPERTIES.contains(&name)
}

/// Java's `MessageSysFlag`.
pub const COMPRESSED_FLAG: i32 = 0x1;
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;

/// A refusal with Java's code and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: Code,
    pub message: String,
}

impl Refusal {
    pub fn new(code: Code, message: impl Into<String>) -> Refusal {
        Refusal { code, message: message.into() }
    }

    pub fn status(&self) -> pb::Status {
        pb::Status { code: self.code as i32, message: self.message.clone() }
    }
}

pub fn ok_status() -> pb::Status {
    status(Code::Ok, "OK")
}

pub fn status(code: Code, message: impl Into<String>) -> pb::Status {
    pb::Status { code: code as i32, message: message.into() }
}

/// A message to send: what SEND_MESSAGE_V2 needs besides the queue.
#[derive(Clone, Debug)]
pub struct Outgoing {
    pub topic: String,
    pub body: Vec<u8>,
    pub properties: String,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub reconsume_times: i32,
    pub message_id: String,
    pub message_group: Option<String>,
    pub message_type: pb::MessageType,
}

fn has_control_character(s: &str) -> bool {
    s.chars().any(|c| c.is_control())
}

fn is_blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}

fn millis(t: &prost_types::Timestamp) -> i64 {
    t.seconds.saturating_mul(1000).saturating_add(i64::from(t.nanos) / 1_000_000)
}

pub fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds: ms.div_euclid(1000), nanos: (ms.rem_euclid(1000) * 1_000_000) as i32 }
}

pub fn duration_ms(d: &prost_types::Duration) -> i64 {
    d.seconds.saturating_mul(1000).saturating_add(i64::from(d.nanos) / 1_000_000)
}

pub fn duration(ms: i64) -> prost_types::Duration {
    prost_types::Duration { seconds: ms.div_euclid(1000), nanos: (ms.rem_euclid(1000) * 1_000_000) as i32 }
}

/// Java's `GrpcValidator.validateTag`.
fn validate_tag(tag: &str) -> Result<(), Refusal> {
    if tag.is_empty() {
        return Ok(());
    }
    if is_blank(tag) {
        return Err(Refusal::new(Code::IllegalMessageTag, "tag cannot be the char sequence of whitespace"));
    }
    if tag.contains('|') {
        return Err(Refusal::new(Code::IllegalMessageTag, "tag cannot contain '|'"));
    }
    if has_control_character(tag) {
        return Err(Refusal::new(Code::IllegalMessageTag, "tag cannot contain control character"));
    }
    Ok(())
}

/// Java's `SendMessageActivity.buildMessage` for one message: checks in Java's order, then the
/// properties the broker stores. `producer_group` is the topic (Java's proxy uses it so).
pub fn outgoing(m: &pb::Message, config: &ProxyConfig, remote_addr: &str, now_ms: i64) -> Result<Outgoing, Refusal> {
    let topic = m.topic.as_ref().map(|t| t.name.clone()).unwrap_or_default();
    if config.enable_message_body_empty_check && m.body.is_empty() {
        return Err(Refusal::new(Code::MessageBodyEmpty, "message body cannot be empty"));
    }
    if config.max_message_size > 0 && m.body.len() > config.max_message_size {
        return Err(Refusal::new(Code::MessageBodyTooLarge, format!("message body cannot exceed the max {}", config.max_message_size)));
    }
    let sys = m.system_properties.clone().unwrap_or_default();
    if m.user_properties.len() > config.user_property_max_num {
        return Err(Refusal::new(Code::MessagePropertiesTooLarge, format!("too many user properties, max is {}", config.user_property_max_num)));
    }
    let mut user_size = 0usize;
    let mut props: Vec<(String, String)> = Vec::new();
    let mut user: Vec<(&String, &String)> = m.user_properties.iter().collect();
    user.sort();
    for (k, v) in user {
        if is_system_property(k) {
            return Err(Refusal::new(Code::IllegalMessagePropertyKey, format!("property is used by system: {k}")));
        }
        if has_control_character(k) {
            return Err(Refusal::new(Code::IllegalMessagePropertyKey, "the key of property cannot contain control character"));
        }
        if has_control_character(v) {
            return Err(Refusal::new(Code::IllegalMessagePropertyKey, "the value of property cannot contain control character"));
        }
        user_size += k.len() + v.len();
        props.push((k.clone(), v.clone()));
    }
    let tag = sys.tag.clone().unwrap_or_default();
    validate_tag(&tag)?;
    if !tag.is_empty() {
        props.push((names::TAGS.into(), tag.clone()));
    }
    user_size += tag.len();
    for key in &sys.keys {
        if !key.is_empty() && is_blank(key) {
            return Err(Refusal::new(Code::IllegalMessageKey, "key cannot be the char sequence of whitespace"));
        }
        if has_control_character(key) {
            return Err(Refusal::new(Code::IllegalMessageKey, "key cannot contain control character"));
        }
        user_size += key.len();
    }
    if !sys.keys.is_empty() {
        props.push((names::KEYS.into(), sys.keys.join(" ")));
    }
    if user_size > config.max_user_property_size {
        return Err(Refusal::new(
            Code::MessagePropertiesTooLarge,
            format!("the total size of user property is too large, max is {}", config.max_user_property_size),
        ));
    }
    if is_blank(&sys.message_id) {
        return Err(Refusal::new(Code::IllegalMessageId, "message id cannot be empty"));
    }
    props.push((names::UNIQ_KEY.into(), sys.message_id.clone()));
    let message_type = pb::MessageType::try_from(sys.message_type).unwrap_or(pb::MessageType::Unspecified);
    if message_type == pb::MessageType::Transaction {
        props.push((names::TRAN_MSG.into(), "true".into()));
        if let Some(d) = &sys.orphaned_transaction_recovery_duration {
            let secs = d.seconds;
            if config.max_transaction_recovery_second > 0 && secs > config.max_transaction_recovery_second {
                return Err(Refusal::new(
                    Code::BadRequest,
                    format!("the max transaction recovery time of message is too large, max is {}", config.max_transaction_recovery_second),
                ));
            }
            props.push((names::CHECK_IMMUNITY_TIME_IN_SECONDS.into(), secs.to_string()));
        }
    }
    if let Some(at) = &sys.delivery_timestamp {
        let at_ms = millis(at);
        if config.max_delay_time_mills > 0 && at_ms - now_ms > config.max_delay_time_mills {
            return Err(Refusal::new(Code::IllegalDeliveryTime, format!("the max delay time of message is too large, max is {}", config.max_delay_time_mills)));
        }
        props.push((names::TIMER_DELIVER_MS.into(), at_ms.to_string()));
    }
    props.push((names::RECONSUME_TIME.into(), sys.delivery_attempt.unwrap_or(0).to_string()));
    props.push((names::PGROUP.into(), topic.clone()));
    let group = sys.message_group.clone().filter(|g| !g.is_empty());
    if let Some(g) = &group {
        if is_blank(g) {
            return Err(Refusal::new(Code::IllegalMessageGroup, "message group cannot be the char sequence of whitespace"));
        }
        if config.max_message_group_size > 0 && g.len() >= config.max_message_group_size {
            return Err(Refusal::new(Code::IllegalMessageGroup, format!("message group exceed the max size {}", config.max_message_group_size)));
        }
        if has_control_character(g) {
            return Err(Refusal::new(Code::IllegalMessageGroup, "message group cannot contain control character"));
        }
        props.push((names::SHARDING_KEY.into(), g.clone()));
    }
    if let Some(trace) = sys.trace_context.as_ref().filter(|t| !t.is_empty()) {
        props.push((names::TRACE_CONTEXT.into(), trace.clone()));
    }
    let born_host = if is_blank(&sys.born_host) { remote_addr.to_owned() } else { sys.born_host.clone() };
    if !is_blank(&born_host) {
        props.push((names::BORN_HOST.into(), born_host));
    }
    let born_timestamp = sys.born_timestamp.as_ref().map(millis).unwrap_or(now_ms);
    if sys.born_timestamp.is_some() {
        props.push((names::BORN_TIMESTAMP.into(), born_timestamp.to_string()));
    }
    let mut sys_flag = 0;
    if sys.body_encoding == pb::Encoding::Gzip as i32 {
        sys_flag |= COMPRESSED_FLAG;
    }
    if message_type == pb::MessageType::Transaction {
        sys_flag |= TRANSACTION_PREPARED_TYPE;
    }
    Ok(Outgoing {
        topic,
        body: m.body.clone(),
        properties: properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        sys_flag,
        born_timestamp,
        reconsume_times: sys.delivery_attempt.unwrap_or(0),
        message_id: sys.message_id,
        message_group: group,
        message_type,
    })
}

/// Java's `TopicMessageType.parseFromMessageProperty`: the type a message's properties make it.
pub fn type_of(o: &Outgoing) -> &'static str {
    message_type_of(&o.properties)
}

/// Java's `TopicMessageType.parseFromMessageProperty`, over a message's serialized properties.
pub fn message_type_of(p: &str) -> &'static str {
    if properties::get(p, names::TRAN_MSG) == Some("true") {
        "TRANSACTION"
    } else if [names::DELAY, names::TIMER_DELIVER_MS, names::TIMER_DELAY_SEC, names::TIMER_DELAY_MS].iter().any(|n| properties::get(p, n).is_some()) {
        "DELAY"
    } else if properties::get(p, names::SHARDING_KEY).is_some() {
        "FIFO"
    } else {
        "NORMAL"
    }
}

/// Java's `DefaultTopicMessageTypeValidator`: `expected` is the topic's type (`UNSPECIFIED` when
/// there is no such topic), `actual` the message's; the error is the `ProxyException`'s message.
pub fn check_message_type(expected: &str, actual: &str) -> Result<(), String> {
    if actual == "UNSPECIFIED" || (actual != expected && expected != "MIXED") {
        return Err(format!("TopicMessageType validate failed, the expected type is {expected}, but actual type is {actual}"));
    }
    Ok(())
}

fn socket_text(a: &std::net::SocketAddr) -> String {
    a.to_string()
}

/// Java's `GrpcConverter.buildMessage` from a stored record (a popped message).
pub fn incoming(r: &store::message::record::DecodedRecord<'_>, now_ms: i64) -> pb::Message {
    let props = properties::parse(r.properties);
    let get = |k: &str| props.get(k).map(String::as_str);
    let user_properties: HashMap<String, String> = props.iter().filter(|(k, _)| !is_system_property(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let message_type = if get(names::TRAN_MSG) == Some("true") {
        pb::MessageType::Transaction
    } else if get(names::DELAY).is_some() || get(names::TIMER_DELIVER_MS).is_some() || get(names::TIMER_DELAY_SEC).is_some() {
        pb::MessageType::Delay
    } else if get(names::SHARDING_KEY).is_some() {
        pb::MessageType::Fifo
    } else {
        pb::MessageType::Normal
    };
    let delivery_timestamp = match get(names::TIMER_DELAY_SEC).and_then(|s| s.parse::<i64>().ok()) {
        Some(sec) => Some(timestamp(now_ms + sec.saturating_mul(1000))),
        None => get(names::TIMER_DELIVER_MS).and_then(|s| s.parse::<i64>().ok()).map(timestamp),
    };
    let md5 = Md5::digest(r.body);
    let checksum: String = md5.iter().map(|b| format!("{b:02X}")).collect();
    let born_host = get(names::BORN_HOST).filter(|h| !is_blank(h)).map(str::to_owned).unwrap_or_else(|| socket_text(&r.born_host));
    let dead_letter_queue = match (get(names::DLQ_ORIGIN_TOPIC), get(names::DLQ_ORIGIN_MESSAGE_ID)) {
        (Some(topic), Some(id)) => Some(pb::DeadLetterQueue { topic: topic.to_owned(), message_id: id.to_owned() }),
        _ => None,
    };
    let message_id = get(names::UNIQ_KEY).map(str::to_owned).unwrap_or_else(|| store::message::offset_message_id(r.store_host, r.physical_offset));
    let system_properties = pb::SystemProperties {
        tag: get(names::TAGS).map(str::to_owned),
        keys: get(names::KEYS).map(|k| k.split(' ').map(str::to_owned).collect()).unwrap_or_default(),
        message_id,
        body_digest: Some(pb::Digest { r#type: pb::DigestType::Md5 as i32, checksum }),
        body_encoding: if r.sys_flag & COMPRESSED_FLAG != 0 { pb::Encoding::Gzip } else { pb::Encoding::Identity } as i32,
        message_type: message_type as i32,
        born_timestamp: Some(timestamp(r.born_timestamp)),
        born_host,
        store_timestamp: Some(timestamp(r.store_timestamp)),
        store_host: socket_text(&r.store_host),
        delivery_timestamp,
        receipt_handle: get(names::POP_CK).map(str::to_owned),
        queue_id: r.queue_id,
        queue_offset: Some(r.queue_offset),
        invisible_duration: None,
        delivery_attempt: Some(r.reconsume_times.saturating_add(1)),
        message_group: get(names::SHARDING_KEY).map(str::to_owned),
        trace_context: get(names::TRACE_CONTEXT).map(str::to_owned),
        orphaned_transaction_recovery_duration: None,
        dead_letter_queue,
    };
    let (namespace, name) = (String::new(), r.topic.to_owned());
    pb::Message {
        topic: Some(pb::Resource { resource_namespace: namespace, name }),
        user_properties,
        system_properties: Some(system_properties),
        body: r.body.to_vec(),
    }
}

/// The receipt handle of a popped message: the broker's `extraInfo` (`POP_CK`), fields separated
/// by a space: check point queue offset, pop time, invisible time, revive queue, retry marker
/// (0 the topic, 1 a v1 retry topic, 2 a v2 one), broker name, queue id, queue offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiptHandle {
    pub ck_queue_offset: i64,
    pub pop_time: i64,
    pub invisible_time: i64,
    pub revive_qid: i32,
    pub retry: String,
    pub broker_name: String,
    pub queue_id: i32,
    pub offset: i64,
    /// The message's commit-log offset (Java's proxy appends it: a ninth field).
    pub commit_log_offset: Option<i64>,
    pub text: String,
}

impl ReceiptHandle {
    /// Java's `ReceiptHandle.decode`; what it throws becomes INTERNAL_SERVER_ERROR with the
    /// exception's message (Java's proxy adds the exception's class and frame, not repeated here).
    pub fn parse(text: &str) -> Result<ReceiptHandle, Refusal> {
        let f: Vec<&str> = text.split(' ').collect();
        if f.len() < 8 {
            return Err(Refusal::new(Code::InternalServerError, format!("Parse failed, dataList size {}", f.len())));
        }
        fn num<T: std::str::FromStr>(s: &str) -> Result<T, Refusal> {
            s.parse().map_err(|_| Refusal::new(Code::InternalServerError, format!("For input string: \"{s}\"")))
        }
        Ok(ReceiptHandle {
            ck_queue_offset: num(f[0])?,
            pop_time: num(f[1])?,
            invisible_time: num(f[2])?,
            revive_qid: num(f[3])?,
            retry: f[4].to_owned(),
            broker_name: f[5].to_owned(),
            queue_id: num(f[6])?,
            offset: num(f[7])?,
            commit_log_offset: match f.get(8) {
                Some(o) => Some(num(o)?),
                None => None,
            },
            text: text.to_owned(),
        })
    }

    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.pop_time.saturating_add(self.invisible_time) <= now_ms
    }

    /// Java's `ExtraInfoUtil.getRealTopic`: the topic the message was popped from.
    pub fn real_topic(&self, topic: &str, group: &str) -> String {
        match self.retry.as_str() {
            "1" => format!("%RETRY%{group}_{topic}"),
            "2" => format!("%RETRY%{group}+{topic}"),
            _ => topic.to_owned(),
        }
    }

    /// The handle after a change of invisible time (Java's `buildExtraInfo` with the answer).
    pub fn renewed(&self, pop_time: i64, invisible_time: i64, revive_qid: i32) -> String {
        let mut h =
            format!("{} {} {} {} {} {} {} {}", self.offset, pop_time, invisible_time, revive_qid, self.retry, self.broker_name, self.queue_id, self.offset);
        if let Some(o) = self.commit_log_offset {
            h.push_str(&format!(" {o}"));
        }
        h
    }
}

/// The broker named in a recall handle (Java's `RecallMessageHandle.decodeHandle`: URL-safe
/// base64 of `v1 topic brokerName timestamp messageId`), `None` when it is not one.
pub fn recall_handle_broker(handle: &str) -> Option<String> {
    use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
    use base64::engine::DecodePaddingMode;
    use base64::Engine as _;
    // Java's URL decoder takes the padding or leaves it out.
    const URL_SAFE: GeneralPurpose =
        GeneralPurpose::new(&base64::alphabet::URL_SAFE, GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent));
    if handle.is_empty() {
        return None;
    }
    let raw = URL_SAFE.decode(handle.as_bytes()).ok()?;
    let raw = String::from_utf8_lossy(&raw);
    let items: Vec<&str> = raw.split(' ').collect();
    if items.first() != Some(&"v1") || items.len() < 5 {
        return None;
    }
    Some(items[2].to_owned())
}

/// The retry marker of a topic in receipt handles and offset infos: `2` a v2 pop retry topic
/// (`%RETRY%group+topic`), `1` another retry topic, `0` any other.
pub fn retry_marker(topic: &str) -> &'static str {
    if topic.starts_with("%RETRY%") {
        if topic.contains('+') {
            "2"
        } else {
            "1"
        }
    } else {
        "0"
    }
}

/// A pop answer's header, what receipt handles are made of (Java's client builds them so in
/// `processPopResponse`; the broker writes `POP_CK` itself only on retry messages it re-encodes).
#[derive(Clone, Debug, Default)]
pub struct PopAnswer {
    pub broker_name: String,
    pub pop_time: i64,
    pub invisible_time: i64,
    pub revive_qid: i32,
    /// `retry@queueId` to the check point's start offset.
    pub start_offsets: HashMap<String, i64>,
    /// `retry@queueId` or `retry@qo<queueId>%<offset>` to the times an orderly message was popped.
    pub order_counts: HashMap<String, i32>,
}

/// `;`-separated `retry key value` entries as `retry@key` to value.
fn offset_entries(info: &str) -> impl Iterator<Item = (String, &str)> {
    info.split(';').filter_map(|entry| {
        let mut f = entry.split(' ');
        match (f.next(), f.next(), f.next(), f.next()) {
            (Some(retry), Some(key), Some(value), None) => Some((format!("{retry}@{key}"), value)),
            _ => None,
        }
    })
}

impl PopAnswer {
    pub fn from_response(broker_name: &str, r: &remoting::RemotingCommand) -> PopAnswer {
        let num = |k: &str| r.ext(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
        PopAnswer {
            broker_name: broker_name.to_owned(),
            pop_time: num("popTime"),
            invisible_time: num("invisibleTime"),
            revive_qid: num("reviveQid") as i32,
            start_offsets: offset_entries(r.ext("startOffsetInfo").unwrap_or_default()).filter_map(|(k, v)| Some((k, v.parse().ok()?))).collect(),
            order_counts: offset_entries(r.ext("orderCountInfo").unwrap_or_default()).filter_map(|(k, v)| Some((k, v.parse().ok()?))).collect(),
        }
    }

    /// The receipt handle of a popped message without `POP_CK`, and for an orderly pop the times
    /// it was popped before (its reconsume times).
    pub fn handle(&self, topic: &str, queue_id: i32, queue_offset: i64) -> (String, Option<i32>) {
        let marker = retry_marker(topic);
        let queue_key = format!("{marker}@{queue_id}");
        let offset_key = format!("{marker}@qo{queue_id}%{queue_offset}");
        let start = self.start_offsets.get(&queue_key).copied().unwrap_or(queue_offset);
        let handle = format!("{start} {} {} {} {marker} {} {queue_id} {queue_offset}", self.pop_time, self.invisible_time, self.revive_qid, self.broker_name);
        let count = self.order_counts.get(&offset_key).or_else(|| self.order_counts.get(&queue_key)).copied().filter(|c| *c > 0);
        (handle, count)
    }
}

/// Java's `String.hashCode`.
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Guava's `Hashing.consistentHash(long, int)`, which Java's proxy picks a FIFO group's queue by.
pub fn consistent_hash(input: i64, buckets: i32) -> i32 {
    let mut state = input;
    let mut candidate: i32 = 0;
    loop {
        state = state.wrapping_mul(2862933555777941757).wrapping_add(1);
        let next_double = f64::from(((state as u64) >> 33) as i32 + 1) / f64::from(1u32 << 31);
        let next = (f64::from(candidate + 1) / next_double) as i32;
        if next >= 0 && next < buckets {
            candidate = next;
        } else {
            return candidate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_java() {
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("abc"), 96354);
        assert_eq!(java_hash("hello world"), 1794106052);
    }

    #[test]
    fn consistent_hash_stays_in_range_and_is_stable() {
        for i in -50..50i64 {
            let b = consistent_hash(i, 4);
            assert!((0..4).contains(&b));
            assert_eq!(b, consistent_hash(i, 4));
        }
        // Guava: consistentHash(x, 1) is 0.
        assert_eq!(consistent_hash(12345, 1), 0);
    }

    #[test]
    fn a_pop_answer_makes_java_clients_receipt_handles() {
        let r = remoting::RemotingCommand::request(remoting::RequestCode(0))
            .with_ext("popTime", "1700000000000")
            .with_ext("invisibleTime", "30000")
            .with_ext("reviveQid", "2")
            .with_ext("startOffsetInfo", "0 1 40;1 0 7")
            .with_ext("orderCountInfo", "0 qo1%41 3");
        let a = PopAnswer::from_response("broker-a", &r);
        assert_eq!(a.handle("T", 1, 41), ("40 1700000000000 30000 2 0 broker-a 1 41".to_owned(), Some(3)));
        assert_eq!(a.handle("%RETRY%G_T", 0, 9).0, "7 1700000000000 30000 2 1 broker-a 0 9");
    }

    #[test]
    fn receipt_handles_parse_and_renew() {
        let h = ReceiptHandle::parse("5 1700000000000 30000 2 1 broker-a 3 5").expect("parses");
        assert_eq!(h.queue_id, 3);
        assert_eq!(h.real_topic("T", "G"), "%RETRY%G_T");
        assert_eq!(h.renewed(1700000001000, 10000, 1), "5 1700000001000 10000 1 1 broker-a 3 5");
        let h = ReceiptHandle::parse("5 1700000000000 30000 2 0 broker-a 3 5 4096").expect("parses");
        assert_eq!(h.commit_log_offset, Some(4096));
        assert_eq!(h.renewed(1, 2, 3), "5 1 2 3 0 broker-a 3 5 4096");
        assert!(ReceiptHandle::parse("1 2 3").is_err());
        assert!(ReceiptHandle::parse("a b c d e f g h").is_err());
    }

    #[test]
    fn a_message_without_id_or_with_a_system_property_is_refused() {
        let config = ProxyConfig::default();
        let mut m = pb::Message {
            topic: Some(pb::Resource { resource_namespace: String::new(), name: "T".into() }),
            user_properties: HashMap::new(),
            system_properties: Some(pb::SystemProperties::default()),
            body: b"x".to_vec(),
        };
        assert_eq!(outgoing(&m, &config, "", 0).map(|_| ()).unwrap_err().code, Code::IllegalMessageId);
        if let Some(s) = m.system_properties.as_mut() {
            s.message_id = "ID".into();
        }
        m.user_properties.insert("UNIQ_KEY".into(), "x".into());
        assert_eq!(outgoing(&m, &config, "", 0).map(|_| ()).unwrap_err().code, Code::IllegalMessagePropertyKey);
        m.user_properties.clear();
        m.body.clear();
        assert_eq!(outgoing(&m, &config, "", 0).map(|_| ()).unwrap_err().code, Code::MessageBodyEmpty);
    }
}
