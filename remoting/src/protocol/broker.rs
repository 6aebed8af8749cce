//! Headers of the codes a broker serves.

use crate::command_header;
use crate::protocol::name::{GroupName, TopicName};

command_header! {
    /// SEND_MESSAGE (long names), and the long form of SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE.
    pub struct SendMessageRequestHeader {
        pub producer_group: String => "producerGroup",
        pub topic: TopicName => "topic",
        pub default_topic: String => "defaultTopic",
        pub default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        pub queue_id: i32 => "queueId",
        pub sys_flag: i32 => "sysFlag",
        pub born_timestamp: i64 => "bornTimestamp",
        pub flag: i32 => "flag",
        pub properties: Option<String> => "properties",
        pub reconsume_times: Option<i32> => "reconsumeTimes",
        pub unit_mode: Option<bool> => "unitMode",
        pub batch: Option<bool> => "batch",
        pub max_reconsume_times: Option<i32> => "maxReconsumeTimes",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE: the same fields under one-letter keys.
    pub struct SendMessageRequestHeaderV2 {
        pub a: String => "a",
        pub b: TopicName => "b",
        pub c: String => "c",
        pub d: i32 => "d",
        pub e: i32 => "e",
        pub f: i32 => "f",
        pub g: i64 => "g",
        pub h: i32 => "h",
        pub i: Option<String> => "i",
        pub j: Option<i32> => "j",
        pub k: Option<bool> => "k",
        pub l: Option<i32> => "l",
        pub m: Option<bool> => "m",
        pub n: Option<String> => "n",
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    fn from(v: SendMessageRequestHeaderV2) -> Self {
        SendMessageRequestHeader {
            producer_group: v.a,
            topic: v.b,
            default_topic: v.c,
            default_topic_queue_nums: v.d,
            queue_id: v.e,
            sys_flag: v.f,
            born_timestamp: v.g,
            flag: v.h,
            properties: v.i,
            reconsume_times: v.j,
            unit_mode: v.k,
            max_reconsume_times: v.l,
            batch: v.m,
            broker_name: v.n,
        }
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    fn from(h: SendMessageRequestHeader) -> Self {
        SendMessageRequestHeaderV2 {
            a: h.producer_group,
            b: h.topic,
            c: h.default_topic,
            d: h.default_topic_queue_nums,
            e: h.queue_id,
            f: h.sys_flag,
            g: h.born_timestamp,
            h: h.flag,
            i: h.properties,
            j: h.reconsume_times,
            k: h.unit_mode,
            l: h.max_reconsume_times,
            m: h.batch,
            n: h.broker_name,
        }
    }
}

command_header! {
    /// Send response.
    #[derive(Default)]
    pub struct SendMessageResponseHeader {
        pub msg_id: String => "msgId",
        pub queue_id: i32 => "queueId",
        pub queue_offset: i64 => "queueOffset",
        pub transaction_id: Option<String> => "transactionId",
        /// 5.3.x: the handle RECALL_MESSAGE takes to cancel a timer message.
        pub recall_handle: Option<String> => "recallHandle",
    }
}

command_header! {
    /// PULL_MESSAGE and LITE_PULL_MESSAGE.
    pub struct PullMessageRequestHeader {
        pub consumer_group: GroupName => "consumerGroup",
        pub topic: TopicName => "topic",
        pub queue_id: i32 => "queueId",
        pub queue_offset: i64 => "queueOffset",
        pub max_msg_nums: i32 => "maxMsgNums",
        pub sys_flag: i32 => "sysFlag",
        pub commit_offset: i64 => "commitOffset",
        pub suspend_timeout_millis: i64 => "suspendTimeoutMillis",
        pub subscription: Option<String> => "subscription",
        pub sub_version: i64 => "subVersion",
        pub expression_type: Option<String> => "expressionType",
        pub max_msg_bytes: Option<i32> => "maxMsgBytes",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// Pull response: all four keys are required by the Java client on every pull status.
    #[derive(Default)]
    pub struct PullMessageResponseHeader {
        pub suggest_which_broker_id: i64 => "suggestWhichBrokerId",
        pub next_begin_offset: i64 => "nextBeginOffset",
        pub min_offset: i64 => "minOffset",
        pub max_offset: i64 => "maxOffset",
    }
}

command_header! {
    /// QUERY_CONSUMER_OFFSET.
    pub struct QueryConsumerOffsetRequestHeader {
        pub consumer_group: GroupName => "consumerGroup",
        pub topic: TopicName => "topic",
        pub queue_id: i32 => "queueId",
        pub set_zero_if_not_found: Option<bool> => "setZeroIfNotFound",
    }
}

command_header! {
    /// UPDATE_CONSUMER_OFFSET.
    pub struct UpdateConsumerOffsetRequestHeader {
        pub consumer_group: GroupName => "consumerGroup",
        pub topic: TopicName => "topic",
        pub queue_id: i32 => "queueId",
        pub commit_offset: i64 => "commitOffset",
    }
}

command_header! {
    /// GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME.
    pub struct TopicQueueHeader {
        pub topic: TopicName => "topic",
        pub queue_id: i32 => "queueId",
    }
}

command_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP.
    pub struct SearchOffsetRequestHeader {
        pub topic: TopicName => "topic",
        pub queue_id: i32 => "queueId",
        pub timestamp: i64 => "timestamp",
        pub boundary_type: Option<String> => "boundaryType",
    }
}

command_header! {
    /// UNREGISTER_CLIENT (note Java's `clientID`).
    #[derive(Default)]
    pub struct UnregisterClientRequestHeader {
        pub client_id: String => "clientID",
        pub producer_group: Option<String> => "producerGroup",
        pub consumer_group: Option<GroupName> => "consumerGroup",
    }
}

command_header! {
    /// GET_CONSUMER_LIST_BY_GROUP and NOTIFY_CONSUMER_IDS_CHANGED.
    pub struct ConsumerGroupHeader {
        pub consumer_group: GroupName => "consumerGroup",
    }
}

command_header! {
    /// VIEW_MESSAGE_BY_ID.
    #[derive(Default)]
    pub struct ViewMessageRequestHeader {
        pub offset: i64 => "offset",
    }
}

command_header! {
    /// QUERY_MESSAGE.
    pub struct QueryMessageRequestHeader {
        pub topic: TopicName => "topic",
        pub key: String => "key",
        pub max_num: i32 => "maxNum",
        pub begin_timestamp: i64 => "beginTimestamp",
        pub end_timestamp: i64 => "endTimestamp",
    }
}

command_header! {
    /// QUERY_MESSAGE response.
    #[derive(Default)]
    pub struct QueryMessageResponseHeader {
        pub index_last_update_timestamp: i64 => "indexLastUpdateTimestamp",
        pub index_last_update_phyoffset: i64 => "indexLastUpdatePhyoffset",
    }
}

command_header! {
    /// UPDATE_AND_CREATE_TOPIC.
    pub struct CreateTopicRequestHeader {
        pub topic: TopicName => "topic",
        pub default_topic: String => "defaultTopic",
        pub read_queue_nums: i32 => "readQueueNums",
        pub write_queue_nums: i32 => "writeQueueNums",
        pub perm: i32 => "perm",
        pub topic_filter_type: String => "topicFilterType",
        pub topic_sys_flag: Option<i32> => "topicSysFlag",
        pub order: bool => "order",
        /// 5.x: attribute changes, `+key=value` and `-key` separated by commas.
        pub attributes: Option<String> => "attributes",
    }
}

command_header! {
    /// CONSUMER_SEND_MSG_BACK.
    pub struct ConsumerSendMsgBackRequestHeader {
        pub offset: i64 => "offset",
        pub group: GroupName => "group",
        pub delay_level: i32 => "delayLevel",
        pub origin_msg_id: Option<String> => "originMsgId",
        pub origin_topic: Option<String> => "originTopic",
        pub unit_mode: Option<bool> => "unitMode",
        pub max_reconsume_times: Option<i32> => "maxReconsumeTimes",
    }
}

command_header! {
    /// RECALL_MESSAGE (5.3.x): cancel a timer message by the handle its send answered with.
    pub struct RecallMessageRequestHeader {
        pub producer_group: Option<String> => "producerGroup",
        pub topic: String => "topic",
        pub recall_handle: String => "recallHandle",
    }
}

command_header! {
    pub struct RecallMessageResponseHeader {
        pub msg_id: String => "msgId",
    }
}
