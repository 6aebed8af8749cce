//! The broker through its socket, driven by our remoting client the way the Java client does.

use std::time::{Duration, Instant};

use broker::config::apply_properties;
use broker::controller::BrokerController;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::protocol::broker::*;
use remoting::{RemotingCommand, RequestCode, ResponseCode};

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn sends_are_pulled_back_and_a_parked_pull_wakes_on_arrival() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let r = c.invoke(&addr, send("Orders", 1, "hello", "TAGS\u{1}A\u{2}"), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert_eq!((r.ext("queueId"), r.ext("queueOffset"), r.ext("MSG_REGION")), (Some("1"), Some("0"), Some("DefaultRegion")));
    assert_eq!(r.ext("msgId").map(str::len), Some(32));

    let got = pull_found(&c, &addr, "Orders", 1, 0).await;
    assert_eq!((got.code, got.ext("nextBeginOffset"), got.ext("maxOffset")), (0, Some("1"), Some("1")));
    assert_eq!(bodies(&got)[0].1, "hello");

    // Nothing at offset 1 yet: the pull is parked, then answered when a message arrives.
    let channel = c.channel(&addr).await.unwrap();
    let parked = tokio::spawn(async move { channel.invoke(pull("Orders", 1, 1, 5000), TIMEOUT).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!parked.is_finished(), "a pull with nothing to return must be held");
    let started = Instant::now();
    c.invoke(&addr, send("Orders", 1, "second", ""), TIMEOUT).await.unwrap();
    let woken = parked.await.unwrap().unwrap();
    assert_eq!(woken.code, 0);
    assert_eq!(bodies(&woken)[0].1, "second");
    assert!(started.elapsed() < Duration::from_secs(2), "woken by the arrival, not the timeout");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parked_pull_times_out_with_pull_not_found_at_the_same_offset() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    c.invoke(&addr, send("Quiet", 0, "x", ""), TIMEOUT).await.unwrap();
    pull_found(&c, &addr, "Quiet", 0, 0).await;
    let r = c.invoke(&addr, pull("Quiet", 0, 1, 300), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.ext("nextBeginOffset")), (ResponseCode::PULL_NOT_FOUND, Some("1")));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delayed_message_arrives_no_earlier_than_its_level() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let sent = Instant::now();
    let r = c.invoke(&addr, send("Later", 0, "delayed", "DELAY\u{1}1\u{2}"), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0);
    loop {
        let got = c.invoke(&addr, pull("Later", 0, 0, 0), TIMEOUT).await.unwrap();
        if got.code == 0 {
            assert!(sent.elapsed() >= Duration::from_millis(1000), "delivered after {:?}", sent.elapsed());
            assert_eq!(bodies(&got)[0].1, "delayed");
            break;
        }
        assert!(sent.elapsed() < TIMEOUT, "never delivered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn send_back_goes_to_the_retry_topic_and_then_to_the_dlq() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let r = c.invoke(&addr, send("Work", 0, "job", ""), TIMEOUT).await.unwrap();
    let offset = store::message::decode_offset_message_id(r.ext("msgId").unwrap()).unwrap().1;
    // delayLevel -1 sends straight to the DLQ; level 1 to the retry topic after 1 s.
    let back = |delay: i32| {
        let h = ConsumerSendMsgBackRequestHeader {
            offset,
            group: group("workers"),
            delay_level: delay,
            origin_msg_id: None,
            origin_topic: None,
            unit_mode: None,
            max_reconsume_times: Some(16),
        };
        RemotingCommand::request_with_header(RequestCode::CONSUMER_SEND_MSG_BACK, &h)
    };
    assert_eq!(c.invoke(&addr, back(1), TIMEOUT).await.unwrap().code, 0);
    assert_eq!(c.invoke(&addr, back(-1), TIMEOUT).await.unwrap().code, 0);
    let dlq = pull_found(&c, &addr, "%DLQ%workers", 0, 0).await;
    assert_eq!(bodies(&dlq)[0], ("%DLQ%workers".to_owned(), "job".to_owned(), 1));
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let retry = c.invoke(&addr, pull("%RETRY%workers", 0, 0, 0), TIMEOUT).await.unwrap();
        if retry.code == 0 {
            assert_eq!(bodies(&retry)[0], ("%RETRY%workers".to_owned(), "job".to_owned(), 1));
            break;
        }
        assert!(Instant::now() < deadline, "retry never delivered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_javas_codes_and_remarks() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("autoCreateTopicEnable", "false")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let r = c.invoke(&addr, send("Unknown", 0, "x", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert!(r.remark.as_deref().unwrap().starts_with("topic[Unknown] not exist, apply first please!"));
    assert_eq!(r.ext("MSG_REGION"), Some("DefaultRegion"), "send errors still carry the region");
    let r = c.invoke(&addr, send("SELF_TEST_TOPIC", 0, "x", ""), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::NO_PERMISSION, Some("Sending message to topic[SELF_TEST_TOPIC] is forbidden.")));
    let r = c.invoke(&addr, send("BenchmarkTest", 1024, "x", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(r.remark.unwrap().starts_with("request queueId[1024] is illegal"));
    let big = "x".repeat(4 * 1024 * 1024 + 1);
    let r = c.invoke(&addr, send("BenchmarkTest", 0, &big, ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::MESSAGE_ILLEGAL);
    let r = c.invoke(&addr, pull("SELF_TEST_TOPIC", 7, 0, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    let r = c.invoke(&addr, pull("SELF_TEST_TOPIC", 0, -5, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    let r = c.invoke(&addr, pull("SELF_TEST_TOPIC", 0, 99, 0), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.ext("nextBeginOffset")), (ResponseCode::PULL_OFFSET_MOVED, Some("0")));
    let r = c.invoke(&addr, RemotingCommand::request(RequestCode::PULL_MESSAGE), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("the custom field <consumerGroup> is null")));
    let r = c.invoke(&addr, RemotingCommand::request(RequestCode(9999)), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::REQUEST_CODE_NOT_SUPPORTED);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_locks_go_to_one_client_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let lock = |client: &str| {
        let body = format!(r#"{{"clientId":"{client}","consumerGroup":"og","mqSet":[{{"brokerName":"b","queueId":0,"topic":"T"}}]}}"#);
        RemotingCommand::request(RequestCode::LOCK_BATCH_MQ).with_body(body.into_bytes())
    };
    let first = c.invoke(&addr, lock("c1"), TIMEOUT).await.unwrap();
    assert!(String::from_utf8_lossy(first.body_bytes()).contains(r#""queueId":0"#));
    let second = c.invoke(&addr, lock("c2"), TIMEOUT).await.unwrap();
    assert_eq!(String::from_utf8_lossy(second.body_bytes()), r#"{"lockOKMQSet":[]}"#);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_master_without_a_slave_stores_and_answers_slave_not_available() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerRole", "SYNC_MASTER")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let r = c.invoke(&addr, send("Replicated", 0, "kept", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SLAVE_NOT_AVAILABLE);
    assert!(r.ext("msgId").is_some() && r.ext("queueOffset") == Some("0"), "the client reads the result as stored");
    let deadline = Instant::now() + TIMEOUT;
    while c.invoke(&addr, pull("Replicated", 0, 0, 0), TIMEOUT).await.unwrap().code != 0 {
        assert!(Instant::now() < deadline, "the message was not stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_flush_answers_many_sends_in_flight_on_one_send_thread() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("flushDiskType", "SYNC_FLUSH"), ("sendMessageThreadPoolNums", "1")]).await;
    let addr = broker.local_addr().to_string();
    let c = std::sync::Arc::new(RemotingClient::new(ClientConfig::default()));
    // The answers come from the flush service, so 64 sends in flight need no 64 threads.
    let sends: Vec<_> = (0..64)
        .map(|i| {
            let (c, addr) = (c.clone(), addr.clone());
            tokio::spawn(async move { c.invoke(&addr, send("Durable", 0, &format!("m{i}"), ""), TIMEOUT).await })
        })
        .collect();
    let mut offsets = Vec::new();
    for s in sends {
        let r = s.await.unwrap().unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
        assert_eq!(r.ext("MSG_REGION"), Some("DefaultRegion"));
        offsets.push(r.ext("queueOffset").unwrap().parse::<i64>().unwrap());
    }
    offsets.sort_unstable();
    assert_eq!(offsets, (0..64).collect::<Vec<_>>());
    // A oneway send is stored and gets no answer.
    c.invoke_oneway(&addr, send("Durable", 0, "quiet", "")).await.unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while c.invoke(&addr, pull("Durable", 0, 64, 0), TIMEOUT).await.unwrap().code != 0 {
        assert!(Instant::now() < deadline, "the oneway message was not stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn features_not_built_yet_refuse_to_start_rather_than_run_without_them() {
    // ACL is not built; DLedger is, but not without a valid member id.
    for (key, named) in [("aclEnable", "aclEnable"), ("enableDLegerCommitLog", "dLegerSelfId")] {
        let dir = tempfile::tempdir().unwrap();
        let props: indexmap::IndexMap<String, String> = [
            ("brokerIP1", "127.0.0.1"),
            ("bindAddress", "127.0.0.1"),
            ("listenPort", "0"),
            ("storePathRootDir", dir.path().to_str().unwrap()),
            ("namesrvAddr", ""),
            (key, "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (broker, store, _) = apply_properties(&props).unwrap();
        let refused = BrokerController::start(broker, store).await.err().map(|e| e.to_string());
        assert!(refused.as_deref().is_some_and(|e| e.contains(named)), "{key}=true: {refused:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slave_can_copy_the_consumer_and_delay_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    assert_eq!(c.invoke(&addr, send("Copied", 0, "m", ""), TIMEOUT).await.unwrap().code, 0);
    let h = UpdateConsumerOffsetRequestHeader { consumer_group: group("readers"), topic: topic("Copied"), queue_id: 0, commit_offset: 1 };
    let r = c.invoke(&addr, RemotingCommand::request_with_header(RequestCode::UPDATE_CONSUMER_OFFSET, &h), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);

    let all = c.invoke(&addr, RemotingCommand::request(RequestCode::GET_ALL_CONSUMER_OFFSET), TIMEOUT).await.unwrap();
    assert_eq!(all.code, 0, "{:?}", all.remark);
    let body = String::from_utf8(all.body.unwrap().to_vec()).unwrap();
    // fastjson's compact form, integer queue ids as bare keys, as a Java slave parses it
    assert!(body.contains(r#""offsetTable":{"Copied@readers":{0:1}}"#), "{body}");

    let delay = c.invoke(&addr, RemotingCommand::request(RequestCode::GET_ALL_DELAY_OFFSET), TIMEOUT).await.unwrap();
    assert_eq!(delay.code, 0, "{:?}", delay.remark);
    let body = String::from_utf8(delay.body.unwrap().to_vec()).unwrap();
    assert!(body.starts_with('{') && body.contains(r#""offsetTable":{"#), "{body}");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_group_is_set_to_zero_only_on_a_young_queue_with_a_first_message_as_5_3_3() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let query = |extra: &[(&'static str, &'static str)]| {
        let mut fields = vec![("consumerGroup", "new_group"), ("topic", "YoungTopic"), ("queueId", "0")];
        fields.extend_from_slice(extra);
        raw(RequestCode::QUERY_CONSUMER_OFFSET, &fields)
    };
    // An empty queue: the client decides where to start.
    let r = c.invoke(&addr, query(&[]), TIMEOUT).await.unwrap();
    assert_eq!(
        (r.response_code(), r.remark.as_deref()),
        (ResponseCode::QUERY_NOT_FOUND, Some("Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"))
    );
    assert_eq!(c.invoke(&addr, send("YoungTopic", 0, "first", ""), TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    pull_found(&c, &addr, "YoungTopic", 0, 0).await;
    let r = c.invoke(&addr, query(&[]), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.ext("offset")), (ResponseCode::SUCCESS, Some("0")), "{:?}", r.remark);
    let r = c.invoke(&addr, query(&[("setZeroIfNotFound", "false")]), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::QUERY_NOT_FOUND, Some("Not found, do not set to zero, maybe this group boot first")));
    broker.shutdown().await;
}
