//! `BrokerConfig`: the broker's keys of `broker.conf`, with Java 4.9.7's names and defaults, plus
//! the keys Java keeps in `NettyServerConfig` and `NettyClientConfig` (`listenPort`, worker
//! threads, ...), which the same file sets. The store's keys live in [`MessageStoreConfig`];
//! [`load_broker_conf`] applies one file to both, as `mqbroker -c` does.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use remoting::config::JavaConfig;
use remoting::java_config;
use store::config::{BrokerRole, MessageStoreConfig};

/// What Java's `BrokerConfig.localHostName()` falls back to when the host name cannot be had.
pub const FALLBACK_BROKER_NAME: &str = "DEFAULT_BROKER";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Invalid(#[from] remoting::config::ConfigError),
    #[error("the name server address {addr} is not valid; set it as \"127.0.0.1:9876;192.168.0.1:9876\"")]
    NamesrvAddr { addr: String },
    #[error("a slave's brokerId must be > 0, not {broker_id}")]
    SlaveBrokerId { broker_id: i64 },
    #[error("listenPort {listen_port} leaves no port for HA (haListenPort defaults to listenPort + 1)")]
    NoHaPort { listen_port: u16 },
    #[error(transparent)]
    Unsafe(#[from] UnsafeValue),
    #[error("this broker does not have what these keys ask for: {settings}; remove them or set Java's defaults (see README, \"Store keys\")")]
    Unsupported { settings: String },
}

/// The keys whose values the broker puts into every stored message or send response
/// (`regionId` as `MSG_REGION`, the cluster as `CLUSTER` and in the reply topic's name, the broker
/// name in recall handles and relayed headers), into topic names (`msgTraceTopicName`, the cluster
/// and broker topics), into its registration with the name servers (the addresses) or into every
/// metrics line (`metricsLabel`, the exporter host). A control character there would be stored in
/// messages (`\u0001` and `\u0002` separate message properties) or split a header or a line.
pub const MESSAGE_VALUE_KEYS: [&str; 8] =
    ["regionId", "brokerName", "brokerClusterName", "msgTraceTopicName", "brokerIP1", "brokerIP2", "metricsLabel", "metricsPromExporterHost"];

/// The longest value of a [`MESSAGE_VALUE_KEYS`] key, in characters (a message's properties
/// hold at most 32,767 bytes in all; Java's group names are capped at 255).
pub const MAX_MESSAGE_VALUE_CHARS: usize = 255;

/// The longest value a runtime update may set for any key, in characters.
pub const MAX_VALUE_CHARS: usize = 4096;

/// A config value the broker refuses to carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeValue {
    #[error("the value of {key} has the control character U+{code:04X} at character {at}; config values cannot carry control characters")]
    ControlCharacter { key: String, code: u32, at: usize },
    #[error("the value of {key} has {chars} characters, more than the {max} this key may have")]
    TooLong { key: String, chars: usize, max: usize },
}

/// Refuses control characters (a line break, the message property separators \u0001 and
/// \u0002, ...) in any value, and values longer than the key's cap.
pub fn check_value(key: &str, value: &str) -> Result<(), UnsafeValue> {
    if let Some((at, c)) = value.chars().enumerate().find(|(_, c)| c.is_control()) {
        return Err(UnsafeValue::ControlCharacter { key: key.to_owned(), code: u32::from(c), at });
    }
    let max = if MESSAGE_VALUE_KEYS.contains(&key) { MAX_MESSAGE_VALUE_CHARS } else { MAX_VALUE_CHARS };
    let chars = value.chars().count();
    if chars > max {
        return Err(UnsafeValue::TooLong { key: key.to_owned(), chars, max });
    }
    Ok(())
}

