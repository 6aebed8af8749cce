//! `TopicConfigManager`: the broker's topics, persisted to `config/topics.json` with a
//! `DataVersion` that counts every change (the name servers and slaves compare it).
//!
//! At open it creates the topics a Java broker creates for itself, then lays the file's topics
//! over them (Java's constructor, then `load()`). The file is written in the 5.x shape
//! (`attributes` on every topic, `stateVersion` in the data version), which 4.9 reads too: its
//! fastjson ignores the members it does not know.

use std::collections::BTreeMap;
use std::path::Path;

use parking_lot::RwLock;
use remoting::protocol::name::TopicName;
use remoting::protocol::perm;
use remoting::protocol::topic::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};

use crate::config::BrokerConfig;
use crate::config_file::{self, ConfigFile, ConfigFileError};

pub const TOPICS_FILE: &str = "topics.json";

/// Java's reserved topic names and sets, declared once in `remoting` (the store reads them too).
pub use remoting::protocol::system_topic;

/// Queues of `SCHEDULE_TOPIC_XXXX`, one per delay level.
pub const SCHEDULE_TOPIC_QUEUE_NUMS: i32 = 18;

/// What a `create_*` call found or made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Obtained {
    Existing(TopicConfig),
    /// Made by this call; Java then re-registers with the name servers at once.
    Created(TopicConfig),
}

impl Obtained {
    pub fn config(&self) -> &TopicConfig {
        match self {
            Obtained::Existing(tc) | Obtained::Created(tc) => tc,
        }
    }

    pub fn into_config(self) -> TopicConfig {
        match self {
            Obtained::Existing(tc) | Obtained::Created(tc) => tc,
        }
    }

    pub fn was_created(&self) -> bool {
        matches!(self, Obtained::Created(_))
    }
}

struct Table {
    version: DataVersion,
    topics: BTreeMap<String, TopicConfig>,
}

pub struct TopicConfigManager {
    file: ConfigFile,
    table: RwLock<Table>,
}

fn topic(name: &str, queues: i32, perm: i32) -> TopicConfig {
    TopicConfig { read_queue_nums: queues, write_queue_nums: queues, perm, ..TopicConfig::new(name) }
}

/// The topics Java 5.3.3's `TopicConfigManager` constructor creates (4.9.7's, then 5.x's own);
/// the timer's topic only while the store runs the timer (`timerWheelEnable`).
pub fn system_topics(broker: &BrokerConfig, timer_wheel_enable: bool) -> Vec<TopicConfig> {
    let rw = perm::READ | perm::WRITE;
    let inherit_if = |enabled: bool| if enabled { perm::INHERIT | rw } else { perm::INHERIT };
    let mut topics = vec![topic(system_topic::SELF_TEST, 1, rw)];
    if broker.auto_create_topic_enable {
        topics.push(topic(system_topic::AUTO_CREATE_TEMPLATE, broker.default_topic_queue_nums, perm::INHERIT | rw));
    }
    topics.push(topic(system_topic::BENCHMARK, 1024, rw));
    topics.push(topic(&broker.broker_cluster_name, 16, inherit_if(broker.cluster_topic_enable)));
    topics.push(topic(&broker.broker_name, 1, inherit_if(broker.broker_topic_enable)));
    topics.push(topic(system_topic::OFFSET_MOVED_EVENT, 1, rw));
    topics.push(topic(system_topic::SCHEDULE, SCHEDULE_TOPIC_QUEUE_NUMS, rw));
    if broker.trace_topic_enable {
        topics.push(topic(&broker.msg_trace_topic_name, 1, rw));
    }
    topics.push(topic(&system_topic::reply_topic(&broker.broker_cluster_name), 1, rw));
    // As 5.x creates them at start (4.9.7 on the first half message): a 5.x slave of ours deletes
    // the topics its master does not list, and its transaction check then creates them again
    // under its role-change lock, stalling a step-down for 90 s.
    topics.push(topic(system_topic::TRANS_HALF, 1, rw));
    topics.push(topic(system_topic::TRANS_OP_HALF, 1, rw));
    // 5.x: pop's revive topic, one queue per revive queue.
    topics.push(topic(&crate::pop::names::revive_topic(&broker.broker_cluster_name), broker.revive_queue_num, rw));
    // 5.x: the broker member group's topic, inherit-only (no client reads or writes it).
    topics.push(topic(&system_topic::sync_broker_member_topic(&broker.broker_name), 1, perm::INHERIT));
    if timer_wheel_enable {
        topics.push(topic(system_topic::WHEEL_TIMER, 1, rw));
    }
    topics
}

