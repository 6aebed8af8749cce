//! 5.3.3's store and flow-control admin codes, as Java's `AdminBrokerProcessor` answers them on a
//! broker with the default (file) store and no controller:
//!
//! - UPDATE/REMOVE/GET_COLD_DATA_FLOW_CTR_* (2001-2003, `updateColdDataFlowCtrGroupConfig`,
//!   `removeColdDataFlowCtrGroupConfig`, `getColdDataFlowCtrInfo`): see [`super::cold_data`].
//! - SET_COMMITLOG_READ_MODE (2004, `setCommitLogReadAheadMode`): madvise of the commit-log files.
//! - RESET_MASTER_FLUSH_OFFSET (908, `resetMasterFlushOffset`): a slave's checkpoint value.
//! - CHECK_ROCKSDB_CQ_WRITE_PROGRESS (354, `checkRocksdbCqWriteProgress`) and
//!   EXPORT_ROCKSDB_CONFIG_TO_JSON (355, `rocksDBConfigToJson`): there is no RocksDB here, so
//!   Java's answers for its default store: "in progress" (the check then finds the double write
//!   off) and "export done." with nothing to export.
//! - GET_BROKER_EPOCH_CACHE (1007, `getBrokerEpoch`): only in controller mode, which ours has not.

use std::sync::Arc;
use std::time::Instant;

use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

use super::cold_data::ColdDataFlowCtr;
use store::store::MessageStore;

use super::ok;
use crate::config::LiveConfig;
use crate::handles::Membership;

/// The ext field of SET_COMMITLOG_READ_MODE (Java's `FIleReadaheadMode.READ_AHEAD_MODE`).
const READ_AHEAD_MODE: &str = "READ_AHEAD_MODE";
/// Linux's `MADV_NORMAL` and `MADV_RANDOM`, the two modes Java takes.
const MADV_NORMAL: i32 = 0;
const MADV_RANDOM: i32 = 1;

/// Java's `CheckRocksdbCqWriteResult.CheckStatus`.
const CHECK_NOT_OK: i32 = 1;
const CHECK_IN_PROGRESS: i32 = 2;

pub struct StoreAdminProcessor {
    pub config: LiveConfig,
    pub store: Arc<MessageStore>,
    /// Whether this broker is a slave (brokerId != 0).
    pub membership: Membership,
    pub cold: ColdDataFlowCtr,
}