/// [`check_value`] on the running values of the [`MESSAGE_VALUE_KEYS`].
pub fn check_message_values(broker: &BrokerConfig) -> Result<(), UnsafeValue> {
    for key in MESSAGE_VALUE_KEYS {
        if let Some(value) = broker.get(key) {
            check_value(key, &value)?;
        }
    }
    Ok(())
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn env_or_empty(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

/// Java's `localHostName()`: the host name, or [`FALLBACK_BROKER_NAME`].
pub fn local_host_name() -> String {
    nix::unistd::gethostname().ok().and_then(|name| name.into_string().ok()).filter(|name| !name.is_empty()).unwrap_or_else(|| FALLBACK_BROKER_NAME.to_owned())
}

/// Java's `RemotingUtil.getLocalAddress()` for IPv4: over the interfaces that are not bridges,
/// the first non-loopback address that does not start with `127.0` or `192.168`, else the last
/// such address seen; `127.0.0.1` when there is none.
pub fn local_address() -> String {
    let mut candidates: Vec<String> = Vec::new();
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for ifaddr in addrs {
            if Path::new("/sys/class/net").join(&ifaddr.interface_name).join("bridge").exists() {
                continue;
            }
            let Some(ip) = ifaddr.address.as_ref().and_then(|a| a.as_sockaddr_in()).map(|sin| sin.ip()) else {
                continue;
            };
            if !IpAddr::V4(ip).is_loopback() {
                candidates.push(ip.to_string());
            }
        }
    }
    pick_local_address(&candidates)
}

fn pick_local_address(candidates: &[String]) -> String {
    candidates.iter().find(|ip| !ip.starts_with("127.0") && !ip.starts_with("192.168")).or(candidates.last()).cloned().unwrap_or_else(|| "127.0.0.1".to_owned())
}

java_config! {
    /// Every simple-typed key of Java 4.9.7's `BrokerConfig`, `NettyServerConfig` and
    /// `NettyClientConfig`, in Java's declaration order (which `-p` prints). Keys we do not act on
    /// yet are kept so a Java `broker.conf` loads without "unknown key" noise and prints as Java's.
    pub struct BrokerConfig {
        pub rocketmq_home: String = "rocketmqHome" => env_or_empty("ROCKETMQ_HOME"),
        /// `;`-separated `host:port` list; empty means unset (Java: null). Env `NAMESRV_ADDR`.
        pub namesrv_addr: String = "namesrvAddr" => env_or_empty("NAMESRV_ADDR"),
        pub broker_ip1: String = "brokerIP1" => local_address(),
        pub broker_ip2: String = "brokerIP2" => local_address(),
        pub broker_name: String = "brokerName" => local_host_name(),
        pub broker_cluster_name: String = "brokerClusterName" => "DefaultCluster".to_owned(),
        pub broker_id: i64 = "brokerId" => 0,
        pub broker_permission: i32 = "brokerPermission" => remoting::protocol::perm::READ | remoting::protocol::perm::WRITE,
        pub default_topic_queue_nums: i32 = "defaultTopicQueueNums" => 8,
        pub auto_create_topic_enable: bool = "autoCreateTopicEnable" => true,
        pub cluster_topic_enable: bool = "clusterTopicEnable" => true,
        pub broker_topic_enable: bool = "brokerTopicEnable" => true,
        pub auto_create_subscription_group: bool = "autoCreateSubscriptionGroup" => true,
        pub message_store_plug_in: String = "messageStorePlugIn" => String::new(),
        pub msg_trace_topic_name: String = "msgTraceTopicName" => remoting::protocol::system_topic::TRACE.to_owned(),
        pub trace_topic_enable: bool = "traceTopicEnable" => false,
        pub send_message_thread_pool_nums: usize = "sendMessageThreadPoolNums" => cpus().min(4),
        pub put_message_future_thread_pool_nums: usize = "putMessageFutureThreadPoolNums" => cpus().min(4),
        pub pull_message_thread_pool_nums: usize = "pullMessageThreadPoolNums" => 16 + cpus() * 2,
        pub process_reply_message_thread_pool_nums: usize = "processReplyMessageThreadPoolNums" => 16 + cpus() * 2,
        pub query_message_thread_pool_nums: usize = "queryMessageThreadPoolNums" => 8 + cpus(),
        pub admin_broker_thread_pool_nums: usize = "adminBrokerThreadPoolNums" => 16,
        pub client_manage_thread_pool_nums: usize = "clientManageThreadPoolNums" => 32,
        pub consumer_manage_thread_pool_nums: usize = "consumerManageThreadPoolNums" => 32,
        pub heartbeat_thread_pool_nums: usize = "heartbeatThreadPoolNums" => cpus().min(32),
        pub end_transaction_thread_pool_nums: usize = "endTransactionThreadPoolNums" => (8 + cpus() * 2).max(cpus().min(4) * 4),
        pub flush_consumer_offset_interval_ms: u64 = "flushConsumerOffsetInterval" => 5_000,
        pub flush_consumer_offset_history_interval_ms: u64 = "flushConsumerOffsetHistoryInterval" => 60_000,
        pub reject_transaction_message: bool = "rejectTransactionMessage" => false,
        pub fetch_namesrv_addr_by_address_server: bool = "fetchNamesrvAddrByAddressServer" => false,
        pub send_thread_pool_queue_capacity: usize = "sendThreadPoolQueueCapacity" => 10_000,
        pub put_thread_pool_queue_capacity: usize = "putThreadPoolQueueCapacity" => 10_000,
        pub pull_thread_pool_queue_capacity: usize = "pullThreadPoolQueueCapacity" => 100_000,
        pub reply_thread_pool_queue_capacity: usize = "replyThreadPoolQueueCapacity" => 10_000,
        pub query_thread_pool_queue_capacity: usize = "queryThreadPoolQueueCapacity" => 20_000,
        pub client_manager_thread_pool_queue_capacity: usize = "clientManagerThreadPoolQueueCapacity" => 1_000_000,
        pub consumer_manager_thread_pool_queue_capacity: usize = "consumerManagerThreadPoolQueueCapacity" => 1_000_000,
        pub heartbeat_thread_pool_queue_capacity: usize = "heartbeatThreadPoolQueueCapacity" => 50_000,
        pub end_transaction_pool_queue_capacity: usize = "endTransactionPoolQueueCapacity" => 100_000,
        pub filter_server_nums: usize = "filterServerNums" => 0,
        pub long_polling_enable: bool = "longPollingEnable" => true,
        pub short_polling_time_ms: u64 = "shortPollingTimeMills" => 1_000,
        pub notify_consumer_ids_changed_enable: bool = "notifyConsumerIdsChangedEnable" => true,
        pub high_speed_mode: bool = "highSpeedMode" => false,
        pub commercial_enable: bool = "commercialEnable" => true,
        pub commercial_timer_count: i32 = "commercialTimerCount" => 1,
        pub commercial_trans_count: i32 = "commercialTransCount" => 1,
        pub commercial_big_count: i32 = "commercialBigCount" => 1,
        pub commercial_base_count: i32 = "commercialBaseCount" => 1,
        pub transfer_msg_by_heap: bool = "transferMsgByHeap" => true,
        pub max_delay_time: i32 = "maxDelayTime" => 40,
        pub region_id: String = "regionId" => "DefaultRegion".to_owned(),
        pub register_broker_timeout_ms: u64 = "registerBrokerTimeoutMills" => 6_000,
        pub slave_read_enable: bool = "slaveReadEnable" => false,
        pub disable_consume_if_consumer_read_slowly: bool = "disableConsumeIfConsumerReadSlowly" => false,
        pub consumer_fallbehind_threshold_bytes: u64 = "consumerFallbehindThreshold" => 16 * 1024 * 1024 * 1024,
        pub broker_fast_failure_enable: bool = "brokerFastFailureEnable" => true,
        pub wait_time_ms_in_send_queue: u64 = "waitTimeMillsInSendQueue" => 200,
        pub wait_time_ms_in_pull_queue: u64 = "waitTimeMillsInPullQueue" => 5_000,
        pub wait_time_ms_in_heartbeat_queue: u64 = "waitTimeMillsInHeartbeatQueue" => 31_000,
        pub wait_time_ms_in_transaction_queue: u64 = "waitTimeMillsInTransactionQueue" => 3_000,
        pub wait_time_ms_in_admin_broker_queue: u64 = "waitTimeMillsInAdminBrokerQueue" => 5_000,
        pub start_accept_send_request_timestamp_ms: i64 = "startAcceptSendRequestTimeStamp" => 0,
        /// 5.3.x RECALL_MESSAGE: off by default, as Java; allowed on a broker without write
        /// permission unless `allowRecallWhenBrokerNotWriteable=false`.
        pub recall_message_enable: bool = "recallMessageEnable" => false,
        pub allow_recall_when_broker_not_writeable: bool = "allowRecallWhenBrokerNotWriteable" => true,
        pub trace_on: bool = "traceOn" => true,
        pub enable_calc_filter_bit_map: bool = "enableCalcFilterBitMap" => false,
        pub expect_consumer_num_use_filter: i32 = "expectConsumerNumUseFilter" => 32,
        /// Percent, 1..=100.
        pub max_error_rate_of_bloom_filter: i32 = "maxErrorRateOfBloomFilter" => 20,
        pub filter_data_clean_time_span_ms: u64 = "filterDataCleanTimeSpan" => 24 * 3600 * 1000,
        pub filter_support_retry: bool = "filterSupportRetry" => false,
        pub enable_property_filter: bool = "enablePropertyFilter" => false,
        pub compressed_register: bool = "compressedRegister" => false,
        pub force_register: bool = "forceRegister" => true,
        /// Java clamps this to 10 000..=60 000 where it is used.
        pub register_name_server_period_ms: u64 = "registerNameServerPeriod" => 30_000,
        pub transaction_timeout_ms: u64 = "transactionTimeOut" => 6_000,
        pub transaction_check_max: i32 = "transactionCheckMax" => 15,
        pub transaction_check_interval_ms: u64 = "transactionCheckInterval" => 60_000,
        pub acl_enable: bool = "aclEnable" => false,
        /// 5.3's `AuthConfig` key: `{"accessKey":"...","secretKey":"..."}` this broker signs its
        /// requests to its master with (a slave's metadata sync), as `AclClientRPCHook` signs.
        pub inner_client_authentication_credentials: String = "innerClientAuthenticationCredentials" => String::new(),
        pub store_reply_message_enable: bool = "storeReplyMessageEnable" => true,
        pub enable_detail_stat: bool = "enableDetailStat" => true,
        pub auto_delete_unused_stats: bool = "autoDeleteUnusedStats" => false,
        pub isolate_log_enable: bool = "isolateLogEnable" => false,
        // 5.x metrics (BrokerMetricsManager): only the PROM exporter is built.
        pub metrics_exporter_type: remoting::metrics::MetricsExporterType = "metricsExporterType" => Default::default(),
        pub metrics_otel_cardinality_limit: usize = "metricsOtelCardinalityLimit" => 50_000,
        pub metrics_prom_exporter_port: u16 = "metricsPromExporterPort" => 5557,
        pub metrics_prom_exporter_host: String = "metricsPromExporterHost" => String::new(),
        /// `key:value` pairs separated by commas, added to every series.
        pub metrics_label: String = "metricsLabel" => String::new(),
        pub metrics_in_delta: bool = "metricsInDelta" => false,
        /// 5.x: the cold-read thresholds GET_COLD_DATA_FLOW_CTR_INFO reports (bytes per group and
        /// in all; the cold-read flow control that acts on them is not built).
        pub cg_cold_read_threshold: i64 = "cgColdReadThreshold" => 3 * 1024 * 1024,
        pub global_cold_read_threshold: i64 = "globalColdReadThreshold" => 100 * 1024 * 1024,
        /// 5.x: INVOKE_BROKER_TO_RESET_OFFSET resets the group's offsets on the broker (each queue's
        /// next pull is told, OFFSET_MOVED) instead of asking its live clients (4.9's path, false).
        pub use_server_side_reset_offset: bool = "useServerSideResetOffset" => true,
        // 5.x pop consumption (Java 5.3.3 `BrokerConfig`): the revive topic's queues and scan, the
        // retry topics, long polling of pops, the buffer merge (`popping::merge`, off as in Java).
        // The KV service is not built: its keys are kept and off, as Java's defaults.
        pub revive_queue_num: i32 = "reviveQueueNum" => 8,
        pub revive_interval_ms: u64 = "reviveInterval" => 1000,
        pub revive_max_slow: u64 = "reviveMaxSlow" => 3,
        pub revive_scan_time_ms: u64 = "reviveScanTime" => 10_000,
        pub enable_skip_long_awaiting_ack: bool = "enableSkipLongAwaitingAck" => false,
        pub revive_ack_wait_ms: i64 = "reviveAckWaitMs" => 3 * 60 * 1000,
        pub enable_pop_log: bool = "enablePopLog" => false,
        pub enable_pop_buffer_merge: bool = "enablePopBufferMerge" => false,
        pub pop_ck_stay_buffer_time: i32 = "popCkStayBufferTime" => 10_000,
        pub pop_ck_stay_buffer_time_out: i32 = "popCkStayBufferTimeOut" => 3_000,
        pub pop_ck_max_buffer_size: i32 = "popCkMaxBufferSize" => 200_000,
        pub pop_ck_offset_max_queue_size: i32 = "popCkOffsetMaxQueueSize" => 20_000,
        pub enable_pop_batch_ack: bool = "enablePopBatchAck" => false,
        pub pop_polling_size: usize = "popPollingSize" => 1024,
        pub pop_polling_map_size: usize = "popPollingMapSize" => 100_000,
        pub max_pop_polling_size: usize = "maxPopPollingSize" => 100_000,
        pub init_pop_offset_by_check_msg_in_mem: bool = "initPopOffsetByCheckMsgInMem" => true,
        pub retrieve_message_from_pop_retry_topic_v1: bool = "retrieveMessageFromPopRetryTopicV1" => true,
        pub enable_retry_topic_v2: bool = "enableRetryTopicV2" => false,
        /// Percent, 0..=100.
        pub pop_from_retry_probability: i32 = "popFromRetryProbability" => 20,
        pub pop_response_return_actual_retry_topic: bool = "popResponseReturnActualRetryTopic" => false,
        pub skip_when_ck_re_put_reach_max_times: bool = "skipWhenCKRePutReachMaxTimes" => false,
        pub pop_inflight_message_threshold: i64 = "popInflightMessageThreshold" => 10_000,
        pub enable_pop_message_threshold: bool = "enablePopMessageThreshold" => false,
        pub pop_consumer_kv_service_enable: bool = "popConsumerKVServiceEnable" => false,
        // 5.x server-side load balancing (QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE) and topic attributes.
        pub load_balance_processor_thread_pool_nums: usize = "loadBalanceProcessorThreadPoolNums" => 32,
        pub load_balance_thread_pool_queue_capacity: usize = "loadBalanceThreadPoolQueueCapacity" => 100_000,
        pub load_balance_poll_name_server_interval_ms: u64 = "loadBalancePollNameServerInterval" => 30_000,
        pub server_load_balancer_enable: bool = "serverLoadBalancerEnable" => true,
        pub default_message_request_mode: crate::pop::config_files::MessageRequestMode = "defaultMessageRequestMode" => Default::default(),
        pub default_pop_share_queue_num: i32 = "defaultPopShareQueueNum" => -1,
        pub enable_mixed_message_type: bool = "enableMixedMessageType" => false,

        // ---- Java 5.3.3 features this broker does not have: taken, printed and persisted as Java
        // does; a value other than the default refuses the start (`BrokerConfig::unsupported`).
        pub enable_controller_mode: bool = "enableControllerMode" => false,
        pub enable_slave_acting_master: bool = "enableSlaveActingMaster" => false,
        pub use_static_subscription: bool = "useStaticSubscription" => false,
        pub reject_pull_consumer_enable: bool = "rejectPullConsumerEnable" => false,
        pub lock_in_strict_mode: bool = "lockInStrictMode" => false,
        pub enable_net_work_flow_control: bool = "enableNetWorkFlowControl" => false,
        pub cold_ctr_strategy_enable: bool = "coldCtrStrategyEnable" => false,
        pub fetch_name_srv_addr_by_dns_lookup: bool = "fetchNameSrvAddrByDnsLookup" => false,
        pub fetch_controller_addr_by_dns_lookup: bool = "fetchControllerAddrByDnsLookup" => false,
        /// Pop's RocksDB consumer store (5.3.3).
        pub pop_consumer_kv_service_init: bool = "popConsumerKVServiceInit" => false,
        pub enable_remote_escape: bool = "enableRemoteEscape" => false,
        // ---- Java 5.3.3 keys that tune parts of Java's broker this one does not have (controller
        // mode, its Netty groups, account stats, split registration, the gRPC metrics exporter, ...):
        // taken, printed and persisted, with no effect; one set to other than the default is named
        // at start (`BrokerConfig::inert_settings`).
        pub account_stats_enable: bool = "accountStatsEnable" => true,
        pub account_stats_print_zero_values: bool = "accountStatsPrintZeroValues" => true,
        pub admin_broker_thread_pool_queue_capacity: i32 = "adminBrokerThreadPoolQueueCapacity" => 10000,
        pub async_send_enable: bool = "asyncSendEnable" => true,
        pub broadcast_offset_expire_max_second: i64 = "broadcastOffsetExpireMaxSecond" => 5 * 60,
        pub broadcast_offset_expire_second: i64 = "broadcastOffsetExpireSecond" => 2 * 60,
        pub broker_election_priority: i32 = "brokerElectionPriority" => i32::MAX,
        pub broker_heartbeat_interval: i32 = "brokerHeartbeatInterval" => 1000,
        pub broker_not_active_timeout_millis: i64 = "brokerNotActiveTimeoutMillis" => 10 * 1000,
        pub channel_expired_timeout: i64 = "channelExpiredTimeout" => 1000 * 120,
        pub check_sync_state_set_period: i64 = "checkSyncStateSetPeriod" => 5 * 1000,
        pub clean_offline_broker_interval: i32 = "cleanOfflineBrokerInterval" => 1000 * 30,
        pub clear_retry_topic_when_delete_topic: bool = "clearRetryTopicWhenDeleteTopic" => true,
        pub commercial_size_per_msg: i32 = "commercialSizePerMsg" => 4 * 1024,
        pub compatible_with_old_name_srv: bool = "compatibleWithOldNameSrv" => true,
        pub config_manager_version: String = "configManagerVersion" => "v1".to_owned(),
        pub consumer_offset_update_version_step: i64 = "consumerOffsetUpdateVersionStep" => 500,
        pub controller_addr: String = "controllerAddr" => String::new(),
        pub controller_heart_beat_timeout_mills: i64 = "controllerHeartBeatTimeoutMills" => 10 * 1000,
        pub delay_offset_update_version_step: i64 = "delayOffsetUpdateVersionStep" => 200,
        pub disable_callback_executor: bool = "disableCallbackExecutor" => false,
        pub disable_netty_worker_group: bool = "disableNettyWorkerGroup" => false,
        pub enable_broadcast_offset_store: bool = "enableBroadcastOffsetStore" => true,
        pub enable_create_sys_group: bool = "enableCreateSysGroup" => true,
        pub enable_fast_channel_event_process: bool = "enableFastChannelEventProcess" => false,
        pub enable_lmq_stats: bool = "enableLmqStats" => false,
        pub enable_reconnect_for_go_away: bool = "enableReconnectForGoAway" => true,
        pub enable_register_producer: bool = "enableRegisterProducer" => true,
        pub enable_shutdown_gracefully: bool = "enableShutdownGracefully" => false,
        pub enable_single_topic_register: bool = "enableSingleTopicRegister" => false,
        pub enable_split_registration: bool = "enableSplitRegistration" => false,
        pub estimate_accumulation: bool = "estimateAccumulation" => true,
        pub fetch_namesrv_addr_interval: i64 = "fetchNamesrvAddrInterval" => 10 * 1000,
        pub forward_timeout: i64 = "forwardTimeout" => 3 * 1000,
        pub lite_pull_message_enable: bool = "litePullMessageEnable" => true,
        pub lite_pull_message_thread_pool_nums: usize = "litePullMessageThreadPoolNums" => 16 + cpus() * 2,
        pub lite_pull_thread_pool_queue_capacity: i32 = "litePullThreadPoolQueueCapacity" => 100000,
        pub max_reconnect_interval_time_seconds: i64 = "maxReconnectIntervalTimeSeconds" => 60,
        pub max_stats_idle_time_in_minutes: i32 = "maxStatsIdleTimeInMinutes" => -1,
        pub metric_grpc_exporter_interval_in_mills: i64 = "metricGrpcExporterIntervalInMills" => 60 * 1000,
        pub metric_grpc_exporter_time_out_in_mills: i64 = "metricGrpcExporterTimeOutInMills" => 3 * 1000,
        pub metric_logging_exporter_interval_in_mills: i64 = "metricLoggingExporterIntervalInMills" => 10 * 1000,
        pub metrics_grpc_exporter_header: String = "metricsGrpcExporterHeader" => String::new(),
        pub metrics_grpc_exporter_target: String = "metricsGrpcExporterTarget" => String::new(),
        pub print_channel_groups: bool = "printChannelGroups" => false,
        pub print_channel_groups_min_num: i32 = "printChannelGroupsMinNum" => 5,
        pub real_time_notify_consumer_change: bool = "realTimeNotifyConsumerChange" => true,
        pub recover_concurrently: bool = "recoverConcurrently" => false,
        pub recover_thread_pool_nums: i32 = "recoverThreadPoolNums" => 32,
        pub send_heartbeat_timeout_millis: i32 = "sendHeartbeatTimeoutMillis" => 1000,
        pub server_netty_worker_group_enable: bool = "serverNettyWorkerGroupEnable" => true,
        pub shutdown_wait_time_seconds: i32 = "shutdownWaitTimeSeconds" => 30,
        pub skip_pre_online: bool = "skipPreOnline" => false,
        pub socks_proxy_config: String = "socksProxyConfig" => "{}".to_owned(),
        pub split_registration_size: i32 = "splitRegistrationSize" => 800,
        pub subscription_expired_timeout: i64 = "subscriptionExpiredTimeout" => 1000 * 60 * 10,
        pub sync_broker_member_group_period: i32 = "syncBrokerMemberGroupPeriod" => 1000,
        pub sync_broker_metadata_period: i64 = "syncBrokerMetadataPeriod" => 5 * 1000,
        pub sync_controller_metadata_period: i64 = "syncControllerMetadataPeriod" => 10 * 1000,
        pub transaction_metric_flush_interval: i64 = "transactionMetricFlushInterval" => 3 * 1000,
        pub transaction_op_batch_interval: i32 = "transactionOpBatchInterval" => 3000,
        pub transaction_op_msg_max_size: i32 = "transactionOpMsgMaxSize" => 4096,
        pub update_name_server_addr_period: i32 = "updateNameServerAddrPeriod" => 1000 * 120,
        pub use_pid_cold_ctr_strategy: bool = "usePIDColdCtrStrategy" => true,
        // Pop's own pools and asynchronous appends (ours serves acks on the pull pool and stores a
        // check point with its offset), its KV service's log, and the retries of Java's revive.
        pub ack_message_thread_pool_nums: i32 = "ackMessageThreadPoolNums" => 16,
        pub ack_thread_pool_queue_capacity: i32 = "ackThreadPoolQueueCapacity" => 100000,
        pub wait_time_millis_in_ack_queue: i64 = "waitTimeMillsInAckQueue" => 3000,
        pub wait_time_millis_in_lite_pull_queue: i64 = "waitTimeMillsInLitePullQueue" => 5 * 1000,
        pub append_ack_async: bool = "appendAckAsync" => false,
        pub append_ck_async: bool = "appendCkAsync" => false,
        pub enable_notify_after_pop_order_lock_release: bool = "enableNotifyAfterPopOrderLockRelease" => true,
        pub enable_notify_before_pop_calculate_lag: bool = "enableNotifyBeforePopCalculateLag" => true,
        pub pop_consumer_fs_service_init: bool = "popConsumerFSServiceInit" => true,
        pub pop_consumer_kv_service_log: bool = "popConsumerKVServiceLog" => false,
        pub pop_long_polling_force_notify_interval: i64 = "popLongPollingForceNotifyInterval" => 800,
        pub pop_revive_max_attempt_times: i32 = "popReviveMaxAttemptTimes" => 16,
        pub pop_revive_max_return_size_per_read: i32 = "popReviveMaxReturnSizePerRead" => 16 * 1024,
        pub validate_system_topic_when_update_topic: bool = "validateSystemTopicWhenUpdateTopic" => true,

        // Limits of this broker (not Java's keys): what a client may ask for is bounded here.
        /// The most read or write queues a topic (or a group's retry topic) may be given; Java has
        /// no limit, and 4096 is four times RocketMQ's own 1024-queue BenchmarkTest.
        pub max_topic_queue_nums: u32 = "maxTopicQueueNums" => 4096,
        /// Long-polling pulls parked at once, per connection and in all. A push consumer parks
        /// one pull per queue it owns; past a cap the pull is answered SYSTEM_BUSY and the client
        /// retries it 3 s later.
        pub max_parked_pulls_per_connection: usize = "maxParkedPullsPerConnection" => 16_384,
        pub max_parked_pulls: usize = "maxParkedPulls" => 100_000,
        /// Client connections served at once; past it a new one is closed at once. Java has no
        /// cap (it accepts until file descriptors run out, locking admin tools out too).
        pub server_max_connections: usize = "serverMaxConnections" => remoting::server::DEFAULT_MAX_CONNECTIONS,

        // NettyServerConfig (mqbroker sets listenPort to 10911 before reading the file).
        pub listen_port: u16 = "listenPort" => 10911,
        /// Java 5.x `NettyServerConfig.bindAddress`.
        pub bind_address: String = "bindAddress" => "0.0.0.0".to_owned(),
        pub server_worker_threads: usize = "serverWorkerThreads" => 8,
        pub server_callback_executor_threads: usize = "serverCallbackExecutorThreads" => 0,
        pub server_selector_threads: usize = "serverSelectorThreads" => 3,
        pub server_oneway_semaphore_value: usize = "serverOnewaySemaphoreValue" => 256,
        pub server_async_semaphore_value: usize = "serverAsyncSemaphoreValue" => 64,
        pub server_channel_max_idle_time_seconds: u64 = "serverChannelMaxIdleTimeSeconds" => 120,
        pub server_socket_snd_buf_size: usize = "serverSocketSndBufSize" => 0,
        pub server_socket_rcv_buf_size: usize = "serverSocketRcvBufSize" => 0,
        /// Java's server and client configs share this key.
        pub write_buffer_high_water_mark: usize = "writeBufferHighWaterMark" => 0,
        /// Java's server and client configs share this key.
        pub write_buffer_low_water_mark: usize = "writeBufferLowWaterMark" => 0,
        pub server_socket_backlog: usize = "serverSocketBacklog" => 1024,
        pub server_pooled_byte_buf_allocator_enable: bool = "serverPooledByteBufAllocatorEnable" => true,
        pub use_epoll_native_selector: bool = "useEpollNativeSelector" => false,

        // NettyClientConfig (the broker's connections to name servers and, as a slave, its master).
        pub client_worker_threads: usize = "clientWorkerThreads" => 4,
        pub client_callback_executor_threads: usize = "clientCallbackExecutorThreads" => cpus(),
        pub client_oneway_semaphore_value: usize = "clientOnewaySemaphoreValue" => 65_535,
        pub client_async_semaphore_value: usize = "clientAsyncSemaphoreValue" => 65_535,
        pub connect_timeout_ms: u64 = "connectTimeoutMillis" => 3_000,
        pub channel_not_active_interval_ms: u64 = "channelNotActiveInterval" => 60_000,
        pub client_channel_max_idle_time_seconds: u64 = "clientChannelMaxIdleTimeSeconds" => 120,
        pub client_socket_snd_buf_size: usize = "clientSocketSndBufSize" => 0,
        pub client_socket_rcv_buf_size: usize = "clientSocketRcvBufSize" => 0,
        pub client_pooled_byte_buf_allocator_enable: bool = "clientPooledByteBufAllocatorEnable" => false,
        pub client_close_socket_if_timeout: bool = "clientCloseSocketIfTimeout" => true,
        pub use_tls: bool = "useTLS" => false,
    }
}

impl BrokerConfig {
    /// The keys of features this broker does not have set to other than Java's default, as
    /// `key=value`: the broker refuses to start with any.
    pub fn unsupported(&self) -> Vec<String> {
        self.differing_from_default(&Self::keys_between("enableControllerMode", "enableRemoteEscape"))
    }

    /// The keys of Java's implementation details set to other than Java's default, as
    /// `key=value`: taken, with no effect (the broker says so at start).
    pub fn inert_settings(&self) -> Vec<String> {
        self.differing_from_default(&Self::keys_between("accountStatsEnable", "validateSystemTopicWhenUpdateTopic"))
    }

    /// The name-server addresses, `namesrvAddr` split at `;`.
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrv_addr.split(';').map(str::trim).filter(|a| !a.is_empty()).map(str::to_owned).collect()
    }
}

