//! Request latency, recorded for every answered request as Java's `NettyRemotingAbstract`
//! records `rocketmq_rpc_latency`: from the request's arrival until its response was written.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use prometheus::Registry;

use super::family::Histograms;
use crate::code::{RequestCode, ResponseCode};

/// How a request ended, Java's `result` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcResult {
    /// A oneway request: its response is computed and not sent.
    Oneway,
    Success,
    WriteChannelFailed,
}

impl RpcResult {
    pub fn label(self) -> &'static str {
        match self {
            RpcResult::Oneway => "oneway",
            RpcResult::Success => "success",
            RpcResult::WriteChannelFailed => "write_channel_failed",
        }
    }
}

/// One answered request.
#[derive(Clone, Copy, Debug)]
pub struct RpcRecord {
    pub request_code: i32,
    pub response_code: i32,
    /// The request was parked (a long-polling pull) before it was answered.
    pub long_polling: bool,
    pub result: RpcResult,
    pub elapsed: Duration,
}

/// Told of every response a server sends (see [`crate::server::Reply`]).
pub trait RpcObserver: Send + Sync + 'static {
    fn on_rpc(&self, record: &RpcRecord);
}

pub type SharedRpcObserver = Arc<dyn RpcObserver>;

/// Java's `RemotingHelper.getRequestCodeDesc`: the constant's name in lower case, or the number.
pub fn request_code_desc(code: i32) -> Cow<'static, str> {
    match RequestCode(code).name() {
        Some(name) => Cow::Owned(name.to_ascii_lowercase()),
        None => Cow::Owned(code.to_string()),
    }
}

/// Java's `RemotingHelper.getResponseCodeDesc`.
pub fn response_code_desc(code: i32) -> Cow<'static, str> {
    match ResponseCode(code).name() {
        Some(name) => Cow::Owned(name.to_ascii_lowercase()),
        None => Cow::Owned(code.to_string()),
    }
}

/// Java's buckets for `rocketmq_rpc_latency`, in milliseconds.
pub const RPC_LATENCY_BUCKETS_MS: [f64; 9] = [1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1_000.0, 2_000.0, 3_000.0];

/// `rocketmq_rpc_latency` (milliseconds) with Java's labels.
pub struct RpcLatency {
    histograms: Histograms,
}

impl RpcLatency {
    pub fn new(registry: &Registry, limit: usize) -> Self {
        let labels = ["protocol_type", "request_code", "response_code", "is_long_polling", "result"];
        let histograms = Histograms::histograms(registry, "rocketmq_rpc_latency_milliseconds", "Rpc latency", &labels, &RPC_LATENCY_BUCKETS_MS, limit);
        RpcLatency { histograms }
    }
}

impl RpcObserver for RpcLatency {
    fn on_rpc(&self, record: &RpcRecord) {
        let request = request_code_desc(record.request_code);
        let response = response_code_desc(record.response_code);
        let long_polling = if record.long_polling { "true" } else { "false" };
        let values = ["remoting", request.as_ref(), response.as_ref(), long_polling, record.result.label()];
        // Java records whole milliseconds (`elapsed(TimeUnit.MILLISECONDS)`).
        self.histograms.observe(&values, record.elapsed.as_millis() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_described_as_java_describes_them() {
        assert_eq!(request_code_desc(RequestCode::SEND_MESSAGE_V2.0), "send_message_v2");
        assert_eq!(request_code_desc(RequestCode::GET_ROUTEINFO_BY_TOPIC.0), "get_routeinfo_by_topic");
        assert_eq!(request_code_desc(987_654), "987654");
        assert_eq!(response_code_desc(ResponseCode::PULL_NOT_FOUND.0), "pull_not_found");
        assert_eq!(response_code_desc(0), "success");
    }
}
