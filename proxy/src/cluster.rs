//! The gRPC front in cluster mode (`mqproxy`): [`Backend`] over the name server and the brokers of
//! a cluster, as Java's rocketmq-proxy 5.3.3 with `proxyMode` CLUSTER.
//!
//! - Routes come from the name server (GET_ROUTEINFO_BY_TOPIC) into a cache: an entry older than
//!   `topicRouteServiceCacheRefreshSeconds` is answered and reloaded in the background, one not
//!   asked for in `topicRouteServiceCacheExpiredSeconds` is dropped (Java's refresh-after-write and
//!   expire-after-access). A topic no broker serves is cached as such, as Java does.
//! - A topic's `message.type` is the attribute of its config, read with GET_TOPIC_CONFIG from one
//!   broker of its route (Java's `ClusterMetadataService`); `UNSPECIFIED` when it cannot be read.
//!   The type is loaded with the route and cached with it (Java's separate `topicConfigCache*`
//!   keys have the same defaults and are not read).
//! - A group's settings come from GET_SUBSCRIPTIONGROUP_CONFIG to one broker of the cluster (the
//!   broker creates the group when it auto-creates groups), cached the same way.
//! - The brokers (heartbeats go to each) are the masters of `rocketMQClusterName`, or of every
//!   cluster when the name server knows no such cluster (GET_BROKER_CLUSTER_INFO, read again every
//!   refresh period); a master a route names is also called.
//! - Requests go to a broker's master over one connection per (gRPC client, broker), so each
//!   client is a registered producer or consumer on each broker, and the broker's requests to it
//!   (CHECK_TRANSACTION_STATE) reach [`ClientRequests`], marked with the broker's name.
//!
//! The synchronous lookups ([`Backend::route`], [`Backend::group`]) wait for a first load with
//! `block_in_place`, so the runtime must be multi-threaded; on a current-thread runtime a first
//! lookup starts the load and answers nothing.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::connection::{self, Channel, ChannelError, ConnectionConfig, Side};
use remoting::fastjson;
use remoting::protocol::route::{ClusterInfo, TopicRouteData};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

use crate::backend::{Backend, BackendError, BrokerQueues, ClientRequests, GroupSettings, RequestsSlot, ToClient, TopicRoute};
use crate::config::ProxyConfig;

/// Java's `DEFAULT_TIMEOUT` of the proxy's metadata and route calls.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);
/// gRPC clients with broker connections at once, at most.
const MAX_CLIENTS: usize = 10_000;
/// Broker connections of one client, at most (one per broker).
const MAX_CONNECTIONS_PER_CLIENT: usize = 64;
/// Broker connections in all, at most.
const MAX_CONNECTIONS: usize = 20_000;

/// What the cluster backend reads of `rmq-proxy.json`.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// `namesrvAddr`: `host:port` entries separated by `;`.
    pub namesrv_addrs: Vec<String>,
    pub cluster_name: String,
    pub refresh: Duration,
    pub expire: Duration,
    pub max_entries: usize,
}

impl ClusterSettings {
    pub fn from_config(c: &ProxyConfig) -> ClusterSettings {
        ClusterSettings {
            namesrv_addrs: c.namesrv_addr.split(';').map(str::trim).filter(|a| !a.is_empty()).map(str::to_owned).collect(),
            cluster_name: c.rocket_mq_cluster_name.clone(),
            refresh: Duration::from_secs(c.topic_route_service_cache_refresh_seconds.max(1)),
            expire: Duration::from_secs(c.topic_route_service_cache_expired_seconds.max(1)),
            max_entries: c.topic_route_service_cache_max_num.max(1),
        }
    }
}

/// One cached lookup: its value, when it was loaded and last asked for, and whether a reload runs.
struct Entry<V> {
    value: V,
    loaded: Instant,
    accessed: Instant,
    reloading: bool,
}

/// Java's loading cache, reduced to what the proxy needs: refresh after write, expire after access,
/// a bounded size.
struct Cache<V> {
    entries: Mutex<HashMap<String, Entry<V>>>,
}

enum Lookup<V> {
    Fresh(V),
    /// Answer this, and reload.
    Stale(V),
    Missing,
}

