//! SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2 (Java `ReplyMessageProcessor`): a replier answers
//! a request message; the broker pushes the reply to the requesting client
//! (PUSH_REPLY_MESSAGE_TO_CLIENT on that client's producer connection, found by the client id in
//! the reply's `REPLY_TO_CLIENT` property) and, with `storeReplyMessageEnable`, also stores it in
//! the reply topic. The push decides the response code; the store only fills in the message id
//! and offset, as in Java.
//!
//! The push waits up to 10 s for the requester's answer (Java's `callClient`), so it runs as an
//! async task and answers through a [`Reply`]: no pool thread waits on a slow requester. Pushes
//! waiting for their answer are bounded ([`PushBudget`]: by count and bytes, per requester
//! connection and in all; Java has no bound, its pool threads wait); a push past a bound is not
//! made, and the reply is stored and answered as Java answers a push that failed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use remoting::clock::now_ms;
use remoting::command_header;
use remoting::protocol::broker::{SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
use remoting::server::{Channel, ProcessResult, Reply, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use store::commit_log::{PutMessageResult, PutStatus};
use store::message::{properties, MessageToStore};
use tracing::{debug, warn};

use crate::client::producer_manager::ProducerManager;
use crate::handles::SendContext;
use crate::processor::send::{add_region_and_trace_switch, decorate, msg_check, skeleton};
use crate::put::Origin;

/// Java's `MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT`: the requester's client id.
pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
/// Java's `MessageConst.PROPERTY_PUSH_REPLY_TIME`: when the broker pushed the reply.
pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
/// How long the push waits for the requester (Java's `Broker2Client.callClient`).
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

command_header! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT (broker to requester): the reply's send header, plus where it
    /// was born and stored.
    pub struct ReplyMessageRequestHeader {
        pub producer_group: String => "producerGroup",
        pub topic: String => "topic",
        pub default_topic: String => "defaultTopic",
        pub default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        pub queue_id: i32 => "queueId",
        pub sys_flag: i32 => "sysFlag",
        pub born_timestamp: i64 => "bornTimestamp",
        pub flag: i32 => "flag",
        pub properties: Option<String> => "properties",
        pub reconsume_times: Option<i32> => "reconsumeTimes",
        pub unit_mode: bool => "unitMode",
        pub born_host: String => "bornHost",
        pub store_host: String => "storeHost",
        pub store_timestamp: i64 => "storeTimestamp",
    }
}

pub struct ReplyProcessor {
    /// What a reply is checked and stored through, as a send.
    pub send: SendContext,
    /// Where the requester's connection is found.
    pub producers: Arc<ProducerManager>,
    /// Where the push waits for the requester.
    pub runtime: tokio::runtime::Handle,
    /// The pushes waiting for their requester's answer.
    pub pushes: Arc<PushBudget>,
}

/// Pushes one requester connection may have waiting for its answers (ours; Java has none).
pub const MAX_PENDING_PUSHES_PER_CONNECTION: usize = 1024;
/// Bytes of pushes (frame and stored copy) one requester connection may have waiting.
pub const MAX_PENDING_PUSH_BYTES_PER_CONNECTION: usize = 64 << 20;
/// Pushes waiting in all.
pub const MAX_PENDING_PUSHES: usize = 8192;
/// Bytes of pushes waiting in all.
pub const MAX_PENDING_PUSH_BYTES: usize = 256 << 20;

/// The bounds on pushes waiting for their requester's answer: count and bytes, per requester
/// connection and in all. A push holds its place until its answer comes or it times out.
pub struct PushBudget {
    max_per_connection: (usize, usize),
    max_total: (usize, usize),
    used: Mutex<PushesUsed>,
}

#[derive(Default)]
struct PushesUsed {
    by_channel: HashMap<u64, (usize, usize)>,
    total: (usize, usize),
}

impl Default for PushBudget {
    fn default() -> Self {
        PushBudget::new((MAX_PENDING_PUSHES_PER_CONNECTION, MAX_PENDING_PUSH_BYTES_PER_CONNECTION), (MAX_PENDING_PUSHES, MAX_PENDING_PUSH_BYTES))
    }
}

impl PushBudget {
    /// Bounds as (pushes, bytes).
    pub fn new(max_per_connection: (usize, usize), max_total: (usize, usize)) -> Self {
        PushBudget { max_per_connection, max_total, used: Mutex::new(PushesUsed::default()) }
    }

    /// A place for a push of `bytes` to connection `channel_id`, given back when dropped; `None`
    /// past a bound.
    fn take(self: &Arc<Self>, channel_id: u64, bytes: usize) -> Option<PushPlace> {
        let mut used = self.used.lock();
        let within = |(count, held): (usize, usize), (max_count, max_bytes): (usize, usize)| count < max_count && held.saturating_add(bytes) <= max_bytes;
        let on_channel = used.by_channel.get(&channel_id).copied().unwrap_or_default();
        if !within(used.total, self.max_total) || !within(on_channel, self.max_per_connection) {
            return None;
        }
        let entry = used.by_channel.entry(channel_id).or_default();
        *entry = (entry.0 + 1, entry.1 + bytes);
        used.total = (used.total.0 + 1, used.total.1 + bytes);
        Some(PushPlace { budget: self.clone(), channel_id, bytes })
    }

    /// Pushes and bytes waiting in all.
    pub fn pending(&self) -> (usize, usize) {
        self.used.lock().total
    }
}

/// One push's place in the [`PushBudget`].
struct PushPlace {
    budget: Arc<PushBudget>,
    channel_id: u64,
    bytes: usize,
}

impl Drop for PushPlace {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock();
        used.total = (used.total.0.saturating_sub(1), used.total.1.saturating_sub(self.bytes));
        if let Some((count, held)) = used.by_channel.get_mut(&self.channel_id) {
            *count = count.saturating_sub(1);
            *held = held.saturating_sub(self.bytes);
            if *count == 0 {
                used.by_channel.remove(&self.channel_id);
            }
        }
    }
}

