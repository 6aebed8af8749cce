//! The server and client over `tokio::io::duplex` instead of sockets: requests, oneways, bad
//! input, idle close, the connection listener, the metrics observer and the connection cap all
//! behave as they do over TCP; typed calls go over them too.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use remoting::call::{expect_success, CallError, RemotingRequest};
use remoting::client::{client_channel, ClientConfig, RemotingClient};
use remoting::connection::{ConnectionConfig, Endpoints};
use remoting::metrics::rpc::{RpcObserver, RpcRecord, RpcResult};
use remoting::pool::BusinessPool;
use remoting::server::{Channel, ConnectionListener, ProcessResult, ProcessorRegistry, RemotingServer, RequestProcessor, ServerConfig};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ECHO: RequestCode = RequestCode(9001);
const TIMEOUT: Duration = Duration::from_secs(5);
const DUPLEX_BYTES: usize = 64 * 1024;

/// Echoes body and ext fields, and remembers every request it saw (oneways included).
#[derive(Default)]
struct Echo {
    seen: Mutex<Vec<(i32, bool)>>,
}

impl RequestProcessor for Echo {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        self.seen.lock().unwrap().push((request.code, request.is_oneway()));
        let mut response = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
        response.ext_fields = request.ext_fields.clone();
        response.body = request.body.clone();
        Ok(Some(response))
    }
}

#[derive(Default)]
struct Closed {
    peers: Mutex<Vec<SocketAddr>>,
}

impl ConnectionListener for Closed {
    fn on_close(&self, channel: &Channel) {
        self.peers.lock().unwrap().push(channel.remote_addr());
    }
}

#[derive(Default)]
struct Observed {
    records: Mutex<Vec<(i32, i32, RpcResult)>>,
}

impl RpcObserver for Observed {
    fn on_rpc(&self, record: &RpcRecord) {
        self.records.lock().unwrap().push((record.request_code, record.response_code, record.result));
    }
}

struct Fixture {
    server: RemotingServer,
    echo: Arc<Echo>,
    closed: Arc<Closed>,
    observed: Arc<Observed>,
}

fn peer(port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], port))
}

fn server_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 2], 10911))
}

fn endpoints(port: u16) -> Endpoints {
    Endpoints { remote: server_addr(), local: peer(port) }
}

fn in_process_server(connection: ConnectionConfig, max_connections: usize) -> Fixture {
    let echo = Arc::new(Echo::default());
    let closed = Arc::new(Closed::default());
    let observed = Arc::new(Observed::default());
    let pool = Arc::new(BusinessPool::new("echo", 1, 64).unwrap());
    let mut registry = ProcessorRegistry::new();
    registry.register(ECHO, echo.clone(), &pool);
    registry.set_connection_listener(closed.clone());
    registry.set_rpc_observer(observed.clone());
    let config = ServerConfig { connection, max_connections, ..ServerConfig::new(server_addr()) };
    Fixture { server: RemotingServer::in_process(config, registry), echo, closed, observed }
}

async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_request_over_a_duplex_stream_is_answered_and_observed() {
    let fixture = in_process_server(ConnectionConfig::default(), 16);
    let (client_end, server_end) = tokio::io::duplex(DUPLEX_BYTES);
    let served = fixture.server.serve_stream(server_end, peer(40001)).unwrap();
    assert_eq!((served.remote_addr(), served.local_addr()), (peer(40001), server_addr()));
    assert_eq!(fixture.server.connection_count(), 1);

    let client = client_channel(client_end, endpoints(40001), &ConnectionConfig::default());
    let request = RemotingCommand::request(ECHO).with_ext("k", "v").with_body(&b"hello"[..]);
    let response = client.invoke(request, TIMEOUT).await.unwrap();

    assert_eq!(response.code, ResponseCode::SUCCESS.0);
    assert_eq!(response.ext("k"), Some("v"));
    assert_eq!(response.body_bytes(), b"hello");
    // The observer hears of a response once it is queued, which may be after it was read.
    eventually("the response is observed", || !fixture.observed.records.lock().unwrap().is_empty()).await;
    assert_eq!(fixture.observed.records.lock().unwrap().clone(), vec![(ECHO.0, ResponseCode::SUCCESS.0, RpcResult::Success)]);
    fixture.server.shutdown().await;
}

