//! RocketMQ 5's gRPC front: the API `apache.rocketmq.v2.MessagingService` (rocketmq-apis 2.0.x,
//! the version Java's rocketmq-proxy 5.3.3 serves) over a narrow [`backend::Backend`].
//!
//! Read it from the wire up:
//! - [`pb`]: the protobuf messages and the tonic service, generated at build time from
//!   `proto/` (written from the API's field numbers and types) by protox, no system `protoc`.
//! - [`codec`]: prost's codec, undecodable requests answered as grpc-java answers them.
//! - [`config`]: `rmq-proxy.json` keys with Java's defaults (the ones this front reads).
//! - [`backend`]: what the service needs of brokers: remoting requests sent as a given client
//!   (send, pop, ack, change invisible time, end transaction, heartbeat), a topic's route and a
//!   group's settings, and the requests brokers make of clients (transaction checks). The broker
//!   implements it in local mode (`mqbroker --enable-proxy`); [`cluster`] in cluster mode
//!   (`mqproxy`), over the name server and remoting connections to the brokers.
//! - [`convert`]: gRPC messages to the broker's message properties and back, receipt handles.
//! - [`validate`]: Java's `GrpcValidator` (names, invisible durations).
//! - [`service`]: the RPCs, with Java's status codes and messages.
//! - [`frames`]: request bodies passed to tonic's decoder one whole message at a time (a
//!   declared length costs nothing until its bytes arrive).
//! - [`server`], [`tls`]: the listener, plaintext and TLS on one port (Java's permissive mode),
//!   and the remoting port that takes both protocols; [`remoting_port`]: the codes it serves;
//!   [`cluster_port`]: how `mqproxy` serves them (forwarded to the named broker over the remoting
//!   client's own connections, broker requests relayed back).
//! - [`metrics`]: the proxy's Prometheus family (`rocketmq_proxy_up`).

pub mod auth;
pub mod backend;
pub mod cluster;
pub mod cluster_port;
pub mod codec;
pub mod config;
pub mod convert;
pub mod frames;
pub mod metrics;
pub mod relay;
pub mod remoting_port;
pub mod server;
pub mod service;
pub mod tls;
pub mod validate;

/// The generated protobuf types of `apache.rocketmq.v2`.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("apache.rocketmq.v2");
}
