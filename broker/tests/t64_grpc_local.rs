//! `--enable-proxy` (local mode): RocketMQ 5's gRPC API served from the broker, driven by a tonic
//! client of the same protos: routes answered with the proxy's own endpoint, Java's codes for bad
//! input, a send, a receive with its receipt handle, an ack, and the handle refused afterwards.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use proxy::pb;
use proxy::pb::messaging_service_client::MessagingServiceClient;
use proxy::pb::Code;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tonic::transport::Channel;

fn create_topic(name: &str, message_type: &str) -> RemotingCommand {
    let attributes = format!("+message.type={message_type}");
    raw(
        RequestCode::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", name),
            ("defaultTopic", "TBW102"),
            ("readQueueNums", "4"),
            ("writeQueueNums", "4"),
            ("perm", "6"),
            ("topicFilterType", "SINGLE_TAG"),
            ("order", "false"),
            ("attributes", attributes.as_str()),
        ],
    )
}

fn resource(name: &str) -> Option<pb::Resource> {
    Some(pb::Resource { resource_namespace: String::new(), name: name.to_owned() })
}

fn endpoints(port: u16) -> Option<pb::Endpoints> {
    Some(pb::Endpoints { scheme: pb::AddressScheme::IPv4 as i32, addresses: vec![pb::Address { host: "127.0.0.1".into(), port: i32::from(port) }] })
}

fn as_client<T>(message: T, client_id: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut().insert("x-mq-client-id", client_id.parse().unwrap());
    r
}

fn message(topic: &str, id: &str, body: &[u8], group: Option<&str>) -> pb::Message {
    pb::Message {
        topic: resource(topic),
        user_properties: HashMap::from([("k".to_owned(), "v".to_owned())]),
        system_properties: Some(pb::SystemProperties {
            tag: Some("TagA".into()),
            message_id: id.into(),
            message_type: if group.is_some() { pb::MessageType::Fifo } else { pb::MessageType::Normal } as i32,
            message_group: group.map(str::to_owned),
            body_encoding: pb::Encoding::Identity as i32,
            ..Default::default()
        }),
        body: body.to_vec(),
    }
}

