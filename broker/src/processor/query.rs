//! Offsets and lookups: GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME,
//! SEARCH_OFFSET_BY_TIMESTAMP, QUERY_MESSAGE, VIEW_MESSAGE_BY_ID.

use std::sync::Arc;

use remoting::protocol::broker::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, SearchOffsetRequestHeader, TopicQueueHeader, ViewMessageRequestHeader,
};
use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

use store::store::MessageStore;

use super::ok;
use crate::handles::LiveStoreConfig;

/// Reads the store only; the store's config for `defaultQueryMaxNum`.
pub struct QueryProcessor {
    pub store: Arc<MessageStore>,
    pub store_config: LiveStoreConfig,
}

impl RequestProcessor for QueryProcessor {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let store = &self.store;
        match request.request_code() {
            RequestCode::GET_MAX_OFFSET => {
                let h: TopicQueueHeader = request.decode_header()?;
                Ok(Some(ok(&request).with_ext("offset", store.max_offset_in_queue(&h.topic, h.queue_id).to_string())))
            }
            RequestCode::GET_MIN_OFFSET => {
                let h: TopicQueueHeader = request.decode_header()?;
                Ok(Some(ok(&request).with_ext("offset", store.min_offset_in_queue(&h.topic, h.queue_id).to_string())))
            }
            RequestCode::GET_EARLIEST_MSG_STORETIME => {
                let h: TopicQueueHeader = request.decode_header()?;
                let t = store.earliest_message_time(&h.topic, h.queue_id).unwrap_or(-1);
                Ok(Some(ok(&request).with_ext("timestamp", t.to_string())))
            }
            RequestCode::SEARCH_OFFSET_BY_TIMESTAMP => {
                let h: SearchOffsetRequestHeader = request.decode_header()?;
                let offset = store.offset_in_queue_by_time(&h.topic, h.queue_id, h.timestamp);
                Ok(Some(ok(&request).with_ext("offset", offset.to_string())))
            }
            RequestCode::QUERY_MESSAGE => {
                let h: QueryMessageRequestHeader = request.decode_header()?;
                let unique = request.ext("_UNIQUE_KEY_QUERY") == Some("true");
                let max = if unique { self.store_config.load().default_query_max_num } else { usize::try_from(h.max_num).unwrap_or(0) };
                let found = store.query_message(&h.topic, &h.key, max, h.begin_timestamp, h.end_timestamp);
                if found.messages.is_empty() {
                    return Err(ProcessError::new(ResponseCode::QUERY_NOT_FOUND, "can not find message, maybe time range not correct"));
                }
                let body: Vec<u8> = found.messages.concat();
                Ok(Some(
                    ok(&request)
                        .with_header(&QueryMessageResponseHeader {
                            index_last_update_timestamp: found.index_last_update_timestamp,
                            index_last_update_phyoffset: found.index_last_update_phyoffset,
                        })
                        .with_body(body),
                ))
            }
            RequestCode::VIEW_MESSAGE_BY_ID => {
                let h: ViewMessageRequestHeader = request.decode_header()?;
                match store.look_message_by_offset(h.offset) {
                    Some(bytes) => Ok(Some(ok(&request).with_body(bytes))),
                    None => Err(ProcessError::system(format!("can not find message by the offset, {}", h.offset))),
                }
            }
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

#[cfg(test)]
#[path = "query_tests.rs"]
mod tests;
