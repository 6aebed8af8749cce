//! Pop requests built as the Java client builds them, and the messages of a pop's answer with
//! the receipt handles the client makes of them.

use std::time::{Duration, Instant};

use broker::pop::extra_info::{parse_msg_offset_info, parse_start_offset_info, ExtraInfo};
use broker::pop::headers::{AckMessageRequestHeader, PopMessageRequestHeader, PopMessageResponseHeader};
use remoting::client::RemotingClient;
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use store::message::record::{decode_record, RecordAt};

use super::{group, topic, TIMEOUT};

pub fn pop_request(topic_name: &str, queue: i32, invisible_ms: i64, poll_ms: i64, order: bool) -> RemotingCommand {
    pop_request_of("pg-c", topic_name, queue, invisible_ms, poll_ms, order)
}

/// A POP_MESSAGE of `consumer_group` as the Java client builds it.
pub fn pop_request_of(consumer_group: &str, topic_name: &str, queue: i32, invisible_ms: i64, poll_ms: i64, order: bool) -> RemotingCommand {
    let h = PopMessageRequestHeader {
        consumer_group: group(consumer_group),
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
pub struct Popped {
    pub body: String,
    pub handle: String,
    pub queue_id: i32,
    pub offset: i64,
    pub reconsume: i32,
}

/// The messages of a pop response from broker `broker-a`, with their handles.
pub fn popped(r: &RemotingCommand, topic_name: &str) -> Vec<Popped> {
    popped_of(r, topic_name, "broker-a")
}

/// The messages of a pop response from broker `broker_name` with their handles, as
/// `MQClientAPIImpl.processPopResponse` makes them: a message from the retry topic carries its
/// own (`POP_CK`).
pub fn popped_of(r: &RemotingCommand, topic_name: &str, broker_name: &str) -> Vec<Popped> {
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
                ExtraInfo::new(start, h.pop_time, h.invisible_time, h.revive_qid, m.topic, broker_name, m.queue_id, Some(m.queue_offset)).to_string()
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

pub fn ack_request(topic_name: &str, p: &Popped) -> RemotingCommand {
    let h = AckMessageRequestHeader {
        consumer_group: group("pg-c"),
        topic: topic(topic_name),
        queue_id: p.queue_id,
        extra_info: p.handle.clone(),
        offset: p.offset,
    };
    RemotingCommand::request_with_header(RequestCode::ACK_MESSAGE, &h)
}

/// Pops from `broker-a` (without waiting) until `n` messages came or `within` passes.
pub async fn pop_until(c: &RemotingClient, addr: &str, topic_name: &str, n: usize, invisible_ms: i64, within: Duration) -> Vec<Popped> {
    pop_until_of(c, addr, "broker-a", topic_name, n, invisible_ms, within).await
}

/// Pops from broker `broker_name` at `addr` (without waiting) until `n` messages came or
/// `within` passes.
pub async fn pop_until_of(c: &RemotingClient, addr: &str, broker_name: &str, topic_name: &str, n: usize, invisible_ms: i64, within: Duration) -> Vec<Popped> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    loop {
        let r = c.invoke(addr, pop_request(topic_name, -1, invisible_ms, 0, false), TIMEOUT).await.unwrap();
        if r.code == 0 {
            got.extend(popped_of(&r, topic_name, broker_name));
        } else {
            assert_eq!(r.response_code(), ResponseCode::POLLING_TIMEOUT, "{:?}", r.remark);
        }
        if got.len() >= n || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// After a failover to the broker at `addr`: pops until every `unacked` message came back (50 s
/// at most), then 4 s more, and asserts each came back once, nothing else did (no `acked` one),
/// and none before `hidden_until` (their pop's time plus their invisible time).
pub async fn assert_back_once_not_early(
    c: &RemotingClient,
    addr: &str,
    broker_name: &str,
    topic_name: &str,
    unacked: &[&Popped],
    acked: &[&Popped],
    hidden_until: i64,
) {
    let deadline = Instant::now() + Duration::from_secs(50);
    let mut back: Vec<(String, i64)> = Vec::new();
    while back.len() < unacked.len() && Instant::now() < deadline {
        for p in pop_until_of(c, addr, broker_name, topic_name, 1, 60_000, Duration::from_millis(500)).await {
            back.push((p.body, remoting::clock::now_ms()));
        }
    }
    let extra = pop_until_of(c, addr, broker_name, topic_name, 1, 60_000, Duration::from_secs(4)).await;
    let mut bodies: Vec<String> = back.iter().map(|(b, _)| b.clone()).collect();
    bodies.sort();
    let mut want: Vec<String> = unacked.iter().map(|p| p.body.clone()).collect();
    want.sort();
    assert_eq!(bodies, want, "each unacked message back once (acked: {:?})", acked.iter().map(|p| &p.body).collect::<Vec<_>>());
    assert!(extra.is_empty(), "handed out again: {extra:?}");
    for (body, at) in &back {
        assert!(*at >= hidden_until, "{body} back {} ms before its invisible time ended", hidden_until - at);
    }
}
