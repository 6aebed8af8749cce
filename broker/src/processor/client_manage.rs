//! HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG (Java `ClientManageProcessor`).

use std::time::Instant;

use remoting::fastjson;
use remoting::protocol::broker::{ConsumerGroupHeader, UnregisterClientRequestHeader};
use remoting::protocol::heartbeat::HeartbeatData;
use remoting::protocol::name::GroupName;
use remoting::protocol::perm;
use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode};
use serde::Deserialize;
use tracing::{debug, info, warn};

use super::ok;
use crate::client::consumer_manager::ConsumerRegistration;
use crate::client::ClientChannelInfo;
use crate::handles::ClientContext;

pub struct ClientManageProcessor {
    pub ctx: ClientContext,
}

impl RequestProcessor for ClientManageProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        match request.request_code() {
            RequestCode::HEART_BEAT => self.heartbeat(channel, &request),
            RequestCode::UNREGISTER_CLIENT => self.unregister(channel, &request),
            RequestCode::CHECK_CLIENT_CONFIG => self.check_client_config(&request),
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

impl ClientManageProcessor {
    fn heartbeat(&self, channel: &Channel, request: &RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        let data: HeartbeatData =
            fastjson::from_slice(request.body_bytes()).map_err(|e| ProcessError::system(format!("heartbeat body is not valid HeartbeatData: {e}")))?;
        let client = ClientChannelInfo {
            channel: std::sync::Arc::new(channel.clone()),
            client_id: data.client_id.clone(),
            language: request.language,
            version: request.version,
            last_update: Instant::now(),
        };
        for consumer in &data.consumer_data_set {
            // A group name that could not name its retry topic is not taken (Java refuses to create
            // such a group; the Java client never sends one).
            let name = GroupName::new(consumer.group_name.as_str()).and_then(|g| g.retry_topic().map(|retry| (g, retry)));
            let Ok((group_name, retry)) = name else {
                warn!(group = consumer.group_name, client = data.client_id, "heartbeat for an illegal consumer group ignored");
                continue;
            };
            if let Some(group) = b.groups.find_or_create(&group_name, b.config.load().auto_create_subscription_group) {
                let obtained = b.topics.create_topic_in_send_message_back_method(&retry, group.retry_queue_nums, perm::READ | perm::WRITE, 0);
                if obtained.was_created() {
                    b.membership.register_soon(false);
                }
            }
            let changed = b.consumers.register(ConsumerRegistration {
                group: &consumer.group_name,
                client: client.clone(),
                consume_type: &consumer.consume_type,
                message_model: &consumer.message_model,
                consume_from_where: &consumer.consume_from_where,
                subscriptions: &consumer.subscription_data_set,
            });
            if changed {
                info!(group = consumer.group_name, client = data.client_id, "consumer group changed");
                notify_consumer_ids_changed(b, &consumer.group_name);
            }
        }
        for producer in &data.producer_data_set {
            b.producers.register(&producer.group_name, client.clone());
        }
        Ok(Some(ok(request)))
    }

    fn unregister(&self, channel: &Channel, request: &RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        let h: UnregisterClientRequestHeader = request.decode_header()?;
        if let Some(group) = h.producer_group.as_deref() {
            b.producers.unregister(group, channel);
        }
        if let Some(group) = h.consumer_group.as_deref() {
            if b.consumers.unregister(group, channel) {
                notify_consumer_ids_changed(b, group);
            }
        }
        Ok(Some(ok(request)))
    }

    fn check_client_config(&self, request: &RemotingCommand) -> ProcessResult {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Body {
            subscription_data: Option<remoting::protocol::heartbeat::SubscriptionData>,
        }
        let body: Body = fastjson::from_slice(request.body_bytes()).map_err(|e| ProcessError::system(format!("bad CHECK_CLIENT_CONFIG body: {e}")))?;
        let checked =
            body.subscription_data.as_ref().map_or(Ok(()), |sub| crate::filter::check_subscription(self.ctx.config.load().enable_property_filter, sub));
        match checked {
            Ok(()) => Ok(Some(ok(request))),
            Err((code, remark)) => Err(ProcessError::new(code, remark)),
        }
    }
}

/// Tells every member of a group that membership changed (oneway), unless the group opted out.
pub fn notify_consumer_ids_changed(b: &ClientContext, group: &str) {
    if !b.config.load().notify_consumer_ids_changed_enable {
        return;
    }
    if b.groups.select(group).is_some_and(|g| !g.notify_consumer_ids_changed_enable) {
        return;
    }
    let Some(info) = b.consumers.group(group) else { return };
    let Ok(consumer_group) = GroupName::new(group) else { return };
    let header = ConsumerGroupHeader { consumer_group };
    for client in info.channels.values() {
        let cmd = RemotingCommand::request_with_header(RequestCode::NOTIFY_CONSUMER_IDS_CHANGED, &header);
        if let Err(e) = client.channel.invoke_oneway(cmd) {
            debug!(client = client.client_id, error = %e, "notify consumer ids changed failed");
        }
    }
}
