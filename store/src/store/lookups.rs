//! Lookups: a record by physical offset, by key (the index) and by time; the queue table; the
//! physical log's bounds.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

use remoting::protocol::name::TopicName;

use super::MessageStore;
use crate::consume_queue::ConsumeQueue;
use crate::message::record::{decode_record, RecordAt};

/// What [`MessageStore::reads_in_memory`] counts as written lately: a few seconds of appends at
/// this machine's rates, far less than any page cache that holds the writer's own pages.
pub const RECENT_BYTES: i64 = 256 << 20;

/// Messages found by key.
#[derive(Clone, Debug, Default)]
pub struct QueryMessageResult {
    pub messages: Vec<Bytes>,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phyoffset: i64,
}

impl MessageStore {
    /// Deletes every consume queue of a topic (DELETE_TOPIC_IN_BROKER); the commit log keeps the
    /// records until they expire, as in Java. Only a real folder that is a direct child of
    /// `consumequeue/` and carries the topic's name is removed (never a symlink's target).
    pub fn delete_topic(&self, topic: &TopicName) {
        self.queues.delete_topic(topic);
    }

    /// Every topic that has a consume queue.
    pub fn topics(&self) -> Vec<String> {
        self.queues.topics()
    }

    pub fn find_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues.find(topic, queue_id)
    }

    /// Every consume queue, by topic and queue id.
    pub fn queues(&self) -> Vec<Arc<ConsumeQueue>> {
        self.queues.all()
    }

    /// The record at physical offset `offset` (Java `lookMessageByOffset`).
    pub fn look_message_by_offset(&self, offset: i64) -> Option<Bytes> {
        let size_bytes = self.read_phy(offset, 4)?;
        let size = i32::from_be_bytes(size_bytes.as_ref().try_into().ok()?);
        if size <= 0 {
            return None;
        }
        self.read_phy(offset, size as usize)
    }

    /// Store time of the record at `offset` of size `size`.
    pub fn store_time_at(&self, offset: i64, size: i32) -> Option<i64> {
        let bytes = self.read_phy(offset, usize::try_from(size).ok()?)?;
        match decode_record(&bytes, false).ok()? {
            RecordAt::Record(r) => Some(r.store_timestamp),
            RecordAt::Blank => None,
        }
    }

    /// Queue offset of the first message stored at or after `timestamp`.
    pub fn offset_in_queue_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> i64 {
        self.find_queue(topic, queue_id).map_or(0, |cq| cq.offset_by_time(timestamp, |o, s| self.store_time_at(o, s)))
    }

    /// Store time of the message at a queue offset.
    pub fn message_store_timestamp(&self, topic: &str, queue_id: i32, queue_offset: i64) -> Option<i64> {
        let unit = self.find_queue(topic, queue_id)?.get(queue_offset)?;
        self.store_time_at(unit.phy_offset, unit.size)
    }

    pub fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        self.message_store_timestamp(topic, queue_id, self.min_offset_in_queue(topic, queue_id))
    }

    /// Messages found by key in the index (Java `queryMessage`).
    pub fn query_message(&self, topic: &str, key: &str, max_num: usize, begin: i64, end: i64) -> QueryMessageResult {
        let Some(index) = &self.index else { return QueryMessageResult::default() };
        let found = index.query(topic, key, max_num, begin, end);
        let mut result = QueryMessageResult {
            messages: Vec::new(),
            index_last_update_timestamp: found.index_last_update_timestamp,
            index_last_update_phyoffset: found.index_last_update_phyoffset,
        };
        for offset in found.phy_offsets {
            if let Some(bytes) = self.look_message_by_offset(offset) {
                result.messages.push(bytes);
            }
        }
        result
    }

    /// The first readable physical offset (Java `getMinPhyOffset`).
    pub fn min_phy_offset(&self) -> i64 {
        self.log.min_offset()
    }

    /// The end of readable data (Java `getMaxPhyOffset`): in DLedger mode, what is committed.
    pub fn max_phy_offset(&self) -> i64 {
        self.log.max_offset()
    }

    /// Whether a read of the queue from `offset` finds its messages in memory: it starts in what
    /// was written lately, the last [`RECENT_BYTES`] of the commit log, which the page cache holds
    /// since the writer put it there moments ago (no system call for a consumer keeping up), or
    /// the page cache holds the most a pull from memory takes from there
    /// (`maxTransferBytesOnMessageInMemory`; a consumer behind, reading what memory still holds).
    /// True as well when the log holds nothing there to read. Not Java's
    /// `accessMessageInMemoryMaxRatio` test, which counts bytes only and so takes a log dropped
    /// from the cache (a restart of the machine, an eviction) for one in memory.
    pub fn reads_in_memory(&self, topic: &str, queue_id: i32, offset: i64) -> bool {
        let Some(start) = self.phy_offset_of(topic, queue_id, offset) else { return true };
        if self.max_phy_offset() - start <= RECENT_BYTES {
            return true;
        }
        let (pull_bytes, _) = self.commit_log.tunables().max_transfer(false);
        self.log.resident(start, pull_bytes)
    }

    /// How far behind the commit log's readable end the message at `offset` of the queue
    /// starts; `None` when the queue holds no message there.
    pub fn bytes_behind_end(&self, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
        Some(self.max_phy_offset() - self.phy_offset_of(topic, queue_id, offset)?)
    }

    /// Where in the commit log the message at `offset` of the queue starts.
    fn phy_offset_of(&self, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
        Some(self.find_queue(topic, queue_id)?.get(offset)?.phy_offset)
    }

    /// Java's bytes behind the end of the commit log that a read finds in memory.
    pub(super) fn in_memory_bytes(&self) -> i64 {
        (self.total_memory_bytes as f64 * self.commit_log.tunables().access_message_in_memory_max_ratio() as f64 / 100.0) as i64
    }

    /// `size` readable bytes at physical offset `offset`.
    pub fn read_phy(&self, offset: i64, size: usize) -> Option<Bytes> {
        self.log.read(offset, size)
    }

    /// The next queue offset of every queue, from the consume queues (Java's
    /// `recoverTopicQueueTable`; a new DLedger leader rebuilds its table from it).
    pub fn queue_offset_table(&self) -> HashMap<String, HashMap<i32, i64>> {
        self.queues.offset_table()
    }
}
