//! DLedger's remoting bodies: every request and response of [`crate::protocol`] as the JSON that
//! 0.3.1.2's `JSON.toJSONBytes` writes and `JSON.parseObject(bytes, Class)` reads (fastjson
//! 1.2.69 and 1.2.83 agree byte for byte; checked against both by the golden vectors of
//! `compat-tests/dledger-golden`).
//!
//! Writing, as fastjson's JavaBean serializer does:
//! - the properties are the class's getters, computed ones included (`PushEntryRequest` writes
//!   `batch`, `count`, `firstEntryIndex`, `lastEntryIndex` and `totalSize`), sorted by name;
//! - null values are left out, primitives always written (`code`, `term`, ...);
//! - `byte[]` as padded base64, enums by name, strings with fastjson's escapes
//!   ([`remoting::fastjson`]);
//! - a `Map` in its `HashMap` order ([`java_hash_map_order`]), not sorted.
//!
//! Reading, as leniently as fastjson: unknown keys are skipped, a missing key or `null` takes the
//! Java field's initial value (`term` -1, `code` 200, ...), numbers may come as strings, enums as
//! ordinals, base64 without padding, keys unquoted. Keys that only have a getter are ignored
//! (`totalSize`, `count`, ...). Refused, with an error naming the class and the field: anything
//! that is not one JSON object, a value of the wrong type, an unknown enum name, invalid base64,
//! a key given twice (fastjson's answer to that depends on its internal field order), and bodies
//! over [`MAX_BODY_BYTES`].
//!
//! Where our types hold less than Java's classes (so a decoded body re-encodes differently):
//! - `group` is a `String`: an absent group and `""` are the same, and written as absent;
//! - an entry's `size` is not kept: it is written as 48 + body length (what Java's store sets);
//! - bodies (`byte[]`) are `Bytes`: an absent body and an empty one are the same, written `""`;
//! - a push with a non-empty `batchEntry` keeps those entries and drops `entry`, as Java's
//!   follower does (`isBatch()` decides); its `totalSize` is written as the sum of the entry sizes
//!   (`addEntry`'s count), whereas Java, having no setter, re-encodes a parsed push with 0;
//! - `MetadataResponse.peers` is ordered, so equal keys' insertion order is the key order.

mod value;

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::entry::Entry;
use crate::protocol::*;
pub use value::{java_hash_map_order, java_string_hash};
use value::{Base64, JBool, JEnum, JInt, JLong, JStringMap};

