//! DLedger 0.3.1.2, the Raft log RocketMQ's DLedger mode runs on, byte for byte on disk and on the
//! wire as Java's `io.openmessaging.storage:dledger:0.3.1.2`.
//!
//! Layers:
//! - [`entry`]: the 48-byte entry header and body;
//! - [`protocol`]: the RPCs as plain types (codes, requests, responses);
//! - [`config`]: `DLedgerConfig` with Java's keys and defaults, the peers list;
//! - [`log`]: what the engine needs of a store (the log, the persisted term and vote);
//! - [`engine`]: the Raft engine itself, pure (no threads, sockets or clock): inputs in, actions out;
//! - `sim` (feature `sim`, on for this crate's tests): an in-memory store and a deterministic
//!   simulated cluster that checks the engine, running the server's handling of its actions;
//! - [`store`]: the file store, Java's `DLedgerMmapFileStore` byte for byte (data and index
//!   segments, recovery, `checkpoint`, `currterm`, flush and expiry services).
//! - [`wire`]: the RPCs' JSON bodies, byte for byte as fastjson writes and reads them;
//! - [`rpc`]: the RPCs over remoting: the serving side with its member checks and the
//!   [`rpc::DLedgerHandler`] the engine plugs into, and the [`rpc::PeerClient`];
//! - [`server`]: a running member (Java's `DLedgerServer`): the engine on its own thread over
//!   the file store, served by the RPCs, with a handle for in-process appends;
//! - [`client`]: Java's `DLedgerClient` (append, get, metadata, leadership transfer).

pub mod client;
pub mod config;
pub mod engine;
pub mod entry;
pub mod log;
/// The in-memory log the engine's tests and the simulation run on.
#[cfg(any(test, feature = "sim"))]
pub mod mem_log;
pub mod protocol;
pub mod rpc;
pub mod server;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod store;
pub mod wire;
