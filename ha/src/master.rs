//! The master side (Java `HAService` accept side and `HAConnection`): accept slaves on the HA
//! port, read their offset reports, push commit-log bytes from where each reported, heartbeat
//! when idle, and drop a connection silent for `haHousekeepingInterval`.
//!
//! Each connection is two tasks: the reader feeds reports to the [`Tracker`] (which releases
//! SYNC_MASTER puts), the writer sends what the log has beyond what it sent, woken by appends
//! (or every 100 ms, as Java polls). Puts that wait for slaves are answered from here, never
//! from a thread that waits.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn, Instrument};

use crate::log::ReplicatedLog;
use crate::tracker::{Outcome, SlaveId, SyncPolicy, Tracker};
use crate::wire::{encode_frame_header, ReportDecoder};

#[derive(Clone, Debug)]
pub struct MasterConfig {
    pub listen: SocketAddr,
    /// Java's `haTransferBatchSize`.
    pub transfer_batch_bytes: usize,
    /// Java's `haSendHeartbeatInterval`.
    pub heartbeat_interval: Duration,
    /// Java's `haHousekeepingInterval`.
    pub housekeeping_interval: Duration,
    pub policy: SyncPolicy,
}

/// What a waiting put does once the slaves have spoken.
pub type Waiter = Box<dyn FnOnce(Outcome) + Send>;

/// One slave connection, as the status reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveStatus {
    pub addr: SocketAddr,
    /// Where the transfer started and how far it got.
    pub transfer_from: i64,
    pub sent: i64,
    pub acked: i64,
}

/// What the put path and the connections share.
pub struct Replication {
    log: Arc<dyn ReplicatedLog>,
    tracker: Mutex<Tracker<Waiter>>,
    status: Mutex<HashMap<SlaveId, SlaveStatus>>,
    /// The log's readable end, bumped on every append; writers wait on it.
    appended: watch::Sender<i64>,
    /// Wakes the timer when a waiter with an earlier deadline may have arrived.
    waiter_added: Notify,
    next_id: AtomicU64,
}

fn answer(released: Vec<(Waiter, Outcome)>) {
    for (waiter, outcome) in released {
        waiter(outcome);
    }
}

impl Replication {
    pub fn new(log: Arc<dyn ReplicatedLog>, policy: SyncPolicy) -> Arc<Replication> {
        let end = log.max_offset();
        Arc::new(Replication {
            log,
            tracker: Mutex::new(Tracker::new(policy)),
            status: Mutex::new(HashMap::new()),
            appended: watch::channel(end).0,
            waiter_added: Notify::new(),
            next_id: AtomicU64::new(1),
        })
    }

    /// The log grew (called by the store after each append, from any thread).
    pub fn on_append(&self) {
        self.appended.send_replace(self.log.max_offset());
    }

    /// A put whose record ends at `end` waits for its slaves; `waiter` is called exactly once,
    /// at once if no slave can take it, else from a connection or the timer.
    pub fn wait(&self, end: i64, waiter: Waiter) {
        let immediate = self.tracker.lock().wait(end, Instant::now(), waiter);
        match immediate {
            Some((waiter, outcome)) => waiter(outcome),
            None => self.waiter_added.notify_one(),
        }
    }

    pub fn slaves(&self) -> Vec<SlaveStatus> {
        let mut slaves: Vec<SlaveStatus> = self.status.lock().values().cloned().collect();
        slaves.sort_by_key(|s| s.addr);
        slaves
    }

    /// How far the best slave is known to hold the log.
    pub fn max_acked(&self) -> i64 {
        self.tracker.lock().max_acked()
    }

    fn connected(&self, addr: SocketAddr) -> SlaveId {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.tracker.lock().connected(id);
        self.status.lock().insert(id, SlaveStatus { addr, transfer_from: -1, sent: 0, acked: 0 });
        id
    }

    fn disconnected(&self, id: SlaveId) {
        self.tracker.lock().disconnected(id);
        self.status.lock().remove(&id);
    }