impl TopicConfigManager {
    /// The system topics, then `<storePathRootDir>/config/topics.json` (or its backup) over them.
    pub fn open(broker: &BrokerConfig, timer_wheel_enable: bool, store_root_dir: &Path) -> Result<TopicConfigManager, ConfigFileError> {
        let file = ConfigFile::new(config_file::config_dir(store_root_dir).join(TOPICS_FILE));
        let mut table = Table {
            version: config_file::new_data_version(),
            topics: system_topics(broker, timer_wheel_enable).into_iter().map(|tc| (tc.topic_name.clone(), tc)).collect(),
        };
        if let Some(wrapper) = file.load::<TopicConfigSerializeWrapper>()? {
            table.topics.extend(wrapper.topic_config_table);
            table.version = wrapper.data_version;
        }
        Ok(TopicConfigManager { file, table: RwLock::new(table) })
    }

    pub fn select(&self, topic: &str) -> Option<TopicConfig> {
        self.table.read().topics.get(topic).cloned()
    }

    /// How many topics there are (Java's `getTopicConfigTable().size()`).
    pub fn count(&self) -> usize {
        self.table.read().topics.len()
    }

    pub fn contains(&self, topic: &str) -> bool {
        self.table.read().topics.contains_key(topic)
    }

    pub fn data_version(&self) -> DataVersion {
        self.table.read().version.clone()
    }

    /// Moves the data version on, so name servers take the next registration as a change (Java
    /// does this when the broker's permission changes).
    pub fn next_data_version(&self) {
        config_file::next_version(&mut self.table.write().version);
        self.file.mark_dirty();
    }

    /// Every topic with the data version: the register-broker body and GET_ALL_TOPIC_CONFIG.
    pub fn wrapper(&self) -> TopicConfigSerializeWrapper {
        let table = self.table.read();
        TopicConfigSerializeWrapper { data_version: table.version.clone(), topic_config_table: table.topics.clone() }
    }

    /// Creates or replaces a topic (UPDATE_AND_CREATE_TOPIC); answered once the file is written,
    /// as Java's synchronous persist.
    pub fn update(&self, topic: &TopicName, mut config: TopicConfig) -> Result<(), ConfigFileError> {
        config.topic_name = topic.as_str().to_owned();
        {
            let mut table = self.table.write();
            match table.topics.insert(config.topic_name.clone(), config.clone()) {
                Some(old) => tracing::info!(?old, new = ?config, "topic config updated"),
                None => tracing::info!(new = ?config, "topic created"),
            }
            config_file::next_version(&mut table.version);
        }
        self.persist()
    }

    /// Creates or replaces a topic whose attributes are the current topic's (none when it is new)
    /// altered by `attributes` (5.x's UPDATE_AND_CREATE_TOPIC), all under the table's lock.
    /// `Ok(Err(reason))`: the change was refused and nothing changed.
    pub fn update_with_attributes(
        &self,
        topic: &TopicName,
        mut config: TopicConfig,
        attributes: impl FnOnce(Option<&TopicConfig>) -> Result<BTreeMap<String, String>, String>,
    ) -> Result<Result<(), String>, ConfigFileError> {
        config.topic_name = topic.as_str().to_owned();
        {
            let mut table = self.table.write();
            config.attributes = match attributes(table.topics.get(topic.as_str())) {
                Ok(attributes) => attributes,
                Err(reason) => return Ok(Err(reason)),
            };
            match table.topics.insert(config.topic_name.clone(), config.clone()) {
                Some(old) => tracing::info!(?old, new = ?config, "topic config updated"),
                None => tracing::info!(new = ?config, "topic created"),
            }
            config_file::next_version(&mut table.version);
        }
        self.persist().map(Ok)
    }

