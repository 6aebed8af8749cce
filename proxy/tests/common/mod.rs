//! What the cluster-mode tests share: a fake broker (any remoting handler served on 127.0.0.1) and
//! its registration with our name server.
#![allow(dead_code)] // each test file uses its own part

use std::sync::Arc;
use std::time::Duration;

use remoting::client::RemotingClient;
use remoting::connection::{self, ConnectionConfig, InboundHandler, Side};
use remoting::protocol::namesrv::RegisterBrokerRequestHeader;
use remoting::protocol::register::RegisterBrokerBody;
use remoting::protocol::topic::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use remoting::{RemotingCommand, RequestCode};

pub const TIMEOUT: Duration = Duration::from_secs(5);

/// A fake broker: `H` answers every connection's requests; its address and the handler.
pub async fn fake_broker<H: InboundHandler + Default>() -> (String, Arc<H>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let broker = Arc::new(H::default());
    let handler = broker.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = connection::spawn(stream, &ConnectionConfig::default(), Side::Server, handler.clone());
        }
    });
    (addr, broker)
}

/// Registers broker `name` at `addr` (master of cluster C1) with `topics` at the name server.
pub async fn register(client: &RemotingClient, namesrv: &str, name: &str, addr: &str, topics: &[&str]) {
    let mut wrapper = TopicConfigSerializeWrapper { data_version: DataVersion { counter: 1, state_version: 0, timestamp: 1 }, ..Default::default() };
    for t in topics {
        wrapper.topic_config_table.insert(t.to_string(), TopicConfig::new(t));
    }
    let body = RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }.encode_json();
    let header = RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: "C1".into(),
        ha_server_addr: addr.into(),
        broker_id: 0,
        compressed: Some(false),
        body_crc32: Some((crc32fast::hash(&body) & 0x7FFF_FFFF) as i32),
        ..Default::default()
    };
    let r =
        client.invoke(namesrv, RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header).with_body(body), TIMEOUT).await.expect("register");
    assert_eq!(r.code, 0, "{:?}", r.remark);
}
