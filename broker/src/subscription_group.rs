//! Consumer groups: `SubscriptionGroupConfig` (the UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body, too)
//! and `SubscriptionGroupManager`, persisted to `config/subscriptionGroup.json`.
//!
//! The file is written in the 5.x shape (every group carries the 5.x members with their
//! defaults; `forbiddenTable` is kept as read). 4.9's fastjson ignores what it does not know, and
//! a file from either version loads, missing members taking Java's defaults.

use std::collections::BTreeMap;
use std::path::Path;

use parking_lot::RwLock;
use remoting::protocol::name::GroupName;
use remoting::protocol::topic::DataVersion;
use serde::{Deserialize, Serialize};

use crate::config_file::{self, ConfigFile, ConfigFileError};

pub const SUBSCRIPTION_GROUP_FILE: &str = "subscriptionGroup.json";

/// Java's `MixAll` group names.
pub mod system_group {
    pub const TOOLS_CONSUMER: &str = "TOOLS_CONSUMER";
    pub const FILTERSRV_CONSUMER: &str = "FILTERSRV_CONSUMER";
    pub const SELF_TEST_CONSUMER: &str = "SELF_TEST_C_GROUP";
    pub const ONS_HTTP_PROXY: &str = "CID_ONS-HTTP-PROXY";
    pub const ONSAPI_PULL: &str = "CID_ONSAPI_PULL";
    pub const ONSAPI_PERMISSION: &str = "CID_ONSAPI_PERMISSION";
    pub const ONSAPI_OWNER: &str = "CID_ONSAPI_OWNER";
    /// Pre-created by 5.x only.
    pub const SYS_RMQ_TRANS: &str = "CID_RMQ_SYS_TRANS";
    /// Groups with this prefix are created on demand even when auto-creation is off.
    pub const SYS_PREFIX: &str = "CID_RMQ_SYS_";

    pub fn is_sys_consumer_group(group: &str) -> bool {
        group.starts_with(SYS_PREFIX)
    }
}

fn yes() -> bool {
    true
}
fn one_i32() -> i32 {
    1
}
fn one_i64() -> i64 {
    1
}
fn sixteen() -> i32 {
    16
}
fn fifteen() -> i32 {
    15
}

/// 5.x `GroupRetryPolicyType` name.
fn customized() -> String {
    "CUSTOMIZED".to_owned()
}

/// 5.x `ExponentialRetryPolicy` (milliseconds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExponentialRetryPolicy {
    #[serde(default = "ExponentialRetryPolicy::default_initial")]
    pub initial: i64,
    #[serde(default = "ExponentialRetryPolicy::default_max")]
    pub max: i64,
    #[serde(default = "ExponentialRetryPolicy::default_multiplier")]
    pub multiplier: i64,
}

impl ExponentialRetryPolicy {
    fn default_initial() -> i64 {
        5_000
    }
    fn default_max() -> i64 {
        7_200_000
    }
    fn default_multiplier() -> i64 {
        2
    }
}

/// 5.x `CustomizedRetryPolicy`: the delay (ms) before each retry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomizedRetryPolicy {
    #[serde(default = "CustomizedRetryPolicy::default_next")]
    pub next: Vec<i64>,
}

impl CustomizedRetryPolicy {
    fn default_next() -> Vec<i64> {
        vec![
            1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000,
            3_600_000, 7_200_000,
        ]
    }
}

/// 5.x `GroupRetryPolicy`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupRetryPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customized_retry_policy: Option<CustomizedRetryPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exponential_retry_policy: Option<ExponentialRetryPolicy>,
    /// `CUSTOMIZED` or `EXPONENTIAL`.
    #[serde(default = "customized", rename = "type")]
    pub kind: String,
}

impl Default for GroupRetryPolicy {
    fn default() -> Self {
        GroupRetryPolicy { customized_retry_policy: None, exponential_retry_policy: None, kind: customized() }
    }
}

/// 5.x `SimpleSubscriptionData`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimpleSubscriptionData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(default)]
    pub version: i64,
}

/// Java `SubscriptionGroupConfig`: the 4.9 members and the 5.x ones, with Java's defaults for
/// whatever a file or request leaves out. Members in fastjson's (alphabetical) order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupConfig {
    /// 5.x.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub broker_id: i64,
    #[serde(default = "yes")]
    pub consume_broadcast_enable: bool,
    /// False: pulls are refused (NO_PERMISSION).
    #[serde(default = "yes")]
    pub consume_enable: bool,
    #[serde(default = "yes")]
    pub consume_from_min_enable: bool,
    /// 5.x.
    #[serde(default)]
    pub consume_message_orderly: bool,
    /// 5.x.
    #[serde(default = "fifteen")]
    pub consume_timeout_minute: i32,
    #[serde(default)]
    pub group_name: String,
    /// 5.x.
    #[serde(default)]
    pub group_retry_policy: GroupRetryPolicy,
    /// 5.x.
    #[serde(default)]
    pub group_sys_flag: i32,
    #[serde(default = "yes")]
    pub notify_consumer_ids_changed_enable: bool,
    #[serde(default = "sixteen")]
    pub retry_max_times: i32,
    /// Queues of `%RETRY%<group>`.
    #[serde(default = "one_i32")]
    pub retry_queue_nums: i32,
    /// 5.x; absent unless set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_data_set: Option<Vec<SimpleSubscriptionData>>,
    #[serde(default = "one_i64")]
    pub which_broker_when_consume_slowly: i64,
}

