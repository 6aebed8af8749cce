//! The `config/*.json` files against what Java 4.9.7 and 5.3.3 write (see `golden/README.md`).
//!
//! `golden/java-<v>/<name>.json` is the file the Java broker persisted (map entries in Java's hash
//! order), `<name>.sorted.json` the same tables through the same `encode(true)` with the maps
//! sorted (the order we write), `<name>.compact.json` the same through `encode(false)`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use broker::config::BrokerConfig;
use broker::consumer_offset::ConsumerOffsetManager;
use broker::delay_offset::DelayOffsets;
use broker::subscription_group::{SubscriptionGroupConfig, SubscriptionGroupManager};
use broker::topic_config::TopicConfigManager;
use remoting::fastjson::{self, JsonStyle};
use serde::{Deserialize, Serialize};

const WEIRD_TOPIC: &str = "weird\"\\/\tü€😀\u{7f}\u{2028}";

fn golden(version: &str, name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("java-{version}")).join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn broker_a() -> BrokerConfig {
    BrokerConfig { broker_name: "broker-a".into(), broker_cluster_name: "DefaultCluster".into(), ..BrokerConfig::default() }
}

/// A store root whose `config/<file>` holds the given bytes.
fn store_with(file: &str, bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(dir.path().join("config").join(file), bytes).unwrap();
    dir
}

fn written(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join("config").join(file)).unwrap()
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

fn config_path(dir: &Path, file: &str) -> PathBuf {
    dir.join("config").join(file)
}

// ---- What we write: Java 5.3.3's bytes for the same tables, in key order. ----

#[test]
fn topics_from_java_5_are_rewritten_byte_for_byte_in_key_order() {
    for source in ["topics.json", "topics.sorted.json", "topics.compact.json"] {
        let dir = store_with("topics.json", &golden("5.3.3", source));
        let m = TopicConfigManager::open(&broker_a(), true, dir.path()).unwrap();
        m.persist().unwrap();
        assert_eq!(written(dir.path(), "topics.json"), text(golden("5.3.3", "topics.sorted.json")), "from {source}");
    }
}

#[test]
fn subscription_groups_from_java_5_are_rewritten_byte_for_byte_in_key_order() {
    for source in ["subscriptionGroup.json", "subscriptionGroup.sorted.json", "subscriptionGroup.compact.json"] {
        let dir = store_with("subscriptionGroup.json", &golden("5.3.3", source));
        let m = SubscriptionGroupManager::open(dir.path()).unwrap();
        m.persist().unwrap();
        assert_eq!(written(dir.path(), "subscriptionGroup.json"), text(golden("5.3.3", "subscriptionGroup.sorted.json")), "from {source}");
    }
}

#[test]
fn consumer_offsets_are_written_as_javas_offset_wrapper_without_the_group_topic_map() {
    for source in ["consumerOffset.json", "consumerOffset.compact.json"] {
        let dir = store_with("consumerOffset.json", &golden("5.3.3", source));
        let m = ConsumerOffsetManager::open(dir.path()).unwrap();
        m.persist().unwrap();
        assert_eq!(written(dir.path(), "consumerOffset.json"), text(golden("5.3.3", "consumerOffset.wrapper.json")), "from {source}");
    }
}

#[test]
fn delay_offsets_from_java_5_are_rewritten_byte_for_byte() {
    let dir = store_with("delayOffset.json", &golden("5.3.3", "delayOffset.compact.json"));
    DelayOffsets::open(dir.path()).unwrap().persist().unwrap();
    assert_eq!(written(dir.path(), "delayOffset.json"), text(golden("5.3.3", "delayOffset.json")));
}

