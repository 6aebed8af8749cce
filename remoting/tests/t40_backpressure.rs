//! Per-connection bounds over real loopback sockets: a peer that does not read is no longer read
//! (and is closed once deferred answers pile up past the hard limit), a reading peer gets every
//! answer, pools refuse by bytes, connections are capped, and bad UTF-8 in a header is answered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use bytes::Bytes;
use remoting::codec::{decode_frame, encode_frame};
use remoting::connection::ConnectionConfig;
use remoting::pool::BusinessPool;
use remoting::server::{Channel, ProcessResult, ProcessorRegistry, RemotingServer, Reply, RequestProcessor, ServerConfig};
use remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;

/// Answered with [`LARGE_BYTES`] of body.
const LARGE: RequestCode = RequestCode(9101);
/// Parked: answered later through a [`Reply`], when the test says so.
const PARK: RequestCode = RequestCode(9102);
const ECHO: RequestCode = RequestCode(9103);
/// Holds its (single) worker until the test passes the gate.
const BLOCK: RequestCode = RequestCode(9104);

const LARGE_BYTES: usize = 64 * 1024;
const MAX_FRAME_BYTES: usize = 1024 * 1024;
const HIGH_WATER_MARK_BYTES: usize = 1024 * 1024;
const LOW_WATER_MARK_BYTES: usize = 512 * 1024;
const WRITE_QUEUE_LIMIT_BYTES: usize = 16 * 1024 * 1024;
const IN_FLIGHT_LIMIT_REQUESTS: usize = 64;
/// What a client that reads nothing can make the server queue with its requests alone: the high
/// water mark plus an answer to each request in processing (body and a generous header).
const OWED_BOUND_BYTES: usize = HIGH_WATER_MARK_BYTES + IN_FLIGHT_LIMIT_REQUESTS * (LARGE_BYTES + 1024);
const TIMEOUT: Duration = Duration::from_secs(20);

struct TestProcessor {
    large_body: Bytes,
    large_done: AtomicUsize,
    parked: Mutex<Vec<Reply>>,
    blocked: AtomicUsize,
    gate: Arc<Barrier>,
}

impl RequestProcessor for TestProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let mut response = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
        match request.request_code() {
            LARGE => {
                self.large_done.fetch_add(1, Ordering::SeqCst);
                response.body = Some(self.large_body.clone());
            }
            PARK => {
                self.parked.lock().unwrap().push(Reply::to(channel, &request));
                return Ok(None);
            }
            BLOCK => {
                self.blocked.fetch_add(1, Ordering::SeqCst);
                self.gate.wait();
            }
            _ => {
                response.ext_fields = request.ext_fields.clone();
                response.body = request.body.clone();
            }
        }
        Ok(Some(response))
    }
}

struct TestServer {
    server: RemotingServer,
    processor: Arc<TestProcessor>,
    tight: Arc<BusinessPool>,
}

impl TestServer {
    /// The one connection the server holds.
    fn channel(&self) -> Option<Channel> {
        self.server.channels().into_iter().next()
    }

    /// Answers every parked request with `body_bytes` of body; returns how many it answered.
    fn answer_parked(&self, body_bytes: usize) -> usize {
        let body = Bytes::from(vec![b'p'; body_bytes]);
        let parked: Vec<Reply> = std::mem::take(&mut *self.processor.parked.lock().unwrap());
        let count = parked.len();
        for reply in parked {
            reply.send(RemotingCommand::response_to(&RemotingCommand::default(), ResponseCode::SUCCESS).with_body(body.clone()));
        }
        count
    }

    /// Waits until the server holds no connection and has no byte accounted.
    async fn until_empty(&self) {
        eventually("the server's connections and bytes are gone", || {
            self.server.connection_count() == 0 && self.server.queued_outbound_bytes() == 0 && self.server.in_flight_bytes() == 0
        })
        .await;
        assert_eq!(self.tight.queued_bytes(), 0);
    }
}

