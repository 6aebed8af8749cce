//! The broker's metadata: topics, subscription groups, consumer offsets and the schedule's delay
//! progress, each kept in Java's `config/*.json` file (see the managers) and written by the one
//! persister. Services take the parts they need; [`Metadata`] hands them out together.

use std::path::Path;
use std::sync::Arc;

use crate::config::BrokerConfig;
use crate::config_file::ConfigFileError;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::delay_offset::DelayOffsets;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

/// Handles to the four metadata tables (cloning shares them).
#[derive(Clone)]
pub struct Metadata {
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub offsets: Arc<ConsumerOffsetManager>,
    pub delay_offsets: Arc<DelayOffsets>,
}

impl Metadata {
    /// Loads the files under `<storePathRootDir>/config/` (a corrupt file stops the start, as in
    /// Java; a missing one is an empty table).
    /// `timer_wheel_enable` adds the timer's topic to the system topics, as Java does.
    pub fn open(config: &BrokerConfig, timer_wheel_enable: bool, store_root_dir: &Path) -> Result<Metadata, ConfigFileError> {
        Ok(Metadata {
            topics: Arc::new(TopicConfigManager::open(config, timer_wheel_enable, store_root_dir)?),
            groups: Arc::new(SubscriptionGroupManager::open(store_root_dir)?),
            offsets: Arc::new(ConsumerOffsetManager::open(store_root_dir)?),
            delay_offsets: Arc::new(DelayOffsets::open(store_root_dir)?),
        })
    }
}