impl<V: Clone> Cache<V> {
    fn new() -> Self {
        Cache { entries: Mutex::new(HashMap::new()) }
    }

    /// The entry of `key`, counted as an access.
    fn lookup(&self, key: &str, s: &ClusterSettings) -> Lookup<V> {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        let Some(e) = entries.get_mut(key) else { return Lookup::Missing };
        if now.duration_since(e.accessed) > s.expire {
            entries.remove(key);
            return Lookup::Missing;
        }
        e.accessed = now;
        if now.duration_since(e.loaded) > s.refresh && !e.reloading {
            e.reloading = true;
            return Lookup::Stale(e.value.clone());
        }
        Lookup::Fresh(e.value.clone())
    }

    fn put(&self, key: &str, value: V, s: &ClusterSettings) {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if entries.len() >= s.max_entries && !entries.contains_key(key) {
            entries.retain(|_, e| now.duration_since(e.accessed) <= s.expire);
            if entries.len() >= s.max_entries {
                if let Some(oldest) = entries.iter().min_by_key(|(_, e)| e.accessed).map(|(k, _)| k.clone()) {
                    entries.remove(&oldest);
                }
            }
        }
        entries.insert(key.to_owned(), Entry { value, loaded: now, accessed: now, reloading: false });
    }

    /// A failed reload keeps the old value, tried again at the next refresh.
    fn reload_failed(&self, key: &str) {
        if let Some(e) = self.entries.lock().get_mut(key) {
            e.reloading = false;
            e.loaded = Instant::now();
        }
    }

    fn drop_expired(&self, s: &ClusterSettings) {
        let now = Instant::now();
        self.entries.lock().retain(|_, e| now.duration_since(e.accessed) <= s.expire);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

/// Runs `load` to completion from synchronous code inside a multi-threaded runtime.
fn wait_for<F: Future>(load: F) -> Option<F::Output> {
    let handle = tokio::runtime::Handle::try_current().ok()?;
    match handle.runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => Some(tokio::task::block_in_place(|| handle.block_on(load))),
        _ => None,
    }
}

/// Starts a background reload when inside a runtime (else the next lookup after one tries again).
fn spawn(reload: impl Future<Output = ()> + Send + 'static) {
    if let Ok(h) = tokio::runtime::Handle::try_current() {
        h.spawn(reload);
    }
}

/// A client's connection to one broker: the address it was made to, and the connection.
struct Connection {
    addr: String,
    channel: Channel,
}

struct Inner {
    settings: ClusterSettings,
    connection_config: ConnectionConfig,
    /// The name server and the metadata calls to brokers (not as any client).
    lookups: RemotingClient,
    /// Name servers are tried from this one on (the last that answered).
    namesrv_index: AtomicUsize,
    routes: Cache<Option<TopicRoute>>,
    groups: Cache<Option<GroupSettings>>,
    /// Master addresses by broker name.
    masters: Mutex<BTreeMap<String, String>>,
    /// The cluster's brokers, from GET_BROKER_CLUSTER_INFO.
    cluster_brokers: Mutex<Vec<String>>,
    connections: Mutex<HashMap<String, HashMap<String, Connection>>>,
    requests: RequestsSlot,
    round_robin: AtomicUsize,
    /// When an unknown broker name last made us ask the name server.
    unknown_broker_refresh: Mutex<Option<Instant>>,
}

pub struct ClusterBackend {
    inner: Arc<Inner>,
    refresher: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl ClusterBackend {
    /// A backend over `settings.namesrv_addrs`. Inside a tokio runtime it refreshes the cluster's
    /// brokers and the cached routes in the background until dropped.
    pub fn new(settings: ClusterSettings) -> ClusterBackend {
        let inner = Arc::new(Inner {
            settings,
            connection_config: ConnectionConfig::default(),
            lookups: RemotingClient::new(ClientConfig { connect_timeout: LOOKUP_TIMEOUT, ..ClientConfig::default() }),
            namesrv_index: AtomicUsize::new(0),
            routes: Cache::new(),
            groups: Cache::new(),
            masters: Mutex::new(BTreeMap::new()),
            cluster_brokers: Mutex::new(Vec::new()),
            connections: Mutex::new(HashMap::new()),
            requests: Arc::new(OnceLock::new()),
            round_robin: AtomicUsize::new(0),
            unknown_broker_refresh: Mutex::new(None),
        });
        let refresher = tokio::runtime::Handle::try_current().ok().map(|h| h.spawn(refresh_loop(Arc::downgrade(&inner))));
        ClusterBackend { inner, refresher: Mutex::new(refresher) }
    }

    /// Loads the cluster's brokers now (`mqproxy` does at start, so the first heartbeat finds them).
    pub async fn refresh_brokers(&self) -> Result<(), BackendError> {
        self.inner.refresh_brokers().await
    }

    /// The master's address of `broker_name` (the name server asked again for an unknown name,
    /// at most once a second).
    pub async fn master_address(&self, broker_name: &str) -> Result<String, BackendError> {
        self.inner.master_of(broker_name).await
    }

    /// The name server's answer to GET_ROUTEINFO_BY_TOPIC for `topic`, as it came (the proxy's
    /// remoting port answers routes from it).
    pub async fn namesrv_route(&self, topic: &str) -> Result<RemotingCommand, BackendError> {
        self.inner.ask_namesrv(RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic)).await
    }

