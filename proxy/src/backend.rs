//! What the gRPC service needs of the brokers behind it. In local mode the broker implements it
//! with its own processors; a cluster-mode proxy would implement it over remoting connections.
//!
//! Requests are the broker's remoting commands, sent as a given client (its gRPC client id):
//! the backend keeps one broker-side connection per client, so the client is a registered
//! producer or consumer like a remoting one, and requests the broker makes of it (transaction
//! checks) come back through [`ClientRequests`].

use std::time::Duration;

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use remoting::connection::{Channel, InFlight, InboundHandler};
use remoting::RemotingCommand;

/// A topic's queues on one broker, as QueryRoute answers them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerQueues {
    pub broker_name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    /// Java's `PermName` bits (2 write, 4 read).
    pub perm: i32,
}

/// A topic as this front sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicRoute {
    pub brokers: Vec<BrokerQueues>,
    /// The topic's `message.type` attribute (`NORMAL`, `FIFO`, `DELAY`, `TRANSACTION`, `MIXED`,
    /// `UNSPECIFIED`).
    pub message_type: String,
}

/// The consumer group settings pushed to a consumer in its client settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    pub consume_orderly: bool,
    pub retry_max_times: i32,
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("no broker named {0}")]
    NoBroker(String),
    #[error("the broker did not answer in time")]
    Timeout,
    #[error("cannot reach the broker: {0}")]
    Unreachable(String),
    /// The account may not do this (ACL).
    #[error("{0}")]
    Unauthorized(String),
}

/// The extension field a backend sets on a request a broker makes of a client: the broker's name
/// (where the client's answer, such as END_TRANSACTION, goes).
pub const BROKER_NAME_EXT: &str = "brokerName";

/// Sends the answer to a request a broker made of a client (at most once).
pub type Reply = Box<dyn FnOnce(RemotingCommand) + Send>;

/// Requests brokers make of a client (CHECK_TRANSACTION_STATE, the console's
/// GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY), handed to the service, which turns
/// them into Telemetry commands and answers through `reply` those that want an answer.
pub trait ClientRequests: Send + Sync + 'static {
    fn on_request(&self, client_id: &str, request: RemotingCommand, reply: Reply);
}

/// Where a backend keeps the service's [`ClientRequests`] (set once, by the service).
pub type RequestsSlot = Arc<OnceLock<Arc<dyn ClientRequests>>>;

/// The client side of a gRPC client's connection to a broker, in either mode: the broker's
/// requests, marked with the broker's name, go to the service; its answers go back on the
/// connection they came on.
pub struct ToClient {
    pub client_id: String,
    pub broker_name: String,
    pub requests: RequestsSlot,
}

impl InboundHandler for ToClient {
    fn on_request(&self, channel: &Channel, mut request: RemotingCommand, _in_flight: InFlight) {
        if request.ext(BROKER_NAME_EXT).is_none_or(str::is_empty) {
            request = request.with_ext(BROKER_NAME_EXT, self.broker_name.clone());
        }
        if let Some(handler) = self.requests.get() {
            let channel = channel.clone();
            handler.on_request(
                &self.client_id,
                request,
                Box::new(move |response| {
                    let _ = channel.send(response);
                }),
            );
        }
    }
}

pub trait Backend: Send + Sync + 'static {
    /// Sends `request` to broker `broker_name` as client `client_id`.
    fn invoke(
        &self,
        client_id: &str,
        broker_name: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<RemotingCommand, BackendError>>;

    /// The brokers' names (heartbeats go to each).
    fn brokers(&self) -> Vec<String>;

    /// The topic's route, `None` when no broker has it.
    fn route(&self, topic: &str) -> Option<TopicRoute>;

    /// The group's settings (Java creates the group when asked, if the broker auto-creates groups).
    fn group(&self, group: &str) -> Option<GroupSettings>;

    /// The client left (NotifyClientTermination, or its Telemetry stream closed): its broker-side
    /// connections close, which unregisters it.
    fn client_gone(&self, client_id: &str);

    /// Where the client connects from (its Telemetry stream, its heartbeats): what a backend may
    /// report as the client's address to brokers, as Java's proxy channels do.
    fn client_address(&self, _client_id: &str, _addr: std::net::SocketAddr) {}

    /// Checks a request's credentials when the brokers check who sends (ACL on), and signs the
    /// client's requests as that account from then on; the error is why not. With ACL off,
    /// every request passes.
    fn authenticate(&self, _client_id: &str, _credentials: Option<&crate::auth::Credentials>) -> Result<(), String> {
        Ok(())
    }

    /// Where requests brokers make of clients go.
    fn set_client_requests(&self, handler: std::sync::Arc<dyn ClientRequests>);
}
