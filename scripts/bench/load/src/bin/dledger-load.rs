//! `dledger-load`: the load generator of `scripts/bench.sh`'s DLedger workload (g). One generator
//! for both systems: it talks to the group through `dledger::client::DLedgerClient`, whose wire is
//! that of Java's `DLedgerClient` 0.3.1.2 (`DLedgerClientRpcNettyService`: a header-less JSON
//! remoting request whose body is `JSON.toJSONBytes(request)`, 3 000 ms to answer, the request
//! sent to the leader named by METADATA and once more after NOT_LEADER).
//!
//!   dledger-load append --peers P --pid n0=PID ... --threads 64 --size 1024 --warmup S --duration S --out F
//!       `threads` appenders, each with one append in flight (Java's client is synchronous per
//!       thread: 64 threads keep 64 in flight), for a warm-up and then a measured window: TPS,
//!       latency percentiles, answers other than SUCCESS, CPU seconds and peak RSS of every member.
//!   dledger-load elect --peers P --pid n0=PID ... --out F
//!       One round: waits until every member names the same leader and an append through it
//!       succeeds, waits a random fraction of a heartbeat interval, kills the leader (SIGKILL), and
//!       times until a survivor's METADATA names another leader and until an append is answered
//!       SUCCESS. The caller restarts the killed member.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bench_load::procfs::{core_busy, core_ticks, cpu_ticks, status_kb};
use bytes::Bytes;
use clap::{Args, Parser, Subcommand};
use dledger::client::{ClientError, DLedgerClient};
use dledger::protocol::{AppendEntryResponse, Code};
use dledger::rpc::{PeerClientConfig, RpcError};
use futures::future::join_all;
use serde_json::{json, Value};

#[derive(Parser)]
#[command(about = "scripts/bench.sh's DLedger load generator")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Appends from concurrent clients: throughput, latency, CPU and RSS of the members.
    Append(AppendArgs),
    /// Kills the leader once and times the election of the next.
    Elect(ElectArgs),
}

#[derive(Args)]
struct GroupArgs {
    #[arg(long, default_value = "default")]
    group: String,
    /// `n0-host:port;n1-host:port;...`
    #[arg(long)]
    peers: String,
    /// `id=pid` of a member (repeat for each)
    #[arg(long = "pid", value_parser = parse_pid)]
    pids: Vec<(String, i32)>,
    /// Where the JSON result goes.
    #[arg(long)]
    out: PathBuf,
    /// Seconds to wait for a leader that answers an append before giving up.
    #[arg(long, default_value_t = 90)]
    settle_timeout: u64,
}

#[derive(Args)]
struct AppendArgs {
    #[command(flatten)]
    group: GroupArgs,
    #[arg(long, default_value_t = 64)]
    threads: usize,
    /// Entry body size in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    #[arg(long, default_value_t = 20)]
    duration: u64,
    #[arg(long, default_value_t = 100)]
    clk_tck: u64,
    /// The core the members run on and the generator's (for how busy each was).
    #[arg(long, default_value_t = 0)]
    server_cpu: usize,
    #[arg(long, default_value_t = 1)]
    client_cpu: usize,
}

#[derive(Args)]
struct ElectArgs {
    #[command(flatten)]
    group: GroupArgs,
    /// The kill comes after a random wait of up to this long (the heartbeat interval), so it
    /// lands anywhere between two heartbeats.
    #[arg(long, default_value_t = 2000)]
    jitter_ms: u64,
    /// Give up on a round after this long.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

fn parse_pid(s: &str) -> Result<(String, i32), String> {
    let (id, pid) = s.split_once('=').ok_or_else(|| format!("{s}: expected id=pid"))?;
    Ok((id.to_owned(), pid.parse().map_err(|e| format!("{s}: {e}"))?))
}

fn log(msg: impl AsRef<str>) {
    eprintln!("[dledger-load] {}", msg.as_ref());
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    // One thread: the generator has the client core to itself and 64 appenders need no more.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Append(a) => append(a).await,
            Cmd::Elect(e) => elect(e).await,
        }
    })
}

// ---- answers -------------------------------------------------------------------------------------