impl RequestProcessor for ReplyProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let header: SendMessageRequestHeader = match request.request_code() {
            RequestCode::SEND_REPLY_MESSAGE => request.decode_header()?,
            _ => request.decode_header::<SendMessageRequestHeaderV2>()?.into(),
        };
        Ok(self.reply(channel, &request, header))
    }
}

/// Whether the push reached the requester, and if not, Java's remark.
type Pushed = Result<(), String>;

impl ReplyProcessor {
    /// Checks the reply as a send, then pushes and stores it from an async task; None, as that
    /// task answers.
    fn reply(&self, channel: &Channel, request: &RemotingCommand, mut h: SendMessageRequestHeader) -> Option<RemotingCommand> {
        let b = &self.send;
        let err = |code, remark: String| Some(decorate(&b.config(), RemotingCommand::error_response(request, code, remark)));
        let sent = h.properties.as_deref().unwrap_or("");
        let message_type = crate::metrics::message_type(sent);
        // Java 5.x adds these before anything else, so both the push and the stored copy carry them.
        h.properties = Some(add_region_and_trace_switch(&b.config(), sent));
        if now_ms() < b.config().start_accept_send_request_timestamp_ms {
            let until = b.config().start_accept_send_request_timestamp_ms;
            return err(ResponseCode::SYSTEM_ERROR, format!("broker unable to service, until {until} (startAcceptSendRequestTimeStamp)"));
        }
        let queue_id = match msg_check(b, channel, &h) {
            Ok((_, queue_id)) => queue_id,
            Err((code, remark)) => return err(code, remark),
        };
        // As Java: the stored copy has no sys flag of its own (only the push carries the
        // sender's), no CLUSTER, and the properties as the replier sent them.
        let msg = MessageToStore {
            topic: h.topic.to_string(),
            queue_id,
            flag: h.flag,
            sys_flag: 0,
            born_timestamp: h.born_timestamp,
            born_host: channel.remote_addr(),
            store_host: b.store_host,
            reconsume_times: h.reconsume_times.unwrap_or(0),
            prepared_transaction_offset: 0,
            body: request.body.clone().unwrap_or_default(),
            properties: h.properties.clone().unwrap_or_default(),
        };
        let mut props = properties::parse(&msg.properties);
        let requester = props.get(REPLY_TO_CLIENT).cloned();
        let target = requester.as_deref().and_then(|id| self.producers.find_channel(id));
        match (requester.as_deref(), &target) {
            (Some(_), Some(_)) => {
                props.insert(PUSH_REPLY_TIME.to_owned(), now_ms().to_string());
            }
            (Some(id), None) => warn!(requester = id, "reply: the requester is not connected"),
            (None, _) => warn!("reply: {REPLY_TO_CLIENT} is missing; nobody to push the reply to"),
        }
        let push = push_request(&h, channel.remote_addr(), b.store_host, serialize(&props), msg.body.clone());
        let answer = Answer { send: b.clone(), reply: Reply::to(channel, request), request: skeleton(request), queue_id, message_type };
        // What waits with the push: its frame, and the stored copy's properties beside the body
        // they share.
        let bytes = remoting::codec::frame_size_estimate(&push) + msg.properties.len();
        let place = match (&requester, &target) {
            (Some(id), Some(to)) => match self.pushes.take(to.id(), bytes) {
                Some(place) => Some(place),
                None => {
                    warn!(requester = id, bytes, pending = ?self.pushes.pending(), "reply: too many pushes wait for this requester or in all; not pushed");
                    answer.store_then_send(msg, Err(push_failed(id)));
                    return None;
                }
            },
            _ => None,
        };
        self.runtime.spawn(async move {
            let pushed = push_to(requester.as_deref(), target, push).await;
            drop(place);
            answer.store_then_send(msg, pushed);
        });
        None
    }
}

