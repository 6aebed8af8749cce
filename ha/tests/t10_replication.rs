//! Master and slave services over real sockets on 127.0.0.1, each over a log in memory.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ha::log::{AppendAtError, ReplicatedLog};
use ha::master::{HaMaster, MasterConfig};
use ha::slave::{HaSlave, SlaveConfig};
use ha::tracker::{Outcome, SyncPolicy};
use ha::wire::{encode_report, FrameDecoder};
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;

/// Segments of `segment` bytes from `base`; appends fill the last segment, then the next.
struct MemLog {
    segment: usize,
    inner: Mutex<(i64, Vec<u8>)>,
}

impl MemLog {
    fn new(segment: usize) -> Arc<MemLog> {
        Arc::new(MemLog { segment, inner: Mutex::new((0, Vec::new())) })
    }

    /// A master's append: record bytes that never straddle a segment (the tail is padded).
    fn put(&self, record: &[u8]) -> i64 {
        let mut g = self.inner.lock();
        let (base, data) = &mut *g;
        let end = *base + data.len() as i64;
        let room = self.segment - (end as usize % self.segment);
        if record.len() > room {
            data.extend(std::iter::repeat_n(0xEE, room));
        }
        data.extend_from_slice(record);
        *base + data.len() as i64
    }

    fn bytes(&self) -> (i64, Vec<u8>) {
        self.inner.lock().clone()
    }
}

impl ReplicatedLog for MemLog {
    fn max_offset(&self) -> i64 {
        let g = self.inner.lock();
        g.0 + g.1.len() as i64
    }
    fn min_offset(&self) -> i64 {
        self.inner.lock().0
    }
    fn segment_size(&self) -> usize {
        self.segment
    }
    fn read_at(&self, offset: i64, max: usize) -> Option<Vec<u8>> {
        let g = self.inner.lock();
        let (base, data) = (&g.0, &g.1);
        if offset < *base || offset >= base + data.len() as i64 {
            return None;
        }
        let at = (offset - base) as usize;
        let segment_end = (offset as usize / self.segment + 1) * self.segment - *base as usize;
        let end = data.len().min(segment_end).min(at + max);
        Some(data[at..end].to_vec())
    }
    fn append_at(&self, offset: i64, bytes: &[u8]) -> Result<i64, AppendAtError> {
        let mut g = self.inner.lock();
        let (base, data) = &mut *g;
        if data.is_empty() {
            *base = offset - offset % self.segment as i64;
        }
        let end = *base + data.len() as i64;
        if offset != end {
            return Err(AppendAtError::NotAtEnd { offset, end });
        }
        let room = self.segment - (end as usize % self.segment);
        if bytes.len() > room {
            return Err(AppendAtError::DoesNotFit { offset, len: bytes.len() });
        }
        data.extend_from_slice(bytes);
        Ok(*base + data.len() as i64)
    }
}

fn master_config() -> MasterConfig {
    MasterConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        transfer_batch_bytes: 1000,
        heartbeat_interval: Duration::from_millis(200),
        housekeeping_interval: Duration::from_secs(5),
        policy: SyncPolicy { slaves_needed: 1, fallbehind_max_bytes: 1 << 30, timeout: Duration::from_secs(3) },
    }
}

fn slave_config() -> SlaveConfig {
    SlaveConfig { report_interval: Duration::from_millis(200), reconnect_delay: Duration::from_millis(100), ..SlaveConfig::default() }
}

async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A put that waits for its slave, as the broker's SYNC_MASTER path does.
fn put_and_wait(master: &HaMaster, log: &MemLog, record: &[u8]) -> tokio::sync::oneshot::Receiver<Outcome> {
    let end = log.put(record);
    let replication = master.replication();
    replication.on_append();
    let (tx, rx) = tokio::sync::oneshot::channel();
    replication.wait(
        end,
        Box::new(move |outcome| {
            let _ = tx.send(outcome);
        }),
    );
    rx
}

#[tokio::test]
async fn a_slave_follows_its_master_byte_for_byte_and_releases_the_puts_that_wait() {
    let master_log = MemLog::new(4096);
    let slave_log = MemLog::new(4096);
    for i in 0..20u8 {
        master_log.put(&[i; 300]);
    }
    let master = HaMaster::start(master_config(), master_log.clone()).await.unwrap();
    let slave = HaSlave::start(slave_log.clone(), slave_config());
    slave.set_master(Some(master.local_addr().to_string()));
    // A new slave starts at the master's last segment, as in Java.
    until("the slave catches up", || slave_log.max_offset() == master_log.max_offset()).await;
    assert_eq!(slave_log.min_offset(), master_log.max_offset() - master_log.max_offset() % 4096);
    let waits: Vec<_> = (0..50u8).map(|i| put_and_wait(&master, &master_log, &[i; 700])).collect();
    for w in waits {
        assert_eq!(w.await.unwrap(), Outcome::Replicated);
    }
    let (m_base, m) = master_log.bytes();
    let (s_base, s) = slave_log.bytes();
    assert_eq!(&m[(s_base - m_base) as usize..], &s[..], "the slave holds the master's bytes from where it started");
    slave.shutdown().await;
    // Without its slave, a put is answered at once.
    until("the master sees the slave go", || master.replication().slaves().is_empty()).await;
    assert_eq!(put_and_wait(&master, &master_log, b"alone").await.unwrap(), Outcome::SlaveNotAvailable);
    master.shutdown().await;
}

