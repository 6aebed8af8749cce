//! Pop with the buffer merge on (`enablePopBufferMerge=true`), through the socket: a check point
//! acked within the stay time never reaches the revive topic (nor its acks) and its messages
//! never come back; one not acked in time is written with the acks it has and its unacked
//! messages come back once, not before their invisible time; a change of invisible time works
//! through it; a restart writes what is held (a stop) or hands the messages out again (a crash),
//! and the consumer offset never passes a check point neither written nor acked.

use std::path::Path;
use std::time::{Duration, Instant};

use broker::controller::BrokerController;
use broker::pop::extra_info::ExtraInfoFields;
use broker::pop::headers::{AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, PopMessageResponseHeader};
use broker::pop::names;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use store::message::record::{decode_record, RecordAt};

mod common;

use common::pop::*;
use common::*;

const MERGE: [(&str, &str); 2] = [("brokerName", "broker-a"), ("enablePopBufferMerge", "true")];

/// (tag, start offset named in the body) of every record the broker wrote for the revive topic:
/// each goes through the timer topic first, under its real topic.
fn revive_records(b: &BrokerController) -> Vec<(String, String)> {
    let store = &b.broker.store;
    let revive = names::revive_topic("DefaultCluster");
    let mut out = Vec::new();
    for queue_id in 0..8 {
        let Some(cq) = store.find_queue(store::timer::TIMER_TOPIC, queue_id) else { continue };
        for i in cq.min_offset()..cq.max_offset() {
            let Some(bytes) = cq.get(i).and_then(|u| store.look_message_by_offset(u.phy_offset)) else { continue };
            let Ok(RecordAt::Record(m)) = decode_record(&bytes, true) else { continue };
            if m.property("REAL_TOPIC") == Some(revive.as_str()) {
                out.push((m.property("TAGS").unwrap_or("").to_owned(), String::from_utf8_lossy(m.body).into_owned()));
            }
        }
    }
    out
}

/// An ACK_MESSAGE as the Java client sends it: under the topic the message was read from (a
/// revived one's pop retry topic, named by its receipt handle).
fn ack_as_client(topic_name: &str, p: &Popped) -> RemotingCommand {
    let real = ExtraInfoFields::split(&p.handle).real_topic(topic_name, "pg-c").unwrap();
    let h =
        AckMessageRequestHeader { consumer_group: group("pg-c"), topic: topic(&real), queue_id: p.queue_id, extra_info: p.handle.clone(), offset: p.offset };
    RemotingCommand::request_with_header(RequestCode::ACK_MESSAGE, &h)
}

fn committed(b: &BrokerController, topic_name: &str) -> i64 {
    b.broker.offsets.query_offset("pg-c", topic_name, 0).unwrap_or(-1)
}

