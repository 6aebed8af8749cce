//! The broker's shared state: config, store, metadata managers, connected clients, and what the
//! processors need to reach the name servers from their pool threads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use remoting::client::RemotingClient;
use remoting::protocol::perm;
use store::config::MessageStoreConfig;
use store::store::MessageStore;
use tracing::info;

use crate::client::consumer_manager::ConsumerManager;
use crate::client::producer_manager::ProducerManager;
use crate::config::BrokerConfig;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::long_polling::PullRequestHoldService;
use crate::namesrv_client::{self, BrokerIdentity};
use crate::rebalance_lock::RebalanceLockManager;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

/// Appended to remarks as Java's `FAQUrl.suggestTodo` does.
pub const FAQ_SUFFIX: &str = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

pub struct Broker {
    pub config: BrokerConfig,
    pub store_config: MessageStoreConfig,
    pub store: Arc<MessageStore>,
    pub topics: TopicConfigManager,
    pub groups: SubscriptionGroupManager,
    pub offsets: ConsumerOffsetManager,
    pub consumers: ConsumerManager,
    pub producers: ProducerManager,
    pub locks: RebalanceLockManager,
    pub hold: std::sync::OnceLock<Arc<PullRequestHoldService>>,
    pub identity: BrokerIdentity,
    /// `brokerIP1:listenPort`, written into every stored message.
    pub store_host: SocketAddr,
    pub namesrv: Arc<RemotingClient>,
    pub runtime: tokio::runtime::Handle,
    pub boot_timestamp: i64,
    /// SYNC_MASTER waits here for slaves (see [`crate::replication`]).
    pub replicas: Box<dyn crate::replication::ReplicaWaiter>,
    /// Messages stored and handed out, and their rates (GET_BROKER_RUNTIME_INFO).
    pub stats: crate::stats::StoreStats,
}

impl Broker {
    pub fn is_writeable(&self) -> bool {
        perm::is_writeable(self.config.broker_permission)
    }

    pub fn is_readable(&self) -> bool {
        perm::is_readable(self.config.broker_permission)
    }

    /// Registers with every name server in the background; `oneway` as Java does after an
    /// auto-created topic.
    pub fn register_soon(self: &Arc<Self>, oneway: bool) {
        let me = self.clone();
        self.runtime.spawn(async move { me.register(oneway).await });
    }

    pub async fn register(&self, oneway: bool) {
        let mut wrapper = self.topics.wrapper();
        if !self.is_writeable() {
            // A broker without write permission registers every topic without it (Java).
            for tc in wrapper.topic_config_table.values_mut() {
                tc.perm &= self.config.broker_permission;
            }
        }
        let addrs = self.config.namesrv_addrs();
        let timeout = Duration::from_millis(self.config.register_broker_timeout_ms);
        namesrv_client::register_all(&self.namesrv, &addrs, &self.identity, &wrapper, timeout, oneway).await;
    }

    pub async fn unregister(&self) {
        let addrs = self.config.namesrv_addrs();
        namesrv_client::unregister_all(&self.namesrv, &addrs, &self.identity, Duration::from_secs(3)).await;
        info!("unregistered from the name servers");
    }

    pub fn hold(&self) -> Option<&Arc<PullRequestHoldService>> {
        self.hold.get()
    }
}
