//! `MessageStoreConfig`: the store's keys of `broker.conf`, with Java's names and defaults.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use remoting::config::{ConfigValue, JavaConfig};
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
        /// The cleaning keys Java reads on each pass (live here too): forced deletion above the
        /// forcible ratio, the ratios in whole percents (Java clamps them to 30-85 and 35-90),
        /// and how many files one pass may delete.
        pub clean_file_forcibly_enable: bool = "cleanFileForciblyEnable" => true,
        pub disk_space_clean_forcibly_ratio: i32 = "diskSpaceCleanForciblyRatio" => 85,
        pub disk_space_warning_level_ratio: i32 = "diskSpaceWarningLevelRatio" => 90,
        pub delete_file_batch_max: usize = "deleteFileBatchMax" => 10,
        // ---- Java 5.3.3 features this store does not have. Taken, printed and persisted as Java
        // does; a value other than the default refuses the start ([`MessageStoreConfig::unsupported`]).
        /// `default` only; `defaultRocksDB` keeps consume queues in RocksDB.
        pub store_type: String = "storeType" => "default".to_owned(),
        pub enable_lmq: bool = "enableLmq" => false,
        pub enable_multi_dispatch: bool = "enableMultiDispatch" => false,
        pub enable_consume_queue_ext: bool = "enableConsumeQueueExt" => false,
        pub duplication_enable: bool = "duplicationEnable" => false,
        /// Java: null unless set.
        pub read_only_commit_log_store_paths: String = "readOnlyCommitLogStorePaths" => String::new(),
        pub enabled_append_prop_crc: bool = "enabledAppendPropCRC" => false,
        pub force_verify_prop_crc: bool = "forceVerifyPropCRC" => false,
        pub read_un_committed: bool = "readUnCommitted" => false,
        pub sync_from_last_file: bool = "syncFromLastFile" => false,
        pub offset_check_in_slave: bool = "offsetCheckInSlave" => false,
        pub ha_flow_control_enable: bool = "haFlowControlEnable" => false,
        pub cold_data_flow_control_enable: bool = "coldDataFlowControlEnable" => false,
        pub cold_data_scan_enable: bool = "coldDataScanEnable" => false,
        /// Controller mode's in-sync set (not built).
        pub all_ack_in_sync_state_set: bool = "allAckInSyncStateSet" => false,
        pub enable_auto_in_sync_replicas: bool = "enableAutoInSyncReplicas" => false,
        pub async_learner: bool = "asyncLearner" => false,
        pub rocksdb_cq_double_write_enable: bool = "rocksdbCQDoubleWriteEnable" => false,
        // ---- Java 5.3.3 keys that tune parts of Java's implementation this store does not have
        // (its thread pools, locks, swap of mapped files, RocksDB, compaction, the consume-queue
        // extension and LMQ when those are off, controller mode): taken, printed and persisted,
        // with no effect; a value other than the default is named at start
        // ([`MessageStoreConfig::inert_settings`]).
        pub access_message_in_memory_hot_ratio: i32 = "accessMessageInMemoryHotRatio" => 26,
        pub auto_message_version_on_topic_len: bool = "autoMessageVersionOnTopicLen" => true,
        pub batch_dispatch_request_thread_pool_nums: i32 = "batchDispatchRequestThreadPoolNums" => 16,
        pub bit_map_length_consume_queue_ext: i32 = "bitMapLengthConsumeQueueExt" => 64,
        pub bottom_most_compression_type_for_consume_queue_store: String = "bottomMostCompressionTypeForConsumeQueueStore" => "zstd".to_owned(),
        pub clean_rocks_db_dirty_cq_interval_min: i64 = "cleanRocksDBDirtyCQIntervalMin" => 60,
        pub clean_swaped_map_interval: i64 = "cleanSwapedMapInterval" => 5 * 60 * 1000,
        pub commit_log_force_swap_map_interval: i64 = "commitLogForceSwapMapInterval" => 12 * 60 * 60 * 1000,
        pub commit_log_swap_map_interval: i64 = "commitLogSwapMapInterval" => 60 * 60 * 1000,
        pub commit_log_swap_map_reserve_file_num: i32 = "commitLogSwapMapReserveFileNum" => 100,
        pub compaction_cq_mapped_file_size: i32 = "compactionCqMappedFileSize" => 10 * 1024 * 1024,
        pub compaction_mapped_file_size: i32 = "compactionMappedFileSize" => 100 * 1024 * 1024,
        pub compaction_schedule_internal: i32 = "compactionScheduleInternal" => 15 * 60 * 1000,
        pub compaction_thread_num: i32 = "compactionThreadNum" => 6,
        pub correct_logic_min_offset_force_interval: i32 = "correctLogicMinOffsetForceInterval" => 5 * 60 * 1000,
        pub correct_logic_min_offset_sleep_interval: i32 = "correctLogicMinOffsetSleepInterval" => 1,
        pub data_read_ahead_enable: bool = "dataReadAheadEnable" => true,
        pub debug_lock_enable: bool = "debugLockEnable" => false,
        pub delete_commit_log_files_interval: i32 = "deleteCommitLogFilesInterval" => 100,
        pub delete_consume_queue_files_interval: i32 = "deleteConsumeQueueFilesInterval" => 100,
        pub destroy_maped_file_interval_forcibly: i32 = "destroyMapedFileIntervalForcibly" => 1000 * 120,
        pub disk_fall_recorded: bool = "diskFallRecorded" => true,
        pub dispatch_cq_cache_num: i32 = "dispatchCqCacheNum" => 1024 * 4,
        pub dispatch_cq_threads: i32 = "dispatchCqThreads" => 10,
        pub dispatch_from_sender_thread: bool = "dispatchFromSenderThread" => false,
        pub enable_async_reput: bool = "enableAsyncReput" => true,
        pub enable_build_consume_queue_concurrently: bool = "enableBuildConsumeQueueConcurrently" => false,
        pub enable_clean_expired_offset: bool = "enableCleanExpiredOffset" => false,
        /// Java compacts only topics whose `cleanup.policy` is COMPACTION.
        pub enable_compaction: bool = "enableCompaction" => true,
        pub enable_rocks_db_log: bool = "enableRocksDBLog" => false,
        pub enable_schedule_async_deliver: bool = "enableScheduleAsyncDeliver" => false,
        pub enable_schedule_message_stats: bool = "enableScheduleMessageStats" => true,
        pub flush_delay_offset_interval: i64 = "flushDelayOffsetInterval" => 1000 * 10,
        pub ha_max_time_slave_not_catchup: i64 = "haMaxTimeSlaveNotCatchup" => 1000 * 15,
        pub logic_queue_force_swap_map_interval: i64 = "logicQueueForceSwapMapInterval" => 12 * 60 * 60 * 1000,
        pub logic_queue_swap_map_interval: i64 = "logicQueueSwapMapInterval" => 60 * 60 * 1000,
        pub logic_queue_swap_map_reserve_file_num: i32 = "logicQueueSwapMapReserveFileNum" => 20,
        pub logical_disk_space_clean_forcibly_threshold: f64 = "logicalDiskSpaceCleanForciblyThreshold" => 0.8,
        pub mapped_file_size_consume_queue_ext: i32 = "mappedFileSizeConsumeQueueExt" => 48 * 1024 * 1024,
        pub mapped_file_swap_enable: bool = "mappedFileSwapEnable" => true,
        /// 300,000 units of the batch consume queue's 46 bytes.
        pub mapper_file_size_batch_consume_queue: i32 = "mapperFileSizeBatchConsumeQueue" => 300_000 * 46,
        pub max_async_put_message_requests: i32 = "maxAsyncPutMessageRequests" => 5000,
        pub max_batch_delete_files_num: i32 = "maxBatchDeleteFilesNum" => 50,
        pub max_checksum_range: i64 = "maxChecksumRange" => 1024 * 1024 * 1024,
        pub max_consume_queue_scan: i32 = "maxConsumeQueueScan" => 20_000,
        pub max_filter_message_size: i32 = "maxFilterMessageSize" => 16000,
        pub max_ha_transfer_byte_in_second: i64 = "maxHaTransferByteInSecond" => 100 * 1024 * 1024,
        pub max_lmq_consume_queue_num: i32 = "maxLmqConsumeQueueNum" => 20000,
        pub max_offset_map_size: i32 = "maxOffsetMapSize" => 100 * 1024 * 1024,
        pub max_recovery_commitlog_files: i32 = "maxRecoveryCommitlogFiles" => 30,
        pub max_slave_resend_length: i64 = "maxSlaveResendLength" => 256 * 1024 * 1024,
        /// Topics are at most 127 bytes here whatever this says (Java's topic validator's limit).
        pub max_topic_length: i32 = "maxTopicLength" => 127,
        pub mem_table_flush_interval_ms: i64 = "memTableFlushIntervalMs" => 60 * 60 * 1000,
        pub min_in_sync_replicas: i32 = "minInSyncReplicas" => 1,
        pub pull_batch_max_message_count: i32 = "pullBatchMaxMessageCount" => 160,
        pub put_consume_queue_data_by_file_channel: bool = "putConsumeQueueDataByFileChannel" => true,
        pub put_message_timeout: i32 = "putMessageTimeout" => 1000 * 8,
        pub put_msg_index_hight_water: i32 = "putMsgIndexHightWater" => 600000,
        pub real_time_persist_rocks_db_config: bool = "realTimePersistRocksDBConfig" => true,
        pub recheck_reput_offset_from_cq: bool = "recheckReputOffsetFromCq" => false,
        pub redelete_hanged_file_interval: i32 = "redeleteHangedFileInterval" => 1000 * 120,
        pub replicas_per_disk_partition: i32 = "replicasPerDiskPartition" => 1,
        pub rocksdb_compression_type: String = "rocksdbCompressionType" => "lz4".to_owned(),
        pub rocksdb_flush_wal_frequency: i32 = "rocksdbFlushWalFrequency" => 1024,
        pub rocksdb_wal_file_rolling_threshold: i64 = "rocksdbWalFileRollingThreshold" => 1024 * 1024 * 1024,
        pub sample_count_threshold: i32 = "sampleCountThreshold" => 5000,
        pub sample_steps: i32 = "sampleSteps" => 32,
        pub schedule_async_deliver_max_pending_limit: i32 = "scheduleAsyncDeliverMaxPendingLimit" => 2000,
        pub schedule_async_deliver_max_resend_num2_blocked: i32 = "scheduleAsyncDeliverMaxResendNum2Blocked" => 3,
        pub search_bcq_by_cache_enable: bool = "searchBcqByCacheEnable" => true,
        pub spin_lock_collision_retreat_optimal_degree: i32 = "spinLockCollisionRetreatOptimalDegree" => 1000,
        pub stat_rocks_db_cq_interval_sec: i64 = "statRocksDBCQIntervalSec" => 10,
        /// Controller mode's files (Java: null unless set).
        pub store_path_broker_identity: String = "storePathBrokerIdentity" => String::new(),
        pub store_path_epoch_file: String = "storePathEpochFile" => String::new(),
        pub sync_master_flush_offset_when_startup: bool = "syncMasterFlushOffsetWhenStartup" => false,
        pub topic_queue_lock_num: i32 = "topicQueueLockNum" => 32,
        pub total_replicas: i32 = "totalReplicas" => 1,
        pub travel_cq_file_num_when_get_message: i32 = "travelCqFileNumWhenGetMessage" => 1,
        pub use_abs_lock: bool = "useABSLock" => false,
        pub use_reentrant_lock_when_put_message: bool = "useReentrantLockWhenPutMessage" => true,
        pub wake_commit_when_put_message: bool = "wakeCommitWhenPutMessage" => true,
        pub wake_flush_when_put_message: bool = "wakeFlushWhenPutMessage" => false,
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

    /// The keys of features this store does not have that are set to other than Java's default,
    /// as `key=value`: the broker refuses to start with any (it would not do what they ask).
    pub fn unsupported(&self) -> Vec<String> {
        self.differing_from_default(&UNSUPPORTED_KEYS)
    }

    /// The keys of Java's implementation details that are set to other than Java's default, as
    /// `key=value`: taken, with no effect on this store (the broker says so at start).
    pub fn inert_settings(&self) -> Vec<String> {
        self.differing_from_default(&Self::keys_between(INERT_KEYS.0, INERT_KEYS.1))
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

/// Java 5.3.3's keys of features this store does not have ([`MessageStoreConfig::unsupported`]).
pub const UNSUPPORTED_KEYS: [&str; 18] = [
    "storeType",
    "enableLmq",
    "enableMultiDispatch",
    "enableConsumeQueueExt",
    "duplicationEnable",
    "readOnlyCommitLogStorePaths",
    "enabledAppendPropCRC",
    "forceVerifyPropCRC",
    "readUnCommitted",
    "syncFromLastFile",
    "offsetCheckInSlave",
    "haFlowControlEnable",
    "coldDataFlowControlEnable",
    "coldDataScanEnable",
    "allAckInSyncStateSet",
    "enableAutoInSyncReplicas",
    "asyncLearner",
    "rocksdbCQDoubleWriteEnable",
];

/// The first and last of the keys that tune only Java's implementation, declared together.
const INERT_KEYS: (&str, &str) = ("accessMessageInMemoryHotRatio", "wakeFlushWhenPutMessage");

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
