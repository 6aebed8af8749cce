//! Short append benches: `put_message` of a 1 KiB message with ASYNC_FLUSH (the whole append path:
//! encode, append lock, copy into the mapped file, flusher nudge; the dispatcher runs alongside),
//! and the record codec alone. The long run with machine baselines is the `store-bench` binary.
//!
//! Run: `cargo bench -p store --bench append -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use store::config::{FlushDiskType, MessageStoreConfig};
use store::message::record::{decode_record, encode_record, StampedFields};
use store::message::{properties, MessageToStore};
use store::store::MessageStore;

fn message_1k() -> MessageToStore {
    MessageToStore {
        topic: "Bench".into(),
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: SocketAddr::from(([127, 0, 0, 1], 40000)),
        store_host: SocketAddr::from(([127, 0, 0, 1], 10911)),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from((0..1024).map(|i| b'a' + (i % 26) as u8).collect::<Vec<u8>>()),
        properties: properties::serialize([("TAGS", "TagA"), ("KEYS", "order-1"), ("UNIQ_KEY", "7F00000100002A9F0000000000000001"), ("WAIT", "true")]),
    }
}

fn put_message(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let config = MessageStoreConfig {
        store_path_root_dir: dir.path().to_string_lossy().into_owned(),
        mapped_file_size_commit_log: 256 * 1024 * 1024,
        flush_disk_type: FlushDiskType::AsyncFlush,
        message_index_enable: false,
        ..Default::default()
    };
    let store = MessageStore::open(config).unwrap();
    store.start().unwrap();
    let msg = message_1k();
    let mut group = c.benchmark_group("put_message");
    group.throughput(Throughput::Elements(1));
    // Also counts the page faults the putting thread takes (the writer: appends run on the
    // caller's thread, under the append lock), over every iteration criterion runs.
    let (mut puts, mut faults) = (0u64, 0u64);
    group.bench_function("async_1KiB", |b| {
        b.iter_custom(|iters| {
            let faults_before = thread_minor_faults();
            let started = Instant::now();
            for _ in 0..iters {
                let put = store.put_message(black_box(&msg));
                assert!(put.is_ok(), "{:?}: {:?}", put.status, put.remark);
            }
            let elapsed = started.elapsed();
            faults += thread_minor_faults() - faults_before;
            puts += iters;
            elapsed
        })
    });
    group.finish();
    println!(
        "put_message/async_1KiB: {puts} puts, {faults} minor faults in the putting thread ({:.1} per 1000 puts)",
        faults as f64 * 1000.0 / puts.max(1) as f64
    );
    store.shutdown();
}

/// Minor page faults of the calling thread so far (`minflt`, the 10th field of
/// `/proc/thread-self/stat`; 0 where that file does not exist).
fn thread_minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after it follow its closing ')'.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after_name.split_whitespace().nth(7).and_then(|f| f.parse().ok()).unwrap_or(0)
}

fn codec(c: &mut Criterion) {
    let msg = message_1k();
    let mut record = encode_record(&msg).unwrap();
    record.stamp(StampedFields { queue_offset: 42, physical_offset: 1 << 30, store_timestamp: 1_700_000_000_123 });
    let mut group = c.benchmark_group("record_1KiB");
    group.throughput(Throughput::Elements(1));
    group.bench_function("encode", |b| b.iter(|| encode_record(black_box(&msg)).unwrap()));
    group.bench_function("decode", |b| b.iter(|| decode_record(black_box(&record.bytes), false).unwrap()));
    group.bench_function("decode_crc", |b| b.iter(|| decode_record(black_box(&record.bytes), true).unwrap()));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = put_message, codec
}
criterion_main!(benches);
