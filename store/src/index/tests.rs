use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;
use crate::mapped_file::allocated_bytes;
use crate::message::record::{TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE};

const T0: i64 = 1_700_000_000_000;

fn tiny(slots: usize, entries: usize) -> IndexConfig {
    IndexConfig { max_hash_slot_num: slots, max_index_num: entries, max_msgs_num_batch: 64 }
}

fn new_file(dir: &Path, config: &IndexConfig) -> IndexFile {
    IndexFile::create(&dir.join("20240101000000000"), config, 0, 0).unwrap()
}

fn record<'a>(offset: i64, timestamp: i64, uniq_key: Option<&'a str>, keys: Option<&'a str>) -> IndexRecord<'a> {
    IndexRecord { topic: "TopicA", physical_offset: offset, store_timestamp: timestamp, transaction_type: TRANSACTION_NOT_TYPE, keys, uniq_key }
}

fn all_time(service: &IndexService, key: &str) -> Vec<i64> {
    service.query("TopicA", key, 64, 0, i64::MAX).phy_offsets
}

// ---- IndexFile ----

#[test]
fn a_new_file_is_full_size_with_a_zero_header_and_an_index_count_of_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny(8, 4);
    let f = new_file(dir.path(), &config);
    assert_eq!(config.file_size_bytes(), 40 + 8 * 4 + 4 * 20);
    assert_eq!(std::fs::metadata(f.path()).unwrap().len(), 152);
    assert!(std::fs::read(f.path()).unwrap().iter().all(|b| *b == 0));
    assert_eq!((f.index_count(), f.hash_slot_count(), f.begin_timestamp(), f.end_phy_offset()), (1, 0, 0, 0));
    assert!(f.select_phy_offsets("a", 10, 0, i64::MAX).is_empty());
}

#[test]
fn a_file_has_its_blocks_reserved_when_created_or_grown_so_a_full_disk_is_an_error_not_a_sigbus() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny(1024, 4096);
    let f = new_file(dir.path(), &config);
    assert!(allocated_bytes(f.path()) >= config.file_size_bytes(), "{} of {}", allocated_bytes(f.path()), config.file_size_bytes());
    let short = dir.path().join("20240102000000000");
    std::fs::write(&short, [0u8; 40]).unwrap();
    let grown = IndexFile::open(&short, &config).unwrap();
    assert_eq!(std::fs::metadata(grown.path()).unwrap().len(), config.file_size_bytes());
    assert!(allocated_bytes(grown.path()) >= config.file_size_bytes());
}

#[test]
fn the_default_geometry_gives_java_sized_files() {
    assert_eq!(IndexConfig::default().file_size_bytes(), 420_000_040);
    assert!(IndexConfig::default().validate().is_ok());
}

#[test]
fn geometries_java_cannot_map_or_that_hold_no_key_are_refused() {
    assert!(tiny(0, 4).validate().is_err());
    assert!(tiny(8, 1).validate().is_err());
    assert!(tiny(8, 2).validate().is_ok());
    assert!(tiny(5_000_000, 200_000_000).validate().is_err());
}

#[test]
fn put_keys_are_selected_back_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let f = new_file(dir.path(), &tiny(16, 32));
    assert!(f.put_key("TopicA#k1", 100, T0));
    assert!(f.put_key("TopicA#k2", 200, T0 + 1000));
    assert!(f.put_key("TopicA#k1", 300, T0 + 2000));
    assert_eq!(f.select_phy_offsets("TopicA#k1", 10, 0, i64::MAX), vec![300, 100]);
    assert_eq!(f.select_phy_offsets("TopicA#k2", 10, 0, i64::MAX), vec![200]);
    assert_eq!(f.select_phy_offsets("TopicA#k1", 1, 0, i64::MAX), vec![300]);
    assert!(f.select_phy_offsets("TopicA#nothing", 10, 0, i64::MAX).is_empty());
    assert_eq!((f.begin_phy_offset(), f.end_phy_offset()), (100, 300));
    assert_eq!((f.begin_timestamp(), f.end_timestamp()), (T0, T0 + 2000));
    assert_eq!(f.index_count(), 4);
}

