//! 5.x server-side load balancing and the metadata reads of pop consumers, through the broker's
//! socket behind a name server of ours: topic attributes (UPDATE_AND_CREATE_TOPIC, GET_TOPIC_CONFIG),
//! GET_SUBSCRIPTIONGROUP_CONFIG, SET_MESSAGE_REQUEST_MODE kept across a restart
//! (`config/messageRequestMode.json`, GET_ALL_MESSAGE_REQUEST_MODE), and QUERY_ASSIGNMENT for the
//! group's live consumers. The answers were compared with Java 5.3.3's by
//! `compat-tests/java/.../broker/PopAssignmentTest`.

use std::time::{Duration, Instant};

use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

mod common;

use common::*;

fn create_topic(name: &str, attributes: &str) -> RemotingCommand {
    let mut fields = vec![
        ("topic", name),
        ("defaultTopic", "TBW102"),
        ("readQueueNums", "4"),
        ("writeQueueNums", "4"),
        ("perm", "6"),
        ("topicFilterType", "SINGLE_TAG"),
        ("order", "false"),
    ];
    if !attributes.is_empty() {
        fields.push(("attributes", attributes));
    }
    raw(RequestCode::UPDATE_AND_CREATE_TOPIC, &fields)
}

fn body(r: &RemotingCommand) -> String {
    String::from_utf8_lossy(r.body_bytes()).into_owned()
}

fn heartbeat(client_id: &str) -> RemotingCommand {
    let data = format!(
        r#"{{"clientID":"{client_id}","consumerDataSet":[{{"groupName":"PopG","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{{"topic":"PopT","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG"}}],"unitMode":false}}],"producerDataSet":[]}}"#
    );
    RemotingCommand::request(RequestCode::HEART_BEAT).with_body(data.into_bytes())
}

