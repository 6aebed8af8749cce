//! The revive log's message bodies, as Java 5.3.3 writes them with fastjson
//! (`JSON.toJSONString`): `PopCheckPoint` (tag `ck`), `AckMsg` (`ack`) and `BatchAckMsg` (`bAck`),
//! keys as their `@JSONField` names, sorted, nulls left out. A check point also carries the
//! computed `reviveTime` (`popTime + invisibleTime`), which readers ignore. `AckMsg` and
//! `BatchAckMsg` are also read under their long names (`alternateNames`).

use remoting::fastjson::{self, JsonStyle};
use serde::{Deserialize, Serialize};

use super::names::{self, ACK_TAG, ACK_TIME_INTERVAL_MS, BATCH_ACK_TAG, CK_TAG};
use super::PopFormatError;

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &'static str) -> Result<T, PopFormatError> {
    fastjson::from_slice(bytes).map_err(|e| PopFormatError::Json { what, message: e.to_string() })
}

/// A check point: which messages of one queue one pop handed out, and which of them are acked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PopCheckPoint {
    /// The queue offset the pop started at.
    #[serde(rename = "so")]
    pub start_offset: i64,
    #[serde(rename = "pt")]
    pub pop_time: i64,
    #[serde(rename = "it")]
    pub invisible_time: i64,
    /// Bit `i` set: the `i`-th message is acked.
    #[serde(rename = "bm")]
    pub bit_map: i32,
    /// How many messages the pop returned.
    #[serde(rename = "n")]
    pub num: i8,
    #[serde(rename = "q")]
    pub queue_id: i32,
    #[serde(rename = "t")]
    pub topic: Option<String>,
    /// The consumer group.
    #[serde(rename = "c")]
    pub cid: Option<String>,
    /// The revive queue offset the check point was stored at.
    #[serde(rename = "ro")]
    pub revive_offset: i64,
    /// Each message's queue offset minus `start_offset` (absent in old check points, whose
    /// messages are consecutive).
    #[serde(rename = "d")]
    pub queue_offset_diff: Option<Vec<i32>>,
    #[serde(rename = "bn")]
    pub broker_name: Option<String>,
    /// How often the revive service has put this check point back (a number, as a string).
    #[serde(rename = "rp")]
    pub re_put_times: Option<String>,
}

/// The keys in fastjson's order, with the computed `reviveTime`.
#[derive(Serialize)]
struct CheckPointOut<'a> {
    bm: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    bn: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    c: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    d: Option<&'a [i32]>,
    it: i64,
    n: i8,
    pt: i64,
    q: i32,
    #[serde(rename = "reviveTime")]
    revive_time: i64,
    ro: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    rp: Option<&'a str>,
    so: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    t: Option<&'a str>,
}

impl Serialize for PopCheckPoint {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        CheckPointOut {
            bm: self.bit_map,
            bn: self.broker_name.as_deref(),
            c: self.cid.as_deref(),
            d: self.queue_offset_diff.as_deref(),
            it: self.invisible_time,
            n: self.num,
            pt: self.pop_time,
            q: self.queue_id,
            revive_time: self.revive_time(),
            ro: self.revive_offset,
            rp: self.re_put_times.as_deref(),
            so: self.start_offset,
            t: self.topic.as_deref(),
        }
        .serialize(serializer)
    }
}

