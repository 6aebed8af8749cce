//! Recovery at open (Java `recoverNormally` / `recoverAbnormally`): find the end of the last whole
//! record, cut everything after it (commit-log files past it, consume-queue units pointing past
//! it), and decide where the dispatcher resumes. It works on the store's [`Parts`], before the
//! `MessageStore` is made from them.

use std::collections::HashMap;
use std::sync::Arc;

use tracing::{info, warn};

use crate::dledger_log::{self, EntryAt, EntryLog};
use crate::error::{io_err, StoreError};
use crate::mapped_file::MappedFile;
use crate::message::record::{decode_record, DecodedRecord, RecordAt, MAGIC_BLANK, MAGIC_V1, MAGIC_V2};
use crate::parts::Parts;

/// What recovery found and did when the store was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// No abort file: the last stop was clean, so only the last three files were walked.
    pub last_exit_ok: bool,
    /// The end of the last whole record: the commit log's end after recovery.
    pub commit_log_end: i64,
    /// Where the dispatcher resumes.
    pub dispatch_from: i64,
    /// Some consume queue pointed past `commit_log_end` and was cut back to it.
    pub queues_truncated: bool,
}

/// Recovers the store: cuts the commit log and queues back to the last whole record and decides
/// where the dispatcher resumes.
pub(crate) fn recover(store: &Parts, last_exit_ok: bool) -> RecoveryReport {
    let mut max_phy_of_cq = -1i64;
    for cq in store.queues.all() {
        cq.recover(!last_exit_ok);
        max_phy_of_cq = max_phy_of_cq.max(cq.max_physic_offset());
    }
    let files = store.commit_log.files().files();
    if files.is_empty() {
        // No commit log: nothing the queues point at exists.
        store.queues.destroy_all();
        return RecoveryReport { last_exit_ok, ..RecoveryReport::default() };
    }
    let check_crc = store.config.check_crc_on_recover;
    let process_offset = if last_exit_ok {
        let start = files.len().saturating_sub(3);
        walk(&files[start..], check_crc, |_, _| {})
    } else {
        let start = abnormal_start(store, &files);
        info!(file = %files[start].path().display(), "recovering after a crash: re-dispatching from here");
        walk(&files[start..], check_crc, |record, offset| store.redispatch(record, offset))
    };
    info!(process_offset, max_phy_of_cq, "commit log recovered");

    // A queue's max physical offset is the END of its last record, so a queue that is complete
    // ends exactly at `process_offset`: only a larger value means units past the commit log.
    // (Java tests `>=` and so logs "truncate dirty logic files" on every clean restart while
    // truncating nothing, as its truncation keeps units that start below the offset.)
    let queues_truncated = max_phy_of_cq > process_offset;
    if queues_truncated {
        warn!(max_phy_of_cq, process_offset, "consume queues point past the commit log; truncating them");
        for cq in store.queues.all() {
            cq.truncate_to_phy(process_offset);
        }
    }
    // After a crash, pages may have reached the disk out of order, so whole records can sit
    // behind a torn one: erase the tail so a later crash cannot find them again. After a clean
    // stop nothing is torn, and erasing would read the whole last (1 GiB) file on every start.
    store.commit_log.files().truncate_to(process_offset as u64, !last_exit_ok);
    store.commit_log.set_flushed(process_offset as u64);

    // Next queue offsets and corrected min offsets, as Java's recoverTopicQueueTable.
    let min = store.commit_log.min_offset();
    let mut offsets: HashMap<String, HashMap<i32, i64>> = HashMap::new();
    for cq in store.queues.all() {
        offsets.entry(cq.topic().to_owned()).or_default().insert(cq.queue_id(), cq.max_offset());
        cq.correct_min_offset(min);
    }
    store.commit_log.set_queue_offsets(offsets);

    let dispatch_from = if last_exit_ok {
        // The dispatcher catches up from what the queues already hold.
        max_phy_of_cq.max(min).min(process_offset)
    } else {
        process_offset
    };
    RecoveryReport { last_exit_ok, commit_log_end: process_offset, dispatch_from, queues_truncated }
}

