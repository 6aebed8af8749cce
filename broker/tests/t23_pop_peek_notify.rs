//! Pop's reads that hand nothing out, through the socket: PEEK_MESSAGE shows what a pop would
//! find without hiding it; NOTIFICATION says whether there is something to pop, waiting for an
//! arrival (on the topic, or on its pop retry topic when an unacked message is revived) up to its
//! poll time; POLLING_INFO counts the pops of a group waiting on a queue. Refusals are Java
//! 5.3.3's codes and remarks.

use std::time::{Duration, Instant};

use broker::pop::headers::{
    NotificationRequestHeader, NotificationResponseHeader, PeekMessageRequestHeader, PollingInfoRequestHeader, PollingInfoResponseHeader,
    PopMessageResponseHeader,
};
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

mod common;

use common::*;

const GROUP: &str = "peek-g";

fn peek(topic_name: &str, queue: i32, max: i32) -> RemotingCommand {
    let h = PeekMessageRequestHeader { topic: Some(topic_name.into()), queue_id: queue, max_msg_nums: max, consumer_group: Some(GROUP.into()) };
    RemotingCommand::request_with_header(RequestCode::PEEK_MESSAGE, &h)
}

fn notification(topic_name: &str, queue: i32, poll_ms: i64) -> RemotingCommand {
    let h = NotificationRequestHeader {
        consumer_group: Some(GROUP.into()),
        topic: Some(topic_name.into()),
        queue_id: queue,
        poll_time: poll_ms,
        born_time: remoting::clock::now_ms(),
        order: Some(false),
        attempt_id: None,
    };
    RemotingCommand::request_with_header(RequestCode::NOTIFICATION, &h)
}

fn polling_info(topic_name: &str, queue: i32) -> RemotingCommand {
    let h = PollingInfoRequestHeader { consumer_group: Some(GROUP.into()), topic: Some(topic_name.into()), queue_id: queue };
    RemotingCommand::request_with_header(RequestCode::POLLING_INFO, &h)
}

fn pop(topic_name: &str, invisible_ms: i64, poll_ms: i64) -> RemotingCommand {
    common::pop::pop_request_of(GROUP, topic_name, -1, invisible_ms, poll_ms, false)
}

