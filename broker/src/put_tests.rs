//! The put pipeline over a store in a temporary directory: what each wait policy waits for and
//! how it answers, and what each origin counts.

use std::sync::mpsc;

use parking_lot::Mutex;
use remoting::clock::now_ms;
use remoting::RemotingCommand;
use store::config::{BrokerRole, FlushDiskType};
use store::message::record::{decode_record, RecordAt};

use super::*;
use crate::delay_offset::DelayOffsets;
use crate::schedule::ScheduleService;
use crate::stats_manager::names;
use crate::testing::{message, open_store, store_config};

const WAIT: Duration = Duration::from_secs(10);

/// Collects an answer made later.
struct Collect(mpsc::Sender<RemotingCommand>);

impl Answer for Collect {
    fn send(self, response: RemotingCommand) {
        let _ = self.0.send(response);
    }
}

/// Slaves that answer `outcome` from another thread, and remember where the put ended.
struct Slaves {
    outcome: Outcome,
    asked_for: Mutex<Vec<i64>>,
}

impl ReplicaWaiter for Slaves {
    fn wait(&self, end: i64, done: Box<dyn FnOnce(Outcome) + Send>) {
        self.asked_for.lock().push(end);
        let outcome = self.outcome;
        std::thread::spawn(move || done(outcome));
    }
}

fn observer() -> Arc<PutObserver> {
    Arc::new(PutObserver { stats: Default::default(), broker_stats: Arc::new(BrokerStatsManager::new("C")), metrics: Default::default() })
}

fn pipeline(dir: &std::path::Path, flush: FlushDiskType, role: BrokerRole, replicas: Option<Arc<dyn ReplicaWaiter>>) -> PutPipeline {
    PutPipeline::new(open_store(store_config(dir, flush, role)), replicas, observer())
}

/// The answer carries whether the store took the put (code 0) and what the slaves did (remark).
fn respond(result: PutMessageResult, replica: Option<Outcome>, _: crate::put::Rewritten) -> RemotingCommand {
    RemotingCommand { code: if result.is_ok() { 0 } else { 1 }, remark: Some(format!("{replica:?}")), ..Default::default() }
}

fn send() -> Origin {
    Origin::Send { message_type: "normal", half_for: None, batch: false }
}

/// What the stats manager counted under `name` and `key` (None: never counted).
fn counted(p: &PutPipeline, name: &str, key: &str) -> Option<u64> {
    p.observer.broker_stats.tick(now_ms());
    p.observer.broker_stats.item(name, key).map(|item| item.minute().sum)
}

#[test]
fn an_async_flush_put_is_answered_at_once_and_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(dir.path(), FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster, None);
    let msgs = [message("T", "")];
    assert_eq!(p.wait_for(&send(), &msgs), Wait::Appended);
    let (tx, rx) = mpsc::channel();
    let answer = p.put_and_answer(msgs.to_vec(), send(), Collect(tx), respond).expect("answered at once");
    assert_eq!((answer.code, answer.remark.as_deref()), (0, Some("None")));
    assert!(rx.try_recv().is_err(), "and not a second time");
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, "T"), Some(1));
    assert!(counted(&p, names::TOPIC_PUT_SIZE, "T").is_some_and(|bytes| bytes > 5));
    assert_eq!(counted(&p, names::BROKER_PUT_NUMS, "C"), Some(1));
    assert_eq!(p.observer.stats.put_count(), 1);
}

#[test]
fn a_sync_flush_put_is_answered_by_the_flush_service_once_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(dir.path(), FlushDiskType::SyncFlush, BrokerRole::AsyncMaster, None);
    let msgs = [message("T", "")];
    assert_eq!(p.wait_for(&send(), &msgs), Wait::Stored);
    let (tx, rx) = mpsc::channel();
    assert!(p.put_and_answer(msgs.to_vec(), send(), Collect(tx), respond).is_none(), "answered later");
    let answer = rx.recv_timeout(WAIT).expect("the flush service answers");
    assert_eq!((answer.code, answer.remark.as_deref()), (0, Some("None")));
    assert!(p.store.commit_log().flushed_offset() >= p.store.commit_log().max_offset());
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, "T"), Some(1));
}