/// LARGE, PARK and ECHO run on a roomy pool; BLOCK on one worker whose queue holds 100 KiB.
async fn start(max_connections: usize) -> TestServer {
    let processor = Arc::new(TestProcessor {
        large_body: Bytes::from(vec![b'x'; LARGE_BYTES]),
        large_done: AtomicUsize::new(0),
        parked: Mutex::new(Vec::new()),
        blocked: AtomicUsize::new(0),
        gate: Arc::new(Barrier::new(2)),
    });
    let roomy = Arc::new(BusinessPool::new("roomy", 2, 10_000).unwrap());
    let tight = Arc::new(BusinessPool::with_capacity_bytes("tight", 1, 64, 100 * 1024).unwrap());
    let mut registry = ProcessorRegistry::new();
    for code in [LARGE, PARK, ECHO] {
        registry.register(code, processor.clone(), &roomy);
    }
    registry.register(BLOCK, processor.clone(), &tight);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.max_connections = max_connections;
    config.connection = ConnectionConfig {
        max_frame_bytes: MAX_FRAME_BYTES,
        write_buffer_high_water_mark_bytes: HIGH_WATER_MARK_BYTES,
        write_buffer_low_water_mark_bytes: LOW_WATER_MARK_BYTES,
        write_queue_limit_bytes: WRITE_QUEUE_LIMIT_BYTES,
        in_flight_limit_requests: IN_FLIGHT_LIMIT_REQUESTS,
        ..ConnectionConfig::default()
    };
    TestServer { server: RemotingServer::start(config, registry).await.unwrap(), processor, tight }
}

/// Polls `condition` until it holds, failing after [`TIMEOUT`].
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A client socket with a small receive buffer, so the kernel absorbs little of what the server
/// writes and the server's own queue is what fills.
async fn connect_small(server: &TestServer) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.connect(server.server.local_addr()).await.unwrap()
}

fn frames(code: RequestCode, opaques: std::ops::RangeInclusive<i32>) -> Vec<u8> {
    opaques.flat_map(|opaque| encode_frame(&RemotingCommand::request(code).with_opaque(opaque)).unwrap().to_vec()).collect()
}

async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Option<RemotingCommand> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.ok()?;
    let mut frame = vec![0u8; 4 + u32::from_be_bytes(len) as usize];
    frame[..4].copy_from_slice(&len);
    stream.read_exact(&mut frame[4..]).await.ok()?;
    Some(decode_frame(&frame).unwrap())
}

async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(tokio::time::timeout(TIMEOUT, stream.read(&mut buf)).await, Ok(Ok(0)) | Ok(Err(_)))
}

async fn echo(stream: &mut TcpStream, opaque: i32) -> RemotingCommand {
    stream.write_all(&encode_frame(&RemotingCommand::request(ECHO).with_opaque(opaque)).unwrap()).await.unwrap();
    tokio::time::timeout(TIMEOUT, read_frame(stream)).await.expect("answered in time").expect("answered")
}

const PIPELINED: i32 = 2000;

/// Sends `PIPELINED` LARGE requests (125 MiB of answers) without reading, and waits until the
/// server has stopped reading them, checking on the way that what it queued and holds stays
/// within the bounds. Returns the read half and the task writing the requests.
async fn pipeline_until_paused(server: &TestServer, stream: TcpStream) -> (OwnedReadHalf, JoinHandle<OwnedWriteHalf>) {
    let (read_half, mut write_half) = stream.into_split();
    // The writes block once the server stops reading, so they run on their own task.
    let writer = tokio::spawn(async move {
        write_half.write_all(&frames(LARGE, 1..=PIPELINED)).await.unwrap();
        write_half
    });
    let mut channel = None;
    eventually("the server pauses reading", || {
        channel = channel.take().or_else(|| server.channel());
        let Some(channel) = &channel else { return false };
        assert_within_bounds(channel);
        channel.is_reading_paused()
    })
    .await;
    let channel = channel.expect("the connection");
    eventually("the requests it read are finished", || channel.in_flight_bytes() == 0).await;
    let done = server.processor.large_done.load(Ordering::SeqCst);
    assert!(done < PIPELINED as usize, "the server read all {done} requests of a client that does not read");
    assert!(channel.is_reading_paused(), "resumed although nothing was read");
    assert!(channel.queued_outbound_bytes() > LOW_WATER_MARK_BYTES, "paused with little queued");
    assert_within_bounds(&channel);
    (read_half, writer)
}

fn assert_within_bounds(channel: &Channel) {
    assert!(!channel.is_closed(), "closed while answering what it had read");
    let queued = channel.queued_outbound_bytes();
    assert!(queued <= OWED_BOUND_BYTES, "{queued} bytes queued, more than the {OWED_BOUND_BYTES} a paused reader allows");
    assert!(channel.in_flight_requests() <= IN_FLIGHT_LIMIT_REQUESTS);
}

#[tokio::test]
async fn a_client_that_never_reads_is_no_longer_read_and_its_bytes_are_freed_when_it_goes() {
    let server = start(100).await;
    let stream = connect_small(&server).await;
    let (read_half, writer) = pipeline_until_paused(&server, stream).await;
    writer.abort();
    // Cancelled, or finished with the write half as its output: either way the socket closes.
    drop((read_half, writer.await));
    server.until_empty().await;
}