/// The largest body we read: the remoting frame limit (the codec refuses larger frames first).
pub const MAX_BODY_BYTES: usize = remoting::codec::DEFAULT_MAX_FRAME_BYTES;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("{class} body of {size_bytes} bytes is over the {max_bytes}-byte limit")]
    TooLarge { class: &'static str, size_bytes: usize, max_bytes: usize },
    #[error("{class} body is missing")]
    Empty { class: &'static str },
    #[error("{class} body is not a JSON object")]
    NotAnObject { class: &'static str },
    #[error("{class} body is invalid: {source}")]
    Json { class: &'static str, source: serde_json::Error },
}

/// A DLedger request or response that travels as a fastjson JSON body.
pub trait JsonBody: Sized {
    /// The Java class, as errors name it.
    const JAVA_CLASS: &'static str;

    /// The body fastjson writes for the Java object holding these values.
    fn to_json(&self) -> Vec<u8>;

    /// Reads a body as fastjson reads it into the Java class.
    fn from_json(bytes: &[u8]) -> Result<Self, WireError>;
}

/// The body of `value`.
pub fn encode<T: JsonBody>(value: &T) -> Vec<u8> {
    value.to_json()
}

/// Reads a body of type `T`.
pub fn decode<T: JsonBody>(bytes: &[u8]) -> Result<T, WireError> {
    T::from_json(bytes)
}

fn write<T: Serialize>(dto: &T) -> Vec<u8> {
    remoting::fastjson::to_vec(dto, remoting::fastjson::JsonStyle::Fastjson)
}

fn read<T: DeserializeOwned>(class: &'static str, bytes: &[u8]) -> Result<T, WireError> {
    if bytes.len() > MAX_BODY_BYTES {
        return Err(WireError::TooLarge { class, size_bytes: bytes.len(), max_bytes: MAX_BODY_BYTES });
    }
    // serde would also read a struct from an array; fastjson only from an object.
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        None => return Err(WireError::Empty { class }),
        Some(b'{') => {}
        Some(_) => return Err(WireError::NotAnObject { class }),
    }
    remoting::fastjson::from_slice(bytes).map_err(|source| WireError::Json { class, source })
}

/// Declares the JSON shape of one Java class: its properties in fastjson's (alphabetical) order,
/// each optional. `[skip_deserializing]` marks a getter without a setter: written, ignored on
/// input.
macro_rules! json_class {
    ($name:ident { $($key:literal $field:ident: $ty:ty $([$skip:ident])?,)* }) => {
        #[derive(Serialize, Deserialize, Default, Debug)]
        struct $name {
            $(
                #[serde(rename = $key, default, skip_serializing_if = "Option::is_none" $(, $skip)?)]
                $field: Option<$ty>,
            )*
        }
    };
}

/// The base fields (`RequestOrResponse`) out of a body struct, with Java's initial values.
macro_rules! base_in {
    ($dto:expr) => {
        Base {
            group: $dto.group.unwrap_or_default(),
            remote_id: $dto.remote_id,
            local_id: $dto.local_id,
            leader_id: $dto.leader_id,
            term: $dto.term.map_or(-1, |t| t.0),
            code: Code($dto.code.map_or(Code::SUCCESS.0, |c| c.0)),
        }
    };
}

/// A body struct with the base fields of `$base` and the other fields given.
macro_rules! base_out {
    ($base:expr, $ty:ident { $($field:ident: $value:expr),* $(,)? }) => {{
        let base: &Base = $base;
        #[allow(clippy::needless_update)]
        let dto = $ty {
            code: Some(JInt(base.code.0)),
            group: Some(base.group.clone()).filter(|g| !g.is_empty()),
            leader_id: base.leader_id.clone(),
            local_id: base.local_id.clone(),
            remote_id: base.remote_id.clone(),
            term: Some(JLong(base.term)),
            $($field: $value,)*
            ..Default::default()
        };
        dto
    }};
}

/// Implements [`JsonBody`] for a protocol type through its body struct.
macro_rules! json_body {
    ($ty:ty, $class:literal, $dto:ident, |$v:ident| $out:expr, |$d:ident| $in:expr) => {
        impl JsonBody for $ty {
            const JAVA_CLASS: &'static str = $class;

            fn to_json(&self) -> Vec<u8> {
                let $v = self;
                let dto: $dto = $out;
                write(&dto)
            }

            fn from_json(bytes: &[u8]) -> Result<Self, WireError> {
                let $d: $dto = read($class, bytes)?;
                Ok($in)
            }
        }
    };
}

json_class!(EntryJson {
    "body" body: Base64,
    "bodyCrc" body_crc: JInt,
    "chainCrc" chain_crc: JInt,
    "channel" channel: JInt,
    "index" index: JLong,
    "magic" magic: JInt,
    "pos" pos: JLong,
    "size" size: JInt,
    "term" term: JLong,
});

impl EntryJson {
    fn from_entry(e: &Entry) -> EntryJson {
        EntryJson {
            body: Some(Base64(e.body.clone())),
            body_crc: Some(JInt(e.body_crc)),
            chain_crc: Some(JInt(e.chain_crc)),
            channel: Some(JInt(e.channel)),
            index: Some(JLong(e.index)),
            magic: Some(JInt(e.magic)),
            pos: Some(JLong(e.pos)),
            // What the store sets (`computeSizeInBytes`, or the header read back). Bodies are
            // bounded by the frame, far below 2 GiB.
            size: Some(JInt(i32::try_from(e.size()).unwrap_or(i32::MAX))),
            term: Some(JLong(e.term)),
        }
    }

    fn into_entry(self) -> Entry {
        Entry {
            magic: self.magic.map_or(0, |v| v.0),
            index: self.index.map_or(0, |v| v.0),
            term: self.term.map_or(0, |v| v.0),
            pos: self.pos.map_or(0, |v| v.0),
            channel: self.channel.map_or(0, |v| v.0),
            chain_crc: self.chain_crc.map_or(0, |v| v.0),
            body_crc: self.body_crc.map_or(0, |v| v.0),
            body: self.body.map(|b| b.0).unwrap_or_default(),
        }
    }
}

fn entries_out(entries: &[Entry]) -> Option<Vec<EntryJson>> {
    Some(entries.iter().map(EntryJson::from_entry).collect())
}

fn entries_in(entries: Option<Vec<EntryJson>>) -> Vec<Entry> {
    entries.unwrap_or_default().into_iter().map(EntryJson::into_entry).collect()
}

// ---------------------------------------------------------------------------------------------
// Base-only classes: MetadataRequest, HeartBeatRequest/Response, LeadershipTransferResponse.

json_class!(BaseJson {
    "code" code: JInt,
    "group" group: String,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "remoteId" remote_id: String,
    "term" term: JLong,
});

json_body!(MetadataRequest, "MetadataRequest", BaseJson, |v| base_out!(&v.base, BaseJson {}), |d| MetadataRequest { base: base_in!(d) });
json_body!(HeartBeatRequest, "HeartBeatRequest", BaseJson, |v| base_out!(&v.base, BaseJson {}), |d| HeartBeatRequest { base: base_in!(d) });
json_body!(HeartBeatResponse, "HeartBeatResponse", BaseJson, |v| base_out!(&v.base, BaseJson {}), |d| HeartBeatResponse { base: base_in!(d) });
json_body!(LeadershipTransferResponse, "LeadershipTransferResponse", BaseJson, |v| base_out!(&v.base, BaseJson {}), |d| LeadershipTransferResponse {
    base: base_in!(d)
});

// ---------------------------------------------------------------------------------------------
// METADATA

json_class!(MetadataResponseJson {
    "code" code: JInt,
    "group" group: String,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "peers" peers: JStringMap,
    "remoteId" remote_id: String,
    "term" term: JLong,
});

fn peers_out(peers: &BTreeMap<String, String>) -> Option<JStringMap> {
    if peers.is_empty() {
        // Java's error answers leave `peers` null; a member always knows itself.
        return None;
    }
    let order = java_hash_map_order(peers.keys().map(String::as_str));
    Some(JStringMap(order.into_iter().map(|k| (k.to_owned(), peers[k].clone())).collect()))
}

json_body!(MetadataResponse, "MetadataResponse", MetadataResponseJson, |v| base_out!(&v.base, MetadataResponseJson { peers: peers_out(&v.peers) }), |d| {
    MetadataResponse { peers: d.peers.unwrap_or_default().0.into_iter().collect(), base: base_in!(d) }
});

// ---------------------------------------------------------------------------------------------
// APPEND

json_class!(AppendEntryRequestJson {
    "body" body: Base64,
    "code" code: JInt,
    "group" group: String,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "remoteId" remote_id: String,
    "term" term: JLong,
});

json_body!(
    AppendEntryRequest,
    "AppendEntryRequest",
    AppendEntryRequestJson,
    |v| base_out!(&v.base, AppendEntryRequestJson { body: Some(Base64(v.body.clone())) }),
    |d| AppendEntryRequest { body: d.body.map(|b| b.0).unwrap_or_default(), base: base_in!(d) }
);

json_class!(AppendEntryResponseJson {
    "code" code: JInt,
    "group" group: String,
    "index" index: JLong,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "pos" pos: JLong,
    "remoteId" remote_id: String,
    "term" term: JLong,
});

json_body!(
    AppendEntryResponse,
    "AppendEntryResponse",
    AppendEntryResponseJson,
    |v| base_out!(&v.base, AppendEntryResponseJson { index: Some(JLong(v.index)), pos: Some(JLong(v.pos)) }),
    |d| AppendEntryResponse { index: d.index.map_or(-1, |x| x.0), pos: d.pos.map_or(-1, |x| x.0), base: base_in!(d) }
);

// ---------------------------------------------------------------------------------------------
// GET

json_class!(GetEntriesRequestJson {
    "beginIndex" begin_index: JLong,
    "code" code: JInt,
    "group" group: String,
    "indexList" index_list: Vec<Option<JLong>>,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "maxSize" max_size: JInt,
    "remoteId" remote_id: String,
    "term" term: JLong,
});

json_body!(
    GetEntriesRequest,
    "GetEntriesRequest",
    GetEntriesRequestJson,
    |v| base_out!(
        &v.base,
        GetEntriesRequestJson {
            begin_index: v.begin_index.map(JLong),
            index_list: v.index_list.as_ref().map(|l| l.iter().map(|i| Some(JLong(*i))).collect()),
            max_size: Some(JInt(v.max_size)),
        }
    ),
    |d| GetEntriesRequest {
        begin_index: d.begin_index.map(|x| x.0),
        max_size: d.max_size.map_or(0, |x| x.0),
        // A Java List<Long> may hold nulls; no index is ever null, so they are dropped.
        index_list: d.index_list.map(|l| l.into_iter().flatten().map(|x| x.0).collect()),
        base: base_in!(d),
    }
);

json_class!(EntriesResponseJson {
    "code" code: JInt,
    "entries" entries: Vec<EntryJson>,
    "group" group: String,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "remoteId" remote_id: String,
    "term" term: JLong,
});

json_body!(
    GetEntriesResponse,
    "GetEntriesResponse",
    EntriesResponseJson,
    |v| base_out!(&v.base, EntriesResponseJson { entries: entries_out(&v.entries) }),
    |d| GetEntriesResponse { entries: entries_in(d.entries), base: base_in!(d) }
);

// ---------------------------------------------------------------------------------------------
// VOTE

json_class!(VoteRequestJson {
    "code" code: JInt,
    "group" group: String,
    "leaderId" leader_id: String,
    "ledgerEndIndex" ledger_end_index: JLong,
    "ledgerEndTerm" ledger_end_term: JLong,
    "localId" local_id: String,
    "remoteId" remote_id: String,
    "term" term: JLong,
});

json_body!(
    VoteRequest,
    "VoteRequest",
    VoteRequestJson,
    |v| base_out!(&v.base, VoteRequestJson { ledger_end_index: Some(JLong(v.ledger_end_index)), ledger_end_term: Some(JLong(v.ledger_end_term)) }),
    |d| VoteRequest { ledger_end_index: d.ledger_end_index.map_or(-1, |x| x.0), ledger_end_term: d.ledger_end_term.map_or(-1, |x| x.0), base: base_in!(d) }
);

json_class!(VoteResponseJson {
    "code" code: JInt,
    "group" group: String,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "remoteId" remote_id: String,
    "term" term: JLong,
    "voteResult" vote_result: JEnum<VoteResult>,
});

json_body!(VoteResponse, "VoteResponse", VoteResponseJson, |v| base_out!(&v.base, VoteResponseJson { vote_result: Some(JEnum(v.vote_result)) }), |d| {
    VoteResponse { vote_result: d.vote_result.map_or(VoteResult::Unknown, |x| x.0), base: base_in!(d) }
});

// ---------------------------------------------------------------------------------------------
// PUSH

json_class!(PushEntryRequestJson {
    "batch" batch: JBool [skip_deserializing],
    "batchEntry" batch_entry: Vec<EntryJson>,
    "code" code: JInt,
    "commitIndex" commit_index: JLong,
    "count" count: JInt [skip_deserializing],
    "entry" entry: EntryJson,
    "firstEntryIndex" first_entry_index: JLong [skip_deserializing],
    "group" group: String,
    "lastEntryIndex" last_entry_index: JLong [skip_deserializing],
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "remoteId" remote_id: String,
    "term" term: JLong,
    "totalSize" total_size: JLong [skip_deserializing],
    "type" kind: JEnum<PushType>,
});

fn push_out(v: &PushEntryRequest) -> PushEntryRequestJson {
    // More than one entry can only travel as a batch.
    let batch = (v.batch || v.entries.len() > 1) && !v.entries.is_empty();
    let (single, batch_entry, total_size) = if batch {
        let total: i64 = v.entries.iter().map(|e| e.size() as i64).sum();
        (None, v.entries.as_slice(), total)
    } else {
        // `setEntry` does not count into totalSize; only `addEntry` does.
        (v.entries.first().map(EntryJson::from_entry), &[][..], 0)
    };
    let (first, last) = match (v.entries.first(), v.entries.last()) {
        (Some(f), Some(l)) => (f.index, l.index),
        _ => (-1, -1),
    };
    base_out!(
        &v.base,
        PushEntryRequestJson {
            batch: Some(JBool(batch)),
            batch_entry: entries_out(batch_entry),
            commit_index: Some(JLong(v.commit_index)),
            count: Some(JInt(v.entries.len() as i32)),
            entry: single,
            first_entry_index: Some(JLong(first)),
            last_entry_index: Some(JLong(last)),
            total_size: Some(JLong(total_size)),
            kind: Some(JEnum(v.kind)),
        }
    )
}

fn push_in(d: PushEntryRequestJson) -> PushEntryRequest {
    let batch_entry = entries_in(d.batch_entry);
    let (entries, batch) = if batch_entry.is_empty() { (d.entry.map(EntryJson::into_entry).into_iter().collect(), false) } else { (batch_entry, true) };
    PushEntryRequest { commit_index: d.commit_index.map_or(-1, |x| x.0), kind: d.kind.map_or(PushType::Append, |x| x.0), entries, batch, base: base_in!(d) }
}

json_body!(PushEntryRequest, "PushEntryRequest", PushEntryRequestJson, |v| push_out(v), |d| push_in(d));

json_class!(PushEntryResponseJson {
    "beginIndex" begin_index: JLong,
    "code" code: JInt,
    "count" count: JInt,
    "endIndex" end_index: JLong,
    "group" group: String,
    "index" index: JLong,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "remoteId" remote_id: String,
    "term" term: JLong,
});

json_body!(
    PushEntryResponse,
    "PushEntryResponse",
    PushEntryResponseJson,
    |v| base_out!(
        &v.base,
        PushEntryResponseJson {
            begin_index: Some(JLong(v.begin_index)),
            count: Some(JInt(v.count)),
            end_index: Some(JLong(v.end_index)),
            index: v.index.map(JLong),
        }
    ),
    |d| PushEntryResponse {
        index: d.index.map(|x| x.0),
        begin_index: d.begin_index.map_or(0, |x| x.0),
        end_index: d.end_index.map_or(0, |x| x.0),
        count: d.count.map_or(0, |x| x.0),
        base: base_in!(d),
    }
);

// ---------------------------------------------------------------------------------------------
// LEADERSHIP_TRANSFER

json_class!(LeadershipTransferRequestJson {
    "code" code: JInt,
    "group" group: String,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "remoteId" remote_id: String,
    "takeLeadershipLedgerIndex" take_leadership_ledger_index: JLong,
    "term" term: JLong,
    "transferId" transfer_id: String,
    "transfereeId" transferee_id: String,
});

json_body!(
    LeadershipTransferRequest,
    "LeadershipTransferRequest",
    LeadershipTransferRequestJson,
    |v| base_out!(
        &v.base,
        LeadershipTransferRequestJson {
            take_leadership_ledger_index: Some(JLong(v.take_leadership_ledger_index)),
            transfer_id: v.transfer_id.clone(),
            transferee_id: v.transferee_id.clone(),
        }
    ),
    |d| LeadershipTransferRequest {
        transfer_id: d.transfer_id,
        transferee_id: d.transferee_id,
        take_leadership_ledger_index: d.take_leadership_ledger_index.map_or(0, |x| x.0),
        base: base_in!(d),
    }
);

// ---------------------------------------------------------------------------------------------
// PULL: registered by Java 0.3.1.2 but never served (its handler returns null), so these exist
// only on the wire.

/// `PullEntriesRequest`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PullEntriesRequest {
    pub base: Base,
    pub node_id: Option<String>,
    pub begin_index: Option<i64>,
}

/// `PullEntriesResponse`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PullEntriesResponse {
    pub base: Base,
    pub entries: Vec<Entry>,
}

json_class!(PullEntriesRequestJson {
    "beginIndex" begin_index: JLong,
    "code" code: JInt,
    "group" group: String,
    "leaderId" leader_id: String,
    "localId" local_id: String,
    "nodeId" node_id: String,
    "remoteId" remote_id: String,
    "term" term: JLong,
});

json_body!(
    PullEntriesRequest,
    "PullEntriesRequest",
    PullEntriesRequestJson,
    |v| base_out!(&v.base, PullEntriesRequestJson { begin_index: v.begin_index.map(JLong), node_id: v.node_id.clone() }),
    |d| PullEntriesRequest { node_id: d.node_id, begin_index: d.begin_index.map(|x| x.0), base: base_in!(d) }
);

json_body!(
    PullEntriesResponse,
    "PullEntriesResponse",
    EntriesResponseJson,
    |v| base_out!(&v.base, EntriesResponseJson { entries: entries_out(&v.entries) }),
    |d| PullEntriesResponse { entries: entries_in(d.entries), base: base_in!(d) }
);

#[cfg(test)]
mod tests;
