//! `MessageStoreConfig`: the store's keys of `broker.conf`, with Java's names and defaults.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use remoting::config::ConfigValue;
use remoting::java_config;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushDiskType {
    SyncFlush,
    AsyncFlush,
}

impl ConfigValue for FlushDiskType {
    const EXPECTED: &'static str = "flush type (SYNC_FLUSH or ASYNC_FLUSH)";
    fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "SYNC_FLUSH" => Some(FlushDiskType::SyncFlush),
            "ASYNC_FLUSH" => Some(FlushDiskType::AsyncFlush),
            _ => None,
        }
    }
    fn to_text(&self) -> String {
        match self {
            FlushDiskType::SyncFlush => "SYNC_FLUSH",
            FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
        }
        .to_owned()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerRole {
    AsyncMaster,
    SyncMaster,
    Slave,
}

impl ConfigValue for BrokerRole {
    const EXPECTED: &'static str = "broker role (ASYNC_MASTER, SYNC_MASTER or SLAVE)";
    fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "ASYNC_MASTER" => Some(BrokerRole::AsyncMaster),
            "SYNC_MASTER" => Some(BrokerRole::SyncMaster),
            "SLAVE" => Some(BrokerRole::Slave),
            _ => None,
        }
    }
    fn to_text(&self) -> String {
        match self {
            BrokerRole::AsyncMaster => "ASYNC_MASTER",
            BrokerRole::SyncMaster => "SYNC_MASTER",
            BrokerRole::Slave => "SLAVE",
        }
        .to_owned()
    }
}

fn default_root() -> String {
    PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| ".".into())).join("store").to_string_lossy().into_owned()
}

