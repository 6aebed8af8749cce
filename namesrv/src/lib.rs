//! The RocketMQ name server: brokers register their topics here, clients and mqadmin ask for
//! routes. Layers: [`config`] (Java keys and defaults), [`route_info`] (the routing tables),
//! [`kv_config`] (namespaced key/value config, persisted), [`processor`] (the request codes),
//! and [`NamesrvController`], which wires them to a remoting server.

pub mod config;
mod file;
pub mod kv_config;
pub mod processor;
pub mod route_info;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use remoting::connection::ConnectionConfig;
use remoting::pool::BusinessPool;
use remoting::server::{Channel, ConnectionListener, ProcessorRegistry, RemotingServer, ServerConfig};
use remoting::RequestCode;
use tokio::task::JoinHandle;

use crate::config::NamesrvConfig;
use crate::kv_config::KvConfigManager;
use crate::processor::NamesrvProcessor;
use crate::route_info::RouteInfoManager;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("bindAddress {0:?} is not an IP address")]
    BadBindAddress(String),
    #[error(transparent)]
    KvConfig(#[from] kv_config::KvConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("cannot start the business pools: {0}")]
    Pool(std::io::Error),
    #[error("metricsExporterType=PROM: cannot serve metrics: {0}")]
    Metrics(std::io::Error),
}

struct RemoveBrokerOnClose(Arc<RouteInfoManager>);

impl ConnectionListener for RemoveBrokerOnClose {
    fn on_close(&self, channel: &Channel) {
        self.0.on_channel_closed(channel);
    }
}

/// A running name server.
pub struct NamesrvController {
    server: RemotingServer,
    metrics: Option<remoting::metrics::exporter::PromExporter>,
    scanner: JoinHandle<()>,
    pub routes: Arc<RouteInfoManager>,
}

impl NamesrvController {
    /// Loads the KV config, binds the port and starts serving. Call inside a tokio runtime.
    pub async fn start(config: NamesrvConfig) -> Result<NamesrvController, StartError> {
        let ip: IpAddr = config.bind_address.parse().map_err(|_| StartError::BadBindAddress(config.bind_address.clone()))?;
        let listen_addr = SocketAddr::new(ip, config.listen_port);
        let kv = Arc::new(KvConfigManager::load(config.kv_config_path.clone().into())?);
        let routes = Arc::new(RouteInfoManager::new(config.delete_topic_with_broker_registration));

        // As Java: route queries get their own pool so registrations cannot starve them.
        let default_pool = Arc::new(
            BusinessPool::new("NamesrvDefault", config.default_thread_pool_nums, config.default_thread_pool_queue_capacity).map_err(StartError::Pool)?,
        );
        // A route query reads the route table in memory and never waits: its pool is drained on
        // the runtime's threads, which read the requests, without a hand-off to a thread and back.
        let client_pool = Arc::new(BusinessPool::on_runtime(
            "NamesrvClientRequest",
            config.client_request_thread_pool_nums,
            config.client_request_thread_pool_queue_capacity,
            &tokio::runtime::Handle::current(),
        ));
        let scan_interval = Duration::from_millis(config.scan_not_active_broker_interval_ms.max(100));
        let server_config = ServerConfig {
            listen_addr,
            connection: ConnectionConfig {
                max_frame_bytes: config.max_frame_bytes,
                idle_timeout: Duration::from_secs(config.server_channel_max_idle_time_seconds.max(1)),
                ..ConnectionConfig::default()
            },
            drain_timeout: Duration::from_secs(10),
            max_connections: remoting::server::DEFAULT_MAX_CONNECTIONS,
        };
        let metrics = metrics(&config, listen_addr).await?;
        let processor = Arc::new(NamesrvProcessor { config: Arc::new(RwLock::new(config)), routes: routes.clone(), kv, started: Instant::now() });
        let mut registry = ProcessorRegistry::new();
        registry.set_default(processor.clone(), &default_pool);
        registry.register(RequestCode::GET_ROUTEINFO_BY_TOPIC, processor, &client_pool);
        registry.set_connection_listener(Arc::new(RemoveBrokerOnClose(routes.clone())));
        let exporter = match metrics {
            Some((rpc, exporter)) => {
                registry.set_rpc_observer(rpc);
                Some(exporter)
            }
            None => None,
        };

        let server = RemotingServer::start(server_config, registry).await.map_err(|source| StartError::Listen { addr: listen_addr, source })?;
        let scanner = tokio::spawn(scan_loop(routes.clone(), scan_interval));
        Ok(NamesrvController { server, metrics: exporter, scanner, routes })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub async fn shutdown(self) {
        self.scanner.abort();
        if let Some(metrics) = self.metrics {
            metrics.shutdown().await;
        }
        self.server.shutdown().await;
    }
}

/// With `metricsExporterType=PROM`: request latency, and the endpoint that serves it
/// (`metricsPromExporterHost`, else `bindAddress`).
async fn metrics(
    config: &NamesrvConfig,
    listen_addr: SocketAddr,
) -> Result<Option<(remoting::metrics::rpc::SharedRpcObserver, remoting::metrics::exporter::PromExporter)>, StartError> {
    use remoting::metrics::MetricsExporterType;
    match config.metrics_exporter_type {
        MetricsExporterType::Prom => {}
        MetricsExporterType::Disable => return Ok(None),
        other => {
            tracing::warn!(exporter = ?other, "only metricsExporterType=PROM is supported; metrics are not exported");
            return Ok(None);
        }
    }
    let bad = |e: String| StartError::Metrics(std::io::Error::new(std::io::ErrorKind::InvalidInput, e));
    let host = if config.metrics_prom_exporter_host.trim().is_empty() { config.bind_address.trim() } else { config.metrics_prom_exporter_host.trim() };
    let ip: IpAddr = host.parse().map_err(|_| bad(format!("metricsPromExporterHost {host} is not an IP address")))?;
    let labels = remoting::metrics::constant_labels("namesrv-meter", &config.metrics_label, false, "namesrv", "", &listen_addr.to_string());
    let registry = prometheus::Registry::new_custom(None, Some(labels)).map_err(|e| bad(e.to_string()))?;
    let rpc = Arc::new(remoting::metrics::rpc::RpcLatency::new(&registry, config.metrics_otel_cardinality_limit.max(1)));
    let exporter = remoting::metrics::exporter::PromExporter::start(SocketAddr::new(ip, config.metrics_prom_exporter_port), registry, Arc::new(|| {}))
        .await
        .map_err(StartError::Metrics)?;
    Ok(Some((rpc, exporter)))
}

async fn scan_loop(routes: Arc<RouteInfoManager>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        routes.scan_not_active_brokers(Instant::now());
    }
}
