//! 5.x pop consumption through the socket: a pop hands out messages and hides them, an ack keeps
//! them gone, a message not acked comes back from the retry topic after its invisible time (once,
//! under the popped topic, with its receipt handle), a changed invisible time brings it back at
//! the new time, a pop that finds nothing waits for the next message, and an orderly pop does not
//! hand out a queue's next message while an earlier one is in flight.

use std::time::{Duration, Instant};

use broker::pop::extra_info::{parse_msg_offset_info, parse_start_offset_info, ExtraInfo};
use broker::pop::headers::{AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, PopMessageRequestHeader, PopMessageResponseHeader};
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use store::message::record::{decode_record, RecordAt};

mod common;

use common::*;

fn pop_request(topic_name: &str, queue: i32, invisible_ms: i64, poll_ms: i64, order: bool) -> RemotingCommand {
    let h = PopMessageRequestHeader {
        consumer_group: group("pg-c"),
        topic: topic(topic_name),
        queue_id: queue,
        max_msg_nums: 32,
        invisible_time: invisible_ms,
        poll_time: poll_ms,
        born_time: remoting::clock::now_ms(),
        init_mode: 0,
        exp_type: Some("TAG".into()),
        exp: Some("*".into()),
        order: Some(order),
        attempt_id: None,
    };
    RemotingCommand::request_with_header(RequestCode::POP_MESSAGE, &h)
}

/// A popped message: body, its receipt handle as the Java client builds it, queue and offset.
#[derive(Debug, Clone)]
struct Popped {
    body: String,
    handle: String,
    queue_id: i32,
    offset: i64,
    reconsume: i32,
}

/// The messages of a pop response with their handles, as `MQClientAPIImpl.processPopResponse`
/// makes them: a message from the retry topic carries its own (`POP_CK`).
fn popped(r: &RemotingCommand, topic_name: &str) -> Vec<Popped> {
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    let starts = parse_start_offset_info(h.start_offset_info.as_deref().unwrap_or("")).unwrap();
    let _ = parse_msg_offset_info(h.msg_offset_info.as_deref().unwrap_or("")).unwrap();
    let mut out = Vec::new();
    let mut rest = r.body_bytes();
    while !rest.is_empty() {
        let Ok(RecordAt::Record(m)) = decode_record(rest, false) else { panic!("bad record in pop body") };
        assert_eq!(m.topic, topic_name, "handed out under the popped topic");
        let handle = match m.property("POP_CK") {
            Some(ck) => ck.to_owned(),
            None => {
                let start = starts[&format!("0@{}", m.queue_id)];
                ExtraInfo::new(start, h.pop_time, h.invisible_time, h.revive_qid, m.topic, "broker-a", m.queue_id, Some(m.queue_offset)).to_string()
            }
        };
        out.push(Popped {
            body: String::from_utf8_lossy(m.body).into_owned(),
            handle,
            queue_id: m.queue_id,
            offset: m.queue_offset,
            reconsume: m.reconsume_times,
        });
        rest = &rest[m.store_size as usize..];
    }
    out
}

fn ack_request(topic_name: &str, p: &Popped) -> RemotingCommand {
    let h = AckMessageRequestHeader {
        consumer_group: group("pg-c"),
        topic: topic(topic_name),
        queue_id: p.queue_id,
        extra_info: p.handle.clone(),
        offset: p.offset,
    };
    RemotingCommand::request_with_header(RequestCode::ACK_MESSAGE, &h)
}

/// Pops (without waiting) until `n` messages came or `within` passes.
async fn pop_until(c: &RemotingClient, addr: &str, topic_name: &str, n: usize, invisible_ms: i64, within: Duration) -> Vec<Popped> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    loop {
        let r = c.invoke(addr, pop_request(topic_name, -1, invisible_ms, 0, false), TIMEOUT).await.unwrap();
        if r.code == 0 {
            got.extend(popped(&r, topic_name));
        } else {
            assert_eq!(r.response_code(), ResponseCode::POLLING_TIMEOUT, "{:?}", r.remark);
        }
        if got.len() >= n || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

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
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerName", "broker-a")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    for body in ["b0", "b1", "b2"] {
        let r = c.invoke(&addr, send("Batch", 0, body, ""), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0);
    }
    pull_found(&c, &addr, "Batch", 0, 2).await;
    let r = c.invoke(&addr, pop_request("Batch", 0, 3_000, 0, false), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    let got = popped(&r, "Batch");
    assert_eq!(got.len(), 3);
    let start = got[0].offset;
    // Bits 0 and 1 (BitSet.toByteArray() = [3], Base64 "Aw=="): b0 and b1 acked, b2 not.
    let body = format!(
        r#"{{"acks":[{{"b":"Aw==","c":"pg-c","it":3000,"pt":{},"q":0,"r":"0","rq":{},"so":{start},"t":"Batch"}}],"brokerName":"broker-a"}}"#,
        h.pop_time, h.revive_qid
    );
    let request = RemotingCommand::request(RequestCode::BATCH_ACK_MESSAGE).with_body(body.into_bytes());
    let r = c.invoke(&addr, request, TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let empty = RemotingCommand::request(RequestCode::BATCH_ACK_MESSAGE).with_body(br#"{"acks":[]}"#.to_vec());
    assert_eq!(c.invoke(&addr, empty, TIMEOUT).await.unwrap().response_code(), ResponseCode::NO_MESSAGE);
    let back = pop_until(&c, &addr, "Batch", 1, 60_000, Duration::from_secs(30)).await;
    assert_eq!(back.iter().map(|p| p.body.as_str()).collect::<Vec<_>>(), ["b2"]);
    assert!(pop_until(&c, &addr, "Batch", 1, 60_000, Duration::from_secs(6)).await.is_empty(), "the acked ones stay gone");
    broker.shutdown().await;
}