    /// Broker connections open now, in all.
    pub fn connection_count(&self) -> usize {
        self.inner.connections.lock().values().map(HashMap::len).sum()
    }
}

impl Drop for ClusterBackend {
    fn drop(&mut self) {
        if let Some(t) = self.refresher.lock().take() {
            t.abort();
        }
        for (_, conns) in self.inner.connections.lock().drain() {
            for (_, c) in conns {
                c.channel.close();
            }
        }
        self.inner.lookups.shutdown();
    }
}

/// Every refresh period: the cluster's brokers again, expired cache entries dropped, closed
/// connections forgotten. Cached entries reload when asked for (refresh after write), as Java's.
async fn refresh_loop(inner: std::sync::Weak<Inner>) {
    let period = match inner.upgrade() {
        Some(i) => i.settings.refresh,
        None => return,
    };
    loop {
        tokio::time::sleep(period).await;
        let Some(i) = inner.upgrade() else { return };
        if let Err(e) = i.refresh_brokers().await {
            tracing::warn!(error = %e, "cannot refresh the cluster's brokers");
        }
        i.routes.drop_expired(&i.settings);
        i.groups.drop_expired(&i.settings);
        i.close_idle_connections();
    }
}

fn unreachable(e: impl std::fmt::Display) -> BackendError {
    BackendError::Unreachable(e.to_string())
}

fn channel_error(e: ChannelError) -> BackendError {
    match e {
        ChannelError::Timeout { .. } => BackendError::Timeout,
        e => unreachable(e),
    }
}

/// The master's address of a broker's addresses (broker id 0).
fn master(addrs: &BTreeMap<i64, String>) -> Option<&String> {
    addrs.get(&0).filter(|a| !a.is_empty())
}

/// A route as the service sees it: the queues of brokers with a master, and the topic's type.
pub fn topic_route(data: &TopicRouteData, message_type: String) -> TopicRoute {
    let brokers = data
        .queue_datas
        .iter()
        .filter(|q| data.broker_datas.iter().any(|b| b.broker_name == q.broker_name && master(&b.broker_addrs).is_some()))
        .map(|q| BrokerQueues { broker_name: q.broker_name.clone(), read_queue_nums: q.read_queue_nums, write_queue_nums: q.write_queue_nums, perm: q.perm })
        .collect();
    TopicRoute { brokers, message_type }
}

/// `message.type` of a GET_TOPIC_CONFIG answer's body (`NORMAL` when the topic has none, as
/// Java's `TopicConfig.getTopicMessageType`).
pub fn message_type_of(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = fastjson::from_slice(body).ok()?;
    Some(v.get("attributes").and_then(|a| a.get("message.type")).and_then(|t| t.as_str()).unwrap_or("NORMAL").to_owned())
}

/// The settings in a GET_SUBSCRIPTIONGROUP_CONFIG answer's body.
pub fn group_settings_of(body: &[u8]) -> Option<GroupSettings> {
    let v: serde_json::Value = fastjson::from_slice(body).ok()?;
    let retry = v.get("retryMaxTimes").and_then(|r| r.as_i64()).and_then(|r| i32::try_from(r).ok()).unwrap_or(16);
    Some(GroupSettings { consume_orderly: v.get("consumeMessageOrderly").and_then(|o| o.as_bool()).unwrap_or(false), retry_max_times: retry })
}

impl Inner {
    /// Sends a lookup to the name servers, from the last that answered on.
    async fn ask_namesrv(&self, request: RemotingCommand) -> Result<RemotingCommand, BackendError> {
        let addrs = &self.settings.namesrv_addrs;
        if addrs.is_empty() {
            return Err(BackendError::Unreachable("no name server address (namesrvAddr or -n)".to_owned()));
        }
        let first = self.namesrv_index.load(Ordering::Relaxed);
        let mut last = BackendError::Unreachable("no name server answered".to_owned());
        for i in 0..addrs.len() {
            let n = (first + i) % addrs.len();
            match self.lookups.invoke(&addrs[n], request.clone(), LOOKUP_TIMEOUT).await {
                Ok(r) => {
                    self.namesrv_index.store(n, Ordering::Relaxed);
                    return Ok(r);
                }
                Err(e) => last = unreachable(e),
            }
        }
        Err(last)
    }

