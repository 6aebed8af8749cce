//! What replication needs of a commit log, so the services can run over the real store or, in
//! tests, over a log in memory.

/// Why a slave could not append what its master sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendAtError {
    #[error("the frame starts at {offset}, but the log ends at {end}")]
    NotAtEnd { offset: i64, end: i64 },
    #[error("{len} bytes at {offset} do not fit the segment holding it")]
    DoesNotFit { offset: i64, len: usize },
    #[error("cannot append: {0}")]
    Failed(String),
}

pub trait ReplicatedLog: Send + Sync + 'static {
    /// The end of readable data (what a slave reports, what a master can send).
    fn max_offset(&self) -> i64;

    /// The first readable offset.
    fn min_offset(&self) -> i64;

    /// Bytes of one commit-log segment.
    fn segment_size(&self) -> usize;

    /// Up to `max` readable bytes from `offset`, never past the end of the segment holding
    /// `offset` (a full segment's blank tail included). `None` when nothing is readable there.
    fn read_at(&self, offset: i64, max: usize) -> Option<Vec<u8>>;

    /// A slave appends its master's bytes at its own end (`offset` must equal
    /// [`ReplicatedLog::max_offset`], or any segment start while the log is empty). Returns the
    /// new end.
    fn append_at(&self, offset: i64, bytes: &[u8]) -> Result<i64, AppendAtError>;
}
