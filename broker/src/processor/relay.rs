//! Admin requests the broker answers by asking the group's clients (Java `Broker2Client` and
//! `AdminBrokerProcessor.callConsumer`): INVOKE_BROKER_TO_RESET_OFFSET tells every client of the
//! group to move its offsets (RESET_CONSUMER_CLIENT_OFFSET), INVOKE_BROKER_TO_GET_CONSUMER_STATUS
//! collects their offsets (GET_CONSUMER_STATUS_FROM_CLIENT), GET_CONSUMER_RUNNING_INFO and
//! CONSUME_MESSAGE_DIRECTLY are forwarded to one named client and its answer returned unchanged.
//!
//! A relay waits on a client for seconds: it runs as a task on the broker's runtime and answers
//! through a [`Reply`], so no pool thread waits with it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use remoting::call::{self, CallError, RemotingRequest};
use remoting::connection::ChannelError;
use remoting::fastjson::{self, JsonStyle};
use remoting::protocol::name::{GroupName, TopicName};
use remoting::server::{Channel, ProcessError, ProcessResult, Reply, RequestProcessor};
use remoting::{command_header, RemotingCommand, RequestCode, ResponseCode};
use serde::Deserialize;

use store::store::MessageStore;

use super::ok;
use crate::client::consumer_manager::ConsumerManager;
use crate::client::ClientChannelInfo;
use crate::config::LiveConfig;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

/// Java's `Broker2Client.callClient` timeout.
const CALL_CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Java's timeout for each client's GET_CONSUMER_STATUS_FROM_CLIENT.
const CONSUMER_STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// `MQVersion.Version.V3_0_7_SNAPSHOT.ordinal()`: the first client that resets offsets and
/// reports its status when the broker asks.
const V3_0_7_SNAPSHOT: i32 = 28;
/// `MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()`: the first client that answers running-info and
/// consume-directly requests.
const V3_1_8_SNAPSHOT: i32 = 62;

/// The name of a client version below V3_1_8_SNAPSHOT, for the remarks about clients too old to
/// answer (newer ones never get those remarks); a negative one reads as the oldest.
fn old_version_desc(version: i32) -> String {
    remoting::version::version_desc(version.max(0))
}

command_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET. 5.x adds queueId (-1: every queue) and offset for a reset
    /// of one queue (mqadmin 5.x `resetOffsetByTime -b -q`).
    pub struct ResetOffsetHeader {
        pub topic: TopicName => "topic",
        pub group: GroupName => "group",
        pub timestamp: i64 => "timestamp",
        pub is_force: bool => "isForce",
        pub queue_id: Option<i32> => "queueId",
        pub offset: Option<i64> => "offset",
    }
}

command_header! {
    /// RESET_CONSUMER_CLIENT_OFFSET, as the broker sends it to the clients.
    pub struct ResetClientOffsetHeader {
        pub topic: String => "topic",
        pub group: String => "group",
        pub timestamp: i64 => "timestamp",
        pub is_force: bool => "isForce",
    }
}

command_header! {
    /// INVOKE_BROKER_TO_GET_CONSUMER_STATUS; `clientAddr` is the one client asked, or every one.
    pub struct ConsumerStatusHeader {
        pub topic: TopicName => "topic",
        pub group: GroupName => "group",
        pub client_addr: Option<String> => "clientAddr",
    }
}

command_header! {
    /// GET_CONSUMER_STATUS_FROM_CLIENT, as the broker sends it.
    pub struct ClientStatusHeader {
        pub topic: String => "topic",
        pub group: String => "group",
    }
}

/// RESET_CONSUMER_CLIENT_OFFSET to one client (sent oneway): the queues' new offsets in the body.
struct ResetClientOffset {
    header: ResetClientOffsetHeader,
    body: bytes::Bytes,
}

impl RemotingRequest for ResetClientOffset {
    const CODE: RequestCode = RequestCode::RESET_CONSUMER_CLIENT_OFFSET;
    type Response = ();

    fn into_command(self) -> RemotingCommand {
        RemotingCommand::request_with_header(Self::CODE, &self.header).with_body(self.body)
    }

    fn parse_response(response: RemotingCommand) -> Result<(), CallError> {
        call::expect_success(response).map(drop)
    }
}

/// GET_CONSUMER_STATUS_FROM_CLIENT to one client: its offsets as the table's JSON, or None when
/// its answer has no body or one that does not read.
struct ClientStatus {
    header: ClientStatusHeader,
}

impl RemotingRequest for ClientStatus {
    const CODE: RequestCode = RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT;
    type Response = Option<String>;

