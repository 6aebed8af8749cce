//! The receipt handle of a popped message (Java's `extraInfo`, the `POP_CK` property) and the pop
//! response's offset infos, as Java 5.3.3's `ExtraInfoUtil` builds and reads them.
//!
//! A receipt handle is eight space-separated fields (seven before 5.x added the message's queue
//! offset): `ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId [queueOffset]`,
//! where `retry` is `0` (normal topic), `1` (v1 pop retry topic) or `2` (v2). Java reads the fields
//! one at a time, so an ack needs only the first six; [`ExtraInfoFields`] reads them the same way,
//! [`ExtraInfo::parse`] needs all seven.
//!
//! The offset infos are `;`-separated `retry queue value` entries; a map key is `retry@queue`.

use std::collections::BTreeMap;
use std::fmt;

use super::names::{self, POP_ORDER_REVIVE_QUEUE, RETRY_GROUP_TOPIC_PREFIX};
use super::PopFormatError;

/// `MessageConst.KEY_SEPARATOR`, between the fields of a receipt handle and of an offset-info entry.
pub const KEY_SEPARATOR: char = ' ';
const ENTRY_SEPARATOR: char = ';';
const QUEUE_OFFSET_PREFIX: &str = "qo";

/// Java's `String.split` on one literal character with no limit: no match gives the whole string
/// (even when empty); otherwise trailing empty parts are dropped.
pub fn java_split(s: &str, separator: char) -> Vec<&str> {
    if !s.contains(separator) {
        return vec![s];
    }
    let mut parts: Vec<&str> = s.split(separator).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// Which topic a popped message came from, as the receipt handle's fifth field says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryMarker {
    /// `0`: the topic itself.
    Normal,
    /// `1`: the v1 pop retry topic `%RETRY%group_topic`.
    RetryV1,
    /// `2`: the v2 pop retry topic `%RETRY%group+topic`.
    RetryV2,
}

impl RetryMarker {
    /// What Java writes for a message read from `topic` (`ExtraInfoUtil.getRetry(topic)`).
    pub fn of_topic(topic: &str) -> Self {
        if names::is_pop_retry_topic_v2(topic) {
            RetryMarker::RetryV2
        } else if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            RetryMarker::RetryV1
        } else {
            RetryMarker::Normal
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RetryMarker::Normal => "0",
            RetryMarker::RetryV1 => "1",
            RetryMarker::RetryV2 => "2",
        }
    }

    /// Strict, as `getRealTopic(topic, cid, retry)`: anything but `0`, `1`, `2` is an error.
    pub fn parse(value: &str) -> Result<Self, PopFormatError> {
        match value {
            "0" => Ok(RetryMarker::Normal),
            "1" => Ok(RetryMarker::RetryV1),
            "2" => Ok(RetryMarker::RetryV2),
            _ => Err(PopFormatError::BadRetryMarker { value: value.to_owned() }),
        }
    }

    /// Lenient, as `getRealTopic(extraInfo, topic, cid)`: anything but `1` and `2` is the topic itself.
    pub fn parse_lenient(value: &str) -> Self {
        Self::parse(value).unwrap_or(RetryMarker::Normal)
    }

    /// The topic the message was read from, given the request's topic and group.
    pub fn real_topic(self, topic: &str, cid: &str) -> String {
        match self {
            RetryMarker::Normal => topic.to_owned(),
            RetryMarker::RetryV1 => names::pop_retry_topic_v1(topic, cid),
            RetryMarker::RetryV2 => names::pop_retry_topic_v2(topic, cid),
        }
    }
}

impl fmt::Display for RetryMarker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn parse_i64(what: &'static str, value: &str) -> Result<i64, PopFormatError> {
    value.parse().map_err(|_| PopFormatError::NotANumber { what, value: value.to_owned() })
}

fn parse_i32(what: &'static str, value: &str) -> Result<i32, PopFormatError> {
    value.parse().map_err(|_| PopFormatError::NotANumber { what, value: value.to_owned() })
}

/// A receipt handle split into its fields, read one at a time as Java's getters do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraInfoFields<'a> {
    text: &'a str,
    fields: Vec<&'a str>,
}

