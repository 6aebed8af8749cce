//! 5.x timer messages through the socket: admitted into the timer topic, released into their
//! real topic and queue at their time (never earlier), once, also across a restart and a crash.

use std::time::{Duration, Instant};

use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, ResponseCode};
use store::message::record::{decode_record, RecordAt};

mod common;

use common::*;

/// (body, properties) of each message in a pull response.
fn messages(response: &RemotingCommand) -> Vec<(String, indexmap::IndexMap<String, String>, i64)> {
    let mut out = Vec::new();
    let mut rest = response.body_bytes();
    while !rest.is_empty() {
        let Ok(RecordAt::Record(r)) = decode_record(rest, true) else { panic!("bad record in pull body") };
        out.push((String::from_utf8_lossy(r.body).into_owned(), store::message::properties::parse(r.properties), r.store_timestamp));
        rest = &rest[r.store_size as usize..];
    }
    out
}

/// Pulls `topic` queue `queue` from offset 0 until `n` messages are there or `within` passes.
async fn wait_for(
    c: &RemotingClient,
    addr: &str,
    topic: &str,
    queue: i32,
    n: usize,
    within: Duration,
) -> Vec<(String, indexmap::IndexMap<String, String>, i64)> {
    let deadline = Instant::now() + within;
    loop {
        let r = c.invoke(addr, pull(topic, queue, 0, 0), TIMEOUT).await.unwrap();
        let got = if r.code == 0 { messages(&r) } else { Vec::new() };
        if got.len() >= n || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn timer_props(key: &str, value: &str, uniq: &str) -> String {
    format!("{key}\u{1}{value}\u{2}UNIQ_KEY\u{1}{uniq}\u{2}WAIT\u{1}true\u{2}")
}

#[tokio::test(flavor = "multi_thread")]
async fn timer_messages_arrive_at_their_time_in_their_queue_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let sent_at = remoting::clock::now_ms();
    let at = (sent_at + 2500).to_string();
    for (i, (key, value)) in [("TIMER_DELIVER_MS", at.as_str()), ("TIMER_DELAY_SEC", "2"), ("TIMER_DELAY_MS", "2500")].iter().enumerate() {
        let r = c.invoke(&addr, send("Later", 1, &format!("m{i}"), &timer_props(key, value, &format!("U{i}"))), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0, "{key}: {:?}", r.remark);
    }
    // Nothing before its time.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(wait_for(&c, &addr, "Later", 1, 1, Duration::ZERO).await.is_empty(), "released early");
    let got = wait_for(&c, &addr, "Later", 1, 3, Duration::from_secs(8)).await;
    assert_eq!(got.len(), 3, "all three released");
    for (body, props, stored) in &got {
        let due: i64 = props["TIMER_OUT_MS"].parse().unwrap();
        assert!(*stored >= due, "{body} stored at {stored}, before its slot {due}");
        assert!(*stored >= sent_at + 2000, "{body} released early");
        assert!(props.contains_key("TIMER_ENQUEUE_MS") && props.contains_key("TIMER_DEQUEUE_MS"));
        assert!(!props.contains_key("REAL_TOPIC") && !props.contains_key("REAL_QID"));
    }
    // Once: no more arrive.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(wait_for(&c, &addr, "Later", 1, 4, Duration::ZERO).await.len(), 3);
    // Beyond three days: Java's refusal.
    let far = (3 * 24 * 3600 + 10).to_string();
    let r = c.invoke(&addr, send("Later", 1, "far", &timer_props("TIMER_DELAY_SEC", &far, "F")), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::MESSAGE_ILLEGAL);
    assert_eq!(
        r.remark.as_deref(),
        Some("timer message illegal, the delay time should not be bigger than the max delay 259200000ms; or if set del msg, the delay time should be bigger than the current time")
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pending_timers_survive_a_restart_and_fire_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let sent_at = remoting::clock::now_ms();
    for i in 0..20 {
        let r = c.invoke(&addr, send("Restarted", 0, &format!("r{i}"), &timer_props("TIMER_DELAY_MS", "4000", &format!("R{i}"))), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    broker.shutdown().await;
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let got = wait_for(&c, &addr, "Restarted", 0, 20, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|(_, _, stored)| *stored >= sent_at + 3000));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(wait_for(&c, &addr, "Restarted", 0, 21, Duration::ZERO).await.len(), 20, "released once");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recalled_timer_message_is_never_released() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("recallMessageEnable", "true")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let sent = c.invoke(&addr, send("Recalled", 0, "gone", &timer_props("TIMER_DELAY_SEC", "3", "RC1")), TIMEOUT).await.unwrap();
    assert_eq!(sent.code, 0, "{:?}", sent.remark);
    let kept = c.invoke(&addr, send("Recalled", 0, "kept", &timer_props("TIMER_DELAY_SEC", "3", "RC2")), TIMEOUT).await.unwrap();
    let handle = sent.ext("recallHandle").expect("a timer send answers with its recall handle").to_owned();
    assert!(kept.ext("recallHandle").is_some());
    let recall = raw(remoting::RequestCode::RECALL_MESSAGE, &[("topic", "Recalled"), ("recallHandle", &handle), ("producerGroup", "pg")]);
    let r = c.invoke(&addr, recall, TIMEOUT).await.unwrap();
    assert_eq!((r.code, r.ext("msgId")), (0, Some("RC1")), "{:?}", r.remark);
    // A handle for another topic, and one that is not a handle.
    let wrong = raw(remoting::RequestCode::RECALL_MESSAGE, &[("topic", "Later"), ("recallHandle", &handle)]);
    assert_eq!(c.invoke(&addr, wrong, TIMEOUT).await.unwrap().response_code(), ResponseCode::TOPIC_NOT_EXIST);
    let junk = raw(remoting::RequestCode::RECALL_MESSAGE, &[("topic", "Recalled"), ("recallHandle", "!!")]);
    let r = c.invoke(&addr, junk, TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::ILLEGAL_OPERATION, Some("recall handle is invalid")));
    let got = wait_for(&c, &addr, "Recalled", 0, 2, Duration::from_secs(6)).await;
    let bodies: Vec<&str> = got.iter().map(|(b, _, _)| b.as_str()).collect();
    assert_eq!(bodies, vec!["kept"]);
    // The timer's checkpoint and counts, as Java answers them.
    let cp = c.invoke(&addr, RemotingCommand::request(remoting::RequestCode::GET_TIMER_CHECK_POINT), TIMEOUT).await.unwrap();
    assert_eq!((cp.code, cp.body_bytes().len()), (0, 56));
    let read_ms = i64::from_be_bytes(cp.body_bytes()[0..8].try_into().unwrap());
    assert!(read_ms > remoting::clock::now_ms() - 10_000, "the read time follows the clock: {read_ms}");
    let m = c.invoke(&addr, RemotingCommand::request(remoting::RequestCode::GET_TIMER_METRICS), TIMEOUT).await.unwrap();
    let json: serde_json::Value = serde_json::from_slice(m.body_bytes()).unwrap();
    assert_eq!(json["timingCount"]["Recalled"]["count"], 0, "{json}");
    // A deleted topic's count goes with it (Java's `removeTimingCount`).
    let delete = raw(remoting::RequestCode::DELETE_TOPIC_IN_BROKER, &[("topic", "Recalled")]);
    assert_eq!(c.invoke(&addr, delete, TIMEOUT).await.unwrap().code, 0);
    let m = c.invoke(&addr, RemotingCommand::request(remoting::RequestCode::GET_TIMER_METRICS), TIMEOUT).await.unwrap();
    let json: serde_json::Value = serde_json::from_slice(m.body_bytes()).unwrap();
    assert!(json["timingCount"].get("Recalled").is_none(), "{json}");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn recall_is_off_by_default_as_in_java() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let recall = raw(remoting::RequestCode::RECALL_MESSAGE, &[("topic", "Recalled"), ("recallHandle", "x")]);
    let r = c.invoke(&addr, recall, TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::NO_PERMISSION, Some("recall failed, operation is forbidden")));
    broker.shutdown().await;
}
