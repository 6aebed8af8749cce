//! The figures of Java's `StoreStatsService` that GET_BROKER_RUNTIME_INFO reports and dashboards,
//! `clusterList` and `brokerStatus` show: message counters, sampled once a second with ten minutes
//! kept, and TPS over the last 10, 60 and 600 seconds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Java keeps 600 samples besides the newest.
const MAX_SAMPLES: usize = 601;
/// The windows of every TPS figure, in samples (seconds).
const WINDOWS: [usize; 3] = [10, 60, 600];

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sample {
    at_ms: i64,
    puts: u64,
    found: u64,
    miss: u64,
    transferred: u64,
}

/// Java's `PUT_MESSAGE_ENTIRE_TIME_MAX_DESC`: the buckets of brokerStatus's putMessageDistributeTime,
/// by their upper bounds in ms (the first is "<= 0 ms", the last is open).
const DISTRIBUTION: [(&str, u64); 13] = [
    ("[<=0ms]", 1),
    ("[0~10ms]", 10),
    ("[10~50ms]", 50),
    ("[50~100ms]", 100),
    ("[100~200ms]", 200),
    ("[200~500ms]", 500),
    ("[500ms~1s]", 1_000),
    ("[1~2s]", 2_000),
    ("[2~3s]", 3_000),
    ("[3~4s]", 4_000),
    ("[4~5s]", 5_000),
    ("[5~10s]", 10_000),
    ("[10s~]", u64::MAX),
];
/// Put latencies are kept per ms up to this for the percentiles; slower ones count here.
const LATENCY_MS_KEPT: usize = 10_000;

/// One minute of put latencies (Java reports the last whole minute).
struct LatencyMinute {
    buckets: [u64; 13],
    per_ms: Vec<u32>,
    count: u64,
}

impl Default for LatencyMinute {
    fn default() -> Self {
        LatencyMinute { buckets: [0; 13], per_ms: vec![0; LATENCY_MS_KEPT + 1], count: 0 }
    }
}

impl LatencyMinute {
    fn record(&mut self, ms: u64) {
        let bucket = DISTRIBUTION.iter().position(|(_, upper)| ms < *upper).unwrap_or(12);
        self.buckets[bucket] += 1;
        let slot = (ms as usize).min(LATENCY_MS_KEPT);
        self.per_ms[slot] = self.per_ms[slot].saturating_add(1);
        self.count += 1;
    }

    /// The latency under which a fraction `q` of the minute's puts finished, in ms.
    fn percentile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let wanted = (self.count as f64 * q).ceil() as u64;
        let mut seen = 0u64;
        for (ms, n) in self.per_ms.iter().enumerate() {
            seen += u64::from(*n);
            if seen >= wanted {
                return ms as f64;
            }
        }
        LATENCY_MS_KEPT as f64
    }
}

/// The put and get timings of Java's `StoreStatsService`.
#[derive(Default)]
struct Timings {
    current: LatencyMinute,
    last: LatencyMinute,
    minute_started_ms: i64,
}

#[derive(Default)]
pub struct StoreStats {
    /// Bytes stored, puts that failed, and the slowest put and get (ms) since start.
    put_bytes: AtomicU64,
    put_failed: AtomicU64,
    put_max_ms: AtomicU64,
    get_max_ms: AtomicU64,
    timings: Mutex<Timings>,
    /// Messages stored.
    puts: AtomicU64,
    /// Pulls that found messages, pulls that did not, and messages handed out.
    found: AtomicU64,
    miss: AtomicU64,
    transferred: AtomicU64,
    samples: Mutex<VecDeque<Sample>>,
}

impl StoreStats {
    pub fn on_put(&self, messages: usize) {
        self.puts.fetch_add(messages as u64, Ordering::Relaxed);
    }

    /// One read of the store for a pull: `messages` handed out (0 is a miss).
    pub fn on_get(&self, messages: usize) {
        if messages == 0 {
            self.miss.fetch_add(1, Ordering::Relaxed);
        } else {
            self.found.fetch_add(1, Ordering::Relaxed);
            self.transferred.fetch_add(messages as u64, Ordering::Relaxed);
        }
    }

