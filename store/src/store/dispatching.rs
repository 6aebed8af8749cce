//! The dispatcher (Java's `ReputMessageService`): walks what the commit log made readable, in
//! order, and hands each record to the dispatcher list ([`crate::dispatch`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use remoting::service::ServiceContext;
use tracing::error;

use super::{DLedgerMode, MessageStore};
use crate::config::BrokerRole;
use crate::dispatch::{AlreadyStarted, ArrivalListener, Dispatcher};
use crate::dledger_log::{self, EntryAt};
use crate::message::record::{decode_record, DecodedRecord, RecordAt};

impl MessageStore {
    /// Sets what the arrival notice (the last built-in dispatcher) tells of each queued record.
    pub fn set_arrival_listener(&self, listener: ArrivalListener) {
        self.arrival.set_listener(listener);
    }

    /// Adds a dispatcher after the others (Java's `addDispatcher`); refused once the store
    /// started. It sees every record dispatched from then on; recovery ran at open, before it.
    pub fn add_dispatcher(&self, dispatcher: Arc<dyn Dispatcher>) -> Result<(), AlreadyStarted> {
        self.dispatchers.add_last(dispatcher)
    }

    /// Adds a dispatcher before the others (as Java's broker puts its filter bitmap first).
    pub fn add_dispatcher_first(&self, dispatcher: Arc<dyn Dispatcher>) -> Result<(), AlreadyStarted> {
        self.dispatchers.add_first(dispatcher)
    }

    pub(super) fn wake_dispatch(&self) {
        if self.reput_sleeping.load(Ordering::Acquire) {
            if let Some(reput) = self.reput_waker.get() {
                reput.wake();
            }
        }
    }

    /// The dispatcher: catches up, then sleeps at most 1 ms, woken early by a put that sees it
    /// sleeping (a put while it works costs nothing).
    pub(super) fn run_reput(&self, cx: &ServiceContext) {
        loop {
            let seen = self.max_phy_offset();
            if self.dispatch_available() {
                continue;
            }
            self.reput_sleeping.store(true, Ordering::Release);
            // Re-check after raising the flag: a put that saw the flag clear has already appended.
            // A wake-up between here and the wait is not lost (the service keeps it). Bytes that
            // could not be dispatched (a slave's partial record, waiting for its next frame) are
            // not new: sleep rather than spin on them.
            let idle = self.max_phy_offset() <= self.reput_from.load(Ordering::Acquire).max(seen);
            let running = if idle { cx.wait(Duration::from_millis(1)) } else { !cx.is_stopped() };
            self.reput_sleeping.store(false, Ordering::Release);
            if !running {
                break;
            }
        }
    }

