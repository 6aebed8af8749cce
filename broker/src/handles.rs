//! Narrow handles to the broker's parts, as the processors keep them. Each family of processors
//! gets a struct of exactly the managers, counters and config it reads ([`AdminContext`],
//! [`ClientContext`], [`SendContext`]); what a processor needs of the broker's standing with the
//! name servers (a registration soon, the id it registers with, whether it acts as a slave) is a
//! [`Membership`]. [`crate::broker::Broker`] owns the parts and hands these out, so a processor is
//! built in a test over a temporary store, without a server and without the whole broker.
//!
//! Below `broker`: this module names only the lower modules (config, metadata, clients,
//! counters, replication, the put pipeline), never the broker or a processor.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use store::config::{BrokerRole, MessageStoreConfig};
use store::store::MessageStore;

use crate::client::consumer_manager::ConsumerManager;
use crate::client::producer_manager::ProducerManager;
use crate::config::{BrokerConfig, ConfigVersion, LiveConfig};
use crate::consumer_offset::ConsumerOffsetManager;
use crate::delay_offset::DelayOffsets;
use crate::metrics::BrokerMetrics;
use crate::put::PutPipeline;
use crate::replication::Ha;
use crate::stats::StoreStats;
use crate::stats_manager::BrokerStatsManager;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

/// The store's config now, shared: UPDATE_BROKER_CONFIG replaces it, readers load it per use.
pub type LiveStoreConfig = Arc<ArcSwap<MessageStoreConfig>>;

/// Registration requests from processors (a topic created, a retry topic made), coalesced: many
/// requests while one registration runs become one more registration, never one each.
#[derive(Default)]
pub struct RegistrationRequests {
    wanted: tokio::sync::Notify,
    /// Whether every pending request was oneway (Java registers oneway after an auto-created topic).
    all_oneway: AtomicBool,
    pending: AtomicBool,
}

impl RegistrationRequests {
    pub fn request(&self, oneway: bool) {
        let first = !self.pending.swap(true, Ordering::AcqRel);
        if first {
            self.all_oneway.store(oneway, Ordering::Release);
        } else if !oneway {
            self.all_oneway.store(false, Ordering::Release);
        }
        self.wanted.notify_one();
    }

    /// Waits for a request; returns whether the registration may be oneway.
    pub async fn next(&self) -> bool {
        loop {
            if self.pending.swap(false, Ordering::AcqRel) {
                return self.all_oneway.load(Ordering::Acquire);
            }
            self.wanted.notified().await;
        }
    }

    /// Takes a pending request without waiting (tests: whether a processor asked).
    pub fn take_pending(&self) -> Option<bool> {
        self.pending.swap(false, Ordering::AcqRel).then(|| self.all_oneway.load(Ordering::Acquire))
    }
}

/// The broker's standing with the name servers, as processors see it (cloning shares it).
#[derive(Clone)]
pub struct Membership {
    registration: Arc<RegistrationRequests>,
    /// The id registered with the name servers: `brokerId`, or in DLedger mode 0 while leading,
    /// the id derived from `dLegerSelfId` while following, -1 before the group decided.
    broker_id: Arc<AtomicI64>,
    /// Whose role says whether the broker acts as a slave.
    store: Arc<MessageStore>,
}

impl Membership {
    pub fn new(store: Arc<MessageStore>, broker_id: i64) -> Membership {
        Membership { registration: Default::default(), broker_id: Arc::new(AtomicI64::new(broker_id)), store }
    }

    /// Registers with every name server soon, from the registration task; `oneway` as Java does
    /// after an auto-created topic. Requests made while one registration runs share the next.
    pub fn register_soon(&self, oneway: bool) {
        self.registration.request(oneway);
    }

    /// What the registration task waits on.
    pub fn registration(&self) -> &RegistrationRequests {
        &self.registration
    }

    pub fn broker_id(&self) -> i64 {
        self.broker_id.load(Ordering::Acquire)
    }