fn code_name(code: Code) -> String {
    let name = match code {
        Code::UNKNOWN => "UNKNOWN",
        Code::SUCCESS => "SUCCESS",
        Code::TIMEOUT => "TIMEOUT",
        Code::METADATA_ERROR => "METADATA_ERROR",
        Code::NETWORK_ERROR => "NETWORK_ERROR",
        Code::NOT_LEADER => "NOT_LEADER",
        Code::INCONSISTENT_STATE => "INCONSISTENT_STATE",
        Code::DISK_ERROR => "DISK_ERROR",
        Code::DISK_FULL => "DISK_FULL",
        Code::INTERNAL_ERROR => "INTERNAL_ERROR",
        Code::TERM_CHANGED => "TERM_CHANGED",
        Code::WAIT_QUORUM_ACK_TIMEOUT => "WAIT_QUORUM_ACK_TIMEOUT",
        Code::LEADER_PENDING_FULL => "LEADER_PENDING_FULL",
        Code::LEADER_NOT_READY => "LEADER_NOT_READY",
        Code::LEADER_TRANSFERRING => "LEADER_TRANSFERRING",
        Code::TERM_NOT_READY => "TERM_NOT_READY",
        _ => "",
    };
    if name.is_empty() {
        format!("code {}", code.0)
    } else {
        name.to_owned()
    }
}

/// What a failed append is counted as: the answer's code, or the kind of RPC failure.
fn failure(result: &Result<AppendEntryResponse, ClientError>) -> Option<String> {
    match result {
        Ok(r) if r.base.code == Code::SUCCESS => None,
        Ok(r) => Some(code_name(r.base.code)),
        Err(ClientError::NoLeader { .. }) => Some("no leader named (METADATA_ERROR)".into()),
        Err(ClientError::Rpc { source, .. }) => Some(
            match source {
                RpcError::TooManyInFlight { .. } => "rpc: too many in flight",
                RpcError::Timeout { .. } => "rpc: timeout",
                RpcError::Connection { .. } => "rpc: connection failed",
                RpcError::Refused { .. } => "rpc: refused by the remoting layer",
                RpcError::BadResponse { .. } => "rpc: bad response",
            }
            .into(),
        ),
        Err(e) => Some(format!("client: {e}")),
    }
}