    /// Dispatches every complete record past the reput offset. Returns whether it did any work.
    pub(crate) fn dispatch_available(&self) -> bool {
        let mut did = false;
        loop {
            let mut from = self.reput_from.load(Ordering::Acquire);
            if let Some(d) = &self.dledger {
                let divided = d.divided.load(Ordering::Acquire);
                if from >= divided || self.commit_log.files().is_empty() {
                    return self.dispatch_entries(d) || did;
                }
            }
            let min = self.commit_log.min_offset();
            if from < min {
                from = min;
            }
            if from >= self.commit_log.max_offset() {
                if let Some(d) = &self.dledger {
                    // The sealed old log ends at the divided offset: DLedger's data follows.
                    self.reput_from.store(from.max(d.divided.load(Ordering::Acquire)), Ordering::Release);
                    continue;
                }
                self.reput_from.store(from, Ordering::Release);
                return did;
            }
            let Some((file, pos)) = self.commit_log.locate(from) else { return did };
            let Some(bytes) = file.read_from(pos) else { return did };
            // Only bytes read up to the file's end make a blank or an undecodable record final. A
            // slave appends its master's frames, which end anywhere inside a record, and may fill
            // the file between this read and a later look at it: a partial record seen then is
            // not corruption, and the blank's tail may still be coming.
            let to_file_end = pos + bytes.len() == file.size();
            let mut at = 0;
            while at < bytes.len() {
                match decode_record(&bytes[at..], false) {
                    Ok(RecordAt::Record(record)) => {
                        self.dispatch(&record, file.from_offset() as i64 + (pos + at) as i64);
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
            if at == 0 {
                return did;
            }
            did = true;
            self.reput_from.store(from + at as i64, Ordering::Release);
        }
    }

    /// Dispatches the committed DLedger entries past the reput offset: the record in each (at
    /// pos + 48), the blank at a segment's end skipped. Returns whether it did any work.
    pub(super) fn dispatch_entries(&self, d: &DLedgerMode) -> bool {
        let mut did = false;
        loop {
            let from = self.reput_from.load(Ordering::Acquire).max(d.log.min_offset());
            let committed = d.log.committed_end();
            if from >= committed {
                self.reput_from.store(from, Ordering::Release);
                return did;
            }
            let Some(bytes) = d.log.read(from, dledger_log::DISPATCH_READ_BYTES, committed) else {
                // Past the written bytes of a full segment: the next one starts at its end.
                match d.log.segment_end(from) {
                    Some(end) if end > from && end <= committed => {
                        self.reput_from.store(end, Ordering::Release);
                        continue;
                    }
                    _ => return did,
                }
            };
            let mut at = 0;
            let mut next = None;
            while at < bytes.len() {
                match dledger_log::entry_at(&bytes[at..]) {
                    EntryAt::Entry { size, body } => {
                        let offset = from + (at + dledger_log::ENTRY_BODY_OFFSET) as i64;
                        match decode_record(body, false) {
                            Ok(RecordAt::Record(record)) => self.dispatch(&record, offset),
                            Ok(RecordAt::Blank) => error!(offset, "a DLedger entry holds a commit-log blank; skipped"),
                            Err(e) => error!(offset, error = %e, "a DLedger entry holds no commit-log record; skipped"),
                        }
                        at += size;
                    }
                    EntryAt::Blank => {
                        next = d.log.segment_end(from + at as i64);
                        break;
                    }
                    EntryAt::Incomplete => break,
                    EntryAt::Invalid(size) => {
                        // Committed bytes are whole entries: this is damage. Skip to the next segment.
                        error!(offset = from + at as i64, size, "invalid DLedger entry header; skipping the rest of the segment");
                        next = d.log.segment_end(from + at as i64);
                        break;
                    }
                }
            }
            let to = next.unwrap_or(from + at as i64);
            if to <= from {
                return did;
            }
            did = true;
            self.reput_from.store(to, Ordering::Release);
        }
    }

    /// Hands one new record to the dispatchers; a slave (not in DLedger mode) first notes its
    /// store time, which its checkpoint's physic time follows.
    pub(crate) fn dispatch(&self, record: &DecodedRecord<'_>, phy_offset: i64) {
        self.note_slave_store_time(record);
        self.dispatchers.dispatch(record, phy_offset);
    }

    pub(super) fn note_slave_store_time(&self, record: &DecodedRecord<'_>) {
        if self.dledger.is_none() && self.role() == BrokerRole::Slave {
            self.commit_log.note_store_timestamp(record.store_timestamp);
        }
    }

    /// Whether the dispatcher has caught up with everything readable.
    pub fn dispatched_all(&self) -> bool {
        self.dispatch_behind_bytes() == 0
    }

    /// Wakes the dispatcher (a DLedger commit made more readable).
    pub fn wake_dispatcher(&self) {
        if let Some(reput) = self.reput_waker.get() {
            reput.wake();
        }
    }

    /// How far the dispatcher is behind the commit log, in bytes.
    pub fn dispatch_behind_bytes(&self) -> i64 {
        (self.max_phy_offset() - self.reput_from.load(Ordering::Acquire)).max(0)
    }
}
