//! DLedger 0.3.1.2's RPCs as plain types: the request codes, the result codes carried in every
//! response body, and one struct per request and response (the fields of Java's classes; how they
//! travel as fastjson JSON bodies is [`crate::wire`]'s business). The engine speaks these.

use crate::entry::Entry;

/// Remoting request codes of the DLedger RPCs (`DLedgerRequestCode`).
pub mod request_code {
    pub const METADATA: i32 = 50000;
    pub const APPEND: i32 = 50001;
    pub const GET: i32 = 50002;
    pub const VOTE: i32 = 51001;
    pub const HEART_BEAT: i32 = 51002;
    /// Registered by Java 0.3.1.2, but its handler answers nothing.
    pub const PULL: i32 = 51003;
    pub const PUSH: i32 = 51004;
    pub const LEADERSHIP_TRANSFER: i32 = 51005;
}

/// `DLedgerResponseCode`: the outcome, in the response body's `code` (the remoting frame says 200).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Code(pub i32);

impl Code {
    pub const UNKNOWN: Code = Code(-1);
    pub const SUCCESS: Code = Code(200);
    pub const TIMEOUT: Code = Code(300);
    pub const METADATA_ERROR: Code = Code(301);
    pub const NETWORK_ERROR: Code = Code(302);
    pub const UNSUPPORTED: Code = Code(303);
    pub const UNKNOWN_GROUP: Code = Code(400);
    pub const UNKNOWN_MEMBER: Code = Code(401);
    pub const UNEXPECTED_MEMBER: Code = Code(402);
    pub const EXPIRED_TERM: Code = Code(403);
    pub const NOT_LEADER: Code = Code(404);
    pub const NOT_FOLLOWER: Code = Code(405);
    pub const INCONSISTENT_STATE: Code = Code(406);
    pub const INCONSISTENT_TERM: Code = Code(407);
    pub const INCONSISTENT_INDEX: Code = Code(408);
    pub const INCONSISTENT_LEADER: Code = Code(409);
    pub const INDEX_OUT_OF_RANGE: Code = Code(410);
    pub const UNEXPECTED_ARGUMENT: Code = Code(411);
    pub const REPEATED_REQUEST: Code = Code(412);
    pub const REPEATED_PUSH: Code = Code(413);
    pub const DISK_ERROR: Code = Code(414);
    pub const DISK_FULL: Code = Code(415);
    pub const TERM_NOT_READY: Code = Code(416);
    pub const FALL_BEHIND_TOO_MUCH: Code = Code(417);
    pub const TAKE_LEADERSHIP_FAILED: Code = Code(418);
    pub const INDEX_LESS_THAN_LOCAL_BEGIN: Code = Code(419);
    pub const REQUEST_WITH_EMPTY_BODYS: Code = Code(420);
    pub const PUSH_REQUEST_IS_FULL: Code = Code(421);
    pub const INTERNAL_ERROR: Code = Code(500);
    pub const TERM_CHANGED: Code = Code(501);
    pub const WAIT_QUORUM_ACK_TIMEOUT: Code = Code(502);
    pub const LEADER_PENDING_FULL: Code = Code(503);
    pub const ILLEGAL_MEMBER_STATE: Code = Code(504);
    pub const LEADER_NOT_READY: Code = Code(505);
    pub const LEADER_TRANSFERRING: Code = Code(506);
}

/// `RequestOrResponse`: the fields every request and response carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    pub group: String,
    /// The receiver's id (requests).
    pub remote_id: Option<String>,
    /// The sender's id.
    pub local_id: Option<String>,
    /// The leader (or, in a vote, the candidate) as the sender sees it.
    pub leader_id: Option<String>,
    pub term: i64,
    pub code: Code,
}

impl Default for Base {
    fn default() -> Self {
        Base { group: String::new(), remote_id: None, local_id: None, leader_id: None, term: -1, code: Code::SUCCESS }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteRequest {
    pub base: Base,
    pub ledger_end_index: i64,
    pub ledger_end_term: i64,
}

/// `VoteResponse.RESULT`, in Java's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VoteResult {
    Unknown,
    Accept,
    RejectUnknownLeader,
    RejectUnexpectedLeader,
    RejectExpiredVoteTerm,
    RejectAlreadyVoted,
    RejectAlreadyHasLeader,
    RejectTermNotReady,
    RejectTermSmallThanLedger,
    RejectExpiredLedgerTerm,
    RejectSmallLedgerEndIndex,
    RejectTakingLeadership,
}

impl VoteResult {
    pub const ALL: [VoteResult; 12] = [
        VoteResult::Unknown,
        VoteResult::Accept,
        VoteResult::RejectUnknownLeader,
        VoteResult::RejectUnexpectedLeader,
        VoteResult::RejectExpiredVoteTerm,
        VoteResult::RejectAlreadyVoted,
        VoteResult::RejectAlreadyHasLeader,
        VoteResult::RejectTermNotReady,
        VoteResult::RejectTermSmallThanLedger,
        VoteResult::RejectExpiredLedgerTerm,
        VoteResult::RejectSmallLedgerEndIndex,
        VoteResult::RejectTakingLeadership,
    ];

