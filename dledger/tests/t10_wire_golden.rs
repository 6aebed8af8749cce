//! The JSON bodies of every DLedger RPC against golden vectors written by the real Java classes
//! (compat-tests/dledger-golden: `io.openmessaging.storage:dledger:0.3.1.2` with its own
//! fastjson 1.2.69, and the same jar on the Java broker 5.3.3's classpath with fastjson 1.2.83).
//!
//! - `encode` vectors are `JSON.toJSONBytes` of one object: each must decode to our types and
//!   re-encode to the same bytes.
//! - `decode` vectors are an input and what Java's `JSON.parseObject` read from it, written
//!   again: our decode + encode of the input must give Java's output (three documented exceptions).

use std::path::{Path, PathBuf};

use dledger::protocol::*;
use dledger::wire::{decode, encode, JsonBody, PullEntriesRequest, PullEntriesResponse};

const CLASSPATHS: [&str; 2] = ["dledger-0.3.1.2", "rocketmq-5.3.3"];

fn vectors_dir(classpath: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../compat-tests/dledger-golden/vectors").join(classpath)
}

struct Vector {
    kind: String,
    name: String,
    class: String,
}

fn manifest(classpath: &str) -> Vec<Vector> {
    let path = vectors_dir(classpath).join("manifest.json");
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run compat-tests/dledger-golden/generate.sh)", path.display()));
    let list: serde_json::Value = serde_json::from_slice(&text).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| Vector {
            kind: v["kind"].as_str().unwrap().to_owned(),
            name: v["name"].as_str().unwrap().to_owned(),
            class: v["class"].as_str().unwrap().to_owned(),
        })
        .collect()
}

fn again<T: JsonBody>(bytes: &[u8]) -> Result<Vec<u8>, String> {
    decode::<T>(bytes).map(|v| encode(&v)).map_err(|e| e.to_string())
}

/// Decodes `bytes` as the Java class `class` and encodes the result again.
fn round_trip(class: &str, bytes: &[u8]) -> Result<Vec<u8>, String> {
    match class {
        "MetadataRequest" => again::<MetadataRequest>(bytes),
        "MetadataResponse" => again::<MetadataResponse>(bytes),
        "AppendEntryRequest" => again::<AppendEntryRequest>(bytes),
        "AppendEntryResponse" => again::<AppendEntryResponse>(bytes),
        "GetEntriesRequest" => again::<GetEntriesRequest>(bytes),
        "GetEntriesResponse" => again::<GetEntriesResponse>(bytes),
        "VoteRequest" => again::<VoteRequest>(bytes),
        "VoteResponse" => again::<VoteResponse>(bytes),
        "HeartBeatRequest" => again::<HeartBeatRequest>(bytes),
        "HeartBeatResponse" => again::<HeartBeatResponse>(bytes),
        "PushEntryRequest" => again::<PushEntryRequest>(bytes),
        "PushEntryResponse" => again::<PushEntryResponse>(bytes),
        "LeadershipTransferRequest" => again::<LeadershipTransferRequest>(bytes),
        "LeadershipTransferResponse" => again::<LeadershipTransferResponse>(bytes),
        "PullEntriesRequest" => again::<PullEntriesRequest>(bytes),
        "PullEntriesResponse" => again::<PullEntriesResponse>(bytes),
        other => panic!("no Rust type for Java class {other}"),
    }
}