async fn send_all(c: &RemotingClient, addr: &str, topic_name: &str, bodies: &[&str]) {
    for body in bodies {
        let r = c.invoke(addr, send(topic_name, 0, body, ""), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    pull_found(c, addr, topic_name, 0, bodies.len() as i64 - 1).await;
}

/// One pop of queue 0 that hands out `n` messages: them and the pop's time.
async fn pop_n(c: &RemotingClient, addr: &str, topic_name: &str, n: usize, invisible_ms: i64) -> (Vec<Popped>, i64) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = c.invoke(addr, pop_request(topic_name, 0, invisible_ms, 0, false), TIMEOUT).await.unwrap();
        if r.code == 0 {
            let h: PopMessageResponseHeader = r.decode_header().unwrap();
            let got = popped(&r, topic_name);
            assert_eq!(got.len(), n, "{got:?}");
            return (got, h.pop_time);
        }
        assert!(Instant::now() < deadline, "nothing popped: {:?}", r.remark);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn until(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn acked_within_the_stay_time_nothing_reaches_the_revive_topic() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &MERGE).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    send_all(&c, &addr, "MergeAck", &["a0", "a1"]).await;
    let (got, _) = pop_n(&c, &addr, "MergeAck", 2, 8_000).await;
    assert!(committed(&broker, "MergeAck") < 2, "not committed while the check point is held unacked");
    // Hidden meanwhile: the next pop reads from the pending offset.
    assert!(pop_until(&c, &addr, "MergeAck", 1, 8_000, Duration::ZERO).await.is_empty());
    for p in &got {
        let r = c.invoke(&addr, ack_request("MergeAck", p), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    until("the offset committed once all is acked", Duration::from_secs(3), || committed(&broker, "MergeAck") == 2).await;
    // Past the invisible time and the revive: nothing comes back, nothing was written.
    assert!(pop_until(&c, &addr, "MergeAck", 1, 60_000, Duration::from_secs(13)).await.is_empty());
    assert_eq!(revive_records(&broker), Vec::<(String, String)>::new());
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn not_acked_in_time_it_is_written_with_its_acks_and_revived_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &MERGE).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    send_all(&c, &addr, "MergeLate", &["acked", "changed", "forgotten"]).await;
    let (got, pop_time) = pop_n(&c, &addr, "MergeLate", 3, 8_000).await;
    let r = c.invoke(&addr, ack_request("MergeLate", &got[0]), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let h = ChangeInvisibleTimeRequestHeader {
        consumer_group: group("pg-c"),
        topic: topic("MergeLate"),
        queue_id: 0,
        extra_info: got[1].handle.clone(),
        offset: got[1].offset,
        invisible_time: 2_000,
    };
    let changed_at = remoting::clock::now_ms();
    let r = c.invoke(&addr, RemotingCommand::request_with_header(RequestCode::CHANGE_MESSAGE_INVISIBLETIME, &h), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert!(committed(&broker, "MergeLate") < 3, "not past a check point neither written nor acked");

    let mut back: Vec<(String, i64)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while back.len() < 2 && Instant::now() < deadline {
        for p in pop_until(&c, &addr, "MergeLate", 1, 60_000, Duration::from_millis(300)).await {
            let r = c.invoke(&addr, ack_as_client("MergeLate", &p), TIMEOUT).await.unwrap();
            assert_eq!(r.code, 0, "{:?}", r.remark);
            back.push((p.body, remoting::clock::now_ms()));
        }
    }
    let bodies: Vec<&str> = back.iter().map(|(b, _)| b.as_str()).collect();
    assert_eq!(bodies, ["changed", "forgotten"], "each unacked message once, in the order of their times");
    assert!(back[0].1 >= changed_at + 2_000, "the changed one not before its new time");
    assert!(back[1].1 >= pop_time + 8_000, "the forgotten one not before its invisible time");
    assert!(pop_until(&c, &addr, "MergeLate", 1, 60_000, Duration::from_secs(5)).await.is_empty(), "nothing else comes back");
    assert_eq!(committed(&broker, "MergeLate"), 3);

    // Written: the pop's check point (its acks: `acked`, and `changed` by the change), and the
    // change's own check point. The retry messages were acked in time: nothing of theirs.
    let records = revive_records(&broker);
    let tags = |t: &str| records.iter().filter(|(tag, _)| tag == t).count();
    assert_eq!((tags("ck"), tags("ack"), tags("bAck")), (2, 2, 0), "{records:?}");
    let start = got[0].offset;
    assert!(records.iter().filter(|(t, _)| t == "ack").all(|(_, body)| body.contains(&format!("\"so\":{start}"))), "{records:?}");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_broker_writes_what_it_holds_and_revives_it_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &MERGE).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    send_all(&c, &addr, "MergeStop", &["s0", "s1", "s2"]).await;
    let (got, pop_time) = pop_n(&c, &addr, "MergeStop", 3, 9_000).await;
    let r = c.invoke(&addr, ack_request("MergeStop", &got[1]), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert!(revive_records(&broker).is_empty(), "held");
    broker.shutdown().await;

    let again = start(dir.path(), &MERGE).await;
    let addr = again.local_addr().to_string();
    assert_eq!(committed(&again, "MergeStop"), 3, "committed once written at the stop");
    let records = revive_records(&again);
    let tags: Vec<&str> = records.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(tags, ["ck", "ack"], "the held check point and its one ack, written at the stop");
    assert_back_once_not_early(&c, &addr, "broker-a", "MergeStop", &[&got[0], &got[2]], &[&got[1]], pop_time + 9_000).await;
    again.shutdown().await;
}

/// Copies a directory tree as it is now (a running broker's files: what a kill -9 leaves).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.file_name() != "lock" {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_crash_the_messages_of_held_check_points_are_handed_out_again() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("flushConsumerOffsetInterval", "100"), MERGE[0], MERGE[1]]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    send_all(&c, &addr, "MergeCrash", &["c0", "c1"]).await;
    let (got, _) = pop_n(&c, &addr, "MergeCrash", 2, 9_000).await;
    // Let the persister write the offsets it has (none past the held check point).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let crashed = tempfile::tempdir().unwrap();
    copy_tree(dir.path(), crashed.path());
    broker.shutdown().await;
    assert!(crashed.path().join("abort").exists());

    let again = start(crashed.path(), &MERGE).await;
    let addr = again.local_addr().to_string();
    assert!(committed(&again, "MergeCrash") < 2, "the offset was not committed past the lost check point");
    // As Java: the check point is lost with the process, its messages are not (they are read
    // again from the queue at once).
    let back = pop_until(&c, &addr, "MergeCrash", 2, 60_000, Duration::from_secs(10)).await;
    let mut bodies: Vec<&str> = back.iter().map(|p| p.body.as_str()).collect();
    bodies.sort();
    assert_eq!(bodies, got.iter().map(|p| p.body.as_str()).collect::<Vec<_>>());
    assert_eq!(c.invoke(&addr, pop_request("MergeCrash", 0, 60_000, 0, false), TIMEOUT).await.unwrap().response_code(), ResponseCode::POLLING_TIMEOUT);
    again.shutdown().await;
}
