//! Our DLedger file store and Java's `DLedgerMmapFileStore` (io.openmessaging.storage:dledger
//! 0.3.1.2, from Maven Central) read each other's directories, and write the same bytes. The Java
//! side is compat-tests/dledger-interop: it writes the DATASET as a leader and a follower, or opens
//! a member directory, dumps what it recovered and optionally appends more. Needs Java and the
//! classpath from compat-tests/resolve-runtime.sh; without them these tests fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bytes::Bytes;
use dledger::config::DLedgerConfig;
use dledger::entry::Entry;
use dledger::log::{RaftLog, TermStore};
use dledger::store::{FileStore, StoreError, TermFile};
use serde_json::Value;
use sha2::{Digest, Sha256};

const COUNT: i64 = 500;
const DATA: usize = 16 * 1024;
const INDEX: usize = 32 * 64;
const PEERS: &str = "n0-127.0.0.1:40911;n1-127.0.0.1:40912";

fn run_sh() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../compat-tests/dledger-interop/run.sh")
}

fn java_run(args: &[&str]) -> Output {
    Command::new("bash").arg(run_sh()).args(args).output().expect("cannot run compat-tests/dledger-interop/run.sh (is bash installed?)")
}

fn java(args: &[&str]) {
    let out = java_run(args);
    assert!(out.status.success(), "Java {args:?} failed ({}):\n{}\n{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn config(base: &Path, id: &str) -> DLedgerConfig {
    DLedgerConfig {
        group: "interop".into(),
        self_id: id.into(),
        peers: PEERS.into(),
        store_base_dir: s(base).to_owned(),
        mapped_file_size_for_entry_data: DATA,
        mapped_file_size_for_entry_index: INDEX,
        ..Default::default()
    }
}

/// DATASET body `i` before the hook (compat-tests/dledger-interop/README.md).
fn body(i: i64) -> Vec<u8> {
    let len = if i % 37 == 0 { 3000 + i % 1000 } else { 1 + (i * 7919) % 700 } as usize;
    (0..len).map(|j| ((i * 31 + j as i64) & 0xFF) as u8).collect()
}

/// The body as stored: RocketMQ's hook puts `pos + 48` at body offset 28.
fn stored_body(i: i64, pos: i64) -> Vec<u8> {
    let mut b = body(i);
    if b.len() >= 36 {
        b[28..36].copy_from_slice(&(pos + 48).to_be_bytes());
    }
    b
}

fn term_of(i: i64) -> i64 {
    if i < COUNT / 2 {
        1
    } else {
        2
    }
}

struct Member {
    store: FileStore,
    terms: TermFile,
}

fn open_member(base: &Path, id: &str) -> Member {
    let cfg = config(base, id);
    let terms = TermFile::open(&cfg).unwrap();
    let store = FileStore::open(&cfg, terms.current_term()).unwrap();
    store.set_clean_space_enabled(false);
    store.add_append_hook(Box::new(|body: &mut [u8], entry: &Entry| {
        if body.len() >= 36 {
            body[28..36].copy_from_slice(&(entry.pos + 48).to_be_bytes());
        }
    }));
    Member { store, terms }
}

/// What Java's `write` does, done by us: a leader n0 and a follower n1 fed every entry, the
/// terms and votes persisted as an election leaves them, the same commit indexes.
fn rust_write(base: &Path) {
    let mut leader = open_member(base, "n0");
    let mut follower = open_member(base, "n1");
    for i in 0..COUNT {
        let term = term_of(i);
        if leader.terms.load().0 != term {
            for m in [&mut leader, &mut follower] {
                m.terms.persist(term, None).unwrap();
                m.terms.persist(term, Some("n0")).unwrap();
            }
        }
        let e = leader.store.append_as_leader(term, Bytes::from(body(i))).unwrap();
        assert_eq!((e.index, e.term), (i, term));
        follower.store.append_as_follower(&leader.store.get(i).unwrap()).unwrap();
    }
    leader.store.update_committed(2, COUNT - 3);
    follower.store.update_committed(2, COUNT - 5);
    leader.store.shutdown().unwrap();
    follower.store.shutdown().unwrap();
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Our store against a Java manifest: the state and every entry.
fn assert_matches(store: &FileStore, manifest: &Value, what: &str) {
    let state = [
        ("beginIndex", store.begin_index()),
        ("endIndex", store.end_index()),
        ("endTerm", store.end_term()),
        ("committedIndex", store.committed_index()),
        ("committedPos", store.committed_pos()),
        ("writePos", store.write_pos() as i64),
    ];
    for (key, ours) in state {
        assert_eq!(manifest[key].as_i64(), Some(ours), "{what}: {key}");
    }
    let entries = manifest["entries"].as_array().unwrap();
    assert_eq!(entries.len() as i64, store.end_index() - store.begin_index() + 1, "{what}");
    for m in entries {
        let index = m["index"].as_i64().unwrap();
        let e = store.get(index).unwrap_or_else(|| panic!("{what}: we cannot read entry {index}"));
        let ours = [("term", e.term), ("pos", e.pos), ("size", e.size() as i64), ("magic", e.magic.into()), ("channel", e.channel.into())];
        for (key, value) in ours {
            assert_eq!(m[key].as_i64(), Some(value), "{what}: entry {index} {key}");
        }
        assert_eq!(m["bodyLength"].as_u64(), Some(e.body.len() as u64), "{what}: entry {index}");
        assert_eq!(m["bodySha256"].as_str(), Some(hex(&Sha256::digest(&e.body)).as_str()), "{what}: entry {index}");
        assert_eq!(e.body, stored_body(index, e.pos), "{what}: entry {index} is the DATASET's");
    }
}

/// Every file under a member directory: relative path and bytes. `checkpoint.bak` exists only if
/// the flush service wrote a checkpoint before the one at shutdown, which depends on timing.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, out);
            } else if entry.file_name() != "checkpoint.bak" {
                out.push((path.strip_prefix(root).unwrap().to_string_lossy().into_owned(), std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn assert_same_tree(ours: &Path, theirs: &Path) {
    let (ours, theirs) = (tree(ours), tree(theirs));
    let names = |t: &[(String, Vec<u8>)]| t.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&theirs), "the same files");
    for ((name, a), (_, b)) in ours.iter().zip(&theirs) {
        if a != b {
            let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
            panic!("{name} differs at byte {at} (ours {} bytes, Java's {})", a.len(), b.len());
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn we_read_what_java_wrote_as_leader_and_follower() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("java");
    let prefix = dir.path().join("m");
    java(&["write", s(&base), s(&prefix)]);
    for id in ["n0", "n1"] {
        let manifest = read_json(&dir.path().join(format!("m-{id}.json")));
        assert_eq!(manifest["endIndex"].as_i64(), Some(COUNT - 1));
        let member = open_member(&base, id);
        assert_matches(&member.store, &manifest, &format!("Java's {id}"));
        assert_eq!(member.terms.load(), (manifest["currTerm"].as_i64().unwrap(), manifest["voteFor"].as_str().map(str::to_owned)));
        assert_eq!(member.terms.load(), (2, Some("n0".to_owned())));
    }
    assert_eq!(open_member(&base, "n0").store.committed_index(), COUNT - 3, "from Java's checkpoint");
    assert_eq!(open_member(&base, "n1").store.committed_index(), COUNT - 5);

    // Our follower fed Java's leader entries holds Java's follower files.
    let ours = dir.path().join("ours");
    let java_leader = open_member(&base, "n0");
    let mut follower = open_member(&ours, "n1");
    for i in 0..COUNT {
        follower.store.append_as_follower(&java_leader.store.get(i).unwrap()).unwrap();
    }
    follower.store.shutdown().unwrap();
    for sub in ["data", "index"] {
        assert_same_tree(&ours.join("dledger-n1").join(sub), &base.join("dledger-n1").join(sub));
    }
}

#[test]
fn a_store_we_write_is_javas_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let java_base = dir.path().join("java");
    java(&["write", s(&java_base), s(&dir.path().join("m"))]);
    let ours = dir.path().join("ours");
    rust_write(&ours);
    // data/, index/, checkpoint, currterm and currterm.bak of both members.
    for id in ["n0", "n1"] {
        let node = format!("dledger-{id}");
        assert_same_tree(&ours.join(&node), &java_base.join(&node));
    }
    assert_eq!(std::fs::read_to_string(ours.join("dledger-n0").join("checkpoint")).unwrap(), format!("committedIndex={}\nendIndex={}\n", COUNT - 3, COUNT - 1));
    assert_eq!(std::fs::read_to_string(ours.join("dledger-n0").join("currterm")).unwrap(), "voteLeader=n0\ncurrTerm=2\n");
}

#[test]
fn java_reads_what_we_wrote_and_continues_and_we_read_that() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("ours");
    rust_write(&base);
    let ours = open_member(&base, "n0");
    let written: Vec<Entry> = (0..COUNT).map(|i| ours.store.get(i).unwrap()).collect();
    drop(ours);

    // Java recovers our store, reads every entry, then appends 40 more as leader of term 3.
    let manifest_path = dir.path().join("r.json");
    java(&["read", s(&base), "n0", s(&manifest_path), "--append", "40"]);
    let manifest = read_json(&manifest_path);
    let recovered = &manifest["recovered"];
    for (key, value) in [("beginIndex", 0), ("endIndex", COUNT - 1), ("endTerm", 2), ("committedIndex", COUNT - 3), ("currTerm", 2)] {
        assert_eq!(recovered[key].as_i64(), Some(value), "Java recovered {key}");
    }
    assert_eq!(recovered["voteFor"].as_str(), Some("n0"));
    assert_eq!(recovered["committedPos"].as_i64(), Some(written[COUNT as usize - 3].pos + written[COUNT as usize - 3].size() as i64));
    let entries = manifest["entries"].as_array().unwrap();
    assert_eq!(entries.len() as i64, COUNT + 40);
    for e in &written {
        let m = &entries[e.index as usize];
        assert_eq!((m["term"].as_i64(), m["pos"].as_i64()), (Some(e.term), Some(e.pos)), "entry {}", e.index);
        assert_eq!(m["bodySha256"].as_str(), Some(hex(&Sha256::digest(&e.body)).as_str()), "entry {}", e.index);
    }

    // We recover what Java appended, with its term, vote and checkpoint.
    let mut member = open_member(&base, "n0");
    assert_matches(&member.store, &manifest, "Java's continuation of our store");
    assert_eq!((member.store.end_index(), member.store.end_term(), member.store.committed_index()), (COUNT + 39, 3, COUNT + 38));
    assert_eq!(member.terms.load(), (3, Some("n0".to_owned())));

    // And once more the other way: we append, Java reads it all.
    for i in COUNT + 40..COUNT + 50 {
        member.store.append_as_leader(3, Bytes::from(body(i))).unwrap();
    }
    member.store.update_committed(3, COUNT + 49);
    drop(member);
    let again = dir.path().join("r2.json");
    java(&["read", s(&base), "n0", s(&again)]);
    let again = read_json(&again);
    assert_eq!(again["recovered"]["endIndex"].as_i64(), Some(COUNT + 49));
    assert_eq!(again["recovered"]["committedIndex"].as_i64(), Some(COUNT + 49));
    assert_matches(&open_member(&base, "n0").store, &again, "Java's reading of our continuation");
}

/// A member directory of ours with `n` entries and its Java manifest after `read`.
fn small_store(dir: &Path, n: i64) -> PathBuf {
    let base = dir.join("base");
    let mut m = open_member(&base, "n0");
    m.terms.persist(1, Some("n0")).unwrap();
    for i in 0..n {
        m.store.append_as_leader(1, Bytes::from(body(i))).unwrap();
    }
    m.store.update_committed(1, n - 1);
    drop(m);
    base
}

fn data_files(base: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(base.join("dledger-n0").join("data")).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

#[test]
fn java_and_we_refuse_two_empty_segments_after_the_data_and_accept_one() {
    let dir = tempfile::tempdir().unwrap();
    let base = small_store(dir.path(), 60);
    let files = data_files(&base);
    let last: u64 = files.last().unwrap().file_name().unwrap().to_str().unwrap().parse().unwrap();
    let empty = |k: u64| std::fs::write(base.join("dledger-n0").join("data").join(format!("{:020}", last + k * DATA as u64)), vec![0u8; DATA]).unwrap();
    empty(1);
    let java_copy = dir.path().join("java1");
    copy_dir(&base, &java_copy);
    let manifest = dir.path().join("one.json");
    java(&["read", s(&java_copy), "n0", s(&manifest)]);
    assert_eq!(read_json(&manifest)["recovered"]["endIndex"].as_i64(), Some(59), "Java accepts one empty segment");
    assert_eq!(open_member(&base, "n0").store.end_index(), 59, "and so do we");
    empty(1);
    empty(2);
    let java_copy = dir.path().join("java2");
    copy_dir(&base, &java_copy);
    let out = java_run(&["read", s(&java_copy), "n0", s(&dir.path().join("two.json"))]);
    assert_eq!(out.status.code(), Some(255), "Java's recovery calls System.exit(-1): {}", String::from_utf8_lossy(&out.stderr));
    let cfg = config(&base, "n0");
    assert!(matches!(FileStore::open(&cfg, TermFile::open(&cfg).unwrap().current_term()), Err(StoreError::RecoveryStoppedEarly { .. })));
}

#[test]
fn torn_tails_recover_as_java_recovers_them_except_an_unindexed_last_entry() {
    let dir = tempfile::tempdir().unwrap();
    let base = small_store(dir.path(), 60);
    let m = open_member(&base, "n0");
    let last = m.store.get(59).unwrap();
    drop(m);
    let data_path = |b: &Path| b.join("dledger-n0").join("data").join(format!("{:020}", last.pos as u64 / DATA as u64 * DATA as u64));
    let index_path = |b: &Path| b.join("dledger-n0").join("index").join(format!("{:020}", 59 * 32 / INDEX as u64 * INDEX as u64));
    // (bytes of the last entry written, its index unit written, what Java recovers, what we recover)
    let cases =
        [(10, true, 58, 58), (47, true, 58, 58), (48, true, 59, 59), (last.size() - 1, true, 59, 59), (last.size(), false, 59, 58), (100, false, 59, 58)];
    for (k, (written, unit, java_end, our_end)) in cases.into_iter().enumerate() {
        let case = dir.path().join(format!("case{k}"));
        copy_dir(&base, &case);
        let mut data = std::fs::read(data_path(&case)).unwrap();
        let at = last.pos as usize % DATA;
        data[at + written..at + last.size()].fill(0);
        std::fs::write(data_path(&case), data).unwrap();
        if !unit {
            let mut index = std::fs::read(index_path(&case)).unwrap();
            let at = 59 * 32 % INDEX;
            index[at..at + 32].fill(0);
            std::fs::write(index_path(&case), index).unwrap();
        }
        let java_case = dir.path().join(format!("java{k}"));
        copy_dir(&case, &java_case);
        let manifest = dir.path().join(format!("case{k}.json"));
        java(&["read", s(&java_case), "n0", s(&manifest)]);
        assert_eq!(read_json(&manifest)["recovered"]["endIndex"].as_i64(), Some(java_end), "Java, case {k}: {written} bytes, unit {unit}");
        assert_eq!(open_member(&case, "n0").store.end_index(), our_end, "us, case {k}: {written} bytes, unit {unit}");
    }
}

#[test]
fn a_follower_truncated_into_an_empty_log_keeps_its_entries_with_us_and_not_with_java() {
    let dir = tempfile::tempdir().unwrap();
    let leader_base = small_store(dir.path(), 120);
    let leader = open_member(&leader_base, "n0");
    let entries: Vec<Entry> = (0..120).map(|i| leader.store.get(i).unwrap()).collect();
    drop(leader);
    // Followers that start at a mid-segment entry (the leader's log began there for them), and
    // hold one segment or three.
    let start = entries.iter().position(|e| e.pos as usize % DATA > 1000).unwrap();
    for (k, take) in [(0, 5usize), (1, 90)] {
        let base = dir.path().join(format!("follower{k}"));
        let mut f = open_member(&base, "n1");
        f.terms.persist(1, Some("n0")).unwrap();
        f.store.truncate(&entries[start]).unwrap();
        for e in &entries[start + 1..start + take] {
            f.store.append_as_follower(e).unwrap();
        }
        f.store.update_committed(1, (start + take - 1) as i64);
        let segments = std::fs::read_dir(base.join("dledger-n1").join("data")).unwrap().count();
        assert_eq!(segments >= 3, k == 1, "case {k}: {segments} segments");
        drop(f);
        let java_copy = dir.path().join(format!("java{k}"));
        copy_dir(&base, &java_copy);
        let out = java_run(&["read", s(&java_copy), "n1", s(&dir.path().join(format!("f{k}.json")))]);
        if segments < 3 {
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let m = read_json(&dir.path().join(format!("f{k}.json")));
            assert_eq!(m["recovered"]["endIndex"].as_i64(), Some(-1), "Java sees no entry at offset 0 and treats the log as empty");
        } else {
            assert_eq!(out.status.code(), Some(255), "Java exits: the walk stops at the start of the first of {segments} segments");
        }
        let ours = open_member(&base, "n1");
        assert_eq!((ours.store.begin_index(), ours.store.end_index()), (start as i64, (start + take - 1) as i64), "case {k}");
        assert_eq!(ours.store.committed_index(), (start + take - 1) as i64);
        for e in &entries[start..start + take] {
            assert_eq!(ours.store.get(e.index).as_ref(), Some(e));
        }
    }
}
