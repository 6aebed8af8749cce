//! A test tool: appends numbered messages to a store with SYNC_FLUSH and prints `ACK <n>
//! <physical offset> <queue offset>` after each acknowledged one, until killed. The crash tests
//! kill it with SIGKILL and check that every acknowledged message survived.
//!
//! Usage: store-append-probe <storeDir> <firstNumber>
//! A put that fails ends it with exit code 3 and `FAILED <status> <remark>` on stderr.
//! `PROBE_INDEX=off` disables the index (its files are sparse, so a full disk would hit them
//! with SIGBUS rather than an error; the full-disk test keeps them out).

use std::io::Write;

use store::config::{FlushDiskType, MessageStoreConfig};
use store::store::MessageStore;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(first)) = (args.get(1), args.get(2).and_then(|n| n.parse::<usize>().ok())) else {
        eprintln!("usage: store-append-probe <storeDir> <firstNumber>");
        std::process::exit(2);
    };
    let config = MessageStoreConfig {
        store_path_root_dir: dir.clone(),
        flush_disk_type: FlushDiskType::SyncFlush,
        mapped_file_size_commit_log: 256 * 1024,
        mapped_file_size_consume_queue: 1000 * 20,
        max_hash_slot_num: 1000,
        max_index_num: 10_000,
        message_index_enable: std::env::var("PROBE_INDEX").map_or(true, |v| v != "off"),
        ..Default::default()
    };
    let store = match MessageStore::open(config) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("open failed: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = store.start() {
        eprintln!("start failed: {e}");
        std::process::exit(1);
    }
    let mut out = std::io::stdout().lock();
    for n in first.. {
        let r = store.put_message(&store::message::probe_message(n));
        let ok = r.is_ok();
        let Some(a) = r.append.filter(|_| ok) else {
            eprintln!("FAILED {:?} {}", r.status, r.remark.unwrap_or_default());
            store.shutdown();
            std::process::exit(3);
        };
        if writeln!(out, "ACK {n} {} {}", a.wrote_offset, a.logics_offset).and_then(|_| out.flush()).is_err() {
            break;
        }
    }
}
