//! Names and keys of pop consumption (Java 5.3.3's `KeyBuilder`, `PopAckConstants`,
//! `PopMessageProcessor.gen*UniqueId`).

use super::formats::{AckMsg, BatchAckMsg, PopCheckPoint};

/// Prefix of retry topics (`MixAll.RETRY_GROUP_TOPIC_PREFIX`).
pub use remoting::protocol::system_topic::RETRY_GROUP_TOPIC_PREFIX;
/// Prefix of the per-cluster revive topic; the topic is this plus the cluster name.
pub const REVIVE_TOPIC_PREFIX: &str = "rmq_sys_REVIVE_LOG_";
/// The group that consumes the revive topic.
pub const REVIVE_GROUP: &str = "CID_RMQ_SYS_REVIVE_GROUP";
/// The revive queue id an orderly pop puts into its receipt handles (no check point is written).
pub const POP_ORDER_REVIVE_QUEUE: i32 = 999;
/// Tags of the revive log's messages.
pub const CK_TAG: &str = "ck";
pub const ACK_TAG: &str = "ack";
pub const BATCH_ACK_TAG: &str = "bAck";
/// Separator of the keys and unique ids below (`PopAckConstants.SPLIT`).
pub const SPLIT: &str = "@";
/// `PopAckConstants.ackTimeInterval`: a check point message is delivered this long before its
/// revive time.
pub const ACK_TIME_INTERVAL_MS: i64 = 1000;

/// Message properties the pop messages set.
pub use store::message::properties::{POP_CK as PROPERTY_POP_CK, TIMER_DELIVER_MS as PROPERTY_TIMER_DELIVER_MS, UNIQ_KEY as PROPERTY_UNIQ_KEY};

const RETRY_SEPARATOR_V1: char = '_';
const RETRY_SEPARATOR_V2: char = '+';

/// `rmq_sys_REVIVE_LOG_<cluster>`.
pub fn revive_topic(cluster_name: &str) -> String {
    format!("{REVIVE_TOPIC_PREFIX}{cluster_name}")
}

pub fn is_revive_topic(topic: &str) -> bool {
    topic.starts_with(REVIVE_TOPIC_PREFIX)
}

/// The pop retry topic of `topic` for group `cid`: v2 (`%RETRY%cid+topic`) when the broker's
/// `enableRetryTopicV2` is on, else v1 (`%RETRY%cid_topic`).
pub fn pop_retry_topic(topic: &str, cid: &str, enable_retry_v2: bool) -> String {
    if enable_retry_v2 {
        pop_retry_topic_v2(topic, cid)
    } else {
        pop_retry_topic_v1(topic, cid)
    }
}

pub fn pop_retry_topic_v1(topic: &str, cid: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{cid}{RETRY_SEPARATOR_V1}{topic}")
}

pub fn pop_retry_topic_v2(topic: &str, cid: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{cid}{RETRY_SEPARATOR_V2}{topic}")
}

/// Java's `isPopRetryTopicV2`: a retry topic with a `+` anywhere in it.
pub fn is_pop_retry_topic_v2(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) && topic.contains(RETRY_SEPARATOR_V2)
}

/// The topic a pop retry topic of group `cid` retries (`KeyBuilder.parseNormalTopic(topic, cid)`);
/// any other topic is returned as it is. A retry topic that is shorter than its prefix for `cid`
/// (Java throws) also comes back unchanged.
pub fn parse_normal_topic(topic: &str, cid: &str) -> String {
    if !topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        return topic.to_owned();
    }
    let v2 = format!("{RETRY_GROUP_TOPIC_PREFIX}{cid}{RETRY_SEPARATOR_V2}");
    if let Some(rest) = topic.strip_prefix(&v2) {
        return rest.to_owned();
    }
    // Java cuts `%RETRY%` + cid + `_` off by length (UTF-16 units), whatever the topic holds there.
    let prefix_units = RETRY_GROUP_TOPIC_PREFIX.len() + cid.encode_utf16().count() + 1;
    substring_from_utf16(topic, prefix_units).unwrap_or(topic).to_owned()
}

