//! Orderly pop's per-queue state (Java 5.3.3's `ConsumerOrderInfoManager`): which messages of a
//! queue the last orderly pop handed out, which are committed, when each becomes visible again.
//! A queue whose handed-out messages are neither committed nor visible again is blocked: no pop
//! gets its next message. Kept in `config/consumerOrderInfo.json`, Java's file.

use std::collections::BTreeMap;
use std::path::Path;

use parking_lot::Mutex;

use crate::config_file::{self, ConfigFile, ConfigFileError};
use crate::pop::config_files::{order_info_key, ConsumerOrderInfoFile, OrderInfo, CONSUMER_ORDER_INFO_FILE};
use crate::pop::extra_info::{append_queue_id_order_count_info, append_queue_offset_order_count_info};

pub struct OrderInfoManager {
    file: ConfigFile,
    table: Mutex<ConsumerOrderInfoFile>,
}

impl OrderInfo {
    /// `needBlock`: some handed-out message is neither committed nor visible again.
    fn need_block(&mut self, attempt_id: Option<&str>, current_invisible_time: i64, now: i64) -> bool {
        let len = self.offset_list.as_ref().map_or(0, Vec::len);
        if len == 0 {
            return false;
        }
        if self.attempt_id.is_some() && self.attempt_id.as_deref() == attempt_id {
            return false;
        }
        if self.invisible_time.is_none_or(|t| t <= 0) {
            self.invisible_time = Some(current_invisible_time);
        }
        let invisible = self.invisible_time.unwrap_or(current_invisible_time);
        (0..len).any(|i| {
            let Ok(bit) = u32::try_from(i) else { return false };
            if !self.is_not_ack(bit) {
                return false;
            }
            let own = self.queue_offset(i).and_then(|o| self.offset_next_visible_time.as_ref().and_then(|m| m.get(&o).copied()));
            now < own.unwrap_or(self.pop_time.wrapping_add(invisible))
        })
    }

    /// `mergeOffsetConsumedCount`: messages handed out again count one more consumption.
    fn merge_consumed_count(&mut self, previous: &OrderInfo) {
        let previous_counts = previous.offset_consumed_count.clone().unwrap_or_default();
        if previous.attempt_id.is_some() && previous.attempt_id == self.attempt_id {
            self.offset_consumed_count = Some(previous_counts);
            return;
        }
        let before: std::collections::HashSet<i64> = (0..previous.offset_list.as_ref().map_or(0, Vec::len)).filter_map(|i| previous.queue_offset(i)).collect();
        let mut counts = BTreeMap::new();
        for i in 0..self.offset_list.as_ref().map_or(0, Vec::len) {
            if let Some(offset) = self.queue_offset(i).filter(|o| before.contains(o)) {
                counts.insert(offset, previous_counts.get(&offset).map_or(1, |c| c + 1));
            }
        }
        self.offset_consumed_count = Some(counts);
    }
}

impl OrderInfoManager {
    pub fn open(store_root_dir: &Path) -> Result<OrderInfoManager, ConfigFileError> {
        let file = ConfigFile::new(config_file::config_dir(store_root_dir).join(CONSUMER_ORDER_INFO_FILE));
        let table = file.load::<ConsumerOrderInfoFile>()?.unwrap_or_default();
        Ok(OrderInfoManager { file, table: Mutex::new(table) })
    }

    pub fn persist(&self) -> Result<(), ConfigFileError> {
        let bytes = self.table.lock().encode_pretty();
        self.file.persist_bytes(&bytes)
    }

    /// `checkBlock`.
    pub fn check_block(&self, attempt_id: Option<&str>, topic: &str, group: &str, queue_id: i32, invisible_time: i64, now: i64) -> bool {
        let mut t = self.table.lock();
        let Some(info) = t.table.get_mut(&order_info_key(topic, group)).and_then(|qs| qs.get_mut(&queue_id)) else { return false };
        info.need_block(attempt_id, invisible_time, now)
    }

    pub fn clear_block(&self, topic: &str, group: &str, queue_id: i32) {
        if let Some(qs) = self.table.lock().table.get_mut(&order_info_key(topic, group)) {
            qs.remove(&queue_id);
        }
    }

