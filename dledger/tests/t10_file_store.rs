//! The DLedger file store through its API and its files: the bytes of entries, blanks and index
//! units against an independent model of Java's layout, appends as leader and follower,
//! truncation, the commit index, the checkpoint, and recovery from clean stops, torn tails,
//! lost or corrupt indexes and extra empty segments.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use dledger::config::DLedgerConfig;
use dledger::entry::Entry;
use dledger::log::{LogError, RaftLog, TermStore};
use dledger::store::{file_name, CurrentTerm, FileStore, StoreError, TermFile};

const DATA: usize = 1024;
const INDEX: usize = 32 * 8;

fn config(dir: &Path) -> DLedgerConfig {
    DLedgerConfig {
        store_base_dir: dir.to_string_lossy().into_owned(),
        self_id: "n0".into(),
        peers: "n0-127.0.0.1:40911".into(),
        mapped_file_size_for_entry_data: DATA,
        mapped_file_size_for_entry_index: INDEX,
        ..Default::default()
    }
}

fn open(dir: &Path) -> FileStore {
    open_with(&config(dir), CurrentTerm::new(1))
}

fn open_with(config: &DLedgerConfig, term: CurrentTerm) -> FileStore {
    let store = FileStore::open(config, term).unwrap();
    store.set_clean_space_enabled(false);
    store
}

fn data_dir(dir: &Path) -> PathBuf {
    dir.join("dledger-n0").join("data")
}

fn index_dir(dir: &Path) -> PathBuf {
    dir.join("dledger-n0").join("index")
}

fn body(i: usize, len: usize) -> Bytes {
    Bytes::from((0..len).map(|j| ((i * 31 + j) % 251 + 1) as u8).collect::<Vec<u8>>())
}

/// Body lengths that exercise rolling: an entry is 48 + len bytes.
fn body_len(i: usize) -> usize {
    [100, 7, 300, 52, 433, 1, 200, 500, 60, 64][i % 10]
}

/// The files of a directory: (name, bytes), by name.
type Files = Vec<(String, Vec<u8>)>;

/// Every file of a directory, by name.
fn files(dir: &Path) -> Files {
    let mut out: Files = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

/// Java's layout, computed independently of the store: the data and index files a store holds
/// after appending `entries` (index, term, body) from an empty log.
fn model(entries: &[(i64, i64, Bytes)], data_size: usize, index_size: usize, first_index: i64) -> (Files, Files, Vec<i64>) {
    let mut data: Vec<u8> = Vec::new();
    let mut index: Vec<u8> = vec![0; first_index as usize * 32];
    let mut positions = Vec::new();
    for (i, term, body) in entries {
        let size = 48 + body.len();
        let rest = data_size - data.len() % data_size;
        if size + 8 > rest {
            data.extend_from_slice(&(-1i32).to_be_bytes());
            data.extend_from_slice(&(rest as i32).to_be_bytes());
            data.extend(std::iter::repeat_n(0u8, rest - 8));
        }
        let pos = data.len() as i64;
        positions.push(pos);
        data.extend_from_slice(&1i32.to_be_bytes());
        data.extend_from_slice(&(size as i32).to_be_bytes());
        data.extend_from_slice(&i.to_be_bytes());
        data.extend_from_slice(&term.to_be_bytes());
        data.extend_from_slice(&pos.to_be_bytes());
        data.extend_from_slice(&[0u8; 12]);
        data.extend_from_slice(&(body.len() as i32).to_be_bytes());
        data.extend_from_slice(body);
        index.extend_from_slice(&1i32.to_be_bytes());
        index.extend_from_slice(&pos.to_be_bytes());
        index.extend_from_slice(&(size as i32).to_be_bytes());
        index.extend_from_slice(&i.to_be_bytes());
        index.extend_from_slice(&term.to_be_bytes());
    }
    let split = |bytes: Vec<u8>, size: usize, skip_below: usize| {
        bytes
            .chunks(size)
            .enumerate()
            .filter(|(k, _)| (k + 1) * size > skip_below)
            .map(|(k, chunk)| {
                let mut file = chunk.to_vec();
                file.resize(size, 0);
                (file_name((k * size) as u64), file)
            })
            .collect::<Vec<_>>()
    };
    let skip = first_index as usize * 32;
    (split(data, data_size, 0), split(index, index_size, skip), positions)
}

fn append_all(store: &mut FileStore, n: usize, term: i64) -> Vec<Entry> {
    (0..n).map(|i| store.append_as_leader(term, body(i, body_len(i))).unwrap()).collect()
}

#[test]
fn leader_appends_are_javas_bytes_with_blanks_and_index_units() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    assert_eq!((store.begin_index(), store.end_index(), store.end_term(), store.committed_index()), (-1, -1, -1, -1));
    let mut expected = Vec::new();
    for i in 0..40 {
        let term = 1 + (i as i64) / 15;
        let e = store.append_as_leader(term, body(i, body_len(i))).unwrap();
        assert_eq!((e.index, e.term, e.magic, e.channel), (i as i64, term, 1, 0));
        assert_eq!(store.get(i as i64).unwrap(), e);
        expected.push((i as i64, term, body(i, body_len(i))));
    }
    let (data, index, positions) = model(&expected, DATA, INDEX, 0);
    for (i, pos) in positions.iter().enumerate() {
        assert_eq!(store.get(i as i64).unwrap().pos, *pos);
    }
    assert_eq!((store.begin_index(), store.end_index(), store.end_term()), (0, 39, 3));
    assert!(data.len() > 5, "the data rolled over several segments");
    assert_eq!(files(&data_dir(dir.path())), data);
    assert_eq!(files(&index_dir(dir.path())), index);
    assert_eq!(store.get(40), None);
    assert_eq!(store.get(-1), None);
}

