//! Long polling (Java `PullRequestHoldService`): a pull that finds nothing new is parked per
//! topic and queue, and woken when the dispatcher reports a matching message or when its
//! suspend time runs out; it is then run again without the right to suspend, and answered.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use remoting::protocol::heartbeat::SubscriptionData;
use remoting::server::Channel;
use remoting::RemotingCommand;

/// A parked pull.
pub struct HeldPull {
    pub request: RemotingCommand,
    pub channel: Channel,
    pub deadline: Instant,
    /// The queue offset the consumer asked for.
    pub pull_from_offset: i64,
    /// For filtering arrivals by tags code; `None` matches everything.
    pub subscription: Option<SubscriptionData>,
}

impl HeldPull {
    fn wants(&self, tags_code: Option<i64>) -> bool {
        match (&self.subscription, tags_code) {
            (Some(sub), Some(code)) => sub.matches_tags_code(code),
            _ => true,
        }
    }
}

fn key(topic: &str, queue_id: i32) -> String {
    format!("{topic}@{queue_id}")
}

/// Runs a woken pull again (on the pull pool) and answers it.
pub type Wake = Box<dyn Fn(HeldPull) + Send + Sync>;

pub struct PullRequestHoldService {
    held: Mutex<HashMap<String, Vec<HeldPull>>>,
    wake: Wake,
}

impl PullRequestHoldService {
    pub fn new(wake: Wake) -> Self {
        PullRequestHoldService { held: Mutex::new(HashMap::new()), wake }
    }

    pub fn suspend(&self, topic: &str, queue_id: i32, pull: HeldPull) {
        self.held.lock().entry(key(topic, queue_id)).or_default().push(pull);
    }

    /// A message reached a queue (or the checker found one): wake the pulls it satisfies.
    /// `max_offset` is the queue's new end; `tags_code` that of the message, when known.
    pub fn notify_arriving(&self, topic: &str, queue_id: i32, max_offset: i64, tags_code: Option<i64>, now: Instant) {
        let woken: Vec<HeldPull> = {
            let mut held = self.held.lock();
            let Some(pulls) = held.get_mut(&key(topic, queue_id)) else { return };
            let (wake, keep): (Vec<HeldPull>, Vec<HeldPull>) = pulls
                .drain(..)
                .partition(|p| (max_offset > p.pull_from_offset && p.wants(tags_code)) || now >= p.deadline || p.channel.is_closed());
            *pulls = keep;
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
        let keys: Vec<String> = self.held.lock().keys().cloned().collect();
        for k in keys {
            let Some((topic, queue)) = k.rsplit_once('@') else { continue };
            let Ok(queue_id) = queue.parse::<i32>() else { continue };
            self.notify_arriving(topic, queue_id, max_offset_of(topic, queue_id), None, now);
        }
        self.held.lock().retain(|_, pulls| !pulls.is_empty());
    }

    /// How many pulls are parked.
    pub fn held_count(&self) -> usize {
        self.held.lock().values().map(Vec::len).sum()
    }

    /// Runs [`PullRequestHoldService::check`] every `interval` until `stop` says so.
    pub fn run(&self, interval: Duration, stop: impl Fn() -> bool, max_offset_of: impl Fn(&str, i32) -> i64) {
        while !stop() {
            std::thread::sleep(interval.min(Duration::from_millis(100)));
            self.check(Instant::now(), &max_offset_of);
        }
    }
}