    async fn refresh_brokers(&self) -> Result<(), BackendError> {
        let r = self.ask_namesrv(RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO)).await?;
        if r.code != 0 {
            return Err(unreachable(format!("GET_BROKER_CLUSTER_INFO answered {}: {}", r.code, r.remark.unwrap_or_default())));
        }
        let info: ClusterInfo = fastjson::from_slice(r.body_bytes()).map_err(unreachable)?;
        let names: Vec<String> = match info.cluster_addr_table.get(&self.settings.cluster_name) {
            Some(names) => names.iter().cloned().collect(),
            None => info.broker_addr_table.keys().cloned().collect(),
        };
        let mut brokers = Vec::new();
        {
            let mut masters = self.masters.lock();
            // A broker name without a master now (its master gone) is not called until one is back.
            for (name, b) in &info.broker_addr_table {
                match master(&b.broker_addrs) {
                    Some(addr) => {
                        masters.insert(name.clone(), addr.clone());
                    }
                    None => {
                        masters.remove(name);
                    }
                }
            }
            brokers.extend(names.into_iter().filter(|n| masters.contains_key(n)));
        }
        *self.cluster_brokers.lock() = brokers;
        Ok(())
    }

    /// The route and message type of `topic` from the name server and a broker. `Ok(None)`: no
    /// broker serves it.
    async fn load_route(&self, topic: &str) -> Result<Option<TopicRoute>, BackendError> {
        let r = self.ask_namesrv(RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic)).await?;
        if r.code == ResponseCode::TOPIC_NOT_EXIST.0 {
            return Ok(None);
        }
        if r.code != 0 {
            return Err(unreachable(format!("GET_ROUTEINFO_BY_TOPIC answered {}: {}", r.code, r.remark.unwrap_or_default())));
        }
        let data: TopicRouteData = fastjson::from_slice(r.body_bytes()).map_err(unreachable)?;
        let addrs: Vec<String> = {
            let mut masters = self.masters.lock();
            data.broker_datas
                .iter()
                .filter_map(|b| {
                    let addr = master(&b.broker_addrs)?;
                    masters.insert(b.broker_name.clone(), addr.clone());
                    Some(addr.clone())
                })
                .collect()
        };
        if addrs.is_empty() {
            return Ok(Some(topic_route(&data, "UNSPECIFIED".to_owned())));
        }
        // Java reads the topic's config from one broker of the route, picked at random.
        let addr = &addrs[self.round_robin.fetch_add(1, Ordering::Relaxed) % addrs.len()];
        let request = RemotingCommand::request(RequestCode::GET_TOPIC_CONFIG).with_ext("topic", topic);
        let message_type = match self.lookups.invoke(addr, request, LOOKUP_TIMEOUT).await {
            Ok(r) if r.code == 0 => message_type_of(r.body_bytes()).unwrap_or_else(|| "UNSPECIFIED".to_owned()),
            Ok(_) => "UNSPECIFIED".to_owned(),
            Err(e) => {
                tracing::warn!(topic, broker = %addr, error = %e, "cannot read the topic's config");
                "UNSPECIFIED".to_owned()
            }
        };
        Ok(Some(topic_route(&data, message_type)))
    }

    async fn reload_route(self: &Arc<Self>, topic: &str) {
        match self.load_route(topic).await {
            Ok(route) => self.routes.put(topic, route, &self.settings),
            Err(e) => {
                tracing::warn!(topic, error = %e, "cannot refresh the topic's route");
                self.routes.reload_failed(topic);
            }
        }
    }

    async fn load_group(&self, group: &str) -> Result<Option<GroupSettings>, BackendError> {
        let addr = {
            let brokers = self.cluster_brokers.lock().clone();
            let masters = self.masters.lock();
            let known: Vec<&String> = if brokers.is_empty() { masters.values().collect() } else { brokers.iter().filter_map(|b| masters.get(b)).collect() };
            if known.is_empty() {
                None
            } else {
                Some(known[self.round_robin.fetch_add(1, Ordering::Relaxed) % known.len()].clone())
            }
        };
        let addr = match addr {
            Some(a) => a,
            None => {
                self.refresh_brokers().await?;
                let brokers = self.cluster_brokers.lock().clone();
                let masters = self.masters.lock();
                brokers.iter().find_map(|b| masters.get(b).cloned()).ok_or_else(|| BackendError::NoBroker(self.settings.cluster_name.clone()))?
            }
        };
        let r = self
            .lookups
            .invoke(&addr, RemotingCommand::request(RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG).with_ext("group", group), LOOKUP_TIMEOUT)
            .await
            .map_err(unreachable)?;
        if r.code == ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST.0 {
            return Ok(None);
        }
        if r.code != 0 {
            return Err(unreachable(format!("GET_SUBSCRIPTIONGROUP_CONFIG answered {}: {}", r.code, r.remark.unwrap_or_default())));
        }
        Ok(group_settings_of(r.body_bytes()))
    }

    async fn reload_group(self: &Arc<Self>, group: &str) {
        match self.load_group(group).await {
            Ok(g) => self.groups.put(group, g, &self.settings),
            Err(e) => {
                tracing::warn!(group, error = %e, "cannot read the group's config");
                self.groups.reload_failed(group);
            }
        }
    }

    async fn master_of(&self, broker_name: &str) -> Result<String, BackendError> {
        if let Some(a) = self.masters.lock().get(broker_name) {
            return Ok(a.clone());
        }
        // A name from a client (a receipt handle, a queue) may be made up: the name server is asked
        // again at most once a second for unknown names.
        let now = Instant::now();
        let ask = {
            let mut last = self.unknown_broker_refresh.lock();
            let due = last.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1));
            if due {
                *last = Some(now);
            }
            due
        };
        if ask {
            self.refresh_brokers().await?;
        }
        self.masters.lock().get(broker_name).cloned().ok_or_else(|| BackendError::NoBroker(broker_name.to_owned()))
    }

    /// The client's open connection to the broker at `addr`, made if there is none.
    async fn connection(&self, client_id: &str, broker_name: &str, addr: &str) -> Result<Channel, BackendError> {
        {
            let conns = self.connections.lock();
            if let Some(c) = conns.get(client_id).and_then(|m| m.get(broker_name)).filter(|c| c.addr == addr && !c.channel.is_closed()) {
                return Ok(c.channel.clone());
            }
        }
        self.check_room(client_id, broker_name)?;
        let stream = match tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(unreachable(format!("cannot connect to {addr}: {e}"))),
            Err(_) => return Err(unreachable(format!("connecting to {addr} took longer than {LOOKUP_TIMEOUT:?}"))),
        };
        let handler = Arc::new(ToClient { client_id: client_id.to_owned(), broker_name: broker_name.to_owned(), requests: self.requests.clone() });
        let channel = connection::spawn(stream, &self.connection_config, Side::Client, handler).map_err(unreachable)?;
        let mut conns = self.connections.lock();
        let mine = conns.entry(client_id.to_owned()).or_default();
        // Two calls may have connected at once: the first live one stays.
        if let Some(existing) = mine.get(broker_name).filter(|c| c.addr == addr && !c.channel.is_closed()) {
            channel.close();
            return Ok(existing.channel.clone());
        }
        if let Some(old) = mine.insert(broker_name.to_owned(), Connection { addr: addr.to_owned(), channel: channel.clone() }) {
            old.channel.close();
        }
        Ok(channel)
    }

    /// Refuses a new connection past the bounds (closed ones are forgotten first).
    fn check_room(&self, client_id: &str, broker_name: &str) -> Result<(), BackendError> {
        let mut conns = self.connections.lock();
        for m in conns.values_mut() {
            m.retain(|_, c| !c.channel.is_closed());
        }
        conns.retain(|id, m| !m.is_empty() || id == client_id);
        let known_client = conns.contains_key(client_id);
        if !known_client && conns.len() >= MAX_CLIENTS {
            return Err(unreachable(format!("{MAX_CLIENTS} gRPC clients connected, the most taken")));
        }
        let mine = conns.get(client_id).map_or(0, |m| m.len() - usize::from(m.contains_key(broker_name)));
        if mine >= MAX_CONNECTIONS_PER_CLIENT {
            return Err(unreachable(format!("the client has {MAX_CONNECTIONS_PER_CLIENT} broker connections, the most taken")));
        }
        let all: usize = conns.values().map(HashMap::len).sum();
        if all >= MAX_CONNECTIONS {
            return Err(unreachable(format!("{MAX_CONNECTIONS} broker connections open, the most taken")));
        }
        Ok(())
    }

    fn close_idle_connections(&self) {
        let mut conns = self.connections.lock();
        for m in conns.values_mut() {
            m.retain(|_, c| !c.channel.is_closed());
        }
        conns.retain(|_, m| !m.is_empty());
    }
}

