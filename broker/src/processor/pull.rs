//! PULL_MESSAGE and LITE_PULL_MESSAGE: requests handed to the consumption service.

use std::sync::Arc;

use remoting::server::{Channel, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode};

use crate::consumption::PullService;

pub struct PullProcessor {
    pub service: Arc<PullService>,
}

impl RequestProcessor for PullProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        Ok(self.service.pull(channel, request, true))
    }

    /// A pull reads the commit log's mapping and answers, or parks to be answered later: no
    /// wait but the disk's, and none of that while all the log is within what Java deems in
    /// memory. Sends and pulls then both run where they were read, in the order they came, so
    /// one cannot starve the other.
    fn runs_in_place(&self, _code: RequestCode) -> bool {
        self.service.store.reads_are_in_memory()
    }
}
