//! What an attacker or a careless client sends, through the socket: names that try to leave the
//! store, sends to the broker's own topics, unbounded queue counts, timer messages, too many
//! parked pulls, a transaction whose producer went away.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::transaction::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};
use remoting::client::{ClientConfig, RemotingClient};
use remoting::connection::{InFlight, InboundHandler};
use remoting::protocol::broker::SendMessageRequestHeader;
use remoting::server::Channel;
use remoting::{RemotingCommand, RequestCode, ResponseCode};

mod common;

use common::*;

/// Names that would leave `consumequeue/` (or break a file's keys) if they reached a path.
fn bad_names() -> Vec<String> {
    vec!["../../../victim_dir".into(), "/tmp/absolute".into(), "..".into(), "a\0b".into(), "g@x".into(), "x".repeat(256), "%DLQ%../../../victim_dir".into()]
}

/// Every file and folder under `root`, except inside the store.
fn tree_outside(root: &Path, store: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.starts_with(store) {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                stack.push(path.clone());
            }
            out.insert(path);
        }
    }
    out
}

/// Every folder of `consumequeue/`, which must all be valid topic names.
fn queue_folders(store: &Path) -> Vec<String> {
    std::fs::read_dir(store.join("consumequeue")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
}

fn heartbeat(client_id: &str, consumer_group: &str, producer_group: &str) -> RemotingCommand {
    let consumers = if consumer_group.is_empty() {
        String::new()
    } else {
        let group = serde_json::to_string(consumer_group).unwrap();
        format!(
            r#"{{"groupName":{group},"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{{"topic":"Safe","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG"}}],"unitMode":false}}"#
        )
    };
    let producers = if producer_group.is_empty() { String::new() } else { format!(r#"{{"groupName":"{producer_group}"}}"#) };
    let body = format!(r#"{{"clientID":"{client_id}","consumerDataSet":[{consumers}],"producerDataSet":[{producers}]}}"#);
    RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body.into_bytes())
}

#[tokio::test(flavor = "multi_thread")]
async fn no_topic_or_group_name_from_a_request_reaches_a_path_outside_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // What the probe deleted: a folder beside the store that the broker may write.
    std::fs::create_dir_all(dir.path().join("victim_dir")).unwrap();
    std::fs::write(dir.path().join("victim_dir").join("keep"), b"precious").unwrap();
    let broker = start(&store, &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let before = tree_outside(dir.path(), &store);
    let sent = c.invoke(&addr, send("Safe", 0, "m", ""), TIMEOUT).await.unwrap();
    assert_eq!(sent.code, 0);
    let offset = store::message::decode_offset_message_id(sent.ext("msgId").unwrap()).unwrap().1.to_string();

    for name in bad_names() {
        let n = name.as_str();
        let topic_requests = vec![
            raw(RequestCode::SEND_MESSAGE_V2, &[("a", "pg"), ("b", n), ("c", "TBW102"), ("d", "4"), ("e", "0"), ("f", "0"), ("g", "1"), ("h", "0")])
                .with_body(b"x".to_vec()),
            raw(
                RequestCode::SEND_MESSAGE,
                &[
                    ("producerGroup", "pg"),
                    ("topic", n),
                    ("defaultTopic", "TBW102"),
                    ("defaultTopicQueueNums", "4"),
                    ("queueId", "0"),
                    ("sysFlag", "0"),
                    ("bornTimestamp", "1"),
                    ("flag", "0"),
                ],
            )
            .with_body(b"x".to_vec()),
            raw(
                RequestCode::PULL_MESSAGE,
                &[
                    ("consumerGroup", "cg"),
                    ("topic", n),
                    ("queueId", "0"),
                    ("queueOffset", "0"),
                    ("maxMsgNums", "1"),
                    ("sysFlag", "4"),
                    ("commitOffset", "0"),
                    ("suspendTimeoutMillis", "0"),
                    ("subVersion", "0"),
                ],
            ),
            raw(RequestCode::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", "cg"), ("topic", n), ("queueId", "0"), ("commitOffset", "1")]),
            raw(RequestCode::QUERY_CONSUMER_OFFSET, &[("consumerGroup", "cg"), ("topic", n), ("queueId", "0")]),
            raw(RequestCode::GET_MAX_OFFSET, &[("topic", n), ("queueId", "0")]),
            raw(RequestCode::SEARCH_OFFSET_BY_TIMESTAMP, &[("topic", n), ("queueId", "0"), ("timestamp", "0")]),
            raw(RequestCode::QUERY_MESSAGE, &[("topic", n), ("key", "k"), ("maxNum", "1"), ("beginTimestamp", "0"), ("endTimestamp", "1")]),
            raw(
                RequestCode::UPDATE_AND_CREATE_TOPIC,
                &[
                    ("topic", n),
                    ("defaultTopic", "TBW102"),
                    ("readQueueNums", "1"),
                    ("writeQueueNums", "1"),
                    ("perm", "6"),
                    ("topicFilterType", "SINGLE_TAG"),
                    ("order", "false"),
                ],
            ),
            raw(RequestCode::DELETE_TOPIC_IN_BROKER, &[("topic", n)]),
            raw(RequestCode::GET_TOPIC_STATS_INFO, &[("topic", n)]),
            raw(RequestCode::GET_TOPIC_CONFIG, &[("topic", n)]),
            raw(RequestCode::GET_CONSUME_STATS, &[("consumerGroup", "cg"), ("topic", n)]),
        ];
        let group_requests = vec![
            raw(RequestCode::CONSUMER_SEND_MSG_BACK, &[("offset", &offset), ("group", n), ("delayLevel", "-1")]),
            raw(
                RequestCode::PULL_MESSAGE,
                &[
                    ("consumerGroup", n),
                    ("topic", "Safe"),
                    ("queueId", "0"),
                    ("queueOffset", "0"),
                    ("maxMsgNums", "1"),
                    ("sysFlag", "4"),
                    ("commitOffset", "0"),
                    ("suspendTimeoutMillis", "0"),
                    ("subVersion", "0"),
                ],
            ),
            raw(RequestCode::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", n), ("topic", "Safe"), ("queueId", "0"), ("commitOffset", "1")]),
            raw(RequestCode::QUERY_CONSUMER_OFFSET, &[("consumerGroup", n), ("topic", "Safe"), ("queueId", "0")]),
            raw(RequestCode::GET_CONSUMER_LIST_BY_GROUP, &[("consumerGroup", n)]),
            raw(RequestCode::GET_CONSUME_STATS, &[("consumerGroup", n)]),
            RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
                .with_body(format!(r#"{{"groupName":{},"retryQueueNums":1}}"#, serde_json::to_string(n).unwrap()).into_bytes()),
            RemotingCommand::request(RequestCode::LOCK_BATCH_MQ)
                .with_body(format!(r#"{{"clientId":"c","consumerGroup":{},"mqSet":[]}}"#, serde_json::to_string(n).unwrap()).into_bytes()),
        ];
        for request in topic_requests.into_iter().chain(group_requests) {
            let code = request.code;
            let r = c.invoke(&addr, request, TIMEOUT).await.unwrap();
            assert_ne!(r.response_code(), ResponseCode::SUCCESS, "code {code} took the name {n:?}");
            assert!(r.remark.as_deref().is_some_and(|m| !m.is_empty()), "code {code} refused {n:?} without a remark");
        }
        // A heartbeat for such a group is answered, and the group is not taken.
        let r = c.invoke(&addr, heartbeat("hb", n, ""), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0);
    }
    assert_eq!(tree_outside(dir.path(), &store), before, "nothing was created or deleted outside the store");
    assert_eq!(std::fs::read(dir.path().join("victim_dir").join("keep")).unwrap(), b"precious");
    for folder in queue_folders(&store) {
        assert!(remoting::protocol::name::TopicName::new(folder.as_str()).is_ok(), "consumequeue/{folder}");
    }
    let groups = std::fs::read_to_string(store.join("config").join("subscriptionGroup.json")).unwrap_or_default();
    assert!(!groups.contains("victim"), "no illegal group was stored");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn clients_cannot_send_to_the_brokers_own_topics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let forged = "REAL_TOPIC\u{1}..%2F..%2Fx\u{2}REAL_QID\u{1}0\u{2}DELAY\u{1}1\u{2}";
    for topic in [
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    ] {
        for code in [RequestCode::SEND_MESSAGE_V2, RequestCode::SEND_BATCH_MESSAGE] {
            let mut request = send(topic, 0, "forged", forged);
            request.code = code.0;
            let r = c.invoke(&addr, request, TIMEOUT).await.unwrap();
            assert_eq!(
                (r.response_code(), r.remark.as_deref()),
                (ResponseCode::NO_PERMISSION, Some(format!("Sending message to topic[{topic}] is forbidden.").as_str())),
                "{topic} via {code:?}"
            );
        }
        let r = c.invoke(&addr, pull(topic, 0, 0, 0), TIMEOUT).await.unwrap();
        assert_ne!(r.response_code(), ResponseCode::SUCCESS, "nothing was stored in {topic}");
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_counts_and_perm_are_bounded_when_a_topic_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let create = |read: &str, write: &str, perm: &str| {
        raw(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &[
                ("topic", "Wide"),
                ("defaultTopic", "TBW102"),
                ("readQueueNums", read),
                ("writeQueueNums", write),
                ("perm", perm),
                ("topicFilterType", "SINGLE_TAG"),
                ("order", "false"),
            ],
        )
    };
    for (read, write, perm) in [("3000000", "8", "6"), ("8", "2147483647", "6"), ("-1", "8", "6"), ("8", "-5", "6"), ("8", "8", "-1"), ("8", "8", "16")] {
        let r = c.invoke(&addr, create(read, write, perm), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::INVALID_PARAMETER, "read {read} write {write} perm {perm}: {:?}", r.remark);
    }
    let r = c.invoke(&addr, raw(RequestCode::GET_TOPIC_CONFIG, &[("topic", "Wide")]), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::TOPIC_NOT_EXIST, "nothing was created");
    let r = c.invoke(&addr, create("4096", "4096", "7"), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "the bound itself is allowed: {:?}", r.remark);
    let stats = c.invoke(&addr, raw(RequestCode::GET_TOPIC_STATS_INFO, &[("topic", "Wide")]), TIMEOUT).await.unwrap();
    assert_eq!(stats.code, 0);
    assert!(stats.body_bytes().len() < 2 * 1024 * 1024, "stats of the widest topic stay small: {} bytes", stats.body_bytes().len());
    let group =
        RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(br#"{"groupName":"wide","retryQueueNums":3000000}"#.to_vec());
    assert_eq!(c.invoke(&addr, group, TIMEOUT).await.unwrap().response_code(), ResponseCode::INVALID_PARAMETER);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timer_message_is_refused_as_java_does_without_its_timer_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("timerWheelEnable", "false")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let at = (remoting::clock::now_ms() + 3000).to_string();
    for (key, value) in [("TIMER_DELIVER_MS", at.as_str()), ("TIMER_DELAY_SEC", "5"), ("TIMER_DELAY_MS", "5000")] {
        let r = c.invoke(&addr, send("Later", 0, "early?", &format!("{key}\u{1}{value}\u{2}")), TIMEOUT).await.unwrap();
        assert_eq!(
            (r.response_code(), r.remark.as_deref()),
            (ResponseCode::SYSTEM_ERROR, Some("accurate timer message is not enabled, timerWheelEnable is false")),
            "{key}"
        );
    }
    // A delay level wins over timer properties, as in Java.
    let r = c.invoke(&addr, send("Later", 0, "levelled", "DELAY\u{1}1\u{2}TIMER_DELAY_SEC\u{1}5\u{2}"), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn parked_pulls_past_the_cap_are_answered_busy_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("maxParkedPullsPerConnection", "2")]).await;
    let addr = broker.local_addr().to_string();
    let c = Arc::new(RemotingClient::new(ClientConfig::default()));
    c.invoke(&addr, send("Idle", 0, "x", ""), TIMEOUT).await.unwrap();
    pull_found(&c, &addr, "Idle", 0, 0).await;
    let parked: Vec<_> = (0..2)
        .map(|_| {
            let (c, addr) = (c.clone(), addr.clone());
            tokio::spawn(async move { c.invoke(&addr, pull("Idle", 0, 1, 30_000), TIMEOUT).await })
        })
        .collect();
    let hold = broker.broker.hold().unwrap().clone();
    let deadline = Instant::now() + TIMEOUT;
    while hold.held_count() < 2 {
        assert!(Instant::now() < deadline, "the first two pulls were never parked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let third = c.invoke(&addr, pull("Idle", 0, 1, 30_000), TIMEOUT).await.unwrap();
    assert_eq!(third.response_code(), ResponseCode::SYSTEM_BUSY);
    assert!(third.remark.unwrap().contains("maxParkedPullsPerConnection"));
    c.invoke(&addr, send("Idle", 0, "wake", ""), TIMEOUT).await.unwrap();
    for p in parked {
        assert_eq!(p.await.unwrap().unwrap().code, 0, "the parked pulls are woken by the arrival");
    }
    broker.shutdown().await;
}

/// A producer that answers every check with "commit".
struct CommitOnCheck {
    checks: std::sync::Mutex<usize>,
}

impl InboundHandler for CommitOnCheck {
    fn on_request(&self, channel: &Channel, request: RemotingCommand, _: InFlight) {
        if request.request_code() != RequestCode::CHECK_TRANSACTION_STATE {
            return;
        }
        let h: CheckTransactionStateRequestHeader = request.decode_header().unwrap();
        *self.checks.lock().unwrap() += 1;
        let end = EndTransactionRequestHeader {
            producer_group: "txg".into(),
            tran_state_table_offset: h.tran_state_table_offset,
            commit_log_offset: h.commit_log_offset,
            commit_or_rollback: 8,
            from_transaction_check: Some(true),
            msg_id: h.msg_id.unwrap_or_default(),
            transaction_id: h.transaction_id,
        };
        channel.invoke_oneway(RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &end)).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_whose_producer_was_offline_at_check_time_is_resolved_once_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("transactionCheckInterval", "200"), ("transactionTimeOut", "100")]).await;
    let addr = broker.local_addr().to_string();
    // The producer sends a half message and goes away without ending it.
    let gone = RemotingClient::new(ClientConfig::default());
    let h = SendMessageRequestHeader {
        producer_group: "txg".into(),
        sys_flag: 0x4,
        ..send_header("Orders", 0, "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}txg\u{2}UNIQ_KEY\u{1}U1\u{2}")
    };
    let r = gone.invoke(&addr, send_request(h, "pending"), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    gone.shutdown();
    drop(gone);
    // Several checks find no producer (each puts the half back); then a producer of the group returns.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let handler = Arc::new(CommitOnCheck { checks: std::sync::Mutex::new(0) });
    let back = RemotingClient::with_handler(ClientConfig::default(), handler.clone());
    assert_eq!(back.invoke(&addr, heartbeat("returned", "", "txg"), TIMEOUT).await.unwrap().code, 0);
    let committed = pull_found(&back, &addr, "Orders", 0, 0).await;
    assert_eq!(bodies(&committed)[0].1, "pending");
    assert!(*handler.checks.lock().unwrap() >= 1);
    broker.shutdown().await;
}

/// A disk whose msync hangs until released, or fails.
struct Disk {
    state: std::sync::Mutex<&'static str>,
    changed: std::sync::Condvar,
}

impl Disk {
    fn set(&self, state: &'static str) {
        *self.state.lock().unwrap() = state;
        self.changed.notify_all();
    }
}

impl store::mapped_file::FileSync for Disk {
    fn sync_range(&self, file: &store::mapped_file::MappedFile, start: usize, len: usize) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        while *state == "hangs" {
            state = self.changed.wait(state).unwrap();
        }
        match *state {
            "fails" => Err(std::io::Error::from_raw_os_error(5)),
            _ => file.msync_range(start, len),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_flush_answers_on_time_when_the_disk_hangs_and_refuses_writes_once_it_fails() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("flushDiskType", "SYNC_FLUSH"), ("syncFlushTimeout", "500")]).await;
    let disk = Arc::new(Disk { state: std::sync::Mutex::new("works"), changed: std::sync::Condvar::new() });
    broker.broker.store.commit_log().set_file_sync(disk.clone());
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    assert_eq!(c.invoke(&addr, send("Durable", 0, "first", ""), TIMEOUT).await.unwrap().code, 0);

    let first = c.invoke(&addr, send("Durable", 0, "retry me", ""), TIMEOUT).await.unwrap();
    let offset = store::message::decode_offset_message_id(first.ext("msgId").unwrap()).unwrap().1.to_string();

    disk.set("hangs");
    let started = Instant::now();
    let r = c.invoke(&addr, send("Durable", 0, "stuck", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::FLUSH_DISK_TIMEOUT, "{:?}", r.remark);
    assert!(started.elapsed() >= Duration::from_millis(500), "not before the timeout");
    assert!(started.elapsed() < Duration::from_secs(5), "answered on time although the disk never returned");
    // A consumer's retry message is not called stored before it is flushed (Java answers at once).
    let back = raw(RequestCode::CONSUMER_SEND_MSG_BACK, &[("offset", &offset), ("group", "retrying"), ("delayLevel", "-1")]);
    let r = c.invoke(&addr, back, TIMEOUT).await.unwrap();
    assert_ne!(r.response_code(), ResponseCode::SUCCESS, "a send-back waits for its flush like any send");

    disk.set("fails");
    let r = c.invoke(&addr, send("Durable", 0, "lost?", ""), TIMEOUT).await.unwrap();
    assert_ne!(r.response_code(), ResponseCode::SUCCESS, "a send whose flush failed is never acknowledged");
    let r = c.invoke(&addr, send("Durable", 0, "after", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SERVICE_NOT_AVAILABLE, "writes are refused once a flush failed");
    assert!(r.remark.unwrap().contains("flush failed"));
    // What was stored stays readable.
    assert_eq!(bodies(&pull_found(&c, &addr, "Durable", 0, 0).await)[0].1, "first");
    disk.set("works");
    broker.shutdown().await;
}

/// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG names the file it rewrites: a name that leaves the RocketMQ
/// home through `..` (or a link) is refused with Java's remark and the file outside is untouched;
/// the home's own file is rewritten.
#[tokio::test(flavor = "multi_thread")]
async fn the_global_white_list_file_must_be_inside_the_rocketmq_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("conf")).unwrap();
    let acl_file = home.join("conf").join("plain_acl.yml");
    std::fs::write(&acl_file, "globalWhiteRemoteAddresses:\n- 127.0.0.1\naccounts:\n- accessKey: RocketMQAdmin\n  secretKey: 12345678\n  admin: true\n")
        .unwrap();
    let outside = dir.path().join("x.yml");
    let outside_text = "globalWhiteRemoteAddresses:\n- 10.0.0.1\n";
    std::fs::write(&outside, outside_text).unwrap();
    let linked = home.join("conf").join("linked.yml");
    std::os::unix::fs::symlink(&outside, &linked).unwrap();
    let broker = start(&dir.path().join("store"), &[("aclEnable", "true"), ("rocketmqHome", home.to_str().unwrap())]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    // An admin's signature from a white address, as the ACL admin codes need.
    let admin = broker::acl::Credentials { access_key: "RocketMQAdmin".into(), secret_key: "12345678".into() };
    let update = |file: String| {
        let mut request = raw(RequestCode::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, &[("globalWhiteAddrs", "127.0.0.1,10.*"), ("aclFileFullPath", &file)]);
        admin.sign(&mut request);
        request
    };

    let escaping = format!("{}/conf/../../x.yml", home.display());
    for file in [escaping, linked.display().to_string(), outside.display().to_string()] {
        let r = c.invoke(&addr, update(file.clone()), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 211, "{file}: {:?}", r.remark);
        assert_eq!(r.remark.as_deref(), Some("The globalWhiteAddresses[127.0.0.1,10.*] has been updated failed."));
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), outside_text, "{file}");
    }
    let r = c.invoke(&addr, update(acl_file.display().to_string()), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert!(std::fs::read_to_string(&acl_file).unwrap().contains("10.*"));
    broker.shutdown().await;
}