    /// A put that took `elapsed` from its request to its result (flush and replicas included, as
    /// Java times it), storing `bytes`, or failing.
    pub fn on_put_done(&self, elapsed: std::time::Duration, bytes: usize, ok: bool) {
        let ms = elapsed.as_millis() as u64;
        if ok {
            self.put_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        } else {
            self.put_failed.fetch_add(1, Ordering::Relaxed);
        }
        self.put_max_ms.fetch_max(ms, Ordering::Relaxed);
        self.timings.lock().current.record(ms);
    }

    /// One read of the store for a pull took `elapsed`.
    pub fn on_get_done(&self, elapsed: std::time::Duration) {
        self.get_max_ms.fetch_max(elapsed.as_millis() as u64, Ordering::Relaxed);
    }

    /// The StoreStatsService keys of GET_BROKER_RUNTIME_INFO that count puts and time them.
    pub fn put_figures(&self) -> Vec<(&'static str, String)> {
        let times = self.put_count().max(1);
        let bytes = self.put_bytes.load(Ordering::Relaxed);
        let timings = self.timings.lock();
        let distribution: String = DISTRIBUTION.iter().zip(timings.last.buckets).map(|((name, _), n)| format!("{name}:{n} ")).collect();
        vec![
            ("putMessageEntireTimeMax", self.put_max_ms.load(Ordering::Relaxed).to_string()),
            ("putMessageTimesTotal", times.to_string()),
            ("putMessageFailedTimes", self.put_failed.load(Ordering::Relaxed).to_string()),
            ("putMessageSizeTotal", bytes.to_string()),
            ("putMessageDistributeTime", distribution),
            ("putMessageAverageSize", java_double(bytes as f64 / times as f64)),
            ("dispatchMaxBuffer", "0".to_owned()),
            ("getMessageEntireTimeMax", self.get_max_ms.load(Ordering::Relaxed).to_string()),
            ("putLatency99", format!("{:.2}", timings.last.percentile(0.99))),
            ("putLatency999", format!("{:.2}", timings.last.percentile(0.999))),
        ]
    }

    pub fn put_count(&self) -> u64 {
        self.puts.load(Ordering::Relaxed)
    }

    pub fn transferred_count(&self) -> u64 {
        self.transferred.load(Ordering::Relaxed)
    }

    /// Takes a sample; called once a second.
    pub fn sample(&self, now_ms: i64) {
        let s = Sample {
            at_ms: now_ms,
            puts: self.put_count(),
            found: self.found.load(Ordering::Relaxed),
            miss: self.miss.load(Ordering::Relaxed),
            transferred: self.transferred_count(),
        };
        {
            // Java turns the put-time distribution over every minute and reports the last one.
            let mut t = self.timings.lock();
            if t.minute_started_ms == 0 {
                t.minute_started_ms = now_ms;
            } else if now_ms - t.minute_started_ms >= 60_000 {
                t.last = std::mem::take(&mut t.current);
                t.minute_started_ms = now_ms;
            }
        }
        let mut samples = self.samples.lock();
        samples.push_back(s);
        if samples.len() > MAX_SAMPLES {
            samples.pop_front();
        }
    }

    /// Per second over the last `window` samples, or None until there are that many.
    fn tps(&self, window: usize, counter: fn(&Sample) -> u64) -> Option<f64> {
        let samples = self.samples.lock();
        let last = samples.back()?;
        let first = samples.get(samples.len().checked_sub(window + 1)?)?;
        let ms = (last.at_ms - first.at_ms) as f64;
        Some(if ms > 0.0 { (counter(last) - counter(first)) as f64 * 1000.0 / ms } else { 0.0 })
    }

    /// Java's "10s 60s 600s" string: a window without enough samples yet is empty.
    fn windows(&self, counter: fn(&Sample) -> u64) -> String {
        WINDOWS.map(|w| self.tps(w, counter).map(java_double).unwrap_or_default()).join(" ")
    }

