//! Malformed gRPC requests sent as raw HTTP/2 frames: garbage and truncated protobuf, a declared
//! length past the limit, one under it whose bytes never come. Each ends with an error status,
//! the server keeps serving, and no allocation is ever sized by a declared length.

// The test binary's allocator records allocation sizes (the one unsafe block here).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use prost::Message as _;
use proxy::backend::{Backend, BackendError, ClientRequests, GroupSettings, TopicRoute};
use proxy::config::ProxyConfig;
use proxy::pb;
use proxy::server::GrpcServer;
use proxy::service::Messaging;
use remoting::RemotingCommand;

/// The largest single allocation made while [`LARGEST_ALLOCATION`] is watched.
struct Watching;

static LARGEST_ALLOCATION: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only records the sizes asked for.
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Watching = Watching;

/// No brokers: the requests here never get past decoding, but for the last one.
struct NoBrokers;

impl Backend for NoBrokers {
    fn invoke(&self, _: &str, name: &str, _: RemotingCommand, _: Duration) -> BoxFuture<'static, Result<RemotingCommand, BackendError>> {
        let name = name.to_owned();
        Box::pin(async move { Err(BackendError::NoBroker(name)) })
    }
    fn brokers(&self) -> Vec<String> {
        vec![]
    }
    fn route(&self, _: &str) -> Option<TopicRoute> {
        None
    }
    fn group(&self, _: &str) -> Option<GroupSettings> {
        None
    }
    fn client_gone(&self, _: &str) {}
    fn set_client_requests(&self, _: Arc<dyn ClientRequests>) {}
}

const MAX_MESSAGE_BYTES: usize = 130 * 1024 * 1024;

async fn start() -> GrpcServer {
    let config = ProxyConfig { grpc_max_inbound_message_size: MAX_MESSAGE_BYTES, ..Default::default() };
    let service = Messaging::new(config, Arc::new(NoBrokers));
    GrpcServer::start("127.0.0.1:0".parse().expect("address"), service).await.expect("gRPC server starts")
}

fn prefix(declared: u32) -> Vec<u8> {
    let mut v = vec![0];
    v.extend_from_slice(&declared.to_be_bytes());
    v
}

fn framed(payload: &[u8]) -> Vec<u8> {
    [prefix(payload.len() as u32), payload.to_vec()].concat()
}

/// An HTTP/2 connection speaking raw gRPC frames.
struct Raw {
    client: h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
}

impl Raw {
    async fn connect(addr: SocketAddr) -> Raw {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
        tokio::spawn(connection);
        Raw { client, addr }
    }

    /// Opens a call of `method` and sends `body`, ending the stream if `end`.
    async fn call(&mut self, method: &str, body: Vec<u8>, end: bool) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
        let request = http::Request::post(format!("http://{}/apache.rocketmq.v2.MessagingService/{method}", self.addr))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .expect("request");
        let client = self.client.clone().ready().await.expect("connection ready");
        self.client = client;
        let (response, mut send) = self.client.send_request(request, false).expect("stream opens");
        send.send_data(Bytes::from(body), end).expect("data sent");
        (response, send)
    }
}

/// grpc-message is percent-encoded.
fn percent_decoded(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The call's grpc-status and grpc-message, from the headers (trailers-only) or the trailers.
async fn status_of(response: h2::client::ResponseFuture) -> (i32, String) {
    let response = tokio::time::timeout(Duration::from_secs(10), response).await.expect("answered in time").expect("response");
    let (parts, mut body) = response.into_parts();
    let read = |h: &http::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok()?.parse::<i32>().ok())
            .map(|code| (code, percent_decoded(h.get("grpc-message").and_then(|v| v.to_str().ok()).unwrap_or_default())))
    };
    if let Some(s) = read(&parts.headers) {
        return s;
    }
    while let Some(data) = body.data().await {
        let _ = data.expect("body");
    }
    let trailers = body.trailers().await.expect("trailers").unwrap_or_default();
    read(&trailers).expect("a grpc-status")
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_requests_end_in_an_error_status_and_the_server_keeps_serving() {
    let server = start().await;
    let addr = server.local_addr();
    let mut raw = Raw::connect(addr).await;

    // Garbage: 0xFF is a field number 31 with the invalid wire type 7.
    let (r, _s) = raw.call("SendMessage", framed(&[0xFF; 8]), true).await;
    let (code, message) = status_of(r).await;
    // As grpc-java in Java's proxy: UNKNOWN, no message.
    assert_eq!((code, message.as_str()), (tonic::Code::Unknown as i32, ""), "garbage");

    // A truncated message: a valid SendMessageRequest cut in the middle of a field.
    let whole = pb::SendMessageRequest {
        messages: vec![pb::Message {
            topic: Some(pb::Resource { resource_namespace: String::new(), name: "T".repeat(40) }),
            body: vec![1; 64],
            ..Default::default()
        }],
    }
    .encode_to_vec();
    let (r, _s) = raw.call("SendMessage", framed(&whole[..whole.len() / 2]), true).await;
    let (code, message) = status_of(r).await;
    assert_eq!((code, message.as_str()), (tonic::Code::Unknown as i32, ""), "truncated");

    // A declared length past the limit: refused at once, the stream still open.
    let (r, _s) = raw.call("SendMessage", prefix(u32::MAX), false).await;
    let (code, message) = status_of(r).await;
    assert_eq!(
        (code, message.as_str()),
        (tonic::Code::ResourceExhausted as i32, format!("gRPC message exceeds maximum size {MAX_MESSAGE_BYTES}: {}", u32::MAX).as_str())
    );

    // Declared lengths under the limit whose bytes never come: nothing sized by them.
    LARGEST_ALLOCATION.store(0, Ordering::Relaxed);
    let declared = 120 * 1024 * 1024;
    let mut open = Vec::new();
    for _ in 0..8 {
        open.push(raw.call("SendMessage", [prefix(declared), vec![0x0A; 10]].concat(), false).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let largest = LARGEST_ALLOCATION.load(Ordering::Relaxed);
    assert!(largest < 4 * 1024 * 1024, "an allocation of {largest} bytes for streams declaring {declared}");
    // Their streams end: each mid-message.
    for (response, mut send) in open {
        send.send_data(Bytes::new(), true).expect("end of stream");
        let (code, message) = status_of(response).await;
        assert_eq!(code, tonic::Code::Internal as i32, "ended mid-message: {message}");
    }
    assert!(LARGEST_ALLOCATION.load(Ordering::Relaxed) < 4 * 1024 * 1024);

    // The same connection still serves a well-formed call.
    let query = pb::QueryRouteRequest { topic: Some(pb::Resource { resource_namespace: String::new(), name: "T".into() }), endpoints: None };
    let (r, _s) = raw.call("QueryRoute", framed(&query.encode_to_vec()), true).await;
    let (code, message) = status_of(r).await;
    assert_eq!(code, tonic::Code::Ok as i32, "{message}");
    server.shutdown().await;
}