#[test]
fn an_entry_is_placed_only_when_it_and_8_more_bytes_fit() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    // 1024 = 500 + 8 + 516: a 516-byte entry (468 body) leaves exactly 8 bytes.
    store.append_as_leader(1, body(0, 452)).unwrap();
    assert_eq!(store.append_as_leader(1, body(1, 468)).unwrap().pos, 500);
    let third = store.append_as_leader(1, body(2, 0)).unwrap();
    assert_eq!(third.pos, 1024, "a 48-byte entry does not fit 8 bytes: blank of 8");
    let seg0 = std::fs::read(data_dir(dir.path()).join(file_name(0))).unwrap();
    assert_eq!(&seg0[1016..1024], &[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 8]);
    // Segment 1: an entry leaving 63 bytes, then a 56-byte entry (56 + 8 = 64 > 63) rolls.
    store.append_as_leader(1, body(3, 1024 - 48 - 48 - 63)).unwrap();
    let next = store.append_as_leader(1, body(4, 8)).unwrap();
    assert_eq!(next.pos, 2048, "56 + 8 > 63 rolls");
    let seg1 = std::fs::read(data_dir(dir.path()).join(file_name(1024))).unwrap();
    let mut blank = [0u8; 63];
    blank[..8].copy_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 63]);
    assert_eq!(&seg1[1024 - 63..], &blank[..]);
}

#[test]
fn append_hooks_edit_the_body_before_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    store.add_append_hook(Box::new(|body: &mut [u8], entry: &Entry| {
        if body.len() >= 36 {
            body[28..36].copy_from_slice(&(entry.pos + 48).to_be_bytes());
        }
    }));
    let mut positions = Vec::new();
    for i in 0..12 {
        let e = store.append_as_leader(1, body(i, 100 + i * 40)).unwrap();
        assert_eq!(&e.body[28..36], &(e.pos + 48).to_be_bytes(), "the returned entry is as stored");
        positions.push(e.pos);
    }
    drop(store);
    let store = open(dir.path());
    for (i, pos) in positions.iter().enumerate() {
        let e = store.get(i as i64).unwrap();
        assert_eq!(e.pos, *pos);
        assert_eq!(&e.body[28..36], &(pos + 48).to_be_bytes());
        let mut original = body(i, 100 + i * 40).to_vec();
        original[28..36].copy_from_slice(&(pos + 48).to_be_bytes());
        assert_eq!(e.body, original);
    }
}

#[test]
fn leader_appends_refuse_older_terms_and_oversized_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    store.append_as_leader(3, body(0, 10)).unwrap();
    assert!(matches!(store.append_as_leader(2, body(1, 10)), Err(LogError::Inconsistent(_))));
    assert!(matches!(store.append_as_leader(3, body(1, DATA - 48 - 7)), Err(LogError::Inconsistent(_))));
    assert_eq!(store.append_as_leader(3, body(1, DATA - 48 - 8)).unwrap().pos, 1024);
    assert_eq!(store.end_index(), 1);
}

#[test]
fn a_follower_fed_the_leaders_entries_has_the_leaders_files() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path());
    let mut follower = open(follower_dir.path());
    let entries = append_all(&mut leader, 30, 2);
    let mut wrong = entries[0].clone();
    wrong.index = 1;
    assert!(matches!(follower.append_as_follower(&wrong), Err(LogError::Inconsistent(_))), "must be end + 1");
    let mut moved = entries[0].clone();
    moved.pos = 48;
    assert!(matches!(follower.append_as_follower(&moved), Err(LogError::Inconsistent(_))), "must land at its pos");
    assert!(files(&data_dir(follower_dir.path())).is_empty(), "a refused append writes nothing");
    for e in &entries {
        follower.append_as_follower(e).unwrap();
    }
    assert_eq!((follower.begin_index(), follower.end_index(), follower.end_term()), (0, 29, 2));
    assert_eq!(files(&data_dir(follower_dir.path())), files(&data_dir(leader_dir.path())));
    assert_eq!(files(&index_dir(follower_dir.path())), files(&index_dir(leader_dir.path())));
    for e in &entries {
        assert_eq!(follower.get(e.index).as_ref(), Some(e));
    }
}

