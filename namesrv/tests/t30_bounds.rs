//! Bounds on what one client can make the name server hold, through its socket: registrations
//! (inflated size, topics per registration, routes in all) and the KV config (entry and table size).

use std::io::Write;
use std::time::{Duration, Instant};

use namesrv::config::NamesrvConfig;
use namesrv::NamesrvController;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::protocol::namesrv::*;
use remoting::protocol::register::MAX_REGISTERED_TOPICS;
use remoting::{RemotingCommand, RequestCode, ResponseCode};

const TIMEOUT: Duration = Duration::from_secs(60);

async fn start(dir: &std::path::Path) -> NamesrvController {
    let config = NamesrvConfig {
        bind_address: "127.0.0.1".into(),
        listen_port: 0,
        kv_config_path: dir.join("kvConfig.json").to_string_lossy().into(),
        config_store_path: dir.join("namesrv.properties").to_string_lossy().into(),
        ..Default::default()
    };
    NamesrvController::start(config).await.unwrap()
}

/// This process's resident memory, in MiB.
fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0.0);
    pages * 4096.0 / (1 << 20) as f64
}

fn register(body: Vec<u8>, compressed: bool) -> RemotingCommand {
    let header = RegisterBrokerRequestHeader {
        broker_name: "bomb".into(),
        broker_addr: "127.0.0.1:10911".into(),
        cluster_name: "C".into(),
        ha_server_addr: "".into(),
        broker_id: 0,
        compressed: Some(compressed),
        ..Default::default()
    };
    RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header).with_body(body)
}

/// The compressed layout of a 4.9 broker's registration, naming `topics` short topics.
fn compressed_body(topics: usize) -> Vec<u8> {
    let mut raw = Vec::new();
    let sized = |raw: &mut Vec<u8>, bytes: &[u8]| {
        raw.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        raw.extend_from_slice(bytes);
    };
    sized(&mut raw, br#"{"counter":1,"timestamp":1}"#);
    raw.extend_from_slice(&(topics as i32).to_be_bytes());
    for i in 0..topics {
        sized(&mut raw, format!("t{i} 8 8 6 SINGLE_TAG").as_bytes());
    }
    sized(&mut raw, b"[]");
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&raw).unwrap();
    z.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registration_naming_too_many_topics_is_refused_before_they_are_held() {
    let dir = tempfile::tempdir().unwrap();
    let namesrv = start(dir.path()).await;
    let addr = namesrv.local_addr().to_string();
    let client = RemotingClient::new(ClientConfig::default());
    let over = MAX_REGISTERED_TOPICS + 50_000;

    let body = compressed_body(over);
    let before = rss_mib();
    let started = Instant::now();
    let r = client.invoke(&addr, register(body, true), TIMEOUT).await.unwrap();
    let took = started.elapsed();
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    let remark = r.remark.unwrap_or_default();
    assert!(remark.contains(&format!("{over} topics, more than {MAX_REGISTERED_TOPICS}")), "{remark}");
    println!("compressed registration of {over} topics refused in {took:?}; RSS {before:.0} -> {:.0} MiB", rss_mib());

    // The same as JSON (the topic table is read up to the bound).
    let topics: Vec<String> = (0..MAX_REGISTERED_TOPICS + 1).map(|i| format!(r#""t{i}":{{}}"#)).collect();
    let json = format!(r#"{{"topicConfigSerializeWrapper":{{"topicConfigTable":{{{}}}}},"filterServerList":[]}}"#, topics.join(","));
    let r = client.invoke(&addr, register(json.into_bytes(), false), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(r.remark.unwrap_or_default().contains(&format!("more than {MAX_REGISTERED_TOPICS}")));

    // Nothing of either was kept; a registration within the bound is served.
    let route = |topic: &str| {
        RemotingCommand::request_with_header(
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            &GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: None },
        )
    };
    assert_eq!(client.invoke(&addr, route("t1"), TIMEOUT).await.unwrap().response_code(), ResponseCode::TOPIC_NOT_EXIST);
    let before = rss_mib();
    let started = Instant::now();
    let r = client.invoke(&addr, register(compressed_body(MAX_REGISTERED_TOPICS), true), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    println!("a registration of {MAX_REGISTERED_TOPICS} topics served in {:?}; RSS {before:.0} -> {:.0} MiB", started.elapsed(), rss_mib());
    assert_eq!(client.invoke(&addr, route("t1"), TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kv_config_entries_and_the_table_are_bounded_in_bytes() {
    use namesrv::kv_config::{MAX_TABLE_BYTES, MAX_VALUE_BYTES};
    let dir = tempfile::tempdir().unwrap();
    let namesrv = start(dir.path()).await;
    let addr = namesrv.local_addr().to_string();
    let client = RemotingClient::new(ClientConfig::default());
    let put = |key: String, value: &str| {
        RemotingCommand::request_with_header(RequestCode::PUT_KV_CONFIG, &PutKvConfigRequestHeader { namespace: "ns".into(), key, value: value.into() })
    };
    let before = rss_mib();
    // The probe: 256 puts of 256 KiB.
    let big = "v".repeat(256 << 10);
    for i in 0..256 {
        let r = client.invoke(&addr, put(format!("k{i}"), &big), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
        assert_eq!(r.remark.as_deref(), Some(format!("the KV config value is {} bytes, more than {MAX_VALUE_BYTES}", big.len()).as_str()));
    }
    // Within the bounds, taken (the table's bound, 4 MiB, is the unit tests'; filling it here takes
    // 63 puts that each write the file again: 4 MiB of kvConfig.json at the end).
    let value = "v".repeat(MAX_VALUE_BYTES);
    let r = client.invoke(&addr, put("k0".into(), &value), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let file = std::fs::metadata(dir.path().join("kvConfig.json")).unwrap().len();
    println!("256 KV puts of 256 KiB refused; kvConfig.json {} KiB; RSS {before:.0} -> {:.0} MiB", file >> 10, rss_mib());
    assert!(file < (MAX_TABLE_BYTES as u64).min(2 * MAX_VALUE_BYTES as u64));
    namesrv.shutdown().await;
}
