//! UPDATE_BROKER_CONFIG (Java `AdminBrokerProcessor.updateBrokerConfig` and
//! `Configuration.update`): keys are applied to a copy of the config, which replaces the live one
//! at once, and the whole config is then written to the broker's config file, as Java writes it,
//! so the change survives a restart.
//!
//! Java takes any key and lets most of them do nothing until a restart (thread pools, ports,
//! paths), or worse, take effect half-way. Ours takes only the keys on [`MUTABLE_KEYS`]: each is
//! read where it is used, so the change is real at once. Every other key is refused with
//! NO_PERMISSION, before anything changes: the paths, addresses, ports and home directory Java's
//! 5.x black list guards, and every key a running broker would not follow.

use std::path::Path;

use indexmap::IndexMap;
use remoting::config::JavaConfig;
use remoting::protocol::perm;
use remoting::server::ProcessError;
use remoting::ResponseCode;
use store::cleanup::CleanPolicy;
use store::store::MessageStore;
use tracing::{info, warn};

use crate::handles::Configs;

/// The keys a running broker follows. Broker keys are read from the live config on every use;
/// the store's cleaning keys are handed to the store, which reads them on every pass.
pub const MUTABLE_KEYS: &[&str] = &[
    // Routing and creation.
    "brokerPermission",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "maxTopicQueueNums",
    "notifyConsumerIdsChangedEnable",
    "slaveReadEnable",
    // What sends are answered with and stamped with.
    "regionId",
    "traceOn",
    // Transactions.
    "rejectTransactionMessage",
    "transactionTimeOut",
    "transactionCheckMax",
    "transactionCheckInterval",
    // Queries and the store's cleaning.
    "defaultQueryMaxNum",
    "deleteWhen",
    "fileReservedTime",
    "diskMaxUsedSpaceRatio",
];

/// The store's cleaning keys: in DLedger mode the member's own expiry was set from them at start.
const CLEANING_KEYS: [&str; 3] = ["deleteWhen", "fileReservedTime", "diskMaxUsedSpaceRatio"];

/// What an update changed, for the caller to act on.
#[derive(Debug, Default, PartialEq)]
pub struct Updated {
    /// `brokerPermission` was among the keys: Java moves the topics' data version and registers.
    pub permission: bool,
}

/// Applies `properties` (the request body) to the live config and persists it; the store takes
/// its new cleaning policy.
pub fn update(configs: &Configs, store: &MessageStore, properties: &IndexMap<String, String>) -> Result<Updated, ProcessError> {
    if let Some(key) = properties.keys().find(|k| !MUTABLE_KEYS.contains(&k.as_str())) {
        warn!(key, "refused runtime update of a config key that is not on the allow list");
        return Err(ProcessError::new(
            ResponseCode::NO_PERMISSION,
            format!("Can not update config in black list. {key} cannot be changed at runtime (the keys that can: {})", MUTABLE_KEYS.join(", ")),
        ));
    }
    if configs.store.load().enable_dleger_commit_log {
        if let Some(key) = properties.keys().find(|k| CLEANING_KEYS.contains(&k.as_str())) {
            return Err(ProcessError::new(
                ResponseCode::NO_PERMISSION,
                format!("{key} cannot be changed at runtime in DLedger mode: the DLedger member's expiry follows it from the next start"),
            ));
        }
    }
    let _one_at_a_time = configs.version.one_at_a_time();
    let mut config = BrokerConfigs { broker: (**configs.broker.load()).clone(), store: (**configs.store.load()).clone() };
    for (key, value) in properties {
        let known = config.broker.set(key, value).map_err(bad_value)? | config.store.set(key, value).map_err(bad_value)?;
        debug_assert!(known, "{key} is on the allow list but is no key");
    }
    check(&config)?;
    let text = persisted_text(&config.broker, &config.store);
    configs.broker.store(std::sync::Arc::new(config.broker));
    configs.store.store(std::sync::Arc::new(config.store));
    store.set_clean_policy(CleanPolicy::of(&configs.store.load()));
    configs.version.next();
    info!(?properties, "broker config updated");
    if let Some(path) = &configs.file {
        write_config_file(path, text.as_bytes())
            .map_err(|e| ProcessError::system(format!("the config is updated but could not be persisted to {}: {e}", path.display())))?;
    }
    Ok(Updated { permission: properties.contains_key("brokerPermission") })
}

struct BrokerConfigs {
    broker: crate::config::BrokerConfig,
    store: store::config::MessageStoreConfig,
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
    if c.store.delete_when.split(';').any(|h| h.trim().parse::<u32>().map_or(true, |h| h > 23)) {
        return refuse(format!("deleteWhen {:?} is not a list of hours 0-23 separated by ';'", c.store.delete_when));
    }
    Ok(())
}

/// The config as Java's `Configuration.persist` writes it: every key and value, as
/// GET_BROKER_CONFIG prints them (keys Java leaves null are left out), and the secret keys that
/// are set (Java would lose them).
pub fn persisted_text(broker: &crate::config::BrokerConfig, store: &store::config::MessageStoreConfig) -> String {
    let mut text = crate::config::without_unset_paths(&crate::config::print_all(broker, store));
    for (key, value) in broker.entries().into_iter().filter(|(key, value)| crate::config::SECRET_KEYS.contains(key) && !value.is_empty()) {
        text.push_str(&format!("{key}={value}\n"));
    }
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
