//! What a put answers: its status (Java's `PutMessageStatus`), where the records landed, and the
//! callback a put that waits for its flush is answered through. Shared by the commit log, the
//! group-commit driver (`flush`) and the DLedger append path; re-exported by [`crate::commit_log`].

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutStatus {
    PutOk,
    FlushDiskTimeout,
    CreateMappedFileFailed,
    MessageIllegal,
    PropertiesSizeExceeded,
    ServiceNotAvailable,
    /// Java's OS_PAGECACHE_BUSY; a DLedger commit log answers it for a quorum not reached in time
    /// or too many appends pending.
    OsPageCacheBusy,
    UnknownError,
    /// 5.x timer admission (Java `WHEEL_TIMER_NOT_ENABLE`, `WHEEL_TIMER_MSG_ILLEGAL`,
    /// `WHEEL_TIMER_FLOW_CONTROL`): refused before anything is appended.
    WheelTimerNotEnable,
    WheelTimerMsgIllegal,
    WheelTimerFlowControl,
}

impl PutStatus {
    /// Java's `PutMessageStatus` constant name (metrics labels such as `put_status`).
    pub fn java_name(&self) -> &'static str {
        match self {
            PutStatus::PutOk => "PUT_OK",
            PutStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            PutStatus::CreateMappedFileFailed => "CREATE_MAPPED_FILE_FAILED",
            PutStatus::MessageIllegal => "MESSAGE_ILLEGAL",
            PutStatus::PropertiesSizeExceeded => "PROPERTIES_SIZE_EXCEEDED",
            PutStatus::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
            PutStatus::OsPageCacheBusy => "OS_PAGE_CACHE_BUSY",
            PutStatus::UnknownError => "UNKNOWN_ERROR",
            PutStatus::WheelTimerNotEnable => "WHEEL_TIMER_NOT_ENABLE",
            PutStatus::WheelTimerMsgIllegal => "WHEEL_TIMER_MSG_ILLEGAL",
            PutStatus::WheelTimerFlowControl => "WHEEL_TIMER_FLOW_CONTROL",
        }
    }
}

/// Where an append landed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendResult {
    /// Physical offset of the first record.
    pub wrote_offset: i64,
    pub wrote_bytes: usize,
    /// Offset message ids, one per record.
    pub msg_ids: Vec<String>,
    pub store_timestamp: i64,
    /// Queue offset of the first record.
    pub logics_offset: i64,
    pub msg_num: usize,
}

/// Receives the result of a put whose acknowledgement waits for a flush.
pub type PutCallback = Box<dyn FnOnce(PutMessageResult) + Send>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutMessageResult {
    pub status: PutStatus,
    pub append: Option<AppendResult>,
    /// A human-readable reason for a failed status.
    pub remark: Option<String>,
}

impl PutMessageResult {
    pub fn failed(status: PutStatus, remark: impl Into<String>) -> Self {
        PutMessageResult { status, append: None, remark: Some(remark.into()) }
    }

    pub fn is_ok(&self) -> bool {
        self.status == PutStatus::PutOk
    }
}