    pub fn put_tps(&self) -> String {
        self.windows(|s| s.puts)
    }

    pub fn get_found_tps(&self) -> String {
        self.windows(|s| s.found)
    }

    pub fn get_miss_tps(&self) -> String {
        self.windows(|s| s.miss)
    }

    pub fn get_transferred_tps(&self) -> String {
        self.windows(|s| s.transferred)
    }

    /// Found plus miss; Java prints 0.0 for a window without enough samples here.
    pub fn get_total_tps(&self) -> String {
        WINDOWS.map(|w| java_double(self.tps(w, |s| s.found).unwrap_or(0.0) + self.tps(w, |s| s.miss).unwrap_or(0.0))).join(" ")
    }
}

/// Java's `Double.toString` for the values these figures take (no exponent below 10^7).
pub fn java_double(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e7 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

/// The store time of the oldest message in the commit log (Java's `getEarliestMessageTime`);
/// none while the commit log is empty.
pub fn earliest_message_time(store: &store::store::MessageStore) -> Option<i64> {
    if store.max_phy_offset() <= 0 {
        return None;
    }
    let bytes = store.look_message_by_offset(store.min_phy_offset())?;
    match store::message::record::decode_record(&bytes, false) {
        Ok(store::message::record::RecordAt::Record(r)) => Some(r.store_timestamp),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_times_fill_javas_buckets_and_the_last_minute_is_reported() {
        let stats = StoreStats::default();
        stats.sample(1_000);
        for ms in [0, 5, 12, 12, 700, 20_000] {
            stats.on_put_done(std::time::Duration::from_millis(ms), 100, true);
        }
        stats.on_put_done(std::time::Duration::from_millis(3), 0, false);
        stats.on_put(6);
        let before: std::collections::HashMap<_, _> = stats.put_figures().into_iter().collect();
        assert!(before["putMessageDistributeTime"].starts_with("[<=0ms]:0 [0~10ms]:0 "), "the minute is not over yet");
        stats.sample(61_000);
        let f: std::collections::HashMap<_, _> = stats.put_figures().into_iter().collect();
        assert_eq!(
            f["putMessageDistributeTime"],
            "[<=0ms]:1 [0~10ms]:2 [10~50ms]:2 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:1 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:1 "
        );
        assert_eq!((f["putMessageEntireTimeMax"].as_str(), f["putMessageFailedTimes"].as_str()), ("20000", "1"));
        assert_eq!((f["putMessageSizeTotal"].as_str(), f["putMessageAverageSize"].as_str(), f["putMessageTimesTotal"].as_str()), ("600", "100.0", "6"));
        assert_eq!((f["putLatency99"].as_str(), f["putLatency999"].as_str()), ("10000.00", "10000.00"));
    }

    #[test]
    fn tps_windows_fill_as_samples_arrive() {
        let stats = StoreStats::default();
        assert_eq!(stats.put_tps(), "  ");
        assert_eq!(stats.get_total_tps(), "0.0 0.0 0.0");
        for second in 0..=60 {
            stats.on_put(100);
            stats.on_get(if second % 2 == 0 { 4 } else { 0 });
            stats.sample(second * 1000);
        }
        assert_eq!(stats.put_tps(), "100.0 100.0 ");
        assert_eq!(stats.get_transferred_tps(), "2.0 2.0 ");
        assert_eq!(stats.get_found_tps(), "0.5 0.5 ");
        assert_eq!(stats.get_total_tps(), "1.0 1.0 0.0");
        assert_eq!(stats.put_count(), 6100);
    }

    #[test]
    fn ten_minutes_are_kept() {
        let stats = StoreStats::default();
        for second in 0..2000 {
            stats.on_put(1);
            stats.sample(second * 1000);
        }
        assert_eq!(stats.samples.lock().len(), MAX_SAMPLES);
        assert_eq!(stats.put_tps(), "1.0 1.0 1.0");
    }
}
