//! A TCP fault proxy for one directed link a->b: member a's peers string names the proxy as b's
//! address, so every connection a opens to b (a's requests, b's answers) runs through it.
//!
//! Modes: `Pass`; `Delay(ms)` (each chunk, either way, waits before it is forwarded); `Blackhole`
//! (connections stay open but nothing is forwarded; when the link leaves the blackhole those
//! connections are closed, as a TCP timeout would, so no stale bytes arrive half a frame late);
//! `Cut` (every connection is closed and new ones are closed at once).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Delay(u64),
    Blackhole,
    Cut,
}

pub struct Proxy {
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free loopback port forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy bind");
        let addr = listener.local_addr().unwrap();
        let (mode, rx) = watch::channel(Mode::Pass);
        let accept = tokio::spawn(accept_loop(listener, target, rx));
        Proxy { addr, mode, accept }
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.mode.send_replace(Mode::Cut);
    }
}

async fn accept_loop(listener: TcpListener, target: SocketAddr, mode: watch::Receiver<Mode>) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else { continue };
        if *mode.borrow() == Mode::Cut {
            drop(inbound);
            continue;
        }
        tokio::spawn(connection(inbound, target, mode.clone()));
    }
}

async fn connection(inbound: TcpStream, target: SocketAddr, mut mode: watch::Receiver<Mode>) {
    let Ok(Ok(outbound)) = tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(target)).await else { return };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (in_read, in_write) = inbound.into_split();
    let (out_read, out_write) = outbound.into_split();
    let up = tokio::spawn(pump(in_read, out_write, mode.clone()));
    let down = tokio::spawn(pump(out_read, in_write, mode.clone()));
    let pumps = Arc::new([up.abort_handle(), down.abort_handle()]);
    let mut was = *mode.borrow_and_update();
    let close = |pumps: &[tokio::task::AbortHandle; 2]| pumps.iter().for_each(|p| p.abort());
    let mut both = Box::pin(async move {
        let _ = up.await;
        let _ = down.await;
    });
    loop {
        tokio::select! {
            _ = &mut both => return,
            changed = mode.changed() => {
                let now = if changed.is_ok() { *mode.borrow_and_update() } else { Mode::Cut };
                if now == Mode::Cut || (was == Mode::Blackhole && now != Mode::Blackhole) {
                    close(&pumps);
                    return;
                }
                was = now;
            }
        }
    }
}

async fn pump(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, mut mode: watch::Receiver<Mode>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Hold while blackholed (the supervisor closes the connection when it ends).
        while *mode.borrow_and_update() == Mode::Blackhole {
            if mode.changed().await.is_err() {
                return;
            }
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        loop {
            let now = *mode.borrow_and_update();
            match now {
                Mode::Blackhole => {
                    if mode.changed().await.is_err() {
                        return;
                    }
                }
                Mode::Delay(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    break;
                }
                Mode::Pass => break,
                Mode::Cut => return,
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
