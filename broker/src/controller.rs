//! `BrokerController`: opens the store and the metadata, registers the processors on their pools,
//! starts the services (long polling, name-server registration, offset persistence, client
//! expiry), and stops them in order.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use remoting::client::{ClientConfig, RemotingClient};
use remoting::connection::ConnectionConfig;
use remoting::pool::BusinessPool;
use remoting::server::{Channel, ConnectionListener, ProcessorRegistry, RemotingServer, ServerConfig};
use remoting::RequestCode;
use store::config::MessageStoreConfig;
use store::store::MessageStore;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::broker::Broker;
use crate::client::consumer_manager::ConsumerManager;
use crate::client::producer_manager::ProducerManager;
use crate::config::BrokerConfig;
use crate::config_file::ConfigFileError;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::delay_offset::DelayOffsets;
use crate::schedule::ScheduleService;
use crate::long_polling::{HeldPull, PullRequestHoldService};
use crate::namesrv_client::BrokerIdentity;
use crate::processor::client_manage::{notify_consumer_ids_changed, ClientManageProcessor};
use crate::processor::admin::{AdminProcessor, QueuedPools};
use crate::processor::consumer_manage::ConsumerManageProcessor;
use crate::processor::end_transaction::EndTransactionProcessor;
use crate::transaction::TransactionChecker;
use crate::processor::lock::LockProcessor;
use crate::processor::pull::PullProcessor;
use crate::processor::query::QueryProcessor;
use crate::processor::send::SendProcessor;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("store: {0}")]
    Store(#[from] store::store::StoreError),
    #[error("config file: {0}")]
    ConfigFile(#[from] ConfigFileError),
    #[error("brokerIP1 {0:?} or bindAddress is not an IP address")]
    BadAddress(String),
    #[error("cannot start: {0}")]
    Io(#[from] std::io::Error),
    #[error("aclEnable=true, but this broker does not implement ACL yet; refusing to start without the access control asked for")]
    AclUnsupported,
    #[error("enableDLegerCommitLog=true, but this broker does not implement DLedger yet; refusing to start rather than run without the replication asked for")]
    DLedgerUnsupported,
}

/// Forgets clients whose connection closed and tells their groups.
struct OnClose(Arc<Broker>);

impl ConnectionListener for OnClose {
    fn on_close(&self, channel: &Channel) {
        for group in self.0.consumers.on_channel_closed(channel) {
            notify_consumer_ids_changed(&self.0, &group);
        }
        self.0.producers.on_channel_closed(channel);
    }
}

pub struct BrokerController {
    pub broker: Arc<Broker>,
    server: RemotingServer,
    tasks: Vec<JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    hold_thread: Option<std::thread::JoinHandle<()>>,
    schedule: Arc<ScheduleService>,
    schedule_thread: Option<std::thread::JoinHandle<()>>,
    checker: Arc<TransactionChecker>,
    checker_thread: Option<std::thread::JoinHandle<()>>,
}

fn pool(name: &str, threads: usize, capacity: usize) -> Result<Arc<BusinessPool>, StartError> {
    Ok(Arc::new(BusinessPool::new(name, threads.max(1), capacity.max(1))?))
}

impl BrokerController {
    /// Starts a broker. Call inside a tokio runtime.
    pub async fn start(config: BrokerConfig, store_config: MessageStoreConfig) -> Result<BrokerController, StartError> {
        if config.acl_enable {
            return Err(StartError::AclUnsupported);
        }
        if store_config.enable_dleger_commit_log {
            return Err(StartError::DLedgerUnsupported);
        }
        let root = store_config.root_dir();
        let ip1: IpAddr = config.broker_ip1.parse().map_err(|_| StartError::BadAddress(config.broker_ip1.clone()))?;
        let store_host = SocketAddr::new(ip1, config.listen_port);
        let store = tokio::task::block_in_place(|| MessageStore::open(store_config.clone()))?;
        store.start()?;
        let topics = TopicConfigManager::open(&config, &root)?;
        let groups = SubscriptionGroupManager::open(&root)?;
        let offsets = ConsumerOffsetManager::open(&root)?;
        let identity = BrokerIdentity {
            cluster: config.broker_cluster_name.clone(),
            broker_name: config.broker_name.clone(),
            broker_id: config.broker_id,
            broker_addr: store_host.to_string(),
            ha_server_addr: format!("{}:{}", config.broker_ip2, store_config.ha_listen_port),
        };
        let broker = Arc::new(Broker {
            config,
            store_config,
            store: store.clone(),
            topics,
            groups,
            offsets,
            consumers: ConsumerManager::default(),
            producers: ProducerManager::default(),
            locks: Default::default(),
            hold: std::sync::OnceLock::new(),
            identity,
            store_host,
            namesrv: Arc::new(RemotingClient::new(ClientConfig::default())),
            runtime: tokio::runtime::Handle::current(),
            boot_timestamp: store::commit_log::now_ms(),
            replicas: Box::new(crate::replication::NoReplicas),
            stats: Default::default(),
        });
        let c = &broker.config;

        let send_pool = pool("SendMessageThread", c.send_message_thread_pool_nums, c.send_thread_pool_queue_capacity)?;
        let pull_pool = pool("PullMessageThread", c.pull_message_thread_pool_nums, c.pull_thread_pool_queue_capacity)?;
        let query_pool = pool("QueryMessageThread", c.query_message_thread_pool_nums, c.query_thread_pool_queue_capacity)?;
        let heartbeat_pool = pool("HeartbeatThread", c.heartbeat_thread_pool_nums, c.heartbeat_thread_pool_queue_capacity)?;
        let client_pool = pool("ClientManageThread", c.client_manage_thread_pool_nums, c.client_manager_thread_pool_queue_capacity)?;
        let consumer_pool = pool("ConsumerManageThread", c.consumer_manage_thread_pool_nums, c.consumer_manager_thread_pool_queue_capacity)?;

        let send = Arc::new(SendProcessor { broker: broker.clone() });
        let pull = Arc::new(PullProcessor { broker: broker.clone() });
        let client = Arc::new(ClientManageProcessor { broker: broker.clone() });
        let consumer = Arc::new(ConsumerManageProcessor { broker: broker.clone() });
        let query = Arc::new(QueryProcessor { broker: broker.clone() });

        // Woken pulls run again on the pull pool, without the right to be parked again.
        let (wake_pull, wake_pool) = (pull.clone(), pull_pool.clone());
        let hold = Arc::new(PullRequestHoldService::new(Box::new(move |held: HeldPull| {
            let processor = wake_pull.clone();
            let channel = held.channel.clone();
            let request = held.request;
            let opaque = request.opaque;
            let serialize_type = request.serialize_type;
            let job = move || {
                if let Some(mut response) = processor.pull(&channel, request, false) {
                    response.opaque = opaque;
                    response.serialize_type = serialize_type;
                    response.flag |= remoting::command::FLAG_RESPONSE;
                    let _ = channel.send(response);
                }
            };
            if wake_pool.try_execute(0, job).is_err() {
                warn!("pull pool full; a woken pull is dropped and the client will retry");
            }
        })));
        let _ = broker.hold.set(hold.clone());
        let arrivals = hold.clone();
        store.set_arrival_listener(Arc::new(move |topic, queue_id, max_offset, tags_code| {
            arrivals.notify_arriving(topic, queue_id, max_offset, Some(tags_code), Instant::now());
        }));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let check_every = if broker.config.long_polling_enable { Duration::from_secs(5) } else { Duration::from_millis(broker.config.short_polling_time_ms) };
        let (hold_checker, checker_store, checker_stop) = (hold.clone(), store.clone(), stop.clone());
        let hold_thread = std::thread::Builder::new().name("PullRequestHoldService".into()).spawn(move || {
            hold_checker.run(check_every, || checker_stop.load(std::sync::atomic::Ordering::Acquire), |t, q| checker_store.max_offset_in_queue(t, q));
        })?;

        let mut registry = ProcessorRegistry::new();
        for code in [RequestCode::SEND_MESSAGE, RequestCode::SEND_MESSAGE_V2, RequestCode::SEND_BATCH_MESSAGE, RequestCode::CONSUMER_SEND_MSG_BACK] {
            registry.register(code, send.clone(), &send_pool);
        }
        for code in [RequestCode::PULL_MESSAGE, RequestCode::LITE_PULL_MESSAGE] {
            registry.register(code, pull.clone(), &pull_pool);
        }
        registry.register(RequestCode::HEART_BEAT, client.clone(), &heartbeat_pool);
        for code in [RequestCode::UNREGISTER_CLIENT, RequestCode::CHECK_CLIENT_CONFIG] {
            registry.register(code, client.clone(), &client_pool);
        }
        for code in [RequestCode::GET_CONSUMER_LIST_BY_GROUP, RequestCode::UPDATE_CONSUMER_OFFSET, RequestCode::QUERY_CONSUMER_OFFSET] {
            registry.register(code, consumer.clone(), &consumer_pool);
        }
        for code in [
            RequestCode::GET_MAX_OFFSET,
            RequestCode::GET_MIN_OFFSET,
            RequestCode::GET_EARLIEST_MSG_STORETIME,
            RequestCode::SEARCH_OFFSET_BY_TIMESTAMP,
            RequestCode::QUERY_MESSAGE,
            RequestCode::VIEW_MESSAGE_BY_ID,
        ] {
            registry.register(code, query.clone(), &query_pool);
        }
        let admin_pool = pool("AdminBrokerThread", broker.config.admin_broker_thread_pool_nums, 10_000)?;
        let delay_offsets = Arc::new(DelayOffsets::open(&broker.store_config.root_dir())?);
        let end_tx_pool = pool("EndTransactionThread", broker.config.end_transaction_thread_pool_nums, broker.config.end_transaction_pool_queue_capacity)?;
        let pools = QueuedPools { send: send_pool.clone(), pull: pull_pool.clone(), query: query_pool.clone(), end_transaction: end_tx_pool.clone() };
        let admin = Arc::new(AdminProcessor { broker: broker.clone(), delay_offsets: delay_offsets.clone(), pools });
        for code in [
            RequestCode::GET_BROKER_RUNTIME_INFO,
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            RequestCode::DELETE_TOPIC_IN_BROKER,
            RequestCode::GET_ALL_TOPIC_CONFIG,
            RequestCode::GET_TOPIC_CONFIG,
            RequestCode::GET_TOPIC_STATS_INFO,
            RequestCode::GET_CONSUMER_CONNECTION_LIST,
            RequestCode::GET_PRODUCER_CONNECTION_LIST,
            RequestCode::GET_CONSUME_STATS,
            RequestCode::QUERY_TOPIC_CONSUME_BY_WHO,
            RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            RequestCode::DELETE_SUBSCRIPTIONGROUP,
            RequestCode::GET_BROKER_CONFIG,
            RequestCode::GET_ALL_CONSUMER_OFFSET,
            RequestCode::GET_ALL_DELAY_OFFSET,
        ] {
            registry.register(code, admin.clone(), &admin_pool);
        }
        registry.register(RequestCode::END_TRANSACTION, Arc::new(EndTransactionProcessor { broker: broker.clone() }), &end_tx_pool);
        let lock = Arc::new(LockProcessor { broker: broker.clone() });
        for code in [RequestCode::LOCK_BATCH_MQ, RequestCode::UNLOCK_BATCH_MQ] {
            registry.register(code, lock.clone(), &consumer_pool);
        }
        registry.set_connection_listener(Arc::new(OnClose(broker.clone())));

        let bind: IpAddr = broker.config.bind_address.parse().map_err(|_| StartError::BadAddress(broker.config.bind_address.clone()))?;
        let server_config = ServerConfig {
            listen_addr: SocketAddr::new(bind, broker.config.listen_port),
            connection: ConnectionConfig {
                idle_timeout: Duration::from_secs(broker.config.server_channel_max_idle_time_seconds.max(1)),
                ..ConnectionConfig::default()
            },
            drain_timeout: Duration::from_secs(10),
            max_connections: remoting::server::DEFAULT_MAX_CONNECTIONS,
        };
        let server = RemotingServer::start(server_config, registry).await?;

        let schedule = Arc::new(ScheduleService {
            store: store.clone(),
            offsets: delay_offsets,
            levels: broker.store_config.delay_levels_ms().len(),
            stop: std::sync::atomic::AtomicBool::new(false),
        });
        let runner = schedule.clone();
        let schedule_thread = std::thread::Builder::new().name("ScheduleMessageService".into()).spawn(move || runner.run())?;

        let checker = Arc::new(TransactionChecker::new(broker.clone()));
        let runner = checker.clone();
        let checker_thread = std::thread::Builder::new().name("TransactionalMessageCheckService".into()).spawn(move || runner.run())?;

        // As Java: register once at start, then periodically.
        broker.register(false).await;
        let mut tasks = Vec::new();
        let me = broker.clone();
        let period = Duration::from_millis(broker.config.register_name_server_period_ms.clamp(10_000, 60_000));
        tasks.push(tokio::spawn(async move {
            let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + Duration::from_secs(10), period);
            loop {
                ticker.tick().await;
                me.register(false).await;
            }
        }));
        let me = broker.clone();
        let persist_every = Duration::from_millis(broker.config.flush_consumer_offset_interval_ms.max(100));
        tasks.push(tokio::spawn(async move {
            let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + Duration::from_secs(10), persist_every);
            loop {
                ticker.tick().await;
                if let Err(e) = me.offsets.persist() {
                    error!(error = %e, "cannot persist consumer offsets");
                }
            }
        }));
        let me = broker.clone();
        tasks.push(tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_secs(1));
            loop {
                ticker.tick().await;
                me.stats.sample(store::commit_log::now_ms());
            }
        }));
        let me = broker.clone();
        tasks.push(tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_secs(10));
            loop {
                ticker.tick().await;
                for group in me.consumers.scan_expired(Instant::now()) {
                    notify_consumer_ids_changed(&me, &group);
                }
                me.producers.scan_expired(Instant::now());
            }
        }));
        info!(addr = %server.local_addr(), broker = broker.config.broker_name, "broker started");
        Ok(BrokerController { broker, server, tasks, stop, hold_thread: Some(hold_thread), schedule, schedule_thread: Some(schedule_thread), checker, checker_thread: Some(checker_thread) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Stops as Java does: unregister, stop serving, persist offsets, shut the store down.
    pub async fn shutdown(mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
        self.broker.unregister().await;
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        self.server.shutdown().await;
        if let Some(t) = self.hold_thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        self.checker.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.checker_thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        self.schedule.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.schedule_thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        if let Err(e) = self.broker.offsets.persist() {
            error!(error = %e, "cannot persist consumer offsets at shutdown");
        }
        let store = self.broker.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.shutdown()).await;
        info!("broker stopped");
    }
}