#[tokio::test]
async fn deferred_answers_past_the_hard_limit_close_the_connection_and_free_its_queue() {
    let server = start(100).await;
    let mut stream = connect_small(&server).await;
    // 64 parked requests, then answers of 512 KiB each: 32 MiB for a client that does not read.
    stream.write_all(&frames(PARK, 1..=64)).await.unwrap();
    eventually("all requests are parked", || server.processor.parked.lock().unwrap().len() == 64).await;
    let channel = server.channel().expect("the connection");
    assert_eq!(server.answer_parked(MAX_FRAME_BYTES / 2), 64);
    assert!(channel.is_closed(), "still open with the answers past the hard limit");
    assert!(channel.queued_outbound_bytes() <= WRITE_QUEUE_LIMIT_BYTES);
    server.until_empty().await;
    // Whatever the kernel had taken is readable, then the connection ends.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(TIMEOUT, stream.read_to_end(&mut rest)).await.expect("closed by the server");
    assert!(rest.len() < 64 * MAX_FRAME_BYTES / 2);
    let mut other = TcpStream::connect(server.server.local_addr()).await.unwrap();
    assert_eq!(echo(&mut other, 1).await.response_code(), ResponseCode::SUCCESS);
}

#[tokio::test]
async fn a_pipelining_client_that_reads_gets_every_answer_once_the_pause_resumes() {
    let server = start(100).await;
    let stream = connect_small(&server).await;
    let (mut read_half, writer) = pipeline_until_paused(&server, stream).await;
    let channel = server.channel().expect("the connection");
    let mut answered = vec![false; PIPELINED as usize + 1];
    for i in 0..PIPELINED {
        if i % 50 == 0 {
            assert_within_bounds(&channel);
        }
        let response = tokio::time::timeout(TIMEOUT, read_frame(&mut read_half)).await.expect("in time").expect("an answer");
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        assert_eq!(response.body.as_ref().map(Bytes::len), Some(LARGE_BYTES));
        answered[response.opaque as usize] = true;
    }
    assert!(answered[1..].iter().all(|a| *a), "every request answered once");
    assert!(!channel.is_closed() && !channel.is_reading_paused());
    eventually("the server's bytes are back to zero", || server.server.queued_outbound_bytes() == 0 && server.server.in_flight_bytes() == 0).await;
    drop((read_half, writer.await.unwrap()));
    server.until_empty().await;
}

#[tokio::test]
async fn a_request_past_the_pools_byte_capacity_is_answered_system_busy() {
    let server = start(100).await;
    let mut stream = TcpStream::connect(server.server.local_addr()).await.unwrap();
    let block = |opaque: i32, body_bytes: usize| encode_frame(&RemotingCommand::request(BLOCK).with_opaque(opaque).with_body(vec![0u8; body_bytes])).unwrap();
    stream.write_all(&block(1, 0)).await.unwrap();
    eventually("the first request holds the worker", || server.processor.blocked.load(Ordering::SeqCst) == 1).await;
    // 60 KiB waits in the 100 KiB queue; another 60 KiB does not fit, though 62 jobs would.
    stream.write_all(&block(2, 60 * 1024)).await.unwrap();
    eventually("the second request is queued", || server.tight.queued() == 1).await;
    stream.write_all(&block(3, 60 * 1024)).await.unwrap();
    let busy = tokio::time::timeout(TIMEOUT, read_frame(&mut stream)).await.unwrap().unwrap();
    assert_eq!((busy.opaque, busy.response_code()), (3, ResponseCode::SYSTEM_BUSY));
    assert_eq!(busy.remark.as_deref(), Some("[OVERLOAD]system busy, start flow control for a while"));
    let gate = server.processor.gate.clone();
    tokio::task::spawn_blocking(move || {
        gate.wait();
        gate.wait();
    })
    .await
    .unwrap();
    let mut done = [read_frame(&mut stream).await.unwrap().opaque, read_frame(&mut stream).await.unwrap().opaque];
    done.sort();
    assert_eq!(done, [1, 2]);
}

#[tokio::test]
async fn connections_beyond_the_cap_are_closed_and_the_others_keep_working() {
    let server = start(3).await;
    let addr = server.server.local_addr();
    let mut served = Vec::new();
    for i in 0..3 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        assert_eq!(echo(&mut stream, i).await.response_code(), ResponseCode::SUCCESS);
        served.push(stream);
    }
    let mut refused = TcpStream::connect(addr).await.unwrap();
    let _ = refused.write_all(&encode_frame(&RemotingCommand::request(ECHO).with_opaque(9)).unwrap()).await;
    assert!(closed_by_server(&mut refused).await, "the fourth connection was served");
    for (i, stream) in served.iter_mut().enumerate() {
        assert_eq!(echo(stream, 10 + i as i32).await.response_code(), ResponseCode::SUCCESS);
    }
    // A closed connection makes room for a new one.
    drop(served.pop());
    eventually("the closed connection is forgotten", || server.server.connection_count() == 2).await;
    let mut again = TcpStream::connect(addr).await.unwrap();
    assert_eq!(echo(&mut again, 20).await.response_code(), ResponseCode::SUCCESS);
}

