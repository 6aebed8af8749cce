//! END_TRANSACTION (Java `EndTransactionProcessor`). Clients send it oneway.

use std::sync::Arc;

use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, ResponseCode};

use super::ok;
use crate::transaction::{EndTransactionRequestHeader, Transactions};

pub struct EndTransactionProcessor {
    pub tx: Arc<Transactions>,
}

impl RequestProcessor for EndTransactionProcessor {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        if self.tx.store.role() == store::config::BrokerRole::Slave {
            return Err(ProcessError::new(ResponseCode::SLAVE_NOT_AVAILABLE, "Message store is slave mode, so end transaction is forbidden. "));
        }
        let h: EndTransactionRequestHeader = request.decode_header()?;
        match self.tx.end(&h) {
            Ok(()) => Ok(Some(ok(&request))),
            Err((code, remark)) => Err(ProcessError::new(code, remark)),
        }
    }
}