/// Applies `broker.conf` text, as Java's `MixAll.properties2Object` does for each config object:
/// a key known to either struct is set there, the rest are returned (Java ignores them).
/// Then [`apply_startup_rules`].
pub fn apply_properties(properties: &IndexMap<String, String>) -> Result<(BrokerConfig, MessageStoreConfig, Vec<String>), ConfigError> {
    let mut broker = BrokerConfig::default();
    let mut store = MessageStoreConfig::default();
    let mut unknown = Vec::new();
    for (key, value) in properties {
        let known_to_broker = broker.set(key, value)?;
        let known_to_store = store.set(key, value)?;
        if !known_to_broker && !known_to_store {
            unknown.push(key.clone());
        }
    }
    let ha_port_set = properties.get("haListenPort").is_some_and(|v| v.trim() != "0");
    if !ha_port_set {
        // listenPort + 1 (Java 4.9 always, 5.x unless haListenPort is set); any free port when
        // the broker itself takes any free port (tests).
        store.ha_listen_port = match broker.listen_port {
            0 => 0,
            port => port.checked_add(1).ok_or(ConfigError::NoHaPort { listen_port: port })?,
        };
    }
    apply_startup_rules(&mut broker, &store)?;
    Ok((broker, store, unknown))
}

/// Reads a `broker.conf` (`mqbroker -c FILE`) and applies it with [`apply_properties`]. Java reads
/// the file as ISO-8859-1; we read UTF-8, and ISO-8859-1 only when the bytes are not UTF-8.
pub fn load_broker_conf(path: &Path) -> Result<(BrokerConfig, MessageStoreConfig, Vec<String>), ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => e.into_bytes().iter().map(|&b| char::from(b)).collect(),
    };
    apply_properties(&remoting::properties::parse(&text))
}

