//! The checks behind the `decode_headers` fuzz target, in a library so that the seed corpus can
//! also be run as a plain test (`cargo test` here, no nightly needed).
//!
//! One input is read three ways:
//! 1. as `extFields`: lines split at `\n`, each `key=value` split at its first `=` (a line without
//!    `=` is a key with an empty value; later duplicates win, as in a map); every typed header the
//!    broker reads, answers or sends is decoded from it and checked against an independent model
//!    of Java's decoding (see [`Ty`] and [`expected`]), then re-encoded and decoded again;
//! 2. as a message properties string (`store::message::properties`) and as Java `Properties`
//!    text (`remoting::properties`): parse, write, parse again must give the same map;
//! 3. as the JSON bodies (and config files) the broker decodes with `remoting::fastjson`, and as
//!    a compressed or plain REGISTER_BROKER body: no panic, and whatever decodes re-encodes to
//!    JSON that decodes to the same value.

use std::fmt::Debug;

use broker::consumer_offset::ConsumerOffsetFile;
use broker::delay_offset::DelayOffsetFile;
use broker::processor::admin::{ConsumeStatsHeader, DeleteGroupHeader, ProducerGroupHeader, TopicHeader};
use broker::rebalance_lock::MessageQueue;
use broker::subscription_group::{SubscriptionGroupConfig, SubscriptionGroupFile};
use broker::transaction::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};
use remoting::command::ExtFields;
use remoting::fastjson::{self, JsonStyle};
use remoting::header::{CommandHeader, HeaderError};
use remoting::protocol::broker::*;
use remoting::protocol::heartbeat::{HeartbeatData, SubscriptionData};
use remoting::protocol::name::GroupName;
use remoting::protocol::namesrv::*;
use remoting::protocol::register::RegisterBrokerBody;
use remoting::protocol::topic::TopicConfigSerializeWrapper;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// Java's name rules, written out independently of `remoting::protocol::name`.

/// `TopicValidator.VALID_CHAR_BIT_MAP`: `^[%|a-zA-Z0-9_-]+$`, checked char by char.
fn java_name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_uppercase() || c.is_ascii_digit() || c == '%' || c == '|' || c == '_' || c == '-'
}

/// Java `String.length()`: UTF-16 code units.
fn java_length(s: &str) -> usize {
    s.encode_utf16().count()
}

/// `TopicValidator.validateTopic`: not blank, only the legal characters, at most 127 long.
pub fn java_topic_ok(s: &str) -> bool {
    !s.is_empty() && s.chars().all(java_name_char) && java_length(s) <= 127
}

/// `Validators.checkGroup` (as the broker applies it when it creates a group): not blank, at
/// most 255 long, only the legal characters.
pub fn java_group_ok(s: &str) -> bool {
    !s.is_empty() && java_length(s) <= 255 && s.chars().all(java_name_char)
}

// ---------------------------------------------------------------------------------------------
// The model of header decoding.

/// A field's Java type, as `RemotingCommand.decodeCommandCustomHeader` converts it, plus the
/// two validated name types. Deliberate differences from Java that the model encodes: numbers are
/// trimmed before parsing, and `""` for a number (or any optional field) means "absent" (Go
/// writes `""` for unset keys); Java would throw `NumberFormatException` on both.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    Str,
    Int,
    Long,
    Bool,
    Topic,
    Group,
}

#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub key: &'static str,
    pub ty: Ty,
    pub required: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Missing,
    Invalid,
    Rejected,
}

fn kind_of(e: &HeaderError) -> Kind {
    match e {
        HeaderError::Missing { .. } => Kind::Missing,
        HeaderError::Invalid { .. } => Kind::Invalid,
        HeaderError::Rejected { .. } => Kind::Rejected,
    }
}