// ---- The pretty format against fastjson 1.2.69 (4.9.7), through 4.9-shaped types. ----

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DataVersion49 {
    counter: i64,
    timestamp: i64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TopicConfig49 {
    order: bool,
    perm: i32,
    read_queue_nums: i32,
    topic_filter_type: String,
    topic_name: String,
    topic_sys_flag: i32,
    write_queue_nums: i32,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Topics49 {
    data_version: DataVersion49,
    topic_config_table: BTreeMap<String, TopicConfig49>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Group49 {
    broker_id: i64,
    consume_broadcast_enable: bool,
    consume_enable: bool,
    consume_from_min_enable: bool,
    group_name: String,
    notify_consumer_ids_changed_enable: bool,
    retry_max_times: i32,
    retry_queue_nums: i32,
    which_broker_when_consume_slowly: i64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Groups49 {
    data_version: DataVersion49,
    subscription_group_table: BTreeMap<String, Group49>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Offsets49 {
    offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Delay49 {
    offset_table: BTreeMap<i32, i64>,
}

fn assert_round_trip<T: Serialize + serde::de::DeserializeOwned>(name: &str) {
    let bytes = golden("4.9.7", name);
    let value: T = fastjson::from_slice(&bytes).unwrap();
    assert_eq!(fastjson::to_string(&value, JsonStyle::FastjsonPretty), text(bytes), "{name}");
}

#[test]
fn the_pretty_writer_matches_fastjson_1_2_69_byte_for_byte() {
    assert_round_trip::<Topics49>("topics.sorted.json");
    assert_round_trip::<Groups49>("subscriptionGroup.sorted.json");
    assert_round_trip::<Offsets49>("consumerOffset.sorted.json");
    assert_round_trip::<Delay49>("delayOffset.sorted.json");
    assert_round_trip::<Delay49>("delayOffset.empty.json");
}

// ---- What we read: 4.9.7's files, pretty and compact, fill in the 5.x members. ----

#[test]
fn topics_written_by_java_4_9_load_with_every_member() {
    for source in ["topics.json", "topics.compact.json"] {
        let dir = store_with("topics.json", &golden("4.9.7", source));
        let m = TopicConfigManager::open(&broker_a(), true, dir.path()).unwrap();
        let version = m.data_version();
        assert_eq!((version.counter, version.timestamp, version.state_version), (7, 1_700_000_000_123, 0));
        let weird = m.select(WEIRD_TOPIC).unwrap_or_else(|| panic!("{source}: special topic missing"));
        assert_eq!((weird.read_queue_nums, weird.write_queue_nums, weird.perm, weird.topic_sys_flag), (2, 3, 2, 1));
        assert_eq!(weird.topic_filter_type, "MULTI_TAG");
        assert!(weird.attributes.is_empty());
        assert!(m.select("OrderTopic").unwrap().order);
        assert_eq!(m.select("BenchmarkTest").unwrap().write_queue_nums, 1024);
        // 12 in the file, and what ours makes at start as 5.x does: the two transaction topics,
        // pop's revive topic, the broker member group's topic and the timer's.
        assert_eq!(m.wrapper().topic_config_table.len(), 17, "{source}");
    }
}

#[test]
fn subscription_groups_written_by_java_4_9_load_with_5_x_defaults() {
    for source in ["subscriptionGroup.json", "subscriptionGroup.compact.json"] {
        let dir = store_with("subscriptionGroup.json", &golden("4.9.7", source));
        let m = SubscriptionGroupManager::open(dir.path()).unwrap();
        assert_eq!(m.data_version().counter, 3);
        assert_eq!(m.select("group-a"), Some(SubscriptionGroupConfig::new("group-a")));
        let b = m.select("group-b").unwrap();
        assert_eq!(
            b,
            SubscriptionGroupConfig {
                broker_id: 1,
                consume_broadcast_enable: false,
                consume_enable: false,
                consume_from_min_enable: false,
                notify_consumer_ids_changed_enable: false,
                retry_max_times: 3,
                retry_queue_nums: 2,
                which_broker_when_consume_slowly: 2,
                ..SubscriptionGroupConfig::new("group-b")
            }
        );
        assert!(m.select("CID_RMQ_SYS_TRANS").is_some(), "ours, added to what 4.9 wrote");
        assert_eq!(m.snapshot().subscription_group_table.len(), 10);
    }
}

#[test]
fn consumer_and_delay_offsets_written_by_java_4_9_load() {
    for source in ["consumerOffset.json", "consumerOffset.compact.json"] {
        let dir = store_with("consumerOffset.json", &golden("4.9.7", source));
        let m = ConsumerOffsetManager::open(dir.path()).unwrap();
        assert_eq!(m.query_offset("group-b", "TopicTest", 1), Some(9_999_999_999));
        assert_eq!(m.query_offset("group-b", "OrderTopic", 33), Some(330));
        assert_eq!(m.query_offsets("group-a", "TopicTest"), Some([(0, 12), (1, 7), (2, 0), (3, 1024)].into()));
        assert_eq!(m.query_offset("group-a", "%RETRY%group-a", 0), Some(3));
        assert_eq!(m.topics_of_group("group-b").len(), 2);
    }
    for source in ["delayOffset.json", "delayOffset.compact.json"] {
        let dir = store_with("delayOffset.json", &golden("4.9.7", source));
        let d = DelayOffsets::open(dir.path()).unwrap();
        assert_eq!((d.get(1), d.get(2), d.get(3), d.get(18)), (Some(0), Some(15), Some(7), Some(100)));
    }
}

#[test]
fn java_5_members_survive_a_round_trip_through_us() {
    let dir = store_with("subscriptionGroup.json", &golden("5.3.3", "subscriptionGroup.json"));
    let m = SubscriptionGroupManager::open(dir.path()).unwrap();
    let snapshot = m.snapshot();
    assert_eq!(snapshot.forbidden_table["group-b"]["TopicTest"], 2);
    let b = &snapshot.subscription_group_table["group-b"];
    assert!(b.consume_message_orderly);
    assert_eq!((b.consume_timeout_minute, b.group_sys_flag), (20, 1));
    let subs = b.subscription_data_set.as_ref().unwrap();
    assert_eq!(subs[0].expression.as_deref(), Some("a || b"));
    assert_eq!(subs[0].version, 42);
    let c = &snapshot.subscription_group_table["group-c"];
    assert_eq!(c.group_retry_policy.kind, "EXPONENTIAL");
    assert_eq!(c.group_retry_policy.exponential_retry_policy.as_ref().map(|p| p.max), Some(60_000));
    assert_eq!(c.group_retry_policy.customized_retry_policy.as_ref().map(|p| p.next.clone()), Some(vec![1000, 5000]));

    let dir = store_with("topics.json", &golden("5.3.3", "topics.json"));
    let m = TopicConfigManager::open(&broker_a(), true, dir.path()).unwrap();
    assert_eq!(m.select("OrderTopic").unwrap().attributes["message.type"], "FIFO");
}

#[test]
fn a_change_after_loading_java_files_keeps_javas_version_counting() {
    let dir = store_with("topics.json", &golden("4.9.7", "topics.json"));
    let m = TopicConfigManager::open(&broker_a(), true, dir.path()).unwrap();
    m.create_topic_in_send_message_back_method(&remoting::protocol::name::TopicName::new("%RETRY%group-b").unwrap(), 1, 6, 0);
    assert_eq!(m.data_version().counter, 8);
    m.persist_if_dirty().unwrap();
    assert_eq!(std::fs::read(config_path(dir.path(), "topics.json.bak")).unwrap(), golden("4.9.7", "topics.json"), "Java's file is kept as the backup");
    let again = TopicConfigManager::open(&broker_a(), true, dir.path()).unwrap();
    assert!(again.contains("%RETRY%group-b"));
    assert!(again.contains(WEIRD_TOPIC));
}
