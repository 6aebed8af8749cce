//! The 5.x timer's families, as Java 5.3.3's `DefaultStoreMetricsManager` registers them when
//! `timerWheelEnable` (all with the store's `storage_type`/`storage_medium` labels): the enqueue
//! and dequeue counters and the set-latency histogram, recorded by the timer through
//! [`TimerEvents`]; the lag, latency, timing and snapshot gauges, computed at each scrape from
//! the [`TimerStore`].

use parking_lot::Mutex;
use prometheus::Registry;
use remoting::metrics::family::{Counters, Gauges, Histograms};
use store::timer::{TimerEvents, TimerStore};

/// Java's `storage_type` and `storage_medium` values.
const STORAGE: [&str; 2] = ["local", "disk"];
const STORAGE_LABELS: [&str; 2] = ["storage_type", "storage_medium"];
const TOPIC_LABELS: [&str; 3] = ["storage_type", "storage_medium", "topic"];

/// Java's view of `rocketmq_delay_message_latency` (`getMetricsView`), in seconds: 1 min,
/// 10 min, 1 h, 12 h, 1 day, 3 days.
const SET_LATENCY_BUCKETS_S: [f64; 6] = [60.0, 600.0, 3600.0, 43_200.0, 86_400.0, 259_200.0];

/// Java's `TimerMetrics.timerDist`: the snapshot's bounds in seconds from now.
const SNAPSHOT_BOUNDS_S: [i64; 8] = [5, 60, 300, 900, 3600, 14_400, 28_800, 86_400];

/// How long after the last fetch the enqueue latency is reported (Java: 2 s, else 0).
const ENQUEUE_LATENCY_WINDOW_MS: i64 = 2000;

pub(super) struct TimerFamilies {
    enqueue_total: Counters,
    dequeue_total: Counters,
    set_latency: Histograms,
    enqueue_lag: Gauges,
    enqueue_latency: Gauges,
    dequeue_lag: Gauges,
    dequeue_latency: Gauges,
    timing_messages: Gauges,
    snapshot: Gauges,
    /// When the last timer message was fetched, and its store time (Java's
    /// `lastEnqueueButExpiredTime` and `lastEnqueueButExpiredStoreTime`).
    last_fetch: Mutex<(i64, i64)>,
}

impl TimerFamilies {
    pub(super) fn new(r: &Registry, limit: usize) -> TimerFamilies {
        let gauges = |name: &str, help: &str, labels: &[&str]| Gauges::gauges(r, name, help, labels, limit);
        TimerFamilies {
            enqueue_total: Counters::counters(r, "rocketmq_timer_enqueue_total", "Total number of timer enqueue", &TOPIC_LABELS, limit),
            dequeue_total: Counters::counters(r, "rocketmq_timer_dequeue_total", "Total number of timer dequeue", &TOPIC_LABELS, limit),
            set_latency: Histograms::histograms(
                r,
                "rocketmq_delay_message_latency_seconds",
                "Timer message set latency distribution",
                &TOPIC_LABELS,
                &SET_LATENCY_BUCKETS_S,
                limit,
            ),
            enqueue_lag: gauges("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag", &STORAGE_LABELS),
            enqueue_latency: gauges("rocketmq_timer_enqueue_latency_milliseconds", "Timer enqueue latency", &STORAGE_LABELS),
            dequeue_lag: gauges("rocketmq_timer_dequeue_lag", "Timer dequeue messages lag", &STORAGE_LABELS),
            dequeue_latency: gauges("rocketmq_timer_dequeue_latency_milliseconds", "Timer dequeue latency", &STORAGE_LABELS),
            timing_messages: gauges("rocketmq_timing_messages", "Current message number in timing", &TOPIC_LABELS),
            snapshot: gauges(
                "rocketmq_timer_message_snapshot",
                "Timer message distribution snapshot, only count timing messages in 24h.",
                &["storage_type", "storage_medium", "timer_bound_s"],
            ),
            last_fetch: Mutex::new((0, 0)),
        }
    }

    /// The gauges from the timer's state now, as Java's callbacks read it (none without a timer).
    pub(super) fn refresh(&self, timer: Option<&TimerStore>) {
        for g in [&self.enqueue_lag, &self.enqueue_latency, &self.dequeue_lag, &self.dequeue_latency, &self.timing_messages, &self.snapshot] {
            g.clear();
        }
        let Some(timer) = timer else { return };
        let now = remoting::clock::now_ms();
        let p = timer.progress();
        // Java `getEnqueueBehindMessages`, `getEnqueueBehindMillis`, `getDequeueBehindMessages`.
        self.enqueue_lag.set(&STORAGE, p.max_queue_offset - p.queue_offset);
        let (fetched_at, store_ms) = *self.last_fetch.lock();
        self.enqueue_latency.set(&STORAGE, if now - fetched_at < ENQUEUE_LATENCY_WINDOW_MS { now - store_ms } else { 0 });
        self.dequeue_lag.set(&STORAGE, p.pending);
        // Java records `getDequeueBehind()`, in seconds, into this "milliseconds" gauge.
        self.dequeue_latency.set(&STORAGE, (now - p.curr_read_ms) / 1000);
        for (topic, metric) in timer.metrics().snapshot().timing_count {
            self.timing_messages.set(&[STORAGE[0], STORAGE[1], &topic], metric.count);
        }
        self.snapshot_gauges(timer, now);
    }

    /// Java's `timerMessageSnapshot`: timers in the wheel's slots from now up to each bound.
    fn snapshot_gauges(&self, timer: &TimerStore, now: i64) {
        let precision = timer.precision_ms().max(1);
        let from = now / precision * precision;
        let mut slot = 0i64;
        for bound in SNAPSHOT_BOUNDS_S {
            let end = bound * 1000 / precision;
            let mut total = 0i64;
            while slot < end {
                total += timer.congest_num(from + slot * precision);
                slot += 1;
            }
            self.snapshot.set(&[STORAGE[0], STORAGE[1], &bound.to_string()], total);
        }
    }
}

impl TimerEvents for TimerFamilies {
    fn on_fetched(&self, real_topic: &str, set_latency_s: i64, store_ms: i64) {
        *self.last_fetch.lock() = (remoting::clock::now_ms(), store_ms);
        self.set_latency.observe(&[STORAGE[0], STORAGE[1], real_topic], set_latency_s as f64);
    }

    fn on_enqueue(&self, real_topic: &str) {
        self.enqueue_total.add(&[STORAGE[0], STORAGE[1], real_topic], 1);
    }

    fn on_dequeue(&self, real_topic: &str) {
        self.dequeue_total.add(&[STORAGE[0], STORAGE[1], real_topic], 1);
    }
}
