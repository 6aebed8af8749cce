//! Requests that run where they were read, over a real loopback socket: a pool drained on the
//! runtime (`BusinessPool::on_runtime`, the broker's sends) and a processor that runs in place
//! (`RequestProcessor::runs_in_place`, the broker's pulls). On one runtime thread, a pull read
//! behind a burst of sends on the same connection is answered long before the burst is done, as
//! Java's pull threads answer beside its busy send thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use remoting::codec::RemotingCodec;
use remoting::pool::BusinessPool;
use remoting::server::{Channel, ProcessResult, ProcessorRegistry, RemotingServer, RequestProcessor, ServerConfig};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::{Decoder, Encoder};

const SEND: RequestCode = RequestCode(9101);
const PULL: RequestCode = RequestCode(9102);
const SENDS: usize = 2000;
/// CPU each send takes (spun, not slept: the runtime thread is busy).
const SEND_WORK: Duration = Duration::from_micros(100);

/// Answers each request, noting which thread ran it.
struct Recorder {
    in_place: bool,
    on_runtime: AtomicUsize,
    ran: AtomicUsize,
}

impl RequestProcessor for Recorder {
    fn process(&self, _: &Channel, request: RemotingCommand) -> ProcessResult {
        if tokio::runtime::Handle::try_current().is_ok() {
            self.on_runtime.fetch_add(1, Ordering::SeqCst);
        }
        self.ran.fetch_add(1, Ordering::SeqCst);
        if request.request_code() == SEND {
            let until = Instant::now() + SEND_WORK;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        Ok(Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS)))
    }

    fn answers_are_small(&self) -> bool {
        !self.in_place
    }

    fn runs_in_place(&self, _: &RemotingCommand) -> bool {
        self.in_place
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_pull_behind_a_burst_of_sends_on_one_thread_is_answered_before_the_burst_ends() {
    let sends = Arc::new(Recorder { in_place: false, on_runtime: AtomicUsize::new(0), ran: AtomicUsize::new(0) });
    let pulls = Arc::new(Recorder { in_place: true, on_runtime: AtomicUsize::new(0), ran: AtomicUsize::new(0) });
    let send_pool = Arc::new(BusinessPool::on_runtime("send", 1, 10_000, &tokio::runtime::Handle::current()));
    let pull_pool = Arc::new(BusinessPool::new("pull", 4, 1_000).unwrap());
    let mut registry = ProcessorRegistry::new();
    registry.register(SEND, sends.clone(), &send_pool);
    registry.register(PULL, pulls.clone(), &pull_pool);
    let server = RemotingServer::start(ServerConfig::new("127.0.0.1:0".parse().unwrap()), registry).await.unwrap();

    // The burst and the pull behind it, written at once on one connection.
    let mut out = BytesMut::new();
    let mut codec = RemotingCodec::default();
    for i in 0..SENDS {
        let mut send = RemotingCommand::request(SEND).with_ext("n", i.to_string());
        send.opaque = i as i32;
        codec.encode(send, &mut out).unwrap();
    }
    let mut pull = RemotingCommand::request(PULL);
    pull.opaque = -1;
    codec.encode(pull, &mut out).unwrap();
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    let started = Instant::now();
    let (mut rd, mut wr) = stream.split();
    let write = async {
        wr.write_all(&out).await.unwrap();
    };
    let read = async {
        let mut answered = Vec::with_capacity(SENDS + 1);
        let mut buf = BytesMut::new();
        while answered.len() < SENDS + 1 {
            while let Some(frame) = codec.decode(&mut buf).unwrap() {
                assert_eq!(frame.response_code(), ResponseCode::SUCCESS);
                answered.push(frame.opaque);
            }
            if answered.len() < SENDS + 1 {
                let n = tokio::time::timeout(Duration::from_secs(30), rd.read_buf(&mut buf)).await.expect("answers keep coming").unwrap();
                assert!(n > 0, "the server closed the connection");
            }
        }
        answered
    };
    let ((), answered) = tokio::join!(write, read);
    let elapsed = started.elapsed();
    let pull_at = answered.iter().position(|o| *o == -1).expect("the pull was answered");
    assert!(pull_at < SENDS / 4, "the pull came {pull_at}th of {} answers ({elapsed:?} for all): it waited behind the sends", SENDS + 1);
    // Every send answered once, in order (one task drains the pool: Java's order with one send thread).
    let sent: Vec<i32> = answered.iter().copied().filter(|o| *o >= 0).collect();
    assert_eq!(sent, (0..SENDS as i32).collect::<Vec<_>>());
    // Both ran on the runtime's thread: the sends drained there, the pull where it was read.
    assert_eq!(sends.on_runtime.load(Ordering::SeqCst), SENDS);
    assert_eq!(pulls.on_runtime.load(Ordering::SeqCst), 1);
    server.shutdown().await;
}
