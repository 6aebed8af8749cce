//! Helpers of the real-process chaos test (t70): the seeded random source, the TCP fault proxy of
//! one directed link, the group of `dledger server` processes and the fault plan.

pub mod cluster;
pub mod faults;
pub mod proxy;
pub mod rng;
