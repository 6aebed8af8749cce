//! Transactions over a broker built in process (`crate::testing`): here, a module of its own, so
//! that `transaction` names neither the broker nor the test kit.

use crate::broker::Broker;
use crate::put::Origin;
use crate::stats_manager::names;
use crate::topic_config::system_topic;
use crate::transaction::*;
use crate::transaction::{PGROUP, TRAN_MSG};
use remoting::clock::now_ms;
use remoting::RemotingCommand;
use store::config::{BrokerRole, FlushDiskType};
use store::message::record::TRANSACTION_COMMIT_TYPE;

/// Stores a prepared message of `group` for topic `T` as the send processor does; gives its
/// queue offset and commit-log offset in the half topic.
fn prepare(b: &Broker, group: &str) -> (i64, i64) {
    prepare_with(b, group, "")
}

/// [`prepare`] with more properties (`key\u{1}value\u{2}...`).
fn prepare_with(b: &Broker, group: &str, more: &str) -> (i64, i64) {
    let mut msg = crate::testing::message("T", &format!("{PGROUP}\u{1}{group}\u{2}{TRAN_MSG}\u{1}true\u{2}{more}"));
    msg.sys_flag = store::message::record::TRANSACTION_PREPARED_TYPE;
    ensure_topics(&b.topics);
    let (tx, rx) = std::sync::mpsc::channel();
    let origin = Origin::Send { message_type: "transaction", half_for: Some("T".into()), batch: false };
    // The answer carries the half's queue offset as its opaque and its commit-log offset as its remark.
    let answer = b.put.put_and_answer(vec![msg], origin, Collected(tx), |r, _, _| {
        let a = r.append.expect("stored");
        RemotingCommand { opaque: a.logics_offset as i32, remark: Some(a.wrote_offset.to_string()), ..Default::default() }
    });
    let answer = answer.or_else(|| rx.recv().ok()).expect("answered");
    (i64::from(answer.opaque), answer.remark.and_then(|o| o.parse().ok()).expect("an offset"))
}

struct Collected(std::sync::mpsc::Sender<RemotingCommand>);

impl crate::put::Answer for Collected {
    fn send(self, response: RemotingCommand) {
        let _ = self.0.send(response);
    }
}

fn end_header(group: &str, (queue_offset, commit_log_offset): (i64, i64), commit: bool) -> EndTransactionRequestHeader {
    EndTransactionRequestHeader {
        producer_group: group.into(),
        tran_state_table_offset: queue_offset,
        commit_log_offset,
        commit_or_rollback: if commit { TRANSACTION_COMMIT_TYPE } else { store::message::record::TRANSACTION_ROLLBACK_TYPE },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_is_counted_under_its_real_topic_and_a_rollback_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let b = crate::testing::broker(dir.path(), FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster);
    let committed = prepare(&b, "pg");
    let rolled_back = prepare(&b, "pg");
    assert_eq!(b.transactions().end(&end_header("pg", committed, true)), Ok(()));
    assert_eq!(b.transactions().end(&end_header("pg", rolled_back, false)), Ok(()));
    assert_eq!(b.transactions().end(&end_header("other", committed, true)).map_err(|e| e.1), Err("The producer group wrong".to_owned()));
    b.broker_stats.tick(now_ms());
    let counted = |name, key| b.broker_stats.item(name, key).map(|item| item.minute().sum);
    assert_eq!(counted(names::TOPIC_PUT_NUMS, system_topic::TRANS_HALF), Some(2), "the two half messages");
    assert_eq!(counted(names::TOPIC_PUT_NUMS, "T"), Some(1), "the commit only");
    assert_eq!(counted(names::TOPIC_PUT_NUMS, system_topic::TRANS_OP_HALF), None, "op records are not counted");
    assert_eq!(counted(names::BROKER_PUT_NUMS, "DefaultCluster"), Some(3));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_committed_message_takes_its_timer_or_delay_at_the_commit_as_javas_put_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let b = crate::testing::broker(dir.path(), FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster);
    let timed = prepare_with(&b, "pg", "TIMER_DELAY_SEC\u{1}60\u{2}");
    let delayed = prepare_with(&b, "pg", "DELAY\u{1}2\u{2}");
    let plain = prepare(&b, "pg");
    // Prepared, nothing is in the timer or the schedule yet.
    assert_eq!(b.store.max_offset_in_queue(system_topic::WHEEL_TIMER, 0), 0);
    for half in [timed, delayed, plain] {
        assert_eq!(b.transactions().end(&end_header("pg", half, true)), Ok(()));
    }
    // The timed one waits in the timer, the delayed one at its level, the plain one is in T
    // (once the store's dispatch, which runs behind the appends, has caught up).
    let queues = [(system_topic::WHEEL_TIMER, 0), (system_topic::SCHEDULE, 1), ("T", 0)];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while queues.iter().any(|(topic, queue)| b.store.max_offset_in_queue(topic, *queue) < 1) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    for (topic, queue) in queues {
        assert_eq!(b.store.max_offset_in_queue(topic, queue), 1, "{topic}");
    }
}
