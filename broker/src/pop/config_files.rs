//! `config/consumerOrderInfo.json` (Java 5.3.3's `ConsumerOrderInfoManager`: orderly pop's
//! per-queue state) and `config/messageRequestMode.json` (`MessageRequestModeManager`: which
//! groups consume a topic by pop), in `ConfigManager.persist`'s format (fastjson's `PrettyFormat`).
//!
//! Maps are written in key order (Java writes `ConcurrentHashMap` order; it reads either). Unlike
//! the other config files, `consumerOrderInfo.json` holds `List`s, which fastjson's pretty format
//! writes one element a line, so persist it with [`ConsumerOrderInfoFile::encode_pretty`] (e.g.
//! `ConfigFile::persist_now`), not the generic `ConfigFile::persist`.

use std::collections::BTreeMap;
use std::io;

use remoting::fastjson::{self, FastjsonFormatter, JsonStyle};
use serde::{Deserialize, Serialize};
use serde_json::ser::{CharEscape, Formatter};

use super::PopFormatError;

pub const CONSUMER_ORDER_INFO_FILE: &str = "consumerOrderInfo.json";
pub const MESSAGE_REQUEST_MODE_FILE: &str = "messageRequestMode.json";

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &'static str) -> Result<T, PopFormatError> {
    fastjson::from_slice(bytes).map_err(|e| PopFormatError::Json { what, message: e.to_string() })
}

/// The orderly-pop state of one queue for one group (`ConsumerOrderInfoManager.OrderInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OrderInfo {
    #[serde(rename = "a", skip_serializing_if = "Option::is_none")]
    pub attempt_id: Option<String>,
    /// Bit `i` set: the `i`-th message of `offset_list` is committed.
    #[serde(rename = "cm")]
    pub commit_offset_bit: i64,
    /// The invisible time of the pop.
    #[serde(rename = "i", skip_serializing_if = "Option::is_none")]
    pub invisible_time: Option<i64>,
    #[serde(rename = "l")]
    pub last_consume_timestamp: i64,
    /// `[first offset, offset 1 - first, offset 2 - first, ...]`.
    #[serde(rename = "o", skip_serializing_if = "Option::is_none")]
    pub offset_list: Option<Vec<i64>>,
    /// Queue offset to how often it was consumed (only counts above zero).
    #[serde(rename = "oc", skip_serializing_if = "Option::is_none")]
    pub offset_consumed_count: Option<BTreeMap<i64, i32>>,
    /// Queue offset to the time it becomes visible again (after changeInvisibleTime).
    #[serde(rename = "ot", skip_serializing_if = "Option::is_none")]
    pub offset_next_visible_time: Option<BTreeMap<i64, i64>>,
    #[serde(rename = "popTime")]
    pub pop_time: i64,
}

impl OrderInfo {
    /// `OrderInfo.buildOffsetList`: the first offset, then each later one as its distance from it.
    pub fn build_offset_list(queue_offsets: &[i64]) -> Vec<i64> {
        match queue_offsets.split_first() {
            Some((&first, rest)) => std::iter::once(first).chain(rest.iter().map(|o| o.wrapping_sub(first))).collect(),
            None => Vec::new(),
        }
    }

    /// The queue offset of the `index`-th message, if there is one.
    pub fn queue_offset(&self, index: usize) -> Option<i64> {
        let list = self.offset_list.as_deref()?;
        let first = *list.first()?;
        if index == 0 {
            return Some(first);
        }
        list.get(index).map(|d| first.wrapping_add(*d))
    }

    /// `isNotAck`: whether the `index`-th message is not committed (Java's `1L << index`).
    pub fn is_not_ack(&self, index: u32) -> bool {
        self.commit_offset_bit & 1i64.wrapping_shl(index) == 0
    }

    /// `getNextOffset`: the first uncommitted message's offset, one past the last if all are
    /// committed, -2 without messages.
    pub fn next_offset(&self) -> i64 {
        let len = self.offset_list.as_ref().map_or(0, Vec::len);
        if len == 0 {
            return -2;
        }
        let first_open = (0..len).find(|&i| u32::try_from(i).map_or(true, |i| self.is_not_ack(i)));
        match first_open {
            Some(i) => self.queue_offset(i).unwrap_or(-2),
            None => self.queue_offset(len - 1).map_or(-2, |o| o.wrapping_add(1)),
        }
    }
}

/// `topic@group`, the key of [`ConsumerOrderInfoFile::table`].
pub fn order_info_key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

/// `config/consumerOrderInfo.json`: `topic@group` -> queue id -> state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerOrderInfoFile {
    pub table: BTreeMap<String, BTreeMap<i32, OrderInfo>>,
}

impl ConsumerOrderInfoFile {
    /// What `ConfigManager.persist` writes (with the maps in key order).
    pub fn encode_pretty(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        let mut ser = serde_json::Serializer::with_formatter(&mut out, ListPrettyFormatter::new());
        // Plain data into a Vec: cannot fail.
        if self.serialize(&mut ser).is_err() {
            out.clear();
        }
        out
    }