fn code(s: &Option<pb::Status>) -> Code {
    Code::try_from(s.as_ref().map_or(0, |s| s.code)).unwrap_or(Code::Unspecified)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grpc_client_sends_receives_and_acks_through_the_brokers_own_grpc_port() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = start(dir.path(), &[]).await;
    let grpc_port = free_port();
    let config = proxy::config::ProxyConfig { grpc_server_port: grpc_port, remoting_listen_port: 0, ..Default::default() };
    broker.enable_proxy(config).await.unwrap();
    let addr = broker.local_addr().to_string();
    let admin = RemotingClient::new(ClientConfig::default());
    for (t, kind) in [("GrpcT", "NORMAL"), ("GrpcF", "FIFO")] {
        let r = admin.invoke(&addr, create_topic(t, kind), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    let channel = Channel::from_shared(format!("http://127.0.0.1:{grpc_port}")).unwrap().connect().await.unwrap();
    let mut c = MessagingServiceClient::new(channel);

    // QueryRoute: the proxy's own endpoint, the topic's queues and type; Java's codes otherwise.
    let route = c.query_route(as_client(pb::QueryRouteRequest { topic: resource("GrpcT"), endpoints: endpoints(1) }, "c0")).await.unwrap().into_inner();
    assert_eq!(code(&route.status), Code::Ok);
    assert_eq!(route.message_queues.len(), 4);
    let q = &route.message_queues[0];
    assert_eq!(q.permission, pb::Permission::ReadWrite as i32);
    assert_eq!(q.accept_message_types, vec![pb::MessageType::Normal as i32]);
    assert_eq!(q.broker.as_ref().and_then(|b| b.endpoints.as_ref()).map(|e| e.addresses[0].port), Some(i32::from(grpc_port)));
    let missing = c.query_route(as_client(pb::QueryRouteRequest { topic: resource("NoSuchTopic"), endpoints: endpoints(1) }, "c0")).await.unwrap();
    assert_eq!(code(&missing.into_inner().status), Code::TopicNotFound);
    let anonymous = c.query_route(pb::QueryRouteRequest { topic: resource("GrpcT"), endpoints: endpoints(1) }).await.unwrap();
    assert_eq!(code(&anonymous.into_inner().status), Code::ClientIdRequired);
    let no_endpoint = c.query_route(as_client(pb::QueryRouteRequest { topic: resource("GrpcT"), endpoints: None }, "c0")).await.unwrap();
    // Java does not refuse a route request naming no endpoints: its queues name none either.
    let no_endpoint = no_endpoint.into_inner();
    assert_eq!(code(&no_endpoint.status), Code::Ok);
    assert_eq!(no_endpoint.message_queues[0].broker.as_ref().and_then(|b| b.endpoints.as_ref()).map(|e| e.addresses.len()), Some(0));

    // QueryAssignment: one per broker (queue -1) for a group, each queue for an orderly one (Java).
    let orderly = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        .with_body(&br#"{"groupName":"grpc-orderly","consumeMessageOrderly":true}"#[..]);
    assert_eq!(admin.invoke(&addr, orderly, TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    let assignment = |group: &str| as_client(pb::QueryAssignmentRequest { topic: resource("GrpcF"), group: resource(group), endpoints: endpoints(1) }, "c0");
    let ids = |r: pb::QueryAssignmentResponse| r.assignments.iter().filter_map(|a| a.message_queue.as_ref().map(|q| (q.id, q.permission))).collect::<Vec<_>>();
    let rw = pb::Permission::ReadWrite as i32;
    let r = c.query_assignment(assignment("grpc-g")).await.unwrap().into_inner();
    assert_eq!((code(&r.status), ids(r)), (Code::Ok, vec![(-1, rw)]));
    let r = c.query_assignment(assignment("grpc-orderly")).await.unwrap().into_inner();
    assert_eq!((code(&r.status), ids(r)), (Code::Ok, vec![(0, rw), (1, rw), (2, rw), (3, rw)]));
    let r = c.query_assignment(assignment("bad group!")).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::IllegalConsumerGroup);

    // SendMessage: Java's refusals, then a send.
    let send = |m: pb::Message, id: Option<&str>| {
        let req = pb::SendMessageRequest { messages: vec![m] };
        match id {
            Some(id) => as_client(req, id),
            None => tonic::Request::new(req),
        }
    };
    let r = c.send_message(send(message("GrpcT", "ID1", b"hello", None), None)).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::ClientIdRequired);
    let r = c.send_message(send(message("GrpcT", "ID1", b"", None), Some("c1"))).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::MessageBodyEmpty);
    let r = c.send_message(send(message("GrpcT", "ID1", b"x", Some("g1")), Some("c1"))).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::MessagePropertyConflictWithType);
    let r = c.send_message(send(message("GrpcT", "", b"x", None), Some("c1"))).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::IllegalMessageId);
    let r = c.send_message(send(message("GrpcT", "ID1", b"hello", None), Some("c1"))).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Ok, "{r:?}");
    assert_eq!(r.entries[0].message_id, "ID1");
    let r = c.send_message(send(message("GrpcF", "ID2", b"fifo", Some("g1")), Some("c1"))).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Ok, "{r:?}");

    // A simple consumer: settings over Telemetry, then receive and ack.
    let settings = pb::Settings {
        client_type: Some(pb::ClientType::SimpleConsumer as i32),
        access_point: endpoints(grpc_port),
        request_timeout: Some(prost_types::Duration { seconds: 3, nanos: 0 }),
        pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription {
            group: resource("grpc-g"),
            subscriptions: vec![pb::SubscriptionEntry {
                topic: resource("GrpcT"),
                expression: Some(pb::FilterExpression { r#type: pb::FilterType::Tag as i32, expression: "*".into() }),
            }],
            ..Default::default()
        })),
        ..Default::default()
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(pb::TelemetryCommand { status: None, command: Some(pb::telemetry_command::Command::Settings(settings)) }).await.unwrap();
    let mut telemetry = c.telemetry(as_client(tokio_stream_of(rx), "consumer-1")).await.unwrap().into_inner();
    let first = tokio::time::timeout(TIMEOUT, telemetry.message()).await.unwrap().unwrap().unwrap();
    assert_eq!(code(&first.status), Code::Ok);
    let Some(pb::telemetry_command::Command::Settings(merged)) = first.command else { panic!("{first:?}") };
    let Some(pb::settings::PubSub::Subscription(sub)) = merged.pub_sub else { panic!("{merged:?}") };
    assert_eq!((sub.receive_batch_size, sub.fifo), (Some(32), Some(false)));
    assert_eq!(merged.backoff_policy.map(|b| b.max_attempts), Some(17));

    let receive = pb::ReceiveMessageRequest {
        group: resource("grpc-g"),
        message_queue: Some(pb::MessageQueue { topic: resource("GrpcT"), id: -1, ..Default::default() }),
        filter_expression: Some(pb::FilterExpression { r#type: pb::FilterType::Tag as i32, expression: "*".into() }),
        batch_size: 16,
        invisible_duration: Some(prost_types::Duration { seconds: 20, nanos: 0 }),
        auto_renew: false,
        long_polling_timeout: Some(prost_types::Duration { seconds: 5, nanos: 0 }),
        attempt_id: None,
    };
    let mut short = receive.clone();
    short.invisible_duration = Some(prost_types::Duration { seconds: 1, nanos: 0 });
    let mut stream = c.receive_message(as_client(short, "consumer-1")).await.unwrap().into_inner();
    let only = stream.message().await.unwrap().unwrap();
    assert!(matches!(&only.content, Some(pb::receive_message_response::Content::Status(s)) if s.code == Code::IllegalInvisibleTime as i32), "{only:?}");

    let mut stream = c.receive_message(as_client(receive, "consumer-1")).await.unwrap().into_inner();
    let mut items = Vec::new();
    while let Some(item) = tokio::time::timeout(Duration::from_secs(15), stream.message()).await.unwrap().unwrap() {
        items.push(item.content);
    }
    assert!(matches!(&items[0], Some(pb::receive_message_response::Content::Status(s)) if s.code == Code::Ok as i32), "{items:?}");
    let Some(pb::receive_message_response::Content::Message(m)) = &items[1] else { panic!("{items:?}") };
    assert_eq!(m.body, b"hello");
    assert_eq!(m.user_properties.get("k").map(String::as_str), Some("v"));
    let sys = m.system_properties.clone().unwrap();
    assert_eq!((sys.message_id.as_str(), sys.tag.as_deref(), sys.delivery_attempt), ("ID1", Some("TagA"), Some(1)));
    assert_eq!(sys.body_digest.map(|d| d.checksum), Some("5D41402ABC4B2A76B9719D911017C592".to_owned()));
    let handle = sys.receipt_handle.unwrap();
    assert_eq!(handle.split(' ').count(), 9, "{handle}");

    let ack = |h: &str| {
        as_client(
            pb::AckMessageRequest {
                group: resource("grpc-g"),
                topic: resource("GrpcT"),
                entries: vec![pb::AckMessageEntry { message_id: "ID1".into(), receipt_handle: h.to_owned() }],
            },
            "consumer-1",
        )
    };
    let r = c.ack_message(ack(&handle)).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Ok, "{r:?}");
    // Java's ReceiptHandle.decode throws: INTERNAL_SERVER_ERROR, as Java's proxy answers.
    let r = c.ack_message(ack("not a handle")).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::InternalServerError, "{r:?}");

    let r = c.notify_client_termination(as_client(pb::NotifyClientTerminationRequest { group: resource("grpc-g") }, "consumer-1")).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Ok);
    drop(tx);
    broker.shutdown().await;
}

