//! What the in-process tests of processors and services share: a broker's shared state over a
//! store in a temporary directory (no server, no name server), and a loopback connection whose
//! server side hands each request to one processor, as the dispatcher would.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use remoting::connection::{self, Channel, InFlight, InboundHandler, Side};
use remoting::server::{Reply, RequestProcessor};
use remoting::RemotingCommand;
use store::config::{BrokerRole, FlushDiskType, MessageStoreConfig};
use store::message::MessageToStore;
use store::store::MessageStore;

use crate::broker::{Broker, BrokerParts};
use crate::config::BrokerConfig;
use crate::namesrv_client::BrokerIdentity;
use crate::replication::Ha;

pub const STORE_HOST: &str = "127.0.0.1:10911";

/// A small store's config under `dir`.
pub fn store_config(dir: &Path, flush: FlushDiskType, role: BrokerRole) -> MessageStoreConfig {
    MessageStoreConfig {
        store_path_root_dir: dir.to_string_lossy().into_owned(),
        mapped_file_size_commit_log: 256 * 1024,
        mapped_file_size_consume_queue: 100 * 20,
        max_hash_slot_num: 1000,
        max_index_num: 4000,
        flush_interval_commit_log_ms: 10,
        flush_interval_consume_queue_ms: 10,
        flush_disk_type: flush,
        broker_role: role,
        ..Default::default()
    }
}

/// An opened and started store.
pub fn open_store(config: MessageStoreConfig) -> Arc<MessageStore> {
    let store = MessageStore::open(config).expect("the test store opens");
    store.start().expect("the test store starts");
    store
}

/// The broker's shared state over a store in `dir`, as `mqbroker` builds it but without a server,
/// an HA service or name servers (so a SYNC_MASTER has no slave).
pub fn broker(dir: &Path, flush: FlushDiskType, role: BrokerRole) -> Arc<Broker> {
    let store_config = store_config(dir, flush, role);
    let store = open_store(store_config.clone());
    let config = BrokerConfig { broker_ip1: "127.0.0.1".into(), namesrv_addr: String::new(), ..Default::default() };
    let store_host: SocketAddr = STORE_HOST.parse().expect("a literal address");
    let identity = BrokerIdentity {
        cluster: config.broker_cluster_name.clone(),
        broker_name: config.broker_name.clone(),
        broker_id: 0,
        broker_addr: store_host.to_string(),
        ha_server_addr: String::new(),
    };
    let parts = BrokerParts { config, store_config, config_file: None, store, ha: Ha::Off, identity, store_host, broker_id: 0, acl: None };
    Arc::new(Broker::assemble(parts).expect("the test broker assembles"))
}

/// A message for `topic` queue 0 with `properties`.
pub fn message(topic: &str, properties: &str) -> MessageToStore {
    MessageToStore {
        topic: topic.to_owned(),
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse().expect("a literal address"),
        store_host: STORE_HOST.parse().expect("a literal address"),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from_static(b"hello"),
        properties: properties.to_owned(),
    }
}

/// Hands every request to one processor and answers as the server's dispatcher does (now, later
/// through the processor's own `Reply`, or an error response).
struct Direct(Arc<dyn RequestProcessor>);

impl InboundHandler for Direct {
    fn on_request(&self, channel: &Channel, request: RemotingCommand, _in_flight: InFlight) {
        let reply = Reply::to(channel, &request);
        match self.0.process(channel, request) {
            Ok(Some(response)) => reply.send(response),
            Ok(None) => {}
            Err(e) => reply.error(e.code, e.remark),
        }
    }
}

struct Nobody;

impl InboundHandler for Nobody {
    fn on_request(&self, _channel: &Channel, _request: RemotingCommand, _in_flight: InFlight) {}
}

/// A client connection over loopback whose peer runs `processor` on every request, and the
/// server side's channel (for calling the processor directly).
pub async fn loopback(processor: Arc<dyn RequestProcessor>) -> (Channel, Channel) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("a bound listener has an address");
    let (client, accepted) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
    let config = connection::ConnectionConfig::default();
    let server = connection::spawn(accepted.expect("accepted").0, &config, Side::Server, Arc::new(Direct(processor))).expect("server side");
    let client = connection::spawn(client.expect("connected"), &config, Side::Client, Arc::new(Nobody)).expect("client side");
    (client, server)
}

/// Sends `request` over the loopback and waits for its answer.
pub async fn call(client: &Channel, request: RemotingCommand) -> RemotingCommand {
    client.invoke(request, Duration::from_secs(10)).await.expect("an answer")
}
