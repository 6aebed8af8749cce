//! One consume queue (`consumequeue/TOPIC/QUEUEID/`): 20-byte units `commit-log offset i64 |
//! size i32 | tags code i64`, unit n at byte n*20 of the queue's address space.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use remoting::protocol::name::TopicName;
use tracing::warn;

use crate::mapped_file::MappedFile;
use crate::mapped_file_queue::{LoadError, MappedFileQueue};

pub const CQ_UNIT_SIZE: usize = 20;

/// The filler Java writes before the first unit of a queue whose first file starts past 0.
const FILLER_SIZE: i32 = i32::MAX;

/// One unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqUnit {
    pub phy_offset: i64,
    pub size: i32,
    pub tags_code: i64,
}

/// Readable units of one file from an index on, decoded as they are taken: a pull that needs 32
/// messages reads 32 units, not the up to 16,000 it may examine through a filter.
pub struct CqUnits {
    file: Arc<MappedFile>,
    pos: usize,
    end: usize,
}

impl Iterator for CqUnits {
    type Item = CqUnit;

    fn next(&mut self) -> Option<CqUnit> {
        if self.pos >= self.end {
            return None;
        }
        let unit = self.file.read(self.pos, CQ_UNIT_SIZE).map(CqUnit::decode);
        self.pos += CQ_UNIT_SIZE;
        unit
    }
}

impl CqUnit {
    fn decode(b: &[u8]) -> CqUnit {
        let mut o = [0u8; 8];
        o.copy_from_slice(&b[0..8]);
        let mut s = [0u8; 4];
        s.copy_from_slice(&b[8..12]);
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[12..20]);
        CqUnit { phy_offset: i64::from_be_bytes(o), size: i32::from_be_bytes(s), tags_code: i64::from_be_bytes(t) }
    }

    fn encode(&self) -> [u8; CQ_UNIT_SIZE] {
        let mut b = [0u8; CQ_UNIT_SIZE];
        b[0..8].copy_from_slice(&self.phy_offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..20].copy_from_slice(&self.tags_code.to_be_bytes());
        b
    }

    /// Java's validity test; the filler (offset 0, size MAX) counts as valid.
    pub fn is_valid(&self) -> bool {
        self.phy_offset >= 0 && self.size > 0
    }
}

/// Java rounds the configured file size up to a whole number of units.
pub fn cq_file_size(configured: usize) -> usize {
    configured.div_ceil(CQ_UNIT_SIZE).max(1) * CQ_UNIT_SIZE
}

pub struct ConsumeQueue {
    topic: TopicName,
    queue_id: i32,
    files: MappedFileQueue,
    /// End (offset + size) of the last commit-log record put here.
    max_physic_offset: AtomicI64,
    /// Byte offset of the first unit that still points into the commit log.
    min_logic_offset: AtomicU64,
}

impl ConsumeQueue {
    /// The queue in `root/TOPIC/QUEUE_ID`: a validated name and a non-negative id, so the folder is
    /// always two levels below `root` (the store refuses anything else before calling this).
    pub fn new(root: &Path, topic: &TopicName, queue_id: u16, file_size: usize) -> ConsumeQueue {
        let dir = root.join(topic.as_str()).join(queue_id.to_string());
        ConsumeQueue {
            topic: topic.clone(),
            queue_id: i32::from(queue_id),
            files: MappedFileQueue::new(dir, cq_file_size(file_size)).with_small_writes(),
            max_physic_offset: AtomicI64::new(-1),
            min_logic_offset: AtomicU64::new(0),
        }
    }

    pub fn topic(&self) -> &str {
        self.topic.as_str()
    }

    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    pub fn load(&self) -> Result<(), LoadError> {
        self.files.load()
    }

    fn unit_at(&self, byte_offset: u64, readable_only: bool) -> Option<CqUnit> {
        let file = self.files.find(byte_offset)?;
        let pos = (byte_offset - file.from_offset()) as usize;
        let bytes = if readable_only { file.read(pos, CQ_UNIT_SIZE)? } else { file.raw(pos, CQ_UNIT_SIZE)? };
        Some(CqUnit::decode(bytes))
    }

