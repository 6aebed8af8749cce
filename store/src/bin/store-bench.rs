//! store-bench: append throughput of the store against what the machine can do, in one run.
//!
//! Measures the machine's memcpy bandwidth, how fast a fresh file fills through the page cache
//! (through a mapping as the commit log writes, and with write(2)), and its fdatasync rate (per
//! 4 KiB append, and batched as group commit does), then appends to a fresh store per case: ASYNC_FLUSH with 128 B, 1 KiB and
//! 4 KiB bodies, without and with the transient store pool, one writer thread; SYNC_FLUSH with
//! 1 KiB bodies and 1 or 64 writer threads. The index is disabled (append path and dispatch to
//! the consume queues only); commit-log files are 256 MiB, the transient pool holds 2 buffers.
//!
//! Usage: store-bench [--seconds N] [--warmup N] [--dir DIR] [--json FILE] [--only SUBSTRING] [--warm]
//! (`--only` runs only the cases whose name contains it, e.g. `--only "ASYNC 1 KiB w1"` to profile;
//! `--warm` sets `warmMapedFileEnable`, off by default as in Java).

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::hint::black_box;
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use store::config::{FlushDiskType, MessageStoreConfig};
use store::mapped_file::MappedFile;
use store::message::{properties, MessageToStore};
use store::store::MessageStore;

const COMMIT_LOG_FILE_SIZE: usize = 256 * 1024 * 1024;
const QUEUES: usize = 4;
const MEMCPY_BYTES: usize = 64 * 1024 * 1024;
const MEMCPY_RUNS: usize = 9;
const FILL_BYTES: usize = 256 * 1024 * 1024;
const FILL_RUNS: usize = 3;
/// The fdatasync batch sizes measured; the SYNC_FLUSH ratio uses [`GROUP_COMMIT_BATCH`].
const FSYNC_BATCHES: [usize; 3] = [4 * 1024, 64 * 1024, 256 * 1024];
/// 64 writers with one outstanding 1 KiB message each: about 64 KiB per group commit.
const GROUP_COMMIT_BATCH: usize = 64 * 1024;

struct Args {
    seconds: f64,
    warmup: f64,
    dir: PathBuf,
    json: Option<PathBuf>,
    only: Option<String>,
    warm: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { seconds: 5.0, warmup: 1.0, dir: std::env::temp_dir(), json: None, only: None, warm: false };
    let mut dir_given = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => args.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--warmup" => args.warmup = value()?.parse().map_err(|e| format!("--warmup: {e}"))?,
            "--dir" => (args.dir, dir_given) = (value()?.into(), true),
            "--json" => args.json = Some(value()?.into()),
            "--only" => args.only = Some(value()?),
            "--warm" => args.warm = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if !dir_given && matches!(filesystem_of(&args.dir).1.as_str(), "tmpfs" | "ramfs") {
        // fdatasync on tmpfs measures nothing: prefer the disk the current directory is on.
        args.dir = std::env::current_dir().map_err(|e| e.to_string())?;
    }
    Ok(args)
}

/// (device, type) of the mount holding `path`, from /proc/self/mounts.
fn filesystem_of(path: &Path) -> (String, String) {
    let path = fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (device, mount_point, fs_type) = (f.first()?, PathBuf::from(f.get(1)?.replace("\\040", " ")), f.get(2)?);
            path.starts_with(&mount_point).then(|| (mount_point.as_os_str().len(), device.to_string(), fs_type.to_string()))
        })
        .max()
        .map_or_else(|| ("?".into(), "?".into()), |(_, dev, ty)| (dev, ty))
}

fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// Median GB/s of copying a 64 MiB buffer (bytes copied once per copy).
fn memcpy_gbps() -> f64 {
    let src = vec![1u8; MEMCPY_BYTES];
    let mut dst = vec![0u8; MEMCPY_BYTES];
    dst.copy_from_slice(&src); // fault the pages in
    median(
        (0..MEMCPY_RUNS)
            .map(|_| {
                let t = Instant::now();
                dst.copy_from_slice(black_box(&src));
                black_box(&mut dst);
                MEMCPY_BYTES as f64 / t.elapsed().as_secs_f64() / 1e9
            })
            .collect(),
    )
}