/// `s.substring(units)` in UTF-16 units; `None` past the end or inside a surrogate pair.
fn substring_from_utf16(s: &str, units: usize) -> Option<&str> {
    let mut seen = 0;
    for (i, c) in s.char_indices() {
        if seen == units {
            return Some(&s[i..]);
        }
        if seen > units {
            return None;
        }
        seen += c.len_utf16();
    }
    (seen == units).then_some("")
}

/// `KeyBuilder.parseNormalTopic(retryTopic)`: the part after the `+` of a v2 retry topic with
/// exactly one `+`; anything else unchanged (a v1 retry topic cannot be split without its group).
pub fn parse_normal_topic_v2(retry_topic: &str) -> String {
    match split_v2(retry_topic) {
        Some((_, topic)) => topic.to_owned(),
        None => retry_topic.to_owned(),
    }
}

/// `KeyBuilder.parseGroup`: the group of a v2 retry topic; for anything else the text after
/// `%RETRY%` (for a v1 topic that is `group_topic`, as in Java), or the whole name if it lacks the
/// prefix (Java throws there).
pub fn parse_group(retry_topic: &str) -> String {
    if let Some((group, _)) = split_v2(retry_topic) {
        return group.to_owned();
    }
    retry_topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX).unwrap_or(retry_topic).to_owned()
}

/// `%RETRY%group+topic` into (group, topic), following Java's `split("\\+")` with exactly two
/// parts (trailing empty parts dropped, as Java's split does).
fn split_v2(retry_topic: &str) -> Option<(&str, &str)> {
    if !is_pop_retry_topic_v2(retry_topic) {
        return None;
    }
    let parts = super::extra_info::java_split(retry_topic, RETRY_SEPARATOR_V2);
    match parts.as_slice() {
        [first, second] => first.strip_prefix(RETRY_GROUP_TOPIC_PREFIX).map(|group| (group, *second)),
        _ => None,
    }
}

/// `topic@cid@queueId`: the key of the pop queue lock, the long-polling map and the ack buffer
/// (`KeyBuilder.buildPollingKey`, `PopMessageProcessor`'s `lockKey`).
pub fn polling_key(topic: &str, cid: &str, queue_id: i32) -> String {
    format!("{topic}{SPLIT}{cid}{SPLIT}{queue_id}")
}

/// Java's string concatenation of a possibly null string.
fn or_null(s: Option<&str>) -> &str {
    s.unwrap_or("null")
}

/// The `UNIQ_KEY` of a check point message: `topic@queueId@startOffset@cid@popTime@brokerName@ck`.
pub fn ck_unique_id(ck: &PopCheckPoint) -> String {
    format!(
        "{}@{}@{}@{}@{}@{}@{CK_TAG}",
        or_null(ck.topic.as_deref()),
        ck.queue_id,
        ck.start_offset,
        or_null(ck.cid.as_deref()),
        ck.pop_time,
        or_null(ck.broker_name.as_deref())
    )
}

/// The `UNIQ_KEY` of an ack message: `topic@queueId@ackOffset@group@popTime@brokerName@ack`.
pub fn ack_unique_id(ack: &AckMsg) -> String {
    format!(
        "{}@{}@{}@{}@{}@{}@{ACK_TAG}",
        or_null(ack.topic.as_deref()),
        ack.queue_id,
        ack.ack_offset,
        or_null(ack.consumer_group.as_deref()),
        ack.pop_time,
        or_null(ack.broker_name.as_deref())
    )
}

/// The `UNIQ_KEY` of a batch ack message: `topic@queueId@[o1, o2]@group@popTime@bAck` (the list
/// as Java's `List.toString`; no broker name).
pub fn batch_ack_unique_id(ack: &BatchAckMsg) -> String {
    let offsets: Vec<String> = ack.ack_offset_list.iter().map(i64::to_string).collect();
    format!(
        "{}@{}@[{}]@{}@{}@{BATCH_ACK_TAG}",
        or_null(ack.ack.topic.as_deref()),
        ack.ack.queue_id,
        offsets.join(", "),
        or_null(ack.ack.consumer_group.as_deref()),
        ack.ack.pop_time
    )
}

