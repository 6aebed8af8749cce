//! Opening: the lock, the parts loaded from disk, recovery over them, then the store made from
//! what recovery left.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU8};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use tracing::info;

use super::{abort_path, role_byte, total_memory_bytes, MessageStore};
use crate::cleanup;
use crate::commit_log::AppendLog;
use crate::config::MessageStoreConfig;
use crate::dispatch::Dispatcher;
use crate::dledger_log::{EntryLog, SealedThenDLedger};
use crate::error::{io_err, StoreError};
use crate::lock::StoreLock;
use crate::parts::Parts;
use crate::physical_log::{PhysicalLog, PlainLog};
use crate::recovery::{self, RecoveryReport};

impl MessageStore {
    /// Takes the store lock, loads every file and recovers (normally, or after a crash when the
    /// abort file is present). Nothing runs until [`MessageStore::start`].
    pub fn open(config: MessageStoreConfig) -> Result<Arc<MessageStore>, StoreError> {
        Self::open_inner(config, None, Vec::new())
    }

    /// As [`MessageStore::open`], with `dispatchers` after the built-in ones from the start, so
    /// recovery's re-dispatch after a crash runs them too (Java's list is complete before its
    /// store loads). Dispatchers added later ([`MessageStore::add_dispatcher`]) miss recovery.
    pub fn open_with_dispatchers(config: MessageStoreConfig, dispatchers: Vec<Arc<dyn Dispatcher>>) -> Result<Arc<MessageStore>, StoreError> {
        Self::open_inner(config, None, dispatchers)
    }

    /// As [`MessageStore::open`], for a store whose commit log DLedger holds: `log` is the
    /// member's data, already recovered. On the first start over a plain commit log, recovery
    /// seals the old log and starts `log` after it (Java's upgrade). Appends are refused until
    /// [`MessageStore::set_appender`].
    pub fn open_dledger(config: MessageStoreConfig, log: Arc<dyn EntryLog>) -> Result<Arc<MessageStore>, StoreError> {
        Self::open_inner(config, Some(log), Vec::new())
    }

    pub(super) fn open_inner(
        config: MessageStoreConfig,
        dledger: Option<Arc<dyn EntryLog>>,
        dispatchers: Vec<Arc<dyn Dispatcher>>,
    ) -> Result<Arc<MessageStore>, StoreError> {
        let config = Arc::new(config);
        let root = config.root_dir();
        std::fs::create_dir_all(&root).map_err(io_err(format!("cannot create {}", root.display())))?;
        let lock = StoreLock::acquire(&root.join("lock"))?;
        // As Java, the commit-log and queue folders exist from the start (tools measure the disk there).
        for dir in [config.commit_log_dir(), config.consume_queue_dir()] {
            std::fs::create_dir_all(&dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
        }
        let last_exit_ok = !abort_path(&root).exists();
        info!(root = %root.display(), last_exit_ok, "opening store");

        let parts = Parts::load(config, last_exit_ok)?;
        for dispatcher in dispatchers {
            // Not started yet: the list takes them.
            let _ = parts.dispatchers.add_last(dispatcher);
        }
        // The one choice of log kind: each has its own recovery.
        let (report, log): (RecoveryReport, Arc<dyn PhysicalLog>) = match dledger {
            Some(entries) => {
                let (report, divided) = recovery::recover_dledger(&parts, entries.as_ref(), last_exit_ok)?;
                (report, Arc::new(SealedThenDLedger::new(parts.commit_log.clone(), entries, divided)))
            }
            None => (recovery::recover(&parts, last_exit_ok), Arc::new(PlainLog::new(parts.commit_log.clone()))),
        };
        let appender = OnceLock::new();
        if !log.is_dledger() {
            let _ = appender.set(parts.commit_log.clone() as Arc<dyn AppendLog>);
        }
        Ok(Arc::new(Self::from_parts(parts, lock, report, log, appender)))
    }

    /// The store made of recovered parts; the dispatcher resumes where recovery said.
    fn from_parts(parts: Parts, lock: StoreLock, report: RecoveryReport, log: Arc<dyn PhysicalLog>, appender: OnceLock<Arc<dyn AppendLog>>) -> MessageStore {
        let Parts { config, commit_log, queues, checkpoint, index, dispatchers, arrival } = parts;
        MessageStore {
            role: AtomicU8::new(role_byte(config.broker_role)),
            clean_policy: Mutex::new(cleanup::CleanPolicy::of(&config)),
            config,
            commit_log,
            queues,
            checkpoint,
            index,
            reput_from: AtomicI64::new(report.dispatch_from),
            dispatchers,
            arrival,
            running: AtomicBool::new(false),
            reput_waker: OnceLock::new(),
            append_listener: OnceLock::new(),
            reput_sleeping: AtomicBool::new(false),
            services: Mutex::new(Default::default()),
            recovery: Mutex::new(report),
            _lock: lock,
            total_memory_bytes: total_memory_bytes(),
            disk_full: AtomicBool::new(false),
            manual_delete_passes: AtomicU32::new(0),
            log,
            appender,
        }
    }

    /// What recovery found and did when the store was opened.
    pub fn recovery(&self) -> RecoveryReport {
        self.recovery.lock().clone()
    }
}
