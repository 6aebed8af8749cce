//! The name server through its socket: registrations, routes in both JSON styles, KV config,
//! permissions, config updates, connection-close expiry, and bad input.

use std::time::Duration;

use namesrv::config::NamesrvConfig;
use namesrv::NamesrvController;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::fastjson::from_slice;
use remoting::protocol::body::{KvTable, TopicList};
use remoting::protocol::namesrv::*;
use remoting::protocol::register::RegisterBrokerBody;
use remoting::protocol::route::{ClusterInfo, TopicRouteData};
use remoting::protocol::topic::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

const TIMEOUT: Duration = Duration::from_secs(5);

struct Fixture {
    _dir: tempfile::TempDir,
    controller: NamesrvController,
    addr: String,
    client: RemotingClient,
    config_store: std::path::PathBuf,
}

async fn start() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let config = NamesrvConfig {
        bind_address: "127.0.0.1".into(),
        listen_port: 0,
        kv_config_path: dir.path().join("kvConfig.json").to_string_lossy().into(),
        config_store_path: dir.path().join("namesrv.properties").to_string_lossy().into(),
        ..Default::default()
    };
    let config_store = dir.path().join("namesrv.properties");
    let controller = NamesrvController::start(config).await.unwrap();
    let addr = controller.local_addr().to_string();
    Fixture { _dir: dir, controller, addr, client: RemotingClient::new(ClientConfig::default()), config_store }
}

impl Fixture {
    async fn call(&self, request: RemotingCommand) -> RemotingCommand {
        self.client.invoke(&self.addr, request, TIMEOUT).await.unwrap()
    }

    async fn register(&self, client: &RemotingClient, name: &str, addr: &str, id: i64, topics: &[&str], compressed: bool) -> RemotingCommand {
        let mut wrapper =
            TopicConfigSerializeWrapper { data_version: DataVersion { counter: 1, state_version: 0, timestamp: 1_700_000_000_000 }, ..Default::default() };
        for t in topics {
            let mut tc = TopicConfig::new(t);
            tc.read_queue_nums = 4;
            tc.write_queue_nums = 4;
            wrapper.topic_config_table.insert(t.to_string(), tc);
        }
        let body = RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper };
        let bytes = if compressed { body.encode_compressed() } else { body.encode_json() };
        let header = RegisterBrokerRequestHeader {
            broker_name: name.into(),
            broker_addr: addr.into(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: format!("{addr}-ha"),
            broker_id: id,
            compressed: Some(compressed),
            body_crc32: Some((crc32fast::hash(&bytes) & 0x7FFF_FFFF) as i32),
            ..Default::default()
        };
        client.invoke(&self.addr, RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header).with_body(bytes), TIMEOUT).await.unwrap()
    }

    async fn route(&self, topic: &str, version: i32) -> RemotingCommand {
        let mut request = RemotingCommand::request_with_header(
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            &GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: None },
        );
        request.version = version;
        self.call(request).await
    }
}

