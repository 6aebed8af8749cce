//! Bounds on what one client can make the broker spend, through the socket: SQL92 subscriptions
//! (compiled once, IN lists by hash, refused past their size bounds), parked pulls by bytes, and
//! reply pushes a requester never answers.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::protocol::broker::PullMessageRequestHeader;
use remoting::{RemotingCommand, RequestCode, ResponseCode};

/// A PULL_MESSAGE that carries a SQL92 subscription, suspended for `suspend_ms` when > 0.
fn sql_pull(topic_name: &str, queue: i32, offset: i64, expression: &str, suspend_ms: i64) -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: group("sqlg"),
        topic: topic(topic_name),
        queue_id: queue,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: 0x04 | if suspend_ms > 0 { 0x02 } else { 0 },
        commit_offset: 0,
        suspend_timeout_millis: suspend_ms,
        subscription: Some(expression.into()),
        sub_version: 1,
        expression_type: Some("SQL92".into()),
        max_msg_bytes: None,
        broker_name: None,
    };
    RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &h)
}

/// `a IN ('zzy0', 'zzy1', ...)` with `n` elements, then `extra` ones.
fn in_list(n: usize, extra: &[&str]) -> String {
    let mut items: Vec<String> = (0..n).map(|i| format!("'zzy{i}'")).collect();
    items.extend(extra.iter().map(|e| format!("'{e}'")));
    format!("a IN ({})", items.join(", "))
}

