//! The broker's shared state: config, store, metadata managers, connected clients, and what the
//! processors need to reach the name servers from their pool threads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use remoting::client::RemotingClient;
use remoting::protocol::perm;
use store::config::MessageStoreConfig;
use store::store::MessageStore;
use tracing::info;

use crate::client::consumer_manager::ConsumerManager;
use crate::client::producer_manager::ProducerManager;
use crate::config::BrokerConfig;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::handles::{AdminContext, ClientContext, Configs, LiveStoreConfig, Membership, SendContext};
use crate::long_polling::PullRequestHoldService;
use crate::namesrv_client::{self, BrokerIdentity};
use crate::rebalance_lock::RebalanceLockManager;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

pub use crate::config::LiveConfig;

pub use remoting::protocol::FAQ_SUFFIX;

pub struct Broker {
    /// The config now: read through [`Broker::config`] where a value is used, so what
    /// UPDATE_BROKER_CONFIG changes takes effect at once (see [`crate::runtime_config`]).
    pub(crate) live_config: LiveConfig,
    pub(crate) live_store_config: LiveStoreConfig,
    /// Where UPDATE_BROKER_CONFIG persists the config (`mqbroker -c FILE`; none when embedded).
    pub config_file: Option<std::path::PathBuf>,
    /// The config's data version, and the lock that makes updates one at a time.
    pub config_version: Arc<crate::config::ConfigVersion>,
    /// Runtime updates waiting for the next start (`Configs::pending`).
    pub(crate) pending_config: Arc<parking_lot::Mutex<indexmap::IndexMap<&'static str, String>>>,
    pub store: Arc<MessageStore>,
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub offsets: Arc<ConsumerOffsetManager>,
    /// The schedule service's progress per delay level (`delayOffset.json`).
    pub delay_offsets: Arc<crate::delay_offset::DelayOffsets>,
    pub consumers: Arc<ConsumerManager>,
    pub producers: Arc<ProducerManager>,
    pub locks: Arc<RebalanceLockManager>,
    pub hold: std::sync::OnceLock<Arc<PullRequestHoldService>>,
    /// The 5.x timer (none with `timerWheelEnable=false`), set once at open.
    pub timer: std::sync::OnceLock<Arc<store::timer::TimerStore>>,
    pub identity: BrokerIdentity,
    /// `brokerIP1:listenPort`, written into every stored message.
    pub store_host: SocketAddr,
    pub namesrv: Arc<RemotingClient>,
    pub runtime: tokio::runtime::Handle,
    pub boot_timestamp: i64,
    /// Master/slave replication (see [`crate::replication`]).
    pub ha: Arc<crate::replication::Ha>,
    /// A slave's master (`brokerIP1:listenPort`), learnt from the name server: where it copies
    /// the metadata from.
    pub master_addr: parking_lot::RwLock<Option<String>>,
    /// Messages stored and handed out, and their rates (GET_BROKER_RUNTIME_INFO).
    pub stats: Arc<crate::stats::StoreStats>,
    /// Per-topic and per-group counters and their windows (VIEW_BROKER_STATS_DATA).
    pub broker_stats: Arc<crate::stats_manager::BrokerStatsManager>,
    /// Prometheus metrics (`metricsExporterType=PROM`; no-ops otherwise).
    pub metrics: Arc<crate::metrics::BrokerMetrics>,
    /// The one way into the store: every put waits and is counted there (see [`crate::put`]).
    pub put: Arc<crate::put::PutPipeline>,
    /// The access validator of `aclEnable=true`.
    pub acl: Option<Arc<crate::acl::Acl>>,
    /// 5.x: how each topic and group is consumed, PULL or POP (`config/messageRequestMode.json`).
    pub request_modes: Arc<crate::load_balance::MessageRequestModes>,
    /// 5.x: topics' queues over the cluster, from the name servers (QUERY_ASSIGNMENT).
    pub topic_routes: Arc<crate::load_balance::TopicRoutes>,
    /// Registration requests (coalesced), the id registered with the name servers and the role:
    /// what processors know of the broker's standing (see [`Membership`]).
    pub membership: Membership,
}

