//! The physical log: where the records are, as the store reads them. One trait, two logs:
//!
//! - [`PlainLog`]: the commit log of mapped files (a master's, or a slave's that classic HA fills);
//! - [`crate::dledger_log::SealedThenDLedger`]: a DLedger broker's, the plain log sealed at the
//!   switch (read-only, below Java's `dividedCommitlogOffset`) followed by the member's entry log.
//!
//! Reads by offset, the log's bounds, the dispatcher's walk, the cleaning pass and replication's
//! read side go through it, so the store does not branch on the kind of log. Appends do not: they
//! go through the [`crate::commit_log::AppendLog`] the store holds.

use bytes::Bytes;
use std::sync::Arc;

use tracing::error;

use crate::commit_log::CommitLog;
use crate::message::record::{decode_record, DecodedRecord, RecordAt};

/// Called by the dispatcher's walk for each whole record, with its physical offset.
pub type Visit<'v> = dyn FnMut(&DecodedRecord<'_>, i64) + 'v;

pub trait PhysicalLog: Send + Sync {
    /// The first readable offset (Java `getMinPhyOffset`).
    fn min_offset(&self) -> i64;

    /// The end of readable data (Java `getMaxPhyOffset`).
    fn max_offset(&self) -> i64;

    /// `size` readable bytes at `offset` (none if not all of them are readable).
    fn read(&self, offset: i64, size: usize) -> Option<Bytes>;

    /// Whether the page cache holds every page of `[offset, offset + len)` (within its file): a
    /// read of it takes no disk wait. False when not known.
    fn resident(&self, _offset: i64, _len: usize) -> bool {
        false
    }

    /// One step of the dispatcher's walk from `from`: hands each whole readable record of one
    /// read to `visit`, in order, and returns where the next step starts (`from` itself, or less
    /// when nothing is readable yet; a step may also only skip what holds no record).
    fn dispatch_step(&self, from: i64, visit: &mut Visit<'_>) -> i64;

    /// Up to `max` raw bytes from `offset`, never past what is readable in its file: what HA
    /// ships to slaves (Java `getCommitLogData`, cut to the batch size).
    fn replication_read(&self, offset: i64, max: usize) -> Option<Vec<u8>>;

    /// Whether classic HA fills this log on a slave: its dispatcher then notes each record's
    /// store time, which the slave's checkpoint follows.
    fn follows_master_by_ha(&self) -> bool;

    /// Java's `dividedCommitlogOffset`: where a DLedger log's entries start after the sealed plain
    /// log; -1 otherwise.
    fn divided_offset(&self) -> i64 {
        -1
    }

    /// Whether DLedger holds the log.
    fn is_dledger(&self) -> bool {
        false
    }

    /// Whether the log deleted its own oldest data since the last call (a DLedger member expires
    /// its files itself; the queues and index follow). The plain log's deletions are the cleaning
    /// pass's own.
    fn first_offset_moved(&self) -> bool {
        false
    }
}

/// The plain commit log.
pub struct PlainLog {
    log: Arc<CommitLog>,
}

impl PlainLog {
    pub fn new(log: Arc<CommitLog>) -> PlainLog {
        PlainLog { log }
    }
}

impl PhysicalLog for PlainLog {
    fn min_offset(&self) -> i64 {
        self.log.min_offset()
    }

    fn max_offset(&self) -> i64 {
        self.log.max_offset()
    }

    fn read(&self, offset: i64, size: usize) -> Option<Bytes> {
        self.log.read_bytes(offset, size)
    }

    fn resident(&self, offset: i64, len: usize) -> bool {
        self.log.locate(offset).is_some_and(|(file, pos)| file.resident(pos, len))
    }

    fn dispatch_step(&self, from: i64, visit: &mut Visit<'_>) -> i64 {
        plain_dispatch_step(&self.log, from, visit)
    }

    fn replication_read(&self, offset: i64, max: usize) -> Option<Vec<u8>> {
        plain_replication_read(&self.log, offset, max)
    }

    fn follows_master_by_ha(&self) -> bool {
        true
    }
}

/// Up to `max` bytes from `offset`, within its file and below its readable end.
pub(crate) fn plain_replication_read(log: &CommitLog, offset: i64, max: usize) -> Option<Vec<u8>> {
    let (file, pos) = log.locate(offset)?;
    file.read_from(pos).filter(|b| !b.is_empty()).map(|b| b[..b.len().min(max)].to_vec())
}

/// The walk over a plain commit log: the records of one file read from `from` (moved up to the
/// log's first offset); a blank, or undecodable bytes, at the end of what the file holds skip to
/// the next file.
pub(crate) fn plain_dispatch_step(log: &CommitLog, from: i64, visit: &mut Visit<'_>) -> i64 {
    let from = from.max(log.min_offset());
    if from >= log.max_offset() {
        return from;
    }
    let Some((file, pos)) = log.locate(from) else { return from };
    let Some(bytes) = file.read_from(pos) else { return from };
    // Only bytes read up to the file's end make a blank or an undecodable record final. A slave
    // appends its master's frames, which end anywhere inside a record, and may fill the file
    // between this read and a later look at it: a partial record seen then is not corruption,
    // and the blank's tail may still be coming.
    let to_file_end = pos + bytes.len() == file.size();
    let mut at = 0;
    while at < bytes.len() {
        match decode_record(&bytes[at..], false) {
            Ok(RecordAt::Record(record)) => {
                visit(&record, file.from_offset() as i64 + (pos + at) as i64);
                at += record.store_size as usize;
            }
            Ok(RecordAt::Blank) => {
                if to_file_end {
                    at = file.size() - pos;
                }
                break;
            }
            Err(e) => {
                if to_file_end {
                    error!(offset = file.from_offset() as i64 + (pos + at) as i64, error = %e, "undecodable record; skipping the rest of the file");
                    at = file.size() - pos;
                }
                break;
            }
        }
    }
    from + at as i64
}
