//! The proxy's remoting port (`remotingListenPort`, Java's `RemotingProtocolServer`): the request
//! codes it serves. Any other code is answered REQUEST_CODE_NOT_SUPPORTED, as Java's proxy does.

use remoting::RequestCode;

/// What Java's proxy hands to a broker as it came (sends, pulls, pops, acks, offsets, client
/// registration, queue locks).
pub const BROKER_CODES: &[RequestCode] = &[
    RequestCode::SEND_MESSAGE,
    RequestCode::SEND_MESSAGE_V2,
    RequestCode::SEND_BATCH_MESSAGE,
    RequestCode::CONSUMER_SEND_MSG_BACK,
    RequestCode::END_TRANSACTION,
    RequestCode::RECALL_MESSAGE,
    RequestCode::HEART_BEAT,
    RequestCode::UNREGISTER_CLIENT,
    RequestCode::CHECK_CLIENT_CONFIG,
    RequestCode::PULL_MESSAGE,
    RequestCode::LITE_PULL_MESSAGE,
    RequestCode::POP_MESSAGE,
    RequestCode::UPDATE_CONSUMER_OFFSET,
    RequestCode::ACK_MESSAGE,
    RequestCode::CHANGE_MESSAGE_INVISIBLETIME,
    RequestCode::GET_CONSUMER_CONNECTION_LIST,
    RequestCode::GET_CONSUMER_LIST_BY_GROUP,
    RequestCode::GET_MAX_OFFSET,
    RequestCode::GET_MIN_OFFSET,
    RequestCode::QUERY_CONSUMER_OFFSET,
    RequestCode::SEARCH_OFFSET_BY_TIMESTAMP,
    RequestCode::LOCK_BATCH_MQ,
    RequestCode::UNLOCK_BATCH_MQ,
];

/// What the proxy answers itself: a topic's route, with its own address for every broker, so a
/// client that takes the proxy for its name server sends everything else to it too.
pub const ROUTE_CODE: RequestCode = RequestCode::GET_ROUTEINFO_BY_TOPIC;
