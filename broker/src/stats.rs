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

#[derive(Default)]
pub struct StoreStats {
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
        WINDOWS
            .map(|w| java_double(self.tps(w, |s| s.found).unwrap_or(0.0) + self.tps(w, |s| s.miss).unwrap_or(0.0)))
            .join(" ")
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

#[cfg(test)]
mod tests {
    use super::*;

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
