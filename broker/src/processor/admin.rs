//! The admin codes mqadmin uses most (Java `AdminBrokerProcessor`): runtime info, topic create,
//! delete and read, topic and consume stats, connections, subscription groups, broker config.

use std::collections::BTreeMap;
use std::sync::Arc;

use remoting::fastjson::{self, JsonStyle};
use remoting::pool::BusinessPool;
use remoting::protocol::broker::{ConsumerGroupHeader, CreateTopicRequestHeader};
use remoting::protocol::name::{GroupName, TopicName};
use remoting::protocol::perm;
use remoting::protocol::topic::TopicConfig;
use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{command_header, RemotingCommand, RequestCode, ResponseCode};
use serde::Serialize;

use super::ok;
use crate::client::ClientChannelInfo;
use crate::handles::AdminContext;
use crate::stats::java_double;
use crate::subscription_group::SubscriptionGroupConfig;
use crate::topic_attributes;
use crate::topic_config::system_topic;

command_header! {
    /// Headers that carry just a topic (DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO, ...).
    pub struct TopicHeader {
        pub topic: TopicName => "topic",
    }
}

command_header! {
    /// GET_SUBSCRIPTIONGROUP_CONFIG.
    #[derive(Default)]
    pub struct GroupHeader {
        pub group: String => "group",
    }
}

command_header! {
    /// GET_PRODUCER_CONNECTION_LIST.
    #[derive(Default)]
    pub struct ProducerGroupHeader {
        pub producer_group: String => "producerGroup",
    }
}

command_header! {
    /// GET_CONSUME_STATS.
    pub struct ConsumeStatsHeader {
        pub consumer_group: GroupName => "consumerGroup",
        pub topic: Option<TopicName> => "topic",
    }
}

command_header! {
    /// DELETE_SUBSCRIPTIONGROUP (4.9 says removeOffset, 5.x cleanOffset).
    #[derive(Default)]
    pub struct DeleteGroupHeader {
        pub group_name: String => "groupName",
        pub remove_offset: Option<bool> => "removeOffset",
        pub clean_offset: Option<bool> => "cleanOffset",
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Connection {
    client_addr: String,
    client_id: String,
    language: &'static str,
    version: i32,
}

fn connections(clients: impl Iterator<Item = ClientChannelInfo>) -> Vec<Connection> {
    clients
        .map(|c| Connection { client_addr: c.channel.remote_addr().to_string(), client_id: c.client_id, language: c.language.name(), version: c.version })
        .collect()
}

/// A queue count from a client: 0 (a topic being drained) up to the broker's maximum, so neither
/// the consume-queue folders nor a stats body can grow without bound.
pub(crate) fn check_queue_nums(key: &str, value: i32, max: u32) -> Result<(), ProcessError> {
    if value < 0 || value as u32 > max {
        return Err(ProcessError::new(ResponseCode::INVALID_PARAMETER, format!("{key} {value} is out of range 0..={max} (maxTopicQueueNums)")));
    }
    Ok(())
}

pub(crate) use super::broker_stats::mq_key;
use super::broker_stats::{consume_stats_json, offset_entries, Queues, MAX_STATS_BODY_BYTES};

/// Java's answer to a topic created or updated: SUCCESS with the remark `createResponseCommand`
/// starts with, which neither 4.9.7 nor 5.3.3 clears.
fn created(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::success_unset_remark(request)
}

/// How long the broker has run, as Java's `StoreStatsService` writes it.
fn java_runtime(millis: i64) -> String {
    let seconds = millis.max(0) / 1000;
    format!("[ {} days, {} hours, {} minutes, {} seconds ]", seconds / 86_400, seconds % 86_400 / 3_600, seconds % 3_600 / 60, seconds % 60)
}

/// Whether a processor's answer is a SUCCESS response.
pub(crate) fn answered_ok(answer: &ProcessResult) -> bool {
    matches!(answer, Ok(Some(response)) if response.code == ResponseCode::SUCCESS.0)
}

/// Java's "Total : X, Free : Y." of the store root (`File.getTotalSpace` / `getUsableSpace`).
fn disk_capacity(path: &std::path::Path) -> Option<String> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let fragment = s.fragment_size() as u64;
    Some(format!("Total : {}, Free : {}.", human_bytes(s.blocks() as u64 * fragment), human_bytes(s.blocks_available() as u64 * fragment)))
}

pub struct AdminProcessor {
    pub ctx: AdminContext,
    pub pools: QueuedPools,
}

/// The pools whose queue lengths the runtime info reports.
pub struct QueuedPools {
    pub send: Arc<BusinessPool>,
    pub pull: Arc<BusinessPool>,
    pub query: Arc<BusinessPool>,
    pub end_transaction: Arc<BusinessPool>,
}

/// Java's `MixAll.humanReadableByteCount(bytes, false)`: "512 B", "1.5 KiB", "3.0 GiB".
fn human_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let exp = ((bytes as f64).ln() / 1024f64.ln()) as i32;
    let unit = ["K", "M", "G", "T", "P", "E"][(exp - 1).clamp(0, 5) as usize];
    format!("{:.1} {unit}iB", bytes as f64 / 1024f64.powi(exp))
}

