//! `rmq-proxy.json` (Java's `ProxyConfig`): the keys this front reads, with Java 5.3.3's
//! defaults. Other keys of Java's file are accepted and ignored, so a Java file loads as is.

use std::path::Path;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyConfig {
    #[serde(rename = "rocketMQClusterName")]
    pub rocket_mq_cluster_name: String,
    /// The proxy's own cluster and name, as its metrics label it.
    pub proxy_cluster_name: String,
    pub proxy_name: String,
    /// DISABLE (Java's default), PROM (served on metricsPromExporterHost:Port), OTLP_GRPC, LOG.
    pub metrics_exporter_type: String,
    pub metrics_prom_exporter_host: String,
    pub metrics_prom_exporter_port: u16,
    pub metrics_label: String,
    pub metrics_in_delta: bool,
    /// `LOCAL` (inside the broker) or `CLUSTER`.
    pub proxy_mode: String,
    pub grpc_server_port: u16,
    pub remoting_listen_port: u16,
    /// The host the remoting port's routes name (Java's default: this machine's address; ours,
    /// empty: the address each client reached the proxy at).
    pub remoting_access_addr: String,
    pub namesrv_addr: String,
    /// Bytes of one gRPC request (Java's `grpcMaxInboundMessageSize`).
    pub grpc_max_inbound_message_size: usize,
    pub max_message_size: usize,
    pub enable_message_body_empty_check: bool,
    pub max_user_property_size: usize,
    pub user_property_max_num: usize,
    pub max_message_group_size: usize,
    pub default_invisible_time_mills: i64,
    pub min_invisible_time_mills_for_recv: i64,
    pub max_invisible_time_mills: i64,
    pub max_delay_time_mills: i64,
    pub max_transaction_recovery_second: i64,
    pub enable_topic_message_type_check: bool,
    pub grpc_client_producer_max_attempts: i32,
    pub grpc_client_producer_backoff_initial_millis: i64,
    pub grpc_client_producer_backoff_max_millis: i64,
    pub grpc_client_producer_backoff_multiplier: i32,
    pub grpc_client_consumer_min_long_polling_timeout_millis: i64,
    pub grpc_client_consumer_max_long_polling_timeout_millis: i64,
    pub grpc_client_consumer_long_polling_batch_size: i32,
    pub long_polling_reserve_time_in_millis: i64,
    /// A self-signed certificate when none is configured (Java's default).
    pub tls_test_mode_enable: bool,
    pub tls_key_path: String,
    pub tls_cert_path: String,
    /// Receives waiting at once per client and in all (ours; Java bounds them by its thread pools).
    pub max_receives_per_client: usize,
    pub max_receives: usize,
    /// Cluster mode: the route, topic config and group caches' reload and expiry.
    pub topic_route_service_cache_expired_seconds: u64,
    pub topic_route_service_cache_refresh_seconds: u64,
    pub topic_route_service_cache_max_num: usize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            rocket_mq_cluster_name: "DefaultCluster".to_owned(),
            proxy_cluster_name: "DefaultCluster".to_owned(),
            proxy_name: local_host_name(),
            metrics_exporter_type: "DISABLE".to_owned(),
            metrics_prom_exporter_host: String::new(),
            metrics_prom_exporter_port: 5557,
            metrics_label: String::new(),
            metrics_in_delta: false,
            proxy_mode: "CLUSTER".to_owned(),
            grpc_server_port: 8081,
            remoting_listen_port: 8080,
            remoting_access_addr: String::new(),
            namesrv_addr: String::new(),
            grpc_max_inbound_message_size: 130 * 1024 * 1024,
            max_message_size: 4 * 1024 * 1024,
            enable_message_body_empty_check: true,
            max_user_property_size: 16 * 1024,
            user_property_max_num: 128,
            max_message_group_size: 64,
            default_invisible_time_mills: 60_000,
            min_invisible_time_mills_for_recv: 10_000,
            max_invisible_time_mills: 12 * 3600 * 1000,
            max_delay_time_mills: 24 * 3600 * 1000,
            max_transaction_recovery_second: 3600,
            enable_topic_message_type_check: true,
            grpc_client_producer_max_attempts: 3,
            grpc_client_producer_backoff_initial_millis: 10,
            grpc_client_producer_backoff_max_millis: 1000,
            grpc_client_producer_backoff_multiplier: 2,
            grpc_client_consumer_min_long_polling_timeout_millis: 5_000,
            grpc_client_consumer_max_long_polling_timeout_millis: 20_000,
            grpc_client_consumer_long_polling_batch_size: 32,
            long_polling_reserve_time_in_millis: 100,
            tls_test_mode_enable: true,
            tls_key_path: "conf/tls/rocketmq.key".to_owned(),
            tls_cert_path: "conf/tls/rocketmq.crt".to_owned(),
            max_receives_per_client: 64,
            max_receives: 10_000,
            topic_route_service_cache_expired_seconds: 300,
            topic_route_service_cache_refresh_seconds: 20,
            topic_route_service_cache_max_num: 20_000,
        }
    }
}

/// Java's `proxyName` default: the host's name, `DEFAULT_PROXY` without one.
fn local_host_name() -> String {
    nix::unistd::gethostname().ok().and_then(|n| n.into_string().ok()).filter(|n| !n.is_empty()).unwrap_or_else(|| "DEFAULT_PROXY".to_owned())
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not a proxy config: {source}")]
    Parse { path: String, source: serde_json::Error },
}

impl ProxyConfig {
    /// Reads `rmq-proxy.json` (`-pc FILE`).
    pub fn load(path: &Path) -> Result<ProxyConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
        serde_json::from_str(&text).map_err(|source| ConfigError::Parse { path: shown, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_java_file_loads_with_unknown_keys_and_defaults_for_the_rest() {
        let c: ProxyConfig =
            serde_json::from_str(r#"{"rocketMQClusterName":"C1","grpcServerPort":18081,"enableAclRpcHookForClusterMode":true}"#).expect("loads");
        assert_eq!(c.rocket_mq_cluster_name, "C1");
        assert_eq!(c.grpc_server_port, 18081);
        assert_eq!(c.remoting_listen_port, 8080);
        assert_eq!(c.min_invisible_time_mills_for_recv, 10_000);
    }
}
