//! The timer's per-topic counts (`config/timermetrics`) recounted from the pending units of the
//! timer log, as Java's `checkAndReviseMetrics` does, with the timer running over a real store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use store::config::MessageStoreConfig;
use store::message::{properties, MessageToStore};
use store::store::MessageStore;
use store::timer::{PutOutcome, TimerSink, TimerStore, TIMER_TOPIC};

struct Nowhere;

impl TimerSink for Nowhere {
    fn put(&self, _msg: &MessageToStore, _rolled: bool) -> PutOutcome {
        PutOutcome::Ok
    }
}

/// A timer-topic message as the broker's admission leaves it: due at `out_ms` for `real_topic`.
fn timer_message(real_topic: &str, out_ms: i64, i: usize) -> MessageToStore {
    let props = [
        (properties::REAL_TOPIC, real_topic.to_owned()),
        (properties::REAL_QID, "0".to_owned()),
        (properties::TIMER_OUT_MS, out_ms.to_string()),
        (properties::UNIQ_KEY, format!("{i:032X}")),
    ];
    MessageToStore {
        topic: TIMER_TOPIC.to_owned(),
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: out_ms - 60_000,
        born_host: "127.0.0.1:40000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from_static(b"later"),
        properties: properties::serialize(props.iter().map(|(k, v)| (*k, v.as_str()))),
    }
}

#[test]
fn drifted_counts_are_recounted_from_the_pending_units() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        MessageStoreConfig { store_path_root_dir: dir.path().to_string_lossy().into_owned(), mapped_file_size_commit_log: 1024 * 1024, ..Default::default() };
    let store = MessageStore::open(config).unwrap();
    let timer = TimerStore::open(store.clone()).unwrap();
    store.add_dispatcher(timer.arrivals()).unwrap();
    store.start().unwrap();
    timer.start(Arc::new(Nowhere), true).unwrap();

    let due = remoting::clock::now_ms() + 120_000;
    let topics = ["Drift", "Drift", "Drift", "Drift", "Drift", "Steady", "Steady"];
    for (i, topic) in topics.iter().enumerate() {
        assert!(store.put_message(&timer_message(topic, due + i as i64 * 1000, i)).is_ok());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while timer.metrics().count("Drift") + timer.metrics().count("Steady") < 7 {
        assert!(Instant::now() < deadline, "the timer never took the messages in");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Counts that went wrong (a crash between a unit and its count), and a topic with no units.
    let now = remoting::clock::now_ms();
    timer.metrics().add("Drift", 100, now);
    timer.metrics().add("Gone", 3, now);
    timer.revise_metrics();
    assert_eq!(timer.metrics().count("Drift"), 5);
    assert_eq!(timer.metrics().count("Steady"), 2);
    assert_eq!(timer.metrics().count("Gone"), 0);

    timer.shutdown();
    store.shutdown();
}
