//! Java's `BrokerFastFailure`: every 10 ms (from a second after start), while
//! `brokerFastFailureEnable`, a request that has waited in its pool's queue at least the pool's
//! `waitTimeMillsIn*Queue` is answered SYSTEM_BUSY `[TIMEOUT_CLEAN_QUEUE]` instead of being run
//! late, and while the page cache is busy (a put has held the append lock longer than
//! `osPageCacheBusyTimeOutMills`) the send queue is emptied with `[PCBUSY_CLEAN_QUEUE]` first.
//! The limits are read on each round, so an update of the keys takes effect at once, as Java's.
//!
//! Java cleans the send, pull, lite-pull, heartbeat, end-transaction, ack and admin queues. Ours
//! serves lite pulls, pops and acks on the pull pool (held to `waitTimeMillsInPullQueue`); the
//! other pools (query, client and consumer management, reply, load balance) are not cleaned, as in
//! Java.

use std::sync::Arc;
use std::time::{Duration, Instant};

use remoting::pool::BusinessPool;
use remoting::service::Service;
use store::store::MessageStore;
use tracing::warn;

use crate::config::{BrokerConfig, LiveConfig};
use crate::routes::Pool;

/// Java's period of the clean and its delay after start.
pub const CLEAN_EVERY: Duration = Duration::from_millis(10);
pub const FIRST_CLEAN_AFTER: Duration = Duration::from_secs(1);

/// The pools Java cleans, each with the key of its limit.
pub fn cleaned(pool: Pool) -> Option<fn(&BrokerConfig) -> u64> {
    Some(match pool {
        Pool::Send => |c| c.wait_time_ms_in_send_queue,
        Pool::Pull => |c| c.wait_time_ms_in_pull_queue,
        Pool::Heartbeat => |c| c.wait_time_ms_in_heartbeat_queue,
        Pool::EndTransaction => |c| c.wait_time_ms_in_transaction_queue,
        Pool::Admin => |c| c.wait_time_ms_in_admin_broker_queue,
        Pool::Query | Pool::ClientManage | Pool::ConsumerManage | Pool::Reply | Pool::LoadBalance => return None,
    })
}

/// A cleaned pool with the key of its limit.
pub type CleanedQueue = (Arc<BusinessPool>, fn(&BrokerConfig) -> u64);

/// One round of the clean over `queues` (the send pool first).
pub struct FastFailure {
    config: LiveConfig,
    store: Arc<MessageStore>,
    send: Arc<BusinessPool>,
    queues: Vec<CleanedQueue>,
    /// When the last refusal was logged (at most one warning every 15 s, as Java's jstack dump).
    last_warned: Option<Instant>,
}

impl FastFailure {
    pub fn new(config: LiveConfig, store: Arc<MessageStore>, send: Arc<BusinessPool>, queues: Vec<CleanedQueue>) -> FastFailure {
        FastFailure { config, store, send, queues, last_warned: None }
    }

    /// One round: nothing unless `brokerFastFailureEnable`. Returns how many requests were refused.
    pub fn clean_once(&mut self) -> usize {
        let config = self.config.load();
        if !config.broker_fast_failure_enable {
            return 0;
        }
        let mut refused = 0;
        while self.store.is_os_page_cache_busy() && self.send.refuse_head() {
            refused += 1;
        }
        for (pool, limit) in &self.queues {
            refused += pool.refuse_waiting_at_least(Duration::from_millis(limit(&config)));
        }
        if refused > 0 && self.last_warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(15)) {
            self.last_warned = Some(Instant::now());
            warn!(refused, "broker busy: requests that waited too long in their queues were answered SYSTEM_BUSY");
        }
        refused
    }

    /// Runs the clean every [`CLEAN_EVERY`] from [`FIRST_CLEAN_AFTER`] on, until stopped.
    pub fn start(mut self) -> std::io::Result<Service> {
        Service::spawn("BrokerFastFailureScheduledThread", move |cx| {
            if !cx.wait(FIRST_CLEAN_AFTER) {
                return;
            }
            while cx.wait(CLEAN_EVERY) {
                self.clean_once();
            }
        })
    }
}