#[test]
fn many_keys_sharing_one_slot_are_told_apart_by_their_hash() {
    let dir = tempfile::tempdir().unwrap();
    let f = new_file(dir.path(), &tiny(1, 200));
    for i in 0..150i64 {
        assert!(f.put_key(&format!("TopicA#key-{}", i % 10), i, T0 + i));
    }
    assert_eq!(f.hash_slot_count(), 1);
    for k in 0..10i64 {
        let expected: Vec<i64> = (0..150).rev().filter(|i| i % 10 == k).collect();
        assert_eq!(f.select_phy_offsets(&format!("TopicA#key-{k}"), 100, 0, i64::MAX), expected);
    }
}

#[test]
fn keys_with_equal_java_hashes_are_both_returned_as_java_does() {
    // "Aa" and "BB" have the same String.hashCode, and so do the keys ending in them.
    assert_eq!(crate::message::java_string_hash("t#Aa"), crate::message::java_string_hash("t#BB"));
    let dir = tempfile::tempdir().unwrap();
    let f = new_file(dir.path(), &tiny(4, 8));
    assert!(f.put_key("t#Aa", 1, T0));
    assert!(f.put_key("t#BB", 2, T0));
    assert_eq!(f.select_phy_offsets("t#Aa", 10, 0, i64::MAX), vec![2, 1]);
}

#[test]
fn a_full_file_refuses_the_next_key_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = new_file(dir.path(), &tiny(4, 4));
    assert!(f.put_key("a", 1, T0));
    assert!(f.put_key("b", 2, T0));
    assert!(!f.is_full());
    assert!(f.put_key("c", 3, T0));
    assert!(f.is_full());
    let before = std::fs::read(f.path()).unwrap();
    assert!(!f.put_key("d", 4, T0));
    assert_eq!(std::fs::read(f.path()).unwrap(), before);
    assert_eq!(f.index_count(), 4);
}

#[test]
fn a_key_whose_java_hash_is_i32_min_hashes_to_zero_and_still_round_trips() {
    assert_eq!(crate::message::java_string_hash("polygenelubricants"), i32::MIN);
    assert_eq!(index_key_hash("polygenelubricants"), 0);
    assert_eq!(index_key_hash("a"), 97);
    // Other negative hashes are stored as their absolute value.
    let negative = (0..1000).map(|i| format!("TopicA#key-{i}")).find(|k| crate::message::java_string_hash(k) < 0).unwrap();
    assert_eq!(index_key_hash(&negative), -crate::message::java_string_hash(&negative));

    let dir = tempfile::tempdir().unwrap();
    let f = new_file(dir.path(), &tiny(7, 8));
    assert!(f.put_key("polygenelubricants", 42, T0));
    assert_eq!(f.select_phy_offsets("polygenelubricants", 10, 0, i64::MAX), vec![42]);
    let bytes = std::fs::read(f.path()).unwrap();
    // Slot 0 (hash 0 % 7) points at entry 1, whose stored hash is 0.
    assert_eq!(bytes[40..44], 1i32.to_be_bytes());
    let entry1 = 40 + 7 * 4 + 20;
    assert_eq!(bytes[entry1..entry1 + 4], 0i32.to_be_bytes());
}

#[test]
fn the_time_window_is_applied_in_whole_seconds_after_the_begin_time() {
    let dir = tempfile::tempdir().unwrap();
    let f = new_file(dir.path(), &tiny(4, 16));
    assert!(f.put_key("k", 1, T0));
    assert!(f.put_key("k", 2, T0 + 10_500)); // stored as 10 s
    assert!(f.put_key("k", 3, T0 + 20_000));
    assert_eq!(f.select_phy_offsets("k", 10, T0, T0 + 20_000), vec![3, 2, 1]);
    assert_eq!(f.select_phy_offsets("k", 10, T0 + 5_000, T0 + 15_000), vec![2]);
    // Entry 2 reads back as T0 + 10 000, so a window starting at its real time misses it.
    assert_eq!(f.select_phy_offsets("k", 10, T0 + 10_500, i64::MAX), vec![3]);
    assert!(f.select_phy_offsets("k", 10, T0 + 21_000, i64::MAX).is_empty());
    assert!(f.is_time_matched(T0 - 1, T0 + 30_000));
    assert!(f.is_time_matched(T0 + 5_000, T0 + 6_000));
    assert!(!f.is_time_matched(T0 + 20_001, T0 + 30_000));
}

