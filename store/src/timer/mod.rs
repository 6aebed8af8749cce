//! 5.x timer messages on Java 5.3.3's timer store: the wheel ([`wheel`], `timerwheel`), the log
//! of units ([`log`], `timerlog/`), the checkpoint ([`checkpoint`], `config/timercheck`), the
//! per-topic counts ([`metrics`], `config/timermetrics`), and the timer that moves messages
//! through them ([`TimerStore`]). The broker admits timer messages into [`TIMER_TOPIC`] (its put
//! pipeline, as Java's `HookUtils`), registers [`TimerStore::arrivals`] as one more dispatcher of
//! the store, and takes the released messages through its [`TimerSink`].

pub mod checkpoint;
mod engine;
pub mod log;
pub mod metrics;
pub mod wheel;

pub use engine::{checkpoint_path, log_dir, metrics_path, wheel_path, PutOutcome, TimerOpenError, TimerProgress, TimerSink, TimerStore};

/// What the timer tells its observer (the broker's metrics), where Java 5.3.3 records its timer
/// metrics (`DefaultStoreMetricsManager`); set once with [`TimerStore::set_events`]. Called on
/// the timer's own threads: keep each call short.
pub trait TimerEvents: Send + Sync {
    /// A timer message read from the timer topic to be taken in (Java's enqueue get service):
    /// its real topic (`""` when it names none), the seconds from its birth to its delivery time
    /// (`(TIMER_OUT_MS - born) / 1000`, Java's `timerMessageSetLatency`) and its store time.
    fn on_fetched(&self, real_topic: &str, set_latency_s: i64, store_ms: i64);
    /// A timer message taken in: into the wheel or, already due, to release (Java `incTimerEnqueueCount`).
    fn on_enqueue(&self, real_topic: &str);
    /// A timer message about to be put out, to its real topic or rolled back into the timer
    /// topic (Java `incTimerDequeueCount`).
    fn on_dequeue(&self, real_topic: &str);
}

/// Java's `TimerMessageStore.TIMER_TOPIC`.
pub use remoting::protocol::system_topic::WHEEL_TIMER as TIMER_TOPIC;

/// A unit's magic bits (Java `MAGIC_DEFAULT`, `MAGIC_ROLL`, `MAGIC_DELETE`).
pub const MAGIC_DEFAULT: i32 = 1;
pub const MAGIC_ROLL: i32 = 1 << 1;
pub const MAGIC_DELETE: i32 = 1 << 2;

/// Days the wheel spans at a precision of one second (Java `TIMER_WHEEL_TTL_DAY`): it has
/// `7 × 86400` slots whatever the precision.
pub const TIMER_WHEEL_TTL_DAY: i64 = 7;
/// Slots kept clear between the oldest readable slot and the newest writable one.
pub const TIMER_BLANK_SLOTS: i64 = 60;

/// Java's `String.hashCode` (over UTF-16 units), which the log keeps per unit for the real topic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// Where a timer due at `out_ms` goes when the write time is `write_ms` (Java `doEnqueue`): its
/// slot and magic. Beyond the roll window (`window_slots` slots) it goes to a slot inside it,
/// marked rolled: half the window ahead when what is left after the window is under a third of
/// it, else the window's end. A delete marker is marked so.
pub fn place(write_ms: i64, out_ms: i64, is_delete: bool, window_slots: i64, precision_ms: i64) -> (i64, i32) {
    let mut magic = MAGIC_DEFAULT;
    let mut slot = out_ms;
    let window = window_slots * precision_ms;
    if out_ms - write_ms >= window {
        magic |= MAGIC_ROLL;
        slot = if out_ms - write_ms - window < window_slots / 3 * precision_ms { write_ms + window_slots / 2 * precision_ms } else { write_ms + window };
    }
    if is_delete {
        magic |= MAGIC_DELETE;
    }
    (slot, magic)
}

/// What a recall marker names (Java `buildDeleteKey`): `topic+uniqKey`.
pub fn delete_key(topic: &str, uniq_key: &str) -> String {
    format!("{topic}+{uniq_key}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn topic_hashes_are_javas() {
        // "TopicTest".hashCode() and "".hashCode() in Java.
        assert_eq!(super::java_string_hash(""), 0);
        assert_eq!(super::java_string_hash("abc"), 96354);
        assert_eq!(super::java_string_hash("TopicTest"), -1_902_610_879);
    }
}
