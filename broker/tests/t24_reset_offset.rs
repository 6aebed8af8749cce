//! 5.x's server-side offset reset (`useServerSideResetOffset`, true by default as in Java 5.3.3):
//! INVOKE_BROKER_TO_RESET_OFFSET sets a group's offsets on the broker even when it never committed
//! one and no client is online; each queue's next pull answers OFFSET_MOVED to its reset offset,
//! once, and a client's commit before that is ignored. With the key false, 4.9.7's path.

use remoting::client::{ClientConfig, RemotingClient};
use remoting::protocol::broker::{QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

mod common;

use common::*;

fn reset(topic_name: &str, group_name: &str, timestamp: i64) -> RemotingCommand {
    let ts = timestamp.to_string();
    raw(RequestCode::INVOKE_BROKER_TO_RESET_OFFSET, &[("topic", topic_name), ("group", group_name), ("timestamp", &ts), ("isForce", "true")])
}

async fn committed(c: &RemotingClient, addr: &str, queue: i32) -> Option<i64> {
    let h = QueryConsumerOffsetRequestHeader { consumer_group: group("rg"), topic: topic("R"), queue_id: queue, set_zero_if_not_found: Some(false) };
    let r = c.invoke(addr, RemotingCommand::request_with_header(RequestCode::QUERY_CONSUMER_OFFSET, &h), TIMEOUT).await.unwrap();
    (r.code == 0).then(|| r.ext_fields.as_ref().and_then(|e| e.get("offset")).and_then(|o| o.parse().ok())).flatten()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_that_never_committed_is_reset_on_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    for i in 0..3 {
        assert_eq!(c.invoke(&addr, send("R", 0, &format!("m{i}"), ""), TIMEOUT).await.unwrap().code, 0);
    }
    pull_found(&c, &addr, "R", 0, 2).await;
    // The group exists (a pull created it) and never committed.
    let _ = c.invoke(&addr, pull_as("rg", "R", 0, 0, 0), TIMEOUT).await.unwrap();
    assert_eq!(committed(&c, &addr, 0).await, None);

    let r = c.invoke(&addr, reset("R", "rg", -1), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let body = String::from_utf8_lossy(r.body_bytes()).into_owned();
    assert!(body.contains(r#""queueId":0,"topic":"R"}:3"#), "{body}");
    assert_eq!(committed(&c, &addr, 0).await, Some(3), "skipAccumulatedMessage: at the queue's end");

    // A client's commit before its next pull does not undo the reset.
    let h = UpdateConsumerOffsetRequestHeader { consumer_group: group("rg"), topic: topic("R"), queue_id: 0, commit_offset: 1 };
    let r = c.invoke(&addr, RemotingCommand::request_with_header(RequestCode::UPDATE_CONSUMER_OFFSET, &h), TIMEOUT).await.unwrap();
    assert_eq!((r.code, r.remark.as_deref()), (0, Some("Offset has been previously reset")));
    assert_eq!(committed(&c, &addr, 0).await, Some(3));
    // The next pull is told, once.
    let r = c.invoke(&addr, pull_as("rg", "R", 0, 0, 0), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::PULL_OFFSET_MOVED, Some("OFFSET_RESET")));
    assert_eq!(r.ext_fields.as_ref().and_then(|e| e.get("nextBeginOffset")), Some("3"));
    assert_eq!(c.invoke(&addr, pull_as("rg", "R", 0, 0, 0), TIMEOUT).await.unwrap().code, 0, "then pulls as before");

    // Back to the first message by time; an unknown group or topic is refused as Java's.
    let r = c.invoke(&addr, reset("R", "rg", 0), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert_eq!(committed(&c, &addr, 0).await, Some(0));
    let r = c.invoke(&addr, reset("R", "nobody", -1), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, Some("Group nobody does not exist")));
    let r = c.invoke(&addr, reset("Nowhere", "rg", -1), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::TOPIC_NOT_EXIST, Some("Topic Nowhere does not exist")));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_key_false_the_clients_are_asked_as_in_4_9() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("useServerSideResetOffset", "false")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    assert_eq!(c.invoke(&addr, send("R", 0, "m", ""), TIMEOUT).await.unwrap().code, 0);
    pull_found(&c, &addr, "R", 0, 0).await;
    let _ = c.invoke(&addr, pull_as("rg", "R", 0, 0, 0), TIMEOUT).await.unwrap();
    let r = c.invoke(&addr, reset("R", "rg", -1), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("THe consumer group <rg> not exist")));
    broker.shutdown().await;
}
