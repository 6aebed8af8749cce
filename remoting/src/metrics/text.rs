//! The text exposition as Java 5.3.3's exporter (OpenTelemetry's Prometheus HTTP server) writes
//! it, so a dashboard query that matches a literal line or label of a Java broker matches ours:
//!
//! - `target_info` and one `otel_scope_info` per scope first;
//! - per family `# TYPE` then `# HELP`, under the instrument's name (without the unit suffix and
//!   `_total` its samples carry), with Java's view descriptions for counters and gauges;
//! - labels `otel_scope_name` first, then the others by name;
//! - values as Java's `Double.toString` (`6.0`, `7.677376512E10`), bucket bounds likewise
//!   (`le="1024.0"`), each sample with the scrape's time in milliseconds;
//! - a histogram's `_count` and `_sum` before its buckets.

use std::collections::BTreeSet;
use std::fmt::Write;

use prometheus::proto::{LabelPair, Metric, MetricFamily, MetricType};

/// The label naming the instrumentation scope.
const SCOPE_LABEL: &str = "otel_scope_name";
/// The unit suffixes OpenTelemetry's exporter appends to a sample name.
const UNIT_SUFFIXES: [&str; 3] = ["_milliseconds", "_seconds", "_bytes"];

/// Java's `Double.toString`.
pub fn java_double(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let magnitude = v.abs();
    if v == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let plain = format!("{v}");
        return if plain.contains('.') { plain } else { format!("{plain}.0") };
    }
    let sci = format!("{v:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let mantissa = if mantissa.contains('.') { mantissa.to_owned() } else { format!("{mantissa}.0") };
    format!("{mantissa}E{exponent}")
}