/// Recovery stops at an entry of a lower term than the one before it (Java's too), so a follower
/// refuses to write one, by APPEND or by TRUNCATE (0.3.1.2 writes it, and loses it and everything
/// after it at the next start). A refused TRUNCATE cuts nothing.
#[test]
fn a_follower_refuses_what_recovery_would_cut_an_entry_of_a_lower_term_after_its_last() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    let entries = append_all(&mut store, 3, 2);
    let end = entries[2].pos + entries[2].size() as i64;
    let older = Entry { index: 3, term: 1, pos: end, ..entries[2].clone() };
    assert!(matches!(store.append_as_follower(&older), Err(LogError::Inconsistent(_))));
    assert_eq!((store.end_index(), store.end_term()), (2, 2));
    let older_than_ours = Entry { index: 2, term: 1, ..entries[2].clone() };
    assert!(matches!(store.truncate(&older_than_ours), Err(LogError::Inconsistent(_))));
    assert_eq!((store.begin_index(), store.end_index(), store.get(2).as_ref()), (0, 2, Some(&entries[2])), "nothing cut");
    let newer = Entry { index: 2, term: 3, ..entries[2].clone() };
    store.truncate(&newer).unwrap();
    drop(store);
    let store = open(dir.path());
    assert_eq!((store.begin_index(), store.end_index(), store.get(2)), (0, 2, Some(newer)), "a TRUNCATE of the same or a newer term is written");
}

#[test]
fn truncate_keeps_an_equal_entry_and_cuts_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    let entries = append_all(&mut store, 20, 1);
    let keep = entries[9].clone();
    store.truncate(&keep).unwrap();
    assert_eq!((store.begin_index(), store.end_index(), store.end_term()), (0, 9, 1));
    assert_eq!(store.write_pos(), (keep.pos as u64) + keep.size() as u64);
    assert_eq!(store.get(10), None);
    // Equality ignores the CRC fields, as Java's.
    let mut same = entries[5].clone();
    same.body_crc = 1234;
    store.truncate(&same).unwrap();
    assert_eq!(store.end_index(), 5);
    assert_eq!(store.get(5).unwrap().body_crc, 0, "the local entry was kept");
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.end_index(), 5);
    let (data, index, _) = model(&entries[..6].iter().map(|e| (e.index, e.term, e.body.clone())).collect::<Vec<_>>(), DATA, INDEX, 0);
    assert_eq!(files(&data_dir(dir.path())), data, "cut-off bytes are zeros, later segments gone");
    assert_eq!(files(&index_dir(dir.path())), index);
}

#[test]
fn truncate_replaces_a_different_entry_at_its_pos() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    let entries = append_all(&mut store, 20, 1);
    // The new leader's entry 12 of term 2 with another body (same size, so the same pos).
    let mut replacement = entries[12].clone();
    replacement.term = 2;
    replacement.body = body(99, entries[12].body.len());
    store.truncate(&replacement).unwrap();
    assert_eq!((store.end_index(), store.end_term()), (12, 2));
    assert_eq!(store.get(12).unwrap(), replacement);
    let next = store.append_as_leader(2, body(13, 5)).unwrap();
    assert_eq!(next.pos, replacement.pos + replacement.size() as i64);
    drop(store);
    let store = open(dir.path());
    assert_eq!((store.end_index(), store.end_term()), (13, 2));
    assert_eq!(store.get(12).unwrap(), replacement);
}