impl RequestProcessor for AdminProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        match request.request_code() {
            RequestCode::GET_BROKER_RUNTIME_INFO => Ok(Some(ok(&request).with_body(self.runtime_info()))),
            // exportPopRecord: Java moves its pop records from the RocksDB pop store to the file
            // store (the revive topic) and answers SUCCESS, also when that store is off (the
            // default). Ours keeps them in the revive topic only: nothing to move.
            RequestCode::POP_ROLLBACK => Ok(Some(RemotingCommand::success_unset_remark(&request))),
            RequestCode::UPDATE_AND_CREATE_TOPIC => {
                let started = std::time::Instant::now();
                let answer = self.create_topic(&request);
                let system = request.ext("topic").is_some_and(system_topic::is_system_topic);
                b.metrics.on_topic_created(answered_ok(&answer), system, started.elapsed());
                answer
            }
            RequestCode::DELETE_TOPIC_IN_BROKER => {
                let h: TopicHeader = request.decode_header()?;
                b.topics.delete(&h.topic).map_err(|e| ProcessError::system(e.to_string()))?;
                b.store.delete_topic(&h.topic);
                if let Some(timer) = b.timer.as_ref() {
                    timer.metrics().remove(&h.topic);
                }
                b.broker_stats.on_topic_deleted(&h.topic);
                b.membership.register_soon(false);
                Ok(Some(ok(&request)))
            }
            RequestCode::GET_ALL_TOPIC_CONFIG => Ok(Some(ok(&request).with_body(fastjson::to_vec(&b.topics.wrapper(), JsonStyle::Fastjson)))),
            // What a slave copies from its master (Java's SlaveSynchronize), compact JSON of the files.
            RequestCode::GET_ALL_CONSUMER_OFFSET => Ok(Some(ok(&request).with_body(fastjson::to_vec(&b.offsets.snapshot(), JsonStyle::Fastjson)))),
            RequestCode::GET_ALL_DELAY_OFFSET => Ok(Some(ok(&request).with_body(fastjson::to_vec(&self.ctx.delay_offsets.snapshot(), JsonStyle::Fastjson)))),
            RequestCode::GET_TOPIC_CONFIG => {
                let h: TopicHeader = request.decode_header()?;
                match b.topics.select(&h.topic) {
                    Some(tc) => Ok(Some(ok(&request).with_body(fastjson::to_vec(&tc, JsonStyle::Fastjson)))),
                    None => Err(ProcessError::new(ResponseCode::TOPIC_NOT_EXIST, format!("No topic in this broker. topic: {}", h.topic))),
                }
            }
            RequestCode::GET_TOPIC_STATS_INFO => self.topic_stats(&request),
            RequestCode::GET_CONSUMER_CONNECTION_LIST => self.consumer_connections(&request),
            RequestCode::GET_PRODUCER_CONNECTION_LIST => {
                let h: ProducerGroupHeader = request.decode_header()?;
                let clients = b.producers.channels(&h.producer_group);
                if clients.is_empty() {
                    return Err(ProcessError::system(format!("the producer group[{}] not exist", h.producer_group)));
                }
                let body = serde_json::json!({ "connectionSet": connections(clients.into_iter()) });
                Ok(Some(ok(&request).with_body(fastjson::to_vec(&body, JsonStyle::Fastjson))))
            }
            RequestCode::GET_CONSUME_STATS => self.consume_stats(&request),
            RequestCode::QUERY_TOPIC_CONSUME_BY_WHO => {
                let h: TopicHeader = request.decode_header()?;
                let mut groups: std::collections::BTreeSet<String> = b.consumers.groups_of_topic(&h.topic).into_iter().collect();
                groups.extend(b.offsets.groups_of_topic(&h.topic));
                let body = serde_json::json!({ "groupList": groups });
                Ok(Some(ok(&request).with_body(fastjson::to_vec(&body, JsonStyle::Fastjson))))
            }
            RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
                let started = std::time::Instant::now();
                let config: SubscriptionGroupConfig =
                    fastjson::from_slice(request.body_bytes()).map_err(|e| ProcessError::system(format!("bad SubscriptionGroupConfig: {e}")))?;
                let group = GroupName::new(config.group_name.as_str()).map_err(|e| ProcessError::new(ResponseCode::INVALID_PARAMETER, e.to_string()))?;
                // Its retry topic gets retryQueueNums queues: the same bound as a topic's.
                check_queue_nums("retryQueueNums", config.retry_queue_nums, b.config().max_topic_queue_nums)?;
                b.groups.update(&group, config).map_err(|e| ProcessError::system(e.to_string()))?;
                // As Java, only a created group is timed.
                b.metrics.on_group_created(true, started.elapsed());
                Ok(Some(ok(&request)))
            }
            RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG => {
                // Java's `findSubscriptionGroupConfig`: created when `autoCreateSubscriptionGroup` is on.
                let h: GroupHeader = request.decode_header()?;
                let auto_create = b.config().auto_create_subscription_group;
                match GroupName::new(h.group).ok().and_then(|g| b.groups.find_or_create(&g, auto_create)) {
                    Some(group) => Ok(Some(ok(&request).with_body(fastjson::to_vec(&group, JsonStyle::Fastjson)))),
                    None => Err(ProcessError::new(ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")),
                }
            }
            RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => Ok(Some(ok(&request).with_body(fastjson::to_vec(&b.groups.snapshot(), JsonStyle::Fastjson)))),
            RequestCode::DELETE_SUBSCRIPTIONGROUP => {
                let h: DeleteGroupHeader = request.decode_header()?;
                b.groups.delete(&h.group_name).map_err(|e| ProcessError::system(e.to_string()))?;
                b.broker_stats.on_group_deleted(&h.group_name);
                if h.remove_offset.or(h.clean_offset).unwrap_or(false) {
                    b.offsets.remove_group(&h.group_name);
                }
                Ok(Some(ok(&request)))
            }
            RequestCode::GET_BROKER_HA_STATUS => Ok(Some(ok(&request).with_body(self.ha_status()))),
            // What a 5.x slave copies besides the four files: how topics and groups are consumed.
            RequestCode::GET_ALL_MESSAGE_REQUEST_MODE => Ok(Some(ok(&request).with_body(b.request_modes.encode_compact()))),
            RequestCode::GET_BROKER_CONFIG => {
                let version = fastjson::to_string(&b.configs.version.current(), JsonStyle::Fastjson);
                let entries = crate::runtime_config::current_entries(&b.configs);
                let text = crate::config::without_unset_paths(&self.current_roles(&crate::config::print_entries(&entries)));
                Ok(Some(ok(&request).with_ext("version", version).with_body(text)))
            }
            RequestCode::UPDATE_BROKER_CONFIG => self.update_config(channel, &request),
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

impl AdminProcessor {
    /// UPDATE_BROKER_CONFIG: every key is taken and persisted (see [`crate::runtime_config`]);
    /// the keys of [`crate::runtime_config::LIVE_KEYS`] take effect at once, and a new permission
    /// is registered with the name servers at once.
    fn update_config(&self, channel: &Channel, request: &RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        tracing::info!(peer = %channel.remote_addr(), "updateBrokerConfig called");
        let Some(body) = request.body.as_ref() else { return Ok(Some(ok(request))) };
        let text = std::str::from_utf8(body).map_err(|_| ProcessError::system("string2Properties error"))?;
        // Java's `MixAll.string2Properties` answers null for text `Properties.load` refuses.
        let properties = remoting::properties::parse_strict(text).map_err(|_| ProcessError::system("string2Properties error"))?;
        let updated = crate::runtime_config::update(&b.configs, &b.store, &properties)?;
        if updated.permission {
            b.topics.next_data_version();
            b.membership.register_soon(false);
        }
        Ok(Some(ok(request)))
    }

    /// The printed config with the id and role the broker has now (a DLedger broker's change with
    /// its group's leader, as Java sets them on its config objects).
    fn current_roles(&self, printed: &str) -> String {
        let b = &self.ctx;
        let role = match b.store.role() {
            store::config::BrokerRole::AsyncMaster => "ASYNC_MASTER",
            store::config::BrokerRole::SyncMaster => "SYNC_MASTER",
            store::config::BrokerRole::Slave => "SLAVE",
        };
        printed
            .lines()
            .map(|line| match line.split_once('=') {
                Some(("brokerId", _)) => format!("brokerId={}", b.membership.broker_id()),
                Some(("brokerRole", _)) => format!("brokerRole={role}"),
                _ => line.to_owned(),
            })
            .flat_map(|line| [line, "\n".to_owned()])
            .collect()
    }

    /// The table mqadmin's clusterList and brokerStatus read; every number parses.
    fn runtime_info(&self) -> Vec<u8> {
        let b = &self.ctx;
        let store = &b.store;
        let disk = store::cleanup::disk_used_ratio(&b.store_config().commit_log_dir());
        // Java: -1 for both while the commit log has no file yet.
        let has_data = store.max_phy_offset() > 0;
        let earliest = if has_data { store.min_phy_offset() } else { -1 };
        let earliest_time = crate::stats::earliest_message_time(store).unwrap_or(-1);
        let mut t: BTreeMap<&str, String> = BTreeMap::new();
        // Keys made of a path or a level.
        let mut named: Vec<(String, String)> = Vec::new();
        t.insert("brokerVersionDesc", remoting::version::version_desc(remoting::command::CURRENT_VERSION));
        t.insert("brokerVersion", remoting::command::CURRENT_VERSION.to_string());
        for key in ["msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning"] {
            t.insert(key, "0".into());
        }
        t.insert("msgPutTotalTodayNow", b.stats.put_count().to_string());
        t.insert("msgGetTotalTodayNow", b.stats.transferred_count().to_string());
        t.insert("putTps", b.stats.put_tps());
        t.insert("getFoundTps", b.stats.get_found_tps());
        t.insert("getMissTps", b.stats.get_miss_tps());
        t.insert("getTotalTps", b.stats.get_total_tps());
        // 4.9 spells it "Transfered"; 5.x tools read "Transferred"
        let transferred = b.stats.get_transferred_tps();
        t.insert("getTransferedTps", transferred.clone());
        t.insert("getTransferredTps", transferred);
        let p = &self.pools;
        t.insert("sendThreadPoolQueueSize", p.send.queued().to_string());
        t.insert("sendThreadPoolQueueCapacity", b.config().send_thread_pool_queue_capacity.to_string());
        t.insert("pullThreadPoolQueueSize", p.pull.queued().to_string());
        t.insert("pullThreadPoolQueueCapacity", b.config().pull_thread_pool_queue_capacity.to_string());
        t.insert("queryThreadPoolQueueSize", p.query.queued().to_string());
        t.insert("queryThreadPoolQueueCapacity", b.config().query_thread_pool_queue_capacity.to_string());
        t.insert("EndTransactionQueueSize", p.end_transaction.queued().to_string());
        t.insert("EndTransactionThreadPoolQueueCapacity", b.config().end_transaction_pool_queue_capacity.to_string());
        t.insert("startAcceptSendRequestTimeStamp", b.config().start_accept_send_request_timestamp_ms.to_string());
        // 5.x's timer keys (Java's zeros without a timer).
        let timer = match b.timer.as_ref() {
            Some(timer) => timer.status().map(|(k, v)| (k, v)),
            None => [("timerReadBehind", "0"), ("timerOffsetBehind", "0"), ("timerCongestNum", "0"), ("timerEnqueueTps", "0.0"), ("timerDequeueTps", "0.0")]
                .map(|(k, v)| (k, v.to_owned())),
        };
        for (key, value) in timer {
            t.insert(key, value);
        }
        let unflushed = (store.commit_log().max_offset() - store.commit_log().flushed_offset()).max(0) as u64;
        t.insert("remainHowManyDataToFlush", human_bytes(unflushed));
        // Java: the pool's free buffers, Integer.MAX_VALUE without a pool; what waits to be committed only with one.
        if store.commit_log().uses_transient_pool() {
            t.insert("remainTransientStoreBufferNumbs", store.commit_log().transient_pool_available().to_string());
            t.insert("remainHowManyDataToCommit", human_bytes(store.commit_log().uncommitted_bytes()));
        } else {
            t.insert("remainTransientStoreBufferNumbs", i32::MAX.to_string());
        }
        if let Some(capacity) = disk_capacity(&b.store_config().root_dir()) {
            t.insert("commitLogDirCapacity", capacity);
        }
        // How long the oldest queued request of each pool has waited (Java's headSlowTimeMills).
        t.insert("sendThreadPoolQueueHeadWaitTimeMills", p.send.head_wait_ms().to_string());
        t.insert("pullThreadPoolQueueHeadWaitTimeMills", p.pull.head_wait_ms().to_string());
        t.insert("queryThreadPoolQueueHeadWaitTimeMills", p.query.head_wait_ms().to_string());
        // Appends hold no page-cache lock that could be measured as Java's putMessage spin lock.
        t.insert("pageCacheLockTimeMills", "0".into());
        for (key, value) in b.stats.put_figures() {
            t.insert(key, value);
        }
        t.insert("earliestMessageTimeStamp", earliest_time.to_string());
        t.insert("commitLogDiskRatio", java_double(disk));
        // Java also names the ratio by the commit log's path (one per path of a multi-path log).
        let commit_log_dir = b.store_config().commit_log_dir();
        named.push((format!("commitLogDiskRatio_{}", commit_log_dir.display()), java_double(disk)));
        t.insert("consumeQueueDiskRatio", java_double(store::cleanup::disk_used_ratio(&b.store_config().consume_queue_dir())));
        // The schedule service's progress per level: "delivered offset,max offset" (Java's buildRunningStats).
        for (level, offset) in self.ctx.delay_offsets.snapshot().offset_table {
            let max = store.max_offset_in_queue(system_topic::SCHEDULE, level - 1);
            named.push((format!("scheduleMessageOffset_{level}"), format!("{offset},{max}")));
        }
        t.insert("commitLogMinOffset", earliest.to_string());
        t.insert("commitLogMaxOffset", store.max_phy_offset().to_string());
        t.insert("dispatchBehindBytes", store.dispatch_behind_bytes().to_string());
        t.insert("brokerActive", "true".into());
        t.insert("bootTimestamp", b.boot_timestamp.to_string());
        t.insert("runtime", java_runtime(remoting::clock::now_ms() - b.boot_timestamp));
        let mut table: BTreeMap<String, String> = t.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        table.extend(named);
        fastjson::to_vec(&serde_json::json!({ "table": table }), JsonStyle::Fastjson)
    }

    /// 5.x's `HARuntimeInfo` (mqadmin haStatus): a master lists its slave connections, a slave
    /// its client side.
    fn ha_status(&self) -> Vec<u8> {
        let b = &self.ctx;
        let max = b.store.commit_log().max_offset();
        let gap = b.store_config().ha_fallbehind_max();
        let (connections, client) = match (b.ha.replication(), b.ha.slave_client()) {
            (Some(replication), _) => {
                let connections: Vec<serde_json::Value> = replication
                    .slaves()
                    .into_iter()
                    .map(|s| {
                        serde_json::json!({
                            "addr": s.addr.to_string(),
                            "diff": max - s.acked,
                            "inSync": max - s.acked < gap,
                            "slaveAckOffset": s.acked,
                            "transferFromWhere": s.transfer_from,
                            "transferredByteInSecond": 0,
                        })
                    })
                    .collect();
                (
                    connections,
                    serde_json::json!({"activated": false, "lastReadTimestamp": 0, "lastWriteTimestamp": 0, "masterFlushOffset": 0, "maxOffset": 0, "transferredByteInSecond": 0}),
                )
            }
            (None, Some(slave)) => {
                let s = slave.status();
                let mut client = serde_json::json!({
                    "activated": s.connected,
                    "lastReadTimestamp": s.last_read_ms,
                    "lastWriteTimestamp": s.last_write_ms,
                    "masterFlushOffset": 0,
                    "maxOffset": max,
                    "transferredByteInSecond": 0,
                });
                if let Some(addr) = s.master_addr {
                    client["masterAddr"] = serde_json::Value::String(addr);
                }
                (Vec::new(), client)
            }
            (None, None) => (Vec::new(), serde_json::json!({})),
        };
        let in_sync = connections.iter().filter(|c| c["inSync"] == true).count();
        let body = serde_json::json!({
            "haClientRuntimeInfo": client,
            "haConnectionInfo": connections,
            "inSyncSlaveNums": in_sync,
            "master": !b.membership.is_slave(),
            "masterCommitLogMaxOffset": if b.membership.is_slave() { 0 } else { max },
        });
        fastjson::to_vec(&body, JsonStyle::Fastjson)
    }

    fn create_topic(&self, request: &RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        // The name's characters and length are checked as the header is decoded (TopicName).
        let h: CreateTopicRequestHeader = request.decode_header()?;
        if h.topic == b.config().broker_cluster_name || h.topic == system_topic::AUTO_CREATE_TEMPLATE {
            return Err(ProcessError::system(format!("the topic[{}] is conflict with system reserved words.", h.topic)));
        }
        check_queue_nums("readQueueNums", h.read_queue_nums, b.config().max_topic_queue_nums)?;
        check_queue_nums("writeQueueNums", h.write_queue_nums, b.config().max_topic_queue_nums)?;
        if !(0..=perm::ALL).contains(&h.perm) {
            return Err(ProcessError::new(
                ResponseCode::INVALID_PARAMETER,
                format!("perm {} is not a combination of the permission bits 0..={}", h.perm, perm::ALL),
            ));
        }
        let mut tc = TopicConfig::new(&h.topic);
        tc.read_queue_nums = h.read_queue_nums;
        tc.write_queue_nums = h.write_queue_nums;
        tc.perm = h.perm;
        tc.topic_filter_type = h.topic_filter_type.clone();
        tc.topic_sys_flag = h.topic_sys_flag.unwrap_or(0);
        tc.order = h.order;
        // 5.x attributes: Java's parse and alter refusals are answered SYSTEM_ERROR (its catch-all).
        let changes = topic_attributes::parse_to_map(h.attributes.as_deref()).map_err(ProcessError::system)?;
        let message_type = format!("+{}", topic_attributes::MESSAGE_TYPE);
        if !b.config().enable_mixed_message_type && changes.get(&message_type).map(String::as_str) == Some("MIXED") {
            return Err(ProcessError::new(ResponseCode::INVALID_PARAMETER, "MIXED message type is not supported."));
        }
        tc.attributes = changes.clone();
        if b.topics.select(&h.topic).as_ref() == Some(&tc) {
            // As Java: nothing changes, nothing is written or registered.
            return Ok(Some(created(request)));
        }
        let altered = |current: Option<&TopicConfig>| {
            let empty = BTreeMap::new();
            topic_attributes::alter(current.is_none(), current.map_or(&empty, |c| &c.attributes), &changes)
        };
        b.topics.update_with_attributes(&h.topic, tc, altered).map_err(|e| ProcessError::system(e.to_string()))?.map_err(ProcessError::system)?;
        b.membership.register_soon(false);
        Ok(Some(created(request)))
    }

    fn topic_stats(&self, request: &RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        let h: TopicHeader = request.decode_header()?;
        let Some(tc) = b.topics.select(&h.topic) else {
            return Err(ProcessError::new(ResponseCode::TOPIC_NOT_EXIST, format!("topic[{}] not exist", h.topic)));
        };
        let mut entries = Vec::new();
        // A topic loaded from a file may predate the queue-count bound; the body stays bounded.
        for q in 0..tc.write_queue_nums.clamp(0, b.config().max_topic_queue_nums as i32) {
            let (min, max) = (b.store.min_offset_in_queue(&h.topic, q), b.store.max_offset_in_queue(&h.topic, q));
            let last = if max > 0 { b.store.message_store_timestamp(&h.topic, q, max - 1).unwrap_or(0) } else { 0 };
            entries.push(format!(r#"{}:{{"lastUpdateTimestamp":{last},"maxOffset":{max},"minOffset":{min}}}"#, mq_key(&h.topic, &b.config().broker_name, q)));
        }
        let body = format!(r#"{{"offsetTable":{{{}}},"topicPutTps":0.0}}"#, entries.join(","));
        Ok(Some(ok(request).with_body(body)))
    }

    fn consumer_connections(&self, request: &RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        let h: ConsumerGroupHeader = request.decode_header()?;
        let Some(group) = b.consumers.group(&h.consumer_group).filter(|g| !g.channels.is_empty()) else {
            return Err(ProcessError::new(ResponseCode::CONSUMER_NOT_ONLINE, format!("the consumer group[{}] not online", h.consumer_group)));
        };
        let body = serde_json::json!({
            "connectionSet": connections(group.channels.values().cloned()),
            "consumeFromWhere": group.consume_from_where,
            "consumeType": group.consume_type,
            "messageModel": group.message_model,
            "subscriptionTable": group.subscriptions,
        });
        Ok(Some(ok(request).with_body(fastjson::to_vec(&body, JsonStyle::Fastjson))))
    }

    fn consume_stats(&self, request: &RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        let h: ConsumeStatsHeader = request.decode_header()?;
        let topics: Vec<String> = match h.topic {
            Some(topic) => vec![topic.into_string()],
            None => b.offsets.topics_of_group(&h.consumer_group).into_iter().collect(),
        };
        // Java's ConsumeStats of several topics: one offset table, the TPS summed.
        let mut budget = MAX_STATS_BODY_BYTES;
        let mut entries = Vec::new();
        let mut tps = 0.0;
        for topic in topics {
            if let Some((of_topic, _)) = offset_entries(b, &h.consumer_group, &topic, Queues::Read, &mut budget)? {
                entries.extend(of_topic);
                tps += b.broker_stats.group_get_tps(&h.consumer_group, &topic);
            }
        }
        Ok(Some(ok(request).with_body(consume_stats_json(&entries, tps))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_reads_as_javas() {
        assert_eq!(java_runtime(6_999), "[ 0 days, 0 hours, 0 minutes, 6 seconds ]");
        assert_eq!(java_runtime(((2 * 24 + 3) * 3600 + 4 * 60 + 5) * 1000), "[ 2 days, 3 hours, 4 minutes, 5 seconds ]");
        assert_eq!(java_runtime(-5), "[ 0 days, 0 hours, 0 minutes, 0 seconds ]");
    }

    #[test]
    fn byte_counts_and_doubles_read_as_javas() {
        assert_eq!((human_bytes(0), human_bytes(1023), human_bytes(1536)), ("0 B".into(), "1023 B".into(), "1.5 KiB".into()));
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
        assert_eq!(java_double(-1.0), "-1.0");
        assert_eq!(java_double(0.42), "0.42");
        assert_eq!(java_double(1.0), "1.0");
    }

    #[test]
    fn an_unset_commit_log_path_is_not_printed() {
        let printed = "rocketmqHome=/h\nstorePathCommitLog=\nmessageStorePlugIn=\nstorePathRootDir=/s\n";
        assert_eq!(crate::config::without_unset_paths(printed), "rocketmqHome=/h\nmessageStorePlugIn=\nstorePathRootDir=/s\n");
        let set = "storePathCommitLog=/c\n";
        assert_eq!(crate::config::without_unset_paths(set), set);
        assert_eq!(crate::config::without_unset_paths("dLegerGroup=\nhaMasterAddress=\ndLegerSelfId=n0\n"), "dLegerSelfId=n0\n");
    }
}

#[cfg(test)]
#[path = "admin_tests.rs"]
mod over_a_store;