/// Recovery of a store whose commit log DLedger holds (Java's `DLedgerCommitLog.recover`). The
/// member recovered its own data already. When it holds data, the plain commit log before it
/// (if any) was sealed at the switch and is read as it is; the queues are cut back to the end
/// of the DLedger data if they point past it. On the first start (no DLedger data yet) the old
/// log is recovered as after a clean stop (Java does not check it more closely then), sealed with
/// an end-of-file blank at its end, and DLedger's data starts at the end of its last file.
///
/// Returns the report and the divided offset (Java's `dividedCommitlogOffset`: below it, the old
/// plain log; -1 when DLedger holds everything).
pub(crate) fn recover_dledger(store: &Parts, log: &dyn EntryLog, last_exit_ok: bool) -> Result<(RecoveryReport, i64), StoreError> {
    if log.first_segment_start().is_none() && !store.commit_log.files().is_empty() {
        let report = recover(store, true);
        let divided = seal_old_log(store, report.commit_log_end)?;
        log.start_at(divided).map_err(io_err(format!("cannot start the DLedger data at {divided}")))?;
        info!(divided, "first start with DLedger: the old commit log is sealed and DLedger's data starts after it");
        return Ok((RecoveryReport { last_exit_ok, ..report }, divided));
    }
    let mut max_phy_of_cq = -1i64;
    for cq in store.queues.all() {
        cq.recover(!last_exit_ok);
        max_phy_of_cq = max_phy_of_cq.max(cq.max_physic_offset());
    }
    let divided = log.first_segment_start().unwrap_or(-1);
    let write_end = log.write_end();
    let queues_truncated = max_phy_of_cq > write_end;
    if queues_truncated {
        warn!(max_phy_of_cq, write_end, "consume queues point past the DLedger data; truncating them");
        for cq in store.queues.all() {
            cq.truncate_to_phy(write_end);
        }
        max_phy_of_cq = store.queues.all().iter().map(|cq| cq.max_physic_offset()).max().unwrap_or(-1);
    }
    // The first readable offset: the old plain log's, else DLedger's.
    let min = if store.commit_log.files().is_empty() { log.min_offset() } else { store.commit_log.min_offset() };
    for cq in store.queues.all() {
        cq.correct_min_offset(min);
    }
    let mut dispatch_from = max_phy_of_cq.max(min).max(0);
    if !last_exit_ok {
        // After a crash the index lost what it wrote since its checkpoint (its files are cut back
        // to it at load): dispatch again from the DLedger segment the checkpoint says was safe, as
        // 5.x does. Queue units and index keys already there are skipped as duplicates.
        if let Some(from) = abnormal_dledger_start(store, log) {
            info!(from, "recovering after a crash: re-dispatching the DLedger data from here");
            dispatch_from = dispatch_from.min(from);
        }
    }
    info!(divided, write_end, dispatch_from, "DLedger commit log recovered");
    Ok((RecoveryReport { last_exit_ok, commit_log_end: write_end, dispatch_from, queues_truncated }, divided))
}

/// The start of the last DLedger segment whose first record is no newer than the checkpoint's
/// safe time (the first segment if none is).
fn abnormal_dledger_start(store: &Parts, log: &dyn EntryLog) -> Option<i64> {
    let min_timestamp = if store.config.message_index_enable && store.config.message_index_safe {
        store.checkpoint.min_timestamp_index()
    } else {
        store.checkpoint.min_timestamp()
    };
    let mut segments = Vec::new();
    let mut at = log.first_segment_start()?;
    while let Some(end) = log.segment_end(at).filter(|end| *end > at) {
        segments.push(at);
        at = end;
    }
    let write_end = log.write_end();
    let first_store_time = |start: i64| {
        let start = start.max(log.min_offset());
        let head = log.read(start, 8, write_end)?;
        let size = usize::try_from(i32::from_be_bytes(head.get(4..8)?.try_into().ok()?)).ok()?;
        let bytes = log.read(start, size.min(dledger_log::DISPATCH_READ_BYTES), write_end)?;
        match dledger_log::entry_at(&bytes) {
            EntryAt::Entry { body, .. } => match decode_record(body, false) {
                Ok(RecordAt::Record(r)) => Some(r.store_timestamp),
                _ => None,
            },
            _ => None,
        }
    };
    let chosen = segments.iter().rev().find(|start| first_store_time(**start).is_some_and(|t| t != 0 && t <= min_timestamp));
    Some(chosen.copied().unwrap_or_else(|| segments.first().copied().unwrap_or(at)).max(log.min_offset()))
}

