//! The Prometheus endpoint: `GET http://metricsPromExporterHost:metricsPromExporterPort/metrics`
//! (any path, as Java's exporter answers) serves the text exposition of one registry.
//!
//! Gauges are computed when scraped, as Java's observable gauges are: each scrape first runs the
//! `refresh` callback (on a blocking thread, since it may walk every group's queues), then
//! gathers. Scrapes are served one at a time, so one scrape's refresh never empties a gauge
//! another is reading. Connections are bounded in number and in time.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
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
/// A connection (keep-alive included) is closed after this long, so a slow or idle client does
/// not keep its place.
const CONNECTION_TIME: Duration = Duration::from_secs(60);

struct Scrape {
    registry: Registry,
    refresh: Refresh,
    one_at_a_time: Mutex<()>,
}

impl Scrape {
    async fn exposition(self: &Arc<Self>) -> Result<Vec<u8>, String> {
        let _turn = self.one_at_a_time.lock().await;
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            (this.refresh)();
            Ok(super::text::encode(&this.registry.gather(), crate::clock::now_ms()).into_bytes())
        })
        .await
        .map_err(|e| e.to_string())?
    }

    async fn respond(self: Arc<Self>, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
        }
        match self.exposition().await {
            Ok(text) => {
                let body = if request.method() == Method::HEAD { Bytes::new() } else { Bytes::from(text) };
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
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let scrape = Arc::new(Scrape { registry, refresh, one_at_a_time: Mutex::new(()) });
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
        let Ok(place) = places.clone().try_acquire_owned() else {
            debug!(%peer, "metrics endpoint full; connection closed");
            continue;
        };
        let (scrape, stop) = (scrape.clone(), stop.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let scrape = scrape.clone();
                async move { Ok::<_, Infallible>(scrape.respond(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
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
        assert!(response.contains("\nrocketmq_topic_number 7\n"), "{response}");
        let refused = get(exporter.local_addr(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
        assert!(refused.starts_with("HTTP/1.1 405"), "{refused}");
        let garbage = get(exporter.local_addr(), "\x00\x01 not http\r\n\r\n").await;
        assert!(garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"), "{garbage}");
        exporter.shutdown().await;
    }
}
