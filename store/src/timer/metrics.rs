//! `config/timermetrics`: Java 5.3.3's `TimerMetrics`, the number of pending timers per real
//! topic, written as fastjson writes it (`BrowserCompatible`: keys quoted, non-ASCII escaped):
//! `{"dataVersion":{...},"timingCount":{"topic":{"count":n,"timeStamp":ms}}}`. GET_TIMER_METRICS
//! answers with the same JSON. The counts are kept as Java keeps them: +1 when a timer enters the
//! wheel, -1 when it leaves (delivered or rolled) or a delete marker enters.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use remoting::fastjson::{self, JsonStyle};
use remoting::protocol::topic::DataVersion;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    #[serde(default)]
    pub count: i64,
    #[serde(default)]
    pub time_stamp: i64,
}

/// The file's and GET_TIMER_METRICS's body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimerMetricsWrapper {
    #[serde(default)]
    pub data_version: DataVersion,
    #[serde(default)]
    pub timing_count: BTreeMap<String, Metric>,
}

pub struct TimerMetrics {
    path: PathBuf,
    state: Mutex<TimerMetricsWrapper>,
}

impl TimerMetrics {
    /// Loads the file (a missing one is empty; a damaged one is read from its `.bak`, as Java's
    /// `ConfigManager.load` does, and else starts empty).
    pub fn load(path: &Path) -> TimerMetrics {
        let read = |p: &Path| std::fs::read(p).ok().and_then(|b| fastjson::from_slice::<TimerMetricsWrapper>(&b).ok());
        let bak = path.with_file_name(format!("{}.bak", path.file_name().and_then(|n| n.to_str()).unwrap_or("timermetrics")));
        let state = read(path).or_else(|| read(&bak)).unwrap_or_default();
        TimerMetrics { path: path.to_owned(), state: Mutex::new(state) }
    }

    /// Adds `delta` to `topic`'s count.
    pub fn add(&self, topic: &str, delta: i64, now_ms: i64) {
        let mut s = self.state.lock();
        s.data_version.counter += 1;
        s.data_version.timestamp = now_ms;
        let m = s.timing_count.entry(topic.to_owned()).or_default();
        m.count += delta;
        m.time_stamp = now_ms;
    }

    pub fn count(&self, topic: &str) -> i64 {
        self.state.lock().timing_count.get(topic).map_or(0, |m| m.count)
    }

    pub fn snapshot(&self) -> TimerMetricsWrapper {
        self.state.lock().clone()
    }

    /// The JSON Java writes and answers.
    pub fn encode(&self) -> String {
        fastjson::to_string(&*self.state.lock(), JsonStyle::Standard)
    }

    /// GET_TIMER_METRICS's body: Java's `encode()`, fastjson's default output (not the file's
    /// browser-compatible one).
    pub fn encode_body(&self) -> String {
        fastjson::to_string(&*self.state.lock(), JsonStyle::Fastjson)
    }

    /// A slave takes its master's counts when their version differs (5.x `syncTimerMetrics`);
    /// true when it did (the caller persists them).
    pub fn replace_from_master(&self, master: TimerMetricsWrapper) -> bool {
        let mut s = self.state.lock();
        if s.data_version == master.data_version {
            return false;
        }
        *s = master;
        true
    }

    /// Drops a deleted topic's count (Java's `removeTimingCount`, from `deleteTopicInBroker`).
    pub fn remove(&self, topic: &str) {
        self.state.lock().timing_count.remove(topic);
    }

    /// Drops the counts of topics that no longer exist (not system or LMQ topics), as Java's
    /// `cleanMetrics`.
    pub fn retain_topics(&self, exists: impl Fn(&str) -> bool) {
        self.state.lock().timing_count.retain(|t, _| t.starts_with("rmq_sys_") || t.starts_with("%LMQ%") || exists(t));
    }

    /// The first half of Java's `checkAndReviseMetrics`: the topics counted below `small_threshold`
    /// are to be counted again from the timer log, whose units name their topic by its Java hash
    /// only. Two small topics with one hash are told apart by reading their messages; a small
    /// topic whose hash a big one shares is left as it is (its units cannot be told apart cheaply).
    pub fn recount(&self, small_threshold: i64) -> Recount {
        let s = self.state.lock();
        let mut by_hash: HashMap<i32, String> = HashMap::new();
        let mut collisions = HashSet::new();
        let mut big_hashes = HashSet::new();
        for (topic, m) in &s.timing_count {
            let hash = super::java_string_hash(topic);
            if m.count >= small_threshold {
                big_hashes.insert(hash);
            } else if by_hash.insert(hash, topic.clone()).is_some() {
                collisions.insert(hash);
            }
        }
        let counts = s
            .timing_count
            .iter()
            .filter(|(t, m)| m.count < small_threshold && !big_hashes.contains(&super::java_string_hash(t)))
            .map(|(t, _)| (t.clone(), 0))
            .collect();
        by_hash.retain(|h, _| !big_hashes.contains(h));
        Recount { by_hash, collisions, counts }
    }