fn tokio_stream_of(rx: tokio::sync::mpsc::Receiver<pb::TelemetryCommand>) -> impl futures::Stream<Item = pb::TelemetryCommand> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
}

fn consumer_settings(port: u16, group: &str, topic: &str) -> pb::TelemetryCommand {
    let settings = pb::Settings {
        client_type: Some(pb::ClientType::PushConsumer as i32),
        access_point: endpoints(port),
        request_timeout: Some(prost_types::Duration { seconds: 3, nanos: 0 }),
        pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription {
            group: resource(group),
            subscriptions: vec![pb::SubscriptionEntry { topic: resource(topic), expression: None }],
            ..Default::default()
        })),
        ..Default::default()
    };
    pb::TelemetryCommand { status: None, command: Some(pb::telemetry_command::Command::Settings(settings)) }
}

async fn receive_all(c: &mut MessagingServiceClient<Channel>, client: &str, r: pb::ReceiveMessageRequest) -> Vec<pb::Message> {
    let mut stream = c.receive_message(as_client(r, client)).await.unwrap().into_inner();
    let mut out = Vec::new();
    while let Some(item) = tokio::time::timeout(Duration::from_secs(15), stream.message()).await.unwrap().unwrap() {
        if let Some(pb::receive_message_response::Content::Message(m)) = item.content {
            out.push(m);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn an_auto_renewed_message_stays_invisible_until_acked_with_its_first_handle() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = start(dir.path(), &[]).await;
    let grpc_port = free_port();
    // A 12 s default invisible time: renewed at the first check (5 s), when 7 s remain.
    let config =
        proxy::config::ProxyConfig { grpc_server_port: grpc_port, remoting_listen_port: 0, default_invisible_time_mills: 12_000, ..Default::default() };
    broker.enable_proxy(config).await.unwrap();
    let addr = broker.local_addr().to_string();
    let admin = RemotingClient::new(ClientConfig::default());
    let r = admin.invoke(&addr, create_topic("GrpcRenew", "NORMAL"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    let channel = Channel::from_shared(format!("http://127.0.0.1:{grpc_port}")).unwrap().connect().await.unwrap();
    let mut c = MessagingServiceClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(consumer_settings(grpc_port, "renew-g", "GrpcRenew")).await.unwrap();
    let mut telemetry = c.telemetry(as_client(tokio_stream_of(rx), "renewer")).await.unwrap().into_inner();
    tokio::time::timeout(TIMEOUT, telemetry.message()).await.unwrap().unwrap().unwrap();
    let sent = c
        .send_message(as_client(pb::SendMessageRequest { messages: vec![message("GrpcRenew", "R1", b"renew me", None)] }, "renewer"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&sent.status), Code::Ok, "{sent:?}");
    let receive = pb::ReceiveMessageRequest {
        group: resource("renew-g"),
        message_queue: Some(pb::MessageQueue { topic: resource("GrpcRenew"), id: -1, ..Default::default() }),
        filter_expression: None,
        batch_size: 4,
        invisible_duration: None,
        auto_renew: true,
        long_polling_timeout: Some(prost_types::Duration { seconds: 5, nanos: 0 }),
        attempt_id: None,
    };
    let got = receive_all(&mut c, "renewer", receive.clone()).await;
    assert_eq!(got.len(), 1);
    let first_handle = got[0].system_properties.as_ref().and_then(|s| s.receipt_handle.clone()).unwrap();
    // Past the 12 s it was first hidden for, it is still hidden: renewed.
    tokio::time::sleep(Duration::from_secs(14)).await;
    assert!(receive_all(&mut c, "renewer", receive).await.is_empty(), "the message came back though renewed");
    let ack = pb::AckMessageRequest {
        group: resource("renew-g"),
        topic: resource("GrpcRenew"),
        entries: vec![pb::AckMessageEntry { message_id: "R1".into(), receipt_handle: first_handle }],
    };
    let r = c.ack_message(as_client(ack, "renewer")).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Ok, "{r:?}");
    drop(tx);
    broker.shutdown().await;
}

/// The proxy's remoting port: routes name the port itself, the broker's codes Java's proxy serves
/// are served, others are not supported; a gRPC client on the same port is served too.
#[tokio::test(flavor = "multi_thread")]
async fn the_proxys_remoting_port_serves_remoting_clients_and_grpc_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = start(dir.path(), &[]).await;
    let config = proxy::config::ProxyConfig { grpc_server_port: free_port(), remoting_listen_port: 0, ..Default::default() };
    let (_, remoting_addr) = broker.enable_proxy(config).await.unwrap();
    let (addr, proxy_addr) = (broker.local_addr().to_string(), remoting_addr.to_string());
    let client = RemotingClient::new(ClientConfig::default());
    let r = client.invoke(&addr, create_topic("ViaProxy", "NORMAL"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS);

    let route = |topic: &str| raw(RequestCode::GET_ROUTEINFO_BY_TOPIC, &[("topic", topic)]);
    let r = client.invoke(&proxy_addr, route("ViaProxy"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let data: remoting::protocol::route::TopicRouteData = remoting::fastjson::from_slice(r.body_bytes()).unwrap();
    assert_eq!(data.broker_datas[0].broker_addrs.get(&0), Some(&proxy_addr), "the broker is reached through the proxy's port");
    assert_eq!((data.queue_datas[0].read_queue_nums, data.queue_datas[0].write_queue_nums, data.queue_datas[0].perm), (4, 4, 6));
    let r = client.invoke(&proxy_addr, route("NoSuchTopic"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::TOPIC_NOT_EXIST);

    // A code Java's proxy forwards to a named broker needs the name (5.x clients send it).
    let name = broker.broker.config().broker_name.clone();
    let max = raw(RequestCode::GET_MAX_OFFSET, &[("topic", "ViaProxy"), ("queueId", "0"), ("bname", name.as_str())]);
    let r = client.invoke(&proxy_addr, max, TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.ext("offset")), (ResponseCode::SUCCESS, Some("0")));
    let unnamed = raw(RequestCode::GET_MAX_OFFSET, &[("topic", "ViaProxy"), ("queueId", "0")]);
    let r = client.invoke(&proxy_addr, unnamed, TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::VERSION_NOT_SUPPORTED, Some("Request doesn't have field bname")));
    // A send's message type is checked against its topic's, as Java's proxy checks it (its
    // SendMessageActivity), before the broker sees it; the broker's own port does not check.
    let send = |topic: &str, properties: &str| {
        let fields = [
            ("producerGroup", "pg"),
            ("topic", topic),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", "0"),
            ("sysFlag", "0"),
            ("bornTimestamp", "1"),
            ("flag", "0"),
            ("properties", properties),
            ("bname", name.as_str()),
        ];
        raw(RequestCode::SEND_MESSAGE, &fields).with_body(b"typed".to_vec())
    };
    let fifo = "__SHARDINGKEY\u{1}g1\u{2}";
    let r = client.invoke(&proxy_addr, send("ViaProxy", fifo), TIMEOUT).await.unwrap();
    assert_eq!(
        (r.response_code(), r.remark.as_deref()),
        (ResponseCode::MESSAGE_ILLEGAL, Some("TopicMessageType validate failed, the expected type is NORMAL, but actual type is FIFO"))
    );
    let r = client.invoke(&proxy_addr, send("NoSuchTopic", ""), TIMEOUT).await.unwrap();
    assert_eq!(
        (r.response_code(), r.remark.as_deref()),
        (ResponseCode::MESSAGE_ILLEGAL, Some("TopicMessageType validate failed, the expected type is UNSPECIFIED, but actual type is NORMAL"))
    );
    let r = client.invoke(&proxy_addr, send("ViaProxy", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let r = client.invoke(&proxy_addr, send("ViaProxy", "TRANSFER_FLAG\u{1}true\u{2}__SHARDINGKEY\u{1}g1\u{2}"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "a message a broker hands on is not checked again: {:?}", r.remark);
    let r = client.invoke(&addr, send("ViaProxy", fifo), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);

    let r = client.invoke(&proxy_addr, create_topic("NotThroughTheProxy", "NORMAL"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::REQUEST_CODE_NOT_SUPPORTED, "admin codes are the broker's, not the proxy's");

    let channel = Channel::from_shared(format!("http://{proxy_addr}")).unwrap().connect().await.unwrap();
    let mut c = MessagingServiceClient::new(channel);
    let route = c.query_route(as_client(pb::QueryRouteRequest { topic: resource("ViaProxy"), endpoints: endpoints(1) }, "c0")).await.unwrap().into_inner();
    assert_eq!((code(&route.status), route.message_queues.len()), (Code::Ok, 4));
    broker.shutdown().await;
}

/// The console's requests of a gRPC consumer (mqadmin consumeMessage, consumerStatus -s) go to it
/// over its Telemetry stream and its answers back to the broker's caller, as Java's proxy relays them.
#[tokio::test(flavor = "multi_thread")]
async fn console_requests_reach_a_grpc_consumer_and_its_answers_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = start(dir.path(), &[]).await;
    let grpc_port = free_port();
    let config = proxy::config::ProxyConfig { grpc_server_port: grpc_port, remoting_listen_port: 0, ..Default::default() };
    broker.enable_proxy(config).await.unwrap();
    let addr = broker.local_addr().to_string();
    let admin = std::sync::Arc::new(RemotingClient::new(ClientConfig::default()));
    assert_eq!(admin.invoke(&addr, create_topic("GrpcConsole", "NORMAL"), TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    let sent = admin.invoke(&addr, send("GrpcConsole", 0, "verify me", ""), TIMEOUT).await.unwrap();
    let msg_id = sent.ext("msgId").unwrap().to_owned();

    let channel = Channel::from_shared(format!("http://127.0.0.1:{grpc_port}")).unwrap().connect().await.unwrap();
    let mut c = MessagingServiceClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(consumer_settings(grpc_port, "grpc-console", "GrpcConsole")).await.unwrap();
    let mut telemetry = c.telemetry(as_client(tokio_stream_of(rx), "console-client")).await.unwrap().into_inner();
    let first = tokio::time::timeout(TIMEOUT, telemetry.message()).await.unwrap().unwrap().unwrap();
    assert_eq!(code(&first.status), Code::Ok);

    // The broker knows the gRPC client by its own address, as Java's proxy channel reports it.
    let connections = admin.invoke(&addr, raw(RequestCode::GET_CONSUMER_CONNECTION_LIST, &[("consumerGroup", "grpc-console")]), TIMEOUT).await.unwrap();
    assert_eq!(connections.response_code(), ResponseCode::SUCCESS, "{:?}", connections.remark);
    let listed = String::from_utf8_lossy(connections.body_bytes()).into_owned();
    assert!(
        listed.contains(r#""clientId":"console-client""#) && listed.contains(r#""clientAddr":"127.0.0.1:"#) && !listed.contains("127.0.0.1:0\""),
        "{listed}"
    );

    // CONSUME_MESSAGE_DIRECTLY: a VerifyMessageCommand with the stored message; the result answers.
    let direct = raw(RequestCode::CONSUME_MESSAGE_DIRECTLY, &[("consumerGroup", "grpc-console"), ("clientId", "console-client"), ("msgId", &msg_id)]);
    let asked = tokio::spawn({
        let (admin, addr) = (admin.clone(), addr.clone());
        async move { admin.invoke(&addr, direct, Duration::from_secs(10)).await }
    });
    let command = tokio::time::timeout(TIMEOUT, telemetry.message()).await.unwrap().unwrap().unwrap();
    let Some(pb::telemetry_command::Command::VerifyMessageCommand(verify)) = command.command else { panic!("{command:?}") };
    assert_eq!(verify.message.map(|m| m.body), Some(b"verify me".to_vec()));
    let ok = pb::Status { code: Code::Ok as i32, message: "OK".into() };
    let answer = pb::telemetry_command::Command::VerifyMessageResult(pb::VerifyMessageResult { nonce: verify.nonce });
    tx.send(pb::TelemetryCommand { status: Some(ok.clone()), command: Some(answer) }).await.unwrap();
    let r = asked.await.unwrap().unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    assert!(std::str::from_utf8(r.body_bytes()).unwrap().contains(r#""consumeResult":"CR_SUCCESS""#));

    // GET_CONSUMER_RUNNING_INFO with the thread stack: a PrintThreadStackTraceCommand; the stack answers.
    let info = raw(RequestCode::GET_CONSUMER_RUNNING_INFO, &[("consumerGroup", "grpc-console"), ("clientId", "console-client"), ("jstackEnable", "true")]);
    let asked = tokio::spawn({
        let (admin, addr) = (admin.clone(), addr.clone());
        async move { admin.invoke(&addr, info, Duration::from_secs(10)).await }
    });
    let command = tokio::time::timeout(TIMEOUT, telemetry.message()).await.unwrap().unwrap().unwrap();
    let Some(pb::telemetry_command::Command::PrintThreadStackTraceCommand(print)) = command.command else { panic!("{command:?}") };
    let answer =
        pb::telemetry_command::Command::ThreadStackTrace(pb::ThreadStackTrace { nonce: print.nonce, thread_stack_trace: Some("\"main\" RUNNABLE".into()) });
    tx.send(pb::TelemetryCommand { status: Some(ok), command: Some(answer) }).await.unwrap();
    let r = asked.await.unwrap().unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    assert!(std::str::from_utf8(r.body_bytes()).unwrap().starts_with(r#"{"jstack":"\"main\" RUNNABLE""#));
    drop(tx);
    broker.shutdown().await;
}

/// A receive whose client went away while it was parked: the message it popped when one arrived
/// could not be written, so it is visible again a second later (Java's nack), not after its
/// 30 s invisible time.
#[tokio::test(flavor = "multi_thread")]
async fn what_a_receive_could_not_hand_to_a_departed_client_is_visible_again_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = start(dir.path(), &[]).await;
    let grpc_port = free_port();
    let config = proxy::config::ProxyConfig { grpc_server_port: grpc_port, remoting_listen_port: 0, ..Default::default() };
    broker.enable_proxy(config).await.unwrap();
    let addr = broker.local_addr().to_string();
    let admin = RemotingClient::new(ClientConfig::default());
    assert_eq!(admin.invoke(&addr, create_topic("GrpcNack", "NORMAL"), TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    let channel = Channel::from_shared(format!("http://127.0.0.1:{grpc_port}")).unwrap().connect().await.unwrap();
    let mut c = MessagingServiceClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(consumer_settings(grpc_port, "grpc-nack", "GrpcNack")).await.unwrap();
    let mut telemetry = c.telemetry(as_client(tokio_stream_of(rx), "nack-client")).await.unwrap().into_inner();
    assert_eq!(code(&tokio::time::timeout(TIMEOUT, telemetry.message()).await.unwrap().unwrap().unwrap().status), Code::Ok);

    let receive = |polling_s: i64| pb::ReceiveMessageRequest {
        group: resource("grpc-nack"),
        message_queue: Some(pb::MessageQueue { topic: resource("GrpcNack"), id: -1, ..Default::default() }),
        filter_expression: Some(pb::FilterExpression { r#type: pb::FilterType::Tag as i32, expression: "*".into() }),
        batch_size: 1,
        invisible_duration: Some(prost_types::Duration { seconds: 30, nanos: 0 }),
        auto_renew: false,
        long_polling_timeout: Some(prost_types::Duration { seconds: polling_s, nanos: 0 }),
        attempt_id: None,
    };
    // Parked at the broker, then abandoned by its client.
    let abandoned = c.receive_message(as_client(receive(10), "nack-client")).await.unwrap().into_inner();
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(abandoned);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = admin.invoke(&addr, send("GrpcNack", 0, "nacked", ""), TIMEOUT).await.unwrap();
    assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    // The abandoned receive's pop wakes on the arrival and takes the message at once; the next
    // receives start later, so they do not race it for the first delivery.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let started = std::time::Instant::now();
    let mut got = Vec::new();
    while got.is_empty() && started.elapsed() < Duration::from_secs(20) {
        got = receive_all(&mut c, "nack-client", receive(5)).await;
    }
    assert_eq!(got.len(), 1, "the message came back within 20 s, long before its 30 s invisible time");
    assert_eq!(got[0].body, b"nacked");
    assert_eq!(got[0].system_properties.as_ref().and_then(|s| s.delivery_attempt), Some(2), "its first delivery was the abandoned one");
    drop(tx);
    broker.shutdown().await;
}

/// With `aclEnable=true`, a gRPC client proves its account with the 5.x clients' signature
/// (HMAC-SHA1 of `x-mq-date-time` under the secret key): none or a wrong one is UNAUTHORIZED, as
/// Java's proxy answers a failed authentication; a right one acts as that account, whose topic
/// permissions the broker's ACL checks (a topic it may not write: UNAUTHORIZED too).
#[tokio::test(flavor = "multi_thread")]
async fn with_acl_on_a_grpc_client_is_its_signed_account() {
    const PLAIN_ACL: &str = "accounts:
  - accessKey: GrpcUser
    secretKey: 12345678
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - GrpcAclOpen=PUB|SUB
  - accessKey: RocketMQAdmin
    secretKey: 99998888
    admin: true
";
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("conf")).unwrap();
    std::fs::write(home.join("conf/plain_acl.yml"), PLAIN_ACL).unwrap();
    let mut broker = start(&dir.path().join("store"), &[("aclEnable", "true"), ("rocketmqHome", home.to_str().unwrap())]).await;
    let grpc_port = free_port();
    let config = proxy::config::ProxyConfig { grpc_server_port: grpc_port, remoting_listen_port: 0, ..Default::default() };
    broker.enable_proxy(config).await.unwrap();
    // Topics made directly in the broker's table (the admin codes need an admin's signature).
    for t in ["GrpcAclOpen", "GrpcAclClosed"] {
        broker.broker.topics.update(&topic(t), remoting::protocol::topic::TopicConfig::new(t)).unwrap();
    }
    let channel = Channel::from_shared(format!("http://127.0.0.1:{grpc_port}")).unwrap().connect().await.unwrap();
    let mut c = MessagingServiceClient::new(channel);

    let signed = |mut request: tonic::Request<pb::SendMessageRequest>, ak: &str, sk: &str| {
        use hmac::{Hmac, KeyInit, Mac};
        let date_time = "20261202T120000Z";
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(sk.as_bytes()).unwrap();
        mac.update(date_time.as_bytes());
        let signature: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02X}")).collect();
        let authorization = format!("MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={signature}");
        request.metadata_mut().insert("x-mq-date-time", date_time.parse().unwrap());
        request.metadata_mut().insert("authorization", authorization.parse().unwrap());
        request
    };
    let send = |topic: &str| as_client(pb::SendMessageRequest { messages: vec![message(topic, "ACL1", b"x", None)] }, "acl-client");

    let r = c.send_message(send("GrpcAclOpen")).await.unwrap().into_inner();
    assert_eq!((code(&r.status), r.status.map(|s| s.message)), (Code::Unauthorized, Some("No accessKey is configured".to_owned())));
    let r = c.send_message(signed(send("GrpcAclOpen"), "GrpcUser", "wrong")).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Unauthorized);
    let r = c.send_message(signed(send("GrpcAclOpen"), "Nobody", "x")).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Unauthorized);
    let r = c.send_message(signed(send("GrpcAclOpen"), "GrpcUser", "12345678")).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Ok, "{r:?}");
    let r = c.send_message(signed(send("GrpcAclClosed"), "GrpcUser", "12345678")).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Unauthorized, "{r:?}");
    assert!(r.status.unwrap().message.contains("GrpcAclClosed"));
    let route = c.query_route(pb::QueryRouteRequest { topic: resource("GrpcAclOpen"), endpoints: endpoints(1) }).await.unwrap().into_inner();
    assert_eq!(code(&route.status), Code::Unauthorized, "every RPC is authenticated first, as Java's pipeline");
    broker.shutdown().await;
}
