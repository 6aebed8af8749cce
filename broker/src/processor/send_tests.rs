//! SendProcessor over a store in a temporary directory, without a server: a send under each wait
//! policy, and a bad header.

use remoting::protocol::broker::SendMessageRequestHeaderV2;
use remoting::protocol::name::TopicName;
use store::config::{BrokerRole, FlushDiskType};

use std::sync::Arc;

use super::*;
use crate::broker::Broker;
use crate::stats_manager::names;
use crate::testing::{self, call, loopback};

fn header(topic: &str) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: TopicName::new(topic).unwrap(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some("KEYS\u{1}k\u{2}".into()),
        reconsume_times: None,
        unit_mode: None,
        batch: None,
        max_reconsume_times: None,
        broker_name: None,
    }
}

/// A SEND_MESSAGE_V2 as the Java producer sends it.
fn send(topic: &str) -> RemotingCommand {
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &SendMessageRequestHeaderV2::from(header(topic))).with_body(b"hello".to_vec())
}

fn sent(response: &RemotingCommand) -> SendMessageResponseHeader {
    response.decode_header().expect("a send response header")
}

fn processor(flush: FlushDiskType, role: BrokerRole) -> (tempfile::TempDir, Arc<Broker>, Arc<SendProcessor>) {
    let dir = tempfile::tempdir().unwrap();
    let broker = testing::broker(dir.path(), flush, role);
    (dir, broker.clone(), Arc::new(SendProcessor { ctx: broker.send_context() }))
}

fn puts_counted(b: &Broker, topic: &str) -> Option<u64> {
    b.broker_stats.tick(remoting::clock::now_ms());
    b.broker_stats.item(names::TOPIC_PUT_NUMS, topic).map(|item| item.minute().sum)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_send_under_async_flush_is_answered_by_the_processor_itself() {
    let (_dir, b, p) = processor(FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster);
    let (_client, server) = loopback(p.clone()).await;
    for offset in 0..2 {
        let response = p.process(&server, send("T")).unwrap().expect("answered at once");
        assert_eq!(response.code, ResponseCode::SUCCESS.0, "{:?}", response.remark);
        assert_eq!((sent(&response).queue_id, sent(&response).queue_offset), (0, offset));
        assert!(response.ext_fields.as_ref().is_some_and(|ext| ext.contains_key(MSG_REGION)), "decorated");
    }
    assert_eq!(puts_counted(&b, "T"), Some(2));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_send_under_sync_flush_is_answered_by_the_flush_service_once_on_disk() {
    let (_dir, b, p) = processor(FlushDiskType::SyncFlush, BrokerRole::AsyncMaster);
    let (client, server) = loopback(p.clone()).await;
    assert!(p.process(&server, send("T")).unwrap().is_none(), "the processor leaves the answer to the flush service");
    let response = call(&client, send("T")).await;
    assert_eq!(response.code, ResponseCode::SUCCESS.0, "{:?}", response.remark);
    assert_eq!(sent(&response).queue_offset, 1);
    assert!(b.store.commit_log().flushed_offset() >= b.store.commit_log().max_offset());
    assert_eq!(puts_counted(&b, "T"), Some(2));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_send_to_a_sync_master_without_a_slave_is_stored_and_answered_slave_not_available() {
    for flush in [FlushDiskType::AsyncFlush, FlushDiskType::SyncFlush] {
        let (_dir, b, p) = processor(flush, BrokerRole::SyncMaster);
        let (client, _server) = loopback(p).await;
        let response = call(&client, send("T")).await;
        assert_eq!(response.code, ResponseCode::SLAVE_NOT_AVAILABLE.0, "{flush:?}");
        assert_eq!(sent(&response).queue_offset, 0, "the message is stored all the same");
        assert_eq!(puts_counted(&b, "T"), Some(1));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_send_that_says_wait_false_to_a_sync_master_is_answered_once_appended() {
    let (_dir, _b, p) = processor(FlushDiskType::SyncFlush, BrokerRole::SyncMaster);
    let (_client, server) = loopback(p.clone()).await;
    let mut h = header("T");
    h.properties = Some("WAIT\u{1}false\u{2}".into());
    let request = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &SendMessageRequestHeaderV2::from(h)).with_body(b"x".to_vec());
    let response = p.process(&server, request).unwrap().expect("answered at once");
    assert_eq!(response.code, ResponseCode::SUCCESS.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_header_is_refused_with_the_field_it_lacks_and_nothing_is_stored() {
    let (_dir, b, p) = processor(FlushDiskType::AsyncFlush, BrokerRole::AsyncMaster);
    let (client, server) = loopback(p.clone()).await;
    let mut request = send("T");
    if let Some(ext) = request.ext_fields.as_mut() {
        ext.shift_remove("b");
    }
    let refused = p.process(&server, request.clone()).expect_err("a send without a topic");
    assert_eq!(refused.code, ResponseCode::SYSTEM_ERROR);
    assert!(refused.remark.contains("<b>"), "{}", refused.remark);
    let response = call(&client, request).await;
    assert_eq!(response.code, ResponseCode::SYSTEM_ERROR.0);
    let mut bad_queue = send("T");
    if let Some(ext) = bad_queue.ext_fields.as_mut() {
        ext.insert("e".into(), "not a number".into());
    }
    assert!(p.process(&server, bad_queue).is_err());
    assert_eq!(b.store.commit_log().max_offset(), 0);
    assert_eq!(puts_counted(&b, "T"), None);
}
