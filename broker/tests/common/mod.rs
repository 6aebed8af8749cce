//! What the broker's socket tests share: a broker on 127.0.0.1 in a temp dir, and requests built
//! as the Java client builds them.
#![allow(dead_code)] // each test file uses its own part

use std::path::Path;
use std::time::{Duration, Instant};

use broker::config::{apply_properties, apply_startup_rules};
use broker::controller::BrokerController;
use remoting::client::RemotingClient;
use remoting::command::ExtFields;
use remoting::protocol::broker::*;
use remoting::protocol::name::{GroupName, TopicName};
use remoting::{RemotingCommand, RequestCode};
use store::message::record::{decode_record, RecordAt};

pub mod pop;

pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A broker on 127.0.0.1 with a free port, its store in `dir`, no name server, without the fast
/// failure; `extra` keys of broker.conf override the defaults.
pub async fn start(dir: &Path, extra: &[(&str, &str)]) -> BrokerController {
    try_start(dir, extra).await.unwrap()
}

/// As [`start`], for a start that may fail.
#[allow(dead_code)]
pub async fn try_start(dir: &Path, extra: &[(&str, &str)]) -> Result<BrokerController, broker::controller::StartError> {
    let props: indexmap::IndexMap<String, String> = [
        ("brokerIP1", "127.0.0.1"),
        ("brokerIP2", "127.0.0.1"),
        ("bindAddress", "127.0.0.1"),
        ("listenPort", "0"),
        ("storePathRootDir", dir.to_str().unwrap()),
        ("mappedFileSizeCommitLog", "4194304"),
        ("namesrvAddr", ""),
        // A loaded machine must not turn a slow send into SYSTEM_BUSY in tests of other things;
        // t32 turns Java's fast failure back on.
        ("brokerFastFailureEnable", "false"),
    ]
    .iter()
    .chain(extra)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let (mut broker, store, _) = apply_properties(&props).unwrap();
    apply_startup_rules(&mut broker, &store).unwrap();
    BrokerController::start(broker, store).await
}

pub fn topic(name: &str) -> TopicName {
    TopicName::new(name).unwrap()
}

pub fn group(name: &str) -> GroupName {
    GroupName::new(name).unwrap()
}

/// A SEND_MESSAGE_V2 header as the Java producer fills it.
pub fn send_header(topic_name: &str, queue: i32, props: &str) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: topic(topic_name),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: queue,
        sys_flag: 0,
        born_timestamp: 1,
        flag: 0,
        properties: Some(props.into()),
        reconsume_times: None,
        unit_mode: None,
        batch: None,
        max_reconsume_times: None,
        broker_name: None,
    }
}

pub fn send_request(h: SendMessageRequestHeader, body: &str) -> RemotingCommand {
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &SendMessageRequestHeaderV2::from(h)).with_body(body.as_bytes().to_vec())
}

pub fn send(topic_name: &str, queue: i32, body: &str, props: &str) -> RemotingCommand {
    send_request(send_header(topic_name, queue, props), body)
}

/// A PULL_MESSAGE that carries its subscription (`*`), suspended for `suspend_ms` when > 0.
pub fn pull_as(consumer_group: &str, topic_name: &str, queue: i32, offset: i64, suspend_ms: i64) -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: group(consumer_group),
        topic: topic(topic_name),
        queue_id: queue,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: 0x04 | if suspend_ms > 0 { 0x02 } else { 0 },
        commit_offset: 0,
        suspend_timeout_millis: suspend_ms,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: None,
        max_msg_bytes: None,
        broker_name: None,
    };
    RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &h)
}

pub fn pull(topic_name: &str, queue: i32, offset: i64, suspend_ms: i64) -> RemotingCommand {
    pull_as("cg", topic_name, queue, offset, suspend_ms)
}

/// A request with whatever header fields a test wants, valid or not (a typed header cannot hold
/// an illegal name).
pub fn raw(code: RequestCode, fields: &[(&str, &str)]) -> RemotingCommand {
    let mut ext = ExtFields::default();
    for (k, v) in fields {
        ext.insert(k.to_string(), v.to_string());
    }
    RemotingCommand { ext_fields: Some(ext), ..RemotingCommand::request(code) }
}

/// Pulls until the queue answers SUCCESS (dispatch runs behind the append), or fails at the deadline.
pub async fn pull_found(c: &RemotingClient, addr: &str, topic_name: &str, queue: i32, offset: i64) -> RemotingCommand {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = c.invoke(addr, pull(topic_name, queue, offset, 0), TIMEOUT).await.unwrap();
        if r.code == 0 {
            return r;
        }
        assert!(Instant::now() < deadline, "{topic_name}/{queue}@{offset} never became readable: {:?}", r.remark);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// (topic, body, reconsume times) of each stored message in a pull response.
pub fn bodies(response: &RemotingCommand) -> Vec<(String, String, i32)> {
    let mut out = Vec::new();
    let mut rest = response.body_bytes();
    while !rest.is_empty() {
        let Ok(RecordAt::Record(r)) = decode_record(rest, true) else { panic!("bad record in pull body") };
        out.push((r.topic.to_owned(), String::from_utf8_lossy(r.body).into_owned(), r.reconsume_times));
        rest = &rest[r.store_size as usize..];
    }
    out
}

/// A port free right now on 127.0.0.1 (for a server that must register its real address).
/// Ports come from 20000-32000, below Linux's ephemeral range: a port the OS hands out for
/// port 0 is also what outgoing connections of the tests running alongside take, so it can be
/// gone by the time the server binds it. A port is never handed out twice by one test binary.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    // Each test binary starts at its own place in the range (process id and clock), then walks it.
    let seed =
        std::process::id().wrapping_mul(2_654_435_761) ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let _ = NEXT.compare_exchange(0, seed % SPAN + 1, Ordering::AcqRel, Ordering::Acquire);
    for _ in 0..SPAN {
        let port = (LOW + NEXT.fetch_add(7, Ordering::AcqRel) % SPAN) as u16;
        let mut handed = HANDED_OUT.lock().unwrap();
        if handed.contains(&port) {
            continue;
        }
        let free = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() && std::net::TcpListener::bind(("0.0.0.0", port)).is_ok();
        if free {
            handed.push(port);
            return port;
        }
    }
    panic!("no free port in 20000-32000");
}

/// A name server on 127.0.0.1 with a free port and its files in `dir`.
pub async fn start_namesrv(dir: &Path) -> namesrv::NamesrvController {
    let config = namesrv::config::NamesrvConfig {
        bind_address: "127.0.0.1".into(),
        listen_port: 0,
        kv_config_path: dir.join("kvConfig.json").to_string_lossy().into(),
        config_store_path: dir.join("namesrv.properties").to_string_lossy().into(),
        ..Default::default()
    };
    namesrv::NamesrvController::start(config).await.unwrap()
}
