//! `timerlog/`: Java 5.3.3's `TimerLog`, segments of `mappedFileSizeTimerLog` bytes (100 MB)
//! named by their start offset, holding 52-byte units, big-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | unit size (52) |
//! | 8 | position of the previous unit of the same slot, -1 for the first |
//! | 4 | magic: 1 (default), \| 2 (rolled: delivered back into the timer), \| 4 (a delete marker) |
//! | 8 | the timer's write time when the unit was added (a slot time) |
//! | 4 | the slot time minus the write time |
//! | 8 | the message's commit-log offset |
//! | 4 | its size |
//! | 4 | Java's `String.hashCode` of its real topic (for the metrics check) |
//! | 8 | reserved, 0 |
//!
//! A unit that would leave less than 16 bytes at the end of a segment goes to the next one, the
//! rest of the old one marked blank (size = bytes left, 8 zero bytes, [`BLANK_MAGIC_CODE`]).

use std::io;
use std::path::PathBuf;

use crate::mapped_file_queue::{LoadError, MappedFileQueue};

pub const UNIT_SIZE: usize = 52;
/// Where a unit's commit-log offset starts.
pub const UNIT_PRE_SIZE_FOR_MSG: usize = 28;
const MIN_BLANK_LEN: usize = 4 + 8 + 4;
/// Java's `0xBBCCDDEE ^ 1880681586 + 8` (the addition binds first).
pub const BLANK_MAGIC_CODE: i32 = (0xBBCC_DDEE_u32 as i32) ^ (1_880_681_586 + 8);

/// Java's `isMagicOK`: only the low four bits may be set.
pub fn is_magic_ok(magic: i32) -> bool {
    (magic | 0xF) == 0xF
}

/// One unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub prev_pos: i64,
    pub magic: i32,
    /// The write time the unit was added at.
    pub enqueue_ms: i64,
    /// The slot time minus `enqueue_ms`.
    pub delay_ms: i32,
    pub offset_py: i64,
    pub size_py: i32,
    pub topic_hash: i32,
}

impl Unit {
    /// A delete marker (Java's `needDelete && !needRoll`): it cancels, and is never put out.
    pub fn is_delete_marker(&self) -> bool {
        self.magic & super::MAGIC_DELETE != 0 && self.magic & super::MAGIC_ROLL == 0
    }

    /// The slot the unit was added to.
    pub fn delayed_ms(&self) -> i64 {
        self.enqueue_ms + self.delay_ms as i64
    }

    pub fn encode(&self) -> [u8; UNIT_SIZE] {
        let mut b = [0u8; UNIT_SIZE];
        b[0..4].copy_from_slice(&(UNIT_SIZE as i32).to_be_bytes());
        b[4..12].copy_from_slice(&self.prev_pos.to_be_bytes());
        b[12..16].copy_from_slice(&self.magic.to_be_bytes());
        b[16..24].copy_from_slice(&self.enqueue_ms.to_be_bytes());
        b[24..28].copy_from_slice(&self.delay_ms.to_be_bytes());
        b[28..36].copy_from_slice(&self.offset_py.to_be_bytes());
        b[36..40].copy_from_slice(&self.size_py.to_be_bytes());
        b[40..44].copy_from_slice(&self.topic_hash.to_be_bytes());
        b
    }

    /// A unit from its bytes, or None for a blank, a bad size or a bad magic.
    pub fn decode(b: &[u8]) -> Option<Unit> {
        if b.len() < UNIT_SIZE {
            return None;
        }
        let i32_at = |at: usize| i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let i64_at = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[at..at + 8]);
            i64::from_be_bytes(a)
        };
        let (size, magic) = (i32_at(0), i32_at(12));
        if size != UNIT_SIZE as i32 || !is_magic_ok(magic) {
            return None;
        }
        Some(Unit {
            prev_pos: i64_at(4),
            magic,
            enqueue_ms: i64_at(16),
            delay_ms: i32_at(24),
            offset_py: i64_at(28),
            size_py: i32_at(36),
            topic_hash: i32_at(40),
        })
    }
}

pub struct TimerLog {
    files: MappedFileQueue,
}

impl TimerLog {
    /// Maps the segments of `dir`; recovery ([`TimerLog::recover`]) sets the end.
    pub fn open(dir: impl Into<PathBuf>, file_size: usize) -> Result<TimerLog, LoadError> {
        let files = MappedFileQueue::new(dir, file_size);
        files.load()?;
        Ok(TimerLog { files })
    }

    pub fn file_size(&self) -> usize {
        self.files.file_size()
    }

    /// Appends a unit; returns its position.
    pub fn append(&self, unit: &Unit) -> io::Result<i64> {
        let mut file = self.files.last_or_create(0)?;
        if UNIT_SIZE + MIN_BLANK_LEN > file.remaining() {
            let left = file.remaining();
            let mut blank = [0u8; MIN_BLANK_LEN];
            blank[0..4].copy_from_slice(&(left as i32).to_be_bytes());
            blank[12..16].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
            if left >= MIN_BLANK_LEN {
                file.append(&blank);
            }
            file.mark_full();
            file = self.files.last_or_create(0)?;
        }
        let at = file.from_offset() as i64 + file.wrote_position() as i64;
        if !file.append(&unit.encode()) {
            return Err(io::Error::other("timer log segment lost its room"));
        }
        Ok(at)
    }

