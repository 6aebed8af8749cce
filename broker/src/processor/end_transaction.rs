//! END_TRANSACTION (Java `EndTransactionProcessor`). Clients send it oneway.

use std::sync::Arc;

use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, ResponseCode};

use super::ok;
use crate::broker::Broker;
use crate::transaction::{self, EndTransactionRequestHeader};

pub struct EndTransactionProcessor {
    pub broker: Arc<Broker>,
}

impl RequestProcessor for EndTransactionProcessor {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        if self.broker.is_slave() {
            return Err(ProcessError::new(ResponseCode::SLAVE_NOT_AVAILABLE, "Message store is slave mode, so end transaction is forbidden. "));
        }
        let h: EndTransactionRequestHeader = request.decode_header()?;
        match transaction::end(&self.broker, &h) {
            Ok(()) => Ok(Some(ok(&request))),
            Err((code, remark)) => Err(ProcessError::new(code, remark)),
        }
    }
}