java_config! {
    pub struct MessageStoreConfig {
        pub store_path_root_dir: String = "storePathRootDir" => default_root(),
        /// Empty means `<storePathRootDir>/commitlog`.
        pub store_path_commit_log: String = "storePathCommitLog" => String::new(),
        pub mapped_file_size_commit_log: usize = "mappedFileSizeCommitLog" => 1024 * 1024 * 1024,
        pub mapped_file_size_consume_queue: usize = "mappedFileSizeConsumeQueue" => 300_000 * 20,
        pub flush_interval_commit_log_ms: u64 = "flushIntervalCommitLog" => 500,
        pub commit_interval_commit_log_ms: u64 = "commitIntervalCommitLog" => 200,
        pub flush_commit_log_timed: bool = "flushCommitLogTimed" => true,
        pub flush_interval_consume_queue_ms: u64 = "flushIntervalConsumeQueue" => 1000,
        pub clean_resource_interval_ms: u64 = "cleanResourceInterval" => 10_000,
        pub delete_when: String = "deleteWhen" => "04".to_owned(),
        pub disk_max_used_space_ratio: u32 = "diskMaxUsedSpaceRatio" => 75,
        pub file_reserved_time_hours: u64 = "fileReservedTime" => 72,
        pub max_message_size: usize = "maxMessageSize" => 4 * 1024 * 1024,
        pub check_crc_on_recover: bool = "checkCRCOnRecover" => true,
        pub flush_commit_log_least_pages: usize = "flushCommitLogLeastPages" => 4,
        pub commit_commit_log_least_pages: usize = "commitCommitLogLeastPages" => 4,
        pub flush_least_pages_when_warm_mapped_file: usize = "flushLeastPagesWhenWarmMapedFile" => 1024 / 4 * 16,
        pub flush_consume_queue_least_pages: usize = "flushConsumeQueueLeastPages" => 2,
        pub flush_commit_log_thorough_interval_ms: u64 = "flushCommitLogThoroughInterval" => 10_000,
        pub commit_commit_log_thorough_interval_ms: u64 = "commitCommitLogThoroughInterval" => 200,
        pub flush_consume_queue_thorough_interval_ms: u64 = "flushConsumeQueueThoroughInterval" => 60_000,
        pub max_transfer_bytes_on_message_in_memory: usize = "maxTransferBytesOnMessageInMemory" => 256 * 1024,
        pub max_transfer_count_on_message_in_memory: usize = "maxTransferCountOnMessageInMemory" => 32,
        pub max_transfer_bytes_on_message_in_disk: usize = "maxTransferBytesOnMessageInDisk" => 64 * 1024,
        pub max_transfer_count_on_message_in_disk: usize = "maxTransferCountOnMessageInDisk" => 8,
        pub access_message_in_memory_max_ratio: u32 = "accessMessageInMemoryMaxRatio" => 40,
        pub message_index_enable: bool = "messageIndexEnable" => true,
        pub max_hash_slot_num: usize = "maxHashSlotNum" => 5_000_000,
        pub max_index_num: usize = "maxIndexNum" => 5_000_000 * 4,
        pub max_msgs_num_batch: usize = "maxMsgsNumBatch" => 64,
        pub message_index_safe: bool = "messageIndexSafe" => false,
        pub ha_listen_port: u16 = "haListenPort" => 10912,
        /// Master/slave replication (classic HA).
        pub ha_send_heartbeat_interval_ms: u64 = "haSendHeartbeatInterval" => 5_000,
        pub ha_housekeeping_interval_ms: u64 = "haHousekeepingInterval" => 20_000,
        pub ha_transfer_batch_size: usize = "haTransferBatchSize" => 32 * 1024,
        /// `host:port` of the master's HA port; empty: learnt from the name server.
        pub ha_master_address: String = "haMasterAddress" => String::new(),
        pub ha_slave_fallbehind_max: i64 = "haSlaveFallbehindMax" => 256 * 1024 * 1024,
        /// 5.x's name for `haSlaveFallbehindMax`; used when set.
        pub ha_max_gap_not_in_sync: i64 = "haMaxGapNotInSync" => 0,
        /// How long a SYNC_MASTER put waits for its slaves (4.9.3+ and 5.x).
        pub slave_timeout_ms: u64 = "slaveTimeout" => 3_000,
        /// 5.x: replicas (the master counts as one) a SYNC_MASTER put waits for. Java 5.x does not
        /// wait at all at its default of 1; this broker always waits for at least one slave.
        pub in_sync_replicas: usize = "inSyncReplicas" => 1,
        pub broker_role: BrokerRole = "brokerRole" => BrokerRole::AsyncMaster,
        pub flush_disk_type: FlushDiskType = "flushDiskType" => FlushDiskType::AsyncFlush,
        pub sync_flush_timeout_ms: u64 = "syncFlushTimeout" => 5000,
        /// Ours, not Java's (which has no bound): at most this many SYNC_FLUSH puts wait for a
        /// flush; more are answered FLUSH_DISK_TIMEOUT at once. The default is Java's send-queue
        /// capacity (`sendThreadPoolQueueCapacity`), the bound a blocking put had there.
        pub sync_flush_max_waiters: usize = "syncFlushMaxWaiters" => 10_000,
        pub message_delay_level: String = "messageDelayLevel" => "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h".to_owned(),
        pub warm_mapped_file_enable: bool = "warmMapedFileEnable" => false,
        pub default_query_max_num: usize = "defaultQueryMaxNum" => 32,
        pub transient_store_pool_enable: bool = "transientStorePoolEnable" => false,
        pub transient_store_pool_size: usize = "transientStorePoolSize" => 5,
        pub fast_fail_if_no_buffer_in_store_pool: bool = "fastFailIfNoBufferInStorePool" => false,
        /// A put that has held the commit log's append lock longer than this makes the page cache
        /// "busy" (Java's `isOSPageCacheBusy`): sends are refused and the send queue cleaned.
        pub os_page_cache_busy_timeout_ms: u64 = "osPageCacheBusyTimeOutMills" => 1_000,
        /// DLedger (Raft) commit log; not built yet, so the broker refuses to start with it on.
        pub enable_dleger_commit_log: bool = "enableDLegerCommitLog" => false,
        /// The DLedger group, its peers (`n0-host:port;n1-host:port;...`) and this member's id (one
        /// letter and digits: the broker id of a follower is the digits + 1), as Java passes them
        /// to `DLedgerConfig`; unset (Java: null) by default.
        pub d_leger_group: String = "dLegerGroup" => String::new(),
        pub d_leger_peers: String = "dLegerPeers" => String::new(),
        pub d_leger_self_id: String = "dLegerSelfId" => String::new(),
        pub preferred_leader_id: String = "preferredLeaderId" => String::new(),
        pub enable_batch_push: bool = "enableBatchPush" => false,
        /// DLedger's data directory (`DLedgerConfig.dataStorePath`); unset: `<storePathRootDir>/dledger-<selfId>/data`.
        pub store_path_dledger_commit_log: String = "storePathDLedgerCommitLog" => String::new(),
        /// 5.x timer messages (Java 5.3.3's `TimerMessageStore`), every `timer*` key with its
        /// default. `timerWheelEnable=false` refuses timer messages as Java does.
        pub timer_wheel_enable: bool = "timerWheelEnable" => true,
        pub mapped_file_size_timer_log: usize = "mappedFileSizeTimerLog" => 100 * 1024 * 1024,
        /// Rounded down to 100, 200, 500 or 1000 as Java's setter does ([`MessageStoreConfig::timer_precision`]).
        pub timer_precision_ms: u64 = "timerPrecisionMs" => 1000,
        pub timer_roll_window_slot: i64 = "timerRollWindowSlot" => 3600 * 24 * 2,
        pub timer_flush_interval_ms: u64 = "timerFlushIntervalMs" => 1000,
        /// Java's thread counts and queue kind; this timer runs one enqueue and one dequeue loop.
        pub timer_get_message_thread_num: u32 = "timerGetMessageThreadNum" => 3,
        pub timer_put_message_thread_num: u32 = "timerPutMessageThreadNum" => 3,
        pub timer_enable_disruptor: bool = "timerEnableDisruptor" => false,
        pub timer_enable_check_metrics: bool = "timerEnableCheckMetrics" => true,
        pub timer_intercept_delay_level: bool = "timerInterceptDelayLevel" => false,
        pub timer_max_delay_sec: i64 = "timerMaxDelaySec" => 3600 * 24 * 3,
        pub timer_stop_enqueue: bool = "timerStopEnqueue" => false,
        pub timer_check_metrics_when: String = "timerCheckMetricsWhen" => "05".to_owned(),
        pub timer_skip_unknown_error: bool = "timerSkipUnknownError" => false,
        pub timer_warm_enable: bool = "timerWarmEnable" => false,
        pub timer_stop_dequeue: bool = "timerStopDequeue" => false,
        pub timer_enable_retry_until_success: bool = "timerEnableRetryUntilSuccess" => false,
        pub timer_congest_num_each_slot: i64 = "timerCongestNumEachSlot" => i32::MAX as i64,
        pub timer_metric_small_threshold: i64 = "timerMetricSmallThreshold" => 1_000_000,
        pub timer_progress_log_interval_ms: u64 = "timerProgressLogIntervalMs" => 10_000,
        pub timer_cold_data_check_interval_ms: u64 = "timerColdDataCheckIntervalMs" => 60_000,
        /// Milliseconds after start before the timer dequeues (and pop revives); -1: at once.
        pub disappear_time_after_start: i64 = "disappearTimeAfterStart" => -1,
    }
}

