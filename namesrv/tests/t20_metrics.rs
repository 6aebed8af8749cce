//! `metricsExporterType=PROM` on the name server: request latency under Java's family name and
//! code names, with node_type="namesrv".

use std::time::Duration;

use namesrv::config::NamesrvConfig;
use namesrv::NamesrvController;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::protocol::namesrv::GetRouteInfoRequestHeader;
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TIMEOUT: Duration = Duration::from_secs(5);

async fn scrape(port: u16) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

#[tokio::test(flavor = "multi_thread")]
async fn route_queries_are_timed_under_javas_rpc_latency_family() {
    let dir = tempfile::tempdir().unwrap();
    // A free port for the endpoint: bind one and hand it over.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = NamesrvConfig {
        bind_address: "127.0.0.1".into(),
        listen_port: 0,
        kv_config_path: dir.path().join("kvConfig.json").to_string_lossy().into(),
        config_store_path: dir.path().join("namesrv.properties").to_string_lossy().into(),
        metrics_exporter_type: remoting::metrics::MetricsExporterType::Prom,
        metrics_prom_exporter_port: port,
        ..Default::default()
    };
    let controller = NamesrvController::start(config).await.unwrap();
    let addr = controller.local_addr().to_string();
    let client = RemotingClient::new(ClientConfig::default());
    for _ in 0..3 {
        let header = GetRouteInfoRequestHeader { topic: "NoSuchTopic".into(), accept_standard_json_only: None };
        let r = client.invoke(&addr, RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    }
    let text = scrape(port).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("rocketmq_rpc_latency_milliseconds_count{") && l.contains(r#"request_code="get_routeinfo_by_topic""#))
        .unwrap_or_else(|| panic!("no route-query latency in:\n{text}"));
    for label in [r#"node_type="namesrv""#, r#"response_code="topic_not_exist""#, r#"result="success""#, r#"otel_scope_name="namesrv-meter""#] {
        assert!(line.contains(label), "{label} missing: {line}");
    }
    let value = line.rsplit_once('}').and_then(|(_, rest)| rest.split_whitespace().next());
    assert_eq!(value, Some("3.0"), "as Java's Double.toString: {line}");
    controller.shutdown().await;
}
