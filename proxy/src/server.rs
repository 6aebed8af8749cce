//! The gRPC listener on `grpcServerPort`: HTTP/2 in plaintext or over TLS on the same port; and
//! the proxy's remoting port (`remotingListenPort`), which takes both remoting and gRPC
//! connections as Java's `MultiProtocolRemotingServer` does, gRPC ones going to the same server.

use std::net::SocketAddr;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::frames::WholeMessages;
use crate::pb::messaging_service_server::MessagingServiceServer;
use crate::service::Messaging;
use crate::tls::{Io, RemotingHandoff};

/// Accepted connections waiting to be served, at most.
const ACCEPTED_BACKLOG: usize = 256;

pub struct GrpcServer {
    local_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// Where accepted connections go to be served (the remoting port's gRPC ones too).
    connections: mpsc::Sender<std::io::Result<Io>>,
    tls: Option<TlsAcceptor>,
}

impl GrpcServer {
    /// Binds `addr` and serves. Must be called inside a tokio runtime.
    pub async fn start(addr: SocketAddr, service: Messaging) -> std::io::Result<GrpcServer> {
        let config = service.config();
        let tls = crate::tls::acceptor(&config.tls_cert_path, &config.tls_key_path, config.tls_test_mode_enable)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let max = service.config().grpc_max_inbound_message_size;
        let svc = MessagingServiceServer::new(service).max_decoding_message_size(max).max_encoding_message_size(max);
        let (stop, stopped) = oneshot::channel::<()>();
        let (connections, accepted) = mpsc::channel(ACCEPTED_BACKLOG);
        crate::tls::accept_into(listener, tls.clone(), connections.clone(), None);
        let incoming = tokio_stream::wrappers::ReceiverStream::new(accepted);
        let task = tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
                .concurrency_limit_per_connection(256)
                .layer(tower::util::MapRequestLayer::new(move |r| WholeMessages::gate(r, max)))
                .add_service(svc)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "gRPC server stopped");
            }
        });
        tracing::info!(addr = %local_addr, "gRPC proxy started");
        Ok(GrpcServer { local_addr, stop: Some(stop), task: Some(task), connections, tls })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves the proxy's remoting port on `listener`: remoting connections go to `remoting`,
    /// gRPC ones (plaintext, or TLS asking for `h2`) to this server. It closes with this server.
    pub fn serve_remoting_port(&self, listener: tokio::net::TcpListener, remoting: RemotingHandoff) {
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, "proxy remoting port open (remoting and gRPC)");
        }
        crate::tls::accept_into(listener, self.tls.clone(), self.connections.clone(), Some(remoting));
    }

    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        }
    }
}
