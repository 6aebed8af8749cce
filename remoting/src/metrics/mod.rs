//! Prometheus metrics as Java 5.3.3 exports them (`metricsExporterType=PROM`): the keys that turn
//! them on, the labels every series carries, the request-latency family every server records
//! ([`rpc`]), families with a bound on their series ([`family`]) and the HTTP endpoint that serves
//! the text exposition ([`exporter`]).
//!
//! Java exports through OpenTelemetry's Prometheus exporter, which names a sample after its
//! instrument plus the unit (`rocketmq_rpc_latency` in milliseconds is scraped as
//! `rocketmq_rpc_latency_milliseconds_bucket`) and adds `otel_scope_name`. Ours are registered
//! under those scraped names, so a dashboard built on a Java broker reads ours unchanged.

pub mod exporter;
pub mod family;
pub mod rpc;
pub mod text;

use std::collections::HashMap;

use crate::config::ConfigValue;

/// `metricsExporterType`, Java's `MetricsExporterType` (by name or by number, as Java reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MetricsExporterType {
    #[default]
    Disable,
    OtlpGrpc,
    Prom,
    Log,
}

impl ConfigValue for MetricsExporterType {
    const EXPECTED: &'static str = "metrics exporter type (DISABLE, OTLP_GRPC, PROM or LOG)";

    fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "DISABLE" => Some(Self::Disable),
            "OTLP_GRPC" => Some(Self::OtlpGrpc),
            "PROM" => Some(Self::Prom),
            "LOG" => Some(Self::Log),
            // Java's valueOf(int): anything else is DISABLE.
            number => number.parse::<i64>().ok().map(|n| match n {
                1 => Self::OtlpGrpc,
                2 => Self::Prom,
                3 => Self::Log,
                _ => Self::Disable,
            }),
        }
    }

    fn to_text(&self) -> String {
        match self {
            Self::Disable => "DISABLE",
            Self::OtlpGrpc => "OTLP_GRPC",
            Self::Prom => "PROM",
            Self::Log => "LOG",
        }
        .to_owned()
    }
}

/// The meter of a 5.x broker's families (Java's `OPEN_TELEMETRY_METER_NAME`), which its proxy's
/// `rocketmq_proxy_up` uses too, in both modes.
pub const BROKER_METER: &str = "broker-meter";

/// The label OpenTelemetry's exporter adds to every series: the meter's name.
pub const LABEL_OTEL_SCOPE: &str = "otel_scope_name";

/// The labels every series of one process carries, as Java's `newAttributesBuilder()` starts
/// them: `metricsLabel`'s pairs, `aggregation=delta` with `metricsInDelta`, then `node_type`,
/// `cluster` and `node_id`, plus the meter's scope name.
pub fn constant_labels(meter: &str, metrics_label: &str, in_delta: bool, node_type: &str, cluster: &str, node_id: &str) -> HashMap<String, String> {
    let mut labels = HashMap::new();
    for pair in metrics_label.split(',').filter(|p| !p.is_empty()) {
        // Java skips a pair that is not exactly key:value (and logs it).
        let parts: Vec<&str> = pair.split(':').collect();
        match parts.as_slice() {
            [key, value] if valid_label_name(key) => {
                labels.insert((*key).to_owned(), (*value).to_owned());
            }
            _ => tracing::warn!(metrics_label, pair, "metricsLabel pair is not key:value with a Prometheus label name; skipped"),
        }
    }
    if in_delta {
        labels.insert("aggregation".to_owned(), "delta".to_owned());
    }
    labels.insert("node_type".to_owned(), node_type.to_owned());
    // A name server belongs to no cluster.
    if !cluster.is_empty() {
        labels.insert("cluster".to_owned(), cluster.to_owned());
    }
    labels.insert("node_id".to_owned(), node_id.to_owned());
    labels.insert(LABEL_OTEL_SCOPE.to_owned(), meter.to_owned());
    labels
}

/// Prometheus' label-name rule (`[a-zA-Z_][a-zA-Z0-9_]*`); a name outside it would make every
/// scrape fail, so such a pair is dropped where it enters.
fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exporter_type_reads_names_and_numbers_as_java() {
        assert_eq!(MetricsExporterType::parse("PROM"), Some(MetricsExporterType::Prom));
        assert_eq!(MetricsExporterType::parse("2"), Some(MetricsExporterType::Prom));
        assert_eq!(MetricsExporterType::parse("7"), Some(MetricsExporterType::Disable));
        assert_eq!(MetricsExporterType::parse("prom"), None);
        assert_eq!(MetricsExporterType::Prom.to_text(), "PROM");
    }

    #[test]
    fn constant_labels_take_metrics_label_pairs_and_skip_bad_ones() {
        let labels = constant_labels("broker-meter", "instance_id:i1,bad,1x:y,uid:u:v", true, "broker", "C", "b1");
        assert_eq!(labels.get("instance_id").map(String::as_str), Some("i1"));
        assert_eq!(labels.get("aggregation").map(String::as_str), Some("delta"));
        assert_eq!(labels.get("node_id").map(String::as_str), Some("b1"));
        assert_eq!(labels.len(), 6, "{labels:?}");
    }
}