/// Median GB/s of filling new 256 MiB files with 64 KiB appends: through the store's own mapped
/// file (each new page faults in, as commit-log appends do), or with write(2). The caller deletes
/// `dir` after both, so the page cache grows as it does under a commit log (on a VM, pages the
/// guest never touched, or gave back, can cost far more than recycled ones).
fn fill_gbps(dir: &Path, mapped: bool) -> io::Result<(f64, String)> {
    fs::create_dir_all(dir)?;
    let chunk = vec![0x5au8; 64 * 1024];
    let mut runs = Vec::new();
    for run in 0..FILL_RUNS {
        let t = if mapped {
            let file = MappedFile::create(dir, (run * FILL_BYTES) as u64, FILL_BYTES)?;
            let t = Instant::now();
            while file.append(&chunk) {}
            t.elapsed()
        } else {
            let mut file = File::create(dir.join(format!("write-{run}")))?;
            let t = Instant::now();
            for _ in 0..FILL_BYTES / chunk.len() {
                file.write_all(&chunk)?;
            }
            t.elapsed()
        };
        runs.push(FILL_BYTES as f64 / t.as_secs_f64() / 1e9);
    }
    let each = runs.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(" ");
    Ok((median(runs), each))
}

struct Baselines {
    memcpy_gbps: f64,
    mapped_fill_gbps: f64,
    write_fill_gbps: f64,
    fsyncs: Vec<FsyncResult>,
}

fn measure_baselines(dir: &Path, seconds: f64) -> io::Result<Baselines> {
    let memcpy_gbps = memcpy_gbps();
    println!("memcpy                    {memcpy_gbps:>8.2} GB/s (median of {MEMCPY_RUNS} copies of 64 MiB)");
    let fill_dir = dir.join("fill");
    let (mapped_fill_gbps, each) = fill_gbps(&fill_dir, true)?;
    println!("fill new file, mapped     {mapped_fill_gbps:>8.2} GB/s (median of {FILL_RUNS} files of 256 MiB in 64 KiB appends: {each})");
    let (write_fill_gbps, each) = fill_gbps(&fill_dir, false)?;
    println!("fill new file, write(2)   {write_fill_gbps:>8.2} GB/s (same: {each})");
    fs::remove_dir_all(&fill_dir)?;
    let mut fsyncs = Vec::new();
    for batch in FSYNC_BATCHES {
        let r = fdatasync_rate(dir, batch, Duration::from_secs_f64(seconds))?;
        println!("fdatasync {:>3} KiB appends {:>8.0} /s   {:>8.1} MB/s", batch / 1024, r.syncs_per_sec, r.mb_per_sec);
        fsyncs.push(r);
    }
    Ok(Baselines { memcpy_gbps, mapped_fill_gbps, write_fill_gbps, fsyncs })
}

struct FsyncResult {
    batch: usize,
    syncs_per_sec: f64,
    mb_per_sec: f64,
}

