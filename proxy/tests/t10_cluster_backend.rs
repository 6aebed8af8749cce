//! `ClusterBackend` against our name server and two fake brokers (remoting servers answering what
//! the backend asks): routes and message types, group settings, one connection per client and
//! broker, the broker's requests to a client, and a client's connections closed when it leaves.

use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{register, TIMEOUT};
use namesrv::config::NamesrvConfig;
use namesrv::NamesrvController;
use parking_lot::Mutex;
use proxy::backend::{Backend, ClientRequests, BROKER_NAME_EXT};
use proxy::cluster::{ClusterBackend, ClusterSettings};
use remoting::client::{ClientConfig, RemotingClient};
use remoting::connection::{Channel, InFlight, InboundHandler};
use remoting::server::Reply;
use remoting::{RemotingCommand, RequestCode, ResponseCode};

/// Answers GET_TOPIC_CONFIG (the topic's type is its name's prefix before `-`), GET_SUBSCRIPTIONGROUP_CONFIG
/// (`orderly` exists, consuming orderly), HEART_BEAT (remembering the connection by client id).
#[derive(Default)]
struct FakeBroker {
    heartbeats: Mutex<Vec<(String, Channel)>>,
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
            RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG if request.ext("group") == Some("orderly") => {
                ok.with_body(r#"{"groupName":"orderly","consumeMessageOrderly":true,"retryMaxTimes":3}"#)
            }
            RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG => RemotingCommand::error_response(&request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, "none"),
            RequestCode::HEART_BEAT => {
                let body: serde_json::Value = serde_json::from_slice(request.body_bytes()).unwrap_or_default();
                let id = body["clientID"].as_str().unwrap_or_default().to_owned();
                self.heartbeats.lock().push((id, channel.clone()));
                ok
            }
            _ => RemotingCommand::error_response(&request, ResponseCode::REQUEST_CODE_NOT_SUPPORTED, "no"),
        };
        Reply::to(channel, &request).send(response);
    }
}

async fn fake_broker() -> (String, Arc<FakeBroker>) {
    common::fake_broker().await
}

#[derive(Default)]
struct Seen(Mutex<Vec<(String, RemotingCommand)>>);

impl ClientRequests for Seen {
    fn on_request(&self, client_id: &str, request: RemotingCommand, _reply: proxy::backend::Reply) {
        self.0.lock().push((client_id.to_owned(), request));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_groups_connections_and_broker_requests() {
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

    let backend = ClusterBackend::new(ClusterSettings {
        namesrv_addrs: vec!["127.0.0.1:1".into(), ns_addr.clone()],
        cluster_name: "C1".into(),
        refresh: Duration::from_secs(20),
        expire: Duration::from_secs(300),
        max_entries: 100,
    });
    let seen = Arc::new(Seen::default());
    backend.set_client_requests(seen.clone());

    // Routes from the name server, the type from a broker's topic config.
    let r = backend.route("FIFO-orders").expect("routed");
    assert_eq!(r.message_type, "FIFO");
    assert_eq!(r.brokers.iter().map(|q| q.broker_name.as_str()).collect::<Vec<_>>(), ["a"]);
    let both = backend.route("NORMAL-both").expect("routed");
    assert_eq!(both.message_type, "NORMAL");
    assert_eq!(both.brokers.len(), 2);
    assert!(backend.route("nowhere").is_none());
    let mut brokers = backend.brokers();
    brokers.sort();
    assert_eq!(brokers, ["a", "b"]);

    // Groups.
    let g = backend.group("orderly").expect("group");
    assert!(g.consume_orderly);
    assert_eq!(g.retry_max_times, 3);
    assert!(backend.group("missing").is_none());

    // One connection per (client, broker).
    for client in ["c1", "c2"] {
        for broker in ["a", "b"] {
            let hb = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(format!(r#"{{"clientID":"{client}"}}"#));
            let r = backend.invoke(client, broker, hb, TIMEOUT).await.expect("heartbeat");
            assert_eq!(r.code, 0);
        }
    }
    assert_eq!(backend.connection_count(), 4);
    let on_a = a.heartbeats.lock().clone();
    assert_eq!(on_a.len(), 2);
    assert_ne!(on_a[0].1.id(), on_a[1].1.id());
    assert!(backend.invoke("c1", "zz", RemotingCommand::request(RequestCode::HEART_BEAT), TIMEOUT).await.is_err());

    // The broker's request on c2's connection reaches the service as c2's, naming the broker.
    let c2_on_b = b.heartbeats.lock().iter().find(|(id, _)| id == "c2").map(|(_, c)| c.clone()).expect("c2 on b");
    c2_on_b.invoke_oneway(RemotingCommand::request(RequestCode::CHECK_TRANSACTION_STATE).with_ext("transactionId", "t1")).expect("sent");
    for _ in 0..100 {
        if !seen.0.lock().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = seen.0.lock().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "c2");
    assert_eq!(got[0].1.ext(BROKER_NAME_EXT), Some("b"));

    // A client that leaves: its connections close.
    backend.client_gone("c1");
    assert_eq!(backend.connection_count(), 2);
    let c1_on_a = on_a.iter().find(|(id, _)| id == "c1").map(|(_, c)| c.clone()).expect("c1 on a");
    for _ in 0..100 {
        if c1_on_a.is_closed() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(c1_on_a.is_closed());

    drop(backend);
    registrar.shutdown();
    ns.shutdown().await;
}
