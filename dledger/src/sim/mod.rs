//! Deterministic simulation of a DLedger group: several [`crate::engine::Engine`]s over
//! in-memory logs ([`MemLog`] of `crate::mem_log`, with the file store's position and blank rules and a page cache
//! apart from the disk), an in-memory network, clients, and faults drawn from one seed
//! (partitions, loss, delay, duplication, process crashes, power loss, clock jumps). The
//! [`oracle`] checks after every event that no acknowledged or committed entry is lost and that
//! at most one member leads per term. A seed replays exactly.

mod cluster;
pub mod oracle;

pub use crate::mem_log::{MemLog, MemTerms};
pub use cluster::{describe, run, SimConfig, SimFailure, SimReport, SimRng, Trace};