impl RequestProcessor for StoreAdminProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let from = channel.remote_addr();
        match request.request_code() {
            RequestCode::UPDATE_COLD_DATA_FLOW_CTR_CONFIG => self.update_cold_config(&request, from),
            RequestCode::REMOVE_COLD_DATA_FLOW_CTR_CONFIG => {
                if let Some(body) = request.body.as_deref() {
                    let removed = self.cold.remove(body, Instant::now());
                    tracing::info!(%from, group = ?String::from_utf8_lossy(body), removed, "removeColdDataFlowCtrGroupConfig");
                }
                Ok(Some(ok(&request)))
            }
            RequestCode::GET_COLD_DATA_FLOW_CTR_INFO => {
                let c = self.config.load();
                let json = self.cold.info_json(c.cg_cold_read_threshold, c.global_cold_read_threshold, Instant::now());
                Ok(Some(ok(&request).with_body(json.into_bytes())))
            }
            RequestCode::SET_COMMITLOG_READ_MODE => self.set_read_ahead_mode(&request, from),
            RequestCode::RESET_MASTER_FLUSH_OFFSET => self.reset_master_flush_offset(&request),
            RequestCode::CHECK_ROCKSDB_CQ_WRITE_PROGRESS => {
                // Java answers at once and checks on a worker, which finds no double write.
                let topic = request.ext_fields.as_ref().and_then(|f| f.get("topic"));
                tracing::info!(
                    %from, ?topic, status = CHECK_NOT_OK,
                    "checkRocksdbCqWriteProgress result: rocksdbCQWriteEnable is false, checkRocksdbCqWriteProgressCommand is invalid"
                );
                // Java leaves the remark its `createResponseCommand(null)` starts with.
                let response = RemotingCommand::success_unset_remark(&request);
                Ok(Some(response.with_body(format!(r#"{{"checkStatus":{CHECK_IN_PROGRESS}}}"#).into_bytes())))
            }
            RequestCode::EXPORT_ROCKSDB_CONFIG_TO_JSON => {
                let types = request.ext_fields.as_ref().and_then(|f| f.get("configType"));
                let Some(types) = types else {
                    return Err(ProcessError::system("the custom field <configType> is null"));
                };
                config_types(types)?;
                // Topics, groups and offsets live in JSON files here: nothing to export.
                Ok(Some(ok(&request).with_remark("export done.")))
            }
            RequestCode::GET_BROKER_EPOCH_CACHE => Err(ProcessError::system("this request only for controllerMode ")),
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

impl StoreAdminProcessor {
    fn update_cold_config(&self, request: &RemotingCommand, from: std::net::SocketAddr) -> ProcessResult {
        let Some(body) = request.body.as_deref() else {
            return Ok(Some(ok(request)));
        };
        let update = self.cold.update(body, Instant::now())?;
        tracing::info!(%from, applied = update.applied, skipped = ?update.skipped, "updateColdDataFlowCtrGroupConfig");
        let response = ok(request);
        if update.skipped.is_empty() {
            return Ok(Some(response));
        }
        // Java skips such entries and answers SUCCESS too; the remark says which.
        Ok(Some(response.with_remark(format!(
            "skipped (a group must match ^[%|a-zA-Z0-9_-]+$ and be at most 255 characters; a threshold must be a long): {}",
            update.skipped.join(", ")
        ))))
    }

    fn set_read_ahead_mode(&self, request: &RemotingCommand, from: std::net::SocketAddr) -> ProcessResult {
        let Some(fields) = request.ext_fields.as_ref() else {
            return Err(ProcessError::system("set commitlog readahead mode param error"));
        };
        // Java's parse error (no mode, or not an int) lands in its catch-all.
        let Some(mode) = fields.get(READ_AHEAD_MODE).and_then(|m| m.parse::<i32>().ok()) else {
            return Err(ProcessError::system("set commitlog readahead mode failed"));
        };
        if mode != MADV_RANDOM && mode != MADV_NORMAL {
            return Err(ProcessError::new(ResponseCode::INVALID_PARAMETER, "set commitlog readahead mode param value error"));
        }
        let refused = self.store.set_commit_log_read_ahead(mode == MADV_RANDOM);
        tracing::info!(%from, mode, refused, "setCommitLogReadaheadMode");
        Ok(Some(ok(request).with_remark(format!("set commitlog readahead mode success, mode: {mode}"))))
    }

    /// Java sets it on a slave only (brokerId != 0), and a missing or unparsable value changes
    /// nothing (5.3.3's header decoding logs and skips a field it cannot read).
    fn reset_master_flush_offset(&self, request: &RemotingCommand) -> ProcessResult {
        if self.membership.broker_id() == 0 {
            return Ok(Some(ok(request)));
        }
        let Some(value) = request.ext_fields.as_ref().and_then(|f| f.get("masterFlushOffset")) else {
            return Ok(Some(ok(request).with_remark("masterFlushOffset is missing; nothing changed")));
        };
        let Ok(offset) = value.parse::<i64>() else {
            return Ok(Some(ok(request).with_remark(format!("masterFlushOffset {value:?} is not a long; nothing changed"))));
        };
        self.store.checkpoint().set_master_flushed_offset(offset);
        tracing::info!(offset, "resetMasterFlushOffset: masterFlushedOffset set");
        Ok(Some(ok(request)))
    }
}

/// Java's `ExportRocksDBConfigToJsonRequestHeader.ConfigType.fromString`: names split at `;`
/// (empty parts dropped), trimmed, matched ignoring case.
fn config_types(text: &str) -> Result<Vec<&'static str>, ProcessError> {
    const TYPES: [&str; 3] = ["topics", "subscriptionGroups", "consumerOffsets"];
    text.split(';')
        .filter(|t| !t.is_empty())
        .map(|t| {
            TYPES
                .iter()
                .copied()
                .find(|known| known.eq_ignore_ascii_case(t.trim()))
                .ok_or_else(|| ProcessError::system(format!("java.lang.IllegalArgumentException: Unknown config type: {t}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_types_are_read_as_java_reads_them() {
        assert_eq!(config_types("topics;SUBSCRIPTIONGROUPS; consumerOffsets ;;").unwrap(), vec!["topics", "subscriptionGroups", "consumerOffsets"]);
        assert_eq!(config_types("").unwrap(), Vec::<&str>::new());
        let err = config_types("topics;bogus").unwrap_err();
        assert_eq!(err.remark, "java.lang.IllegalArgumentException: Unknown config type: bogus");
    }
}