fn serialize(props: &indexmap::IndexMap<String, String>) -> String {
    properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// PUSH_REPLY_MESSAGE_TO_CLIENT with the reply's header and body (the body as sent, compressed
/// or not: the sys flag tells the requester).
fn push_request(h: &SendMessageRequestHeader, born: SocketAddr, stored: SocketAddr, props: String, body: bytes::Bytes) -> RemotingCommand {
    let header = ReplyMessageRequestHeader {
        producer_group: h.producer_group.clone(),
        topic: h.topic.to_string(),
        default_topic: h.default_topic.clone(),
        default_topic_queue_nums: h.default_topic_queue_nums,
        queue_id: h.queue_id,
        sys_flag: h.sys_flag,
        born_timestamp: h.born_timestamp,
        flag: h.flag,
        properties: Some(props),
        reconsume_times: h.reconsume_times,
        unit_mode: h.unit_mode.unwrap_or(false),
        born_host: born.to_string(),
        store_host: stored.to_string(),
        store_timestamp: now_ms(),
    };
    RemotingCommand::request_with_header(RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT, &header).with_body(body)
}

/// Pushes the reply to the requester, with Java's remarks for each way it fails.
async fn push_to(requester: Option<&str>, target: Option<crate::client::SharedClientChannel>, push: RemotingCommand) -> Pushed {
    let Some(id) = requester else {
        return Err(format!("reply message properties[{REPLY_TO_CLIENT}] is null"));
    };
    let Some(channel) = target else {
        return Err(format!("push reply message fail, channel of <{id}> not found."));
    };
    match channel.invoke(push, PUSH_TIMEOUT).await {
        Ok(response) if response.code == ResponseCode::SUCCESS.0 => Ok(()),
        Ok(response) => {
            warn!(requester = id, code = response.code, remark = ?response.remark, "reply: the requester refused the push");
            Err(push_failed(id))
        }
        Err(e) => {
            warn!(requester = id, error = %e, "reply: push failed");
            Err(push_failed(id))
        }
    }
}

/// Java's remark for a push that was made and failed.
fn push_failed(requester: &str) -> String {
    format!("push reply message to {requester}fail.")
}

/// What the answer to a reply needs once the push is done.
struct Answer {
    send: SendContext,
    reply: Reply,
    request: RemotingCommand,
    queue_id: i32,
    /// The reply's `message_type` metrics label.
    message_type: &'static str,
}

impl Answer {
    /// Stores the reply if the broker keeps replies, then answers (under SYNC_FLUSH once flushed;
    /// the put pipeline counts it). A SYNC_MASTER does not wait for its slaves here: Java counts a
    /// slave timeout or absence as a stored reply, so waiting could only delay the same answer.
    fn store_then_send(self, msg: MessageToStore, pushed: Pushed) {
        if !self.send.config().store_reply_message_enable {
            let response = self.response(&pushed, None);
            return self.reply.send(response);
        }
        let put = self.send.put.clone();
        let origin = Origin::Reply { message_type: self.message_type };
        put.put_then(std::slice::from_ref(&msg), origin, move |result| {
            let response = self.response(&pushed, Some(&result));
            self.reply.send(response);
        });
    }

    /// Java's `handlePushReplyResult` then `handlePutMessageResult`: the push sets the code; a
    /// stored copy sets the message id and offset (else "0" and 0, which clients can decode).
    fn response(&self, pushed: &Pushed, stored: Option<&PutMessageResult>) -> RemotingCommand {
        let stored = stored.and_then(|r| {
            if !matches!(r.status, PutStatus::PutOk | PutStatus::FlushDiskTimeout) {
                debug!(status = ?r.status, remark = ?r.remark, "reply not stored");
            }
            r.append.as_ref().filter(|_| matches!(r.status, PutStatus::PutOk | PutStatus::FlushDiskTimeout))
        });
        let header = match (pushed, stored) {
            (_, Some(a)) => Some(SendMessageResponseHeader {
                msg_id: a.msg_ids.join(","),
                queue_id: self.queue_id,
                queue_offset: a.logics_offset,
                transaction_id: None,
                recall_handle: None,
            }),
            (Ok(()), None) => {
                Some(SendMessageResponseHeader { msg_id: "0".into(), queue_id: self.queue_id, queue_offset: 0, transaction_id: None, recall_handle: None })
            }
            (Err(_), None) => None,
        };
        let mut response = match pushed {
            Ok(()) => RemotingCommand::response_to(&self.request, ResponseCode::SUCCESS),
            Err(remark) => RemotingCommand::error_response(&self.request, ResponseCode::SYSTEM_ERROR, remark.clone()),
        };
        if let Some(header) = header {
            response = response.with_header(&header);
        }
        decorate(&self.send.config(), response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use remoting::header::CommandHeader;
    use remoting::protocol::name::TopicName;

    fn send_header(props: &str) -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: "replier".into(),
            topic: TopicName::new("C_REPLY_TOPIC").unwrap(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: -1,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some(props.into()),
            reconsume_times: None,
            unit_mode: None,
            batch: None,
            max_reconsume_times: None,
            broker_name: None,
        }
    }

    #[test]
    fn the_push_carries_javas_header_fields_as_strings() {
        let born: SocketAddr = "10.0.0.1:5555".parse().unwrap();
        let stored: SocketAddr = "10.0.0.2:10911".parse().unwrap();
        let push = push_request(&send_header("a\u{1}b\u{2}"), born, stored, "a\u{1}b\u{2}".into(), bytes::Bytes::from_static(b"hi"));
        assert_eq!(push.code, RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT.0);
        let ext = push.ext_fields.clone().unwrap();
        assert_eq!(ext.get("bornHost"), Some("10.0.0.1:5555"));
        assert_eq!(ext.get("storeHost"), Some("10.0.0.2:10911"));
        assert_eq!(ext.get("unitMode"), Some("false"));
        assert_eq!(ext.get("queueId"), Some("-1"));
        assert!(ext.get("storeTimestamp").is_some_and(|t| t.parse::<i64>().is_ok()));
        assert!(!ext.contains_key("reconsumeTimes"), "an absent optional is not sent");
        let back = ReplyMessageRequestHeader::read_from(&ext).unwrap();
        assert_eq!(back.topic, "C_REPLY_TOPIC");
        assert_eq!(push.body.as_deref(), Some(&b"hi"[..]));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_reply_whose_requester_is_unknown_is_still_stored_and_counted_as_a_put() {
        use crate::stats_manager::names;
        use remoting::protocol::broker::SendMessageRequestHeaderV2;
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::testing::broker(dir.path(), store::config::FlushDiskType::SyncFlush, store::config::BrokerRole::AsyncMaster);
        let (client, _server) = crate::testing::loopback(Arc::new(ReplyProcessor {
            send: broker.send_context(),
            producers: broker.producers.clone(),
            runtime: broker.runtime.clone(),
            pushes: Default::default(),
        }))
        .await;
        let mut h = send_header("");
        h.topic = TopicName::new("DefaultCluster_REPLY_TOPIC").unwrap();
        let request = RemotingCommand::request_with_header(RequestCode::SEND_REPLY_MESSAGE_V2, &SendMessageRequestHeaderV2::from(h)).with_body(b"re".to_vec());
        let response = crate::testing::call(&client, request).await;
        // As Java: the push decides the code, the stored copy fills in the header.
        assert_eq!(response.code, ResponseCode::SYSTEM_ERROR.0);
        assert_eq!(response.remark.as_deref(), Some("reply message properties[REPLY_TO_CLIENT] is null"));
        assert_eq!(response.decode_header::<SendMessageResponseHeader>().unwrap().queue_offset, 0);
        broker.broker_stats.tick(now_ms());
        let counted = |name, key| broker.broker_stats.item(name, key).map(|item| item.minute().sum);
        assert_eq!(counted(names::TOPIC_PUT_NUMS, "DefaultCluster_REPLY_TOPIC"), Some(1));
        assert!(counted(names::TOPIC_PUT_SIZE, "DefaultCluster_REPLY_TOPIC").is_some_and(|bytes| bytes > 2));
        assert_eq!(counted(names::BROKER_PUT_NUMS, "DefaultCluster"), Some(1));
    }

    #[tokio::test]
    async fn a_reply_without_a_requester_or_whose_requester_is_gone_fails_with_javas_remarks() {
        let push = RemotingCommand::request(RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT);
        assert_eq!(push_to(None, None, push.clone()).await, Err("reply message properties[REPLY_TO_CLIENT] is null".into()));
        assert_eq!(push_to(Some("127.0.0.1@1"), None, push).await, Err("push reply message fail, channel of <127.0.0.1@1> not found.".into()));
    }
}