#[test]
fn truncate_into_an_empty_store_rebuilds_at_the_entrys_offset_and_survives_a_restart() {
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path());
    let entries = append_all(&mut leader, 40, 1);
    let dir = tempfile::tempdir().unwrap();
    let mut follower = open(dir.path());
    let start = &entries[17];
    assert_ne!(start.pos % DATA as i64, 0, "the case of a mid-segment start");
    follower.truncate(start).unwrap();
    assert_eq!((follower.begin_index(), follower.end_index()), (17, 17));
    assert_eq!(follower.get(17).as_ref(), Some(start));
    let seg_from = (start.pos as u64) / DATA as u64 * DATA as u64;
    assert_eq!(files(&data_dir(dir.path())).iter().map(|f| f.0.clone()).collect::<Vec<_>>(), vec![file_name(seg_from)]);
    for e in &entries[18..] {
        follower.append_as_follower(e).unwrap();
    }
    // Every byte from the start entry on equals the leader's.
    let leader_files = files(&data_dir(leader_dir.path()));
    for (name, bytes) in files(&data_dir(dir.path())) {
        let (_, theirs) = leader_files.iter().find(|f| f.0 == name).unwrap();
        let from = if name == file_name(seg_from) { (start.pos as u64 - seg_from) as usize } else { 0 };
        assert_eq!(&bytes[from..], &theirs[from..], "{name}");
        assert!(bytes[..from].iter().all(|b| *b == 0));
    }
    follower.update_committed(1, 30);
    drop(follower);
    // Java would see a first segment without an entry at offset 0 and treat it as empty (or exit
    // with more segments after it); we find the first entry after the zeros.
    let follower = open(dir.path());
    assert_eq!((follower.begin_index(), follower.end_index(), follower.committed_index()), (17, 39, 30));
    for e in &entries[17..] {
        assert_eq!(follower.get(e.index).as_ref(), Some(e));
    }
    assert_eq!(follower.get(16), None);
}

#[test]
fn truncate_at_the_end_that_rolls_keeps_the_log() {
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path());
    let entries = append_all(&mut leader, 30, 1);
    // An entry that starts a segment, after a blank.
    let k = entries.iter().position(|e| e.index > 0 && e.pos % DATA as i64 == 0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut follower = open(dir.path());
    for e in &entries[..k] {
        follower.append_as_follower(e).unwrap();
    }
    // Java rebuilds the whole log here (the cut lies past the written end); we roll into place.
    follower.truncate(&entries[k]).unwrap();
    assert_eq!((follower.begin_index(), follower.end_index()), (0, k as i64));
    for e in &entries[..=k] {
        assert_eq!(follower.get(e.index).as_ref(), Some(e));
    }
}

#[test]
fn truncate_below_the_committed_index_pulls_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    let entries = append_all(&mut store, 10, 1);
    store.update_committed(1, 8);
    store.truncate(&entries[4]).unwrap();
    assert_eq!(store.committed_index(), 4);
    assert_eq!(store.committed_pos(), entries[4].pos + entries[4].size() as i64);
}

#[test]
fn the_committed_index_follows_javas_rules() {
    let dir = tempfile::tempdir().unwrap();
    let term = CurrentTerm::new(5);
    let mut store = open_with(&config(dir.path()), term.clone());
    store.update_committed(5, 0);
    assert_eq!(store.committed_index(), -1, "ignored while the log is empty");
    let entries = append_all(&mut store, 10, 5);
    store.update_committed(4, 3);
    assert_eq!(store.committed_index(), -1, "a commit index from an older term is ignored");
    store.update_committed(5, -1);
    assert_eq!(store.committed_index(), -1);
    store.update_committed(5, 3);
    assert_eq!((store.committed_index(), store.committed_pos()), (3, entries[3].pos + entries[3].size() as i64));
    store.update_committed(5, 2);
    assert_eq!(store.committed_index(), 3, "never goes back");
    store.update_committed(6, 50);
    assert_eq!(store.committed_index(), 9, "clamped to the end");
    assert_eq!(store.committed_pos(), entries[9].pos + entries[9].size() as i64);
    term.set(7);
    store.append_as_leader(7, body(10, 3)).unwrap();
    store.update_committed(6, 10);
    assert_eq!(store.committed_index(), 9, "the current term is read through CurrentTerm");
    store.update_committed(7, 10);
    assert_eq!(store.committed_index(), 10);
}

#[test]
fn the_checkpoint_is_javas_text_written_at_shutdown_and_periodically() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = DLedgerConfig { check_point_interval_ms: 20, ..config(dir.path()) };
    let mut store = open_with(&cfg, CurrentTerm::new(1));
    store.start().unwrap();
    append_all(&mut store, 5, 1);
    store.update_committed(1, 3);
    let checkpoint = dir.path().join("dledger-n0").join("checkpoint");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(&checkpoint).ok().as_deref() != Some("committedIndex=3\nendIndex=4\n") {
        assert!(std::time::Instant::now() < deadline, "the flush service writes the checkpoint every checkPointInterval");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.unflushed_bytes() > 0 {
        assert!(std::time::Instant::now() < deadline, "the flush service flushes data and index");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    store.append_as_leader(1, body(5, 5)).unwrap();
    store.shutdown().unwrap();
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "committedIndex=3\nendIndex=5\n");
    assert!(dir.path().join("dledger-n0").join("checkpoint.bak").exists());
    assert!(!dir.path().join("dledger-n0").join("checkpoint.tmp").exists());
    let names: Vec<String> = files(&dir.path().join("dledger-n0")).into_iter().map(|f| f.0).collect();
    assert_eq!(names, vec!["checkpoint", "checkpoint.bak"], "data/ and index/ are directories beside them");
}

