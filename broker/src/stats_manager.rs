//! Java's `BrokerStatsManager`: per-topic and per-group counters (messages and bytes put, got,
//! sent back), each sampled into a minute, an hour and a day window, which VIEW_BROKER_STATS_DATA
//! (`mqadmin statsAll`, dashboards) and the consume TPS of the consume stats report.
//!
//! As Java's `StatsItem`: a sample every 10 s, 7 kept (the last minute); every 10 minutes, 7 kept
//! (the last hour); every hour, 25 kept (the last day). A window's figures are the difference
//! between its first and last sample: the sum, the TPS over the time between them, and the
//! average per call. An item exists from its first count on; asked for before that, it does not.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

/// Java's stats names (`Stats.*`), as VIEW_BROKER_STATS_DATA takes them.
pub mod names {
    pub const TOPIC_PUT_NUMS: &str = "TOPIC_PUT_NUMS";
    pub const TOPIC_PUT_SIZE: &str = "TOPIC_PUT_SIZE";
    pub const GROUP_GET_NUMS: &str = "GROUP_GET_NUMS";
    pub const GROUP_GET_SIZE: &str = "GROUP_GET_SIZE";
    pub const SNDBCK_PUT_NUMS: &str = "SNDBCK_PUT_NUMS";
    pub const BROKER_PUT_NUMS: &str = "BROKER_PUT_NUMS";
    pub const BROKER_GET_NUMS: &str = "BROKER_GET_NUMS";
    pub const ALL: [&str; 7] = [TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, BROKER_PUT_NUMS, BROKER_GET_NUMS];
}

/// Items per stats name at most: keys come from topics and groups, which are bounded themselves,
/// but their pairs (`topic@group`) are not; past this, new keys are not counted.
pub const MAX_ITEMS_PER_NAME: usize = 100_000;

const MINUTE_SAMPLES: usize = 7;
const HOUR_SAMPLES: usize = 7;
const DAY_SAMPLES: usize = 25;
/// Sampling ticks: every 10 s; the hour window every 60 ticks, the day window every 360.
pub const TICK_MS: u64 = 10_000;
const TICKS_PER_HOUR_SAMPLE: u64 = 60;
const TICKS_PER_DAY_SAMPLE: u64 = 360;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Snapshot {
    at_ms: i64,
    times: u64,
    value: u64,
}

/// One window's figures (Java's `StatsSnapshot`, the `BrokerStatsItem` of the answer).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub sum: u64,
    pub tps: f64,
    pub avgpt: f64,
}

#[derive(Debug, Default)]
struct Window {
    samples: Mutex<VecDeque<Snapshot>>,
}

impl Window {
    /// Java's `samplingIn*`: a first sample at zero one period back, then the counters now.
    fn sample(&self, now_ms: i64, period_ms: i64, keep: usize, times: u64, value: u64) {
        let mut s = self.samples.lock();
        if s.is_empty() {
            s.push_back(Snapshot { at_ms: now_ms - period_ms, times: 0, value: 0 });
        }
        s.push_back(Snapshot { at_ms: now_ms, times, value });
        while s.len() > keep {
            s.pop_front();
        }
    }

    /// Java's `computeStatsData`.
    fn figures(&self) -> Figures {
        let s = self.samples.lock();
        let (Some(first), Some(last)) = (s.front(), s.back()) else { return Figures::default() };
        let sum = last.value.saturating_sub(first.value);
        let elapsed = last.at_ms - first.at_ms;
        let tps = if elapsed > 0 { sum as f64 * 1000.0 / elapsed as f64 } else { 0.0 };
        let calls = last.times.saturating_sub(first.times);
        let avgpt = if calls > 0 { sum as f64 / calls as f64 } else { 0.0 };
        Figures { sum, tps, avgpt }
    }
}

/// Java's `StatsItem`: a value and a call count, and their three windows.
#[derive(Debug, Default)]
pub struct StatsItem {
    value: AtomicU64,
    times: AtomicU64,
    minute: Window,
    hour: Window,
    day: Window,
}

impl StatsItem {
    fn add(&self, value: u64, times: u64) {
        self.value.fetch_add(value, Ordering::Relaxed);
        self.times.fetch_add(times, Ordering::Relaxed);
    }

    fn counters(&self) -> (u64, u64) {
        (self.times.load(Ordering::Relaxed), self.value.load(Ordering::Relaxed))
    }

