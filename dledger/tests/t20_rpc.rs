//! The DLedger RPC transport over loopback with a fake handler: the member checks and their error
//! bodies, lenient and broken bodies, PULL, answers given later, the peer client's bounds,
//! timeouts and reconnects, and the client's leader discovery and NOT_LEADER redirect.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dledger::client::{ClientError, DLedgerClient};
use dledger::entry::Entry;
use dledger::protocol::*;
use dledger::rpc::server::PULL_REMARK;
use dledger::rpc::{Call, DLedgerHandler, DLedgerRpcServer, Member, PeerClient, PeerClientConfig, Responder, RpcError};
use dledger::wire::{decode, encode, PullEntriesRequest};
use parking_lot::Mutex;
use remoting::codec::encode_frame;
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const GROUP: &str = "g";
const TIMEOUT: Duration = Duration::from_secs(3);

/// Answers like a small DLedger member; who leads is shared by a whole fake group.
struct Fake {
    self_id: String,
    leader: Arc<Mutex<Option<String>>>,
    peers: BTreeMap<String, String>,
    /// Every call the transport let through: code name and base.
    calls: Mutex<Vec<(&'static str, Base)>>,
    /// Requests whose answer the test gives later.
    held: Mutex<Vec<Responder<LeadershipTransferResponse>>>,
    held_gets: Mutex<Vec<Responder<GetEntriesResponse>>>,
    hold_gets: bool,
}

impl Fake {
    fn new(self_id: &str, leader: Arc<Mutex<Option<String>>>) -> Fake {
        Fake {
            self_id: self_id.to_owned(),
            leader,
            peers: BTreeMap::new(),
            calls: Mutex::new(Vec::new()),
            held: Mutex::new(Vec::new()),
            held_gets: Mutex::new(Vec::new()),
            hold_gets: false,
        }
    }

    fn is_leader(&self) -> bool {
        self.leader.lock().as_deref() == Some(self.self_id.as_str())
    }

    fn calls(&self) -> Vec<&'static str> {
        self.calls.lock().iter().map(|(n, _)| *n).collect()
    }
}

fn entry(index: i64, body: &'static [u8]) -> Entry {
    Entry { magic: 1, index, term: 2, pos: index * 100, body: Bytes::from_static(body), ..Default::default() }
}

impl DLedgerHandler for Fake {
    fn leader_id(&self) -> Option<String> {
        self.leader.lock().clone()
    }

    fn handle(&self, call: Call) {
        self.calls.lock().push((call.name(), call.base().clone()));
        let group = GROUP.to_owned();
        match call {
            Call::Metadata(_, r) => {
                r.send(MetadataResponse { base: Base { group, leader_id: self.leader_id(), ..Base::default() }, peers: self.peers.clone() })
            }
            Call::Append(req, r) if !self.is_leader() => r.fail(&req.base, Code::NOT_LEADER, self.leader_id()),
            Call::Append(req, r) => r.send(AppendEntryResponse {
                base: Base { group, term: 2, leader_id: Some(self.self_id.clone()), ..Base::default() },
                index: req.body.len() as i64,
                pos: 4096,
            }),
            Call::Get(req, r) if !self.is_leader() => r.fail(&req.base, Code::NOT_LEADER, self.leader_id()),
            Call::Get(_, r) if self.hold_gets => self.held_gets.lock().push(r),
            Call::Get(req, r) => {
                r.send(GetEntriesResponse { base: Base { group, ..Base::default() }, entries: vec![entry(req.begin_index.unwrap_or(-1), b"got it")] })
            }
            Call::Vote(req, r) => r.send(VoteResponse { base: Base { term: req.base.term, ..req.base.clone() }, vote_result: VoteResult::Accept }),
            Call::HeartBeat(_, r) => r.send(HeartBeatResponse { base: Base::default() }),
            Call::Push(req, r) => r.send(PushEntryResponse {
                base: Base { group, term: req.base.term, ..Base::default() },
                index: req.entries.first().map(|e| e.index),
                begin_index: 0,
                end_index: req.entries.last().map_or(-1, |e| e.index),
                count: req.entries.len() as i32,
            }),
            Call::LeadershipTransfer(_, r) => self.held.lock().push(r),
        }
    }
}

