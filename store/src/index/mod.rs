//! The message index (`<storePathRootDir>/index/`): find commit-log offsets by `topic#key`.
//!
//! Layers: [`index_file`] (one file: header, hash slots, entries, in Java's byte layout) and
//! [`index_service`] (the directory of files: load, build from dispatched records, roll when a
//! file is full, query newest to oldest, expiry, flush).
//!
//! A key is `topic + "#" + k`, for the message's `UNIQ_KEY` and for each non-empty item of its
//! space-separated `KEYS`; its hash is [`index_key_hash`].

pub mod index_file;
pub mod index_service;

#[cfg(test)]
mod tests;

use std::io;
use std::path::PathBuf;

pub use index_file::IndexFile;
pub use index_service::{IndexRecord, IndexService, QueryResult};

use crate::message::java_string_hash;

/// Java `maxHashSlotNum`.
pub const DEFAULT_MAX_HASH_SLOT_NUM: usize = 5_000_000;
/// Java `maxIndexNum`.
pub const DEFAULT_MAX_INDEX_NUM: usize = 5_000_000 * 4;
/// Java `maxMsgsNumBatch`: the most offsets one query returns.
pub const DEFAULT_MAX_MSGS_NUM_BATCH: usize = 64;

/// The index part of Java's `MessageStoreConfig`. The geometry must equal the one the files were
/// written with (Java does not record it in the file either).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexConfig {
    /// `maxHashSlotNum`: hash slots per file.
    pub max_hash_slot_num: usize,
    /// `maxIndexNum`: entries per file; entry 0 is never used, so a file holds one less key.
    pub max_index_num: usize,
    /// `maxMsgsNumBatch`: caps the `max_num` of a query.
    pub max_msgs_num_batch: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig { max_hash_slot_num: DEFAULT_MAX_HASH_SLOT_NUM, max_index_num: DEFAULT_MAX_INDEX_NUM, max_msgs_num_batch: DEFAULT_MAX_MSGS_NUM_BATCH }
    }
}

impl IndexConfig {
    /// Bytes of one index file: header, slots, entries.
    pub fn file_size_bytes(&self) -> u64 {
        let slots = (self.max_hash_slot_num as u64).saturating_mul(index_file::HASH_SLOT_SIZE as u64);
        let entries = (self.max_index_num as u64).saturating_mul(index_file::ENTRY_SIZE as u64);
        (index_file::HEADER_SIZE as u64).saturating_add(slots).saturating_add(entries)
    }

    /// Java computes the file size in an `int` and maps at most `Integer.MAX_VALUE` bytes, so a
    /// file Java can read is at most that big; a file needs one slot and room for one key
    /// (entry 0 is unused, hence two entries).
    pub fn validate(&self) -> Result<(), IndexError> {
        let size_bytes = self.file_size_bytes();
        let max_bytes = i32::MAX as u64;
        if self.max_hash_slot_num == 0 || self.max_index_num < 2 || size_bytes > max_bytes {
            return Err(IndexError::BadGeometry { max_hash_slot_num: self.max_hash_slot_num, max_index_num: self.max_index_num, size_bytes, max_bytes });
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(
        "maxHashSlotNum {max_hash_slot_num} and maxIndexNum {max_index_num} give {size_bytes}-byte index files; \
         need at least 1 slot, 2 entries and at most {max_bytes} bytes"
    )]
    BadGeometry { max_hash_slot_num: usize, max_index_num: usize, size_bytes: u64, max_bytes: u64 },
    #[error("{path}: the mapping is short or not 4-byte aligned")]
    BadMapping { path: PathBuf },
    #[error("{path}: a new index file refused a key")]
    FreshFileFull { path: PathBuf },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// No index file can be created (logged once when it began): the record is not indexed.
    #[error("no index file can be created")]
    Failed,
}

/// Java's index key hash: `abs(key.hashCode())`, and 0 when that is still negative
/// (`i32::MIN`, whose absolute value does not fit).
pub fn index_key_hash(key: &str) -> i32 {
    java_string_hash(key).checked_abs().unwrap_or(0)
}

/// `topic#key`, the string that is hashed and stored.
pub fn build_key(topic: &str, key: &str) -> String {
    let mut s = String::with_capacity(topic.len() + 1 + key.len());
    s.push_str(topic);
    s.push('#');
    s.push_str(key);
    s
}
