//! Real members on loopback (`DLedgerServer`: engine thread, file store, RPCs): a group elects one
//! leader and replicates client appends; every RPC from a stray, stale or confused sender gets
//! 0.3.1.2's answer; a member that stops is replaced, and a restarted group keeps its log.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dledger::client::DLedgerClient;
use dledger::config::DLedgerConfig;
use dledger::engine::Role;
use dledger::protocol::*;
use dledger::rpc::{PeerClient, PeerClientConfig};
use dledger::server::{DLedgerServer, NodeStatus};
use remoting::ResponseCode;
use tempfile::TempDir;

const GROUP: &str = "t40";

/// Three members with short timings (a leader is missed after 3 x 200 ms), small segments.
struct Group {
    dir: TempDir,
    peers: String,
    addrs: Vec<SocketAddr>,
    members: Vec<Option<DLedgerServer>>,
}

fn config(dir: &TempDir, peers: &str, id: usize) -> DLedgerConfig {
    DLedgerConfig {
        group: GROUP.into(),
        self_id: format!("n{id}"),
        peers: peers.into(),
        store_base_dir: dir.path().to_string_lossy().into_owned(),
        mapped_file_size_for_entry_data: 64 * 1024,
        mapped_file_size_for_entry_index: 32 * 256,
        heart_beat_time_interval_ms: 200,
        min_vote_interval_ms: 50,
        max_vote_interval_ms: 150,
        ..Default::default()
    }
}

impl Group {
    async fn start() -> Group {
        let listeners: Vec<_> = (0..3).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        drop(listeners);
        let peers = addrs.iter().enumerate().map(|(i, a)| format!("n{i}-{a}")).collect::<Vec<_>>().join(";");
        let mut g = Group { dir: tempfile::tempdir().unwrap(), peers, addrs, members: Vec::new() };
        for i in 0..3 {
            let member = DLedgerServer::start(config(&g.dir, &g.peers, i)).await.unwrap();
            g.members.push(Some(member));
        }
        g
    }

    async fn restart(&mut self, i: usize) {
        self.members[i] = Some(DLedgerServer::start(config(&self.dir, &self.peers, i)).await.unwrap());
    }

    async fn stop(&mut self, i: usize) {
        if let Some(m) = self.members[i].take() {
            m.shutdown().await;
        }
    }

    fn statuses(&self) -> Vec<Option<NodeStatus>> {
        self.members.iter().map(|m| m.as_ref().map(|m| m.handle().status())).collect()
    }

    /// Waits until exactly one running member leads and every running member follows it.
    async fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let st = self.statuses();
            let leaders: Vec<usize> = st.iter().enumerate().filter(|(_, s)| s.as_ref().is_some_and(|s| s.role == Role::Leader)).map(|(i, _)| i).collect();
            if let [l] = leaders[..] {
                let id = format!("n{l}");
                if st.iter().flatten().all(|s| s.leader_id.as_deref() == Some(id.as_str())) {
                    return l;
                }
            }
            assert!(Instant::now() < deadline, "no single leader: {st:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn shutdown(mut self) {
        for i in 0..3 {
            self.stop(i).await;
        }
    }
}

fn base(remote: usize, term: i64) -> Base {
    Base { group: GROUP.into(), remote_id: Some(format!("n{remote}")), local_id: Some("stranger".into()), term, ..Base::default() }
}

