//! TLS in Java's default permissive mode (`tls.server.mode=permissive`): one port, and a
//! connection whose first byte opens a TLS handshake (0x16, a ClientHello record) is served over
//! TLS, any other as plaintext HTTP/2. The certificate is `tlsCertPath`/`tlsKeyPath` when both
//! exist, else (`tlsTestModeEnable`, Java's default) a self-signed one made at start.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// The TLS record type of a handshake: what a ClientHello starts with.
const HANDSHAKE: u8 = 0x16;
/// A connection must show its first byte and finish a handshake within this.
const FIRST_BYTES_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections between accept and served (sniffing or in a handshake) at once, at most.
const MAX_PENDING: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("{path} holds no {what}")]
    Empty { path: String, what: &'static str },
    #[error("cannot make a self-signed certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    #[error("bad certificate or key: {0}")]
    Rustls(#[from] rustls::Error),
}

fn read_pem(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.display().to_string(), source })
}

/// The acceptor: the configured certificate when both files exist, else a self-signed one when
/// `test_mode`, else none (plaintext only).
pub fn acceptor(cert_path: &str, key_path: &str, test_mode: bool) -> Result<Option<TlsAcceptor>, TlsError> {
    let (cert, key) = (Path::new(cert_path), Path::new(key_path));
    let (certs, key): (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) = if cert.is_file() && key.is_file() {
        let pem = read_pem(cert)?;
        let certs = rustls_pemfile::certs(&mut pem.as_slice())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| TlsError::Read { path: cert_path.to_owned(), source })?;
        if certs.is_empty() {
            return Err(TlsError::Empty { path: cert_path.to_owned(), what: "certificate" });
        }
        let pem = read_pem(key)?;
        let key = rustls_pemfile::private_key(&mut pem.as_slice())
            .map_err(|source| TlsError::Read { path: key_path.to_owned(), source })?
            .ok_or_else(|| TlsError::Empty { path: key_path.to_owned(), what: "private key" })?;
        (certs, key)
    } else if test_mode {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pair.serialize_der()));
        (vec![made.cert.der().clone()], key)
    } else {
        return Ok(None);
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config =
        rustls::ServerConfig::builder_with_provider(provider).with_safe_default_protocol_versions()?.with_no_client_auth().with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}

/// An accepted connection, in plaintext or over TLS.
pub enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Connected for Io {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            Io::Plain(s) => s.connect_info(),
            Io::Tls(s) => s.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// What an accepted connection speaks, told by its first bytes (Java's `ProtocolNegotiationHandler`
/// on the proxy's remoting port; the gRPC port takes everything as gRPC).
pub enum Accepted {
    Grpc(Io),
    /// RocketMQ remoting, in plaintext or over TLS (a TLS client that did not ask for `h2`).
    Remoting(Io),
}

/// The HTTP/2 connection preface's first bytes.
const HTTP2_PREFACE: &[u8] = b"PRI ";

/// Sniffs the first byte and finishes a TLS handshake when it opens one. With `remoting`, a
/// connection that does not open with HTTP/2's preface (in plaintext) or ask for `h2` (over TLS)
/// is a remoting one.
async fn classify(stream: TcpStream, tls: Option<TlsAcceptor>, remoting: bool) -> io::Result<Accepted> {
    let mut first = [0u8; 4];
    let mut n = stream.peek(&mut first).await?;
    if first[0] == HANDSHAKE && n > 0 {
        if let Some(tls) = tls {
            let tls_stream = tls.accept(stream).await?;
            let h2 = tls_stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
            let io = Io::Tls(Box::new(tls_stream));
            return Ok(if remoting && !h2 { Accepted::Remoting(io) } else { Accepted::Grpc(io) });
        }
    }
    if !remoting {
        return Ok(Accepted::Grpc(Io::Plain(stream)));
    }
    // The preface may come in pieces: wait (bounded by the caller's timeout) for 4 bytes or a
    // byte that already rules it out.
    while n < HTTP2_PREFACE.len() && first[..n] == HTTP2_PREFACE[..n] {
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        n = stream.peek(&mut first).await?;
    }
    let io = Io::Plain(stream);
    Ok(if first[..n] == *HTTP2_PREFACE { Accepted::Grpc(io) } else { Accepted::Remoting(io) })
}

/// Accepts on `listener` until `grpc` closes, and hands each connection, once classified, to
/// `grpc` (gRPC) or `remoting` (when given: the proxy's remoting port, which takes both). A
/// connection that shows nothing or fails its handshake in time is closed.
pub fn accept_into(listener: TcpListener, tls: Option<TlsAcceptor>, grpc: mpsc::Sender<io::Result<Io>>, remoting: Option<RemotingHandoff>) {
    let pending = Arc::new(Semaphore::new(MAX_PENDING));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = grpc.closed() => return,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let Ok(permit) = pending.clone().try_acquire_owned() else {
                tracing::warn!("too many proxy connections in their handshake; closing a new one");
                continue;
            };
            let (grpc, tls, remoting) = (grpc.clone(), tls.clone(), remoting.clone());
            tokio::spawn(async move {
                let _permit = permit;
                match tokio::time::timeout(FIRST_BYTES_TIMEOUT, classify(stream, tls, remoting.is_some())).await {
                    Ok(Ok(Accepted::Grpc(io))) => {
                        let _ = grpc.send(Ok(io)).await;
                    }
                    Ok(Ok(Accepted::Remoting(io))) => {
                        if let Some(remoting) = remoting {
                            remoting(io, peer);
                        }
                    }
                    Ok(Err(e)) => tracing::debug!(error = %e, "proxy connection dropped before serving"),
                    Err(_) => tracing::debug!("proxy connection silent or slow in its handshake; closed"),
                }
            });
        }
    });
}

/// Where the remoting connections of a port that takes both protocols go.
pub type RemotingHandoff = Arc<dyn Fn(Io, std::net::SocketAddr) + Send + Sync>;
