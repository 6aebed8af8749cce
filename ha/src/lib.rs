//! Classic master/slave replication of the commit log, byte for byte as Java's `HAService`
//! (4.9, and 5.x without controller mode) speaks it.
//!
//! Layers:
//! - [`wire`]: the two frames (slave -> master: an 8-byte offset report; master -> slave: offset,
//!   size, raw commit-log bytes);
//! - [`tracker`]: the pure structure behind SYNC_MASTER (slave positions in, released puts out);
//! - [`log`]: what replication needs of a commit log (the store, or a log in memory in tests);
//! - [`master`]: the HA port, one reader and one writer task per slave, the SYNC_MASTER timer;
//! - [`slave`]: the client that follows a master;
//! - [`store_log`]: the store as the log both sides replicate.

pub mod log;
pub mod master;
pub mod slave;
pub mod store_log;
pub mod tracker;
pub mod wire;