/// What the broker's shared state is made of besides what [`Broker::assemble`] makes itself.
pub struct BrokerParts {
    pub config: BrokerConfig,
    pub store_config: MessageStoreConfig,
    pub config_file: Option<std::path::PathBuf>,
    pub store: Arc<MessageStore>,
    pub ha: crate::replication::Ha,
    pub identity: BrokerIdentity,
    pub store_host: SocketAddr,
    pub broker_id: i64,
    /// The access validator of `aclEnable=true`.
    pub acl: Option<Arc<crate::acl::Acl>>,
}

impl Broker {
    /// The shared state over an opened store: the metadata loaded from the store's root, the
    /// counters, and the put pipeline over the store, the master's slaves and the counters. Needs
    /// a tokio runtime (the broker's tasks run on it); starts no server, so a test can build one
    /// over a temporary store.
    pub fn assemble(parts: BrokerParts) -> Result<Broker, crate::config_file::ConfigFileError> {
        let BrokerParts { config, store_config, config_file, store, ha, identity, store_host, broker_id, acl } = parts;
        let root = store_config.root_dir();
        let stats = Arc::new(crate::stats::StoreStats::default());
        let broker_stats = Arc::new(crate::stats_manager::BrokerStatsManager::new(&config.broker_cluster_name));
        let metrics = Arc::new(crate::metrics::BrokerMetrics::new(&config));
        let observer = crate::put::PutObserver { stats: stats.clone(), broker_stats: broker_stats.clone(), metrics: metrics.clone() };
        let replicas = ha.replication().map(|r| r as Arc<dyn crate::put::ReplicaWaiter>);
        let meta = crate::metadata::Metadata::open(&config, store_config.timer_wheel_enable, &root)?;
        let request_modes = Arc::new(crate::load_balance::MessageRequestModes::open(&root)?);
        let live_config: LiveConfig = Arc::new(ArcSwap::from_pointee(config));
        let namesrv = Arc::new(RemotingClient::new(remoting::client::ClientConfig::default()));
        let topic_routes = Arc::new(crate::load_balance::TopicRoutes::new(namesrv.clone(), live_config.clone()));
        Ok(Broker {
            request_modes,
            topic_routes,
            topics: meta.topics,
            groups: meta.groups,
            offsets: meta.offsets,
            delay_offsets: meta.delay_offsets,
            put: Arc::new(crate::put::PutPipeline::new(store.clone(), replicas, Arc::new(observer))),
            broker_stats,
            metrics,
            stats,
            acl,
            live_config,
            live_store_config: Arc::new(ArcSwap::from_pointee(store_config)),
            config_file,
            config_version: Default::default(),
            pending_config: Default::default(),
            membership: Membership::new(store.clone(), broker_id),
            store,
            consumers: Default::default(),
            producers: Default::default(),
            locks: Default::default(),
            hold: std::sync::OnceLock::new(),
            timer: std::sync::OnceLock::new(),
            identity,
            store_host,
            namesrv,
            runtime: tokio::runtime::Handle::current(),
            boot_timestamp: remoting::clock::now_ms(),
            ha: Arc::new(ha),
            master_addr: Default::default(),
        })
    }

    /// The broker's config as it is now.
    pub fn config(&self) -> arc_swap::Guard<Arc<BrokerConfig>> {
        self.live_config.load()
    }

    /// The store's config as it is now (the store applies the keys it can change itself).
    pub fn store_config(&self) -> arc_swap::Guard<Arc<MessageStoreConfig>> {
        self.live_store_config.load()
    }

    pub fn is_writeable(&self) -> bool {
        perm::is_writeable(self.config().broker_permission)
    }

    pub fn is_readable(&self) -> bool {
        perm::is_readable(self.config().broker_permission)
    }