async fn serve(fake: Arc<Fake>) -> DLedgerRpcServer {
    serve_at("127.0.0.1:0".parse().unwrap(), fake).await
}

async fn serve_at(addr: SocketAddr, fake: Arc<Fake>) -> DLedgerRpcServer {
    let member = Member { group: GROUP.into(), self_id: fake.self_id.clone() };
    DLedgerRpcServer::start(addr, member, fake).await.unwrap()
}

fn n0_leading() -> Arc<Fake> {
    Arc::new(Fake::new("n0", Arc::new(Mutex::new(Some("n0".to_owned())))))
}

fn base_to(remote_id: &str) -> Base {
    Base { group: GROUP.into(), remote_id: Some(remote_id.into()), local_id: Some("n1".into()), leader_id: Some("n1".into()), term: 3, code: Code::SUCCESS }
}

async fn raw(client: &PeerClient, addr: SocketAddr, code: i32, body: &[u8]) -> RemotingCommand {
    client.call_raw(&addr.to_string(), code, body.to_vec(), TIMEOUT).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_reaches_the_handler_and_comes_back_typed() {
    let fake = n0_leading();
    let server = serve(fake.clone()).await;
    let client = PeerClient::new(PeerClientConfig::default());
    let addr = server.local_addr().to_string();

    let meta = client.call(&addr, &MetadataRequest { base: base_to("n0") }).await.unwrap();
    assert_eq!(meta.base.leader_id.as_deref(), Some("n0"));
    let vote = client.call(&addr, &VoteRequest { base: base_to("n0"), ledger_end_index: 5, ledger_end_term: 2 }).await.unwrap();
    assert_eq!((vote.vote_result, vote.base.term), (VoteResult::Accept, 3));
    let hb = client.call(&addr, &HeartBeatRequest { base: base_to("n0") }).await.unwrap();
    assert_eq!((hb.base.code, hb.base.term), (Code::SUCCESS, -1));
    let push = PushEntryRequest { base: base_to("n0"), commit_index: 4, kind: PushType::Append, entries: vec![entry(5, b"a"), entry(6, b"b")], batch: true };
    let pushed = client.call(&addr, &push).await.unwrap();
    assert_eq!((pushed.index, pushed.count, pushed.end_index), (Some(5), 2, 6));
    let appended = client.call(&addr, &AppendEntryRequest { base: base_to("n0"), body: Bytes::from_static(b"abc") }).await.unwrap();
    assert_eq!((appended.index, appended.pos), (3, 4096));
    let got = client.call(&addr, &GetEntriesRequest { base: base_to("n0"), begin_index: Some(9), max_size: 0, index_list: None }).await.unwrap();
    assert_eq!(got.entries, vec![entry(9, b"got it")]);

    assert_eq!(fake.calls(), ["METADATA", "VOTE", "HEART_BEAT", "PUSH", "APPEND", "GET"]);
    // The handler saw the request's base as sent.
    assert_eq!(fake.calls.lock()[3].1, base_to("n0"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_another_member_gets_javas_unknown_member_body() {
    let fake = n0_leading();
    let server = serve(fake.clone()).await;
    let client = PeerClient::new(PeerClientConfig::default());
    // The request of compat-tests/dledger-golden's metadata_response_unknown_member, to a node
    // whose leader is n0: the answer must be Java's bytes.
    let request = MetadataRequest { base: Base { group: GROUP.into(), remote_id: Some("n1".into()), ..Base::default() } };
    let response = raw(&client, server.local_addr(), request_code::METADATA, &encode(&request)).await;
    assert_eq!(response.code, 200, "DLedger answers always have remoting code 200");
    assert!(response.is_response());
    let golden = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../compat-tests/dledger-golden/vectors/dledger-0.3.1.2/encode/metadata_response_unknown_member.json"
    ))
    .unwrap();
    assert_eq!(response.body_bytes(), &golden[..]);
    assert!(fake.calls().is_empty(), "the handler never saw it");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_code_checks_the_member_first_then_the_group() {
    let fake = n0_leading();
    let server = serve(fake.clone()).await;
    let client = PeerClient::new(PeerClientConfig::default());
    let addr = server.local_addr().to_string();
    let wrong_member = base_to("n7");
    let wrong_group = Base { group: "other".into(), ..base_to("n0") };
    let both_wrong = Base { group: "other".into(), ..base_to("n7") };
    for (base, code) in [(&wrong_member, Code::UNKNOWN_MEMBER), (&wrong_group, Code::UNKNOWN_GROUP), (&both_wrong, Code::UNKNOWN_MEMBER)] {
        // Java's error answer: the request's base, the code, the node's leader.
        let expected = Base { code, leader_id: Some("n0".into()), ..base.clone() };
        let r = client.call(&addr, &MetadataRequest { base: base.clone() }).await.unwrap();
        assert_eq!((&r.base, r.peers.len()), (&expected, 0));
        let r = client.call(&addr, &AppendEntryRequest { base: base.clone(), body: Bytes::from_static(b"x") }).await.unwrap();
        assert_eq!((&r.base, r.index, r.pos), (&expected, -1, -1));
        let r = client.call(&addr, &GetEntriesRequest { base: base.clone(), begin_index: Some(1), max_size: 0, index_list: None }).await.unwrap();
        assert_eq!((&r.base, r.entries.len()), (&expected, 0));
        let r = client.call(&addr, &VoteRequest { base: base.clone(), ledger_end_index: 1, ledger_end_term: 1 }).await.unwrap();
        assert_eq!((&r.base, r.vote_result), (&expected, VoteResult::Unknown));
        let r = client.call(&addr, &HeartBeatRequest { base: base.clone() }).await.unwrap();
        assert_eq!(r.base, expected);
        let push = PushEntryRequest { base: base.clone(), commit_index: 1, kind: PushType::Compare, entries: vec![entry(1, b"x")], batch: false };
        let r = client.call(&addr, &push).await.unwrap();
        assert_eq!((&r.base, r.index, r.count, r.begin_index, r.end_index), (&expected, None, 0, 0, 0));
        let transfer =
            LeadershipTransferRequest { base: base.clone(), transfer_id: Some("n0".into()), transferee_id: Some("n1".into()), take_leadership_ledger_index: 0 };
        let r = client.call(&addr, &transfer).await.unwrap();
        assert_eq!(r.base, expected);
    }
    assert!(fake.calls().is_empty(), "no handler call got past the checks: {:?}", fake.calls());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_fields_take_javas_defaults() {
    let fake = n0_leading();
    let server = serve(fake.clone()).await;
    let client = PeerClient::new(PeerClientConfig::default());
    // No remoteId: Java's `selfId.equals(null)` is false.
    let r = raw(&client, server.local_addr(), request_code::VOTE, b"{}").await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body_bytes(), br#"{"code":401,"leaderId":"n0","term":-1,"voteResult":"UNKNOWN"}"#);
    // Just the member fields: the rest is Java's initial values.
    let r = raw(&client, server.local_addr(), request_code::VOTE, br#"{"group":"g","remoteId":"n0","future":[1,2]}"#).await;
    let vote: VoteResponse = decode(r.body_bytes()).unwrap();
    assert_eq!(vote.vote_result, VoteResult::Accept);
    assert_eq!(
        fake.calls.lock()[0].1,
        Base { group: "g".into(), remote_id: Some("n0".into()), local_id: None, leader_id: None, term: -1, code: Code::SUCCESS }
    );
    // A push without entries, type or commit index: an APPEND of nothing at -1.
    let r = raw(&client, server.local_addr(), request_code::PUSH, br#"{"group":"g","remoteId":"n0","term":"7"}"#).await;
    let pushed: PushEntryResponse = decode(r.body_bytes()).unwrap();
    assert_eq!((pushed.index, pushed.count, pushed.base.term), (None, 0, 7));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_java_cannot_parse_are_system_errors_and_the_connection_lives_on() {
    let fake = n0_leading();
    let server = serve(fake.clone()).await;
    let client = PeerClient::new(PeerClientConfig::default());
    let addr = server.local_addr();
    for (code, body, remark) in [
        (request_code::METADATA, &b""[..], "MetadataRequest body is missing"),
        (request_code::VOTE, b"not json", "VoteRequest body is not a JSON object"),
        (request_code::PUSH, br#"{"group":"g","remoteId":"n0","entry":{"body":"aGk"#, "PushEntryRequest body is invalid"),
        (request_code::PUSH, br#"{"group":"g","remoteId":"n0","type":"SNAPSHOT"}"#, "is not a PushEntryRequest.Type"),
        (request_code::APPEND, br#"{"group":"g","remoteId":"n0","body":"*"}"#, "invalid base64"),
        (request_code::HEART_BEAT, b"\xff\xfe\x00{", "HeartBeatRequest body is not a JSON object"),
        (request_code::GET, br#"{"term":99999999999999999999}"#, "expected an integer (a Java long)"),
        (request_code::LEADERSHIP_TRANSFER, br#"{"term":1,"term":2}"#, "duplicate field"),
    ] {
        let r = raw(&client, addr, code, body).await;
        assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR, "{code}: {r:?}");
        assert!(r.remark.as_deref().unwrap_or("").contains(remark), "{code}: {:?}", r.remark);
        assert!(r.body.is_none());
    }
    // The typed call reports the remoting layer's refusal.
    let err = client.call_with_timeout(&addr.to_string(), &PullEntriesRequest::default(), TIMEOUT).await.unwrap_err();
    assert!(matches!(err, RpcError::Refused { code: ResponseCode::SYSTEM_ERROR, .. }), "{err}");
    // Still served on the same connection.
    let meta = client.call(&addr.to_string(), &MetadataRequest { base: base_to("n0") }).await.unwrap();
    assert_eq!(meta.base.code, Code::SUCCESS);
    assert_eq!(fake.calls(), ["METADATA"]);
    server.shutdown().await;
}

async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(tokio::time::timeout(TIMEOUT, stream.read(&mut buf)).await, Ok(Ok(0)) | Ok(Err(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_and_broken_frames_close_the_connection_as_remoting_does() {
    let fake = n0_leading();
    let server = serve(fake.clone()).await;

    // A frame announcing 17 MiB: refused from its length, before anything is allocated.
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    stream.write_all(&(17 * 1024 * 1024i32).to_be_bytes()).await.unwrap();
    stream.write_all(&[0u8; 64]).await.unwrap();
    assert!(closed_by_server(&mut stream).await);

    // A header length beyond the frame.
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    stream.write_all(&[0, 0, 0, 8, 0, 0, 0x10, 0, b'{', b'}', 0, 0]).await.unwrap();
    assert!(closed_by_server(&mut stream).await);

    // A truncated frame followed by EOF: nothing to answer, nothing reaches the handler.
    let frame =
        encode_frame(&RemotingCommand::request(RequestCode(request_code::METADATA)).with_body(encode(&MetadataRequest { base: base_to("n0") }))).unwrap();
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    stream.write_all(&frame[..frame.len() - 5]).await.unwrap();
    stream.shutdown().await.unwrap();
    assert!(closed_by_server(&mut stream).await);

    // A body of nearly 16 MiB of garbage inside a valid frame: an error answer.
    let client = PeerClient::new(PeerClientConfig::default());
    let garbage = vec![b'x'; 16 * 1024 * 1024 - 1024];
    let r = raw(&client, server.local_addr(), request_code::APPEND, &garbage).await;
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(fake.calls().is_empty());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_is_answered_as_java_answers_it_and_unknown_codes_are_not_supported() {
    let fake = n0_leading();
    let server = serve(fake.clone()).await;
    let client = PeerClient::new(PeerClientConfig::default());
    let pull = PullEntriesRequest { base: base_to("n0"), node_id: Some("n1".into()), begin_index: Some(0) };
    for body in [encode(&pull), Vec::new()] {
        let r = raw(&client, server.local_addr(), request_code::PULL, &body).await;
        assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
        assert_eq!(r.remark.as_deref(), Some(PULL_REMARK));
        assert!(r.body.is_none());
    }
    // A body fastjson could not parse fails there first.
    let r = raw(&client, server.local_addr(), request_code::PULL, b"[").await;
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap().starts_with("PullEntriesRequest body"), "{:?}", r.remark);
    // 50003 and 51000 were never registered.
    for code in [50003, 51000, 51006] {
        let r = raw(&client, server.local_addr(), code, b"{}").await;
        assert_eq!(r.response_code(), ResponseCode::REQUEST_CODE_NOT_SUPPORTED, "{code}");
    }
    assert!(fake.calls().is_empty());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_later_reaches_the_requester() {
    let fake = n0_leading();
    let server = serve(fake.clone()).await;
    let client = Arc::new(PeerClient::new(PeerClientConfig::default()));
    let addr = server.local_addr().to_string();
    let transfer =
        LeadershipTransferRequest { base: base_to("n0"), transfer_id: Some("n0".into()), transferee_id: Some("n1".into()), take_leadership_ledger_index: 7 };
    let pending = tokio::spawn({
        let client = client.clone();
        let addr = addr.clone();
        async move { client.call(&addr, &transfer).await }
    });
    // The handler kept the responder; the request stays unanswered until we answer it.
    for _ in 0..100 {
        if !fake.held.lock().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!pending.is_finished());
    let responder = fake.held.lock().pop().expect("the transfer reached the handler");
    responder.send(LeadershipTransferResponse { base: Base { term: 8, ..Base::default() } });
    let answer = pending.await.unwrap().unwrap();
    assert_eq!((answer.base.code, answer.base.term), (Code::SUCCESS, 8));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_requests_per_peer_are_bounded_and_unanswered_ones_time_out() {
    let leader = Arc::new(Mutex::new(Some("n0".to_owned())));
    let fake = Arc::new(Fake { hold_gets: true, ..Fake::new("n0", leader) });
    let server = serve(fake.clone()).await;
    let config = PeerClientConfig { timeout: Duration::from_millis(300), max_in_flight_per_peer: 2, ..Default::default() };
    let client = Arc::new(PeerClient::new(config));
    let addr = server.local_addr().to_string();
    let get = GetEntriesRequest { base: base_to("n0"), begin_index: Some(1), max_size: 0, index_list: None };

    // An unanswered request times out after the client's timeout and frees its slot.
    let started = std::time::Instant::now();
    let err = client.call(&addr, &get).await.unwrap_err();
    assert!(matches!(err, RpcError::Timeout { timeout, .. } if timeout == Duration::from_millis(300)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(client.in_flight(&addr), 0);
    fake.held_gets.lock().clear();

    // Two held requests fill the peer's slots: a third waits its timeout for one, then fails.
    let held: Vec<_> = (0..2)
        .map(|_| {
            let (client, addr, get) = (client.clone(), addr.clone(), get.clone());
            tokio::spawn(async move { client.call_with_timeout(&addr, &get, Duration::from_secs(10)).await })
        })
        .collect();
    for _ in 0..200 {
        if fake.held_gets.lock().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(client.in_flight(&addr), 2);
    let err = client.call(&addr, &MetadataRequest { base: base_to("n0") }).await.unwrap_err();
    assert!(matches!(err, RpcError::TooManyInFlight { limit: 2, .. }), "{err}");

    // Answered, the held requests come back and free their slots.
    for responder in fake.held_gets.lock().drain(..) {
        responder.send(GetEntriesResponse { base: Base { group: GROUP.into(), ..Base::default() }, entries: vec![entry(1, b"late")] });
    }
    for call in held {
        assert_eq!(call.await.unwrap().unwrap().entries, vec![entry(1, b"late")]);
    }
    assert_eq!(client.in_flight(&addr), 0);
    let meta = client.call(&addr, &MetadataRequest { base: base_to("n0") }).await.unwrap();
    assert_eq!(meta.base.code, Code::SUCCESS);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_client_reconnects_to_a_restarted_peer() {
    let fake = n0_leading();
    let server = serve(fake.clone()).await;
    let addr = server.local_addr();
    let client = PeerClient::new(PeerClientConfig { timeout: Duration::from_millis(500), ..Default::default() });
    let hb = HeartBeatRequest { base: base_to("n0") };
    client.call(&addr.to_string(), &hb).await.unwrap();
    server.shutdown().await;
    let err = client.call(&addr.to_string(), &hb).await.unwrap_err();
    assert!(matches!(err, RpcError::Connection { .. } | RpcError::Timeout { .. }), "{err}");
    let server = serve_at(addr, fake.clone()).await;
    let mut answered = false;
    for _ in 0..20 {
        if client.call(&addr.to_string(), &hb).await.is_ok() {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answered, "no answer after the peer came back");
    server.shutdown().await;
}

struct Group {
    leader: Arc<Mutex<Option<String>>>,
    fakes: Vec<Arc<Fake>>,
    servers: Vec<DLedgerRpcServer>,
    peers: String,
}

async fn group_of_three() -> Group {
    let leader = Arc::new(Mutex::new(None));
    let mut fakes = Vec::new();
    let mut servers = Vec::new();
    let mut listeners = Vec::new();
    for _ in 0..3 {
        // Reserve three ports first: every fake announces all peers.
        listeners.push(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    }
    let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    drop(listeners);
    let peers: BTreeMap<String, String> = addrs.iter().enumerate().map(|(i, a)| (format!("n{i}"), a.to_string())).collect();
    for (i, addr) in addrs.iter().enumerate() {
        let fake = Arc::new(Fake { peers: peers.clone(), ..Fake::new(&format!("n{i}"), leader.clone()) });
        servers.push(serve_at(*addr, fake.clone()).await);
        fakes.push(fake);
    }
    let peers = peers.iter().map(|(id, a)| format!("{id}-{a}")).collect::<Vec<_>>().join(";");
    Group { leader, fakes, servers, peers }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_finds_the_leader_and_follows_it_after_not_leader() {
    let g = group_of_three().await;
    let client = DLedgerClient::new(GROUP, &g.peers).unwrap();

    *g.leader.lock() = Some("n1".into());
    let r = client.append(Bytes::from_static(b"first")).await.unwrap();
    assert_eq!((r.base.code, r.base.leader_id.as_deref(), r.index), (Code::SUCCESS, Some("n1"), 5));
    assert_eq!(client.leader_id().as_deref(), Some("n1"));

    // Leadership moves to n2: n1 answers NOT_LEADER, the client asks for metadata again and
    // sends once more, to n2.
    *g.leader.lock() = Some("n2".into());
    let r = client.append(Bytes::from_static(b"second")).await.unwrap();
    assert_eq!((r.base.code, r.base.leader_id.as_deref(), r.index), (Code::SUCCESS, Some("n2"), 6));
    let got = client.get(3).await.unwrap();
    assert_eq!(got.entries, vec![entry(3, b"got it")]);

    let appends: Vec<_> = g.fakes.iter().map(|f| f.calls().into_iter().filter(|c| *c != "METADATA").collect::<Vec<_>>()).collect();
    assert_eq!(appends, [vec![], vec!["APPEND", "APPEND"], vec!["APPEND", "GET"]]);
    // Requests to the leader carry what Java's client sends: group and remoteId.
    let (_, base) = g.fakes[2].calls.lock().iter().find(|(n, _)| *n == "GET").cloned().unwrap();
    assert_eq!(base, Base { group: GROUP.into(), remote_id: Some("n2".into()), ..Base::default() });

    // Nobody leads: a NOT_LEADER answer is the answer, and then there is no leader to ask.
    *g.leader.lock() = None;
    let r = client.get(3).await.unwrap();
    assert_eq!((r.base.code, r.base.remote_id.as_deref()), (Code::NOT_LEADER, Some("n2")));
    assert!(matches!(client.get(3).await, Err(ClientError::NoLeader { .. })));

    // The leader goes away: the failed call forgets it; the next call finds the new one.
    *g.leader.lock() = Some("n0".into());
    assert_eq!(client.get(4).await.unwrap().entries[0].index, 4);
    let mut servers = g.servers;
    servers.remove(0).shutdown().await;
    *g.leader.lock() = Some("n1".into());
    assert!(matches!(client.get(5).await, Err(ClientError::Rpc { ref peer_id, .. }) if peer_id == "n0"));
    assert_eq!(client.leader_id(), None);
    assert_eq!(client.get(5).await.unwrap().entries[0].index, 5);
    assert_eq!(client.leader_id().as_deref(), Some("n1"));

    // Leadership transfer goes to the named leader with its term, however long it takes.
    let pending = tokio::spawn(async move { client.leadership_transfer("n1", "n2", 9).await });
    for _ in 0..200 {
        if !g.fakes[1].held.lock().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let responder = g.fakes[1].held.lock().pop().unwrap();
    responder.send(LeadershipTransferResponse { base: Base { term: 10, ..Base::default() } });
    assert_eq!(pending.await.unwrap().unwrap().base.term, 10);
    let (_, base) = g.fakes[1].calls.lock().iter().find(|(n, _)| *n == "LEADERSHIP_TRANSFER").cloned().unwrap();
    assert_eq!((base.remote_id.as_deref(), base.term), (Some("n1"), 9));
    for s in servers {
        s.shutdown().await;
    }
}
