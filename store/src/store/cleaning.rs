//! Expiry: the cleaning pass (Java's `CleanCommitLogService` and `CleanConsumeQueueService`), the
//! disk-full state, and the admin codes that clean queues and topics.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::warn;

use super::MessageStore;
use crate::cleanup;
use crate::dispatch::SCHEDULE_TOPIC;

use remoting::protocol::system_topic::TRANS_OP_HALF as TRANS_OP_HALF_TOPIC;

/// Java's `manualDeleteFileSeveralTimes`: how many cleanup passes a manual delete lasts.
const MANUAL_DELETE_PASSES: u32 = 20;

impl MessageStore {
    /// Takes the keys a running store follows ([`crate::config::Tunables`]); the next use of each
    /// follows it.
    pub fn set_tunables(&self, config: &crate::config::MessageStoreConfig) {
        self.commit_log.tunables().set(config);
    }

    /// Replaces the cleaning rules; the next pass follows them.
    pub fn set_clean_policy(&self, policy: cleanup::CleanPolicy) {
        *self.clean_policy.lock() = policy;
    }

    /// One cleaning pass now (the cleanup service's tick).
    pub(super) fn clean_now(&self) {
        let hour = crate::clock::local_hour();
        let ratio = cleanup::disk_used_ratio(&self.config.commit_log_dir());
        self.clean_once(std::time::SystemTime::now(), hour, ratio);
    }

    /// One cleaning pass with the given clock, hour of day and disk usage; returns how many
    /// commit-log files were deleted.
    pub fn clean_once(&self, now: std::time::SystemTime, hour: u32, disk_used_ratio: f64) -> usize {
        let policy = self.clean_policy.lock().clone();
        let mut decision = cleanup::decide(&policy, hour, disk_used_ratio);
        let manual = self.manual_delete_passes.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
        decision.delete |= manual;
        if decision.disk_full != self.disk_full.swap(decision.disk_full, Ordering::AcqRel) {
            warn!(disk_used_ratio, full = decision.disk_full, "disk-full state changed");
        }
        // DLedger deletes its own data files: the queues and index follow its first offset.
        let dledger_moved = self.log.first_offset_moved();
        let deleted = if decision.delete {
            let reserved = Duration::from_secs(policy.file_reserved_time_hours * 3600);
            self.commit_log.files().delete_expired(now, reserved, decision.force, decision.batch_max)
        } else {
            0
        };
        cleanup::log_deleted("commit-log", deleted);
        if deleted > 0 || dledger_moved {
            let min = self.min_phy_offset();
            let queues: usize = self.queues().iter().map(|cq| cq.delete_expired(min)).sum();
            cleanup::log_deleted("consume-queue", queues);
            if let Some(index) = &self.index {
                cleanup::log_deleted("index", index.delete_files_below(min));
            }
        }
        // A failed index (no file could be created) refuses writes until a file can be.
        if let Some(index) = &self.index {
            index.retry_failed();
        }
        deleted
    }

    /// Java's `executeDeleteFilesManually`: the next passes of the cleanup service delete the
    /// expired files (older than `fileReservedTime`) whatever `deleteWhen` says.
    pub fn delete_expired_files_manually(&self) {
        self.manual_delete_passes.store(MANUAL_DELETE_PASSES, Ordering::Release);
    }

    /// Java's `cleanExpiredConsumerQueue`: destroys every queue (but the delay queues') whose
    /// last message lies wholly below the commit log's first offset, so its records are gone.
    /// Returns how many queues were destroyed.
    pub fn clean_expired_consume_queues(&self) -> usize {
        self.queues.destroy_expired(self.min_phy_offset(), &[SCHEDULE_TOPIC])
    }

    /// Java's `cleanUnusedTopic`: destroys the queues of every topic not in `keep` (the topic
    /// configs), except the delay and transaction-op queues, which have no config of their own.
    /// Returns how many topics were cleaned.
    pub fn clean_unused_topics(&self, keep: &std::collections::HashSet<String>) -> usize {
        self.queues.destroy_unused(keep, &[SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC])
    }

    /// Whether writes are refused because the disk is full.
    pub fn is_disk_full(&self) -> bool {
        self.disk_full.load(Ordering::Acquire)
    }
}