    fn into_command(self) -> RemotingCommand {
        RemotingCommand::request_with_header(Self::CODE, &self.header)
    }

    fn parse_response(response: RemotingCommand) -> Result<Option<String>, CallError> {
        let answer = call::expect_success(response)?;
        Ok(answer.body.as_deref().and_then(client_offsets_json))
    }
}

command_header! {
    /// What GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY need to find the client.
    pub struct CallConsumerHeader {
        pub consumer_group: GroupName => "consumerGroup",
        pub client_id: String => "clientId",
        pub msg_id: Option<String> => "msgId",
        pub topic: Option<String> => "topic",
    }
}

/// A `MessageQueue` as the Java client writes it.
#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[serde(rename_all = "camelCase")]
struct MessageQueue {
    broker_name: String,
    queue_id: i32,
    topic: String,
}

/// `GetConsumerStatusBody` as a client answers it: its offsets by queue.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ClientStatusBody {
    #[serde(default)]
    message_queue_table: BTreeMap<String, i64>,
}

/// The offset a queue is reset to (Java `Broker2Client.resetOffset`): the offset found for the
/// time (0 when none), unless that is not behind the group's and the reset is not forced.
pub fn reset_target(consumer_offset: i64, timestamp_offset: i64, force: bool) -> i64 {
    let timestamp_offset = timestamp_offset.max(0);
    if force || timestamp_offset < consumer_offset {
        timestamp_offset
    } else {
        consumer_offset
    }
}

/// `ResetOffsetBody`: `{"offsetTable":{<MessageQueue>:offset,...}}`, the keys written as fastjson
/// writes a map keyed by objects.
pub fn offset_table_json(entries: &[(String, String, i32, i64)]) -> String {
    let table: Vec<String> = entries.iter().map(|(topic, broker, q, offset)| format!("{}:{offset}", super::admin::mq_key(topic, broker, *q))).collect();
    format!("{{{}}}", table.join(","))
}

/// `ResetOffsetBodyForC`, what Java sends the clients when the admin request came from C++:
/// `{"offsetTable":[{"brokerName":..,"offset":..,"queueId":..,"topic":..},...]}`.
pub fn offset_list_for_c_json(entries: &[(String, String, i32, i64)]) -> String {
    let list: Vec<serde_json::Value> =
        entries.iter().map(|(topic, broker, q, offset)| serde_json::json!({ "brokerName": broker, "offset": offset, "queueId": q, "topic": topic })).collect();
    fastjson::to_string(&serde_json::json!({ "offsetTable": list }), JsonStyle::Fastjson)
}

/// A client's `messageQueueTable` written back with fastjson's object keys; keys that are not
/// queues are dropped rather than passed on unchecked.
fn client_offsets_json(body: &[u8]) -> Option<String> {
    let status: ClientStatusBody = fastjson::from_slice(body).ok()?;
    let mut entries: Vec<(String, String, i32, i64)> = status
        .message_queue_table
        .iter()
        .filter_map(|(key, offset)| serde_json::from_str::<MessageQueue>(key).ok().map(|mq| (mq.topic, mq.broker_name, mq.queue_id, *offset)))
        .collect();
    entries.sort();
    Some(offset_table_json(&entries))
}

/// What Java's `UtilAll.exceptionSimpleDesc` says of a failed call to a client.
fn describe(e: &ChannelError) -> String {
    match e {
        ChannelError::Timeout { addr, timeout, .. } => format!(
            "org.apache.rocketmq.remoting.exception.RemotingTimeoutException: wait response on the channel <{addr}> timeout, {}(ms)",
            timeout.as_millis()
        ),
        ChannelError::Closed(addr) => format!("org.apache.rocketmq.remoting.exception.RemotingSendRequestException: send request to <{addr}> failed"),
    }
}

pub struct RelayProcessor {
    pub config: LiveConfig,
    /// Offsets by time and the queues' bounds; messages consumed directly; the role.
    pub store: Arc<MessageStore>,
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub offsets: Arc<ConsumerOffsetManager>,
    pub consumers: Arc<ConsumerManager>,
    /// Where the calls to clients wait.
    pub runtime: tokio::runtime::Handle,
}

impl RelayProcessor {
    fn config(&self) -> arc_swap::Guard<Arc<crate::config::BrokerConfig>> {
        self.config.load()
    }

    fn is_slave(&self) -> bool {
        self.store.role() == store::config::BrokerRole::Slave
    }
}

