//! The gauges, computed at each scrape as Java's observable-gauge callbacks compute them:
//! pool queues, permission, table sizes, client connections, each online group's lag, half
//! messages and the store's figures.

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus::Registry;
use remoting::metrics::family;
use remoting::pool::BusinessPool;
use remoting::protocol::perm;
use remoting::version::version_desc;

use super::{bool_label, is_system, is_system_group, Families};
use crate::client::consumer_manager::ConsumerManager;
use crate::client::producer_manager::ProducerManager;
use crate::config::BrokerConfig;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

/// What the gauges read at a scrape: the broker's state, each part by its own handle.
pub struct Sources<'a> {
    pub config: &'a BrokerConfig,
    pub store_config: &'a store::config::MessageStoreConfig,
    pub store: &'a store::store::MessageStore,
    pub topics: &'a TopicConfigManager,
    pub groups: &'a SubscriptionGroupManager,
    pub offsets: &'a ConsumerOffsetManager,
    pub consumers: &'a ConsumerManager,
    pub producers: &'a ProducerManager,
    /// The 5.x timer, when `timerWheelEnable`.
    pub timer: Option<&'a store::timer::TimerStore>,
    /// Pop's service (its revive progress).
    pub pop: Option<&'a dyn super::pop::ReviveLag>,
}

/// Java's processor names, in its order: a pool we do not have (pop's ack, a separate async-put
/// or lite-pull pool) has nothing queued.
const PROCESSORS: [&str; 12] =
    ["send", "async_put", "pull", "ack", "query_message", "client_manager", "heartbeat", "lite_pull", "transaction", "consumer_manager", "admin", "reply"];

const LAG_LABELS: [&str; 4] = ["consumer_group", "topic", "is_retry", "is_system"];
const STORAGE_LABELS: [&str; 2] = ["storage_type", "storage_medium"];
const STORAGE: [&str; 2] = ["local", "disk"];

pub(super) struct Gauges {
    processor_watermark: family::Gauges,
    broker_permission: family::Gauges,
    topic_number: family::Gauges,
    consumer_group_number: family::Gauges,
    producer_connections: family::Gauges,
    consumer_connections: family::Gauges,
    lag_messages: family::Gauges,
    lag_latency: family::Gauges,
    inflight_messages: family::Gauges,
    queueing_latency: family::Gauges,
    ready_messages: family::Gauges,
    half_messages: family::Gauges,
    storage_size: family::Gauges,
    flush_behind: family::Gauges,
    dispatch_behind: family::Gauges,
    reserve_time: family::Gauges,
}

impl Gauges {
    pub(super) fn new(r: &Registry, limit: usize) -> Gauges {
        let gauges = |name: &str, help: &str, labels: &[&str]| family::Gauges::gauges(r, name, help, labels, limit);
        Gauges {
            processor_watermark: gauges("rocketmq_processor_watermark", "Request processor watermark", &["processor"]),
            broker_permission: gauges("rocketmq_broker_permission", "Broker permission", &[]),
            topic_number: gauges("rocketmq_topic_number", "Active topic number", &[]),
            consumer_group_number: gauges("rocketmq_consumer_group_number", "Active subscription group number", &[]),
            producer_connections: gauges("rocketmq_producer_connections", "Producer connections", &["language", "version", "protocol_type"]),
            consumer_connections: gauges(
                "rocketmq_consumer_connections",
                "Consumer connections",
                &["consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"],
            ),
            lag_messages: gauges("rocketmq_consumer_lag_messages", "Consumer lag messages", &LAG_LABELS),
            lag_latency: gauges("rocketmq_consumer_lag_latency_milliseconds", "Consumer lag time", &LAG_LABELS),
            inflight_messages: gauges("rocketmq_consumer_inflight_messages", "Consumer inflight messages", &LAG_LABELS),
            queueing_latency: gauges("rocketmq_consumer_queueing_latency_milliseconds", "Consumer queueing time", &LAG_LABELS),
            ready_messages: gauges("rocketmq_consumer_ready_messages", "Consumer ready messages", &LAG_LABELS),
            half_messages: gauges("rocketmq_half_messages", "Half messages of all topics", &["topic"]),
            storage_size: gauges("rocketmq_storage_size_bytes", "Broker storage size", &STORAGE_LABELS),
            flush_behind: gauges("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", &STORAGE_LABELS),
            dispatch_behind: gauges("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", &STORAGE_LABELS),
            reserve_time: gauges("rocketmq_storage_message_reserve_time_milliseconds", "Broker message reserve time", &STORAGE_LABELS),
        }
    }

    fn all(&self) -> [&family::Gauges; 16] {
        [
            &self.processor_watermark,
            &self.broker_permission,
            &self.topic_number,
            &self.consumer_group_number,
            &self.producer_connections,
            &self.consumer_connections,
            &self.lag_messages,
            &self.lag_latency,
            &self.inflight_messages,
            &self.queueing_latency,
            &self.ready_messages,
            &self.half_messages,
            &self.storage_size,
            &self.flush_behind,
            &self.dispatch_behind,
            &self.reserve_time,
        ]
    }

