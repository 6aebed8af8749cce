//! The DLedger file store, byte for byte Java's `DLedgerMmapFileStore` of 0.3.1.2.
//!
//! Layout: `<storeBaseDir>/dledger-<selfId>/` holds `data/` (or `dataStorePath`), `index/`,
//! `checkpoint` and `currterm`. Data segments (`mappedFileSizeForEntryData`) hold entries (the
//! 48-byte header of [`crate::entry`] + body) back to back; an entry of L bytes is placed only if
//! `L + 8` fits the segment's rest, else the rest becomes a blank (i32 -1, i32 rest, zeros) and
//! the entry starts the next segment. Index segments (`mappedFileSizeForEntryIndex`) hold one
//! 32-byte unit per entry, entry i at byte `i * 32`: i32 magic, i64 pos, i32 size, i64 index,
//! i64 term. Segment files are named by the 20-digit offset of their first byte.
//!
//! Layers, from the disk up:
//! - `mmap`: one mapped file (the crate's only `unsafe`);
//! - `segments`: a directory of segments (Java `MmapFileList`): load, roll with the blank,
//!   truncate, rebuild at an offset, flush ranges;
//! - `recovery`: Java's start-up walk over the data, checked against the index;
//! - `props_file`, [`term`]: the `checkpoint` and `currterm` files in Java's properties text;
//! - `clean`: expiry of old data segments and the disk-full flag (Java's `CleanSpaceService`);
//! - [`FileStore`]: the store, its flush/checkpoint and cleaning services, and the
//!   [`RaftLog`](crate::log::RaftLog) implementation; [`TermFile`] implements
//!   [`TermStore`](crate::log::TermStore).

mod clean;
mod file_store;
mod mmap;
mod props_file;
mod recovery;
mod segments;
pub mod term;

use std::io;
use std::path::PathBuf;

pub use clean::{decide, disk_used_ratio, CleanConfig, CleanDecision};
pub use file_store::{AppendHook, CommitListener, DataReader, FileStore, MAX_ENTRY_SIZE};
pub use props_file::{checkpoint_text, term_text};
pub use segments::file_name;
pub use term::{CurrentTerm, TermFile};

/// Bytes of one index unit.
pub const INDEX_UNIT_SIZE: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is {actual} bytes (or not a file); every file there must be a {expected}-byte segment (Java exits too)")]
    WrongSegmentSize { path: PathBuf, actual: u64, expected: usize },
    #[error("{path}: the name is not a 20-digit offset (Java cannot load it either)")]
    BadSegmentName { path: PathBuf },
    #[error("{path} does not start where the segment before it ends")]
    NotAdjacent { path: PathBuf },
    #[error("{path}: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    /// Java calls `System.exit(-1)` here: the valid data ends more than one segment before the
    /// last segment, and cutting there would delete whole segments of data.
    #[error(
        "recovery of {dir} stopped at offset {process_offset}, more than a segment before the last segment at {last_segment}; \
         check the data by hand before truncating it (Java exits here)"
    )]
    RecoveryStoppedEarly { dir: PathBuf, process_offset: u64, last_segment: u64 },
    #[error("unsupported configuration: {0}")]
    Config(String),
}

/// One index unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexUnit {
    pub magic: i32,
    pub pos: i64,
    pub size: i32,
    pub index: i64,
    pub term: i64,
}

impl IndexUnit {
    pub fn encode(&self) -> [u8; INDEX_UNIT_SIZE] {
        let mut out = [0u8; INDEX_UNIT_SIZE];
        out[0..4].copy_from_slice(&self.magic.to_be_bytes());
        out[4..12].copy_from_slice(&self.pos.to_be_bytes());
        out[12..16].copy_from_slice(&self.size.to_be_bytes());
        out[16..24].copy_from_slice(&self.index.to_be_bytes());
        out[24..32].copy_from_slice(&self.term.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<IndexUnit> {
        Some(IndexUnit { magic: be_i32(bytes, 0)?, pos: be_i64(bytes, 4)?, size: be_i32(bytes, 12)?, index: be_i64(bytes, 16)?, term: be_i64(bytes, 24)? })
    }
}

/// The fixed fields of an entry's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub magic: i32,
    pub size: i32,
    pub index: i64,
    pub term: i64,
    pub pos: i64,
    pub body_size: i32,
}

impl Header {
    pub fn decode(bytes: &[u8]) -> Option<Header> {
        Some(Header {
            magic: be_i32(bytes, 0)?,
            size: be_i32(bytes, 4)?,
            index: be_i64(bytes, 8)?,
            term: be_i64(bytes, 16)?,
            pos: be_i64(bytes, 24)?,
            body_size: be_i32(bytes, 44)?,
        })
    }
}

pub(crate) fn be_i32(bytes: &[u8], at: usize) -> Option<i32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

pub(crate) fn be_i64(bytes: &[u8], at: usize) -> Option<i64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(i64::from_be_bytes(a))
}

/// The index unit's offset for entry `index`, if representable.
pub(crate) fn unit_offset(index: i64) -> Option<u64> {
    u64::try_from(index).ok()?.checked_mul(INDEX_UNIT_SIZE as u64)
}