#[tokio::test]
async fn a_restarted_slave_resumes_from_its_end() {
    let master_log = MemLog::new(2048);
    let slave_log = MemLog::new(2048);
    let master = HaMaster::start(master_config(), master_log.clone()).await.unwrap();
    master_log.put(&[1; 100]);
    let slave = HaSlave::start(slave_log.clone(), slave_config());
    slave.set_master(Some(master.local_addr().to_string()));
    until("first catch-up", || slave_log.max_offset() == master_log.max_offset()).await;
    slave.shutdown().await;
    for i in 0..30u8 {
        master_log.put(&[i; 500]);
    }
    master.replication().on_append();
    let slave = HaSlave::start(slave_log.clone(), slave_config());
    slave.set_master(Some(master.local_addr().to_string()));
    until("catch-up over several segments", || slave_log.max_offset() == master_log.max_offset()).await;
    assert_eq!(master_log.bytes(), slave_log.bytes());
    slave.shutdown().await;
    master.shutdown().await;
}

#[tokio::test]
async fn a_stray_client_claiming_everything_acknowledges_nothing() {
    let master_log = MemLog::new(4096);
    master_log.put(&[7; 100]);
    let master = HaMaster::start(master_config(), master_log.clone()).await.unwrap();
    let mut stray = tokio::net::TcpStream::connect(master.local_addr()).await.unwrap();
    stray.write_all(&encode_report(0)).await.unwrap();
    until("the stray client is taken for a slave", || !master.replication().slaves().is_empty()).await;
    let wait = put_and_wait(&master, &master_log, &[8; 100]);
    // It never reads what it is sent, and claims to hold everything.
    stray.write_all(&encode_report(i64::MAX / 2)).await.unwrap();
    stray.write_all(&encode_report(master_log.max_offset() + 1_000_000)).await.unwrap();
    assert_eq!(wait.await.unwrap(), Outcome::TimedOut, "only what a connection was sent counts");
    master.shutdown().await;
}

#[tokio::test]
async fn a_slave_ahead_of_its_master_is_refused_and_a_wrong_offset_closes_the_connection() {
    let master_log = MemLog::new(4096);
    master_log.put(&[1; 100]);
    let master = HaMaster::start(master_config(), master_log.clone()).await.unwrap();
    // A slave that holds more than its master (the master lost its tail).
    let mut ahead = tokio::net::TcpStream::connect(master.local_addr()).await.unwrap();
    ahead.write_all(&encode_report(5000)).await.unwrap();
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), tokio::io::AsyncReadExt::read(&mut ahead, &mut buf)).await.unwrap().unwrap_or(0);
    assert_eq!(n, 0, "the master closes instead of sending bytes at an offset the slave holds differently");
    master.shutdown().await;

    // A master whose frames do not start at the slave's end is left.
    let slave_log = MemLog::new(4096);
    slave_log.append_at(0, &[9; 10]).unwrap();
    let fake: tokio::net::TcpListener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = fake.local_addr().unwrap();
    let slave = HaSlave::start(slave_log.clone(), slave_config());
    slave.set_master(Some(addr.to_string()));
    let (mut conn, _) = fake.accept().await.unwrap();
    let mut frame = bytes::BytesMut::new();
    tokio_util::codec::Encoder::encode(&mut FrameDecoder, ha::wire::Frame { offset: 500, body: bytes::Bytes::from_static(b"x") }, &mut frame).unwrap();
    conn.write_all(&frame).await.unwrap();
    until("the slave says why", || slave.status().last_error.is_some_and(|e| e.contains("frame at 500"))).await;
    assert_eq!(slave_log.max_offset(), 10);
    slave.shutdown().await;
}

/// A slave reports what it received the moment it has it; the master must already count those
/// bytes as sent, or the report is clamped, acknowledges nothing, and a put whose record was the
/// last one sent waits for the slave's next report (5 s later in Java) and times out. A raw slave
/// that reports each frame's end once, and nothing else, shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_that_arrives_before_the_writer_noted_the_frame_still_acknowledges_it() {
    let master_log = MemLog::new(1 << 20);
    let mut config = master_config();
    config.policy.timeout = Duration::from_millis(1000);
    config.heartbeat_interval = Duration::from_secs(60);
    let master = HaMaster::start(config, master_log.clone()).await.unwrap();
    let stream = tokio::net::TcpStream::connect(master.local_addr()).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (read_half, mut write_half) = stream.into_split();
    write_half.write_all(&encode_report(0)).await.unwrap();
    let echo = tokio::spawn(async move {
        use futures::StreamExt;
        let mut frames = tokio_util::codec::FramedRead::new(read_half, FrameDecoder);
        while let Some(Ok(frame)) = frames.next().await {
            let end = frame.offset + frame.body.len() as i64;
            if write_half.write_all(&encode_report(end)).await.is_err() {
                return;
            }
        }
    });
    until("the raw slave is taken for a slave", || master.replication().slaves().first().is_some_and(|s| s.transfer_from == 0)).await;
    let mut timed_out = 0;
    for i in 0..400u32 {
        let outcome = put_and_wait(&master, &master_log, &i.to_be_bytes().repeat(25)).await.unwrap();
        if outcome != Outcome::Replicated {
            timed_out += 1;
        }
    }
    assert_eq!(timed_out, 0, "puts not acknowledged although the slave reported their bytes");
    echo.abort();
    master.shutdown().await;
}