impl<'a> ExtraInfoFields<'a> {
    /// `ExtraInfoUtil.split`.
    pub fn split(extra_info: &'a str) -> Self {
        ExtraInfoFields { text: extra_info, fields: java_split(extra_info, KEY_SEPARATOR) }
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    fn field(&self, index: usize, what: &'static str) -> Result<&'a str, PopFormatError> {
        self.fields.get(index).copied().ok_or_else(|| PopFormatError::ExtraInfoTooShort {
            extra_info: self.text.to_owned(),
            fields: self.fields.len(),
            needed: index + 1,
            what,
        })
    }

    pub fn ck_queue_offset(&self) -> Result<i64, PopFormatError> {
        parse_i64("ckQueueOffset", self.field(0, "ckQueueOffset")?)
    }

    pub fn pop_time(&self) -> Result<i64, PopFormatError> {
        parse_i64("popTime", self.field(1, "popTime")?)
    }

    pub fn invisible_time(&self) -> Result<i64, PopFormatError> {
        parse_i64("invisibleTime", self.field(2, "invisibleTime")?)
    }

    pub fn revive_qid(&self) -> Result<i32, PopFormatError> {
        parse_i32("reviveQid", self.field(3, "reviveQid")?)
    }

    /// The raw fifth field (`getRetry`).
    pub fn retry(&self) -> Result<&'a str, PopFormatError> {
        self.field(4, "retry")
    }

    /// `getRealTopic(extraInfo, topic, cid)`.
    pub fn real_topic(&self, topic: &str, cid: &str) -> Result<String, PopFormatError> {
        Ok(RetryMarker::parse_lenient(self.retry()?).real_topic(topic, cid))
    }

    pub fn broker_name(&self) -> Result<&'a str, PopFormatError> {
        self.field(5, "brokerName")
    }

    pub fn queue_id(&self) -> Result<i32, PopFormatError> {
        parse_i32("queueId", self.field(6, "queueId")?)
    }

    pub fn queue_offset(&self) -> Result<i64, PopFormatError> {
        parse_i64("queueOffset", self.field(7, "queueOffset")?)
    }

    /// `ExtraInfoUtil.isOrder`: the handle of an orderly pop.
    pub fn is_order(&self) -> Result<bool, PopFormatError> {
        Ok(self.revive_qid()? == POP_ORDER_REVIVE_QUEUE)
    }
}

/// A whole receipt handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraInfo {
    /// The queue offset the check point starts at (`startOffset`).
    pub ck_queue_offset: i64,
    pub pop_time: i64,
    pub invisible_time: i64,
    /// The revive queue of the check point, or [`POP_ORDER_REVIVE_QUEUE`] for an orderly pop.
    pub revive_qid: i32,
    pub retry: RetryMarker,
    pub broker_name: String,
    pub queue_id: i32,
    /// The message's own queue offset; absent in seven-field handles.
    pub queue_offset: Option<i64>,
}

impl ExtraInfo {
    /// `buildExtraInfo` (seven fields when `queue_offset` is `None`, eight otherwise); `topic` is the
    /// topic the message was read from (a retry topic sets the marker).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ck_queue_offset: i64,
        pop_time: i64,
        invisible_time: i64,
        revive_qid: i32,
        topic: &str,
        broker_name: &str,
        queue_id: i32,
        queue_offset: Option<i64>,
    ) -> Self {
        ExtraInfo {
            ck_queue_offset,
            pop_time,
            invisible_time,
            revive_qid,
            retry: RetryMarker::of_topic(topic),
            broker_name: broker_name.to_owned(),
            queue_id,
            queue_offset,
        }
    }

    /// Reads a handle of seven or more fields (more than eight are ignored, as Java ignores them);
    /// the retry marker must be `0`, `1` or `2`.
    pub fn parse(extra_info: &str) -> Result<Self, PopFormatError> {
        let f = ExtraInfoFields::split(extra_info);
        Ok(ExtraInfo {
            ck_queue_offset: f.ck_queue_offset()?,
            pop_time: f.pop_time()?,
            invisible_time: f.invisible_time()?,
            revive_qid: f.revive_qid()?,
            retry: RetryMarker::parse(f.retry()?)?,
            broker_name: f.broker_name()?.to_owned(),
            queue_id: f.queue_id()?,
            queue_offset: if f.len() > 7 { Some(f.queue_offset()?) } else { None },
        })
    }

    pub fn is_order(&self) -> bool {
        self.revive_qid == POP_ORDER_REVIVE_QUEUE
    }

    /// The topic the message was read from, given the request's topic and group.
    pub fn real_topic(&self, topic: &str, cid: &str) -> String {
        self.retry.real_topic(topic, cid)
    }
}

