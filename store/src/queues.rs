//! The consume-queue table: every queue by topic and queue id (Java's `consumeQueueTable`),
//! loaded from `consumequeue/<topic>/<queue id>/` and grown by the dispatcher.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;
use remoting::protocol::name::TopicName;
use tracing::{info, warn};

use crate::config::MessageStoreConfig;
use crate::consume_queue::ConsumeQueue;
use crate::error::StoreError;

type Table = HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>;

pub struct ConsumeQueues {
    dir: PathBuf,
    file_size: usize,
    table: RwLock<Table>,
}

impl ConsumeQueues {
    /// Loads `consumequeue/TOPIC/QUEUEID/`; as Java, a queue directory whose name is not an
    /// integer and a topic entry that is a plain file are skipped; so is a folder whose name is not
    /// a valid topic (we would never write it) or a queue id out of range, with a warning.
    pub fn load(config: &MessageStoreConfig) -> Result<ConsumeQueues, StoreError> {
        let root = config.consume_queue_dir();
        let file_size = config.mapped_file_size_consume_queue;
        let mut table = Table::new();
        if let Ok(topics) = std::fs::read_dir(&root) {
            for topic in topics.flatten() {
                if !topic.path().is_dir() {
                    continue;
                }
                let Ok(topic_name) = TopicName::new(topic.file_name().to_string_lossy()) else {
                    warn!(dir = %topic.path().display(), "not a valid topic name; its consume queues are not loaded");
                    continue;
                };
                let Ok(queue_dirs) = std::fs::read_dir(topic.path()) else { continue };
                for queue in queue_dirs.flatten() {
                    let Ok(queue_id) = queue.file_name().to_string_lossy().parse::<i32>() else { continue };
                    let Ok(id) = u16::try_from(queue_id) else {
                        warn!(dir = %queue.path().display(), "queue id out of range; not loaded");
                        continue;
                    };
                    let cq = ConsumeQueue::new(&root, &topic_name, id, file_size);
                    cq.load()?;
                    table.entry(topic_name.as_str().to_owned()).or_default().insert(queue_id, Arc::new(cq));
                }
            }
        }
        Ok(ConsumeQueues { dir: root, file_size, table: RwLock::new(table) })
    }

    pub fn find(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.table.read().get(topic)?.get(&queue_id).cloned()
    }

    pub fn find_or_create(&self, topic: &TopicName, queue_id: u16) -> Arc<ConsumeQueue> {
        if let Some(cq) = self.find(topic.as_str(), i32::from(queue_id)) {
            return cq;
        }
        let mut table = self.table.write();
        table
            .entry(topic.as_str().to_owned())
            .or_default()
            .entry(i32::from(queue_id))
            .or_insert_with(|| Arc::new(ConsumeQueue::new(&self.dir, topic, queue_id, self.file_size)))
            .clone()
    }

    /// Every consume queue.
    pub fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        self.table.read().values().flat_map(|m| m.values().cloned()).collect()
    }

    /// Every topic that has a consume queue.
    pub fn topics(&self) -> Vec<String> {
        self.table.read().keys().cloned().collect()
    }

    /// The next queue offset of every queue (Java's `recoverTopicQueueTable`).
    pub fn offset_table(&self) -> HashMap<String, HashMap<i32, i64>> {
        let mut table: HashMap<String, HashMap<i32, i64>> = HashMap::new();
        for cq in self.all() {
            table.entry(cq.topic().to_owned()).or_default().insert(cq.queue_id(), cq.max_offset());
        }
        table
    }

    /// Destroys every queue (recovery, when there is no commit log for them to point at).
    pub(crate) fn destroy_all(&self) {
        let mut table = self.table.write();
        for cq in table.values().flat_map(|m| m.values()) {
            cq.destroy();
        }
        table.clear();
    }

    /// Deletes every consume queue of a topic; the commit log keeps the records until they
    /// expire, as in Java. Only a real folder that is a direct child of `consumequeue/` and
    /// carries the topic's name is removed (never a symlink's target).
    pub fn delete_topic(&self, topic: &TopicName) {
        let Some(queues) = self.table.write().remove(topic.as_str()) else { return };
        for cq in queues.values() {
            cq.destroy();
        }
        let dir = self.dir.join(topic.as_str());
        let is_own_folder = dir.parent() == Some(self.dir.as_path())
            && dir.file_name().is_some_and(|name| name == topic.as_str())
            && std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        if is_own_folder {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                warn!(dir = %dir.display(), error = %e, "cannot remove a deleted topic's consume queues");
            }
        }
    }

    /// Java's `cleanExpiredConsumerQueue`: destroys every queue (but those of the topics in
    /// `spared`) whose last message lies wholly below `min_phy_offset`, the commit log's first
    /// offset, so its records are gone. Returns how many queues were destroyed.
    pub(crate) fn destroy_expired(&self, min_phy_offset: i64, spared: &[&str]) -> usize {
        let mut destroyed = 0;
        let mut table = self.table.write();
        for (topic, queues) in table.iter_mut() {
            if spared.contains(&topic.as_str()) {
                continue;
            }
            queues.retain(|queue_id, cq| {
                let last_end = cq.max_physic_offset();
                let expired = last_end >= 0 && last_end <= min_phy_offset;
                if expired {
                    info!(topic, queue_id, min_commit_log_offset = min_phy_offset, last_end, "cleanExpiredConsumerQueue: consume queue destroyed");
                    cq.destroy();
                    destroyed += 1;
                }
                !expired
            });
        }
        table.retain(|_, queues| !queues.is_empty());
        destroyed
    }

    /// Java's `cleanUnusedTopic`: destroys the queues of every topic neither in `keep` nor in
    /// `spared`. Returns how many topics were cleaned.
    pub(crate) fn destroy_unused(&self, keep: &HashSet<String>, spared: &[&str]) -> usize {
        let mut table = self.table.write();
        let unused: Vec<String> = table.keys().filter(|t| !keep.contains(*t) && !spared.contains(&t.as_str())).cloned().collect();
        for topic in &unused {
            if let Some(queues) = table.remove(topic) {
                queues.values().for_each(|cq| cq.destroy());
                info!(topic, "cleanUnusedTopic: topic destroyed");
            }
        }
        unused.len()
    }
}
