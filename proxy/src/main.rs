//! `mqproxy`: the gRPC front in cluster mode, started like Java's `ProxyStartup`
//! (`mqproxy [-n NAMESRV] [-pc rmq-proxy.json] [-pm CLUSTER]`), serving
//! `apache.rocketmq.v2.MessagingService` in front of the brokers a name server knows, and the
//! proxy's remoting port (`remotingListenPort`, remoting and gRPC clients on one port).
//! Local mode runs inside the broker (`mqbroker --enable-proxy`), not here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use proxy::cluster::{ClusterBackend, ClusterSettings};
use proxy::cluster_port::{ClusterPort, PortSettings};
use proxy::config::ProxyConfig;
use proxy::server::GrpcServer;
use proxy::service::Messaging;

/// jemalloc, for the reasons in the workspace Cargo.toml.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "mqproxy", about = "RocketMQ 5 gRPC proxy (cluster mode)", disable_help_flag = true)]
struct Args {
    /// Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'
    #[arg(short = 'n', long = "namesrvAddr", value_name = "ADDRS")]
    namesrv_addr: Option<String>,
    /// -pc: proxy config file path (rmq-proxy.json)
    #[arg(long = "proxyConfigPath", value_name = "FILE")]
    proxy_config: Option<PathBuf>,
    /// -pm: proxy run in local or cluster mode (only cluster here)
    #[arg(long = "proxyMode", value_name = "MODE")]
    proxy_mode: Option<String>,
    /// -bc: broker config file path for local mode (refused: local mode is mqbroker --enable-proxy)
    #[arg(long = "brokerConfigPath", value_name = "FILE")]
    broker_config: Option<PathBuf>,
    /// Print help
    #[arg(short = 'h', long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
}

/// Java's reading order: `-pc`, else `conf/rmq-proxy.json` under `$RMQ_PROXY_HOME` (else
/// `$ROCKETMQ_HOME`, else `.`) if there is one, else the defaults; then `-n` and `-pm` over the
/// file's keys.
fn load_config(args: &Args) -> Result<ProxyConfig, String> {
    let home = ["RMQ_PROXY_HOME", "ROCKETMQ_HOME"].iter().filter_map(std::env::var_os).find(|h| !h.is_empty()).unwrap_or_else(|| ".".into());
    let home_file = Some(PathBuf::from(home).join("conf").join("rmq-proxy.json")).filter(|p| p.is_file());
    let mut config = match args.proxy_config.clone().or(home_file) {
        Some(path) => ProxyConfig::load(&path).map_err(|e| e.to_string())?,
        None => ProxyConfig::default(),
    };
    if config.namesrv_addr.is_empty() {
        config.namesrv_addr = std::env::var("NAMESRV_ADDR").unwrap_or_default();
    }
    if let Some(n) = args.namesrv_addr.as_ref().filter(|n| !n.trim().is_empty()) {
        config.namesrv_addr = n.trim().to_owned();
    }
    if let Some(m) = args.proxy_mode.as_ref().filter(|m| !m.trim().is_empty()) {
        config.proxy_mode = m.trim().to_owned();
    }
    if args.broker_config.is_some() || !config.proxy_mode.eq_ignore_ascii_case("CLUSTER") {
        return Err(format!("proxyMode {} is not served by mqproxy: local mode runs inside the broker (mqbroker --enable-proxy -pc FILE)", config.proxy_mode));
    }
    if config.namesrv_addr.trim().is_empty() {
        return Err("no name server address: give -n or namesrvAddr in rmq-proxy.json".to_owned());
    }
    Ok(config)
}

fn main() -> ExitCode {
    remoting::process::init_logging();
    // Java's options are `-pc`, `-pm`, `-bc` (commons-cli takes multi-letter short options; clap does not).
    let args = Args::parse_from(std::env::args().map(|a| match a.as_str() {
        "-pc" => "--proxyConfigPath".to_owned(),
        "-pm" => "--proxyMode".to_owned(),
        "-bc" => "--brokerConfigPath".to_owned(),
        _ => a,
    }));
    let config = match load_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let metrics_config = config.clone();
    runtime.block_on(async move {
        let backend = Arc::new(ClusterBackend::new(ClusterSettings::from_config(&config)));
        if let Err(e) = backend.refresh_brokers().await {
            // Not fatal: the name server may come up later; lookups retry.
            tracing::warn!(error = %e, namesrv = %config.namesrv_addr, "cannot read the cluster's brokers yet");
        }
        let addr = SocketAddr::from(([0, 0, 0, 0], config.grpc_server_port));
        let remoting_addr = SocketAddr::from(([0, 0, 0, 0], config.remoting_listen_port));
        let remoting = match tokio::net::TcpListener::bind(remoting_addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("cannot serve the remoting port {remoting_addr}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let port = ClusterPort::new(
            backend.clone(),
            PortSettings {
                access_host: config.remoting_access_addr.trim().to_owned(),
                port: remoting.local_addr().map_or(config.remoting_listen_port, |a| a.port()),
                check_message_types: config.enable_topic_message_type_check,
            },
        );
        let server = match GrpcServer::start(addr, Messaging::new(config, backend)).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("cannot serve gRPC on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let exporter = match start_metrics(&metrics_config).await {
            Ok(e) => e,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        let remoting_port = remoting.local_addr().map(|a| a.to_string()).unwrap_or_default();
        server.serve_remoting_port(remoting, port.handoff());
        println!("rocketmq-proxy startup successfully, gRPC on {}, remoting on {remoting_port}", server.local_addr());
        remoting::process::wait_for_stop_signal().await;
        server.shutdown().await;
        if let Some(e) = exporter {
            e.shutdown().await;
        }
        ExitCode::SUCCESS
    })
}

/// `rocketmq_proxy_up` on `metricsPromExporterHost:metricsPromExporterPort` (all addresses when the
/// host is empty, as Java's exporter) when `metricsExporterType` is PROM.
async fn start_metrics(c: &ProxyConfig) -> Result<Option<remoting::metrics::exporter::PromExporter>, String> {
    if !proxy::metrics::enabled(c) {
        return Ok(None);
    }
    if !c.metrics_exporter_type.eq_ignore_ascii_case("PROM") {
        tracing::warn!(exporter = %c.metrics_exporter_type, "only metricsExporterType=PROM is supported; metrics are not exported");
        return Ok(None);
    }
    let host = if c.metrics_prom_exporter_host.trim().is_empty() { "0.0.0.0" } else { c.metrics_prom_exporter_host.trim() };
    let ip: std::net::IpAddr = host.parse().map_err(|_| format!("metricsPromExporterHost {host} is not an IP address"))?;
    let registry = proxy::metrics::cluster_registry(c).map_err(|e| format!("metrics not made: {e}"))?;
    let addr = SocketAddr::new(ip, c.metrics_prom_exporter_port);
    remoting::metrics::exporter::PromExporter::start(addr, registry, std::sync::Arc::new(|| {}))
        .await
        .map(Some)
        .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))
}
