//! SIM_DOC_PLACEHOLDER

mod cluster;
mod mem_store;
pub mod oracle;

pub use cluster::{describe, run, SimConfig, SimFailure, SimReport, SimRng, Trace};
pub use mem_store::{MemLog, MemTerms};
