//! The proxy's remoting port in cluster mode (`mqproxy`, `remotingListenPort`), as Java's
//! rocketmq-proxy 5.3.3 `RemotingProtocolServer` and its activities serve it:
//!
//! - GET_ROUTEINFO_BY_TOPIC is answered from the name server's route with this port's address for
//!   every broker (Java's `GetTopicRouteActivity`), so a client that takes the proxy for its name
//!   server sends everything else here too.
//! - The codes of [`BROKER_CODES`] go to the master of the broker the request names (ext field
//!   `bname`, `n` for SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE; VERSION_NOT_SUPPORTED "Request
//!   doesn't have field bname" without it, as Java's `AbstractRemotingActivity.request`), with
//!   Java's timeouts: 3 s, a pull's suspend time or a pop's poll time plus 10 s.
//! - Sends are checked against the topic's `message.type` first (`SendMessageActivity`, with
//!   `enableTopicMessageTypeCheck`).
//! - Codes a client sends without a broker name: HEART_BEAT goes to every broker of the cluster,
//!   UNREGISTER_CLIENT to those the connection talks to, CHECK_CLIENT_CONFIG is answered here,
//!   LOCK/UNLOCK_BATCH_MQ go to the broker of their first queue, the consumer list codes to any.
//! - Any other code is answered REQUEST_CODE_NOT_SUPPORTED.
//!
//! Unlike Java (which registers clients in the proxy and talks to brokers as itself), each remoting
//! client connection owns its own connection to each broker it reaches: the broker sees it as a
//! registered producer or consumer, and the broker's requests to it (CHECK_TRANSACTION_STATE,
//! NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY) are relayed
//! back over the client's connection, answers going back to the broker that asked.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use remoting::connection::{self, Channel, ChannelError, ConnectionConfig, Endpoints, InFlight, InboundHandler, Side};
use remoting::fastjson;
use remoting::protocol::namesrv::GetRouteInfoRequestHeader;
use remoting::protocol::route::{route_json_style, BrokerData, TopicRouteData};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tokio::sync::Semaphore;

use crate::backend::{Backend, BackendError};
use crate::cluster::ClusterBackend;
use crate::remoting_port::{named_broker, no_broker_name, send_refusal, BROKER_CODES, BROKER_NAME_FIELD, ROUTE_CODE};
use crate::tls::{Io, RemotingHandoff};

/// Remoting client connections at once, at most.
const MAX_CLIENT_CONNECTIONS: usize = 10_000;
/// Broker connections of one client connection, at most (one per broker).
const MAX_BROKERS_PER_CLIENT: usize = 64;
/// Broker connections of all remoting clients, at most.
const MAX_BROKER_CONNECTIONS: usize = 20_000;
/// Long polls (pulls, pops) of one client connection waiting at brokers, at most, beyond the
/// connection's in-flight count (see [`FromClient`]).
const MAX_PARKED_POLLS: usize = 1024;
/// Java's timeout of most forwarded requests.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);
/// RECALL_MESSAGE's (Java's `RecallMessageActivity`).
const RECALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Added to a pull's suspend time or a pop's poll time, as Java's activities do.
const LONG_POLL_MARGIN: Duration = Duration::from_secs(10);
/// A client's suspend or poll time counts for this much at most.
const MAX_LONG_POLL: Duration = Duration::from_secs(120);
/// How long a relayed broker request (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY) waits
/// for the client's answer.
const RELAY_TIMEOUT: Duration = Duration::from_secs(20);
/// Connecting to a broker, at most.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// What the port needs of `rmq-proxy.json`.
#[derive(Clone, Debug)]
pub struct PortSettings {
    /// `remotingAccessAddr`: the host routes name; empty, the address the client reached us at.
    pub access_host: String,
    /// The port routes name (`remotingListenPort`, as bound).
    pub port: u16,
    /// `enableTopicMessageTypeCheck`.
    pub check_message_types: bool,
}

/// The port's shared state: the backend (name server, masters, topic types), the bounds.
pub struct ClusterPort {
    backend: Arc<ClusterBackend>,
    settings: PortSettings,
    connection_config: ConnectionConfig,
    clients: Arc<Semaphore>,
    broker_connections: AtomicUsize,
}

