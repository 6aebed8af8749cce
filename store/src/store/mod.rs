//! `MessageStore` (Java `DefaultMessageStore`): opens a store directory, recovers it, appends,
//! dispatches new commit-log records into consume queues and the index, serves reads, and shuts
//! down leaving what a Java broker expects (flushed files, a current checkpoint, no abort file).
//!
//! One type, its methods by concern: `open` (lock, parts, recovery over them, then the store),
//! `lifecycle` (start and shutdown of the services), `puts`, `dispatching` (the reput thread over
//! the physical log into the dispatcher list), `reads` (pulls with Java's status and offset
//! rules), `lookups` (by offset, key, time; the queue table; the physical bounds), `replication`
//! (what HA reads and a slave appends), `cleaning` (expiry).

mod cleaning;
mod dispatching;
mod lifecycle;
mod lookups;
mod open;
mod puts;
mod reads;
mod replication;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use remoting::service::Waker;
use tracing::{info, warn};

use crate::checkpoint::Checkpoint;
use crate::cleanup;
use crate::commit_log::{AppendLog, CommitLog};
use crate::config::{BrokerRole, MessageStoreConfig};
use crate::dispatch::{ArrivalNotice, DispatchList};
use crate::index::IndexService;
use crate::lock::StoreLock;
use crate::physical_log::PhysicalLog;
use crate::queues::ConsumeQueues;
use crate::recovery::RecoveryReport;

pub use crate::dispatch::{Arrival, ArrivalListener, SCHEDULE_TOPIC};
pub use crate::error::StoreError;
pub use lookups::QueryMessageResult;
pub use reads::{GetMessageResult, GetMessageStatus};
pub use replication::AppendListener;

pub struct MessageStore {
    pub(crate) config: Arc<MessageStoreConfig>,
    pub(crate) commit_log: Arc<CommitLog>,
    pub(crate) queues: Arc<ConsumeQueues>,
    pub(crate) checkpoint: Arc<Checkpoint>,
    pub(crate) index: Option<Arc<IndexService>>,
    reput_from: AtomicI64,
    /// What is done with each new record, in order (consume queue, index, arrival notice, ...).
    pub(crate) dispatchers: DispatchList,
    arrival: Arc<ArrivalNotice>,
    running: AtomicBool,
    /// Wakes the dispatcher (set at start).
    reput_waker: OnceLock<Waker>,
    append_listener: OnceLock<AppendListener>,
    /// Set while the dispatcher waits, so puts only pay for a wake-up when one is needed.
    reput_sleeping: AtomicBool,
    services: Mutex<lifecycle::StoreServices>,
    recovery: Mutex<RecoveryReport>,
    _lock: StoreLock,
    total_memory_bytes: u64,
    /// Set by the cleanup pass when the disk is above the warning level: writes are refused.
    disk_full: AtomicBool,
    /// Cleaning passes left that delete expired files whatever the hour (Java's
    /// `manualDeleteFileSeveralTimes`, set by DELETE_EXPIRED_COMMITLOG).
    manual_delete_passes: AtomicU32,
    /// The role now (a DLedger broker's changes with its member's); `BrokerRole` as a byte.
    role: AtomicU8,
    /// Where the records are: the plain commit log, or the sealed plain log followed by
    /// DLedger's entries (`enableDLegerCommitLog`).
    pub(crate) log: Arc<dyn PhysicalLog>,
    /// The append path: the commit log, or (DLedger) what the broker sets once its member runs.
    appender: OnceLock<Arc<dyn AppendLog>>,
    /// The cleaning rules now (`config`'s at open, then whatever the broker sets).
    clean_policy: Mutex<cleanup::CleanPolicy>,
}

fn role_byte(role: BrokerRole) -> u8 {
    match role {
        BrokerRole::AsyncMaster => 0,
        BrokerRole::SyncMaster => 1,
        BrokerRole::Slave => 2,
    }
}

impl MessageStore {
    pub fn config(&self) -> &MessageStoreConfig {
        &self.config
    }

    pub fn commit_log(&self) -> &CommitLog {
        &self.commit_log
    }

    /// Java's `isOSPageCacheBusy`: a put has held the commit log's append lock longer than
    /// `osPageCacheBusyTimeOutMills`. (In DLedger mode the member appends, not this log: never.)
    pub fn is_os_page_cache_busy(&self) -> bool {
        self.commit_log.is_os_page_cache_busy()
    }

    /// Java's `CommitLog.scanFileAndSetReadMode` (SET_COMMITLOG_READ_MODE): advises every
    /// commit-log file there is now, MADV_RANDOM or MADV_NORMAL; files made later keep the
    /// kernel's default, as in Java. In DLedger mode these are the files of the plain log before
    /// the member's (Java's DLedger commit log leaves its own files alone too). Returns the files
    /// the kernel refused, which Java logs and ignores.
    pub fn set_commit_log_read_ahead(&self, random: bool) -> usize {
        let mut refused = 0;
        for file in self.commit_log.files().files() {
            if let Err(e) = file.set_read_ahead(random) {
                warn!(error = %e, random, "madvise of a commit-log file failed");
                refused += 1;
            }
        }
        info!(random, "commit-log read-ahead mode set");
        refused
    }

    /// Whether DLedger holds the commit log.
    pub fn is_dledger(&self) -> bool {
        self.log.is_dledger()
    }

    /// Java's `dividedCommitlogOffset` (-1 when DLedger holds everything or is off).
    pub fn divided_offset(&self) -> i64 {
        self.log.divided_offset()
    }

    /// The role the store acts in now.
    pub fn role(&self) -> BrokerRole {
        match self.role.load(Ordering::Acquire) {
            0 => BrokerRole::AsyncMaster,
            1 => BrokerRole::SyncMaster,
            _ => BrokerRole::Slave,
        }
    }

    /// A DLedger broker's role follows its member's.
    pub fn set_role(&self, role: BrokerRole) {
        self.role.store(role_byte(role), Ordering::Release);
    }

    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        if self.running.load(Ordering::Acquire) {
            self.shutdown();
        }
    }
}

pub(crate) fn abort_path(root: &Path) -> PathBuf {
    root.join("abort")
}

/// Physical memory, for Java's "is this message still in memory" estimate.
fn total_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(8 * 1024 * 1024 * 1024)
}
