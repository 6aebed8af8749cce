//! The RocketMQ message store, in Java's file formats.
//!
//! Layers, bottom up: [`message`] (the commit-log record, properties, ids); [`mapped_file`] and
//! [`mapped_file_queue`] (mmap segments named by offset); [`clock`], [`put`] and [`error`] (leaves
//! shared by the rest); [`commit_log`] (append, roll, flush), with [`group_commit`] (the SYNC_FLUSH
//! waiters as a pure state machine) and `flush` (the threads that drive it); [`physical_log`]
//! (where records are read: the plain commit log, or [`dledger_log`]'s sealed plain log followed
//! by DLedger's entries); [`consume_queue`] and [`queues`] (20-byte units per topic and queue);
//! [`index`] (lookup by key); [`dispatch`] (the ordered dispatchers that build queues and index
//! from each new record); [`checkpoint`]; `parts` (what open loads) and [`recovery`] (over the
//! parts); and [`store::MessageStore`], made of the recovered parts, which runs the dispatcher and
//! the services. No top-level module imports one that imports it back
//! (`scripts/module-cycles.py store/src`).

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
pub mod thread_policy;
pub mod timer;
pub mod transient_pool;
