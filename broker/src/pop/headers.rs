//! The request and response headers of pop's codes, with Java 5.3.3's field names.

use remoting::command_header;
use remoting::protocol::name::{GroupName, TopicName};

command_header! {
    /// POP_MESSAGE (200050).
    pub struct PopMessageRequestHeader {
        pub consumer_group: GroupName => "consumerGroup",
        pub topic: TopicName => "topic",
        /// -1: any queue of the topic.
        pub queue_id: i32 => "queueId",
        pub max_msg_nums: i32 => "maxMsgNums",
        pub invisible_time: i64 => "invisibleTime",
        /// How long the pop may wait for a message (0: not at all).
        pub poll_time: i64 => "pollTime",
        pub born_time: i64 => "bornTime",
        /// Java `ConsumeInitMode`: 0 MIN, 1 MAX.
        pub init_mode: i32 => "initMode",
        pub exp_type: Option<String> => "expType",
        pub exp: Option<String> => "exp",
        pub order: Option<bool> => "order",
        pub attempt_id: Option<String> => "attemptId",
    }
}

command_header! {
    pub struct PopMessageResponseHeader {
        pub pop_time: i64 => "popTime",
        pub invisible_time: i64 => "invisibleTime",
        pub revive_qid: i32 => "reviveQid",
        pub rest_num: i64 => "restNum",
        pub start_offset_info: Option<String> => "startOffsetInfo",
        pub msg_offset_info: Option<String> => "msgOffsetInfo",
        pub order_count_info: Option<String> => "orderCountInfo",
    }
}

command_header! {
    /// ACK_MESSAGE (200051).
    pub struct AckMessageRequestHeader {
        pub consumer_group: GroupName => "consumerGroup",
        pub topic: TopicName => "topic",
        pub queue_id: i32 => "queueId",
        pub extra_info: String => "extraInfo",
        pub offset: i64 => "offset",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053).
    pub struct ChangeInvisibleTimeRequestHeader {
        pub consumer_group: GroupName => "consumerGroup",
        pub topic: TopicName => "topic",
        pub queue_id: i32 => "queueId",
        pub extra_info: String => "extraInfo",
        pub offset: i64 => "offset",
        pub invisible_time: i64 => "invisibleTime",
    }
}

command_header! {
    pub struct ChangeInvisibleTimeResponseHeader {
        pub pop_time: i64 => "popTime",
        pub invisible_time: i64 => "invisibleTime",
        pub revive_qid: i32 => "reviveQid",
    }
}

command_header! {
    /// PEEK_MESSAGE (200052). Topic and group as sent: Java looks them up, so a name no topic or
    /// group can have is answered TOPIC_NOT_EXIST or SUBSCRIPTION_GROUP_NOT_EXIST, not refused.
    pub struct PeekMessageRequestHeader {
        pub topic: String => "topic",
        /// Negative: every queue of the topic.
        pub queue_id: i32 => "queueId",
        pub max_msg_nums: i32 => "maxMsgNums",
        pub consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// NOTIFICATION (200054): whether the group has a message to pop, waiting up to `pollTime`.
    pub struct NotificationRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        /// Negative (Java reads it as -1): every queue of the topic.
        pub queue_id: i32 => "queueId",
        pub poll_time: i64 => "pollTime",
        pub born_time: i64 => "bornTime",
        pub order: Option<bool> => "order",
        pub attempt_id: Option<String> => "attemptId",
    }
}

command_header! {
    pub struct NotificationResponseHeader {
        pub has_msg: bool => "hasMsg",
        pub polling_full: bool => "pollingFull",
    }
}

command_header! {
    /// POLLING_INFO (200055): how many pops of the group wait on the topic's queue.
    pub struct PollingInfoRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        /// Negative (Java reads it as -1): the pops that wait on any queue.
        pub queue_id: i32 => "queueId",
    }
}

command_header! {
    pub struct PollingInfoResponseHeader {
        pub polling_num: i32 => "pollingNum",
    }
}
