//! The timer's files against bytes a Java 5.3.3 broker wrote (store/tests/golden/timer, made by
//! compat-tests/timer-golden/generate.sh): the same timer messages, taken in at the same write
//! time, give the same timer-log units and wheel slots byte for byte; Java's checkpoint and
//! metrics read back as Java wrote them.

use std::path::{Path, PathBuf};

use store::message::properties;
use store::message::record::{decode_record, RecordAt};
use store::timer::checkpoint::{CheckpointValues, TimerCheckpoint};
use store::timer::log::{TimerLog, Unit, UNIT_SIZE};
use store::timer::metrics::TimerMetrics;
use store::timer::wheel::TimerWheel;
use store::timer::{java_string_hash, place};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/timer").join(name)
}

/// Java's write time when it took these messages in (every unit of the golden log has it).
const WRITE_MS: i64 = 1_796_208_821_000;

#[test]
fn the_same_messages_make_javas_timer_log_and_wheel() {
    let commit_log = std::fs::read(golden("commitlog.head")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = TimerLog::open(dir.path().join("timerlog"), 100 * 1024 * 1024).unwrap();
    let mut wheel = TimerWheel::open(&dir.path().join("timerwheel"), 7 * 86_400, 1000).unwrap();
    let mut at = 0usize;
    while at < commit_log.len() {
        let Ok(RecordAt::Record(r)) = decode_record(&commit_log[at..], true) else { panic!("bad golden record at {at}") };
        let out_ms: i64 = r.property(properties::TIMER_OUT_MS).unwrap().parse().unwrap();
        let is_delete = r.property(properties::TIMER_DEL_UNIQKEY).is_some();
        let (slot_ms, magic) = place(WRITE_MS, out_ms, is_delete, 2 * 86_400, 1000);
        let slot = wheel.slot(slot_ms);
        let unit = Unit {
            prev_pos: slot.last_pos,
            magic,
            enqueue_ms: WRITE_MS,
            delay_ms: (slot_ms - WRITE_MS) as i32,
            offset_py: at as i64,
            size_py: r.store_size,
            topic_hash: java_string_hash(r.property(properties::REAL_TOPIC).unwrap()),
        };
        let pos = log.append(&unit).unwrap();
        let num = if is_delete { slot.num - 1 } else { slot.num + 1 };
        let first = if slot.first_pos == -1 { pos } else { slot.first_pos };
        wheel.put_slot(slot_ms, first, pos, num, if slot.is_empty() { 0 } else { slot.magic });
        at += r.store_size as usize;
    }
    log.flush().unwrap();
    wheel.flush().unwrap();
    let java_log = std::fs::read(golden("timerlog.head")).unwrap();
    let ours = std::fs::read(dir.path().join("timerlog").join("00000000000000000000")).unwrap();
    assert_eq!(&ours[..java_log.len()], &java_log[..], "timer log units");
    assert!(ours[java_log.len()..java_log.len() + UNIT_SIZE].iter().all(|b| *b == 0));

    let ours_wheel = std::fs::read(dir.path().join("timerwheel")).unwrap();
    let mut slots = 0;
    for line in std::fs::read_to_string(golden("timerwheel.slots")).unwrap().lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let index: usize = fields[0].parse().unwrap();
        let raw = fields[6];
        let ours_hex: String = ours_wheel[index * 32..index * 32 + 32].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(ours_hex, raw, "slot {index}");
        slots += 1;
    }
    assert_eq!(slots, 5);
    let nonzero = ours_wheel.chunks(32).filter(|s| s.iter().any(|b| *b != 0)).count();
    assert_eq!(nonzero, 5, "no other slot written");
}

#[test]
fn javas_checkpoint_and_metrics_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timercheck");
    std::fs::copy(golden("timercheck"), &path).unwrap();
    let cp = TimerCheckpoint::open(&path).unwrap();
    assert_eq!(cp.values.last_read_time_ms, 1_796_208_860_000);
    assert_eq!((cp.values.last_timer_log_flush_pos, cp.values.last_timer_queue_offset, cp.values.master_timer_queue_offset), (416, 8, 8));
    assert_eq!((cp.values.data_version.timestamp, cp.values.data_version.counter), (1_796_208_860_103, 53));
    let java = std::fs::read(golden("timercheck")).unwrap();
    assert_eq!(&CheckpointValues::decode(&java[..56]).unwrap().encode()[..], &java[..56]);
    // Written back, Java's 56 bytes are unchanged.
    cp.flush().unwrap();
    assert_eq!(&std::fs::read(&path).unwrap()[..56], &java[..56]);

    let metrics = TimerMetrics::load(&golden("timermetrics"));
    assert_eq!(metrics.count("TimerGoldenTopic"), 6);
    assert_eq!(std::fs::read_to_string(golden("timermetrics")).unwrap(), metrics.encode());
}
