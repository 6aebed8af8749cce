//! Our RPC transport against Java DLedger 0.3.1.2 over loopback, both ways, on both Java
//! classpaths of compat-tests/dledger-golden (the artifact with its own remoting 4.9.4 and
//! fastjson 1.2.69, and the Java broker 5.3.3's with fastjson 1.2.83):
//! - a Java `DLedgerClient` (and `DLedgerClientRpcNettyService`) asks our server, with a fake
//!   handler, for METADATA and GET;
//! - our peer client asks a real one-node Java `DLedgerServer` for METADATA, gets Java's error
//!   answers (which must be the bytes our transport writes), appends and reads back an entry,
//!   and sees how Java answers PULL, garbage and unknown codes.
//!
//! Needs java and javac (and mvn once to resolve the classpaths); without them these tests fail.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dledger::entry::Entry;
use dledger::protocol::*;
use dledger::rpc::server::PULL_REMARK;
use dledger::rpc::{Call, DLedgerHandler, DLedgerRpcServer, Member, PeerClient, PeerClientConfig};
use dledger::wire::{decode, encode, PullEntriesRequest};
use parking_lot::Mutex;
use remoting::ResponseCode;

const CLASSPATHS: [&str; 2] = ["dledger-0.3.1.2", "rocketmq-5.3.3"];
/// Generous: a JVM that has just started (class loading, fastjson generating its codecs) on a
/// busy machine can take longer than Java's 3 s for its first answers.
const TIMEOUT: Duration = Duration::from_secs(15);

fn run_sh() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../compat-tests/dledger-golden/run.sh")
}

