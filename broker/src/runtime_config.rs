//! UPDATE_BROKER_CONFIG (Java `AdminBrokerProcessor.updateBrokerConfig` and
//! `Configuration.update`): every key of the broker's and the store's config is taken and the
//! whole config is then written to the broker's config file, as Java writes it, so the change
//! survives a restart.
//!
//! As Java 5.3.3, a request naming a key of the black list changes nothing and is answered
//! NO_PERMISSION; beyond Java, so is one naming a path (`storePathRootDir`, `storePathCommitLog`,
//! any key with `path` in its name) or a credential (an access or secret key, a password, a
//! token). As Java, a key that no config has is ignored. Beyond Java, a value of the wrong type
//! (SYSTEM_ERROR), with a control character or too long (NO_PERMISSION), or a config the broker
//! could not run or start with (SYSTEM_ERROR) is refused before anything changes.
//!
//! The keys on [`LIVE_KEYS`] are read by the running broker where they are used, as Java reads
//! them: they replace the live config at once. Every other key is recorded for the next start
//! ([`crate::handles::Configs::pending`]): persisted and shown by GET_BROKER_CONFIG, while the
//! running broker keeps the value it started with (Java sets the field at once, and a thread pool,
//! a port or an identity then changes half-way or not at all).

use std::path::Path;

use indexmap::IndexMap;
use remoting::config::JavaConfig;
use remoting::protocol::perm;
use remoting::server::ProcessError;
use remoting::ResponseCode;
use store::cleanup::CleanPolicy;
use store::store::MessageStore;
use tracing::{info, warn};

use crate::config::BrokerConfig;
use crate::handles::Configs;
use store::config::MessageStoreConfig;

/// The keys the running broker reads where it uses them: an update takes effect at once.
pub const LIVE_KEYS: &[&str] = &[
    // Routing and creation.
    "brokerPermission",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "maxTopicQueueNums",
    "notifyConsumerIdsChangedEnable",
    "slaveReadEnable",
    "registerBrokerTimeoutMills",
    // What sends are answered with and stamped with; when they are taken.
    "regionId",
    "traceOn",
    "startAcceptSendRequestTimeStamp",
    "storeReplyMessageEnable",
    "recallMessageEnable",
    "allowRecallWhenBrokerNotWriteable",
    // Pulls.
    "longPollingEnable",
    "shortPollingTimeMills",
    "enablePropertyFilter",
    // 5.x's server-side offset reset and pop (each read where a pull, pop or revive pass uses it).
    "useServerSideResetOffset",
    "popFromRetryProbability",
    "enableRetryTopicV2",
    "retrieveMessageFromPopRetryTopicV1",
    "popResponseReturnActualRetryTopic",
    "initPopOffsetByCheckMsgInMem",
    "maxPopPollingSize",
    "reviveScanTime",
    "skipWhenCKRePutReachMaxTimes",
    // Fast failure: read on each round of the clean (`fast_failure`).
    "brokerFastFailureEnable",
    "waitTimeMillsInSendQueue",
    "waitTimeMillsInPullQueue",
    "waitTimeMillsInHeartbeatQueue",
    "waitTimeMillsInTransactionQueue",
    "waitTimeMillsInAdminBrokerQueue",
    // Transactions.
    "rejectTransactionMessage",
    "transactionTimeOut",
    "transactionCheckMax",
    "transactionCheckInterval",
    // 5.x cold-data thresholds (reported by GET_COLD_DATA_FLOW_CTR_INFO).
    "cgColdReadThreshold",
    "globalColdReadThreshold",
    // The store's tunables (`store::config::Tunables::KEYS`: what a put may hold, how often the
    // commit log is flushed, what a pull takes from memory and disk) are live too; see `is_live_key`.
    // Queries; the store's cleaning keys are live too (`CLEANING_KEYS`, not in DLedger mode).
    "defaultQueryMaxNum",
];

/// The store's cleaning rules (`store::cleanup::CleanPolicy`), followed at once on a plain commit log.
pub const CLEANING_KEYS: [&str; 7] = [
    "deleteWhen",
    "fileReservedTime",
    "diskMaxUsedSpaceRatio",
    "cleanFileForciblyEnable",
    "diskSpaceCleanForciblyRatio",
    "diskSpaceWarningLevelRatio",
    "deleteFileBatchMax",
];

/// Whether the running broker follows `key` at once: the broker's live keys, the store's
/// tunables and its cleaning keys.
pub fn is_live_key(key: &str) -> bool {
    LIVE_KEYS.contains(&key) || store::config::Tunables::KEYS.contains(&key) || CLEANING_KEYS.contains(&key)
}

/// Java 5.3.3's black list: `AdminBrokerProcessor`'s own three, which include the default of
/// `BrokerConfig.configBlackList` (`configBlackList;brokerConfigPath`). Java 4.9.7 has none.
pub const JAVA_BLACK_LIST: [&str; 3] = ["configBlackList", "brokerConfigPath", "rocketmqHome"];

