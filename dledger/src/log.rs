//! What the engine needs of a DLedger store: the log (read any entry, append as leader or
//! follower, truncate, commit) and the member's persisted term and vote. The file store
//! (`store`) and the simulation's in-memory store implement them. Writes return only once the
//! bytes are in the store (page cache for the file store; a flush thread forces them to disk, as
//! Java's every 10 ms).

use bytes::Bytes;

use crate::entry::Entry;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    #[error("the disk is full")]
    DiskFull,
    #[error("disk error: {0}")]
    Io(String),
    /// A follower's append or truncate that does not fit the log (wrong index, wrong pos), or an
    /// entry the log cannot take (larger than a segment or Java's 4 MiB encode buffer, or of a
    /// term older than the last entry's).
    #[error("inconsistent: {0}")]
    Inconsistent(String),
}

pub trait RaftLog {
    /// The first index held; -1 while the log is empty (Java's `ledgerBeginIndex`).
    fn begin_index(&self) -> i64;
    /// The last index held; -1 while empty (`ledgerEndIndex`).
    fn end_index(&self) -> i64;
    /// The term of the last entry; -1 while empty (`ledgerEndTerm`).
    fn end_term(&self) -> i64;
    fn committed_index(&self) -> i64;
    /// The entry at `index`, if held.
    fn get(&self, index: i64) -> Option<Entry>;
    /// Leader: a new entry at `end_index + 1` with `term`; the store decides its `pos` (rolling
    /// to a new segment first if needed) and runs append hooks on its bytes. Returns it as stored
    /// (the body as the hooks left it).
    fn append_as_leader(&mut self, term: i64, body: Bytes) -> Result<Entry, LogError>;
    /// Follower: the leader's entry, which must be at `end_index + 1` and land at its `pos`.
    fn append_as_follower(&mut self, entry: &Entry) -> Result<(), LogError>;
    /// Follower: keeps the local entry at `entry.index` if equal to `entry`, else cuts at its
    /// `pos` and writes it; everything after is cut. The end becomes `entry.index`.
    fn truncate(&mut self, entry: &Entry) -> Result<(), LogError>;
    /// The commit index known from the leader (`term` of the message that said so); ignored
    /// when lower than the current one, clamped to the end (Java's `updateCommittedIndex`). Also
    /// ignored when `term` is older than the member's current term (Java asks
    /// `memberState.currTerm()`; the file store reads the term its `CurrentTerm` handle shares
    /// with the member's `TermFile`), when `index` is -1 or below the begin index, and while the
    /// log is empty.
    fn update_committed(&mut self, term: i64, index: i64);
}

/// `currterm`: the member's term and its vote in that term.
pub trait TermStore {
    fn load(&self) -> (i64, Option<String>);
    /// Must be durable (or at least in the file) before a vote in that term is answered.
    fn persist(&mut self, term: i64, vote: Option<&str>) -> Result<(), LogError>;
}
