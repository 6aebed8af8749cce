//! The broker's Prometheus metrics, Java 5.3.3's `BrokerMetricsManager` families under the names
//! and labels its OpenTelemetry exporter gives them (see [`remoting::metrics`]).
//!
//! Counters and histograms are recorded where Java records them (sends, pulls, DLQ, transaction
//! ends, creates; request latency by the server itself); gauges are computed at each scrape in
//! [`gauges`]. With `metricsExporterType` other than PROM nothing is registered and every
//! recording is a no-op, as Java's `Nop` instruments.

pub mod gauges;
pub mod pop;
mod timer;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus::Registry;
use remoting::metrics::exporter::PromExporter;
use remoting::metrics::family::{Counters, Histograms};
use remoting::metrics::rpc::{RpcLatency, SharedRpcObserver};
use remoting::metrics::MetricsExporterType;
use remoting::pool::BusinessPool;
use store::message::properties;

use crate::config::BrokerConfig;
use crate::subscription_group::system_group;
use crate::topic_config::system_topic;

/// Java's `BrokerMetricsConstant.OPEN_TELEMETRY_METER_NAME`.
const METER: &str = remoting::metrics::BROKER_METER;

/// Java's buckets (`registerMetricsView`).
const MESSAGE_SIZE_BUCKETS: [f64; 6] = [1024.0, 4096.0, 524_288.0, 1_048_576.0, 2_097_152.0, 4_194_304.0];
/// In seconds, though the instrument says "ms" (Java records seconds into it).
const FINISH_LATENCY_BUCKETS: [f64; 6] = [5.0, 60.0, 600.0, 3600.0, 43_200.0, 86_400.0];
const CREATE_TIME_BUCKETS_MS: [f64; 5] = [10.0, 100.0, 1000.0, 3000.0, 5000.0];

/// Every family; present only when metrics are on.
struct Families {
    registry: Registry,
    /// The proxy's family in local mode (its constant labels are its own, not the registry's).
    proxy: Registry,
    /// The constant labels of `registry`, under which the proxy's family puts its own.
    labels: std::collections::HashMap<String, String>,
    rpc: Arc<RpcLatency>,
    messages_in: Counters,
    throughput_in: Counters,
    message_size: Histograms,
    messages_out: Counters,
    throughput_out: Counters,
    send_to_dlq: Counters,
    commit: Counters,
    rollback: Counters,
    finish_latency: Histograms,
    topic_create: Histograms,
    group_create: Histograms,
    gauges: gauges::Gauges,
    /// The 5.x timer's families.
    timer: Arc<timer::TimerFamilies>,
    /// Pop's families.
    pop: pop::PopFamilies,
    /// Half messages waiting for their end, by real topic (Java's `TransactionMetrics`).
    half: Mutex<HashMap<String, i64>>,
    /// What each group pulled, by group and topic: at most `limit` pairs in all.
    pulls: Mutex<Pulls>,
    limit: usize,
}

/// Pulls by group and topic.
#[derive(Default)]
struct Pulls {
    by_group: HashMap<String, HashMap<String, Pulled>>,
    /// (group, topic) pairs in `by_group`.
    pairs: usize,
}

/// One group's pulls of one topic.
struct Pulled {
    /// The last pull: a group with no heartbeat (a pull consumer) counts as subscribed to the
    /// topic for [`PULLED_TOPIC_EXPIRY`] after it, as Java 5.x's consumer compensation table
    /// keeps it, and its lag is reported too.
    at: std::time::Instant,
    /// The next offset it pulls from, by queue (Java's pull offset table), for the in-flight and
    /// ready gauges.
    next_offsets: HashMap<i32, i64>,
}

/// How long a pulled topic counts as subscribed without another pull (Java's
/// `subscriptionExpiredTimeout`, 10 minutes).
const PULLED_TOPIC_EXPIRY: std::time::Duration = std::time::Duration::from_secs(600);

