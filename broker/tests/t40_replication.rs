//! A master and a slave broker of ours behind one name server, through their sockets: SYNC_MASTER
//! sends answered once the slave holds them (without a thread each), the slave's commit log the
//! master's byte for byte, the slave refusing sends and copying the master's metadata, and a stray
//! client on the HA port unable to acknowledge anything.

use std::sync::Arc;
use std::time::{Duration, Instant};

use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tokio::io::AsyncWriteExt;

mod common;

use common::*;

struct Pair {
    _dirs: Vec<tempfile::TempDir>,
    namesrv: namesrv::NamesrvController,
    master: broker::controller::BrokerController,
    slave: broker::controller::BrokerController,
}

async fn pair(extra_master: &[(&str, &str)]) -> Pair {
    pair_with(extra_master, &[]).await
}

async fn pair_with(extra_master: &[(&str, &str)], extra_slave: &[(&str, &str)]) -> Pair {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let namesrv = start_namesrv(dirs[0].path()).await;
    let ns = namesrv.local_addr().to_string();
    let (master_port, master_ha_port, slave_port, slave_ha_port) = (free_port(), free_port(), free_port(), free_port());
    let (mp, mh, sp, sh) = (master_port.to_string(), master_ha_port.to_string(), slave_port.to_string(), slave_ha_port.to_string());
    let mut master_conf = vec![
        ("namesrvAddr", ns.as_str()),
        ("brokerName", "pair"),
        ("brokerRole", "SYNC_MASTER"),
        ("listenPort", mp.as_str()),
        ("haListenPort", mh.as_str()),
        ("sendMessageThreadPoolNums", "1"),
    ];
    master_conf.extend_from_slice(extra_master);
    let master = start(dirs[1].path(), &master_conf).await;
    let mut slave_conf = vec![
        ("namesrvAddr", ns.as_str()),
        ("brokerName", "pair"),
        ("brokerRole", "SLAVE"),
        ("brokerId", "1"),
        ("listenPort", sp.as_str()),
        ("haListenPort", sh.as_str()),
    ];
    slave_conf.extend_from_slice(extra_slave);
    let slave = start(dirs[2].path(), &slave_conf).await;
    Pair { _dirs: dirs, namesrv, master, slave }
}

impl Pair {
    async fn stop(self) {
        self.slave.shutdown().await;
        self.master.shutdown().await;
        self.namesrv.shutdown().await;
    }
}

/// Every readable commit-log byte of a store, from its first file.
fn commit_log(store: &store::store::MessageStore) -> (i64, Vec<u8>) {
    let (min, max) = (store.commit_log().min_offset(), store.commit_log().max_offset());
    let mut out = Vec::new();
    let mut at = min;
    while at < max {
        let chunk = store.commit_log_data(at, 1 << 20).unwrap();
        at += chunk.len() as i64;
        out.extend(chunk);
    }
    (min, out)
}