impl MessageStoreConfig {
    pub fn root_dir(&self) -> PathBuf {
        PathBuf::from(&self.store_path_root_dir)
    }

    pub fn commit_log_dir(&self) -> PathBuf {
        if self.store_path_commit_log.is_empty() {
            self.root_dir().join("commitlog")
        } else {
            PathBuf::from(&self.store_path_commit_log)
        }
    }

    pub fn consume_queue_dir(&self) -> PathBuf {
        self.root_dir().join("consumequeue")
    }

    pub fn index_dir(&self) -> PathBuf {
        self.root_dir().join("index")
    }

    /// `timerPrecisionMs` as Java's setter keeps it: the largest of 100, 200, 500, 1000 not above
    /// the value (100 below that).
    pub fn timer_precision(&self) -> i64 {
        match self.timer_precision_ms {
            0..200 => 100,
            200..500 => 200,
            500..1000 => 500,
            _ => 1000,
        }
    }

    /// Java's rule: the transient pool only serves an asynchronously flushed master.
    pub fn transient_store_pool_in_use(&self) -> bool {
        self.transient_store_pool_enable && self.flush_disk_type == FlushDiskType::AsyncFlush && self.broker_role != BrokerRole::Slave
    }

    /// How far a slave may fall behind before SYNC_MASTER calls it not available: 5.x's
    /// `haMaxGapNotInSync` when set, else `haSlaveFallbehindMax`.
    pub fn ha_fallbehind_max(&self) -> i64 {
        if self.ha_max_gap_not_in_sync > 0 {
            self.ha_max_gap_not_in_sync
        } else {
            self.ha_slave_fallbehind_max
        }
    }

    /// Slaves a SYNC_MASTER put waits for: at least one whatever the version's default, and
    /// `inSyncReplicas - 1` when that asks for more.
    pub fn sync_slaves_needed(&self) -> usize {
        self.in_sync_replicas.saturating_sub(1).max(1)
    }

    /// Delay per level (index 0 = level 1) in milliseconds, parsed from `messageDelayLevel`.
    pub fn delay_levels_ms(&self) -> Vec<u64> {
        self.message_delay_level
            .split_whitespace()
            .filter_map(|level| {
                let (num, unit) = level.split_at(level.find(|c: char| !c.is_ascii_digit())?);
                let n: u64 = num.parse().ok()?;
                Some(
                    n * match unit {
                        "s" => 1000,
                        "m" => 60_000,
                        "h" => 3_600_000,
                        "d" => 86_400_000,
                        _ => return None,
                    },
                )
            })
            .collect()
    }
}

