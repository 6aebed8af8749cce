//! The gRPC front in local mode (`mqbroker --enable-proxy`): [`proxy::backend::Backend`] over
//! this broker. Each gRPC client gets one in-process connection to the broker's own server (a
//! [`command_pipe`] served by the same dispatcher), so it is a registered producer or consumer
//! like a remoting client, requests reach the same processors and pools with the same bounds,
//! and the broker's requests to it (CHECK_TRANSACTION_STATE) come back to the gRPC service.
//! Commands cross the pipe as they are: nothing is encoded or decoded on the way (as Java's local
//! mode hands its `RemotingCommand`s to the processors).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use proxy::backend::{Backend, BackendError, BrokerQueues, ClientRequests, GroupSettings, RequestsSlot, ToClient, TopicRoute};
use remoting::connection::{command_pipe, spawn_commands, Channel, ConnectionConfig, Endpoints, Side};
use remoting::fastjson;
use remoting::protocol::name::GroupName;
use remoting::protocol::namesrv::GetRouteInfoRequestHeader;
use remoting::protocol::route::{route_json_style, BrokerData, QueueData, TopicRouteData};
use remoting::server::StreamAcceptor;
use remoting::server::{ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, ResponseCode};

use crate::broker::Broker;

/// gRPC clients with a broker-side connection at once, at most.
const MAX_CLIENTS: usize = 10_000;

pub struct LocalBackend {
    broker: Arc<Broker>,
    acceptor: StreamAcceptor,
    connections: Mutex<HashMap<String, Channel>>,
    /// Where each client connects from, reported as its connection's peer (as Java's proxy
    /// channel reports the gRPC client's address); bounded as the connections are.
    addresses: Mutex<HashMap<String, SocketAddr>>,
    /// With ACL on, the account each client proved it holds (its gRPC signature), whose key signs
    /// its commands, so the broker's ACL checks them as that account's.
    identities: Mutex<HashMap<String, String>>,
    requests: RequestsSlot,
}

impl LocalBackend {
    pub fn new(broker: Arc<Broker>, acceptor: StreamAcceptor) -> LocalBackend {
        LocalBackend {
            broker,
            acceptor,
            connections: Mutex::new(HashMap::new()),
            addresses: Mutex::new(HashMap::new()),
            identities: Mutex::new(HashMap::new()),
            requests: Arc::new(OnceLock::new()),
        }
    }

    fn connection(&self, client_id: &str) -> Result<Channel, BackendError> {
        // Read before the connections' lock (`client_address` takes the two the other way).
        let peer = self.addresses.lock().get(client_id).copied().unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
        let mut connections = self.connections.lock();
        if let Some(c) = connections.get(client_id).filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        connections.retain(|_, c| !c.is_closed());
        if connections.len() >= MAX_CLIENTS {
            return Err(BackendError::Unreachable(format!("{MAX_CLIENTS} gRPC clients connected, the most taken")));
        }
        let (client_end, server_end) = command_pipe();
        let broker_addr = self.acceptor.local_addr();
        self.acceptor.serve_commands(server_end, peer).map_err(|e| BackendError::Unreachable(e.to_string()))?;
        let broker_name = self.broker.identity.broker_name.clone();
        let handler = Arc::new(ToClient { client_id: client_id.to_owned(), broker_name, requests: self.requests.clone() });
        let channel = spawn_commands(client_end, Endpoints { remote: broker_addr, local: peer }, &ConnectionConfig::default(), Side::Client, handler);
        connections.insert(client_id.to_owned(), channel.clone());
        Ok(channel)
    }
}