#[test]
fn header_and_entries_sit_at_the_byte_positions_java_uses() {
    let dir = tempfile::tempdir().unwrap();
    // 8 slots, 4 entries: slots at 40..72, entry n at 72 + 20 n.
    let f = new_file(dir.path(), &tiny(8, 4));
    // "a" hashes to 97: slot 97 % 8 = 1 at byte 44.
    assert!(f.put_key("a", 0x0102_0304_0506_0708, T0));
    assert!(f.put_key("a", 2000, T0 + 5_999));
    f.flush().unwrap();
    let b = std::fs::read(f.path()).unwrap();
    assert_eq!(b.len(), 152);

    let be64 = |v: i64| v.to_be_bytes().to_vec();
    let be32 = |v: i32| v.to_be_bytes().to_vec();
    assert_eq!(b[0..8], be64(T0)[..], "beginTimestamp");
    assert_eq!(b[8..16], be64(T0 + 5_999)[..], "endTimestamp");
    assert_eq!(b[16..24], be64(0x0102_0304_0506_0708)[..], "beginPhyOffset");
    assert_eq!(b[24..32], be64(2000)[..], "endPhyOffset");
    assert_eq!(b[32..36], be32(1)[..], "hashSlotCount");
    assert_eq!(b[36..40], be32(3)[..], "indexCount");

    assert_eq!(b[44..48], be32(2)[..], "slot 1 holds the newest entry");
    assert!(b[40..44].iter().chain(&b[48..72]).all(|x| *x == 0), "other slots empty");
    assert!(b[72..92].iter().all(|x| *x == 0), "entry 0 unused");

    assert_eq!(b[92..96], be32(97)[..], "entry 1 keyHash");
    assert_eq!(b[96..104], [1, 2, 3, 4, 5, 6, 7, 8], "entry 1 phyOffset");
    assert_eq!(b[104..108], be32(0)[..], "entry 1 timeDiff: no begin time yet");
    assert_eq!(b[108..112], be32(0)[..], "entry 1 prev: end of chain");

    assert_eq!(b[112..116], be32(97)[..], "entry 2 keyHash");
    assert_eq!(b[116..124], be64(2000)[..], "entry 2 phyOffset");
    assert_eq!(b[124..128], be32(5)[..], "entry 2 timeDiff in whole seconds");
    assert_eq!(b[128..132], be32(1)[..], "entry 2 prev");
    assert!(b[132..152].iter().all(|x| *x == 0), "entry 3 untouched");
}

#[test]
fn a_reopened_file_answers_as_before_and_keeps_counting() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny(16, 32);
    let path = {
        let f = new_file(dir.path(), &config);
        for i in 0..10 {
            assert!(f.put_key(&format!("k{}", i % 3), i * 100, T0 + i * 1000));
        }
        f.path().to_owned()
    };
    let f = IndexFile::open(&path, &config).unwrap();
    assert_eq!(f.index_count(), 11);
    assert_eq!((f.begin_phy_offset(), f.end_phy_offset()), (0, 900));
    assert_eq!((f.begin_timestamp(), f.end_timestamp()), (T0, T0 + 9000));
    assert_eq!(f.hash_slot_count(), 3);
    assert_eq!(f.select_phy_offsets("k0", 10, 0, i64::MAX), vec![900, 600, 300, 0]);
    assert!(f.put_key("k0", 1000, T0 + 10_000));
    assert_eq!(f.select_phy_offsets("k0", 2, 0, i64::MAX), vec![1000, 900]);
}

#[test]
fn a_short_file_is_extended_to_the_configured_size_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny(8, 4);
    let path = dir.path().join("20240101000000000");
    std::fs::write(&path, [0u8; 40]).unwrap();
    let f = IndexFile::open(&path, &config).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 152);
    assert_eq!(f.index_count(), 1, "indexCount 0 on disk reads as 1");
    assert!(f.put_key("a", 1, T0));
}

#[test]
fn a_new_file_continues_from_the_previous_files_end_values() {
    let dir = tempfile::tempdir().unwrap();
    let f = IndexFile::create(&dir.path().join("20240101000000000"), &tiny(8, 4), 5000, T0).unwrap();
    assert_eq!((f.begin_phy_offset(), f.end_phy_offset(), f.begin_timestamp(), f.end_timestamp()), (5000, 5000, T0, T0));
    // The first key replaces the begin values; its time difference is taken from the old begin.
    assert!(f.put_key("a", 6000, T0 + 3_000));
    assert_eq!((f.begin_phy_offset(), f.begin_timestamp()), (6000, T0 + 3_000));
    let b = std::fs::read(f.path()).unwrap();
    assert_eq!(b[92 + 12..92 + 16], 3i32.to_be_bytes());
}