    /// The second half: the counts found replace the ones held, as Java's `putAll` (the data
    /// version does not move).
    pub fn apply(&self, recount: Recount, now_ms: i64) {
        let mut s = self.state.lock();
        for (topic, count) in recount.counts {
            tracing::info!(topic, count, was = s.timing_count.get(&topic).map_or(0, |m| m.count), "timer metric revised");
            s.timing_count.insert(topic, Metric { count, time_stamp: now_ms });
        }
    }

    /// Writes the file: a temporary first, the old one kept as `.bak`.
    pub fn persist(&self) -> io::Result<()> {
        let text = self.encode();
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let name = self.path.file_name().and_then(|n| n.to_str()).unwrap_or("timermetrics");
        let tmp = self.path.with_file_name(format!("{name}.tmp"));
        std::fs::write(&tmp, text.as_bytes())?;
        if self.path.exists() {
            std::fs::copy(&self.path, self.path.with_file_name(format!("{name}.bak")))?;
        }
        std::fs::rename(&tmp, &self.path)
    }
}

/// A recount in progress (see [`TimerMetrics::recount`]).
#[derive(Debug)]
pub struct Recount {
    by_hash: HashMap<i32, String>,
    collisions: HashSet<i32>,
    counts: BTreeMap<String, i64>,
}

impl Recount {
    /// Counts one pending unit of the log: +1, or -1 for a delete marker. `topic_of` reads the
    /// unit's message for its real topic, needed only when two recounted topics share the hash.
    pub fn count(&mut self, topic_hash: i32, delete: bool, topic_of: impl FnOnce() -> Option<String>) {
        let Some(topic) = self.by_hash.get(&topic_hash) else { return };
        let topic = if self.collisions.contains(&topic_hash) { topic_of() } else { Some(topic.clone()) };
        match topic.and_then(|t| self.counts.get_mut(&t)) {
            Some(n) => *n += if delete { -1 } else { 1 },
            None => tracing::warn!(topic_hash, "timer metric recount: a unit of no recounted topic"),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_persist_as_fastjson_writes_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timermetrics");
        let m = TimerMetrics::load(&path);
        m.add("Orders", 1, 1000);
        m.add("Orders", 1, 2000);
        m.add("Zahlungsverkehr-ü", 1, 3000);
        m.add("Orders", -1, 4000);
        m.persist().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            r#"{"dataVersion":{"counter":4,"stateVersion":0,"timestamp":4000},"timingCount":{"Orders":{"count":1,"timeStamp":4000},"Zahlungsverkehr-\u00FC":{"count":1,"timeStamp":3000}}}"#
        );
        assert_eq!(TimerMetrics::load(&path).count("Orders"), 1);
    }

    #[test]
    fn a_recount_replaces_small_counts_and_leaves_big_ones_and_their_hash_sharers() {
        let dir = tempfile::tempdir().unwrap();
        let m = TimerMetrics::load(&dir.path().join("timermetrics"));
        // "Aa" and "BB" share Java's hash (2112); so do "AaAa" and "BBBB".
        for (topic, n) in [("Orders", 5), ("Aa", 3), ("BB", 1), ("AaAa", 2), ("BBBB", 10)] {
            m.add(topic, n, 1000);
        }
        let mut r = m.recount(10);
        // Orders: three pending units and a delete marker; the colliding pair is read.
        for delete in [false, false, false, true] {
            r.count(super::super::java_string_hash("Orders"), delete, || panic!("no read needed"));
        }
        r.count(super::super::java_string_hash("Aa"), false, || Some("BB".into()));
        r.count(super::super::java_string_hash("Aa"), false, || Some("BB".into()));
        r.count(super::super::java_string_hash("AaAa"), false, || panic!("not recounted: BBBB is big"));
        r.count(12345, false, || panic!("no such topic"));
        m.apply(r, 2000);
        let counts: Vec<(String, i64)> = m.snapshot().timing_count.into_iter().map(|(t, m)| (t, m.count)).collect();
        let want = [("Aa", 0), ("AaAa", 2), ("BB", 2), ("BBBB", 10), ("Orders", 2)];
        assert_eq!(counts, want.iter().map(|(t, n)| (t.to_string(), *n)).collect::<Vec<_>>());
    }
}
