//! QueryProcessor over a store in a temporary directory, without a server or a broker: offsets of
//! a queue and a message read by its offset.

use std::time::{Duration, Instant};

use store::config::{BrokerRole, FlushDiskType};

use super::*;
use crate::testing::{self, call, loopback};

fn processor(dir: &std::path::Path) -> (Arc<MessageStore>, Arc<QueryProcessor>) {
    let store_config = testing::store_config(dir, FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster);
    let store = testing::open_store(store_config.clone());
    let live = Arc::new(arc_swap::ArcSwap::from_pointee(store_config));
    (store.clone(), Arc::new(QueryProcessor { store, store_config: live }))
}

fn of_queue(code: RequestCode, topic: &str, queue_id: i32) -> RemotingCommand {
    RemotingCommand::request(code).with_ext("topic", topic).with_ext("queueId", queue_id.to_string())
}

/// Puts `n` messages into `T` queue 0 and waits until they are dispatched to the consume queue.
fn put_and_dispatch(store: &MessageStore, n: i64) {
    for _ in 0..n {
        assert!(store.put_message(&testing::message("T", "")).is_ok(), "a put");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.max_offset_in_queue("T", 0) < n {
        assert!(Instant::now() < deadline, "the messages are dispatched");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queues_offsets_are_read_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (store, p) = processor(dir.path());
    let (client, _server) = loopback(p).await;
    put_and_dispatch(&store, 3);
    let offset = |response: RemotingCommand| response.ext("offset").map(str::to_owned);
    assert_eq!(offset(call(&client, of_queue(RequestCode::GET_MAX_OFFSET, "T", 0)).await).as_deref(), Some("3"));
    assert_eq!(offset(call(&client, of_queue(RequestCode::GET_MIN_OFFSET, "T", 0)).await).as_deref(), Some("0"));
    assert_eq!(offset(call(&client, of_queue(RequestCode::GET_MAX_OFFSET, "T", 1)).await).as_deref(), Some("0"), "an empty queue");
    let earliest = call(&client, of_queue(RequestCode::GET_EARLIEST_MSG_STORETIME, "T", 0)).await;
    assert!(earliest.ext("timestamp").and_then(|t| t.parse::<i64>().ok()).is_some_and(|t| t > 0));
    store.shutdown();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_is_viewed_by_its_commit_log_offset_and_a_bad_offset_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (store, p) = processor(dir.path());
    let (client, _server) = loopback(p).await;
    put_and_dispatch(&store, 1);
    let view = |offset: i64| RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID).with_ext("offset", offset.to_string());
    let found = call(&client, view(0)).await;
    assert_eq!(found.code, ResponseCode::SUCCESS.0);
    assert_eq!(found.body.as_deref().map(<[u8]>::len), Some(store.max_phy_offset() as usize), "the whole record");
    let missing = call(&client, view(1 << 40)).await;
    assert_eq!((missing.code, missing.remark.as_deref()), (ResponseCode::SYSTEM_ERROR.0, Some("can not find message by the offset, 1099511627776")));
    store.shutdown();
}