#[test]
fn a_message_that_says_wait_false_is_answered_once_appended_even_under_sync_flush() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(dir.path(), FlushDiskType::SyncFlush, BrokerRole::SyncMaster, None);
    let msgs = [message("T", "WAIT\u{1}false\u{2}")];
    assert_eq!(p.wait_for(&send(), &msgs), Wait::Appended);
    let (tx, _rx) = mpsc::channel();
    assert_eq!(p.put_and_answer(msgs.to_vec(), send(), Collect(tx), respond).map(|a| a.code), Some(0));
}

#[test]
fn a_sync_master_without_slaves_answers_slave_not_available_and_counts_the_stored_put() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(dir.path(), FlushDiskType::AsyncFlush, BrokerRole::SyncMaster, None);
    let msgs = [message("T", "")];
    assert_eq!(p.wait_for(&send(), &msgs), Wait::Replicated);
    let (tx, rx) = mpsc::channel();
    assert!(p.put_and_answer(msgs.to_vec(), send(), Collect(tx), respond).is_none());
    let answer = rx.recv_timeout(WAIT).unwrap();
    assert_eq!((answer.code, answer.remark.as_deref()), (0, Some("Some(SlaveNotAvailable)")));
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, "T"), Some(1), "Java counts a put its slaves missed");
}

#[test]
fn a_sync_master_answers_what_its_slaves_did_with_the_puts_end() {
    for (flush, outcome) in [(FlushDiskType::AsyncFlush, Outcome::TimedOut), (FlushDiskType::SyncFlush, Outcome::Replicated)] {
        let dir = tempfile::tempdir().unwrap();
        let slaves = Arc::new(Slaves { outcome, asked_for: Mutex::new(Vec::new()) });
        let p = pipeline(dir.path(), flush, BrokerRole::SyncMaster, Some(slaves.clone()));
        let (tx, rx) = mpsc::channel();
        assert!(p.put_and_answer(vec![message("T", "")], send(), Collect(tx), respond).is_none());
        let answer = rx.recv_timeout(WAIT).unwrap();
        assert_eq!(answer.remark, Some(format!("{:?}", Some(outcome))));
        assert_eq!(*slaves.asked_for.lock(), vec![p.store.commit_log().max_offset()], "the slaves are asked for the put's end");
    }
}

#[test]
fn replies_and_the_brokers_own_puts_do_not_wait_for_slaves() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(dir.path(), FlushDiskType::AsyncFlush, BrokerRole::SyncMaster, None);
    let msgs = [message("T", "")];
    for origin in [Origin::Reply { message_type: "normal" }, Origin::DelayedDelivery, Origin::Commit { born_ms: 0 }, Origin::TransactionOp] {
        assert_eq!(p.wait_for(&origin, &msgs), Wait::Appended, "{origin:?}");
    }
    let back = Origin::SendBack { group: "G".into(), back_topic: "T".into() };
    assert_eq!(p.wait_for(&back, &msgs), Wait::Replicated);
}

#[test]
fn a_stored_reply_is_counted_as_a_put_into_its_topic() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(dir.path(), FlushDiskType::SyncFlush, BrokerRole::AsyncMaster, None);
    let (tx, rx) = mpsc::channel();
    p.put_then(&[message("C_REPLY_TOPIC", "")], Origin::Reply { message_type: "normal" }, move |r| {
        let _ = tx.send(r.is_ok());
    });
    assert_eq!(rx.recv_timeout(WAIT), Ok(true));
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, "C_REPLY_TOPIC"), Some(1));
    assert_eq!(counted(&p, names::BROKER_PUT_NUMS, "C"), Some(1));
}

#[test]
fn send_backs_commits_and_op_records_are_counted_as_java_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(dir.path(), FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster, None);
    let retry = message("%RETRY%G", "DELAY\u{1}3\u{2}");
    let (tx, _rx) = mpsc::channel();
    let back = Origin::SendBack { group: "G".into(), back_topic: "T".into() };
    assert_eq!(p.put_and_answer(vec![retry], back, Collect(tx), respond).map(|a| a.code), Some(0), "stored in the schedule topic");
    assert!(p.put(&message("%DLQ%G", ""), Origin::SendBack { group: "G".into(), back_topic: "T".into() }).is_ok());
    assert!(p.put(&message("T", ""), Origin::Commit { born_ms: 0 }).is_ok());
    assert!(p.put(&message(system_topic::TRANS_OP_HALF, ""), Origin::TransactionOp).is_ok());
    assert_eq!(counted(&p, names::SNDBCK_PUT_NUMS, "T@G"), Some(2));
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, system_topic::SCHEDULE), Some(1), "a retry waiting for its delay");
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, "%DLQ%G"), None, "Java does not count a DLQ put under its topic");
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, "T"), Some(1), "the commit");
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, system_topic::TRANS_OP_HALF), None);
    assert_eq!(counted(&p, names::BROKER_PUT_NUMS, "C"), Some(1), "only the commit counts in the broker's total");
    assert_eq!(p.observer.stats.put_count(), 4, "the store counts every put");
}