/// Java's `Character.isWhitespace`: Unicode spaces but not the no-break ones, and the ASCII
/// controls 9-13 and 28-31.
fn java_is_whitespace(c: char) -> bool {
    match c {
        '\u{9}'..='\u{d}' | '\u{1c}'..='\u{1f}' => true,
        '\u{a0}' | '\u{2007}' | '\u{202f}' | '\u{85}' => false,
        _ => c.is_whitespace(),
    }
}

/// The revive service's key joining a check point with its acks (`PopReviveService`): topic, group,
/// queue id, start offset, pop time and broker name run together, no separator.
pub fn revive_merge_key_of_ck(ck: &PopCheckPoint) -> String {
    format!(
        "{}{}{}{}{}{}",
        or_null(ck.topic.as_deref()),
        or_null(ck.cid.as_deref()),
        ck.queue_id,
        ck.start_offset,
        ck.pop_time,
        or_null(ck.broker_name.as_deref())
    )
}

/// The same key for an ack (or a batch ack's fields); an ack without a broker name (blank, as
/// `StringUtils.isNotBlank` sees it) takes `own_broker_name`.
pub fn revive_merge_key_of_ack(ack: &AckMsg, own_broker_name: &str) -> String {
    let broker_name = ack.broker_name.as_deref().filter(|b| !b.chars().all(java_is_whitespace));
    format!(
        "{}{}{}{}{}{}",
        or_null(ack.topic.as_deref()),
        or_null(ack.consumer_group.as_deref()),
        ack.queue_id,
        ack.start_offset,
        ack.pop_time,
        broker_name.unwrap_or(own_broker_name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_topics_parse_back_to_their_topic_and_group() {
        assert_eq!(pop_retry_topic("T", "g", false), "%RETRY%g_T");
        assert_eq!(pop_retry_topic("T", "g", true), "%RETRY%g+T");
        assert_eq!(parse_normal_topic("%RETRY%g_T", "g"), "T");
        assert_eq!(parse_normal_topic("%RETRY%g+T", "g"), "T");
        assert_eq!(parse_normal_topic("T", "g"), "T");
        assert_eq!(parse_normal_topic_v2("%RETRY%g+T"), "T");
        assert_eq!(parse_group("%RETRY%g+T"), "g");
        assert_eq!(parse_group("%RETRY%g_T"), "g_T");
    }

    #[test]
    fn an_ack_meets_its_check_point_under_the_merge_key() {
        let ck = PopCheckPoint {
            topic: Some("T".into()),
            cid: Some("g".into()),
            queue_id: 1,
            start_offset: 10,
            pop_time: 99,
            broker_name: Some("b".into()),
            ..PopCheckPoint::default()
        };
        assert_eq!(revive_merge_key_of_ck(&ck), "Tg11099b");
        let ack = AckMsg {
            topic: Some("T".into()),
            consumer_group: Some("g".into()),
            queue_id: 1,
            start_offset: 10,
            pop_time: 99,
            broker_name: Some(" ".into()),
            ..AckMsg::default()
        };
        assert_eq!(revive_merge_key_of_ack(&ack, "b"), revive_merge_key_of_ck(&ck));
        let no_break = AckMsg { broker_name: Some("\u{a0}".into()), ..ack };
        assert_eq!(revive_merge_key_of_ack(&no_break, "b"), "Tg11099\u{a0}");
    }

    #[test]
    fn malformed_retry_topics_come_back_unchanged() {
        assert_eq!(parse_normal_topic("%RETRY%", "longgroup"), "%RETRY%");
        assert_eq!(parse_normal_topic_v2("%RETRY%a+b+c"), "%RETRY%a+b+c");
        assert_eq!(parse_group("plain"), "plain");
        assert_eq!(parse_normal_topic("%RETRY%ü", "x"), "%RETRY%ü");
        assert_eq!(parse_normal_topic("%RETRY%ü_T", "x"), "T");
        assert_eq!(parse_normal_topic("%RETRY%😀T", "x"), "T");
        assert_eq!(parse_normal_topic("%RETRY%😀T", ""), "%RETRY%😀T");
    }
}