impl fmt::Display for ExtraInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} {}",
            self.ck_queue_offset, self.pop_time, self.invisible_time, self.revive_qid, self.retry, self.broker_name, self.queue_id
        )?;
        if let Some(offset) = self.queue_offset {
            write!(f, " {offset}")?;
        }
        Ok(())
    }
}

fn start_entry(info: &mut String, topic: &str) {
    if !info.is_empty() {
        info.push(ENTRY_SEPARATOR);
    }
    info.push_str(RetryMarker::of_topic(topic).as_str());
    info.push(KEY_SEPARATOR);
}

/// `buildStartOffsetInfo`: appends `retry queueId startOffset`.
pub fn append_start_offset_info(info: &mut String, topic: &str, queue_id: i32, start_offset: i64) {
    start_entry(info, topic);
    info.push_str(&format!("{queue_id} {start_offset}"));
}

/// `buildQueueIdOrderCountInfo`: appends `retry queueId orderCount`.
pub fn append_queue_id_order_count_info(info: &mut String, topic: &str, queue_id: i32, order_count: i32) {
    start_entry(info, topic);
    info.push_str(&format!("{queue_id} {order_count}"));
}

/// `buildQueueOffsetOrderCountInfo`: appends `retry qo<queueId>%<queueOffset> orderCount`.
pub fn append_queue_offset_order_count_info(info: &mut String, topic: &str, queue_id: i64, queue_offset: i64, order_count: i32) {
    start_entry(info, topic);
    info.push_str(&format!("{} {order_count}", queue_offset_key_value_key(queue_id, queue_offset)));
}

/// `buildMsgOffsetInfo`: appends `retry queueId o1,o2,...`.
pub fn append_msg_offset_info(info: &mut String, topic: &str, queue_id: i32, msg_offsets: &[i64]) {
    start_entry(info, topic);
    let offsets: Vec<String> = msg_offsets.iter().map(i64::to_string).collect();
    info.push_str(&format!("{queue_id} {}", offsets.join(",")));
}

/// `qo<queueId>%<queueOffset>`.
pub fn queue_offset_key_value_key(queue_id: i64, queue_offset: i64) -> String {
    format!("{QUEUE_OFFSET_PREFIX}{queue_id}%{queue_offset}")
}

/// `getStartOffsetInfoMapKey(topic, key)`: `retry@key`.
pub fn start_offset_info_map_key(topic: &str, key: i64) -> String {
    format!("{}@{key}", RetryMarker::of_topic(topic))
}

/// `getStartOffsetInfoMapKey(topic, popCk, key)`: the retry marker from the message's `POP_CK`
/// property when it has one (a recoded retry message), else from the topic.
pub fn start_offset_info_map_key_with_ck(topic: &str, pop_ck: Option<&str>, key: i64) -> Result<String, PopFormatError> {
    match pop_ck {
        Some(ck) => Ok(format!("{}@{key}", ExtraInfoFields::split(ck).retry()?)),
        None => Ok(start_offset_info_map_key(topic, key)),
    }
}

/// `getQueueOffsetMapKey`: `retry@qo<queueId>%<queueOffset>`.
pub fn queue_offset_map_key(topic: &str, queue_id: i64, queue_offset: i64) -> String {
    format!("{}@{}", RetryMarker::of_topic(topic), queue_offset_key_value_key(queue_id, queue_offset))
}

