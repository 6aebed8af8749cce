//! 5.x pop consumption through the socket: a pop hands out messages and hides them, an ack keeps
//! them gone, a message not acked comes back from the retry topic after its invisible time (once,
//! under the popped topic, with its receipt handle), a changed invisible time brings it back at
//! the new time, a pop that finds nothing waits for the next message, and an orderly pop does not
//! hand out a queue's next message while an earlier one is in flight.

use std::time::{Duration, Instant};

use broker::pop::headers::{ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader, PopMessageResponseHeader};
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

mod common;

use common::pop::*;
use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn popped_messages_are_hidden_acked_or_revived_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerName", "broker-a")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    for body in ["acked", "changed", "forgotten"] {
        let r = c.invoke(&addr, send("Pop", 0, body, "TAGS\u{1}a\u{2}"), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    pull_found(&c, &addr, "Pop", 0, 2).await;
    let first = pop_until(&c, &addr, "Pop", 3, 4000, Duration::from_secs(5)).await;
    let bodies: Vec<&str> = first.iter().map(|p| p.body.as_str()).collect();
    assert_eq!(bodies, ["acked", "changed", "forgotten"]);
    // Hidden: a second pop finds nothing.
    assert!(pop_until(&c, &addr, "Pop", 1, 4000, Duration::ZERO).await.is_empty());

    let r = c.invoke(&addr, ack_request("Pop", &first[0]), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let h = ChangeInvisibleTimeRequestHeader {
        consumer_group: group("pg-c"),
        topic: topic("Pop"),
        queue_id: first[1].queue_id,
        extra_info: first[1].handle.clone(),
        offset: first[1].offset,
        invisible_time: 1000,
    };
    let r = c.invoke(&addr, RemotingCommand::request_with_header(RequestCode::CHANGE_MESSAGE_INVISIBLETIME, &h), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);

    // The changed one comes back first (after its new second), the forgotten one after its four.
    let popped_at = Instant::now();
    let back = pop_until(&c, &addr, "Pop", 2, 60_000, Duration::from_secs(25)).await;
    let mut bodies: Vec<&str> = back.iter().map(|p| p.body.as_str()).collect();
    bodies.sort();
    assert_eq!(bodies, ["changed", "forgotten"], "each unacked message once, the acked one not");
    assert!(popped_at.elapsed() >= Duration::from_secs(1), "not before the invisible time");
    assert!(back.iter().all(|p| p.reconsume == 1), "{back:?}");
    for p in &back {
        let r = c.invoke(&addr, ack_request("Pop", p), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    // Acked from the retry topic: nothing more comes.
    assert!(pop_until(&c, &addr, "Pop", 1, 60_000, Duration::from_secs(8)).await.is_empty());
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pop_that_finds_nothing_waits_for_the_next_message() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerName", "broker-a")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let r = c.invoke(&addr, send("Wait", 0, "first", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0);
    pull_found(&c, &addr, "Wait", 0, 0).await;
    assert_eq!(pop_until(&c, &addr, "Wait", 1, 30_000, Duration::from_secs(5)).await.len(), 1);
    // Parked: answered when the next message arrives, before its poll time.
    let started = Instant::now();
    let waiting = {
        let addr = addr.clone();
        tokio::spawn(async move {
            RemotingClient::new(ClientConfig::default()).invoke(&addr, pop_request("Wait", -1, 30_000, 8_000, false), TIMEOUT).await.unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = c.invoke(&addr, send("Wait", 1, "second", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0);
    let r = waiting.await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert_eq!(popped(&r, "Wait")[0].body, "second");
    assert!(started.elapsed() < Duration::from_secs(6), "woken by the arrival, not the poll time");
    // Nothing comes: answered POLLING_TIMEOUT at the poll time.
    let started = Instant::now();
    let r = c.invoke(&addr, pop_request("Wait", -1, 30_000, 1_500, false), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::POLLING_TIMEOUT);
    assert!(started.elapsed() >= Duration::from_millis(1_200), "{:?}", started.elapsed());
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_orderly_pop_holds_a_queue_until_its_messages_are_acked() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerName", "broker-a")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    for body in ["o1", "o2"] {
        let r = c.invoke(&addr, send("Ord", 0, body, ""), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0);
    }
    pull_found(&c, &addr, "Ord", 0, 1).await;
    let r = c.invoke(&addr, pop_request("Ord", 0, 2_000, 0, true), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.revive_qid, 999);
    assert!(h.order_count_info.is_some());
    let got = popped(&r, "Ord");
    assert_eq!(got.len(), 2);
    // In flight: the queue is blocked.
    let r = c.invoke(&addr, pop_request("Ord", 0, 2_000, 0, true), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::POLLING_TIMEOUT);
    // Not acked in time: the same messages again, in order, counted.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let r = c.invoke(&addr, pop_request("Ord", 0, 2_000, 0, true), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let again = popped(&r, "Ord");
    assert_eq!(again.iter().map(|p| p.body.as_str()).collect::<Vec<_>>(), ["o1", "o2"]);
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    assert!(h.order_count_info.unwrap().ends_with("0 0 1"), "each handed out twice");
    for p in &again {
        let r = c.invoke(&addr, ack_request("Ord", p), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    let r = c.invoke(&addr, send("Ord", 0, "o3", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0);
    pull_found(&c, &addr, "Ord", 0, 2).await;
    let r = c.invoke(&addr, pop_request("Ord", 0, 2_000, 0, true), TIMEOUT).await.unwrap();
    assert_eq!(popped(&r, "Ord").iter().map(|p| p.body.as_str()).collect::<Vec<_>>(), ["o3"], "acked: the queue moves on");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_ack_keeps_the_messages_of_its_bits_gone() {
    acks_keep_their_messages_gone(&[]).await;
}

/// Under SYNC_FLUSH an ack, a batch ack and a change of invisible time are answered once their
/// records are on disk, by the flush (not by a thread waiting for it).
#[tokio::test(flavor = "multi_thread")]
async fn acks_are_answered_once_flushed_under_sync_flush() {
    acks_keep_their_messages_gone(&[("flushDiskType", "SYNC_FLUSH")]).await;
}

/// Four messages popped; a batch ack of the first two, an ack of the third, a change of the
/// fourth's invisible time: only the fourth comes back, once.
async fn acks_keep_their_messages_gone(extra: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let mut conf = vec![("brokerName", "broker-a")];
    conf.extend_from_slice(extra);
    let broker = start(dir.path(), &conf).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    for body in ["b0", "b1", "b2", "b3"] {
        let r = c.invoke(&addr, send("Batch", 0, body, ""), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0);
    }
    pull_found(&c, &addr, "Batch", 0, 3).await;
    let r = c.invoke(&addr, pop_request("Batch", 0, 3_000, 0, false), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    let got = popped(&r, "Batch");
    assert_eq!(got.len(), 4);
    let start = got[0].offset;
    // Bits 0 and 1 (BitSet.toByteArray() = [3], Base64 "Aw=="): b0 and b1 acked.
    let body = format!(
        r#"{{"acks":[{{"b":"Aw==","c":"pg-c","it":3000,"pt":{},"q":0,"r":"0","rq":{},"so":{start},"t":"Batch"}}],"brokerName":"broker-a"}}"#,
        h.pop_time, h.revive_qid
    );
    let request = RemotingCommand::request(RequestCode::BATCH_ACK_MESSAGE).with_body(body.into_bytes());
    let r = c.invoke(&addr, request, TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let r = c.invoke(&addr, ack_request("Batch", &got[2]), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    // b3 made visible again in 1 s: a new check point, and an ack of the old one (else b3 would
    // also come back from it, 3 s after the pop).
    let ch = ChangeInvisibleTimeRequestHeader {
        consumer_group: group("pg-c"),
        topic: topic("Batch"),
        queue_id: got[3].queue_id,
        extra_info: got[3].handle.clone(),
        offset: got[3].offset,
        invisible_time: 1000,
    };
    let r = c.invoke(&addr, RemotingCommand::request_with_header(RequestCode::CHANGE_MESSAGE_INVISIBLETIME, &ch), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let changed: ChangeInvisibleTimeResponseHeader = r.decode_header().unwrap();
    assert_eq!((changed.invisible_time, changed.revive_qid), (1000, h.revive_qid));
    let empty = RemotingCommand::request(RequestCode::BATCH_ACK_MESSAGE).with_body(br#"{"acks":[]}"#.to_vec());
    assert_eq!(c.invoke(&addr, empty, TIMEOUT).await.unwrap().response_code(), ResponseCode::NO_MESSAGE);
    let back = pop_until(&c, &addr, "Batch", 1, 60_000, Duration::from_secs(30)).await;
    assert_eq!(back.iter().map(|p| p.body.as_str()).collect::<Vec<_>>(), ["b3"]);
    assert!(pop_until(&c, &addr, "Batch", 1, 60_000, Duration::from_secs(6)).await.is_empty(), "the acked ones stay gone");
    broker.shutdown().await;
}

/// A pop does not wait for its check point's put (SYNC_FLUSH here): the queue's offset is
/// committed once the check point is on disk. A check point the store refuses (the timer's
/// flow control: `timerCongestNumEachSlot=0` refuses a second timer in a slot) withholds the
/// pop's messages: they are handed out by a later pop, once.
#[tokio::test(flavor = "multi_thread")]
async fn a_pop_answers_before_its_check_point_is_flushed_and_a_refused_one_withholds_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerName", "broker-a"), ("flushDiskType", "SYNC_FLUSH"), ("timerCongestNumEachSlot", "0")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let committed = || broker.broker.offsets.query_offset("pg-c", "PopSync", 0).unwrap_or(-1);
    let bodies: Vec<String> = (0..6).map(|i| format!("m{i}")).collect();
    for body in &bodies {
        let r = c.invoke(&addr, send("PopSync", 0, body, ""), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    pull_found(&c, &addr, "PopSync", 0, 5).await;
    let timer = broker.broker.timer.get().expect("the timer runs").clone();
    let mut seen = Vec::new();
    let mut withheld = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !withheld {
        assert!(Instant::now() < deadline, "no second pop within the first one's second was refused: {seen:?}");
        // Early in a second, so that the second pop falls in the same one (the same timer slot).
        while !(10..200).contains(&(remoting::clock::now_ms() % 1000)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let r = pop_one(&c, &addr).await;
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let first = popped(&r, "PopSync");
        let h: PopMessageResponseHeader = r.decode_header().unwrap();
        assert_eq!(first.len(), 1);
        seen.push(first[0].body.clone());
        let next = first[0].offset + 1;
        wait_until(Duration::from_secs(10), || committed() == next).await;
        // The timer has the first check point in its slot (enqueued from the commit log): its
        // due time is the revive time less a second, rounded down to the second.
        let slot_ms = (h.pop_time + 60_000 - 1000) / 1000 * 1000;
        wait_until(Duration::from_secs(10), || timer.congest_num(slot_ms) >= 1).await;
        let r = pop_one(&c, &addr).await;
        let same_second = remoting::clock::now_ms() / 1000 == h.pop_time / 1000;
        if r.code == 0 {
            let got = popped(&r, "PopSync");
            assert!(!same_second, "handed out with its check point refused: {got:?}");
            seen.extend(got.iter().map(|p| p.body.clone()));
            continue;
        }
        assert_eq!(r.response_code(), ResponseCode::POLLING_TIMEOUT, "{:?}", r.remark);
        withheld = same_second;
        assert_eq!(committed(), next, "a withheld pop moves no offset");
    }
    // Later pops (new slots) hand out every message still there, each once.
    let rest = pop_until(&c, &addr, "PopSync", bodies.len() - seen.len(), 60_000, Duration::from_secs(20)).await;
    seen.extend(rest.iter().map(|p| p.body.clone()));
    seen.sort();
    assert_eq!(seen, bodies, "each message once");
    broker.shutdown().await;
}

/// A pop of one message of queue 0 of `PopSync`, hidden for 60 s.
async fn pop_one(c: &RemotingClient, addr: &str) -> RemotingCommand {
    let mut req = pop_request("PopSync", 0, 60_000, 0, false);
    req.ext_fields.get_or_insert_with(Default::default).insert("maxMsgNums".into(), "1".into());
    c.invoke(addr, req, TIMEOUT).await.unwrap()
}

async fn wait_until(within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