    /// Registers with every name server soon, from the registration task; `oneway` as Java does
    /// after an auto-created topic. Requests made while one registration runs share the next.
    pub fn register_soon(&self, oneway: bool) {
        self.membership.register_soon(oneway);
    }

    pub fn broker_id(&self) -> i64 {
        self.membership.broker_id()
    }

    pub fn set_broker_id(&self, id: i64) {
        self.membership.set_broker_id(id);
    }

    /// Who this broker is now, as it registers.
    pub fn identity(&self) -> BrokerIdentity {
        BrokerIdentity { broker_id: self.broker_id(), ..self.identity.clone() }
    }

    pub async fn register(&self, oneway: bool) {
        // A DLedger broker registers once its group has decided what it is (Java registers at its
        // first role change).
        if self.broker_id() < 0 {
            return;
        }
        let mut wrapper = self.topics.wrapper();
        if !self.is_writeable() {
            // A broker without write permission registers every topic without it (Java).
            for tc in wrapper.topic_config_table.values_mut() {
                tc.perm &= self.config().broker_permission;
            }
        }
        let addrs = self.config().namesrv_addrs();
        let timeout = Duration::from_millis(self.config().register_broker_timeout_ms);
        let result = namesrv_client::register_all(&self.namesrv, &addrs, &self.identity(), &wrapper, timeout, oneway).await;
        if let Some(result) = result.filter(|_| self.is_slave()) {
            self.learn_master(result).await;
        }
    }

    /// A request to the master, signed with `innerClientAuthenticationCredentials` when set (an ACL
    /// master needs it unless this broker's address is white there), as Java 5.3's `BrokerOuterAPI`.
    pub fn signed_for_master(&self, mut request: remoting::RemotingCommand) -> remoting::RemotingCommand {
        if let Some(credentials) = crate::acl::Credentials::parse(&self.config().inner_client_authentication_credentials) {
            credentials.sign(&mut request);
        }
        request
    }

    /// Whether the broker acts as a slave now (its configured role; in DLedger mode, its member's).
    pub fn is_slave(&self) -> bool {
        self.membership.is_slave()
    }

    /// A slave's registration answer names its master (Java: unless `haMasterAddress` is set,
    /// the HA address comes from here too). A slave follows a master only while the master's log
    /// is at least as long as its own.
    async fn learn_master(&self, result: namesrv_client::RegisterResult) {
        match result.master_addr.clone().filter(|a| !a.is_empty()) {
            Some(master) => {
                let changed = self.master_addr.read().as_deref() != Some(master.as_str());
                if changed {
                    info!(master, "master address");
                    *self.master_addr.write() = Some(master);
                }
            }
            // As Java's slave: the name server lists no master (its registration expired), so
            // the metadata copy stops until one is listed again.
            None => {
                if let Some(gone) = self.master_addr.write().take() {
                    info!(master = gone, "the name server lists no master any more; metadata sync paused until it does");
                }
            }
        }
        if self.store.is_dledger() {
            // DLedger replicates the log; only the metadata is copied from the master.
            return;
        }
        let Some(ha_addr) = result.ha_server_addr.filter(|a| !a.is_empty()) else { return };
        if self.store_config().ha_master_address.trim().len() >= 6 {
            return;
        }
        let master = self.master_addr.read().clone();
        if let Some(master) = master {
            if !self.log_not_ahead_of(&master).await {
                self.ha.stop_following();
                return;
            }
        }
        self.ha.follow(&ha_addr);
    }

