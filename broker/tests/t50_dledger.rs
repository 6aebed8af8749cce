//! Our brokers in DLedger mode (`enableDLegerCommitLog=true`), through their sockets: a group of
//! three elects a leader that becomes the master (brokerId 0) while the others are slaves; sends
//! are answered once a quorum holds them, with the queue offsets and ids the leader stamped; every
//! node's consume queues agree with the committed log; a stopped leader is replaced and the new
//! master continues the queues; and a plain store is upgraded as Java upgrades it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::controller::BrokerController;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use store::config::BrokerRole;

mod common;

use common::*;

async fn until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Group {
    dirs: Vec<tempfile::TempDir>,
    peers: String,
    ports: Vec<u16>,
    namesrv: namesrv::NamesrvController,
    nodes: Vec<Option<BrokerController>>,
}

fn node_conf<'a>(dir: &'a Path, ns: &'a str, peers: &'a str, self_id: &'a str, port: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("namesrvAddr", ns),
        ("brokerName", "raft"),
        ("listenPort", port),
        ("enableDLegerCommitLog", "true"),
        ("dLegerGroup", "raft"),
        ("dLegerPeers", peers),
        ("dLegerSelfId", self_id),
        ("sendMessageThreadPoolNums", "2"),
        ("storePathRootDir", dir.to_str().unwrap()),
    ]
}

impl Group {
    async fn start(n: usize) -> Group {
        let dirs: Vec<tempfile::TempDir> = (0..=n).map(|_| tempfile::tempdir().unwrap()).collect();
        let namesrv = start_namesrv(dirs[n].path()).await;
        let peers = (0..n).map(|i| format!("n{i}-127.0.0.1:{}", free_port())).collect::<Vec<_>>().join(";");
        let ports = (0..n).map(|_| free_port()).collect();
        let mut g = Group { dirs, peers, ports, namesrv, nodes: Vec::new() };
        for i in 0..n {
            let node = g.start_node(i).await;
            g.nodes.push(Some(node));
        }
        g
    }

    async fn start_node(&self, i: usize) -> BrokerController {
        let ns = self.namesrv.local_addr().to_string();
        let port = self.ports[i].to_string();
        let self_id = format!("n{i}");
        start(self.dirs[i].path(), &node_conf(self.dirs[i].path(), &ns, &self.peers, &self_id, &port)).await
    }

    fn node(&self, i: usize) -> &BrokerController {
        self.nodes[i].as_ref().unwrap()
    }

