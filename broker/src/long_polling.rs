//! Long polling (Java `PullRequestHoldService`): a pull that finds nothing new is parked per
//! topic and queue, and woken when the dispatcher reports a matching message, when the periodic
//! check finds its queue grown or its suspend time over; it is then run again without the right
//! to suspend, and answered.
//!
//! Parked pulls are bounded, per connection and in all: a client can park one pull per queue it
//! owns, not unbounded memory. A pull past a bound is refused at once (the caller answers it
//! SYSTEM_BUSY, and the Java client retries 3 s later).

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;
use remoting::protocol::heartbeat::SubscriptionData;
use remoting::server::Channel;
use remoting::RemotingCommand;

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

/// Why a pull could not be parked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotParked {
    ConnectionFull { limit: usize },
    BrokerFull { limit: usize },
}

impl std::fmt::Display for NotParked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotParked::ConnectionFull { limit } => write!(f, "[PCBUSY]this connection already holds {limit} suspended pulls (maxParkedPullsPerConnection)"),
            NotParked::BrokerFull { limit } => write!(f, "[PCBUSY]the broker already holds {limit} suspended pulls (maxParkedPulls)"),
        }
    }
}

fn key(topic: &str, queue_id: i32) -> String {
    format!("{topic}@{queue_id}")
}

/// Runs a woken pull again (on the pull pool) and answers it.
pub type Wake = Box<dyn Fn(HeldPull) + Send + Sync>;

#[derive(Default)]
struct Held {
    by_queue: HashMap<String, Vec<HeldPull>>,
    /// Parked pulls per connection id.
    by_channel: HashMap<u64, usize>,
    total: usize,
}

impl Held {
    fn forget(&mut self, pull: &HeldPull) {
        self.total -= 1;
        if let Some(n) = self.by_channel.get_mut(&pull.channel.id()) {
            *n -= 1;
            if *n == 0 {
                self.by_channel.remove(&pull.channel.id());
            }
        }
    }
}

pub struct PullRequestHoldService {
    held: Mutex<Held>,
    wake: Wake,
    max_per_connection: usize,
    max_total: usize,
}

impl PullRequestHoldService {
    pub fn new(wake: Wake, max_per_connection: usize, max_total: usize) -> Self {
        PullRequestHoldService { held: Mutex::new(Held::default()), wake, max_per_connection, max_total }
    }

    /// Parks a pull, unless its connection or the broker holds as many as allowed; then the pull
    /// comes back with the reason.
    pub fn suspend(&self, topic: &str, queue_id: i32, pull: HeldPull) -> Result<(), Box<(NotParked, HeldPull)>> {
        let mut held = self.held.lock();
        if held.total >= self.max_total {
            return Err(Box::new((NotParked::BrokerFull { limit: self.max_total }, pull)));
        }
        let on_channel = held.by_channel.entry(pull.channel.id()).or_default();
        if *on_channel >= self.max_per_connection {
            return Err(Box::new((NotParked::ConnectionFull { limit: self.max_per_connection }, pull)));
        }
        *on_channel += 1;
        held.total += 1;
        held.by_queue.entry(key(topic, queue_id)).or_default().push(pull);
        Ok(())
    }

    /// A message reached a queue (or the checker found one): wake the pulls it satisfies, and
    /// drop those whose time is up or whose connection closed. `max_offset` is the queue's new
    /// end; `tags_code` that of the message, when known.
    pub fn notify_arriving(&self, topic: &str, queue_id: i32, max_offset: i64, tags_code: Option<i64>, now: Instant) {
        let woken: Vec<HeldPull> = {
            let mut held = self.held.lock();
            let Some(pulls) = held.by_queue.get_mut(&key(topic, queue_id)) else { return };
            let (wake, keep): (Vec<HeldPull>, Vec<HeldPull>) =
                pulls.drain(..).partition(|p| (max_offset > p.pull_from_offset && p.wants(tags_code)) || now >= p.deadline || p.channel.is_closed());
            *pulls = keep;
            for pull in &wake {
                held.forget(pull);
            }
            wake
        };
        for pull in woken {
            if !pull.channel.is_closed() {
                (self.wake)(pull);
            }
        }
    }

    /// The periodic check: wakes pulls whose queue has grown (per `max_offset_of`) or whose time
    /// is up.
    pub fn check(&self, now: Instant, max_offset_of: impl Fn(&str, i32) -> i64) {
        let keys: Vec<String> = self.held.lock().by_queue.keys().cloned().collect();
        for k in keys {
            let Some((topic, queue)) = k.rsplit_once('@') else { continue };
            let Ok(queue_id) = queue.parse::<i32>() else { continue };
            self.notify_arriving(topic, queue_id, max_offset_of(topic, queue_id), None, now);
        }
        self.held.lock().by_queue.retain(|_, pulls| !pulls.is_empty());
    }

    /// How many pulls are parked.
    pub fn held_count(&self) -> usize {
        self.held.lock().total
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

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
            2,
            3,
        );
        let later = Instant::now() + Duration::from_secs(60);
        assert!(hold.suspend("T", 0, held(&a, 5, later)).is_ok());
        assert!(hold.suspend("T", 1, held(&a, 5, later)).is_ok());
        assert_eq!(hold.suspend("T", 2, held(&a, 5, later)).map_err(|e| e.0), Err(NotParked::ConnectionFull { limit: 2 }));
        assert!(hold.suspend("T", 0, held(&b, 5, later)).is_ok());
        assert_eq!(hold.suspend("T", 1, held(&b, 5, later)).map_err(|e| e.0), Err(NotParked::BrokerFull { limit: 3 }));
        hold.notify_arriving("T", 0, 6, None, Instant::now());
        assert_eq!((woken.load(Ordering::SeqCst), hold.held_count()), (2, 1));
        assert!(hold.suspend("T", 2, held(&a, 5, later)).is_ok(), "a woken pull frees its place");
        hold.check(later, |_, _| 0);
        assert_eq!((woken.load(Ordering::SeqCst), hold.held_count()), (4, 0), "the deadline wakes the rest");
    }
}