/// Appends `batch` bytes then fdatasync, repeatedly, to a new file in `dir`.
fn fdatasync_rate(dir: &Path, batch: usize, duration: Duration) -> io::Result<FsyncResult> {
    let path = dir.join(format!("fdatasync-{batch}"));
    let mut file = OpenOptions::new().create(true).truncate(true).write(true).open(&path)?;
    let data = vec![0x5au8; batch];
    let (start, mut syncs) = (Instant::now(), 0u64);
    while start.elapsed() < duration {
        file.write_all(&data)?;
        file.sync_data()?;
        syncs += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(file);
    fs::remove_file(&path)?;
    Ok(FsyncResult { batch, syncs_per_sec: syncs as f64 / secs, mb_per_sec: (syncs * batch as u64) as f64 / secs / 1e6 })
}

struct Case {
    flush: FlushDiskType,
    pool: bool,
    body: usize,
    writers: usize,
}

impl Case {
    fn name(&self) -> String {
        let flush = if self.flush == FlushDiskType::SyncFlush { "SYNC" } else { "ASYNC" };
        let body = if self.body >= 1024 { format!("{} KiB", self.body / 1024) } else { format!("{} B", self.body) };
        let pool = if self.pool { " +pool" } else { "" };
        format!("{flush} {body}{pool} w{}", self.writers)
    }
}

#[derive(Default)]
struct WriterStats {
    msgs: u64,
    bytes: u64,
    failed: u64,
    latencies_ns: Vec<u64>,
}

struct CaseResult {
    name: String,
    record_bytes: usize,
    msgs_per_sec: f64,
    mb_per_sec: f64,
    failed: u64,
    /// Process CPU time over wall time during the measurement (writers, dispatcher, flusher).
    cpu_cores: f64,
    dispatch_behind_bytes: i64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
}

/// A producer-like message: 4.9 client properties, distinct keys per writer and queue.
fn message(body: usize, writer: usize, queue: usize) -> MessageToStore {
    let body: Vec<u8> = (0..body).map(|i| b'a' + (i % 26) as u8).collect();
    let keys = format!("order-{writer}-{queue}");
    let uniq = format!("7F00000100002A9F{writer:08X}{queue:08X}");
    MessageToStore {
        topic: "Bench".into(),
        queue_id: queue as i32,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: SocketAddr::from(([127, 0, 0, 1], 40000 + writer as u16)),
        store_host: SocketAddr::from(([127, 0, 0, 1], 10911)),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from(body),
        properties: properties::serialize([("TAGS", "TagA"), ("KEYS", keys.as_str()), ("UNIQ_KEY", uniq.as_str()), ("WAIT", "true")]),
    }
}

fn put_loop(store: &MessageStore, msgs: &[MessageToStore], measuring: &AtomicBool, stop: &AtomicBool, timed: bool) -> WriterStats {
    let mut stats = WriterStats::default();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let counted = measuring.load(Ordering::Relaxed);
        let start = timed.then(Instant::now);
        let r = store.put_message(&msgs[i % msgs.len()]);
        i += 1;
        if !counted {
            continue;
        }
        let ok = r.is_ok();
        match r.append.filter(|_| ok) {
            Some(append) => {
                stats.msgs += 1;
                stats.bytes += append.wrote_bytes as u64;
            }
            None => stats.failed += 1,
        }
        if let Some(start) = start {
            stats.latencies_ns.push(start.elapsed().as_nanos() as u64);
        }
    }
    stats
}

/// User plus system CPU seconds of this process (clock ticks of 1/100 s).
fn process_cpu_secs() -> f64 {
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_comm = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<f64> = after_comm.split_whitespace().skip(11).take(2).filter_map(|f| f.parse().ok()).collect();
    fields.iter().sum::<f64>() / 100.0
}