    /// The Java enum name.
    pub fn java_name(self) -> &'static str {
        match self {
            VoteResult::Unknown => "UNKNOWN",
            VoteResult::Accept => "ACCEPT",
            VoteResult::RejectUnknownLeader => "REJECT_UNKNOWN_LEADER",
            VoteResult::RejectUnexpectedLeader => "REJECT_UNEXPECTED_LEADER",
            VoteResult::RejectExpiredVoteTerm => "REJECT_EXPIRED_VOTE_TERM",
            VoteResult::RejectAlreadyVoted => "REJECT_ALREADY_VOTED",
            VoteResult::RejectAlreadyHasLeader => "REJECT_ALREADY_HAS_LEADER",
            VoteResult::RejectTermNotReady => "REJECT_TERM_NOT_READY",
            VoteResult::RejectTermSmallThanLedger => "REJECT_TERM_SMALL_THAN_LEDGER",
            VoteResult::RejectExpiredLedgerTerm => "REJECT_EXPIRED_LEDGER_TERM",
            VoteResult::RejectSmallLedgerEndIndex => "REJECT_SMALL_LEDGER_END_INDEX",
            VoteResult::RejectTakingLeadership => "REJECT_TAKING_LEADERSHIP",
        }
    }

    pub fn from_java_name(name: &str) -> Option<VoteResult> {
        VoteResult::ALL.into_iter().find(|r| r.java_name() == name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteResponse {
    pub base: Base,
    pub vote_result: VoteResult,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartBeatRequest {
    pub base: Base,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartBeatResponse {
    pub base: Base,
}

/// `PushEntryRequest.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PushType {
    Append,
    Commit,
    Compare,
    Truncate,
}

impl PushType {
    pub fn java_name(self) -> &'static str {
        match self {
            PushType::Append => "APPEND",
            PushType::Commit => "COMMIT",
            PushType::Compare => "COMPARE",
            PushType::Truncate => "TRUNCATE",
        }
    }

    pub fn from_java_name(name: &str) -> Option<PushType> {
        [PushType::Append, PushType::Commit, PushType::Compare, PushType::Truncate].into_iter().find(|t| t.java_name() == name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushEntryRequest {
    pub base: Base,
    pub commit_index: i64,
    pub kind: PushType,
    /// One entry (`entry`), or several when `batch` (`batchEntry`); none for COMMIT.
    pub entries: Vec<Entry>,
    pub batch: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushEntryResponse {
    pub base: Base,
    /// The first entry's index (absent for COMMIT).
    pub index: Option<i64>,
    /// The follower's ledger begin and end.
    pub begin_index: i64,
    pub end_index: i64,
    pub count: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendEntryRequest {
    pub base: Base,
    pub body: bytes::Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendEntryResponse {
    pub base: Base,
    pub index: i64,
    pub pos: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetEntriesRequest {
    pub base: Base,
    pub begin_index: Option<i64>,
    pub max_size: i32,
    pub index_list: Option<Vec<i64>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetEntriesResponse {
    pub base: Base,
    pub entries: Vec<Entry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataRequest {
    pub base: Base,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataResponse {
    pub base: Base,
    /// Peer id -> address.
    pub peers: std::collections::BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeadershipTransferRequest {
    pub base: Base,
    pub transfer_id: Option<String>,
    pub transferee_id: Option<String>,
    pub take_leadership_ledger_index: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeadershipTransferResponse {
    pub base: Base,
}

/// The messages the members of a group exchange (what the engine sends and receives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerMessage {
    Vote(VoteRequest),
    VoteResponse(VoteResponse),
    HeartBeat(HeartBeatRequest),
    HeartBeatResponse(HeartBeatResponse),
    Push(PushEntryRequest),
    PushResponse(PushEntryResponse),
    LeadershipTransfer(LeadershipTransferRequest),
    LeadershipTransferResponse(LeadershipTransferResponse),
}