async fn until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_master_sends_are_answered_once_the_slave_holds_them_and_the_logs_are_identical() {
    let p = pair(&[]).await;
    let (master_store, slave_store) = (p.master.broker.store.clone(), p.slave.broker.store.clone());
    until("the slave connects to the master's HA port", Duration::from_secs(15), || p.master.broker.ha.replication().is_some_and(|r| !r.slaves().is_empty()))
        .await;
    let addr = p.master.local_addr().to_string();
    let c = Arc::new(RemotingClient::new(ClientConfig::default()));
    // 64 in flight on one send thread: the HA service answers them, no thread waits for each.
    let sends: Vec<_> = (0..64)
        .map(|i| {
            let (c, addr) = (c.clone(), addr.clone());
            tokio::spawn(async move { c.invoke(&addr, send("Replicated", i % 4, &format!("m{i}"), ""), TIMEOUT).await })
        })
        .collect();
    for s in sends {
        let r = s.await.unwrap().unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
        let offset = store::message::decode_offset_message_id(r.ext("msgId").unwrap()).unwrap().1;
        assert!(slave_store.commit_log().max_offset() > offset, "answered before the slave held it");
    }
    let (master_min, master_bytes) = commit_log(&master_store);
    let (slave_min, slave_bytes) = commit_log(&slave_store);
    assert_eq!(slave_min, master_min);
    assert_eq!(slave_bytes, master_bytes, "the slave's commit log is the master's, byte for byte");
    // Both dispatchers, before the queues are compared (the master's can lag on a busy machine too).
    until("both dispatch", Duration::from_secs(10), || slave_store.dispatch_behind_bytes() == 0 && master_store.dispatch_behind_bytes() == 0).await;
    for q in 0..4 {
        assert_eq!(slave_store.max_offset_in_queue("Replicated", q), master_store.max_offset_in_queue("Replicated", q));
    }
    // mqadmin haStatus (5.x): the master lists its slave, the slave its master.
    let slave_addr = p.slave.local_addr().to_string();
    let status = |r: RemotingCommand| serde_json::from_slice::<serde_json::Value>(r.body_bytes()).unwrap();
    let m = status(c.invoke(&addr, RemotingCommand::request(RequestCode::GET_BROKER_HA_STATUS), TIMEOUT).await.unwrap());
    assert_eq!((m["master"].as_bool(), m["inSyncSlaveNums"].as_i64()), (Some(true), Some(1)), "{m}");
    assert_eq!(m["haConnectionInfo"][0]["slaveAckOffset"], m["masterCommitLogMaxOffset"]);
    let s = status(c.invoke(&slave_addr, RemotingCommand::request(RequestCode::GET_BROKER_HA_STATUS), TIMEOUT).await.unwrap());
    assert_eq!((s["master"].as_bool(), s["haClientRuntimeInfo"]["activated"].as_bool()), (Some(false), Some(true)), "{s}");
    // The slave serves the messages and refuses sends, as Java 4.9 does.
    let r = c.invoke(&slave_addr, send("Replicated", 0, "to the slave", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SERVICE_NOT_AVAILABLE, "{:?}", r.remark);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slave_copies_its_masters_topics_groups_and_offsets() {
    let p = pair(&[]).await;
    let c = RemotingClient::new(ClientConfig::default());
    let (master, slave) = (p.master.local_addr().to_string(), p.slave.local_addr().to_string());
    let create = raw(
        RequestCode::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", "Copied"),
            ("defaultTopic", "TBW102"),
            ("readQueueNums", "3"),
            ("writeQueueNums", "3"),
            ("perm", "6"),
            ("topicFilterType", "SINGLE_TAG"),
            ("order", "false"),
        ],
    );
    assert_eq!(c.invoke(&master, create, TIMEOUT).await.unwrap().code, 0);
    let create_group =
        RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(br#"{"groupName":"copied-group","retryMaxTimes":3}"#.to_vec());
    assert_eq!(c.invoke(&master, create_group, TIMEOUT).await.unwrap().code, 0);
    let offset = raw(RequestCode::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", "copied-group"), ("topic", "Copied"), ("queueId", "1"), ("commitOffset", "7")]);
    assert_eq!(c.invoke(&master, offset, TIMEOUT).await.unwrap().code, 0);
    let slave_broker = p.slave.broker.clone();
    until("the slave's metadata sync (every 10 s)", Duration::from_secs(30), || {
        slave_broker.topics.select("Copied").is_some_and(|t| t.read_queue_nums == 3)
            && slave_broker.groups.select("copied-group").is_some_and(|g| g.retry_max_times == 3)
            && slave_broker.offsets.query_offset(&group("copied-group"), &topic("Copied"), 1) == Some(7)
    })
    .await;
    assert_eq!(slave_broker.topics.data_version(), p.master.broker.topics.data_version());
    let r = c.invoke(&slave, raw(RequestCode::GET_TOPIC_CONFIG, &[("topic", "Copied")]), TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slave_signs_its_sync_with_its_credentials_so_an_acl_master_needs_no_white_address() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("conf")).unwrap();
    let acl = "accounts:\n  - accessKey: SlaveSync\n    secretKey: 12345678\n    admin: false\n  - accessKey: RocketMQAdmin\n    secretKey: 87654321\n    admin: true\n";
    std::fs::write(home.path().join("conf/plain_acl.yml"), acl).unwrap();
    let credentials = r#"{"accessKey":"SlaveSync","secretKey":"12345678"}"#;
    let p =
        pair_with(&[("aclEnable", "true"), ("rocketmqHome", home.path().to_str().unwrap())], &[("innerClientAuthenticationCredentials", credentials)]).await;
    let c = RemotingClient::new(ClientConfig::default());
    let master = p.master.local_addr().to_string();
    // Unsigned, the master refuses what the slave asks for.
    let unsigned = c.invoke(&master, RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG), TIMEOUT).await.unwrap();
    assert_eq!(unsigned.remark.as_deref(), Some("org.apache.rocketmq.acl.common.AclException: No accessKey is configured"));
    let mut create = raw(
        RequestCode::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", "CopiedUnderAcl"),
            ("defaultTopic", "TBW102"),
            ("readQueueNums", "3"),
            ("writeQueueNums", "3"),
            ("perm", "6"),
            ("topicFilterType", "SINGLE_TAG"),
            ("order", "false"),
        ],
    );
    broker::acl::Credentials { access_key: "RocketMQAdmin".into(), secret_key: "87654321".into() }.sign(&mut create);
    let r = c.invoke(&master, create, TIMEOUT).await.unwrap();
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let slave_broker = p.slave.broker.clone();
    until("the slave's signed metadata sync (every 10 s)", Duration::from_secs(30), || {
        slave_broker.topics.select("CopiedUnderAcl").is_some_and(|t| t.read_queue_nums == 3)
    })
    .await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stray_client_on_the_ha_port_does_not_make_a_sync_master_send_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let (port, ha_port) = (free_port(), free_port());
    let (port, ha) = (port.to_string(), ha_port.to_string());
    let master =
        start(dir.path(), &[("brokerRole", "SYNC_MASTER"), ("listenPort", port.as_str()), ("haListenPort", ha.as_str()), ("slaveTimeout", "500")]).await;
    let mut stray = tokio::net::TcpStream::connect(("127.0.0.1", ha_port)).await.unwrap();
    stray.write_all(&0i64.to_be_bytes()).await.unwrap();
    let replication = master.broker.ha.replication().unwrap();
    until("the stray client is taken for a slave", Duration::from_secs(10), || !replication.slaves().is_empty()).await;
    let addr = master.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let pending = c.invoke(&addr, send("Guarded", 0, "m", ""), TIMEOUT);
    let claim = async {
        // It never reads, and claims to hold everything.
        tokio::time::sleep(Duration::from_millis(100)).await;
        stray.write_all(&(i64::MAX / 4).to_be_bytes()).await.unwrap();
    };
    let (r, ()) = tokio::join!(pending, claim);
    let r = r.unwrap();
    assert_eq!(r.response_code(), ResponseCode::FLUSH_SLAVE_TIMEOUT, "{:?}", r.remark);
    master.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slave_holding_more_than_its_master_refuses_to_follow_it() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // The future slave's store holds messages its new master never had (the master lost them).
    let old = start(dirs[2].path(), &[("brokerName", "pair")]).await;
    let c = RemotingClient::new(ClientConfig::default());
    for i in 0..10 {
        assert_eq!(c.invoke(&old.local_addr().to_string(), send("Diverged", 0, &format!("m{i}"), ""), TIMEOUT).await.unwrap().code, 0);
    }
    let ahead = old.broker.store.commit_log().max_offset();
    old.shutdown().await;

    let namesrv = start_namesrv(dirs[0].path()).await;
    let ns = namesrv.local_addr().to_string();
    let (mp, mh, sp) = (free_port().to_string(), free_port().to_string(), free_port().to_string());
    let master =
        start(dirs[1].path(), &[("namesrvAddr", ns.as_str()), ("brokerName", "pair"), ("listenPort", mp.as_str()), ("haListenPort", mh.as_str())]).await;
    let slave =
        start(dirs[2].path(), &[("namesrvAddr", ns.as_str()), ("brokerName", "pair"), ("brokerRole", "SLAVE"), ("brokerId", "1"), ("listenPort", sp.as_str())])
            .await;
    // Absence can only be shown by waiting: the slave registered (and checked) at start.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(master.broker.ha.replication().unwrap().slaves().is_empty(), "the slave must not follow a master behind it");
    assert_eq!(slave.broker.ha.slave_client().unwrap().status().master_addr, None);
    assert_eq!(slave.broker.store.commit_log().max_offset(), ahead, "nothing of the slave's log is overwritten");
    slave.shutdown().await;
    master.shutdown().await;
    namesrv.shutdown().await;
}

/// A slave may lag its master, so a consumer can ask it for an offset past its queue end (it read
/// that far from the master) or of a queue it does not hold yet. Java's slave answers "try again"
/// and leaves the offset as asked (`nextOffsetCorrection` without `offsetCheckInSlave`); a
/// corrected offset would send the Java client back to it, here to 0: every message again.
#[tokio::test(flavor = "multi_thread")]
async fn a_slave_answers_an_offset_it_cannot_serve_with_retry_at_the_same_offset() {
    let p = pair(&[]).await;
    let (master_store, slave_store) = (p.master.broker.store.clone(), p.slave.broker.store.clone());
    until("the slave connects to the master's HA port", Duration::from_secs(15), || p.master.broker.ha.replication().is_some_and(|r| !r.slaves().is_empty()))
        .await;
    let c = RemotingClient::new(ClientConfig::default());
    let (master, slave) = (p.master.local_addr().to_string(), p.slave.local_addr().to_string());
    for i in 0..3 {
        let r = c.invoke(&master, send("Lagging", 0, &format!("m{i}"), ""), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    until("both dispatch", Duration::from_secs(10), || {
        slave_store.max_offset_in_queue("Lagging", 0) == 3 && master_store.max_offset_in_queue("Lagging", 0) == 3
    })
    .await;
    let slave_broker = p.slave.broker.clone();
    until("the slave copies the topic", Duration::from_secs(30), || slave_broker.topics.select("Lagging").is_some()).await;
    // (queue, offset asked, code the slave answers): past the end, one past the end, a queue with
    // nothing in it yet.
    let ask = |queue: i32, offset: i64| c.invoke(&slave, pull("Lagging", queue, offset, 0), TIMEOUT);
    for (queue, offset, code) in
        [(0, 7, ResponseCode::PULL_RETRY_IMMEDIATELY), (0, 3, ResponseCode::PULL_NOT_FOUND), (1, 5, ResponseCode::PULL_RETRY_IMMEDIATELY)]
    {
        let r = ask(queue, offset).await.unwrap();
        assert_eq!(r.response_code(), code, "queue {queue} offset {offset}: {:?}", r.remark);
        assert_eq!(r.ext("nextBeginOffset"), Some(offset.to_string().as_str()), "queue {queue} offset {offset}: the slave keeps the offset");
        assert_eq!(r.ext("suggestWhichBrokerId"), Some("0"));
    }
    // The master corrects an offset past its end to its end (Java 4.9.4+ and 5.x).
    let r = c.invoke(&master, pull("Lagging", 0, 7, 0), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::PULL_OFFSET_MOVED);
    p.stop().await;
}

/// Pop's state is in the commit log and the offsets a slave copies, so a slave its operator promotes
/// (restarted on its store as brokerId 0 with a master's role, as Java's master/slave failover is
/// done) brings back each message the old master handed out and was not acked, once and not before
/// its invisible time, and none that was acked.
#[tokio::test(flavor = "multi_thread")]
async fn a_promoted_slave_brings_back_what_its_master_popped_unacked_once_and_nothing_acked() {
    use common::pop::{ack_request, assert_back_once_not_early, pop_until_of};
    let Pair { _dirs: dirs, namesrv, master, slave } = pair(&[]).await;
    let c = RemotingClient::new(ClientConfig::default());
    let addr = master.local_addr().to_string();
    for i in 0..10 {
        let r = c.invoke(&addr, send("PopPromoted", 0, &format!("m{i}"), ""), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    // Long enough that the master stops before it: only the promoted slave revives.
    let invisible_ms = 20_000;
    let popped_at = remoting::clock::now_ms();
    let first = pop_until_of(&c, &addr, "pair", "PopPromoted", 10, invisible_ms, Duration::from_secs(10)).await;
    assert_eq!(first.len(), 10, "{first:?}");
    let (acked, unacked): (Vec<_>, Vec<_>) = first.iter().partition(|p| p.offset % 2 == 0);
    for p in &acked {
        let r = c.invoke(&addr, ack_request("PopPromoted", p), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    let slave_broker = slave.broker.clone();
    until("the slave's copy of the popped offset (3 s, then every 10 s)", Duration::from_secs(20), || {
        slave_broker.offsets.query_offset("pg-c", "PopPromoted", 0) == Some(10)
    })
    .await;
    assert!(remoting::clock::now_ms() < popped_at + invisible_ms - 2_000, "the slave copied the offsets too late for this test");
    // SYNC_MASTER: every checkpoint and ack the master answered is in the slave's commit log.
    master.shutdown().await;
    slave.shutdown().await;
    let ns = namesrv.local_addr().to_string();
    let (port, ha_port) = (free_port().to_string(), free_port().to_string());
    let promoted = start(
        dirs[2].path(),
        &[
            ("namesrvAddr", ns.as_str()),
            ("brokerName", "pair"),
            ("brokerRole", "ASYNC_MASTER"),
            ("brokerId", "0"),
            ("listenPort", port.as_str()),
            ("haListenPort", ha_port.as_str()),
        ],
    )
    .await;
    let addr = promoted.local_addr().to_string();
    assert_back_once_not_early(&c, &addr, "pair", "PopPromoted", &unacked, &acked, popped_at + invisible_ms).await;
    promoted.shutdown().await;
    namesrv.shutdown().await;
}