    pub fn minute(&self) -> Figures {
        self.minute.figures()
    }

    pub fn hour(&self) -> Figures {
        self.hour.figures()
    }

    pub fn day(&self) -> Figures {
        self.day.figures()
    }
}

/// Java's `StatsItemSet`: the items of one stats name, by key.
#[derive(Debug, Default)]
struct StatsItemSet {
    items: RwLock<HashMap<String, Arc<StatsItem>>>,
}

impl StatsItemSet {
    fn add(&self, key: &str, value: u64, times: u64) {
        if let Some(item) = self.items.read().get(key) {
            item.add(value, times);
            return;
        }
        let mut items = self.items.write();
        if items.len() >= MAX_ITEMS_PER_NAME && !items.contains_key(key) {
            return;
        }
        items.entry(key.to_owned()).or_default().add(value, times);
    }

    fn each(&self) -> Vec<Arc<StatsItem>> {
        self.items.read().values().cloned().collect()
    }

    fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.items.write().retain(|k, _| keep(k));
    }
}

/// The broker's stats (`BrokerStatsManager`).
#[derive(Debug)]
pub struct BrokerStatsManager {
    cluster: String,
    sets: HashMap<&'static str, StatsItemSet>,
    ticks: AtomicU64,
}

/// Java's `buildStatsKey(topic, group)`.
pub fn topic_group_key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

impl BrokerStatsManager {
    pub fn new(cluster: &str) -> BrokerStatsManager {
        BrokerStatsManager { cluster: cluster.to_owned(), sets: names::ALL.iter().map(|n| (*n, StatsItemSet::default())).collect(), ticks: AtomicU64::new(0) }
    }

    fn add(&self, name: &str, key: &str, value: u64, times: u64) {
        if let Some(set) = self.sets.get(name) {
            set.add(key, value, times);
        }
    }

    /// A put of `messages` (one call) of `bytes` into `topic`.
    pub fn on_put(&self, topic: &str, messages: usize, bytes: usize) {
        self.add(names::TOPIC_PUT_NUMS, topic, messages as u64, 1);
        self.add(names::TOPIC_PUT_SIZE, topic, bytes as u64, 1);
        self.add(names::BROKER_PUT_NUMS, &self.cluster, messages as u64, 1);
    }

    /// A put counted under its topic only, not in the broker's total (Java's send-back counts a
    /// retry waiting in the schedule topic so).
    pub fn on_topic_put(&self, topic: &str, messages: usize, bytes: usize) {
        self.add(names::TOPIC_PUT_NUMS, topic, messages as u64, 1);
        self.add(names::TOPIC_PUT_SIZE, topic, bytes as u64, 1);
    }

    /// Messages `group` read from `topic` without a pull, not in the broker's total (Java counts
    /// a delivered delayed message as read by `SCHEDULE_CONSUMER` from the schedule topic so).
    pub fn on_group_get(&self, group: &str, topic: &str, messages: usize, bytes: usize) {
        let key = topic_group_key(topic, group);
        self.add(names::GROUP_GET_NUMS, &key, messages as u64, 1);
        self.add(names::GROUP_GET_SIZE, &key, bytes as u64, 1);
    }

    /// A pull by `group` that handed out `messages` of `bytes` from `topic`.
    pub fn on_get(&self, group: &str, topic: &str, messages: usize, bytes: usize) {
        let key = topic_group_key(topic, group);
        self.add(names::GROUP_GET_NUMS, &key, messages as u64, 1);
        self.add(names::GROUP_GET_SIZE, &key, bytes as u64, 1);
        self.add(names::BROKER_GET_NUMS, &self.cluster, messages as u64, 1);
    }

    /// A message of `topic` sent back by a consumer of `group`.
    pub fn on_send_back(&self, group: &str, topic: &str) {
        self.add(names::SNDBCK_PUT_NUMS, &topic_group_key(topic, group), 1, 1);
    }

    /// The item of `name` and `key`, if it counted anything yet.
    pub fn item(&self, name: &str, key: &str) -> Option<Arc<StatsItem>> {
        self.sets.get(name)?.items.read().get(key).cloned()
    }

    /// Java's `tpsGroupGetNums`: the last minute's TPS of the group's gets from the topic.
    pub fn group_get_tps(&self, group: &str, topic: &str) -> f64 {
        self.item(names::GROUP_GET_NUMS, &topic_group_key(topic, group)).map_or(0.0, |i| i.minute().tps)
    }

