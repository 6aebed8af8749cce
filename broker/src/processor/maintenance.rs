//! The smaller admin codes of mqadmin: GET_SYSTEM_TOPIC_LIST_FROM_BROKER (exportMetadata),
//! CLEAN_EXPIRED_CONSUMEQUEUE (cleanExpiredCQ), DELETE_EXPIRED_COMMITLOG (deleteExpiredCommitLog),
//! CLEAN_UNUSED_TOPIC (cleanUnusedTopic), 5.x's UPDATE_AND_CREATE_TOPIC_LIST and
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (updateTopicList, updateSubGroupList),
//! QUERY_CONSUME_QUEUE (queryCq) and GET_ALL_PRODUCER_INFO (producer), as Java's
//! `AdminBrokerProcessor` answers them.

use std::collections::BTreeMap;
use std::time::Instant;

use remoting::fastjson::{self, JsonStyle};
use remoting::protocol::system_topic;
use remoting::server::{Channel, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode};
use serde::Serialize;

use super::ok;
use crate::client::ClientChannelInfo;
use crate::handles::AdminContext;

/// 5.x's `ProducerInfo`.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProducerInfo {
    client_id: String,
    language: &'static str,
    last_update_timestamp: i64,
    #[serde(rename = "remoteIP")]
    remote_ip: String,
    version: i32,
}

impl ProducerInfo {
    fn of(c: &ClientChannelInfo, now_ms: i64, now: Instant) -> ProducerInfo {
        let age_ms = i64::try_from(now.saturating_duration_since(c.last_update).as_millis()).unwrap_or(i64::MAX);
        ProducerInfo {
            client_id: c.client_id.clone(),
            language: c.language.name(),
            last_update_timestamp: now_ms.saturating_sub(age_ms),
            // Netty's `SocketAddress.toString()`: "/ip:port".
            remote_ip: format!("/{}", c.channel.remote_addr()),
            version: c.version,
        }
    }
}

/// `ProducerTableInfo`: `{"data":{group:[ProducerInfo...]}}`.
pub fn producer_table_json(table: &BTreeMap<String, Vec<ProducerInfo>>) -> Vec<u8> {
    fastjson::to_vec(&serde_json::json!({ "data": table }), JsonStyle::Fastjson)
}

/// What Java 5.3.3's `TopicValidator.getSystemTopicSet()` holds on a running broker: the static
/// set and every topic the broker creates as a system topic at start.
pub fn system_topics(config: &crate::config::BrokerConfig, timer_wheel_enable: bool) -> Vec<String> {
    let mut topics: Vec<String> = system_topic::SYSTEM_TOPICS.iter().map(|t| t.to_string()).collect();
    topics.extend(crate::topic_config::system_topics(config, timer_wheel_enable).into_iter().map(|tc| tc.topic_name));
    topics.sort();
    topics.dedup();
    topics
}

/// `TopicList`: `{"topicList":[...]}` (Java leaves out the null brokerAddr).
pub fn topic_list_json(topics: &[String]) -> Vec<u8> {
    fastjson::to_vec(&serde_json::json!({ "topicList": topics }), JsonStyle::Fastjson)
}

pub struct MaintenanceProcessor {
    pub ctx: AdminContext,
}

impl RequestProcessor for MaintenanceProcessor {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        match request.request_code() {
            RequestCode::GET_SYSTEM_TOPIC_LIST_FROM_BROKER => Ok(Some(ok(&request).with_body(topic_list_json(&system_topics(&b.config(), b.timer.is_some()))))),
            RequestCode::CLEAN_EXPIRED_CONSUMEQUEUE => {
                let destroyed = b.store.clean_expired_consume_queues();
                tracing::info!(destroyed, "cleanExpiredConsumeQueue done");
                Ok(Some(ok(&request)))
            }
            RequestCode::CLEAN_UNUSED_TOPIC => {
                let keep: std::collections::HashSet<String> = b.topics.wrapper().topic_config_table.into_keys().collect();
                let cleaned = b.store.clean_unused_topics(&keep);
                tracing::warn!(cleaned, "cleanUnusedTopic: consume queues of topics without a config destroyed");
                Ok(Some(ok(&request)))
            }
            RequestCode::DELETE_EXPIRED_COMMITLOG => {
                tracing::warn!("deleteExpiredCommitLog: the next cleanup passes delete expired files whatever the hour");
                b.store.delete_expired_files_manually();
                Ok(Some(ok(&request)))
            }
            RequestCode::UPDATE_AND_CREATE_TOPIC_LIST => {
                let started = Instant::now();
                let answer = super::batch_create::create_topic_list(b, &request);
                b.metrics.on_topic_created(super::admin::answered_ok(&answer), false, started.elapsed());
                answer
            }
            RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST => {
                let started = Instant::now();
                let answer = super::batch_create::create_group_list(b, &request);
                if super::admin::answered_ok(&answer) {
                    b.metrics.on_group_created(true, started.elapsed());
                }
                answer
            }
            RequestCode::QUERY_CONSUME_QUEUE => super::consume_queue_query::query_consume_queue(b, &request),
            RequestCode::GET_ALL_PRODUCER_INFO => {
                let (now_ms, now) = (remoting::clock::now_ms(), Instant::now());
                let mut table: BTreeMap<String, Vec<ProducerInfo>> = BTreeMap::new();
                for (group, clients) in b.producers.table() {
                    table.insert(group, clients.iter().map(|c| ProducerInfo::of(c, now_ms, now)).collect());
                }
                Ok(Some(ok(&request).with_body(producer_table_json(&table))))
            }
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_producer_table_uses_javas_field_names() {
        let mut table = BTreeMap::new();
        table.insert(
            "PG".to_owned(),
            vec![ProducerInfo { client_id: "c@1".into(), language: "JAVA", last_update_timestamp: 7, remote_ip: "/127.0.0.1:5".into(), version: 453 }],
        );
        assert_eq!(
            String::from_utf8(producer_table_json(&table)).unwrap(),
            r#"{"data":{"PG":[{"clientId":"c@1","language":"JAVA","lastUpdateTimestamp":7,"remoteIP":"/127.0.0.1:5","version":453}]}}"#
        );
    }

    #[test]
    fn the_system_topics_include_the_brokers_own() {
        let config = crate::config::BrokerConfig { broker_cluster_name: "C".into(), broker_name: "B".into(), ..Default::default() };
        let topics = system_topics(&config, true);
        for t in [
            "C",
            "B",
            "C_REPLY_TOPIC",
            "TBW102",
            "SCHEDULE_TOPIC_XXXX",
            "RMQ_SYS_TRACE_TOPIC",
            "CHECKPOINT_TOPIC",
            "rmq_sys_REVIVE_LOG_C",
            "rmq_sys_SYNC_BROKER_MEMBER_B",
            "rmq_sys_wheel_timer",
        ] {
            assert!(topics.iter().any(|x| x == t), "{t} in {topics:?}");
        }
        assert_eq!(String::from_utf8(topic_list_json(&["A".into()])).unwrap(), r#"{"topicList":["A"]}"#);
    }
}
