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
}
