//! `config/timermetrics`: Java 5.3.3's `TimerMetrics`, the number of pending timers per real
//! topic, written as fastjson writes it (`BrowserCompatible`: keys quoted, non-ASCII escaped):
//! `{"dataVersion":{...},"timingCount":{"topic":{"count":n,"timeStamp":ms}}}`. GET_TIMER_METRICS
//! answers with the same JSON. The counts are kept as Java keeps them: +1 when a timer enters the
//! wheel, -1 when it leaves (delivered or rolled) or a delete marker enters.

use std::collections::BTreeMap;
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

    /// Drops the counts of topics that no longer exist (not system or LMQ topics), as Java's
    /// `cleanMetrics`.
    pub fn retain_topics(&self, exists: impl Fn(&str) -> bool) {
        self.state.lock().timing_count.retain(|t, _| t.starts_with("rmq_sys_") || t.starts_with("%LMQ%") || exists(t));
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
}
