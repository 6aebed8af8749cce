//! The request and response headers of pop's codes, with Java 5.3.3's field names.

use remoting::command_header;
use remoting::protocol::name::{GroupName, TopicName};
use remoting::RemotingCommand;

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
    /// PEEK_MESSAGE (200052). Read as Java 5.3.3 reads it ([`PeekMessageRequestHeader::read_as_java`]).
    pub struct PeekMessageRequestHeader {
        pub topic: Option<String> => "topic",
        /// Negative: every queue of the topic.
        pub queue_id: i32 => "queueId",
        pub max_msg_nums: i32 => "maxMsgNums",
        pub consumer_group: Option<String> => "consumerGroup",
    }
}

command_header! {
    /// NOTIFICATION (200054): whether the group has a message to pop, waiting up to `pollTime`.
    pub struct NotificationRequestHeader {
        pub consumer_group: Option<String> => "consumerGroup",
        pub topic: Option<String> => "topic",
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
        pub consumer_group: Option<String> => "consumerGroup",
        pub topic: Option<String> => "topic",
        /// Negative (Java reads it as -1): the pops that wait on any queue.
        pub queue_id: i32 => "queueId",
    }
}

command_header! {
    pub struct PollingInfoResponseHeader {
        pub polling_num: i32 => "pollingNum",
    }
}

/// A field as Java 5.3.3's `decodeCommandCustomHeaderDirectly` reads it: one that is missing or
/// does not parse is logged and left at its default (0 for numbers), never refused; its
/// `@CFNotNull` is not enforced either, as the failure is caught per field.
fn number<T: std::str::FromStr + Default>(request: &RemotingCommand, key: &str) -> T {
    request.ext(key).and_then(|v| v.parse().ok()).unwrap_or_default()
}

/// A string field as Java reads it: absent is `null`; names are taken as sent (Java looks them
/// up, so a name no topic or group can have is one that does not exist).
fn text(request: &RemotingCommand, key: &str) -> Option<String> {
    request.ext(key).map(str::to_owned)
}

impl PeekMessageRequestHeader {
    /// The header as Java 5.3.3 reads it (see [`number`]): nothing is refused.
    pub fn read_as_java(request: &RemotingCommand) -> Self {
        PeekMessageRequestHeader {
            topic: text(request, "topic"),
            queue_id: number(request, "queueId"),
            max_msg_nums: number(request, "maxMsgNums"),
            consumer_group: text(request, "consumerGroup"),
        }
    }
}

impl NotificationRequestHeader {
    /// The header as Java 5.3.3 reads it; `order` is `Boolean.parseBoolean`, false when absent.
    pub fn read_as_java(request: &RemotingCommand) -> Self {
        NotificationRequestHeader {
            consumer_group: text(request, "consumerGroup"),
            topic: text(request, "topic"),
            queue_id: number(request, "queueId"),
            poll_time: number(request, "pollTime"),
            born_time: number(request, "bornTime"),
            order: Some(request.ext("order").is_some_and(|v| v.eq_ignore_ascii_case("true"))),
            attempt_id: text(request, "attemptId"),
        }
    }
}

impl PollingInfoRequestHeader {
    /// The header as Java 5.3.3 reads it.
    pub fn read_as_java(request: &RemotingCommand) -> Self {
        PollingInfoRequestHeader { consumer_group: text(request, "consumerGroup"), topic: text(request, "topic"), queue_id: number(request, "queueId") }
    }
}