impl Backend for LocalBackend {
    fn invoke(
        &self,
        client_id: &str,
        broker_name: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<RemotingCommand, BackendError>> {
        let mine = self.broker.identity.broker_name.clone();
        if broker_name != mine {
            let name = broker_name.to_owned();
            return async move { Err(BackendError::NoBroker(name)) }.boxed();
        }
        let channel = match self.connection(client_id) {
            Ok(c) => c,
            Err(e) => return async move { Err(e) }.boxed(),
        };
        let mut request = request;
        let acl_on = self.broker.acl.is_some();
        if let Some(acl) = &self.broker.acl {
            let access_key = self.identities.lock().get(client_id).cloned();
            if let Some((access_key, secret_key)) = access_key.and_then(|ak| acl.secret_of(&ak).map(|sk| (ak, sk))) {
                crate::acl::Credentials { access_key, secret_key }.sign(&mut request);
            }
        }
        async move {
            if request.is_oneway() {
                channel.invoke_oneway(request).map_err(|e| BackendError::Unreachable(e.to_string()))?;
                return Ok(RemotingCommand::request(remoting::RequestCode(0)));
            }
            match channel.invoke(request, timeout).await {
                // The account may not: Java's proxy answers that as an authorization failure.
                Ok(r) if acl_on && r.code != ResponseCode::SUCCESS.0 && r.remark.as_deref().is_some_and(|m| m.starts_with(crate::acl::REFUSAL_PREFIX)) => {
                    Err(BackendError::Unauthorized(r.remark.unwrap_or_default()))
                }
                Ok(r) => Ok(r),
                Err(remoting::connection::ChannelError::Timeout { .. }) => Err(BackendError::Timeout),
                Err(e) => Err(BackendError::Unreachable(e.to_string())),
            }
        }
        .boxed()
    }

    fn brokers(&self) -> Vec<String> {
        vec![self.broker.identity.broker_name.clone()]
    }

    fn route(&self, topic: &str) -> Option<TopicRoute> {
        let tc = self.broker.topics.select(topic)?;
        let message_type = message_type_of_topic(&tc);
        Some(TopicRoute {
            brokers: vec![BrokerQueues {
                broker_name: self.broker.identity.broker_name.clone(),
                read_queue_nums: tc.read_queue_nums,
                write_queue_nums: tc.write_queue_nums,
                perm: tc.perm & self.broker.config().broker_permission,
            }],
            message_type,
        })
    }

    fn group(&self, group: &str) -> Option<GroupSettings> {
        let name = GroupName::new(group).ok()?;
        let auto = self.broker.config().auto_create_subscription_group;
        let g = self.broker.groups.find_or_create(&name, auto)?;
        Some(GroupSettings { consume_orderly: g.consume_message_orderly, retry_max_times: g.retry_max_times })
    }

    fn authenticate(&self, client_id: &str, credentials: Option<&proxy::auth::Credentials>) -> Result<(), String> {
        let Some(acl) = &self.broker.acl else { return Ok(()) };
        let Some(c) = credentials else { return Err("No accessKey is configured".to_owned()) };
        let Some(secret_key) = acl.secret_of(&c.access_key) else { return Err(format!("No acl config for {}", c.access_key)) };
        if !proxy::auth::signature_matches(c, &secret_key) {
            return Err(format!("Check signature failed for accessKey={}", c.access_key));
        }
        if !client_id.is_empty() {
            let mut identities = self.identities.lock();
            if identities.len() >= MAX_CLIENTS && !identities.contains_key(client_id) {
                let connections = self.connections.lock();
                identities.retain(|id, _| connections.get(id).is_some_and(|c| !c.is_closed()));
            }
            if identities.len() < MAX_CLIENTS || identities.contains_key(client_id) {
                identities.insert(client_id.to_owned(), c.access_key.clone());
            }
        }
        Ok(())
    }

    fn client_gone(&self, client_id: &str) {
        self.identities.lock().remove(client_id);
        self.addresses.lock().remove(client_id);
        if let Some(c) = self.connections.lock().remove(client_id) {
            c.close();
        }
    }

    fn client_address(&self, client_id: &str, addr: SocketAddr) {
        let mut addresses = self.addresses.lock();
        if addresses.len() >= MAX_CLIENTS && !addresses.contains_key(client_id) {
            // Forget those without a live connection first; past that, the new one goes unnamed.
            let connections = self.connections.lock();
            addresses.retain(|id, _| connections.get(id).is_some_and(|c| !c.is_closed()));
            if addresses.len() >= MAX_CLIENTS {
                return;
            }
        }
        addresses.insert(client_id.to_owned(), addr);
    }

    fn set_client_requests(&self, handler: Arc<dyn ClientRequests>) {
        let _ = self.requests.set(handler);
    }
}

/// A topic's `message.type` (Java's `TopicConfig.getTopicMessageType`: NORMAL when not set).
fn message_type_of_topic(tc: &remoting::protocol::topic::TopicConfig) -> String {
    tc.attributes.get(crate::topic_attributes::MESSAGE_TYPE).cloned().unwrap_or_else(|| "NORMAL".to_owned())
}

/// The broker's codes on the proxy's remoting port, checked first as Java's proxy activities check
/// them: a code Java forwards to a named broker needs the name (`bname`, `n` in the short send
/// headers; VERSION_NOT_SUPPORTED without it, whatever the name, as a local proxy serves its own
/// broker), and with `enableTopicMessageTypeCheck` a send whose message type does not match its
/// topic's is refused MESSAGE_ILLEGAL before the broker's send processor sees it.
pub struct ProxyPortChecks {
    inner: Arc<dyn RequestProcessor>,
    broker: Arc<Broker>,
    check_message_types: bool,
}

impl ProxyPortChecks {
    pub fn new(inner: Arc<dyn RequestProcessor>, broker: Arc<Broker>, check_message_types: bool) -> ProxyPortChecks {
        ProxyPortChecks { inner, broker, check_message_types }
    }
}

impl RequestProcessor for ProxyPortChecks {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        use proxy::remoting_port::{named_broker, no_broker_name, send_refusal, SEND_CODES, UNNAMED_CODES};
        let code = request.request_code();
        if !UNNAMED_CODES.contains(&code) && named_broker(&request).is_none() {
            return Ok(Some(crate::processor::send::decorate(&self.broker.config(), no_broker_name(&request))));
        }
        if self.check_message_types && SEND_CODES.contains(&code) {
            let topics = &self.broker.topics;
            let refusal = send_refusal(&request, |topic| topics.select(topic).map_or_else(|| "UNSPECIFIED".to_owned(), |tc| message_type_of_topic(&tc)));
            if let Some(why) = refusal {
                let refused = RemotingCommand::error_response(&request, ResponseCode::MESSAGE_ILLEGAL, why);
                return Ok(Some(crate::processor::send::decorate(&self.broker.config(), refused)));
            }
        }
        self.inner.process(channel, request)
    }

