//! The store as a [`ReplicatedLog`]: a master reads its physical log (bounds and bytes through the
//! store's `PhysicalLog`), a slave appends to its commit log.

use store::commit_log::ReplicatedAppendError;
use store::store::MessageStore;

use crate::log::{AppendAtError, ReplicatedLog};

impl ReplicatedLog for MessageStore {
    fn max_offset(&self) -> i64 {
        self.max_phy_offset()
    }

    fn min_offset(&self) -> i64 {
        self.min_phy_offset()
    }

    fn segment_size(&self) -> usize {
        self.config().mapped_file_size_commit_log
    }

    fn read_at(&self, offset: i64, max: usize) -> Option<Vec<u8>> {
        self.commit_log_data(offset, max)
    }

    fn append_at(&self, offset: i64, bytes: &[u8]) -> Result<i64, AppendAtError> {
        self.append_replicated(offset, bytes).map_err(|e| match e {
            ReplicatedAppendError::NotAtEnd { offset, end } => AppendAtError::NotAtEnd { offset, end },
            ReplicatedAppendError::DoesNotFit { offset, len, .. } => AppendAtError::DoesNotFit { offset, len },
            ReplicatedAppendError::Refused(reason) => AppendAtError::Failed(reason),
        })
    }
}
