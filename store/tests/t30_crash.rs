//! Durability: a writer killed with SIGKILL loses nothing it acknowledged under SYNC_FLUSH, and a
//! commit log cut at any byte recovers to its last whole message.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use store::config::MessageStoreConfig;
use store::message::probe_message;
use store::message::record::{decode_record, RecordAt};
use store::store::{GetMessageStatus, MessageStore};

fn config(dir: &Path) -> MessageStoreConfig {
    // Must match store-append-probe.
    MessageStoreConfig {
        store_path_root_dir: dir.to_string_lossy().into_owned(),
        mapped_file_size_commit_log: 256 * 1024,
        mapped_file_size_consume_queue: 1000 * 20,
        max_hash_slot_num: 1000,
        max_index_num: 10_000,
        ..Default::default()
    }
}

/// A small deterministic generator, so a failing round can be replayed.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

/// Every acknowledged message is readable at its queue offset, with its physical offset, and
/// every consume-queue unit points at a record of its own topic, queue and offset.
fn check(store: &MessageStore, acked: &[(usize, i64, i64)]) {
    for &(n, phy, queue_offset) in acked {
        let m = probe_message(n);
        let r = store.get_message(&m.topic, m.queue_id, queue_offset, 1, |_| true);
        assert_eq!(r.status, GetMessageStatus::Found, "acknowledged message {n} lost");
        let Ok(RecordAt::Record(rec)) = decode_record(&r.messages[0], true) else { panic!("message {n} corrupt") };
        assert_eq!((rec.flag as usize, rec.physical_offset, rec.body), (n, phy, &m.body[..]), "message {n}");
    }
    for cq in store.queues() {
        for offset in cq.min_offset()..cq.max_offset() {
            let unit = cq.get(offset).expect("unit below max offset");
            let bytes = store.look_message_by_offset(unit.phy_offset).expect("unit points into the commit log");
            let Ok(RecordAt::Record(rec)) = decode_record(&bytes, true) else { panic!("unit points at garbage") };
            assert_eq!((rec.topic, rec.queue_id, rec.queue_offset), (cq.topic(), cq.queue_id(), offset));
        }
    }
}

#[test]
fn sigkill_never_loses_an_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Lcg(0x5eed);
    let mut acked: Vec<(usize, i64, i64)> = Vec::new();
    let mut next = 0usize;
    for round in 0..20 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_store-append-probe"))
            .arg(dir.path())
            .arg(next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let wanted = 1 + rng.next(400) as usize;
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while seen < wanted {
            assert!(Instant::now() < deadline, "round {round}: writer too slow");
            let Some(Ok(line)) = lines.next() else { panic!("round {round}: writer died") };
            let parts: Vec<&str> = line.split(' ').collect();
            acked.push((parts[1].parse().unwrap(), parts[2].parse().unwrap(), parts[3].parse().unwrap()));
            seen += 1;
        }
        // Kill mid-stream: the writer keeps appending while we send the signal.
        child.kill().unwrap();
        let _ = child.wait();
        // Acknowledgements printed before the kill landed count too.
        for line in lines.map_while(Result::ok) {
            let parts: Vec<&str> = line.split(' ').collect();
            if parts.len() == 4 {
                acked.push((parts[1].parse().unwrap(), parts[2].parse().unwrap(), parts[3].parse().unwrap()));
            }
        }
        next = acked.last().map_or(0, |a| a.0 + 1);
        assert!(dir.path().join("abort").exists(), "a killed store leaves its abort file");
        let store = MessageStore::open(config(dir.path())).unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        check(&store, &acked);
        // The next writer continues after what survived, which may be past the last ack.
        let survived = store.commit_log().max_offset();
        drop(store);
        assert!(survived >= acked.last().map_or(0, |a| a.1), "round {round}");
        next = next.max(count_survivors(dir.path()));
    }
}

/// How many probe messages survived (the next writer numbers on from there).
fn count_survivors(dir: &Path) -> usize {
    let store = MessageStore::open(config(dir)).unwrap();
    let total: i64 = store.queues().iter().map(|q| q.max_offset()).sum();
    total as usize
}

fn write_clean(dir: &Path, n: usize) -> Vec<i64> {
    let store = MessageStore::open(config(dir)).unwrap();
    store.start().unwrap();
    let mut ends = Vec::new();
    for i in 0..n {
        let a = store.put_message(&probe_message(i)).append.unwrap();
        ends.push(a.wrote_offset + a.wrote_bytes as i64);
    }
    store.shutdown();
    ends
}