impl SubscriptionGroupConfig {
    /// A group with Java's defaults.
    pub fn new(group_name: &str) -> SubscriptionGroupConfig {
        SubscriptionGroupConfig {
            attributes: BTreeMap::new(),
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            consume_message_orderly: false,
            consume_timeout_minute: 15,
            group_name: group_name.to_owned(),
            group_retry_policy: GroupRetryPolicy::default(),
            group_sys_flag: 0,
            notify_consumer_ids_changed_enable: true,
            retry_max_times: 16,
            retry_queue_nums: 1,
            subscription_data_set: None,
            which_broker_when_consume_slowly: 1,
        }
    }
}

/// The file (and GET_ALL_SUBSCRIPTIONGROUP_CONFIG body): Java serializes the manager itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupFile {
    #[serde(default = "config_file::new_data_version")]
    pub data_version: DataVersion,
    /// 5.x: group -> topic -> forbidden bits.
    #[serde(default)]
    pub forbidden_table: BTreeMap<String, BTreeMap<String, i32>>,
    #[serde(default)]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

pub struct SubscriptionGroupManager {
    file: ConfigFile,
    table: RwLock<SubscriptionGroupFile>,
}

/// The groups Java's `SubscriptionGroupManager` creates for itself (5.3.3's list; 4.9.7 lacks
/// `CID_RMQ_SYS_TRANS`).
pub fn system_groups() -> Vec<SubscriptionGroupConfig> {
    use system_group::*;
    [TOOLS_CONSUMER, FILTERSRV_CONSUMER, SELF_TEST_CONSUMER, ONS_HTTP_PROXY, ONSAPI_PULL, ONSAPI_PERMISSION, ONSAPI_OWNER, SYS_RMQ_TRANS]
        .into_iter()
        .map(SubscriptionGroupConfig::new)
        .collect()
}

impl SubscriptionGroupManager {
    /// The system groups, then `<storePathRootDir>/config/subscriptionGroup.json` (or its backup)
    /// over them.
    pub fn open(store_root_dir: &Path) -> Result<SubscriptionGroupManager, ConfigFileError> {
        let file = ConfigFile::new(config_file::config_dir(store_root_dir).join(SUBSCRIPTION_GROUP_FILE));
        let mut table = SubscriptionGroupFile {
            data_version: config_file::new_data_version(),
            forbidden_table: BTreeMap::new(),
            subscription_group_table: system_groups().into_iter().map(|g| (g.group_name.clone(), g)).collect(),
        };
        if let Some(loaded) = file.load::<SubscriptionGroupFile>()? {
            table.subscription_group_table.extend(loaded.subscription_group_table);
            table.forbidden_table = loaded.forbidden_table;
            table.data_version = loaded.data_version;
        }
        Ok(SubscriptionGroupManager { file, table: RwLock::new(table) })
    }

    /// The group, without creating it.
    pub fn select(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.table.read().subscription_group_table.get(group).cloned()
    }

    /// Java's `findSubscriptionGroupConfig`: an unknown group is created with the defaults when
    /// `auto_create` (`autoCreateSubscriptionGroup`) is on or it is a `CID_RMQ_SYS_` group.
    pub fn find_or_create(&self, group: &GroupName, auto_create: bool) -> Option<SubscriptionGroupConfig> {
        if let Some(found) = self.select(group) {
            return Some(found);
        }
        if !auto_create && !system_group::is_sys_consumer_group(group) {
            return None;
        }
        let mut table = self.table.write();
        if let Some(found) = table.subscription_group_table.get(group.as_str()) {
            return Some(found.clone());
        }
        let created = SubscriptionGroupConfig::new(group);
        tracing::info!(%group, "subscription group created");
        table.subscription_group_table.insert(group.as_str().to_owned(), created.clone());
        config_file::next_version(&mut table.data_version);
        drop(table);
        // Written by the persister: a pull or heartbeat never waits for the disk.
        self.file.mark_dirty();
        Some(created)
    }

    /// Creates or replaces a group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP), answered once written.
    pub fn update(&self, group: &GroupName, mut config: SubscriptionGroupConfig) -> Result<(), ConfigFileError> {
        config.group_name = group.as_str().to_owned();
        {
            let mut table = self.table.write();
            match table.subscription_group_table.insert(config.group_name.clone(), config.clone()) {
                Some(old) => tracing::info!(?old, new = ?config, "subscription group updated"),
                None => tracing::info!(new = ?config, "subscription group created"),
            }
            config_file::next_version(&mut table.data_version);
        }
        self.persist()
    }