/// The keys a DLedger broker follows from the next start only: the member's own expiry was set
/// from the cleaning keys at start, and its log keeps the message size it opened with (as Java's).
fn not_live_in_dledger(key: &str) -> bool {
    CLEANING_KEYS.contains(&key) || key == "maxMessageSize"
}

/// Why a key can never be changed at runtime, or `None`.
pub fn refusal(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    if JAVA_BLACK_LIST.contains(&key) {
        Some("it is on the black list")
    } else if lower.contains("path") {
        Some("it names a path the broker's files are in")
    } else if ["accesskey", "secretkey", "secret", "password", "passwd", "token", "credential"].iter().any(|c| lower.contains(c)) {
        Some("it is a credential")
    } else {
        None
    }
}

/// What an update changed, for the caller to act on.
#[derive(Debug, Default, PartialEq)]
pub struct Updated {
    /// `brokerPermission` was among the keys: Java moves the topics' data version and registers.
    pub permission: bool,
}

/// Applies `properties` (the request body): the live keys to the live config, the others to the
/// next start; then persists the config. The store takes its new cleaning policy.
pub fn update(configs: &Configs, store: &MessageStore, properties: &IndexMap<String, String>) -> Result<Updated, ProcessError> {
    if let Some((key, why)) = properties.keys().find_map(|k| refusal(k).map(|why| (k, why))) {
        warn!(key, why, "refused runtime update of a config key that cannot be changed");
        return Err(ProcessError::new(ResponseCode::NO_PERMISSION, format!("Can not update config in black list. {key} cannot be changed at runtime: {why}")));
    }
    let known = |k: &str| BrokerConfig::keys().contains(&k) || MessageStoreConfig::keys().contains(&k);
    for (key, value) in properties.iter().filter(|(k, _)| known(k)) {
        crate::config::check_value(key, value)
            .map_err(|e| ProcessError::new(ResponseCode::NO_PERMISSION, format!("Can not update config. {e}; the config is unchanged")))?;
    }
    let unknown: Vec<&str> = properties.keys().map(String::as_str).filter(|k| !known(k)).collect();
    if !unknown.is_empty() {
        // Java's `Configuration.update` sets only the fields its config objects have.
        warn!(?unknown, "runtime update names keys no config has; ignored as Java ignores them");
    }
    let dledger = configs.store.load().enable_dleger_commit_log;
    let is_live = |k: &str| is_live_key(k) && !(dledger && not_live_in_dledger(k));

    let _one_at_a_time = configs.version.one_at_a_time();
    let mut live = BrokerConfigs { broker: (**configs.broker.load()).clone(), store: (**configs.store.load()).clone() };
    // What the file will say: the live config with every pending and new value over it.
    let mut next = live.clone();
    let mut pending = configs.pending.lock().clone();
    for (key, value) in pending.iter() {
        next.set(key, value).map_err(bad_value)?;
    }
    for (key, value) in properties.iter().filter(|(k, _)| known(k)) {
        next.set(key, value).map_err(bad_value)?;
        if is_live(key) {
            live.set(key, value).map_err(bad_value)?;
        }
    }
    check(&live)?;
    check(&next)?;
    would_start(&next)?;
    for key in properties.keys().filter(|k| known(k) && !is_live(k)) {
        if let Some((key, value)) = next.key_value(key) {
            pending.insert(key, value);
        }
    }
    let text = persisted_text_of(&next);
    configs.broker.store(std::sync::Arc::new(live.broker));
    configs.store.store(std::sync::Arc::new(live.store));
    *configs.pending.lock() = pending;
    store.set_tunables(&configs.store.load());
    if !dledger {
        store.set_clean_policy(CleanPolicy::of(&configs.store.load()));
    }
    configs.version.next();
    info!(?properties, "broker config updated");
    if let Some(path) = &configs.file {
        write_config_file(path, text.as_bytes())
            .map_err(|e| ProcessError::system(format!("the config is updated but could not be persisted to {}: {e}", path.display())))?;
    }
    Ok(Updated { permission: properties.contains_key("brokerPermission") })
}

#[derive(Clone)]
struct BrokerConfigs {
    broker: BrokerConfig,
    store: MessageStoreConfig,
}

impl BrokerConfigs {
    fn set(&mut self, key: &str, value: &str) -> Result<bool, remoting::config::ConfigError> {
        Ok(self.broker.set(key, value)? | self.store.set(key, value)?)
    }

    /// The key as the configs spell it (`'static`) with its value as printed.
    fn key_value(&self, key: &str) -> Option<(&'static str, String)> {
        let static_key = BrokerConfig::keys().iter().chain(MessageStoreConfig::keys()).find(|k| **k == key)?;
        let value = self.broker.get(key).or_else(|| self.store.get(key))?;
        Some((static_key, value))
    }
}

