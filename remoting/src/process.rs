//! What every server binary (mqnamesrv, mqbroker) does around its main loop: log to stderr, and
//! wait for SIGTERM or Ctrl-C before a graceful shutdown.

use std::io::IsTerminal;

/// Logs to stderr at `RUST_LOG` (default info), coloured only on a terminal.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Returns on SIGTERM or Ctrl-C.
pub async fn wait_for_stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
