//! UPDATE_BROKER_CONFIG through the broker's socket: a key takes effect at once (a live key) or at
//! the next start, shows in GET_BROKER_CONFIG and in the config file, and is there after a restart
//! from that file; the black list, paths, credentials, values of the wrong type and values that
//! would smuggle lines into the file or properties into messages are refused and change nothing.

mod common;

use broker::config::{apply_startup_rules, load_broker_conf};
use broker::controller::BrokerController;
use common::*;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

fn update(body: &str) -> RemotingCommand {
    RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG).with_body(body.to_owned())
}

async fn config_text(c: &RemotingClient, addr: &str) -> (String, String) {
    let r = c.invoke(addr, RemotingCommand::request(RequestCode::GET_BROKER_CONFIG), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    let version = r.ext("version").map(str::to_owned).unwrap_or_default();
    (String::from_utf8_lossy(r.body_bytes()).into_owned(), version)
}

async fn start_from(file: &std::path::Path) -> BrokerController {
    let (mut broker, store, _) = load_broker_conf(file).unwrap();
    apply_startup_rules(&mut broker, &store).unwrap();
    BrokerController::start_with_file(broker, store, Some(file.to_owned())).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn allowed_keys_take_effect_persist_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.conf");
    let root = dir.path().join("store");
    std::fs::write(
        &file,
        format!(
            "brokerName=broker-u\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort=0\nnamesrvAddr=\nstorePathRootDir={}\nmappedFileSizeCommitLog=4194304\n",
            root.display()
        ),
    )
    .unwrap();
    let broker = start_from(&file).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let (before, v0) = config_text(&c, &addr).await;
    assert!(before.contains("\nslaveReadEnable=false\n") && before.contains("\nfileReservedTime=72\n"), "{before}");

    // Two allowed keys at once: both take effect, the version moves on, the file is rewritten.
    let r = c.invoke(&addr, update("slaveReadEnable=true\nfileReservedTime=12\nautoCreateTopicEnable=false\n"), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::SUCCESS, None));
    let (after, v1) = config_text(&c, &addr).await;
    assert!(after.contains("\nslaveReadEnable=true\n") && after.contains("\nfileReservedTime=12\n"), "{after}");
    assert_ne!(v0, v1);
    let persisted = std::fs::read_to_string(&file).unwrap();
    assert!(persisted.contains("slaveReadEnable=true\n") && persisted.contains("brokerName=broker-u\n"), "{persisted}");
    assert!(dir.path().join("broker.conf.bak").exists());

    // autoCreateTopicEnable=false is followed by the next send at once.
    let refused = c.invoke(&addr, send("NoSuchTopicYet", 0, "x", ""), TIMEOUT).await.unwrap();
    assert_eq!(refused.response_code(), ResponseCode::TOPIC_NOT_EXIST, "{:?}", refused.remark);

    // The black list, paths and credentials are refused; nothing changes.
    for body in
        ["storePathRootDir=/tmp/elsewhere\n", "rocketmqHome=/x\n", "slaveReadEnable=false\nbrokerConfigPath=/x\n", "configBlackList=\n", "accessKey=ak\n"]
    {
        let r = c.invoke(&addr, update(body), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::NO_PERMISSION, "{body}");
        assert!(r.remark.as_deref().unwrap_or("").starts_with("Can not update config in black list."), "{:?}", r.remark);
    }
    let (unchanged, v2) = config_text(&c, &addr).await;
    assert_eq!((unchanged.as_str(), v2.as_str()), (after.as_str(), v1.as_str()));
    broker.shutdown().await;

    // Restarted from the rewritten file: the updated values are there.
    let broker = start_from(&file).await;
    let addr = broker.local_addr().to_string();
    let (restarted, _) = config_text(&c, &addr).await;
    assert!(restarted.contains("\nslaveReadEnable=true\n") && restarted.contains("\nfileReservedTime=12\n"), "{restarted}");
    assert!(restarted.contains("\nautoCreateTopicEnable=false\n"));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_permission_is_registered_with_the_name_server_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ns = start_namesrv(dir.path()).await;
    let ns_addr = ns.local_addr().to_string();
    let broker = start(&dir.path().join("store"), &[("namesrvAddr", &ns_addr), ("brokerName", "broker-p")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let create = raw(
        RequestCode::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", "PermTopic"),
            ("defaultTopic", "TBW102"),
            ("readQueueNums", "4"),
            ("writeQueueNums", "4"),
            ("perm", "6"),
            ("topicFilterType", "SINGLE_TAG"),
            ("topicSysFlag", "0"),
            ("order", "false"),
        ],
    );
    assert_eq!(c.invoke(&addr, create, TIMEOUT).await.unwrap().code, 0);
    let perm_in_route = || async {
        let r = c.invoke(&ns_addr, raw(RequestCode::GET_ROUTEINFO_BY_TOPIC, &[("topic", "PermTopic")]), TIMEOUT).await.unwrap();
        let route: serde_json::Value = serde_json::from_slice(r.body_bytes()).unwrap_or_default();
        route["queueDatas"][0]["perm"].as_i64()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while perm_in_route().await != Some(6) {
        assert!(std::time::Instant::now() < deadline, "the topic never reached the name server");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Read-only: sends are refused at once and the route says so within moments.
    let r = c.invoke(&addr, update("brokerPermission=4\n"), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let refused = c.invoke(&addr, send("PermTopic", 0, "x", ""), TIMEOUT).await.unwrap();
    assert_eq!(refused.response_code(), ResponseCode::NO_PERMISSION, "{:?}", refused.remark);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while perm_in_route().await != Some(4) {
        assert!(std::time::Instant::now() < deadline, "the new permission never reached the name server");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    broker.shutdown().await;
    ns.shutdown().await;
}

/// A config file for a broker on a free port in `dir`, as a user would write it.
fn write_conf(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("broker.conf");
    let conf = format!(
        "brokerName=broker-h\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort=0\nnamesrvAddr=\nstorePathRootDir={}\nmappedFileSizeCommitLog=4194304\n",
        dir.join("store").display()
    );
    std::fs::write(&file, conf).unwrap();
    file
}

/// GET_BROKER_CONFIG's body read as mqadmin reads it (`Properties.load`).
async fn config_map(c: &RemotingClient, addr: &str) -> indexmap::IndexMap<String, String> {
    remoting::properties::parse(&config_text(c, addr).await.0)
}

/// Each property string of the stored messages in a pull response.
fn stored_properties(response: &RemotingCommand) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = response.body_bytes();
    while !rest.is_empty() {
        let Ok(store::message::record::RecordAt::Record(r)) = store::message::record::decode_record(rest, true) else { panic!("bad record in pull body") };
        out.push(r.properties.to_owned());
        rest = &rest[r.store_size as usize..];
    }
    out
}

/// The bodies of the issue: one allowed key whose value, decoded as `Properties.load` decodes it,
/// holds line breaks followed by keys that are refused alone. Written back raw, the file then
/// held those keys on lines of their own, live after a restart.
const SMUGGLING_BODIES: [&str; 4] = [
    r"regionId=smuggle\nbrokerIP1=10.66.66.66\nbrokerName=smuggled-broker\nrocketmqHome=/x\nstorePathCommitLog=/x/cl",
    r"regionId=smuggle\rbrokerIP1=10.66.66.66\rbrokerName=smuggled-broker\rrocketmqHome=/x\rstorePathCommitLog=/x/cl",
    r"regionId=smuggle\u000abrokerIP1=10.66.66.66\u000abrokerName=smuggled-broker\u000arocketmqHome=/x\u000astorePathCommitLog=/x/cl",
    r"regionId=smuggle\u000dbrokerIP1=10.66.66.66\u000dbrokerName=smuggled-broker\u000drocketmqHome=/x\u000dstorePathCommitLog=/x/cl",
];

fn assert_nothing_smuggled(config: &indexmap::IndexMap<String, String>, file_text: &str) {
    assert_eq!(config["regionId"], "DefaultRegion");
    assert_eq!(config["brokerIP1"], "127.0.0.1");
    assert_eq!(config["brokerName"], "broker-h");
    assert_ne!(config["rocketmqHome"], "/x");
    assert_ne!(config.get("storePathCommitLog").map(String::as_str), Some("/x/cl"));
    for smuggled in ["10.66.66.66", "smuggled-broker", "=/x"] {
        assert!(!file_text.contains(smuggled), "{smuggled} in the config file:\n{file_text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_value_with_line_breaks_is_refused_and_nothing_is_smuggled_past_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_conf(dir.path());
    let c = RemotingClient::new(ClientConfig::default());
    let broker = start_from(&file).await;
    let addr = broker.local_addr().to_string();
    for body in SMUGGLING_BODIES {
        let r = c.invoke(&addr, update(body), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::NO_PERMISSION, "{body}");
        let remark = r.remark.unwrap_or_default();
        assert!(remark.contains("regionId") && remark.contains("control character"), "{remark}");
    }
    // Another key updated afterwards rewrites the file: still nothing smuggled.
    let r = c.invoke(&addr, update("slaveReadEnable=true"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    assert_nothing_smuggled(&config_map(&c, &addr).await, &std::fs::read_to_string(&file).unwrap());
    broker.shutdown().await;

    let broker = start_from(&file).await;
    let addr = broker.local_addr().to_string();
    let config = config_map(&c, &addr).await;
    assert_nothing_smuggled(&config, &std::fs::read_to_string(&file).unwrap());
    assert_eq!(config["slaveReadEnable"], "true");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_value_ending_in_a_backslash_reads_back_as_it_is_and_swallows_no_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_conf(dir.path());
    let c = RemotingClient::new(ClientConfig::default());
    let broker = start_from(&file).await;
    let addr = broker.local_addr().to_string();
    // `\\` on the wire is one backslash in the value; `\=` and `\:` are `=` and `:`.
    let r = c.invoke(&addr, update(r"regionId=a\=b\:c d\\"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let before = config_map(&c, &addr).await;
    assert_eq!(before["regionId"], r"a=b:c d\");
    broker.shutdown().await;

    let broker = start_from(&file).await;
    let addr = broker.local_addr().to_string();
    let after = config_map(&c, &addr).await;
    assert_eq!(after["regionId"], r"a=b:c d\");
    // The key written after regionId is still its own line with its own value.
    assert_eq!(after["registerBrokerTimeoutMills"], "6000");
    assert_eq!(after, before);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn property_separators_and_huge_values_never_reach_messages() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_conf(dir.path());
    let c = RemotingClient::new(ClientConfig::default());
    let broker = start_from(&file).await;
    let addr = broker.local_addr().to_string();
    let huge = format!("regionId={}", "r".repeat(40_000));
    for body in
        [r"regionId=r\u0002INJECTED_PROP\u0001yes", "regionId=r\u{2}INJECTED_PROP\u{1}yes", huge.as_str(), r"brokerClusterName=c\u0001x", r"brokerName=b\u0000"]
    {
        let r = c.invoke(&addr, update(body), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::NO_PERMISSION, "{}", &body[..body.len().min(60)]);
    }
    let r = c.invoke(&addr, send("HardenedTopic", 0, "hello", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.ext("MSG_REGION"), Some("DefaultRegion"));
    let pulled = pull_found(&c, &addr, "HardenedTopic", 0, 0).await;
    let props = stored_properties(&pulled);
    assert_eq!(props.len(), 1);
    assert!(!props[0].contains("INJECTED_PROP"), "{props:?}");
    assert!(props[0].contains("MSG_REGION\u{1}DefaultRegion\u{2}"), "{props:?}");
    assert_eq!(config_map(&c, &addr).await["regionId"], "DefaultRegion");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_file_with_a_control_character_in_a_message_value_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_conf(dir.path());
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("regionId=r\\u0002INJECTED_PROP\\u0001yes\n");
    std::fs::write(&file, text).unwrap();
    let Err(err) = load_broker_conf(&file) else { panic!("a regionId with property separators was loaded") };
    assert!(err.to_string().contains("regionId") && err.to_string().contains("U+0002"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_key_is_taken_live_keys_at_once_the_rest_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_conf(dir.path());
    let c = RemotingClient::new(ClientConfig::default());
    let broker = start_from(&file).await;
    let addr = broker.local_addr().to_string();
    for i in 0..3 {
        let r = c.invoke(&addr, send("LiveTopic", 0, &format!("m{i}"), ""), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    // Dispatch runs behind the appends: pull until all three are readable.
    let deadline = std::time::Instant::now() + TIMEOUT;
    while bodies(&pull_found(&c, &addr, "LiveTopic", 0, 0).await).len() < 3 {
        assert!(std::time::Instant::now() < deadline, "three messages never became readable");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Store keys read on each use, a broker key read at each start, a key of Java's store that
    // tunes nothing here and a key nobody has: all taken.
    let body = "maxMessageSize=1024\nmaxTransferCountOnMessageInMemory=1\nsendMessageThreadPoolNums=3\ndispatchCqThreads=4\nnoSuchKey=1\n";
    let r = c.invoke(&addr, update(body), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::SUCCESS, None));

    // Live: a message above the new maximum is refused at once, and a pull takes one message.
    let big = "x".repeat(2000);
    let r = c.invoke(&addr, send("LiveTopic", 0, &big, ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::MESSAGE_ILLEGAL, "{:?}", r.remark);
    let r = c.invoke(&addr, send("LiveTopic", 0, "small", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    assert_eq!(bodies(&pull_found(&c, &addr, "LiveTopic", 0, 0).await).len(), 1);

    // Shown either way; keys no config of ours has are not.
    let config = config_map(&c, &addr).await;
    assert_eq!((config["maxMessageSize"].as_str(), config["maxTransferCountOnMessageInMemory"].as_str()), ("1024", "1"));
    assert_eq!(config["sendMessageThreadPoolNums"], "3");
    assert_eq!((config["dispatchCqThreads"].as_str(), config["enableLmq"].as_str()), ("4", "false"));
    assert!(!config.contains_key("noSuchKey"));
    // A feature this store does not have is refused: the broker would not start with it.
    let r = c.invoke(&addr, update("enableLmq=true"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap_or("").contains("enableLmq=true"), "{:?}", r.remark);
    assert_eq!(config_map(&c, &addr).await["enableLmq"], "false");
    let persisted = remoting::properties::parse(&std::fs::read_to_string(&file).unwrap());
    assert_eq!((persisted["maxMessageSize"].as_str(), persisted["sendMessageThreadPoolNums"].as_str()), ("1024", "3"));
    // A later update keeps what waits for the next start.
    let r = c.invoke(&addr, update("traceOn=false"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    assert_eq!(config_map(&c, &addr).await["sendMessageThreadPoolNums"], "3");
    assert_eq!(remoting::properties::parse(&std::fs::read_to_string(&file).unwrap())["sendMessageThreadPoolNums"], "3");

    // A config the broker would not start with is refused: a SLAVE needs a brokerId above 0.
    let r = c.invoke(&addr, update("brokerRole=SLAVE"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap_or("").contains("would not start"), "{:?}", r.remark);
    assert_eq!(config_map(&c, &addr).await["brokerRole"], "ASYNC_MASTER");
    broker.shutdown().await;

    let broker = start_from(&file).await;
    let addr = broker.local_addr().to_string();
    let config = config_map(&c, &addr).await;
    assert_eq!((config["maxMessageSize"].as_str(), config["sendMessageThreadPoolNums"].as_str(), config["traceOn"].as_str()), ("1024", "3", "false"));
    broker.shutdown().await;
}
