//! ACL 1.0 (`aclEnable=true`) through the socket, for the codes whose topic or group an account
//! could reach without its permission: each is refused to an account with no permission on topic
//! `Secret` or group `victimGroup`, and served to an account that has it. Admin codes need an
//! admin's signature even from a white address, and a code no route serves is checked before it
//! is answered REQUEST_CODE_NOT_SUPPORTED.

mod common;

use std::time::{Duration, Instant};

use broker::controller::BrokerController;
use broker::transaction::EndTransactionRequestHeader;
use common::*;
use remoting::client::RemotingClient;
use remoting::protocol::broker::{SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

/// `Attacker`: PUB|SUB on topic Mine and SUB on group myGroup, nothing else. `Owner`: every topic,
/// SUB on every group. `WhiteUser`: not an admin, on a white address (127.0.0.1).
const PLAIN_ACL: &str = "accounts:
  - accessKey: Attacker
    secretKey: 12345678
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - Mine=PUB|SUB
    groupPerms:
      - myGroup=SUB
  - accessKey: OwnerUser
    secretKey: 87654321
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: WhiteUser
    secretKey: 11112222
    whiteRemoteAddress: 127.0.0.1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
  - accessKey: RocketMQAdmin
    secretKey: 99998888
    admin: true
";

const ATTACKER: (&str, &str) = ("Attacker", "12345678");
const OWNER: (&str, &str) = ("OwnerUser", "87654321");
const ADMIN: (&str, &str) = ("RocketMQAdmin", "99998888");
const ACL_EXCEPTION: &str = "org.apache.rocketmq.acl.common.AclException: ";

struct AclBroker {
    _dir: tempfile::TempDir,
    home: std::path::PathBuf,
    broker: BrokerController,
    addr: String,
    client: RemotingClient,
}

async fn acl_broker() -> AclBroker {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("conf")).unwrap();
    std::fs::write(home.join("conf/plain_acl.yml"), PLAIN_ACL).unwrap();
    let broker = start(&dir.path().join("store"), &[("aclEnable", "true"), ("rocketmqHome", home.to_str().unwrap())]).await;
    let addr = broker.local_addr().to_string();
    AclBroker { _dir: dir, home, broker, addr, client: RemotingClient::new(Default::default()) }
}

/// Signs as Java's `AclClientRPCHook`.
fn signed(mut request: RemotingCommand, (access_key, secret_key): (&str, &str)) -> RemotingCommand {
    broker::acl::Credentials { access_key: access_key.into(), secret_key: secret_key.into() }.sign(&mut request);
    request
}

impl AclBroker {
    async fn ask(&self, request: RemotingCommand, who: (&str, &str)) -> RemotingCommand {
        self.client.invoke(&self.addr, signed(request, who), TIMEOUT).await.unwrap()
    }

    /// A message stored by the owner: its commit-log offset and offset message id.
    async fn stored(&self, request: RemotingCommand) -> (i64, String, i64) {
        let r = self.ask(request, OWNER).await;
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let h: SendMessageResponseHeader = r.decode_header().unwrap();
        let (_, offset) = store::message::decode_offset_message_id(&h.msg_id).unwrap();
        (offset, h.msg_id, h.queue_offset)
    }

    async fn stop(self) {
        self.broker.shutdown().await;
    }
}

/// Refused by the route's check: SYSTEM_ERROR with the AclException text, as a 4.9.7 broker.
#[track_caller]
fn refused(r: &RemotingCommand, message: &str) {
    let expected = format!("{ACL_EXCEPTION}{message}");
    assert_eq!((r.code, r.remark.as_deref()), (ResponseCode::SYSTEM_ERROR.0, Some(expected.as_str())));
}

/// Refused once the stored message was read: NO_PERMISSION, the same text.
#[track_caller]
fn refused_stored(r: &RemotingCommand, message: &str) {
    let expected = format!("{ACL_EXCEPTION}{message}");
    assert_eq!((r.code, r.remark.as_deref()), (ResponseCode::NO_PERMISSION.0, Some(expected.as_str())));
}

/// Passed the ACL (whatever the processor then answers).
#[track_caller]
fn passed(r: &RemotingCommand) {
    assert!(!r.remark.as_deref().unwrap_or("").contains("AclException"), "refused by ACL: {:?} {:?}", r.code, r.remark);
}

fn v1_send(topic_name: &str, body: &str) -> RemotingCommand {
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE, &send_header(topic_name, 0, "")).with_body(body.as_bytes().to_vec())
}

fn reply(code: RequestCode, topic_name: &str) -> RemotingCommand {
    let h = send_header(topic_name, 0, "REPLY_TO_CLIENT\u{1}someone\u{2}CLUSTER\u{1}DefaultCluster\u{2}");
    let request = match code {
        RequestCode::SEND_REPLY_MESSAGE => RemotingCommand::request_with_header(code, &h),
        _ => RemotingCommand::request_with_header(code, &SendMessageRequestHeaderV2::from(h)),
    };
    request.with_body(b"reply".to_vec())
}