    /// Removes a group; `Ok(None)` when there was none (nothing is written then).
    pub fn delete(&self, group: &str) -> Result<Option<SubscriptionGroupConfig>, ConfigFileError> {
        let old = {
            let mut table = self.table.write();
            let Some(old) = table.subscription_group_table.remove(group) else {
                tracing::warn!(group, "delete subscription group: no such group");
                return Ok(None);
            };
            table.forbidden_table.remove(group);
            config_file::next_version(&mut table.data_version);
            old
        };
        self.persist()?;
        Ok(Some(old))
    }

    pub fn data_version(&self) -> DataVersion {
        self.table.read().data_version.clone()
    }

    /// The groups' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.table.read().subscription_group_table.keys().cloned().collect()
    }

    /// Everything, as the file holds it (the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body).
    pub fn snapshot(&self) -> SubscriptionGroupFile {
        self.table.read().clone()
    }

    /// A slave takes its master's groups (Java's `syncSubscriptionGroupConfig`): the whole table
    /// and its version, when the version differs. True when it replaced them.
    pub fn replace_from_master(&self, master: SubscriptionGroupFile) -> bool {
        {
            let mut table = self.table.write();
            if table.data_version == master.data_version {
                return false;
            }
            table.data_version = master.data_version;
            table.subscription_group_table = master.subscription_group_table;
            table.forbidden_table = master.forbidden_table;
        }
        self.file.mark_dirty();
        true
    }

    /// The file this manager writes (the persister wakes on its changes).
    pub fn file(&self) -> &ConfigFile {
        &self.file
    }

    /// Writes the file now.
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.file.persist_now(|| self.encode())
    }

    /// Writes the file if a change is not on disk yet (the persister's tick).
    pub fn persist_if_dirty(&self) -> Result<bool, ConfigFileError> {
        self.file.persist_if_dirty(|| self.encode())
    }

    fn encode(&self) -> Vec<u8> {
        remoting::fastjson::to_vec(&*self.table.read(), remoting::fastjson::JsonStyle::FastjsonPretty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_broker_has_the_system_groups_with_java_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::open(dir.path()).unwrap();
        let table = m.snapshot().subscription_group_table;
        assert_eq!(table.len(), 8);
        for name in ["TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_RMQ_SYS_TRANS"] {
            assert_eq!(table[name], SubscriptionGroupConfig::new(name));
        }
        let g = &table["TOOLS_CONSUMER"];
        assert!(g.consume_enable && g.consume_from_min_enable && g.consume_broadcast_enable);
        assert_eq!((g.retry_queue_nums, g.retry_max_times, g.broker_id, g.which_broker_when_consume_slowly), (1, 16, 0, 1));
    }

    #[test]
    fn unknown_groups_are_created_only_when_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::open(dir.path()).unwrap();
        let g1 = GroupName::new("g1").unwrap();
        assert_eq!(m.find_or_create(&g1, false), None);
        assert_eq!(m.data_version().counter, 0);
        assert_eq!(m.find_or_create(&g1, true), Some(SubscriptionGroupConfig::new("g1")));
        assert_eq!(m.data_version().counter, 1);
        assert!(m.find_or_create(&GroupName::new("CID_RMQ_SYS_X").unwrap(), false).is_some(), "system groups are always created");
        assert_eq!(m.find_or_create(&g1, true).map(|g| g.group_name), Some("g1".to_owned()));
        assert_eq!(m.data_version().counter, 2);
        assert!(m.file().is_dirty(), "auto-created groups are left to the persister");
        assert!(m.persist_if_dirty().unwrap());
        assert!(!m.persist_if_dirty().unwrap(), "one write covers every change before it");
        drop(m);
        let again = SubscriptionGroupManager::open(dir.path()).unwrap();
        assert!(again.select("g1").is_some());
        assert_eq!(again.data_version().counter, 2);
    }

    #[test]
    fn update_and_delete_persist_and_bump_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::open(dir.path()).unwrap();
        let name = |g: &str| GroupName::new(g).unwrap();
        m.update(&name("g"), SubscriptionGroupConfig { retry_max_times: 3, ..SubscriptionGroupConfig::new("g") }).unwrap();
        assert_eq!(m.delete("nope").unwrap(), None);
        m.update(&name("gone"), SubscriptionGroupConfig::new("gone")).unwrap();
        assert!(m.delete("gone").unwrap().is_some());
        assert_eq!(m.data_version().counter, 3);
        drop(m);
        let again = SubscriptionGroupManager::open(dir.path()).unwrap();
        assert_eq!(again.select("g").map(|g| g.retry_max_times), Some(3));
        assert_eq!(again.select("gone"), None);
    }

    #[test]
    fn a_4_9_request_body_takes_the_5_x_defaults() {
        let body = r#"{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":false,"consumeFromMinEnable":true,"groupName":"g","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":5,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1,"unknown":[1]}"#;
        let g: SubscriptionGroupConfig = remoting::fastjson::from_slice(body.as_bytes()).unwrap();
        assert_eq!(g, SubscriptionGroupConfig { consume_enable: false, retry_max_times: 5, ..SubscriptionGroupConfig::new("g") });
    }
}
