//! LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (orderly consumers).

use std::sync::Arc;
use std::time::Instant;

use remoting::fastjson::{self, JsonStyle};
use remoting::protocol::name::GroupName;
use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode};
use serde::{Deserialize, Serialize};

use super::ok;
use crate::rebalance_lock::{MessageQueue, RebalanceLockManager};

/// Also read by the ACL check (`crate::routes`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LockBatchRequestBody {
    client_id: String,
    /// Validated as it is decoded: the lock table is keyed by it.
    pub(crate) consumer_group: GroupName,
    #[serde(default)]
    pub(crate) mq_set: Vec<MessageQueue>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LockBatchResponseBody {
    #[serde(rename = "lockOKMQSet")]
    lock_ok_mq_set: Vec<MessageQueue>,
}

pub struct LockProcessor {
    pub locks: Arc<RebalanceLockManager>,
}

impl RequestProcessor for LockProcessor {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let body: LockBatchRequestBody = fastjson::from_slice(request.body_bytes()).map_err(|e| ProcessError::system(format!("bad lock body: {e}")))?;
        let locks = &self.locks;
        match request.request_code() {
            RequestCode::LOCK_BATCH_MQ => {
                let locked = locks.try_lock_batch(&body.consumer_group, &body.mq_set, &body.client_id, Instant::now());
                let response = LockBatchResponseBody { lock_ok_mq_set: locked };
                Ok(Some(ok(&request).with_body(fastjson::to_vec(&response, JsonStyle::Fastjson))))
            }
            _ => {
                locks.unlock_batch(&body.consumer_group, &body.mq_set, &body.client_id);
                Ok(Some(ok(&request)))
            }
        }
    }
}