/// `Integer.parseInt` / `Long.parseLong` on ASCII digits (after a trim): an optional sign, at
/// least one digit, the value in range.
fn java_integer(text: &str, min: i128, max: i128) -> Option<i128> {
    let t = text.trim_matches(char::is_whitespace);
    let (negative, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut v: i128 = 0;
    for b in digits.bytes() {
        v = v * 10 + i128::from(b - b'0');
        if v > max + 1 {
            return None;
        }
    }
    let v = if negative { -v } else { v };
    (min..=max).contains(&v).then_some(v)
}

/// The text a decoded value writes back, or why the value is refused.
fn canonical(ty: Ty, text: &str) -> Result<String, Kind> {
    match ty {
        Ty::Str => Ok(text.to_owned()),
        Ty::Int => java_integer(text, i32::MIN.into(), i32::MAX.into()).map(|v| v.to_string()).ok_or(Kind::Invalid),
        Ty::Long => java_integer(text, i64::MIN.into(), i64::MAX.into()).map(|v| v.to_string()).ok_or(Kind::Invalid),
        // `Boolean.parseBoolean`: "true" in any case; anything else is false, nothing fails.
        Ty::Bool => {
            let t = text.as_bytes();
            let is_true = t.len() == 4 && t.iter().zip(b"true").all(|(a, b)| a.to_ascii_lowercase() == *b);
            Ok(if is_true { "true" } else { "false" }.to_owned())
        }
        Ty::Topic => if java_topic_ok(text) { Ok(text.to_owned()) } else { Err(Kind::Rejected) },
        Ty::Group => if java_group_ok(text) { Ok(text.to_owned()) } else { Err(Kind::Rejected) },
    }
}

/// What decoding `ext` must give: the fields it writes back, in declaration order, or the first
/// field (in declaration order) that fails and how.
pub fn expected(spec: &[Field], ext: &ExtFields) -> Result<Vec<(String, String)>, (&'static str, Kind)> {
    let mut out = Vec::new();
    for f in spec {
        // Text and booleans judge `""` themselves (Java's parseBoolean reads it as false).
        let text_like = matches!(f.ty, Ty::Str | Ty::Topic | Ty::Group | Ty::Bool);
        match ext.get(f.key) {
            None if f.required => return Err((f.key, Kind::Missing)),
            None => {}
            Some("") if !f.required => {}
            Some("") if !text_like => return Err((f.key, Kind::Missing)),
            Some(text) => out.push((f.key.to_owned(), canonical(f.ty, text).map_err(|k| (f.key, k))?)),
        }
    }
    Ok(out)
}

fn pairs(ext: &ExtFields) -> Vec<(String, String)> {
    ext.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

/// Decodes `H` from `ext` and checks it against the model; returns whether it decoded.
pub fn check_header<H: CommandHeader + PartialEq + Debug>(name: &str, spec: &[Field], ext: &ExtFields) -> bool {
    let want = expected(spec, ext);
    match (H::read_from(ext), want) {
        (Ok(h), Ok(fields)) => {
            let mut written = ExtFields::default();
            h.write_to(&mut written);
            assert_eq!(pairs(&written), fields, "{name}: decoded {h:?} from {ext:?} writes back other ext fields");
            for f in spec {
                if let Some(v) = written.get(f.key) {
                    match f.ty {
                        Ty::Topic => assert!(java_topic_ok(v), "{name}.{}: decoded topic {v:?} breaks Java's rules", f.key),
                        Ty::Group => assert!(java_group_ok(v), "{name}.{}: decoded group {v:?} breaks Java's rules", f.key),
                        _ => {}
                    }
                }
            }
            let again = H::read_from(&written).unwrap_or_else(|e| panic!("{name}: re-encoded {written:?} does not decode: {e}"));
            assert_eq!(again, h, "{name}: round trip through {written:?}");
            let mut rewritten = ExtFields::default();
            again.write_to(&mut rewritten);
            assert_eq!(pairs(&rewritten), pairs(&written), "{name}: encoding is not stable");
            true
        }
        (Err(e), Err((field, kind))) => {
            assert_eq!((e.field(), kind_of(&e)), (field, kind), "{name}: {ext:?} fails as {e:?}, the model says {field} {kind:?}");
            false
        }
        (Ok(h), Err((field, kind))) => panic!("{name}: {ext:?} decoded as {h:?}, the model says {field} {kind:?}"),
        (Err(e), Ok(fields)) => panic!("{name}: {ext:?} fails ({e:?}), the model decodes {fields:?}"),
    }
}

macro_rules! req {
    (R) => {
        true
    };
    (O) => {
        false
    };
}

/// `header!(Type { R Topic "topic", O Int "queueId", ... })`: a header and its Java fields in
/// declaration order (R required / O optional).
macro_rules! headers {
    ($ext:ident, $seen:ident; $( $ty:ident { $( $r:ident $t:ident $key:literal ),* $(,)? } )*) => {{
        $(
            const $ty: &[Field] = &[$( Field { key: $key, ty: Ty::$t, required: req!($r) } ),*];
            if check_header::<$ty>(stringify!($ty), $ty, $ext) {
                $seen.push(stringify!($ty));
            }
        )*
    }};
}

/// Every typed header of the broker (requests it serves, responses it writes, requests and
/// responses of the name-server codes it sends, CHECK_TRANSACTION_STATE to producers). Returns the
/// names of those that decoded.
#[allow(non_upper_case_globals)]
pub fn check_headers(ext: &ExtFields) -> Vec<&'static str> {
    let mut seen = Vec::new();
    headers! { ext, seen;
        // remoting::protocol::broker
        SendMessageRequestHeader {
            R Str "producerGroup", R Topic "topic", R Str "defaultTopic", R Int "defaultTopicQueueNums", R Int "queueId",
            R Int "sysFlag", R Long "bornTimestamp", R Int "flag", O Str "properties", O Int "reconsumeTimes",
            O Bool "unitMode", O Bool "batch", O Int "maxReconsumeTimes", O Str "bname",
        }
        SendMessageRequestHeaderV2 {
            R Str "a", R Topic "b", R Str "c", R Int "d", R Int "e", R Int "f", R Long "g", R Int "h",
            O Str "i", O Int "j", O Bool "k", O Int "l", O Bool "m", O Str "n",
        }
        SendMessageResponseHeader { R Str "msgId", R Int "queueId", R Long "queueOffset", O Str "transactionId", O Str "recallHandle" }
        PullMessageRequestHeader {
            R Group "consumerGroup", R Topic "topic", R Int "queueId", R Long "queueOffset", R Int "maxMsgNums",
            R Int "sysFlag", R Long "commitOffset", R Long "suspendTimeoutMillis", O Str "subscription",
            R Long "subVersion", O Str "expressionType", O Int "maxMsgBytes", O Str "bname",
        }
        PullMessageResponseHeader { R Long "suggestWhichBrokerId", R Long "nextBeginOffset", R Long "minOffset", R Long "maxOffset" }
        QueryConsumerOffsetRequestHeader { R Group "consumerGroup", R Topic "topic", R Int "queueId", O Bool "setZeroIfNotFound" }
        UpdateConsumerOffsetRequestHeader { R Group "consumerGroup", R Topic "topic", R Int "queueId", R Long "commitOffset" }
        TopicQueueHeader { R Topic "topic", R Int "queueId" }
        SearchOffsetRequestHeader { R Topic "topic", R Int "queueId", R Long "timestamp", O Str "boundaryType" }
        UnregisterClientRequestHeader { R Str "clientID", O Str "producerGroup", O Group "consumerGroup" }
        ConsumerGroupHeader { R Group "consumerGroup" }
        ViewMessageRequestHeader { R Long "offset" }
        QueryMessageRequestHeader { R Topic "topic", R Str "key", R Int "maxNum", R Long "beginTimestamp", R Long "endTimestamp" }
        QueryMessageResponseHeader { R Long "indexLastUpdateTimestamp", R Long "indexLastUpdatePhyoffset" }
        CreateTopicRequestHeader {
            R Topic "topic", R Str "defaultTopic", R Int "readQueueNums", R Int "writeQueueNums", R Int "perm",
            R Str "topicFilterType", O Int "topicSysFlag", R Bool "order", O Str "attributes",
        }
        ConsumerSendMsgBackRequestHeader {
            R Long "offset", R Group "group", R Int "delayLevel", O Str "originMsgId", O Str "originTopic",
            O Bool "unitMode", O Int "maxReconsumeTimes",
        }
        // remoting::protocol::namesrv (the broker sends these and reads the responses)
        RegisterBrokerRequestHeader {
            R Str "brokerName", R Str "brokerAddr", R Str "clusterName", R Str "haServerAddr", R Long "brokerId",
            O Long "heartbeatTimeoutMillis", O Bool "enableActingMaster", O Bool "compressed", O Int "bodyCrc32",
        }
        RegisterBrokerResponseHeader { O Str "haServerAddr", O Str "masterAddr" }
        BrokerIdentityHeader { R Str "brokerName", R Str "brokerAddr", R Str "clusterName", R Long "brokerId" }
        BrokerHeartbeatRequestHeader { R Str "clusterName", R Str "brokerAddr", R Str "brokerName" }
        GetRouteInfoRequestHeader { R Str "topic", O Bool "acceptStandardJsonOnly" }
        DeleteTopicFromNamesrvRequestHeader { R Str "topic", O Str "clusterName" }
        GetTopicsByClusterRequestHeader { R Str "cluster" }
        BrokerNameHeader { R Str "brokerName" }
        PutKvConfigRequestHeader { R Str "namespace", R Str "key", R Str "value" }
        KvConfigKeyHeader { R Str "namespace", R Str "key" }
        NamespaceHeader { R Str "namespace" }
        // broker::transaction
        EndTransactionRequestHeader {
            R Str "producerGroup", R Long "tranStateTableOffset", R Long "commitLogOffset", R Int "commitOrRollback",
            O Bool "fromTransactionCheck", R Str "msgId", O Str "transactionId",
        }
        CheckTransactionStateRequestHeader {
            R Long "tranStateTableOffset", R Long "commitLogOffset", O Str "msgId", O Str "transactionId", O Str "offsetMsgId",
        }
        // broker::processor::admin
        TopicHeader { R Topic "topic" }
        ProducerGroupHeader { R Str "producerGroup" }
        ConsumeStatsHeader { R Group "consumerGroup", O Topic "topic" }
        DeleteGroupHeader { R Str "groupName", O Bool "removeOffset", O Bool "cleanOffset" }
    }
    seen
}

/// Number of headers [`check_headers`] covers.
pub const HEADER_COUNT: usize = 33;

// ---------------------------------------------------------------------------------------------
// Input splitting.

/// `key=value` lines; see the module comment.
pub fn ext_fields(data: &[u8]) -> ExtFields {
    let text = String::from_utf8_lossy(data);
    let mut ext = ExtFields::default();
    for line in text.split('\n') {
        if line.is_empty() {
            continue;
        }
        let (k, v) = line.split_once('=').unwrap_or((line, ""));
        ext.insert(k.to_owned(), v.to_owned());
    }
    ext
}

// ---------------------------------------------------------------------------------------------
// Properties.

pub fn check_properties(data: &[u8]) {
    let text = String::from_utf8_lossy(data);

    // The properties string of a send (`properties` / `i`), as store and broker parse it.
    let map = store::message::properties::parse(&text);
    for (k, v) in &map {
        assert!(!k.is_empty() && !v.is_empty(), "empty name or value kept: {k:?}={v:?}");
        assert!(!k.contains(['\u{1}', '\u{2}']) && !v.contains('\u{2}'), "separator inside {k:?}={v:?}");
        assert_eq!(store::message::properties::get(&text, k), Some(v.as_str()), "get({k:?}) disagrees with parse");
    }
    let written = store::message::properties::serialize(map.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    assert_eq!(store::message::properties::parse(&written), map, "message properties round trip via {written:?}");

    // Java `Properties` text (broker.conf, config bodies).
    let map = remoting::properties::parse(&text);
    let written = remoting::properties::write(map.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    assert_eq!(remoting::properties::parse(&written), map, "Properties round trip via {written:?}");

    // Header values the processors parse further: message ids (VIEW, END_TRANSACTION, send back).
    if let Some((addr, offset)) = store::message::decode_offset_message_id(&text) {
        let id = store::message::offset_message_id(addr, offset);
        assert_eq!(store::message::decode_offset_message_id(&id), Some((addr, offset)), "message id {id}");
    }
}

// ---------------------------------------------------------------------------------------------
// JSON bodies.

/// The shape of LOCK_BATCH_MQ / UNLOCK_BATCH_MQ (the broker's own struct is private to its
/// processor; this copies its fields and types).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    pub client_id: String,
    pub consumer_group: GroupName,
    #[serde(default)]
    pub mq_set: Vec<MessageQueue>,
}

/// The shape of CHECK_CLIENT_CONFIG's body (private in its processor too).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckClientConfigBody {
    pub subscription_data: Option<SubscriptionData>,
}

/// Decodes `T` with fastjson's reader; what decodes must survive fastjson's writer and reader.
fn json_round_trip<T: DeserializeOwned + Serialize + PartialEq + Debug>(what: &str, data: &[u8]) -> Option<T> {
    let value: T = fastjson::from_slice(data).ok()?;
    // `Standard` is left out: it writes longs beyond ±2^53 as strings (fastjson's BrowserCompatible),
    // which only the name server's route answers use and nobody here reads back.
    for style in [JsonStyle::Fastjson, JsonStyle::FastjsonPretty] {
        let bytes = fastjson::to_vec(&value, style);
        let again: T = fastjson::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{what}: {style:?} output {:?} does not decode: {e}", String::from_utf8_lossy(&bytes)));
        assert_eq!(again, value, "{what}: {style:?} round trip via {:?}", String::from_utf8_lossy(&bytes));
    }
    Some(value)
}

pub fn check_json(data: &[u8]) {
    json_round_trip::<HeartbeatData>("HeartbeatData", data);
    if let Some(body) = json_round_trip::<LockBatchRequestBody>("lock body", data) {
        assert!(java_group_ok(&body.consumer_group), "lock body group {:?}", body.consumer_group.as_str());
    }
    json_round_trip::<CheckClientConfigBody>("CHECK_CLIENT_CONFIG body", data);
    json_round_trip::<SubscriptionGroupConfig>("SubscriptionGroupConfig", data);
    // The config files, read at start-up with the same reader.
    json_round_trip::<SubscriptionGroupFile>("subscriptionGroup.json", data);
    json_round_trip::<TopicConfigSerializeWrapper>("topics.json", data);
    json_round_trip::<ConsumerOffsetFile>("consumerOffset.json", data);
    json_round_trip::<DelayOffsetFile>("delayOffset.json", data);
    // Plain JSON values through the bare-key rewriter: it must never turn valid JSON invalid or
    // change what it says.
    if let Ok(plain) = serde_json::from_slice::<serde_json::Value>(data) {
        let via: serde_json::Value = fastjson::from_slice(data).unwrap_or_else(|e| panic!("valid JSON refused by fastjson::from_slice: {e}"));
        assert_eq!(via, plain, "fastjson::from_slice changed valid JSON");
    }

    // REGISTER_BROKER (the broker writes it; the name server reads it; both forms).
    if let Ok(body) = RegisterBrokerBody::decode(data, false) {
        let again = RegisterBrokerBody::decode(&body.encode_json(), false).expect("re-encoded register body decodes");
        assert_eq!(again, body, "register body JSON round trip");
    }
    if let Ok(body) = RegisterBrokerBody::decode(data, true) {
        let again = RegisterBrokerBody::decode(&body.encode_compressed(), true).expect("re-compressed register body decodes");
        assert_eq!(again, body, "register body compressed round trip");
    }
}

/// Everything the fuzz target does with one input; returns the headers that decoded.
pub fn check_all(data: &[u8]) -> Vec<&'static str> {
    let seen = check_headers(&ext_fields(data));
    check_properties(data);
    check_json(data);
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds() -> Vec<(String, Vec<u8>)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/seeds/decode_headers");
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn every_header_decodes_from_some_seed() {
        let mut seen = std::collections::BTreeSet::new();
        for (_, data) in seeds() {
            seen.extend(check_all(&data));
        }
        assert_eq!(seen.len(), HEADER_COUNT, "decoded: {seen:?}");
    }

    #[test]
    fn json_seeds_decode() {
        let seeds = seeds();
        let get = |name: &str| &seeds.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("seed {name}")).1;
        assert!(fastjson::from_slice::<HeartbeatData>(get("json-heartbeat")).is_ok());
        assert!(fastjson::from_slice::<LockBatchRequestBody>(get("json-lock")).is_ok());
        assert!(fastjson::from_slice::<SubscriptionGroupConfig>(get("json-subscription-group")).is_ok());
        assert!(RegisterBrokerBody::decode(get("json-register-body"), false).is_ok());
    }

    #[test]
    #[should_panic(expected = "the model decodes")]
    fn a_header_that_disagrees_with_the_model_fails_the_run() {
        // Declaring the topic a plain string: the real header refuses "a/b", the model would not.
        const WRONG: &[Field] = &[Field { key: "topic", ty: Ty::Str, required: true }, Field { key: "queueId", ty: Ty::Int, required: true }];
        check_header::<TopicQueueHeader>("TopicQueueHeader", WRONG, &ext_fields(b"topic=a/b\nqueueId=1"));
    }

    #[test]
    fn the_model_knows_javas_rules() {
        assert!(java_topic_ok("%RETRY%g|a-b_9") && !java_topic_ok("a/b") && !java_topic_ok(&"t".repeat(128)) && java_topic_ok(&"t".repeat(127)));
        assert!(java_group_ok(&"g".repeat(255)) && !java_group_ok(&"g".repeat(256)) && !java_group_ok("") && !java_group_ok("é"));
        assert_eq!(java_integer(" +7 ", -10, 10), Some(7));
        assert_eq!(java_integer("2147483648", i32::MIN.into(), i32::MAX.into()), None);
        assert_eq!(java_integer("-2147483648", i32::MIN.into(), i32::MAX.into()), Some(-2147483648));
        assert_eq!(java_integer("-", -10, 10), None);
    }
}
