//! The proxy's remoting port (`remotingListenPort`, Java's `RemotingProtocolServer`): the request
//! codes it serves. Any other code is answered REQUEST_CODE_NOT_SUPPORTED, as Java's proxy does.

use remoting::protocol::broker::{SendMessageRequestHeader, SendMessageRequestHeaderV2};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

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

/// The codes Java's proxy serves without a broker name (its client-manager and consumer-manager
/// activities: to every broker, to the connection's, to the first queue's, or to any); every other
/// code of [`BROKER_CODES`] goes to the broker its request names.
pub const UNNAMED_CODES: &[RequestCode] = &[
    RequestCode::HEART_BEAT,
    RequestCode::UNREGISTER_CLIENT,
    RequestCode::CHECK_CLIENT_CONFIG,
    RequestCode::LOCK_BATCH_MQ,
    RequestCode::UNLOCK_BATCH_MQ,
    RequestCode::GET_CONSUMER_LIST_BY_GROUP,
    RequestCode::GET_CONSUMER_CONNECTION_LIST,
];

/// The ext field naming a request's broker (`n` in the short headers of SEND_MESSAGE_V2 and
/// SEND_BATCH_MESSAGE).
pub const BROKER_NAME_FIELD: &str = "bname";
const BROKER_NAME_FIELD_V2: &str = "n";

/// The broker name a forwarded request names (Java's `AbstractRemotingActivity.request`).
pub fn named_broker(request: &RemotingCommand) -> Option<&str> {
    let code = request.request_code();
    let field = if code == RequestCode::SEND_MESSAGE_V2 || code == RequestCode::SEND_BATCH_MESSAGE { BROKER_NAME_FIELD_V2 } else { BROKER_NAME_FIELD };
    request.ext(field)
}

/// Java's answer to a request of a named code that names no broker.
pub fn no_broker_name(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::error_response(request, ResponseCode::VERSION_NOT_SUPPORTED, "Request doesn't have field bname")
}

/// The send codes, whose message type is checked against the topic's.
pub const SEND_CODES: &[RequestCode] = &[RequestCode::SEND_MESSAGE, RequestCode::SEND_MESSAGE_V2, RequestCode::SEND_BATCH_MESSAGE];

/// Why a send is refused before any broker sees it (Java's `SendMessageActivity` with
/// `DefaultTopicMessageTypeValidator`): its type does not match its topic's (`topic_type`:
/// UNSPECIFIED when there is no such topic). Retry and DLQ topics and messages brokers hand on
/// (TRANSFER_FLAG) are not checked; a header that does not decode is the broker's to answer.
pub fn send_refusal(request: &RemotingCommand, topic_type: impl FnOnce(&str) -> String) -> Option<String> {
    let h: SendMessageRequestHeader = match request.request_code() {
        RequestCode::SEND_MESSAGE => request.decode_header().ok()?,
        _ => request.decode_header::<SendMessageRequestHeaderV2>().ok()?.into(),
    };
    let topic = h.topic.as_str();
    let properties = h.properties.unwrap_or_default();
    if topic.starts_with(remoting::protocol::system_topic::RETRY_GROUP_TOPIC_PREFIX)
        || topic.starts_with(remoting::protocol::system_topic::DLQ_GROUP_TOPIC_PREFIX)
        || store::message::properties::get(&properties, crate::convert::names::TRANSFER_FLAG).is_some()
    {
        return None;
    }
    crate::convert::check_message_type(&topic_type(topic), crate::convert::message_type_of(&properties)).err()
}