    /// Java's `onTopicDeleted`: the topic's items go.
    pub fn on_topic_deleted(&self, topic: &str) {
        let prefix = format!("{topic}@");
        for (name, set) in &self.sets {
            match *name {
                names::TOPIC_PUT_NUMS | names::TOPIC_PUT_SIZE => set.retain(|k| k != topic),
                names::BROKER_PUT_NUMS | names::BROKER_GET_NUMS => {}
                _ => set.retain(|k| !k.starts_with(&prefix)),
            }
        }
    }

    /// Java's `onGroupDeleted`: the group's items go.
    pub fn on_group_deleted(&self, group: &str) {
        let suffix = format!("@{group}");
        for name in [names::GROUP_GET_NUMS, names::GROUP_GET_SIZE, names::SNDBCK_PUT_NUMS] {
            if let Some(set) = self.sets.get(name) {
                set.retain(|k| !k.ends_with(&suffix));
            }
        }
    }

    /// One sampling tick (every [`TICK_MS`]); the first one samples every window, as Java's
    /// schedules all start at once.
    pub fn tick(&self, now_ms: i64) {
        let tick = self.ticks.fetch_add(1, Ordering::Relaxed);
        for set in self.sets.values() {
            for item in set.each() {
                let (times, value) = item.counters();
                item.minute.sample(now_ms, 10_000, MINUTE_SAMPLES, times, value);
                if tick.is_multiple_of(TICKS_PER_HOUR_SAMPLE) {
                    item.hour.sample(now_ms, 600_000, HOUR_SAMPLES, times, value);
                }
                if tick.is_multiple_of(TICKS_PER_DAY_SAMPLE) {
                    item.day.sample(now_ms, 3_600_000, DAY_SAMPLES, times, value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_report_what_was_counted_between_their_first_and_last_samples() {
        let m = BrokerStatsManager::new("DefaultCluster");
        assert!(m.item(names::TOPIC_PUT_NUMS, "T").is_none(), "no item before the first count");
        m.on_put("T", 10, 1000);
        m.on_put("T", 1, 100);
        let item = m.item(names::TOPIC_PUT_NUMS, "T").unwrap();
        assert_eq!(item.minute(), Figures::default(), "nothing until the first sample");
        m.tick(100_000);
        // The first sample adds a zero one period back: 11 messages over 10 s, in 2 calls.
        assert_eq!(item.minute(), Figures { sum: 11, tps: 1.1, avgpt: 5.5 });
        assert_eq!(item.hour().sum, 11);
        assert_eq!(item.day().sum, 11);
        assert_eq!(m.item(names::TOPIC_PUT_SIZE, "T").unwrap().minute().sum, 1100);
        assert_eq!(m.item(names::BROKER_PUT_NUMS, "DefaultCluster").unwrap().minute().sum, 11);
        // Eight more ticks: the minute window keeps 7 samples (60 s) and drops the old counts.
        for t in 1..=8 {
            if t == 3 {
                m.on_put("T", 6, 600);
            }
            m.tick(100_000 + t * 10_000);
        }
        assert_eq!(item.minute(), Figures { sum: 6, tps: 0.1, avgpt: 6.0 });
        assert_eq!(item.hour().sum, 11, "the hour window was sampled once");
    }

    #[test]
    fn group_items_are_keyed_topic_at_group_and_go_with_the_topic_or_group() {
        let m = BrokerStatsManager::new("C");
        m.on_get("G", "T", 4, 400);
        m.on_send_back("G", "T");
        m.on_get("H", "U", 1, 1);
        m.tick(0);
        assert_eq!(m.item(names::GROUP_GET_NUMS, "T@G").unwrap().minute().sum, 4);
        assert!((m.group_get_tps("G", "T") - 0.4).abs() < 1e-9);
        assert_eq!(m.item(names::SNDBCK_PUT_NUMS, "T@G").unwrap().minute().sum, 1);
        m.on_topic_deleted("T");
        assert!(m.item(names::GROUP_GET_NUMS, "T@G").is_none() && m.item(names::SNDBCK_PUT_NUMS, "T@G").is_none());
        m.on_group_deleted("H");
        assert!(m.item(names::GROUP_GET_NUMS, "U@H").is_none());
        assert_eq!(m.item(names::BROKER_GET_NUMS, "C").unwrap().minute().sum, 5);
    }
}