    fn starts(&self, id: SlaveId, from: i64) {
        self.tracker.lock().transfer_starts(id, from);
        if let Some(s) = self.status.lock().get_mut(&id) {
            (s.transfer_from, s.sent, s.acked) = (from, from, from);
        }
    }

    fn sent(&self, id: SlaveId, end: i64) {
        self.tracker.lock().sent(id, end);
        if let Some(s) = self.status.lock().get_mut(&id) {
            s.sent = end;
        }
    }

    fn reported(&self, id: SlaveId, offset: i64, peer: SocketAddr) {
        let r = self.tracker.lock().reported(id, offset);
        if r.beyond_sent {
            warn!(%peer, offset, "slave reports more than it was sent; the excess acknowledges nothing");
        }
        if let Some(s) = self.status.lock().get_mut(&id) {
            s.acked = s.acked.max(offset.min(s.sent));
        }
        answer(r.released);
    }

    /// Answers waiters whose time is up; returns when the next one is due.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let (due, next) = {
            let mut t = self.tracker.lock();
            (t.tick(now), t.next_deadline())
        };
        answer(due);
        next
    }
}

/// The running master side. Stop it with [`HaMaster::shutdown`].
pub struct HaMaster {
    replication: Arc<Replication>,
    local_addr: SocketAddr,
    stop: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl HaMaster {
    /// Listens on `config.listen` (Java binds every interface; callers choose). Call inside a
    /// tokio runtime.
    pub async fn start(config: MasterConfig, log: Arc<dyn ReplicatedLog>) -> std::io::Result<HaMaster> {
        let listener = TcpListener::bind(config.listen).await?;
        let local_addr = listener.local_addr()?;
        let replication = Replication::new(log, config.policy);
        let stop = CancellationToken::new();
        let timer = tokio::spawn(run_timer(replication.clone(), stop.clone()));
        let accept = tokio::spawn(accept_loop(listener, replication.clone(), Arc::new(config), stop.clone()));
        info!(%local_addr, "HA service listening for slaves");
        Ok(HaMaster { replication, local_addr, stop, tasks: Mutex::new(vec![timer, accept]) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn replication(&self) -> Arc<Replication> {
        self.replication.clone()
    }

    /// Closes every connection and answers every waiting put as timed out; idempotent.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock());
        for task in tasks {
            let _ = task.await;
        }
        let left = self.replication.tracker.lock().drain();
        answer(left);
    }
}

async fn run_timer(replication: Arc<Replication>, stop: CancellationToken) {
    loop {
        let next = replication.expire(Instant::now());
        let sleep = match next {
            Some(at) => tokio::time::sleep_until(at.into()),
            None => tokio::time::sleep(Duration::from_secs(3600)),
        };
        tokio::select! {
            _ = sleep => {}
            _ = replication.waiter_added.notified() => {}
            _ = stop.cancelled() => return,
        }
    }
}

async fn accept_loop(listener: TcpListener, replication: Arc<Replication>, config: Arc<MasterConfig>, stop: CancellationToken) {
    let mut connections = Vec::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.cancelled() => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let span = tracing::info_span!("ha-slave", %peer);
                let task = tokio::spawn(serve(stream, peer, replication.clone(), config.clone(), stop.child_token()).instrument(span));
                connections.retain(|t: &JoinHandle<()>| !t.is_finished());
                connections.push(task);
            }
            Err(e) => {
                warn!(error = %e, "HA accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    for task in connections {
        let _ = task.await;
    }
}

/// One slave, from its first report to its last.
async fn serve(stream: TcpStream, peer: SocketAddr, replication: Arc<Replication>, config: Arc<MasterConfig>, stop: CancellationToken) {
    let id = replication.connected(peer);
    info!("slave connected");
    let (read_half, write_half) = stream.into_split();
    let mut reports = FramedRead::new(read_half, ReportDecoder);
    let first = tokio::select! {
        first = tokio::time::timeout(config.housekeeping_interval, reports.next()) => first,
        _ = stop.cancelled() => Ok(None),
    };
    let Ok(Some(Ok(first))) = first else {
        debug!("no first report; closing");
        return replication.disconnected(id);
    };
    let Some(start) = transfer_start(&*replication.log, first) else {
        return replication.disconnected(id);
    };
    replication.starts(id, start);
    replication.reported(id, first, peer);
    let writer_stop = stop.child_token();
    let writer = tokio::spawn(write_loop(write_half, id, start, replication.clone(), config.clone(), writer_stop.clone()).in_current_span());
    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(config.housekeeping_interval, reports.next()) => next,
            _ = stop.cancelled() => break,
            _ = writer_stop.cancelled() => break,
        };
        match next {
            Ok(Some(Ok(offset))) => {
                let end = replication.log.max_offset();
                if offset > end {
                    // Java 4.9 closes here too.
                    error!(offset, end, "slave reports an offset beyond this master's end; closing");
                    break;
                }
                replication.reported(id, offset, peer);
            }
            Ok(Some(Err(e))) => {
                debug!(error = %e, "slave connection failed");
                break;
            }
            Ok(None) => break,
            Err(_) => {
                warn!(silent_for = ?config.housekeeping_interval, "slave silent; closing");
                break;
            }
        }
    }
    writer_stop.cancel();
    // A writer blocked on a slave that stopped reading would never see the stop.
    writer.abort();
    let _ = writer.await;
    replication.disconnected(id);
    info!("slave disconnected");
}

/// Where the master sends from, per Java's rules, or None when this slave cannot follow.
fn transfer_start(log: &dyn ReplicatedLog, first_report: i64) -> Option<i64> {
    let end = log.max_offset();
    if first_report > end {
        // The slave holds bytes this master does not: the master lost an unflushed tail, or the
        // slave followed another master. Java would send the master's next bytes at the slave's
        // offset and leave two different logs; we refuse, loudly, until an operator decides.
        error!(slave_offset = first_report, master_end = end, "slave is ahead of its master: the logs have diverged; refusing to replicate to it (truncate the slave's commit log to the master's end, or restore the master)");
        return None;
    }
    if first_report == 0 {
        // A new slave gets the master's newest segment only, as Java does.
        let segment = log.segment_size() as i64;
        return Some((end - end % segment).max(0));
    }
    if first_report < log.min_offset() {
        error!(
            slave_offset = first_report,
            master_min = log.min_offset(),
            "slave is behind this master's oldest segment; it cannot catch up (clear its store to start it afresh)"
        );
        return None;
    }
    Some(first_report)
}

async fn write_loop(
    mut socket: tokio::net::tcp::OwnedWriteHalf,
    id: SlaveId,
    start: i64,
    replication: Arc<Replication>,
    config: Arc<MasterConfig>,
    stop: CancellationToken,
) {
    let mut appended = replication.appended.subscribe();
    let mut next = start;
    let mut last_write = Instant::now();
    loop {
        appended.borrow_and_update();
        if let Some(bytes) = replication.log.read_at(next, config.transfer_batch_bytes).filter(|b| !b.is_empty()) {
            let header = encode_frame_header(next, bytes.len());
            next += bytes.len() as i64;
            // Counted as sent before the write: the slave may apply the frame and report it
            // before this task runs again, and a report beyond what was sent acknowledges
            // nothing. If the write fails, the connection goes, and what it was credited with.
            replication.sent(id, next);
            if socket.write_all(&header).await.is_err() || socket.write_all(&bytes).await.is_err() {
                break;
            }
            last_write = Instant::now();
            continue;
        }
        if last_write.elapsed() >= config.heartbeat_interval {
            if socket.write_all(&encode_frame_header(next, 0)).await.is_err() {
                break;
            }
            last_write = Instant::now();
        }
        tokio::select! {
            _ = appended.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stop.cancelled() => break,
        }
    }
    stop.cancel();
}