/// Writes the end-of-file blank at `end` in the old log's last file (unless one is there) and
/// marks the file full: the old log is read-only from now on. Returns the file's end.
fn seal_old_log(store: &Parts, end: i64) -> Result<i64, StoreError> {
    let Some(last) = store.commit_log.files().last() else { return Ok(-1) };
    let file_end = (last.from_offset() + last.size() as u64) as i64;
    let pos = usize::try_from(end - last.from_offset() as i64).unwrap_or(last.size()).min(last.size());
    if pos + 8 <= last.size() {
        let has_blank = last.raw(pos + 4, 4).is_some_and(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]) == MAGIC_BLANK);
        if !has_blank {
            last.set_positions(pos);
            let mut blank = [0u8; 8];
            blank[..4].copy_from_slice(&((last.size() - pos) as i32).to_be_bytes());
            blank[4..].copy_from_slice(&MAGIC_BLANK.to_be_bytes());
            if !last.append(&blank) {
                return Err(StoreError::Io { what: "cannot write the end-of-file blank".into(), source: std::io::Error::other("no room") });
            }
            last.flush(0).map_err(io_err(format!("cannot flush {}", last.path().display())))?;
        }
    } else {
        info!(file = %last.path().display(), pos, "the old commit log's last file has no room for a blank; it ends full");
    }
    last.set_positions(last.size());
    Ok(file_end)
}

/// Java's choice after a crash: scanning back from the last file, the first one whose first
/// record is older than the checkpoint says everything was safely flushed.
fn abnormal_start(store: &Parts, files: &[Arc<MappedFile>]) -> usize {
    let min_timestamp = if store.config.message_index_enable && store.config.message_index_safe {
        store.checkpoint.min_timestamp_index()
    } else {
        store.checkpoint.min_timestamp()
    };
    for (i, file) in files.iter().enumerate().rev() {
        let Some(head) = file.raw(0, file.size().min(4096)) else { continue };
        let magic = head.get(4..8).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        if magic != Some(MAGIC_V1) && magic != Some(MAGIC_V2) {
            continue;
        }
        let Some(all) = file.raw(0, file.size()) else { continue };
        if let Ok(RecordAt::Record(first)) = decode_record(all, false) {
            if first.store_timestamp != 0 && first.store_timestamp <= min_timestamp {
                return i;
            }
        }
    }
    0
}

/// A write cut short leaves zeros where the rest of the record should be. The body CRC does not
/// cover the topic and properties, so check them: a whole record has a topic and ends with a
/// non-zero byte (its last property character, the 0x02 separator, or the last topic character).
fn tail_intact(record: &DecodedRecord<'_>, bytes: &[u8]) -> bool {
    let size = record.store_size as usize;
    !record.topic.is_empty() && size > 0 && bytes.get(size - 1).is_some_and(|b| *b != 0)
}

/// Walks records from the start of `files[0]`, calling `on_record` for each valid one, and
/// returns the offset just past the last valid record.
fn walk(files: &[Arc<MappedFile>], check_crc: bool, mut on_record: impl FnMut(&DecodedRecord<'_>, i64)) -> i64 {
    let mut end = files.first().map_or(0, |f| f.from_offset() as i64);
    for (i, file) in files.iter().enumerate() {
        let Some(bytes) = file.raw(0, file.size()) else { break };
        let mut pos = 0usize;
        loop {
            match decode_record(&bytes[pos..], check_crc) {
                Ok(RecordAt::Record(record)) if !tail_intact(&record, &bytes[pos..]) => {
                    warn!(offset = file.from_offset() as i64 + pos as i64, "recovery stops at a torn record");
                    return end;
                }
                Ok(RecordAt::Record(record)) => {
                    on_record(&record, file.from_offset() as i64 + pos as i64);
                    pos += record.store_size as usize;
                    end = file.from_offset() as i64 + pos as i64;
                }
                Ok(RecordAt::Blank) => {
                    // End of this file; the next file (if any) continues.
                    if i + 1 == files.len() {
                        return end;
                    }
                    end = files[i + 1].from_offset() as i64;
                    break;
                }
                Err(e) => {
                    if !(pos < bytes.len() && bytes[pos..].iter().take(8).all(|b| *b == 0)) {
                        warn!(offset = file.from_offset() as i64 + pos as i64, error = %e, "recovery stops at an invalid record");
                    }
                    return end;
                }
            }
        }
    }
    end
}
