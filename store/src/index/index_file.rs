//! One index file (Java `IndexFile` with its `IndexHeader`), big-endian throughout:
//!
//! ```text
//! header (40 B): beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 | endPhyOffset i64 |
//!                hashSlotCount i32 | indexCount i32
//! slots:         hash_slot_num x i32, slot s at 40 + s*4: number of the newest entry of that slot
//! entries:       index_num x 20 B, entry n at 40 + hash_slot_num*4 + n*20:
//!                keyHash i32 | phyOffset i64 | timeDiff i32 (seconds after beginTimestamp) | prev i32
//! ```
//!
//! `indexCount` starts at 1 (entry 0 is never used, 0 ends a chain); a file is full when
//! `indexCount >= index_num`.
//!
//! Concurrency: one writer (the dispatcher, through `IndexService`) puts keys while any number of
//! queries select. Every byte after the mapping's start is read and written only as whole,
//! 4-byte-aligned `AtomicU32` words holding the big-endian value (the header, the slots and the
//! entries are all made of such words; an i64 is two of them). So no access is ever a data race,
//! whatever callers do, and the ordering needed for correct answers is:
//! * the writer fills entry `n` (relaxed stores) **then** stores `n` into the slot with release
//!   ordering, and only after that raises the in-memory `indexCount` to `n + 1`, also release;
//! * a reader loads the slot and `indexCount` with acquire ordering, so entry `n` and every entry
//!   written before it (the chain it links to) are visible. It ignores a slot above `indexCount`,
//!   as Java does, and follows only `prev` values `<= indexCount`, which are written entries.
//!
//! The header's fields are also kept in memory as atomics (as Java's `IndexHeader` does): readers
//! take them from there, so an i64 is never seen half updated; the header bytes in the file are
//! rewritten on every put and on flush, and read only when the file is opened.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, Ordering};

use memmap2::{MmapOptions, MmapRaw};
use tracing::warn;

use super::{index_key_hash, IndexConfig, IndexError};
use crate::mapped_file::{open_reserved, reserve_blocks};

pub const HEADER_SIZE: usize = 40;
pub const HASH_SLOT_SIZE: usize = 4;
pub const ENTRY_SIZE: usize = 20;

pub const BEGIN_TIMESTAMP_POS: usize = 0;
pub const END_TIMESTAMP_POS: usize = 8;
pub const BEGIN_PHY_OFFSET_POS: usize = 16;
pub const END_PHY_OFFSET_POS: usize = 24;
pub const HASH_SLOT_COUNT_POS: usize = 32;
pub const INDEX_COUNT_POS: usize = 36;

/// Offsets inside an entry.
pub const ENTRY_KEY_HASH_POS: usize = 0;
pub const ENTRY_PHY_OFFSET_POS: usize = 4;
pub const ENTRY_TIME_DIFF_POS: usize = 12;
pub const ENTRY_PREV_POS: usize = 16;

/// Slot value and `prev` that mean "no entry".
const INVALID_INDEX: i32 = 0;

#[derive(Debug)]
struct Header {
    begin_timestamp: AtomicI64,
    end_timestamp: AtomicI64,
    begin_phy_offset: AtomicI64,
    end_phy_offset: AtomicI64,
    hash_slot_count: AtomicI32,
    index_count: AtomicI32,
}

pub struct IndexFile {
    path: PathBuf,
    _file: File,
    map: MmapRaw,
    size: usize,
    hash_slot_num: usize,
    index_num: usize,
    header: Header,
}

impl std::fmt::Debug for IndexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "IndexFile({}, indexCount {}, phy {}..{}, time {}..{})",
            self.path.display(),
            self.index_count(),
            self.begin_phy_offset(),
            self.end_phy_offset(),
            self.begin_timestamp(),
            self.end_timestamp()
        )
    }
}

/// Seconds from `begin_timestamp` to `store_timestamp` as Java stores them: 0 while the file has
/// no begin time, clamped to `[0, i32::MAX]`.
fn time_diff_seconds(store_timestamp: i64, begin_timestamp: i64) -> i32 {
    if begin_timestamp <= 0 {
        return 0;
    }
    let diff = store_timestamp.wrapping_sub(begin_timestamp) / 1000;
    diff.clamp(0, i32::MAX as i64) as i32
}

