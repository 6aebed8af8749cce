//! Server-side load balancing (Java 5.3.3's `QueryAssignmentProcessor`): QUERY_ASSIGNMENT answers a
//! consumer with `clientRebalance=false` the queues it holds and how it reads them (PULL or POP),
//! SET_MESSAGE_REQUEST_MODE (`mqadmin setConsumeMode`) sets that mode for a topic and a group.
//!
//! The queues of a topic are the whole cluster's, from the name server ([`TopicRoutes`]); asking it
//! runs as a task on the broker's runtime, answering through a [`Reply`], so no pool thread waits.

use std::sync::Arc;

use remoting::fastjson::{self, JsonStyle};
use remoting::protocol::name::GroupName;
use remoting::protocol::system_topic::RETRY_GROUP_TOPIC_PREFIX;
use remoting::server::{Channel, ProcessError, ProcessResult, Reply, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use serde::{Deserialize, Serialize};

use super::ok;
use crate::client::consumer_manager::ConsumerManager;
use crate::config::LiveConfig;
use crate::load_balance::{allocate_for_pop, sort_queues, MessageQueue, MessageRequestModes, Strategy, TopicRoutes};
use crate::pop::config_files::{MessageRequestMode, MessageRequestModeEntry};
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

/// `MixAll.LMQ_PREFIX` and `LMQ_QUEUE_ID`: a light message queue is one queue on this broker.
const LMQ_PREFIX: &str = "%LMQ%";
const LMQ_QUEUE_ID: i32 = 0;

/// `QueryAssignmentRequestBody`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueryAssignmentRequestBody {
    pub topic: Option<String>,
    pub consumer_group: Option<String>,
    pub client_id: Option<String>,
    pub strategy_name: Option<String>,
    pub message_model: Option<String>,
}

/// `MessageQueueAssignment` (`attachments` is never set by the broker, so never written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueueAssignment {
    pub message_queue: MessageQueue,
    pub mode: MessageRequestMode,
}

/// `QueryAssignmentResponseBody`: no assignments (`{}`) tells the client to keep what it has.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueryAssignmentResponseBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_queue_assignments: Option<Vec<MessageQueueAssignment>>,
}

pub struct QueryAssignmentProcessor {
    pub config: LiveConfig,
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub consumers: Arc<ConsumerManager>,
    pub modes: Arc<MessageRequestModes>,
    pub routes: Arc<TopicRoutes>,
    /// Where the name-server lookups wait.
    pub runtime: tokio::runtime::Handle,
}

impl RequestProcessor for QueryAssignmentProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        match request.request_code() {
            RequestCode::QUERY_ASSIGNMENT => self.query_assignment(channel, &request),
            RequestCode::SET_MESSAGE_REQUEST_MODE => self.set_mode(&request),
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(request: &RemotingCommand, what: &str) -> Result<T, ProcessError> {
    fastjson::from_slice(request.body_bytes()).map_err(|e| ProcessError::system(format!("{what} does not decode: {e}")))
}

/// What QUERY_ASSIGNMENT needs besides the processor's handles, moved into its task.
struct Query {
    topic: String,
    group: String,
    client_id: String,
    strategy_name: String,
    broadcasting: bool,
    mode: MessageRequestModeEntry,
}

impl QueryAssignmentProcessor {
    fn query_assignment(&self, channel: &Channel, request: &RemotingCommand) -> ProcessResult {
        let body: QueryAssignmentRequestBody = decode(request, "QueryAssignmentRequestBody")?;
        let (Some(topic), Some(group)) = (body.topic, body.consumer_group) else {
            return Err(ProcessError::system("QueryAssignmentRequestBody without topic or consumerGroup"));
        };
        let broadcasting = match body.message_model.as_deref() {
            Some("BROADCASTING") => true,
            Some("CLUSTERING") => false,
            other => return Err(ProcessError::system(format!("unknown messageModel {other:?}"))),
        };
        let mode = self.modes.get(&topic, &group).unwrap_or_else(|| self.default_mode(&topic, &group));
        let query =
            Query { topic, group, client_id: body.client_id.unwrap_or_default(), strategy_name: body.strategy_name.unwrap_or_default(), broadcasting, mode };
        let (reply, response) = (Reply::to(channel, request), ok(request));
        let (config, consumers, routes) = (self.config.clone(), self.consumers.clone(), self.routes.clone());
        self.runtime.spawn(async move {
            let queues = load_balance(&config, &consumers, &routes, &query).await;
            let assignments = queues.map(|mut queues| {
                // A `HashSet` in Java: each queue once (Java's order is the set's; ours is sorted).
                sort_queues(&mut queues);
                queues.dedup();
                queues.into_iter().map(|message_queue| MessageQueueAssignment { message_queue, mode: query.mode.mode }).collect()
            });
            let body = QueryAssignmentResponseBody { message_queue_assignments: assignments };
            reply.send(response.with_body(fastjson::to_vec(&body, JsonStyle::Fastjson)));
        });
        Ok(None)
    }

