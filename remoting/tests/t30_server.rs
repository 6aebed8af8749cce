//! The server over real loopback sockets: dispatch, busy answers, bad input, idle close,
//! graceful shutdown, and the client's reconnect.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use remoting::client::{ClientConfig, RemotingClient};
use remoting::codec::{decode_frame, encode_frame};
use remoting::connection::ConnectionConfig;
use remoting::pool::BusinessPool;
use remoting::server::{Channel, ProcessError, ProcessResult, ProcessorRegistry, RemotingServer, RequestProcessor, ServerConfig};
use remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ECHO: RequestCode = RequestCode(9001);
const FAIL: RequestCode = RequestCode(9002);
const PANIC: RequestCode = RequestCode(9003);
const BLOCK: RequestCode = RequestCode(9004);
const BUSY: RequestCode = RequestCode(9005);
const TIMEOUT: Duration = Duration::from_secs(5);

/// Echoes the body and ext fields back; other codes fail in the ways their names say. BLOCK
/// reports that it started, then waits at the gate.
struct TestProcessor {
    gate: Option<Arc<Barrier>>,
    started: Mutex<std::sync::mpsc::Sender<i32>>,
}

impl RequestProcessor for TestProcessor {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        match request.request_code() {
            FAIL => Err(ProcessError::new(ResponseCode::TOPIC_NOT_EXIST, "no such topic")),
            PANIC => panic!("processor bug"),
            BLOCK => {
                let _ = self.started.lock().unwrap().send(request.opaque);
                if let Some(gate) = &self.gate {
                    gate.wait();
                }
                Ok(Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS)))
            }
            _ => {
                let mut response = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
                response.ext_fields = request.ext_fields.clone();
                response.body = request.body.clone();
                Ok(Some(response))
            }
        }
    }
}

struct AlwaysBusy;

impl RequestProcessor for AlwaysBusy {
    fn process(&self, _: &Channel, request: RemotingCommand) -> ProcessResult {
        Ok(Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS)))
    }
    fn reject(&self) -> bool {
        true
    }
}

struct TestServer {
    server: RemotingServer,
    started: std::sync::mpsc::Receiver<i32>,
}

impl std::ops::Deref for TestServer {
    type Target = RemotingServer;
    fn deref(&self) -> &RemotingServer {
        &self.server
    }
}

impl TestServer {
    async fn shutdown(self) {
        self.server.shutdown().await
    }

    /// Waits until a BLOCK request is running on its (single) worker.
    async fn block_started(&mut self) -> i32 {
        let rx = std::mem::replace(&mut self.started, std::sync::mpsc::channel().1);
        let (opaque, rx) = tokio::task::spawn_blocking(move || (rx.recv_timeout(TIMEOUT).expect("BLOCK started"), rx)).await.unwrap();
        self.started = rx;
        opaque
    }
}

/// Ordinary codes run on a roomy pool; BLOCK gets one worker and a one-slot queue so tests can
/// fill it.
async fn start(gate: Option<Arc<Barrier>>, idle: Duration) -> TestServer {
    let roomy = Arc::new(BusinessPool::new("test", 2, 64).unwrap());
    let tight = Arc::new(BusinessPool::new("tight", 1, 1).unwrap());
    let (tx, started) = std::sync::mpsc::channel();
    let processor: Arc<dyn RequestProcessor> = Arc::new(TestProcessor { gate, started: Mutex::new(tx) });
    let mut registry = ProcessorRegistry::new();
    for code in [ECHO, FAIL, PANIC] {
        registry.register(code, processor.clone(), &roomy);
    }
    registry.register(BLOCK, processor, &tight);
    registry.register(BUSY, Arc::new(AlwaysBusy), &roomy);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.connection = ConnectionConfig { idle_timeout: idle, ..Default::default() };
    TestServer { server: RemotingServer::start(config, registry).await.unwrap(), started }
}

fn client() -> RemotingClient {
    RemotingClient::new(ClientConfig::default())
}

async fn read_frame(stream: &mut TcpStream) -> Option<RemotingCommand> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.ok()?;
    let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut rest).await.ok()?;
    let mut frame = len.to_vec();
    frame.extend_from_slice(&rest);
    Some(decode_frame(&frame).unwrap())
}

/// True when the server closed the connection (read returns EOF or an error).
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(tokio::time::timeout(TIMEOUT, stream.read(&mut buf)).await, Ok(Ok(0)) | Ok(Err(_)))
}