impl IndexFile {
    /// Creates a new file of the configured size (all zero, so the header is zero and the
    /// in-memory `indexCount` is 1). Like Java, positive `end_phy_offset` / `end_timestamp` (the
    /// previous file's end) become both begin and end values of the new file until its first key.
    pub fn create(path: &Path, config: &IndexConfig, end_phy_offset: i64, end_timestamp: i64) -> Result<IndexFile, IndexError> {
        config.validate()?;
        let io_err = |source| IndexError::Io { path: path.to_owned(), source };
        let file = open_reserved(path, config.file_size_bytes()).map_err(io_err)?;
        let f = Self::map(path, file, config)?;
        if end_phy_offset > 0 {
            f.set_i64(&f.header.begin_phy_offset, BEGIN_PHY_OFFSET_POS, end_phy_offset);
            f.set_i64(&f.header.end_phy_offset, END_PHY_OFFSET_POS, end_phy_offset);
        }
        if end_timestamp > 0 {
            f.set_i64(&f.header.begin_timestamp, BEGIN_TIMESTAMP_POS, end_timestamp);
            f.set_i64(&f.header.end_timestamp, END_TIMESTAMP_POS, end_timestamp);
        }
        Ok(f)
    }

    /// Opens an existing file and reads its header. A file shorter than the configured size is
    /// extended to it, as Java's `map(READ_WRITE, 0, size)` does; `indexCount <= 0` reads as 1.
    pub fn open(path: &Path, config: &IndexConfig) -> Result<IndexFile, IndexError> {
        config.validate()?;
        let io_err = |source| IndexError::Io { path: path.to_owned(), source };
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        if len < config.file_size_bytes() {
            reserve_blocks(&file, config.file_size_bytes()).map_err(io_err)?;
        }
        let f = Self::map(path, file, config)?;
        let h = &f.header;
        h.begin_timestamp.store(f.load_i64(BEGIN_TIMESTAMP_POS), Ordering::Relaxed);
        h.end_timestamp.store(f.load_i64(END_TIMESTAMP_POS), Ordering::Relaxed);
        h.begin_phy_offset.store(f.load_i64(BEGIN_PHY_OFFSET_POS), Ordering::Relaxed);
        h.end_phy_offset.store(f.load_i64(END_PHY_OFFSET_POS), Ordering::Relaxed);
        h.hash_slot_count.store(f.load_i32(HASH_SLOT_COUNT_POS, Ordering::Relaxed), Ordering::Relaxed);
        let index_count = f.load_i32(INDEX_COUNT_POS, Ordering::Relaxed);
        h.index_count.store(index_count.max(1), Ordering::Release);
        Ok(f)
    }

    fn map(path: &Path, file: File, config: &IndexConfig) -> Result<IndexFile, IndexError> {
        // validate() bounded the size by i32::MAX, so it fits a usize.
        let size = config.file_size_bytes() as usize;
        let map = MmapOptions::new().len(size).map_raw(&file).map_err(|source| IndexError::Io { path: path.to_owned(), source })?;
        // mmap returns page-aligned addresses; the word accessors rely on 4-byte alignment.
        if map.len() < size || !map.as_ptr().cast::<u32>().is_aligned() {
            return Err(IndexError::BadMapping { path: path.to_owned() });
        }
        Ok(IndexFile {
            path: path.to_owned(),
            _file: file,
            map,
            size,
            hash_slot_num: config.max_hash_slot_num,
            index_num: config.max_index_num,
            header: Header {
                begin_timestamp: AtomicI64::new(0),
                end_timestamp: AtomicI64::new(0),
                begin_phy_offset: AtomicI64::new(0),
                end_phy_offset: AtomicI64::new(0),
                hash_slot_count: AtomicI32::new(0),
                index_count: AtomicI32::new(1),
            },
        })
    }

    /// The 4-byte word at `pos` of the mapping.
    fn word(&self, pos: usize) -> &AtomicU32 {
        assert!(pos + 4 <= self.size, "index word {pos} outside {}", self.size);
        // SAFETY: `pos + 4 <= size <= map.len()`, so the 4 bytes lie inside the mapping.
        let ptr = unsafe { self.map.as_mut_ptr().add(pos) }.cast::<u32>();
        assert!(ptr.is_aligned(), "index word {pos} misaligned");
        // SAFETY: `ptr` is aligned (asserted) and points at 4 bytes inside the mapping, which
        // stays mapped as long as `self` lives, and the returned lifetime is tied to `self`.
        // Every access to the mapping goes through these word-sized atomics (see the module
        // comment), so there is no non-atomic or mixed-size access to race with. Another process
        // writing the file (a Java broker using the same store at the same time) is outside the
        // model, as for `MappedFile`.
        unsafe { AtomicU32::from_ptr(ptr) }
    }

