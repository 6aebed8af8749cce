//! Talking to the name servers (Java `BrokerOuterAPI`): register with every one of them, at start,
//! every `registerNameServerPeriod`, and when topics change; unregister at shutdown.

use std::time::Duration;

use remoting::call::CallError;
use remoting::client::RemotingClient;
use remoting::protocol::namesrv::{BrokerIdentityHeader, RegisterBroker, RegisterBrokerRequestHeader, UnregisterBroker};
use remoting::protocol::register::RegisterBrokerBody;
use remoting::protocol::topic::TopicConfigSerializeWrapper;
use tracing::{debug, warn};

/// Who this broker is, as the name server records it.
#[derive(Clone, Debug)]
pub struct BrokerIdentity {
    pub cluster: String,
    pub broker_name: String,
    pub broker_id: i64,
    /// `brokerIP1:listenPort`, where clients connect.
    pub broker_addr: String,
    /// `brokerIP2:haListenPort`.
    pub ha_server_addr: String,
}

/// What a name server said to a registration (slaves learn their master).
#[derive(Clone, Debug, Default)]
pub struct RegisterResult {
    pub master_addr: Option<String>,
    pub ha_server_addr: Option<String>,
}

/// Splits Java's `namesrvAddr` (`host:port;host:port`).
pub fn namesrv_addrs(list: &str) -> Vec<String> {
    list.split(';').map(str::trim).filter(|a| !a.is_empty()).map(str::to_owned).collect()
}

/// Registers with every name server; a failed one is logged and skipped. With `oneway` nothing is
/// awaited (Java sends the registration after an auto-created topic that way).
pub async fn register_all(
    client: &RemotingClient,
    addrs: &[String],
    me: &BrokerIdentity,
    topics: &TopicConfigSerializeWrapper,
    timeout: Duration,
    oneway: bool,
) -> Option<RegisterResult> {
    let body = bytes::Bytes::from(RegisterBrokerBody { filter_server_list: Vec::new(), topic_config_serialize_wrapper: topics.clone() }.encode_json());
    let header = RegisterBrokerRequestHeader {
        broker_name: me.broker_name.clone(),
        broker_addr: me.broker_addr.clone(),
        cluster_name: me.cluster.clone(),
        ha_server_addr: me.ha_server_addr.clone(),
        broker_id: me.broker_id,
        compressed: Some(false),
        body_crc32: Some((crc32fast::hash(&body) & 0x7FFF_FFFF) as i32),
        ..Default::default()
    };
    let mut result = None;
    for addr in addrs {
        let request = RegisterBroker { header: header.clone(), body: body.clone() };
        if oneway {
            if let Err(e) = client.call_oneway(addr, request).await {
                warn!(namesrv = addr, error = %e, "oneway registration failed");
            }
            continue;
        }
        match client.call(addr, request, timeout).await {
            Ok(answer) => {
                debug!(namesrv = addr, "registered");
                result = Some(RegisterResult { master_addr: answer.master_addr, ha_server_addr: answer.ha_server_addr });
            }
            Err(CallError::Refused { code, remark }) => warn!(namesrv = addr, code = code.0, ?remark, "registration refused"),
            Err(e) => warn!(namesrv = addr, error = %e, "registration failed"),
        }
    }
    result
}

/// Unregisters from every name server (shutdown).
pub async fn unregister_all(client: &RemotingClient, addrs: &[String], me: &BrokerIdentity, timeout: Duration) {
    let header = BrokerIdentityHeader {
        broker_name: me.broker_name.clone(),
        broker_addr: me.broker_addr.clone(),
        cluster_name: me.cluster.clone(),
        broker_id: me.broker_id,
    };
    for addr in addrs {
        if let Err(e) = client.call(addr, UnregisterBroker { header: header.clone() }, timeout).await {
            warn!(namesrv = addr, error = %e, "unregistration failed");
        }
    }
}