impl RequestProcessor for RelayProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        match request.request_code() {
            RequestCode::INVOKE_BROKER_TO_RESET_OFFSET => self.reset_offset(&request),
            RequestCode::INVOKE_BROKER_TO_GET_CONSUMER_STATUS => self.consumer_status(channel, &request),
            code @ (RequestCode::GET_CONSUMER_RUNNING_INFO | RequestCode::CONSUME_MESSAGE_DIRECTLY) => self.call_consumer(channel, code, request),
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

impl RelayProcessor {
    /// Java 4.9's `Broker2Client.resetOffset` (5.x's too with `useServerSideResetOffset=false`):
    /// computes each queue's target, sends it oneway to every client of the group (which moves
    /// and commits its offsets), and answers the table. An offline group is answered
    /// CONSUMER_NOT_ONLINE, on which mqadmin commits the offsets itself (UPDATE_CONSUMER_OFFSET).
    fn reset_offset(&self, request: &RemotingCommand) -> ProcessResult {
        let b = self;
        let h: ResetOffsetHeader = request.decode_header()?;
        if b.config().use_server_side_reset_offset {
            return self.reset_on_broker(request, &h);
        }
        let Some(tc) = b.topics.select(&h.topic) else {
            return Err(ProcessError::system(format!("[reset-offset] reset offset failed, no topic in this broker. topic={}", h.topic)));
        };
        let broker_name = &b.config().broker_name;
        let mut entries = Vec::new();
        for q in 0..tc.write_queue_nums.clamp(0, b.config().max_topic_queue_nums as i32) {
            let Some(consumer_offset) = b.offsets.query_offset(&h.group, &h.topic, q).filter(|o| *o != -1) else {
                return Err(ProcessError::system(format!("THe consumer group <{}> not exist", h.group)));
            };
            let timestamp_offset =
                if h.timestamp == -1 { b.store.max_offset_in_queue(&h.topic, q) } else { b.store.offset_in_queue_by_time(&h.topic, q, h.timestamp) };
            entries.push((h.topic.to_string(), broker_name.clone(), q, reset_target(consumer_offset, timestamp_offset, h.is_force)));
        }
        let body = format!(r#"{{"offsetTable":{}}}"#, offset_table_json(&entries));
        // Java sends the C++ body to every client when the request came from a C++ admin tool.
        let client_body = if request.language.name() == "CPP" { offset_list_for_c_json(&entries) } else { body.clone() };
        let clients: Vec<ClientChannelInfo> = b.consumers.group(&h.group).map(|g| g.channels.into_values().collect()).unwrap_or_default();
        if clients.is_empty() {
            return Err(ProcessError::new(
                ResponseCode::CONSUMER_NOT_ONLINE,
                format!("Consumer not online, so can not reset offset, Group: {} Topic: {} Timestamp: {}", h.group, h.topic, h.timestamp),
            ));
        }
        if let Some(old) = clients.iter().find(|c| c.version < V3_0_7_SNAPSHOT) {
            return Err(ProcessError::system(format!("the client does not support this feature. version={}", old_version_desc(old.version))));
        }
        let header = ResetClientOffsetHeader { topic: h.topic.to_string(), group: h.group.to_string(), timestamp: h.timestamp, is_force: false };
        let client_body = bytes::Bytes::from(client_body);
        for client in &clients {
            let reset = ResetClientOffset { header: header.clone(), body: client_body.clone() };
            match client.channel.invoke_oneway(reset.into_command()) {
                Ok(()) => tracing::info!(topic = %h.topic, group = %h.group, client = client.client_id, "[reset-offset] reset offset sent"),
                Err(e) => tracing::warn!(topic = %h.topic, group = %h.group, client = client.client_id, error = %e, "[reset-offset] reset offset not sent"),
            }
        }
        Ok(Some(ok(request).with_body(body)))
    }

    /// Java 5.x's `resetOffsetInner` (`useServerSideResetOffset`, its default): every queue of the
    /// topic (or the one named, to the offset given in its range) is set for the group to the
    /// offset found for the time (-1: the queue's end), whether the group ever committed or is
    /// online; each queue's next pull answers OFFSET_MOVED to it, and the clients' commits are
    /// held off until then.
    fn reset_on_broker(&self, request: &RemotingCommand, h: &ResetOffsetHeader) -> ProcessResult {
        let b = self;
        if b.is_slave() {
            return Err(ProcessError::system("Can not reset offset in slave broker"));
        }
        let Some(tc) = b.topics.select(&h.topic) else {
            return Err(ProcessError::new(ResponseCode::TOPIC_NOT_EXIST, format!("Topic {} does not exist", h.topic)));
        };
        if b.groups.select(&h.group).is_none() {
            return Err(ProcessError::new(ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, format!("Group {} does not exist", h.group)));
        }
        let by_time = |queue_id: i32| {
            if h.timestamp < 0 {
                b.store.max_offset_in_queue(&h.topic, queue_id)
            } else {
                b.store.offset_in_queue_by_time(&h.topic, queue_id, h.timestamp)
            }
        };
        let mut targets = Vec::new();
        match h.queue_id.filter(|q| *q >= 0) {
            Some(queue_id) => {
                let offset = match h.offset.filter(|o| *o != -1) {
                    Some(offset) => {
                        let (min, max) = (b.store.min_offset_in_queue(&h.topic, queue_id), b.store.max_offset_in_queue(&h.topic, queue_id));
                        if (min >= 0 && offset < min) || offset > max + 1 {
                            return Err(ProcessError::system(format!("Target offset {offset} not in consume queue range [{min}-{max}]")));
                        }
                        offset
                    }
                    None => by_time(queue_id),
                };
                targets.push((queue_id, offset));
            }
            None => targets.extend((0..tc.read_queue_nums.clamp(0, b.config().max_topic_queue_nums as i32)).map(|q| (q, by_time(q)))),
        }
        if targets.is_empty() {
            return Err(ProcessError::system("No queues to reset."));
        }
        let broker_name = b.config().broker_name.clone();
        let mut entries = Vec::new();
        for (queue_id, offset) in targets {
            b.offsets.assign_reset_offset(&h.group, &h.topic, queue_id, offset);
            entries.push((h.topic.to_string(), broker_name.clone(), queue_id, offset));
        }
        tracing::info!(topic = %h.topic, group = %h.group, queues = entries.len(), "reset offset on the broker");
        Ok(Some(ok(request).with_body(format!(r#"{{"offsetTable":{}}}"#, offset_table_json(&entries)))))
    }

    /// Java's `Broker2Client.getConsumeStatus`: asks the group's clients (or the one named) for
    /// their offsets; clients that fail or time out are left out of the table, as in Java.
    fn consumer_status(&self, channel: &Channel, request: &RemotingCommand) -> ProcessResult {
        let b = self;
        let h: ConsumerStatusHeader = request.decode_header()?;
        let clients: Vec<ClientChannelInfo> = b.consumers.group(&h.group).map(|g| g.channels.into_values().collect()).unwrap_or_default();
        if clients.is_empty() {
            return Err(ProcessError::system(format!("No Any Consumer online in the consumer group: [{}]", h.group)));
        }
        if let Some(old) = clients.iter().find(|c| c.version < V3_0_7_SNAPSHOT) {
            return Err(ProcessError::system(format!("the client does not support this feature. version={}", old_version_desc(old.version))));
        }
        let only = h.client_addr.filter(|c| !c.trim().is_empty());
        let asked: Vec<ClientChannelInfo> = match &only {
            Some(id) => clients.into_iter().filter(|c| &c.client_id == id).take(1).collect(),
            None => clients,
        };
        let header = ClientStatusHeader { topic: h.topic.to_string(), group: h.group.to_string() };
        let reply = Reply::to(channel, request);
        let response = ok(request);
        b.runtime.spawn(async move {
            let mut table = BTreeMap::new();
            for client in asked {
                // Through the connection's own `invoke`, which every kind of client connection has.
                let asked = client.channel.invoke(ClientStatus { header: header.clone() }.into_command(), CONSUMER_STATUS_TIMEOUT).await;
                match asked.map_err(CallError::from).and_then(ClientStatus::parse_response) {
                    Ok(Some(offsets)) => {
                        table.insert(client.client_id.clone(), offsets);
                    }
                    // As Java: a client that refuses, or answers without offsets, is left out.
                    Ok(None) | Err(CallError::Refused { .. } | CallError::BadResponse { .. }) => {}
                    Err(CallError::Client(e)) => tracing::warn!(group = header.group, client = client.client_id, error = %e, "[get-consumer-status] no answer"),
                }
            }
            let entries: Vec<String> = table.iter().map(|(id, offsets)| format!("{}:{offsets}", fastjson::to_string(id, JsonStyle::Fastjson))).collect();
            reply.send(response.with_body(format!(r#"{{"consumerTable":{{{}}},"messageQueueTable":{{}}}}"#, entries.join(","))));
        });
        Ok(None)
    }

    /// Java's `callConsumer`: the request's fields and body go to the named client under the
    /// same code, and its answer comes back as it is.
    fn call_consumer(&self, channel: &Channel, code: RequestCode, request: RemotingCommand) -> ProcessResult {
        let b = self;
        let h: CallConsumerHeader = request.decode_header()?;
        let mut ext = request.ext_fields.clone().unwrap_or_default();
        let mut body = request.body.clone();
        if code == RequestCode::CONSUME_MESSAGE_DIRECTLY {
            ext.insert("brokerName".into(), b.config().broker_name.clone());
            if let Some(tc) = h.topic.as_deref().filter(|t| !t.is_empty()).and_then(|t| b.topics.select(t)) {
                ext.insert("topicSysFlag".into(), tc.topic_sys_flag.to_string());
            }
            if let Some(group) = b.groups.select(&h.consumer_group) {
                ext.insert("groupSysFlag".into(), group.group_sys_flag.to_string());
            }
            // The client consumes the stored message, which the broker reads by the id's offset.
            if let Some(bytes) =
                h.msg_id.as_deref().and_then(store::message::decode_offset_message_id).and_then(|(_, offset)| b.store.look_message_by_offset(offset))
            {
                body = Some(bytes);
            }
        }
        let Some(client) = b.consumers.group(&h.consumer_group).and_then(|g| g.channels.into_values().find(|c| c.client_id == h.client_id)) else {
            return Err(ProcessError::system(format!("The Consumer <{}> <{}> not online", h.consumer_group, h.client_id)));
        };
        if client.version < V3_1_8_SNAPSHOT {
            return Err(ProcessError::system(format!(
                "The Consumer <{}> Version <{}> too low to finish, please upgrade it to V3_1_8_SNAPSHOT",
                h.client_id,
                old_version_desc(client.version)
            )));
        }
        let mut forwarded = RemotingCommand::request(code);
        forwarded.ext_fields = Some(ext);
        forwarded.body = body;
        let reply = Reply::to(channel, &request);
        let (group, client_id) = (h.consumer_group.to_string(), h.client_id);
        b.runtime.spawn(async move {
            match client.channel.invoke(forwarded, CALL_CLIENT_TIMEOUT).await {
                Ok(answer) => reply.send(answer),
                Err(e @ ChannelError::Timeout { .. }) => {
                    reply.error(ResponseCode::CONSUME_MSG_TIMEOUT, format!("consumer <{group}> <{client_id}> Timeout: {}", describe(&e)))
                }
                Err(e) => reply.error(ResponseCode::SYSTEM_ERROR, format!("invoke consumer <{group}> <{client_id}> Exception: {}", describe(&e))),
            }
        });
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_moves_back_and_forward_only_when_forced() {
        assert_eq!(reset_target(10, 4, false), 4);
        assert_eq!(reset_target(10, 14, false), 10);
        assert_eq!(reset_target(10, 14, true), 14);
        // No message at or after the time: Java resets to 0.
        assert_eq!(reset_target(10, -1, false), 0);
    }

    #[test]
    fn the_offset_table_reads_as_fastjson_writes_it() {
        let table = offset_table_json(&[("T".into(), "b".into(), 0, 5), ("T".into(), "b".into(), 1, 7)]);
        assert_eq!(table, r#"{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:7}"#);
    }

    #[test]
    fn a_cpp_tool_gets_the_list_body() {
        assert_eq!(offset_list_for_c_json(&[("T".into(), "b".into(), 2, 9)]), r#"{"offsetTable":[{"brokerName":"b","offset":9,"queueId":2,"topic":"T"}]}"#);
    }

    #[test]
    fn a_clients_status_is_passed_on_with_object_keys() {
        let body = br#"{"messageQueueTable":{{"brokerName":"b","queueId":1,"topic":"T"}:7,{"brokerName":"b","queueId":0,"topic":"T"}:3}}"#;
        assert_eq!(
            client_offsets_json(body).as_deref(),
            Some(r#"{{"brokerName":"b","queueId":0,"topic":"T"}:3,{"brokerName":"b","queueId":1,"topic":"T"}:7}"#)
        );
        assert_eq!(client_offsets_json(b"not json"), None);
    }

    #[test]
    fn old_clients_are_named_as_java_names_them() {
        assert_eq!(old_version_desc(V3_0_7_SNAPSHOT), "V3_0_7_SNAPSHOT");
        assert_eq!(old_version_desc(V3_1_8_SNAPSHOT), "V3_1_8_SNAPSHOT");
        assert_eq!(old_version_desc(-3), "V3_0_0_SNAPSHOT");
    }
}