impl PopCheckPoint {
    /// The body of the check point message, byte for byte as Java writes it.
    pub fn encode(&self) -> Vec<u8> {
        fastjson::to_vec(self, JsonStyle::Fastjson)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, PopFormatError> {
        decode(bytes, "PopCheckPoint")
    }

    /// When the unacked messages come back: `popTime + invisibleTime` (wrapping, as Java's long).
    pub fn revive_time(&self) -> i64 {
        self.pop_time.wrapping_add(self.invisible_time)
    }

    /// `addDiff`: records the next message's offset distance from `start_offset`.
    pub fn add_diff(&mut self, diff: i32) {
        self.queue_offset_diff.get_or_insert_with(|| Vec::with_capacity(8)).push(diff);
    }

    fn has_diffs(&self) -> bool {
        self.queue_offset_diff.as_ref().is_some_and(|d| !d.is_empty())
    }

    /// `indexOfAck`: the index of the message at `ack_offset`, or `None` if it is not in this
    /// check point.
    pub fn index_of_ack(&self, ack_offset: i64) -> Option<usize> {
        if ack_offset < self.start_offset {
            return None;
        }
        let distance = ack_offset.wrapping_sub(self.start_offset);
        match &self.queue_offset_diff {
            Some(diffs) if !diffs.is_empty() => diffs.iter().position(|&d| d == distance as i32),
            // Java returns a negative index when the distance overflows a long; that is no message.
            _ => (0..i64::from(self.num)).contains(&distance).then_some(distance as usize),
        }
    }

    /// `ackOffsetByIndex`: the queue offset of the `index`-th message; `None` when a new-style
    /// check point has no such message (Java throws).
    pub fn ack_offset_by_index(&self, index: u8) -> Option<i64> {
        if !self.has_diffs() {
            return Some(self.start_offset.wrapping_add(i64::from(index)));
        }
        let diffs = self.queue_offset_diff.as_deref().unwrap_or_default();
        diffs.get(usize::from(index)).map(|&d| self.start_offset.wrapping_add(i64::from(d)))
    }

    /// `parseRePutTimes`: 0 when absent, 127 (`Byte.MAX_VALUE`) when not a number.
    pub fn parse_re_put_times(&self) -> i32 {
        match &self.re_put_times {
            None => 0,
            Some(text) => text.parse().unwrap_or(i32::from(i8::MAX)),
        }
    }

    /// Whether message `index` is acked (`DataConverter.getBit`: Java's `1L << index`).
    pub fn is_acked(&self, index: u32) -> bool {
        i64::from(self.bit_map) & 1i64.wrapping_shl(index) != 0
    }

    /// Marks message `index` acked (`DataConverter.setBit(bitMap, index, true)`).
    pub fn mark_acked(&mut self, index: u32) {
        self.bit_map = (i64::from(self.bit_map) | 1i64.wrapping_shl(index)) as i32;
    }

    /// Whether every one of the `num` messages is acked.
    pub fn all_acked(&self) -> bool {
        (0..u32::try_from(self.num).unwrap_or(0)).all(|i| self.is_acked(i))
    }
}

/// An ack of one popped message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AckMsg {
    #[serde(rename = "ao", alias = "ackOffset")]
    pub ack_offset: i64,
    #[serde(rename = "bn", alias = "brokerName", skip_serializing_if = "Option::is_none")]
    pub broker_name: Option<String>,
    #[serde(rename = "c", alias = "consumerGroup", skip_serializing_if = "Option::is_none")]
    pub consumer_group: Option<String>,
    #[serde(rename = "pt", alias = "popTime")]
    pub pop_time: i64,
    #[serde(rename = "q", alias = "queueId")]
    pub queue_id: i32,
    /// The check point's start offset.
    #[serde(rename = "so", alias = "startOffset")]
    pub start_offset: i64,
    #[serde(rename = "t", alias = "topic", skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

impl AckMsg {
    pub fn encode(&self) -> Vec<u8> {
        fastjson::to_vec(self, JsonStyle::Fastjson)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, PopFormatError> {
        decode(bytes, "AckMsg")
    }
}

/// Acks of several messages of one check point. Java's `BatchAckMsg extends AckMsg`, so it also
/// carries `ao` (-1 from the ack processor, 0 from the ack buffer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchAckMsg {
    pub ack: AckMsg,
    pub ack_offset_list: Vec<i64>,
}

#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
struct BatchAckWire {
    #[serde(alias = "ackOffset")]
    ao: i64,
    #[serde(alias = "ackOffsetList")]
    aol: Option<Vec<i64>>,
    #[serde(alias = "brokerName", skip_serializing_if = "Option::is_none")]
    bn: Option<String>,
    #[serde(alias = "consumerGroup", skip_serializing_if = "Option::is_none")]
    c: Option<String>,
    #[serde(alias = "popTime")]
    pt: i64,
    #[serde(alias = "queueId")]
    q: i32,
    #[serde(alias = "startOffset")]
    so: i64,
    #[serde(alias = "topic", skip_serializing_if = "Option::is_none")]
    t: Option<String>,
}

impl BatchAckMsg {
    pub fn encode(&self) -> Vec<u8> {
        let a = &self.ack;
        let wire = BatchAckWire {
            ao: a.ack_offset,
            aol: Some(self.ack_offset_list.clone()),
            bn: a.broker_name.clone(),
            c: a.consumer_group.clone(),
            pt: a.pop_time,
            q: a.queue_id,
            so: a.start_offset,
            t: a.topic.clone(),
        };
        fastjson::to_vec(&wire, JsonStyle::Fastjson)
    }

