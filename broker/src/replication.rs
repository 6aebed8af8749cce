//! The SYNC_MASTER hook: after a put, a synchronous master waits until a slave holds the bytes.
//! The HA issue provides a real implementation; until then there is never a slave, and a
//! SYNC_MASTER answers as Java does without one: stored, but SLAVE_NOT_AVAILABLE.

use std::time::Duration;

/// What waiting for replicas found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaAck {
    /// A slave acknowledged everything up to the offset.
    Acked,
    /// No slave is connected (or it is too far behind).
    SlaveNotAvailable,
    /// A slave is there but did not acknowledge in time.
    Timeout,
}

/// Waits for slaves to hold commit-log bytes up to an offset.
pub trait ReplicaWaiter: Send + Sync {
    fn wait_for(&self, end_offset: i64, timeout: Duration) -> ReplicaAck;
}

/// No HA: there is never a slave.
pub struct NoReplicas;

impl ReplicaWaiter for NoReplicas {
    fn wait_for(&self, _end_offset: i64, _timeout: Duration) -> ReplicaAck {
        ReplicaAck::SlaveNotAvailable
    }
}
