//! `NamesrvConfig` and the server keys, under their Java names and with Java's defaults.

use std::path::PathBuf;

use remoting::java_config;

fn home() -> String {
    std::env::var("HOME").unwrap_or_else(|_| ".".to_owned())
}

fn under_home(rest: &str) -> String {
    PathBuf::from(home()).join("namesrv").join(rest).to_string_lossy().into_owned()
}

java_config! {
    /// Everything `mqnamesrv -c FILE` reads. Keys Java has but we do not act on (Netty tuning) are
    /// kept so `-p` and GET_NAMESRV_CONFIG print what a Java user expects.
    pub struct NamesrvConfig {
        pub rocketmq_home: String = "rocketmqHome" => std::env::var("ROCKETMQ_HOME").unwrap_or_default(),
        pub kv_config_path: String = "kvConfigPath" => under_home("kvConfig.json"),
        pub config_store_path: String = "configStorePath" => under_home("namesrv.properties"),
        pub product_env_name: String = "productEnvName" => "center".to_owned(),
        pub cluster_test: bool = "clusterTest" => false,
        pub order_message_enable: bool = "orderMessageEnable" => false,
        pub return_order_topic_config_to_broker: bool = "returnOrderTopicConfigToBroker" => true,
        pub client_request_thread_pool_nums: usize = "clientRequestThreadPoolNums" => 8,
        pub default_thread_pool_nums: usize = "defaultThreadPoolNums" => 16,
        pub client_request_thread_pool_queue_capacity: usize = "clientRequestThreadPoolQueueCapacity" => 50_000,
        pub default_thread_pool_queue_capacity: usize = "defaultThreadPoolQueueCapacity" => 10_000,
        pub scan_not_active_broker_interval_ms: u64 = "scanNotActiveBrokerInterval" => 5_000,
        pub unregister_broker_queue_capacity: usize = "unRegisterBrokerQueueCapacity" => 3_000,
        pub support_acting_master: bool = "supportActingMaster" => false,
        pub enable_all_topic_list: bool = "enableAllTopicList" => true,
        pub enable_topic_list: bool = "enableTopicList" => true,
        pub notify_min_broker_id_changed: bool = "notifyMinBrokerIdChanged" => false,
        pub enable_controller_in_namesrv: bool = "enableControllerInNamesrv" => false,
        pub need_wait_for_service: bool = "needWaitForService" => false,
        pub wait_seconds_for_service: u64 = "waitSecondsForService" => 45,
        pub delete_topic_with_broker_registration: bool = "deleteTopicWithBrokerRegistration" => false,
        pub config_black_list: String = "configBlackList" => "configBlackList;configStorePath;kvConfigPath".to_owned(),
        pub bind_address: String = "bindAddress" => "0.0.0.0".to_owned(),
        pub listen_port: u16 = "listenPort" => 9876,
        pub server_worker_threads: usize = "serverWorkerThreads" => 8,
        pub server_callback_executor_threads: usize = "serverCallbackExecutorThreads" => 0,
        pub server_selector_threads: usize = "serverSelectorThreads" => 3,
        pub server_oneway_semaphore_value: usize = "serverOnewaySemaphoreValue" => 256,
        pub server_async_semaphore_value: usize = "serverAsyncSemaphoreValue" => 64,
        pub server_channel_max_idle_time_seconds: u64 = "serverChannelMaxIdleTimeSeconds" => 120,
        pub server_pooled_byte_buf_allocator_enable: bool = "serverPooledByteBufAllocatorEnable" => true,
        pub use_epoll_native_selector: bool = "useEpollNativeSelector" => false,
        pub server_socket_snd_buf_size: usize = "serverSocketSndBufSize" => 0,
        pub server_socket_rcv_buf_size: usize = "serverSocketRcvBufSize" => 0,
        pub write_buffer_high_water_mark: usize = "writeBufferHighWaterMark" => 0,
        pub write_buffer_low_water_mark: usize = "writeBufferLowWaterMark" => 0,
        pub server_socket_backlog: usize = "serverSocketBacklog" => 1024,
        pub server_netty_worker_group_enable: bool = "serverNettyWorkerGroupEnable" => true,
        pub enable_shutdown_gracefully: bool = "enableShutdownGracefully" => false,
        pub shutdown_wait_time_seconds: u64 = "shutdownWaitTimeSeconds" => 30,
        pub max_frame_bytes: usize = "frameMaxLength" => remoting::codec::DEFAULT_MAX_FRAME_BYTES,
        // Not Java's name-server keys: the broker's metrics keys, so a name server exports request
        // latency as a 5.x broker does (`rocketmq_rpc_latency`, node_type="namesrv").
        pub metrics_exporter_type: remoting::metrics::MetricsExporterType = "metricsExporterType" => Default::default(),
        pub metrics_prom_exporter_host: String = "metricsPromExporterHost" => String::new(),
        pub metrics_prom_exporter_port: u16 = "metricsPromExporterPort" => 5557,
        pub metrics_label: String = "metricsLabel" => String::new(),
        pub metrics_otel_cardinality_limit: usize = "metricsOtelCardinalityLimit" => 50_000,
    }
}

/// The keys UPDATE_NAMESRV_CONFIG may change at runtime. Everything else — paths, ports, bind
/// addresses, pool sizes, the black list itself — is refused: a remote caller must never be able to
/// point the name server at another file or socket.
pub const RUNTIME_UPDATABLE_KEYS: &[&str] = &[
    "productEnvName",
    "clusterTest",
    "orderMessageEnable",
    "returnOrderTopicConfigToBroker",
    "scanNotActiveBrokerInterval",
    "supportActingMaster",
    "enableAllTopicList",
    "enableTopicList",
    "notifyMinBrokerIdChanged",
    "needWaitForService",
    "waitSecondsForService",
    "deleteTopicWithBrokerRegistration",
];

#[cfg(test)]
mod tests {
    use remoting::config::{JavaConfig, NETTY_SERVER_KEYS};

    use super::NamesrvConfig;

    #[test]
    fn every_netty_server_key_is_a_name_server_key() {
        let missing: Vec<&str> = NETTY_SERVER_KEYS.into_iter().filter(|k| !NamesrvConfig::keys().contains(k)).collect();
        assert_eq!(missing, Vec::<&str>::new());
    }
}