/// What `BrokerStartup` checks and fixes after reading the file: every name-server address must be
/// `host:port`; a master's brokerId is forced to 0; a slave's must be positive. Beyond Java, the
/// values that reach messages must be free of control characters and short
/// ([`check_message_values`]).
pub fn apply_startup_rules(broker: &mut BrokerConfig, store: &MessageStoreConfig) -> Result<(), ConfigError> {
    check_message_values(broker)?;
    if !broker.namesrv_addr.is_empty() && !namesrv_addr_is_valid(&broker.namesrv_addr) {
        return Err(ConfigError::NamesrvAddr { addr: broker.namesrv_addr.clone() });
    }
    match store.broker_role {
        BrokerRole::AsyncMaster | BrokerRole::SyncMaster => broker.broker_id = 0,
        BrokerRole::Slave if broker.broker_id <= 0 => return Err(ConfigError::SlaveBrokerId { broker_id: broker.broker_id }),
        BrokerRole::Slave => {}
    }
    let unsupported: Vec<String> = broker.unsupported().into_iter().chain(store.unsupported()).collect();
    if !unsupported.is_empty() {
        return Err(ConfigError::Unsupported { settings: unsupported.join(", ") });
    }
    if store.enable_dleger_commit_log {
        // Java: the group decides the id (0 for its leader); -1 until then.
        broker.broker_id = -1;
    }
    Ok(())
}