    /// The unit at `pos`, if one is there.
    pub fn unit_at(&self, pos: i64) -> Option<Unit> {
        let pos = u64::try_from(pos).ok()?;
        let file = self.files.find(pos)?;
        let within = (pos - file.from_offset()) as usize;
        Unit::decode(file.read(within, UNIT_SIZE)?)
    }

    /// The end of what was written.
    pub fn max_offset(&self) -> i64 {
        self.files.max_offset() as i64
    }

    pub fn min_offset(&self) -> i64 {
        self.files.min_offset() as i64
    }

    pub fn flushed_offset(&self) -> i64 {
        self.files.flushed_offset() as i64
    }

    pub fn flush(&self) -> io::Result<i64> {
        Ok(self.files.flush(0)? as i64)
    }

    /// Java's `recoverAndRevise`: walks the units from the segment holding `begin`, handing each
    /// good one to `unit` with its position; stops at a blank (next segment) or, with `check`, at
    /// the first bad unit, and then cuts the log there. Without `check` it walks only what was
    /// written. Returns where the walk ended.
    pub fn recover(&self, begin: i64, check: bool, mut unit: impl FnMut(i64, &Unit)) -> i64 {
        let files = self.files.files();
        if files.is_empty() {
            return 0;
        }
        let start = files.iter().rposition(|f| begin >= f.from_offset() as i64).unwrap_or(0);
        let mut end = files[start].from_offset() as i64;
        'files: for file in &files[start..] {
            let limit = if check { file.size() } else { file.read_position() };
            let mut pos = 0;
            while pos + MIN_BLANK_LEN <= limit {
                let Some(head) = file.raw(pos, MIN_BLANK_LEN) else { break };
                let magic = i32::from_be_bytes([head[12], head[13], head[14], head[15]]);
                if magic == BLANK_MAGIC_CODE {
                    break;
                }
                match file.raw(pos, UNIT_SIZE).filter(|_| pos + UNIT_SIZE <= limit).and_then(Unit::decode) {
                    Some(u) => unit(file.from_offset() as i64 + pos as i64, &u),
                    None if check => {
                        end = file.from_offset() as i64 + pos as i64;
                        break 'files;
                    }
                    None => {}
                }
                pos += UNIT_SIZE;
            }
            end = file.from_offset() as i64 + pos as i64;
        }
        if check {
            self.files.truncate_to(end as u64, true);
        }
        end
    }

    /// Deletes the oldest segments whose last unit's message lies below `min_commit_offset` (the
    /// commit log no longer holds them), never the last (Java `deleteExpiredFileByOffsetForTimerLog`).
    pub fn delete_expired(&self, min_commit_offset: i64) -> usize {
        let files = self.files.files();
        let last_unit = self.last_unit_offset();
        let count = files
            .iter()
            .take(files.len().saturating_sub(1))
            .take_while(|f| f.raw(last_unit, UNIT_SIZE).and_then(Unit::decode).is_some_and(|u| u.offset_py < min_commit_offset))
            .count();
        self.files.remove_first(count);
        count
    }

    /// Where the last unit of a full segment starts (Java `getOffsetForLastUnit`).
    fn last_unit_offset(&self) -> usize {
        let size = self.files.file_size();
        size - (size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(n: i64) -> Unit {
        Unit { prev_pos: -1, magic: 1, enqueue_ms: 1_000 * n, delay_ms: 5_000, offset_py: 100 * n, size_py: 90, topic_hash: 7 }
    }

    #[test]
    fn units_roll_to_the_next_segment_behind_a_blank_and_recover() {
        let dir = tempfile::tempdir().unwrap();
        // Three units and a bit: the fourth does not fit with room for the blank.
        let size = 3 * UNIT_SIZE + 20;
        let log = TimerLog::open(dir.path().join("timerlog"), size).unwrap();
        let positions: Vec<i64> = (0..5).map(|n| log.append(&unit(n)).unwrap()).collect();
        assert_eq!(positions, vec![0, 52, 104, size as i64, size as i64 + 52]);
        assert_eq!(log.unit_at(52), Some(unit(1)));
        assert_eq!(log.unit_at(52).unwrap().delayed_ms(), 6_000);
        log.flush().unwrap();
        drop(log);

        let log = TimerLog::open(dir.path().join("timerlog"), size).unwrap();
        let mut seen = Vec::new();
        let end = log.recover(0, true, |pos, u| seen.push((pos, u.offset_py)));
        assert_eq!(seen, vec![(0, 0), (52, 100), (104, 200), (size as i64, 300), (size as i64 + 52, 400)]);
        assert_eq!(end, size as i64 + 104);
        assert_eq!(log.max_offset(), end);
        assert_eq!(log.append(&unit(5)).unwrap(), end);
        // Both segments' last units point below 1000: the first may go, never the last.
        assert_eq!(log.delete_expired(1_000), 1);
        assert_eq!(log.min_offset(), size as i64);
    }

    #[test]
    fn the_blank_magic_is_javas() {
        assert_eq!(BLANK_MAGIC_CODE, (0xBBCCDDEE_u32 as i32) ^ 1_880_681_594);
        assert!(is_magic_ok(1) && is_magic_ok(1 | 2 | 4) && !is_magic_ok(BLANK_MAGIC_CODE));
    }
}