    /// Removes a topic; `Ok(None)` when there was none (nothing is written then).
    pub fn delete(&self, topic: &str) -> Result<Option<TopicConfig>, ConfigFileError> {
        let old = {
            let mut table = self.table.write();
            let Some(old) = table.topics.remove(topic) else {
                tracing::warn!(topic, "delete topic: no such topic");
                return Ok(None);
            };
            config_file::next_version(&mut table.version);
            old
        };
        self.persist()?;
        Ok(Some(old))
    }

    /// Java's `createTopicInSendMessageMethod`: a producer sends to an unknown topic naming a
    /// template (usually TBW102). The template must carry INHERIT; the new topic gets
    /// `min(client_default_queue_nums, template's write queues)` queues and the template's perm
    /// without INHERIT. `None` when there is no usable template.
    pub fn create_topic_in_send_message_method(
        &self,
        topic: &TopicName,
        default_topic: &str,
        remote_addr: &str,
        client_default_queue_nums: i32,
        topic_sys_flag: i32,
        auto_create: bool,
    ) -> Option<Obtained> {
        let mut table = self.table.write();
        if let Some(existing) = table.topics.get(topic.as_str()) {
            return Some(Obtained::Existing(existing.clone()));
        }
        let Some(template) = table.topics.get_mut(default_topic) else {
            tracing::warn!(%topic, default_topic, producer = remote_addr, "cannot create topic: no such template topic");
            return None;
        };
        if default_topic == system_topic::AUTO_CREATE_TEMPLATE && !auto_create {
            // Java strips INHERIT from the stored template here, so the check below refuses.
            template.perm = perm::READ | perm::WRITE;
        }
        if template.perm & perm::INHERIT == 0 {
            tracing::warn!(%topic, default_topic, perm = template.perm, producer = remote_addr, "cannot create topic: template lacks INHERIT");
            return None;
        }
        let queues = client_default_queue_nums.min(template.write_queue_nums).max(0);
        let created = TopicConfig {
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: template.perm & !perm::INHERIT,
            topic_sys_flag,
            topic_filter_type: template.topic_filter_type.clone(),
            ..TopicConfig::new(topic)
        };
        tracing::info!(config = ?created, default_topic, producer = remote_addr, "topic created from template");
        table.topics.insert(topic.as_str().to_owned(), created.clone());
        config_file::next_version(&mut table.version);
        drop(table);
        self.file.mark_dirty();
        Some(Obtained::Created(created))
    }

    /// Java's `createTopicInSendMessageBackMethod`: retry and dead-letter topics, made as asked.
    pub fn create_topic_in_send_message_back_method(&self, topic: &TopicName, client_default_queue_nums: i32, perm: i32, topic_sys_flag: i32) -> Obtained {
        if let Some(existing) = self.select(topic) {
            return Obtained::Existing(existing);
        }
        let mut table = self.table.write();
        if let Some(existing) = table.topics.get(topic.as_str()) {
            return Obtained::Existing(existing.clone());
        }
        let created = TopicConfig {
            read_queue_nums: client_default_queue_nums,
            write_queue_nums: client_default_queue_nums,
            perm,
            topic_sys_flag,
            ..TopicConfig::new(topic)
        };
        tracing::info!(config = ?created, "topic created");
        table.topics.insert(topic.as_str().to_owned(), created.clone());
        config_file::next_version(&mut table.version);
        drop(table);
        self.file.mark_dirty();
        Obtained::Created(created)
    }