/// Java's `RemotingUtil.string2SocketAddress` on each `;`-separated part: `host:port` split at the
/// last colon, the port a valid port number. Trailing empty parts are ignored as Java's `split` does.
fn namesrv_addr_is_valid(addr: &str) -> bool {
    let mut parts: Vec<&str> = addr.split(';').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    !parts.is_empty() && parts.iter().all(|part| part.rsplit_once(':').is_some_and(|(_, port)| port.parse::<u16>().is_ok()))
}

/// The store's keys that Java leaves null unless they are set; GET_BROKER_CONFIG prints no line
/// for a null (`MixAll.object2Properties` skips it).
const NULL_UNLESS_SET: [&str; 10] = [
    "storePathCommitLog",
    "storePathDLedgerCommitLog",
    "haMasterAddress",
    "dLegerGroup",
    "dLegerPeers",
    "dLegerSelfId",
    "preferredLeaderId",
    "readOnlyCommitLogStorePaths",
    "storePathBrokerIdentity",
    "storePathEpochFile",
];

pub fn without_unset_paths(printed: &str) -> String {
    printed.lines().filter(|line| !line.strip_suffix('=').is_some_and(|key| NULL_UNLESS_SET.contains(&key))).flat_map(|line| [line, "\n"]).collect()
}

