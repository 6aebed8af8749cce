//! Request and response codes. Both are i32 newtypes rather than enums so that a code we do not
//! know survives decoding and can be answered REQUEST_CODE_NOT_SUPPORTED.

use std::fmt;

/// A request code (`code` of a command whose RESPONSE flag bit is clear).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestCode(pub i32);

/// A response code (`code` of a command whose RESPONSE flag bit is set).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResponseCode(pub i32);

macro_rules! codes {
    ($ty:ident { $($name:ident = $value:expr,)* }) => {
        impl $ty {
            $(pub const $name: $ty = $ty($value);)*

            /// The Java constant name of this code, if we know it.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(name) => write!(f, "{}({})", name, self.0),
                    None => write!(f, "{}({})", stringify!($ty), self.0),
                }
            }
        }
    };
}

codes!(RequestCode {
    SEND_MESSAGE = 10,
    PULL_MESSAGE = 11,
    QUERY_MESSAGE = 12,
    QUERY_CONSUMER_OFFSET = 14,
    UPDATE_CONSUMER_OFFSET = 15,
    UPDATE_AND_CREATE_TOPIC = 17,
    UPDATE_AND_CREATE_TOPIC_LIST = 18,
    GET_ALL_TOPIC_CONFIG = 21,
    UPDATE_BROKER_CONFIG = 25,
    GET_BROKER_CONFIG = 26,
    GET_BROKER_RUNTIME_INFO = 28,
    SEARCH_OFFSET_BY_TIMESTAMP = 29,
    GET_MAX_OFFSET = 30,
    GET_MIN_OFFSET = 31,
    GET_EARLIEST_MSG_STORETIME = 32,
    VIEW_MESSAGE_BY_ID = 33,
    HEART_BEAT = 34,
    UNREGISTER_CLIENT = 35,
    CONSUMER_SEND_MSG_BACK = 36,
    END_TRANSACTION = 37,
    GET_CONSUMER_LIST_BY_GROUP = 38,
    CHECK_TRANSACTION_STATE = 39,
    NOTIFY_CONSUMER_IDS_CHANGED = 40,
    LOCK_BATCH_MQ = 41,
    UNLOCK_BATCH_MQ = 42,
    GET_ALL_CONSUMER_OFFSET = 43,
    GET_ALL_DELAY_OFFSET = 45,
    CHECK_CLIENT_CONFIG = 46,
    UPDATE_AND_CREATE_ACL_CONFIG = 50,
    DELETE_ACL_CONFIG = 51,
    GET_BROKER_CLUSTER_ACL_INFO = 52,
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53,
    GET_BROKER_CLUSTER_ACL_CONFIG = 54,
    GET_TIMER_CHECK_POINT = 60,
    GET_TIMER_METRICS = 61,
    PUT_KV_CONFIG = 100,
    GET_KV_CONFIG = 101,
    DELETE_KV_CONFIG = 102,
    REGISTER_BROKER = 103,
    UNREGISTER_BROKER = 104,
    GET_ROUTEINFO_BY_TOPIC = 105,
    GET_BROKER_CLUSTER_INFO = 106,
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200,
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201,
    GET_TOPIC_STATS_INFO = 202,
    GET_CONSUMER_CONNECTION_LIST = 203,
    GET_PRODUCER_CONNECTION_LIST = 204,
    WIPE_WRITE_PERM_OF_BROKER = 205,
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206,
    DELETE_SUBSCRIPTIONGROUP = 207,
    GET_CONSUME_STATS = 208,
    DELETE_TOPIC_IN_BROKER = 215,
    DELETE_TOPIC_IN_NAMESRV = 216,
    REGISTER_TOPIC_IN_NAMESRV = 217,
    GET_KVLIST_BY_NAMESPACE = 219,
    RESET_CONSUMER_CLIENT_OFFSET = 220,
    GET_CONSUMER_STATUS_FROM_CLIENT = 221,
    INVOKE_BROKER_TO_RESET_OFFSET = 222,
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223,
    GET_TOPICS_BY_CLUSTER = 224,
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST = 225,
    QUERY_TOPIC_CONSUME_BY_WHO = 300,
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304,
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305,
    CLEAN_EXPIRED_CONSUMEQUEUE = 306,
    GET_CONSUMER_RUNNING_INFO = 307,
    QUERY_CORRECTION_OFFSET = 308,
    CONSUME_MESSAGE_DIRECTLY = 309,
    SEND_MESSAGE_V2 = 310,
    GET_UNIT_TOPIC_LIST = 311,
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312,
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313,
    VIEW_BROKER_STATS_DATA = 315,
    CLEAN_UNUSED_TOPIC = 316,
    GET_BROKER_CONSUME_STATS = 317,
    UPDATE_NAMESRV_CONFIG = 318,
    GET_NAMESRV_CONFIG = 319,
    SEND_BATCH_MESSAGE = 320,
    QUERY_CONSUME_QUEUE = 321,
    QUERY_DATA_VERSION = 322,
    SEND_REPLY_MESSAGE = 324,
    SEND_REPLY_MESSAGE_V2 = 325,
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326,
    QUERY_ASSIGNMENT = 400,
    SET_MESSAGE_REQUEST_MODE = 401,
    GET_ALL_MESSAGE_REQUEST_MODE = 402,
    ADD_WRITE_PERM_OF_BROKER = 327,
    GET_ALL_PRODUCER_INFO = 328,
    DELETE_EXPIRED_COMMITLOG = 329,
    GET_TOPIC_CONFIG = 351,
    GET_SUBSCRIPTIONGROUP_CONFIG = 352,
    CHECK_ROCKSDB_CQ_WRITE_PROGRESS = 354,
    EXPORT_ROCKSDB_CONFIG_TO_JSON = 355,
    LITE_PULL_MESSAGE = 361,
    RECALL_MESSAGE = 370,
    BROKER_HEARTBEAT = 904,
    GET_BROKER_HA_STATUS = 907,
    RESET_MASTER_FLUSH_OFFSET = 908,
    GET_BROKER_EPOCH_CACHE = 1007,
    UPDATE_COLD_DATA_FLOW_CTR_CONFIG = 2001,
    REMOVE_COLD_DATA_FLOW_CTR_CONFIG = 2002,
    GET_COLD_DATA_FLOW_CTR_INFO = 2003,
    SET_COMMITLOG_READ_MODE = 2004,
});

