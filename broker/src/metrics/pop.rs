//! Pop's families, as Java 5.3.3's `PopMetricsManager` registers them: the revive topic's
//! records put (check points and acks, by put status) and read back (by revive queue), the
//! messages revived into pop retry topics, and at each scrape the revive services' lag and
//! latency per revive queue and the buffer merge's sizes.
//!
//! The buffer sizes are the buffer merge's (`crate::popping::merge`): offsets pending and check
//! points held, both 0 unless `enablePopBufferMerge`. Its passes' durations go to
//! `rocketmq_pop_buffer_scan_time_consume` (Java's unit makes it `_milliseconds`). Java's service
//! passes with the merge off too (it then holds each check point until its offset is
//! committed), so Java records a pass every 5 ms whatever the switch; ours commits with the
//! check point when off and has no pass to record then.

use prometheus::Registry;
use remoting::metrics::family::{Counters, Gauges, Histograms};
use store::commit_log::PutStatus;

/// How far pop's revive services are behind, per revive queue (`(lag, latency)`, Java's
/// callbacks); pop's service answers it, so metrics need not know pop.
pub trait ReviveLag {
    fn behind(&self, queue_id: i32, now_ms: i64) -> (i64, i64);
    /// The buffer merge's (offsets pending, check points held).
    fn buffered(&self) -> (i64, i64) {
        (0, 0)
    }
}

/// Java's buckets for the pass time (`PopMetricsManager.getMetricsView`), in ms.
const SCAN_TIME_BUCKETS_MS: [f64; 6] = [1.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0];

/// Java's `PopReviveMessageType`: a batch ack counts as an ack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviveKind {
    Ck,
    Ack,
}

impl ReviveKind {
    fn name(self) -> &'static str {
        match self {
            ReviveKind::Ck => "CK",
            ReviveKind::Ack => "ACK",
        }
    }
}

pub(super) struct PopFamilies {
    revive_in: Counters,
    revive_out: Counters,
    revive_retry: Counters,
    offset_buffer: Gauges,
    checkpoint_buffer: Gauges,
    revive_lag: Gauges,
    revive_latency: Gauges,
    scan_time: Histograms,
}

impl PopFamilies {
    pub(super) fn new(r: &Registry, limit: usize) -> PopFamilies {
        PopFamilies {
            revive_in: Counters::counters(
                r,
                "rocketmq_pop_revive_in_message_total",
                "Total number of put message to revive topic",
                &["consumer_group", "topic", "revive_message_type", "put_status"],
                limit,
            ),
            revive_out: Counters::counters(
                r,
                "rocketmq_pop_revive_out_message_total",
                "Total number of get message from revive topic",
                &["consumer_group", "topic", "queue_id", "revive_message_type"],
                limit,
            ),
            revive_retry: Counters::counters(
                r,
                "rocketmq_pop_revive_retry_messages_total",
                "Total number of put message to pop retry topic",
                &["consumer_group", "topic", "put_status"],
                limit,
            ),
            offset_buffer: Gauges::gauges(r, "rocketmq_pop_offset_buffer_size", "Time number of buffered offset", &[], limit),
            checkpoint_buffer: Gauges::gauges(r, "rocketmq_pop_checkpoint_buffer_size", "The number of buffered checkpoint", &[], limit),
            // Java gives both the unit "milliseconds"; the lag is a count of records.
            revive_lag: Gauges::gauges(r, "rocketmq_pop_revive_lag_milliseconds", "The processing lag of revive topic", &["queue_id"], limit),
            revive_latency: Gauges::gauges(r, "rocketmq_pop_revive_latency_milliseconds", "The processing latency of revive topic", &["queue_id"], limit),
            scan_time: Histograms::histograms(
                r,
                "rocketmq_pop_buffer_scan_time_consume_milliseconds",
                "Time consuming of pop buffer scan",
                &[],
                &SCAN_TIME_BUCKETS_MS,
                limit,
            ),
        }
    }

    pub(super) fn on_revive_put(&self, group: &str, topic: &str, kind: ReviveKind, status: PutStatus) {
        self.revive_in.add(&[group, topic, kind.name(), status.java_name()], 1);
    }

    pub(super) fn on_revive_get(&self, group: &str, topic: &str, queue_id: i32, kind: ReviveKind) {
        self.revive_out.add(&[group, topic, &queue_id.to_string(), kind.name()], 1);
    }

    pub(super) fn on_buffer_pass(&self, elapsed_ms: u64) {
        self.scan_time.observe(&[], elapsed_ms as f64);
    }

    pub(super) fn on_revive_retry(&self, group: &str, topic: &str, status: PutStatus) {
        self.revive_retry.add(&[group, topic, status.java_name()], 1);
    }

    /// The gauges now (Java's callbacks): one revive service per revive queue, on every role.
    pub(super) fn refresh(&self, pop: Option<&dyn ReviveLag>, revive_queue_num: i32) {
        for g in [&self.offset_buffer, &self.checkpoint_buffer, &self.revive_lag, &self.revive_latency] {
            g.clear();
        }
        let (offsets, cks) = pop.map_or((0, 0), |p| p.buffered());
        self.offset_buffer.set(&[], offsets);
        self.checkpoint_buffer.set(&[], cks);
        let Some(pop) = pop else { return };
        let now = remoting::clock::now_ms();
        for queue_id in 0..revive_queue_num.max(0) {
            let (lag, latency) = pop.behind(queue_id, now);
            let q = queue_id.to_string();
            self.revive_lag.set(&[&q], lag);
            self.revive_latency.set(&[&q], latency);
        }
    }
}
