//! What a request touches (Java's `PlainAccessValidator.parse`): the topics and groups (as retry
//! topics) and the permission each needs, read from the header fields and, for a heartbeat, the
//! body. Batch sends and lite pulls are checked as single sends and pulls, which 4.9.7 leaves
//! unchecked (a client could publish anywhere through SEND_BATCH_MESSAGE).

use std::collections::HashMap;

use remoting::fastjson;
use remoting::protocol::heartbeat::HeartbeatData;
use remoting::{RemotingCommand, RequestCode};

use super::config::perm;

const RETRY_PREFIX: &str = "%RETRY%";

/// Java's `Permission.ADMIN_CODE`, and the ACL codes (which 4.9.7 leaves to any account, though
/// GET_BROKER_CLUSTER_ACL_CONFIG hands out every secret key), the offset reset, the batch creates
/// the clean-ups that delete data and 5.x's store tuning codes.
pub fn needs_admin(code: i32) -> bool {
    const ADMIN: [i32; 20] = [
        RequestCode::UPDATE_AND_CREATE_TOPIC.0,
        RequestCode::UPDATE_BROKER_CONFIG.0,
        RequestCode::DELETE_TOPIC_IN_BROKER.0,
        RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP.0,
        RequestCode::DELETE_SUBSCRIPTIONGROUP.0,
        super::admin::UPDATE_AND_CREATE_ACL_CONFIG.0,
        super::admin::DELETE_ACL_CONFIG.0,
        super::admin::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG.0,
        // Every account's secret key.
        super::admin::GET_BROKER_CLUSTER_ACL_CONFIG.0,
        RequestCode::INVOKE_BROKER_TO_RESET_OFFSET.0,
        RequestCode::UPDATE_NAMESRV_CONFIG.0,
        // 5.x's batch creates, and the destructive clean-ups (ours: admin only).
        RequestCode::UPDATE_AND_CREATE_TOPIC_LIST.0,
        RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST.0,
        RequestCode::CLEAN_EXPIRED_CONSUMEQUEUE.0,
        RequestCode::CLEAN_UNUSED_TOPIC.0,
        RequestCode::DELETE_EXPIRED_COMMITLOG.0,
        // 5.x's codes that change how the store reads or what its checkpoint says (ours: admin only).
        RequestCode::UPDATE_COLD_DATA_FLOW_CTR_CONFIG.0,
        RequestCode::REMOVE_COLD_DATA_FLOW_CTR_CONFIG.0,
        RequestCode::SET_COMMITLOG_READ_MODE.0,
        RequestCode::RESET_MASTER_FLUSH_OFFSET.0,
    ];
    ADMIN.contains(&code)
}

fn retry(group: &str) -> String {
    format!("{RETRY_PREFIX}{group}")
}

/// The resources of `request` with the permission each needs; an error is Java's message.
pub fn needed(request: &RemotingCommand) -> Result<HashMap<String, u8>, String> {
    let mut needed = HashMap::new();
    let Some(ext) = request.ext_fields.as_ref() else { return Ok(needed) };
    let field = |k: &str| ext.get(k).cloned();
    let mut add = |resource: Option<String>, p: u8| {
        if let Some(r) = resource {
            needed.insert(r, p);
        }
    };
    let code = request.code;
    let is = |c: RequestCode| code == c.0;
    if is(RequestCode::SEND_MESSAGE) {
        let topic = field("topic");
        match topic {
            // Java reads a "group" field the V1 header does not have: nothing more is checked.
            Some(t) if t.starts_with(RETRY_PREFIX) => add(field("group").map(|g| retry(&g)), perm::SUB),
            t => add(t, perm::PUB),
        }
    } else if is(RequestCode::SEND_MESSAGE_V2) || is(RequestCode::SEND_BATCH_MESSAGE) {
        match field("b") {
            Some(t) if t.starts_with(RETRY_PREFIX) => add(field("a").map(|g| retry(&g)), perm::SUB),
            t => add(t, perm::PUB),
        }
    } else if is(RequestCode::CONSUMER_SEND_MSG_BACK) {
        add(field("group").map(|g| retry(&g)), perm::SUB);
    } else if is(RequestCode::PULL_MESSAGE) || is(RequestCode::LITE_PULL_MESSAGE) {
        add(field("topic"), perm::SUB);
        add(field("consumerGroup").map(|g| retry(&g)), perm::SUB);
    } else if is(RequestCode::QUERY_MESSAGE) {
        add(field("topic"), perm::SUB);
    } else if is(RequestCode::HEART_BEAT) {
        let data: HeartbeatData = fastjson::from_slice(request.body_bytes()).map_err(|e| format!("heartbeat body is not valid HeartbeatData: {e}"))?;
        for consumer in &data.consumer_data_set {
            add(Some(retry(&consumer.group_name)), perm::SUB);
            for sub in &consumer.subscription_data_set {
                add(Some(sub.topic.clone()), perm::SUB);
            }
        }
    } else if is(RequestCode::UNREGISTER_CLIENT) || is(RequestCode::GET_CONSUMER_LIST_BY_GROUP) {
        add(field("consumerGroup").map(|g| retry(&g)), perm::SUB);
    } else if is(RequestCode::UPDATE_CONSUMER_OFFSET) {
        add(field("consumerGroup").map(|g| retry(&g)), perm::SUB);
        add(field("topic"), perm::SUB);
    }
    Ok(needed)
}