#[test]
fn readers_running_beside_the_writer_only_see_whole_entries() {
    let dir = tempfile::tempdir().unwrap();
    let f = Arc::new(new_file(dir.path(), &tiny(3, 20_001)));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (f, done) = (Arc::clone(&f), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !done.load(Ordering::Acquire) || rounds == 0 {
                    for k in 0..5i64 {
                        let found = f.select_phy_offsets(&format!("key-{k}"), 50, 0, i64::MAX);
                        // Offsets encode the key, and come newest first.
                        assert!(found.iter().all(|o| o % 5 == k), "{found:?}");
                        assert!(found.windows(2).all(|w| w[0] > w[1]), "{found:?}");
                    }
                    rounds += 1;
                }
            })
        })
        .collect();
    for i in 0..20_000i64 {
        assert!(f.put_key(&format!("key-{}", i % 5), i, T0 + i));
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
}

// ---- IndexService ----

#[test]
fn a_record_is_indexed_by_its_unique_key_and_each_of_its_keys() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(16, 64)).unwrap();
    service.load(true, 0).unwrap();
    assert_eq!(service.build_index(&record(100, T0, Some("U1"), Some("k1  k2 "))).unwrap(), None);
    assert_eq!(service.build_index(&record(200, T0 + 1, Some("U2"), Some("k2"))).unwrap(), None);
    assert_eq!(all_time(&service, "U1"), vec![100]);
    assert_eq!(all_time(&service, "k1"), vec![100]);
    assert_eq!(all_time(&service, "k2"), vec![200, 100]);
    assert!(all_time(&service, "").is_empty());
    assert!(service.query("TopicB", "k2", 64, 0, i64::MAX).phy_offsets.is_empty());
    let files = service.files();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].index_count(), 1 + 5);
    assert!(index_service::is_index_file_name(files[0].file_name()));
    assert_eq!(files[0].path().parent().unwrap(), root.path().join("index"));
}

#[test]
fn rollback_records_and_records_below_the_indexed_end_are_skipped() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(16, 64)).unwrap();
    for tran in [TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE] {
        let key = format!("t{tran}");
        let r = IndexRecord { transaction_type: tran, ..record(1000 + tran as i64, T0, None, Some(&key)) };
        service.build_index(&r).unwrap();
    }
    assert_eq!(all_time(&service, "t0"), vec![1000]);
    assert_eq!(all_time(&service, "t4"), vec![1004]);
    assert_eq!(all_time(&service, "t8"), vec![1008]);
    assert!(all_time(&service, "t12").is_empty());

    // Re-dispatch after a restart: below the file's endPhyOffset is skipped, at it is not.
    service.build_index(&record(500, T0, None, Some("again"))).unwrap();
    service.build_index(&record(1008, T0, None, Some("again"))).unwrap();
    assert_eq!(all_time(&service, "again"), vec![1008]);
}

#[test]
fn a_full_file_rolls_over_to_a_new_one_that_starts_where_it_ended() {
    let root = tempfile::tempdir().unwrap();
    // 3 keys per file.
    let service = IndexService::new(root.path(), tiny(4, 4)).unwrap();
    let mut full_timestamps = Vec::new();
    for i in 0..7i64 {
        if let Some(ts) = service.build_index(&record(i * 100, T0 + i * 1000, None, Some("k"))).unwrap() {
            full_timestamps.push(ts);
        }
    }
    let files = service.files();
    assert_eq!(files.len(), 3);
    // The roll happens on the put that does not fit: records 3 and 6.
    assert_eq!(full_timestamps, vec![T0 + 2000, T0 + 5000]);
    assert_eq!(service.index_msg_timestamp(), T0 + 5000);
    assert!(files.windows(2).all(|w| w[0].file_name() < w[1].file_name()), "names sort in creation order");
    assert_eq!((files[1].begin_phy_offset(), files[1].end_phy_offset()), (300, 500));
    assert_eq!((files[2].begin_phy_offset(), files[2].end_phy_offset()), (600, 600));
    assert_eq!(all_time(&service, "k"), vec![600, 500, 400, 300, 200, 100, 0]);

    // The full file was forced with its header: its bytes on disk say so.
    let b = std::fs::read(files[0].path()).unwrap();
    assert_eq!(b[36..40], 4i32.to_be_bytes());
    assert_eq!(b[8..16], (T0 + 2000).to_be_bytes());
}

