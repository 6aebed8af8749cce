//! POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, PEEK_MESSAGE,
//! NOTIFICATION and POLLING_INFO: requests handed to the pop service.

use std::sync::Arc;

use remoting::server::{Channel, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

use crate::popping::service::PopService;

pub struct PopProcessor {
    pub service: Arc<PopService>,
}

impl RequestProcessor for PopProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        Ok(match request.request_code() {
            RequestCode::POP_MESSAGE => self.service.pop(channel, request, true),
            RequestCode::ACK_MESSAGE => self.service.ack(channel, &request),
            RequestCode::BATCH_ACK_MESSAGE => self.service.batch_ack(channel, &request),
            RequestCode::CHANGE_MESSAGE_INVISIBLETIME => self.service.change_invisible_time(channel, &request),
            RequestCode::PEEK_MESSAGE => Some(self.service.peek(channel, &request)),
            RequestCode::NOTIFICATION => self.service.notification(channel, request),
            RequestCode::POLLING_INFO => Some(self.service.polling_info(channel, &request)),
            code => Some(RemotingCommand::error_response(&request, ResponseCode::REQUEST_CODE_NOT_SUPPORTED, format!("request type {} not supported", code.0))),
        })
    }
}
