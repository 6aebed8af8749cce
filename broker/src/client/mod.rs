//! Who is connected: consumers and producers by group, one entry per connection (not per
//! client id), dropped when the connection closes or sends no heartbeat for 120 s.

pub mod consumer_manager;
pub mod producer_manager;

use std::time::Instant;

use remoting::server::Channel;
use remoting::LanguageCode;

/// Java's `channelExpiredTimeout`.
pub const CHANNEL_EXPIRED_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// One client connection as its heartbeats describe it.
#[derive(Clone, Debug)]
pub struct ClientChannelInfo {
    pub channel: Channel,
    pub client_id: String,
    pub language: LanguageCode,
    pub version: i32,
    pub last_update: Instant,
}
