//! The RocketMQ message store, in Java's file formats.
//!
//! Layers, bottom up: [`message`] (the commit-log record, properties, ids); [`mapped_file`] and
//! [`mapped_file_queue`] (mmap segments named by offset); [`commit_log`] (append, roll, flush),
//! with [`group_commit`] (the SYNC_FLUSH waiters as a pure state machine) and `flush` (the
//! threads that drive it); [`consume_queue`] (20-byte units per topic and queue); [`index`]
//! (lookup by key); [`checkpoint`]; [`recovery`]; [`dledger_log`] (the commit log when DLedger
//! holds it); and [`store::MessageStore`], which owns them all
//! and runs the dispatcher and flush services.

pub mod allocate;
pub mod checkpoint;
pub mod cleanup;
pub mod clock;
pub mod commit_log;
pub mod config;
pub mod consume_queue;
pub mod dispatch;
pub mod dledger_log;
pub mod error;
mod flush;
pub mod group_commit;
pub mod index;
mod lock;
pub mod mapped_file;
pub mod mapped_file_queue;
pub mod message;
mod parts;
pub mod physical_log;
pub mod put;
pub mod queues;
pub mod recovery;
pub mod store;
pub mod transient_pool;
