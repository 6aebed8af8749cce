//! The one writer of the broker's `config/*.json` files, on its own thread (never a tokio worker,
//! never under a lock the send and pull paths take). Topics and groups are written when changed
//! (a change wakes it; changes made during a write share the next one), consumer offsets every
//! `flushConsumerOffsetInterval` and delay offsets every 10 s, as Java's scheduled tasks do, and
//! everything once more when it stops.

use std::time::{Duration, Instant};

use remoting::service::Service;
use tracing::error;

use crate::metadata::Metadata;

/// Java's `flushDelayOffsetInterval` default.
const DELAY_OFFSET_INTERVAL: Duration = Duration::from_secs(10);
/// How often it looks, at most, when nothing wakes it.
const TICK: Duration = Duration::from_secs(1);

struct Files {
    meta: Metadata,
    offsets_every: Duration,
    offsets_written: Instant,
    delay_written: Instant,
}

impl Files {
    fn write_due(&mut self, everything: bool) {
        let b = &self.meta;
        if let Err(e) = b.topics.persist_if_dirty() {
            error!(error = %e, "cannot persist topics; will try again");
        }
        if let Err(e) = b.groups.persist_if_dirty() {
            error!(error = %e, "cannot persist subscription groups; will try again");
        }
        if everything || self.offsets_written.elapsed() >= self.offsets_every {
            self.offsets_written = Instant::now();
            if let Err(e) = b.offsets.persist() {
                error!(error = %e, "cannot persist consumer offsets");
            }
        }
        if everything || self.delay_written.elapsed() >= DELAY_OFFSET_INTERVAL {
            self.delay_written = Instant::now();
            if let Err(e) = b.delay_offsets.persist() {
                error!(error = %e, "cannot persist delay offsets");
            }
        }
    }
}

/// Starts the persister; stopping the returned service writes everything a last time.
/// `flush_consumer_offset_interval`: Java's `flushConsumerOffsetInterval`.
pub fn start(meta: Metadata, flush_consumer_offset_interval: Duration) -> std::io::Result<Service> {
    let offsets_every = flush_consumer_offset_interval.max(Duration::from_millis(100));
    let (topics, groups) = (meta.topics.clone(), meta.groups.clone());
    let mut files = Files { meta, offsets_every, offsets_written: Instant::now(), delay_written: Instant::now() };
    let service = Service::spawn("BrokerPersister", move |cx| {
        while cx.wait(TICK.min(offsets_every)) {
            files.write_due(false);
        }
        files.write_due(true);
    })?;
    topics.file().set_persister(service.waker());
    groups.file().set_persister(service.waker());
    Ok(service)
}