codes!(ResponseCode {
    SUCCESS = 0,
    SYSTEM_ERROR = 1,
    SYSTEM_BUSY = 2,
    REQUEST_CODE_NOT_SUPPORTED = 3,
    TRANSACTION_FAILED = 4,
    FLUSH_DISK_TIMEOUT = 10,
    SLAVE_NOT_AVAILABLE = 11,
    FLUSH_SLAVE_TIMEOUT = 12,
    MESSAGE_ILLEGAL = 13,
    SERVICE_NOT_AVAILABLE = 14,
    VERSION_NOT_SUPPORTED = 15,
    NO_PERMISSION = 16,
    TOPIC_NOT_EXIST = 17,
    TOPIC_EXIST_ALREADY = 18,
    PULL_NOT_FOUND = 19,
    PULL_RETRY_IMMEDIATELY = 20,
    PULL_OFFSET_MOVED = 21,
    QUERY_NOT_FOUND = 22,
    SUBSCRIPTION_PARSE_FAILED = 23,
    SUBSCRIPTION_NOT_EXIST = 24,
    SUBSCRIPTION_NOT_LATEST = 25,
    SUBSCRIPTION_GROUP_NOT_EXIST = 26,
    FILTER_DATA_NOT_EXIST = 27,
    FILTER_DATA_NOT_LATEST = 28,
    INVALID_PARAMETER = 29,
    CONSUMER_NOT_ONLINE = 206,
    CONSUME_MSG_TIMEOUT = 207,
    FLOW_CONTROL = 215,
    ILLEGAL_OPERATION = 604,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_codes_keep_their_number() {
        assert_eq!(RequestCode(99_999).name(), None);
        assert_eq!(format!("{:?}", RequestCode(99_999)), "RequestCode(99999)");
        assert_eq!(format!("{:?}", RequestCode::GET_ROUTEINFO_BY_TOPIC), "GET_ROUTEINFO_BY_TOPIC(105)");
    }
}
