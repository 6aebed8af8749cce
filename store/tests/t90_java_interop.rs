//! Our store and Java's `DefaultMessageStore` (4.9.7 and 5.3.3, from Maven Central) read each
//! other's directories. The Java side is compat-tests/store-interop: it writes a deterministic
//! dataset and dumps a manifest, or reads a directory and dumps what it found. Needs Java and the
//! classpaths from compat-tests/resolve-runtime.sh; without them these tests fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use store::config::MessageStoreConfig;
use store::message::record::{decode_record, RecordAt};
use store::message::{offset_message_id, properties, MessageToStore};
use store::store::{GetMessageStatus, MessageStore};

const COMMIT_LOG_FILE: usize = 8 * 1024 * 1024;
const COUNT: usize = 10_000;

fn run_sh() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../compat-tests/store-interop/run.sh")
}

fn java(version: &str, command: &str, dir: &Path, manifest: &Path) {
    let out = Command::new("bash")
        .arg(run_sh())
        .args([version, command])
        .arg(dir)
        .arg(manifest)
        .output()
        .expect("cannot run compat-tests/store-interop/run.sh (is bash installed?)");
    assert!(
        out.status.success(),
        "Java {version} {command} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn config(dir: &Path) -> MessageStoreConfig {
    MessageStoreConfig { store_path_root_dir: dir.to_string_lossy().into_owned(), mapped_file_size_commit_log: COMMIT_LOG_FILE, ..Default::default() }
}

/// The DATASET of compat-tests/store-interop/README.md, as puts: single messages or batches.
fn dataset(n: usize) -> Vec<Vec<MessageToStore>> {
    let message = |i: usize, head: usize| {
        let body_len = if i.is_multiple_of(997) { 512 * 1024 + i } else { 1 + (i * 7919) % 2048 };
        let body: Vec<u8> = (0..body_len).map(|j| ((i * 31 + j) & 0xFF) as u8).collect();
        let mut props = vec![("p".to_owned(), format!("v{i}"))];
        if i.is_multiple_of(10) {
            props.push(("KEYS".into(), format!("key-{i} order-{}", i % 50)));
        }
        props.push(("UNIQ_KEY".into(), format!("{i:032X}")));
        props.push(("TAGS".into(), format!("Tag{}", (b'A' + (i % 5) as u8) as char)));
        MessageToStore {
            topic: format!("T{}", head % 4),
            queue_id: ((head / 4) % 4) as i32,
            flag: (i % 100) as i32,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000 + head as i64,
            born_host: format!("127.0.0.1:{}", 40000 + head % 1000).parse().unwrap(),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from(body),
            properties: properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        }
    };
    let mut puts = Vec::new();
    let mut i = 0;
    while i < n {
        if i % 500 == 100 {
            let end = (i + 10).min(n);
            puts.push((i..end).map(|j| message(j, i)).collect());
            i = end;
        } else {
            puts.push(vec![message(i, i)]);
            i += 1;
        }
    }
    puts
}

/// The manifest of everything our store reads back, in the contract's shape.
fn manifest(store: &MessageStore) -> (Value, Value) {
    let mut messages = Vec::new();
    let mut topics = BTreeSet::new();
    for cq in store.queues() {
        topics.insert(cq.topic().to_owned());
        let mut offset = cq.min_offset();
        while offset < cq.max_offset() {
            let r = store.get_message(cq.topic(), cq.queue_id(), offset, 32, |_| true);
            assert_eq!(r.status, GetMessageStatus::Found, "{} {} at {offset}", cq.topic(), cq.queue_id());
            for bytes in &r.messages {
                let Ok(RecordAt::Record(m)) = decode_record(bytes, true) else { panic!("undecodable record") };
                let props: BTreeMap<String, String> = properties::parse(m.properties).into_iter().collect();
                messages.push(json!({
                    "topic": m.topic, "queueId": m.queue_id, "queueOffset": m.queue_offset,
                    "physicalOffset": m.physical_offset, "storeSize": m.store_size,
                    "storeTimestamp": m.store_timestamp, "bornTimestamp": m.born_timestamp,
                    "sysFlag": m.sys_flag, "flag": m.flag, "reconsumeTimes": m.reconsume_times,
                    "bodyCrc": m.body_crc, "bodyLength": m.body.len(),
                    "bodySha256": hex(&Sha256::digest(m.body)), "properties": props,
                    "msgId": offset_message_id(m.store_host, m.physical_offset),
                    "bornHost": m.born_host.to_string(), "storeHost": m.store_host.to_string(),
                }));
            }
            offset = r.next_begin_offset;
        }
    }
    messages.sort_by_key(|m| m["physicalOffset"].as_i64());
    let mut keys: Vec<String> = Vec::new();
    for m in &messages {
        if let Some(k) = m["properties"]["KEYS"].as_str() {
            for key in k.split(' ').filter(|k| !k.is_empty()) {
                if keys.len() < 200 && !keys.iter().any(|x| x == key) {
                    keys.push(key.to_owned());
                }
            }
        }
    }
    let mut queries = Vec::new();
    for topic in &topics {
        for key in &keys {
            let found = store.query_message(topic, key, 64, 0, i64::MAX);
            let mut offsets: Vec<i64> = found
                .messages
                .iter()
                .filter_map(|b| match decode_record(b, false) {
                    Ok(RecordAt::Record(r)) => Some(r.physical_offset),
                    _ => None,
                })
                .collect();
            offsets.sort();
            queries.push(json!({"topic": topic, "key": key, "physicalOffsets": offsets}));
        }
    }
    queries.sort_by(|a, b| (a["topic"].as_str(), a["key"].as_str()).cmp(&(b["topic"].as_str(), b["key"].as_str())));
    (Value::Array(messages), Value::Array(queries))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn load(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("manifest written")).expect("manifest JSON")
}

fn assert_same(ours: &(Value, Value), theirs: &Value, what: &str) {
    let (messages, queries) = ours;
    let java = theirs["messages"].as_array().expect("messages");
    assert_eq!(messages.as_array().map(Vec::len), Some(java.len()), "{what}: message count");
    for (a, b) in messages.as_array().into_iter().flatten().zip(java) {
        assert_eq!(a, b, "{what}: first differing message");
    }
    assert_eq!(queries, &theirs["keyQueries"], "{what}: key queries");
}

fn java_writes_we_read(version: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let java_manifest = dir.path().join("java.json");
    java(version, "write", &store_dir, &java_manifest);
    let store = MessageStore::open(config(&store_dir)).expect("our store opens Java's directory");
    store.start().unwrap();
    let ours = manifest(&store);
    store.shutdown();
    assert_same(&ours, &load(&java_manifest), &format!("reading what Java {version} wrote"));
}

fn we_write_java_reads(version: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let store: Arc<MessageStore> = MessageStore::open(config(&store_dir)).unwrap();
    store.start().unwrap();
    for put in dataset(COUNT) {
        let r = store.put_messages(&put);
        assert!(r.is_ok(), "{:?}", r.remark);
    }
    while store.dispatch_behind_bytes() > 0 {
        std::thread::yield_now();
    }
    let ours = manifest(&store);
    assert_eq!(ours.0.as_array().map(Vec::len), Some(COUNT));
    store.shutdown();
    drop(store);
    let java_manifest = dir.path().join("java.json");
    java(version, "read", &store_dir, &java_manifest);
    assert_same(&ours, &load(&java_manifest), &format!("Java {version} reading what we wrote"));
}

#[test]
fn we_read_everything_java_4_9_wrote() {
    java_writes_we_read("4.9.7");
}

#[test]
fn we_read_everything_java_5_wrote() {
    java_writes_we_read("5.3.3");
}

#[test]
fn java_4_9_reads_everything_we_wrote() {
    we_write_java_reads("4.9.7");
}

#[test]
fn java_5_reads_everything_we_wrote() {
    we_write_java_reads("5.3.3");
}
