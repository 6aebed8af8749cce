//! The Prometheus endpoint: `GET http://metricsPromExporterHost:metricsPromExporterPort/metrics`
//! (any path, as Java's exporter answers) serves the text exposition of one registry.
//!
//! Gauges are computed when scraped, as Java's observable gauges are: a scrape first runs the
//! `refresh` callback (on a blocking thread, since it may walk every group's queues), then
//! gathers. Scrapes are served one at a time, so one scrape's refresh never empties a gauge
//! another is reading, and the text is kept for [`RENDERED_FOR`]: scrapes within it get the same
//! text, so however often clients scrape, the broker computes it at most once per interval.
//!
//! Connections are bounded in number and in time: a request's header must arrive within
//! [`HEADER_READ_TIME`] (a client sending a header line every few seconds is closed), and a
//! connection that finds every place taken waits up to [`PLACE_WAIT`] for one, in arrival order,
//! so a scraper gets a place as soon as a slow client's time is up.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{Encoder, Registry, TextEncoder};

use tokio::net::TcpListener;
use tokio::sync::{Mutex, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Computes the gauges of this moment into the registry.
pub type Refresh = Arc<dyn Fn() + Send + Sync>;

/// Scrapers served at once; Prometheus keeps one connection per target.
const MAX_CONNECTIONS: usize = 16;
/// Connections waiting for a place, beyond which a new one is closed at once.
const MAX_WAITING: usize = 64;
/// How long a connection waits for a place.
pub const PLACE_WAIT: Duration = Duration::from_secs(10);
/// A request's header (the first or the next on a keep-alive connection) must arrive within this.
pub const HEADER_READ_TIME: Duration = Duration::from_secs(3);
/// A connection (keep-alive included) is closed after this long, so a slow or idle client does
/// not keep its place.
const CONNECTION_TIME: Duration = Duration::from_secs(60);
/// How long one computed exposition is served.
pub const RENDERED_FOR: Duration = Duration::from_secs(1);

struct Scrape {
    registries: Vec<Registry>,
    refresh: Refresh,
    /// The last exposition and when it was computed; its lock makes scrapes one at a time.
    last: Mutex<Option<(tokio::time::Instant, Bytes)>>,
}

impl Scrape {
    async fn exposition(self: &Arc<Self>) -> Result<Bytes, String> {
        let mut last = self.last.lock().await;
        if let Some((at, text)) = last.as_ref() {
            if at.elapsed() < RENDERED_FOR {
                return Ok(text.clone());
            }
        }
        let this = self.clone();
        let text = tokio::task::spawn_blocking(move || {
            (this.refresh)();
            let families: Vec<_> = this.registries.iter().flat_map(|r| r.gather()).collect();
            Ok::<_, String>(Bytes::from(super::text::encode(&families, crate::clock::now_ms()).into_bytes()))
        })
        .await
        .map_err(|e| e.to_string())??;
        *last = Some((tokio::time::Instant::now(), text.clone()));
        Ok(text)
    }

    async fn respond(self: Arc<Self>, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
        }
        match self.exposition().await {
            Ok(text) => {
                let body = if request.method() == Method::HEAD { Bytes::new() } else { text };
                let mut response = Response::new(Full::new(body));
                if let Ok(value) = TextEncoder::new().format_type().parse() {
                    response.headers_mut().insert(hyper::header::CONTENT_TYPE, value);
                }
                response
            }
            Err(e) => {
                warn!(error = %e, "metrics not gathered");
                plain(StatusCode::INTERNAL_SERVER_ERROR, "metrics could not be gathered\n")
            }
        }
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
}

/// A running endpoint; [`PromExporter::shutdown`] stops it.
pub struct PromExporter {
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl PromExporter {
    /// Listens on `bind` (port 0: any free port) and serves `registry`.
    pub async fn start(bind: SocketAddr, registry: Registry, refresh: Refresh) -> std::io::Result<PromExporter> {
        Self::start_all(bind, vec![registry], refresh).await
    }

    /// Serves the families of every registry, one exposition (registries whose constant labels
    /// differ: the broker's and, in local mode, the proxy's `rocketmq_proxy_up`).
    pub async fn start_all(bind: SocketAddr, registries: Vec<Registry>, refresh: Refresh) -> std::io::Result<PromExporter> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let scrape = Arc::new(Scrape { registries, refresh, last: Mutex::new(None) });
        let task = tokio::spawn(accept_loop(listener, scrape, stop.clone()));
        info!(%addr, "Prometheus metrics served");
        Ok(PromExporter { addr, stop, task })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn accept_loop(listener: TcpListener, scrape: Arc<Scrape>, stop: CancellationToken) {
    let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let waiting = Arc::new(Semaphore::new(MAX_WAITING));
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors and the like: wait a little rather than spin.
                warn!(error = %e, "metrics endpoint cannot accept");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(in_line) = waiting.clone().try_acquire_owned() else {
            debug!(%peer, "metrics endpoint full and its waiting line too; connection closed");
            continue;
        };
        let (scrape, stop, places) = (scrape.clone(), stop.clone(), places.clone());
        tokio::spawn(async move {
            // Tokio's semaphore serves waiters in order: a scraper that came first gets the next place.
            let place = match tokio::time::timeout(PLACE_WAIT, places.acquire_owned()).await {
                Ok(Ok(place)) => place,
                _ => {
                    debug!(%peer, "metrics endpoint full; connection closed after waiting");
                    return;
                }
            };
            drop(in_line);
            let service = hyper::service::service_fn(move |request| {
                let scrape = scrape.clone();
                async move { Ok::<_, Infallible>(scrape.respond(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIME)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = stop.cancelled() => {}
                served = tokio::time::timeout(CONNECTION_TIME, connection) => {
                    if let Ok(Err(e)) = served {
                        debug!(%peer, error = %e, "metrics connection ended with an error");
                    }
                }
            }
            drop(place);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The value of the `rocketmq_topic_number` sample (with or without labels and a timestamp).
    fn topic_number(response: &str) -> Option<f64> {
        let line = response.lines().find(|l| l.starts_with("rocketmq_topic_number ") || l.starts_with("rocketmq_topic_number{"))?;
        let after_labels = line.rsplit_once('}').map_or(line.trim_start_matches("rocketmq_topic_number"), |(_, rest)| rest);
        after_labels.split_whitespace().next()?.parse().ok()
    }

    async fn get(addr: SocketAddr, request: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connects");
        stream.write_all(request.as_bytes()).await.expect("writes");
        let mut out = String::new();
        stream.read_to_string(&mut out).await.expect("reads");
        out
    }

    #[tokio::test]
    async fn a_scrape_refreshes_the_gauges_and_serves_the_text_exposition() {
        let registry = Registry::new();
        let gauge = prometheus::IntGauge::new("rocketmq_topic_number", "topics").expect("gauge");
        registry.register(Box::new(gauge.clone())).expect("registered");
        let refresh: Refresh = Arc::new(move || gauge.set(7));
        let exporter = PromExporter::start("127.0.0.1:0".parse().expect("addr"), registry, refresh).await.expect("starts");
        let response = get(exporter.local_addr(), "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.contains("text/plain; version=0.0.4"), "{response}");
        assert_eq!(topic_number(&response), Some(7.0), "{response}");
        let refused = get(exporter.local_addr(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
        assert!(refused.starts_with("HTTP/1.1 405"), "{refused}");
        let garbage = get(exporter.local_addr(), "\x00\x01 not http\r\n\r\n").await;
        assert!(garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"), "{garbage}");
        exporter.shutdown().await;
    }

    fn counting_exporter_parts() -> (Registry, Refresh, Arc<std::sync::atomic::AtomicUsize>) {
        let registry = Registry::new();
        let gauge = prometheus::IntGauge::new("rocketmq_topic_number", "topics").expect("gauge");
        registry.register(Box::new(gauge.clone())).expect("registered");
        let refreshed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let r = refreshed.clone();
        let refresh: Refresh = Arc::new(move || {
            let n = r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            gauge.set(n as i64 + 1);
        });
        (registry, refresh, refreshed)
    }

    /// A client that sends a request's header one line at a time, `every` apart, and dials again
    /// when closed, until `stop`.
    async fn slowloris(addr: SocketAddr, every: Duration, stop: CancellationToken) {
        while !stop.is_cancelled() {
            let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else { continue };
            let mut line = 0;
            loop {
                let text = if line == 0 { "GET /metrics HTTP/1.1\r\n".to_owned() } else { format!("X-Slow-{line}: y\r\n") };
                if stream.write_all(text.as_bytes()).await.is_err() {
                    break;
                }
                line += 1;
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
            }
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn clients_that_send_their_header_slowly_lose_their_place_and_a_scraper_gets_one() {
        let (registry, refresh, _) = counting_exporter_parts();
        let exporter = PromExporter::start("127.0.0.1:0".parse().expect("addr"), registry, refresh).await.expect("starts");
        let addr = exporter.local_addr();
        let stop = CancellationToken::new();
        // The probe: 24 connections, one header line every second, dialling again when closed.
        let slow: Vec<_> = (0..24).map(|_| tokio::spawn(slowloris(addr, Duration::from_secs(1), stop.clone()))).collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        for _ in 0..2 {
            let started = std::time::Instant::now();
            let response = tokio::time::timeout(Duration::from_secs(20), get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
                .await
                .expect("the scrape is answered");
            assert!(response.starts_with("HTTP/1.1 200"), "{response:?}");
            let waited = started.elapsed();
            assert!(waited < HEADER_READ_TIME * 2 + Duration::from_secs(1), "the scrape waited {waited:?}");
        }
        stop.cancel();
        for s in slow {
            let _ = s.await;
        }
        // A connection that sends nothing loses its place as soon.
        let mut idle = tokio::net::TcpStream::connect(addr).await.expect("connects");
        let mut nothing = Vec::new();
        let closed = tokio::time::timeout(HEADER_READ_TIME + Duration::from_secs(2), idle.read_to_end(&mut nothing)).await;
        assert!(closed.is_ok(), "an idle connection was kept");
        exporter.shutdown().await;
    }

    /// Scrapes over one keep-alive connection until `until`; how many were answered.
    async fn keep_scraping(addr: SocketAddr, until: std::time::Instant) -> usize {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connects");
        let mut scrapes = 0;
        let mut buf = Vec::new();
        while std::time::Instant::now() < until {
            stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("writes");
            // Read one response: its header, then Content-Length bytes.
            buf.clear();
            let mut chunk = [0u8; 4096];
            let body_len = loop {
                let n = stream.read(&mut chunk).await.expect("reads");
                assert!(n > 0, "closed");
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf);
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").and_then(|v| v.trim().parse::<usize>().ok()))
                        .expect("a content length");
                    break end + 4 + length;
                }
            };
            while buf.len() < body_len {
                let n = stream.read(&mut chunk).await.expect("reads");
                assert!(n > 0, "closed");
                buf.extend_from_slice(&chunk[..n]);
            }
            scrapes += 1;
        }
        scrapes
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn scrapes_within_the_interval_share_one_computed_exposition() {
        let (registry, refresh, refreshed) = counting_exporter_parts();
        let exporter = PromExporter::start("127.0.0.1:0".parse().expect("addr"), registry, refresh).await.expect("starts");
        let addr = exporter.local_addr();
        let run = Duration::from_secs(3);
        let until = std::time::Instant::now() + run;
        // The probe: 12 keep-alive scrapers, as fast as they can.
        let scrapers: Vec<_> = (0..12).map(|_| tokio::spawn(keep_scraping(addr, until))).collect();
        let mut scrapes = 0;
        for s in scrapers {
            scrapes += s.await.expect("scraper");
        }
        let computed = refreshed.load(std::sync::atomic::Ordering::SeqCst);
        println!("{scrapes} scrapes in {run:?}, {computed} computed");
        assert!(scrapes > 12, "{scrapes} scrapes");
        assert!(computed <= 5, "{computed} computations for {scrapes} scrapes in {run:?}");
        // After the interval a scrape sees new values.
        tokio::time::sleep(RENDERED_FOR).await;
        let response = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert_eq!(topic_number(&response), Some(computed as f64 + 1.0), "{response}");
        exporter.shutdown().await;
    }
}