    /// Whether this slave's commit log is no longer than its master's. A slave holding more than
    /// its master means the master lost a tail this slave received: following it, a Java master
    /// would send its new bytes at offsets where this slave holds other ones, and two logs would
    /// differ at the same offsets. That is refused, loudly, until an operator decides (truncate the
    /// slave's commit log to the master's end, or restore the master). Unknown is taken as fine:
    /// the master side refuses a slave ahead of it too (ours does).
    async fn log_not_ahead_of(&self, master: &str) -> bool {
        // The local end is read before the master is asked: while replication runs, bytes the
        // master sent after it answered would otherwise look like bytes it never had.
        let local_end = self.store.commit_log().max_offset();
        use remoting::call::RemotingRequest as _;
        let ask = self.signed_for_master(remoting::protocol::body::GetBrokerRuntimeInfo.into_command());
        let asked = self.namesrv.invoke(master, ask, Duration::from_secs(3)).await;
        let Ok(info) = asked.map_err(remoting::call::CallError::from).and_then(remoting::protocol::body::GetBrokerRuntimeInfo::parse_response) else {
            return true;
        };
        let Some(master_end) = info.table.get("commitLogMaxOffset").and_then(|v| v.parse::<i64>().ok()) else { return true };
        if local_end > master_end {
            tracing::error!(master, master_end, local_end, "this slave holds {} bytes its master does not: the logs have diverged; not replicating (truncate this slave's commit log to the master's end, or restore the master)", local_end - master_end);
            return false;
        }
        true
    }

    pub async fn unregister(&self) {
        let addrs = self.config().namesrv_addrs();
        if self.broker_id() < 0 {
            return;
        }
        namesrv_client::unregister_all(&self.namesrv, &addrs, &self.identity(), Duration::from_secs(3)).await;
        info!("unregistered from the name servers");
    }

    /// What transactions need, as handles the END_TRANSACTION processor and the check service keep.
    pub fn transactions(&self) -> crate::transaction::Transactions {
        crate::transaction::Transactions {
            config: self.live_config.clone(),
            store: self.store.clone(),
            put: self.put.clone(),
            offsets: self.offsets.clone(),
            producers: self.producers.clone(),
            metrics: self.metrics.clone(),
            store_host: self.store_host,
        }
    }

    /// The metadata tables, as handles a service keeps.
    pub fn metadata(&self) -> crate::metadata::Metadata {
        crate::metadata::Metadata {
            topics: self.topics.clone(),
            groups: self.groups.clone(),
            offsets: self.offsets.clone(),
            delay_offsets: self.delay_offsets.clone(),
        }
    }

    /// The config handles: what reads and updates the broker's and the store's config.
    pub fn configs(&self) -> Configs {
        Configs {
            broker: self.live_config.clone(),
            store: self.live_store_config.clone(),
            version: self.config_version.clone(),
            pending: self.pending_config.clone(),
            file: self.config_file.clone(),
        }
    }

    /// What the admin family of processors reads and changes.
    pub fn admin_context(&self) -> AdminContext {
        AdminContext {
            configs: self.configs(),
            store: self.store.clone(),
            topics: self.topics.clone(),
            groups: self.groups.clone(),
            offsets: self.offsets.clone(),
            delay_offsets: self.delay_offsets.clone(),
            consumers: self.consumers.clone(),
            producers: self.producers.clone(),
            stats: self.stats.clone(),
            broker_stats: self.broker_stats.clone(),
            metrics: self.metrics.clone(),
            ha: self.ha.clone(),
            timer: self.timer.get().cloned(),
            membership: self.membership.clone(),
            broker_addr: self.identity.broker_addr.clone(),
            boot_timestamp: self.boot_timestamp,
            request_modes: self.request_modes.clone(),
        }
    }

    /// What client management reads and changes.
    pub fn client_context(&self) -> ClientContext {
        ClientContext {
            config: self.live_config.clone(),
            topics: self.topics.clone(),
            groups: self.groups.clone(),
            consumers: self.consumers.clone(),
            producers: self.producers.clone(),
            membership: self.membership.clone(),
        }
    }

    /// What sends and replies check and store through.
    pub fn send_context(&self) -> SendContext {
        SendContext {
            config: self.live_config.clone(),
            store: self.store.clone(),
            topics: self.topics.clone(),
            groups: self.groups.clone(),
            put: self.put.clone(),
            metrics: self.metrics.clone(),
            store_host: self.store_host,
            membership: self.membership.clone(),
        }
    }

    pub fn hold(&self) -> Option<&Arc<PullRequestHoldService>> {
        self.hold.get()
    }
}