    fn reject(&self) -> bool {
        self.inner.reject()
    }

    fn answers_are_small(&self) -> bool {
        self.inner.answers_are_small()
    }

    fn runs_in_place(&self, request: &remoting::RemotingCommand) -> bool {
        self.inner.runs_in_place(request)
    }
}

/// GET_ROUTEINFO_BY_TOPIC on the proxy's remoting port: this broker's queues of the topic, with the
/// port's own address as the broker's, so a client that takes the proxy for its name server
/// sends everything to it. (Java 5.3.3's local mode names the gRPC port there, where a remoting
/// client cannot be served; its cluster mode names the remoting port, as this does.)
pub struct ProxyRoutes {
    broker: Arc<Broker>,
    addr: String,
}

impl ProxyRoutes {
    pub fn new(broker: Arc<Broker>, addr: String) -> ProxyRoutes {
        ProxyRoutes { broker, addr }
    }
}

impl RequestProcessor for ProxyRoutes {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let h: GetRouteInfoRequestHeader = request.decode_header()?;
        let Some(tc) = self.broker.topics.select(&h.topic) else {
            return Err(ProcessError::new(
                ResponseCode::TOPIC_NOT_EXIST,
                format!("No topic route info in name server for the topic: {}{}", h.topic, remoting::protocol::FAQ_SUFFIX),
            ));
        };
        let config = self.broker.config();
        let route = TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_addrs: [(0, self.addr.clone())].into(),
                broker_name: config.broker_name.clone(),
                cluster: config.broker_cluster_name.clone(),
                enable_acting_master: false,
                zone_name: None,
            }],
            queue_datas: vec![QueueData {
                broker_name: config.broker_name.clone(),
                perm: tc.perm & config.broker_permission,
                read_queue_nums: tc.read_queue_nums,
                topic_sys_flag: tc.topic_sys_flag,
                write_queue_nums: tc.write_queue_nums,
            }],
            ..Default::default()
        };
        let body = fastjson::to_vec(&route, route_json_style(request.version, h.accept_standard_json_only));
        Ok(Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(body)))
    }
}