    /// A slave takes its master's topics (Java's `SlaveSynchronize.syncTopicConfig`): the whole
    /// table and its version, when the version differs. True when it replaced them.
    pub fn replace_from_master(&self, master: TopicConfigSerializeWrapper) -> bool {
        {
            let mut table = self.table.write();
            if table.version == master.data_version {
                return false;
            }
            table.version = master.data_version;
            table.topics = master.topic_config_table;
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

    /// Writes the file if a change is not on disk yet (the persister's tick). Java logs a failed
    /// write and keeps the change in memory; so do we, and the next tick tries again.
    pub fn persist_if_dirty(&self) -> Result<bool, ConfigFileError> {
        self.file.persist_if_dirty(|| self.encode())
    }

    fn encode(&self) -> Vec<u8> {
        // Serialized from borrowed parts under the read lock: no copy of the table, no IO.
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct TopicsFile<'a> {
            data_version: &'a DataVersion,
            topic_config_table: &'a BTreeMap<String, TopicConfig>,
        }
        let table = self.table.read();
        remoting::fastjson::to_vec(
            &TopicsFile { data_version: &table.version, topic_config_table: &table.topics },
            remoting::fastjson::JsonStyle::FastjsonPretty,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker() -> BrokerConfig {
        BrokerConfig { broker_name: "broker-a".into(), broker_cluster_name: "DefaultCluster".into(), ..BrokerConfig::default() }
    }

    fn open(dir: &Path, broker: &BrokerConfig) -> TopicConfigManager {
        TopicConfigManager::open(broker, true, dir).unwrap()
    }

    fn name(topic: &str) -> TopicName {
        TopicName::new(topic).unwrap()
    }

    /// As the broker's persister does at shutdown.
    fn close(m: TopicConfigManager) {
        m.persist_if_dirty().unwrap();
    }

    #[test]
    fn a_new_broker_has_javas_system_topics() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path(), &broker());
        let expect = [
            ("SELF_TEST_TOPIC", 1, 6),
            ("TBW102", 8, 7),
            ("BenchmarkTest", 1024, 6),
            ("DefaultCluster", 16, 7),
            ("broker-a", 1, 7),
            ("OFFSET_MOVED_EVENT", 1, 6),
            ("SCHEDULE_TOPIC_XXXX", 18, 6),
            ("DefaultCluster_REPLY_TOPIC", 1, 6),
            // 5.x's, made at start by ours too.
            ("RMQ_SYS_TRANS_HALF_TOPIC", 1, 6),
            ("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, 6),
            ("rmq_sys_REVIVE_LOG_DefaultCluster", 8, 6),
            ("rmq_sys_SYNC_BROKER_MEMBER_broker-a", 1, 1),
            ("rmq_sys_wheel_timer", 1, 6),
        ];
        for (name, queues, perm) in expect {
            let tc = m.select(name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!((tc.read_queue_nums, tc.write_queue_nums, tc.perm), (queues, queues, perm), "{name}");
        }
        assert_eq!(m.wrapper().topic_config_table.len(), expect.len());
        assert!(!m.contains("RMQ_SYS_TRACE_TOPIC"));
        assert_eq!(m.data_version().counter, 0);
        assert!(!dir.path().join("config").join(TOPICS_FILE).exists(), "Java writes nothing until a change");
    }

    #[test]
    fn switches_decide_the_template_trace_topic_and_cluster_perm() {
        let dir = tempfile::tempdir().unwrap();
        let b = BrokerConfig { auto_create_topic_enable: false, trace_topic_enable: true, cluster_topic_enable: false, broker_topic_enable: false, ..broker() };
        let m = open(dir.path(), &b);
        assert!(!m.contains("TBW102"));
        assert_eq!(m.select("RMQ_SYS_TRACE_TOPIC").map(|t| t.read_queue_nums), Some(1));
        assert_eq!(m.select("DefaultCluster").map(|t| t.perm), Some(perm::INHERIT));
        assert_eq!(m.select("broker-a").map(|t| t.perm), Some(perm::INHERIT));
    }

    #[test]
    fn every_change_bumps_the_version_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path(), &broker());
        m.update(&name("TopicTest"), topic("TopicTest", 4, 6)).unwrap();
        m.update(&name("TopicTest"), TopicConfig { order: true, ..topic("TopicTest", 8, 6) }).unwrap();
        assert_eq!(m.delete("nope").unwrap(), None);
        m.update(&name("Gone"), topic("Gone", 1, 6)).unwrap();
        assert!(m.delete("Gone").unwrap().is_some());
        let version = m.data_version();
        assert_eq!(version.counter, 4);
        drop(m);

        let again = open(dir.path(), &broker());
        assert_eq!(again.data_version(), version);
        let tc = again.select("TopicTest").unwrap();
        assert!(tc.order);
        assert_eq!(tc.write_queue_nums, 8);
        assert!(!again.contains("Gone"));
    }

    #[test]
    fn the_file_wins_over_the_built_in_system_topics() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path(), &broker());
        m.update(&name("TBW102"), topic("TBW102", 4, 7)).unwrap();
        drop(m);
        assert_eq!(open(dir.path(), &broker()).select("TBW102").map(|t| t.write_queue_nums), Some(4));
    }

    #[test]
    fn sending_to_a_new_topic_copies_the_template_without_inherit() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path(), &broker());
        let v0 = m.data_version().counter;
        let made = m.create_topic_in_send_message_method(&name("NewTopic"), "TBW102", "10.0.0.9:5000", 4, 0, true).unwrap();
        assert!(made.was_created());
        let tc = made.config();
        assert_eq!((tc.read_queue_nums, tc.write_queue_nums, tc.perm), (4, 4, 6));
        assert_eq!(m.data_version().counter, v0 + 1);
        let more = m.create_topic_in_send_message_method(&name("Wide"), "TBW102", "p", 64, 1, true).unwrap().into_config();
        assert_eq!((more.write_queue_nums, more.topic_sys_flag), (8, 1), "never more queues than the template");
        let again = m.create_topic_in_send_message_method(&name("NewTopic"), "TBW102", "p", 2, 0, true).unwrap();
        assert!(!again.was_created());
        assert_eq!(again.config().write_queue_nums, 4);
        assert!(m.file().is_dirty(), "the send path leaves the write to the persister");
        close(m);
        assert!(open(dir.path(), &broker()).contains("NewTopic"));
    }

    #[test]
    fn a_template_without_inherit_or_a_missing_one_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path(), &broker());
        assert_eq!(m.create_topic_in_send_message_method(&name("X"), "SELF_TEST_TOPIC", "p", 4, 0, true), None);
        assert_eq!(m.create_topic_in_send_message_method(&name("X"), "NoSuchTemplate", "p", 4, 0, true), None);
        assert!(!m.contains("X"));
    }

    #[test]
    fn a_stored_tbw102_is_no_template_when_auto_create_is_off() {
        let dir = tempfile::tempdir().unwrap();
        open(dir.path(), &broker()).update(&name("TBW102"), topic("TBW102", 8, 7)).unwrap();
        let m = open(dir.path(), &BrokerConfig { auto_create_topic_enable: false, ..broker() });
        assert_eq!(m.create_topic_in_send_message_method(&name("X"), "TBW102", "p", 4, 0, false), None);
        assert_eq!(m.select("TBW102").map(|t| t.perm), Some(6));
    }

    #[test]
    fn only_the_broker_writes_its_system_topics() {
        for t in [
            "SCHEDULE_TOPIC_XXXX",
            "RMQ_SYS_TRANS_HALF_TOPIC",
            "RMQ_SYS_TRANS_OP_HALF_TOPIC",
            "TRANS_CHECK_MAX_TIME_TOPIC",
            "SELF_TEST_TOPIC",
            "OFFSET_MOVED_EVENT",
        ] {
            assert!(system_topic::is_not_allowed_send(t), "{t}");
            assert_eq!(system_topic::name(t), t);
        }
        assert!(!system_topic::is_not_allowed_send("TopicTest"));
        assert!(system_topic::is_system_topic("rmq_sys_wheel_timer") && !system_topic::is_system_topic("%RETRY%g"));
    }

    #[test]
    fn retry_topics_are_made_as_asked() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path(), &broker());
        let made = m.create_topic_in_send_message_back_method(&name("%RETRY%g"), 1, 6, 0);
        assert!(made.was_created());
        assert_eq!(made.config().write_queue_nums, 1);
        assert!(!m.create_topic_in_send_message_back_method(&name("%RETRY%g"), 3, 2, 0).was_created());
    }
}
