//! `BrokerController`: opens the store and the metadata, registers the processors on their pools,
//! starts the background services (long-polling check, delayed delivery, transaction check, the
//! metadata persister) and the name-server registration, and stops them in order.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use remoting::connection::ConnectionConfig;
use remoting::pool::{BusinessPool, Refusal};
use remoting::server::{refusal_remark, Channel, ConnectionListener, ProcessorRegistry, RemotingServer, Reply, RequestProcessor, ServerConfig};
use remoting::service::Service;
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use store::config::MessageStoreConfig;
use store::store::MessageStore;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::broker::{Broker, BrokerParts};
use crate::config::BrokerConfig;
use crate::config_file::ConfigFileError;
use crate::long_polling::{HeldPull, PullRequestHoldService};
use crate::namesrv_client::BrokerIdentity;
use crate::popping::service::{ParkedPop, PopParking, PopService};
use crate::processor::admin::{AdminProcessor, QueuedPools};
use crate::processor::client_manage::{notify_consumer_ids_changed, ClientManageProcessor};
use crate::processor::consumer_manage::ConsumerManageProcessor;
use crate::processor::end_transaction::EndTransactionProcessor;
use crate::processor::lock::LockProcessor;
use crate::processor::maintenance::MaintenanceProcessor;
use crate::processor::pull::PullProcessor;
use crate::processor::query::QueryProcessor;
use crate::processor::relay::RelayProcessor;
use crate::processor::reply::ReplyProcessor;
use crate::processor::send::SendProcessor;
use crate::replication::Ha;
use crate::routes::{Access, Handler, Pool, ROUTES};
use crate::schedule::ScheduleService;
use crate::transaction::TransactionChecker;

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
    #[error("aclEnable=true: {0}")]
    Acl(String),
    #[error(transparent)]
    DLedger(#[from] crate::dledger::DLedgerStartError),
    #[error("metricsExporterType=PROM: cannot serve metrics: {0}")]
    Metrics(std::io::Error),
    #[error("timer (timerWheelEnable=true): {0}")]
    Timer(#[from] store::timer::TimerOpenError),
}

/// Forgets clients whose connection closed and tells their groups.
struct OnClose(crate::handles::ClientContext);

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
    /// The business pools by family (the server holds them too).
    pools: HashMap<Pool, Arc<BusinessPool>>,
    /// Java's fast (VIP) channel on `listenPort - 2`: every code but pulls. Java slaves fetch
    /// their master's topics there; clients with `vipChannelEnabled` send there.
    fast_server: Option<RemotingServer>,
    /// Async tasks (registration, stats, client expiry): aborted at shutdown.
    tasks: Vec<JoinHandle<()>>,
    /// Background threads, in start order; stopped in reverse, so the persister, started first,
    /// writes last.
    services: Vec<Service>,
    /// The Prometheus endpoint of `metricsExporterType=PROM`.
    metrics_exporter: Option<remoting::metrics::exporter::PromExporter>,
    /// The gRPC front of `--enable-proxy` (local mode).
    grpc: Option<proxy::server::GrpcServer>,
    /// The codes the proxy's remoting port hands to this broker, until `--enable-proxy` takes
    /// them; then that port's server.
    proxy_registry: Option<ProcessorRegistry>,
    proxy_remoting: Option<RemotingServer>,
    /// The DLedger member holding the commit log, in DLedger mode.
    member: Option<dledger::server::DLedgerServer>,
}

fn pool(kind: Pool, threads: usize, capacity: usize) -> Result<Arc<BusinessPool>, StartError> {
    if kind.on_runtime() {
        return Ok(Arc::new(BusinessPool::on_runtime(kind.thread_name(), threads, capacity, &tokio::runtime::Handle::current())));
    }
    Ok(Arc::new(BusinessPool::new(kind.thread_name(), threads.max(1), capacity.max(1))?))
}

impl BrokerController {
    /// Starts a broker. Call inside a tokio runtime.
    pub async fn start(config: BrokerConfig, store_config: MessageStoreConfig) -> Result<BrokerController, StartError> {
        Self::start_with_file(config, store_config, None).await
    }

