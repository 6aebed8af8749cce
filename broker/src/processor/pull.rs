//! PULL_MESSAGE and LITE_PULL_MESSAGE: requests handed to the consumption service.

use std::sync::Arc;

use remoting::server::{Channel, ProcessResult, RequestProcessor};
use remoting::RemotingCommand;

use crate::consumption::PullService;

pub struct PullProcessor {
    pub service: Arc<PullService>,
}

impl RequestProcessor for PullProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        Ok(self.service.pull(channel, request, true))
    }

    /// A pull reads the commit log's mapping and answers, or parks to be answered later: no
    /// wait but the disk's, and none of that when what it reads is in memory (a consumer
    /// keeping up, or one behind while the page cache still holds its messages). Sends and such
    /// pulls then both run where they were read, in the order they came, so one cannot starve
    /// the other; a consumer catching up from data on disk reads on the pull pool, where a wait
    /// for the disk holds up no connection.
    fn runs_in_place(&self, request: &RemotingCommand) -> bool {
        let (Some(topic), Some(queue_id), Some(offset)) =
            (request.ext("topic"), request.ext("queueId").and_then(|q| q.parse().ok()), request.ext("queueOffset").and_then(|o| o.parse().ok()))
        else {
            return false;
        };
        self.service.store.reads_in_memory(topic, queue_id, offset)
    }
}