fn has_msg(r: &RemotingCommand) -> (bool, bool) {
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let h: NotificationResponseHeader = r.decode_header().unwrap();
    (h.has_msg, h.polling_full)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_peek_shows_what_a_pop_would_find_without_hiding_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerName", "broker-a")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    for (queue, body) in [(0, "p1"), (0, "p2"), (1, "p3")] {
        let r = c.invoke(&addr, send("Peek", queue, body, ""), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    pull_found(&c, &addr, "Peek", 0, 1).await;
    pull_found(&c, &addr, "Peek", 1, 0).await;
    for _ in 0..2 {
        let r = c.invoke(&addr, peek("Peek", -1, 32), TIMEOUT).await.unwrap();
        assert_eq!((r.code, r.remark.as_deref()), (0, Some("FOUND")));
        let mut got: Vec<String> = bodies(&r).into_iter().map(|(_, b, _)| b).collect();
        got.sort();
        assert_eq!(got, ["p1", "p2", "p3"], "peeked again: a peek hides nothing");
        let h: PopMessageResponseHeader = r.decode_header().unwrap();
        assert_eq!((h.rest_num, h.pop_time, h.revive_qid), (3, 0, 0));
    }
    let r = c.invoke(&addr, peek("Peek", 0, 1), TIMEOUT).await.unwrap();
    assert_eq!(bodies(&r).into_iter().map(|(_, b, _)| b).collect::<Vec<_>>(), ["p1"]);
    // A pop takes them: nothing left to peek.
    let r = c.invoke(&addr, pop("Peek", 60_000, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let r = c.invoke(&addr, peek("Peek", -1, 32), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::PULL_NOT_FOUND, Some("NO_MESSAGE_IN_QUEUE")));
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.rest_num, 0);

    // Refusals, as Java's: the topic, the queue, the group, a negative count, a missing topic.
    let refused = [
        (peek("NoSuchTopic", -1, 1), ResponseCode::TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist, apply first please!"),
        (peek("bad/topic", -1, 1), ResponseCode::TOPIC_NOT_EXIST, "topic[bad/topic] not exist"),
        (peek("Peek", 99, 1), ResponseCode::INVALID_PARAMETER, "queueId[99] is illegal, topic:[Peek] topicConfig.readQueueNums:[4]"),
        (
            raw(RequestCode::PEEK_MESSAGE, &[("topic", "Peek"), ("queueId", "0"), ("maxMsgNums", "1"), ("consumerGroup", "bad/g")]),
            ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
            "subscription group [bad/g] does not exist",
        ),
        (peek("Peek", 0, -1), ResponseCode::SYSTEM_ERROR, "java.lang.IllegalArgumentException: Illegal Capacity: -1"),
        (raw(RequestCode::PEEK_MESSAGE, &[("queueId", "0"), ("consumerGroup", GROUP)]), ResponseCode::SYSTEM_ERROR, "java.lang.NullPointerException"),
        // Java 5.3.3 leaves a missing or unreadable number at 0: a peek of nothing.
        (raw(RequestCode::PEEK_MESSAGE, &[("topic", "Peek"), ("queueId", "x"), ("consumerGroup", GROUP)]), ResponseCode::PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE"),
    ];
    for (request, code, remark) in refused {
        let r = c.invoke(&addr, request, TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), code, "{:?}", r.remark);
        assert!(r.remark.as_deref().unwrap_or("").starts_with(remark), "{:?}", r.remark);
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_notification_waits_for_an_arrival_or_its_poll_time() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerName", "broker-a")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let r = c.invoke(&addr, send("Note", 0, "n1", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    pull_found(&c, &addr, "Note", 0, 0).await;
    assert_eq!(has_msg(&c.invoke(&addr, notification("Note", -1, 0), TIMEOUT).await.unwrap()), (true, false));
    assert_eq!(has_msg(&c.invoke(&addr, notification("Note", 0, 0), TIMEOUT).await.unwrap()), (true, false));
    assert_eq!(has_msg(&c.invoke(&addr, notification("Note", 1, 0), TIMEOUT).await.unwrap()), (false, false));
    // Popped (hidden): nothing to notify, at once without a poll time.
    let r = c.invoke(&addr, pop("Note", 60_000, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert_eq!(has_msg(&c.invoke(&addr, notification("Note", -1, 0), TIMEOUT).await.unwrap()), (false, false));

    // Parked: answered when a message arrives, before its poll time.
    let started = Instant::now();
    let waiting = {
        let addr = addr.clone();
        tokio::spawn(async move { RemotingClient::new(ClientConfig::default()).invoke(&addr, notification("Note", -1, 8_000), TIMEOUT).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = c.invoke(&addr, send("Note", 2, "n2", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0);
    assert_eq!(has_msg(&waiting.await.unwrap()), (true, false));
    assert!(started.elapsed() < Duration::from_secs(6), "woken by the arrival, not the poll time");
    let r = c.invoke(&addr, pop("Note", 60_000, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);

    // Nothing comes: hasMsg=false at the poll time.
    let started = Instant::now();
    assert_eq!(has_msg(&c.invoke(&addr, notification("Note", -1, 1_500), TIMEOUT).await.unwrap()), (false, false));
    assert!(started.elapsed() >= Duration::from_millis(1_200), "{:?}", started.elapsed());

    // Refusals carry the response header, as Java's.
    let r = c.invoke(&addr, notification("NoSuchTopic", -1, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert_eq!(r.ext("hasMsg"), Some("false"));
    let r = c.invoke(&addr, notification("Note", 7, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::INVALID_PARAMETER);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revived_message_wakes_a_notification_and_polling_info_counts_parked_pops() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerName", "broker-a")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let r = c.invoke(&addr, send("Back", 0, "b1", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    pull_found(&c, &addr, "Back", 0, 0).await;
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = c.invoke(&addr, pop("Back", 1_000, 0), TIMEOUT).await.unwrap();
        if r.code == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "never popped: {:?}", r.remark);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Not acked: revived into the pop retry topic after its second, which wakes the notification.
    let started = Instant::now();
    let r = c.invoke(&addr, notification("Back", -1, 20_000), Duration::from_secs(25)).await.unwrap();
    assert_eq!(has_msg(&r), (true, false));
    assert!(started.elapsed() < Duration::from_secs(18), "woken by the revive, not the poll time: {:?}", started.elapsed());
    let r = c.invoke(&addr, pop("Back", 60_000, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);

    // A pop parked on the topic's queue -1 counts there, for its group only.
    let count = |r: RemotingCommand| {
        assert_eq!(r.code, 0, "{:?}", r.remark);
        r.decode_header::<PollingInfoResponseHeader>().unwrap().polling_num
    };
    assert_eq!(count(c.invoke(&addr, polling_info("Back", -1), TIMEOUT).await.unwrap()), 0);
    let parked = {
        let addr = addr.clone();
        tokio::spawn(async move { RemotingClient::new(ClientConfig::default()).invoke(&addr, pop("Back", 60_000, 3_000), TIMEOUT).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(count(c.invoke(&addr, polling_info("Back", -1), TIMEOUT).await.unwrap()), 1);
    assert_eq!(count(c.invoke(&addr, polling_info("Back", -7), TIMEOUT).await.unwrap()), 1, "a negative queue is -1");
    assert_eq!(count(c.invoke(&addr, polling_info("Back", 0), TIMEOUT).await.unwrap()), 0);
    let other = PollingInfoRequestHeader { consumer_group: Some("other-g".into()), topic: Some("Back".into()), queue_id: -1 };
    let r = c.invoke(&addr, RemotingCommand::request_with_header(RequestCode::POLLING_INFO, &other), TIMEOUT).await.unwrap();
    assert_eq!(count(r), 0);
    assert_eq!(parked.await.unwrap().response_code(), ResponseCode::POLLING_TIMEOUT);
    assert_eq!(count(c.invoke(&addr, polling_info("Back", -1), TIMEOUT).await.unwrap()), 0);
    let r = c.invoke(&addr, polling_info("Back", 4), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::INVALID_PARAMETER);
    assert_eq!(r.ext("pollingNum"), Some("0"));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn polling_info_answers_while_a_raw_pop_waits() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerName", "broker-a")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let create = [
        ("topic", "PeekEmpty"),
        ("defaultTopic", "TBW102"),
        ("readQueueNums", "4"),
        ("writeQueueNums", "4"),
        ("perm", "6"),
        ("topicFilterType", "SINGLE_TAG"),
        ("order", "false"),
    ];
    let r = c.invoke(&addr, raw(RequestCode::UPDATE_AND_CREATE_TOPIC, &create), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let born = remoting::clock::now_ms().to_string();
    let pop = [
        ("consumerGroup", "PeekG"),
        ("topic", "PeekEmpty"),
        ("queueId", "-1"),
        ("maxMsgNums", "8"),
        ("invisibleTime", "30000"),
        ("pollTime", "3000"),
        ("initMode", "0"),
        ("expType", "TAG"),
        ("exp", "*"),
        ("bornTime", born.as_str()),
    ];
    let request = raw(RequestCode::POP_MESSAGE, &pop);
    let parked = {
        let addr = addr.clone();
        tokio::spawn(async move { RemotingClient::new(ClientConfig::default()).invoke(&addr, request, TIMEOUT).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    let info = raw(RequestCode::POLLING_INFO, &[("topic", "PeekEmpty"), ("queueId", "-1"), ("consumerGroup", "PeekG")]);
    let r = c.invoke(&addr, info, Duration::from_secs(5)).await.unwrap();
    assert_eq!((r.code, r.ext("pollingNum")), (0, Some("1")), "{:?}", r.remark);
    assert_eq!(parked.await.unwrap().response_code(), ResponseCode::POLLING_TIMEOUT);
    broker.shutdown().await;
}