    fn load_i32(&self, pos: usize, order: Ordering) -> i32 {
        u32::from_be(self.word(pos).load(order)) as i32
    }

    fn store_i32(&self, pos: usize, value: i32, order: Ordering) {
        self.word(pos).store((value as u32).to_be(), order);
    }

    fn load_i64(&self, pos: usize) -> i64 {
        let high = self.load_i32(pos, Ordering::Relaxed) as u32 as u64;
        let low = self.load_i32(pos + 4, Ordering::Relaxed) as u32 as u64;
        ((high << 32) | low) as i64
    }

    fn store_i64(&self, pos: usize, value: i64) {
        self.store_i32(pos, (value >> 32) as i32, Ordering::Relaxed);
        self.store_i32(pos + 4, value as i32, Ordering::Relaxed);
    }

    fn set_i64(&self, field: &AtomicI64, pos: usize, value: i64) {
        field.store(value, Ordering::Release);
        self.store_i64(pos, value);
    }

    fn slot_pos(&self, key_hash: i32) -> usize {
        // key_hash is never negative.
        HEADER_SIZE + (key_hash as u32 as usize % self.hash_slot_num) * HASH_SLOT_SIZE
    }

    /// Position of entry `n`, if the file has room for it.
    fn entry_pos(&self, n: i32) -> Option<usize> {
        let n = usize::try_from(n).ok().filter(|n| *n < self.index_num)?;
        Some(HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + n * ENTRY_SIZE)
    }

    /// Adds `key` -> `phy_offset`. False (and nothing written) when the file is full.
    /// One writer at a time (the caller serialises puts).
    pub fn put_key(&self, key: &str, phy_offset: i64, store_timestamp: i64) -> bool {
        let count = self.header.index_count.load(Ordering::Relaxed);
        let Some(entry) = self.entry_pos(count) else {
            warn!(path = %self.path.display(), index_count = count, index_num = self.index_num, "index file is full");
            return false;
        };
        let key_hash = index_key_hash(key);
        let slot = self.slot_pos(key_hash);
        let mut prev = self.load_i32(slot, Ordering::Relaxed);
        if prev <= INVALID_INDEX || prev > count {
            prev = INVALID_INDEX;
        }
        let time_diff = time_diff_seconds(store_timestamp, self.begin_timestamp());

        self.store_i32(entry + ENTRY_KEY_HASH_POS, key_hash, Ordering::Relaxed);
        self.store_i64(entry + ENTRY_PHY_OFFSET_POS, phy_offset);
        self.store_i32(entry + ENTRY_TIME_DIFF_POS, time_diff, Ordering::Relaxed);
        self.store_i32(entry + ENTRY_PREV_POS, prev, Ordering::Relaxed);
        // Publishes the entry to readers that reach it through this slot.
        self.store_i32(slot, count, Ordering::Release);

        let h = &self.header;
        if count <= 1 {
            self.set_i64(&h.begin_phy_offset, BEGIN_PHY_OFFSET_POS, phy_offset);
            self.set_i64(&h.begin_timestamp, BEGIN_TIMESTAMP_POS, store_timestamp);
        }
        if prev == INVALID_INDEX {
            let slots = h.hash_slot_count.load(Ordering::Relaxed).wrapping_add(1);
            h.hash_slot_count.store(slots, Ordering::Relaxed);
            self.store_i32(HASH_SLOT_COUNT_POS, slots, Ordering::Relaxed);
        }
        self.set_i64(&h.end_phy_offset, END_PHY_OFFSET_POS, phy_offset);
        self.set_i64(&h.end_timestamp, END_TIMESTAMP_POS, store_timestamp);
        // Publishes the entry to readers that follow `prev` links (they accept links <= count).
        h.index_count.store(count + 1, Ordering::Release);
        self.store_i32(INDEX_COUNT_POS, count + 1, Ordering::Relaxed);
        true
    }

    /// Offsets stored under `key` whose time lies in `[begin, end]` (ms), newest first, at most
    /// `max_num`.
    pub fn select_phy_offsets(&self, key: &str, max_num: usize, begin: i64, end: i64) -> Vec<i64> {
        let mut out = Vec::new();
        self.select_phy_offsets_into(&mut out, key, max_num, begin, end);
        out
    }

