//! Consumer groups (Java `ConsumerManager` / `ConsumerGroupInfo`).

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::RwLock;
use remoting::protocol::heartbeat::SubscriptionData;

use super::{ClientChannel, ClientChannelInfo, CHANNEL_EXPIRED_TIMEOUT};

#[derive(Clone, Debug, Default)]
pub struct ConsumerGroupInfo {
    pub group: String,
    /// By channel id.
    pub channels: HashMap<u64, ClientChannelInfo>,
    /// By topic.
    pub subscriptions: HashMap<String, SubscriptionData>,
    pub consume_type: String,
    pub message_model: String,
    pub consume_from_where: String,
}

impl ConsumerGroupInfo {
    /// Client ids of the live connections, sorted (as the rebalance wants them).
    pub fn client_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.channels.values().map(|c| c.client_id.clone()).collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// What one heartbeat says about one consumer group.
pub struct ConsumerRegistration<'a> {
    pub group: &'a str,
    pub client: ClientChannelInfo,
    pub consume_type: &'a str,
    pub message_model: &'a str,
    pub consume_from_where: &'a str,
    pub subscriptions: &'a [SubscriptionData],
}

#[derive(Default)]
pub struct ConsumerManager {
    groups: RwLock<HashMap<String, ConsumerGroupInfo>>,
}

impl ConsumerManager {
    /// Records a heartbeat. Returns true when the group changed in a way its members must hear
    /// about (a new connection, or different subscriptions).
    pub fn register(&self, reg: ConsumerRegistration<'_>) -> bool {
        let mut groups = self.groups.write();
        let info = groups.entry(reg.group.to_owned()).or_insert_with(|| ConsumerGroupInfo { group: reg.group.to_owned(), ..Default::default() });
        info.consume_type = reg.consume_type.to_owned();
        info.message_model = reg.message_model.to_owned();
        info.consume_from_where = reg.consume_from_where.to_owned();
        let id = reg.client.channel.id();
        let new_channel = !info.channels.contains_key(&id);
        info.channels.insert(id, reg.client);
        let mut subs_changed = false;
        for sub in reg.subscriptions {
            match info.subscriptions.get(&sub.topic) {
                Some(old) if old.sub_string == sub.sub_string && old.expression_type == sub.expression_type => {
                    // Keep the newest version (pulls check it).
                    if sub.sub_version > old.sub_version {
                        info.subscriptions.insert(sub.topic.clone(), sub.clone());
                    }
                }
                _ => {
                    subs_changed = true;
                    info.subscriptions.insert(sub.topic.clone(), sub.clone());
                }
            }
        }
        let before = info.subscriptions.len();
        info.subscriptions.retain(|topic, _| reg.subscriptions.iter().any(|s| &s.topic == topic));
        subs_changed |= info.subscriptions.len() != before;
        new_channel || subs_changed
    }

    /// Removes a connection from a group (UNREGISTER_CLIENT). True when it was there.
    pub fn unregister(&self, group: &str, channel: &dyn ClientChannel) -> bool {
        let mut groups = self.groups.write();
        let Some(info) = groups.get_mut(group) else { return false };
        let removed = info.channels.remove(&channel.id()).is_some();
        if info.channels.is_empty() {
            groups.remove(group);
        }
        removed
    }

    /// A connection closed: the groups it was in (whose other members must be told).
    pub fn on_channel_closed(&self, channel: &dyn ClientChannel) -> Vec<String> {
        let mut groups = self.groups.write();
        let mut affected = Vec::new();
        groups.retain(|name, info| {
            if info.channels.remove(&channel.id()).is_some() {
                affected.push(name.clone());
            }
            !info.channels.is_empty()
        });
        affected
    }

    /// Drops connections silent for 120 s, closing them; returns the affected groups.
    pub fn scan_expired(&self, now: Instant) -> Vec<String> {
        let mut expired = Vec::new();
        for info in self.groups.read().values() {
            for c in info.channels.values() {
                if now.saturating_duration_since(c.last_update) > CHANNEL_EXPIRED_TIMEOUT {
                    expired.push(c.channel.clone());
                }
            }
        }
        let mut affected = Vec::new();
        for channel in expired {
            channel.close();
            affected.extend(self.on_channel_closed(channel.as_ref()));
        }
        affected.sort();
        affected.dedup();
        affected
    }

    pub fn group(&self, group: &str) -> Option<ConsumerGroupInfo> {
        self.groups.read().get(group).cloned()
    }

    /// The group's subscription to `topic` (`Some(None)`: the group is known but does not
    /// subscribe to it), cloned alone: a group may subscribe to thousands of topics.
    pub fn group_subscription(&self, group: &str, topic: &str) -> Option<Option<SubscriptionData>> {
        Some(self.groups.read().get(group)?.subscriptions.get(topic).cloned())
    }

    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.group_subscription(group, topic).flatten()
    }

    /// Every group that subscribes to `topic`.
    pub fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        self.groups.read().values().filter(|g| g.subscriptions.contains_key(topic)).map(|g| g.group.clone()).collect()
    }

    pub fn groups(&self) -> Vec<String> {
        self.groups.read().keys().cloned().collect()
    }
}
