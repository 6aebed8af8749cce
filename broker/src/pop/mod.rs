//! 5.x pop consumption. Its data formats, as Java 5.3.3 writes and reads them:
//!
//! - [`names`]: the revive topic and group, the pop retry topics (v1 `%RETRY%group_topic`, v2
//!   `%RETRY%group+topic`), the lock and polling keys, the unique ids (`UNIQ_KEY`) of check point
//!   and ack messages;
//! - [`formats`]: `PopCheckPoint`, `AckMsg`, `BatchAckMsg` (the revive log's message bodies, in
//!   fastjson's short keys) with the check point's bit-map helpers, and what the revive messages
//!   carry besides the body (queue, tags, unique key, timer delivery time);
//! - [`extra_info`]: the receipt handle (`extraInfo`, `POP_CK`) and the pop response's
//!   `startOffsetInfo` / `msgOffsetInfo` / `orderCountInfo` strings;
//! - [`config_files`]: `config/consumerOrderInfo.json` and `config/messageRequestMode.json`.
//!
//! Built on them, in `crate::popping`: the pop service, the revive service and orderly pop's
//! state. This module depends on nothing else of the broker, so any module may use its names.
//!
//! The formats are checked byte for byte against Java 5.3.3's own classes
//! (`compat-tests/golden/PopGoldenVectors.java`, `broker/tests/t22_pop_formats.rs`).

pub mod config_files;
pub mod extra_info;
pub mod formats;
pub mod headers;
pub mod names;

/// A pop string or body that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PopFormatError {
    /// A receipt handle (`extraInfo`) with fewer fields than the value asked for needs.
    #[error("extraInfo {extra_info:?} has {fields} fields, {needed} needed for {what}")]
    ExtraInfoTooShort { extra_info: String, fields: usize, needed: usize, what: &'static str },
    /// A field that should be a number is not one (Java: `NumberFormatException`).
    #[error("{what} is not a number: {value:?}")]
    NotANumber { what: &'static str, value: String },
    /// A retry marker other than `0`, `1` or `2`.
    #[error("retry marker {value:?} is none of 0, 1, 2")]
    BadRetryMarker { value: String },
    /// An offset-info entry that is not `retry queue value` (three fields separated by spaces).
    #[error("{what} entry {entry:?} is not three space-separated fields")]
    BadOffsetInfoEntry { what: &'static str, entry: String },
    /// Two offset-info entries for the same `retry@queue` key.
    #[error("{what} has key {key:?} twice")]
    DuplicateOffsetInfoKey { what: &'static str, key: String },
    /// A JSON body or file that does not decode into its type.
    #[error("{what}: {message}")]
    Json { what: &'static str, message: String },
}