impl ClusterPort {
    pub fn new(backend: Arc<ClusterBackend>, settings: PortSettings) -> Arc<ClusterPort> {
        Arc::new(ClusterPort {
            backend,
            settings,
            connection_config: ConnectionConfig::default(),
            clients: Arc::new(Semaphore::new(MAX_CLIENT_CONNECTIONS)),
            broker_connections: AtomicUsize::new(0),
        })
    }

    /// What [`crate::server::GrpcServer::serve_remoting_port`] hands remoting connections to.
    pub fn handoff(self: &Arc<Self>) -> RemotingHandoff {
        let port = self.clone();
        Arc::new(move |io, peer| port.serve(io, peer))
    }

    /// Broker connections of remoting clients open now.
    pub fn broker_connection_count(&self) -> usize {
        self.broker_connections.load(Ordering::Relaxed)
    }

    fn serve(self: &Arc<Self>, io: Io, peer: SocketAddr) {
        let Ok(permit) = self.clients.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "{MAX_CLIENT_CONNECTIONS} remoting clients connected, the most taken; closing a new one");
            return;
        };
        let local = match &io {
            Io::Plain(s) => s.local_addr(),
            Io::Tls(s) => s.get_ref().0.local_addr(),
        };
        let local = local.unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], self.settings.port)));
        let client = Arc::new(Client {
            port: self.clone(),
            channel: OnceLock::new(),
            brokers: Mutex::new(HashMap::new()),
            parked_polls: Arc::new(Semaphore::new(MAX_PARKED_POLLS)),
            _permit: permit,
        });
        let handler = Arc::new(FromClient(client.clone()));
        let channel = connection::spawn_stream(io, Endpoints { remote: peer, local }, &self.connection_config, Side::Server, handler);
        let _ = client.channel.set(channel);
    }

    /// The address routes name: `remotingAccessAddr`, else the one the client connected to.
    fn route_addr(&self, client: &Channel) -> String {
        let host = if self.settings.access_host.is_empty() { client.local_addr().ip().to_string() } else { self.settings.access_host.clone() };
        format!("{host}:{}", self.settings.port)
    }
}

/// One remoting client connection: its channel and its broker connections by broker name.
struct Client {
    port: Arc<ClusterPort>,
    channel: OnceLock<Channel>,
    brokers: Mutex<HashMap<String, BrokerLink>>,
    parked_polls: Arc<Semaphore>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

struct BrokerLink {
    addr: String,
    channel: Channel,
}

/// The requests a remoting client sends on its connection, each answered in its own task. A long
/// poll waiting at a broker is not counted in the connection's in-flight requests (a consumer
/// holds one per queue, and past the count the connection would stop reading), as a broker does
/// not count its parked pulls; it holds a place of the client's parked polls instead, while there
/// is one.
struct FromClient(Arc<Client>);

fn is_long_poll(request: &RemotingCommand) -> bool {
    [RequestCode::PULL_MESSAGE, RequestCode::LITE_PULL_MESSAGE, RequestCode::POP_MESSAGE].contains(&request.request_code())
}

impl InboundHandler for FromClient {
    fn on_request(&self, channel: &Channel, request: RemotingCommand, in_flight: InFlight) {
        let (client, channel) = (self.0.clone(), channel.clone());
        let parked = if is_long_poll(&request) { client.parked_polls.clone().try_acquire_owned().ok() } else { None };
        let in_flight = if parked.is_some() { None } else { Some(in_flight) };
        tokio::spawn(async move {
            let _held = (in_flight, parked);
            let oneway = request.is_oneway();
            let (opaque, serialize_type) = (request.opaque, request.serialize_type);
            if let Some(mut response) = client.handle(&channel, request).await {
                if !oneway {
                    response.opaque = opaque;
                    response.serialize_type = serialize_type;
                    let _ = channel.send(response);
                }
            }
        });
    }

