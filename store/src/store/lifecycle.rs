//! Start and shutdown: the store's services (dispatcher, queue flusher, cleaner) around the commit
//! log's, and the abort file.

use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use remoting::service::Service;
use tracing::{error, info, warn};

use super::{abort_path, MessageStore};
use crate::error::{io_err, StoreError};

/// The store's own services (the commit log holds its committer, flusher and timer).
#[derive(Default)]
pub(super) struct StoreServices {
    pub(super) reput: Option<Service>,
    pub(super) queue_flush: Option<Service>,
    pub(super) cleanup: Option<Service>,
}

impl MessageStore {
    /// Starts the allocation, commit, flush, dispatch, queue-flush and cleanup services, then
    /// creates the abort file (present while running, as in Java). Dispatches the backlog before
    /// returning.
    pub fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        self.dispatchers.seal();
        self.running.store(true, Ordering::Release);
        self.dispatch_available();
        self.commit_log.start_allocation().map_err(io_err("cannot start the allocation service"))?;
        let checkpoint = self.checkpoint.clone();
        self.commit_log.start_services(move |ts| checkpoint.set_physic_msg_timestamp(ts)).map_err(io_err("cannot start the commit-log services"))?;
        let mut services = self.services.lock();
        let me = self.clone();
        let reput = Service::spawn("ReputMessageService", move |cx| me.run_reput(cx)).map_err(io_err("cannot start the dispatcher"))?;
        let _ = self.reput_waker.set(reput.waker());
        services.reput = Some(reput);
        services.queue_flush = Some(self.start_queue_flush().map_err(io_err("cannot start the consume-queue flusher"))?);
        let me = self.clone();
        let interval = Duration::from_millis(self.config.clean_resource_interval_ms.max(10));
        services.cleanup = Some(Service::every("CleanResourceService", interval, false, move || me.clean_now()).map_err(io_err("cannot start the cleaner"))?);
        drop(services);
        let abort = abort_path(&self.config.root_dir());
        File::create(&abort).map_err(io_err(format!("cannot create {}", abort.display())))?;
        Ok(())
    }

    /// The consume-queue flusher: `flush(least pages)` every interval, a thorough flush with the
    /// checkpoint every `flushConsumeQueueThoroughInterval`. Its last flush is shutdown's, after the
    /// dispatcher caught up.
    pub(super) fn start_queue_flush(self: &Arc<Self>) -> std::io::Result<Service> {
        let interval = Duration::from_millis(self.config.flush_interval_consume_queue_ms.max(1));
        let thorough = Duration::from_millis(self.config.flush_consume_queue_thorough_interval_ms);
        let mut last_thorough = Instant::now();
        let me = self.clone();
        Service::every("FlushConsumeQueueService", interval, false, move || {
            let full = last_thorough.elapsed() >= thorough;
            if full {
                last_thorough = Instant::now();
            }
            me.flush_queues(if full { 0 } else { me.config.flush_consume_queue_least_pages }, full);
        })
    }

    /// Flushes the queues; a thorough flush also writes the checkpoint, with the logics time
    /// taken before flushing so the file never claims more than is on disk.
    pub(super) fn flush_queues(&self, least_pages: usize, write_checkpoint: bool) {
        let logics = self.checkpoint.logics_msg_timestamp();
        for cq in self.queues() {
            if let Err(e) = cq.flush(least_pages) {
                error!(topic = cq.topic(), queue = cq.queue_id(), error = %e, "consume queue flush failed");
            }
        }
        if write_checkpoint {
            self.checkpoint.set_logics_msg_timestamp(logics);
            if let Err(e) = self.checkpoint.flush() {
                error!(error = %e, "checkpoint write failed");
            }
        }
    }

    /// Stops everything and leaves the directory as a cleanly stopped Java broker would. Order:
    /// cleanup; the commit log's committer, flusher and group commit (every SYNC_FLUSH put is
    /// answered); allocation; the dispatcher, then a catch-up of its backlog; the queue flusher,
    /// then the last queue flush and the checkpoint; the index; the abort file.
    pub fn shutdown(&self) {
        if !self.running.swap(false, Ordering::AcqRel) {
            return;
        }
        let services = std::mem::take(&mut *self.services.lock());
        if let Some(cleanup) = services.cleanup {
            cleanup.stop();
        }
        self.commit_log.stop_services();
        self.commit_log.stop_allocation();
        if let Some(reput) = services.reput {
            reput.stop();
        }
        // Catch the dispatcher up (Java waits up to 5 s), then flush queues and the checkpoint.
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.dispatch_behind_bytes() > 0 && Instant::now() < deadline {
            if !self.dispatch_available() {
                break;
            }
        }
        if let Some(queue_flush) = services.queue_flush {
            queue_flush.stop();
        }
        self.flush_queues(0, true);
        if let Some(index) = &self.index {
            if let Err(e) = index.shutdown() {
                error!(error = %e, "index flush failed at shutdown");
            }
        }
        if let Err(e) = self.checkpoint.flush() {
            error!(error = %e, "checkpoint write failed at shutdown");
        }
        if let Some(reason) = self.commit_log.flush_failure() {
            // As Java keeps it when the store is not writable: the next start recovers from the
            // checkpoint and re-checks what reached the disk.
            warn!(error = reason, "the commit-log flush failed; keeping the abort file so the next start recovers");
        } else if self.dispatch_behind_bytes() == 0 {
            let abort = abort_path(&self.config.root_dir());
            if let Err(e) = std::fs::remove_file(&abort) {
                warn!(path = %abort.display(), error = %e, "cannot remove abort file");
            }
        } else {
            warn!("dispatch still behind at shutdown; keeping the abort file so the next start recovers");
        }
        info!("store shut down");
    }
}