fn query(client_id: &str, strategy: &str, model: &str) -> RemotingCommand {
    let body = format!(r#"{{"clientId":"{client_id}","consumerGroup":"PopG","messageModel":"{model}","strategyName":"{strategy}","topic":"PopT"}}"#);
    RemotingCommand::request(RequestCode::QUERY_ASSIGNMENT).with_body(body.into_bytes())
}

fn set_mode(topic: &str, mode: &str, share: i32) -> RemotingCommand {
    let body = format!(r#"{{"consumerGroup":"PopG","mode":"{mode}","popShareQueueNum":{share},"topic":"{topic}"}}"#);
    RemotingCommand::request(RequestCode::SET_MESSAGE_REQUEST_MODE).with_body(body.into_bytes())
}

/// The queue ids of an assignment answer, with its mode.
fn assigned(r: &RemotingCommand) -> Vec<(i32, String)> {
    let v: serde_json::Value = serde_json::from_slice(r.body_bytes()).unwrap();
    let mut got: Vec<(i32, String)> = v["messageQueueAssignments"]
        .as_array()
        .map(|a| a.iter().map(|x| (x["messageQueue"]["queueId"].as_i64().unwrap() as i32, x["mode"].as_str().unwrap().to_owned())).collect())
        .unwrap_or_default();
    got.sort();
    got
}

fn pull_mode(ids: &[i32]) -> Vec<(i32, String)> {
    ids.iter().map(|i| (*i, "PULL".to_owned())).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn attributes_modes_and_assignments_as_java_5_answers_them() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let namesrv = start_namesrv(dirs[0].path()).await;
    let ns = namesrv.local_addr().to_string();
    let port = free_port().to_string();
    let conf = [("namesrvAddr", ns.as_str()), ("brokerName", "pop-b"), ("listenPort", port.as_str())];
    let broker = start(dirs[1].path(), &conf).await;
    let addr = broker.local_addr().to_string();
    let (admin, one, two) =
        (RemotingClient::new(ClientConfig::default()), RemotingClient::new(ClientConfig::default()), RemotingClient::new(ClientConfig::default()));

    // Attributes: created with additions only, known keys and values, as Java refuses them.
    let refused = [
        ("+colour=red", "unsupported key: colour"),
        ("-message.type", "only add attribute is supported while creating topic. key: message.type"),
        ("+message.type=FAST", "value is not in set: [UNSPECIFIED, TRANSACTION, FIFO, MIXED, DELAY, NORMAL]"),
    ];
    for (attributes, remark) in refused {
        let r = admin.invoke(&addr, create_topic("PopT", attributes), TIMEOUT).await.unwrap();
        assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some(remark)), "{attributes}");
    }
    let r = admin.invoke(&addr, create_topic("PopT", "+message.type=MIXED"), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::INVALID_PARAMETER, Some("MIXED message type is not supported.")));
    let r = admin.invoke(&addr, create_topic("PopT", "+message.type=FIFO"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let r = admin.invoke(&addr, raw(RequestCode::GET_TOPIC_CONFIG, &[("topic", "PopT")]), TIMEOUT).await.unwrap();
    assert_eq!(
        body(&r),
        r#"{"attributes":{"message.type":"FIFO"},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"PopT","topicSysFlag":0,"writeQueueNums":4}"#
    );
    let r = admin.invoke(&addr, raw(RequestCode::GET_TOPIC_CONFIG, &[("topic", "Nope")]), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::TOPIC_NOT_EXIST, Some("No topic in this broker. topic: Nope")));
    let r = admin.invoke(&addr, raw(RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG, &[("group", "PopG")]), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    assert!(body(&r).starts_with(r#"{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true"#), "{}", body(&r));

    // Modes: refused for a retry or unknown topic, kept in config/messageRequestMode.json.
    let r = admin.invoke(&addr, set_mode("%RETRY%PopG", "POP", 1), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::NO_PERMISSION, Some("retry topic is not allowed to set mode")));
    let r = admin.invoke(&addr, set_mode("Nope", "POP", 1), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::TOPIC_NOT_EXIST, Some("topic[Nope] not exist")));

    // Two live consumers of the group, on their own connections.
    for (client, id) in [(&one, "client-1"), (&two, "client-2")] {
        let r = client.invoke(&addr, heartbeat(id), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    // The route comes from the name server: wait for the registration of the new topic.
    let deadline = Instant::now() + TIMEOUT;
    let first = loop {
        let r = admin.invoke(&addr, query("client-1", "AVG", "CLUSTERING"), TIMEOUT).await.unwrap();
        if !assigned(&r).is_empty() || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(assigned(&first), pull_mode(&[0, 1]), "{}", body(&first));
    let r = admin.invoke(&addr, query("client-2", "AVG_BY_CIRCLE", "CLUSTERING"), TIMEOUT).await.unwrap();
    assert_eq!(assigned(&r), pull_mode(&[1, 3]));
    let r = admin.invoke(&addr, query("client-2", "AVG", "BROADCASTING"), TIMEOUT).await.unwrap();
    assert_eq!(assigned(&r), pull_mode(&[0, 1, 2, 3]));
    for unanswered in [query("client-1", "CONSISTENT_HASH", "CLUSTERING"), query("stranger", "AVG", "CLUSTERING")] {
        let r = admin.invoke(&addr, unanswered, TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS);
        assert!(body(&r) == "{}" || body(&r) == r#"{"messageQueueAssignments":[]}"#, "{}", body(&r));
    }

    // POP with 8 to share, with one other client: every queue, as queue -1 of the broker.
    let r = admin.invoke(&addr, set_mode("PopT", "POP", 8), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let r = admin.invoke(&addr, query("client-1", "AVG", "CLUSTERING"), TIMEOUT).await.unwrap();
    assert_eq!(body(&r), r#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"pop-b","queueId":-1,"topic":"PopT"},"mode":"POP"}]}"#);

    // The mode survives a restart.
    broker.shutdown().await;
    let broker = start(dirs[1].path(), &conf).await;
    let addr = broker.local_addr().to_string();
    let r = admin.invoke(&addr, RemotingCommand::request(RequestCode::GET_ALL_MESSAGE_REQUEST_MODE), TIMEOUT).await.unwrap();
    assert_eq!(body(&r), r#"{"messageRequestModeMap":{"PopT":{"PopG":{"consumerGroup":"PopG","mode":"POP","popShareQueueNum":8,"topic":"PopT"}}}}"#);
    let file = std::fs::read_to_string(dirs[1].path().join("config/messageRequestMode.json")).unwrap();
    assert!(file.contains("\"popShareQueueNum\":8"), "{file}");
    // Updating the topic keeps its attributes, and a change follows Java's rules.
    let r = admin.invoke(&addr, create_topic("PopT", "+queue.type=BatchCQ"), TIMEOUT).await.unwrap();
    assert_eq!(r.remark.as_deref(), Some("attempt to update an unchangeable attribute. key: queue.type"));
    let r = admin.invoke(&addr, create_topic("PopT", "-message.type"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let r = admin.invoke(&addr, raw(RequestCode::GET_TOPIC_CONFIG, &[("topic", "PopT")]), TIMEOUT).await.unwrap();
    assert!(body(&r).starts_with(r#"{"attributes":{},"#), "{}", body(&r));
    // The batch create applies the same rules to each topic's attribute changes.
    let list = r#"{"topicConfigList":[{"topicName":"BatchT","readQueueNums":2,"writeQueueNums":2,"perm":6,"attributes":{"+message.type":"DELAY"}}]}"#;
    let r =
        admin.invoke(&addr, RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC_LIST).with_body(list.as_bytes().to_vec()), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let r = admin.invoke(&addr, raw(RequestCode::GET_TOPIC_CONFIG, &[("topic", "BatchT")]), TIMEOUT).await.unwrap();
    assert!(body(&r).starts_with(r#"{"attributes":{"message.type":"DELAY"},"#), "{}", body(&r));
    let list = list.replace("BatchT", "BatchU").replace("+message.type", "+colour");
    let r = admin.invoke(&addr, RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC_LIST).with_body(list.into_bytes()), TIMEOUT).await.unwrap();
    assert_eq!((r.response_code(), r.remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("unsupported key: colour")));
    broker.shutdown().await;
    namesrv.shutdown().await;
}
