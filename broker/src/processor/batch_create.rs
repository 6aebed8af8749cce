//! 5.x's batch versions of topic and group creation: UPDATE_AND_CREATE_TOPIC_LIST (mqadmin
//! updateTopicList) and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (updateSubGroupList), as Java
//! 5.3.3's `AdminBrokerProcessor` answers them. Every entry is checked before any is applied, so a
//! bad entry leaves the broker's metadata as it was.

use remoting::fastjson;
use remoting::protocol::name::{GroupName, TopicName};
use remoting::protocol::perm;
use remoting::protocol::topic::TopicConfig;
use remoting::server::{ProcessError, ProcessResult};
use remoting::{RemotingCommand, ResponseCode};
use serde::Deserialize;

use super::admin::check_queue_nums;
use super::ok;
use crate::handles::AdminContext;
use crate::subscription_group::SubscriptionGroupConfig;
use crate::topic_config::system_topic;

/// `CreateTopicListRequestBody`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TopicList {
    #[serde(default)]
    topic_config_list: Vec<TopicConfig>,
}

/// `SubscriptionGroupList`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupList {
    #[serde(default)]
    group_config_list: Vec<SubscriptionGroupConfig>,
}

fn invalid(remark: impl Into<String>) -> ProcessError {
    ProcessError::new(ResponseCode::INVALID_PARAMETER, remark)
}

/// Checks one topic of a list as Java does (name, and no system topic: 5.x's
/// `validateSystemTopicWhenUpdateTopic` is true by default), plus the bounds this broker keeps on
/// every topic it creates.
fn check_topic(b: &AdminContext, tc: &TopicConfig) -> Result<TopicName, ProcessError> {
    let name = TopicName::new(tc.topic_name.as_str()).map_err(|e| invalid(e.to_string()))?;
    if system_topic::is_system_topic(&tc.topic_name) || tc.topic_name == b.config().broker_cluster_name {
        return Err(invalid(format!("The topic[{}] is conflict with system topic.", tc.topic_name)));
    }
    check_queue_nums("readQueueNums", tc.read_queue_nums, b.config().max_topic_queue_nums)?;
    check_queue_nums("writeQueueNums", tc.write_queue_nums, b.config().max_topic_queue_nums)?;
    if !(0..=perm::ALL).contains(&tc.perm) {
        return Err(invalid(format!("perm {} is not a combination of the permission bits 0..={}", tc.perm, perm::ALL)));
    }
    Ok(name)
}

pub fn create_topic_list(b: &AdminContext, request: &RemotingCommand) -> ProcessResult {
    let list: TopicList = fastjson::from_slice(request.body_bytes()).map_err(|e| invalid(format!("bad CreateTopicListRequestBody: {e}")))?;
    let mut checked = Vec::with_capacity(list.topic_config_list.len());
    for tc in list.topic_config_list {
        let name = check_topic(b, &tc)?;
        let mixed = tc.attributes.get(&format!("+{}", crate::topic_attributes::MESSAGE_TYPE)).map(String::as_str) == Some("MIXED");
        if mixed && !b.config().enable_mixed_message_type {
            return Err(invalid("MIXED message type is not supported."));
        }
        // Java answers at the first topic already configured so, without applying the rest.
        if b.topics.select(&name).as_ref() == Some(&tc) {
            return Ok(Some(ok(request)));
        }
        checked.push((name, tc));
    }
    // Each topic's attributes are its changes (`+key=value`, `-key`) applied to the current ones,
    // as UPDATE_AND_CREATE_TOPIC's; a refused change stops the list there, as Java's.
    for (name, tc) in checked {
        let changes = tc.attributes.clone();
        let altered = |current: Option<&remoting::protocol::topic::TopicConfig>| {
            let empty = std::collections::BTreeMap::new();
            crate::topic_attributes::alter(current.is_none(), current.map_or(&empty, |c| &c.attributes), &changes)
        };
        b.topics.update_with_attributes(&name, tc, altered).map_err(|e| ProcessError::system(e.to_string()))?.map_err(ProcessError::system)?;
    }
    b.membership.register_soon(false);
    Ok(Some(ok(request)))
}

pub fn create_group_list(b: &AdminContext, request: &RemotingCommand) -> ProcessResult {
    let list: GroupList = fastjson::from_slice(request.body_bytes()).map_err(|e| invalid(format!("bad SubscriptionGroupList: {e}")))?;
    let mut checked = Vec::with_capacity(list.group_config_list.len());
    for config in list.group_config_list {
        let group = GroupName::new(config.group_name.as_str()).map_err(|e| invalid(e.to_string()))?;
        // Its retry topic gets retryQueueNums queues: the same bound as a topic's.
        check_queue_nums("retryQueueNums", config.retry_queue_nums, b.config().max_topic_queue_nums)?;
        checked.push((group, config));
    }
    for (group, config) in checked {
        b.groups.update(&group, config).map_err(|e| ProcessError::system(e.to_string()))?;
    }
    Ok(Some(ok(request)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_read_javas_field_names() {
        let topics: TopicList = fastjson::from_slice(br#"{"topicConfigList":[{"topicName":"T","readQueueNums":2,"writeQueueNums":3,"perm":6}]}"#).unwrap();
        assert_eq!(topics.topic_config_list.len(), 1);
        assert_eq!((topics.topic_config_list[0].read_queue_nums, topics.topic_config_list[0].write_queue_nums), (2, 3));
        let groups: GroupList = fastjson::from_slice(br#"{"groupConfigList":[{"groupName":"G","retryQueueNums":1}]}"#).unwrap();
        assert_eq!(groups.group_config_list[0].group_name, "G");
    }
}