/// Appends `n` bodies, each retried (as an application would) until a leader acknowledges it.
async fn append_all(client: &DLedgerClient, from: usize, n: usize) -> Vec<(i64, Bytes)> {
    let mut acked = Vec::new();
    for i in from..from + n {
        let body = Bytes::from(format!("entry-{i}-{}", "x".repeat(i % 300)));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match client.append(body.clone()).await {
                Ok(r) if r.base.code == Code::SUCCESS => {
                    acked.push((r.index, body));
                    break;
                }
                other => assert!(Instant::now() < deadline, "append {i} never acknowledged: {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    acked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_elects_one_leader_and_every_acknowledged_append_is_read_back() {
    let g = Group::start().await;
    let leader = g.leader().await;
    let client = DLedgerClient::new(GROUP, &g.peers).unwrap();
    let acked = append_all(&client, 0, 300).await;
    assert_eq!(acked.iter().map(|(i, _)| *i).collect::<Vec<_>>(), (0..300).collect::<Vec<i64>>());
    for (index, body) in &acked {
        let r = client.get(*index).await.unwrap();
        assert_eq!(r.base.code, Code::SUCCESS);
        assert_eq!(&r.entries[0].body, body);
    }
    // Every member holds the same entries (followers read in-process, without the leader check).
    for m in g.members.iter().flatten() {
        let h = m.handle();
        let deadline = Instant::now() + Duration::from_secs(10);
        while h.status().end_index < 299 {
            assert!(Instant::now() < deadline, "member never caught up: {:?}", h.status());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for (index, body) in acked.iter().step_by(37) {
            assert_eq!(&h.read(*index).await.unwrap().unwrap().body, body);
        }
    }
    // METADATA from any member names the leader and every peer.
    let rpc = PeerClient::new(PeerClientConfig::default());
    for (i, addr) in g.addrs.iter().enumerate() {
        let r = rpc.call(&addr.to_string(), &MetadataRequest { base: base(i, -1) }).await.unwrap();
        assert_eq!(r.base.leader_id, Some(format!("n{leader}")));
        assert_eq!(r.peers.len(), 3);
        assert_eq!(r.peers.get("n1"), Some(&g.addrs[1].to_string()));
    }
    // In-process appends of a batch answer with every position.
    let h = g.members[leader].as_ref().unwrap().handle();
    let out = h.append(vec![Bytes::from_static(b"a"), Bytes::from_static(b"bb")]).await.unwrap();
    assert_eq!((out.response.base.code, out.response.index, out.positions.len()), (Code::SUCCESS, 301, 2));
    client.shutdown();
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stray_stale_and_malformed_requests_get_javas_answers() {
    let g = Group::start().await;
    let leader = g.leader().await;
    let follower = (leader + 1) % 3;
    let client = DLedgerClient::new(GROUP, &g.peers).unwrap();
    append_all(&client, 0, 5).await;
    let term = g.members[leader].as_ref().unwrap().handle().status().term;
    let rpc = PeerClient::new(PeerClientConfig::default());
    let at = |i: usize| g.addrs[i].to_string();
    let leader_id = Some(format!("n{leader}"));

    // A follower refuses appends and gets, naming the leader.
    let r = rpc.call(&at(follower), &AppendEntryRequest { base: base(follower, -1), body: Bytes::from_static(b"x") }).await.unwrap();
    assert_eq!((r.base.code, &r.base.leader_id, r.index), (Code::NOT_LEADER, &leader_id, -1));
    let get = |i: usize, index: Option<i64>| GetEntriesRequest { base: base(i, -1), begin_index: index, max_size: 0, index_list: None };
    let r = rpc.call(&at(follower), &get(follower, Some(0))).await.unwrap();
    assert_eq!((r.base.code, &r.base.leader_id), (Code::NOT_LEADER, &leader_id));

    // The leader's store checks: past the end, negative; a missing index is Java's NullPointerException.
    let r = rpc.call(&at(leader), &get(leader, Some(5))).await.unwrap();
    assert_eq!((r.base.code, r.entries.len()), (Code::INDEX_OUT_OF_RANGE, 0));
    let r = rpc.call(&at(leader), &get(leader, Some(-1))).await.unwrap();
    assert_eq!(r.base.code, Code::INDEX_OUT_OF_RANGE);
    let raw = rpc
        .call_raw(&at(leader), request_code::GET, format!(r#"{{"group":"t40","remoteId":"n{leader}"}}"#).into_bytes(), Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(raw.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(raw.remark.as_deref().unwrap_or_default().contains("NullPointerException"));
    // A success carries the group and the entry only (Java sets nothing else).
    let r = rpc.call(&at(leader), &get(leader, Some(4))).await.unwrap();
    assert_eq!((r.base.code, r.base.term, r.base.leader_id.as_deref(), r.entries[0].index), (Code::SUCCESS, -1, None, 4));

    // Unknown member and group, on a real member.
    let r = rpc.call(&at(leader), &HeartBeatRequest { base: base(7, term) }).await.unwrap();
    assert_eq!(r.base.code, Code::UNKNOWN_MEMBER);
    let r = rpc.call(&at(leader), &HeartBeatRequest { base: Base { group: "other".into(), ..base(leader, term) } }).await.unwrap();
    assert_eq!(r.base.code, Code::UNKNOWN_GROUP);

    // Stale terms: a heartbeat from an older term is EXPIRED_TERM with our term; a vote for an
    // older term is rejected as expired.
    // (From a known member: an unknown leader is UNKNOWN_MEMBER before any term check.)
    let other = format!("n{}", (leader + 2) % 3);
    let stale = Base { leader_id: Some(other.clone()), local_id: Some(other), ..base(follower, term - 1) };
    let r = rpc.call(&at(follower), &HeartBeatRequest { base: stale.clone() }).await.unwrap();
    assert_eq!((r.base.code, r.base.term), (Code::EXPIRED_TERM, term));
    // Java checks no term on a COMMIT push and answers SUCCESS; its store ignores a commit index
    // from an older term, and so do we.
    let before = g.members[follower].as_ref().unwrap().handle().status().committed_index;
    let push = PushEntryRequest { base: stale.clone(), commit_index: 1_000, kind: PushType::Commit, entries: Vec::new(), batch: false };
    let r = rpc.call(&at(follower), &push).await.unwrap();
    assert_eq!((r.base.code, r.base.term), (Code::SUCCESS, term - 1));
    assert!(g.members[follower].as_ref().unwrap().handle().status().committed_index <= before.max(4));
    let vote = VoteRequest { base: stale, ledger_end_index: 1_000, ledger_end_term: term };
    let r = rpc.call(&at(follower), &vote).await.unwrap();
    assert_eq!(r.vote_result, VoteResult::RejectExpiredVoteTerm);

    // Broken bodies are the remoting layer's SYSTEM_ERROR, and the group carries on.
    let raw = rpc.call_raw(&at(leader), request_code::APPEND, b"{\"group\":".to_vec(), Duration::from_secs(3)).await.unwrap();
    assert_eq!(raw.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(g.leader().await, leader);
    append_all(&client, 5, 3).await;
    client.shutdown();
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_leader_is_replaced_and_a_restarted_group_keeps_its_log() {
    let mut g = Group::start().await;
    let first = g.leader().await;
    let client = DLedgerClient::new(GROUP, &g.peers).unwrap();
    let mut acked = append_all(&client, 0, 50).await;
    g.stop(first).await;
    let second = g.leader().await;
    assert_ne!(first, second);
    acked.extend(append_all(&client, 50, 50).await);
    // The old leader comes back as a follower and catches up.
    g.restart(first).await;
    assert_eq!(g.leader().await, second);
    acked.extend(append_all(&client, 100, 10).await);
    // The whole group restarts on its stores: the log is the same, appends continue after it.
    for i in 0..3 {
        g.stop(i).await;
    }
    for i in 0..3 {
        g.restart(i).await;
    }
    g.leader().await;
    let next = append_all(&client, 110, 1).await;
    assert_eq!(next[0].0, 110);
    for (index, body) in &acked {
        let r = client.get(*index).await.unwrap();
        assert_eq!(&r.entries[0].body, body, "entry {index}");
    }
    client.shutdown();
    g.shutdown().await;
}