fn lock_body(code: RequestCode, group_name: &str, topic_name: &str) -> RemotingCommand {
    let body = format!(
        r#"{{"consumerGroup":"{group_name}","clientId":"c1","onlyThisBroker":false,"mqSet":[{{"topic":"{topic_name}","brokerName":"b","queueId":0}}]}}"#
    );
    RemotingCommand::request(code).with_body(body.into_bytes())
}

fn max_offset(topic_name: &str) -> RemotingCommand {
    raw(RequestCode::GET_MAX_OFFSET, &[("topic", topic_name), ("queueId", "0")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_that_name_a_topic_or_group_are_refused_without_its_permission() {
    let b = acl_broker().await;
    // Replies are checked as sends.
    for code in [RequestCode::SEND_REPLY_MESSAGE, RequestCode::SEND_REPLY_MESSAGE_V2] {
        refused(&b.ask(reply(code, "Secret"), ATTACKER).await, "No default permission for topic:Secret");
        passed(&b.ask(reply(code, "Mine"), ATTACKER).await);
        passed(&b.ask(reply(code, "Secret"), OWNER).await);
    }
    // A retry topic is its group's: V1 without a `group` field, V2 naming the sender's own group.
    refused(&b.ask(v1_send("%RETRY%victimGroup", "x"), ATTACKER).await, "No default permission for group:victimGroup");
    let v2 = send_request(SendMessageRequestHeader { producer_group: "myGroup".into(), ..send_header("%RETRY%victimGroup", 0, "") }, "x");
    refused(&b.ask(v2, ATTACKER).await, "No default permission for group:victimGroup");
    passed(&b.ask(send("%RETRY%myGroup", 0, "mine", ""), ATTACKER).await);
    refused(&b.ask(send("Secret", 0, "x", ""), ATTACKER).await, "No default permission for topic:Secret");
    let (secret_offset, secret_id, _) = b.stored(send("Secret", 0, "the secret", "")).await;
    let r = b.ask(send("Mine", 0, "mine", ""), ATTACKER).await;
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let mine_id = r.decode_header::<SendMessageResponseHeader>().unwrap().msg_id;
    let (_, mine_offset) = store::message::decode_offset_message_id(&mine_id).unwrap();

    // VIEW_MESSAGE_BY_ID: the stored message's topic, whatever the header says (5.x's `topic`).
    let view = |offset: i64, topic_name: Option<&str>| {
        let offset = offset.to_string();
        let mut fields = vec![("offset", offset.as_str())];
        fields.extend(topic_name.map(|t| ("topic", t)));
        raw(RequestCode::VIEW_MESSAGE_BY_ID, &fields)
    };
    refused_stored(&b.ask(view(secret_offset, None), ATTACKER).await, "No default permission for topic:Secret");
    refused_stored(&b.ask(view(secret_offset, Some("Mine")), ATTACKER).await, "No default permission for topic:Secret");
    refused(&b.ask(view(secret_offset, Some("Secret")), ATTACKER).await, "No default permission for topic:Secret");
    let r = b.ask(view(mine_offset, None), ATTACKER).await;
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let r = b.ask(view(secret_offset, None), OWNER).await;
    assert!(r.code == 0 && r.body_bytes().windows(10).any(|w| w == b"the secret"), "{:?}", r.remark);

    // CONSUMER_SEND_MSG_BACK: another topic's message into one's own retry topic.
    let back = |offset: i64, group_name: &str| {
        let offset = offset.to_string();
        raw(RequestCode::CONSUMER_SEND_MSG_BACK, &[("offset", offset.as_str()), ("group", group_name), ("delayLevel", "-1"), ("maxReconsumeTimes", "16")])
    };
    let log_end = b.broker.broker.store.commit_log().max_offset();
    refused_stored(&b.ask(back(secret_offset, "myGroup"), ATTACKER).await, "No default permission for topic:Secret");
    refused(&b.ask(back(mine_offset, "victimGroup"), ATTACKER).await, "No default permission for group:victimGroup");
    assert_eq!(b.broker.broker.store.commit_log().max_offset(), log_end, "nothing was copied");
    let r = b.ask(back(mine_offset, "myGroup"), ATTACKER).await;
    assert_eq!(r.code, 0, "{:?}", r.remark);

    // CONSUME_MESSAGE_DIRECTLY: the message named by its id.
    let direct = |id: &str, group_name: &str| raw(RequestCode::CONSUME_MESSAGE_DIRECTLY, &[("consumerGroup", group_name), ("clientId", "c1"), ("msgId", id)]);
    refused_stored(&b.ask(direct(&secret_id, "myGroup"), ATTACKER).await, "No default permission for topic:Secret");
    refused(&b.ask(direct(&mine_id, "victimGroup"), ATTACKER).await, "No default permission for group:victimGroup");
    passed(&b.ask(direct(&mine_id, "myGroup"), ATTACKER).await);

    // QUERY_CONSUME_QUEUE: the topic and the group.
    let cq = |topic_name: &str, group_name: &str| {
        raw(RequestCode::QUERY_CONSUME_QUEUE, &[("topic", topic_name), ("queueId", "0"), ("index", "0"), ("count", "10"), ("consumerGroup", group_name)])
    };
    refused(&b.ask(cq("Secret", "myGroup"), ATTACKER).await, "No default permission for topic:Secret");
    refused(&b.ask(cq("Mine", "victimGroup"), ATTACKER).await, "No default permission for group:victimGroup");
    assert_eq!(b.ask(cq("Mine", "myGroup"), ATTACKER).await.code, 0);

    // LOCK_BATCH_MQ / UNLOCK_BATCH_MQ: the body's group and queues.
    for code in [RequestCode::LOCK_BATCH_MQ, RequestCode::UNLOCK_BATCH_MQ] {
        refused(&b.ask(lock_body(code, "victimGroup", "Mine"), ATTACKER).await, "No default permission for group:victimGroup");
        refused(&b.ask(lock_body(code, "myGroup", "Secret"), ATTACKER).await, "No default permission for topic:Secret");
        assert_eq!(b.ask(lock_body(code, "myGroup", "Mine"), ATTACKER).await.code, 0);
    }

    // UNREGISTER_CLIENT: the consumer group and the producer group.
    let unregister = |field: &str, group_name: &str| raw(RequestCode::UNREGISTER_CLIENT, &[("clientID", "c1"), (field, group_name)]);
    refused(&b.ask(unregister("consumerGroup", "victimGroup"), ATTACKER).await, "No default permission for group:victimGroup");
    refused(&b.ask(unregister("producerGroup", "victimGroup"), ATTACKER).await, "No default permission for group:victimGroup");
    assert_eq!(b.ask(unregister("consumerGroup", "myGroup"), ATTACKER).await.code, 0);
    assert_eq!(b.ask(unregister("producerGroup", "myGroup"), ATTACKER).await.code, 0);

    // 5.x pop: the group and the topic, and each ack of a batch.
    let pop = |group_name: &str, topic_name: &str| {
        let fields = [("consumerGroup", group_name), ("topic", topic_name), ("queueId", "-1"), ("maxMsgNums", "1"), ("invisibleTime", "60000")];
        raw(RequestCode::POP_MESSAGE, &[&fields[..], &[("pollTime", "0"), ("bornTime", "1"), ("initMode", "0")]].concat())
    };
    refused(&b.ask(pop("myGroup", "Secret"), ATTACKER).await, "No default permission for topic:Secret");
    refused(&b.ask(pop("victimGroup", "Mine"), ATTACKER).await, "No default permission for group:victimGroup");
    passed(&b.ask(pop("myGroup", "Mine"), ATTACKER).await);
    let ack = |code: RequestCode, topic_name: &str| {
        let fields = [("consumerGroup", "myGroup"), ("topic", topic_name), ("queueId", "0"), ("extraInfo", "0 0 0 0 0 b 0 0"), ("offset", "0")];
        raw(code, &[&fields[..], &[("invisibleTime", "1000")]].concat())
    };
    refused(&b.ask(ack(RequestCode::ACK_MESSAGE, "Secret"), ATTACKER).await, "No default permission for topic:Secret");
    refused(&b.ask(ack(RequestCode::CHANGE_MESSAGE_INVISIBLETIME, "Secret"), ATTACKER).await, "No default permission for topic:Secret");
    let batch = br#"{"acks":[{"c":"victimGroup","t":"Mine","so":0,"q":0,"rq":0,"pt":1,"it":1,"b":"AQ=="}]}"#;
    refused(
        &b.ask(RemotingCommand::request(RequestCode::BATCH_ACK_MESSAGE).with_body(batch.to_vec()), ATTACKER).await,
        "No default permission for group:victimGroup",
    );

    // QUERY_CONSUMER_OFFSET: the group and the topic.
    let offset =
        |group_name: &str, topic_name: &str| raw(RequestCode::QUERY_CONSUMER_OFFSET, &[("consumerGroup", group_name), ("topic", topic_name), ("queueId", "0")]);
    refused(&b.ask(offset("victimGroup", "Mine"), ATTACKER).await, "No default permission for group:victimGroup");
    refused(&b.ask(offset("myGroup", "Secret"), ATTACKER).await, "No default permission for topic:Secret");
    passed(&b.ask(offset("myGroup", "Mine"), ATTACKER).await);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_transaction_needs_pub_on_the_topic_of_the_half_message_it_ends() {
    let b = acl_broker().await;
    let props = "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}txg\u{2}UNIQ_KEY\u{1}u1\u{2}";
    let half = send_request(SendMessageRequestHeader { producer_group: "txg".into(), sys_flag: 0x4, ..send_header("Secret", 0, props) }, "half");
    let (half_offset, half_id, half_queue_offset) = b.stored(half).await;
    let end = |topic_name: Option<&str>| {
        let h = EndTransactionRequestHeader {
            producer_group: "txg".into(),
            tran_state_table_offset: half_queue_offset,
            commit_log_offset: half_offset,
            commit_or_rollback: 8,
            from_transaction_check: Some(false),
            msg_id: half_id.clone(),
            transaction_id: None,
        };
        let mut r = RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &h);
        if let Some(t) = topic_name {
            r.ext_fields.get_or_insert_with(Default::default).insert("topic".into(), t.into());
        }
        r
    };
    // The attacker cannot commit it, whatever topic its 5.x header names.
    refused_stored(&b.ask(end(None), ATTACKER).await, "No default permission for topic:Secret");
    refused_stored(&b.ask(end(Some("Mine")), ATTACKER).await, "No default permission for topic:Secret");
    refused(&b.ask(end(Some("Secret")), ATTACKER).await, "No default permission for topic:Secret");
    let max = b.ask(max_offset("Secret"), OWNER).await;
    assert_eq!(max.ext_fields.as_ref().and_then(|e| e.get("offset")), Some("0"), "nothing was committed");
    // Its producer can.
    let r = b.ask(end(Some("Secret")), OWNER).await;
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let max = b.ask(max_offset("Secret"), OWNER).await;
        if max.ext_fields.as_ref().and_then(|e| e.get("offset")) == Some("1") {
            break;
        }
        assert!(Instant::now() < deadline, "the commit never reached Secret");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_codes_need_an_admins_signature_even_from_a_white_address() {
    let b = acl_broker().await;
    let white_wrong = ("WhiteUser", "not-the-secret");
    // The account's white address still lets its ordinary requests through unsigned.
    passed(&b.ask(send("Anything", 0, "x", ""), white_wrong).await);
    // Not the admin codes: the ACL config (every secret key) nor a new admin account.
    let get_config = RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_ACL_CONFIG);
    refused(&b.ask(get_config.clone(), white_wrong).await, "Check signature failed for accessKey=WhiteUser");
    let create = raw(
        RequestCode::UPDATE_AND_CREATE_ACL_CONFIG,
        &[("accessKey", "Intruder1"), ("secretKey", "12345678"), ("admin", "true"), ("defaultTopicPerm", "PUB|SUB"), ("defaultGroupPerm", "SUB")],
    );
    refused(&b.ask(create.clone(), white_wrong).await, "Check signature failed for accessKey=WhiteUser");
    refused(&b.ask(get_config.clone(), ("WhiteUser", "11112222")).await, "Need admin permission for request code=54, but accessKey=WhiteUser is not");
    assert!(!std::fs::read_to_string(b.home.join("conf/plain_acl.yml")).unwrap().contains("Intruder1"));
    // Global white addresses too.
    std::fs::write(b.home.join("conf/plain_acl.yml"), format!("globalWhiteRemoteAddresses:\n  - 127.0.0.1\n{PLAIN_ACL}")).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while b.client.invoke(&b.addr, RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO), TIMEOUT).await.unwrap().code != 0 {
        assert!(Instant::now() < deadline, "the global white address never took effect");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let unsigned = b.client.invoke(&b.addr, get_config.clone(), TIMEOUT).await.unwrap();
    refused(&unsigned, "No accessKey is configured");
    refused(&b.ask(get_config.clone(), white_wrong).await, "Check signature failed for accessKey=WhiteUser");
    refused(&b.ask(create.clone(), ("RocketMQAdmin", "wrong-secret")).await, "Check signature failed for accessKey=RocketMQAdmin");
    // An admin's signature works from anywhere.
    let r = b.ask(get_config, ADMIN).await;
    assert_eq!(r.code, 0, "{:?}", r.remark);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_code_is_checked_before_it_is_answered_not_supported() {
    let b = acl_broker().await;
    for code in [RequestCode(3_001), RequestCode(99_999)] {
        let unsigned = b.client.invoke(&b.addr, RemotingCommand::request(code), TIMEOUT).await.unwrap();
        refused(&unsigned, "No accessKey is configured");
        refused(&b.ask(RemotingCommand::request(code), ("Attacker", "wrong-secret")).await, "Check signature failed for accessKey=Attacker");
        let r = b.ask(RemotingCommand::request(code), ATTACKER).await;
        assert_eq!(r.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0, "{:?}", r.remark);
    }
    b.stop().await;
}
