//! AdminProcessor over a store in a temporary directory, without a server: topics created, read
//! and deleted, refused queue counts, the runtime info and the printed config.

use remoting::RemotingCommand;
use store::config::{BrokerRole, FlushDiskType};

use super::*;
use crate::testing::{self, call, loopback};

fn pool(name: &str) -> Arc<BusinessPool> {
    Arc::new(BusinessPool::new(name, 1, 16).expect("a pool"))
}

/// The processor over a fresh broker's admin handles, and those handles.
fn processor(dir: &std::path::Path) -> (AdminContext, Arc<AdminProcessor>) {
    let ctx = testing::broker(dir, FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster).admin_context();
    let pools = QueuedPools { send: pool("s"), pull: pool("p"), query: pool("q"), end_transaction: pool("e") };
    (ctx.clone(), Arc::new(AdminProcessor { ctx, pools }))
}

fn create_topic(topic: &str, queues: &str) -> RemotingCommand {
    RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", queues)
        .with_ext("writeQueueNums", queues)
        .with_ext("perm", "6")
        .with_ext("topicFilterType", "SINGLE_TAG")
        .with_ext("order", "false")
}

fn with_topic(code: RequestCode, topic: &str) -> RemotingCommand {
    RemotingCommand::request(code).with_ext("topic", topic)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_created_topic_is_kept_registered_read_back_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, p) = processor(dir.path());
    let (client, _server) = loopback(p).await;
    let created = call(&client, create_topic("Orders", "4")).await;
    assert_eq!(created.code, ResponseCode::SUCCESS.0, "{:?}", created.remark);
    assert_eq!(ctx.topics.select("Orders").map(|tc| (tc.read_queue_nums, tc.write_queue_nums, tc.perm)), Some((4, 4, 6)));
    assert_eq!(ctx.membership.registration().take_pending(), Some(false), "a new topic is registered at once, not oneway");

    let read = call(&client, with_topic(RequestCode::GET_TOPIC_CONFIG, "Orders")).await;
    assert_eq!(read.code, ResponseCode::SUCCESS.0);
    let body: serde_json::Value = serde_json::from_slice(read.body.as_deref().unwrap()).unwrap();
    assert_eq!((body["topicName"].as_str(), body["writeQueueNums"].as_i64()), (Some("Orders"), Some(4)));

    let deleted = call(&client, with_topic(RequestCode::DELETE_TOPIC_IN_BROKER, "Orders")).await;
    assert_eq!(deleted.code, ResponseCode::SUCCESS.0);
    assert!(ctx.topics.select("Orders").is_none());
    let missing = call(&client, with_topic(RequestCode::GET_TOPIC_CONFIG, "Orders")).await;
    assert_eq!((missing.code, missing.remark.as_deref()), (ResponseCode::TOPIC_NOT_EXIST.0, Some("No topic in this broker. topic: Orders")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queue_count_above_the_maximum_or_a_reserved_name_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, p) = processor(dir.path());
    let (client, _server) = loopback(p).await;
    let too_many = (ctx.config().max_topic_queue_nums + 1).to_string();
    let refused = call(&client, create_topic("Wide", &too_many)).await;
    assert_eq!(refused.code, ResponseCode::INVALID_PARAMETER.0);
    assert!(ctx.topics.select("Wide").is_none());
    let reserved = call(&client, create_topic("TBW102", "4")).await;
    assert_eq!(reserved.code, ResponseCode::SYSTEM_ERROR.0);
    assert_eq!(ctx.membership.registration().take_pending(), None, "nothing to register");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_runtime_info_reads_the_store_the_counters_and_the_pools() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, p) = processor(dir.path());
    let (client, _server) = loopback(p).await;
    assert!(ctx.store.put_message(&testing::message("T", "")).is_ok(), "a put");
    let info = call(&client, RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO)).await;
    assert_eq!(info.code, ResponseCode::SUCCESS.0);
    let body: serde_json::Value = serde_json::from_slice(info.body.as_deref().unwrap()).unwrap();
    let table = &body["table"];
    assert_eq!(table["brokerActive"], "true");
    assert_eq!(table["sendThreadPoolQueueSize"], "0");
    assert_eq!(table["bootTimestamp"], ctx.boot_timestamp.to_string());
    let max: i64 = table["commitLogMaxOffset"].as_str().unwrap().parse().unwrap();
    assert_eq!(max, ctx.store.max_phy_offset());
    assert!(max > 0, "the put is in the commit log");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_printed_config_names_the_role_and_id_the_broker_has_now() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, p) = processor(dir.path());
    let (client, _server) = loopback(p).await;
    let printed = |response: RemotingCommand| String::from_utf8(response.body.unwrap().to_vec()).unwrap();
    let config = printed(call(&client, RemotingCommand::request(RequestCode::GET_BROKER_CONFIG)).await);
    assert!(config.lines().any(|l| l == "brokerRole=ASYNC_MASTER") && config.lines().any(|l| l == "brokerId=0"), "{config}");
    // In DLedger mode the id follows the group; the printed config follows the membership.
    ctx.membership.set_broker_id(3);
    let config = printed(call(&client, RemotingCommand::request(RequestCode::GET_BROKER_CONFIG)).await);
    assert!(config.lines().any(|l| l == "brokerId=3"), "{config}");
}
