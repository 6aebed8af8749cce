//! Long polling (Java `PullRequestHoldService`): a pull that finds nothing new is parked on its
//! topic and queue (see [`crate::parking`]), and woken when the dispatcher reports a matching
//! message, when the periodic check finds its queue grown or its suspend time over; it is then
//! run again without the right to suspend, and answered.

use std::time::Instant;

use remoting::protocol::heartbeat::SubscriptionData;
use remoting::server::Channel;
use remoting::RemotingCommand;

use crate::parking::{Parked, ParkingLot};

pub use crate::parking::NotParked;

/// A parked pull.
pub struct HeldPull {
    pub request: RemotingCommand,
    pub channel: Channel,
    pub deadline: Instant,
    /// When it was parked: its answer's latency runs from here.
    pub parked_at: Instant,
    /// The queue offset the consumer asked for.
    pub pull_from_offset: i64,
    /// For filtering arrivals by tags code; `None` matches everything.
    pub subscription: Option<SubscriptionData>,
}

impl HeldPull {
    fn wants(&self, tags_code: Option<i64>) -> bool {
        match (&self.subscription, tags_code) {
            // A property filter cannot be judged by the tags code: any arrival may match.
            (Some(sub), Some(code)) => !crate::filter::is_tag_type(&sub.expression_type) || sub.matches_tags_code(code),
            _ => true,
        }
    }
}

impl Parked for HeldPull {
    fn channel(&self) -> &Channel {
        &self.channel
    }

    fn deadline(&self) -> Instant {
        self.deadline
    }

    fn satisfied_by(&self, max_offset: i64, tags_code: Option<i64>) -> bool {
        max_offset > self.pull_from_offset && self.wants(tags_code)
    }

    /// The request (as its frame's length) and the subscription kept beside it (its text, tags
    /// and codes, each tag with a little for what holds it).
    fn size_bytes(&self) -> usize {
        const PER_ITEM: usize = 32;
        let request = remoting::codec::frame_size_estimate(&self.request);
        let subscription = self.subscription.as_ref().map_or(0, |s| {
            s.sub_string.len() + s.topic.len() + s.expression_type.len() + s.tags_set.iter().map(|t| t.len() + PER_ITEM).sum::<usize>() + s.code_set.len() * 4
        });
        std::mem::size_of::<Self>() + request + subscription
    }
}

/// The parked pulls.
pub type PullRequestHoldService = ParkingLot<HeldPull>;

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::parking::{ParkingBudget, QueueKey};

    /// A channel to a throwaway listener: parked pulls need a live connection.
    async fn channel() -> (Channel, tokio::net::TcpListener) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = remoting::client::RemotingClient::new(Default::default());
        let channel = client.channel(&listener.local_addr().unwrap().to_string()).await.unwrap();
        (channel, listener)
    }

    fn held(channel: &Channel, from: i64, deadline: Instant) -> HeldPull {
        HeldPull {
            request: RemotingCommand::default(),
            channel: channel.clone(),
            deadline,
            parked_at: Instant::now(),
            pull_from_offset: from,
            subscription: None,
        }
    }

    #[tokio::test]
    async fn parked_pulls_are_bounded_per_connection_and_in_all_and_counted_down_when_woken() {
        let (a, _la) = channel().await;
        let (b, _lb) = channel().await;
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        let hold = PullRequestHoldService::new(
            Box::new(move |_| {
                w.fetch_add(1, Ordering::SeqCst);
            }),
            ParkingBudget::new(2, 3),
        );
        let later = Instant::now() + Duration::from_secs(60);
        assert!(hold.park(QueueKey::new("T", 0), held(&a, 5, later)).is_ok());
        assert!(hold.park(QueueKey::new("T", 1), held(&a, 5, later)).is_ok());
        assert_eq!(hold.park(QueueKey::new("T", 2), held(&a, 5, later)).map_err(|e| e.0), Err(NotParked::ConnectionFull { limit: 2 }));
        assert!(hold.park(QueueKey::new("T", 0), held(&b, 5, later)).is_ok());
        assert_eq!(hold.park(QueueKey::new("T", 1), held(&b, 5, later)).map_err(|e| e.0), Err(NotParked::BrokerFull { limit: 3 }));
        hold.notify_arriving(&QueueKey::new("T", 0), 6, None, Instant::now());
        assert_eq!((woken.load(Ordering::SeqCst), hold.held_count()), (2, 1));
        assert!(hold.park(QueueKey::new("T", 2), held(&a, 5, later)).is_ok(), "a woken pull frees its place");
        hold.check(later, |_, _| 0);
        assert_eq!((woken.load(Ordering::SeqCst), hold.held_count()), (4, 0), "the deadline wakes the rest");
    }
}