    /// The node that is the master, once exactly one live node is.
    async fn master(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let masters: Vec<usize> = (0..self.nodes.len())
                .filter(|i| self.nodes[*i].as_ref().is_some_and(|n| n.broker.broker_id() == 0 && n.broker.store.role() == BrokerRole::SyncMaster))
                .collect();
            if masters.len() == 1 {
                return masters[0];
            }
            assert!(Instant::now() < deadline, "no single master: {masters:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn addr(&self, i: usize) -> String {
        self.node(i).local_addr().to_string()
    }

    async fn stop(mut self) {
        for node in self.nodes.drain(..).flatten() {
            node.shutdown().await;
        }
        self.namesrv.shutdown().await;
    }
}

fn msg_offset(r: &RemotingCommand) -> i64 {
    store::message::decode_offset_message_id(r.ext("msgId").unwrap()).unwrap().1
}

/// Each node's units of a queue: (physical offset, size).
fn units(b: &BrokerController, topic_name: &str, queue: i32) -> Vec<(i64, i32)> {
    let Some(cq) = b.broker.store.find_queue(topic_name, queue) else { return Vec::new() };
    (cq.min_offset()..cq.max_offset()).map(|i| cq.get(i).map(|u| (u.phy_offset, u.size)).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_of_three_has_one_master_and_answers_sends_once_a_quorum_holds_them() {
    let g = Group::start(3).await;
    let m = g.master().await;
    let c = Arc::new(RemotingClient::new(ClientConfig::default()));
    let addr = g.addr(m);
    let sends: Vec<_> = (0..60)
        .map(|i| {
            let (c, addr) = (c.clone(), addr.clone());
            tokio::spawn(async move { c.invoke(&addr, send("Raft", i % 3, &format!("m{i}"), ""), TIMEOUT).await.unwrap() })
        })
        .collect();
    let mut by_queue: Vec<Vec<i64>> = vec![Vec::new(); 3];
    let mut first_of_queue_1 = String::new();
    for (i, s) in sends.into_iter().enumerate() {
        let r = s.await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
        let queue_offset: i64 = r.ext("queueOffset").unwrap().parse().unwrap();
        by_queue[i % 3].push(queue_offset);
        if i % 3 == 1 && queue_offset == 0 {
            first_of_queue_1 = format!("m{i}");
        }
        // The id names the record: entry pos + 48, where the record says it is.
        let record = g.node(m).broker.store.look_message_by_offset(msg_offset(&r)).unwrap();
        let Ok(store::message::record::RecordAt::Record(rec)) = store::message::record::decode_record(&record, true) else { panic!() };
        assert_eq!((rec.physical_offset, rec.queue_offset, rec.body), (msg_offset(&r), queue_offset, format!("m{i}").as_bytes()));
    }
    for offsets in &mut by_queue {
        offsets.sort();
        assert_eq!(*offsets, (0..20).collect::<Vec<i64>>(), "dense queue offsets");
    }
    let found = pull_found(&c, &addr, "Raft", 1, 0).await;
    assert_eq!(bodies(&found)[0].1, first_of_queue_1);
    // The slaves refuse sends, and hold the same queues once they learn the commit.
    for i in (0..3).filter(|i| *i != m) {
        let r = c.invoke(&g.addr(i), send("Raft", 0, "to a slave", ""), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SERVICE_NOT_AVAILABLE, "{:?}", r.remark);
        assert_eq!(g.node(i).broker.broker_id(), i as i64 + 1, "n{i} registers as brokerId {}", i + 1);
    }
    let master_units: Vec<_> = (0..3).map(|q| units(g.node(m), "Raft", q)).collect();
    for i in 0..3 {
        let node = g.node(i);
        until("every node dispatches the committed log", Duration::from_secs(15), || (0..3).all(|q| units(node, "Raft", q) == master_units[q as usize])).await;
    }
    // The name server routes to the master as brokerId 0.
    let route = c.invoke(&g.namesrv.local_addr().to_string(), raw(RequestCode::GET_ROUTEINFO_BY_TOPIC, &[("topic", "Raft")]), TIMEOUT).await.unwrap();
    let route: serde_json::Value = serde_json::from_slice(route.body_bytes()).unwrap();
    assert_eq!(route["brokerDatas"][0]["brokerAddrs"]["0"].as_str(), Some(addr.as_str()), "{route}");
    // GET_BROKER_CONFIG shows the id and role the broker has now.
    let config = c.invoke(&addr, RemotingCommand::request(RequestCode::GET_BROKER_CONFIG), TIMEOUT).await.unwrap();
    let text = String::from_utf8_lossy(config.body_bytes()).into_owned();
    assert!(text.contains("\nbrokerId=0\n") && text.contains("\nbrokerRole=SYNC_MASTER\n"), "{text}");
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_leader_is_replaced_and_the_new_master_continues_the_queues() {
    let mut g = Group::start(3).await;
    let old = g.master().await;
    let c = RemotingClient::new(ClientConfig::default());
    for i in 0..10 {
        let r = c.invoke(&g.addr(old), send("Failover", 0, &format!("before{i}"), ""), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    g.nodes[old].take().unwrap().shutdown().await;
    let new = g.master().await;
    assert_ne!(new, old);
    let r = c.invoke(&g.addr(new), send("Failover", 0, "after", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.ext("queueOffset"), Some("10"), "the new master continues the queue");
    // The answer comes at the commit; the dispatcher builds the queue right after.
    let new_master = g.node(new);
    until("the new master dispatches its first message", Duration::from_secs(10), || new_master.broker.store.max_offset_in_queue("Failover", 0) == 11).await;
    let all = pull_found(&c, &g.addr(new), "Failover", 0, 0).await;
    let got: Vec<String> = bodies(&all).into_iter().map(|b| b.1).collect();
    assert_eq!(got.len(), 11, "{got:?}");
    assert_eq!(got[10], "after");
    // The old leader rejoins as a slave and catches up.
    let back = g.start_node(old).await;
    g.nodes[old] = Some(back);
    let rejoined = g.node(old);
    until("the old leader rejoins as a slave with every message", Duration::from_secs(30), || {
        rejoined.broker.store.role() == BrokerRole::Slave && rejoined.broker.store.max_offset_in_queue("Failover", 0) == 11
    })
    .await;
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plain_store_is_upgraded_to_dledger_as_java_upgrades_it() {
    let dir = tempfile::tempdir().unwrap();
    let ns_dir = tempfile::tempdir().unwrap();
    let namesrv = start_namesrv(ns_dir.path()).await;
    let ns = namesrv.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    // A plain broker writes more than one 4 MiB file (with keys, found later by the index).
    let plain = start(dir.path(), &[("namesrvAddr", ns.as_str()), ("brokerName", "up")]).await;
    let body = "x".repeat(4000);
    for i in 0..1500 {
        let r = c.invoke(&plain.local_addr().to_string(), send("Old", i % 2, &body, &format!("KEYS\u{1}old{i}")), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    let old_end = plain.broker.store.max_phy_offset();
    plain.shutdown().await;
    let file_size = 4 * 1024 * 1024;
    let divided = (old_end / file_size + 1) * file_size;
    assert!(old_end > file_size, "several files");

    let peers = format!("n0-127.0.0.1:{}", free_port());
    let port = free_port().to_string();
    let conf = node_conf(dir.path(), &ns, &peers, "n0", &port);
    let upgraded = start(dir.path(), &conf).await;
    assert_eq!(upgraded.broker.store.divided_offset(), divided, "DLedger starts at the end of the old last file");
    let first_data = dir.path().join("dledger-n0/data").join(format!("{divided:020}"));
    assert!(first_data.exists(), "{} exists", first_data.display());
    // The old last file ends with a blank marker where the old data ended.
    let last_old = std::fs::read(dir.path().join("commitlog").join(format!("{:020}", (old_end / file_size) * file_size))).unwrap();
    let at = (old_end % file_size) as usize;
    assert_eq!(&last_old[at + 4..at + 8], &store::message::record::MAGIC_BLANK.to_be_bytes());
    assert_eq!(i32::from_be_bytes(last_old[at..at + 4].try_into().unwrap()) as i64, file_size - old_end % file_size);

    let addr = upgraded.local_addr().to_string();
    until("the single member leads", Duration::from_secs(20), || upgraded.broker.store.role() == BrokerRole::SyncMaster).await;
    let r = c.invoke(&addr, send("Old", 0, "new", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.ext("queueOffset"), Some("750"), "the queue continues");
    assert!(msg_offset(&r) >= divided + 48, "new messages are DLedger entries");
    // Old messages are pulled and found by key.
    let first = pull_found(&c, &addr, "Old", 0, 0).await;
    assert_eq!(bodies(&first)[0].1, body);
    let last = pull_found(&c, &addr, "Old", 0, 750).await;
    assert_eq!(bodies(&last)[0].1, "new");
    let query = raw(
        RequestCode::QUERY_MESSAGE,
        &[("topic", "Old"), ("key", "old1499"), ("maxNum", "32"), ("beginTimestamp", "0"), ("endTimestamp", &i64::MAX.to_string())],
    );
    let found = c.invoke(&addr, query, TIMEOUT).await.unwrap();
    assert_eq!(found.response_code(), ResponseCode::SUCCESS, "{:?}", found.remark);
    assert_eq!(bodies(&found).len(), 1);
    upgraded.shutdown().await;
    // A restart keeps the divided offset and everything.
    let again = start(dir.path(), &conf).await;
    assert_eq!(again.broker.store.divided_offset(), divided);
    until("the member leads again", Duration::from_secs(20), || again.broker.store.role() == BrokerRole::SyncMaster).await;
    assert_eq!(again.broker.store.max_offset_in_queue("Old", 0), 751);
    let addr = again.local_addr().to_string();
    let last = pull_found(&c, &addr, "Old", 0, 750).await;
    assert_eq!(bodies(&last)[0].1, "new");
    again.shutdown().await;
    namesrv.shutdown().await;
}

/// Copies a directory tree as it is now (a running broker's files: what a kill -9 leaves).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.file_name() != "lock" {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_crash_the_index_is_rebuilt_from_the_dledger_data() {
    let dir = tempfile::tempdir().unwrap();
    let ns_dir = tempfile::tempdir().unwrap();
    let namesrv = start_namesrv(ns_dir.path()).await;
    let ns = namesrv.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let peers = format!("n0-127.0.0.1:{}", free_port());
    let port = free_port().to_string();
    let running = start(dir.path(), &node_conf(dir.path(), &ns, &peers, "n0", &port)).await;
    until("the single member leads", Duration::from_secs(20), || running.broker.store.role() == BrokerRole::SyncMaster).await;
    let addr = running.local_addr().to_string();
    for i in 0..50 {
        let r = c.invoke(&addr, send("Crash", 0, &format!("m{i}"), &format!("KEYS\u{1}crash{i}")), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    // The files as a kill -9 leaves them: the abort file, no index checkpoint.
    let crashed = tempfile::tempdir().unwrap();
    copy_tree(dir.path(), crashed.path());
    running.shutdown().await;
    assert!(crashed.path().join("abort").exists());
    let peers = format!("n0-127.0.0.1:{}", free_port());
    let port = free_port().to_string();
    let again = start(crashed.path(), &node_conf(crashed.path(), &ns, &peers, "n0", &port)).await;
    until("the member leads again", Duration::from_secs(20), || again.broker.store.role() == BrokerRole::SyncMaster).await;
    let addr = again.local_addr().to_string();
    assert_eq!(again.broker.store.max_offset_in_queue("Crash", 0), 50);
    for i in [0, 25, 49] {
        let query = raw(
            RequestCode::QUERY_MESSAGE,
            &[("topic", "Crash"), ("key", &format!("crash{i}")), ("maxNum", "32"), ("beginTimestamp", "0"), ("endTimestamp", &i64::MAX.to_string())],
        );
        let found = c.invoke(&addr, query, TIMEOUT).await.unwrap();
        assert_eq!(found.response_code(), ResponseCode::SUCCESS, "crash{i}: {:?}", found.remark);
        assert_eq!(bodies(&found).into_iter().map(|b| b.1).collect::<Vec<_>>(), vec![format!("m{i}")], "crash{i} found once");
    }
    again.shutdown().await;
    namesrv.shutdown().await;
}

/// (body, store time) of every message of queue 0 of a topic, read from a node's store (a new
/// master knows the topic's config only after its next copy from the old one).
fn stored(b: &BrokerController, topic_name: &str) -> Vec<(String, i64)> {
    let store = &b.broker.store;
    let Some(cq) = store.find_queue(topic_name, 0) else { return Vec::new() };
    (cq.min_offset()..cq.max_offset())
        .filter_map(|i| cq.get(i))
        .filter_map(|u| store.look_message_by_offset(u.phy_offset))
        .filter_map(|bytes| match store::message::record::decode_record(&bytes, true) {
            Ok(store::message::record::RecordAt::Record(m)) => Some((String::from_utf8_lossy(m.body).into_owned(), m.store_timestamp)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_new_leader_releases_the_timers_the_old_one_left_once_and_not_early() {
    let mut g = Group::start(3).await;
    let old = g.master().await;
    let c = RemotingClient::new(ClientConfig::default());
    let sent_at = remoting::clock::now_ms();
    // The early ones share one slot, more of them than the releases a slot keeps in flight.
    const EARLY: usize = 300;
    let (early_at, late_at) = (sent_at + 6000, sent_at + 16_000);
    for (batch, at, n) in [("early", early_at, EARLY), ("late", late_at, 10)] {
        for i in 0..n {
            let props = format!("TIMER_DELIVER_MS\u{1}{at}\u{2}UNIQ_KEY\u{1}{batch}{i}\u{2}");
            let r = c.invoke(&g.addr(old), send("TimerFailover", 0, &format!("{batch}{i}"), &props), TIMEOUT).await.unwrap();
            assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(25);
    while stored(g.node(old), "TimerFailover").len() < EARLY {
        let progress = g.node(old).broker.timer.get().map(|t| t.progress());
        assert!(Instant::now() < deadline, "the old leader did not release the early timers: {progress:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The followers copy the leader's timer checkpoint every 3 s.
    tokio::time::sleep(Duration::from_secs(4)).await;
    g.nodes[old].take().unwrap().shutdown().await;
    let new = g.master().await;
    let deadline = Instant::now() + Duration::from_secs(40);
    let got = loop {
        let got = stored(g.node(new), "TimerFailover");
        if got.len() >= EARLY + 10 || Instant::now() >= deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = if got.len() >= EARLY + 10 { stored(g.node(new), "TimerFailover") } else { got };
    let mut bodies: Vec<&str> = got.iter().map(|(b, _)| b.as_str()).collect();
    bodies.sort();
    let mut want: Vec<String> = (0..EARLY).map(|i| format!("early{i}")).chain((0..10).map(|i| format!("late{i}"))).collect();
    want.sort();
    let new_state = g.node(new).broker.timer.get().map(|t| t.progress());
    assert_eq!(bodies, want, "every timer released once; the new master's timer: {new_state:?}");
    for (body, at) in &got {
        // Due at the precision's second (admission rounds the time down to it).
        let due = if body.starts_with("late") { late_at } else { early_at } / 1000 * 1000;
        assert!(*at >= due, "{body} released early: {at} < {due}");
    }
    g.stop().await;
}

/// Pop's state is in the commit log (its checkpoints and acks in the revive topic) and in the
/// offsets a follower copies, so it survives a change of leader: the new master brings back each
/// message the old one handed out and was not acked, once and not before its invisible time, and
/// none that was acked.
#[tokio::test(flavor = "multi_thread")]
async fn the_new_leader_brings_back_what_the_old_one_popped_unacked_once_and_nothing_acked() {
    use common::pop::{ack_request, assert_back_once_not_early, pop_until_of};
    let mut g = Group::start(3).await;
    let old = g.master().await;
    let c = RemotingClient::new(ClientConfig::default());
    for i in 0..10 {
        let r = c.invoke(&g.addr(old), send("PopFailover", 0, &format!("m{i}"), ""), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    // Long enough that the old leader stops before it: then only the new one revives (a leader that
    // revived before the followers' next copy of its revive offset is revived after again: Java's
    // at-least-once).
    let invisible_ms = 20_000;
    let popped_at = remoting::clock::now_ms();
    let first = pop_until_of(&c, &g.addr(old), "raft", "PopFailover", 10, invisible_ms, Duration::from_secs(10)).await;
    assert_eq!(first.len(), 10, "{first:?}");
    let (acked, unacked): (Vec<_>, Vec<_>) = first.iter().partition(|p| p.offset % 2 == 0);
    for p in &acked {
        let r = c.invoke(&g.addr(old), ack_request("PopFailover", p), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    // The followers hold the pop's offset once they copied the leader's offsets (3 s, then every 10 s).
    until("the followers' copy of the popped offset", Duration::from_secs(20), || {
        (0..3).filter(|i| *i != old).all(|i| g.node(i).broker.offsets.query_offset("pg-c", "PopFailover", 0) == Some(10))
    })
    .await;
    assert!(remoting::clock::now_ms() < popped_at + invisible_ms - 2_000, "the followers copied the offsets too late for this test");
    g.nodes[old].take().unwrap().shutdown().await;
    let new = g.master().await;

    assert_back_once_not_early(&c, &g.addr(new), "raft", "PopFailover", &unacked, &acked, popped_at + invisible_ms).await;
    g.stop().await;
}