fn read(path: PathBuf) -> Vec<u8> {
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_java_body_decodes_and_re_encodes_byte_for_byte() {
    for classpath in CLASSPATHS {
        let vectors: Vec<Vector> = manifest(classpath).into_iter().filter(|v| v.kind == "encode").collect();
        assert!(vectors.len() >= 40, "{classpath}: only {} encode vectors", vectors.len());
        let mut failures = Vec::new();
        for v in &vectors {
            let java = read(vectors_dir(classpath).join("encode").join(format!("{}.json", v.name)));
            match round_trip(&v.class, &java) {
                Ok(ours) if ours == java => {}
                Ok(ours) => {
                    failures.push(format!("{classpath}/{}:\n java: {}\n ours: {}", v.name, String::from_utf8_lossy(&java), String::from_utf8_lossy(&ours)))
                }
                Err(e) => failures.push(format!("{classpath}/{}: {e}", v.name)),
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
fn what_java_reads_we_read() {
    for classpath in CLASSPATHS {
        let vectors: Vec<Vector> = manifest(classpath).into_iter().filter(|v| v.kind == "decode").collect();
        assert!(vectors.len() >= 30, "{classpath}: only {} decode vectors", vectors.len());
        let mut failures = Vec::new();
        for v in &vectors {
            let dir = vectors_dir(classpath).join("decode");
            let input = read(dir.join(format!("{}.in.json", v.name)));
            let java = read(dir.join(format!("{}.out.json", v.name)));
            let ours = round_trip(&v.class, &input);
            match (v.name.as_str(), ours) {
                // fastjson keeps the first `group` and the last `term` (its field-matching order
                // decides); we refuse duplicate keys instead of guessing.
                ("duplicate_keys", Err(e)) => assert!(e.contains("duplicate field"), "{e}"),
                // Java has no setter for totalSize, so a parsed batch push writes 0; we write
                // what a sender's addEntry counts (50 + 48), which is what Java sends.
                ("batch_entry_filled", Ok(ours)) => {
                    let expected = String::from_utf8(java).unwrap().replace("\"totalSize\":0", "\"totalSize\":98");
                    assert_eq!(String::from_utf8(ours).unwrap(), expected);
                }
                // Our body is `Bytes`: an absent (null) body and an empty one are the same, and
                // written as "" (what Java's client sends for an empty body).
                ("empty_appendentryrequest", Ok(ours)) => {
                    assert_eq!(String::from_utf8(ours).unwrap(), r#"{"body":"","code":200,"term":-1}"#);
                    assert_eq!(java, br#"{"code":200,"term":-1}"#);
                }
                (_, Ok(ours)) if ours == java => {}
                (_, Ok(ours)) => failures.push(format!(
                    "{classpath}/{}:\n   in: {}\n java: {}\n ours: {}",
                    v.name,
                    String::from_utf8_lossy(&input),
                    String::from_utf8_lossy(&java),
                    String::from_utf8_lossy(&ours)
                )),
                (_, Err(e)) => failures.push(format!("{classpath}/{}: {e}", v.name)),
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

fn golden<T: JsonBody>(name: &str) -> T {
    let bytes = read(vectors_dir(CLASSPATHS[0]).join("encode").join(format!("{name}.json")));
    decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Round trips alone would not catch two fields swapped on both ways; these pin the meaning.
#[test]
fn decoded_values_are_the_ones_java_set() {
    let vote: VoteRequest = golden("vote_request");
    assert_eq!(
        vote,
        VoteRequest {
            base: Base {
                group: "g".into(),
                remote_id: Some("n1".into()),
                local_id: Some("n0".into()),
                leader_id: Some("n0".into()),
                term: 4,
                code: Code::SUCCESS
            },
            ledger_end_index: 99,
            ledger_end_term: 3,
        }
    );
    let extremes: VoteRequest = golden("vote_request_extremes");
    assert_eq!((extremes.base.term, extremes.ledger_end_index, extremes.base.code), (i64::MAX, i64::MIN, Code(i32::MIN)));

    for result in VoteResult::ALL {
        let r: VoteResponse = golden(&format!("vote_response_{}", result.java_name().to_lowercase()));
        assert_eq!((r.vote_result, r.base.term), (result, 5));
    }

    for (kind, name) in [(PushType::Append, "append"), (PushType::Commit, "commit"), (PushType::Compare, "compare"), (PushType::Truncate, "truncate")] {
        let push: PushEntryRequest = golden(&format!("push_request_{name}"));
        assert_eq!((push.kind, push.commit_index, push.batch), (kind, 10, false));
        assert_eq!(push.entries.len(), usize::from(kind != PushType::Commit));
        if let Some(e) = push.entries.first() {
            assert_eq!((e.magic, e.index, e.term, e.pos, &e.body[..]), (1, 11, 4, 1100, &b"hello, dledger"[..]));
        }
    }
    let batch: PushEntryRequest = golden("push_request_batch");
    assert!(batch.batch);
    let got: Vec<(i64, i64, &[u8])> = batch.entries.iter().map(|e| (e.index, e.pos, &e.body[..])).collect();
    assert_eq!(got, [(11, 1000, &b"h"[..]), (12, 1100, b"he"), (13, 1200, b"hel")]);

    let pushed: PushEntryResponse = golden("push_response");
    assert_eq!((pushed.index, pushed.count, pushed.begin_index, pushed.end_index, pushed.base.term), (Some(11), 1, 0, 11, 4));
    let no_index: PushEntryResponse = golden("push_response_no_index");
    assert_eq!((no_index.index, no_index.base.code, no_index.begin_index), (None, Code::INCONSISTENT_STATE, -1));

    let append: AppendEntryRequest = golden("append_request");
    assert_eq!(append.body.to_vec(), (0..=255u8).collect::<Vec<u8>>());
    let appended: AppendEntryResponse = golden("append_response");
    assert_eq!((appended.index, appended.pos, appended.base.leader_id.as_deref()), (5, 4096, Some("n0")));
    let full: AppendEntryResponse = golden("append_response_pending_full");
    assert_eq!((full.base.code, full.index, full.pos), (Code::LEADER_PENDING_FULL, -1, -1));

    let get: GetEntriesRequest = golden("get_request");
    assert_eq!((get.begin_index, get.max_size, get.index_list), (Some(7), 0, None));
    let list: GetEntriesRequest = golden("get_request_index_list");
    assert_eq!((list.begin_index, list.max_size, list.index_list), (None, 1024, Some(vec![1, 2, 3])));
    let got: GetEntriesResponse = golden("get_response");
    assert_eq!(got.entries.len(), 1);
    assert_eq!((got.entries[0].index, got.entries[0].term, got.entries[0].pos), (7, 2, 7168));

    let metadata: MetadataResponse = golden("metadata_response_13_peers");
    assert_eq!(metadata.peers.len(), 13);
    assert_eq!(metadata.peers["n12"], "127.0.0.1:40923");
    assert_eq!(metadata.base.leader_id.as_deref(), Some("n12"));
    let unknown: MetadataResponse = golden("metadata_response_unknown_member");
    assert!(unknown.peers.is_empty());
    assert_eq!(unknown.base.code, Code::UNKNOWN_MEMBER);

    let transfer: LeadershipTransferRequest = golden("leadership_transfer_request");
    assert_eq!((transfer.transfer_id.as_deref(), transfer.transferee_id.as_deref(), transfer.take_leadership_ledger_index), (Some("n0"), Some("n1"), 42));
    let fresh: HeartBeatResponse = golden("heart_beat_response_success");
    assert_eq!(fresh.base, Base::default());

    let zoo: HeartBeatRequest = golden("string_escape_zoo");
    assert_eq!(zoo.base.group, "g\"\\/\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}\u{85}\u{2028}\u{2029}é组😀");

    let pull: PullEntriesRequest = golden("pull_request");
    assert_eq!((pull.node_id.as_deref(), pull.begin_index), (Some("n1"), Some(3)));
}

#[test]
fn both_fastjson_versions_wrote_the_same_bytes() {
    for v in manifest(CLASSPATHS[0]) {
        let (sub, file) = match v.kind.as_str() {
            "encode" => ("encode", format!("{}.json", v.name)),
            _ => ("decode", format!("{}.out.json", v.name)),
        };
        let a = read(vectors_dir(CLASSPATHS[0]).join(sub).join(&file));
        let b = read(vectors_dir(CLASSPATHS[1]).join(sub).join(&file));
        assert_eq!(a, b, "{sub}/{file} differs between {} and {}", CLASSPATHS[0], CLASSPATHS[1]);
    }
}
