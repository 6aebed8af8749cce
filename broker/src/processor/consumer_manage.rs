//! GET_CONSUMER_LIST_BY_GROUP, UPDATE_CONSUMER_OFFSET, QUERY_CONSUMER_OFFSET (Java
//! `ConsumerManageProcessor`).

use std::sync::Arc;

use remoting::fastjson::{self, JsonStyle};
use remoting::protocol::broker::{ConsumerGroupHeader, QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader};
use remoting::protocol::heartbeat::ConsumerIdList;
use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

use store::store::MessageStore;

use super::ok;
use crate::client::consumer_manager::ConsumerManager;
use crate::consumer_offset::ConsumerOffsetManager;

pub struct ConsumerManageProcessor {
    pub consumers: Arc<ConsumerManager>,
    pub offsets: Arc<ConsumerOffsetManager>,
    /// For where a new group starts on a young queue.
    pub store: Arc<MessageStore>,
}

impl RequestProcessor for ConsumerManageProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let b = self;
        match request.request_code() {
            RequestCode::GET_CONSUMER_LIST_BY_GROUP => {
                let h: ConsumerGroupHeader = request.decode_header()?;
                match b.consumers.group(&h.consumer_group).filter(|g| !g.channels.is_empty()) {
                    Some(group) => {
                        let body = ConsumerIdList { consumer_id_list: group.client_ids() };
                        Ok(Some(ok(&request).with_body(fastjson::to_vec(&body, JsonStyle::Fastjson))))
                    }
                    None => Err(ProcessError::system(format!("no consumer for this group, {}", h.consumer_group))),
                }
            }
            RequestCode::UPDATE_CONSUMER_OFFSET => {
                let h: UpdateConsumerOffsetRequestHeader = request.decode_header()?;
                // 5.x: a server-side reset the queue's pulls have not taken yet wins over a
                // client's commit (only `useServerSideResetOffset` makes resets).
                if b.offsets.has_offset_reset(&h.consumer_group, &h.topic, h.queue_id) {
                    return Ok(Some(ok(&request).with_remark("Offset has been previously reset")));
                }
                b.offsets.commit_offset(&channel.remote_addr().to_string(), &h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
                Ok(Some(ok(&request)))
            }
            RequestCode::QUERY_CONSUMER_OFFSET => {
                let h: QueryConsumerOffsetRequestHeader = request.decode_header()?;
                if let Some(offset) = b.offsets.query_offset(&h.consumer_group, &h.topic, h.queue_id) {
                    return Ok(Some(ok(&request).with_ext("offset", offset.to_string())));
                }
                // As 5.3.3: a new group starts at 0 on a young queue whose first message is there
                // (Java asks that it still be in memory); on an empty queue, or when the client asks
                // not to be set to zero, the client decides where to start.
                if h.set_zero_if_not_found == Some(false) {
                    return Err(ProcessError::new(ResponseCode::QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first"));
                }
                let min = b.store.min_offset_in_queue(&h.topic, h.queue_id);
                if min <= 0 && b.store.max_offset_in_queue(&h.topic, h.queue_id) > 0 {
                    return Ok(Some(ok(&request).with_ext("offset", "0")));
                }
                Err(ProcessError::new(ResponseCode::QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"))
            }
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

#[cfg(test)]
#[path = "consumer_manage_tests.rs"]
mod tests;