/// Splits an offset info into `(retry@queue, value)`; empty input gives no entries (Java: null).
fn parse_entries<'a>(info: &'a str, what: &'static str) -> Result<Vec<(String, &'a str)>, PopFormatError> {
    if info.is_empty() {
        return Ok(Vec::new());
    }
    let mut out: Vec<(String, &str)> = Vec::new();
    for entry in java_split(info, ENTRY_SEPARATOR) {
        let fields = java_split(entry, KEY_SEPARATOR);
        let [retry, queue, value] = fields.as_slice() else {
            return Err(PopFormatError::BadOffsetInfoEntry { what, entry: entry.to_owned() });
        };
        let key = format!("{retry}@{queue}");
        if out.iter().any(|(k, _)| *k == key) {
            return Err(PopFormatError::DuplicateOffsetInfoKey { what, key });
        }
        out.push((key, value));
    }
    Ok(out)
}

/// `parseStartOffsetInfo`: `retry@queueId` to start offset.
pub fn parse_start_offset_info(info: &str) -> Result<BTreeMap<String, i64>, PopFormatError> {
    parse_entries(info, "startOffsetInfo")?.into_iter().map(|(k, v)| Ok((k, parse_i64("startOffset", v)?))).collect()
}

/// `parseOrderCountInfo`: `retry@queueId` (or `retry@qo<queueId>%<offset>`) to order count.
pub fn parse_order_count_info(info: &str) -> Result<BTreeMap<String, i32>, PopFormatError> {
    parse_entries(info, "orderCountInfo")?.into_iter().map(|(k, v)| Ok((k, parse_i32("orderCount", v)?))).collect()
}

/// `parseMsgOffsetInfo`: `retry@queueId` to the popped messages' queue offsets.
pub fn parse_msg_offset_info(info: &str) -> Result<BTreeMap<String, Vec<i64>>, PopFormatError> {
    parse_entries(info, "msgOffsetInfo")?
        .into_iter()
        .map(|(k, v)| {
            let offsets = java_split(v, ',').into_iter().map(|o| parse_i64("msgOffset", o)).collect::<Result<Vec<_>, _>>()?;
            Ok((k, offsets))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_split_drops_trailing_empty_parts_only() {
        assert_eq!(java_split("", ' '), vec![""]);
        assert_eq!(java_split("a b  ", ' '), vec!["a", "b"]);
        assert_eq!(java_split(" a", ' '), vec!["", "a"]);
        assert!(java_split("   ", ' ').is_empty());
        assert_eq!(java_split("a  b", ' '), vec!["a", "", "b"]);
    }

    #[test]
    fn a_handle_round_trips_with_and_without_the_queue_offset() {
        for queue_offset in [None, Some(1029)] {
            let info = ExtraInfo::new(1024, 1_700_000_000_123, 60_000, 3, "%RETRY%g+T", "broker-a", 2, queue_offset);
            assert_eq!(ExtraInfo::parse(&info.to_string()), Ok(info.clone()));
            assert_eq!(info.real_topic("T", "g"), "%RETRY%g+T");
        }
    }

    #[test]
    fn an_ack_reads_a_six_field_handle_but_the_whole_parse_refuses_it() {
        let f = ExtraInfoFields::split("5 6 7 8 0 broker-a");
        assert_eq!(f.broker_name(), Ok("broker-a"));
        assert_eq!(f.revive_qid(), Ok(8));
        assert!(matches!(f.queue_id(), Err(PopFormatError::ExtraInfoTooShort { needed: 7, .. })));
        assert!(ExtraInfo::parse("5 6 7 8 0 broker-a").is_err());
        assert!(matches!(ExtraInfo::parse("5 x 7 8 0 b 1"), Err(PopFormatError::NotANumber { what: "popTime", .. })));
        assert!(matches!(ExtraInfo::parse("5 6 7 8 9 b 1"), Err(PopFormatError::BadRetryMarker { .. })));
    }

    #[test]
    fn offset_infos_refuse_bad_and_duplicate_entries() {
        assert!(parse_start_offset_info("").unwrap().is_empty());
        assert!(parse_start_offset_info("0 1").is_err());
        assert!(matches!(parse_start_offset_info("0 1 2;0 1 3"), Err(PopFormatError::DuplicateOffsetInfoKey { .. })));
        assert!(parse_msg_offset_info("0 1 1,,2").is_err());
        assert_eq!(parse_msg_offset_info("0 1 1,2,").unwrap()["0@1"], vec![1, 2]);
        assert!(parse_order_count_info(";0 1 2").is_err());
    }
}