    pub fn set_broker_id(&self, id: i64) {
        self.broker_id.store(id, Ordering::Release);
    }

    /// Whether the broker acts as a slave now (its configured role; in DLedger mode, its member's).
    pub fn is_slave(&self) -> bool {
        self.store.role() == BrokerRole::Slave
    }
}

/// The broker's and the store's config as they are now, their data version and the file
/// UPDATE_BROKER_CONFIG persists them to (`mqbroker -c FILE`; none when embedded).
#[derive(Clone)]
pub struct Configs {
    pub broker: LiveConfig,
    pub store: LiveStoreConfig,
    pub version: Arc<ConfigVersion>,
    /// Keys updated at runtime that take effect at the next start (key, value as printed): shown
    /// by GET_BROKER_CONFIG and persisted over the running values.
    pub pending: Arc<parking_lot::Mutex<indexmap::IndexMap<&'static str, String>>>,
    pub file: Option<PathBuf>,
}

/// What the admin family reads and changes (Java's `AdminBrokerProcessor`: `processor/admin`,
/// `maintenance`, `broker_stats`, `batch_create`, `consume_queue_query`).
#[derive(Clone)]
pub struct AdminContext {
    pub configs: Configs,
    pub store: Arc<MessageStore>,
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub offsets: Arc<ConsumerOffsetManager>,
    pub delay_offsets: Arc<DelayOffsets>,
    pub consumers: Arc<ConsumerManager>,
    pub producers: Arc<ProducerManager>,
    pub stats: Arc<StoreStats>,
    pub broker_stats: Arc<BrokerStatsManager>,
    pub metrics: Arc<BrokerMetrics>,
    pub ha: Arc<Ha>,
    /// The 5.x timer (none with `timerWheelEnable=false`).
    pub timer: Option<Arc<store::timer::TimerStore>>,
    pub membership: Membership,
    /// `brokerIP1:listenPort`, as the broker registers.
    pub broker_addr: String,
    pub boot_timestamp: i64,
    /// 5.x: how each topic and group is consumed (GET_ALL_MESSAGE_REQUEST_MODE).
    pub request_modes: Arc<crate::load_balance::MessageRequestModes>,
}

impl AdminContext {
    /// The broker's config as it is now.
    pub fn config(&self) -> arc_swap::Guard<Arc<BrokerConfig>> {
        self.configs.broker.load()
    }

    /// The store's config as it is now.
    pub fn store_config(&self) -> arc_swap::Guard<Arc<MessageStoreConfig>> {
        self.configs.store.load()
    }
}

/// What client management reads and changes (HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG),
/// and what telling a group that its members changed needs.
#[derive(Clone)]
pub struct ClientContext {
    pub config: LiveConfig,
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub consumers: Arc<ConsumerManager>,
    pub producers: Arc<ProducerManager>,
    pub membership: Membership,
}

/// What sends and replies check and store through.
#[derive(Clone)]
pub struct SendContext {
    pub config: LiveConfig,
    pub store: Arc<MessageStore>,
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub put: Arc<PutPipeline>,
    pub metrics: Arc<BrokerMetrics>,
    /// `brokerIP1:listenPort`, written into every stored message.
    pub store_host: SocketAddr,
    pub membership: Membership,
}

impl SendContext {
    /// The broker's config as it is now.
    pub fn config(&self) -> arc_swap::Guard<Arc<BrokerConfig>> {
        self.config.load()
    }

    /// Whether the broker's permission lets it take writes now.
    pub fn is_writeable(&self) -> bool {
        remoting::protocol::perm::is_writeable(self.config().broker_permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn registration_requests_coalesce_and_stay_oneway_only_if_all_were() {
        let r = RegistrationRequests::default();
        r.request(true);
        r.request(true);
        assert!(r.next().await, "oneway requests only");
        r.request(true);
        r.request(false);
        assert_eq!(r.take_pending(), Some(false));
        assert_eq!(r.take_pending(), None, "two requests made one registration");
    }
}
