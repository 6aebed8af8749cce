//! The RocketMQ remoting protocol, byte for byte as the Java and Go peers speak it.
//!
//! Layers, from the socket up:
//! - [`codec`]: bytes <-> frames <-> [`RemotingCommand`] (length checks before allocation);
//! - [`serialize`]: the two header encodings, JSON (fastjson's exact output) and ROCKETMQ binary;
//! - [`command`]: the command itself; [`code`]: request and response codes;
//! - [`header`]: typed custom headers <-> `extFields` ([`ext`]: the fields, as their block or a map); [`fastjson`]: JSON bodies with Java's quirks;
//!   [`properties`]: Java `Properties` text; [`config`]: config structs keyed like Java's;
//! - [`server`]: accept loop, per-connection reader and writer, processor registry with bounded
//!   business pools; [`client`]: sync, async and oneway calls over cached connections;
//!   [`connection`]: one connection over a socket or any in-process byte stream;
//! - [`call`]: typed calls, a request type naming its code, frame and response type;
//! - [`service`]: background threads that can be woken and stopped; [`clock`]: the wall clock;
//! - [`metrics`]: the Prometheus endpoint and request latency, named as Java 5.3.3 names them;
//!   [`version`]: Java's version ordinals.

pub mod call;
pub mod client;
pub mod clock;
pub mod code;
pub mod codec;
pub mod command;
pub mod config;
pub mod connection;
pub mod ext;
pub mod fastjson;
pub mod header;
pub mod metrics;
pub mod pool;
pub mod process;
pub mod properties;
pub mod protocol;
pub mod serialize;
pub mod server;
pub mod service;
pub mod version;
pub mod writer;

pub use code::{RequestCode, ResponseCode};
pub use command::{LanguageCode, RemotingCommand, SerializeType};
