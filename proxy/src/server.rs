//! The gRPC listener on `grpcServerPort`: HTTP/2 in plaintext or over TLS on the same port.

use std::net::SocketAddr;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::pb::messaging_service_server::MessagingServiceServer;
use crate::service::Messaging;

pub struct GrpcServer {
    local_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
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
        let incoming = tokio_stream::wrappers::ReceiverStream::new(crate::tls::incoming(listener, tls));
        let task = tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
                .concurrency_limit_per_connection(256)
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
        Ok(GrpcServer { local_addr, stop: Some(stop), task: Some(task) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
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