    /// Reads a batch ack; a `null` offset list reads as an empty one.
    pub fn decode(bytes: &[u8]) -> Result<Self, PopFormatError> {
        let w: BatchAckWire = decode(bytes, "BatchAckMsg")?;
        Ok(BatchAckMsg {
            ack: AckMsg { ack_offset: w.ao, broker_name: w.bn, consumer_group: w.c, pop_time: w.pt, queue_id: w.q, start_offset: w.so, topic: w.t },
            ack_offset_list: w.aol.unwrap_or_default(),
        })
    }
}

/// BATCH_ACK_MESSAGE's body (`BatchAckMessageRequestBody`): acks of several check points.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct BatchAckRequestBody {
    #[serde(rename = "brokerName")]
    pub broker_name: Option<String>,
    pub acks: Option<Vec<BatchAck>>,
}

/// One check point's acks in a batch (`BatchAck`): bit `i` of `bit_set` acks `start_offset + i`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct BatchAck {
    #[serde(rename = "c", alias = "consumerGroup")]
    pub consumer_group: Option<String>,
    #[serde(rename = "t", alias = "topic")]
    pub topic: Option<String>,
    /// The retry marker of the topic the messages were read from (`1`, `2`; else the topic).
    #[serde(rename = "r", alias = "retry")]
    pub retry: Option<String>,
    #[serde(rename = "so", alias = "startOffset")]
    pub start_offset: i64,
    #[serde(rename = "q", alias = "queueId")]
    pub queue_id: i32,
    #[serde(rename = "rq", alias = "reviveQueueId")]
    pub revive_queue_id: i32,
    #[serde(rename = "pt", alias = "popTime")]
    pub pop_time: i64,
    #[serde(rename = "it", alias = "invisibleTime")]
    pub invisible_time: i64,
    /// `java.util.BitSet.toByteArray()` (little-endian) in fastjson's Base64.
    #[serde(rename = "b", alias = "bitSet")]
    pub bit_set: Option<String>,
}

impl BatchAckRequestBody {
    pub fn decode(bytes: &[u8]) -> Result<Self, PopFormatError> {
        decode(bytes, "BatchAckMessageRequestBody")
    }
}

impl BatchAck {
    /// The set bits of `bit_set`, lowest first (Java's `nextSetBit` walk).
    pub fn set_bits(&self) -> Result<Vec<u32>, PopFormatError> {
        use base64::Engine;
        let Some(b64) = self.bit_set.as_deref() else { return Ok(Vec::new()) };
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| PopFormatError::Json { what: "BatchAck.bitSet", message: e.to_string() })?;
        let mut bits = Vec::new();
        for (i, byte) in bytes.iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    bits.push((i * 8 + bit) as u32);
                }
            }
        }
        Ok(bits)
    }
}

/// A message for the revive topic, as the Java processors build it: everything but the born and
/// store hosts and timestamps. The store's timer takes it (`TIMER_DELIVER_MS`) and hands it to the
/// revive queue at `deliver_time_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviveMessage {
    pub topic: String,
    pub queue_id: i32,
    pub tags: &'static str,
    /// `UNIQ_KEY`.
    pub uniq_key: String,
    /// `TIMER_DELIVER_MS`.
    pub deliver_time_ms: i64,
    pub body: Vec<u8>,
}

impl ReviveMessage {
    /// `PopMessageProcessor.buildCkMsg`: delivered `ackTimeInterval` (1 s) before the revive time.
    pub fn check_point(ck: &PopCheckPoint, revive_topic: &str, revive_qid: i32) -> Self {
        ReviveMessage {
            topic: revive_topic.to_owned(),
            queue_id: revive_qid,
            tags: CK_TAG,
            uniq_key: names::ck_unique_id(ck),
            deliver_time_ms: ck.revive_time().wrapping_sub(ACK_TIME_INTERVAL_MS),
            body: ck.encode(),
        }
    }

    /// `AckMessageProcessor.appendAck` for one message: delivered at `popTime + invisibleTime`
    /// (both from the receipt handle).
    pub fn ack(ack: &AckMsg, revive_topic: &str, revive_qid: i32, invisible_time: i64) -> Self {
        ReviveMessage {
            topic: revive_topic.to_owned(),
            queue_id: revive_qid,
            tags: ACK_TAG,
            uniq_key: names::ack_unique_id(ack),
            deliver_time_ms: ack.pop_time.wrapping_add(invisible_time),
            body: ack.encode(),
        }
    }