/// This process's resident memory, in MiB.
fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0.0);
    pages * 4096.0 / (1 << 20) as f64
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_sql92_in_list_is_refused_and_a_large_one_is_compiled_once_and_matched_by_hash() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("enablePropertyFilter", "true")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    for i in 0..64 {
        let value = if i % 2 == 0 { "hit" } else { "miss" };
        let r = c.invoke(&addr, send("Sql", 0, &format!("m{i}"), &format!("a\u{1}{value}\u{2}")), TIMEOUT).await.unwrap();
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    pull_found(&c, &addr, "Sql", 0, 0).await;

    // The probe's pull: 300,000 elements, 12-17 s of broker CPU each before; now refused at once.
    let huge = in_list(300_000, &[]);
    let started = Instant::now();
    let r = c.invoke(&addr, sql_pull("Sql", 0, 0, &huge, 0), Duration::from_secs(60)).await.unwrap();
    let took = started.elapsed();
    assert_eq!(r.response_code(), ResponseCode::SUBSCRIPTION_PARSE_FAILED, "{:?}", r.remark);
    let remark = r.remark.unwrap_or_default();
    assert!(remark.starts_with("parse the consumer's subscription failed: the SQL92 expression is too large"), "{remark}");
    assert!(took < Duration::from_secs(2), "refused after {took:?}");

    // 9,999 elements, one of them the messages' value: compiled at the first pull, then found.
    let large = in_list(9_998, &["hit"]);
    let started = Instant::now();
    let first = c.invoke(&addr, sql_pull("Sql", 0, 0, &large, 0), TIMEOUT).await.unwrap();
    let first_took = started.elapsed();
    assert_eq!(first.response_code(), ResponseCode::SUCCESS, "{:?}", first.remark);
    assert!(bodies(&first).iter().all(|(_, body, _)| body.trim_start_matches('m').parse::<usize>().is_ok_and(|i| i % 2 == 0)));
    let started = Instant::now();
    for _ in 0..20 {
        let again = c.invoke(&addr, sql_pull("Sql", 0, 0, &large, 0), TIMEOUT).await.unwrap();
        assert_eq!(bodies(&again).len(), 32);
    }
    let per_pull = started.elapsed() / 20;
    println!("first pull of a 9,999-element IN list {first_took:?}; later pulls {per_pull:?} each; 300,000 elements refused in {took:?}");
    // Past the element bound, with a remark naming it; CHECK_CLIENT_CONFIG refuses it too.
    let over = in_list(10_001, &[]);
    let r = c.invoke(&addr, sql_pull("Sql", 0, 0, &over, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUBSCRIPTION_PARSE_FAILED);
    assert!(r.remark.unwrap_or_default().contains("more than 10000"));
    let sub = serde_json::json!({"topic": "Sql", "subString": over, "tagsSet": [], "codeSet": [], "subVersion": 1, "expressionType": "SQL92"});
    let check = serde_json::json!({"clientId": "127.0.0.1@sql", "group": "sqlg", "subscriptionData": sub});
    let r = c.invoke(&addr, RemotingCommand::request(RequestCode::CHECK_CLIENT_CONFIG).with_body(check.to_string().into_bytes()), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUBSCRIPTION_PARSE_FAILED, "{:?}", r.remark);
    assert!(r.remark.unwrap_or_default().contains("too large"));
    broker.shutdown().await;
}

/// Writes `frame` `times` times on a new connection to `addr`, then reads the answers that come
/// until `stop`: their codes and remarks.
async fn flood(addr: String, frame: bytes::Bytes, times: usize, answered: Arc<AtomicUsize>, stop: Arc<tokio::sync::Notify>) -> Vec<(i32, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let writing = tokio::spawn(async move {
        for _ in 0..times {
            if writer.write_all(&frame).await.is_err() {
                break;
            }
        }
        writer
    });
    let mut answers = Vec::new();
    while answers.len() < times {
        let mut len = [0u8; 4];
        tokio::select! {
            read = reader.read_exact(&mut len) => if read.is_err() { break },
            _ = stop.notified() => break,
        }
        let mut frame = len.to_vec();
        frame.resize(4 + u32::from_be_bytes(len) as usize, 0);
        reader.read_exact(&mut frame[4..]).await.unwrap();
        let answer = remoting::codec::decode_frame(&frame).unwrap();
        answers.push((answer.code, answer.remark.unwrap_or_default()));
        answered.fetch_add(1, Ordering::SeqCst);
    }
    drop(writing.await);
    answers
}

#[tokio::test(flavor = "multi_thread")]
async fn parked_pulls_are_bounded_by_the_bytes_they_hold_per_connection_and_in_all() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    c.invoke(&addr, send("Parked", 0, "x", ""), TIMEOUT).await.unwrap();
    pull_found(&c, &addr, "Parked", 0, 0).await;
    // The probe's pull: a 1 MiB subscription (a tag expression: a SQL92 one that long is refused),
    // waiting 30 s for a message after the last.
    let tags: Vec<String> = (0..110_000).map(|i| format!("t{i:07}")).collect();
    let mut pull = pull("Parked", 0, 1, 30_000);
    pull.ext_fields.as_mut().unwrap().insert("subscription".into(), tags.join("||"));
    let frame = remoting::codec::encode_frame(&pull).unwrap().freeze();
    assert!(frame.len() > 1 << 20);

    let before = rss_mib();
    let hold = broker.broker.hold().unwrap().clone();
    let (connections, each) = (6, 20);
    let (answered, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(tokio::sync::Notify::new()));
    let floods: Vec<_> = (0..connections).map(|_| tokio::spawn(flood(addr.clone(), frame.clone(), each, answered.clone(), stop.clone()))).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while hold.held_count() + answered.load(Ordering::SeqCst) < connections * each {
        assert!(Instant::now() < deadline, "{} parked, {} answered", hold.held_count(), answered.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let parked = hold.held_count();
    stop.notify_waiters();
    let mut answers = Vec::new();
    for f in floods {
        answers.extend(f.await.unwrap());
    }
    let after = rss_mib();
    let busy_bytes = answers.iter().filter(|(code, remark)| *code == ResponseCode::SYSTEM_BUSY.0 && remark.contains("bytes")).count();
    println!(
        "{} pulls of {} KiB: {parked} parked, {} answered ({busy_bytes} SYSTEM_BUSY on bytes); RSS {before:.0} -> {after:.0} MiB",
        connections * each,
        frame.len() >> 10,
        answers.len()
    );
    assert_eq!(parked + answers.len(), connections * each, "every pull is either parked or answered at once");
    assert!(busy_bytes > 0, "no pull was refused on bytes");
    assert!(parked <= broker::parking::MAX_PARKED_BYTES / (2 << 20), "{parked} parked pulls of more than 2 MiB each");
    broker.shutdown().await;
}

/// A requester that reads the broker's pushes and never answers them.
struct Silent {
    pushes: AtomicUsize,
}

impl remoting::connection::InboundHandler for Silent {
    fn on_request(&self, _: &remoting::server::Channel, request: RemotingCommand, _: remoting::connection::InFlight) {
        if request.request_code() == RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT {
            self.pushes.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reply_pushes_a_requester_never_answers_are_bounded_and_the_rest_answered_as_failed_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let silent = Arc::new(Silent { pushes: AtomicUsize::new(0) });
    let requester = RemotingClient::with_handler(ClientConfig::default(), silent.clone());
    let heartbeat = r#"{"clientID":"127.0.0.1@silent","consumerDataSet":[],"producerDataSet":[{"groupName":"requesters"}]}"#;
    let r = requester.invoke(&addr, RemotingCommand::request(RequestCode::HEART_BEAT).with_body(heartbeat.as_bytes().to_vec()), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0);

    // The probe's replies: 256 KiB bodies, each pushed to the requester, who never answers.
    let body = bytes::Bytes::from(vec![b'r'; 256 << 10]);
    // From several connections: one client queues at most 64 MiB, and one connection has at most
    // 128 requests in processing.
    let repliers: Vec<_> = (0..4).map(|_| Arc::new(RemotingClient::new(ClientConfig::default()))).collect();
    let replies = 400;
    let before = rss_mib();
    let started = Instant::now();
    let sent: Vec<_> = (0..replies)
        .map(|i| {
            let mut h = send_header("DefaultCluster_REPLY_TOPIC", 0, "REPLY_TO_CLIENT\u{1}127.0.0.1@silent\u{2}");
            h.producer_group = "repliers".into();
            let request =
                RemotingCommand::request_with_header(RequestCode::SEND_REPLY_MESSAGE_V2, &remoting::protocol::broker::SendMessageRequestHeaderV2::from(h))
                    .with_body(body.clone());
            let (replier, addr) = (repliers[i % repliers.len()].clone(), addr.clone());
            tokio::spawn(async move { (replier.invoke(&addr, request, Duration::from_secs(30)).await, started.elapsed()) })
        })
        .collect();
    // Those past the bound are answered at once; the others wait for the push's 10 s.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let peak = rss_mib();
    let pushed = silent.pushes.load(Ordering::SeqCst);
    drop(requester);
    let mut early_failures = 0;
    for s in sent {
        let (answer, at) = s.await.unwrap();
        let answer = answer.unwrap();
        assert_eq!(answer.response_code(), ResponseCode::SYSTEM_ERROR);
        assert_eq!(answer.remark.as_deref(), Some("push reply message to 127.0.0.1@silentfail."));
        assert!(answer.ext("queueOffset").is_some(), "the reply is stored all the same");
        early_failures += usize::from(at < Duration::from_secs(3));
    }
    println!("{replies} replies of 256 KiB to a silent requester: {pushed} pushed, {early_failures} refused at once; RSS {before:.0} -> {peak:.0} MiB");
    assert!(pushed <= broker::processor::reply::MAX_PENDING_PUSH_BYTES_PER_CONNECTION / (256 << 10), "{pushed} pushes wait");
    assert!(early_failures >= replies - pushed, "{early_failures} answered at once");
    broker.shutdown().await;
}
