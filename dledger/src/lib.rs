//! DLedger 0.3.1.2, the Raft log RocketMQ's DLedger mode runs on, byte for byte on disk and on the
//! wire as Java's `io.openmessaging.storage:dledger:0.3.1.2`.
//!
//! Layers:
//! - [`entry`]: the 48-byte entry header and body;
//! - [`protocol`]: the RPCs as plain types (codes, requests, responses);
//! - [`config`]: `DLedgerConfig` with Java's keys and defaults, the peers list;
//! - [`log`]: what the engine needs of a store (the log, the persisted term and vote);
//! - [`engine`]: the Raft engine itself, pure (no threads, sockets or clock): inputs in, actions out;
//! - [`sim`]: an in-memory store and a deterministic simulated cluster that checks the engine.

pub mod config;
pub mod engine;
pub mod entry;
pub mod log;
pub mod protocol;
pub mod sim;