/// The classpaths are resolved and the program compiled by the first run.sh; parallel tests
/// must not race on that.
fn prepare_java() {
    static READY: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    READY.get_or_init(|| {
        for classpath in CLASSPATHS {
            // A generate run into a scratch directory compiles and checks the classpath.
            let out = tempfile::tempdir().unwrap();
            let status = Command::new("bash")
                .arg(run_sh())
                .args([classpath, "generate"])
                .arg(out.path())
                .stdout(Stdio::null())
                .status()
                .expect("cannot run compat-tests/dledger-golden/run.sh (is bash installed?)");
            assert!(status.success(), "run.sh {classpath} failed: Java 17 (java, javac) and Maven are needed");
        }
    });
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A fake member n0 of group g that leads and holds one entry per index asked.
struct Fake {
    peers: BTreeMap<String, String>,
    calls: Mutex<Vec<(String, Base, Option<i64>)>>,
}

fn entry(index: i64) -> Entry {
    Entry { magic: 1, index, term: 3, pos: 1000 + index, body: Bytes::from(format!("entry {index} é\u{0}\u{ff}")), ..Default::default() }
}

impl DLedgerHandler for Fake {
    fn leader_id(&self) -> Option<String> {
        Some("n0".into())
    }

    fn handle(&self, call: Call) {
        match call {
            Call::Metadata(req, r) => {
                self.calls.lock().push(("METADATA".into(), req.base.clone(), None));
                r.send(metadata_answer(&self.peers))
            }
            Call::Get(req, r) => {
                self.calls.lock().push(("GET".into(), req.base.clone(), req.begin_index));
                r.send(GetEntriesResponse { base: Base { group: "g".into(), ..Base::default() }, entries: vec![entry(req.begin_index.unwrap_or(0))] })
            }
            other => {
                let base = other.base().clone();
                self.calls.lock().push(("OTHER".into(), base, None));
            }
        }
    }
}

fn metadata_answer(peers: &BTreeMap<String, String>) -> MetadataResponse {
    MetadataResponse { base: Base { group: "g".into(), leader_id: Some("n0".into()), ..Base::default() }, peers: peers.clone() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_dledger_client_reads_metadata_and_entries_from_our_server() {
    prepare_java();
    for classpath in CLASSPATHS {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let peers: BTreeMap<String, String> = [("n0".to_owned(), addr.to_string())].into();
        let fake = Arc::new(Fake { peers: peers.clone(), calls: Mutex::new(Vec::new()) });
        let server = DLedgerRpcServer::start(addr, Member { group: "g".into(), self_id: "n0".into() }, fake.clone()).await.unwrap();

        let peers_arg = format!("n0-{addr}");
        let out =
            tokio::task::spawn_blocking(move || Command::new("bash").arg(run_sh()).args([classpath, "client", "g", &peers_arg, "n0", "7"]).output().unwrap())
                .await
                .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{classpath} client failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let line = |prefix: &str| {
            stdout.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("{classpath}: no {prefix:?} line in:\n{stdout}")).to_owned()
        };

        // Java parsed our bodies and wrote them again: the same bytes.
        let metadata = line("METADATA ");
        assert_eq!(metadata.as_bytes(), &encode(&metadata_answer(&peers))[..], "{classpath}");
        let got = line("GET ");
        let expected = GetEntriesResponse { base: Base { group: "g".into(), ..Base::default() }, entries: vec![entry(7)] };
        assert_eq!(got.as_bytes(), &encode(&expected)[..], "{classpath}");
        assert_eq!(decode::<GetEntriesResponse>(got.as_bytes()).unwrap(), expected);

        // What the Java client sent: group and remoteId only.
        let calls = fake.calls.lock().clone();
        let asked = Base { group: "g".into(), remote_id: Some("n0".into()), ..Base::default() };
        assert!(calls.contains(&("METADATA".into(), asked.clone(), None)), "{calls:?}");
        assert!(calls.contains(&("GET".into(), asked, Some(7))), "{calls:?}");
        assert!(calls.iter().all(|(name, ..)| name != "OTHER"), "{calls:?}");
        server.shutdown().await;
    }
}

/// A one-node Java DLedgerServer; stopped when dropped.
struct JavaServer {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl JavaServer {
    fn start(classpath: &str) -> JavaServer {
        let dir = tempfile::tempdir().unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let mut child = Command::new("bash")
            .arg(run_sh())
            .args([classpath, "server"])
            .arg(dir.path())
            .args(["g", "n0", &format!("n0-{addr}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start the Java DLedgerServer");
        let stdout = child.stdout.take().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim() == "READY" {
                    let _ = ready_tx.send(());
                }
            }
        });
        let server = JavaServer { child, addr, _dir: dir };
        ready_rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("the Java DLedgerServer ({classpath}) did not start"));
        server
    }
}

impl Drop for JavaServer {
    fn drop(&mut self) {
        // Closing its standard input shuts it down; kill it if it hangs.
        drop(self.child.stdin.take().map(|mut s| s.flush()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Our server as a member n0 of g whose leader is n0, to compare error answers with Java's.
struct Mirror;

impl DLedgerHandler for Mirror {
    fn leader_id(&self) -> Option<String> {
        Some("n0".into())
    }
    fn handle(&self, _call: Call) {
        panic!("the checks answer everything sent here");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_peer_client_talks_to_a_java_dledger_server() {
    prepare_java();
    let mirror = DLedgerRpcServer::start("127.0.0.1:0".parse().unwrap(), Member { group: "g".into(), self_id: "n0".into() }, Arc::new(Mirror)).await.unwrap();
    let ours = mirror.local_addr().to_string();
    for classpath in CLASSPATHS {
        let java = JavaServer::start(classpath);
        let client = PeerClient::new(PeerClientConfig { timeout: TIMEOUT, ..Default::default() });
        let to_n0 = Base { group: "g".into(), remote_id: Some("n0".into()), ..Base::default() };

        // METADATA until the node has elected itself.
        let deadline = Instant::now() + Duration::from_secs(60);
        let metadata = loop {
            let answer = client.call(&java.addr, &MetadataRequest { base: to_n0.clone() }).await;
            match answer {
                Ok(m) if m.base.leader_id.is_some() => break m,
                _ if Instant::now() > deadline => panic!("{classpath}: no leader in time: {answer:?}"),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        assert_eq!(
            metadata,
            MetadataResponse {
                base: Base { group: "g".into(), leader_id: Some("n0".into()), ..Base::default() },
                peers: [("n0".to_owned(), java.addr.clone())].into(),
            },
            "{classpath}"
        );

        // Java's error answers are the bytes our transport writes for the same request.
        for request in [
            MetadataRequest { base: Base { remote_id: Some("n1".into()), ..to_n0.clone() } },
            MetadataRequest { base: Base { group: "other".into(), local_id: Some("x".into()), term: 5, ..to_n0.clone() } },
            MetadataRequest { base: Base { group: "other".into(), remote_id: None, ..to_n0.clone() } },
        ] {
            let theirs = client.call_raw(&java.addr, request_code::METADATA, encode(&request), TIMEOUT).await.unwrap();
            let mine = client.call_raw(&ours, request_code::METADATA, encode(&request), TIMEOUT).await.unwrap();
            assert_eq!(theirs.code, 200, "{classpath}");
            // The frames match but for the opaque and the version (Java writes its
            // `rocketmq.remoting.version` property, 0 when unset as here; a broker sets it).
            let header = |c: &remoting::RemotingCommand| (c.code, c.flag, c.language, c.remark.clone(), c.ext_fields.clone(), c.serialize_type);
            assert_eq!(header(&mine), header(&theirs), "{classpath}");
            assert_eq!(String::from_utf8_lossy(mine.body_bytes()), String::from_utf8_lossy(theirs.body_bytes()), "{classpath}");
        }
        let wrong_member = PushEntryRequest {
            base: Base { remote_id: Some("n2".into()), term: 9, ..to_n0.clone() },
            commit_index: 1,
            kind: PushType::Commit,
            entries: vec![],
            batch: false,
        };
        let theirs = client.call_raw(&java.addr, request_code::PUSH, encode(&wrong_member), TIMEOUT).await.unwrap();
        let mine = client.call_raw(&ours, request_code::PUSH, encode(&wrong_member), TIMEOUT).await.unwrap();
        assert_eq!(String::from_utf8_lossy(mine.body_bytes()), String::from_utf8_lossy(theirs.body_bytes()), "{classpath}");

        // An entry in and out of the Java store; its GET body re-encodes to Java's bytes.
        let appended = client.call(&java.addr, &AppendEntryRequest { base: to_n0.clone(), body: Bytes::from_static(b"hello") }).await.unwrap();
        assert_eq!((appended.base.code, appended.index, appended.pos), (Code::SUCCESS, 0, 0), "{classpath}: {appended:?}");
        assert_eq!(appended.base.leader_id.as_deref(), Some("n0"));
        let get = GetEntriesRequest { base: to_n0.clone(), begin_index: Some(0), max_size: 0, index_list: None };
        let raw = client.call_raw(&java.addr, request_code::GET, encode(&get), TIMEOUT).await.unwrap();
        let got: GetEntriesResponse = decode(raw.body_bytes()).unwrap();
        assert_eq!(encode(&got), raw.body_bytes(), "{classpath}");
        assert_eq!(got.entries.len(), 1);
        let e = &got.entries[0];
        assert_eq!((e.magic, e.index, e.pos, e.channel, e.chain_crc, e.body_crc, &e.body[..]), (1, 0, 0, 0, 0, 0, &b"hello"[..]));
        assert_eq!(e.term, appended.base.term, "the entry has the leader's term");

        // A vote from a stranger: the elector's own answer, through our types.
        let vote = VoteRequest {
            base: Base { leader_id: Some("n9".into()), local_id: Some("n9".into()), term: 100, ..to_n0.clone() },
            ledger_end_index: 0,
            ledger_end_term: 0,
        };
        let answer = client.call(&java.addr, &vote).await.unwrap();
        assert_eq!(answer.vote_result, VoteResult::RejectUnknownLeader, "{classpath}: {answer:?}");

        // PULL: the remoting layer's answer to the NullPointerException, as ours.
        let pull = PullEntriesRequest { base: to_n0.clone(), node_id: Some("n1".into()), begin_index: Some(0) };
        let theirs = client.call_raw(&java.addr, request_code::PULL, encode(&pull), TIMEOUT).await.unwrap();
        let mine = client.call_raw(&ours, request_code::PULL, encode(&pull), TIMEOUT).await.unwrap();
        assert_eq!(theirs.response_code(), ResponseCode::SYSTEM_ERROR, "{classpath}: {theirs:?}");
        assert_eq!((mine.response_code(), mine.remark.as_deref(), mine.flag), (theirs.response_code(), Some(PULL_REMARK), theirs.flag));
        assert_eq!(theirs.remark.as_deref(), Some(PULL_REMARK), "{classpath}");
        assert!(theirs.body.is_none() && mine.body.is_none());

        // A body fastjson cannot parse, and a code DLedger never registered.
        let theirs = client.call_raw(&java.addr, request_code::VOTE, b"not json".to_vec(), TIMEOUT).await.unwrap();
        assert_eq!(theirs.response_code(), ResponseCode::SYSTEM_ERROR, "{classpath}: {theirs:?}");
        let theirs = client.call_raw(&java.addr, 50003, b"{}".to_vec(), TIMEOUT).await.unwrap();
        assert_eq!(theirs.response_code(), ResponseCode::REQUEST_CODE_NOT_SUPPORTED, "{classpath}: {theirs:?}");

        client.shutdown();
        drop(java);
    }
    mirror.shutdown().await;
}