    pub(super) fn refresh(&self, b: &Sources, f: &Families, pools: &[(&'static str, Arc<BusinessPool>)]) {
        self.all().iter().for_each(|g| g.clear());
        for processor in PROCESSORS {
            let queued = pools.iter().filter(|(name, _)| *name == processor).map(|(_, pool)| pool.queued()).sum::<usize>();
            self.processor_watermark.set(&[processor], queued as i64);
        }
        self.broker_permission.set(&[], i64::from(b.config.broker_permission));
        self.topic_number.set(&[], b.topics.count() as i64);
        self.consumer_group_number.set(&[], b.groups.names().len() as i64);
        self.connections(b);
        self.lag(b, f);
        for (topic, count) in f.half.lock().iter() {
            self.half_messages.set(&[topic], *count);
        }
        self.storage(b);
        f.timer.refresh(b.timer);
        f.pop.refresh(b.pop, b.config.revive_queue_num);
    }

    fn connections(&self, b: &Sources) {
        let attrs = |info: &crate::client::ClientChannelInfo| (info.language.name().to_ascii_lowercase(), version_desc(info.version).to_ascii_lowercase());
        let mut producers: BTreeMap<(String, String), i64> = BTreeMap::new();
        for (_, clients) in b.producers.table() {
            for info in &clients {
                *producers.entry(attrs(info)).or_default() += 1;
            }
        }
        for ((language, version), count) in producers {
            self.producer_connections.set(&[&language, &version, "remoting"], count);
        }
        for group in b.consumers.groups() {
            let Some(info) = b.consumers.group(&group) else { continue };
            let mode = consume_mode(&info.consume_type);
            let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
            for client in info.channels.values() {
                *counts.entry(attrs(client)).or_default() += 1;
            }
            for ((language, version), count) in counts {
                self.consumer_connections.set(&[&group, &language, &version, mode, "remoting", bool_label(is_system_group(&group))], count);
            }
        }
    }

    /// Java's `ConsumerLagCalculator` for pull and push groups: per online group of the
    /// subscription table and each topic it subscribes (retry topics and topics it may neither
    /// read nor write skipped), summed over the topic's write queues.
    fn lag(&self, b: &Sources, f: &Families) {
        let store = b.store;
        let broker_perm = b.config.broker_permission;
        let now = remoting::clock::now_ms();
        // A message's store time, `i64::MAX` when there is none at that offset (Java's getStoreTimeStamp).
        let store_time = |topic: &str, queue_id: i32, offset: i64| {
            (offset >= 0).then(|| store.message_store_timestamp(topic, queue_id, offset)).flatten().filter(|t| *t > 0).unwrap_or(i64::MAX)
        };
        let since = |earliest: i64| if earliest == i64::MAX || earliest <= 0 { 0 } else { now - earliest };
        for group in b.groups.names() {
            // An online group's subscriptions, else (as Java's compensation table) what it pulled.
            let topics: Vec<String> = match b.consumers.group(&group) {
                Some(info) => info.subscriptions.keys().cloned().collect(),
                None => f.pulled_topics(&group),
            };
            for topic in &topics {
                if topic.starts_with(crate::topic_config::system_topic::RETRY_GROUP_TOPIC_PREFIX) {
                    continue;
                }
                let Some(config) = b.topics.select(topic) else { continue };
                let topic_perm = config.perm & broker_perm;
                if !perm::is_readable(topic_perm) && !perm::is_writeable(topic_perm) {
                    continue;
                }
                let (mut lag, mut inflight, mut ready) = (0i64, 0i64, 0i64);
                let (mut unconsumed_since, mut unpulled_since) = (i64::MAX, i64::MAX);
                for queue_id in 0..config.write_queue_nums {
                    let max = store.max_offset_in_queue(topic, queue_id).max(0);
                    let committed = b.offsets.query_offset(&group, topic, queue_id);
                    let consumed = committed.unwrap_or(max);
                    lag += (max - consumed).max(0);
                    unconsumed_since = unconsumed_since.min(store_time(topic, queue_id, consumed));
                    // Java's queryPullOffset: the pull table, else the committed offset.
                    let pulled = f.pull_offset(topic, &group, queue_id).or(committed);
                    let pull_from = pulled.unwrap_or(0).max(0);
                    inflight += (pull_from - committed.unwrap_or(pull_from)).max(0);
                    unpulled_since = unpulled_since.min(store_time(topic, queue_id, pull_from));
                    ready += (max - pulled.unwrap_or(max)).max(0);
                }
                let labels = [group.as_str(), topic.as_str(), "false", bool_label(is_system(topic, &group))];
                self.lag_messages.set(&labels, lag);
                self.lag_latency.set(&labels, since(unconsumed_since));
                self.inflight_messages.set(&labels, inflight);
                self.queueing_latency.set(&labels, since(unpulled_since));
                self.ready_messages.set(&labels, ready);
            }
        }
    }

    fn storage(&self, b: &Sources) {
        let store = b.store;
        let root = b.store_config.root_dir();
        if let Ok(fs) = nix::sys::statvfs::statvfs(&root) {
            // The field types differ between platforms (u64 on Linux).
            #[allow(clippy::unnecessary_cast)]
            let (blocks, free, fragment) = (fs.blocks() as u64, fs.blocks_free() as u64, fs.fragment_size() as u64);
            let used = blocks.saturating_sub(free) * fragment;
            if fs.blocks() > 0 {
                self.storage_size.set(&STORAGE, used as i64);
            }
        }
        let log = store.commit_log();
        let mut behind = (log.max_offset() - log.flushed_offset()).max(0);
        if log.uses_transient_pool() {
            behind += log.uncommitted_bytes() as i64;
        }
        self.flush_behind.set(&STORAGE, behind);
        self.dispatch_behind.set(&STORAGE, store.dispatch_behind_bytes().max(0));
        if let Some(earliest) = crate::stats::earliest_message_time(store).filter(|t| *t > 0) {
            self.reserve_time.set(&STORAGE, remoting::clock::now_ms() - earliest);
        }
    }
}

/// Java's `ConsumeType.getTypeCN()` in lower case.
fn consume_mode(consume_type: &str) -> &'static str {
    match consume_type {
        "CONSUME_ACTIVELY" => "pull",
        "CONSUME_POP" => "pop",
        _ => "push",
    }
}