#[test]
fn a_roll_with_no_record_to_index_still_creates_the_next_file() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(4, 2)).unwrap();
    assert_eq!(service.build_index(&record(0, T0, None, Some("k"))).unwrap(), None);
    let r = IndexRecord { transaction_type: TRANSACTION_ROLLBACK_TYPE, ..record(100, T0 + 1000, None, Some("k")) };
    assert_eq!(service.build_index(&r).unwrap(), Some(T0));
    assert_eq!(service.files().len(), 2);
}

#[test]
fn query_walks_files_newest_first_until_it_has_enough() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(4, 3)).unwrap();
    for i in 0..6i64 {
        service.build_index(&record(i * 100, T0 + i * 10_000, None, Some("k"))).unwrap();
    }
    assert_eq!(service.files().len(), 3);
    let r = service.query("TopicA", "k", 64, 0, i64::MAX);
    assert_eq!(r.phy_offsets, vec![500, 400, 300, 200, 100, 0]);
    assert_eq!((r.index_last_update_timestamp, r.index_last_update_phyoffset), (T0 + 50_000, 500));
    assert_eq!(service.query("TopicA", "k", 3, 0, i64::MAX).phy_offsets, vec![500, 400, 300]);
}

#[test]
fn the_first_entry_of_a_rolled_file_reads_back_as_late_as_java_reads_it() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(4, 3)).unwrap();
    for i in 0..6i64 {
        service.build_index(&record(i * 100, T0 + i * 10_000, None, Some("k"))).unwrap();
    }
    // The second file began at the first file's end (T0+10s), so its first entry (T0+20s) stored
    // a 10 s difference; then the file's begin time became T0+20s and that entry reads as T0+30s.
    // Same for the third file: both its entries read as T0+50s and miss the window.
    let r = service.query("TopicA", "k", 64, T0 + 25_000, T0 + 45_000);
    assert_eq!(r.phy_offsets, vec![300, 200]);
}

#[test]
fn query_stops_at_the_first_file_that_begins_before_the_window() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(4, 2)).unwrap();
    // Store times going backwards across files (a clock step back): the old file is never reached.
    service.build_index(&record(0, T0 + 100_000, None, Some("k"))).unwrap();
    service.build_index(&record(100, T0, None, Some("k"))).unwrap();
    assert_eq!(service.files().len(), 2);
    assert!(service.query("TopicA", "k", 64, T0 + 50_000, i64::MAX).phy_offsets.is_empty());
    assert_eq!(service.query("TopicA", "k", 64, 0, i64::MAX).phy_offsets, vec![100, 0]);
}

#[test]
fn query_returns_at_most_max_msgs_num_batch_offsets() {
    let root = tempfile::tempdir().unwrap();
    let config = IndexConfig { max_msgs_num_batch: 2, ..tiny(4, 16) };
    let service = IndexService::new(root.path(), config).unwrap();
    for i in 0..5i64 {
        service.build_index(&record(i, T0, None, Some("k"))).unwrap();
    }
    assert_eq!(service.query("TopicA", "k", 64, 0, i64::MAX).phy_offsets, vec![4, 3]);
}

#[test]
fn an_empty_service_answers_nothing_with_zero_update_marks() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(4, 16)).unwrap();
    service.load(false, 0).unwrap();
    assert_eq!(service.query("TopicA", "k", 64, 0, i64::MAX), QueryResult::default());
}

#[test]
fn files_reload_in_name_order_after_a_clean_exit() {
    let root = tempfile::tempdir().unwrap();
    let config = tiny(4, 4);
    {
        let service = IndexService::new(root.path(), config.clone()).unwrap();
        for i in 0..8i64 {
            service.build_index(&record(i * 100, T0 + i * 1000, Some(&format!("u{i}")), Some("k"))).unwrap();
        }
        service.shutdown().unwrap();
        assert!(service.files().is_empty());
    }
    std::fs::create_dir(root.path().join("index/not-an-index")).unwrap();
    std::fs::write(root.path().join("index/notes.txt"), b"x").unwrap();

    let service = IndexService::new(root.path(), config).unwrap();
    service.load(true, 0).unwrap();
    assert_eq!(service.files().len(), 6);
    assert_eq!(all_time(&service, "k"), vec![700, 600, 500, 400, 300, 200, 100, 0]);
    assert_eq!(all_time(&service, "u3"), vec![300]);
    // Writing resumes in the last file.
    service.build_index(&record(800, T0 + 8000, None, Some("k"))).unwrap();
    assert_eq!(service.files().len(), 6);
    assert_eq!(all_time(&service, "k")[0], 800);
}

