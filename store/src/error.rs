//! The store's error: what can stop a store from opening.

use crate::mapped_file_queue::LoadError;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("Lock failed, MQ already started: {0}")]
    Locked(String),
    #[error("index: {0}")]
    Index(String),
}

/// Maps an IO error to [`StoreError::Io`] saying what was being done.
pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let what = what.into();
    move |source| StoreError::Io { what, source }
}