    /// Starts a broker whose config UPDATE_BROKER_CONFIG persists to `config_file` (Java's
    /// `mqbroker -c FILE`, or `~/store/config/broker.properties` without `-c`).
    pub async fn start_with_file(
        config: BrokerConfig,
        store_config: MessageStoreConfig,
        config_file: Option<std::path::PathBuf>,
    ) -> Result<BrokerController, StartError> {
        let (broker, member) = open(config, store_config, config_file).await?;
        let flush_offsets_every = Duration::from_millis(broker.config().flush_consumer_offset_interval_ms);
        let mut services = vec![crate::persister::start(broker.metadata(), flush_offsets_every)?];
        let (registry, hold, pop, watermarks, pools) = processors(&broker)?;
        let proxy_registry = registry.clone_only(proxy::remoting_port::BROKER_CODES);
        // As Java, a metrics port that cannot be had stops the start.
        let me = Arc::downgrade(&broker);
        let pop_for_metrics = Arc::downgrade(&pop);
        let sources = move |refresh: &mut dyn FnMut(&crate::metrics::gauges::Sources)| {
            if let Some(b) = me.upgrade() {
                let (config, store_config) = (b.config(), b.store_config());
                let pop = pop_for_metrics.upgrade();
                refresh(&crate::metrics::gauges::Sources {
                    config: &config,
                    store_config: &store_config,
                    store: &b.store,
                    topics: &b.topics,
                    groups: &b.groups,
                    offsets: &b.offsets,
                    consumers: &b.consumers,
                    producers: &b.producers,
                    timer: b.timer.get().map(Arc::as_ref),
                    pop: pop.as_deref().map(|p| p as &dyn crate::metrics::pop::ReviveLag),
                });
            }
        };
        let metrics_exporter = broker.metrics.start_exporter(&broker.config(), sources, watermarks).await.map_err(StartError::Metrics)?;
        // The stats windows' first sample, before either port can serve a request that counts
        // (Java's schedules start with the broker); `async_tasks` takes the next ones.
        broker.broker_stats.tick(remoting::clock::now_ms());
        let fast_server = match fast_port(broker.config().listen_port) {
            Some(port) => {
                let pulls: Vec<RequestCode> = ROUTES.iter().filter(|r| !r.on_fast_port()).map(|r| r.code).collect();
                let fast = registry.clone_without(&pulls);
                let mut config = server_config(&broker.config())?;
                config.listen_addr.set_port(port);
                // Secondary: a broker whose fast port is taken still serves on its own port.
                match RemotingServer::start(config, fast).await {
                    Ok(server) => Some(server),
                    Err(e) => {
                        tracing::error!(port, error = %e, "cannot listen on the fast (VIP) port listenPort - 2; serving without it");
                        None
                    }
                }
            }
            None => None,
        };
        let server = RemotingServer::start(server_config(&broker.config())?, registry).await?;
        services.extend(background_services(&broker, hold)?);
        services.push(fast_failure(&broker, &pools)?);
        services.extend(pop_services(&broker, pop)?);
        if let Some(timer) = broker.timer.get() {
            // A DLedger broker starts as a slave; its role changes turn releasing on and off.
            timer.start(Arc::new(crate::put::TimerReleases(broker.put.clone())), !broker.is_slave())?;
        }
        // As Java: register once at start (in DLedger mode at the first role change), then
        // periodically and when asked.
        broker.register(false).await;
        let mut tasks = async_tasks(&broker);
        let member = member.map(|m| {
            let roles = crate::dledger::role::follow(broker.clone(), m.server.handle(), m.offsets.clone(), m.slave_id);
            tasks.push(tokio::spawn(roles));
            m.server
        });
        info!(addr = %server.local_addr(), broker = broker.config().broker_name, "broker started");
        Ok(BrokerController {
            broker,
            server,
            pools,
            fast_server,
            tasks,
            services,
            member,
            metrics_exporter,
            grpc: None,
            proxy_registry: Some(proxy_registry),
            proxy_remoting: None,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The business pool of one family (what its queue holds, or a test that fills it).
    pub fn pool(&self, kind: Pool) -> Option<Arc<BusinessPool>> {
        self.pools.get(&kind).cloned()
    }

    /// Serves one connection over `stream` (e.g. one end of `tokio::io::duplex`) as if `peer` had
    /// connected to the broker's port: the same processors, bounds and connection hooks, so
    /// tests can drive the broker in-process.
    pub fn serve_stream<S>(&self, stream: S, peer: SocketAddr) -> std::io::Result<Channel>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        self.server.serve_stream(stream, peer)
    }

    /// Serves RocketMQ 5's gRPC API on `grpcServerPort` from this broker (`--enable-proxy`, local
    /// mode): [`crate::proxy_local::LocalBackend`] behind [`proxy::service::Messaging`]; and the
    /// proxy's remoting port (`remotingListenPort`), which takes remoting clients (this broker's
    /// codes of [`proxy::remoting_port::BROKER_CODES`], routes naming the port) and gRPC ones.
    /// Returns the gRPC and the remoting port's addresses.
    pub async fn enable_proxy(&mut self, config: proxy::config::ProxyConfig) -> Result<(SocketAddr, SocketAddr), StartError> {
        let broker_config = self.broker.config();
        let bind: IpAddr = broker_config.bind_address.parse().map_err(|_| StartError::BadAddress(broker_config.bind_address.clone()))?;
        let remoting = tokio::net::TcpListener::bind(SocketAddr::new(bind, config.remoting_listen_port)).await?;
        let remoting_addr = remoting.local_addr()?;
        let grpc_port = config.grpc_server_port;
        let check_message_types = config.enable_topic_message_type_check;
        self.broker.metrics.add_proxy_up(&config);
        let backend = Arc::new(crate::proxy_local::LocalBackend::new(self.broker.clone(), self.server.acceptor()));
        let service = proxy::service::Messaging::new(config, backend);
        let grpc = proxy::server::GrpcServer::start(SocketAddr::new(bind, grpc_port), service).await?;
        let grpc_addr = grpc.local_addr();

        // The address routes name: the port's, with the broker's IP when it listens on all.
        let host = if bind.is_unspecified() { broker_config.broker_ip1.clone() } else { bind.to_string() };
        let mut registry = self.proxy_registry.take().unwrap_or_default();
        let broker = self.broker.clone();
        registry
            .wrap(proxy::remoting_port::BROKER_CODES, |inner| Arc::new(crate::proxy_local::ProxyPortChecks::new(inner, broker.clone(), check_message_types)));
        let routes = Arc::new(crate::proxy_local::ProxyRoutes::new(self.broker.clone(), format!("{host}:{}", remoting_addr.port())));
        if let Some(pool) = self.pools.get(&Pool::ClientManage) {
            registry.register(proxy::remoting_port::ROUTE_CODE, routes, pool);
        }
        let server = RemotingServer::in_process(ServerConfig { listen_addr: remoting_addr, ..server_config(&broker_config)? }, registry);
        let acceptor = server.acceptor();
        grpc.serve_remoting_port(
            remoting,
            Arc::new(move |io, peer| {
                if let Err(e) = acceptor.serve_stream(io, peer) {
                    tracing::warn!(%peer, error = %e, "proxy remoting connection refused");
                }
            }),
        );
        self.grpc = Some(grpc);
        self.proxy_remoting = Some(server);
        Ok((grpc_addr, remoting_addr))
    }

    /// Stops as Java does: unregister, stop serving, stop the services (the persister writes the
    /// metadata a last time), shut the store down.
    pub async fn shutdown(mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
        if let Some(grpc) = self.grpc.take() {
            grpc.shutdown().await;
        }
        if let Some(remoting) = self.proxy_remoting.take() {
            remoting.shutdown().await;
        }
        self.broker.unregister().await;
        if let Some(exporter) = self.metrics_exporter.take() {
            exporter.shutdown().await;
        }
        if let Some(fast) = self.fast_server.take() {
            fast.shutdown().await;
        }
        self.server.shutdown().await;
        self.broker.ha.shutdown().await;
        let services = std::mem::take(&mut self.services);
        let _ = tokio::task::spawn_blocking(move || services.iter().rev().for_each(Service::stop)).await;
        // As Java: the timer stops (and writes its checkpoint) before the store.
        if let Some(timer) = self.broker.timer.get().cloned() {
            let _ = tokio::task::spawn_blocking(move || timer.shutdown()).await;
        }
        if let Some(member) = self.member.take() {
            // Appends still waiting for the quorum are answered SERVICE_NOT_AVAILABLE; what was
            // committed is dispatched by the store's shutdown below.
            member.shutdown().await;
        }
        let store = self.broker.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.shutdown()).await;
        info!("broker stopped");
    }
}

/// The ACL of `aclEnable=true`, from `<rocketmqHome>/conf/plain_acl.yml` and `conf/acl/`.
fn open_acl(config: &BrokerConfig) -> Result<Option<Arc<crate::acl::Acl>>, StartError> {
    if !config.acl_enable {
        return Ok(None);
    }
    if config.rocketmq_home.trim().is_empty() {
        return Err(StartError::Acl("set rocketmqHome (or ROCKETMQ_HOME): the ACL files are its conf/plain_acl.yml and conf/acl/*.yml".into()));
    }
    let acl = crate::acl::Acl::open(std::path::Path::new(config.rocketmq_home.trim())).map_err(StartError::Acl)?;
    Ok(Some(Arc::new(acl)))
}

/// Opens and starts the store and replication (the classic HA service, or in DLedger mode the
/// member holding the commit log), loads the metadata, and builds the shared state.
async fn open(
    config: BrokerConfig,
    store_config: MessageStoreConfig,
    config_file: Option<std::path::PathBuf>,
) -> Result<(Arc<Broker>, Option<crate::dledger::Member>), StartError> {
    let ip1: IpAddr = config.broker_ip1.parse().map_err(|_| StartError::BadAddress(config.broker_ip1.clone()))?;
    let bind: IpAddr = config.bind_address.parse().map_err(|_| StartError::BadAddress(config.bind_address.clone()))?;
    let store_host = SocketAddr::new(ip1, config.listen_port);
    let mut timer = None;
    let (store, member, ha) = if store_config.enable_dleger_commit_log {
        let (store, opened) = tokio::task::block_in_place(|| crate::dledger::open(&store_config))?;
        // Java forces brokerId -1 and the role SLAVE until the group decides.
        store.set_role(store::config::BrokerRole::Slave);
        let member = crate::dledger::start(opened, &store, store_config.max_message_size).await?;
        open_timer(&store, &mut timer)?;
        store.start()?;
        (store, Some(member), Ha::Off)
    } else {
        let store = tokio::task::block_in_place(|| MessageStore::open(store_config.clone()))?;
        open_timer(&store, &mut timer)?;
        store.start()?;
        let ha = Ha::start(&store, &store_config, bind).await?;
        (store, None, ha)
    };
    let broker_id = if member.is_some() { -1 } else { config.broker_id };
    let ha_port = ha.listen_addr().map_or(store_config.ha_listen_port, |a| a.port());
    let identity = BrokerIdentity {
        cluster: config.broker_cluster_name.clone(),
        broker_name: config.broker_name.clone(),
        broker_id: config.broker_id,
        broker_addr: store_host.to_string(),
        ha_server_addr: format!("{}:{ha_port}", config.broker_ip2),
    };
    let acl = open_acl(&config)?;
    let parts = BrokerParts { config, store_config, config_file, store, ha, identity, store_host, broker_id, acl };
    let broker = Arc::new(Broker::assemble(parts)?);
    if let Some(timer) = timer {
        if let Some(events) = broker.metrics.timer_events() {
            timer.set_events(events);
        }
        broker.put.set_timer(timer.clone());
        let _ = broker.timer.set(timer);
    }
    Ok((broker, member))
}

/// The 5.x timer over the opened store (with `timerWheelEnable`, Java's default): its files
/// recovered, and one more dispatcher of the store that wakes it, added before the store starts.
fn open_timer(store: &Arc<MessageStore>, timer: &mut Option<Arc<store::timer::TimerStore>>) -> Result<(), StartError> {
    if !store.config().timer_wheel_enable {
        return Ok(());
    }
    let opened = tokio::task::block_in_place(|| store::timer::TimerStore::open(store.clone()))?;
    store.add_dispatcher(opened.arrivals()).map_err(|e| StartError::Io(std::io::Error::other(e.to_string())))?;
    *timer = Some(opened);
    Ok(())
}

/// The business pools under the processor names Java's `rocketmq_processor_watermark` gives them.
type WatermarkPools = Vec<(&'static str, Arc<BusinessPool>)>;

/// Every code of the route table on its processor and pool (one bounded pool per family, as
/// Java), behind the ACL check of its route when `aclEnable=true`; and the long-polling service
/// that parks pulls.
#[allow(clippy::type_complexity)]
fn processors(
    broker: &Arc<Broker>,
) -> Result<(ProcessorRegistry, Arc<PullRequestHoldService>, Arc<PopService>, WatermarkPools, HashMap<Pool, Arc<BusinessPool>>), StartError> {
    let c = &broker.config();
    let mut pools = HashMap::new();
    for kind in Pool::ALL {
        let (threads, capacity) = kind.size(c);
        pools.insert(kind, pool(kind, threads, capacity)?);
    }
    let pool_of = |kind: Pool| pools[&kind].clone();
    let watermarks = Pool::ALL.iter().filter_map(|kind| Some((kind.metric_label()?, pool_of(*kind)))).collect();

    let send = Arc::new(SendProcessor { ctx: broker.send_context() });
    let pull_service = Arc::new(crate::consumption::PullService {
        config: broker.live_config.clone(),
        store: broker.store.clone(),
        topics: broker.topics.clone(),
        groups: broker.groups.clone(),
        offsets: broker.offsets.clone(),
        consumers: broker.consumers.clone(),
        stats: broker.stats.clone(),
        broker_stats: broker.broker_stats.clone(),
        metrics: broker.metrics.clone(),
        parking: Default::default(),
    });
    let pull = Arc::new(PullProcessor { service: pull_service.clone() });
    let client = Arc::new(ClientManageProcessor { ctx: broker.client_context() });
    let queued =
        QueuedPools { send: pool_of(Pool::Send), pull: pool_of(Pool::Pull), query: pool_of(Pool::Query), end_transaction: pool_of(Pool::EndTransaction) };
    let order =
        crate::popping::order::OrderInfoManager::open(&broker.store.config().root_dir()).map_err(|e| StartError::Io(std::io::Error::other(e.to_string())))?;
    let pop_service = Arc::new(PopService::new(
        broker.live_config.clone(),
        broker.store.clone(),
        broker.put.clone(),
        broker.topics.clone(),
        broker.groups.clone(),
        broker.offsets.clone(),
        Arc::new(order),
        broker.broker_stats.clone(),
        broker.metrics.clone(),
        broker.store_host,
    ));
    let pop = Arc::new(crate::processor::pop::PopProcessor { service: pop_service.clone() });
    let hold = long_polling(broker, &pull_service, &pop_service, &pool_of(Pool::Pull));
    let consumer = Arc::new(ConsumerManageProcessor { consumers: broker.consumers.clone(), offsets: broker.offsets.clone(), store: broker.store.clone() });
    let lock = Arc::new(LockProcessor { locks: broker.locks.clone() });
    let query = Arc::new(QueryProcessor { store: broker.store.clone(), store_config: broker.live_store_config.clone() });
    let stats = Arc::new(crate::processor::broker_stats::BrokerStatsProcessor { ctx: broker.admin_context() });
    let acl_admin = Arc::new(crate::processor::acl_admin::AclAdminProcessor {
        acl: broker.acl.clone(),
        config: broker.live_config.clone(),
        broker_addr: broker.identity.broker_addr.clone(),
    });
    let admin = Arc::new(AdminProcessor { ctx: broker.admin_context(), pools: queued });
    let relay = Arc::new(RelayProcessor {
        config: broker.live_config.clone(),
        store: broker.store.clone(),
        topics: broker.topics.clone(),
        groups: broker.groups.clone(),
        offsets: broker.offsets.clone(),
        consumers: broker.consumers.clone(),
        runtime: broker.runtime.clone(),
    });
    let maintenance = Arc::new(MaintenanceProcessor { ctx: broker.admin_context() });
    let store_admin = Arc::new(crate::processor::store_admin::StoreAdminProcessor {
        config: broker.live_config.clone(),
        store: broker.store.clone(),
        membership: broker.membership.clone(),
        cold: Default::default(),
    });
    let end_transaction = Arc::new(EndTransactionProcessor { tx: Arc::new(broker.transactions()) });
    let reply = Arc::new(ReplyProcessor {
        send: broker.send_context(),
        producers: broker.producers.clone(),
        runtime: broker.runtime.clone(),
        pushes: Default::default(),
    });
    let timer = Arc::new(crate::processor::timer::TimerProcessor {
        config: broker.live_config.clone(),
        store: broker.store.clone(),
        topics: broker.topics.clone(),
        put: broker.put.clone(),
        timer: broker.timer.get().cloned(),
        store_host: broker.store_host,
    });
    let query_assignment = Arc::new(crate::processor::query_assignment::QueryAssignmentProcessor {
        config: broker.live_config.clone(),
        topics: broker.topics.clone(),
        groups: broker.groups.clone(),
        consumers: broker.consumers.clone(),
        modes: broker.request_modes.clone(),
        routes: broker.topic_routes.clone(),
        runtime: broker.runtime.clone(),
    });
    // Exhaustive: a new handler in the route table does not compile until it is built here.
    let handler = |h: Handler| -> Arc<dyn RequestProcessor> {
        match h {
            Handler::Send => send.clone(),
            Handler::Pull => pull.clone(),
            Handler::ClientManage => client.clone(),
            Handler::ConsumerManage => consumer.clone(),
            Handler::Lock => lock.clone(),
            Handler::Query => query.clone(),
            Handler::BrokerStats => stats.clone(),
            Handler::AclAdmin => acl_admin.clone(),
            Handler::Admin => admin.clone(),
            Handler::Relay => relay.clone(),
            Handler::Maintenance => maintenance.clone(),
            Handler::StoreAdmin => store_admin.clone(),
            Handler::EndTransaction => end_transaction.clone(),
            Handler::Reply => reply.clone(),
            Handler::Timer => timer.clone(),
            Handler::Pop => pop.clone(),
            Handler::QueryAssignment => query_assignment.clone(),
        }
    };

    let mut registry = ProcessorRegistry::new();
    for route in ROUTES {
        let processor = handler(route.handler);
        // With aclEnable every request is checked before its processor, as Java's RPC hook does.
        let processor: Arc<dyn RequestProcessor> = match &broker.acl {
            Some(acl) => Arc::new(crate::acl::Checked { inner: processor, acl: acl.clone(), access: route.access, store: broker.store.clone() }),
            None => processor,
        };
        registry.register(route.code, processor, &pool_of(route.pool));
    }
    if let Some(acl) = &broker.acl {
        // Java's default processor (the admin one) runs behind the validator too: a code no route
        // serves is answered REQUEST_CODE_NOT_SUPPORTED once its signature is right.
        let unknown = crate::acl::Checked { inner: Arc::new(crate::acl::NotServed), acl: acl.clone(), access: Access::Signed, store: broker.store.clone() };
        registry.set_default(Arc::new(unknown), &pool_of(Pool::Admin));
    }
    registry.set_connection_listener(Arc::new(OnClose(broker.client_context())));
    if let Some(observer) = broker.metrics.rpc_observer() {
        registry.set_rpc_observer(observer);
    }
    Ok((registry, hold, pop_service, watermarks, pools))
}

/// The long-polling service: the store's dispatcher wakes parked pulls, which run again on the
/// pull pool without the right to be parked again.
fn long_polling(
    broker: &Arc<Broker>,
    pull: &Arc<crate::consumption::PullService>,
    pop: &Arc<PopService>,
    pull_pool: &Arc<BusinessPool>,
) -> Arc<PullRequestHoldService> {
    // Weak: the service holds the lot, whose wake action runs the service.
    let (service, pool) = (Arc::downgrade(pull), pull_pool.clone());
    let wake = move |held: HeldPull| {
        let Some(service) = service.upgrade() else { return };
        let (channel, request, parked_at) = (held.channel, held.request, held.parked_at);
        // Exactly one of the two answers: the job's, or SYSTEM_BUSY when the pool refuses it.
        let answer = || Reply::to(&channel, &request).since(parked_at).after_long_polling();
        let (reply, busy) = (answer(), answer());
        let job = move || {
            if let Some(response) = service.pull(&channel, request, false) {
                reply.send(response);
            }
        };
        // Java submits a woken pull to the pull executor as a request task, which its fast
        // failure may clean out of the queue.
        let refuse = move |why: Refusal| {
            if why == Refusal::Full {
                warn!("pull pool full; a woken pull is answered SYSTEM_BUSY");
            }
            busy.error(ResponseCode::SYSTEM_BUSY, refusal_remark(why));
        };
        let _ = pool.try_execute_or_refuse(0, job, refuse);
    };
    let c = &broker.config();
    let budget = crate::parking::ParkingBudget::new(c.max_parked_pulls_per_connection, c.max_parked_pulls);
    let hold = Arc::new(PullRequestHoldService::new(Box::new(wake), budget));
    let _ = broker.hold.set(hold.clone());
    let _ = pull.parking.set(hold.clone());
    let pops = Arc::new(PopParking::new(Box::new(pop_wake(pop, pull_pool, PopService::pop_again)), hold.budget()));
    let _ = pop.parking.set(pops);
    let notifications = Arc::new(PopParking::new(Box::new(pop_wake(pop, pull_pool, PopService::notification)), hold.budget()));
    let _ = pop.notifications.set(notifications);
    let (arrivals, pop) = (hold.clone(), pop.clone());
    broker.store.set_arrival_listener(Arc::new(move |topic, queue_id, arrived| {
        arrivals.notify_arrivals(&crate::parking::QueueKey::new(topic, queue_id), arrived, Instant::now());
        pop.on_arrival(topic, queue_id);
    }));
    hold
}

/// A woken pop (or notification: `run`) runs again on the pull pool; one that still finds nothing
/// is parked again until its poll time (Java's re-run of the request), and answered as its time
/// is up after it (a pop POLLING_TIMEOUT, a notification `hasMsg=false`).
fn pop_wake(
    pop: &Arc<PopService>,
    pool: &Arc<BusinessPool>,
    run: fn(&PopService, &Channel, RemotingCommand) -> Option<RemotingCommand>,
) -> impl Fn(ParkedPop) + Send + Sync + 'static {
    let (service, pool) = (Arc::downgrade(pop), pool.clone());
    move |parked: ParkedPop| {
        let Some(service) = service.upgrade() else { return };
        let (channel, request, parked_at) = (parked.channel, parked.request, parked.parked_at);
        let answer = || Reply::to(&channel, &request).since(parked_at).after_long_polling();
        let (reply, busy) = (answer(), answer());
        let job = move || {
            if let Some(response) = run(&service, &channel, request) {
                reply.send(response);
            }
        };
        let _ = pool.try_execute_or_refuse(0, job, move |why| busy.error(ResponseCode::SYSTEM_BUSY, refusal_remark(why)));
    }
}

/// Pop's threads: parked pops answered at their poll time (Java checks every 20 ms), the revive
/// service (every `reviveInterval`, on a master), the orderly-pop state persisted, and the buffer
/// merge (last: stopped first, it writes what it holds while the timer and the persister run).
fn pop_services(broker: &Arc<Broker>, pop: Arc<PopService>) -> Result<Vec<Service>, StartError> {
    let lots: Vec<_> = pop.parking.get().into_iter().chain(pop.notifications.get()).cloned().collect();
    let check = Service::every("PopLongPollingService", Duration::from_millis(50), false, move || {
        for lot in &lots {
            lot.check(Instant::now(), |_, _| 0);
        }
    })?;
    let revive = crate::popping::revive::ReviveService::new(pop.clone(), broker.timer.get().cloned());
    let revive = Service::every("PopReviveService", Duration::from_millis(broker.config().revive_interval_ms.max(100)), false, move || revive.run_once())?;
    let order = pop.order.clone();
    let persist = Service::every("ConsumerOrderInfoPersist", Duration::from_secs(5), true, move || {
        if let Err(e) = order.persist() {
            tracing::error!(error = %e, "cannot persist consumerOrderInfo.json");
        }
    })?;
    let merge = Service::spawn("PopBufferMergeService", move |cx| crate::popping::merge::run(&pop, cx))?;
    Ok(vec![check, revive, persist, merge])
}

/// Java's fast port, `listenPort - 2`; none when the broker takes any free port (tests) or the
/// port would not exist.
fn fast_port(listen_port: u16) -> Option<u16> {
    listen_port.checked_sub(2).filter(|p| listen_port != 0 && *p > 0)
}

fn server_config(c: &BrokerConfig) -> Result<ServerConfig, StartError> {
    let bind: IpAddr = c.bind_address.parse().map_err(|_| StartError::BadAddress(c.bind_address.clone()))?;
    let defaults = ConnectionConfig::default();
    // Java's 0 for the water marks means "Netty's default"; ours then keeps its own.
    let or_default = |value: usize, default: usize| if value == 0 { default } else { value };
    Ok(ServerConfig {
        listen_addr: SocketAddr::new(bind, c.listen_port),
        connection: ConnectionConfig {
            idle_timeout: Duration::from_secs(c.server_channel_max_idle_time_seconds.max(1)),
            write_buffer_high_water_mark_bytes: or_default(c.write_buffer_high_water_mark, defaults.write_buffer_high_water_mark_bytes),
            write_buffer_low_water_mark_bytes: or_default(c.write_buffer_low_water_mark, defaults.write_buffer_low_water_mark_bytes),
            ..defaults
        },
        drain_timeout: Duration::from_secs(10),
        max_connections: c.server_max_connections.max(1),
    })
}

/// Java's `BrokerFastFailure` over the pools it cleans.
fn fast_failure(broker: &Arc<Broker>, pools: &HashMap<Pool, Arc<BusinessPool>>) -> Result<Service, StartError> {
    let queues = Pool::ALL.iter().filter_map(|kind| Some((pools.get(kind)?.clone(), crate::fast_failure::cleaned(*kind)?))).collect();
    let send = pools.get(&Pool::Send).cloned().ok_or_else(|| StartError::Io(std::io::Error::other("no send pool")))?;
    Ok(crate::fast_failure::FastFailure::new(broker.live_config.clone(), broker.store.clone(), send, queues).start()?)
}

/// The threads that run on their own: the long-polling check (Java: every 5 s, or every
/// `shortPollingTimeMills` without long polling), and on a master delayed delivery and the
/// transaction check (a slave runs neither: it writes nothing).
fn background_services(broker: &Arc<Broker>, hold: Arc<PullRequestHoldService>) -> Result<Vec<Service>, StartError> {
    let c = &broker.config();
    let check_every = if c.long_polling_enable { Duration::from_secs(5) } else { Duration::from_millis(c.short_polling_time_ms.max(1)) };
    let store = broker.store.clone();
    let hold_check = Service::every("PullRequestHoldService", check_every, false, move || {
        hold.check(Instant::now(), |t, q| store.max_offset_in_queue(t, q));
    })?;
    // A DLedger broker's role changes with its group's leader: both run and skip while it is a
    // slave (Java stops and starts them on each change).
    let role_changes = broker.store.is_dledger();
    if broker.is_slave() && !role_changes {
        return Ok(vec![hold_check]);
    }
    let levels = broker.store_config().delay_levels_ms().len();
    let schedule = ScheduleService { store: broker.store.clone(), offsets: broker.delay_offsets.clone(), levels, put: broker.put.clone() };
    let me = broker.clone();
    let schedule = Service::every("ScheduleMessageService", Duration::from_millis(100), false, move || {
        if !me.is_slave() {
            schedule.deliver_all_due();
        }
    })?;
    let checker = TransactionChecker::new(broker.transactions());
    let me = broker.clone();
    let transaction_check = Service::every("TransactionalMessageCheckService", checker.interval(), false, move || {
        if !me.is_slave() {
            checker.check_once(remoting::clock::now_ms());
        }
    })?;
    Ok(vec![hold_check, schedule, transaction_check])
}

/// Name-server registration (every `registerNameServerPeriod`, and when a processor asks), the
/// stats sampler, the expiry of silent clients, and on a slave the metadata copy.
fn async_tasks(broker: &Arc<Broker>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if broker.is_slave() || broker.store.is_dledger() {
        let me = broker.clone();
        tasks.push(tokio::spawn(async move {
            let start = tokio::time::Instant::now() + crate::slave_sync::FIRST_SYNC_AFTER;
            let mut ticker = tokio::time::interval_at(start, crate::slave_sync::TIMER_SYNC_EVERY);
            let mut last_all: Option<tokio::time::Instant> = None;
            // An unreachable master is asked again after a doubling wait (up to a minute), and
            // said once, not every round.
            let mut every = crate::slave_sync::SYNC_EVERY;
            loop {
                ticker.tick().await;
                if !me.is_slave() {
                    continue;
                }
                let master = me.master_addr.read().clone();
                if let Some(master) = master {
                    if last_all.is_none_or(|at| at.elapsed() >= every) {
                        let reachable = crate::slave_sync::sync_all(&me, &master).await;
                        last_all = Some(tokio::time::Instant::now());
                        match (reachable, every == crate::slave_sync::SYNC_EVERY) {
                            (false, true) => warn!(master, "the master is unreachable; metadata sync backs off until it answers"),
                            (true, false) => info!(master, "the master answers again; metadata sync resumed"),
                            _ => {}
                        }
                        every = if reachable { crate::slave_sync::SYNC_EVERY } else { (every * 2).min(Duration::from_secs(60)) };
                    }
                    if every == crate::slave_sync::SYNC_EVERY {
                        crate::slave_sync::sync_timer_checkpoint(&me, &master).await;
                    }
                }
            }
        }));
    }
    if let Some(acl) = broker.acl.clone() {
        // Java's AclFileWatchService: a changed file is loaded again.
        tasks.push(tokio::spawn(async move {
            let mut ticker = tokio::time::interval(crate::acl::WATCH_INTERVAL);
            loop {
                ticker.tick().await;
                let acl = acl.clone();
                let _ = tokio::task::spawn_blocking(move || acl.reload_if_changed()).await;
            }
        }));
    }
    let me = broker.clone();
    tasks.push(tokio::spawn(async move {
        // The first sample was taken before the server started.
        let period = Duration::from_millis(crate::stats_manager::TICK_MS);
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            ticker.tick().await;
            me.broker_stats.tick(remoting::clock::now_ms());
        }
    }));
    let me = broker.clone();
    let period = Duration::from_millis(broker.config().register_name_server_period_ms.clamp(10_000, 60_000));
    tasks.push(tokio::spawn(async move {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + Duration::from_secs(10), period);
        loop {
            let oneway = tokio::select! {
                _ = ticker.tick() => false,
                oneway = me.membership.registration().next() => oneway,
            };
            me.register(oneway).await;
        }
    }));
    let me = broker.clone();
    tasks.push(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        loop {
            ticker.tick().await;
            me.stats.sample(remoting::clock::now_ms());
        }
    }));
    let (me, clients) = (broker.clone(), broker.client_context());
    tasks.push(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(10));
        loop {
            ticker.tick().await;
            for group in me.consumers.scan_expired(Instant::now()) {
                notify_consumer_ids_changed(&clients, &group);
            }
            me.producers.scan_expired(Instant::now());
            me.locks.forget_expired(Instant::now());
        }
    }));
    tasks
}