#[test]
fn after_an_abnormal_exit_files_newer_than_the_checkpoint_are_deleted() {
    let root = tempfile::tempdir().unwrap();
    let config = tiny(4, 3);
    let checkpoint = {
        let service = IndexService::new(root.path(), config.clone()).unwrap();
        for i in 0..5i64 {
            service.build_index(&record(i * 100, T0 + i * 1000, None, Some("k"))).unwrap();
        }
        // Files end at T0+1000, T0+3000, T0+4000; the second one was the last to fill.
        service.index_msg_timestamp()
    };
    assert_eq!(checkpoint, T0 + 3000);
    let paths: Vec<_> = {
        let service = IndexService::new(root.path(), config.clone()).unwrap();
        service.load(true, 0).unwrap();
        service.files().iter().map(|f| f.path().to_owned()).collect()
    };
    assert_eq!(paths.len(), 3);

    let service = IndexService::new(root.path(), config).unwrap();
    service.load(false, checkpoint).unwrap();
    assert_eq!(service.files().len(), 2);
    assert!(!paths[2].exists());
    assert_eq!(all_time(&service, "k"), vec![300, 200, 100, 0]);
}

#[test]
fn expired_files_are_deleted_oldest_first_but_never_the_newest() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(4, 3)).unwrap();
    for i in 0..6i64 {
        service.build_index(&record(i * 100, T0 + i * 1000, None, Some("k"))).unwrap();
    }
    let files = service.files();
    assert_eq!(files.iter().map(|f| f.end_phy_offset()).collect::<Vec<_>>(), vec![100, 300, 500]);
    assert_eq!(service.delete_files_below(100), 0);
    assert_eq!(service.delete_files_below(101), 1);
    assert!(!files[0].path().exists());
    assert_eq!(service.delete_files_below(i64::MAX), 1);
    assert!(!files[1].path().exists());
    assert_eq!(service.files().len(), 1);
    assert!(files[2].path().exists());
    assert_eq!(all_time(&service, "k"), vec![500, 400]);
}

#[test]
fn destroy_removes_every_file() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(4, 3)).unwrap();
    for i in 0..4i64 {
        service.build_index(&record(i, T0, None, Some("k"))).unwrap();
    }
    assert_eq!(service.total_size(), 2 * tiny(4, 3).file_size_bytes());
    service.flush().unwrap();
    service.destroy();
    assert!(service.files().is_empty());
    assert_eq!(std::fs::read_dir(service.dir()).unwrap().count(), 0);
}

#[test]
fn when_no_file_can_be_created_the_index_fails_once_skips_records_and_recovers_on_retry() {
    let root = tempfile::tempdir().unwrap();
    let service = IndexService::new(root.path(), tiny(16, 64)).unwrap();
    service.load(true, 0).unwrap();
    let index_dir = root.path().join("index");
    std::fs::write(&index_dir, b"not a directory").unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(service.build_index(&record(100, T0, Some("U1"), None)), Err(IndexError::Failed)));
    assert!(started.elapsed() >= std::time::Duration::from_secs(2), "three tries, a second apart (Java's)");
    assert!(service.has_failed());
    // Records meanwhile are skipped without a try; a retry that still cannot create keeps the mark.
    assert!(matches!(service.build_index(&record(200, T0, Some("U2"), None)), Err(IndexError::Failed)));
    service.retry_failed();
    assert!(service.has_failed());
    std::fs::remove_file(&index_dir).unwrap();
    service.retry_failed();
    assert!(!service.has_failed());
    assert_eq!(service.files().len(), 1);
    assert_eq!(service.build_index(&record(300, T0, Some("U3"), None)).unwrap(), None);
    assert_eq!(all_time(&service, "U3"), vec![300]);
    assert!(all_time(&service, "U1").is_empty() && all_time(&service, "U2").is_empty());
}