#[tokio::test]
async fn an_unknown_code_over_a_duplex_stream_is_not_supported() {
    let fixture = in_process_server(ConnectionConfig::default(), 16);
    let (client_end, server_end) = tokio::io::duplex(DUPLEX_BYTES);
    fixture.server.serve_stream(server_end, peer(40002)).unwrap();
    let client = client_channel(client_end, endpoints(40002), &ConnectionConfig::default());

    let response = client.invoke(RemotingCommand::request(RequestCode(777)), TIMEOUT).await.unwrap();

    assert_eq!(response.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0);
    fixture.server.shutdown().await;
}

#[tokio::test]
async fn a_oneway_over_a_duplex_stream_runs_and_gets_nothing_back() {
    let fixture = in_process_server(ConnectionConfig::default(), 16);
    let (client_end, server_end) = tokio::io::duplex(DUPLEX_BYTES);
    fixture.server.serve_stream(server_end, peer(40003)).unwrap();
    let client = client_channel(client_end, endpoints(40003), &ConnectionConfig::default());

    client.invoke_oneway(RemotingCommand::request(ECHO)).unwrap();
    eventually("the oneway ran", || !fixture.echo.seen.lock().unwrap().is_empty()).await;
    // A request sent after it is answered first: nothing was queued for the oneway.
    let response = client.invoke(RemotingCommand::request(ECHO), TIMEOUT).await.unwrap();

    assert_eq!(response.code, ResponseCode::SUCCESS.0);
    assert_eq!(fixture.echo.seen.lock().unwrap().clone(), vec![(ECHO.0, true), (ECHO.0, false)]);
    eventually("both are observed", || fixture.observed.records.lock().unwrap().len() == 2).await;
    let results: Vec<RpcResult> = fixture.observed.records.lock().unwrap().iter().map(|r| r.2).collect();
    assert_eq!(results, vec![RpcResult::Oneway, RpcResult::Success]);
    fixture.server.shutdown().await;
}

#[tokio::test]
async fn a_malformed_frame_closes_the_stream_and_tells_the_listener() {
    let fixture = in_process_server(ConnectionConfig::default(), 16);
    let (mut raw, server_end) = tokio::io::duplex(DUPLEX_BYTES);
    fixture.server.serve_stream(server_end, peer(40004)).unwrap();

    // A frame whose header length (0xFFFFFF) runs past its total length (8).
    raw.write_all(&[0, 0, 0, 8, 0, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]).await.unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(TIMEOUT, raw.read_to_end(&mut rest)).await.expect("the server closes the stream");

    assert_eq!(read.unwrap(), 0, "nothing is answered");
    eventually("the listener is told", || fixture.closed.peers.lock().unwrap().as_slice() == [peer(40004)]).await;
    assert_eq!(fixture.server.connection_count(), 0);
    fixture.server.shutdown().await;
}

#[tokio::test]
async fn an_idle_stream_is_closed() {
    let idle = ConnectionConfig { idle_timeout: Duration::from_millis(200), ..ConnectionConfig::default() };
    let fixture = in_process_server(idle, 16);
    let (mut raw, server_end) = tokio::io::duplex(DUPLEX_BYTES);
    let served = fixture.server.serve_stream(server_end, peer(40005)).unwrap();

    let mut rest = Vec::new();
    let read = tokio::time::timeout(TIMEOUT, raw.read_to_end(&mut rest)).await.expect("the server closes an idle stream");

    assert_eq!(read.unwrap(), 0);
    assert!(served.is_closed());
    eventually("the listener is told", || fixture.closed.peers.lock().unwrap().len() == 1).await;
    fixture.server.shutdown().await;
}

