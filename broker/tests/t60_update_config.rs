//! UPDATE_BROKER_CONFIG through the broker's socket: an allowed key takes effect at once, shows in
//! GET_BROKER_CONFIG and in the config file, and is there after a restart from that file; keys
//! off the allow list and values of the wrong type are refused and change nothing.

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

    // A path, a port and a key the running broker would not follow are refused; nothing changes.
    for body in ["storePathRootDir=/tmp/elsewhere\n", "listenPort=1\n", "sendMessageThreadPoolNums=64\nslaveReadEnable=false\n", "rocketmqHome=/x\n"] {
        let r = c.invoke(&addr, update(body), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::NO_PERMISSION, "{body}");
        assert!(r.remark.as_deref().unwrap_or("").contains("cannot be changed at runtime"), "{:?}", r.remark);
    }
    // Values of the wrong type, or that the broker could not work with.
    for body in ["fileReservedTime=soon\n", "brokerPermission=99\n", "deleteWhen=25\n", "slaveReadEnable=false\ntransactionCheckMax=x\n"] {
        let r = c.invoke(&addr, update(body), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR, "{body}");
        assert!(r.remark.as_deref().unwrap_or("").contains("unchanged"), "{:?}", r.remark);
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
