//! The cluster-mode proxy's remoting port (`ClusterPort`) against our name server and two fake
//! brokers: routes naming the port, Java's answers to requests without a broker name and to codes
//! not served, heartbeats reaching every broker over each client connection's own broker
//! connection, sends type-checked and forwarded, the broker's requests relayed to the client (oneway
//! and answered), and a client's broker connections closed when it leaves.

use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{register, TIMEOUT};
use namesrv::config::NamesrvConfig;
use namesrv::NamesrvController;
use parking_lot::Mutex;
use proxy::cluster::{ClusterBackend, ClusterSettings};
use proxy::cluster_port::{ClusterPort, PortSettings};
use proxy::tls::Io;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::connection::{self, Channel, ConnectionConfig, InFlight, InboundHandler, Side};
use remoting::protocol::route::TopicRouteData;
use remoting::server::Reply;
use remoting::{RemotingCommand, RequestCode, ResponseCode};

/// Answers GET_TOPIC_CONFIG (the topic's type is its name's prefix before `-`), HEART_BEAT
/// (remembering the connection by client id) and SEND_MESSAGE_V2 (counted).
#[derive(Default)]
struct FakeBroker {
    heartbeats: Mutex<Vec<(String, Channel)>>,
    sends: Mutex<usize>,
}