/// The broker's metrics: recorders that do nothing unless `metricsExporterType=PROM`.
#[derive(Default)]
pub struct BrokerMetrics {
    families: Option<Arc<Families>>,
}

impl BrokerMetrics {
    pub fn new(c: &BrokerConfig) -> BrokerMetrics {
        match c.metrics_exporter_type {
            MetricsExporterType::Prom => BrokerMetrics { families: Families::new(c).map(Arc::new) },
            MetricsExporterType::Disable => BrokerMetrics::default(),
            other => {
                tracing::warn!(exporter = ?other, "only metricsExporterType=PROM is supported; metrics are not exported");
                BrokerMetrics::default()
            }
        }
    }

    /// `rocketmq_proxy_up` of the proxy this broker serves (`--enable-proxy`), in its exposition
    /// with the broker's labels under the proxy's, as Java's local mode; only when the proxy's
    /// `metricsExporterType` is not DISABLE.
    pub fn add_proxy_up(&self, proxy: &proxy::config::ProxyConfig) {
        let Some(f) = &self.families else { return };
        if !proxy::metrics::enabled(proxy) {
            return;
        }
        let registered = proxy::metrics::proxy_up(f.labels.clone(), proxy, "local").and_then(|up| f.proxy.register(Box::new(up)));
        if let Err(e) = registered {
            tracing::warn!(error = %e, "rocketmq_proxy_up not registered");
        }
    }

    /// Request latency, for the servers to record every response into.
    pub fn rpc_observer(&self) -> Option<SharedRpcObserver> {
        self.families.as_ref().map(|f| f.rpc.clone() as SharedRpcObserver)
    }

    /// A stored send: `topic` is the topic stored into (the half or schedule topic for those).
    pub fn on_put(&self, topic: &str, message_type: &str, messages: usize, bytes: usize) {
        let Some(f) = &self.families else { return };
        if is_retry_or_dlq(topic) || messages == 0 {
            return;
        }
        let labels = [topic, message_type, bool_label(system_topic::is_system_topic(topic))];
        f.messages_in.add(&labels, messages as u64);
        f.throughput_in.add(&labels, bytes as u64);
        f.message_size.observe(&labels, (bytes / messages) as f64);
    }

    /// Messages handed to a pull; `next_offset` is where the group pulls next.
    pub fn on_get(&self, topic: &str, group: &str, queue_id: i32, next_offset: i64, messages: usize, bytes: usize) {
        let Some(f) = &self.families else { return };
        f.note_pull_offset(topic, group, queue_id, next_offset);
        if messages == 0 || is_retry_or_dlq(topic) {
            return;
        }
        let system = system_topic::is_system_topic(topic) || system_group::is_sys_consumer_group(group);
        let labels = [topic, group, bool_label(system)];
        f.messages_out.add(&labels, messages as u64);
        f.throughput_out.add(&labels, bytes as u64);
    }

    /// A delayed message delivered to its real topic: as Java's schedule service, counted out of
    /// the schedule topic (by its `SCHEDULE_CONSUMER` group) and into the real topic.
    pub fn on_delayed_delivery(&self, topic: &str, bytes: usize) {
        let Some(f) = &self.families else { return };
        let out = [system_topic::SCHEDULE, "SCHEDULE_CONSUMER", "true"];
        f.messages_out.add(&out, 1);
        f.throughput_out.add(&out, bytes as u64);
        let labels = [topic, "delay", bool_label(system_topic::is_system_topic(topic))];
        f.messages_in.add(&labels, 1);
        f.throughput_in.add(&labels, bytes as u64);
        f.message_size.observe(&labels, bytes as f64);
    }

    /// A message sent back for the last time, to its group's DLQ.
    pub fn on_send_to_dlq(&self, group: &str, origin_topic: &str) {
        let Some(f) = &self.families else { return };
        f.send_to_dlq.add(&[group, origin_topic, bool_label(is_system(origin_topic, group))], 1);
    }

    /// A half message stored for `real_topic`.
    pub fn on_half(&self, real_topic: &str) {
        let Some(f) = &self.families else { return };
        f.add_half(real_topic, 1);
    }