#[test]
fn a_clean_restart_recovers_everything_and_the_committed_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    let entries = append_all(&mut store, 60, 1);
    store.update_committed(1, 44);
    let before = (files(&data_dir(dir.path())), files(&index_dir(dir.path())));
    drop(store);
    let mut store = open(dir.path());
    assert_eq!((store.begin_index(), store.end_index(), store.end_term(), store.committed_index()), (0, 59, 1, 44));
    assert_eq!(store.committed_pos(), entries[44].pos + entries[44].size() as i64);
    for e in &entries {
        assert_eq!(store.get(e.index).as_ref(), Some(e));
    }
    assert_eq!((files(&data_dir(dir.path())), files(&index_dir(dir.path()))), before, "recovery changed nothing");
    let next = store.append_as_leader(1, body(60, body_len(60))).unwrap();
    assert_eq!(next.index, 60);
    let (data, _, positions) = model(&(0..61).map(|i| (i as i64, 1, body(i, body_len(i)))).collect::<Vec<_>>(), DATA, INDEX, 0);
    assert_eq!(next.pos, positions[60]);
    assert_eq!(files(&data_dir(dir.path())), data);
}

#[test]
fn a_restart_without_checkpoint_recovers_the_log_but_not_the_committed_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    append_all(&mut store, 10, 1);
    store.update_committed(1, 7);
    store.abandon();
    let store = open(dir.path());
    assert_eq!((store.end_index(), store.committed_index()), (9, -1));
}

/// A store of `n` entries written and left as a crash leaves it, and its files.
fn crashed_store(dir: &Path, n: usize) -> (Vec<Entry>, Files, Files) {
    let mut store = open(dir);
    let entries = append_all(&mut store, n, 1);
    store.abandon();
    (entries, files(&data_dir(dir)), files(&index_dir(dir)))
}

fn restore(dir: &Path, data: &[(String, Vec<u8>)], index: &[(String, Vec<u8>)]) {
    for (d, set) in [(data_dir(dir), data), (index_dir(dir), index)] {
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (name, bytes) in set {
            std::fs::write(d.join(name), bytes).unwrap();
        }
    }
}

fn edit(set: &mut [(String, Vec<u8>)], size: usize, offset: u64, f: impl FnOnce(&mut [u8])) {
    let name = file_name(offset / size as u64 * size as u64);
    let (_, bytes) = set.iter_mut().find(|f| f.0 == name).unwrap();
    f(&mut bytes[(offset % size as u64) as usize..]);
}

#[test]
fn a_torn_last_entry_is_cut_at_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let n = 14;
    let (entries, data, index) = crashed_store(dir.path(), n);
    let last = entries.last().unwrap().clone();
    let size = last.size();
    for written in 0..=size {
        for unit_written in [false, true] {
            let mut data = data.clone();
            let mut index = index.clone();
            edit(&mut data, DATA, last.pos as u64, |b| b[written..size].fill(0));
            if !unit_written {
                edit(&mut index, INDEX, last.index as u64 * 32, |b| b[..32].fill(0));
            }
            restore(dir.path(), &data, &index);
            let mut store = open(dir.path());
            // A killed writer leaves the unit unwritten: the entry was never acknowledged and is
            // dropped whole, torn or not. With the unit on disk (pages written out of order), Java's
            // checks decide: a whole header passes (no CRC can tell a torn body).
            let kept = unit_written && written >= 48;
            let expected_end = if kept { n as i64 - 1 } else { n as i64 - 2 };
            assert_eq!(store.end_index(), expected_end, "written {written} of {size}, unit {unit_written}");
            let end = store.write_pos();
            if kept {
                assert_eq!(end, last.pos as u64 + size as u64);
            } else {
                assert_eq!(end, last.pos as u64, "cut where the torn entry began");
                let seg = std::fs::read(data_dir(dir.path()).join(file_name(last.pos as u64 / DATA as u64 * DATA as u64))).unwrap();
                assert!(seg[(last.pos as usize % DATA)..].iter().all(|b| *b == 0), "the torn bytes are erased");
            }
            for e in &entries[..=(expected_end as usize)] {
                if e.index < n as i64 - 1 || written == size {
                    assert_eq!(store.get(e.index).as_ref(), Some(e));
                }
            }
            // The store goes on, and the next restart agrees.
            let next = store.append_as_leader(1, body(77, 20)).unwrap();
            assert_eq!(next.index, expected_end + 1);
            drop(store);
            assert_eq!(open(dir.path()).end_index(), expected_end + 1);
        }
    }
}

