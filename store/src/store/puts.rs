//! Puts: refused when not running, on a slave or with a full disk; otherwise through the append
//! path (the commit log, or the DLedger one the broker sets), then the dispatcher and the append
//! listener are woken.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::MessageStore;
use crate::commit_log::{AppendLog, PutCallback, PutMessageResult};
use crate::config::BrokerRole;
use crate::message::MessageToStore;

impl MessageStore {
    /// Appends one message.
    pub fn put_message(&self, msg: &MessageToStore) -> PutMessageResult {
        self.put_messages(std::slice::from_ref(msg))
    }

    /// Appends a batch (one topic and queue).
    pub fn put_messages(&self, msgs: &[MessageToStore]) -> PutMessageResult {
        if let Some(refused) = self.refuse_put() {
            return refused;
        }
        let Some(appender) = self.appender() else { return Self::no_appender() };
        let result = appender.append(msgs);
        self.wake_dispatch();
        self.appended();
        result
    }

    /// Appends one message and answers once it is appended, whatever the flush policy says
    /// ([`AppendLog::append_no_wait`]): the timer's releases and the schedule's deliveries.
    pub fn put_message_no_wait(&self, msg: &MessageToStore) -> PutMessageResult {
        if let Some(refused) = self.refuse_put() {
            return refused;
        }
        let Some(appender) = self.appender() else { return Self::no_appender() };
        let result = appender.append_no_wait(std::slice::from_ref(msg));
        self.wake_dispatch();
        self.appended();
        result
    }

    /// As [`MessageStore::put_message_no_wait`], with the result handed to `done`
    /// ([`AppendLog::append_no_wait_then`]).
    pub fn put_message_no_wait_then(&self, msg: &MessageToStore, done: PutCallback) {
        if let Some(refused) = self.refuse_put() {
            return done(refused);
        }
        let Some(appender) = self.appender() else { return done(Self::no_appender()) };
        appender.append_no_wait_then(std::slice::from_ref(msg), done);
        self.wake_dispatch();
        self.appended();
    }

    /// As [`MessageStore::put_messages`], with the result handed to `done`; under SYNC_FLUSH
    /// from the flush service once the records are on disk, so the caller's thread is not held.
    pub fn put_messages_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        if let Some(refused) = self.refuse_put() {
            return done(refused);
        }
        let Some(appender) = self.appender() else { return done(Self::no_appender()) };
        appender.append_then(msgs, done);
        self.wake_dispatch();
        self.appended();
    }

    pub(super) fn no_appender() -> PutMessageResult {
        PutMessageResult::failed(crate::commit_log::PutStatus::ServiceNotAvailable, "the DLedger commit log is not started")
    }

    pub(super) fn refuse_put(&self) -> Option<PutMessageResult> {
        use crate::commit_log::PutStatus::ServiceNotAvailable;
        if !self.running.load(Ordering::Acquire) {
            return Some(PutMessageResult::failed(ServiceNotAvailable, "message store is not running"));
        }
        if self.role() == BrokerRole::Slave {
            return Some(PutMessageResult::failed(ServiceNotAvailable, "the broker is a slave"));
        }
        if self.disk_full.load(Ordering::Acquire) {
            return Some(PutMessageResult::failed(ServiceNotAvailable, "the disk is full; writes are refused until space is freed"));
        }
        if self.index.as_ref().is_some_and(|index| index.has_failed()) {
            return Some(PutMessageResult::failed(ServiceNotAvailable, "no index file can be created; writes are refused until one can"));
        }
        None
    }

    /// The append path puts go through: the commit log, or in DLedger mode what the broker set
    /// (none before it did).
    pub fn appender(&self) -> Option<&dyn AppendLog> {
        self.appender.get().map(|a| a.as_ref())
    }

    /// Sets the DLedger-mode append path (once; ignored for a plain store, whose commit log is
    /// its append path from the start).
    pub fn set_appender(&self, appender: Arc<dyn AppendLog>) {
        let _ = self.appender.set(appender);
    }
}