#[tokio::test]
async fn echo_round_trips_header_and_body() {
    let server = start(None, Duration::from_secs(120)).await;
    let addr = server.local_addr().to_string();
    let request = RemotingCommand::request(ECHO).with_ext("k", "v").with_body(&b"payload"[..]);
    let response = client().invoke(&addr, request, TIMEOUT).await.unwrap();
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    assert_eq!(response.ext("k"), Some("v"));
    assert_eq!(response.body.as_deref(), Some(&b"payload"[..]));
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_code_is_not_supported_and_the_connection_stays_open() {
    let server = start(None, Duration::from_secs(120)).await;
    let addr = server.local_addr().to_string();
    let c = client();
    let response = c.invoke(&addr, RemotingCommand::request(RequestCode(4242)), TIMEOUT).await.unwrap();
    assert_eq!(response.response_code(), ResponseCode::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(response.remark.as_deref(), Some(" request type 4242 not supported"));
    let again = c.invoke(&addr, RemotingCommand::request(ECHO), TIMEOUT).await.unwrap();
    assert_eq!(again.response_code(), ResponseCode::SUCCESS);
    server.shutdown().await;
}

#[tokio::test]
async fn processor_errors_and_panics_become_error_responses() {
    let server = start(None, Duration::from_secs(120)).await;
    let addr = server.local_addr().to_string();
    let c = client();
    let failed = c.invoke(&addr, RemotingCommand::request(FAIL), TIMEOUT).await.unwrap();
    assert_eq!((failed.response_code(), failed.remark.as_deref()), (ResponseCode::TOPIC_NOT_EXIST, Some("no such topic")));
    let panicked = c.invoke(&addr, RemotingCommand::request(PANIC), TIMEOUT).await.unwrap();
    assert_eq!(panicked.response_code(), ResponseCode::SYSTEM_ERROR);
    // The worker survived the panic.
    assert_eq!(c.invoke(&addr, RemotingCommand::request(ECHO), TIMEOUT).await.unwrap().code, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn oneway_requests_get_no_response_even_on_error() {
    let server = start(None, Duration::from_secs(120)).await;
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    for (code, opaque) in [(RequestCode(4242), 1), (FAIL, 2), (ECHO, 3)] {
        let cmd = RemotingCommand::request(code).with_opaque(opaque).mark_oneway();
        stream.write_all(&encode_frame(&cmd).unwrap()).await.unwrap();
    }
    let probe = RemotingCommand::request(ECHO).with_opaque(77);
    stream.write_all(&encode_frame(&probe).unwrap()).await.unwrap();
    let first = tokio::time::timeout(TIMEOUT, read_frame(&mut stream)).await.unwrap().unwrap();
    assert_eq!(first.opaque, 77, "the only response is the one to the two-way probe");
    server.shutdown().await;
}

#[tokio::test]
async fn response_uses_the_serialize_type_of_its_request() {
    let server = start(None, Duration::from_secs(120)).await;
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    let cmd = RemotingCommand::request(ECHO).with_ext("a", "1").with_opaque(5).with_serialize_type(SerializeType::RocketMq);
    stream.write_all(&encode_frame(&cmd).unwrap()).await.unwrap();
    let response = read_frame(&mut stream).await.unwrap();
    assert_eq!((response.opaque, response.serialize_type, response.flag), (5, SerializeType::RocketMq, 1));
    server.shutdown().await;
}

#[tokio::test]
async fn a_full_pool_and_a_rejecting_processor_answer_system_busy() {
    let gate = Arc::new(Barrier::new(2));
    let mut server = start(Some(gate.clone()), Duration::from_secs(120)).await;
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    // One worker blocked, one request queued: the third does not fit.
    stream.write_all(&encode_frame(&RemotingCommand::request(BLOCK).with_opaque(1)).unwrap()).await.unwrap();
    assert_eq!(server.block_started().await, 1);
    for opaque in 2..=3 {
        stream.write_all(&encode_frame(&RemotingCommand::request(BLOCK).with_opaque(opaque)).unwrap()).await.unwrap();
    }
    let busy = read_frame(&mut stream).await.unwrap();
    assert_eq!((busy.opaque, busy.response_code()), (3, ResponseCode::SYSTEM_BUSY));
    assert!(busy.remark.unwrap().starts_with("[OVERLOAD]"));
    gate.wait(); // release the first request
    gate.wait(); // and the queued one
    let mut done = vec![read_frame(&mut stream).await.unwrap().opaque, read_frame(&mut stream).await.unwrap().opaque];
    done.sort();
    assert_eq!(done, vec![1, 2]);

    stream.write_all(&encode_frame(&RemotingCommand::request(BUSY).with_opaque(9)).unwrap()).await.unwrap();
    let rejected = read_frame(&mut stream).await.unwrap();
    assert_eq!(rejected.response_code(), ResponseCode::SYSTEM_BUSY);
    assert!(rejected.remark.unwrap().starts_with("[REJECTREQUEST]"));
    server.shutdown().await;
}

#[tokio::test]
async fn bad_input_closes_only_that_connection() {
    let server = start(None, Duration::from_secs(120)).await;
    let addr = server.local_addr();
    let healthy = client();
    let bad_inputs: Vec<Vec<u8>> = vec![
        vec![0x80, 0, 0, 0, 1, 2, 3],                               // a length of 2 GiB
        vec![0x7f, 0xff, 0xff, 0xff],                               // just under 2 GiB
        vec![0, 0, 0, 8, 0, 0, 0, 100, b'{', b'}', 0, 0],           // header longer than the frame
        vec![0, 0, 0, 9, 0, 0, 0, 5, b'n', b'o', b't', b' ', b'j'], // JSON header that is not JSON
        vec![0, 0, 0, 6, 7, 0, 0, 2, b'{', b'}'],                   // unknown serialize type
        vec![0, 0, 0, 2, 0, 0],                                     // frame too small for its header word
        // a plausible length followed by noise
        [0u8, 0, 0x0f, 0xfc].into_iter().chain((0..4092u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)).collect(),
    ];
    for bytes in bad_inputs {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(&bytes).await.unwrap();
        assert!(closed_by_server(&mut stream).await, "not closed after {:02x?}", &bytes[..bytes.len().min(12)]);
        let ok = healthy.invoke(&addr.to_string(), RemotingCommand::request(ECHO), TIMEOUT).await.unwrap();
        assert_eq!(ok.code, 0);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn truncated_frame_waits_for_the_rest() {
    let server = start(None, Duration::from_secs(120)).await;
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    let frame = encode_frame(&RemotingCommand::request(ECHO).with_opaque(3).with_body(&b"abc"[..])).unwrap();
    stream.write_all(&frame[..frame.len() - 2]).await.unwrap();
    stream.flush().await.unwrap();
    let early = tokio::time::timeout(Duration::from_millis(200), read_frame(&mut stream)).await;
    assert!(early.is_err(), "answered before the frame was complete");
    stream.write_all(&frame[frame.len() - 2..]).await.unwrap();
    assert_eq!(read_frame(&mut stream).await.unwrap().body.as_deref(), Some(&b"abc"[..]));
    server.shutdown().await;
}

#[tokio::test]
async fn idle_connections_are_closed() {
    let server = start(None, Duration::from_millis(300)).await;
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    assert!(closed_by_server(&mut stream).await);
    server.shutdown().await;
}

#[tokio::test]
async fn graceful_shutdown_answers_requests_in_flight() {
    let gate = Arc::new(Barrier::new(2));
    let mut server = start(Some(gate.clone()), Duration::from_secs(120)).await;
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    stream.write_all(&encode_frame(&RemotingCommand::request(BLOCK).with_opaque(11)).unwrap()).await.unwrap();
    assert_eq!(server.block_started().await, 11);
    let releaser = std::thread::spawn(move || gate.wait());
    server.shutdown().await;
    releaser.join().unwrap();
    let response = read_frame(&mut stream).await.expect("the in-flight request is answered");
    assert_eq!(response.opaque, 11);
    assert!(closed_by_server(&mut stream).await);
}

#[tokio::test]
async fn client_reconnects_after_the_connection_drops() {
    let server = start(None, Duration::from_secs(120)).await;
    let addr = server.local_addr().to_string();
    let c = client();
    assert_eq!(c.invoke(&addr, RemotingCommand::request(ECHO), TIMEOUT).await.unwrap().code, 0);
    for channel in server.channels() {
        channel.close();
    }
    // The cached channel notices the close; the next call dials again.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        match c.invoke(&addr, RemotingCommand::request(ECHO), TIMEOUT).await {
            Ok(response) => {
                assert_eq!(response.code, 0, "{:?}", response.remark);
                break;
            }
            Err(e) => assert!(tokio::time::Instant::now() < deadline, "never reconnected: {e}"),
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn invoke_times_out_when_no_response_comes() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let _silent = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        drop(socket);
    });
    let err = client().invoke(&addr, RemotingCommand::request(ECHO), Duration::from_millis(200)).await.unwrap_err();
    assert!(err.to_string().contains("no response"), "{err}");
}