fn run_case(case: &Case, dir: &Path, args: &Args) -> Result<CaseResult, String> {
    let root = dir.join(case.name().replace(' ', "-").replace('+', ""));
    let _ = fs::remove_dir_all(&root);
    let config = MessageStoreConfig {
        store_path_root_dir: root.to_string_lossy().into_owned(),
        mapped_file_size_commit_log: COMMIT_LOG_FILE_SIZE,
        flush_disk_type: case.flush,
        transient_store_pool_enable: case.pool,
        transient_store_pool_size: 2,
        message_index_enable: false,
        warm_mapped_file_enable: args.warm,
        ..Default::default()
    };
    let store = MessageStore::open(config).map_err(|e| format!("open: {e}"))?;
    store.start().map_err(|e| format!("start: {e}"))?;
    let messages: Vec<Vec<MessageToStore>> = (0..case.writers).map(|w| (0..QUEUES).map(|q| message(case.body, w, (w + q) % QUEUES)).collect()).collect();
    let record_bytes = store::message::encode_record(&messages[0][0]).map_err(|e| e.to_string())?.len();
    let (measuring, stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let timed = case.flush == FlushDiskType::SyncFlush;

    let (stats, secs, cpu, behind) = std::thread::scope(|s| {
        let writers: Vec<_> = (messages.iter().enumerate())
            .map(|(w, msgs)| {
                let (store, measuring, stop) = (&store, &measuring, &stop);
                let thread = std::thread::Builder::new().name(format!("writer{w}"));
                thread.spawn_scoped(s, move || put_loop(store, msgs, measuring, stop, timed)).expect("cannot start a writer thread")
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(args.warmup));
        measuring.store(true, Ordering::Relaxed);
        let (start, cpu0) = (Instant::now(), process_cpu_secs());
        std::thread::sleep(Duration::from_secs_f64(args.seconds));
        stop.store(true, Ordering::Relaxed);
        let (secs, cpu) = (start.elapsed().as_secs_f64(), process_cpu_secs() - cpu0);
        let behind = store.dispatch_behind_bytes();
        (writers.into_iter().map(|w| w.join().expect("writer panicked")).collect::<Vec<_>>(), secs, cpu, behind)
    });
    store.shutdown();
    drop(store);
    let _ = fs::remove_dir_all(&root);

    let (msgs, bytes, failed) = stats.iter().fold((0, 0, 0), |(m, b, f), s| (m + s.msgs, b + s.bytes, f + s.failed));
    let mut latencies: Vec<u64> = stats.into_iter().flat_map(|s| s.latencies_ns).collect();
    latencies.sort_unstable();
    let percentile = |p: f64| latencies.get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1))).map(|ns| *ns as f64 / 1e3);
    Ok(CaseResult {
        name: case.name(),
        record_bytes,
        msgs_per_sec: msgs as f64 / secs,
        mb_per_sec: bytes as f64 / secs / 1e6,
        failed,
        cpu_cores: cpu / secs,
        dispatch_behind_bytes: behind,
        p50_us: percentile(0.50),
        p99_us: percentile(0.99),
    })
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            eprintln!("usage: store-bench [--seconds N] [--warmup N] [--dir DIR] [--json FILE] [--only SUBSTRING] [--warm]");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("store-bench: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    let dir = args.dir.join(format!("store-bench-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (device, fs_type) = filesystem_of(&dir);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("store-bench: {cores} cores; dir {} ({fs_type} on {device}); {}s per case after {}s warm-up", dir.display(), args.seconds, args.warmup);
    let warm = if args.warm { "on" } else { "off" };
    println!("commit-log files 256 MiB, transient pool 2 buffers, warmMapedFileEnable {warm}, index disabled, {QUEUES} queues of topic Bench\n");

    let base = measure_baselines(&dir, args.seconds).map_err(|e| format!("baselines: {e}"))?;
    let group_commit_mbps = base.fsyncs.iter().find(|r| r.batch == GROUP_COMMIT_BATCH).map_or(f64::NAN, |r| r.mb_per_sec);

    let mut cases = Vec::new();
    for pool in [false, true] {
        for body in [128, 1024, 4096] {
            cases.push(Case { flush: FlushDiskType::AsyncFlush, pool, body, writers: 1 });
        }
    }
    for writers in [1, 64] {
        cases.push(Case { flush: FlushDiskType::SyncFlush, pool: false, body: 1024, writers });
    }
    println!(
        "\n{:<22} {:>7} {:>11} {:>9} {:>17} {:>13} {:>9} {:>9} {:>5} {:>9} {:>6}",
        "case", "rec B", "msgs/s", "MB/s", "fraction", "of fill", "p50 µs", "p99 µs", "cpu", "behind B", "failed"
    );
    let mut results = Vec::new();
    for case in cases.iter().filter(|c| args.only.iter().all(|only| c.name().contains(only.as_str()))) {
        let r = run_case(case, &dir, args)?;
        let (fraction, of_fill) = if case.flush == FlushDiskType::SyncFlush {
            (format!("{:.3} of fsync64K", r.mb_per_sec / group_commit_mbps), "-".into())
        } else {
            (format!("{:.3} of memcpy", r.mb_per_sec / (base.memcpy_gbps * 1e3)), format!("{:.3} mapped", r.mb_per_sec / (base.mapped_fill_gbps * 1e3)))
        };
        let us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        println!(
            "{:<22} {:>7} {:>11.0} {:>9.1} {:>17} {:>13} {:>9} {:>9} {:>5.2} {:>9} {:>6}",
            r.name,
            r.record_bytes,
            r.msgs_per_sec,
            r.mb_per_sec,
            fraction,
            of_fill,
            us(r.p50_us),
            us(r.p99_us),
            r.cpu_cores,
            r.dispatch_behind_bytes,
            r.failed
        );
        results.push(r);
    }
    let _ = fs::remove_dir_all(&dir);

    println!("\naims:");
    for r in results.iter().filter(|r| r.name.starts_with("ASYNC 1 KiB")) {
        println!("  {:<20} {:>9.0} msg/s = {:.2} of the 1,000,000 msg/s aim", r.name, r.msgs_per_sec, r.msgs_per_sec / 1e6);
    }
    if let (Some(r), Some(single)) = (results.iter().find(|r| r.name == "SYNC 1 KiB w1"), base.fsyncs.first()) {
        let fraction = r.msgs_per_sec / single.syncs_per_sec;
        println!("  {:<20} {:>9.0} msg/s = {fraction:.2} of the 4 KiB fdatasync rate (one flush per message at best)", r.name, r.msgs_per_sec);
    }
    if let Some(r) = results.iter().find(|r| r.name == "SYNC 1 KiB w64") {
        let fraction = r.mb_per_sec / group_commit_mbps;
        println!(
            "  {:<20} {:>9.1} MB/s = {fraction:.2} of batched fdatasync ({group_commit_mbps:.1} MB/s); aim 0.5 = {:.2} of aim",
            r.name,
            r.mb_per_sec,
            fraction / 0.5
        );
    }

    if let Some(path) = &args.json {
        let json = to_json(&device, &fs_type, cores, args, &base, &results);
        File::create(path).and_then(|mut f| f.write_all(json.as_bytes())).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("\nwrote {}", path.display());
    }
    Ok(())
}