fn body_of(size: usize) -> Bytes {
    // Bytes that look random (base64 and the store do not care, but a reader of the log might).
    let mut x: u32 = 0x9e37_79b9;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b'a' + (x % 26) as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

/// Waits until every member names the same leader and an append through it succeeds.
async fn settle(client: &DLedgerClient, probe: &DLedgerClient, body: &Bytes, timeout: Duration) -> Result<String> {
    let deadline = Instant::now() + timeout;
    let ids: Vec<String> = probe.peers().into_iter().map(|p| p.id).collect();
    let mut last;
    loop {
        let named: Vec<Option<String>> = join_all(ids.iter().map(|id| async move { probe.metadata(id).await.ok().and_then(|m| m.base.leader_id) })).await;
        if let Some(Some(leader)) = named.first() {
            if named.iter().all(|n| n.as_deref() == Some(leader.as_str())) {
                let r = client.append(body.clone()).await;
                match failure(&r) {
                    None => return Ok(leader.clone()),
                    Some(why) => last = format!("append through {leader}: {why}"),
                }
            } else {
                last = format!("the members name {named:?}");
            }
        } else {
            last = format!("the members name {named:?}");
        }
        if Instant::now() > deadline {
            bail!("no settled leader after {timeout:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---- /proc ---------------------------------------------------------------------------------------

struct Snapshot {
    at: Instant,
    members: Vec<Option<u64>>,
    me: Option<u64>,
    server_core: Option<(u64, u64)>,
    client_core: Option<(u64, u64)>,
}

fn snapshot(pids: &[(String, i32)], server_cpu: usize, client_cpu: usize) -> Snapshot {
    Snapshot {
        at: Instant::now(),
        members: pids.iter().map(|(_, p)| cpu_ticks(*p)).collect(),
        me: cpu_ticks(std::process::id() as i32),
        server_core: core_ticks(server_cpu),
        client_core: core_ticks(client_cpu),
    }
}

// ---- append --------------------------------------------------------------------------------------

const WARMUP: u8 = 0;
const MEASURED: u8 = 1;
const STOP: u8 = 2;

#[derive(Default)]
struct TaskStats {
    /// Latencies (µs) of the appends answered SUCCESS within the measured window.
    latency_us: Vec<u32>,
    /// Answers other than SUCCESS within the window, and over the whole run.
    failed: BTreeMap<String, u64>,
    failed_whole_run: BTreeMap<String, u64>,
    ok_whole_run: u64,
    /// Indexes of every append answered SUCCESS (each must be distinct).
    indexes: Vec<i64>,
}

async fn appender(client: Arc<DLedgerClient>, body: Bytes, phase: Arc<AtomicU8>, ok_measured: Arc<AtomicU64>) -> TaskStats {
    let mut st = TaskStats::default();
    loop {
        if phase.load(Ordering::Relaxed) == STOP {
            return st;
        }
        let started = Instant::now();
        let result = client.append(body.clone()).await;
        let took = started.elapsed();
        let measured = phase.load(Ordering::Relaxed) == MEASURED;
        match failure(&result) {
            None => {
                st.ok_whole_run += 1;
                if let Ok(r) = &result {
                    st.indexes.push(r.index);
                }
                if measured {
                    st.latency_us.push(took.as_micros().min(u128::from(u32::MAX)) as u32);
                    ok_measured.fetch_add(1, Ordering::Relaxed);
                }
            }
            Some(why) => {
                *st.failed_whole_run.entry(why.clone()).or_default() += 1;
                if measured {
                    *st.failed.entry(why).or_default() += 1;
                }
                // a leader gone or full: do not spin
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

fn percentile(sorted: &[u32], p: f64) -> Value {
    if sorted.is_empty() {
        return Value::Null;
    }
    // nearest rank
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    json!(f64::from(sorted[rank.min(sorted.len()) - 1]) / 1000.0)
}

async fn append(a: AppendArgs) -> Result<()> {
    let g = &a.group;
    let client = Arc::new(DLedgerClient::new(&g.group, &g.peers)?);
    let probe = DLedgerClient::with_config(&g.group, &g.peers, PeerClientConfig { timeout: Duration::from_millis(1_000), ..Default::default() })?;
    let body = body_of(a.size);
    let leader = settle(&client, &probe, &body, Duration::from_secs(g.settle_timeout)).await?;
    log(format!("leader {leader}; {} appenders of {} B: warm-up {} s, measured {} s", a.threads, a.size, a.warmup, a.duration));

    let phase = Arc::new(AtomicU8::new(WARMUP));
    let ok_measured = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..a.threads).map(|_| tokio::spawn(appender(client.clone(), body.clone(), phase.clone(), ok_measured.clone()))).collect();

    tokio::time::sleep(Duration::from_secs(a.warmup)).await;
    let start = snapshot(&g.pids, a.server_cpu, a.client_cpu);
    phase.store(MEASURED, Ordering::Relaxed);
    let mut peak_anon: Vec<u64> = vec![0; g.pids.len()];
    let window = Duration::from_secs(a.duration);
    let mut last_print = (Instant::now(), 0u64);
    while start.at.elapsed() < window {
        tokio::time::sleep(Duration::from_millis(500).min(window.saturating_sub(start.at.elapsed()))).await;
        for (peak, (_, pid)) in peak_anon.iter_mut().zip(&g.pids) {
            *peak = (*peak).max(status_kb(*pid, "RssAnon:").unwrap_or(0));
        }
        if last_print.0.elapsed() >= Duration::from_secs(5) {
            let n = ok_measured.load(Ordering::Relaxed);
            let tps = (n - last_print.1) as f64 / last_print.0.elapsed().as_secs_f64();
            log(format!("{:>4.0} s  {:>9.0} appends/s", start.at.elapsed().as_secs_f64(), tps));
            last_print = (Instant::now(), n);
        }
    }
    let end = snapshot(&g.pids, a.server_cpu, a.client_cpu);
    phase.store(STOP, Ordering::Relaxed);
    let vmhwm: Vec<Option<u64>> = g.pids.iter().map(|(_, p)| status_kb(*p, "VmHWM:")).collect();
    let mut all = TaskStats::default();
    for t in tasks {
        let st = t.await.context("an appender panicked")?;
        all.latency_us.extend(st.latency_us);
        for (k, v) in st.failed {
            *all.failed.entry(k).or_default() += v;
        }
        for (k, v) in st.failed_whole_run {
            *all.failed_whole_run.entry(k).or_default() += v;
        }
        all.ok_whole_run += st.ok_whole_run;
        all.indexes.extend(st.indexes);
    }
    let secs = end.at.duration_since(start.at).as_secs_f64();
    let ok = all.latency_us.len() as u64;
    all.latency_us.sort_unstable();
    all.indexes.sort_unstable();
    let distinct = all.indexes.windows(2).all(|w| w[0] != w[1]);
    let leader_after = client.leader_id();

    // the last entry appended, read back through the leader: its body is ours
    let mut readback = Value::Null;
    if let Some(&last) = all.indexes.last() {
        readback = match client.get(last).await {
            Ok(r) if r.base.code == Code::SUCCESS => json!(r.entries.first().is_some_and(|e| e.body == body)),
            Ok(r) => json!(code_name(r.base.code)),
            Err(e) => json!(e.to_string()),
        };
    }

    let tck = a.clk_tck as f64;
    let mut members = serde_json::Map::new();
    let mut group_cpu = 0.0;
    for (i, (id, pid)) in g.pids.iter().enumerate() {
        let cpu = match (start.members[i], end.members[i]) {
            (Some(x), Some(y)) => Some((y - x) as f64 / tck),
            _ => None,
        };
        group_cpu += cpu.unwrap_or(0.0);
        members.insert(
            id.clone(),
            json!({
                "pid": pid,
                "leader": leader_after.as_deref() == Some(id.as_str()),
                "cpu_s": cpu,
                "cpu_util": cpu.map(|c| c / secs),
                "cpu_s_per_million": cpu.filter(|_| ok > 0).map(|c| c / ok as f64 * 1e6),
                "vmhwm_kb": vmhwm[i],
                "peak_anon_kb": peak_anon[i],
            }),
        );
    }
    let me_cpu = match (start.me, end.me) {
        (Some(x), Some(y)) => Some((y - x) as f64 / tck),
        _ => None,
    };
    let failed_n: u64 = all.failed.values().sum();
    let mut invalid_because: Vec<String> = Vec::new();
    if ok == 0 {
        invalid_because.push("no append answered SUCCESS in the window".into());
    }
    if !distinct {
        invalid_because.push("two appends answered SUCCESS with the same index".into());
    }
    if failed_n > 0 {
        invalid_because.push(format!("{failed_n} appends failed in the window: {:?}", all.failed));
    }
    if readback != json!(true) {
        invalid_because.push(format!("the last entry read back through the leader: {readback}"));
    }
    let result = json!({
        "valid": invalid_because.is_empty(),
        "invalid_because": invalid_because,
        "leader": leader,
        "leader_at_end": leader_after,
        "threads": a.threads,
        "size": a.size,
        "window_s": secs,
        "appends_ok": ok,
        "append_tps": ok as f64 / secs,
        "latency_ms": {
            "p50": percentile(&all.latency_us, 50.0),
            "p99": percentile(&all.latency_us, 99.0),
            "p999": percentile(&all.latency_us, 99.9),
            "max": percentile(&all.latency_us, 100.0),
            "mean": if ok > 0 { json!(all.latency_us.iter().map(|&x| f64::from(x)).sum::<f64>() / ok as f64 / 1000.0) } else { Value::Null },
        },
        "appends_failed": failed_n,
        "errors": all.failed,
        "appends_ok_whole_run": all.ok_whole_run,
        "errors_whole_run": all.failed_whole_run,
        "indexes_distinct": distinct,
        "last_entry_read_back": readback,
        "members": members,
        "group_cpu_s": group_cpu,
        "group_cpu_util": group_cpu / secs,
        "group_cpu_s_per_million": if ok > 0 { json!(group_cpu / ok as f64 * 1e6) } else { Value::Null },
        "loadgen_cpu_util": me_cpu.map(|c| c / secs),
        "server_core_busy": core_busy(start.server_core, end.server_core),
        "client_core_busy": core_busy(start.client_core, end.client_core),
    });
    std::fs::write(&g.out, serde_json::to_vec_pretty(&result)?)?;
    log(format!(
        "{:.0} appends/s, p50 {} ms, p99 {} ms, p99.9 {} ms, {} failed; group CPU {:.1} s/1M appends",
        ok as f64 / secs,
        result["latency_ms"]["p50"],
        result["latency_ms"]["p99"],
        result["latency_ms"]["p999"],
        failed_n,
        result["group_cpu_s_per_million"].as_f64().unwrap_or(f64::NAN)
    ));
    client.shutdown();
    probe.shutdown();
    Ok(())
}

// ---- elect ---------------------------------------------------------------------------------------

async fn elect(e: ElectArgs) -> Result<()> {
    let g = &e.group;
    let client = DLedgerClient::new(&g.group, &g.peers)?;
    let probe = DLedgerClient::with_config(&g.group, &g.peers, PeerClientConfig { timeout: Duration::from_millis(1_000), ..Default::default() })?;
    let body = body_of(1024);
    let old = settle(&client, &probe, &body, Duration::from_secs(g.settle_timeout)).await?;
    let pid = g.pids.iter().find(|(id, _)| *id == old).map(|(_, p)| *p).with_context(|| format!("no --pid for the leader {old}"))?;
    let jitter = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos() as u64) % e.jitter_ms.max(1);
    tokio::time::sleep(Duration::from_millis(jitter)).await;
    let survivors: Vec<String> = probe.peers().into_iter().map(|p| p.id).filter(|id| *id != old).collect();

    let t0 = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).with_context(|| format!("kill {pid}"))?;
    let timeout = Duration::from_secs(e.timeout);

    // a survivor's METADATA names another leader
    let by_metadata = async {
        while t0.elapsed() < timeout {
            let named = join_all(survivors.iter().map(|id| async { (id.clone(), probe.metadata(id).await.ok().and_then(|m| m.base.leader_id)) })).await;
            if let Some((by, Some(leader))) = named.into_iter().find(|(_, l)| l.as_ref().is_some_and(|l| *l != old)) {
                return Some((t0.elapsed(), leader, by));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    };
    // an append is answered SUCCESS (the client, which knew the old leader, finds the new one)
    let by_append = async {
        let mut answers: BTreeMap<String, u64> = BTreeMap::new();
        while t0.elapsed() < timeout {
            let r = client.append(body.clone()).await;
            match failure(&r) {
                None => return (Some((t0.elapsed(), client.leader_id())), answers),
                Some(why) => *answers.entry(why).or_default() += 1,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (None, answers)
    };
    let (meta, (appended, answers)) = tokio::join!(by_metadata, by_append);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let result = json!({
        "old_leader": old,
        "killed_pid": pid,
        "jitter_ms": jitter,
        "metadata_ms": meta.as_ref().map(|m| ms(m.0)),
        "new_leader_by_metadata": meta.as_ref().map(|m| m.1.clone()),
        "metadata_from": meta.as_ref().map(|m| m.2.clone()),
        "append_ms": appended.as_ref().map(|a| ms(a.0)),
        "new_leader_by_append": appended.as_ref().and_then(|a| a.1.clone()),
        "failed_appends_before": answers,
        "valid": meta.is_some() && appended.is_some(),
    });
    std::fs::write(&g.out, serde_json::to_vec_pretty(&result)?)?;
    log(format!(
        "killed {old} (pid {pid}, after {jitter} ms): METADATA names {} after {} ms, append SUCCESS through {} after {} ms",
        result["new_leader_by_metadata"], result["metadata_ms"], result["new_leader_by_append"], result["append_ms"]
    ));
    client.shutdown();
    probe.shutdown();
    Ok(())
}
