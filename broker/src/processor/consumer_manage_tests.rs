//! ConsumerManageProcessor over a store in a temporary directory, without a server or a broker:
//! offsets committed and queried, where a new group starts, and a group without consumers.

use std::time::{Duration, Instant};

use store::config::{BrokerRole, FlushDiskType};

use super::*;
use crate::testing::{self, call, loopback};

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<MessageStore>,
    offsets: Arc<ConsumerOffsetManager>,
    client: Channel,
    _server: Channel,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.store.shutdown();
    }
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = testing::open_store(testing::store_config(dir.path(), FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster));
    let offsets = Arc::new(ConsumerOffsetManager::open(&store.config().root_dir()).unwrap());
    let p = Arc::new(ConsumerManageProcessor { consumers: Default::default(), offsets: offsets.clone(), store: store.clone() });
    let (client, server) = loopback(p).await;
    Fixture { _dir: dir, store, offsets, client, _server: server }
}

fn of_group(code: RequestCode, queue_id: i32) -> RemotingCommand {
    RemotingCommand::request(code).with_ext("consumerGroup", "G").with_ext("topic", "T").with_ext("queueId", queue_id.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_committed_offset_is_answered_back() {
    let f = fixture().await;
    let committed = call(&f.client, of_group(RequestCode::UPDATE_CONSUMER_OFFSET, 1).with_ext("commitOffset", "42")).await;
    assert_eq!(committed.code, ResponseCode::SUCCESS.0);
    assert_eq!(f.offsets.query_offset("G", "T", 1), Some(42));
    let queried = call(&f.client, of_group(RequestCode::QUERY_CONSUMER_OFFSET, 1)).await;
    assert_eq!((queried.code, queried.ext("offset")), (ResponseCode::SUCCESS.0, Some("42")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_group_starts_at_zero_only_on_a_young_queue_with_messages() {
    let f = fixture().await;
    let empty = call(&f.client, of_group(RequestCode::QUERY_CONSUMER_OFFSET, 0)).await;
    assert_eq!(empty.code, ResponseCode::QUERY_NOT_FOUND.0, "an empty queue: the client decides");
    assert!(f.store.put_message(&testing::message("T", "")).is_ok(), "a put");
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.store.max_offset_in_queue("T", 0) < 1 {
        assert!(Instant::now() < deadline, "the message is dispatched");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let young = call(&f.client, of_group(RequestCode::QUERY_CONSUMER_OFFSET, 0)).await;
    assert_eq!((young.code, young.ext("offset")), (ResponseCode::SUCCESS.0, Some("0")));
    let not_zero = call(&f.client, of_group(RequestCode::QUERY_CONSUMER_OFFSET, 0).with_ext("setZeroIfNotFound", "false")).await;
    assert_eq!(not_zero.code, ResponseCode::QUERY_NOT_FOUND.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_without_consumers_has_no_list() {
    let f = fixture().await;
    let listed = call(&f.client, RemotingCommand::request(RequestCode::GET_CONSUMER_LIST_BY_GROUP).with_ext("consumerGroup", "G")).await;
    assert_eq!((listed.code, listed.remark.as_deref()), (ResponseCode::SYSTEM_ERROR.0, Some("no consumer for this group, G")));
}