fn to_json(device: &str, fs_type: &str, cores: usize, args: &Args, base: &Baselines, results: &[CaseResult]) -> String {
    let num = |v: Option<f64>| v.filter(|v| v.is_finite()).map_or("null".into(), |v| format!("{v:.3}"));
    let mut out = String::new();
    let _ = write!(
        out,
        "{{\n  \"machine\": {{\"cores\": {cores}, \"filesystem\": \"{fs_type}\", \"device\": \"{}\", \"memcpy_gb_per_sec\": {}, \"mapped_fill_gb_per_sec\": {}, \"write_fill_gb_per_sec\": {}, \"fdatasync\": [",
        device.replace(['"', '\\'], "_"),
        num(Some(base.memcpy_gbps)),
        num(Some(base.mapped_fill_gbps)),
        num(Some(base.write_fill_gbps))
    );
    for (i, f) in base.fsyncs.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(
            out,
            "{sep}{{\"batch_bytes\": {}, \"syncs_per_sec\": {}, \"mb_per_sec\": {}}}",
            f.batch,
            num(Some(f.syncs_per_sec)),
            num(Some(f.mb_per_sec))
        );
    }
    let _ = write!(out, "]}},\n  \"seconds\": {}, \"warmup_seconds\": {}, \"warm_mapped_file\": {},\n  \"cases\": [", args.seconds, args.warmup, args.warm);
    for (i, r) in results.iter().enumerate() {
        let sep = if i == 0 { "\n" } else { ",\n" };
        let _ = write!(
            out,
            "{sep}    {{\"name\": \"{}\", \"record_bytes\": {}, \"msgs_per_sec\": {}, \"mb_per_sec\": {}, \"p50_us\": {}, \"p99_us\": {}, \"cpu_cores\": {}, \"dispatch_behind_bytes\": {}, \"failed\": {}}}",
            r.name,
            r.record_bytes,
            num(Some(r.msgs_per_sec)),
            num(Some(r.mb_per_sec)),
            num(r.p50_us),
            num(r.p99_us),
            num(Some(r.cpu_cores)),
            r.dispatch_behind_bytes,
            r.failed
        );
    }
    out.push_str("\n  ]\n}\n");
    out
}