/// The instrument's name: the sample name without `_total` (counters) and the unit suffix.
fn instrument_name(family: &MetricFamily) -> &str {
    let mut name = family.name();
    if family.get_field_type() == MetricType::COUNTER {
        name = name.strip_suffix("_total").unwrap_or(name);
    }
    UNIT_SUFFIXES.iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

fn help(family: &MetricFamily) -> &str {
    match family.get_field_type() {
        MetricType::COUNTER => "default view for counter.",
        MetricType::GAUGE => "default view for gauge.",
        _ => family.help(),
    }
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn labels(out: &mut String, pairs: &[LabelPair], le: Option<&str>) {
    let mut sorted: Vec<&LabelPair> = pairs.iter().collect();
    sorted.sort_by_key(|p| (p.name() != SCOPE_LABEL, p.name()));
    out.push('{');
    let mut first = true;
    for p in sorted {
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "{}=\"{}\"", p.name(), escape(p.value()));
    }
    if let Some(le) = le {
        if !first {
            out.push(',');
        }
        let _ = write!(out, "le=\"{le}\"");
    }
    out.push('}');
}

fn sample(out: &mut String, name: &str, metric: &Metric, le: Option<&str>, value: f64, now_ms: i64) {
    out.push_str(name);
    labels(out, metric.get_label(), le);
    let _ = writeln!(out, " {} {now_ms}", java_double(value));
}

/// Writes `families` as Java's exporter would at `now_ms`.
pub fn encode(families: &[MetricFamily], now_ms: i64) -> String {
    let mut out = String::new();
    out.push_str("# TYPE target info\n# HELP target Target metadata\ntarget_info{} 1\n");
    let scopes: BTreeSet<&str> =
        families.iter().flat_map(|f| f.get_metric()).flat_map(|m| m.get_label()).filter(|l| l.name() == SCOPE_LABEL).map(|l| l.value()).collect();
    if !scopes.is_empty() {
        out.push_str("# TYPE otel_scope_info info\n# HELP otel_scope_info Scope metadata\n");
        for scope in scopes {
            let _ = writeln!(out, "otel_scope_info{{{SCOPE_LABEL}=\"{}\"}} 1", escape(scope));
        }
    }
    for family in families {
        let kind = match family.get_field_type() {
            MetricType::COUNTER => "counter",
            MetricType::GAUGE => "gauge",
            MetricType::HISTOGRAM => "histogram",
            MetricType::SUMMARY => "summary",
            MetricType::UNTYPED => "untyped",
        };
        let base = instrument_name(family);
        let _ = writeln!(out, "# TYPE {base} {kind}\n# HELP {base} {}", help(family));
        let name = family.name();
        for m in family.get_metric() {
            match family.get_field_type() {
                MetricType::COUNTER => sample(&mut out, name, m, None, m.get_counter().get_value(), now_ms),
                MetricType::GAUGE => sample(&mut out, name, m, None, m.get_gauge().get_value(), now_ms),
                MetricType::HISTOGRAM => {
                    let h = m.get_histogram();
                    sample(&mut out, &format!("{name}_count"), m, None, h.get_sample_count() as f64, now_ms);
                    sample(&mut out, &format!("{name}_sum"), m, None, h.get_sample_sum(), now_ms);
                    for b in h.get_bucket() {
                        let le = java_double(b.upper_bound());
                        sample(&mut out, &format!("{name}_bucket"), m, Some(&le), b.cumulative_count() as f64, now_ms);
                    }
                    sample(&mut out, &format!("{name}_bucket"), m, Some("+Inf"), h.get_sample_count() as f64, now_ms);
                }
                // Neither is registered anywhere (Java's exporter writes neither kind).
                MetricType::SUMMARY | MetricType::UNTYPED => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge, Opts, Registry};

    use super::*;

    #[test]
    fn doubles_read_as_javas_double_to_string() {
        for (v, java) in [
            (6.0, "6.0"),
            (0.0, "0.0"),
            (2682.0, "2682.0"),
            (0.005, "0.005"),
            (1024.0, "1024.0"),
            (7.677376512e10, "7.677376512E10"),
            (1e7, "1.0E7"),
            (1.5e-4, "1.5E-4"),
            (-3.25, "-3.25"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(java_double(v), java, "{v}");
        }
    }

    #[test]
    fn families_are_written_as_javas_exporter_writes_them() {
        let r = Registry::new();
        let scope = |o: Opts| o.const_label("otel_scope_name", "broker-meter").const_label("cluster", "C");
        let g = IntGauge::with_opts(scope(Opts::new("rocketmq_storage_size_bytes", "Broker storage size"))).unwrap();
        g.set(6);
        r.register(Box::new(g)).unwrap();
        let c = IntCounter::with_opts(scope(Opts::new("rocketmq_messages_in_total", "Total number of incoming messages"))).unwrap();
        c.inc();
        r.register(Box::new(c)).unwrap();
        let h = Histogram::with_opts(
            HistogramOpts::new("rocketmq_rpc_latency_milliseconds", "Rpc latency").const_label("otel_scope_name", "broker-meter").buckets(vec![1.0, 1024.0]),
        )
        .unwrap();
        h.observe(3.0);
        r.register(Box::new(h)).unwrap();
        let text = encode(&r.gather(), 42);
        for line in [
            "target_info{} 1",
            "otel_scope_info{otel_scope_name=\"broker-meter\"} 1",
            "# TYPE rocketmq_storage_size gauge\n# HELP rocketmq_storage_size default view for gauge.",
            "rocketmq_storage_size_bytes{otel_scope_name=\"broker-meter\",cluster=\"C\"} 6.0 42",
            "# TYPE rocketmq_messages_in counter\n# HELP rocketmq_messages_in default view for counter.",
            "rocketmq_messages_in_total{otel_scope_name=\"broker-meter\",cluster=\"C\"} 1.0 42",
            "# TYPE rocketmq_rpc_latency histogram\n# HELP rocketmq_rpc_latency Rpc latency",
            "rocketmq_rpc_latency_milliseconds_count{otel_scope_name=\"broker-meter\"} 1.0 42\nrocketmq_rpc_latency_milliseconds_sum{otel_scope_name=\"broker-meter\"} 3.0 42\nrocketmq_rpc_latency_milliseconds_bucket{otel_scope_name=\"broker-meter\",le=\"1.0\"} 0.0 42\nrocketmq_rpc_latency_milliseconds_bucket{otel_scope_name=\"broker-meter\",le=\"1024.0\"} 1.0 42\nrocketmq_rpc_latency_milliseconds_bucket{otel_scope_name=\"broker-meter\",le=\"+Inf\"} 1.0 42",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
