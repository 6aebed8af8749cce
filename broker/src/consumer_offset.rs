//! `ConsumerOffsetManager`: committed consume offsets per `topic@group` and queue, persisted to
//! `config/consumerOffset.json` (`{"dataVersion":..,"offsetTable":{"T@g":{0:12,1:7}}}`, queue ids
//! as fastjson's bare integer keys).
//!
//! Nothing here runs on its own: the broker calls [`ConsumerOffsetManager::persist`] every
//! `flushConsumerOffsetInterval` and at shutdown, as Java's scheduled task does.
//!
//! We write `dataVersion` (5.x reads it back; 4.9 ignores it) but not 5.x's `groupTopicMap`, a
//! getter fastjson happens to serialize, which nothing reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use parking_lot::RwLock;
use remoting::protocol::name::{GroupName, TopicName};
use remoting::protocol::topic::DataVersion;
use serde::{Deserialize, Serialize};

use crate::config_file::{self, ConfigFile, ConfigFileError};

pub const CONSUMER_OFFSET_FILE: &str = "consumerOffset.json";

pub const TOPIC_GROUP_SEPARATOR: char = '@';

/// Queue id -> next offset to consume (a consume-queue unit index).
pub type QueueOffsets = BTreeMap<i32, i64>;

/// The file and the GET_ALL_CONSUMER_OFFSET body (Java's `ConsumerOffsetSerializeWrapper`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerOffsetFile {
    #[serde(default = "config_file::new_data_version")]
    pub data_version: DataVersion,
    #[serde(default)]
    pub offset_table: BTreeMap<String, QueueOffsets>,
}

/// `topic@group`.
pub fn topic_at_group(topic: &str, group: &str) -> String {
    format!("{topic}{TOPIC_GROUP_SEPARATOR}{group}")
}

/// Splits a key as Java's `key.split("@")` with its `length == 2` check: keys whose topic or
/// group contains `@` (or whose group is empty) are skipped.
pub fn split_topic_at_group(key: &str) -> Option<(&str, &str)> {
    let mut parts: Vec<&str> = key.split(TOPIC_GROUP_SEPARATOR).collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    match parts[..] {
        [topic, group] => Some((topic, group)),
        _ => None,
    }
}

pub struct ConsumerOffsetManager {
    file: ConfigFile,
    table: RwLock<ConsumerOffsetFile>,
    /// 5.x's server-side resets (`useServerSideResetOffset`), by `topic@group` and queue: each
    /// answers the queue's next pull with OFFSET_MOVED to it, once, and holds off the clients'
    /// commits until then. In memory, as Java's `resetOffsetTable`.
    resets: RwLock<BTreeMap<String, BTreeMap<i32, i64>>>,
}

impl ConsumerOffsetManager {
    /// Loads `<storePathRootDir>/config/consumerOffset.json` (or its backup).
    pub fn open(store_root_dir: &Path) -> Result<ConsumerOffsetManager, ConfigFileError> {
        let file = ConfigFile::new(config_file::config_dir(store_root_dir).join(CONSUMER_OFFSET_FILE));
        let table = file
            .load::<ConsumerOffsetFile>()?
            .unwrap_or_else(|| ConsumerOffsetFile { data_version: config_file::new_data_version(), offset_table: BTreeMap::new() });
        Ok(ConsumerOffsetManager { file, table: RwLock::new(table), resets: RwLock::new(BTreeMap::new()) })
    }

    /// Records a consumer's committed offset (UPDATE_CONSUMER_OFFSET, pulls with the commit flag).
    /// Validated names, so no key can hold a second `@` and break the file's `topic@group` keys.
    pub fn commit_offset(&self, client_host: &str, group: &GroupName, topic: &TopicName, queue_id: i32, offset: i64) {
        let key = topic_at_group(topic, group);
        let mut table = self.table.write();
        let previous = table.offset_table.entry(key).or_default().insert(queue_id, offset);
        if let Some(stored) = previous.filter(|stored| offset < *stored) {
            tracing::warn!(client_host, %group, %topic, queue_id, offset, stored, "consumer offset moved backwards");
        }
        config_file::next_version(&mut table.data_version);
    }