#[tokio::test]
async fn invalid_utf8_in_a_json_header_is_answered_instead_of_closing_the_connection() {
    let server = start(100).await;
    let mut stream = TcpStream::connect(server.server.local_addr()).await.unwrap();
    let header =
        b"{\"code\":9103,\"extFields\":{\"k\":\"a\xffb\"},\"flag\":0,\"language\":\"JAVA\",\"opaque\":7,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":409}";
    let mut frame = ((4 + header.len()) as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    stream.write_all(&frame).await.unwrap();
    let response = tokio::time::timeout(TIMEOUT, read_frame(&mut stream)).await.unwrap().expect("an answer");
    assert_eq!((response.opaque, response.response_code()), (7, ResponseCode::SUCCESS));
    assert_eq!(response.ext("k"), Some("a\u{FFFD}b"));
    assert_eq!(echo(&mut stream, 8).await.opaque, 8, "the connection stays open");
}

#[tokio::test]
async fn invalid_utf8_in_a_binary_header_is_answered_instead_of_closing_the_connection() {
    let server = start(100).await;
    let mut stream = TcpStream::connect(server.server.local_addr()).await.unwrap();
    let request = RemotingCommand::request(ECHO).with_opaque(7).with_ext("k", "aZb").with_serialize_type(SerializeType::RocketMq);
    let mut frame = encode_frame(&request).unwrap().to_vec();
    let z = frame.iter().rposition(|b| *b == b'Z').unwrap();
    frame[z] = 0xff;
    stream.write_all(&frame).await.unwrap();
    let response = tokio::time::timeout(TIMEOUT, read_frame(&mut stream)).await.unwrap().expect("an answer");
    assert_eq!((response.opaque, response.serialize_type), (7, SerializeType::RocketMq));
    assert_eq!(response.ext("k"), Some("a\u{FFFD}b"));
    assert_eq!(echo(&mut stream, 8).await.opaque, 8, "the connection stays open");
}

/// Answers with a header only and says so; the first request holds the one worker until the
/// gate is passed.
struct SmallAnswers {
    held: std::sync::atomic::AtomicBool,
    gate: Arc<Barrier>,
}

impl RequestProcessor for SmallAnswers {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        if !self.held.swap(true, Ordering::SeqCst) {
            self.gate.wait();
        }
        Ok(Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS)))
    }

    fn answers_are_small(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn pipelined_requests_with_small_answers_do_not_pause_the_reading_of_what_follows() {
    const SMALL: RequestCode = RequestCode(9105);
    let gate = Arc::new(Barrier::new(2));
    let small = Arc::new(SmallAnswers { held: Default::default(), gate: gate.clone() });
    let one = Arc::new(BusinessPool::new("small", 1, 10_000).unwrap());
    let roomy = Arc::new(BusinessPool::new("roomy", 2, 10_000).unwrap());
    let mut registry = ProcessorRegistry::new();
    registry.register(SMALL, small, &one);
    let echoing = Arc::new(TestProcessor {
        large_body: Bytes::new(),
        large_done: AtomicUsize::new(0),
        parked: Mutex::new(Vec::new()),
        blocked: AtomicUsize::new(0),
        gate: Arc::new(Barrier::new(2)),
    });
    registry.register(ECHO, echoing, &roomy);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.connection = ConnectionConfig { in_flight_limit_requests: IN_FLIGHT_LIMIT_REQUESTS, ..ConnectionConfig::default() };
    let server = RemotingServer::start(config, registry).await.unwrap();
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    // Three times the count of large answers, all held behind the first one.
    let count = 3 * IN_FLIGHT_LIMIT_REQUESTS as i32;
    stream.write_all(&frames(SMALL, 1..=count)).await.unwrap();
    let echoed = echo(&mut stream, count + 1).await;
    assert_eq!((echoed.opaque, echoed.response_code()), (count + 1, ResponseCode::SUCCESS), "read and answered behind the held ones");
    let channel = server.channels().into_iter().next().expect("the connection");
    assert_eq!(channel.in_flight_requests(), count as usize, "the small ones still wait");
    tokio::task::spawn_blocking(move || gate.wait()).await.unwrap();
    for _ in 0..count {
        let r = tokio::time::timeout(TIMEOUT, read_frame(&mut stream)).await.expect("in time").expect("an answer");
        assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    }
    server.shutdown().await;
}
