//! VIEW_BROKER_STATS_DATA and GET_BROKER_CONSUME_STATS through the broker's socket: what was sent
//! and pulled shows in the minute window after the next 10 s sample, with Java's bodies.

mod common;

use std::time::{Duration, Instant};

use common::*;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RequestCode, ResponseCode};

async fn stats(c: &RemotingClient, addr: &str, name: &str, key: &str) -> (ResponseCode, serde_json::Value, Option<String>) {
    let r = c.invoke(addr, raw(RequestCode::VIEW_BROKER_STATS_DATA, &[("statsName", name), ("statsKey", key)]), TIMEOUT).await.unwrap();
    (r.response_code(), serde_json::from_slice(r.body_bytes()).unwrap_or_default(), r.remark.clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn puts_and_gets_are_counted_per_topic_and_group_in_javas_windows() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    for i in 0..5 {
        let r = c.invoke(&addr, send("StatsTopic", 0, &format!("m{i}"), ""), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    // Dispatch runs behind the appends: pull until all five are there (each pull is counted).
    let mut got = 0;
    while got < 5 {
        got += bodies(&pull_found(&c, &addr, "StatsTopic", 0, got as i64).await).len();
    }
    assert_eq!(got, 5);
    let commit = raw(RequestCode::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", "cg"), ("topic", "StatsTopic"), ("queueId", "0"), ("commitOffset", "3")]);
    assert_eq!(c.invoke(&addr, commit, TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);

    // An item that counted nothing does not exist, as in Java.
    let (code, _, remark) = stats(&c, &addr, "TOPIC_PUT_NUMS", "NoSuchTopic").await;
    assert_eq!((code, remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist")));
    let (code, _, _) = stats(&c, &addr, "NO_SUCH_STATS", "StatsTopic").await;
    assert_eq!(code, ResponseCode::SYSTEM_ERROR);

    // Within one sampling period the minute window has the counts.
    let deadline = Instant::now() + Duration::from_secs(25);
    let puts = loop {
        let (code, body, remark) = stats(&c, &addr, "TOPIC_PUT_NUMS", "StatsTopic").await;
        assert_eq!(code, ResponseCode::SUCCESS, "{remark:?}");
        if body["statsMinute"]["sum"] == 5 {
            break body;
        }
        assert!(Instant::now() < deadline, "never sampled: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(puts["statsMinute"]["tps"].as_f64().unwrap() > 0.0, "{puts}");
    assert_eq!(puts["statsMinute"]["avgpt"], 1.0, "one message per call: {puts}");
    // As Java: the hour and day windows were sampled at start, before the item existed.
    assert_eq!((puts["statsHour"]["sum"].as_u64(), puts["statsDay"]["sum"].as_u64()), (Some(0), Some(0)), "{puts}");
    let (_, size, _) = stats(&c, &addr, "TOPIC_PUT_SIZE", "StatsTopic").await;
    assert!(size["statsMinute"]["sum"].as_u64().unwrap() > 5 * 100, "stored bytes: {size}");
    let (_, gets, _) = stats(&c, &addr, "GROUP_GET_NUMS", "StatsTopic@cg").await;
    assert_eq!(gets["statsMinute"]["sum"], 5, "{gets}");
    let (_, broker_puts, _) = stats(&c, &addr, "BROKER_PUT_NUMS", "DefaultCluster").await;
    assert_eq!(broker_puts["statsMinute"]["sum"], 5, "{broker_puts}");

    // GET_BROKER_CONSUME_STATS: every group, with its topics' write queues and the total diff.
    let r = c.invoke(&addr, raw(RequestCode::GET_BROKER_CONSUME_STATS, &[("isOrder", "false")]), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let text = String::from_utf8_lossy(r.body_bytes()).into_owned();
    // Its map keys are MessageQueue objects, as fastjson writes them: not JSON a serde reader takes.
    // The registered address (brokerIP1:listenPort; this test listens on port 0).
    assert!(text.starts_with(r#"{"brokerAddr":"127.0.0.1:"#) && text.contains(r#"","consumeStatsList":["#), "{text}");
    assert!(text.ends_with(r#"],"totalDiff":2}"#), "{text}");
    assert!(text.contains(r#"{"cg":[{"consumeTps":"#) && !text.contains(r#""consumeTps":0.0,"offsetTable":{{"brokerName":"broker"#), "{text}");
    assert!(text.contains(r#"{"brokerName":"#) && text.contains(r#""queueId":0,"topic":"StatsTopic"}:{"brokerOffset":5,"consumerOffset":3,"#), "{text}");
    // Without isOrder the header is refused, as Java's @CFNotNull field.
    let r = c.invoke(&addr, raw(RequestCode::GET_BROKER_CONSUME_STATS, &[]), TIMEOUT).await.unwrap();
    assert_ne!(r.response_code(), ResponseCode::SUCCESS);
    broker.shutdown().await;
}
