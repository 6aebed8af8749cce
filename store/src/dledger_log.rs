//! The commit log when DLedger holds it (the read side of Java's `DLedgerCommitLog`).
//!
//! DLedger's data files continue the commit log's address space: each entry is a 48-byte DLedger
//! header followed by one commit-log record, whose PHYSICALOFFSET is the entry's pos + 48. So
//! consume queues, the index and message ids point straight at records, and a read by offset
//! reads the data files as it reads plain commit-log files. Offsets below `divided` (Java's
//! `dividedCommitlogOffset`) are the plain commit log a store had before it switched to DLedger
//! and stay readable. Readers and the dispatcher see only what the group committed.
//!
//! The data files belong to the DLedger member, which the broker runs; the store reads them
//! through [`EntryLog`] and appends through the [`crate::commit_log::AppendLog`] the broker sets.

use std::io;

/// Where a DLedger entry's body (the commit-log record) starts.
pub const ENTRY_BODY_OFFSET: usize = 48;
/// A DLedger data segment's end-of-file blank starts with this magic.
pub const ENTRY_BLANK_MAGIC: i32 = -1;
/// The most bytes one dispatch read copies: more than the largest entry DLedger takes (4 MiB).
pub(crate) const DISPATCH_READ_BYTES: usize = 8 * 1024 * 1024;

/// The DLedger member's data files as the store reads them.
pub trait EntryLog: Send + Sync {
    /// The end of the committed entries' bytes; -1 before anything was committed.
    fn committed_end(&self) -> i64;
    /// The first held byte (0 without segments).
    fn min_offset(&self) -> i64;
    /// The start of the first data segment, if any.
    fn first_segment_start(&self) -> Option<i64>;
    /// The end of the written bytes (committed or not); 0 without segments.
    fn write_end(&self) -> i64;
    /// Up to `max` written bytes from `offset`, inside one segment and below `limit`.
    fn read(&self, offset: i64, max: usize, limit: i64) -> Option<Vec<u8>>;
    /// The end of the segment holding `offset`.
    fn segment_end(&self, offset: i64) -> Option<i64>;
    /// Creates the first segment of an empty log at `offset` (the upgrade from a plain commit log).
    fn start_at(&self, offset: i64) -> io::Result<()>;
}

/// What one position of the DLedger data holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EntryAt<'a> {
    /// A whole entry: its size and its body.
    Entry { size: usize, body: &'a [u8] },
    /// The segment's end-of-file blank.
    Blank,
    /// Not a whole entry within these bytes.
    Incomplete,
    /// A header that no entry has.
    Invalid(i32),
}

/// Reads the entry at the start of `bytes`.
pub(crate) fn entry_at(bytes: &[u8]) -> EntryAt<'_> {
    let Some(head) = bytes.get(..8) else { return EntryAt::Incomplete };
    let magic = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    if magic == ENTRY_BLANK_MAGIC {
        return EntryAt::Blank;
    }
    let size = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
    let Ok(size) = usize::try_from(size) else { return EntryAt::Invalid(size) };
    if size <= ENTRY_BODY_OFFSET {
        return EntryAt::Invalid(size as i32);
    }
    match bytes.get(ENTRY_BODY_OFFSET..size) {
        Some(body) => EntryAt::Entry { size, body },
        None => EntryAt::Incomplete,
    }
}

/// The readable end of a DLedger-mode commit log, as Java's `getMaxOffset`: the committed pos,
/// else the data's first offset (the divided offset right after an upgrade), else 0.
pub(crate) fn readable_end(log: &dyn EntryLog) -> i64 {
    let committed = log.committed_end();
    if committed > 0 {
        return committed;
    }
    log.min_offset().max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_blanks_and_partial_headers_are_told_apart() {
        let mut entry = vec![0u8; 60];
        entry[..4].copy_from_slice(&0xCCDD_EEFFu32.to_be_bytes());
        entry[4..8].copy_from_slice(&60i32.to_be_bytes());
        assert_eq!(entry_at(&entry), EntryAt::Entry { size: 60, body: &entry[48..60] });
        assert_eq!(entry_at(&entry[..59]), EntryAt::Incomplete);
        assert_eq!(entry_at(&entry[..6]), EntryAt::Incomplete);
        let mut blank = vec![0u8; 8];
        blank[..4].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(entry_at(&blank), EntryAt::Blank);
        assert_eq!(entry_at(&[0u8; 16]), EntryAt::Invalid(0));
    }
}
