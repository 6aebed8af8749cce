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

use bytes::Bytes;
use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use tracing::error;

use crate::commit_log::CommitLog;
use crate::message::record::{decode_record, RecordAt};
use crate::physical_log::{plain_dispatch_step, plain_replication_read, PhysicalLog, Visit};

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

/// A DLedger broker's physical log: the plain commit log of before the switch, sealed (read-only,
/// ending with its blank at `divided`), followed by the member's entries.
pub struct SealedThenDLedger {
    plain: Arc<CommitLog>,
    entries: Arc<dyn EntryLog>,
    /// Java's `dividedCommitlogOffset` (-1 when DLedger holds everything); fixed by recovery.
    divided: i64,
    /// The first offset at the last cleaning pass (queues and index follow DLedger's deletions).
    cleaned_below: AtomicI64,
}

impl SealedThenDLedger {
    pub fn new(plain: Arc<CommitLog>, entries: Arc<dyn EntryLog>, divided: i64) -> SealedThenDLedger {
        SealedThenDLedger { plain, entries, divided, cleaned_below: AtomicI64::new(0) }
    }

    /// The walk over the committed entries from `from`: the record in each (at pos + 48), the
    /// blank at a segment's end skipped.
    fn entries_step(&self, from: i64, visit: &mut Visit<'_>) -> i64 {
        let log = self.entries.as_ref();
        let from = from.max(log.min_offset());
        let committed = log.committed_end();
        if from >= committed {
            return from;
        }
        let Some(bytes) = log.read(from, DISPATCH_READ_BYTES, committed) else {
            // Past the written bytes of a full segment: the next one starts at its end.
            return match log.segment_end(from) {
                Some(end) if end > from && end <= committed => end,
                _ => from,
            };
        };
        let mut at = 0;
        let mut next = None;
        while at < bytes.len() {
            match entry_at(&bytes[at..]) {
                EntryAt::Entry { size, body } => {
                    let offset = from + (at + ENTRY_BODY_OFFSET) as i64;
                    match decode_record(body, false) {
                        Ok(RecordAt::Record(record)) => visit(&record, offset),
                        Ok(RecordAt::Blank) => error!(offset, "a DLedger entry holds a commit-log blank; skipped"),
                        Err(e) => error!(offset, error = %e, "a DLedger entry holds no commit-log record; skipped"),
                    }
                    at += size;
                }
                EntryAt::Blank => {
                    next = log.segment_end(from + at as i64);
                    break;
                }
                EntryAt::Incomplete => break,
                EntryAt::Invalid(size) => {
                    // Committed bytes are whole entries: this is damage. Skip to the next segment.
                    error!(offset = from + at as i64, size, "invalid DLedger entry header; skipping the rest of the segment");
                    next = log.segment_end(from + at as i64);
                    break;
                }
            }
        }
        next.unwrap_or(from + at as i64).max(from)
    }
}

impl PhysicalLog for SealedThenDLedger {
    fn min_offset(&self) -> i64 {
        if self.plain.files().is_empty() {
            self.entries.min_offset()
        } else {
            self.plain.min_offset()
        }
    }

    /// What is committed (or the old log's end, if more).
    fn max_offset(&self) -> i64 {
        readable_end(self.entries.as_ref()).max(self.plain.max_offset())
    }

    fn read(&self, offset: i64, size: usize) -> Option<Bytes> {
        if offset < self.divided {
            return self.plain.read_bytes(offset, size);
        }
        let bytes = self.entries.read(offset, size, self.entries.committed_end())?;
        (bytes.len() == size).then(|| Bytes::from(bytes))
    }

    fn dispatch_step(&self, from: i64, visit: &mut Visit<'_>) -> i64 {
        if from >= self.divided || self.plain.files().is_empty() {
            return self.entries_step(from, visit);
        }
        let from = from.max(self.plain.min_offset());
        if from >= self.plain.max_offset() {
            // The sealed old log ends at the divided offset: DLedger's data follows.
            return from.max(self.divided);
        }
        plain_dispatch_step(&self.plain, from, visit)
    }

    /// Classic HA does not run in DLedger mode; this reads the old plain log, as before.
    fn replication_read(&self, offset: i64, max: usize) -> Option<Vec<u8>> {
        plain_replication_read(&self.plain, offset, max)
    }

    fn follows_master_by_ha(&self) -> bool {
        false
    }

    fn divided_offset(&self) -> i64 {
        self.divided
    }

    fn is_dledger(&self) -> bool {
        true
    }

    fn first_offset_moved(&self) -> bool {
        let min = self.min_offset();
        self.cleaned_below.swap(min, Ordering::AcqRel) < min
    }
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