#[test]
fn a_delayed_delivery_is_counted_under_its_real_topic_and_as_read_from_the_schedule_topic() {
    let dir = tempfile::tempdir().unwrap();
    let p = Arc::new(pipeline(dir.path(), FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster, None));
    let (tx, _rx) = mpsc::channel();
    let delayed = Origin::Send { message_type: "delay", half_for: None, batch: false };
    assert_eq!(p.put_and_answer(vec![message("T", "DELAY\u{1}1\u{2}")], delayed, Collect(tx), respond).map(|a| a.code), Some(0));
    let offsets = Arc::new(DelayOffsets::open(dir.path()).unwrap());
    let levels = p.store.config().delay_levels_ms().len();
    let schedule = ScheduleService { store: p.store.clone(), offsets: offsets.clone(), levels, put: p.clone() };
    // Level 1 is due a second after the put.
    let deadline = std::time::Instant::now() + WAIT;
    while offsets.get(1) != Some(1) {
        assert!(std::time::Instant::now() < deadline, "the delayed message was never delivered");
        std::thread::sleep(Duration::from_millis(50));
        schedule.deliver_all_due();
    }
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, system_topic::SCHEDULE), Some(1), "the send, into the schedule topic");
    assert_eq!(counted(&p, names::TOPIC_PUT_NUMS, "T"), Some(1), "the delivery, into the real topic");
    assert!(counted(&p, names::TOPIC_PUT_SIZE, "T").is_some_and(|bytes| bytes > 5));
    let read = format!("{}@{SCHEDULE_CONSUMER_GROUP}", system_topic::SCHEDULE);
    assert_eq!(counted(&p, names::GROUP_GET_NUMS, &read), Some(1));
    assert!(counted(&p, names::GROUP_GET_SIZE, &read).is_some_and(|bytes| bytes > 5));
    assert_eq!(counted(&p, names::BROKER_PUT_NUMS, "C"), Some(2));
    assert_eq!(counted(&p, names::BROKER_GET_NUMS, "C"), None, "a delivery is no pull");
}

#[test]
fn a_prepared_send_is_stored_as_its_half_and_a_delayed_send_in_the_schedule_topic_but_not_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(dir.path(), FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster, None);
    let stored_as = |origin: Origin| {
        let (tx, _rx) = mpsc::channel();
        // The answer names where the record went.
        let at = |r: PutMessageResult, _, _| RemotingCommand { remark: r.append.map(|a| a.wrote_offset.to_string()), ..Default::default() };
        let answer = p.put_and_answer(vec![message("T", "DELAY\u{1}99\u{2}")], origin, Collect(tx), at).expect("answered at once");
        let offset: i64 = answer.remark.and_then(|o| o.parse().ok()).expect("stored");
        let bytes = p.store.look_message_by_offset(offset).expect("readable");
        let Ok(RecordAt::Record(r)) = decode_record(&bytes, false) else { panic!("a record at {offset}") };
        let real_topic = r.property(properties::REAL_TOPIC).map(str::to_owned);
        (r.topic.to_owned(), r.queue_id, real_topic, r.property(properties::DELAY).map(str::to_owned))
    };
    let half = stored_as(Origin::Send { message_type: "transaction", half_for: Some("T".into()), batch: false });
    assert_eq!(half, (system_topic::TRANS_HALF.to_owned(), 0, Some("T".to_owned()), Some("99".to_owned())));
    let levels = p.store.config().delay_levels_ms().len();
    let delayed = stored_as(Origin::Send { message_type: "delay", half_for: None, batch: false });
    assert_eq!(delayed, (system_topic::SCHEDULE.to_owned(), levels as i32 - 1, Some("T".to_owned()), Some(levels.to_string())), "clamped to the last level");
    let batch = stored_as(Origin::Send { message_type: "delay", half_for: None, batch: true });
    assert_eq!(batch, ("T".to_owned(), 0, None, Some("99".to_owned())), "as it was sent");
}