    fn on_close(&self, _channel: &Channel) {
        self.0.close_brokers();
    }
}

/// The broker's requests on a client's broker connection, relayed to the client.
struct ToRemotingClient {
    client: Weak<Client>,
    broker_name: String,
}

impl InboundHandler for ToRemotingClient {
    fn on_request(&self, broker: &Channel, mut request: RemotingCommand, in_flight: InFlight) {
        let Some(client) = self.client.upgrade().and_then(|c| c.channel.get().cloned()) else { return };
        // The client answers END_TRANSACTION to the broker the check names: here, through us.
        if request.ext(BROKER_NAME_FIELD).is_none() {
            request = request.with_ext(BROKER_NAME_FIELD, self.broker_name.clone());
        }
        if request.is_oneway() {
            if let Err(e) = client.invoke_oneway(request) {
                tracing::debug!(error = %e, "cannot relay a broker's request to its remoting client");
            }
            return;
        }
        let broker = broker.clone();
        tokio::spawn(async move {
            let _in_flight = in_flight;
            let opaque = request.opaque;
            let response = match client.invoke(request.clone(), RELAY_TIMEOUT).await {
                Ok(r) => r,
                Err(e) => RemotingCommand::error_response(&request, ResponseCode::SYSTEM_ERROR, e.to_string()),
            };
            let _ = broker.send(response.with_opaque(opaque));
        });
    }
}

/// How long a forwarded request may take: Java's per activity.
fn timeout_of(request: &RemotingCommand) -> Duration {
    let waits = |field: &str| {
        let ms = request.ext(field).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        Duration::from_millis(ms).min(MAX_LONG_POLL) + LONG_POLL_MARGIN
    };
    match request.request_code() {
        RequestCode::PULL_MESSAGE | RequestCode::LITE_PULL_MESSAGE => waits("suspendTimeoutMillis"),
        RequestCode::POP_MESSAGE => waits("pollTime"),
        RequestCode::RECALL_MESSAGE => RECALL_TIMEOUT,
        _ => DEFAULT_TIMEOUT,
    }
}

/// The name server's route with every broker's addresses replaced by `addr` (Java's
/// `ProxyTopicRouteData` built from one address: each broker id keeps its place).
fn route_through(data: TopicRouteData, addr: &str) -> TopicRouteData {
    let broker_datas =
        data.broker_datas.into_iter().map(|b| BrokerData { broker_addrs: b.broker_addrs.keys().map(|id| (*id, addr.to_owned())).collect(), ..b }).collect();
    TopicRouteData { broker_datas, queue_datas: data.queue_datas, ..TopicRouteData::default() }
}

/// The broker of LOCK_BATCH_MQ / UNLOCK_BATCH_MQ: its first queue's (Java's
/// `ConsumerManagerActivity`). `Err`: the set is empty, or the body is not one.
fn batch_mq_broker(body: &[u8]) -> Result<String, &'static str> {
    let v: serde_json::Value = fastjson::from_slice(body).map_err(|_| "bad request body")?;
    let first = v.get("mqSet").and_then(|s| s.as_array()).and_then(|s| s.first()).ok_or("MessageQueue set is empty")?;
    first.get("brokerName").and_then(|b| b.as_str()).filter(|b| !b.is_empty()).map(str::to_owned).ok_or("MessageQueue set is empty")
}

fn backend_error(request: &RemotingCommand, e: BackendError) -> RemotingCommand {
    RemotingCommand::error_response(request, ResponseCode::SYSTEM_ERROR, e.to_string())
}