    /// `encode(false)`.
    pub fn encode_compact(&self) -> Vec<u8> {
        fastjson::to_vec(self, JsonStyle::Fastjson)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, PopFormatError> {
        decode(bytes, CONSUMER_ORDER_INFO_FILE)
    }
}

/// `MessageRequestMode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MessageRequestMode {
    #[default]
    #[serde(rename = "PULL")]
    Pull,
    #[serde(rename = "POP")]
    Pop,
}

/// `SetMessageRequestModeRequestBody`, as kept in the file (and sent by `setConsumeMode`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MessageRequestModeEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_group: Option<String>,
    pub mode: MessageRequestMode,
    /// How many following consumers (in the consumer id list) a pop consumer shares queues with.
    pub pop_share_queue_num: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

/// `config/messageRequestMode.json`: topic -> consumer group -> mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MessageRequestModeFile {
    pub message_request_mode_map: BTreeMap<String, BTreeMap<String, MessageRequestModeEntry>>,
}

impl MessageRequestModeFile {
    pub fn encode_pretty(&self) -> Vec<u8> {
        fastjson::to_vec(self, JsonStyle::FastjsonPretty)
    }

    pub fn encode_compact(&self) -> Vec<u8> {
        fastjson::to_vec(self, JsonStyle::Fastjson)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, PopFormatError> {
        decode(bytes, MESSAGE_REQUEST_MODE_FILE)
    }

    pub fn get(&self, topic: &str, group: &str) -> Option<&MessageRequestModeEntry> {
        self.message_request_mode_map.get(topic)?.get(group)
    }
}

/// fastjson's pretty format for bodies holding `List`s: [`JsonStyle::FastjsonPretty`] for
/// everything but arrays, which go one element a line, indented one tab deeper than the member
/// they are the value of, with the `]` on its own line (`[]` when empty).
struct ListPrettyFormatter {
    inner: FastjsonFormatter,
    /// Open objects and arrays, to indent array elements.
    depth: usize,
    /// Per open array: whether it has an element yet.
    arrays: Vec<bool>,
}

impl ListPrettyFormatter {
    fn new() -> Self {
        ListPrettyFormatter { inner: FastjsonFormatter::new(JsonStyle::FastjsonPretty), depth: 0, arrays: Vec::new() }
    }

    fn new_line<W: ?Sized + io::Write>(w: &mut W, tabs: usize) -> io::Result<()> {
        w.write_all(b"\n")?;
        for _ in 0..tabs {
            w.write_all(b"\t")?;
        }
        Ok(())
    }
}

impl Formatter for ListPrettyFormatter {
    fn write_i8<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i8) -> io::Result<()> {
        self.inner.write_i8(w, v)
    }
    fn write_i16<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i16) -> io::Result<()> {
        self.inner.write_i16(w, v)
    }
    fn write_i32<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i32) -> io::Result<()> {
        self.inner.write_i32(w, v)
    }
    fn write_i64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i64) -> io::Result<()> {
        self.inner.write_i64(w, v)
    }
    fn write_u8<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u8) -> io::Result<()> {
        self.inner.write_u8(w, v)
    }
    fn write_u16<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u16) -> io::Result<()> {
        self.inner.write_u16(w, v)
    }
    fn write_u32<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u32) -> io::Result<()> {
        self.inner.write_u32(w, v)
    }
    fn write_u64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u64) -> io::Result<()> {
        self.inner.write_u64(w, v)
    }
    fn begin_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.begin_string(w)
    }
    fn end_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_string(w)
    }
    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, w: &mut W, fragment: &str) -> io::Result<()> {
        self.inner.write_string_fragment(w, fragment)
    }
    fn write_char_escape<W: ?Sized + io::Write>(&mut self, w: &mut W, escape: CharEscape) -> io::Result<()> {
        self.inner.write_char_escape(w, escape)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.inner.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth = self.depth.saturating_sub(1);
        self.inner.end_object(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object_value(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.inner.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object_key(w)
    }
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.arrays.push(false);
        w.write_all(b"[")
    }
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if let Some(has_value) = self.arrays.last_mut() {
            *has_value = true;
        }
        if !first {
            w.write_all(b",")?;
        }
        Self::new_line(w, self.depth)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth = self.depth.saturating_sub(1);
        if self.arrays.pop().unwrap_or(false) {
            Self::new_line(w, self.depth)?;
        }
        w.write_all(b"]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_list_keeps_distances_from_the_first_offset() {
        let list = OrderInfo::build_offset_list(&[100, 101, 105]);
        assert_eq!(list, vec![100, 1, 5]);
        let info = OrderInfo { offset_list: Some(list), commit_offset_bit: 0b011, ..OrderInfo::default() };
        assert_eq!(info.queue_offset(2), Some(105));
        assert_eq!(info.queue_offset(3), None);
        assert_eq!(info.next_offset(), 105);
        let all = OrderInfo { commit_offset_bit: 0b111, ..info.clone() };
        assert_eq!(all.next_offset(), 106);
        assert_eq!(OrderInfo::default().next_offset(), -2);
    }

    #[test]
    fn an_empty_list_stays_on_one_line() {
        let mut file = ConsumerOrderInfoFile::default();
        file.table.entry("t@g".into()).or_default().insert(0, OrderInfo { offset_list: Some(vec![]), ..OrderInfo::default() });
        let text = String::from_utf8(file.encode_pretty()).unwrap();
        assert!(text.contains("\"o\":[],"), "{text}");
    }
}
