//! The 5.x pop formats against Java 5.3.3's own classes: `compat-tests/golden/vectors/java-5.3.3/pop/`
//! holds what `PopGoldenVectors.java` wrote (fastjson bodies of `PopCheckPoint`, `AckMsg`,
//! `BatchAckMsg`, the two config files, and `strings.txt` of receipt handles, offset infos, names
//! and unique ids). The values built here are the ones built there.

use std::collections::BTreeMap;
use std::path::PathBuf;

use broker::pop::config_files::{ConsumerOrderInfoFile, MessageRequestMode, MessageRequestModeEntry, MessageRequestModeFile, OrderInfo};
use broker::pop::extra_info::{self, ExtraInfo, ExtraInfoFields, RetryMarker};
use broker::pop::formats::{AckMsg, BatchAckMsg, PopCheckPoint, ReviveMessage};
use broker::pop::names;
use proptest::prelude::*;

const WEIRD: &str = "g\"\\/ü€😀\u{7f}\u{2028}";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../compat-tests/golden/vectors/java-5.3.3/pop")
}

fn golden(name: &str) -> String {
    let path = dir().join(format!("{name}.json"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn strings() -> BTreeMap<String, String> {
    let path = dir().join("strings.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| {
            let (k, v) = l.split_once('\t').unwrap_or_else(|| panic!("bad line {l:?}"));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn s(map: &BTreeMap<String, String>, key: &str) -> String {
    map.get(key).unwrap_or_else(|| panic!("no string vector {key}")).clone()
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

#[allow(clippy::too_many_arguments)]
fn ck(
    so: i64,
    pt: i64,
    it: i64,
    bm: i32,
    n: i8,
    q: i32,
    t: &str,
    c: &str,
    ro: i64,
    diffs: Option<&[i32]>,
    bn: Option<&str>,
    rp: Option<&str>,
) -> PopCheckPoint {
    let mut ck = PopCheckPoint {
        start_offset: so,
        pop_time: pt,
        invisible_time: it,
        bit_map: bm,
        num: n,
        queue_id: q,
        topic: Some(t.into()),
        cid: Some(c.into()),
        revive_offset: ro,
        queue_offset_diff: None,
        broker_name: bn.map(Into::into),
        re_put_times: rp.map(Into::into),
    };
    for d in diffs.unwrap_or_default() {
        ck.add_diff(*d);
    }
    ck
}

fn ck_a() -> PopCheckPoint {
    ck(1024, 1_700_000_000_123, 60_000, 5, 3, 2, "TopicTest", "group-a", 77, Some(&[0, 2, 5]), Some("broker-a"), None)
}

fn ck_b() -> PopCheckPoint {
    ck(0, 1, 2, i32::MIN | 1, 32, 0, "%RETRY%group-b_TopicTest", "group-b", 0, None, None, Some("3"))
}

fn ck_c() -> PopCheckPoint {
    ck(i64::MAX - 5, -1, i64::MIN, -1, -128, i32::MAX, "%RETRY%g+t", WEIRD, -9, Some(&[0, i32::MAX, -3]), Some(WEIRD), Some("x"))
}

fn ack(ao: i64, so: i64, c: Option<&str>, t: Option<&str>, q: i32, pt: i64, bn: Option<&str>) -> AckMsg {
    AckMsg {
        ack_offset: ao,
        start_offset: so,
        consumer_group: c.map(Into::into),
        topic: t.map(Into::into),
        queue_id: q,
        pop_time: pt,
        broker_name: bn.map(Into::into),
    }
}

fn ack_a() -> AckMsg {
    ack(1029, 1024, Some("group-a"), Some("TopicTest"), 2, 1_700_000_000_123, Some("broker-a"))
}

fn ack_b() -> AckMsg {
    ack(0, 0, Some("group-b"), Some("%RETRY%group-b_TopicTest"), 0, 0, None)
}

fn batch_a() -> BatchAckMsg {
    BatchAckMsg { ack: ack(-1, 1024, Some("group-a"), Some("TopicTest"), 2, 1_700_000_000_123, Some("broker-a")), ack_offset_list: vec![1024, 1026, 1029] }
}

#[test]
fn check_points_encode_as_java_and_read_back() {
    for (name, value) in [("checkpoint", ck_a()), ("checkpoint_old", ck_b()), ("checkpoint_extremes", ck_c())] {
        let java = golden(name);
        assert_eq!(text(value.encode()), java, "{name}");
        assert_eq!(PopCheckPoint::decode(java.as_bytes()), Ok(value), "{name}");
    }
    assert_eq!(golden("checkpoint_reparsed"), golden("checkpoint"));
}

#[test]
fn acks_encode_as_java_and_read_back_also_under_long_names() {
    for (name, value) in [("ack", ack_a()), ("ack_no_broker", ack_b())] {
        let java = golden(name);
        assert_eq!(text(value.encode()), java, "{name}");
        assert_eq!(AckMsg::decode(java.as_bytes()), Ok(value), "{name}");
    }
    let long = AckMsg::decode(golden("ack_long_names_input").as_bytes()).unwrap();
    assert_eq!(text(long.encode()), golden("ack_long_names_reparsed"));
}

#[test]
fn batch_acks_encode_as_java_and_read_back() {
    let merged = BatchAckMsg { ack: ack(0, 7, Some(WEIRD), Some("TopicTest"), 1, 5, None), ack_offset_list: vec![7] };
    for (name, value) in [("batch_ack", batch_a()), ("batch_ack_merged", merged), ("batch_ack_empty", BatchAckMsg::default())] {
        let java = golden(name);
        assert_eq!(text(value.encode()), java, "{name}");
        assert_eq!(BatchAckMsg::decode(java.as_bytes()), Ok(value), "{name}");
    }
    // A batch ack is also a valid AckMsg to a reader that only knows AckMsg.
    assert_eq!(AckMsg::decode(golden("batch_ack").as_bytes()).map(|a| a.ack_offset), Ok(-1));
}

#[test]
fn receipt_handles_are_java_s() {
    let v = strings();
    let normal = ExtraInfo::new(1024, 1_700_000_000_123, 60_000, 3, "TopicTest", "broker-a", 2, None);
    assert_eq!(normal.to_string(), s(&v, "extra_info_7"));
    for (key, topic, marker) in
        [("extra_info_8_v1", "%RETRY%group-a_TopicTest", RetryMarker::RetryV1), ("extra_info_8_v2", "%RETRY%group-a+TopicTest", RetryMarker::RetryV2)]
    {
        let info = ExtraInfo::new(1024, 1_700_000_000_123, 60_000, 3, topic, "broker-a", 2, Some(1029));
        assert_eq!(info.to_string(), s(&v, key));
        let parsed = ExtraInfo::parse(&s(&v, key)).unwrap();
        assert_eq!(parsed, info);
        assert_eq!(parsed.retry, marker);
        assert_eq!(parsed.real_topic("TopicTest", "group-a"), topic);
    }
    let order = ExtraInfo::new(-1, 0, 0, names::POP_ORDER_REVIVE_QUEUE, "TopicTest", "broker-a", 0, Some(0));
    assert_eq!(order.to_string(), s(&v, "extra_info_order"));
    assert!(ExtraInfoFields::split(&s(&v, "extra_info_order")).is_order().unwrap());
    assert_eq!(ExtraInfo::parse(&s(&v, "extra_info_7")), Ok(normal));
}

/// Java's `TreeMap.toString` of a parsed offset info.
fn java_map<V: std::fmt::Display>(m: &BTreeMap<String, V>) -> String {
    let entries: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", entries.join(", "))
}

#[test]
fn offset_infos_are_java_s() {
    let v = strings();
    let mut so = String::new();
    extra_info::append_start_offset_info(&mut so, "TopicTest", 2, 1024);
    extra_info::append_start_offset_info(&mut so, "%RETRY%group-a_TopicTest", 0, 5);
    extra_info::append_start_offset_info(&mut so, "%RETRY%group-a+TopicTest", 1, 0);
    assert_eq!(so, s(&v, "start_offset_info"));
    assert_eq!(java_map(&extra_info::parse_start_offset_info(&so).unwrap()), s(&v, "start_offset_info_parsed"));

    let mut mo = String::new();
    extra_info::append_msg_offset_info(&mut mo, "TopicTest", 2, &[1024, 1026, 1029]);
    extra_info::append_msg_offset_info(&mut mo, "%RETRY%group-a_TopicTest", 0, &[5]);
    assert_eq!(mo, s(&v, "msg_offset_info"));
    let parsed = extra_info::parse_msg_offset_info(&mo).unwrap();
    let lists: BTreeMap<String, String> =
        parsed.iter().map(|(k, l)| (k.clone(), format!("[{}]", l.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")))).collect();
    assert_eq!(java_map(&lists), s(&v, "msg_offset_info_parsed"));

    let mut oc = String::new();
    extra_info::append_queue_id_order_count_info(&mut oc, "TopicTest", 2, 3);
    extra_info::append_queue_id_order_count_info(&mut oc, "%RETRY%group-a_TopicTest", 0, 0);
    assert_eq!(oc, s(&v, "order_count_info"));
    assert_eq!(java_map(&extra_info::parse_order_count_info(&oc).unwrap()), s(&v, "order_count_info_parsed"));

    let mut qoc = String::new();
    extra_info::append_queue_offset_order_count_info(&mut qoc, "TopicTest", 2, 1024, 1);
    extra_info::append_queue_offset_order_count_info(&mut qoc, "%RETRY%group-a+TopicTest", 0, 7, 4);
    assert_eq!(qoc, s(&v, "queue_offset_order_count_info"));
    assert_eq!(java_map(&extra_info::parse_order_count_info(&qoc).unwrap()), s(&v, "queue_offset_order_count_info_parsed"));

    assert_eq!(extra_info::start_offset_info_map_key("%RETRY%group-a_TopicTest", 2), s(&v, "start_offset_info_map_key"));
    let ck = s(&v, "extra_info_8_v2");
    assert_eq!(extra_info::start_offset_info_map_key_with_ck("TopicTest", Some(&ck), 2), Ok(s(&v, "start_offset_info_map_key_ck")));
    assert_eq!(extra_info::queue_offset_map_key("%RETRY%group-a+TopicTest", 2, 1029), s(&v, "queue_offset_map_key"));
}

#[test]
fn names_and_unique_ids_are_java_s() {
    let v = strings();
    assert_eq!(names::pop_retry_topic("TopicTest", "group-a", false), s(&v, "retry_topic_v1"));
    assert_eq!(names::pop_retry_topic("TopicTest", "group-a", true), s(&v, "retry_topic_v2"));
    assert_eq!(names::parse_normal_topic("%RETRY%group-a_TopicTest", "group-a"), s(&v, "parse_normal_topic_v1"));
    assert_eq!(names::parse_normal_topic("%RETRY%group-a+TopicTest", "group-a"), s(&v, "parse_normal_topic_v2"));
    assert_eq!(names::parse_normal_topic("TopicTest", "group-a"), s(&v, "parse_normal_topic_plain"));
    assert_eq!(names::parse_normal_topic_v2("%RETRY%group-a+TopicTest"), s(&v, "parse_normal_topic_1arg_v2"));
    assert_eq!(names::parse_normal_topic_v2("%RETRY%group-a_TopicTest"), s(&v, "parse_normal_topic_1arg_v1"));
    assert_eq!(names::parse_group("%RETRY%group-a+TopicTest"), s(&v, "parse_group_v2"));
    assert_eq!(names::parse_group("%RETRY%group-a_TopicTest"), s(&v, "parse_group_v1"));
    assert_eq!(names::revive_topic("DefaultCluster"), s(&v, "revive_topic"));
    assert_eq!(names::REVIVE_GROUP, s(&v, "revive_group"));
    assert_eq!(names::polling_key("TopicTest", "group-a", 2), s(&v, "polling_key"));
    assert_eq!(names::ck_unique_id(&ck_a()), s(&v, "ck_unique_id"));
    let mut old = ck_b();
    old.broker_name = None;
    assert_eq!(names::ck_unique_id(&old), s(&v, "ck_unique_id_old"));
    assert_eq!(names::ack_unique_id(&ack_a()), s(&v, "ack_unique_id"));
    assert_eq!(names::ack_unique_id(&ack_b()), s(&v, "ack_unique_id_no_broker"));
    assert_eq!(names::batch_ack_unique_id(&batch_a()), s(&v, "batch_ack_unique_id"));
    assert_eq!(names::batch_ack_unique_id(&BatchAckMsg::default()), s(&v, "batch_ack_unique_id_empty"));
    assert_eq!(names::PROPERTY_TIMER_DELIVER_MS, s(&v, "property_timer_deliver_ms"));
    assert_eq!(names::PROPERTY_UNIQ_KEY, s(&v, "property_uniq_key"));
    assert_eq!(names::PROPERTY_POP_CK, s(&v, "property_pop_ck"));
    assert_eq!(names::CK_TAG, s(&v, "ck_tag"));
    assert_eq!(names::ACK_TAG, s(&v, "ack_tag"));
    assert_eq!(names::BATCH_ACK_TAG, s(&v, "batch_ack_tag"));
    assert_eq!(names::RETRY_GROUP_TOPIC_PREFIX, s(&v, "retry_prefix"));
}

#[test]
fn revive_messages_carry_what_the_java_processors_set() {
    let v = strings();
    let topic = names::revive_topic("DefaultCluster");
    let ck = ReviveMessage::check_point(&ck_a(), &topic, 3);
    assert_eq!((ck.tags, ck.queue_id, ck.deliver_time_ms), ("ck", 3, 1_700_000_060_123 - 1000));
    assert_eq!(ck.uniq_key, s(&v, "ck_unique_id"));
    assert_eq!(text(ck.body), golden("checkpoint"));
    let a = ReviveMessage::ack(&ack_a(), &topic, 3, 60_000);
    assert_eq!((a.tags, a.deliver_time_ms), ("ack", 1_700_000_060_123));
    let b = ReviveMessage::batch_ack(&batch_a(), &topic, 3, 60_000);
    assert_eq!((b.tags, b.uniq_key.as_str()), ("bAck", "TopicTest@2@-1@group-a@1700000000123@broker-a@ack"));
    let bb = ReviveMessage::buffered_batch_ack(&batch_a(), &topic, 3, 42);
    assert_eq!((bb.uniq_key, bb.deliver_time_ms), (s(&v, "batch_ack_unique_id"), 42));
    let keys: Vec<&str> = a.properties().iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, ["TIMER_DELIVER_MS", "UNIQ_KEY", "TAGS"]);
}

fn order_file() -> ConsumerOrderInfoFile {
    let mut file = ConsumerOrderInfoFile::default();
    let o0 = OrderInfo {
        attempt_id: Some("attempt-1".into()),
        commit_offset_bit: 2,
        invisible_time: Some(60_000),
        last_consume_timestamp: 1_700_000_000_200,
        offset_list: Some(OrderInfo::build_offset_list(&[100, 101, 105])),
        offset_consumed_count: Some([(100, 2), (101, 1)].into()),
        offset_next_visible_time: Some([(105, 1_700_000_090_000), (100, 1_700_000_080_000)].into()),
        pop_time: 1_700_000_000_123,
    };
    let o17 = OrderInfo { invisible_time: Some(30_000), last_consume_timestamp: 6, offset_list: Some(vec![7]), pop_time: 5, ..OrderInfo::default() };
    let o3 = OrderInfo {
        attempt_id: Some("a".into()),
        commit_offset_bit: -1,
        invisible_time: Some(0),
        offset_list: Some(OrderInfo::build_offset_list(&[9, 10])),
        pop_time: 8,
        ..OrderInfo::default()
    };
    file.table.insert("TopicTest@group-a".into(), [(0, o0), (17, o17), (3, o3)].into());
    file.table.insert("%RETRY%group-a_TopicTest@group-a".into(), [(0, OrderInfo { pop_time: 9, ..OrderInfo::default() })].into());
    file.table.insert("OrderTopic@group-b".into(), BTreeMap::new());
    file
}

#[test]
fn consumer_order_info_is_written_as_java_persists_it() {
    let file = order_file();
    assert_eq!(text(file.encode_pretty()), golden("consumerOrderInfo.sorted"));
    for name in ["consumerOrderInfo", "consumerOrderInfo.sorted", "consumerOrderInfo.compact"] {
        assert_eq!(ConsumerOrderInfoFile::decode(golden(name).as_bytes()), Ok(file.clone()), "{name}");
    }
    assert_eq!(text(ConsumerOrderInfoFile::default().encode_pretty()), golden("consumerOrderInfo.empty"));
    assert_eq!(ConsumerOrderInfoFile::decode(golden("consumerOrderInfo.empty").as_bytes()), Ok(ConsumerOrderInfoFile::default()));
}

fn mode_file() -> MessageRequestModeFile {
    let entry = |topic: &str, group: &str, mode, share| MessageRequestModeEntry {
        consumer_group: Some(group.into()),
        mode,
        pop_share_queue_num: share,
        topic: Some(topic.into()),
    };
    let mut file = MessageRequestModeFile::default();
    let map = &mut file.message_request_mode_map;
    map.entry("TopicTest".into()).or_default().insert("group-a".into(), entry("TopicTest", "group-a", MessageRequestMode::Pop, 2));
    map.entry("TopicTest".into()).or_default().insert("group-b".into(), entry("TopicTest", "group-b", MessageRequestMode::Pull, 0));
    map.entry("OrderTopic".into()).or_default().insert("group-a".into(), entry("OrderTopic", "group-a", MessageRequestMode::Pop, 0));
    file
}

#[test]
fn message_request_mode_is_written_as_java_persists_it() {
    let file = mode_file();
    assert_eq!(text(file.encode_pretty()), golden("messageRequestMode.sorted"));
    for name in ["messageRequestMode", "messageRequestMode.sorted", "messageRequestMode.compact"] {
        assert_eq!(MessageRequestModeFile::decode(golden(name).as_bytes()), Ok(file.clone()), "{name}");
    }
    assert_eq!(file.get("TopicTest", "group-a").map(|e| e.mode), Some(MessageRequestMode::Pop));
    assert_eq!(text(MessageRequestModeFile::default().encode_pretty()), golden("messageRequestMode.empty"));
}

fn arb_ck() -> impl Strategy<Value = PopCheckPoint> {
    (
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i32>(), any::<i8>(), any::<i32>()),
        (proptest::option::of(".*"), proptest::option::of(".*"), any::<i64>()),
        (proptest::option::of(proptest::collection::vec(any::<i32>(), 0..40)), proptest::option::of(".*"), proptest::option::of(".*")),
    )
        .prop_map(|((so, pt, it, bm, n, q), (t, c, ro), (d, bn, rp))| PopCheckPoint {
            start_offset: so,
            pop_time: pt,
            invisible_time: it,
            bit_map: bm,
            num: n,
            queue_id: q,
            topic: t,
            cid: c,
            revive_offset: ro,
            queue_offset_diff: d,
            broker_name: bn,
            re_put_times: rp,
        })
}

proptest! {
    #[test]
    fn any_check_point_round_trips(c in arb_ck(), ack_offset in any::<i64>(), index in any::<u8>()) {
        prop_assert_eq!(PopCheckPoint::decode(&c.encode()), Ok(c.clone()));
        // Java compares offset distances as ints, so a hit agrees with the offset in its low 32 bits.
        let by_diff = c.queue_offset_diff.iter().flatten().map(|d| c.start_offset.wrapping_add(i64::from(*d)));
        for ack in by_diff.chain([ack_offset]) {
            if let Some(i) = c.index_of_ack(ack) {
                let found = c.ack_offset_by_index(i as u8).unwrap();
                prop_assert_eq!(found.wrapping_sub(ack) as i32, 0);
            }
        }
        let _ = c.ack_offset_by_index(index);
        let _ = c.all_acked();
    }

    #[test]
    fn any_batch_ack_round_trips(so in any::<i64>(), ao in any::<i64>(), list in proptest::collection::vec(any::<i64>(), 0..40), t in proptest::option::of(".*")) {
        let b = BatchAckMsg { ack: AckMsg { start_offset: so, ack_offset: ao, topic: t, ..AckMsg::default() }, ack_offset_list: list };
        prop_assert_eq!(BatchAckMsg::decode(&b.encode()), Ok(b.clone()));
        prop_assert_eq!(AckMsg::decode(&b.ack.encode()), Ok(b.ack.clone()));
    }

    #[test]
    fn any_receipt_handle_round_trips(
        nums in (any::<i64>(), any::<i64>(), any::<i64>(), any::<i32>(), any::<i32>()),
        topic in ".*", broker in "[^ ]+", queue_offset in proptest::option::of(any::<i64>()),
    ) {
        let info = ExtraInfo::new(nums.0, nums.1, nums.2, nums.3, &topic, &broker, nums.4, queue_offset);
        prop_assert_eq!(ExtraInfo::parse(&info.to_string()), Ok(info));
    }

    #[test]
    fn arbitrary_text_never_panics_a_parser(input in ".*", bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = ExtraInfo::parse(&input);
        let f = ExtraInfoFields::split(&input);
        let _ = (f.ck_queue_offset(), f.pop_time(), f.invisible_time(), f.revive_qid(), f.real_topic("t", "g"));
        let _ = (f.broker_name(), f.queue_id(), f.queue_offset(), f.is_order());
        let _ = extra_info::parse_start_offset_info(&input);
        let _ = extra_info::parse_msg_offset_info(&input);
        let _ = extra_info::parse_order_count_info(&input);
        let _ = extra_info::start_offset_info_map_key_with_ck("t", Some(&input), 1);
        let _ = (names::parse_group(&input), names::parse_normal_topic_v2(&input), names::parse_normal_topic(&input, "g"));
        let _ = (PopCheckPoint::decode(&bytes), AckMsg::decode(&bytes), BatchAckMsg::decode(&bytes));
        let _ = (ConsumerOrderInfoFile::decode(&bytes), MessageRequestModeFile::decode(&bytes));
        let _ = (PopCheckPoint::decode(input.as_bytes()), ConsumerOrderInfoFile::decode(input.as_bytes()));
    }

    #[test]
    fn offset_infos_round_trip(entries in proptest::collection::btree_map((0..3u8, any::<i32>()), any::<i64>(), 0..10)) {
        let topic = |m: u8| ["T", "%RETRY%g_T", "%RETRY%g+T"][usize::from(m)];
        let mut info = String::new();
        for ((m, q), off) in &entries {
            extra_info::append_start_offset_info(&mut info, topic(*m), *q, *off);
        }
        let parsed = extra_info::parse_start_offset_info(&info).unwrap();
        let expected: BTreeMap<String, i64> = entries.iter().map(|((m, q), o)| (format!("{m}@{q}"), *o)).collect();
        prop_assert_eq!(parsed, expected);
    }
}
