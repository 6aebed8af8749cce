//! The topic names Java reserves (`TopicValidator`, `MixAll`, `TimerMessageStore`), and its sets
//! of system topics and of topics clients may not send to. The store, the broker's topic table,
//! its admin answers and its ACL all read them here.

use super::name::TopicName;

/// The auto-create template (`AUTO_CREATE_TOPIC_KEY_TOPIC`).
pub const AUTO_CREATE_TEMPLATE: &str = "TBW102";
pub const SCHEDULE: &str = "SCHEDULE_TOPIC_XXXX";
pub const BENCHMARK: &str = "BenchmarkTest";
pub const TRANS_HALF: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// The message-trace topic's default name (`msgTraceTopicName`).
pub const TRACE: &str = "RMQ_SYS_TRACE_TOPIC";
pub const TRANS_OP_HALF: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
pub const TRANS_CHECK_MAX_TIME: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
pub const SELF_TEST: &str = "SELF_TEST_TOPIC";
pub const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
/// 5.x's RocksDB offset checkpoint topic (`RMQ_SYS_ROCKSDB_OFFSET_TOPIC`), reserved though unused.
pub const ROCKSDB_OFFSET: &str = "CHECKPOINT_TOPIC";
/// 5.x's timer wheel (`TimerMessageStore.TIMER_TOPIC`).
pub const WHEEL_TIMER: &str = "rmq_sys_wheel_timer";
pub const REPLY_TOPIC_POSTFIX: &str = "REPLY_TOPIC";
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// 5.x system topics start with this (Java `TopicValidator.SYSTEM_TOPIC_PREFIX`).
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";

/// Java 5.3.3's static `TopicValidator` system topic set, in its order (4.9.7's lacks the last).
/// A running broker adds the system topics it creates at start (`topic_config::system_topics`).
pub const SYSTEM_TOPICS: [&str; 10] =
    [AUTO_CREATE_TEMPLATE, SCHEDULE, BENCHMARK, TRANS_HALF, TRACE, TRANS_OP_HALF, TRANS_CHECK_MAX_TIME, SELF_TEST, OFFSET_MOVED_EVENT, ROCKSDB_OFFSET];

/// Java's `TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`: topics only the broker itself writes.
/// A client writing them could forge delayed deliveries, half messages or the op records that
/// end other producers' transactions.
pub const NOT_ALLOWED_SEND: [&str; 6] = [SCHEDULE, TRANS_HALF, TRANS_OP_HALF, TRANS_CHECK_MAX_TIME, SELF_TEST, OFFSET_MOVED_EVENT];

/// 5.x's broker member group topic (`TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX`).
pub const SYNC_BROKER_MEMBER_GROUP_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";

/// `rmq_sys_SYNC_BROKER_MEMBER_<brokerName>`.
pub fn sync_broker_member_topic(broker_name: &str) -> String {
    format!("{SYNC_BROKER_MEMBER_GROUP_PREFIX}{broker_name}")
}

/// `<cluster>_REPLY_TOPIC`.
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}_{REPLY_TOPIC_POSTFIX}")
}

pub fn is_not_allowed_send(topic: &str) -> bool {
    NOT_ALLOWED_SEND.contains(&topic)
}

/// Java's `TopicValidator.isSystemTopic` (4.9.7's set plus the `rmq_sys_` prefix).
pub fn is_system_topic(topic: &str) -> bool {
    SYSTEM_TOPICS.contains(&topic) || topic.starts_with(SYSTEM_TOPIC_PREFIX)
}

/// A system topic name, checked once (they are literals).
pub fn name(topic: &'static str) -> TopicName {
    TopicName::new(topic).unwrap_or_else(|e| panic!("system topic {topic}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reserved_name_is_a_legal_topic_name() {
        for topic in SYSTEM_TOPICS.iter().chain(&NOT_ALLOWED_SEND).chain(&[WHEEL_TIMER]) {
            assert!(TopicName::new(*topic).is_ok(), "{topic}");
        }
    }

    #[test]
    fn the_topics_clients_may_not_send_to_are_system_topics() {
        assert!(NOT_ALLOWED_SEND.iter().all(|t| is_system_topic(t)));
        assert!(is_system_topic(WHEEL_TIMER) && !is_system_topic("%RETRY%g") && !is_system_topic("Orders"));
        assert_eq!(reply_topic("DefaultCluster"), "DefaultCluster_REPLY_TOPIC");
    }
}
