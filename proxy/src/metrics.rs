//! The proxy's Prometheus family, as Java 5.3.3's `ProxyMetricsManager` has it: `rocketmq_proxy_up`,
//! 1 while the proxy runs, exported only when `metricsExporterType` is not DISABLE (Java's default).
//! In local mode it is one more family of the broker's exposition; `mqproxy` serves it itself.

use std::collections::HashMap;

use prometheus::{IntGauge, Opts, Registry};

use crate::config::ProxyConfig;

pub const PROXY_UP: &str = "rocketmq_proxy_up";

/// Whether the proxy exports its family (Java: any type but DISABLE; `mqproxy` serves PROM).
pub fn enabled(c: &ProxyConfig) -> bool {
    !c.metrics_exporter_type.eq_ignore_ascii_case("DISABLE")
}

/// `rocketmq_proxy_up`: `labels` are the meter's (in local mode the broker's constant labels),
/// over which Java puts the proxy's `node_type`, `cluster` (proxyClusterName), `node_id`
/// (proxyName) and `proxy_mode`.
pub fn proxy_up(mut labels: HashMap<String, String>, c: &ProxyConfig, mode: &str) -> Result<IntGauge, prometheus::Error> {
    labels.insert("node_type".to_owned(), "proxy".to_owned());
    labels.insert("cluster".to_owned(), c.proxy_cluster_name.clone());
    labels.insert("node_id".to_owned(), c.proxy_name.clone());
    labels.insert("proxy_mode".to_owned(), mode.to_ascii_lowercase());
    let up = IntGauge::with_opts(Opts::new(PROXY_UP, "proxy status").const_labels(labels))?;
    up.set(1);
    Ok(up)
}

/// `mqproxy`'s registry (cluster mode): `rocketmq_proxy_up` with its own labels.
pub fn cluster_registry(c: &ProxyConfig) -> Result<Registry, prometheus::Error> {
    let registry = Registry::new();
    registry.register(Box::new(proxy_up(cluster_labels(c), c, "cluster")?))?;
    Ok(registry)
}

/// `mqproxy`'s own labels (cluster mode): its `metricsLabel` pairs and `aggregation` with
/// `metricsInDelta`, then the proxy's.
fn cluster_labels(c: &ProxyConfig) -> HashMap<String, String> {
    remoting::metrics::constant_labels(remoting::metrics::BROKER_METER, &c.metrics_label, c.metrics_in_delta, "proxy", &c.proxy_cluster_name, &c.proxy_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mqproxy_reports_itself_up_with_its_own_labels() {
        let c = ProxyConfig {
            metrics_exporter_type: "PROM".to_owned(),
            proxy_cluster_name: "PC".to_owned(),
            proxy_name: "p1".to_owned(),
            metrics_label: "region:r1".to_owned(),
            metrics_in_delta: true,
            ..Default::default()
        };
        assert!(enabled(&c) && !enabled(&ProxyConfig::default()), "Java's default is DISABLE");
        let families = cluster_registry(&c).unwrap().gather();
        assert_eq!(families.len(), 1);
        assert_eq!(families[0].name(), PROXY_UP);
        let metric = &families[0].get_metric()[0];
        let labels: HashMap<&str, &str> = metric.get_label().iter().map(|l| (l.name(), l.value())).collect();
        let want: HashMap<&str, &str> = [
            ("node_type", "proxy"),
            ("cluster", "PC"),
            ("node_id", "p1"),
            ("proxy_mode", "cluster"),
            ("region", "r1"),
            ("aggregation", "delta"),
            ("otel_scope_name", "broker-meter"),
        ]
        .into();
        assert_eq!(labels, want);
        assert_eq!(metric.get_gauge().get_value(), 1.0);
    }
}
