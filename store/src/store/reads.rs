//! Pulls: messages of a queue from an offset, with Java's `GetMessageStatus`, `nextBeginOffset`
//! rules and batch limits.

use super::MessageStore;
use bytes::Bytes;

/// Java's `GetMessageStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetMessageStatus {
    Found,
    NoMatchedMessage,
    MessageWasRemoving,
    OffsetFoundNull,
    OffsetOverflowBadly,
    OffsetOverflowOne,
    OffsetTooSmall,
    NoMatchedLogicQueue,
    NoMessageInQueue,
}

impl GetMessageStatus {
    /// The Java enum name (pull responses carry it as their remark).
    pub fn name(self) -> &'static str {
        match self {
            GetMessageStatus::Found => "FOUND",
            GetMessageStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetMessageStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetMessageStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetMessageStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetMessageStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetMessageStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetMessageStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetMessageStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

#[derive(Clone, Debug)]
pub struct GetMessageResult {
    pub status: GetMessageStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    /// Each message's stored record bytes (sharing the commit log's mapping).
    pub messages: Vec<Bytes>,
    /// Queue offset of each message.
    pub queue_offsets: Vec<i64>,
    pub buffer_total_size: usize,
    pub suggest_pulling_from_slave: bool,
}

impl MessageStore {
    /// Reads messages of a queue from `offset`, with Java's batch limits and offset rules.
    /// `filter` sees each unit's tags code.
    pub fn get_message(&self, topic: &str, queue_id: i32, offset: i64, max_msg_nums: usize, filter: impl Fn(i64) -> bool) -> GetMessageResult {
        self.get_message_filtered(topic, queue_id, offset, max_msg_nums, filter, |_| true)
    }

    /// As [`MessageStore::get_message`], with a second filter on each stored record read (Java's
    /// `isMatchedByCommitLog`, which SQL92 filters need: they look at the properties).
    pub fn get_message_filtered(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: usize,
        filter: impl Fn(i64) -> bool,
        record_filter: impl Fn(&[u8]) -> bool,
    ) -> GetMessageResult {
        let max_offset_py = self.max_phy_offset();
        let mut r = GetMessageResult {
            status: GetMessageStatus::NoMatchedLogicQueue,
            next_begin_offset: 0,
            min_offset: 0,
            max_offset: 0,
            messages: Vec::new(),
            queue_offsets: Vec::new(),
            buffer_total_size: 0,
            suggest_pulling_from_slave: false,
        };
        let Some(cq) = self.find_queue(topic, queue_id) else { return r };
        r.min_offset = cq.min_offset();
        r.max_offset = cq.max_offset();
        if r.max_offset == 0 {
            r.status = GetMessageStatus::NoMessageInQueue;
            return r;
        }
        if offset < r.min_offset {
            r.status = GetMessageStatus::OffsetTooSmall;
            r.next_begin_offset = r.min_offset;
            return r;
        }
        if offset == r.max_offset {
            r.status = GetMessageStatus::OffsetOverflowOne;
            r.next_begin_offset = offset;
            return r;
        }
        if offset > r.max_offset {
            r.status = GetMessageStatus::OffsetOverflowBadly;
            // Java 4.9.7 and 5.x: back to the queue's end (before 4.9.4 an empty-minimum queue sent
            // the consumer to 0, so it consumed everything again).
            r.next_begin_offset = r.max_offset;
            return r;
        }
        let max_filter_count = 16_000.max(max_msg_nums * 20);
        let Some(units) = cq.units_from(offset, max_filter_count) else {
            r.status = GetMessageStatus::OffsetFoundNull;
            r.next_begin_offset = cq.roll_next_file(offset);
            return r;
        };
        r.status = GetMessageStatus::NoMatchedMessage;
        let memory = self.in_memory_bytes();
        let mut next_phy_file_start = i64::MIN;
        let mut max_phy_pulling = 0;
        let mut examined = 0;
        for (i, unit) in units.enumerate() {
            examined = i;
            max_phy_pulling = unit.phy_offset;
            if next_phy_file_start != i64::MIN && unit.phy_offset < next_phy_file_start {
                examined = i + 1;
                continue;
            }
            let in_disk = max_offset_py - unit.phy_offset > memory;
            if self.batch_full(unit.size as usize, max_msg_nums, r.buffer_total_size, r.messages.len(), in_disk) {
                break;
            }
            examined = i + 1;
            if !filter(unit.tags_code) {
                if r.buffer_total_size == 0 {
                    r.status = GetMessageStatus::NoMatchedMessage;
                }
                continue;
            }
            match self.read_phy(unit.phy_offset, unit.size as usize) {
                Some(bytes) if !record_filter(&bytes) => {
                    if r.buffer_total_size == 0 {
                        r.status = GetMessageStatus::NoMatchedMessage;
                    }
                }
                Some(bytes) => {
                    r.buffer_total_size += bytes.len();
                    r.messages.push(bytes);
                    r.queue_offsets.push(offset + i as i64);
                    r.status = GetMessageStatus::Found;
                    next_phy_file_start = i64::MIN;
                }
                None => {
                    if r.buffer_total_size == 0 {
                        r.status = GetMessageStatus::MessageWasRemoving;
                    }
                    let file_size = self.config.mapped_file_size_commit_log as i64;
                    next_phy_file_start = unit.phy_offset + file_size - unit.phy_offset % file_size;
                }
            }
        }
        r.next_begin_offset = offset + examined as i64;
        r.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory;
        r
    }

    pub(super) fn batch_full(&self, size: usize, max_msg_nums: usize, total: usize, count: usize, in_disk: bool) -> bool {
        if total == 0 || count == 0 {
            return false;
        }
        if max_msg_nums <= count {
            return true;
        }
        let (max_bytes, max_count) = self.commit_log.tunables().max_transfer(in_disk);
        total + size > max_bytes || count > max_count.saturating_sub(1)
    }

    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.find_queue(topic, queue_id).map_or(0, |cq| cq.max_offset())
    }

    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.find_queue(topic, queue_id).map_or(0, |cq| cq.min_offset())
    }
}