#[test]
fn a_lost_index_is_rebuilt_from_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    let entries = append_all(&mut store, 50, 1);
    store.update_committed(1, 20);
    drop(store);
    let index = files(&index_dir(dir.path()));
    std::fs::remove_dir_all(index_dir(dir.path())).unwrap();
    let store = open(dir.path());
    assert_eq!((store.end_index(), store.committed_index()), (49, 20));
    for e in &entries {
        assert_eq!(store.get(e.index).as_ref(), Some(e));
    }
    assert_eq!(files(&index_dir(dir.path())), index);
}

#[test]
fn a_corrupt_index_unit_rebuilds_the_index_from_there() {
    let dir = tempfile::tempdir().unwrap();
    let (entries, data, index) = crashed_store(dir.path(), 50);
    // Units the walk checks (from the third-to-last segment on): a mismatch rebuilds from there.
    let walked_from = entries.iter().find(|e| e.pos as usize == (data.len() - 3) * DATA).unwrap().index as usize;
    for victim in [walked_from + 1, walked_from + 7, 48, 49] {
        let mut broken = index.clone();
        edit(&mut broken, INDEX, victim as u64 * 32 + 12, |b| b[..4].copy_from_slice(&7i32.to_be_bytes()));
        restore(dir.path(), &data, &broken);
        let store = open(dir.path());
        assert_eq!(store.end_index(), 49, "unit {victim}");
        for e in &entries {
            assert_eq!(store.get(e.index).as_ref(), Some(e));
        }
        drop(store);
        assert_eq!(files(&index_dir(dir.path())), index, "unit {victim}");
    }
    // Index segments beyond the data are cut too.
    let mut longer = index.clone();
    longer.push((file_name((index.len() * INDEX) as u64), vec![1u8; INDEX]));
    restore(dir.path(), &data, &longer);
    assert_eq!(open(dir.path()).end_index(), 49);
    assert_eq!(files(&index_dir(dir.path())), index);
}

#[test]
fn recovery_starts_at_the_third_to_last_segment_or_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (entries, data, index) = crashed_store(dir.path(), 60);
    assert!(data.len() >= 6);
    // Damage the first entry of the third-to-last segment: its unit no longer matches, so the
    // walk begins a segment earlier and rebuilds the index from that entry on.
    let third = data.len() - 3;
    let first_there = entries.iter().find(|e| e.pos as usize == third * DATA).unwrap();
    let mut broken = index.clone();
    edit(&mut broken, INDEX, first_there.index as u64 * 32 + 24, |b| b[..8].copy_from_slice(&9i64.to_be_bytes()));
    restore(dir.path(), &data, &broken);
    let store = open(dir.path());
    assert_eq!(store.end_index(), 59);
    drop(store);
    assert_eq!(files(&index_dir(dir.path())), index);
    // Garbage in a segment before the walk's start is not looked at (as Java).
    let mut data2 = data.clone();
    let early = entries.iter().find(|e| e.pos as usize > DATA && (e.pos as usize) < 2 * DATA).unwrap();
    edit(&mut data2, DATA, early.pos as u64 + 4, |b| b[..4].copy_from_slice(&5i32.to_be_bytes()));
    restore(dir.path(), &data2, &index);
    assert_eq!(open(dir.path()).end_index(), 59);
}

#[test]
fn one_empty_segment_after_the_data_goes_and_two_refuse_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut data, index) = crashed_store(dir.path(), 12);
    let next = data.len() * DATA;
    data.push((file_name(next as u64), vec![0u8; DATA]));
    restore(dir.path(), &data, &index);
    let store = open(dir.path());
    assert_eq!(store.end_index(), 11);
    drop(store);
    assert_eq!(files(&data_dir(dir.path())).len(), data.len() - 1, "the empty segment is deleted");
    data.push((file_name((next + DATA) as u64), vec![0u8; DATA]));
    restore(dir.path(), &data, &index);
    match FileStore::open(&config(dir.path()), CurrentTerm::new(1)) {
        Err(StoreError::RecoveryStoppedEarly { process_offset, last_segment, .. }) => {
            assert!(last_segment - process_offset > DATA as u64);
        }
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }
    assert_eq!(files(&data_dir(dir.path())).len(), data.len(), "nothing was cut");
}