#[tokio::test]
async fn streams_past_the_connection_cap_are_refused() {
    let fixture = in_process_server(ConnectionConfig::default(), 1);
    let (_first_client, first) = tokio::io::duplex(DUPLEX_BYTES);
    let (mut second_client, second) = tokio::io::duplex(DUPLEX_BYTES);
    fixture.server.serve_stream(first, peer(40006)).unwrap();

    let refused = fixture.server.serve_stream(second, peer(40007)).unwrap_err();

    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    let mut rest = Vec::new();
    assert_eq!(second_client.read_to_end(&mut rest).await.unwrap(), 0, "the refused stream is dropped");
    assert_eq!(fixture.server.connection_count(), 1);
    fixture.server.shutdown().await;
}

#[tokio::test]
async fn a_client_sends_to_an_address_over_an_attached_stream() {
    let fixture = in_process_server(ConnectionConfig::default(), 16);
    let (client_end, server_end) = tokio::io::duplex(DUPLEX_BYTES);
    fixture.server.serve_stream(server_end, peer(40008)).unwrap();
    let client = RemotingClient::new(ClientConfig::default());
    // Nothing listens at this address: the call can only go over the stream.
    client.attach_stream("10.0.0.2:10911", client_end, endpoints(40008));

    let response = client.invoke("10.0.0.2:10911", RemotingCommand::request(ECHO).with_body(&b"x"[..]), TIMEOUT).await.unwrap();

    assert_eq!(response.body_bytes(), b"x");
    client.shutdown();
    fixture.server.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_in_process_streams() {
    let fixture = in_process_server(ConnectionConfig::default(), 16);
    let (mut raw, server_end) = tokio::io::duplex(DUPLEX_BYTES);
    fixture.server.serve_stream(server_end, peer(40009)).unwrap();

    fixture.server.shutdown().await;

    let mut rest = Vec::new();
    let read = tokio::time::timeout(TIMEOUT, raw.read_to_end(&mut rest)).await.expect("shutdown closes the stream");
    assert_eq!(read.unwrap(), 0);
}

/// A typed request for the echo processor: its `name` goes out in a header and comes back.
struct Greet {
    name: &'static str,
}

impl RemotingRequest for Greet {
    const CODE: RequestCode = ECHO;
    type Response = String;

    fn into_command(self) -> RemotingCommand {
        RemotingCommand::request(Self::CODE).with_ext("name", self.name)
    }

    fn parse_response(response: RemotingCommand) -> Result<String, CallError> {
        let answer = expect_success(response)?;
        answer.ext("name").map(str::to_owned).ok_or_else(|| CallError::BadResponse { reason: "no name".into() })
    }
}

/// The same request under a code nobody serves.
struct Unserved;

impl RemotingRequest for Unserved {
    const CODE: RequestCode = RequestCode(778);
    type Response = ();

    fn into_command(self) -> RemotingCommand {
        RemotingCommand::request(Self::CODE)
    }

    fn parse_response(response: RemotingCommand) -> Result<(), CallError> {
        expect_success(response).map(drop)
    }
}

#[tokio::test]
async fn a_typed_call_over_a_duplex_stream_returns_its_typed_answer() {
    let fixture = in_process_server(ConnectionConfig::default(), 16);
    let (client_end, server_end) = tokio::io::duplex(DUPLEX_BYTES);
    fixture.server.serve_stream(server_end, peer(40010)).unwrap();
    let client = client_channel(client_end, endpoints(40010), &ConnectionConfig::default());

    let greeted = client.call(Greet { name: "ada" }, TIMEOUT).await.unwrap();
    let refused = client.call(Unserved, TIMEOUT).await.unwrap_err();

    assert_eq!(greeted, "ada");
    assert!(matches!(refused, CallError::Refused { code: ResponseCode::REQUEST_CODE_NOT_SUPPORTED, .. }), "{refused:?}");
    fixture.server.shutdown().await;
}

#[tokio::test]
async fn a_typed_call_by_address_goes_over_the_attached_stream() {
    let fixture = in_process_server(ConnectionConfig::default(), 16);
    let (client_end, server_end) = tokio::io::duplex(DUPLEX_BYTES);
    fixture.server.serve_stream(server_end, peer(40011)).unwrap();
    let client = RemotingClient::new(ClientConfig::default());
    client.attach_stream("10.0.0.2:10911", client_end, endpoints(40011));

    client.call_oneway("10.0.0.2:10911", Greet { name: "oneway" }).await.unwrap();
    let greeted = client.call("10.0.0.2:10911", Greet { name: "grace" }, TIMEOUT).await.unwrap();

    assert_eq!(greeted, "grace");
    assert_eq!(fixture.echo.seen.lock().unwrap().clone(), vec![(ECHO.0, true), (ECHO.0, false)]);
    client.shutdown();
    fixture.server.shutdown().await;
}

/// A command pipe: the same server path with nothing encoded. The body reaches the processor and
/// comes back as the same bytes (not a copy), a body in parts arrives joined, an unknown code is refused as over a socket, and a
/// command over the frame limit closes the connection as an unencodable frame does.
#[tokio::test]
async fn a_command_pipe_carries_commands_unencoded_with_the_same_answers_and_limits() {
    use remoting::connection::{command_pipe, spawn_commands, InFlight, InboundHandler, Side};

    struct NoRequests;
    impl InboundHandler for NoRequests {
        fn on_request(&self, _channel: &Channel, _request: RemotingCommand, _in_flight: InFlight) {}
    }

    let small_frames = ConnectionConfig { max_frame_bytes: 64 * 1024, ..ConnectionConfig::default() };
    let fixture = in_process_server(small_frames.clone(), 16);
    let (client_end, server_end) = command_pipe();
    let served = fixture.server.serve_commands(server_end, peer(40101)).unwrap();
    assert_eq!((served.remote_addr(), served.local_addr()), (peer(40101), server_addr()));
    let client = spawn_commands(client_end, endpoints(40101), &small_frames, Side::Client, Arc::new(NoRequests));

    let body = bytes::Bytes::from(vec![7u8; 1000]);
    let request = RemotingCommand::request(ECHO).with_ext("k", "v").with_body(body.clone());
    let response = client.invoke(request, TIMEOUT).await.unwrap();
    assert_eq!((response.code, response.ext("k")), (ResponseCode::SUCCESS.0, Some("v")));
    assert_eq!(response.body.as_ref().map(|b| b.as_ptr()), Some(body.as_ptr()), "the body crossed without a copy");
    let parts = vec![bytes::Bytes::from_static(b"in "), bytes::Bytes::from_static(b"parts")];
    let joined = client.invoke(RemotingCommand::request(ECHO).with_body_parts(parts), TIMEOUT).await.unwrap();
    assert_eq!((joined.body_bytes(), joined.body_tail.len()), (&b"in parts"[..], 0), "a body in parts arrives as one");

    let unknown = client.invoke(RemotingCommand::request(RequestCode(9999)), TIMEOUT).await.unwrap();
    assert_eq!(unknown.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0);

    let oversize = RemotingCommand::request(ECHO).with_body(vec![0u8; 128 * 1024]);
    assert!(client.invoke(oversize, TIMEOUT).await.is_err(), "a command over the frame limit is not delivered");
    eventually("the connection is closed on both ends", || client.is_closed() && fixture.server.connection_count() == 0).await;
    assert_eq!(fixture.echo.seen.lock().unwrap().len(), 2, "only the first two requests reached the processor");
    fixture.server.shutdown().await;
}