fn bad_value(e: remoting::config::ConfigError) -> ProcessError {
    ProcessError::system(format!("{e}; the config is unchanged"))
}

/// Values that parse but that the broker could not work with.
fn check(c: &BrokerConfigs) -> Result<(), ProcessError> {
    let all = perm::ALL;
    let refuse = |what: String| Err(ProcessError::system(format!("{what}; the config is unchanged")));
    if c.broker.broker_permission & !all != 0 || c.broker.broker_permission < 0 {
        return refuse(format!("brokerPermission {} is not a permission (bits of PRIORITY 8, READ 4, WRITE 2, INHERIT 1)", c.broker.broker_permission));
    }
    if c.broker.max_topic_queue_nums == 0 {
        return refuse("maxTopicQueueNums must be at least 1".to_owned());
    }
    if c.broker.transaction_check_interval_ms == 0 {
        return refuse("transactionCheckInterval must be at least 1 ms".to_owned());
    }
    if c.store.max_message_size < 10 {
        return refuse(format!("maxMessageSize {} is below 10 bytes", c.store.max_message_size));
    }
    if c.store.delete_when.split(';').any(|h| h.trim().parse::<u32>().map_or(true, |h| h > 23)) {
        return refuse(format!("deleteWhen {:?} is not a list of hours 0-23 separated by ';'", c.store.delete_when));
    }
    Ok(())
}

/// Refuses a config the broker would refuse to start with (`mqbroker`'s startup rules).
fn would_start(c: &BrokerConfigs) -> Result<(), ProcessError> {
    let mut broker = c.broker.clone();
    crate::config::apply_startup_rules(&mut broker, &c.store)
        .map_err(|e| ProcessError::system(format!("the broker would not start with this config: {e}; the config is unchanged")))
}

/// Every key and value as GET_BROKER_CONFIG shows them and the config file keeps them: the running
/// values, with the updates that wait for the next start over them.
pub fn current_entries(configs: &Configs) -> Vec<(&'static str, String)> {
    let mut entries = crate::config::all_entries(&configs.broker.load(), &configs.store.load());
    let pending = configs.pending.lock();
    for (key, value) in entries.iter_mut() {
        if let Some(next) = pending.get(key) {
            value.clone_from(next);
        }
    }
    entries
}

fn persisted_text_of(c: &BrokerConfigs) -> String {
    persisted_text(&c.broker, &c.store)
}

/// The config as Java's `Configuration.persist` writes it: every key and value, as
/// GET_BROKER_CONFIG prints them (keys Java leaves null are left out), and the secret keys that
/// are set (Java would lose them); each value escaped as `Properties.store` escapes it so that it
/// reads back as it is.
pub fn persisted_text(broker: &BrokerConfig, store: &MessageStoreConfig) -> String {
    let mut text = crate::config::without_unset_paths(&crate::config::print_all(broker, store));
    let secrets: Vec<(&str, String)> =
        broker.entries().into_iter().filter(|(key, value)| crate::config::SECRET_KEYS.contains(key) && !value.is_empty()).collect();
    text.push_str(&remoting::properties::write(secrets.iter().map(|(k, v)| (*k, v.as_str()))));
    text
}

/// Java's `MixAll.string2File`: the new content to `FILE.tmp`, the old one kept as `FILE.bak`,
/// then the new one in place (here by rename, so a crash leaves the old or the new file whole).
fn write_config_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let with_suffix = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        std::path::PathBuf::from(name)
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = with_suffix(".tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    if path.exists() {
        std::fs::copy(path, with_suffix(".bak"))?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_black_list_paths_and_credentials_are_refused_by_name() {
        for key in [
            "rocketmqHome",
            "brokerConfigPath",
            "configBlackList",
            "storePathRootDir",
            "storePathCommitLog",
            "storePathDLedgerCommitLog",
            "kvConfigPath",
            "aclFileFullPath",
        ] {
            assert!(refusal(key).is_some(), "{key}");
        }
        for key in ["accessKey", "secretKey", "rocketmqSecretKey", "authPassword", "someToken"] {
            assert_eq!(refusal(key), Some("it is a credential"), "{key}");
        }
        for key in ["brokerName", "maxMessageSize", "flushIntervalCommitLog", "regionId", "noSuchKey"] {
            assert_eq!(refusal(key), None, "{key}");
        }
    }

    #[test]
    fn every_live_key_is_a_key() {
        for key in LIVE_KEYS.iter().chain(&store::config::Tunables::KEYS).chain(&CLEANING_KEYS) {
            assert!(BrokerConfig::keys().contains(key) || MessageStoreConfig::keys().contains(key), "{key}");
            assert_eq!(refusal(key), None, "{key}");
        }
    }
}