/// The config's own data version (GET_BROKER_CONFIG's `version`), moved on by every update.
#[derive(Debug)]
pub struct ConfigVersion {
    version: parking_lot::Mutex<remoting::protocol::topic::DataVersion>,
    /// Java's method is `synchronized`: one update at a time, so no update is lost.
    updating: parking_lot::Mutex<()>,
}

impl Default for ConfigVersion {
    fn default() -> Self {
        ConfigVersion { version: parking_lot::Mutex::new(crate::config_file::new_data_version()), updating: Default::default() }
    }
}

impl ConfigVersion {
    pub fn current(&self) -> remoting::protocol::topic::DataVersion {
        self.version.lock().clone()
    }

    /// Moves the version on after an update.
    pub fn next(&self) {
        crate::config_file::next_version(&mut self.version.lock());
    }

    /// Held while an update is applied and persisted.
    pub fn one_at_a_time(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.updating.lock()
    }
}

/// The broker's config as UPDATE_BROKER_CONFIG leaves it: a handle services keep and read at
/// each use.
pub type LiveConfig = std::sync::Arc<arc_swap::ArcSwap<BrokerConfig>>;

/// `mqbroker -p`: every key with its value, one `key=value` line each, the broker's keys first
/// (as Java prints `BrokerConfig`, `NettyServerConfig`, `NettyClientConfig`, then
/// `MessageStoreConfig`).
/// Keys that hold a secret: never printed (GET_BROKER_CONFIG, `-p`; Java keeps them in its
/// `AuthConfig`, which it does not print), only written back to the config file when set.
pub const SECRET_KEYS: [&str; 1] = ["innerClientAuthenticationCredentials"];