    /// A transaction committed: its message reached `topic`, `born_ms` when the producer made it.
    pub fn on_commit(&self, topic: &str, born_ms: i64) {
        let Some(f) = &self.families else { return };
        f.add_half(topic, -1);
        f.commit.add(&[topic], 1);
        let seconds = (remoting::clock::now_ms() - born_ms).max(0) / 1000;
        f.finish_latency.observe(&[topic], seconds as f64);
    }

    pub fn on_rollback(&self, topic: &str) {
        let Some(f) = &self.families else { return };
        f.add_half(topic, -1);
        f.rollback.add(&[topic], 1);
    }

    /// An UPDATE_AND_CREATE_TOPIC (or its list form) answered.
    pub fn on_topic_created(&self, ok: bool, system: bool, elapsed: std::time::Duration) {
        let Some(f) = &self.families else { return };
        f.topic_create.observe(&[status(ok), bool_label(system)], elapsed.as_millis() as f64);
    }

    /// An UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (or its list form) answered.
    pub fn on_group_created(&self, ok: bool, elapsed: std::time::Duration) {
        let Some(f) = &self.families else { return };
        f.group_create.observe(&[status(ok)], elapsed.as_millis() as f64);
    }

    /// A pop check point or ack put into the revive topic (Java counts a batch ack as an ack),
    /// for the group and the topic it names.
    pub fn on_revive_put(&self, group: &str, topic: &str, kind: pop::ReviveKind, status: store::commit_log::PutStatus) {
        let Some(f) = &self.families else { return };
        f.pop.on_revive_put(group, topic, kind, status);
    }

    /// A check point or ack read back from revive queue `queue_id` by the revive service.
    pub fn on_revive_get(&self, group: &str, topic: &str, queue_id: i32, kind: pop::ReviveKind) {
        let Some(f) = &self.families else { return };
        f.pop.on_revive_get(group, topic, queue_id, kind);
    }

    /// A pass of pop's buffer merge, `elapsed_ms` long.
    pub fn on_pop_buffer_pass(&self, elapsed_ms: u64) {
        let Some(f) = &self.families else { return };
        f.pop.on_buffer_pass(elapsed_ms);
    }

    /// A message revived into its pop retry topic; `topic` is the check point's.
    pub fn on_revive_retry(&self, group: &str, topic: &str, status: store::commit_log::PutStatus) {
        let Some(f) = &self.families else { return };
        f.pop.on_revive_retry(group, topic, status);
    }

    /// What the 5.x timer reports its enqueues and releases to (none unless metrics are on).
    pub fn timer_events(&self) -> Option<Arc<dyn store::timer::TimerEvents>> {
        self.families.as_ref().map(|f| f.timer.clone() as Arc<dyn store::timer::TimerEvents>)
    }

    /// Starts the endpoint (`metricsPromExporterHost`, else `brokerIP1`, and
    /// `metricsPromExporterPort`); at each scrape `sources` is asked for the broker's state and
    /// hands it to the gauges (it may decline, e.g. once the broker is gone); `pools` are the
    /// business pools by Java's processor names.
    pub async fn start_exporter(
        &self,
        c: &BrokerConfig,
        sources: impl Fn(&mut dyn FnMut(&gauges::Sources)) + Send + Sync + 'static,
        pools: Vec<(&'static str, Arc<BusinessPool>)>,
    ) -> std::io::Result<Option<PromExporter>> {
        let Some(f) = &self.families else { return Ok(None) };
        let host = if c.metrics_prom_exporter_host.trim().is_empty() { &c.broker_ip1 } else { &c.metrics_prom_exporter_host };
        let ip: IpAddr = host
            .trim()
            .parse()
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("metricsPromExporterHost {host} is not an IP address")))?;
        let families = f.clone();
        let refresh = Arc::new(move || sources(&mut |s| families.gauges.refresh(s, &families, &pools)));
        let registries = vec![f.registry.clone(), f.proxy.clone()];
        let exporter = PromExporter::start_all(SocketAddr::new(ip, c.metrics_prom_exporter_port), registries, refresh).await?;
        Ok(Some(exporter))
    }
}