#[tokio::test]
async fn registered_topics_route_with_quoted_keys_for_new_clients_and_bare_keys_for_old() {
    let f = start().await;
    assert_eq!(f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["TopicTest", "TBW102"], false).await.code, 0);

    let new_client = f.route("TopicTest", 409).await;
    assert_eq!(new_client.code, 0);
    let text = String::from_utf8(new_client.body_bytes().to_vec()).unwrap();
    assert!(text.contains(r#""brokerAddrs":{"0":"127.0.0.1:10911"}"#), "{text}");

    let go_client = f.route("TopicTest", 317).await;
    let text = String::from_utf8(go_client.body_bytes().to_vec()).unwrap();
    assert!(text.contains(r#""brokerAddrs":{0:"127.0.0.1:10911"}"#), "{text}");
    let route: TopicRouteData = from_slice(go_client.body_bytes()).unwrap();
    assert_eq!(route.queue_datas[0].write_queue_nums, 4);

    let unknown = f.route("NoSuchTopic", 409).await;
    assert_eq!(unknown.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert!(unknown.remark.unwrap().starts_with("No topic route info in name server for the topic: NoSuchTopic\nSee "));
    f.controller.shutdown().await;
}

#[tokio::test]
async fn compressed_registrations_and_slaves_are_understood() {
    let f = start().await;
    assert_eq!(f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["T", "U"], true).await.code, 0);
    let slave = f.register(&f.client, "broker-a", "127.0.0.1:10921", 1, &["T", "U"], true).await;
    assert_eq!(slave.ext("masterAddr"), Some("127.0.0.1:10911"));
    assert_eq!(slave.ext("haServerAddr"), Some("127.0.0.1:10911-ha"));
    let info: ClusterInfo = from_slice(f.call(RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO)).await.body_bytes()).unwrap();
    assert_eq!(info.broker_addr_table["broker-a"].broker_addrs.len(), 2);
    assert!(info.cluster_addr_table["DefaultCluster"].contains("broker-a"));
    f.controller.shutdown().await;
}

#[tokio::test]
async fn a_broker_whose_connection_closes_is_removed_at_once() {
    let f = start().await;
    let broker_conn = RemotingClient::new(ClientConfig::default());
    f.register(&broker_conn, "broker-gone", "127.0.0.1:10931", 0, &["Ephemeral", "Other"], false).await;
    assert_eq!(f.route("Ephemeral", 409).await.code, 0);
    broker_conn.shutdown();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while f.route("Ephemeral", 409).await.code == 0 {
        assert!(tokio::time::Instant::now() < deadline, "route survived the broker's connection");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f.controller.shutdown().await;
}

#[tokio::test]
async fn unregister_removes_the_broker_and_its_routes() {
    let f = start().await;
    f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["T"], false).await;
    let header =
        BrokerIdentityHeader { broker_name: "broker-a".into(), broker_addr: "127.0.0.1:10911".into(), cluster_name: "DefaultCluster".into(), broker_id: 0 };
    assert_eq!(f.call(RemotingCommand::request_with_header(RequestCode::UNREGISTER_BROKER, &header)).await.code, 0);
    assert_eq!(f.route("T", 409).await.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    f.controller.shutdown().await;
}

#[tokio::test]
async fn kv_config_put_get_list_delete() {
    let f = start().await;
    let put = PutKvConfigRequestHeader { namespace: "ns".into(), key: "k".into(), value: "v".into() };
    assert_eq!(f.call(RemotingCommand::request_with_header(RequestCode::PUT_KV_CONFIG, &put)).await.code, 0);
    let key = KvConfigKeyHeader { namespace: "ns".into(), key: "k".into() };
    let got = f.call(RemotingCommand::request_with_header(RequestCode::GET_KV_CONFIG, &key)).await;
    assert_eq!((got.code, got.ext("value")), (0, Some("v")));
    let list = f.call(RemotingCommand::request_with_header(RequestCode::GET_KVLIST_BY_NAMESPACE, &NamespaceHeader { namespace: "ns".into() })).await;
    assert_eq!(from_slice::<KvTable>(list.body_bytes()).unwrap().table["k"], "v");
    assert_eq!(f.call(RemotingCommand::request_with_header(RequestCode::DELETE_KV_CONFIG, &key)).await.code, 0);
    let gone = f.call(RemotingCommand::request_with_header(RequestCode::GET_KV_CONFIG, &key)).await;
    assert_eq!(gone.response_code(), ResponseCode::QUERY_NOT_FOUND);
    assert_eq!(gone.remark.as_deref(), Some("No config item, Namespace: ns Key: k"));
    f.controller.shutdown().await;
}

#[tokio::test]
async fn write_permission_is_wiped_and_restored() {
    let f = start().await;
    f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["T", "U"], false).await;
    let header = BrokerNameHeader { broker_name: "broker-a".into() };
    let wiped = f.call(RemotingCommand::request_with_header(RequestCode::WIPE_WRITE_PERM_OF_BROKER, &header)).await;
    assert_eq!(wiped.ext("wipeTopicCount"), Some("2"));
    let route: TopicRouteData = from_slice(f.route("T", 409).await.body_bytes()).unwrap();
    assert_eq!(route.queue_datas[0].perm, 4);
    let added = f.call(RemotingCommand::request_with_header(RequestCode::ADD_WRITE_PERM_OF_BROKER, &header)).await;
    assert_eq!(added.ext("addTopicCount"), Some("2"));
    let route: TopicRouteData = from_slice(f.route("T", 409).await.body_bytes()).unwrap();
    assert_eq!(route.queue_datas[0].perm, 6);
    f.controller.shutdown().await;
}

#[tokio::test]
async fn topic_lists_and_topic_deletion() {
    let f = start().await;
    f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["T", "U"], false).await;
    let all: TopicList = from_slice(f.call(RemotingCommand::request(RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).await.body_bytes()).unwrap();
    assert_eq!(all.topic_list, vec!["T", "U"]);
    let by_cluster = f
        .call(RemotingCommand::request_with_header(RequestCode::GET_TOPICS_BY_CLUSTER, &GetTopicsByClusterRequestHeader { cluster: "DefaultCluster".into() }))
        .await;
    assert_eq!(from_slice::<TopicList>(by_cluster.body_bytes()).unwrap().topic_list, vec!["T", "U"]);
    let system: TopicList = from_slice(f.call(RemotingCommand::request(RequestCode::GET_SYSTEM_TOPIC_LIST_FROM_NS)).await.body_bytes()).unwrap();
    assert_eq!(system.topic_list, vec!["DefaultCluster", "broker-a"]);
    assert_eq!(system.broker_addr.as_deref(), Some("127.0.0.1:10911"));
    let delete = DeleteTopicFromNamesrvRequestHeader { topic: "T".into(), cluster_name: Some("DefaultCluster".into()) };
    assert_eq!(f.call(RemotingCommand::request_with_header(RequestCode::DELETE_TOPIC_IN_NAMESRV, &delete)).await.code, 0);
    assert_eq!(f.route("T", 409).await.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    f.controller.shutdown().await;
}

#[tokio::test]
async fn query_data_version_reports_changes_and_returns_ours() {
    let f = start().await;
    f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["T", "U"], false).await;
    let header =
        BrokerIdentityHeader { broker_name: "broker-a".into(), broker_addr: "127.0.0.1:10911".into(), cluster_name: "DefaultCluster".into(), broker_id: 0 };
    let same = br#"{"counter":1,"stateVersion":0,"timestamp":1700000000000}"#;
    let r = f.call(RemotingCommand::request_with_header(RequestCode::QUERY_DATA_VERSION, &header).with_body(&same[..])).await;
    assert_eq!(r.ext("changed"), Some("false"));
    assert_eq!(from_slice::<DataVersion>(r.body_bytes()).unwrap().counter, 1);
    let newer = br#"{"counter":2,"timestamp":1700000000001}"#;
    let r = f.call(RemotingCommand::request_with_header(RequestCode::QUERY_DATA_VERSION, &header).with_body(&newer[..])).await;
    assert_eq!(r.ext("changed"), Some("true"));
    f.controller.shutdown().await;
}

#[tokio::test]
async fn config_updates_take_allowed_keys_and_refuse_paths() {
    let f = start().await;
    let allowed = f.call(RemotingCommand::request(RequestCode::UPDATE_NAMESRV_CONFIG).with_body(&b"orderMessageEnable=true\n"[..])).await;
    assert_eq!(allowed.code, 0);
    let config = f.call(RemotingCommand::request(RequestCode::GET_NAMESRV_CONFIG)).await;
    let text = String::from_utf8(config.body_bytes().to_vec()).unwrap();
    assert!(text.contains("orderMessageEnable=true\n"), "{text}");
    assert!(std::fs::read_to_string(&f.config_store).unwrap().contains("orderMessageEnable=true"));

    for evil in ["kvConfigPath=/tmp/evil\n", "listenPort=1\n", "orderMessageEnable=false\nconfigStorePath=/etc/x\n"] {
        let refused = f.call(RemotingCommand::request(RequestCode::UPDATE_NAMESRV_CONFIG).with_body(evil.as_bytes().to_vec())).await;
        assert_eq!(refused.response_code(), ResponseCode::NO_PERMISSION, "{evil}");
        assert!(refused.remark.unwrap().starts_with("Can not update config in black list."));
    }
    let text = String::from_utf8(f.call(RemotingCommand::request(RequestCode::GET_NAMESRV_CONFIG)).await.body_bytes().to_vec()).unwrap();
    assert!(!text.contains("/tmp/evil") && text.contains("orderMessageEnable=true\n"), "{text}");
    f.controller.shutdown().await;
}

#[tokio::test]
async fn bad_registrations_and_headers_get_clear_errors_and_the_server_keeps_serving() {
    let f = start().await;
    let header = RegisterBrokerRequestHeader {
        broker_name: "b".into(),
        broker_addr: "127.0.0.1:1".into(),
        cluster_name: "C".into(),
        ha_server_addr: "".into(),
        broker_id: 0,
        ..Default::default()
    };
    let garbage = f.call(RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header).with_body(&b"\x00garbage{"[..])).await;
    assert_eq!(garbage.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(garbage.remark.unwrap().starts_with("Failed to decode RegisterBrokerBody"));

    let compressed_garbage = RegisterBrokerRequestHeader { compressed: Some(true), ..header.clone() };
    let r = f.call(RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &compressed_garbage).with_body(&b"not zlib"[..])).await;
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);

    let bad_crc = RegisterBrokerRequestHeader { body_crc32: Some(12345), ..header };
    let r = f.call(RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &bad_crc).with_body(&b"{}"[..])).await;
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("crc32 not match")));

    let missing = f.call(RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC)).await;
    assert_eq!((missing.response_code(), missing.remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("the custom field <topic> is null")));

    let unknown = f.call(RemotingCommand::request(RequestCode(7777))).await;
    assert_eq!((unknown.response_code(), unknown.remark.as_deref()), (ResponseCode::REQUEST_CODE_NOT_SUPPORTED, Some(" request type 7777 not supported")));
    // A broker code sent to the name server is not supported either.
    let broker_code = f.call(RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)).await;
    assert_eq!(broker_code.response_code(), ResponseCode::REQUEST_CODE_NOT_SUPPORTED);

    assert_eq!(f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["T", "U"], false).await.code, 0);
    f.controller.shutdown().await;
}

#[tokio::test]
async fn a_single_topic_registration_needs_a_full_one_first_as_in_java() {
    let f = start().await;
    let early = f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["Only"], false).await;
    assert_eq!((early.response_code(), early.remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("register broker failed")));
    assert_eq!(f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["T", "U"], false).await.code, 0);
    assert_eq!(f.register(&f.client, "broker-a", "127.0.0.1:10911", 0, &["Only"], false).await.code, 0);
    assert_eq!(f.route("Only", 409).await.code, 0);
    f.controller.shutdown().await;
}