    /// `update`: records an orderly pop's messages and appends their consumption counts to
    /// `order_count_info` (per offset, then the queue's least, as Java's response carries them).
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &self,
        attempt_id: Option<&str>,
        topic: &str,
        group: &str,
        queue_id: i32,
        pop_time: i64,
        invisible_time: i64,
        queue_offsets: &[i64],
        now: i64,
        order_count_info: &mut String,
    ) {
        let mut t = self.table.lock();
        let qs = t.table.entry(order_info_key(topic, group)).or_default();
        let mut info = OrderInfo {
            attempt_id: attempt_id.map(str::to_owned),
            commit_offset_bit: 0,
            invisible_time: Some(invisible_time),
            last_consume_timestamp: now,
            offset_list: Some(OrderInfo::build_offset_list(queue_offsets)),
            offset_consumed_count: None,
            offset_next_visible_time: None,
            pop_time,
        };
        if let Some(previous) = qs.get(&queue_id) {
            info.merge_consumed_count(previous);
        }
        let mut min = i32::MAX;
        match &info.offset_consumed_count {
            Some(counts) => {
                for (offset, count) in counts {
                    append_queue_offset_order_count_info(order_count_info, topic, i64::from(queue_id), *offset, *count);
                    min = min.min(*count);
                }
                if counts.len() != queue_offsets.len() {
                    min = 0;
                }
            }
            None => min = 0,
        }
        append_queue_id_order_count_info(order_count_info, topic, queue_id, min);
        qs.insert(queue_id, info);
    }

    /// `commitAndNext`: marks the message at `queue_offset` committed; the offset to commit
    /// next (>= 0), -1 when the message is not one handed out, -2 when nothing is to commit.
    pub fn commit_and_next(&self, topic: &str, group: &str, queue_id: i32, queue_offset: i64, pop_time: i64) -> i64 {
        let mut t = self.table.lock();
        let Some(info) = t.table.get_mut(&order_info_key(topic, group)).and_then(|qs| qs.get_mut(&queue_id)) else {
            return queue_offset + 1;
        };
        let len = info.offset_list.as_ref().map_or(0, Vec::len);
        if len == 0 {
            return -1;
        }
        if pop_time != info.pop_time {
            return -2;
        }
        let Some(i) = (0..len).find(|&i| info.queue_offset(i) == Some(queue_offset)) else { return -1 };
        info.commit_offset_bit |= 1i64.wrapping_shl(i as u32);
        info.next_offset()
    }

    /// `updateNextVisibleTime`.
    pub fn update_next_visible_time(&self, topic: &str, group: &str, queue_id: i32, queue_offset: i64, pop_time: i64, next_visible: i64) {
        let mut t = self.table.lock();
        let Some(info) = t.table.get_mut(&order_info_key(topic, group)).and_then(|qs| qs.get_mut(&queue_id)) else { return };
        if pop_time != info.pop_time {
            return;
        }
        info.offset_next_visible_time.get_or_insert_with(BTreeMap::new).insert(queue_offset, next_visible);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_blocked_until_its_messages_are_committed_or_visible_again() {
        let dir = tempfile::tempdir().unwrap();
        let m = OrderInfoManager::open(dir.path()).unwrap();
        let mut info = String::new();
        m.update(None, "T", "g", 0, 1_000, 10_000, &[5, 6], 1_000, &mut info);
        assert_eq!(info, "0 0 0", "no counts before a redelivery");
        assert!(m.check_block(None, "T", "g", 0, 10_000, 5_000));
        assert!(!m.check_block(None, "T", "g", 0, 10_000, 11_000), "visible again after the invisible time");
        assert_eq!(m.commit_and_next("T", "g", 0, 5, 1_000), 6);
        assert_eq!(m.commit_and_next("T", "g", 0, 6, 1_000), 7);
        assert!(!m.check_block(None, "T", "g", 0, 10_000, 5_000), "all committed");
        assert_eq!(m.commit_and_next("T", "g", 0, 9, 1_000), -1);
        assert_eq!(m.commit_and_next("T", "g", 0, 5, 2_000), -2, "a stale pop's ack");
    }

    #[test]
    fn messages_handed_out_again_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let m = OrderInfoManager::open(dir.path()).unwrap();
        let mut info = String::new();
        m.update(None, "T", "g", 1, 1_000, 10_000, &[5, 6], 1_000, &mut info);
        info.clear();
        m.update(None, "T", "g", 1, 20_000, 10_000, &[5, 6], 20_000, &mut info);
        assert_eq!(info, "0 qo1%5 1;0 qo1%6 1;0 1 1");
        m.persist().unwrap();
        let again = OrderInfoManager::open(dir.path()).unwrap();
        assert!(again.check_block(None, "T", "g", 1, 10_000, 21_000));
    }
}