#[test]
fn files_java_cannot_load_refuse_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let (_, data, index) = crashed_store(dir.path(), 5);
    std::fs::write(data_dir(dir.path()).join("junk"), vec![0u8; DATA]).unwrap();
    assert!(matches!(FileStore::open(&config(dir.path()), CurrentTerm::new(1)), Err(StoreError::BadSegmentName { .. })));
    restore(dir.path(), &data, &index);
    std::fs::write(index_dir(dir.path()).join(file_name(INDEX as u64 * 9)), vec![0u8; 12]).unwrap();
    assert!(matches!(FileStore::open(&config(dir.path()), CurrentTerm::new(1)), Err(StoreError::WrongSegmentSize { .. })));
    restore(dir.path(), &data, &index);
    std::fs::write(data_dir(dir.path()).join(file_name(DATA as u64 * 9)), vec![0u8; DATA]).unwrap();
    assert!(matches!(FileStore::open(&config(dir.path()), CurrentTerm::new(1)), Err(StoreError::NotAdjacent { .. })));
    restore(dir.path(), &data, &index);
    std::fs::write(dir.path().join("dledger-n0").join("checkpoint"), "committedIndex=x\nendIndex=4\n").unwrap();
    assert!(matches!(FileStore::open(&config(dir.path()), CurrentTerm::new(1)), Err(StoreError::Corrupt { .. })));
    std::fs::write(dir.path().join("dledger-n0").join("checkpoint"), "committedIndex= \nendIndex=4\n").unwrap();
    assert_eq!(open(dir.path()).committed_index(), -1, "an empty value is no value (Java)");
    let bad = |c: DLedgerConfig| matches!(FileStore::open(&c, CurrentTerm::new(1)), Err(StoreError::Config(_)));
    assert!(bad(DLedgerConfig { mapped_file_size_for_entry_index: 100, ..config(dir.path()) }));
    assert!(bad(DLedgerConfig { mapped_file_size_for_entry_data: 56, ..config(dir.path()) }));
    assert!(bad(DLedgerConfig { data_store_path: "/a,/b".into(), ..config(dir.path()) }));
    assert!(bad(DLedgerConfig { delete_when: "four".into(), ..config(dir.path()) }));
}

#[test]
fn the_data_directory_can_live_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    let cfg = DLedgerConfig { data_store_path: elsewhere.to_string_lossy().into_owned(), ..config(dir.path()) };
    let mut store = open_with(&cfg, CurrentTerm::new(1));
    append_all(&mut store, 3, 1);
    drop(store);
    assert_eq!(files(&elsewhere).len(), 1);
    assert!(!data_dir(dir.path()).exists());
    assert_eq!(files(&index_dir(dir.path())).len(), 1);
    assert_eq!(open_with(&cfg, CurrentTerm::new(1)).end_index(), 2);
}

#[test]
fn old_committed_segments_expire_and_the_begin_index_follows() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = DLedgerConfig { mapped_file_size_for_entry_index: 32 * 4, ..config(dir.path()) };
    let mut store = open_with(&cfg, CurrentTerm::new(1));
    let entries = append_all(&mut store, 40, 1);
    let segments = files(&data_dir(dir.path())).len();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(73 * 3600);
    for (name, _) in files(&data_dir(dir.path())) {
        std::fs::File::options().write(true).open(data_dir(dir.path()).join(name)).unwrap().set_modified(old).unwrap();
    }
    let now = std::time::SystemTime::now();
    assert_eq!(store.clean_once(now, 12), 0, "not the hour, and the disk is not full enough");
    assert_eq!(store.clean_once(now, 4), 0, "nothing is committed yet");
    let in_third = entries.iter().find(|e| e.pos as usize >= 3 * DATA).unwrap();
    store.update_committed(1, in_third.index);
    assert_eq!(store.clean_once(now, 4), 3, "the segments whose entries are all committed");
    let begin = entries.iter().find(|e| e.pos as usize == 3 * DATA).unwrap().index;
    assert_eq!(store.begin_index(), begin);
    assert_eq!(store.get(begin - 1), None);
    assert_eq!(store.get(begin).as_ref(), Some(&entries[begin as usize]));
    assert_eq!(files(&data_dir(dir.path())).len(), segments - 3);
    let first_index_segment = files(&index_dir(dir.path()))[0].0.parse::<u64>().unwrap();
    assert!(first_index_segment <= begin as u64 * 32 && begin as u64 * 32 < first_index_segment + 128, "index segments below the begin are gone");
    drop(store);
    let store = open_with(&cfg, CurrentTerm::new(1));
    assert_eq!((store.begin_index(), store.end_index()), (begin, 39));
    assert_eq!(store.get(39).as_ref(), Some(&entries[39]));
}