    /// The committed offset (or a server-side reset not yet taken); `None` where Java answers -1
    /// (nothing committed).
    pub fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let key = topic_at_group(topic, group);
        if let Some(reset) = self.resets.read().get(&key).and_then(|q| q.get(&queue_id)) {
            return Some(*reset);
        }
        self.table.read().offset_table.get(&key)?.get(&queue_id).copied()
    }

    /// Java's `assignResetOffset`: the queue's offset is set to `offset` and its next pull told so.
    pub fn assign_reset_offset(&self, group: &GroupName, topic: &TopicName, queue_id: i32, offset: i64) {
        if queue_id < 0 || offset < 0 {
            return;
        }
        self.resets.write().entry(topic_at_group(topic, group)).or_default().insert(queue_id, offset);
        self.commit_offset("reset-offset", group, topic, queue_id, offset);
    }

    /// Java's `hasOffsetReset`: a reset the queue's pulls have not taken yet.
    pub fn has_offset_reset(&self, group: &str, topic: &str, queue_id: i32) -> bool {
        self.resets.read().get(&topic_at_group(topic, group)).is_some_and(|q| q.contains_key(&queue_id))
    }

    /// Java's `queryThenEraseResetOffset`: the reset a pull takes, once.
    pub fn take_reset_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let mut resets = self.resets.write();
        let key = topic_at_group(topic, group);
        let queues = resets.get_mut(&key)?;
        let offset = queues.remove(&queue_id);
        if queues.is_empty() {
            resets.remove(&key);
        }
        offset
    }

    /// Every queue's committed offset for one group and topic.
    pub fn query_offsets(&self, group: &str, topic: &str) -> Option<QueueOffsets> {
        self.table.read().offset_table.get(&topic_at_group(topic, group)).cloned()
    }

    /// Java's `whichGroupByTopic`.
    pub fn groups_of_topic(&self, topic: &str) -> BTreeSet<String> {
        self.keys_matching(|t, _| t == topic).into_iter().map(|(_, g)| g).collect()
    }

    /// Java's `whichTopicByConsumer`.
    pub fn topics_of_group(&self, group: &str) -> BTreeSet<String> {
        self.keys_matching(|_, g| g == group).into_iter().map(|(t, _)| t).collect()
    }

    fn keys_matching(&self, wanted: impl Fn(&str, &str) -> bool) -> Vec<(String, String)> {
        self.table
            .read()
            .offset_table
            .keys()
            .filter_map(|key| split_topic_at_group(key))
            .filter(|(t, g)| wanted(t, g))
            .map(|(t, g)| (t.to_owned(), g.to_owned()))
            .collect()
    }

    /// Java's `removeOffset`: drops every topic of the group (DELETE_SUBSCRIPTIONGROUP with
    /// cleanOffset). Returns the keys removed.
    pub fn remove_group(&self, group: &str) -> Vec<String> {
        let mut table = self.table.write();
        let doomed: Vec<String> = table.offset_table.keys().filter(|key| split_topic_at_group(key).is_some_and(|(_, g)| g == group)).cloned().collect();
        for key in &doomed {
            table.offset_table.remove(key);
            tracing::warn!(key = %key, "consumer offsets removed");
        }
        if !doomed.is_empty() {
            config_file::next_version(&mut table.data_version);
        }
        doomed
    }

    /// Java's `cloneOffset` (CLONE_GROUP_OFFSET): `dest_group` gets `src_group`'s offsets of the
    /// topic. Returns whether the source had any.
    pub fn clone_offsets(&self, src_group: &str, dest_group: &str, topic: &str) -> bool {
        let mut table = self.table.write();
        let Some(offsets) = table.offset_table.get(&topic_at_group(topic, src_group)).cloned() else {
            return false;
        };
        table.offset_table.insert(topic_at_group(topic, dest_group), offsets);
        config_file::next_version(&mut table.data_version);
        true
    }

    pub fn data_version(&self) -> DataVersion {
        self.table.read().data_version.clone()
    }

    /// A slave takes its master's offsets (Java's `syncConsumerOffset`: `putAll`, so a key the
    /// master has replaces ours, and keys only we have stay) and, as 5.x, its data version.
    pub fn merge_from_master(&self, master: ConsumerOffsetFile) {
        let mut table = self.table.write();
        table.offset_table.extend(master.offset_table);
        // 5.x takes the master's version too.
        table.data_version = master.data_version;
    }

    /// Everything, as the file holds it (the GET_ALL_CONSUMER_OFFSET body).
    pub fn snapshot(&self) -> ConsumerOffsetFile {
        self.table.read().clone()
    }

    /// Writes the file. Encodes under the read lock, so commits wait only for the encoding.
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        let json = {
            let table = self.table.read();
            remoting::fastjson::to_vec(&*table, remoting::fastjson::JsonStyle::FastjsonPretty)
        };
        self.file.persist_bytes(&json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> ConsumerOffsetManager {
        ConsumerOffsetManager::open(dir).unwrap()
    }

    /// `commit_offset` with names from literals.
    fn commit(m: &ConsumerOffsetManager, group: &str, topic: &str, queue_id: i32, offset: i64) {
        m.commit_offset("c", &GroupName::new(group).unwrap(), &TopicName::new(topic).unwrap(), queue_id, offset);
    }

    #[test]
    fn committed_offsets_are_queried_per_queue_and_unknown_ones_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path());
        commit(&m, "g", "T", 0, 12);
        commit(&m, "g", "T", 1, 7);
        commit(&m, "g", "T", 1, 5);
        assert_eq!(m.query_offset("g", "T", 0), Some(12));
        assert_eq!(m.query_offset("g", "T", 1), Some(5), "a lower offset is stored all the same");
        assert_eq!(m.query_offset("g", "T", 2), None);
        assert_eq!(m.query_offset("other", "T", 0), None);
        assert_eq!(m.query_offsets("g", "T"), Some([(0, 12), (1, 5)].into()));
        assert_eq!(m.data_version().counter, 3);
    }

    #[test]
    fn offsets_survive_persist_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path());
        commit(&m, "g", "T", 3, 1024);
        m.persist().unwrap();
        let text = std::fs::read_to_string(dir.path().join("config").join(CONSUMER_OFFSET_FILE)).unwrap();
        assert!(text.contains("\"offsetTable\":{\n\t\t\"T@g\":{3:1024\n\t\t}\n\t}"), "{text}");
        let again = open(dir.path());
        assert_eq!(again.query_offset("g", "T", 3), Some(1024));
        assert_eq!(again.data_version(), m.data_version());
    }

    #[test]
    fn groups_and_topics_are_found_through_the_keys() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path());
        commit(&m, "g1", "T1", 0, 1);
        commit(&m, "g1", "T2", 0, 1);
        commit(&m, "g2", "T1", 0, 1);
        assert_eq!(m.groups_of_topic("T1"), ["g1".to_owned(), "g2".to_owned()].into());
        assert_eq!(m.topics_of_group("g1"), ["T1".to_owned(), "T2".to_owned()].into());
        assert!(m.groups_of_topic("T3").is_empty());
    }

    #[test]
    fn removing_a_group_keeps_other_groups_with_similar_names() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path());
        commit(&m, "g", "T", 0, 1);
        commit(&m, "g", "%RETRY%g", 0, 1);
        commit(&m, "gg", "T", 0, 1);
        let mut removed = m.remove_group("g");
        removed.sort();
        assert_eq!(removed, vec!["%RETRY%g@g".to_owned(), "T@g".to_owned()]);
        assert_eq!(m.query_offset("gg", "T", 0), Some(1));
        assert!(m.remove_group("absent").is_empty());
    }

    #[test]
    fn cloning_copies_one_topics_offsets_to_another_group() {
        let dir = tempfile::tempdir().unwrap();
        let m = open(dir.path());
        commit(&m, "src", "T", 0, 10);
        commit(&m, "src", "T", 1, 20);
        assert!(m.clone_offsets("src", "dst", "T"));
        assert_eq!(m.query_offsets("dst", "T"), m.query_offsets("src", "T"));
        assert!(!m.clone_offsets("nobody", "dst", "T"));
    }

    #[test]
    fn keys_split_like_javas_split_at_the_separator() {
        assert_eq!(split_topic_at_group("T@g"), Some(("T", "g")));
        assert_eq!(split_topic_at_group("@g"), Some(("", "g")));
        assert_eq!(split_topic_at_group("T@"), None);
        assert_eq!(split_topic_at_group("T@g@x"), None);
        assert_eq!(split_topic_at_group("T"), None);
    }
}
