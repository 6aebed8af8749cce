//! The broker driven in-process: a client connection over `tokio::io::duplex`, whose other end
//! the broker serves as if a peer had connected to its port, and the broker's own calls to a
//! client on such a stream.

use std::net::SocketAddr;
use std::sync::Arc;

use remoting::client::client_channel;
use remoting::connection::{spawn_stream, ConnectionConfig, Endpoints, InFlight, InboundHandler, Side};
use remoting::server::{Channel, Reply};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_message_sent_over_a_duplex_stream_is_pulled_back_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let (client_end, broker_end) = tokio::io::duplex(1 << 20);
    let peer = SocketAddr::from(([127, 0, 0, 1], 50001));
    broker.serve_stream(broker_end, peer).unwrap();
    let channel = client_channel(client_end, Endpoints { remote: broker.local_addr(), local: peer }, &ConnectionConfig::default());

    let sent = channel.invoke(send("InProcess", 0, "hello", ""), TIMEOUT).await.unwrap();
    // Parked until the message is dispatched to its queue.
    let pulled = channel.invoke(pull("InProcess", 0, 0, 5_000), TIMEOUT).await.unwrap();

    assert_eq!(sent.response_code(), ResponseCode::SUCCESS, "{:?}", sent.remark);
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS, "{:?}", pulled.remark);
    assert_eq!(bodies(&pulled)[0].1, "hello");
    broker.shutdown().await;
}

/// A consumer that answers the broker's GET_CONSUMER_STATUS_FROM_CLIENT with its offsets.
struct ReportsOffsets;

impl InboundHandler for ReportsOffsets {
    fn on_request(&self, channel: &Channel, request: RemotingCommand, _: InFlight) {
        let answer = if request.request_code() == RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT {
            let body = r#"{"messageQueueTable":{{"brokerName":"b","queueId":0,"topic":"InProcess"}:3}}"#;
            RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(body.as_bytes().to_vec())
        } else {
            RemotingCommand::response_to(&request, ResponseCode::REQUEST_CODE_NOT_SUPPORTED)
        };
        Reply::to(channel, &request).send(answer);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_broker_asks_a_consumer_on_a_duplex_stream_for_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let (consumer_end, broker_end) = tokio::io::duplex(1 << 20);
    let consumer_addr = SocketAddr::from(([127, 0, 0, 1], 50002));
    broker.serve_stream(broker_end, consumer_addr).unwrap();
    let endpoints = Endpoints { remote: broker.local_addr(), local: consumer_addr };
    let consumer = spawn_stream(consumer_end, endpoints, &ConnectionConfig::default(), Side::Client, Arc::new(ReportsOffsets));
    let heartbeat = r#"{"clientID":"cid-1","consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"InProcess","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG"}],"unitMode":false}],"producerDataSet":[]}"#;
    let joined = consumer.invoke(RemotingCommand::request(RequestCode::HEART_BEAT).with_body(heartbeat.as_bytes().to_vec()), TIMEOUT).await.unwrap();
    assert_eq!(joined.response_code(), ResponseCode::SUCCESS, "{:?}", joined.remark);

    let (admin_end, broker_end) = tokio::io::duplex(1 << 20);
    let admin_addr = SocketAddr::from(([127, 0, 0, 1], 50003));
    broker.serve_stream(broker_end, admin_addr).unwrap();
    let admin = client_channel(admin_end, Endpoints { remote: broker.local_addr(), local: admin_addr }, &ConnectionConfig::default());
    let ask = RemotingCommand::request(RequestCode::INVOKE_BROKER_TO_GET_CONSUMER_STATUS).with_ext("topic", "InProcess").with_ext("group", "g");
    let status = admin.invoke(ask, TIMEOUT).await.unwrap();

    assert_eq!(status.response_code(), ResponseCode::SUCCESS, "{:?}", status.remark);
    assert_eq!(
        String::from_utf8_lossy(status.body_bytes()),
        r#"{"consumerTable":{"cid-1":{{"brokerName":"b","queueId":0,"topic":"InProcess"}:3}},"messageQueueTable":{}}"#
    );
    broker.shutdown().await;
}
