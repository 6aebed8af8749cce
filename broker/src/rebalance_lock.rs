//! Queue locks for orderly consumers (Java `RebalanceLockManager`): a client that holds a queue
//! keeps it while it renews the lock; a lock not renewed for 60 s may be taken by another client.
//!
//! Unlike Java's table, expired locks are forgotten (the broker sweeps them), and the table holds
//! at most [`MAX_LOCKS`] entries: a client cannot grow it without bound by locking made-up queues.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Java's `rocketmq.broker.rebalance.lockMaxLiveTime` default.
pub const LOCK_MAX_LIVE_TIME: Duration = Duration::from_secs(60);

/// The most locks held at once, over every group (a lock is ~100 bytes).
pub const MAX_LOCKS: usize = 1_000_000;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    pub broker_name: String,
    pub queue_id: i32,
    pub topic: String,
}

struct LockEntry {
    client_id: String,
    last_update: Instant,
}

#[derive(Default)]
struct Table {
    groups: HashMap<String, HashMap<MessageQueue, LockEntry>>,
    total: usize,
}

#[derive(Default)]
pub struct RebalanceLockManager {
    table: Mutex<Table>,
}

impl RebalanceLockManager {
    /// Locks what it can of `mqs` for `client_id`; returns the queues it now holds.
    pub fn try_lock_batch(&self, group: &str, mqs: &[MessageQueue], client_id: &str, now: Instant) -> Vec<MessageQueue> {
        let mut t = self.table.lock();
        let Table { groups, total } = &mut *t;
        let table = groups.entry(group.to_owned()).or_default();
        let mut locked = Vec::new();
        for mq in mqs {
            if !table.contains_key(mq) {
                if *total >= MAX_LOCKS {
                    tracing::warn!(group, "queue lock table full; lock refused");
                    continue;
                }
                *total += 1;
            }
            let entry = table.entry(mq.clone()).or_insert_with(|| LockEntry { client_id: client_id.to_owned(), last_update: now });
            let expired = now.saturating_duration_since(entry.last_update) > LOCK_MAX_LIVE_TIME;
            if entry.client_id == client_id || expired {
                entry.client_id = client_id.to_owned();
                entry.last_update = now;
                locked.push(mq.clone());
            }
        }
        if table.is_empty() {
            groups.remove(group);
        }
        locked
    }

    /// Releases the queues `client_id` holds among `mqs`.
    pub fn unlock_batch(&self, group: &str, mqs: &[MessageQueue], client_id: &str) {
        let mut t = self.table.lock();
        let Table { groups, total } = &mut *t;
        if let Some(table) = groups.get_mut(group) {
            for mq in mqs {
                if table.get(mq).is_some_and(|e| e.client_id == client_id) {
                    table.remove(mq);
                    *total -= 1;
                }
            }
            if table.is_empty() {
                groups.remove(group);
            }
        }
    }

    /// Drops locks not renewed within [`LOCK_MAX_LIVE_TIME`] (anyone may take them already).
    pub fn forget_expired(&self, now: Instant) {
        let mut t = self.table.lock();
        let Table { groups, total } = &mut *t;
        groups.retain(|_, table| {
            table.retain(|_, e| {
                let live = now.saturating_duration_since(e.last_update) <= LOCK_MAX_LIVE_TIME;
                if !live {
                    *total -= 1;
                }
                live
            });
            !table.is_empty()
        });
    }

    /// Locks held right now.
    pub fn len(&self) -> usize {
        self.table.lock().total
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(q: i32) -> MessageQueue {
        MessageQueue { broker_name: "b".into(), queue_id: q, topic: "T".into() }
    }

    #[test]
    fn a_held_queue_is_refused_to_others_until_released_or_expired() {
        let m = RebalanceLockManager::default();
        let t0 = Instant::now();
        assert_eq!(m.try_lock_batch("g", &[mq(0), mq(1)], "c1", t0), vec![mq(0), mq(1)]);
        assert_eq!(m.try_lock_batch("g", &[mq(1), mq(2)], "c2", t0), vec![mq(2)]);
        m.unlock_batch("g", &[mq(1)], "c1");
        assert_eq!(m.try_lock_batch("g", &[mq(1)], "c2", t0), vec![mq(1)]);
        assert_eq!(m.try_lock_batch("g", &[mq(0)], "c2", t0 + Duration::from_secs(61)), vec![mq(0)]);
        assert!(m.try_lock_batch("other", &[mq(0)], "c3", t0).contains(&mq(0)));
    }

    #[test]
    fn expired_and_released_locks_are_forgotten() {
        let m = RebalanceLockManager::default();
        let t0 = Instant::now();
        m.try_lock_batch("g", &[mq(0), mq(1)], "c1", t0);
        m.try_lock_batch("h", &[mq(0)], "c2", t0 + Duration::from_secs(30));
        m.unlock_batch("g", &[mq(1)], "c1");
        assert_eq!(m.len(), 2);
        m.forget_expired(t0 + Duration::from_secs(61));
        assert_eq!(m.len(), 1, "only h's lock is still live");
        m.forget_expired(t0 + Duration::from_secs(100));
        assert!(m.is_empty());
        assert!(m.table.lock().groups.is_empty());
    }
}