/// The store keys a running store follows at once (UPDATE_BROKER_CONFIG): each is read where it is
/// used, as Java reads its `MessageStoreConfig` field on each use; the rest of the store's config
/// is fixed at open.
#[derive(Debug)]
pub struct Tunables {
    max_message_size: AtomicUsize,
    flush_interval_commit_log_ms: AtomicU64,
    flush_commit_log_least_pages: AtomicUsize,
    max_transfer_bytes_on_message_in_memory: AtomicUsize,
    max_transfer_count_on_message_in_memory: AtomicUsize,
    max_transfer_bytes_on_message_in_disk: AtomicUsize,
    max_transfer_count_on_message_in_disk: AtomicUsize,
    access_message_in_memory_max_ratio: AtomicU32,
    os_page_cache_busy_timeout_ms: AtomicU64,
}

impl Tunables {
    /// The keys, as `broker.conf` spells them. `maxMessageSize` is followed by the plain commit
    /// log only (a DLedger log keeps the size it opened with, as Java's does).
    pub const KEYS: [&'static str; 9] = [
        "maxMessageSize",
        "flushIntervalCommitLog",
        "flushCommitLogLeastPages",
        "maxTransferBytesOnMessageInMemory",
        "maxTransferCountOnMessageInMemory",
        "maxTransferBytesOnMessageInDisk",
        "maxTransferCountOnMessageInDisk",
        "accessMessageInMemoryMaxRatio",
        "osPageCacheBusyTimeOutMills",
    ];

    pub fn new(config: &MessageStoreConfig) -> Tunables {
        let t = Tunables {
            max_message_size: AtomicUsize::new(0),
            flush_interval_commit_log_ms: AtomicU64::new(0),
            flush_commit_log_least_pages: AtomicUsize::new(0),
            max_transfer_bytes_on_message_in_memory: AtomicUsize::new(0),
            max_transfer_count_on_message_in_memory: AtomicUsize::new(0),
            max_transfer_bytes_on_message_in_disk: AtomicUsize::new(0),
            max_transfer_count_on_message_in_disk: AtomicUsize::new(0),
            access_message_in_memory_max_ratio: AtomicU32::new(0),
            os_page_cache_busy_timeout_ms: AtomicU64::new(0),
        };
        t.set(config);
        t
    }

    /// Takes the values of `config`; each use from now on follows them.
    pub fn set(&self, c: &MessageStoreConfig) {
        let relaxed = Ordering::Relaxed;
        self.max_message_size.store(c.max_message_size, relaxed);
        self.flush_interval_commit_log_ms.store(c.flush_interval_commit_log_ms, relaxed);
        self.flush_commit_log_least_pages.store(c.flush_commit_log_least_pages, relaxed);
        self.max_transfer_bytes_on_message_in_memory.store(c.max_transfer_bytes_on_message_in_memory, relaxed);
        self.max_transfer_count_on_message_in_memory.store(c.max_transfer_count_on_message_in_memory, relaxed);
        self.max_transfer_bytes_on_message_in_disk.store(c.max_transfer_bytes_on_message_in_disk, relaxed);
        self.max_transfer_count_on_message_in_disk.store(c.max_transfer_count_on_message_in_disk, relaxed);
        self.access_message_in_memory_max_ratio.store(c.access_message_in_memory_max_ratio, relaxed);
        self.os_page_cache_busy_timeout_ms.store(c.os_page_cache_busy_timeout_ms, relaxed);
    }

    pub fn max_message_size(&self) -> usize {
        self.max_message_size.load(Ordering::Relaxed)
    }

    pub fn flush_interval_commit_log_ms(&self) -> u64 {
        self.flush_interval_commit_log_ms.load(Ordering::Relaxed)
    }

    pub fn flush_commit_log_least_pages(&self) -> usize {
        self.flush_commit_log_least_pages.load(Ordering::Relaxed)
    }

    /// (bytes, count) a pull may take from memory, or from disk when `in_disk`.
    pub fn max_transfer(&self, in_disk: bool) -> (usize, usize) {
        let relaxed = Ordering::Relaxed;
        if in_disk {
            (self.max_transfer_bytes_on_message_in_disk.load(relaxed), self.max_transfer_count_on_message_in_disk.load(relaxed))
        } else {
            (self.max_transfer_bytes_on_message_in_memory.load(relaxed), self.max_transfer_count_on_message_in_memory.load(relaxed))
        }
    }

    pub fn access_message_in_memory_max_ratio(&self) -> u32 {
        self.access_message_in_memory_max_ratio.load(Ordering::Relaxed)
    }

    pub fn os_page_cache_busy_timeout_ms(&self) -> u64 {
        self.os_page_cache_busy_timeout_ms.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_delay_levels_match_java() {
        let c = MessageStoreConfig::default();
        assert_eq!(c.delay_levels_ms().len(), 18);
        assert_eq!(c.delay_levels_ms()[4], 60_000);
        assert_eq!(c.delay_levels_ms()[17], 7_200_000);
        assert!(!c.transient_store_pool_in_use());
        assert_eq!(c.commit_log_dir(), c.root_dir().join("commitlog"));
    }
}