    /// Java's recovery: from the third-to-last file, keep units while they are valid; positions
    /// end after the last valid one, later files are deleted. After a crash (`erase_tail`) the
    /// rest of the file is zeroed too, as pages may have reached the disk out of order; after a
    /// clean stop nothing is torn, and erasing would read the rest of every queue's last file
    /// (6 MB each: gigabytes for a topic of 1024 queues) on every start.
    pub fn recover(&self, erase_tail: bool) {
        let files = self.files.files();
        if files.is_empty() {
            return;
        }
        let size = self.files.file_size();
        let mut index = files.len().saturating_sub(3);
        let mut end = files[index].from_offset();
        'files: while let Some(file) = files.get(index) {
            let mut pos = 0;
            while pos + CQ_UNIT_SIZE <= size {
                let Some(unit) = file.raw(pos, CQ_UNIT_SIZE).map(CqUnit::decode) else { break };
                if !unit.is_valid() {
                    end = file.from_offset() + pos as u64;
                    break 'files;
                }
                if unit.size != FILLER_SIZE {
                    self.max_physic_offset.store(unit.phy_offset + unit.size as i64, Ordering::Release);
                }
                pos += CQ_UNIT_SIZE;
            }
            end = file.from_offset() + pos as u64;
            index += 1;
        }
        self.files.truncate_to(end, erase_tail);
    }

    /// Appends the unit for queue offset `cq_offset`. Duplicates (re-dispatch after recovery) are
    /// skipped. Writer (dispatcher) only.
    pub fn put(&self, cq_offset: i64, unit: CqUnit) -> io::Result<()> {
        if unit.phy_offset + unit.size as i64 <= self.max_physic_offset.load(Ordering::Acquire) {
            return Ok(());
        }
        let expected = cq_offset as u64 * CQ_UNIT_SIZE as u64;
        let file = self.files.last_or_create(expected)?;
        if file.wrote_position() == 0 && cq_offset != 0 && self.files.files().len() == 1 && file.from_offset() + (file.wrote_position() as u64) < expected {
            // The queue's first file starts past offset 0 (its data was deleted while the commit
            // log went on): fill the units before ours with Java's filler.
            self.min_logic_offset.store(expected, Ordering::Release);
            let filler = CqUnit { phy_offset: 0, size: FILLER_SIZE, tags_code: 0 }.encode();
            while file.from_offset() + (file.wrote_position() as u64) < expected {
                if !file.append(&filler) {
                    break;
                }
            }
        }
        let current = file.from_offset() + file.wrote_position() as u64;
        if cq_offset != 0 && expected < current {
            return Ok(()); // already there
        }
        if expected != current {
            warn!(topic = %self.topic, queue = self.queue_id, expected, current, "consume queue offset gap");
        }
        let file = if file.is_full() { self.files.last_or_create(expected)? } else { file };
        file.append(&unit.encode());
        self.max_physic_offset.store(unit.phy_offset + unit.size as i64, Ordering::Release);
        Ok(())
    }

    /// The unit at queue offset `index`, if readable.
    pub fn get(&self, index: i64) -> Option<CqUnit> {
        if index < self.min_offset() {
            return None;
        }
        self.unit_at(index as u64 * CQ_UNIT_SIZE as u64, true)
    }

    /// Readable units from queue offset `index` to the end of the file holding it (Java's
    /// `getIndexBuffer`: one pull never spans two queue files), at most `max`.
    pub fn units_from(&self, index: i64, max: usize) -> Option<CqUnits> {
        if index < self.min_offset() {
            return None;
        }
        let byte_offset = index as u64 * CQ_UNIT_SIZE as u64;
        let file = self.files.find(byte_offset)?;
        let pos = (byte_offset - file.from_offset()) as usize;
        let readable = file.read_position().checked_sub(pos)?;
        let end = pos + readable.min(max.saturating_mul(CQ_UNIT_SIZE)) / CQ_UNIT_SIZE * CQ_UNIT_SIZE;
        Some(CqUnits { file, pos, end })
    }

    /// Queue offset where the file after the one holding `index` starts (Java `rollNextFile`).
    pub fn roll_next_file(&self, index: i64) -> i64 {
        let units_per_file = (self.files.file_size() / CQ_UNIT_SIZE) as i64;
        index + units_per_file - index % units_per_file
    }

    /// Number of units = the offset the next message gets.
    pub fn max_offset(&self) -> i64 {
        (self.files.max_offset() / CQ_UNIT_SIZE as u64) as i64
    }

    pub fn min_offset(&self) -> i64 {
        (self.min_logic_offset.load(Ordering::Acquire) / CQ_UNIT_SIZE as u64) as i64
    }

    /// End of the last commit-log record this queue knows, or -1.
    pub fn max_physic_offset(&self) -> i64 {
        self.max_physic_offset.load(Ordering::Acquire)
    }

    /// Java `correctMinOffset`: the min offset is the first unit pointing at or past the commit
    /// log's min offset.
    pub fn correct_min_offset(&self, commit_log_min: i64) {
        let min_file_start = self.files.min_offset();
        let mut offset = self.min_logic_offset.load(Ordering::Acquire).max(min_file_start);
        let end = self.files.max_offset();
        while offset < end {
            match self.unit_at(offset, false) {
                Some(unit) if unit.is_valid() && unit.size != FILLER_SIZE && unit.phy_offset >= commit_log_min => break,
                Some(_) => offset += CQ_UNIT_SIZE as u64,
                None => break,
            }
        }
        self.min_logic_offset.store(offset, Ordering::Release);
    }

    /// Drops units pointing at or past commit-log offset `phy_offset` (Java `truncateDirtyLogicFiles`).
    pub fn truncate_to_phy(&self, phy_offset: i64) {
        let files = self.files.files();
        let mut end = self.files.max_offset();
        let mut max_physic = -1;
        for file in files.iter().rev() {
            let first = file.raw(0, CQ_UNIT_SIZE).map(CqUnit::decode);
            if first.is_none_or(|u| u.phy_offset >= phy_offset) {
                end = file.from_offset();
                continue;
            }
            let mut pos = 0;
            while pos + CQ_UNIT_SIZE <= file.wrote_position() {
                let Some(unit) = file.raw(pos, CQ_UNIT_SIZE).map(CqUnit::decode) else { break };
                if !unit.is_valid() || unit.phy_offset >= phy_offset {
                    break;
                }
                if unit.size != FILLER_SIZE {
                    max_physic = unit.phy_offset + unit.size as i64;
                }
                pos += CQ_UNIT_SIZE;
            }
            end = file.from_offset() + pos as u64;
            break;
        }
        self.files.truncate_to(end, true);
        self.max_physic_offset.store(max_physic, Ordering::Release);
    }

    /// Queue offset of the last unit whose message was stored at or before `timestamp`
    /// (binary search with `store_time` reading a record's store time).
    pub fn offset_by_time(&self, timestamp: i64, store_time: impl Fn(i64, i32) -> Option<i64>) -> i64 {
        let (mut low, mut high) = (self.min_offset(), self.max_offset() - 1);
        if high < low {
            return 0;
        }
        let time_of = |i: i64| self.get(i).and_then(|u| store_time(u.phy_offset, u.size));
        let mut result = low;
        while low <= high {
            let mid = low + (high - low) / 2;
            match time_of(mid) {
                Some(t) if t < timestamp => {
                    result = mid + 1;
                    low = mid + 1;
                }
                Some(_) => {
                    result = mid;
                    high = mid - 1;
                }
                None => low = mid + 1,
            }
        }
        result.min(self.max_offset())
    }

    pub fn flush(&self, least_pages: usize) -> io::Result<()> {
        self.files.flush(least_pages).map(|_| ())
    }

    /// Deletes files whose every unit points below `commit_log_min` (never the last one).
    pub fn delete_expired(&self, commit_log_min: i64) -> usize {
        let files = self.files.files();
        let size = self.files.file_size();
        let mut count = 0;
        for file in files.iter().take(files.len().saturating_sub(1)) {
            let last = file.raw(size - CQ_UNIT_SIZE, CQ_UNIT_SIZE).map(CqUnit::decode);
            if last.is_some_and(|u| u.is_valid() && u.phy_offset + (u.size as i64) <= commit_log_min) {
                count += 1;
            } else {
                break;
            }
        }
        self.files.remove_first(count);
        // As Java: the minimum moves even when no whole file could go.
        self.correct_min_offset(commit_log_min);
        count
    }

    pub fn destroy(&self) {
        self.files.destroy();
        self.max_physic_offset.store(-1, Ordering::Release);
        self.min_logic_offset.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(phy: i64) -> CqUnit {
        CqUnit { phy_offset: phy, size: 100, tags_code: 42 }
    }

    #[test]
    fn units_are_appended_read_and_recovered() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), &TopicName::new("T").unwrap(), 0, 5 * CQ_UNIT_SIZE);
        for i in 0..12 {
            cq.put(i, unit(i * 100)).unwrap();
        }
        cq.put(3, unit(300)).unwrap(); // a duplicate is ignored
        assert_eq!((cq.min_offset(), cq.max_offset()), (0, 12));
        assert_eq!(cq.get(7), Some(unit(700)));
        assert_eq!(cq.get(12), None);
        cq.flush(0).unwrap();
        drop(cq);
        let again = ConsumeQueue::new(dir.path(), &TopicName::new("T").unwrap(), 0, 5 * CQ_UNIT_SIZE);
        again.load().unwrap();
        again.recover(true);
        assert_eq!(again.max_offset(), 12);
        assert_eq!(again.max_physic_offset(), 1200);
    }

    #[test]
    fn a_queue_starting_past_zero_is_filled_like_java() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), &TopicName::new("T").unwrap(), 1, 10 * CQ_UNIT_SIZE);
        cq.put(13, unit(5000)).unwrap();
        assert_eq!((cq.min_offset(), cq.max_offset()), (13, 14));
        assert_eq!(cq.get(13), Some(unit(5000)));
        assert_eq!(cq.get(12), None);
    }

    #[test]
    fn truncation_drops_units_at_or_past_the_commit_log_end() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), &TopicName::new("T").unwrap(), 0, 4 * CQ_UNIT_SIZE);
        for i in 0..10 {
            cq.put(i, unit(i * 100)).unwrap();
        }
        cq.truncate_to_phy(450);
        assert_eq!(cq.max_offset(), 5);
        assert_eq!(cq.max_physic_offset(), 500);
        cq.put(5, unit(450)).unwrap();
        assert_eq!(cq.max_offset(), 6);
    }

    #[test]
    fn offset_by_time_finds_the_first_message_at_or_after_the_time() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), &TopicName::new("T").unwrap(), 0, 100 * CQ_UNIT_SIZE);
        for i in 0..10 {
            cq.put(i, unit(i * 100)).unwrap();
        }
        let time = |phy: i64, _| Some(1000 + phy); // message i stored at 1000 + 100 i
        assert_eq!(cq.offset_by_time(1350, time), 4);
        assert_eq!(cq.offset_by_time(0, time), 0);
        assert_eq!(cq.offset_by_time(99_999, time), 10);
    }
}