#[test]
fn a_full_disk_refuses_appends() {
    let dir = tempfile::tempdir().unwrap();
    // A force-clean ratio of 0 makes the full ratio 0.05, below any real disk's use.
    let cfg = DLedgerConfig { disk_space_ratio_to_force_clean: 0.0, ..config(dir.path()) };
    let mut store = open_with(&cfg, CurrentTerm::new(1));
    store.append_as_leader(1, body(0, 3)).unwrap();
    store.clean_once(std::time::SystemTime::now(), 12);
    assert!(store.is_disk_full());
    assert_eq!(store.append_as_leader(1, body(1, 3)).unwrap_err(), LogError::DiskFull);
    let entry = Entry { index: 1, ..store.get(0).unwrap() };
    assert_eq!(store.append_as_follower(&entry).unwrap_err(), LogError::DiskFull);
}

#[test]
fn the_term_file_and_the_store_share_the_current_term() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let mut terms = TermFile::open(&cfg).unwrap();
    let mut store = open_with(&cfg, terms.current_term());
    store.append_as_leader(1, body(0, 3)).unwrap();
    terms.persist(3, Some("n0")).unwrap();
    store.update_committed(2, 0);
    assert_eq!(store.committed_index(), -1);
    store.update_committed(3, 0);
    assert_eq!(store.committed_index(), 0);
    assert_eq!(std::fs::read_to_string(dir.path().join("dledger-n0").join("currterm")).unwrap(), "voteLeader=n0\ncurrTerm=3\n");
}

#[test]
fn the_store_and_the_term_file_can_move_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<FileStore>();
    shareable::<TermFile>();
    shareable::<CurrentTerm>();
}

#[test]
fn truncate_erases_our_entry_before_the_segment_boundary_the_leader_rolled_to() {
    // Our log ends with our own entry 2 (or goes on past the boundary with 2..=6).
    for extra in [0, 4] {
        let leader_dir = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut leader = open(leader_dir.path());
        let mut follower = open(dir.path());
        // A common prefix that leaves 200 bytes in segment 0.
        for (i, len) in [(0usize, 400usize), (1, 328)].into_iter() {
            let e = leader.append_as_leader(1, body(i, len)).unwrap();
            follower.append_as_follower(&e).unwrap();
        }
        assert_eq!(leader.write_pos(), 824);
        // The old leader (our follower) wrote its own entry 2 in term 1, which fit segment 0; the
        // new leader's entry 2 of term 2 does not fit and starts segment 1.
        let ours = follower.append_as_leader(1, body(50, 10)).unwrap();
        assert_eq!(ours.pos, 824);
        for k in 0..extra {
            follower.append_as_leader(1, body(60 + k, 300)).unwrap();
        }
        assert_eq!(follower.write_pos() > 1024, extra > 0);
        let theirs = leader.append_as_leader(2, body(2, 300)).unwrap();
        assert_eq!(theirs.pos, 1024);
        follower.truncate(&theirs).unwrap();
        assert_eq!(follower.get(2).as_ref(), Some(&theirs));
        let seg0 = std::fs::read(data_dir(dir.path()).join(file_name(0))).unwrap();
        assert_eq!(&seg0[824..832], &[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 200], "our entry 2 became the blank");
        assert!(seg0[832..].iter().all(|b| *b == 0));
        drop(follower);
        // Java rebuilds the whole log at 1024 when ours ended before it (dropping entries 0 and 1),
        // and keeps segment 0 whole when ours went on past it: its next recovery then finds our old
        // entry 2 again and stops at the leader's. Ours keeps the prefix and the leader's entry.
        let follower = open(dir.path());
        assert_eq!((follower.begin_index(), follower.end_index(), follower.end_term()), (0, 2, 2), "extra {extra}");
        assert_eq!(follower.get(2).as_ref(), Some(&theirs));
        assert_eq!(files(&data_dir(dir.path())), files(&data_dir(leader_dir.path())));
        assert_eq!(files(&index_dir(dir.path())), files(&index_dir(leader_dir.path())));
    }
}

#[test]
fn truncate_to_an_entry_that_does_not_follow_ours_rebuilds_the_log_there() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    append_all(&mut store, 10, 1);
    // A leader's entry 5 whose pos does not follow our entry 4: our prefix is not the leader's.
    let stranger = Entry { magic: 1, index: 5, term: 2, pos: 2600, channel: 0, chain_crc: 0, body_crc: 0, body: body(5, 20) };
    store.truncate(&stranger).unwrap();
    assert_eq!((store.begin_index(), store.end_index()), (5, 5));
    assert_eq!(store.get(4), None);
    assert_eq!(store.get(5).as_ref(), Some(&stranger));
    drop(store);
    let store = open(dir.path());
    assert_eq!((store.begin_index(), store.end_index()), (5, 5));
    let bad = Entry { pos: 1024 - 30, ..stranger };
    let mut store = store;
    assert!(matches!(store.truncate(&bad), Err(LogError::Inconsistent(_))), "an entry that cannot start there");
    assert_eq!(store.end_index(), 5, "nothing was cut");
}