impl InboundHandler for FakeBroker {
    fn on_request(&self, channel: &Channel, request: RemotingCommand, _in_flight: InFlight) {
        let ok = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
        let response = match RequestCode(request.code) {
            RequestCode::GET_TOPIC_CONFIG => {
                let topic = request.ext("topic").unwrap_or_default();
                let kind = topic.split('-').next().unwrap_or_default();
                ok.with_body(format!(r#"{{"attributes":{{"message.type":"{kind}"}},"topicName":"{topic}","perm":6}}"#))
            }
            RequestCode::HEART_BEAT => {
                let body: serde_json::Value = serde_json::from_slice(request.body_bytes()).unwrap_or_default();
                let id = body["clientID"].as_str().unwrap_or_default().to_owned();
                self.heartbeats.lock().push((id, channel.clone()));
                ok
            }
            RequestCode::SEND_MESSAGE_V2 => {
                *self.sends.lock() += 1;
                ok.with_ext("msgId", "M1")
            }
            _ => RemotingCommand::error_response(&request, ResponseCode::REQUEST_CODE_NOT_SUPPORTED, "no"),
        };
        Reply::to(channel, &request).send(response);
    }
}

async fn fake_broker() -> (String, Arc<FakeBroker>) {
    common::fake_broker().await
}

/// A remoting client: keeps the requests the proxy relays to it and answers GET_CONSUMER_RUNNING_INFO.
#[derive(Default)]
struct FakeClient {
    got: Mutex<Vec<RemotingCommand>>,
}

impl InboundHandler for FakeClient {
    fn on_request(&self, channel: &Channel, request: RemotingCommand, _in_flight: InFlight) {
        if !request.is_oneway() {
            let _ = channel.send(RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body("running"));
        }
        self.got.lock().push(request);
    }
}

async fn connect(port: &str) -> (Channel, Arc<FakeClient>) {
    let stream = tokio::net::TcpStream::connect(port).await.expect("connect");
    let client = Arc::new(FakeClient::default());
    (connection::spawn(stream, &ConnectionConfig::default(), Side::Client, client.clone()).expect("channel"), client)
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..250 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

fn heartbeat(client_id: &str) -> RemotingCommand {
    RemotingCommand::request(RequestCode::HEART_BEAT).with_body(format!(r#"{{"clientID":"{client_id}"}}"#))
}

/// A SEND_MESSAGE_V2 to broker `a` of `topic`, with a message of type NORMAL.
fn send(topic: &str) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2);
    for (k, v) in [("a", "pg"), ("b", topic), ("c", "TBW102"), ("d", "4"), ("e", "0"), ("f", "0"), ("g", "0"), ("h", "0"), ("i", "KEYS\u{1}k\u{2}"), ("n", "a")]
    {
        cmd = cmd.with_ext(k, v);
    }
    cmd.with_body("hello")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remoting_port_forwards_and_relays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = NamesrvController::start(NamesrvConfig {
        bind_address: "127.0.0.1".into(),
        listen_port: 0,
        kv_config_path: dir.path().join("kv.json").to_string_lossy().into(),
        config_store_path: dir.path().join("ns.properties").to_string_lossy().into(),
        ..Default::default()
    })
    .await
    .expect("namesrv");
    let ns_addr = ns.local_addr().to_string();
    let (a_addr, a) = fake_broker().await;
    let (b_addr, b) = fake_broker().await;
    let registrar = RemotingClient::new(ClientConfig::default());
    register(&registrar, &ns_addr, "a", &a_addr, &["FIFO-orders", "NORMAL-both"]).await;
    register(&registrar, &ns_addr, "b", &b_addr, &["NORMAL-both", "TBW102"]).await;

    let backend = Arc::new(ClusterBackend::new(ClusterSettings {
        namesrv_addrs: vec![ns_addr.clone()],
        cluster_name: "C1".into(),
        refresh: Duration::from_secs(20),
        expire: Duration::from_secs(300),
        max_entries: 100,
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port_addr = listener.local_addr().expect("addr");
    let port = ClusterPort::new(backend, PortSettings { access_host: String::new(), port: port_addr.port(), check_message_types: true });
    let handoff = port.handoff();
    tokio::spawn(async move {
        while let Ok((stream, peer)) = listener.accept().await {
            handoff(Io::Plain(stream), peer);
        }
    });
    let port_addr = port_addr.to_string();
    let (c1, c1_seen) = connect(&port_addr).await;

    // Routes name the port for every broker.
    let route = c1.invoke(RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "NORMAL-both"), TIMEOUT).await.expect("route");
    assert_eq!(route.code, 0, "{:?}", route.remark);
    let data: TopicRouteData = remoting::fastjson::from_slice(route.body_bytes()).expect("route body");
    assert_eq!(data.broker_datas.len(), 2);
    assert!(data.broker_datas.iter().all(|b| b.broker_addrs.get(&0) == Some(&port_addr)), "{data:?}");
    assert_eq!(data.queue_datas.len(), 2);
    let none = c1.invoke(RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "nowhere"), TIMEOUT).await.expect("route");
    assert_eq!(none.code, ResponseCode::TOPIC_NOT_EXIST.0);

    // Java's answers: no broker name, a code not served.
    let pull = c1.invoke(RemotingCommand::request(RequestCode::PULL_MESSAGE), TIMEOUT).await.expect("pull");
    assert_eq!(pull.code, ResponseCode::VERSION_NOT_SUPPORTED.0);
    assert_eq!(pull.remark.as_deref(), Some("Request doesn't have field bname"));
    let other = c1.invoke(RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO), TIMEOUT).await.expect("answer");
    assert_eq!(other.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0);
    let config = c1.invoke(RemotingCommand::request(RequestCode::CHECK_CLIENT_CONFIG), TIMEOUT).await.expect("answer");
    assert_eq!(config.code, 0);

    // Heartbeats reach every broker, over one broker connection per client connection.
    let (c2, _c2_seen) = connect(&port_addr).await;
    assert_eq!(c1.invoke(heartbeat("c1"), TIMEOUT).await.expect("heartbeat").code, 0);
    assert_eq!(c2.invoke(heartbeat("c2"), TIMEOUT).await.expect("heartbeat").code, 0);
    assert_eq!(c1.invoke(heartbeat("c1"), TIMEOUT).await.expect("heartbeat").code, 0);
    let on_a = a.heartbeats.lock().clone();
    assert_eq!(on_a.len(), 3);
    assert_eq!(b.heartbeats.lock().len(), 3);
    let (c1_on_a, c2_on_a) = (on_a[0].1.clone(), on_a[1].1.clone());
    assert_eq!(on_a[0].0, "c1");
    assert_ne!(c1_on_a.id(), c2_on_a.id());
    assert_eq!(on_a[2].1.id(), c1_on_a.id());
    assert_eq!(port.broker_connection_count(), 4);

    // Sends: a type the topic does not take is refused here; one it takes reaches broker a.
    let refused = c1.invoke(send("FIFO-orders"), TIMEOUT).await.expect("send");
    assert_eq!(refused.code, ResponseCode::MESSAGE_ILLEGAL.0, "{:?}", refused.remark);
    let sent = c1.invoke(send("NORMAL-both"), TIMEOUT).await.expect("send");
    assert_eq!(sent.code, 0, "{:?}", sent.remark);
    assert_eq!(sent.ext("msgId"), Some("M1"));
    assert_eq!(*a.sends.lock(), 1);

    // The broker's requests to c1 come back over c1's connection: oneway, naming the broker, and
    // answered.
    c1_on_a.invoke_oneway(RemotingCommand::request(RequestCode::CHECK_TRANSACTION_STATE).with_ext("transactionId", "t1")).expect("sent");
    until("the relayed check", || !c1_seen.got.lock().is_empty()).await;
    let check = c1_seen.got.lock()[0].clone();
    assert_eq!(check.request_code(), RequestCode::CHECK_TRANSACTION_STATE);
    assert_eq!(check.ext("bname"), Some("a"));
    assert_eq!(check.ext("transactionId"), Some("t1"));
    let running = c1_on_a.invoke(RemotingCommand::request(RequestCode::GET_CONSUMER_RUNNING_INFO), TIMEOUT).await.expect("running info");
    assert_eq!(running.code, 0);
    assert_eq!(running.body_bytes(), b"running");

    // A client that leaves: its broker connections close; the other's stay.
    c1.close();
    until("c1's broker connection closed", || c1_on_a.is_closed()).await;
    until("the count to drop", || port.broker_connection_count() == 2).await;
    assert!(!c2_on_a.is_closed());

    c2.close();
    registrar.shutdown();
    ns.shutdown().await;
}