    /// Java's default when nothing was set: PULL for a retry topic, else
    /// `defaultMessageRequestMode` (with `defaultPopShareQueueNum` for POP).
    fn default_mode(&self, topic: &str, group: &str) -> MessageRequestModeEntry {
        let c = self.config.load();
        let mode = if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) { MessageRequestMode::Pull } else { c.default_message_request_mode };
        let pop_share_queue_num = if mode == MessageRequestMode::Pop { c.default_pop_share_queue_num } else { 0 };
        MessageRequestModeEntry { topic: Some(topic.to_owned()), consumer_group: Some(group.to_owned()), mode, pop_share_queue_num }
    }

    fn set_mode(&self, request: &RemotingCommand) -> ProcessResult {
        let body: MessageRequestModeEntry = decode(request, "SetMessageRequestModeRequestBody")?;
        let Some(topic) = body.topic.clone() else {
            return Err(ProcessError::system("SetMessageRequestModeRequestBody without topic"));
        };
        if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return Err(ProcessError::new(ResponseCode::NO_PERMISSION, "retry topic is not allowed to set mode"));
        }
        if self.topics.select(&topic).is_none() {
            return Err(ProcessError::new(ResponseCode::TOPIC_NOT_EXIST, format!("topic[{topic}] not exist")));
        }
        let group = body.consumer_group.clone().unwrap_or_default();
        // Java's `findSubscriptionGroupConfig`: created when `autoCreateSubscriptionGroup` is on.
        let auto_create = self.config.load().auto_create_subscription_group;
        if GroupName::new(group.clone()).ok().and_then(|g| self.groups.find_or_create(&g, auto_create)).is_none() {
            return Err(ProcessError::new(ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist"));
        }
        self.modes.set(&topic, &group, body).map_err(|e| ProcessError::system(e.to_string()))?;
        Ok(Some(ok(request)))
    }
}

/// Java's `doLoadBalance`: every queue for BROADCASTING; for CLUSTERING the client's share by
/// the named strategy (the pop variant in POP mode) over the group's live clients. `None`: no
/// answer (no route, no group, an unknown strategy), and the client keeps what it holds.
async fn load_balance(config: &LiveConfig, consumers: &ConsumerManager, routes: &TopicRoutes, q: &Query) -> Option<Vec<MessageQueue>> {
    if q.broadcasting {
        let queues = routes.subscribe_info(&q.topic).await;
        if queues.is_none() {
            tracing::warn!(group = q.group, topic = q.topic, "QueryLoad: no assignment, the topic does not exist");
        }
        return queues;
    }
    let mq_all = if q.topic.starts_with(LMQ_PREFIX) {
        vec![MessageQueue { topic: q.topic.clone(), broker_name: config.load().broker_name.clone(), queue_id: LMQ_QUEUE_ID }]
    } else {
        let Some(queues) = routes.subscribe_info(&q.topic).await else {
            if !q.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                tracing::warn!(group = q.group, topic = q.topic, "QueryLoad: no assignment, the topic does not exist");
            }
            return None;
        };
        queues
    };
    if !config.load().server_load_balancer_enable {
        return Some(mq_all);
    }
    let Some(cid_all) = consumers.group(&q.group).map(|g| g.client_ids()) else {
        tracing::warn!(group = q.group, topic = q.topic, "QueryLoad: no assignment, the group has no consumer");
        return None;
    };
    let Some(strategy) = Strategy::by_name(&q.strategy_name) else {
        tracing::warn!(strategy = q.strategy_name, "QueryLoad: unsupported strategy");
        return None;
    };
    let mut mq_all = mq_all;
    sort_queues(&mut mq_all);
    let allocated = match q.mode.mode {
        MessageRequestMode::Pop => allocate_for_pop(strategy, &q.client_id, &mq_all, &cid_all, q.mode.pop_share_queue_num),
        MessageRequestMode::Pull => strategy.allocate(&q.client_id, &mq_all, &cid_all),
    };
    match allocated {
        Ok(queues) => Some(queues),
        Err(e) => {
            tracing::error!(group = q.group, topic = q.topic, strategy = q.strategy_name, error = %e, "QueryLoad: allocation failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_reads_as_fastjson_writes_it() {
        let a = |queue_id| MessageQueueAssignment {
            message_queue: MessageQueue { topic: "T".into(), broker_name: "b".into(), queue_id },
            mode: MessageRequestMode::Pop,
        };
        let body = QueryAssignmentResponseBody { message_queue_assignments: Some(vec![a(-1)]) };
        assert_eq!(
            fastjson::to_string(&body, JsonStyle::Fastjson),
            r#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"b","queueId":-1,"topic":"T"},"mode":"POP"}]}"#
        );
        assert_eq!(fastjson::to_string(&QueryAssignmentResponseBody::default(), JsonStyle::Fastjson), "{}");
    }
}