#[test]
fn a_tail_cut_at_every_byte_recovers_to_the_last_whole_message() {
    let master = tempfile::tempdir().unwrap();
    let n = 40;
    let ends = write_clean(master.path(), n);
    let last_file = master.path().join("commitlog/00000000000000000000");
    let original = std::fs::read(&last_file).unwrap();
    let first_cut = ends[n - 3] as usize;
    let end = ends[n - 1] as usize;
    for cut in first_cut..=end {
        for crashed in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            copy_dir(master.path(), dir.path());
            let mut bytes = original.clone();
            bytes[cut..].iter_mut().for_each(|b| *b = 0);
            std::fs::write(dir.path().join("commitlog/00000000000000000000"), &bytes).unwrap();
            if crashed {
                std::fs::write(dir.path().join("abort"), b"").unwrap();
            }
            let store = MessageStore::open(config(dir.path())).unwrap();
            let whole = ends.iter().filter(|e| **e as usize <= cut).count();
            assert_eq!(store.commit_log().max_offset(), ends[whole - 1], "cut at {cut}, crashed {crashed}");
            let total: i64 = store.queues().iter().map(|q| q.max_offset()).sum();
            assert_eq!(total as usize, whole, "cut at {cut}, crashed {crashed}: queues disagree with the commit log");
            assert_eq!(store.recovery().queues_truncated, whole < n, "cut at {cut}, crashed {crashed}");
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else if entry.file_name() != "lock" {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_full_disk_fails_puts_cleanly_and_keeps_everything_acknowledged() {
    let work = tempfile::tempdir().unwrap();
    let mount = work.path().join("tiny");
    let copy = work.path().join("copy");
    std::fs::create_dir_all(&mount).unwrap();
    std::fs::create_dir_all(&copy).unwrap();
    // A 700 KiB tmpfs in a private mount namespace (unprivileged through a user namespace): the
    // probe fills it, then the store is copied out for checking.
    let script = r#"mount -t tmpfs -o size=700k tmpfs "$1" || exit 99; PROBE_INDEX=off "$2" "$1" 0; status=$?; cp -a "$1"/. "$3"/; exit $status"#;
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", script, "sh"])
        .arg(&mount)
        .arg(env!("CARGO_BIN_EXE_store-append-probe"))
        .arg(&copy)
        .output()
        .expect("unshare (util-linux) is needed for the full-disk test");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(99), "cannot mount a tmpfs: {stderr}");
    assert_eq!(out.status.code(), Some(3), "the probe should stop on a failed put: {stderr}");
    assert!(stderr.contains("FAILED CreateMappedFileFailed"), "{stderr}");
    let acked: Vec<(usize, i64, i64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            Some((p.get(1)?.parse().ok()?, p.get(2)?.parse().ok()?, p.get(3)?.parse().ok()?))
        })
        .collect();
    assert!(acked.len() > 100, "only {} messages fit", acked.len());
    let store = MessageStore::open(MessageStoreConfig { message_index_enable: false, ..config(&copy) }).unwrap();
    check(&store, &acked);
}

#[test]
fn records_after_a_torn_one_do_not_come_back_after_a_second_crash() {
    let dir = tempfile::tempdir().unwrap();
    let n = 40;
    let ends = write_clean(dir.path(), n);
    // Message 37 is damaged on disk while 38 and 39 reached the disk whole (pages are written
    // back in any order).
    let file = dir.path().join("commitlog/00000000000000000000");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[ends[36] as usize + 100] ^= 0xFF;
    std::fs::write(&file, &bytes).unwrap();
    std::fs::write(dir.path().join("abort"), b"").unwrap();

    let store = MessageStore::open(config(dir.path())).unwrap();
    assert_eq!(store.commit_log().max_offset(), ends[36], "recovery stops before the damaged record");
    store.start().unwrap();
    // A new message of the same size lands exactly where 37 was; then the process dies.
    let replacement = store.put_message(&probe_message(37)).append.unwrap();
    assert_eq!(replacement.wrote_offset, ends[36]);
    std::mem::forget(store);

    let store = MessageStore::open(config(dir.path())).unwrap();
    assert_eq!(store.commit_log().max_offset(), ends[37], "old messages 38 and 39 must not reappear");
    let total: i64 = store.queues().iter().map(|q| q.max_offset()).sum();
    assert_eq!(total as usize, 38);
}