impl Families {
    fn new(c: &BrokerConfig) -> Option<Families> {
        let labels = remoting::metrics::constant_labels(METER, &c.metrics_label, c.metrics_in_delta, "broker", &c.broker_cluster_name, &c.broker_name);
        let registry = match Registry::new_custom(None, Some(labels.clone())) {
            Ok(registry) => registry,
            Err(e) => {
                tracing::error!(error = %e, "metrics registry not made; metrics are not exported");
                return None;
            }
        };
        let limit = c.metrics_otel_cardinality_limit.max(1);
        let r = &registry;
        let put = ["topic", "message_type", "is_system"];
        let get = ["topic", "consumer_group", "is_system"];
        Some(Families {
            rpc: Arc::new(RpcLatency::new(r, limit)),
            messages_in: Counters::counters(r, "rocketmq_messages_in_total", "Total number of incoming messages", &put, limit),
            throughput_in: Counters::counters(r, "rocketmq_throughput_in_total", "Total traffic of incoming messages", &put, limit),
            message_size: Histograms::histograms(r, "rocketmq_message_size", "Incoming messages size", &put, &MESSAGE_SIZE_BUCKETS, limit),
            messages_out: Counters::counters(r, "rocketmq_messages_out_total", "Total number of outgoing messages", &get, limit),
            throughput_out: Counters::counters(r, "rocketmq_throughput_out_total", "Total traffic of outgoing messages", &get, limit),
            send_to_dlq: Counters::counters(
                r,
                "rocketmq_send_to_dlq_messages_total",
                "Consumer send to DLQ messages",
                &["consumer_group", "topic", "is_system"],
                limit,
            ),
            commit: Counters::counters(r, "rocketmq_commit_messages_total", "Total number of commit messages", &["topic"], limit),
            rollback: Counters::counters(r, "rocketmq_rollback_messages_total", "Total number of rollback messages", &["topic"], limit),
            finish_latency: Histograms::histograms(
                r,
                "rocketmq_finish_message_latency_milliseconds",
                "Transaction finish latency",
                &["topic"],
                &FINISH_LATENCY_BUCKETS,
                limit,
            ),
            topic_create: Histograms::histograms(
                r,
                "rocketmq_topic_create_execution_time_milliseconds",
                "The distribution of create topic time",
                &["invocation_status", "is_system"],
                &CREATE_TIME_BUCKETS_MS,
                limit,
            ),
            group_create: Histograms::histograms(
                r,
                "rocketmq_consumer_group_create_execution_time_milliseconds",
                "The distribution of create subscription time",
                &["invocation_status"],
                &CREATE_TIME_BUCKETS_MS,
                limit,
            ),
            gauges: gauges::Gauges::new(r, limit),
            timer: Arc::new(timer::TimerFamilies::new(r, limit)),
            pop: pop::PopFamilies::new(r, limit),
            half: Mutex::new(HashMap::new()),
            pulls: Mutex::new(Pulls::default()),
            limit,
            registry,
            proxy: Registry::new(),
            labels,
        })
    }

    fn add_half(&self, topic: &str, delta: i64) {
        let mut half = self.half.lock();
        if let Some(count) = half.get_mut(topic) {
            *count = (*count + delta).max(0);
        } else if delta > 0 && half.len() < self.limit {
            half.insert(topic.to_owned(), delta);
        }
    }

    /// The topics `group` pulled within [`PULLED_TOPIC_EXPIRY`].
    fn pulled_topics(&self, group: &str) -> Vec<String> {
        let pulls = self.pulls.lock();
        let Some(topics) = pulls.by_group.get(group) else { return Vec::new() };
        topics.iter().filter(|(_, pulled)| pulled.at.elapsed() < PULLED_TOPIC_EXPIRY).map(|(topic, _)| topic.clone()).collect()
    }

