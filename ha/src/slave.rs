//! The slave side (Java `HAClient`): connect to the master's HA address once it is known,
//! report the local max offset (at once, after every append that grew the log, and every
//! `haSendHeartbeatInterval`), append each frame at the local end, and start over after 5 s on
//! any failure. A frame at an offset that is not the local end closes the connection, as Java
//! does; so does a frame that does not fit (Java drops it silently and then loops on the
//! mismatch; closing says why at once).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use parking_lot::Mutex;
use remoting::clock::now_ms;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn, Instrument};

use crate::log::{AppendAtError, ReplicatedLog};
use crate::wire::{encode_report, FrameDecoder};

#[derive(Clone, Debug)]
pub struct SlaveConfig {
    /// How often the slave reports when nothing arrives (Java's `haSendHeartbeatInterval`).
    pub report_interval: Duration,
    /// Close a connection on which nothing was read for this long (5.x's rule; the master
    /// heartbeats every 5 s).
    pub housekeeping_interval: Duration,
    /// Wait between connection attempts (Java: 5 s).
    pub reconnect_delay: Duration,
    pub connect_timeout: Duration,
}

impl Default for SlaveConfig {
    fn default() -> Self {
        SlaveConfig {
            report_interval: Duration::from_secs(5),
            housekeeping_interval: Duration::from_secs(20),
            reconnect_delay: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
        }
    }
}

/// What the slave side knows, for status reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientStatus {
    pub master_addr: Option<String>,
    pub connected: bool,
    /// The last offset reported to the master.
    pub reported: i64,
    /// When a frame was last read and a report last written (ms since the epoch; 0: never).
    pub last_read_ms: i64,
    pub last_write_ms: i64,
    pub last_error: Option<String>,
}

#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    #[error("connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame at {frame} but the local log ends at {local}")]
    OffsetMismatch { frame: i64, local: i64 },
    #[error(transparent)]
    Append(#[from] AppendAtError),
    #[error("nothing from the master for {0:?}")]
    Silent(Duration),
    #[error("the master closed the connection")]
    Closed,
}

pub struct HaSlave {
    master: watch::Sender<Option<String>>,
    status: Arc<Mutex<ClientStatus>>,
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl HaSlave {
    /// Starts following whatever master [`HaSlave::set_master`] names. Call inside a runtime.
    pub fn start(log: Arc<dyn ReplicatedLog>, config: SlaveConfig) -> HaSlave {
        let (master, addr) = watch::channel(None);
        let status = Arc::new(Mutex::new(ClientStatus::default()));
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(log, config, addr, status.clone(), stop.clone()).instrument(tracing::info_span!("ha-client")));
        HaSlave { master, status, stop, task: Mutex::new(Some(task)) }
    }

    /// The master's HA address (`host:port`); a change drops the current connection.
    pub fn set_master(&self, addr: Option<String>) {
        self.master.send_if_modified(|current| {
            let changed = *current != addr;
            if changed {
                info!(master = ?addr, "HA master address");
                *current = addr;
            }
            changed
        });
    }

    pub fn status(&self) -> ClientStatus {
        self.status.lock().clone()
    }

    /// Stops following; idempotent.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

async fn run(
    log: Arc<dyn ReplicatedLog>,
    config: SlaveConfig,
    mut master: watch::Receiver<Option<String>>,
    status: Arc<Mutex<ClientStatus>>,
    stop: CancellationToken,
) {
    loop {
        let addr = master.borrow_and_update().clone();
        let Some(addr) = addr else {
            tokio::select! {
                _ = master.changed() => continue,
                _ = stop.cancelled() => return,
            }
        };
        status.lock().master_addr = Some(addr.clone());
        let outcome = tokio::select! {
            outcome = session(&addr, &*log, &config, &status) => Some(outcome),
            _ = master.changed() => None,
            _ = stop.cancelled() => return,
        };
        status.lock().connected = false;
        match outcome {
            // A new master address: connect to it at once.
            None => continue,
            Some(Err(e)) => {
                warn!(master = addr, error = %e, "HA connection ended; retrying in {:?}", config.reconnect_delay);
                status.lock().last_error = Some(e.to_string());
            }
            Some(Ok(())) => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(config.reconnect_delay) => {}
            _ = master.changed() => {}
            _ = stop.cancelled() => return,
        }
    }
}

async fn session(addr: &str, log: &dyn ReplicatedLog, config: &SlaveConfig, status: &Mutex<ClientStatus>) -> Result<(), SessionError> {
    let stream = tokio::time::timeout(config.connect_timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| SessionError::Connect(std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")))?
        .map_err(SessionError::Connect)?;
    let _ = stream.set_nodelay(true);
    info!(master = addr, local_end = log.max_offset(), "connected to the HA master");
    status.lock().connected = true;
    let (read_half, mut write_half) = stream.into_split();
    let mut frames = FramedRead::new(read_half, FrameDecoder);
    let mut reported = log.max_offset();
    write_half.write_all(&encode_report(reported)).await?;
    note_report(status, reported);
    let mut last_report = Instant::now();
    loop {
        let until_report = config.report_interval.saturating_sub(last_report.elapsed());
        let next = tokio::select! {
            next = tokio::time::timeout(config.housekeeping_interval, frames.next()) => next,
            _ = tokio::time::sleep(until_report) => {
                reported = log.max_offset();
                write_half.write_all(&encode_report(reported)).await?;
                note_report(status, reported);
                last_report = Instant::now();
                continue;
            }
        };
        let frame = match next {
            Err(_) => return Err(SessionError::Silent(config.housekeeping_interval)),
            Ok(None) => return Err(SessionError::Closed),
            Ok(Some(frame)) => frame?,
        };
        status.lock().last_read_ms = now_ms();
        let local = log.max_offset();
        if local != 0 && local != frame.offset {
            return Err(SessionError::OffsetMismatch { frame: frame.offset, local });
        }
        if frame.body.is_empty() {
            continue;
        }
        let end = log.append_at(frame.offset, &frame.body)?;
        if end > reported {
            reported = end;
            write_half.write_all(&encode_report(reported)).await?;
            note_report(status, reported);
            last_report = Instant::now();
        }
    }
}

fn note_report(status: &Mutex<ClientStatus>, reported: i64) {
    let mut s = status.lock();
    s.reported = reported;
    s.last_write_ms = now_ms();
}
