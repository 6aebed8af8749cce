//! The replication side: what HA ships to slaves, a slave's append of its master's bytes, and
//! the listener that wakes the HA writers after every append.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::MessageStore;
use crate::commit_log::ReplicatedAppendError;

/// Told after every append to the commit log (replication wakes on it).
pub type AppendListener = Arc<dyn Fn() + Send + Sync>;

impl MessageStore {
    /// Up to `max` raw commit-log bytes from `offset`, never past what is readable in its file
    /// (what HA replication ships to slaves; Java `getCommitLogData`, cut to the batch size).
    pub fn commit_log_data(&self, offset: i64, max: usize) -> Option<Vec<u8>> {
        self.log.replication_read(offset, max)
    }

    /// A slave appends its master's bytes at its end (see [`CommitLog::append_replicated`]) and
    /// wakes the dispatcher, which builds the consume queues and index from them.
    pub fn append_replicated(&self, offset: i64, bytes: &[u8]) -> Result<i64, ReplicatedAppendError> {
        if !self.running.load(Ordering::Acquire) {
            return Err(ReplicatedAppendError::Refused("message store is not running".into()));
        }
        let end = self.commit_log.append_replicated(offset, bytes)?;
        self.wake_dispatch();
        Ok(end)
    }

    /// Told after every append (HA writers wake on it).
    pub fn set_append_listener(&self, listener: AppendListener) {
        let _ = self.append_listener.set(listener);
    }

    pub(super) fn appended(&self) {
        if let Some(listener) = self.append_listener.get() {
            listener();
        }
    }
}
