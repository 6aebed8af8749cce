//! Producer groups (Java `ProducerManager`): which connections produce for which group, so a
//! transaction check can reach a live producer.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::RwLock;

use super::{ClientChannel, ClientChannelInfo, SharedClientChannel, CHANNEL_EXPIRED_TIMEOUT};

#[derive(Default)]
pub struct ProducerManager {
    groups: RwLock<HashMap<String, HashMap<u64, ClientChannelInfo>>>,
}

impl ProducerManager {
    pub fn register(&self, group: &str, client: ClientChannelInfo) {
        self.groups.write().entry(group.to_owned()).or_default().insert(client.channel.id(), client);
    }

    pub fn unregister(&self, group: &str, channel: &dyn ClientChannel) {
        let mut groups = self.groups.write();
        if let Some(channels) = groups.get_mut(group) {
            channels.remove(&channel.id());
            if channels.is_empty() {
                groups.remove(group);
            }
        }
    }

    pub fn on_channel_closed(&self, channel: &dyn ClientChannel) {
        self.groups.write().retain(|_, channels| {
            channels.remove(&channel.id());
            !channels.is_empty()
        });
    }

    pub fn scan_expired(&self, now: Instant) {
        let expired: Vec<SharedClientChannel> = self
            .groups
            .read()
            .values()
            .flat_map(|m| m.values())
            .filter(|c| now.saturating_duration_since(c.last_update) > CHANNEL_EXPIRED_TIMEOUT)
            .map(|c| c.channel.clone())
            .collect();
        for channel in expired {
            channel.close();
            self.on_channel_closed(channel.as_ref());
        }
    }

    /// The live connections of a group.
    pub fn channels(&self, group: &str) -> Vec<ClientChannelInfo> {
        self.groups.read().get(group).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// The live connection of the client with this id, in whichever group (Java's `findChannel`):
    /// where a reply to that client's request goes.
    pub fn find_channel(&self, client_id: &str) -> Option<SharedClientChannel> {
        let groups = self.groups.read();
        let mut clients = groups.values().flat_map(|m| m.values());
        clients.find(|c| c.client_id == client_id && !c.channel.is_closed()).map(|c| c.channel.clone())
    }

    /// Every group with its live connections (GET_ALL_PRODUCER_INFO).
    pub fn table(&self) -> Vec<(String, Vec<ClientChannelInfo>)> {
        self.groups.read().iter().map(|(group, m)| (group.clone(), m.values().cloned().collect())).collect()
    }

    /// Any one live connection of a group (where a transaction check goes).
    pub fn any_channel(&self, group: &str) -> Option<SharedClientChannel> {
        self.groups.read().get(group)?.values().find(|c| !c.channel.is_closed()).map(|c| c.channel.clone())
    }
}
