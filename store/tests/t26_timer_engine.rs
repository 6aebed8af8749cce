//! The timer running over a real store: its per-topic counts (`config/timermetrics`) recounted
//! from the pending units of the timer log, as Java's `checkAndReviseMetrics` does; and a wheel
//! left pointing at another slot's unit after a crash releases nothing early.

use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use store::config::MessageStoreConfig;
use store::message::{properties, MessageToStore};
use store::store::MessageStore;
use store::timer::log::{Unit, UNIT_SIZE};
use store::timer::wheel::TimerWheel;
use store::timer::{PutOutcome, TimerSink, TimerStore, TIMER_TOPIC, TIMER_WHEEL_TTL_DAY};

struct Nowhere;

impl TimerSink for Nowhere {
    fn put(&self, _msg: &MessageToStore, _rolled: bool) -> PutOutcome {
        PutOutcome::Ok
    }
}

/// Keeps the topic of every release and when it was made.
#[derive(Default)]
struct Released(parking_lot::Mutex<Vec<(String, i64)>>);

impl TimerSink for Released {
    fn put(&self, msg: &MessageToStore, _rolled: bool) -> PutOutcome {
        self.0.lock().push((msg.topic.clone(), remoting::clock::now_ms()));
        PutOutcome::Ok
    }
}

fn config(dir: &std::path::Path) -> MessageStoreConfig {
    MessageStoreConfig { store_path_root_dir: dir.to_string_lossy().into_owned(), mapped_file_size_commit_log: 1024 * 1024, ..Default::default() }
}

fn open(config: &MessageStoreConfig, sink: Arc<dyn TimerSink>) -> (Arc<MessageStore>, Arc<TimerStore>) {
    let store = MessageStore::open(config.clone()).unwrap();
    let timer = TimerStore::open(store.clone()).unwrap();
    store.add_dispatcher(timer.arrivals()).unwrap();
    store.start().unwrap();
    timer.start(sink, true).unwrap();
    (store, timer)
}

fn wait_taken_in(timer: &TimerStore, topics: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while topics.iter().any(|t| timer.metrics().count(t) < 1) {
        assert!(Instant::now() < deadline, "the timer never took the messages in");
        std::thread::sleep(Duration::from_millis(20));
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

#[test]
fn a_slot_linked_to_another_slots_unit_releases_nothing_early() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let (store, timer) = open(&config, Arc::new(Nowhere));
    let now = remoting::clock::now_ms();
    let (late, soon, later) = (now + 60_000, now + 4_000, now + 90_000);
    for (i, (topic, due)) in [("Late", late), ("Soon", soon), ("Later", later)].iter().enumerate() {
        assert!(store.put_message(&timer_message(topic, *due, i)).is_ok());
    }
    wait_taken_in(&timer, &["Late", "Soon", "Later"]);
    timer.shutdown();
    store.shutdown();

    // A crash lost Soon's unit (at 52), and the log went on to write Later's unit there: the
    // wheel's slot of Soon still points at 52, now another slot's unit.
    let log = store::timer::log_dir(&config).join("00000000000000000000");
    let mut file = std::fs::OpenOptions::new().read(true).write(true).open(&log).unwrap();
    let mut bytes = [0u8; UNIT_SIZE];
    file.seek(SeekFrom::Start(2 * UNIT_SIZE as u64)).unwrap();
    file.read_exact(&mut bytes).unwrap();
    let later_unit = Unit { prev_pos: -1, ..Unit::decode(&bytes).expect("Later's unit") };
    assert_eq!(later_unit.delayed_ms() / 1000, later / 1000);
    file.seek(SeekFrom::Start(UNIT_SIZE as u64)).unwrap();
    file.write_all(&later_unit.encode()).unwrap();
    file.write_all(&[0u8; UNIT_SIZE]).unwrap();
    file.sync_all().unwrap();
    drop(file);
    let wheel = TimerWheel::open(&store::timer::wheel_path(&config), TIMER_WHEEL_TTL_DAY * 24 * 3600, 1000).unwrap();
    assert_eq!(wheel.slot(soon).last_pos, UNIT_SIZE as i64, "the slot of Soon still points at 52");
    drop(wheel);

    let released = Arc::new(Released::default());
    let (store, timer) = open(&config, released.clone());
    // Past Soon's time: its slot is read, and leads to Later's unit.
    while remoting::clock::now_ms() < soon + 3000 {
        std::thread::sleep(Duration::from_millis(100));
    }
    let early: Vec<_> =
        released.0.lock().iter().filter(|(t, at)| (t == "Later" && *at < later / 1000 * 1000) || (t == "Late" && *at < late / 1000 * 1000)).cloned().collect();
    assert!(early.is_empty(), "released before their time: {early:?}");
    timer.shutdown();
    store.shutdown();
}