    /// As [`Self::select_phy_offsets`], appending to `out` until it holds `max_num` offsets.
    ///
    /// Java's walk: start at the key's slot; per entry, the time is `beginTimestamp + timeDiff *
    /// 1000`; an entry matches when its hash equals the key's (different keys may share a hash)
    /// and the time is inside the window; stop on a negative timeDiff, on a `prev` that is 0,
    /// above `indexCount` or equal to the current entry, or once an entry is older than `begin`.
    pub fn select_phy_offsets_into(&self, out: &mut Vec<i64>, key: &str, max_num: usize, begin: i64, end: i64) {
        let key_hash = index_key_hash(key);
        let slot_value = self.load_i32(self.slot_pos(key_hash), Ordering::Acquire);
        let count = self.header.index_count.load(Ordering::Acquire);
        if slot_value <= INVALID_INDEX || slot_value > count || count <= 1 {
            return;
        }
        let begin_timestamp = self.begin_timestamp();
        let mut next = slot_value;
        // A chain of a well-formed file visits each entry at most once; the bound only stops a
        // corrupt file's cycle (where Java would spin).
        for _ in 0..count {
            if out.len() >= max_num {
                break;
            }
            let Some(entry) = self.entry_pos(next) else { break };
            let hash_read = self.load_i32(entry + ENTRY_KEY_HASH_POS, Ordering::Relaxed);
            let phy_offset = self.load_i64(entry + ENTRY_PHY_OFFSET_POS);
            let time_diff = self.load_i32(entry + ENTRY_TIME_DIFF_POS, Ordering::Relaxed);
            let prev = self.load_i32(entry + ENTRY_PREV_POS, Ordering::Relaxed);
            if time_diff < 0 {
                break;
            }
            let time_read = begin_timestamp.wrapping_add(time_diff as i64 * 1000);
            if hash_read == key_hash && time_read >= begin && time_read <= end {
                out.push(phy_offset);
            }
            if prev <= INVALID_INDEX || prev > count || prev == next || time_read < begin {
                break;
            }
            next = prev;
        }
    }

    /// Java's `isTimeMatched`: the window `[begin, end]` overlaps this file's time range.
    pub fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let (first, last) = (self.begin_timestamp(), self.end_timestamp());
        (begin < first && end > last) || (begin >= first && begin <= last) || (end >= first && end <= last)
    }

    pub fn is_full(&self) -> bool {
        self.index_count() as i64 >= self.index_num as i64
    }

    /// Rewrites the header from memory and forces the whole file to disk.
    pub fn flush(&self) -> io::Result<()> {
        let h = &self.header;
        self.store_i64(BEGIN_TIMESTAMP_POS, h.begin_timestamp.load(Ordering::Acquire));
        self.store_i64(END_TIMESTAMP_POS, h.end_timestamp.load(Ordering::Acquire));
        self.store_i64(BEGIN_PHY_OFFSET_POS, h.begin_phy_offset.load(Ordering::Acquire));
        self.store_i64(END_PHY_OFFSET_POS, h.end_phy_offset.load(Ordering::Acquire));
        self.store_i32(HASH_SLOT_COUNT_POS, h.hash_slot_count.load(Ordering::Acquire), Ordering::Relaxed);
        self.store_i32(INDEX_COUNT_POS, h.index_count.load(Ordering::Acquire), Ordering::Relaxed);
        self.map.flush()
    }

    /// Removes the file from disk; the mapping stays valid for whoever still holds this value.
    pub fn delete(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file name: its creation time, `yyyyMMddHHmmssSSS`.
    pub fn file_name(&self) -> &str {
        self.path.file_name().and_then(|n| n.to_str()).unwrap_or("")
    }

    pub fn file_size(&self) -> usize {
        self.size
    }

    pub fn begin_timestamp(&self) -> i64 {
        self.header.begin_timestamp.load(Ordering::Acquire)
    }

    pub fn end_timestamp(&self) -> i64 {
        self.header.end_timestamp.load(Ordering::Acquire)
    }

    pub fn begin_phy_offset(&self) -> i64 {
        self.header.begin_phy_offset.load(Ordering::Acquire)
    }

    pub fn end_phy_offset(&self) -> i64 {
        self.header.end_phy_offset.load(Ordering::Acquire)
    }

    pub fn hash_slot_count(&self) -> i32 {
        self.header.hash_slot_count.load(Ordering::Acquire)
    }

    pub fn index_count(&self) -> i32 {
        self.header.index_count.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn time_diff_is_whole_seconds_clamped_and_zero_without_a_begin_time() {
        assert_eq!(time_diff_seconds(5_999, 1_000), 4);
        assert_eq!(time_diff_seconds(500, 1_000), 0);
        assert_eq!(time_diff_seconds(1_000_000, 0), 0);
        assert_eq!(time_diff_seconds(i64::MAX, 1), i32::MAX);
    }
}