    fn note_pull_offset(&self, topic: &str, group: &str, queue_id: i32, next_offset: i64) {
        let mut pulls = self.pulls.lock();
        let now = std::time::Instant::now();
        if let Some(pulled) = pulls.by_group.get_mut(group).and_then(|topics| topics.get_mut(topic)) {
            pulled.at = now;
            pulled.next_offsets.insert(queue_id, next_offset);
        } else if pulls.pairs < self.limit {
            pulls.pairs += 1;
            let pulled = Pulled { at: now, next_offsets: HashMap::from([(queue_id, next_offset)]) };
            pulls.by_group.entry(group.to_owned()).or_default().insert(topic.to_owned(), pulled);
        }
    }

    fn pull_offset(&self, topic: &str, group: &str, queue_id: i32) -> Option<i64> {
        let pulls = self.pulls.lock();
        pulls.by_group.get(group)?.get(topic)?.next_offsets.get(&queue_id).copied()
    }
}

fn bool_label(value: bool) -> &'static str {
    if value {
        "true"
    } else {
        "false"
    }
}

fn status(ok: bool) -> &'static str {
    if ok {
        "success"
    } else {
        "failure"
    }
}

/// Java's `isRetryOrDlqTopic`: those are not counted as messages in or out.
fn is_retry_or_dlq(topic: &str) -> bool {
    topic.starts_with(system_topic::RETRY_GROUP_TOPIC_PREFIX) || topic.starts_with(system_topic::DLQ_GROUP_TOPIC_PREFIX)
}

/// Java's `BrokerMetricsManager.isSystemGroup`: the `CID_RMQ_SYS_` prefix in any case.
fn is_system_group(group: &str) -> bool {
    group.to_ascii_lowercase().starts_with(&system_group::SYS_PREFIX.to_ascii_lowercase())
}

fn is_system(topic: &str, group: &str) -> bool {
    system_topic::is_system_topic(topic) || is_system_group(group)
}

/// Java's `BrokerMetricsManager.getMessageType`: the `message_type` label of a send, from the
/// message's properties as the producer sent them.
pub fn message_type(props: &str) -> &'static str {
    // One pass over the pairs (this runs for every send).
    let (mut transaction, mut fifo, mut delay) = (None, false, false);
    properties::for_each(props, |name, value| match name {
        properties::TRAN_MSG => transaction = Some(value),
        properties::SHARDING_KEY => fifo = true,
        "__STARTDELIVERTIME" | properties::DELAY | properties::TIMER_DELIVER_MS | properties::TIMER_DELAY_SEC | properties::TIMER_DELAY_MS => delay = true,
        _ => {}
    });
    // The last TRAN_MSG counts, as a later duplicate wins in Java's map.
    if transaction.is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        "transaction"
    } else if fifo {
        "fifo"
    } else if delay {
        "delay"
    } else {
        "normal"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_is_typed_as_java_types_it() {
        let props = |pairs: &[(&str, &str)]| properties::serialize(pairs.iter().copied());
        assert_eq!(message_type(&props(&[("KEYS", "k")])), "normal");
        assert_eq!(message_type(&props(&[("TRAN_MSG", "true"), ("DELAY", "3")])), "transaction");
        assert_eq!(message_type(&props(&[("__SHARDINGKEY", "a"), ("DELAY", "3")])), "fifo");
        assert_eq!(message_type(&props(&[("DELAY", "3")])), "delay");
        assert_eq!(message_type(&props(&[("TIMER_DELAY_SEC", "3")])), "delay");
    }

    #[test]
    fn system_groups_are_told_apart_in_any_case() {
        assert!(is_system_group("cid_rmq_sys_trans") && is_system_group("CID_RMQ_SYS_X"));
        assert!(!is_system_group("my_group"));
        assert!(is_system("RMQ_SYS_TRACE_TOPIC", "g") && is_system("t", "CID_RMQ_SYS_TRANS"));
    }
}