impl Client {
    /// The answer to one request; `None` for a oneway one.
    async fn handle(self: &Arc<Self>, channel: &Channel, request: RemotingCommand) -> Option<RemotingCommand> {
        let code = request.request_code();
        if code == ROUTE_CODE {
            return Some(self.route(channel, &request).await);
        }
        if !BROKER_CODES.contains(&code) {
            return Some(remoting::server::not_supported(&request));
        }
        match code {
            RequestCode::HEART_BEAT => Some(self.heartbeat(request).await),
            RequestCode::UNREGISTER_CLIENT => {
                let names: Vec<String> = self.brokers.lock().keys().cloned().collect();
                let sent = futures::future::join_all(names.iter().map(|n| self.forward(n, request.clone(), DEFAULT_TIMEOUT))).await;
                if let Some(Err(e)) = sent.into_iter().find(Result::is_err) {
                    tracing::debug!(error = %e, "unregistering a remoting client from a broker failed");
                }
                Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_remark(""))
            }
            RequestCode::CHECK_CLIENT_CONFIG => Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_remark("")),
            RequestCode::LOCK_BATCH_MQ | RequestCode::UNLOCK_BATCH_MQ => match batch_mq_broker(request.body_bytes()) {
                Ok(name) => self.answer(&name, request, DEFAULT_TIMEOUT).await,
                Err(why) => {
                    let body = request.body.clone().unwrap_or_default();
                    Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(body).with_remark(why))
                }
            },
            RequestCode::GET_CONSUMER_LIST_BY_GROUP | RequestCode::GET_CONSUMER_CONNECTION_LIST => {
                // Every broker knows the group's consumers (heartbeats go to each): any will do.
                let name = match named_broker(&request) {
                    Some(n) => Some(n.to_owned()),
                    None => self.brokers.lock().keys().next().cloned().or_else(|| self.port.backend.brokers().into_iter().next()),
                };
                match name {
                    Some(n) => self.answer(&n, request, DEFAULT_TIMEOUT).await,
                    None => Some(backend_error(&request, BackendError::NoBroker(String::new()))),
                }
            }
            _ => {
                let Some(name) = named_broker(&request).map(str::to_owned) else { return Some(no_broker_name(&request)) };
                let is_send = crate::remoting_port::SEND_CODES.contains(&code);
                if is_send && self.port.settings.check_message_types {
                    let backend = self.port.backend.clone();
                    // The route lookup waits for a first load in place (a multi-threaded runtime).
                    let refusal = send_refusal(&request, |topic| backend.route(topic).map_or_else(|| "UNSPECIFIED".to_owned(), |r| r.message_type));
                    if let Some(why) = refusal {
                        return Some(RemotingCommand::error_response(&request, ResponseCode::MESSAGE_ILLEGAL, why));
                    }
                }
                let timeout = timeout_of(&request);
                self.answer(&name, request, timeout).await
            }
        }
    }

    /// Forwards and makes the answer (an error one when the broker cannot be reached).
    async fn answer(self: &Arc<Self>, broker_name: &str, request: RemotingCommand, timeout: Duration) -> Option<RemotingCommand> {
        let oneway = request.is_oneway();
        let error_to = RemotingCommand { code: request.code, opaque: request.opaque, serialize_type: request.serialize_type, ..RemotingCommand::default() };
        match self.forward(broker_name, request, timeout).await {
            Ok(_) if oneway => None,
            Ok(r) => Some(r),
            Err(e) => {
                tracing::debug!(broker = broker_name, error = %e, "remoting request not forwarded");
                Some(backend_error(&error_to, e))
            }
        }
    }

    /// HEART_BEAT: to the broker it names, else to every broker of the cluster (the client's
    /// heartbeats all reach the proxy, which registers it on each broker). SUCCESS when one took it.
    async fn heartbeat(self: &Arc<Self>, request: RemotingCommand) -> RemotingCommand {
        let names = match named_broker(&request) {
            Some(n) => vec![n.to_owned()],
            None => {
                // Waits for a first load in place when none is known (a multi-threaded runtime).
                self.port.backend.brokers()
            }
        };
        let sent = futures::future::join_all(names.iter().map(|n| self.forward(n, request.clone(), DEFAULT_TIMEOUT))).await;
        match sent.iter().find_map(|r| r.as_ref().ok()) {
            Some(_) => RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_remark(""),
            None => match sent.into_iter().find_map(Result::err) {
                Some(e) => backend_error(&request, e),
                None => backend_error(&request, BackendError::NoBroker("of the cluster".to_owned())),
            },
        }
    }

    /// GET_ROUTEINFO_BY_TOPIC: the name server's answer, with this port's address for each broker.
    async fn route(&self, channel: &Channel, request: &RemotingCommand) -> RemotingCommand {
        let h: GetRouteInfoRequestHeader = match request.decode_header() {
            Ok(h) => h,
            Err(e) => return RemotingCommand::error_response(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let answer = match self.port.backend.namesrv_route(&h.topic).await {
            Ok(a) => a,
            Err(e) => return backend_error(request, e),
        };
        if answer.code != ResponseCode::SUCCESS.0 {
            return RemotingCommand::error_response(request, ResponseCode(answer.code), answer.remark.unwrap_or_default());
        }
        let data: TopicRouteData = match fastjson::from_slice(answer.body_bytes()) {
            Ok(d) => d,
            Err(e) => return RemotingCommand::error_response(request, ResponseCode::SYSTEM_ERROR, format!("bad route from the name server: {e}")),
        };
        let route = route_through(data, &self.port.route_addr(channel));
        let body = fastjson::to_vec(&route, route_json_style(request.version, h.accept_standard_json_only));
        RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(body)
    }

    /// Sends `request` to the master of `broker_name` over this client's connection to it.
    async fn forward(self: &Arc<Self>, broker_name: &str, request: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, BackendError> {
        let channel = self.broker_channel(broker_name).await?;
        let to_error = |e: ChannelError| match e {
            ChannelError::Timeout { .. } => BackendError::Timeout,
            e => BackendError::Unreachable(e.to_string()),
        };
        if request.is_oneway() {
            channel.invoke_oneway(request).map_err(to_error)?;
            return Ok(RemotingCommand::default());
        }
        channel.invoke(request, timeout).await.map_err(to_error)
    }

    /// This client's open connection to the broker's master, made if there is none.
    async fn broker_channel(self: &Arc<Self>, broker_name: &str) -> Result<Channel, BackendError> {
        let addr = self.port.backend.master_address(broker_name).await?;
        if let Some(l) = self.brokers.lock().get(broker_name).filter(|l| l.addr == addr && !l.channel.is_closed()) {
            return Ok(l.channel.clone());
        }
        if self.channel.get().is_none_or(Channel::is_closed) {
            return Err(BackendError::Unreachable("the remoting client is gone".to_owned()));
        }
        self.check_room(broker_name)?;
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(BackendError::Unreachable(format!("cannot connect to {addr}: {e}"))),
            Err(_) => return Err(BackendError::Unreachable(format!("connecting to {addr} took longer than {CONNECT_TIMEOUT:?}"))),
        };
        let handler = Arc::new(ToRemotingClient { client: Arc::downgrade(self), broker_name: broker_name.to_owned() });
        let channel = connection::spawn(stream, &self.port.connection_config, Side::Client, handler).map_err(|e| BackendError::Unreachable(e.to_string()))?;
        let mut brokers = self.brokers.lock();
        // Two requests may have connected at once: the first live one stays.
        if let Some(l) = brokers.get(broker_name).filter(|l| l.addr == addr && !l.channel.is_closed()) {
            channel.close();
            return Ok(l.channel.clone());
        }
        if self.channel.get().is_none_or(Channel::is_closed) {
            channel.close();
            return Err(BackendError::Unreachable("the remoting client is gone".to_owned()));
        }
        match brokers.insert(broker_name.to_owned(), BrokerLink { addr, channel: channel.clone() }) {
            Some(old) => old.channel.close(),
            None => {
                self.port.broker_connections.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(channel)
    }

    /// Refuses a new broker connection past the bounds.
    fn check_room(&self, broker_name: &str) -> Result<(), BackendError> {
        let brokers = self.brokers.lock();
        if !brokers.contains_key(broker_name) {
            if brokers.len() >= MAX_BROKERS_PER_CLIENT {
                return Err(BackendError::Unreachable(format!("the client has {MAX_BROKERS_PER_CLIENT} broker connections, the most taken")));
            }
            if self.port.broker_connections.load(Ordering::Relaxed) >= MAX_BROKER_CONNECTIONS {
                return Err(BackendError::Unreachable(format!("{MAX_BROKER_CONNECTIONS} broker connections open, the most taken")));
            }
        }
        Ok(())
    }

    /// The client left: its broker connections close, which unregisters it from each broker.
    fn close_brokers(&self) {
        let links: Vec<BrokerLink> = self.brokers.lock().drain().map(|(_, l)| l).collect();
        self.port.broker_connections.fetch_sub(links.len(), Ordering::Relaxed);
        for l in links {
            l.channel.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use remoting::protocol::route::QueueData;

    #[test]
    fn the_broker_name_is_bname_or_n_for_the_short_sends() {
        let pull = RemotingCommand::request(RequestCode::PULL_MESSAGE).with_ext("bname", "b1");
        assert_eq!(named_broker(&pull), Some("b1"));
        let v2 = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2).with_ext("n", "b2").with_ext("bname", "x");
        assert_eq!(named_broker(&v2), Some("b2"));
        let batch = RemotingCommand::request(RequestCode::SEND_BATCH_MESSAGE).with_ext("bname", "b3");
        assert_eq!(named_broker(&batch), None);
        let r = no_broker_name(&batch);
        assert_eq!(r.code, ResponseCode::VERSION_NOT_SUPPORTED.0);
        assert_eq!(r.remark.as_deref(), Some("Request doesn't have field bname"));
    }

    #[test]
    fn long_polls_wait_their_suspend_time_plus_ten_seconds_bounded() {
        let pull = RemotingCommand::request(RequestCode::PULL_MESSAGE).with_ext("suspendTimeoutMillis", "20000");
        assert_eq!(timeout_of(&pull), Duration::from_secs(30));
        let pop = RemotingCommand::request(RequestCode::POP_MESSAGE).with_ext("pollTime", "not a number");
        assert_eq!(timeout_of(&pop), LONG_POLL_MARGIN);
        let huge = RemotingCommand::request(RequestCode::LITE_PULL_MESSAGE).with_ext("suspendTimeoutMillis", "99999999999");
        assert_eq!(timeout_of(&huge), MAX_LONG_POLL + LONG_POLL_MARGIN);
        assert_eq!(timeout_of(&RemotingCommand::request(RequestCode::ACK_MESSAGE)), DEFAULT_TIMEOUT);
    }

    #[test]
    fn routes_name_the_port_for_every_broker_id() {
        let data = TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_addrs: [(0, "10.0.0.1:10911".to_owned()), (1, "10.0.0.2:10911".to_owned())].into(),
                broker_name: "b".into(),
                cluster: "C".into(),
                enable_acting_master: false,
                zone_name: None,
            }],
            queue_datas: vec![QueueData { broker_name: "b".into(), perm: 6, read_queue_nums: 4, topic_sys_flag: 0, write_queue_nums: 4 }],
            filter_server_table: [("10.0.0.1:10911".to_owned(), vec!["x".to_owned()])].into(),
            ..TopicRouteData::default()
        };
        let r = route_through(data, "127.0.0.1:8080");
        assert_eq!(r.broker_datas[0].broker_addrs, [(0, "127.0.0.1:8080".to_owned()), (1, "127.0.0.1:8080".to_owned())].into());
        assert_eq!(r.queue_datas.len(), 1);
        assert!(r.filter_server_table.is_empty());
    }

    #[test]
    fn sends_are_checked_against_the_topics_type() {
        let props = |p: &str| p.replace('=', "\u{1}").replace('|', "\u{2}");
        let normal = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
            .with_ext("a", "g")
            .with_ext("b", "T")
            .with_ext("c", "TBW102")
            .with_ext("d", "4")
            .with_ext("e", "0")
            .with_ext("f", "0")
            .with_ext("g", "0")
            .with_ext("h", "0")
            .with_ext("i", props("KEYS=k|"))
            .with_ext("n", "b");
        assert_eq!(send_refusal(&normal, |_| "NORMAL".to_owned()), None);
        let why = send_refusal(&normal, |_| "FIFO".to_owned()).expect("refused");
        assert!(why.contains("the expected type is FIFO, but actual type is NORMAL"), "{why}");
        let no_topic = send_refusal(&normal, |_| "UNSPECIFIED".to_owned()).expect("refused");
        assert!(no_topic.contains("UNSPECIFIED"), "{no_topic}");
        let retry = normal.clone().with_ext("b", "%RETRY%g");
        assert_eq!(send_refusal(&retry, |_| "FIFO".to_owned()), None);
    }

    #[test]
    fn lock_batch_goes_to_its_first_queues_broker() {
        assert_eq!(batch_mq_broker(br#"{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"T","brokerName":"b1","queueId":0}]}"#), Ok("b1".to_owned()));
        assert_eq!(batch_mq_broker(br#"{"consumerGroup":"g","mqSet":[]}"#), Err("MessageQueue set is empty"));
        assert!(batch_mq_broker(b"{not json").is_err());
    }
}