impl Backend for ClusterBackend {
    fn invoke(
        &self,
        client_id: &str,
        broker_name: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<RemotingCommand, BackendError>> {
        let inner = self.inner.clone();
        let (client_id, broker_name) = (client_id.to_owned(), broker_name.to_owned());
        async move {
            let addr = inner.master_of(&broker_name).await?;
            let channel = inner.connection(&client_id, &broker_name, &addr).await?;
            if request.is_oneway() {
                channel.invoke_oneway(request).map_err(channel_error)?;
                return Ok(RemotingCommand::request(RequestCode(0)));
            }
            channel.invoke(request, timeout).await.map_err(channel_error)
        }
        .boxed()
    }

    fn brokers(&self) -> Vec<String> {
        let brokers = self.inner.cluster_brokers.lock().clone();
        if !brokers.is_empty() {
            return brokers;
        }
        let inner = self.inner.clone();
        if let Some(Err(e)) = wait_for(async move { inner.refresh_brokers().await }) {
            tracing::warn!(error = %e, "cannot read the cluster's brokers");
        }
        let brokers = self.inner.cluster_brokers.lock().clone();
        if brokers.is_empty() {
            self.inner.masters.lock().keys().cloned().collect()
        } else {
            brokers
        }
    }

    fn route(&self, topic: &str) -> Option<TopicRoute> {
        let inner = &self.inner;
        match inner.routes.lookup(topic, &inner.settings) {
            Lookup::Fresh(r) => r,
            Lookup::Stale(r) => {
                let (i, t) = (inner.clone(), topic.to_owned());
                spawn(async move { i.reload_route(&t).await });
                r
            }
            Lookup::Missing => {
                let (i, t) = (inner.clone(), topic.to_owned());
                match wait_for(async move { i.load_route(&t).await }) {
                    Some(Ok(route)) => {
                        inner.routes.put(topic, route.clone(), &inner.settings);
                        route
                    }
                    Some(Err(e)) => {
                        tracing::warn!(topic, error = %e, "cannot read the topic's route");
                        None
                    }
                    None => {
                        let (i, t) = (inner.clone(), topic.to_owned());
                        spawn(async move { i.reload_route(&t).await });
                        None
                    }
                }
            }
        }
    }

    fn group(&self, group: &str) -> Option<GroupSettings> {
        let inner = &self.inner;
        match inner.groups.lookup(group, &inner.settings) {
            Lookup::Fresh(g) => g,
            Lookup::Stale(g) => {
                let (i, name) = (inner.clone(), group.to_owned());
                spawn(async move { i.reload_group(&name).await });
                g
            }
            Lookup::Missing => {
                let (i, name) = (inner.clone(), group.to_owned());
                match wait_for(async move { i.load_group(&name).await }) {
                    Some(Ok(g)) => {
                        inner.groups.put(group, g.clone(), &inner.settings);
                        g
                    }
                    Some(Err(e)) => {
                        tracing::warn!(group, error = %e, "cannot read the group's config");
                        None
                    }
                    None => None,
                }
            }
        }
    }

    fn client_gone(&self, client_id: &str) {
        if let Some(conns) = self.inner.connections.lock().remove(client_id) {
            for (_, c) in conns {
                c.channel.close();
            }
        }
    }

    fn set_client_requests(&self, handler: Arc<dyn ClientRequests>) {
        let _ = self.inner.requests.set(handler);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use remoting::protocol::route::{BrokerData, QueueData};

    fn settings() -> ClusterSettings {
        ClusterSettings { namesrv_addrs: vec![], cluster_name: "C".into(), refresh: Duration::from_millis(50), expire: Duration::from_secs(60), max_entries: 2 }
    }

    #[test]
    fn a_route_keeps_the_queues_of_brokers_with_a_master() {
        let data = TopicRouteData {
            broker_datas: vec![
                BrokerData {
                    broker_addrs: [(0, "127.0.0.1:1".to_owned())].into(),
                    broker_name: "a".into(),
                    cluster: "C".into(),
                    enable_acting_master: false,
                    zone_name: None,
                },
                BrokerData {
                    broker_addrs: [(1, "127.0.0.1:2".to_owned())].into(),
                    broker_name: "b".into(),
                    cluster: "C".into(),
                    enable_acting_master: false,
                    zone_name: None,
                },
            ],
            queue_datas: vec![
                QueueData { broker_name: "a".into(), perm: 6, read_queue_nums: 4, topic_sys_flag: 0, write_queue_nums: 4 },
                QueueData { broker_name: "b".into(), perm: 6, read_queue_nums: 2, topic_sys_flag: 0, write_queue_nums: 2 },
            ],
            ..TopicRouteData::default()
        };
        let r = topic_route(&data, "FIFO".into());
        assert_eq!(r.message_type, "FIFO");
        assert_eq!(r.brokers, vec![BrokerQueues { broker_name: "a".into(), read_queue_nums: 4, write_queue_nums: 4, perm: 6 }]);
    }

    #[test]
    fn message_type_and_group_settings_read_javas_bodies() {
        assert_eq!(message_type_of(br#"{"attributes":{"message.type":"TRANSACTION"},"topicName":"T","mappingDetail":null}"#).as_deref(), Some("TRANSACTION"));
        assert_eq!(message_type_of(br#"{"topicName":"T","perm":6}"#).as_deref(), Some("NORMAL"));
        assert_eq!(message_type_of(b"not json"), None);
        let g = group_settings_of(br#"{"groupName":"g","consumeMessageOrderly":true,"retryMaxTimes":3,"attributes":{}}"#);
        assert_eq!(g, Some(GroupSettings { consume_orderly: true, retry_max_times: 3 }));
    }

    #[test]
    fn the_cache_refreshes_after_write_and_stays_bounded() {
        let s = settings();
        let c: Cache<i32> = Cache::new();
        assert!(matches!(c.lookup("a", &s), Lookup::Missing));
        c.put("a", 1, &s);
        assert!(matches!(c.lookup("a", &s), Lookup::Fresh(1)));
        std::thread::sleep(Duration::from_millis(60));
        assert!(matches!(c.lookup("a", &s), Lookup::Stale(1)));
        // One reload at a time.
        assert!(matches!(c.lookup("a", &s), Lookup::Fresh(1)));
        c.put("b", 2, &s);
        c.put("c", 3, &s);
        assert_eq!(c.len(), 2);
    }
}
