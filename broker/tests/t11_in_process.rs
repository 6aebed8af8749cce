//! The broker driven in-process: a client connection over `tokio::io::duplex`, whose other end
//! the broker serves as if a peer had connected to its port.

use std::net::SocketAddr;

use remoting::client::client_channel;
use remoting::connection::{ConnectionConfig, Endpoints};
use remoting::ResponseCode;

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