    /// `AckMessageProcessor.appendAck` for a batch: tag `bAck`, but Java then overwrites the batch
    /// id with the single-ack id of the batch's own fields (`ao` -1), which is what is stored.
    pub fn batch_ack(batch: &BatchAckMsg, revive_topic: &str, revive_qid: i32, invisible_time: i64) -> Self {
        ReviveMessage {
            topic: revive_topic.to_owned(),
            queue_id: revive_qid,
            tags: BATCH_ACK_TAG,
            uniq_key: names::ack_unique_id(&batch.ack),
            deliver_time_ms: batch.ack.pop_time.wrapping_add(invisible_time),
            body: batch.encode(),
        }
    }

    /// `PopBufferMergeService.putAckToStore`: an ack the buffer could not merge, delivered at
    /// the check point's revive time.
    pub fn buffered_ack(ack: &AckMsg, revive_topic: &str, revive_qid: i32, ck_revive_time: i64) -> Self {
        ReviveMessage { deliver_time_ms: ck_revive_time, ..Self::ack(ack, revive_topic, revive_qid, 0) }
    }

    /// `PopBufferMergeService.putBatchAckToStore`: keeps the batch id (`genBatchAckUniqueId`).
    pub fn buffered_batch_ack(batch: &BatchAckMsg, revive_topic: &str, revive_qid: i32, ck_revive_time: i64) -> Self {
        ReviveMessage { uniq_key: names::batch_ack_unique_id(batch), deliver_time_ms: ck_revive_time, ..Self::batch_ack(batch, revive_topic, revive_qid, 0) }
    }

    /// The message's properties in the order Java stores them (a default `HashMap` of these three
    /// keys iterates `TIMER_DELIVER_MS`, `UNIQ_KEY`, `TAGS`).
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        vec![
            (names::PROPERTY_TIMER_DELIVER_MS, self.deliver_time_ms.to_string()),
            (names::PROPERTY_UNIQ_KEY, self.uniq_key.clone()),
            ("TAGS", self.tags.to_owned()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(diffs: Option<Vec<i32>>, num: i8) -> PopCheckPoint {
        PopCheckPoint { start_offset: 100, num, queue_offset_diff: diffs, ..PopCheckPoint::default() }
    }

    #[test]
    fn an_old_check_point_counts_consecutive_offsets() {
        let c = ck(None, 3);
        assert_eq!(c.index_of_ack(99), None);
        assert_eq!(c.index_of_ack(102), Some(2));
        assert_eq!(c.index_of_ack(103), None);
        assert_eq!(c.ack_offset_by_index(2), Some(102));
    }

    #[test]
    fn a_new_check_point_looks_offsets_up_in_its_diffs() {
        let mut c = ck(None, 3);
        for d in [0, 2, 5] {
            c.add_diff(d);
        }
        assert_eq!(c.index_of_ack(105), Some(2));
        assert_eq!(c.index_of_ack(101), None);
        assert_eq!(c.ack_offset_by_index(1), Some(102));
        assert_eq!(c.ack_offset_by_index(3), None);
    }

    #[test]
    fn the_bit_map_follows_java_shifts() {
        let mut c = ck(None, 2);
        assert!(!c.all_acked());
        c.mark_acked(0);
        c.mark_acked(1);
        assert!(c.all_acked());
        c.mark_acked(31);
        assert_eq!(c.bit_map, i32::MIN | 3);
        c.mark_acked(40); // 1L << 40 does not reach the int
        assert_eq!(c.bit_map, i32::MIN | 3);
        assert!(c.is_acked(64)); // 1L << 64 == 1L << 0
    }

    #[test]
    fn re_put_times_parse_as_java() {
        let mut c = ck(None, 1);
        assert_eq!(c.parse_re_put_times(), 0);
        c.re_put_times = Some("4".into());
        assert_eq!(c.parse_re_put_times(), 4);
        c.re_put_times = Some("x".into());
        assert_eq!(c.parse_re_put_times(), 127);
    }

    #[test]
    fn bodies_that_are_not_json_are_errors() {
        assert!(PopCheckPoint::decode(b"{").is_err());
        assert!(AckMsg::decode(b"\"x\"").is_err());
        assert!(BatchAckMsg::decode(b"{\"aol\":[\"x\"]}").is_err());
        assert_eq!(BatchAckMsg::decode(b"{\"aol\":null}").map(|b| b.ack_offset_list), Ok(vec![]));
    }
}