/// Values are escaped as `Properties.store` escapes them, so every value stays on its line and
/// reads back as it is.
pub fn print_all(broker: &BrokerConfig, store: &MessageStoreConfig) -> String {
    print_entries(&all_entries(broker, store))
}

/// Every key with its value, the broker's first, but the [`SECRET_KEYS`].
pub fn all_entries(broker: &BrokerConfig, store: &MessageStoreConfig) -> Vec<(&'static str, String)> {
    broker.entries().into_iter().chain(store.entries()).filter(|(key, _)| !SECRET_KEYS.contains(key)).collect()
}

/// `key=value` lines, escaped as `Properties.store` escapes them.
pub fn print_entries(entries: &[(&'static str, String)]) -> String {
    remoting::properties::write(entries.iter().map(|(k, v)| (*k, v.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_netty_server_key_is_a_broker_key() {
        let missing: Vec<&str> = remoting::config::NETTY_SERVER_KEYS.into_iter().filter(|k| !BrokerConfig::keys().contains(k)).collect();
        assert_eq!(missing, Vec::<&str>::new());
    }

    fn props(pairs: &[(&str, &str)]) -> IndexMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn defaults_match_java_4_9_7() {
        let c = BrokerConfig::default();
        assert_eq!(c.broker_cluster_name, "DefaultCluster");
        assert_eq!((c.broker_id, c.broker_permission, c.default_topic_queue_nums), (0, 6, 8));
        assert_eq!(c.listen_port, 10911);
        assert!(c.auto_create_topic_enable && c.cluster_topic_enable && c.broker_topic_enable);
        assert!(c.auto_create_subscription_group && c.long_polling_enable && c.trace_on && c.force_register);
        assert!(!c.trace_topic_enable && !c.acl_enable && !c.slave_read_enable && !c.compressed_register);
        assert_eq!(c.msg_trace_topic_name, "RMQ_SYS_TRACE_TOPIC");
        assert_eq!(c.region_id, "DefaultRegion");
        assert_eq!((c.flush_consumer_offset_interval_ms, c.register_name_server_period_ms), (5_000, 30_000));
        assert_eq!((c.send_thread_pool_queue_capacity, c.pull_thread_pool_queue_capacity), (10_000, 100_000));
        assert_eq!((c.wait_time_ms_in_send_queue, c.wait_time_ms_in_pull_queue), (200, 5_000));
        assert_eq!((c.transaction_timeout_ms, c.transaction_check_max, c.transaction_check_interval_ms), (6_000, 15, 60_000));
        assert_eq!(c.consumer_fallbehind_threshold_bytes, 17_179_869_184);
        assert!(c.send_message_thread_pool_nums >= 1 && c.send_message_thread_pool_nums <= 4);
        assert!(c.end_transaction_thread_pool_nums >= c.send_message_thread_pool_nums * 4);
        assert!(!c.broker_name.is_empty());
        assert!(c.broker_ip1.parse::<std::net::Ipv4Addr>().is_ok(), "{}", c.broker_ip1);
    }

    #[test]
    fn the_local_address_follows_javas_preference() {
        let list = |ips: &[&str]| ips.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(pick_local_address(&list(&["192.168.1.5", "10.0.0.7", "172.17.0.1"])), "10.0.0.7");
        assert_eq!(pick_local_address(&list(&["192.168.1.5", "192.168.2.9"])), "192.168.2.9");
        assert_eq!(pick_local_address(&[]), "127.0.0.1");
    }

    #[test]
    fn one_file_sets_both_structs_and_reports_the_rest() {
        let (broker, store, unknown) = apply_properties(&props(&[
            ("brokerName", "broker-b"),
            ("listenPort", "20911"),
            ("storePathRootDir", "/data/rmq"),
            ("flushDiskType", "SYNC_FLUSH"),
            ("writeBufferHighWaterMark", "65536"),
            ("enableFooBar", "true"),
        ]))
        .unwrap();
        assert_eq!(broker.broker_name, "broker-b");
        assert_eq!(broker.listen_port, 20911);
        assert_eq!(broker.write_buffer_high_water_mark, 65536);
        assert_eq!(store.store_path_root_dir, "/data/rmq");
        assert_eq!(store.flush_disk_type, store::config::FlushDiskType::SyncFlush);
        assert_eq!(unknown, vec!["enableFooBar".to_owned()]);
    }

    #[test]
    fn ha_listen_port_follows_listen_port_unless_set() {
        let (_, store, _) = apply_properties(&props(&[("listenPort", "20911")])).unwrap();
        assert_eq!(store.ha_listen_port, 20912);
        let (_, store, _) = apply_properties(&props(&[])).unwrap();
        assert_eq!(store.ha_listen_port, 10912);
        let (_, store, _) = apply_properties(&props(&[("listenPort", "20911"), ("haListenPort", "30000")])).unwrap();
        assert_eq!(store.ha_listen_port, 30000);
        let (_, store, _) = apply_properties(&props(&[("listenPort", "20911"), ("haListenPort", "0")])).unwrap();
        assert_eq!(store.ha_listen_port, 20912);
        assert!(matches!(apply_properties(&props(&[("listenPort", "65535")])), Err(ConfigError::NoHaPort { listen_port: 65535 })));
    }

    #[test]
    fn startup_rules_fix_a_masters_id_and_refuse_a_slave_without_one() {
        let (broker, _, _) = apply_properties(&props(&[("brokerId", "3")])).unwrap();
        assert_eq!(broker.broker_id, 0);
        let (broker, _, _) = apply_properties(&props(&[("brokerId", "2"), ("brokerRole", "SLAVE")])).unwrap();
        assert_eq!(broker.broker_id, 2);
        assert!(matches!(apply_properties(&props(&[("brokerRole", "SLAVE")])), Err(ConfigError::SlaveBrokerId { broker_id: 0 })));
    }

    #[test]
    fn every_store_key_of_java_5_is_taken_and_features_not_built_refuse_the_start() {
        // Java's defaults, said explicitly, start; so do keys that tune only Java's implementation.
        let (_, store, unknown) =
            apply_properties(&props(&[("storeType", "default"), ("enableLmq", "false"), ("dispatchCqThreads", "4"), ("cleanFileForciblyEnable", "false")]))
                .unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(store.inert_settings(), vec!["dispatchCqThreads=4".to_owned()]);
        assert!(!store.clean_file_forcibly_enable);
        let refused = apply_properties(&props(&[("storeType", "defaultRocksDB"), ("enableLmq", "true"), ("dispatchCqThreads", "4")])).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "this broker does not have what these keys ask for: storeType=defaultRocksDB, enableLmq=true; remove them or set Java's defaults (see README, \"Store keys\")"
        );
        // Every key the unsupported list names is a key, and none of them is inert.
        for key in store::config::UNSUPPORTED_KEYS {
            assert!(MessageStoreConfig::keys().contains(&key), "{key}");
        }
        assert!(MessageStoreConfig::default().unsupported().is_empty() && MessageStoreConfig::default().inert_settings().is_empty());
        assert_eq!(MessageStoreConfig::keys_between("accessMessageInMemoryHotRatio", "wakeFlushWhenPutMessage").len(), 82);
        // The broker's own: controller mode refuses the start; a Netty group switch is only named.
        let refused = apply_properties(&props(&[("enableControllerMode", "true")])).unwrap_err();
        assert!(refused.to_string().contains("enableControllerMode=true"), "{refused}");
        let (broker, _, _) = apply_properties(&props(&[("serverNettyWorkerGroupEnable", "false")])).unwrap();
        assert_eq!(broker.inert_settings(), vec!["serverNettyWorkerGroupEnable=false".to_owned()]);
        assert_eq!(BrokerConfig::keys_between("enableControllerMode", "enableRemoteEscape").len(), 11);
        assert_eq!(BrokerConfig::keys_between("accountStatsEnable", "validateSystemTopicWhenUpdateTopic").len(), 78);
        assert!(BrokerConfig::default().unsupported().is_empty() && BrokerConfig::default().inert_settings().is_empty());
    }

    #[test]
    fn name_server_addresses_must_be_host_and_port() {
        let (broker, _, _) = apply_properties(&props(&[("namesrvAddr", "127.0.0.1:9876;ns2:9876;")])).unwrap();
        assert_eq!(broker.namesrv_addrs(), vec!["127.0.0.1:9876".to_owned(), "ns2:9876".to_owned()]);
        for bad in ["127.0.0.1", "a:1;;b:2", "a:99999", ";"] {
            assert!(matches!(apply_properties(&props(&[("namesrvAddr", bad)])), Err(ConfigError::NamesrvAddr { .. })), "{bad}");
        }
    }

    #[test]
    fn a_bad_value_is_an_error_naming_its_key() {
        let err = apply_properties(&props(&[("defaultTopicQueueNums", "eight")])).unwrap_err();
        assert!(err.to_string().contains("defaultTopicQueueNums"), "{err}");
    }

    #[test]
    fn a_broker_conf_file_loads_and_prints_as_key_value_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(
            &path,
            "# broker-a\nbrokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = 0\n\
             deleteWhen = 04\nfileReservedTime = 48\nbrokerRole = ASYNC_MASTER\nflushDiskType = ASYNC_FLUSH\n",
        )
        .unwrap();
        let (broker, store, unknown) = load_broker_conf(&path).unwrap();
        assert!(unknown.is_empty());
        assert_eq!(store.file_reserved_time_hours, 48);
        let printed = print_all(&broker, &store);
        assert!(printed.starts_with("rocketmqHome="));
        assert!(printed.contains("\nbrokerName=broker-a\n"));
        assert!(printed.contains("\nlistenPort=10911\n"));
        assert!(printed.contains("\nfileReservedTime=48\n"));
        assert!(printed.contains("\nhaListenPort=10912\n"));
        assert!(matches!(load_broker_conf(&dir.path().join("missing.conf")), Err(ConfigError::Read { .. })));
    }

    #[test]
    fn a_latin1_file_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(&path, b"brokerName=b\xe4\n").unwrap();
        let (broker, _, _) = load_broker_conf(&path).unwrap();
        assert_eq!(broker.broker_name, "b\u{e4}");
    }
}
